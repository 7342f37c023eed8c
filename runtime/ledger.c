/* runtime/ledger.c: the taint ledger of one allocation, an interval map.
 *
 * Sorted, disjoint [start, end) ranges, each holding a reference to the
 * failure that taints it. Lookups are binary searches (logarithmic in the
 * ranges); set and clear split the ranges they cut. An allocation with no
 * failure has n == 0, which callers test first: one branch. */
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "runtime/internal.h"

uint32_t cb_ledger_lower(const cb_ledger *l, uint64_t start) {
  uint32_t lo = 0, hi = l->n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (l->v[mid].end <= start)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static bool reserve(cb_ledger *l, uint32_t extra) {
  if (l->n + extra <= l->cap) return true;
  size_t cap;
  cb_taint *v = cb_array_grow(l->v, l->cap, (size_t)l->n + extra, sizeof *v, &cap);
  if (!v) return false;
  l->v = v;
  l->cap = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
  return true;
}

/* Removes [start, end) from the map; leaves a gap at the returned index. */
static uint32_t cut(cb_ledger *l, uint64_t start, uint64_t end) {
  uint32_t i = cb_ledger_lower(l, start);
  if (i < l->n && l->v[i].start < start && l->v[i].end > end) {
    /* one range covers the hole on both sides: split it in two */
    if (!reserve(l, 1)) return i; /* keep the taint rather than lose it */
    memmove(&l->v[i + 2], &l->v[i + 1], (l->n - i - 1) * sizeof *l->v);
    l->v[i + 1] = (cb_taint){end, l->v[i].end, l->v[i].failure};
    cubert_failure_retain(l->v[i].failure);
    l->v[i].end = start;
    l->n++;
    return i + 1;
  }
  if (i < l->n && l->v[i].start < start) {
    l->v[i].end = start; /* trim the left neighbour */
    i++;
  }
  uint32_t j = i;
  while (j < l->n && l->v[j].end <= end) {
    cubert_failure_release(l->v[j].failure);
    j++;
  }
  if (j < l->n && l->v[j].start < end) l->v[j].start = end; /* trim the right one */
  if (j > i) {
    memmove(&l->v[i], &l->v[j], (l->n - j) * sizeof *l->v);
    l->n -= j - i;
  }
  return i;
}

void cb_ledger_clear(cb_ledger *l, uint64_t start, uint64_t end) {
  if (l->n == 0 || start >= end) return;
  cut(l, start, end);
  if (l->n == 0) {
    free(l->v);
    l->v = NULL;
    l->cap = 0;
  }
}

void cb_ledger_set(cb_ledger *l, uint64_t start, uint64_t end, cubert_failure *f) {
  if (start >= end || !f) return;
  uint32_t i = l->n ? cut(l, start, end) : 0;
  if (!reserve(l, 1)) return;
  memmove(&l->v[i + 1], &l->v[i], (l->n - i) * sizeof *l->v);
  cubert_failure_retain(f);
  l->v[i] = (cb_taint){start, end, f};
  l->n++;
}

cubert_failure *cb_ledger_first(const cb_ledger *l, uint64_t start, uint64_t end) {
  if (l->n == 0) return NULL;
  uint32_t i = cb_ledger_lower(l, start);
  if (i < l->n && l->v[i].start < end && start < end) return l->v[i].failure;
  return NULL;
}

size_t cb_ledger_report(const cb_ledger *l, uint64_t start, uint64_t end, cb_errb *b) {
  size_t found = 0;
  if (l->n == 0 || start >= end) return 0;
  for (uint32_t i = cb_ledger_lower(l, start); i < l->n && l->v[i].start < end; i++) {
    uint64_t s = l->v[i].start > start ? l->v[i].start : start;
    uint64_t e = l->v[i].end < end ? l->v[i].end : end;
    cb_errb_add(b, l->v[i].failure, s, e);
    found++;
  }
  return found;
}

void cb_ledger_free(cb_ledger *l) {
  for (uint32_t i = 0; i < l->n; i++) cubert_failure_release(l->v[i].failure);
  free(l->v);
  memset(l, 0, sizeof *l);
}
