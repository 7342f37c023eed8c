/* runtime/work.c: work records. Every piece of work enqueued gets a work
 * number and a record of the ranges it read and wrote. The record keeps
 * those allocations alive until the backend says the work completed, and
 * it is what an asynchronous failure is attributed to (replay.c). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/array.h"
#include "runtime/internal.h"

/* Drops the record's hold on its kernel (cb_work_pin_kernel). */
static inline void kernel_unpin(cb_device *dev, const cb_work *w) {
  if (!w->kpin) {
    cubert_kernel_release(w->kernel);
    return;
  }
  if (--dev->kpin_n) return;
  cubert_kernel *k = dev->kpin;
  dev->kpin = NULL;
  cubert_kernel_release(k);
}

cb_work *cb_work_begin(cb_device *dev, cb_stream *s, const char *operation, cubert_kernel *k,
                       uint32_t nbinds) {
  if (dev->npending == dev->cappending) {
    cb_work *v = cb_array_grow(dev->pending, dev->cappending, dev->npending + 1, sizeof *v, &dev->cappending);
    if (!v) return NULL;
    dev->pending = v;
  }
  cb_wbind *heap = NULL;
  if (nbinds > CB_WBIND_INLINE && !(heap = cb_calloc(nbinds, sizeof *heap))) return NULL;
  cb_work *w = &dev->pending[dev->npending++];
  /* the header only: the caller binds each of the nbinds entries */
  cb_work_init(w, dev, s, operation, k, nbinds, heap);
  return w;
}

bool cb_work_bind_pattern(cb_work *w, uint32_t i, cb_alloc *a, const cb_pattern *p, cubert_access access,
                          const char *name) {
  if (p->lo >= p->hi) {
    cb_work_bind(w, i, a, 0, 0, access, name);
    return true;
  }
  cb_pattern *copy = cb_malloc(sizeof *copy);
  if (!copy) return false;
  *copy = *p;
  cb_work_bind(w, i, a, cb_pattern_start(p), cb_pattern_end(p), access, name);
  cb_work_binds(w)[i].pat = copy;
  return true;
}

/* A record's release when it is not plain: each binding as it was bound. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void release_bound(cb_device *dev, cb_work *w) {
  const cb_wbind *b = cb_work_binds(w);
  const cb_work local = {.dev = w->dev}; /* cb_work_bind_local's device, not loaded again after each store */
  for (uint32_t i = 0, n = w->nb; i < n; i++) {
    cb_alloc *a = b[i].alloc;
    if (a && (!cb_work_bind_local(&local, a) || --a->local_binds == 0)) cb_alloc_unref(a, CB_BINDING_ONE, dev);
    if (b[i].pat) cb_free(b[i].pat);
  }
  if (w->heap) cb_free(w->heap);
  kernel_unpin(dev, w);
}

/* Inline: the reap releases each launch's record here, and a plain one
 * (each binding local, without a pattern: launch.c's one pass) is one
 * decrement a binding. */
static inline void work_release(cb_device *dev, cb_work *w) {
  if (!w->plain) {
    release_bound(dev, w);
    return;
  }
  const cb_wbind *b = cb_work_binds(w), *e = b + w->nb;
  for (; b != e; b++)
    if (--b->alloc->local_binds == 0) cb_alloc_unref(b->alloc, CB_BINDING_ONE, dev);
  if (w->heap) cb_free(w->heap);
  kernel_unpin(dev, w);
}

void cb_work_abandon(cb_device *dev, cb_stream *s, cb_work *w, uint64_t last_work) {
  work_release(dev, w);
  dev->npending--;
  dev->next_work--;
  if (s) s->last_work = last_work;
}

void cb_work_report(cb_work *w, const cubert_failure *f, cb_errb *b) {
  size_t before = b->n;
  for (uint32_t i = 0; w && i < w->nb; i++) {
    const cb_wbind *wb = &cb_work_binds(w)[i];
    if (!wb->alloc || !(wb->access & CUBERT_ACCESS_WRITE) || wb->start >= wb->end) continue;
    if (!wb->pat) {
      cb_errb_add(b, f, wb->start, wb->end);
      continue;
    }
    /* the runs it taints, the first CB_REPORT_RUNS of them: the caller's
     * view names them all, and an error of a million entries costs as much
     * to free as the write did */
    uint64_t runs = wb->pat->hi - wb->pat->lo, named = runs < CB_REPORT_RUNS ? runs : CB_REPORT_RUNS;
    for (uint64_t k = wb->pat->lo; k < wb->pat->lo + named; k++) {
      uint64_t o = cb_pattern_off(wb->pat, k);
      cb_errb_add(b, f, o, o + wb->pat->run);
    }
    if (named < runs)
      cb_str_printf(&b->msg, " (the strided %s taints %llu runs of %llu bytes in bytes %llu..%llu; the error names the first %llu)",
                    wb->name, (unsigned long long)runs, (unsigned long long)wb->pat->run,
                    (unsigned long long)wb->start, (unsigned long long)wb->end, (unsigned long long)named);
  }
  if (b->n == before) cb_errb_add(b, f, 0, 0);
}

void cb_reader_add(cb_alloc *a, uint32_t stream, uint64_t work) {
  uint32_t j = a->nreaders;
  if (j == a->capreaders) {
    size_t cap = 0;
    struct cb_reader *v = cb_array_grow(a->readers, a->capreaders, (size_t)j + 1, sizeof *v, &cap);
    if (v) a->readers = v;
    if (!v || cap > UINT32_MAX) return; /* cannot remember it: sync before rewriting (docs) */
    a->capreaders = (uint32_t)cap;
  }
  a->nreaders++;
  a->readers[j].stream = stream;
  a->readers[j].work = work;
}

/* The last writer, or this stream among the last readers, of binding `b`
 * by work `work` of stream `stream` (values: the stores below cannot make
 * the compiler load them again). */
static inline void mark_use(const cb_device *dev, uint32_t stream, uint64_t work, const cb_wbind *b) {
  /* stream order means something on the owning device only */
  cb_alloc *a = b->alloc;
  if (!a || a->dev != dev || a->host) return;
  cb_mark_local(a, b->access, stream, work);
}

void cb_work_mark_uses(cb_device *dev, cb_work *w) {
  const cb_wbind *b = cb_work_binds(w);
  uint32_t stream = w->stream, n = w->nb;
  uint64_t work = w->work;
  for (uint32_t i = 0; i < n; i++) mark_use(dev, stream, work, &b[i]);
}

void cb_work_succeeded(cb_device *dev, cb_work *w) {
  cb_wbind *b = cb_work_binds(w);
  for (uint32_t i = 0; i < w->nb; i++) {
    cb_alloc *a = b[i].alloc;
    if (!a) continue;
    if ((b[i].access & CUBERT_ACCESS_WRITE) && cb_taint_settle_needed(&b[i])) cb_taint_settle_bind(&b[i], NULL);
    mark_use(dev, w->stream, w->work, &b[i]);
  }
}

cubert_status cb_work_fail_ordering(cb_device *dev, cb_work *w, cb_stream *s, cb_errb *err,
                                    const char *operation, const char *kernel) {
  cubert_failure *f = cb_failure_new(err->status, err->msg.p ? err->msg.p : "", dev->index, dev->info.name,
                                     s ? s->id : 0, operation, kernel, w->work);
  cb_taint_settle(dev, w, f);
  cubert_failure_release(f);
  return cb_errb_finish(err);
}

/* Drops the records of completed work. A record settled as failed at
 * enqueue never ran, so it waited for nothing: it stays while an earlier
 * record is still pending (kept), because an asynchronous failure of that
 * earlier work replays the records after it, and this one's writes are newer
 * than the failed work's and keep their own verdict. */
void cb_work_drop_completed(cb_device *dev, const uint64_t *progress) {
  size_t keep = 0;
  for (size_t i = 0; i < dev->npending; i++) {
    cb_work *w = &dev->pending[i];
    if (w->stream && (!progress || w->work <= progress[w->stream - 1]) && !(w->failed && keep)) {
      work_release(dev, w);
      continue;
    }
    /* the header and the bindings in use, not all CB_WBIND_INLINE */
    if (keep != i)
      memcpy(&dev->pending[keep], w,
             offsetof(cb_work, inl) + (w->nb > CB_WBIND_INLINE ? 0 : w->nb * sizeof(cb_wbind)));
    keep++;
  }
  dev->npending = keep;
}
