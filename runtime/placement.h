/* runtime/placement.h: binding backend threads near their device (internal;
 * runtime.c and placement.c).
 *
 * A backend calls cubert_backend_config.place_thread(place_ctx, index) at
 * the start of every thread it runs for its device `index` (the host
 * backend: each stream's worker). The runtime passes cb_place_thread and a
 * context naming (runtime, backend); the hook maps the backend's index to
 * the runtime's and binds the calling thread to the device's local CPUs
 * (cubert_topology_bind_thread) when that means something: the device has a
 * PCI object on this machine, with a local NUMA node, on a machine of
 * several NUMA nodes. docs/topology.md ("Placement") says what is bound.
 *
 * Cost: cb_placement_start() only copies the devices' bus ids; the topology
 * (an hwloc load) is made on the first hook call, and only when some device
 * has a bus id of this machine (not one from a simulated node, and no
 * $CUBERT_TOPOLOGY file standing for the machine). It is made with
 * cubert_topology_create_from() from those bus ids: no runtime call, so no
 * device lock is taken, which matters because the hook may run while the
 * runtime holds a device lock (stream creation). The hook never calls back
 * into a backend or the runtime; it takes only the placement's own mutex,
 * and only until the topology is settled.
 *
 * Ownership: the runtime owns its cb_placement (cb_placement_new at
 * creation, cb_placement_destroy after every backend is closed, so no
 * thread can still be in the hook). */
#ifndef CUBERT_RUNTIME_PLACEMENT_H
#define CUBERT_RUNTIME_PLACEMENT_H

#include "cubert/cubert.h"

typedef struct cb_placement cb_placement;

/* A placement that binds nothing until cb_placement_start(); NULL when out
 * of memory (then there is no placement, which is not an error). */
cb_placement *cb_placement_new(void);

/* The place_ctx for backend number `backend` of the runtime, whose devices
 * start at runtime index `first_device`; NULL when `p` is NULL. */
void *cb_placement_ctx(cb_placement *p, int backend, int first_device);

/* The place_thread hook (cubert_backend_config). */
void cb_place_thread(void *ctx, int backend_device_index);

/* After every device of `runtime` is open: records which devices could be
 * placed (their bus ids). Cheap; binds nothing by itself. */
void cb_placement_start(cb_placement *p, cubert_runtime *runtime);

/* Threads the hook bound so far (tests, diagnostics). */
int cb_placement_bound(const cb_placement *p);

/* NULL is fine. Call when no backend thread can run the hook any more. */
void cb_placement_destroy(cb_placement *p);

#endif
