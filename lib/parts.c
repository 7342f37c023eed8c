/* lib/parts.c: libcubert put together. The core (runtime/) is handed the
 * layers above it here (runtime/parts.h): the host and HIP backends, the
 * fault-injection decorator, the simulated nodes, the topology and the
 * placement hooks. The only library file that sees every layer's headers;
 * docs/architecture.md draws them. */
#include "backends/backend.h"
#include "cubert/faultinj.h"
#include "cubert/topology.h"
#include "faultinj/decorator.h"
#include "faultinj/injector.h"
#include "runtime/parts.h"
#include "topology/host_node.h"
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
    .node_bus_ids = cb_host_node_bus_ids,
    .node_bus_ids_free = cb_host_node_free,
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
