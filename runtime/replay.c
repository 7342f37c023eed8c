/* runtime/replay.c: failures found asynchronously, at a fence. When one
 * surfaces, the records are replayed in order from the failed work, so its
 * write set is tainted, work that read those bytes afterwards passes the
 * failure on, and bytes written again later keep their own verdict. Reaping
 * drains those failures and drops the records of completed work. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/array.h"
#include "runtime/internal.h"

/* The bytes a replay found bad so far: a ledger per allocation, so strided
 * write sets stay exact (and compact) while later work trims them. */
typedef struct bad_alloc {
  cb_alloc *alloc;
  cb_ledger ledger;
} bad_alloc;

/* Short of host memory for an allocation's entry, the replay taints that
 * write straight in the allocation's ledger (no later write trims it: too
 * much taint, never too little) and remembers the allocation in `lost`, so
 * that later work reading it counts as reading bad bytes; past
 * CB_BAD_LOST of them, all later readers do (`lost_all`). */
#define CB_BAD_LOST 4

typedef struct bad_set {
  bad_alloc *v;
  size_t n, cap;
  cb_alloc *lost[CB_BAD_LOST];
  unsigned nlost;
  bool lost_all;
} bad_set;

static cb_ledger *bad_ledger(bad_set *s, cb_alloc *a, bool make) {
  for (size_t i = 0; i < s->n; i++)
    if (s->v[i].alloc == a) return &s->v[i].ledger;
  if (!make) return NULL;
  if (s->n == s->cap) {
    bad_alloc *v = cb_array_grow(s->v, s->cap, s->n + 1, sizeof *v, &s->cap);
    if (!v) return NULL;
    s->v = v;
  }
  s->v[s->n] = (bad_alloc){a, {0}};
  s->v[s->n].ledger.seed = (uint64_t)(uintptr_t)a;
  return &s->v[s->n++].ledger;
}

static void bad_push(bad_set *s, const cb_wbind *b, cubert_failure *f) {
  if (b->start >= b->end) return;
  cb_ledger *l = bad_ledger(s, b->alloc, true);
  if (!l) {
    cb_taint_settle_bind((cb_wbind *)b, f);
    for (unsigned i = 0; i < s->nlost; i++)
      if (s->lost[i] == b->alloc) return;
    if (s->nlost < CB_BAD_LOST)
      s->lost[s->nlost++] = b->alloc;
    else
      s->lost_all = true;
    return;
  }
  if (b->pat)
    cb_ledger_set_pattern(l, b->pat, f);
  else
    cb_ledger_set(l, b->start, b->end, f);
}

/* Later work wrote what `b` binds: those bytes have a newer verdict. */
static void bad_trim(bad_set *s, const cb_wbind *b) {
  cb_ledger *l = bad_ledger(s, b->alloc, false);
  if (!l) return;
  if (b->pat)
    cb_ledger_clear_pattern(l, b->pat);
  else
    cb_ledger_clear(l, b->start, b->end);
}

#ifndef CUBERT_BREAK_TRANSITIVE
/* Whether `b` reads an allocation whose bad bytes went past the set. */
static bool bad_lost(const bad_set *s, const cb_wbind *b) {
  if (s->lost_all) return true;
  for (unsigned i = 0; i < s->nlost; i++)
    if (s->lost[i] == b->alloc) return true;
  return false;
}

static const cubert_failure *bad_overlap(bad_set *s, const cb_wbind *b) {
  if (bad_lost(s, b)) return cb_failure_unrecorded(); /* it may read them: it counts as reading them */
  cb_ledger *l = bad_ledger(s, b->alloc, false);
  if (!l || !l->n) return NULL;
  if (!b->pat) return cb_ledger_first(l, b->start, b->end);
  cb_errb e;
  cb_errb_init(&e, CUBERT_OK);
  /* a piece found with no host memory to list it (dropped) is still bad */
  const cubert_failure *f = cb_ledger_report_pattern(l, b->pat, &e) ? e.entries[0].failure
                            : e.dropped                              ? cb_failure_unrecorded()
                                                                     : NULL;
  cb_errb_discard(&e); /* the bad set still holds f */
  return f;
}
#endif

static void apply_range(void *ctx, uint64_t s, uint64_t e, cubert_failure *f) {
  cb_ledger_set(ctx, s, e, f);
}

static void apply_claim(void *ctx, const cb_pattern *p, cubert_failure *f) { cb_ledger_set_pattern(ctx, p, f); }

/* Memory shared with other processes: its cell is the truth about its
 * taint (xshare.c), so the replay's verdicts go there too. */
static void share_range(void *ctx, uint64_t s, uint64_t e, cubert_failure *f) {
  cb_xshare_settle(ctx, s, e, NULL, f);
}

static void share_claim(void *ctx, const cb_pattern *p, cubert_failure *f) { cb_xshare_settle(ctx, 0, 0, p, f); }

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
      cubert_failure **v = cb_realloc(s->unreported, cap * sizeof *v);
      if (!v) {
        s->unreported_lost = true; /* the next sync still fails, saying memory ran out */
        return;
      }
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
  cubert_failure *f = cb_failure_new(af->status, msg, dev->index, dev->info.name, w ? w->stream : 0,
                                     w ? w->operation : "sync",
                                     w && w->kernel ? w->kernel->name : "", af->work);
  cb_free(msg);
  if (!f) return;
  /* work that ran and failed with DEVICE_LOST (a host kernel returning it)
   * lost the device, flagged sticky or not */
  if (af->sticky || af->status == CUBERT_ERR_DEVICE_LOST) cb_device_mark_lost(dev, f);
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
    if (wb[i].access & CUBERT_ACCESS_WRITE) bad_push(&bad, &wb[i], f);
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
      child = cb_failure_child(in, r->kernel ? r->kernel->name : r->operation, input, dev->index, dev->info.name,
                               r->stream, r->operation, r->work);
      r->failed = true;
    }
    for (uint32_t i = 0; i < r->nb; i++) {
      if (!(rb[i].access & CUBERT_ACCESS_WRITE)) continue;
      bad_trim(&bad, &rb[i]);
      if (child) bad_push(&bad, &rb[i], child);
    }
    cubert_failure_release(child);
  }
  for (size_t i = 0; i < bad.n; i++) {
    cb_ledger *l = cb_alloc_ledger_lock(bad.v[i].alloc);
    cb_ledger_each(&bad.v[i].ledger, apply_range, apply_claim, l);
    cb_alloc_ledger_unlock(bad.v[i].alloc);
    if (bad.v[i].alloc->xshare) cb_ledger_each(&bad.v[i].ledger, share_range, share_claim, bad.v[i].alloc);
    cb_ledger_free(&bad.v[i].ledger);
  }
  cb_free(bad.v);
  cubert_failure_release(f);
}

/* Reaps with `floor[i]` (may be NULL): work of stream i up to it is known
 * complete (a sync waited for it), whatever progress says: work that failed
 * when it was enqueued never reaches the stream, so progress alone would
 * never pass it when nothing follows it there. */
void cb_device_reap_floor(cb_device *dev, const uint64_t *floor, uint32_t nfloor) {
  /* progress first, then failures: a failure is recorded before its work
   * counts as complete, so no completed record loses its failure */
  uint64_t stackp[32];
  uint64_t *progress = dev->nstreams <= 32 ? stackp : cb_malloc(dev->nstreams * sizeof *progress);
  /* out of host memory for it: no record is dropped this time, but the
   * failures waiting are still drained (a read after a wait relies on it) */
  for (uint32_t i = 0; progress && i < dev->nstreams; i++) {
    /* A stream whose work had all completed when last asked has nothing the
     * backend could add (a failure is reported before its work counts as
     * complete): no call. A read reaps after every wait, and a device has
     * several streams; asking each cost a backend call and lock a read. */
    cb_stream *s = dev->streams[i];
    if (s->progress < s->last_work) s->progress = dev->ops->progress(dev->bdev, s->bs);
    progress[i] = s->progress;
    if (floor && i < nfloor && floor[i] > progress[i]) progress[i] = floor[i];
  }
  cubert_async_failure buf[8];
  size_t n;
  do {
    n = dev->ops->drain_failures(dev->bdev, buf, 8);
    for (size_t i = 0; i < n; i++) apply_async(dev, &buf[i]);
  } while (n == 8);
  if (progress) cb_work_drop_completed(dev, progress);
  if (progress != stackp) cb_free(progress);
}

void cb_device_reap(cb_device *dev) { cb_device_reap_floor(dev, NULL, 0); }
