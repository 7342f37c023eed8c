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
#include <stdlib.h>
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

static void taint_all(cb_ledger *l, cubert_failure *f);

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

static void cclear(cb_ledger *l, uint64_t start, uint64_t end) {
  if (l->n == l->ns || start >= end || l->all.failure) return;
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

static void cset(cb_ledger *l, uint64_t start, uint64_t end, cubert_failure *f) {
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

cubert_failure *cb_ledger_first(const cb_ledger *l, uint64_t start, uint64_t end) {
  uint64_t s, e;
  cubert_failure *f = NULL;
  return l->n && cb_ledger_first_piece(l, start, end, &s, &e, &f) ? f : NULL;
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

/* ------------------------------------------------------------ strided claims
 *
 * A second treap holds strided claims, keyed by their first byte, each
 * node knowing the largest end in its subtree, so the claims whose bounds
 * meet a range are found without visiting the others. No byte is in two
 * entries of either tree: every set first clears what it covers.
 *
 * Cutting a strided claim by a contiguous write keeps one layout: the runs
 * before the write and after it stay two claims (the same pattern, a
 * narrower run range), the two runs the write cuts leave at most two
 * contiguous ranges. Cutting a contiguous range by a strided write leaves
 * the head, the tail and the gaps between the runs: for a layout of one
 * dimension the gaps are one strided claim (runs of pitch - run bytes),
 * for deeper layouts one range per gap. A strided write over a strided
 * claim of the same layout narrows its run range; of another layout, the
 * claim's runs inside the write's bounds become ranges less the write. */

static void supd(cb_sclaim *t) {
  uint64_t m = t->end;
  if (t->left && t->left->maxend > m) m = t->left->maxend;
  if (t->right && t->right->maxend > m) m = t->right->maxend;
  t->maxend = m;
}

static void ssplit(cb_sclaim *t, uint64_t key, cb_sclaim **lo, cb_sclaim **hi) {
  if (!t) {
    *lo = *hi = NULL;
  } else if (t->start < key) {
    ssplit(t->right, key, &t->right, hi);
    supd(t);
    *lo = t;
  } else {
    ssplit(t->left, key, lo, &t->left);
    supd(t);
    *hi = t;
  }
}

static cb_sclaim *sjoin(cb_sclaim *a, cb_sclaim *b) {
  if (!a) return b;
  if (!b) return a;
  if (a->prio >= b->prio) {
    a->right = sjoin(a->right, b);
    supd(a);
    return a;
  }
  b->left = sjoin(a, b->left);
  supd(b);
  return b;
}

/* Puts the runs [lo, hi) of `p` with `f` in the strided tree (a reference
 * of its own); nothing when the range is empty or out of memory. */
static void sinsert(cb_ledger *l, const cb_pattern *p, uint64_t lo, uint64_t hi, cubert_failure *f) {
  if (lo >= hi || l->all.failure) return;
  cb_sclaim *c = cb_malloc(sizeof *c);
  if (!c) {
    taint_all(l, f);
    return;
  }
  c->p = *p;
  c->p.lo = lo;
  c->p.hi = hi;
  c->start = cb_pattern_start(&c->p);
  c->end = cb_pattern_end(&c->p);
  c->maxend = c->end;
  c->failure = f;
  cubert_failure_retain(f);
  c->left = c->right = NULL;
  c->prio = next_prio(l);
  cb_sclaim *a, *b;
  ssplit(l->sroot, c->start, &a, &b);
  l->sroot = sjoin(sjoin(a, c), b);
  l->n++;
  l->ns++;
}

/* Takes every claim whose bounds meet [s, e) out of `t`, chained through
 * `left` onto *out; returns what is left of `t`. */
static cb_sclaim *sextract(cb_sclaim *t, uint64_t s, uint64_t e, cb_sclaim **out) {
  if (!t || t->maxend <= s) return t;
  t->left = sextract(t->left, s, e, out);
  if (t->start < e) t->right = sextract(t->right, s, e, out);
  if (t->start < e && t->end > s) {
    cb_sclaim *rest = sjoin(t->left, t->right);
    t->left = *out;
    t->right = NULL;
    *out = t;
    return rest;
  }
  supd(t);
  return t;
}

static cb_sclaim *take(cb_ledger *l, uint64_t s, uint64_t e) {
  cb_sclaim *out = NULL;
  if (l->ns && s < e) l->sroot = sextract(l->sroot, s, e, &out);
  for (cb_sclaim *c = out; c; c = c->left) {
    l->n--;
    l->ns--;
  }
  return out;
}

static void sfree(cb_sclaim *c) {
  cubert_failure_release(c->failure);
  cb_free(c);
}

typedef void (*piece_fn)(void *ctx, uint64_t s, uint64_t e);

/* Calls fn for every claim whose bounds meet [s, e), in no set order. */
static void svisit(const cb_sclaim *t, uint64_t s, uint64_t e, void (*fn)(void *ctx, const cb_sclaim *c),
                   void *ctx) {
  while (t && t->maxend > s) {
    svisit(t->left, s, e, fn, ctx);
    if (t->start >= e) return;
    if (t->end > s) fn(ctx, t);
    t = t->right;
  }
}

/* Removes [s, e) from the strided claims: what they held outside it stays. */
static void cut_claims(cb_ledger *l, uint64_t s, uint64_t e) {
  cb_sclaim *c = take(l, s, e);
  while (c) {
    cb_sclaim *next = c->left;
    uint64_t k0, k1;
    cb_pattern_runs_in(&c->p, s, e, &k0, &k1);
    if (k0 >= k1) {
      sinsert(l, &c->p, c->p.lo, c->p.hi, c->failure);
    } else {
      sinsert(l, &c->p, c->p.lo, k0, c->failure);
      sinsert(l, &c->p, k1, c->p.hi, c->failure);
      uint64_t o0 = cb_pattern_off(&c->p, k0), o1 = cb_pattern_off(&c->p, k1 - 1) + c->p.run;
      if (o0 < s) cset(l, o0, s, c->failure);
      if (o1 > e) cset(l, e, o1, c->failure);
    }
    sfree(c);
    c = next;
  }
}

void cb_ledger_set(cb_ledger *l, uint64_t start, uint64_t end, cubert_failure *f) {
  if (start >= end || !f || l->all.failure) return;
  if (l->ns) cut_claims(l, start, end);
  cset(l, start, end, f);
}

void cb_ledger_clear(cb_ledger *l, uint64_t start, uint64_t end) {
  if (l->n == 0 || start >= end || l->all.failure) return;
  if (l->ns) cut_claims(l, start, end);
  cclear(l, start, end);
}

/* Taints [a, b) less the footprint of `p` with `f`; nothing of [a, b) is
 * in the ledger. */
static void add_minus(cb_ledger *l, uint64_t a, uint64_t b, const cb_pattern *p, cubert_failure *f) {
  uint64_t k0, k1;
  cb_pattern_runs_in(p, a, b, &k0, &k1);
  if (k0 >= k1) {
    cset(l, a, b, f);
    return;
  }
  uint64_t first = cb_pattern_off(p, k0), last = cb_pattern_off(p, k1 - 1) + p->run;
  if (first > a) cset(l, a, first, f);
  if (last < b) cset(l, last, b, f);
  if (k1 - k0 < 2) return;
  if (p->nd == 1 && p->pitch[0] > p->run) {
    /* the gaps after runs k0 .. k1-2: one claim of the same counts */
    cb_pattern g = *p;
    g.base = p->base + p->run;
    g.run = p->pitch[0] - p->run;
    sinsert(l, &g, k0, k1 - 1, f);
    return;
  }
  for (uint64_t k = k0; k + 1 < k1; k++) {
    uint64_t gs = cb_pattern_off(p, k) + p->run, ge = cb_pattern_off(p, k + 1);
    if (gs < ge) cset(l, gs, ge, f);
  }
}

void cb_ledger_clear_pattern(cb_ledger *l, const cb_pattern *p) {
  if (l->all.failure) return;
  if (l->n == 0 || p->lo >= p->hi) return;
  uint64_t ps = cb_pattern_start(p), pe = cb_pattern_end(p);
  /* contiguous ranges the footprint meets: out, then back less the footprint */
  struct hit {
    uint64_t a, b;
    cubert_failure *f;
  } *hits = NULL;
  size_t nh = 0, caph = 0;
  for (const cb_taint *t = l->n > l->ns ? cb_ledger_lower(l, ps) : NULL; t && t->start < pe;
       t = cb_ledger_next(l, t)) {
    if (!cb_pattern_meet_range(p, t->start, t->end, NULL, NULL)) continue;
    if (nh == caph) {
      size_t cap = caph ? caph * 2 : 8;
      struct hit *v = cb_realloc(hits, cap * sizeof *v);
      if (!v) break; /* out of memory: those ranges stay tainted, never lost */
      hits = v;
      caph = cap;
    }
    cubert_failure_retain(t->failure);
    hits[nh++] = (struct hit){t->start, t->end, t->failure};
  }
  for (size_t i = 0; i < nh; i++) {
    cclear(l, hits[i].a, hits[i].b);
    add_minus(l, hits[i].a, hits[i].b, p, hits[i].f);
    cubert_failure_release(hits[i].f);
  }
  cb_free(hits);
  /* strided claims whose bounds meet it */
  cb_sclaim *c = take(l, ps, pe);
  while (c) {
    cb_sclaim *next = c->left;
    if (cb_pattern_same_layout(&c->p, p)) {
      uint64_t mid_lo = p->lo > c->p.lo ? p->lo : c->p.lo, mid_hi = p->hi < c->p.hi ? p->hi : c->p.hi;
      if (mid_lo >= mid_hi) {
        sinsert(l, &c->p, c->p.lo, c->p.hi, c->failure);
      } else {
        sinsert(l, &c->p, c->p.lo, mid_lo, c->failure);
        sinsert(l, &c->p, mid_hi, c->p.hi, c->failure);
      }
    } else if (!cb_pattern_meet(&c->p, p, NULL, NULL)) {
      sinsert(l, &c->p, c->p.lo, c->p.hi, c->failure);
    } else {
      uint64_t k0, k1;
      cb_pattern_runs_in(&c->p, ps, pe, &k0, &k1);
      sinsert(l, &c->p, c->p.lo, k0, c->failure);
      sinsert(l, &c->p, k1, c->p.hi, c->failure);
      for (uint64_t k = k0; k < k1; k++) {
        uint64_t o = cb_pattern_off(&c->p, k);
        add_minus(l, o, o + c->p.run, p, c->failure);
      }
    }
    sfree(c);
    c = next;
  }
}

void cb_ledger_set_pattern(cb_ledger *l, const cb_pattern *p, cubert_failure *f) {
  if (l->all.failure) return;
  if (!f || p->lo >= p->hi) return;
  cb_ledger_clear_pattern(l, p);
  if (p->hi - p->lo == 1) {
    uint64_t o = cb_pattern_off(p, p->lo);
    cset(l, o, o + p->run, f);
  } else {
    sinsert(l, p, p->lo, p->hi, f);
  }
}

/* ------------------------------------------------------------ strided lookups */

typedef struct report_ctx {
  cb_errb *b;
  const cubert_failure *f;
  const cb_pattern *p; /* the read's footprint, or NULL for [s, e) */
  uint64_t s, e;
} report_ctx;

static void report_piece(void *ctx, uint64_t s, uint64_t e) {
  report_ctx *r = ctx;
  cb_errb_add(r->b, r->f, s, e);
}

static void report_claim(void *ctx, const cb_sclaim *c) {
  report_ctx *r = ctx;
  r->f = c->failure;
  if (r->p)
    cb_pattern_meet(&c->p, r->p, report_piece, r);
  else
    cb_pattern_meet_range(&c->p, r->s, r->e, report_piece, r);
}

static int by_start(const void *a, const void *b) {
  const cb_err_entry *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

static size_t sorted_since(cb_errb *b, size_t before) {
  if (b->n - before > 1) qsort(b->entries + before, b->n - before, sizeof *b->entries, by_start);
  return b->n - before;
}

size_t cb_ledger_report(const cb_ledger *l, uint64_t start, uint64_t end, cb_errb *b) {
  if (l->n == 0 || start >= end) return 0;
  if (l->all.failure) {
    cb_errb_add(b, l->all.failure, start, end);
    return 1;
  }
  size_t before = b->n;
  walk(l->root, start, end, b);
  if (l->ns) {
    report_ctx r = {b, NULL, NULL, start, end};
    svisit(l->sroot, start, end, report_claim, &r);
    return sorted_since(b, before);
  }
  return b->n - before;
}

size_t cb_ledger_report_pattern(const cb_ledger *l, const cb_pattern *p, cb_errb *b) {
  if (l->n == 0 || p->lo >= p->hi) return 0;
  size_t before = b->n;
  uint64_t ps = cb_pattern_start(p), pe = cb_pattern_end(p);
  report_ctx r = {b, NULL, p, ps, pe};
  for (const cb_taint *t = l->n > l->ns ? cb_ledger_lower(l, ps) : NULL; t && t->start < pe;
       t = cb_ledger_next(l, t)) {
    r.f = t->failure;
    cb_pattern_meet_range(p, t->start, t->end, report_piece, &r);
  }
  if (l->ns) svisit(l->sroot, ps, pe, report_claim, &r);
  return sorted_since(b, before);
}

typedef struct first_ctx {
  uint64_t from, end;
  bool found;
  uint64_t s, e;
  cubert_failure *f;
} first_ctx;

static void first_claim(void *ctx, const cb_sclaim *c) {
  first_ctx *x = ctx;
  uint64_t k0, k1;
  cb_pattern_runs_in(&c->p, x->from, x->end, &k0, &k1);
  if (k0 >= k1) return;
  uint64_t o = cb_pattern_off(&c->p, k0);
  uint64_t s = o > x->from ? o : x->from;
  if (x->found && x->s <= s) return;
  x->found = true;
  x->s = s;
  x->e = o + c->p.run < x->end ? o + c->p.run : x->end;
  x->f = c->failure;
}

bool cb_ledger_first_piece(const cb_ledger *l, uint64_t from, uint64_t end, uint64_t *s, uint64_t *e,
                           cubert_failure **f) {
  if (l->n == 0 || from >= end) return false;
  first_ctx x = {from, end, false, 0, 0, NULL};
  const cb_taint *t = l->n > l->ns ? cb_ledger_lower(l, from) : NULL;
  if (t && t->start < end) {
    x.found = true;
    x.s = t->start > from ? t->start : from;
    x.e = t->end < end ? t->end : end;
    x.f = t->failure;
  }
  if (l->ns) svisit(l->sroot, from, x.found ? x.e : end, first_claim, &x);
  if (!x.found) return false;
  *s = x.s;
  *e = x.e;
  *f = x.f;
  return true;
}

static void seach(const cb_sclaim *t, void (*claim)(void *ctx, const cb_pattern *p, cubert_failure *f),
                  void *ctx) {
  for (; t; t = t->right) {
    seach(t->left, claim, ctx);
    claim(ctx, &t->p, t->failure);
  }
}

void cb_ledger_each(const cb_ledger *l, void (*range)(void *ctx, uint64_t s, uint64_t e, cubert_failure *f),
                    void (*claim)(void *ctx, const cb_pattern *p, cubert_failure *f), void *ctx) {
  for (const cb_taint *t = l->n > l->ns ? cb_ledger_lower(l, 0) : NULL; t; t = cb_ledger_next(l, t))
    range(ctx, t->start, t->end, t->failure);
  seach(l->sroot, claim, ctx);
}

static void sdrop(cb_sclaim *t) {
  while (t) {
    sdrop(t->left);
    cb_sclaim *r = t->right;
    sfree(t);
    t = r;
  }
}

/* Out of memory for a set: the whole allocation carries `f` from now on. */
static void taint_all(cb_ledger *l, cubert_failure *f) {
  cubert_failure_retain(f); /* before the drops: they may release its last other reference */
  drop(l->root);
  sdrop(l->sroot);
  l->root = NULL;
  l->sroot = NULL;
  l->ns = 0;
  l->all = (cb_taint){0, UINT64_MAX, f, NULL, NULL, 0};
  l->n = 1;
}

void cb_ledger_free(cb_ledger *l) {
  drop(l->root);
  sdrop(l->sroot);
  cubert_failure_release(l->all.failure);
  memset(l, 0, sizeof *l);
}
