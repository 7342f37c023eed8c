/* runtime/device.c: one device: its allocation records and their
 * references, its lock and loss, a backend failure made into a failure, and
 * teardown. The rest of a device's server lives beside it: stream.c
 * (streams and cross-stream order), work.c (work records), replay.c
 * (asynchronous failures replayed over the records), sync.c and timer.c. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/internal.h"

/* ------------------------------------------------------------ allocations */

void cb_alloc_free(cb_alloc *a) {
  cb_device *dev = a->dev;
  /* first: an importer's unsettled verdicts go into the cell under the
   * ledger's lock (xshare.c), which may be `sh`'s */
  if (a->xshare) cb_xshare_release(a);
  cb_shared *sh = atomic_load(&a->shared);
  if (sh) {
    cb_ledger_free(&sh->ledger);
    pthread_mutex_destroy(&sh->lock);
    cb_free(sh);
  }
  cb_ledger_free(&a->ledger);
  cb_free(a->readers);
  if (!a->orphan) { /* an orphan's memory and slot went with its runtime */
    cb_block_free(dev, &a->block);
    dev->slots[a->slot] = NULL;
    if (dev->free_slots) dev->free_slots[dev->nfree++] = a->slot;
  }
  if (!a->orphan && dev->nspare < CB_SPARE_ALLOCS && !atomic_load(&dev->gone)) {
    a->next_grave = dev->spare; /* under dev->lock: kept for alloc_new (memory.c), with its device reference */
    dev->spare = a;
    dev->nspare++;
  } else {
    cb_free(a);
    cb_device_unref(dev); /* never the last while the runtime lives */
  }
}

cb_alloc *cb_alloc_record(cb_device *dev) {
  cb_alloc *a = dev->spare;
  if (!a) {
    if ((a = cb_calloc(1, sizeof *a))) {
      a->dev = dev;
      cb_device_ref(dev); /* dropped when the record is freed (alloc_free) */
    }
    return a;
  }
  dev->spare = a->next_grave;
  dev->nspare--;
  memset(a, 0, sizeof *a);
  a->dev = dev; /* the reference it kept */
  return a;
}

void cb_device_ref(cb_device *dev) { atomic_fetch_add(&dev->refs, 1); }

void cb_device_unref(cb_device *dev) {
  if (atomic_fetch_sub(&dev->refs, 1) != 1) return;
  pthread_mutex_destroy(&dev->lock);
  cb_free(dev);
}

cubert_status cb_check_runtime(cb_errb *eb, const char *fn, const char *what, const cb_device *dev,
                               const cb_alloc *a) {
  if (atomic_load(&a->dev->gone))
    return cb_errb_set(eb, CUBERT_ERR_EXPIRED,
                       "%s: %s (memory %llu of device %d, %s) belongs to a runtime that was destroyed",
                       fn, what, (unsigned long long)a->id, a->dev->index, a->dev->info.name);
  if (a->dev->rt != dev->rt)
    return cb_errb_set(eb, CUBERT_ERR_WRONG_DEVICE,
                       "%s: %s (memory %llu) belongs to device %d (%s) of another runtime; the client "
                       "is on device %d (%s) of this one",
                       fn, what, (unsigned long long)a->id, a->dev->index, a->dev->info.name, dev->index,
                       dev->info.name);
  return CUBERT_OK;
}

void cb_device_collect(cb_device *dev) {
  cb_alloc *g = atomic_exchange(&dev->grave, NULL);
  while (g) {
    cb_alloc *next = g->next_grave;
    cb_alloc_free(g);
    g = next;
  }
}

void cb_alloc_ref(cb_alloc *a, uint64_t what) { atomic_fetch_add(&a->refs, what); }

void cb_alloc_unref(cb_alloc *a, uint64_t what, cb_device *held) {
  if (atomic_fetch_sub(&a->refs, what) == what) cb_alloc_last_ref(a, held);
}

void cb_alloc_last_ref(cb_alloc *a, cb_device *held) {
  if (a->host) { /* a host buffer's ledger: no slot, no device lock */
    cb_host_buffer_free(a);
    return;
  }
  cb_device *dev = a->dev;
  if (a->orphan) { /* its device is only a record now: nothing to lock */
    cb_alloc_free(a);
    return;
  }
  /* read before the push: once in the graveyard, another thread's collect
   * may free or reuse the record */
  bool pooled = cb_pool_sliced(&a->block);
  cb_alloc *top = atomic_load(&dev->grave);
  do {
    a->next_grave = top;
  } while (!atomic_compare_exchange_weak(&dev->grave, &top, a));
  if (held == dev) {
    cb_device_collect(dev);
  } else if (!held && !pooled) {
    /* A pooled size (a sliced pool's block) waits in the graveyard for the
     * device's next locked call, which collects first (cb_device_enter,
     * cubert_memory_usage, weak upgrades, teardown): its memory stays the
     * pool's either way, so a free of one costs no lock round trip. Larger
     * blocks go back at once. */
    pthread_mutex_lock(&dev->lock);
    cb_device_collect(dev);
    pthread_mutex_unlock(&dev->lock);
  }
}

cb_ledger *cb_alloc_ledger_lock(cb_alloc *a) {
  cb_shared *sh = atomic_load(&a->shared);
  if (!sh) return &a->ledger;
  pthread_mutex_lock(&sh->lock);
  return &sh->ledger;
}

void cb_alloc_ledger_unlock(cb_alloc *a) {
  cb_shared *sh = atomic_load(&a->shared);
  if (sh) pthread_mutex_unlock(&sh->lock);
}

/* ------------------------------------------------------------ lock, loss */

cubert_status cb_device_lost_error(cb_device *dev) {
  cubert_failure *f = atomic_load(&dev->lost);
  cb_errb b;
  cb_errb_init(&b, CUBERT_ERR_DEVICE_LOST);
  cb_str_printf(&b.msg, "device %d (%s) is lost: ", dev->index, dev->info.name);
  if (f) {
    cb_failure_describe(f, &b.msg);
    cb_errb_add(&b, f, 0, 0);
  }
  return cb_errb_finish(&b);
}

void cb_device_mark_lost(cb_device *dev, cubert_failure *f) {
  cubert_failure *none = NULL;
  cubert_failure_retain(f);
  if (!atomic_compare_exchange_strong(&dev->lost, &none, f)) cubert_failure_release(f);
}

/* Work is enqueued faster than it completes, or records pile up that
 * progress never passes (work that failed at enqueue never reaches its
 * stream, so only a sync's floor reclaims it): waits for the device, then
 * reaps up to every stream's newest work, as a sync does. Without the floor
 * those records stayed, and every later call paid a device wait and a walk
 * of them all (issue 15: the cliff past 65,536 unsynced failures). Failures
 * found stay for the program's next sync. */
void cb_device_reap_all(cb_device *dev) {
  uint64_t stackf[32];
  uint32_t nfloor = dev->nstreams;
  uint64_t *floor = nfloor <= 32 ? stackf : cb_malloc(nfloor * sizeof *floor);
  for (uint32_t i = 0; floor && i < nfloor; i++) floor[i] = dev->streams[i]->last_work;
  cubert_berr err = {0};
  cubert_status st = dev->ops->sync(dev->bdev, NULL, &err);
  cb_device_reap_floor(dev, st == CUBERT_OK ? floor : NULL, floor ? nfloor : 0);
  if (floor != stackf) cb_free(floor);
  dev->reap_at = dev->npending + CB_RUNTIME_REAP_INTERVAL;
}

/* cb_device_enter's rest (internal.h), with dev->lock held: the same
 * tests in the same order, each acted on. */
cubert_status cb_device_entered(cb_device *dev) {
  if (atomic_load(&dev->lost)) {
    pthread_mutex_unlock(&dev->lock);
    return cb_device_lost_error(dev);
  }
  if (atomic_load_explicit(&dev->grave, memory_order_relaxed)) cb_device_collect(dev);
  if (dev->npending >= dev->reap_at) {
    /* Reaping walks every record: do it once per CB_RUNTIME_REAP_INTERVAL new records, not on
     * every call while the device runs behind. */
    cb_device_reap(dev);
    dev->reap_at = dev->npending + CB_RUNTIME_REAP_INTERVAL;
  }
  if (dev->npending >= (1u << 16)) cb_device_reap_all(dev);
  return CUBERT_OK;
}

cubert_failure *cb_device_failure(cb_device *dev, cubert_status status, const cubert_berr *err,
                                  cb_stream *s, const char *operation, const char *kernel,
                                  uint64_t work) {
  cb_str m = {0};
  cb_str_printf(&m, "%s", err && err->message[0] ? err->message : cubert_status_string(status));
  char *msg = cb_str_take(&m);
  cubert_failure *f =
      cb_failure_new(status, msg, dev->index, dev->info.name, s ? s->id : 0, operation, kernel, work);
  cb_free(msg);
  /* not the status: a launch refused with DEVICE_LOST because a peer it
   * binds is lost leaves this device working */
  if (f && err && err->sticky) cb_device_mark_lost(dev, f);
  return f;
}

/* ------------------------------------------------------------ teardown */

void cb_device_destroy(cb_device *dev) {
  cubert_berr err = {0};
  dev->ops->sync(dev->bdev, NULL, &err);
  pthread_mutex_lock(&dev->lock);
  cb_device_reap(dev);
  /* everything has completed: drop every record (with no array of
   * progress to allocate: short of host memory, the records and what they
   * hold leaked) */
  cb_work_drop_completed(dev, NULL);
  cb_device_collect(dev);
  pthread_mutex_unlock(&dev->lock);
}

void cb_device_free(cb_device *dev) {
  pthread_mutex_lock(&dev->lock);
  /* memory whose last reference went on another device's teardown, and
   * what every thread's cache keeps (tcache.c): before the slots below, so
   * that no record parked in a cache becomes an orphan */
  cb_device_collect(dev);
  cb_tcache_drain(dev);
  /* Allocations the program still holds (handles, bindings): their device
   * memory goes with the pool below; the records stay, as orphans, until
   * their last reference is released (cubert.h). */
  for (uint32_t i = 0; i < dev->nslots; i++) {
    cb_alloc *a = dev->slots[i];
    if (!a) continue;
    if (a->xshare) cb_xshare_release(a); /* before its memory goes */
    if (CB_BLOCK_OWN(&a->block)) cb_block_free(dev, &a->block); /* not the pools' */
    a->orphan = true;
  }
  /* timers the program still holds: their backend objects go now */
  for (cubert_timer *t = dev->timers; t; t = t->next) {
    dev->ops->timer_destroy(dev->bdev, t->t);
    t->t = NULL;
  }
  dev->timers = NULL;
  atomic_store(&dev->gone, true);
  while (dev->spare) { /* no record is parked once `gone` is set */
    cb_alloc *a = dev->spare;
    dev->spare = a->next_grave;
    cb_free(a);
    cb_device_unref(dev); /* its reference; the runtime's is dropped last */
  }
  dev->nspare = 0;
  pthread_mutex_unlock(&dev->lock);
  cb_tcache_forget(dev); /* this thread's cache now; other threads' at their exit */
  cb_module_close(dev); /* every module it still has (runtime/module.c) */
  for (uint32_t i = 0; i < dev->nstreams; i++) {
    cb_stream *s = dev->streams[i];
    if (s->event) dev->ops->event_destroy(dev->bdev, s->event);
    dev->ops->stream_destroy(dev->bdev, s->bs);
    for (uint32_t j = 0; j < s->nunreported; j++) cubert_failure_release(s->unreported[j]);
    cb_free(s->unreported);
    cb_free(s->waited);
    cb_free(s);
  }
  cb_free(dev->streams);
  cb_free(dev->pending);
  if (dev->pool) cb_pool_destroy(dev->pool);
  dev->ops->device_close(dev->bdev);
  cb_free(dev->slots);
  cb_free(dev->free_slots);
  if (dev->peer_message) {
    for (int i = 0; i < dev->rt->ndevices; i++) cb_free(dev->peer_message[i]);
    cb_free(dev->peer_message);
  }
  cb_free(dev->peer_state);
  cubert_failure_release(atomic_exchange(&dev->lost, NULL));
  cb_device_unref(dev); /* the runtime's reference */
}
