/* runtime/parts.h: what the core is handed (internal).
 *
 * The core (runtime/) calls no backend, fault-injection or topology
 * function by name: the layers above it are handed to it in a
 * cb_runtime_parts table when a runtime is created (lib/parts.c fills the
 * one libcubert uses; tests may pass their own). A NULL member means "not
 * there": that part is skipped. The table must outlive every runtime made
 * with it (libcubert's is static). docs/architecture.md draws the layers. */
#ifndef CUBERT_RUNTIME_PARTS_H
#define CUBERT_RUNTIME_PARTS_H

#include <stdbool.h>
#include <stddef.h>

#include "backends/backend.h"
#include "base/str.h"
#include "cubert/cubert.h"
#include "cubert/faultinj.h"

struct cubert_topology;
struct cb_backend_settings;
struct cb_fi_state;
struct cb_placement;

#define CB_RUNTIME_MAX_BACKENDS 4

typedef struct cb_runtime_parts {
  /* The backends, GPU backends first: with no backend list, the runtime
   * opens them in this order and the host backend only when no other
   * backend found a device; with a list, in the list's order. An entry
   * returning NULL is a backend that was not built. */
  const cubert_backend_ops *(*backends[CB_RUNTIME_MAX_BACKENDS])(void);
  int nbackends;

  /* Fault injection (faultinj/injector.h): each runtime's own state (its
   * rules, log and pair classifier: made at create, freed at destroy,
   * configured from the `faults` option or $CUBERT_FAULTS), the rules that
   * selected nothing (said at destroy), and the decorator every backend is
   * opened through with that state. */
  struct cb_fi_state *(*faults_new)(void);
  void (*faults_free)(struct cb_fi_state *state);
  cubert_status (*faults_configure)(struct cb_fi_state *state, const char *text, cubert_faultinj_diag *diag);
  void (*faults_set_pair_classifier)(struct cb_fi_state *state, cubert_faultinj_pair_classifier fn, void *ctx);
  size_t (*faults_unmatched)(struct cb_fi_state *state, bool from_env_only, char *text, size_t capacity);
  const cubert_backend_ops *(*faults_ops)(void);
  cubert_status (*faults_open)(const cubert_backend_ops *inner, struct cb_fi_state *state, int device_base,
                               const cubert_backend_config *config, void **backend, int *count,
                               cubert_berr *err);

  /* The backends' own settings, each one's cubert_backend_config.options,
   * read before any backend is opened (whichever are opened then) from the
   * runtime's options (complete: zero beyond the caller's struct_size) and
   * the environment. libcubert's (lib/settings.h) are the host backend's:
   * host_devices, host_memory, host_peer_deny, the CUBERT_HOST_* variables
   * and a simulated node's bus ids; the core knows none of them.
   * settings_new refuses with a status and the whole message a user sees
   * appended to `why`, leaving nothing to free; the runtime keeps what it
   * made until destroy (settings_free). settings_for: what backend `name`
   * is opened with (borrowed), or NULL. settings_explain: backend `name`
   * refused to open saying `message`; appends to `why` where a setting it
   * names came from. settings_bus_ids_made_up: whether the PCI bus ids of
   * backend `name`'s devices are made up (a simulated node's), so the
   * placement is not given them. NULL settings_new: every backend is opened
   * with NULL options (its defaults) and the others are not called. */
  cubert_status (*settings_new)(const cubert_runtime_options *options, struct cb_backend_settings **settings,
                                cb_str *why);
  const void *(*settings_for)(const struct cb_backend_settings *settings, const char *name);
  void (*settings_explain)(const struct cb_backend_settings *settings, const char *name, const char *message,
                           cb_str *why);
  bool (*settings_bus_ids_made_up)(const struct cb_backend_settings *settings, const char *name);
  void (*settings_free)(struct cb_backend_settings *settings);

  /* The topology, for fault rules filtered by pair class. */
  cubert_status (*topology_create)(cubert_runtime *runtime, const char *xml_path,
                                   struct cubert_topology **topology);
  void (*topology_destroy)(struct cubert_topology *topology);
  const char *(*topology_pair_name)(const struct cubert_topology *topology, int a, int b);

  /* Placement of backend threads and host memory (topology/placement.h). */
  struct cb_placement *(*placement_new)(void);
  void *(*placement_ctx)(struct cb_placement *p, int backend, int first_device);
  void (*place_thread)(void *ctx, int backend_device_index);
  void *(*place_alloc)(void *ctx, int backend_device_index, size_t size);
  void (*place_free)(void *ctx, void *ptr, size_t size);
  void (*placement_start)(struct cb_placement *p, const char *const *bus_ids, int count);
  void (*placement_destroy)(struct cb_placement *p);
} cb_runtime_parts;

/* cubert_runtime_create() with the parts to use (lib/parts.c calls it): the
 * core's half of that public entry point, so it records the thread's last
 * error (from the cb_errb its helpers fill) when it refuses. */
cubert_status cb_runtime_create(const cb_runtime_parts *parts, const cubert_runtime_options *options,
                                cubert_runtime **runtime);

#endif
