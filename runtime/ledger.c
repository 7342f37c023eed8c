/* runtime/ledger.c: the taint ledger of one allocation, an interval map.
 *
 * Sorted, disjoint [start, end) ranges, each holding a reference to the
 * failure that taints it, in a treap (a binary search tree keyed by start,
 * heap-ordered by random priorities, so its depth is O(log n) expected).
 * set and clear split the tree at the two ends of their range, trim the
 * ranges they cut, drop the ones inside and join the rest: O(log n) plus
 * the ranges removed, wherever the range lies (an array that shifts made a
 * range at the front cost O(n)). An allocation with no failure has n == 0,
 * which callers test first: one branch. */
#include <string.h>

#include "base/alloc.h"
#include "runtime/internal.h"

static uint64_t next_prio(cb_ledger *l) {
  /* splitmix64 of a per-ledger counter: cheap, well spread */
  uint64_t z = (l->seed += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static cb_taint *node(cb_ledger *l, uint64_t start, uint64_t end, cubert_failure *f) {
  cb_taint *t = cb_malloc(sizeof *t);
  if (!t) return NULL;
  *t = (cb_taint){start, end, f, NULL, NULL, next_prio(l)};
  return t;
}

/* Splits `t` into the ranges starting before `key` (*lo) and the others (*hi). */
static void split(cb_taint *t, uint64_t key, cb_taint **lo, cb_taint **hi) {
  if (!t) {
    *lo = *hi = NULL;
  } else if (t->start < key) {
    split(t->right, key, &t->right, hi);
    *lo = t;
  } else {
    split(t->left, key, lo, &t->left);
    *hi = t;
  }
}

/* Joins two trees, every range of `a` before every range of `b`. */
static cb_taint *join(cb_taint *a, cb_taint *b) {
  if (!a) return b;
  if (!b) return a;
  if (a->prio >= b->prio) {
    a->right = join(a->right, b);
    return a;
  }
  b->left = join(a, b->left);
  return b;
}

static cb_taint *last(cb_taint *t) {
  while (t && t->right) t = t->right;
  return t;
}

/* Drops a tree, releasing its failures; returns how many ranges it held. */
static size_t drop(cb_taint *t) {
  size_t n = 0;
  while (t) {
    n += drop(t->left);
    cb_taint *r = t->right;
    cubert_failure_release(t->failure);
    cb_free(t);
    t = r;
    n++;
  }
  return n;
}

/* Takes [start, end) out of the ledger: the ranges before it in *lo, the
 * ranges after it in *hi, l->root left NULL. `spare` is a node for the one
 * case that needs one (a range covering the hole on both sides); the
 * function sets *spare to NULL when it used it. */
static void cut(cb_ledger *l, uint64_t start, uint64_t end, cb_taint **lo, cb_taint **hi,
                cb_taint **spare) {
  cb_taint *mid;
  split(l->root, start, lo, &mid);
  l->root = NULL;
  cb_taint *left = last(*lo);
  if (left && left->end > start) {
    if (left->end > end) {
      /* one range covers the hole on both sides: its right part goes after */
      cb_taint *right = *spare;
      *spare = NULL;
      *right = (cb_taint){end, left->end, left->failure, NULL, NULL, right->prio};
      cubert_failure_retain(left->failure);
      l->n++;
      mid = join(right, mid);
    }
    left->end = start; /* trim the left neighbour */
  }
  cb_taint *inside;
  split(mid, end, &inside, hi);
  cb_taint *m = last(inside);
  if (m && m->end > end) {
    /* the last range inside runs past the hole: keep its right part */
    split(inside, m->start, &inside, &m);
    m->start = end;
    *hi = join(m, *hi);
  }
  l->n -= drop(inside);
}

/* Out of memory for a set: the whole allocation carries `f` from now on. */
static void taint_all(cb_ledger *l, cubert_failure *f) {
  drop(l->root);
  cubert_failure_retain(f);
  l->root = NULL;
  l->all = (cb_taint){0, UINT64_MAX, f, NULL, NULL, 0};
  l->n = 1;
}

void cb_ledger_clear(cb_ledger *l, uint64_t start, uint64_t end) {
  if (l->n == 0 || start >= end || l->all.failure) return;
  cb_taint *spare = node(l, 0, 0, NULL);
  cb_taint *lo, *hi;
  if (!spare) {
    /* out of memory: a split needs a node; keep the taint rather than lose
     * it when one range covers the hole on both sides */
    const cb_taint *t = cb_ledger_lower(l, start);
    if (t && t->start < start && t->end > end) return;
  }
  cut(l, start, end, &lo, &hi, &spare);
  l->root = join(lo, hi);
  cb_free(spare);
}

void cb_ledger_set(cb_ledger *l, uint64_t start, uint64_t end, cubert_failure *f) {
  if (start >= end || !f || l->all.failure) return;
  cb_taint *t = node(l, start, end, f);
  cb_taint *spare = t ? node(l, 0, 0, NULL) : NULL;
  if (!spare) {
    cb_free(t);
    taint_all(l, f);
    return;
  }
  cb_taint *lo, *hi;
  cut(l, start, end, &lo, &hi, &spare);
  cubert_failure_retain(f);
  l->n++;
  l->root = join(join(lo, t), hi);
  cb_free(spare);
}

const cb_taint *cb_ledger_lower(const cb_ledger *l, uint64_t start) {
  if (l->all.failure) return start < l->all.end ? &l->all : NULL;
  const cb_taint *best = NULL;
  for (const cb_taint *t = l->root; t;) {
    if (t->end <= start)
      t = t->right;
    else {
      best = t;
      t = t->left;
    }
  }
  return best;
}

const cb_taint *cb_ledger_next(const cb_ledger *l, const cb_taint *after) {
  if (l->all.failure) return NULL;
  const cb_taint *best = NULL;
  for (const cb_taint *t = l->root; t;) {
    if (t->start <= after->start)
      t = t->right;
    else {
      best = t;
      t = t->left;
    }
  }
  return best;
}

/* In-order walk of the ranges of `t` overlapping [start, end), pruned:
 * O(log n + k) for k ranges found; recursion only into left subtrees, so
 * as deep as the tree. */
static size_t walk(const cb_taint *t, uint64_t start, uint64_t end, cb_errb *b) {
  size_t found = 0;
  for (; t; t = t->right) {
    if (start >= t->end) continue; /* t and its left subtree end before the read */
    if (t->start > start) found += walk(t->left, start, end, b);
    if (t->start >= end) break; /* t and its right subtree start after it */
    uint64_t s = t->start > start ? t->start : start;
    uint64_t e = t->end < end ? t->end : end;
    cb_errb_add(b, t->failure, s, e);
    found++;
  }
  return found;
}

size_t cb_ledger_report(const cb_ledger *l, uint64_t start, uint64_t end, cb_errb *b) {
  if (l->n == 0 || start >= end) return 0;
  if (l->all.failure) {
    cb_errb_add(b, l->all.failure, start, end);
    return 1;
  }
  return walk(l->root, start, end, b);
}

void cb_ledger_free(cb_ledger *l) {
  drop(l->root);
  cubert_failure_release(l->all.failure);
  memset(l, 0, sizeof *l);
}
