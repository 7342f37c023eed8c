/* runtime/device.c: one device's server: its lock, streams, work records,
 * and the settling of failures, synchronous and asynchronous.
 *
 * Every piece of work enqueued gets a work number and a record of the ranges
 * it read and wrote. The record keeps those allocations alive until the
 * backend says the work completed, and it is what an asynchronous failure is
 * attributed to: when a failure surfaces at a fence, the records are replayed
 * in order from the failed work, so its write set is tainted, work that read
 * those bytes afterwards passes the failure on, and bytes written again later
 * keep their own verdict. */
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

/* ------------------------------------------------------------ allocations */

static void alloc_free(cb_alloc *a) {
  cb_device *dev = a->dev;
  cb_shared *sh = atomic_load(&a->shared);
  if (sh) {
    cb_ledger_free(&sh->ledger);
    pthread_mutex_destroy(&sh->lock);
    free(sh);
  }
  cb_ledger_free(&a->ledger);
  free(a->readers);
  cb_block_free(dev, &a->block);
  dev->slots[a->slot] = NULL;
  if (dev->free_slots) dev->free_slots[dev->nfree++] = a->slot;
  free(a);
}

void cb_device_collect(cb_device *dev) {
  cb_alloc *g = atomic_exchange(&dev->grave, NULL);
  while (g) {
    cb_alloc *next = g->next_grave;
    alloc_free(g);
    g = next;
  }
}

void cb_alloc_ref(cb_alloc *a, uint64_t what) { atomic_fetch_add(&a->refs, what); }

void cb_alloc_unref(cb_alloc *a, uint64_t what, cb_device *held) {
  if (atomic_fetch_sub(&a->refs, what) != what) return;
  cb_device *dev = a->dev;
  cb_alloc *top = atomic_load(&dev->grave);
  do {
    a->next_grave = top;
  } while (!atomic_compare_exchange_weak(&dev->grave, &top, a));
  if (held == dev) {
    cb_device_collect(dev);
  } else if (!held) {
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

static void drop_completed(cb_device *dev, const uint64_t *progress);
static void reap_floor(cb_device *dev, const uint64_t *floor, uint32_t nfloor);

/* Work is enqueued faster than it completes, or records pile up that
 * progress never passes (work that failed at enqueue never reaches its
 * stream, so only a sync's floor reclaims it): waits for the device, then
 * reaps up to every stream's newest work, as a sync does. Without the floor
 * those records stayed, and every later call paid a device wait and a walk
 * of them all (issue 15: the cliff past 65,536 unsynced failures). Failures
 * found stay for the program's next sync. */
static void reap_all(cb_device *dev) {
  uint64_t stackf[32];
  uint32_t nfloor = dev->nstreams;
  uint64_t *floor = nfloor <= 32 ? stackf : malloc(nfloor * sizeof *floor);
  for (uint32_t i = 0; floor && i < nfloor; i++) floor[i] = dev->streams[i]->last_work;
  cubert_berr err = {0};
  cubert_status st = dev->ops->sync(dev->bdev, NULL, &err);
  reap_floor(dev, st == CUBERT_OK ? floor : NULL, floor ? nfloor : 0);
  if (floor != stackf) free(floor);
  dev->reap_at = dev->npending + CB_RUNTIME_REAP_INTERVAL;
}

cubert_status cb_device_enter(cb_device *dev) {
  pthread_mutex_lock(&dev->lock);
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
  if (dev->npending >= (1u << 16)) reap_all(dev);
  return CUBERT_OK;
}

void cb_device_leave(cb_device *dev) { pthread_mutex_unlock(&dev->lock); }

cubert_failure *cb_device_failure(cb_device *dev, cubert_status status, const cubert_berr *err,
                                  cb_stream *s, const char *operation, const char *kernel,
                                  uint64_t work) {
  cb_str m = {0};
  cb_str_printf(&m, "%s", err && err->message[0] ? err->message : cubert_status_string(status));
  char *msg = cb_str_take(&m);
  cubert_failure *f =
      cb_failure_new(status, msg, dev->index, s ? s->id : 0, operation, kernel, work);
  free(msg);
  if (f && err && err->sticky) cb_device_mark_lost(dev, f);
  return f;
}

void cb_work_fail_ordering(cb_device *dev, cb_work *w, cb_stream *s, cubert_status status,
                           const char *operation, const char *kernel) {
  cubert_failure *f = cb_failure_new(status, cubert_last_error_message(), dev->index, s ? s->id : 0,
                                     operation, kernel, w->work);
  cb_work_settle(dev, w, f);
  cubert_failure_release(f);
}

/* ------------------------------------------------------------ streams */

static cb_stream *stream_new(cb_device *dev, cubert_berr *err, cubert_status *st) {
  void *bs = NULL;
  *st = dev->ops->stream_create(dev->bdev, &bs, err);
  if (*st != CUBERT_OK) return NULL;
  cb_stream *s = calloc(1, sizeof *s);
  if (!s) {
    dev->ops->stream_destroy(dev->bdev, bs);
    free(s);
    *st = CUBERT_ERR_OUT_OF_MEMORY;
    return NULL;
  }
  if (dev->nstreams == dev->capstreams) {
    uint32_t cap = dev->capstreams ? dev->capstreams * 2 : 8;
    cb_stream **v = realloc(dev->streams, cap * sizeof *v);
    if (!v) {
      dev->ops->stream_destroy(dev->bdev, bs);
      free(s);
      *st = CUBERT_ERR_OUT_OF_MEMORY;
      return NULL;
    }
    dev->streams = v;
    dev->capstreams = cap;
  }
  s->bs = bs;
  dev->streams[dev->nstreams++] = s;
  s->id = dev->nstreams;
  return s;
}

static _Thread_local int thread_slot = -1;
static atomic_int next_thread_slot;

cubert_status cb_client_stream(cubert_client *c, cb_stream **out) {
  cb_device *dev = c->dev;
  uint32_t id = atomic_load(&c->pinned_stream);
  if (!id) {
    if (thread_slot < 0) thread_slot = atomic_fetch_add(&next_thread_slot, 1) % CB_THREAD_STREAMS;
    id = dev->thread_streams[thread_slot];
    if (!id) {
      cubert_berr err = {0};
      cubert_status st;
      cb_stream *s = stream_new(dev, &err, &st);
      if (!s) return cb_fail_backend(st, &err, "creating a stream", dev->info.name);
      dev->thread_streams[thread_slot] = s->id;
      id = s->id;
    }
  }
  *out = dev->streams[id - 1];
  return CUBERT_OK;
}

cubert_status cubert_stream_create(cubert_client *c, cubert_stream *stream) {
  if (!c || !stream) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_stream_create: %s is NULL", c ? "stream" : "client");
  cubert_status st = cb_device_enter(c->dev);
  if (st) return st;
  cubert_berr err = {0};
  cb_stream *s = stream_new(c->dev, &err, &st);
  cb_device_leave(c->dev);
  if (!s) return cb_fail_backend(st, &err, "creating a stream", c->dev->info.name);
  *stream = s->id;
  return CUBERT_OK;
}

cubert_status cubert_client_use_stream(cubert_client *c, cubert_stream stream) {
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_client_use_stream: client is NULL");
  pthread_mutex_lock(&c->dev->lock);
  uint32_t n = c->dev->nstreams;
  pthread_mutex_unlock(&c->dev->lock);
  if (stream > n)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "stream %llu does not exist on device %d (%u streams)",
                   (unsigned long long)stream, c->dev->index, n);
  atomic_store(&c->pinned_stream, (uint32_t)stream);
  return CUBERT_OK;
}

cubert_stream cubert_client_stream(const cubert_client *c) {
  if (!c) return 0;
  uint32_t pinned = atomic_load(&c->pinned_stream);
  if (pinned) return pinned;
  pthread_mutex_lock(&c->dev->lock);
  cb_stream *s = NULL;
  cubert_status st = cb_client_stream((cubert_client *)c, &s);
  pthread_mutex_unlock(&c->dev->lock);
  return st == CUBERT_OK ? s->id : 0;
}

/* Makes `s` wait for stream `pid`'s work up to `w`. */
static cubert_status wait_for(cb_device *dev, cb_stream *s, uint32_t pid, uint64_t w) {
  cb_stream *p = dev->streams[pid - 1];
  if (s->nwaited < dev->nstreams) {
    uint64_t *v = realloc(s->waited, dev->nstreams * sizeof *v);
    if (!v) return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "ordering streams: out of host memory");
    memset(v + s->nwaited, 0, (dev->nstreams - s->nwaited) * sizeof *v);
    s->waited = v;
    s->nwaited = dev->nstreams;
  }
  if (s->waited[p->id - 1] >= w) return CUBERT_OK;
  cubert_berr err = {0};
  cubert_status st;
  if (!p->event || p->event_work < w) {
    /* record once per producer position, not per launch */
    void *ev = NULL;
    st = dev->ops->event_record(dev->bdev, p->bs, &ev, &err);
    if (st) return cb_fail_backend(st, &err, "recording an event", dev->info.name);
    if (p->event) dev->ops->event_destroy(dev->bdev, p->event);
    p->event = ev;
    p->event_work = p->last_work;
  }
  st = dev->ops->stream_wait(dev->bdev, s->bs, p->event, &err);
  if (st) return cb_fail_backend(st, &err, "waiting for an event", dev->info.name);
  s->waited[p->id - 1] = p->event_work;
  return CUBERT_OK;
}

cubert_status cb_order_access(cb_device *dev, cb_stream *s, cb_alloc *a, bool write) {
  if (a->dev != dev) return CUBERT_OK;
  cubert_status st = CUBERT_OK;
  if (a->last_writer && a->last_writer != s->id)
    st = wait_for(dev, s, a->last_writer, a->last_write);
  if (write) {
    for (uint32_t i = 0; !st && i < a->nreaders; i++)
      if (a->readers[i].stream != s->id) st = wait_for(dev, s, a->readers[i].stream, a->readers[i].work);
    if (!st) a->nreaders = 0; /* ordered after all of them */
  }
  return st;
}

/* ------------------------------------------------------------ work records */

cb_work *cb_work_begin(cb_device *dev, cb_stream *s, const char *operation, cubert_kernel *k,
                       uint32_t nbinds) {
  if (dev->npending == dev->cappending) {
    size_t cap = dev->cappending ? dev->cappending * 2 : 64;
    cb_work *v = realloc(dev->pending, cap * sizeof *v);
    if (!v) return NULL;
    dev->pending = v;
    dev->cappending = cap;
  }
  cb_wbind *heap = NULL;
  if (nbinds > CB_WBIND_INLINE && !(heap = calloc(nbinds, sizeof *heap))) return NULL;
  cb_work *w = &dev->pending[dev->npending++];
  memset(w, 0, sizeof *w);
  w->work = ++dev->next_work;
  w->stream = s ? s->id : 0;
  w->operation = operation;
  w->kernel = k;
  if (k) cubert_kernel_retain(k);
  w->nb = nbinds;
  w->heap = heap;
  if (s) s->last_work = w->work;
  return w;
}

void cb_work_bind(cb_work *w, uint32_t i, cb_alloc *a, uint64_t start, uint64_t end,
                  cubert_access access, const char *name) {
  cb_alloc_ref(a, CB_BINDING_ONE);
  cb_work_binds(w)[i] = (cb_wbind){a, start, end, (uint8_t)access, name};
}

static void work_release(cb_device *dev, cb_work *w) {
  cb_wbind *b = cb_work_binds(w);
  for (uint32_t i = 0; i < w->nb; i++)
    if (b[i].alloc) cb_alloc_unref(b[i].alloc, CB_BINDING_ONE, dev);
  free(w->heap);
  cubert_kernel_release(w->kernel);
}

void cb_work_settle(cb_device *dev, cb_work *w, cubert_failure *f) {
  (void)dev;
  if (f) w->failed = true;
  for (uint32_t i = 0; i < w->nb; i++) {
    cb_wbind *b = &cb_work_binds(w)[i];
    if (!b->alloc || !(b->access & CUBERT_ACCESS_WRITE)) continue;
    cb_ledger *l = cb_alloc_ledger_lock(b->alloc);
    if (f)
      cb_ledger_set(l, b->start, b->end, f);
    else
      cb_ledger_clear(l, b->start, b->end);
    cb_alloc_ledger_unlock(b->alloc);
  }
}

void cb_work_mark_uses(cb_device *dev, cb_work *w) {
  for (uint32_t i = 0; i < w->nb; i++) {
    cb_wbind *b = &cb_work_binds(w)[i];
    /* stream order means something on the owning device only */
    if (!b->alloc || b->alloc->dev != dev) continue;
    if (b->access & CUBERT_ACCESS_WRITE) {
      b->alloc->last_writer = w->stream;
      b->alloc->last_write = w->work;
    } else {
      cb_alloc *a = b->alloc;
      uint32_t j = 0;
      while (j < a->nreaders && a->readers[j].stream != w->stream) j++;
      if (j == a->nreaders) {
        if (a->nreaders == a->capreaders) {
          uint32_t cap = a->capreaders ? a->capreaders * 2 : 2;
          struct cb_reader *v = realloc(a->readers, cap * sizeof *v);
          if (!v) continue; /* cannot remember it: sync before rewriting (docs) */
          a->readers = v;
          a->capreaders = cap;
        }
        a->nreaders++;
        a->readers[j].stream = w->stream;
      }
      a->readers[j].work = w->work;
    }
  }
}

/* ------------------------------------------------------------ async failures */

typedef struct bad_range {
  cb_alloc *alloc;
  uint64_t start, end;
  cubert_failure *failure; /* a reference */
} bad_range;

typedef struct bad_set {
  bad_range *v;
  size_t n, cap;
} bad_set;

static void bad_push(bad_set *s, cb_alloc *a, uint64_t start, uint64_t end, cubert_failure *f) {
  if (start >= end) return;
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 8;
    bad_range *v = realloc(s->v, cap * sizeof *v);
    if (!v) return;
    s->v = v;
    s->cap = cap;
  }
  cubert_failure_retain(f);
  s->v[s->n++] = (bad_range){a, start, end, f};
}

/* Later work wrote [start, end) of `a`: those bytes have a newer verdict. */
static void bad_trim(bad_set *s, cb_alloc *a, uint64_t start, uint64_t end) {
  size_t n = s->n;
  for (size_t i = 0; i < n; i++) {
    bad_range r = s->v[i];
    if (r.alloc != a || r.end <= start || end <= r.start || !r.failure) continue;
    s->v[i].failure = NULL; /* removed; pieces outside re-added */
    if (r.start < start) bad_push(s, a, r.start, start, r.failure);
    if (end < r.end) bad_push(s, a, end, r.end, r.failure);
    cubert_failure_release(r.failure);
  }
}

#ifndef CUBERT_BREAK_TRANSITIVE
static const cubert_failure *bad_overlap(const bad_set *s, const cb_wbind *b) {
  for (size_t i = 0; i < s->n; i++) {
    const bad_range *r = &s->v[i];
    if (r->failure && r->alloc == b->alloc && r->start < b->end && b->start < r->end)
      return r->failure;
  }
  return NULL;
}
#endif

static cb_work *find_work(cb_device *dev, uint64_t work, size_t *index) {
  size_t lo = 0, hi = dev->npending;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (dev->pending[mid].work < work)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < dev->npending && dev->pending[lo].work == work) {
    *index = lo;
    return &dev->pending[lo];
  }
  return NULL;
}

static void stream_unreported(cb_stream *s, cubert_failure *f) {
  if (s->nunreported == s->capunreported) {
    uint32_t cap = s->capunreported ? s->capunreported * 2 : 4;
    if (cap > 64) { /* bounded: the oldest unreported failure gives way */
      cubert_failure_release(s->unreported[0]);
      memmove(s->unreported, s->unreported + 1, (s->nunreported - 1) * sizeof *s->unreported);
      s->nunreported--;
    } else {
      cubert_failure **v = realloc(s->unreported, cap * sizeof *v);
      if (!v) return;
      s->unreported = v;
      s->capunreported = cap;
    }
  }
  cubert_failure_retain(f);
  s->unreported[s->nunreported++] = f;
}

static void apply_async(cb_device *dev, const cubert_async_failure *af) {
  size_t at = 0;
  cb_work *w = af->work ? find_work(dev, af->work, &at) : NULL;
  cb_str m = {0};
  if (w)
    cb_str_printf(&m, "found at a fence: %s", af->message[0] ? af->message : cubert_status_string(af->status));
  else
    cb_str_printf(&m, "found at a fence and not attributable to any work%s%s (no bytes tainted)",
                  af->message[0] ? ": " : "", af->message);
  char *msg = cb_str_take(&m);
  cubert_failure *f = cb_failure_new(af->status, msg, dev->index, w ? w->stream : 0,
                                     w ? w->operation : "sync",
                                     w && w->kernel ? w->kernel->name : "", af->work);
  free(msg);
  if (!f) return;
  if (af->sticky) cb_device_mark_lost(dev, f);
  if (!w) {
    for (uint32_t i = 0; i < dev->nstreams; i++) stream_unreported(dev->streams[i], f);
    cubert_failure_release(f);
    return;
  }
  stream_unreported(dev->streams[w->stream - 1], f);
  if (w->failed) { /* already settled as failed at enqueue */
    cubert_failure_release(f);
    return;
  }
  /* Replay the records from the failed work on. */
  bad_set bad = {0};
  w->failed = true;
  cb_wbind *wb = cb_work_binds(w);
  for (uint32_t i = 0; i < w->nb; i++)
    if (wb[i].access & CUBERT_ACCESS_WRITE) bad_push(&bad, wb[i].alloc, wb[i].start, wb[i].end, f);
  for (size_t j = at + 1; j < dev->npending; j++) {
    cb_work *r = &dev->pending[j];
    cb_wbind *rb = cb_work_binds(r);
    const cubert_failure *in = NULL;
    const char *input = NULL;
#ifndef CUBERT_BREAK_TRANSITIVE
    if (!r->failed)
      for (uint32_t i = 0; i < r->nb && !in; i++)
        if (rb[i].access & CUBERT_ACCESS_READ) {
          in = bad_overlap(&bad, &rb[i]);
          input = rb[i].name;
        }
#endif
    cubert_failure *child = NULL;
    if (in) {
      child = cb_failure_child(in, r->kernel ? r->kernel->name : r->operation, input, dev->index,
                               r->stream, r->operation, r->work);
      r->failed = true;
    }
    for (uint32_t i = 0; i < r->nb; i++) {
      if (!(rb[i].access & CUBERT_ACCESS_WRITE)) continue;
      bad_trim(&bad, rb[i].alloc, rb[i].start, rb[i].end);
      if (child) bad_push(&bad, rb[i].alloc, rb[i].start, rb[i].end, child);
    }
    cubert_failure_release(child);
  }
  for (size_t i = 0; i < bad.n; i++) {
    bad_range *r = &bad.v[i];
    if (!r->failure) continue;
    cb_ledger *l = cb_alloc_ledger_lock(r->alloc);
    cb_ledger_set(l, r->start, r->end, r->failure);
    cb_alloc_ledger_unlock(r->alloc);
    cubert_failure_release(r->failure);
  }
  free(bad.v);
  cubert_failure_release(f);
}

/* Drops the records of completed work. A record settled as failed at
 * enqueue never ran, so it waited for nothing: it stays while an earlier
 * record is still pending (kept), because an asynchronous failure of that
 * earlier work replays the records after it, and this one's writes are newer
 * than the failed work's and keep their own verdict. */
static void drop_completed(cb_device *dev, const uint64_t *progress) {
  size_t keep = 0;
  for (size_t i = 0; i < dev->npending; i++) {
    cb_work *w = &dev->pending[i];
    if (w->stream && w->work <= progress[w->stream - 1] && !(w->failed && keep)) {
      work_release(dev, w);
      continue;
    }
    if (keep != i) dev->pending[keep] = *w;
    keep++;
  }
  dev->npending = keep;
}

/* Reaps with `floor[i]` (may be NULL): work of stream i up to it is known
 * complete (a sync waited for it), whatever progress says: work that failed
 * when it was enqueued never reaches the stream, so progress alone would
 * never pass it when nothing follows it there. */
static void reap_floor(cb_device *dev, const uint64_t *floor, uint32_t nfloor) {
  /* progress first, then failures: a failure is recorded before its work
   * counts as complete, so no completed record loses its failure */
  uint64_t stackp[32];
  uint64_t *progress = dev->nstreams <= 32 ? stackp : malloc(dev->nstreams * sizeof *progress);
  if (!progress) return;
  for (uint32_t i = 0; i < dev->nstreams; i++) {
    progress[i] = dev->ops->progress(dev->bdev, dev->streams[i]->bs);
    if (floor && i < nfloor && floor[i] > progress[i]) progress[i] = floor[i];
  }
  cubert_async_failure buf[8];
  size_t n;
  do {
    n = dev->ops->drain_failures(dev->bdev, buf, 8);
    for (size_t i = 0; i < n; i++) apply_async(dev, &buf[i]);
  } while (n == 8);
  drop_completed(dev, progress);
  if (progress != stackp) free(progress);
}

void cb_device_reap(cb_device *dev) { reap_floor(dev, NULL, 0); }

/* ------------------------------------------------------------ sync */

static cubert_status sync_impl(cubert_client *c, uint32_t stream_id, bool all) {
  cb_device *dev = c->dev;
  cubert_status st = cb_device_enter(dev);
  if (st) return st;
  cb_stream *s = NULL;
  if (!all) {
    if (stream_id) {
      if (stream_id > dev->nstreams) {
        cb_device_leave(dev);
        return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "stream %u does not exist on device %d",
                       stream_id, dev->index);
      }
      s = dev->streams[stream_id - 1];
    } else if ((st = cb_client_stream(c, &s)) != CUBERT_OK) {
      cb_device_leave(dev);
      return st;
    }
  }
  void *bs = s ? s->bs : NULL;
  /* what the sync waits for: everything enqueued on the stream(s) so far */
  uint32_t nfloor = dev->nstreams;
  uint64_t *floor = calloc(nfloor ? nfloor : 1, sizeof *floor);
  for (uint32_t i = 0; floor && i < nfloor; i++)
    if (!s || dev->streams[i] == s) floor[i] = dev->streams[i]->last_work;
  cb_device_leave(dev);
  cubert_berr err = {0};
  st = dev->ops->sync(dev->bdev, bs, &err);
  pthread_mutex_lock(&dev->lock);
  if (st != CUBERT_OK) {
    cubert_failure *f = cb_device_failure(dev, st, &err, s, "sync", "", 0);
    cubert_failure_release(f);
  }
  reap_floor(dev, st == CUBERT_OK ? floor : NULL, nfloor);
  free(floor);
  if (st != CUBERT_OK && !atomic_load(&dev->lost)) {
    /* the wait itself failed: say so; failures found stay for the next sync */
    pthread_mutex_unlock(&dev->lock);
    return cb_fail_backend(st, &err, "synchronising", dev->info.name);
  }
  cb_errb b;
  cb_errb_init(&b, CUBERT_OK);
  size_t nfail = 0;
  for (uint32_t i = 0; i < dev->nstreams; i++) {
    cb_stream *t = dev->streams[i];
    if (s && t != s) continue;
    for (uint32_t j = 0; j < t->nunreported; j++) {
      cubert_failure *f = t->unreported[j];
      if (nfail == 0) {
        b.status = f->status;
        cb_str_printf(&b.msg, "sync of device %d (%s) found failed work:", dev->index, dev->info.name);
      }
      cb_str_printf(&b.msg, "%s ", nfail ? ";" : "");
      cb_failure_describe(f, &b.msg);
      cb_errb_add(&b, f, 0, 0);
      cubert_failure_release(f);
      nfail++;
    }
    t->nunreported = 0;
  }
  cubert_failure *lost = atomic_load(&dev->lost);
  pthread_mutex_unlock(&dev->lock);
  if (lost) {
    cb_errb_discard(&b);
    return cb_device_lost_error(dev);
  }
  if (nfail) return cb_errb_finish(&b);
  cb_errb_discard(&b);
  return CUBERT_OK;
}

cubert_status cubert_sync(cubert_client *c) {
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_sync: client is NULL");
  return sync_impl(c, atomic_load(&c->pinned_stream), false);
}

cubert_status cubert_sync_stream(cubert_client *c, cubert_stream stream) {
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_sync_stream: client is NULL");
  if (stream > UINT32_MAX) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "stream %llu does not exist", (unsigned long long)stream);
  return sync_impl(c, (uint32_t)stream, false);
}

cubert_status cubert_sync_device(cubert_client *c) {
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_sync_device: client is NULL");
  return sync_impl(c, 0, true);
}

/* ------------------------------------------------------------ teardown */

void cb_device_destroy(cb_device *dev) {
  cubert_berr err = {0};
  dev->ops->sync(dev->bdev, NULL, &err);
  pthread_mutex_lock(&dev->lock);
  cb_device_reap(dev);
  /* everything has completed: drop every record */
  uint64_t *all = malloc((dev->nstreams + 1) * sizeof *all);
  if (all) {
    for (uint32_t i = 0; i < dev->nstreams; i++) all[i] = UINT64_MAX;
    drop_completed(dev, all);
    free(all);
  }
  cb_device_collect(dev);
  pthread_mutex_unlock(&dev->lock);
}

void cb_device_free(cb_device *dev);
void cb_device_free(cb_device *dev) {
  /* allocations the program never released */
  for (uint32_t i = 0; i < dev->nslots; i++)
    if (dev->slots[i]) alloc_free(dev->slots[i]);
  for (size_t i = 0; i < dev->nmodules; i++) {
    dev->ops->module_unload(dev->bdev, dev->modules[i].module);
    cubert_kernel_release(dev->modules[i].kernel);
  }
  free(dev->modules);
  for (uint32_t i = 0; i < dev->nstreams; i++) {
    cb_stream *s = dev->streams[i];
    if (s->event) dev->ops->event_destroy(dev->bdev, s->event);
    dev->ops->stream_destroy(dev->bdev, s->bs);
    for (uint32_t j = 0; j < s->nunreported; j++) cubert_failure_release(s->unreported[j]);
    free(s->unreported);
    free(s->waited);
    free(s);
  }
  free(dev->streams);
  free(dev->pending);
  if (dev->pool) cb_pool_destroy(dev->pool);
  dev->ops->device_close(dev->bdev);
  free(dev->slots);
  free(dev->free_slots);
  if (dev->peer_message) {
    for (int i = 0; i < dev->rt->ndevices; i++) free(dev->peer_message[i]);
    free(dev->peer_message);
  }
  free(dev->peer_state);
  cubert_failure_release(atomic_load(&dev->lost));
  pthread_mutex_destroy(&dev->lock);
  free(dev);
}

/* ------------------------------------------------------------ timers */

struct cubert_timer {
  cb_device *dev;
  void *t;
};

cubert_status cubert_timer_record(cubert_client *c, cubert_timer **out) {
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_timer_record: client is NULL");
  if (!out) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_timer_record: timer is NULL");
  cb_device *dev = c->dev;
  cubert_status st = cb_device_enter(dev);
  if (st) return st;
  cb_stream *s;
  cubert_berr err = {0};
  void *t = NULL;
  if ((st = cb_client_stream(c, &s)) == CUBERT_OK) {
    st = dev->ops->timer_record(dev->bdev, s->bs, &t, &err);
    if (st) st = cb_fail_backend(st, &err, "recording a timer", dev->info.name);
  }
  cb_device_leave(dev);
  if (st) return st;
  cubert_timer *tm = malloc(sizeof *tm);
  if (!tm) {
    pthread_mutex_lock(&dev->lock);
    dev->ops->timer_destroy(dev->bdev, t);
    pthread_mutex_unlock(&dev->lock);
    return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  *tm = (cubert_timer){dev, t};
  *out = tm;
  return CUBERT_OK;
}

cubert_status cubert_timer_elapsed(const cubert_timer *a, const cubert_timer *b, double *ms) {
  if (!a || !b || !ms)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_timer_elapsed: %s is NULL", !a ? "start" : !b ? "end" : "ms");
  if (a->dev != b->dev)
    return cb_fail(CUBERT_ERR_WRONG_DEVICE, "cubert_timer_elapsed: timers of devices %d and %d", a->dev->index,
                   b->dev->index);
  cubert_berr err = {0};
  cubert_status st = a->dev->ops->timer_elapsed(a->dev->bdev, a->t, b->t, ms, &err);
  if (st) return cb_fail_backend(st, &err, "reading timers", a->dev->info.name);
  return CUBERT_OK;
}

void cubert_timer_release(cubert_timer *t) {
  if (!t) return;
  pthread_mutex_lock(&t->dev->lock);
  t->dev->ops->timer_destroy(t->dev->bdev, t->t);
  pthread_mutex_unlock(&t->dev->lock);
  free(t);
}
