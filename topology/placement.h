/* topology/placement.h: binding backend threads and host memory near their
 * device (internal; lib/parts.c hands these to the runtime as
 * runtime/parts.h hooks; placement.c and white-box tests).
 *
 * A backend calls cubert_backend_config.place_thread(place_ctx, index) at
 * the start of every thread it runs for its device `index` (the host
 * backend: each stream's worker), and place_alloc/place_free for host
 * memory it wants near the device (the HIP backend: its pinned staging
 * buffers). The runtime passes cb_place_thread, cb_place_alloc,
 * cb_place_free and a context naming (runtime, backend); the hooks map the
 * backend's index to the runtime's and bind the calling thread to the
 * device's local CPUs (cubert_topology_bind_thread), or allocate on its
 * local NUMA node(s) (cubert_topology_alloc_local), when that means
 * something: the device has a PCI object on this machine, with a local NUMA
 * node, on a machine of several NUMA nodes. Otherwise place_thread does
 * nothing and place_alloc returns NULL. docs/topology.md ("Placement") says
 * what is bound.
 *
 * Cost: cb_placement_start_ids() only copies the devices' bus ids; the topology
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
#ifndef CUBERT_TOPOLOGY_PLACEMENT_H
#define CUBERT_TOPOLOGY_PLACEMENT_H

#include <stddef.h>

#include "cubert/cubert.h"
#include "cubert/topology.h"

typedef struct cb_placement cb_placement;

/* A placement that binds nothing until cb_placement_start_ids(); NULL when out
 * of memory (then there is no placement, which is not an error). */
cb_placement *cb_placement_new(void);

/* The place_ctx for backend number `backend` of the runtime, whose devices
 * start at runtime index `first_device`; NULL when `p` is NULL. */
void *cb_placement_ctx(cb_placement *p, int backend, int first_device);

/* The hooks of cubert_backend_config. cb_place_alloc returns NULL unless
 * the memory is bound near the device; cb_place_free takes only memory from
 * cb_place_alloc (NULL is fine). */
void cb_place_thread(void *ctx, int backend_device_index);
void *cb_place_alloc(void *ctx, int backend_device_index, size_t size);
void cb_place_free(void *ctx, void *ptr, size_t size);

/* After every device of the runtime is open (the runtime calls it, through
 * runtime/parts.h): records which devices could be placed, `bus_ids[i]` for
 * runtime device i, NULL or "" for a device that is not to be placed (no
 * bus id, or one from a simulated node). Copied. Cheap; binds nothing by
 * itself. Tests call it directly, with devices no backend has. */
void cb_placement_start_ids(cb_placement *p, const char *const *bus_ids, int count);

/* Threads the hook bound and allocations it bound so far (tests,
 * diagnostics). */
int cb_placement_bound(const cb_placement *p);
int cb_placement_allocated(const cb_placement *p);

/* The topology the hooks use once settled (its device k is the k-th placed
 * device, in runtime order); NULL before, or when there is nothing to bind.
 * Owned by the placement. */
const cubert_topology *cb_placement_topology(const cb_placement *p);

/* NULL is fine. Call when no backend thread can run the hook any more. */
void cb_placement_destroy(cb_placement *p);

#endif
