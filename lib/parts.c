/* lib/parts.c: libcubert put together. The core (runtime/) is handed the
 * layers above it here (runtime/parts.h): the host and HIP backends, the
 * fault-injection decorator, the backends' own settings (lib/settings.c:
 * the host backend's, with a simulated node's bus ids), the topology and
 * the placement hooks. lib/ is the only library folder that sees every
 * layer's headers; docs/architecture.md draws them. */
#include "backends/backend.h"
#include "cubert/faultinj.h"
#include "cubert/topology.h"
#include "faultinj/decorator.h"
#include "faultinj/injector.h"
#include "lib/settings.h"
#include "runtime/parts.h"
#include "topology/placement.h"

static const cb_runtime_parts cubert_parts = {
    .backends = {cubert_backend_hip, cubert_backend_host}, /* GPUs first (runtime.c) */
    .nbackends = 2,
    .faults_new = cb_fi_state_new,
    .faults_free = cb_fi_state_free,
    .faults_configure = cb_fi_state_configure,
    .faults_set_pair_classifier = cb_fi_state_set_pair_classifier,
    .faults_unmatched = cb_fi_state_unmatched,
    .faults_ops = cb_faultinj_ops,
    .faults_open = cb_faultinj_open,
    .settings_new = cb_settings_new,
    .settings_for = cb_settings_for,
    .settings_explain = cb_settings_explain,
    .settings_bus_ids_made_up = cb_settings_bus_ids_made_up,
    .settings_free = cb_settings_free,
    .topology_create = cubert_topology_create,
    .topology_destroy = cubert_topology_destroy,
    .topology_pair_name = cubert_topology_pair_name,
    .placement_new = cb_placement_new,
    .placement_ctx = cb_placement_ctx,
    .place_thread = cb_place_thread,
    .place_alloc = cb_place_alloc,
    .place_free = cb_place_free,
    .placement_start = cb_placement_start_ids,
    .placement_destroy = cb_placement_destroy,
};

cubert_status cubert_runtime_create(const cubert_runtime_options *options, cubert_runtime **runtime) {
  return cb_runtime_create(&cubert_parts, options, runtime);
}
