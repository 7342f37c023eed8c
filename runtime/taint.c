/* runtime/taint.c: the central rule of docs/failures.md in one place, for
 * every path that reads or writes device memory (launch, copy, peer copy,
 * read, check):
 *
 *   find     the tainted ranges a piece of work would read, and the first
 *            failure among them (cb_taint_find, cb_taint_refusal);
 *   skip     work whose input is tainted is not done: its write set carries
 *            a child of that failure (cb_taint_skip);
 *   settle   an enqueued write set is released on success and tainted on
 *            failure (cb_taint_settle).
 *
 * Failures travel as values here: what is found goes into a cb_errb the
 * caller owns, never through the thread's last error; only the public entry
 * point that called in records it (cb_errb_finish). */
#include "runtime/internal.h"

/* The first failure the lookup added to `report` after entry `before`; when
 * it found taint but had no host memory to list it (cb_errb_add dropped
 * it), the static "out of host memory" failure: never NULL, which would
 * pass tainted bytes as good. */
static const cubert_failure *found(const cb_errb *report, size_t before, size_t dropped) {
  if (report->n > before) return report->entries[before].failure;
  return report->dropped > dropped ? cb_failure_unrecorded() : NULL;
}

const cubert_failure *cb_taint_find(cb_alloc *a, uint64_t start, uint64_t end, bool peer,
                                    cb_errb *report) {
  size_t before = report->n, dropped = report->dropped;
  cubert_failure *lost = peer ? atomic_load(&a->dev->lost) : NULL;
  if (lost) {
    /* a lost owner's memory is bad as a whole, tainted or not */
    cb_errb_add(report, lost, start, end);
  } else if (a->xshare) {
    /* shared with other processes: the cell they all map is the truth */
    cb_xshare_report(a, start, end, report);
  } else {
    cb_ledger *l = cb_alloc_ledger_lock(a);
    if (l->n) cb_ledger_report(l, start, end, report);
    cb_alloc_ledger_unlock(a);
  }
  return found(report, before, dropped);
}

static const cubert_failure *find_pattern(cb_alloc *a, const cb_pattern *p, bool peer, cb_errb *report) {
  if (p->lo >= p->hi) return NULL;
  size_t before = report->n, dropped = report->dropped;
  cubert_failure *lost = peer ? atomic_load(&a->dev->lost) : NULL;
  if (lost) {
    cb_errb_add(report, lost, cb_pattern_start(p), cb_pattern_end(p));
  } else if (a->xshare) {
    /* shared with other processes: the cell they all map is the truth */
    cb_xshare_report_pattern(a, p, report);
  } else {
    cb_ledger *l = cb_alloc_ledger_lock(a);
    if (l->n) cb_ledger_report_pattern(l, p, report);
    cb_alloc_ledger_unlock(a);
  }
  return found(report, before, dropped);
}

const cubert_failure *cb_taint_find_bind(const cb_wbind *b, bool peer, cb_errb *report) {
  return b->pat ? find_pattern(b->alloc, b->pat, peer, report)
                : cb_taint_find(b->alloc, b->start, b->end, peer, report);
}

/* The refusal's words, after the find filled `report`. */
static void refusal_message(const char *what, cb_alloc *a, uint64_t start, uint64_t end, bool strided,
                            cb_errb *report) {
  size_t n = report->n;
  if (a->host)
    cb_str_printf(&report->msg, "%s of host buffer %llu bytes %llu..%llu refused: %zu tainted range%s:", what,
                  (unsigned long long)a->id, (unsigned long long)start, (unsigned long long)end, n,
                  n == 1 ? "" : "s");
  else
    cb_str_printf(&report->msg,
                  "%s of memory %llu %sbytes %llu..%llu on device %d refused: %zu tainted %s%s:", what,
                  (unsigned long long)a->id, strided ? "strided view within " : "", (unsigned long long)start,
                  (unsigned long long)end, a->dev->index, n, strided ? "piece" : "range", n == 1 ? "" : "s");
  /* the message names the first few ranges, so its size is bounded whatever
   * the number of ranges; the error's entries hold them all */
  size_t named = n < CB_MESSAGE_RANGES ? n : CB_MESSAGE_RANGES;
  for (size_t i = 0; i < named; i++) {
    cb_str_printf(&report->msg, "%s bytes %llu..%llu carry ", i ? ";" : "",
                  (unsigned long long)report->entries[i].start, (unsigned long long)report->entries[i].end);
    cb_failure_describe(report->entries[i].failure, &report->msg);
  }
  if (n > named)
    cb_str_printf(&report->msg, "; ... and %zu more range%s (all in the error's failures)", n - named,
                  n - named == 1 ? "" : "s");
  if (report->dropped)
    cb_str_printf(&report->msg, "; and %zu more that host memory was too short to list", report->dropped);
}

bool cb_taint_refusal(const char *what, cb_alloc *a, uint64_t start, uint64_t end, cb_errb *report) {
  cb_errb_init(report, CUBERT_ERR_TAINTED);
  if (!cb_taint_find(a, start, end, false, report)) {
    cb_errb_discard(report);
    return false;
  }
  refusal_message(what, a, start, end, false, report);
  return true;
}

bool cb_taint_refusal_pattern(const char *what, cb_alloc *a, const cb_pattern *p, cb_errb *report) {
  cb_errb_init(report, CUBERT_ERR_TAINTED);
  if (!find_pattern(a, p, false, report)) {
    cb_errb_discard(report);
    return false;
  }
  refusal_message(what, a, cb_pattern_start(p), cb_pattern_end(p), true, report);
  return true;
}

cubert_failure *cb_taint_skip(cb_device *dev, cb_work *w, const cubert_failure *in, const char *name,
                              const char *input, const char *operation) {
  cubert_failure *child =
      cb_failure_child(in, name, input, dev->index, dev->info.name, w->stream, operation, w->work);
  cb_taint_settle(dev, w, child);
  return child;
}

void cb_taint_settle_bind(cb_wbind *b, cubert_failure *f) {
  cb_ledger *l = cb_alloc_ledger_lock(b->alloc);
  if (b->pat && f)
    cb_ledger_set_pattern(l, b->pat, f);
  else if (b->pat)
    cb_ledger_clear_pattern(l, b->pat);
  else if (f)
    cb_ledger_set(l, b->start, b->end, f);
  else
    cb_ledger_clear(l, b->start, b->end);
  cb_alloc_ledger_unlock(b->alloc);
  if (b->alloc->xshare) cb_xshare_settle(b->alloc, b->start, b->end, b->pat, f);
}

void cb_taint_settle(cb_device *dev, cb_work *w, cubert_failure *f) {
  (void)dev;
  if (f) w->failed = true;
  for (uint32_t i = 0; i < w->nb; i++) {
    cb_wbind *b = &cb_work_binds(w)[i];
    if (!b->alloc || !(b->access & CUBERT_ACCESS_WRITE)) continue;
    /* clearing an empty ledger of unshared memory changes nothing: the
     * usual success, with no call (memory of another device is shared, so
     * its ledger is not read here) */
    if (!f && !cb_taint_settle_needed(b)) continue;
    cb_taint_settle_bind(b, f);
  }
}
