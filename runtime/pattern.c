/* runtime/pattern.c: strided footprints; see pattern.h. */
#include "runtime/pattern.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

uint64_t cb_pattern_total(const cb_pattern *p) {
  uint64_t n = 1;
  for (uint32_t d = 0; d < p->nd; d++) n *= p->count[d];
  return n;
}

uint64_t cb_pattern_off(const cb_pattern *p, uint64_t k) {
  uint64_t off = p->base;
  for (uint32_t d = p->nd; d-- > 0;) {
    off += (k % p->count[d]) * p->pitch[d];
    k /= p->count[d];
  }
  return off;
}

uint64_t cb_pattern_first_ge(const cb_pattern *p, uint64_t x) {
  if (x <= p->base) return 0;
  if (p->nd == 0) return 1;
  uint64_t y = x - p->base;
  uint64_t inner_last[CUBERT_VIEW_MAX_DIMS], below[CUBERT_VIEW_MAX_DIMS];
  uint64_t last = 0, runs = 1;
  for (uint32_t d = p->nd; d-- > 0;) {
    inner_last[d] = last; /* offset of the last run inside one step of d */
    below[d] = runs;      /* runs inside one step of d */
    last += (p->count[d] - 1) * p->pitch[d];
    runs *= p->count[d];
  }
  uint64_t k = 0, c = 0;
  for (uint32_t d = 0; d < p->nd; d++) {
    /* the first step of d whose last run starts at or after y */
    /* a ceiling division that cannot wrap: x may be as large as UINT64_MAX
     * (a taint of the whole allocation ends there, cb_ledger) */
    uint64_t need = y > c + inner_last[d] ? y - c - inner_last[d] : 0;
    uint64_t i = need / p->pitch[d] + (need % p->pitch[d] != 0);
    if (i >= p->count[d]) return (k + 1) * p->count[d] * below[d]; /* the next block's first run */
    k = k * p->count[d] + i;
    c += i * p->pitch[d];
    if (c >= y) return k * below[d];
  }
  return k;
}

void cb_pattern_runs_in(const cb_pattern *p, uint64_t s, uint64_t e, uint64_t *k0, uint64_t *k1) {
  uint64_t a = s + 1 > p->run ? cb_pattern_first_ge(p, s + 1 - p->run) : 0;
  uint64_t b = cb_pattern_first_ge(p, e);
  *k0 = a > p->lo ? a : p->lo;
  *k1 = b < p->hi ? b : p->hi;
}

uint64_t cb_pattern_start(const cb_pattern *p) { return cb_pattern_off(p, p->lo); }
uint64_t cb_pattern_end(const cb_pattern *p) { return cb_pattern_off(p, p->hi - 1) + p->run; }

bool cb_pattern_same_layout(const cb_pattern *a, const cb_pattern *b) {
  if (a->base != b->base || a->run != b->run || a->nd != b->nd) return false;
  for (uint32_t d = 0; d < a->nd; d++)
    if (a->count[d] != b->count[d] || a->pitch[d] != b->pitch[d]) return false;
  return true;
}

bool cb_pattern_meet_range(const cb_pattern *a, uint64_t s, uint64_t e,
                           void (*fn)(void *ctx, uint64_t s, uint64_t e), void *ctx) {
  if (s >= e || a->lo >= a->hi) return false;
  uint64_t k0, k1;
  cb_pattern_runs_in(a, s, e, &k0, &k1);
  if (k0 >= k1) return false;
  for (uint64_t k = k0; fn && k < k1; k++) {
    uint64_t o = cb_pattern_off(a, k);
    fn(ctx, o > s ? o : s, o + a->run < e ? o + a->run : e);
  }
  return true;
}

/* Two layouts of one dimension with the same pitch P (two column blocks of
 * one matrix): run k of a and run k + m of b are P*m + (b.base - a.base)
 * apart, and since runs are at most P long, only the (at most two) m that
 * put that distance inside (-b.run, a.run) can meet. O(1) to answer, plus
 * the pieces. */
static bool meet_periodic(const cb_pattern *a, const cb_pattern *b, void (*fn)(void *ctx, uint64_t s, uint64_t e),
                          void *ctx) {
  int64_t P = (int64_t)a->pitch[0], d = (int64_t)b->base - (int64_t)a->base;
  int64_t ra = (int64_t)a->run, rb = (int64_t)b->run;
  /* delta(m) = d + m P in (-rb, ra): m from ceil((-rb + 1 - d) / P) up */
  int64_t num = -rb + 1 - d, m0 = num >= 0 ? (num + P - 1) / P : -((-num) / P);
  int64_t ms[2];
  int nm = 0;
  for (int64_t m = m0; m < m0 + 2; m++)
    if (d + m * P < ra && d + m * P > -rb) ms[nm++] = m;
  /* k in a's runs with k + m in b's: [max(a.lo, b.lo - m), min(a.hi, b.hi - m)) */
  int64_t lo[2], hi[2];
  bool any = false;
  for (int i = 0; i < nm; i++) {
    lo[i] = (int64_t)a->lo > (int64_t)b->lo - ms[i] ? (int64_t)a->lo : (int64_t)b->lo - ms[i];
    hi[i] = (int64_t)a->hi < (int64_t)b->hi - ms[i] ? (int64_t)a->hi : (int64_t)b->hi - ms[i];
    any = any || lo[i] < hi[i];
  }
  if (!fn || !any) return any;
  int64_t from = INT64_MAX, to = INT64_MIN;
  for (int i = 0; i < nm; i++)
    if (lo[i] < hi[i]) {
      if (lo[i] < from) from = lo[i];
      if (hi[i] > to) to = hi[i];
    }
  for (int64_t k = from; k < to; k++)
    for (int i = 0; i < nm; i++) /* ms ascending: pieces in address order */
      if (k >= lo[i] && k < hi[i]) {
        int64_t as = (int64_t)a->base + k * P, bs = as + d + ms[i] * P;
        int64_t s = as > bs ? as : bs, e = as + ra < bs + rb ? as + ra : bs + rb;
        fn(ctx, (uint64_t)s, (uint64_t)e);
      }
  return true;
}

bool cb_pattern_meet(const cb_pattern *a, const cb_pattern *b, void (*fn)(void *ctx, uint64_t s, uint64_t e),
                     void *ctx) {
  if (a->lo >= a->hi || b->lo >= b->hi) return false;
  if (cb_pattern_same_layout(a, b)) {
    uint64_t lo = a->lo > b->lo ? a->lo : b->lo, hi = a->hi < b->hi ? a->hi : b->hi;
    for (uint64_t k = lo; fn && k < hi; k++) {
      uint64_t o = cb_pattern_off(a, k);
      fn(ctx, o, o + a->run);
    }
    return lo < hi;
  }
  if (a->nd == 1 && b->nd == 1 && a->pitch[0] == b->pitch[0]) return meet_periodic(a, b, fn, ctx);
  uint64_t as = cb_pattern_start(a), ae = cb_pattern_end(a);
  uint64_t bs = cb_pattern_start(b), be = cb_pattern_end(b);
  uint64_t s = as > bs ? as : bs, e = ae < be ? ae : be;
  if (s >= e) return false;
  uint64_t a0, a1, b0, b1;
  cb_pattern_runs_in(a, s, e, &a0, &a1);
  cb_pattern_runs_in(b, s, e, &b0, &b1);
  if (a0 >= a1 || b0 >= b1) return false;
  /* walk the sparser one, ask the other about each of its runs */
  const cb_pattern *x = a1 - a0 <= b1 - b0 ? a : b, *y = x == a ? b : a;
  uint64_t k0 = x == a ? a0 : b0, k1 = x == a ? a1 : b1;
  bool met = false;
  for (uint64_t k = k0; k < k1; k++) {
    uint64_t o = cb_pattern_off(x, k);
    if (cb_pattern_meet_range(y, o, o + x->run, fn, ctx)) {
      met = true;
      if (!fn) return true;
    }
  }
  return met;
}

/* ------------------------------------------------------------ views */

static bool mul_over(uint64_t a, uint64_t b, uint64_t *out) { return __builtin_mul_overflow(a, b, out); }
static bool add_over(uint64_t a, uint64_t b, uint64_t *out) { return __builtin_add_overflow(a, b, out); }

cubert_status cb_pattern_from_view(const cubert_view *v, uint64_t start, uint64_t end, cb_pattern *out,
                                   bool *empty, char *why, size_t n) {
  if (v->ndims == 0 || v->ndims > CUBERT_VIEW_MAX_DIMS) {
    snprintf(why, n, "%u dimensions (1 to %d)", v->ndims, CUBERT_VIEW_MAX_DIMS);
    return CUBERT_ERR_INVALID_ARGUMENT;
  }
  uint64_t elem = v->elem_size;
  if (elem != 1 && elem != 2 && elem != 4 && elem != 8 && elem != 16) {
    snprintf(why, n, "element size %u (1, 2, 4, 8 or 16)", v->elem_size);
    return CUBERT_ERR_INVALID_ARGUMENT;
  }
  *empty = false;
  for (uint32_t d = 0; d < v->ndims; d++) {
    if (v->shape[d] == 0) *empty = true;
    if (v->shape[d] > 1 && v->strides[d] == 0) {
      snprintf(why, n, "dimension %u: stride 0 with %llu elements (elements would share bytes)", d,
               (unsigned long long)v->shape[d]);
      return CUBERT_ERR_INVALID_ARGUMENT;
    }
  }
  uint64_t first, len = end - start;
  if (mul_over(v->offset, elem, &first) || first > len) {
    snprintf(why, n, "offset of %llu elements of %llu bytes lies past the %llu-byte view",
             (unsigned long long)v->offset, (unsigned long long)elem, (unsigned long long)len);
    return CUBERT_ERR_OUT_OF_RANGE;
  }
  if ((start + first) % elem) {
    snprintf(why, n, "the first element, at allocation byte %llu, is not aligned to its %llu bytes",
             (unsigned long long)(start + first), (unsigned long long)elem);
    return CUBERT_ERR_INVALID_ARGUMENT;
  }
  if (*empty) return CUBERT_OK;
  /* every extent within the view, in the order given: the message names
   * the dimension that first reaches past it */
  uint64_t reach = first + elem; /* end of the furthest element so far */
  for (uint32_t d = 0; d < v->ndims; d++) {
    uint64_t step, ext;
    if (mul_over(v->shape[d] - 1, v->strides[d], &step) || mul_over(step, elem, &ext) ||
        add_over(reach, ext, &reach)) {
      snprintf(why, n, "dimension %u: %llu elements at a stride of %llu overflow 64-bit byte offsets", d,
               (unsigned long long)v->shape[d], (unsigned long long)v->strides[d]);
      return CUBERT_ERR_OUT_OF_RANGE;
    }
    if (reach > len) {
      snprintf(why, n,
               "dimension %u: %llu elements at a stride of %llu reach byte %llu of a %llu-byte view",
               d, (unsigned long long)v->shape[d], (unsigned long long)v->strides[d], (unsigned long long)reach,
               (unsigned long long)len);
      return CUBERT_ERR_OUT_OF_RANGE;
    }
  }
  /* dimensions of more than one element, by stride, largest first */
  uint32_t order[CUBERT_VIEW_MAX_DIMS], m = 0;
  for (uint32_t d = 0; d < v->ndims; d++)
    if (v->shape[d] > 1) order[m++] = d;
  for (uint32_t i = 1; i < m; i++)
    for (uint32_t j = i; j > 0 && v->strides[order[j - 1]] < v->strides[order[j]]; j--) {
      uint32_t t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  /* no two elements share a byte: each stride clears what is inside it */
  uint64_t span = elem; /* bytes from the first element to the end of the last, inner dims */
  for (uint32_t i = m; i-- > 0;) {
    uint32_t d = order[i];
    uint64_t pitch = v->strides[d] * elem; /* no overflow: checked above */
    if (pitch < span) {
      snprintf(why, n,
               "dimension %u: a stride of %llu elements is less than the %llu elements the dimensions "
               "inside it span (dimensions must nest: their elements would share bytes or interleave)",
               d, (unsigned long long)v->strides[d], (unsigned long long)(span / elem));
      return CUBERT_ERR_INVALID_ARGUMENT;
    }
    span = (v->shape[d] - 1) * pitch + span;
  }
  cb_pattern p;
  memset(&p, 0, sizeof p);
  p.base = start + first;
  p.run = elem;
  /* innermost dimensions that continue the run join it; neighbours whose
   * pitches nest exactly merge */
  while (m > 0 && v->strides[order[m - 1]] * elem == p.run) {
    p.run *= v->shape[order[m - 1]];
    m--;
  }
  for (uint32_t i = 0; i < m; i++) {
    uint32_t d = order[i];
    uint64_t pitch = v->strides[d] * elem;
    if (p.nd && p.pitch[p.nd - 1] == pitch * v->shape[d]) {
      p.count[p.nd - 1] *= v->shape[d];
      p.pitch[p.nd - 1] = pitch;
    } else {
      p.count[p.nd] = v->shape[d];
      p.pitch[p.nd] = pitch;
      p.nd++;
    }
  }
  p.lo = 0;
  p.hi = cb_pattern_total(&p);
  *out = p;
  return CUBERT_OK;
}
