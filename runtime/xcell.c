/* runtime/xcell.c: the failure cell several processes map (xcell.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/xcell.h"

#include "runtime/pattern.h"
#include "runtime/xcell_testing.h"

#define XCELL_MAGIC 0x4c435843u /* "CXCL" */
#define XCELL_VERSION 1u

cubert_status cb_xcell_init(cb_xcell *cell, uint64_t size, char *message, size_t cap) {
  memset(cell, 0, sizeof *cell);
  pthread_mutexattr_t a;
  int rc = pthread_mutexattr_init(&a);
  const char *what = "pthread_mutexattr_init";
  if (!rc && (rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED)))
    what = "pthread_mutexattr_setpshared";
  if (!rc && (rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST))) what = "pthread_mutexattr_setrobust";
  if (!rc && (rc = pthread_mutex_init(&cell->lock, &a))) what = "pthread_mutex_init";
  pthread_mutexattr_destroy(&a);
  if (rc) {
    snprintf(message, cap, "making the shared failure cell: %s: %s", what, strerror(rc));
    return CUBERT_ERR_BACKEND;
  }
  cell->size = size;
  atomic_store(&cell->current, 0);
  cell->version = XCELL_VERSION;
  cell->magic = XCELL_MAGIC;
  return CUBERT_OK;
}

bool cb_xcell_valid(const cb_xcell *cell) {
  return cell && cell->magic == XCELL_MAGIC && cell->version == XCELL_VERSION &&
         atomic_load(&((cb_xcell *)cell)->current) <= 1 &&
         cell->tables[atomic_load(&((cb_xcell *)cell)->current)].n <= CB_XCELL_RANGES;
}

/* xcell_testing.h: locks left to fail */
static _Atomic uint32_t fail_locks;

uint32_t cb_xcell_testing_fail_locks(uint32_t n) { return atomic_exchange(&fail_locks, n); }

static bool fail_lock(void) {
  uint32_t n = atomic_load_explicit(&fail_locks, memory_order_relaxed);
  while (n && !atomic_compare_exchange_weak(&fail_locks, &n, n - 1)) {
  }
  return n != 0;
}

cubert_status cb_xcell_lock(cb_xcell *cell, int64_t *died) {
  if (died) *died = 0;
  if (fail_lock()) return CUBERT_ERR_BACKEND;
  int rc = pthread_mutex_lock(&cell->lock);
  if (rc == EOWNERDEAD) {
    /* The holder died. The table in force is whole (updates write the other
     * one and flip an index), so the cell is consistent as it is; the
     * holder's pid says who it was. */
    pthread_mutex_consistent(&cell->lock);
    cell->lost_pid = cell->holder ? cell->holder : -1;
    if (died) *died = cell->lost_pid;
    rc = 0;
  }
  if (rc) return CUBERT_ERR_BACKEND;
  cell->holder = (int64_t)getpid();
  return CUBERT_OK;
}

void cb_xcell_unlock(cb_xcell *cell) {
  cell->holder = 0;
  pthread_mutex_unlock(&cell->lock);
}

/* ------------------------------------------------------------ updates */

/* The spare table, started as a copy of the one in force. */
static cb_xcell_table *begin(cb_xcell *cell) {
  uint32_t cur = atomic_load(&cell->current);
  cb_xcell_table *next = &cell->tables[1 - cur];
  const cb_xcell_table *now = &cell->tables[cur];
  next->n = now->n;
  memcpy(next->ranges, now->ranges, now->n * sizeof now->ranges[0]);
  return next;
}

/* Puts `next` in force: one store; a process killed before it leaves the
 * old table in force. */
static void commit(cb_xcell *cell, cb_xcell_table *next) {
  cell->generation++;
  atomic_store(&cell->current, (uint32_t)(next - cell->tables));
}

static void insert_at(cb_xcell_table *t, uint32_t i, uint64_t start, uint64_t end,
                      const cubert_failure_record *record) {
  memmove(&t->ranges[i + 1], &t->ranges[i], (t->n - i) * sizeof t->ranges[0]);
  t->ranges[i].start = start;
  t->ranges[i].end = end;
  t->ranges[i].record = *record;
  t->n++;
}

/* Removes [start, end) from every range of `t` (splitting one that holds
 * it); returns the index where a range starting at `start` belongs. */
static uint32_t cut(cb_xcell_table *t, uint64_t start, uint64_t end) {
  uint32_t at = UINT32_MAX;
  for (uint32_t i = 0; i < t->n;) {
    cb_xcell_range *r = &t->ranges[i];
    if (r->end <= start) {
      i++;
      continue;
    }
    if (at == UINT32_MAX) at = i;
    if (r->start >= end) break;
    if (r->start < start && r->end > end) { /* a hole in the middle: split */
      cubert_failure_record rec = r->record;
      uint64_t right_end = r->end;
      r->end = start;
      insert_at(t, i + 1, end, right_end, &rec);
      return i + 1;
    }
    if (r->start < start) { /* keep the left part */
      r->end = start;
      at = ++i;
      continue;
    }
    if (r->end > end) { /* keep the right part */
      r->start = end;
      return i;
    }
    memmove(r, r + 1, (t->n - i - 1) * sizeof *r); /* wholly inside: gone */
    t->n--;
  }
  return at == UINT32_MAX || at > t->n ? t->n : at;
}

/* Joins the two neighbours with the smallest gap until the table fits;
 * the joined range takes the record of `keep` when it is one of them. */
static void fit(cb_xcell_table *t, uint32_t keep) {
  while (t->n > CB_XCELL_RANGES) {
    uint32_t best = 0;
    for (uint32_t i = 1; i + 1 < t->n; i++)
      if (t->ranges[i + 1].start - t->ranges[i].end < t->ranges[best + 1].start - t->ranges[best].end) best = i;
    cb_xcell_range *a = &t->ranges[best], *b = &t->ranges[best + 1];
    if (best + 1 == keep) a->record = b->record;
    a->end = b->end;
    memmove(b, b + 1, (t->n - best - 2) * sizeof *b);
    t->n--;
    if (keep > best) keep--;
  }
}

void cb_xcell_set(cb_xcell *cell, uint64_t start, uint64_t end, const cubert_failure_record *record) {
  if (end > cell->size) end = cell->size;
  if (start >= end) return;
  cb_xcell_table *t = begin(cell);
  uint32_t at = cut(t, start, end);
  insert_at(t, at, start, end, record);
  fit(t, at);
  commit(cell, t);
}

void cb_xcell_clear(cb_xcell *cell, uint64_t start, uint64_t end) {
  if (end > cell->size) end = cell->size;
  if (start >= end) return;
  cb_xcell_table *t = begin(cell);
  cut(t, start, end);
  /* a hole cut in the middle of a range adds one: without fit, repeated
   * repairs inside ranges would grow the table past its two spare slots
   * and write beyond the segment's tables */
  fit(t, UINT32_MAX);
  commit(cell, t);
}

void cb_xcell_set_pattern(cb_xcell *cell, const cb_pattern *p, const cubert_failure_record *record) {
  if (p->lo >= p->hi) return;
  cb_xcell_table *t = begin(cell);
  if (p->hi - p->lo > CB_XCELL_RANGES) {
    /* more runs than the table holds: fit would join them all, gaps
     * included, so taint their bounds at once */
    uint64_t start = cb_pattern_start(p), end = cb_pattern_end(p);
    if (end > cell->size) end = cell->size;
    if (start < end) {
      uint32_t at = cut(t, start, end);
      insert_at(t, at, start, end, record);
      fit(t, at);
    }
  } else {
    for (uint64_t k = p->lo; k < p->hi; k++) {
      uint64_t start = cb_pattern_off(p, k), end = start + p->run;
      if (end > cell->size) end = cell->size;
      if (start >= end) continue;
      uint32_t at = cut(t, start, end);
      insert_at(t, at, start, end, record);
      fit(t, at);
    }
  }
  commit(cell, t);
}

/* Runs a pattern clear cuts out of the cell at most: each cut of a run
 * inside a range adds one, and fit joins the table back to
 * CB_XCELL_RANGES, so more would mostly be joined again; the runs past it
 * stay tainted (never untainted bytes: a repair the cell cannot hold). */
#define XCELL_PATTERN_CUTS (4 * CB_XCELL_RANGES)

void cb_xcell_clear_pattern(cb_xcell *cell, const cb_pattern *p) {
  if (p->lo >= p->hi) return;
  const cb_xcell_table *now = &cell->tables[atomic_load(&cell->current)];
  if (now->n == 0) return;
  uint64_t ps = cb_pattern_start(p), pe = cb_pattern_end(p);
  /* the pieces of the footprint inside tainted ranges, from the table in
   * force (begin() copies it: `now` stays as it is until the commit) */
  struct piece {
    uint64_t s, e;
  } pieces[XCELL_PATTERN_CUTS];
  uint32_t np = 0;
  for (uint32_t i = 0; i < now->n && np < XCELL_PATTERN_CUTS; i++) {
    const cb_xcell_range *r = &now->ranges[i];
    if (r->end <= ps) continue;
    if (r->start >= pe) break;
    uint64_t k0, k1;
    cb_pattern_runs_in(p, r->start, r->end, &k0, &k1);
    for (uint64_t k = k0; k < k1 && np < XCELL_PATTERN_CUTS; k++) {
      uint64_t o = cb_pattern_off(p, k);
      pieces[np].s = o > r->start ? o : r->start;
      pieces[np].e = o + p->run < r->end ? o + p->run : r->end;
      np++;
    }
  }
  if (np == 0) return;
  cb_xcell_table *t = begin(cell);
  for (uint32_t i = 0; i < np; i++) {
    cut(t, pieces[i].s, pieces[i].e);
    fit(t, UINT32_MAX);
  }
  commit(cell, t);
}

bool cb_xcell_first(const cb_xcell *cell, uint64_t from, uint64_t end, uint64_t *range_start,
                    uint64_t *range_end, const cubert_failure_record **record) {
  const cb_xcell_table *t = &cell->tables[atomic_load(&((cb_xcell *)cell)->current)];
  for (uint32_t i = 0; i < t->n; i++) {
    const cb_xcell_range *r = &t->ranges[i];
    if (r->end <= from) continue;
    if (r->start >= end) return false;
    if (range_start) *range_start = r->start > from ? r->start : from;
    if (range_end) *range_end = r->end < end ? r->end : end;
    if (record) *record = &r->record;
    return true;
  }
  return false;
}
