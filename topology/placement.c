/* topology/placement.c: the placement hooks the runtime gives its backends
 * (place_thread, place_alloc, place_free; placement.h). */
#include "base/alloc.h"
#include "topology/placement.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/str.h"
#include "cubert/topology.h"
#include "runtime/fail.h"
#include "topology/internal.h"

#define CB_PLACEMENT_BACKENDS 4 /* as cubert_runtime.backends */

typedef struct cb_place_slot {
  cb_placement *owner;
  int first_device;             /* runtime index of the backend's device 0 */
} cb_place_slot;

enum { PLACE_IDLE = 0, PLACE_PENDING, PLACE_READY, PLACE_NONE };

struct cb_placement {
  cb_place_slot slots[CB_PLACEMENT_BACKENDS];
  _Atomic int state;            /* PLACE_*: IDLE until start; PENDING: bus ids
                                   known, topology not made yet; READY: made;
                                   NONE: nothing to bind */
  cubert_topology *_Atomic topology; /* published once READY */
  _Atomic int bound;
  _Atomic int allocated;
  pthread_mutex_t lock;         /* making the topology, once */
  /* from cb_placement_start_ids: runtime device -> topology index, -1 when the
   * device has no bus id of this machine */
  int ndevices;
  int *map;
  char **bus_ids;               /* the topology's devices */
  int nbus_ids;
};

cb_placement *cb_placement_new(void) {
  cb_placement *p = cb_calloc(1, sizeof *p);
  if (!p) return NULL;
  if (pthread_mutex_init(&p->lock, NULL)) {
    cb_free(p);
    return NULL;
  }
  for (int b = 0; b < CB_PLACEMENT_BACKENDS; b++) p->slots[b].owner = p;
  atomic_init(&p->state, PLACE_IDLE);
  atomic_init(&p->topology, NULL);
  atomic_init(&p->bound, 0);
  atomic_init(&p->allocated, 0);
  return p;
}

void *cb_placement_ctx(cb_placement *p, int backend, int first_device) {
  if (!p || backend < 0 || backend >= CB_PLACEMENT_BACKENDS) return NULL;
  p->slots[backend].first_device = first_device;
  return &p->slots[backend];
}

/* Whether binding a thread near some device of `t` would do anything. */
static bool any_bindable(const cubert_topology *t) {
  for (int i = 0; i < cubert_topology_device_count(t); i++) {
    cubert_topology_device d;
    if (cubert_topology_device_info(t, i, &d) == CUBERT_OK && d.found && !d.simulated &&
        d.numa_count > 0 && d.machine_numa_nodes > 1)
      return true;
  }
  return false;
}

void cb_placement_start_ids(cb_placement *p, const char *const *bus_ids, int count) {
  if (!p || atomic_load(&p->state) != PLACE_IDLE) return;
  int state = PLACE_NONE;
  if (count > 0 && bus_ids) {
    p->map = cb_malloc((size_t)count * sizeof *p->map);
    p->bus_ids = cb_calloc((size_t)count, sizeof *p->bus_ids);
    if (p->map && p->bus_ids) {
      p->ndevices = count;
      for (int i = 0; i < count; i++) {
        p->map[i] = -1;
        if (!bus_ids[i] || !bus_ids[i][0]) continue;
        if (!(p->bus_ids[p->nbus_ids] = cb_strdup(bus_ids[i]))) continue;
        p->map[i] = p->nbus_ids++;
      }
      if (p->nbus_ids > 0) state = PLACE_PENDING;
    }
  }
  atomic_store_explicit(&p->state, state, memory_order_release);
}

/* Makes the topology once (any thread, under p->lock). */
static cubert_topology *settle(cb_placement *p) {
  pthread_mutex_lock(&p->lock);
  cubert_topology *t = atomic_load_explicit(&p->topology, memory_order_acquire);
  if (!t && atomic_load_explicit(&p->state, memory_order_acquire) == PLACE_PENDING) {
    cubert_topology_source src;
    cubert_topology_source_init(&src);
    src.bus_ids = (const char *const *)p->bus_ids;
    src.device_count = p->nbus_ids;
    int state = PLACE_NONE;
    if (cubert_topology_create_from(&src, &t) == CUBERT_OK) {
      if (any_bindable(t)) {
        atomic_store_explicit(&p->topology, t, memory_order_release);
        state = PLACE_READY;
      } else {
        cubert_topology_destroy(t); /* one NUMA node, or no locality: nothing to bind */
        t = NULL;
      }
    } else {
      t = NULL;
    }
    atomic_store_explicit(&p->state, state, memory_order_release);
  }
  pthread_mutex_unlock(&p->lock);
  return t;
}

/* The topology and its device index for the slot's device, when the
 * placement has one for it (settling the topology on first use); NULL when
 * nothing is to be placed. */
static cubert_topology *lookup(cb_place_slot *slot, int backend_device_index, int *index) {
  if (!slot || backend_device_index < 0) return NULL;
  cb_placement *p = slot->owner;
  int state = atomic_load_explicit(&p->state, memory_order_acquire);
  if (state == PLACE_IDLE || state == PLACE_NONE) return NULL;
  int device = slot->first_device + backend_device_index;
  if (device >= p->ndevices || p->map[device] < 0) return NULL;
  cubert_topology *t = atomic_load_explicit(&p->topology, memory_order_acquire);
  if (!t && !(t = settle(p))) return NULL;
  *index = p->map[device];
  return t;
}

void cb_place_thread(void *ctx, int backend_device_index) {
  int index;
  cubert_topology *t = lookup(ctx, backend_device_index, &index);
  if (!t) return;
  cubert_placement how;
  /* A failed bind leaves the thread where it was; nobody is there to be
   * told (the error stays in this thread's last error). */
  if (cubert_topology_bind_thread(t, index, &how) == CUBERT_OK && how == CUBERT_PLACEMENT_BOUND)
    atomic_fetch_add_explicit(&((cb_place_slot *)ctx)->owner->bound, 1, memory_order_relaxed);
}

void *cb_place_alloc(void *ctx, int backend_device_index, size_t size) {
  int index;
  cubert_topology *t = lookup(ctx, backend_device_index, &index);
  cubert_topology_device d;
  /* Only where the memory would be bound: otherwise the backend's own
   * allocation is as good, and it does not cost an allocation here. */
  if (!t || !size || cubert_topology_device_info(t, index, &d) != CUBERT_OK || !d.found ||
      d.simulated || d.numa_count <= 0 || d.machine_numa_nodes <= 1)
    return NULL;
  void *mem = NULL;
  cubert_placement how;
  /* a failed placement falls back to the backend's own allocation: its
   * error is dropped here, never recorded for the caller's thread */
  cb_str why = {0};
  cubert_status st = cb_topology_alloc_near(t, index, size, &mem, &how, &why);
  cb_str_free(&why);
  if (st != CUBERT_OK) return NULL;
  if (how != CUBERT_PLACEMENT_BOUND) { /* not expected after the check above */
    cubert_topology_free_local(t, index, mem, size);
    return NULL;
  }
  atomic_fetch_add_explicit(&((cb_place_slot *)ctx)->owner->allocated, 1, memory_order_relaxed);
  return mem;
}

void cb_place_free(void *ctx, void *ptr, size_t size) {
  cb_place_slot *slot = ctx;
  if (!slot || !ptr) return;
  /* Memory from cb_place_alloc exists only once the topology is published,
   * and the topology outlives every backend. Its devices all sit on one
   * machine (this one), so any of them frees through the same hwloc
   * topology. */
  cubert_topology *t = atomic_load_explicit(&slot->owner->topology, memory_order_acquire);
  if (t) cubert_topology_free_local(t, 0, ptr, size);
}

int cb_placement_bound(const cb_placement *p) {
  return p ? atomic_load_explicit(&((cb_placement *)p)->bound, memory_order_relaxed) : 0;
}

int cb_placement_allocated(const cb_placement *p) {
  return p ? atomic_load_explicit(&((cb_placement *)p)->allocated, memory_order_relaxed) : 0;
}

const cubert_topology *cb_placement_topology(const cb_placement *p) {
  return p ? atomic_load_explicit(&((cb_placement *)p)->topology, memory_order_acquire) : NULL;
}

void cb_placement_destroy(cb_placement *p) {
  if (!p) return;
  cubert_topology_destroy(atomic_load(&p->topology));
  for (int i = 0; i < p->nbus_ids; i++) cb_free(p->bus_ids[i]);
  cb_free(p->bus_ids);
  cb_free(p->map);
  pthread_mutex_destroy(&p->lock);
  cb_free(p);
}
