/* base/strided.c: see strided.h. The walk keeps an index per dimension and
 * steps it like an odometer, so a run costs O(1) amortised. */
#include "base/strided.h"

#include <string.h>

uint64_t cb_strided_runs(const cubert_backend_strided *l) {
  uint64_t n = 1;
  for (uint32_t d = 0; d < l->ndims; d++) n *= l->count[d];
  return n;
}

void cb_strided_offsets(const cubert_backend_strided *l, uint64_t k, uint64_t *src_off, uint64_t *dst_off) {
  uint64_t s = 0, t = 0;
  for (uint32_t d = l->ndims; d-- > 0;) {
    uint64_t i = k % l->count[d];
    k /= l->count[d];
    s += i * l->src_pitch[d];
    t += i * l->dst_pitch[d];
  }
  *src_off = s;
  *dst_off = t;
}

void cb_strided_spans(const cubert_backend_strided *l, uint64_t *src_span, uint64_t *dst_span) {
  uint64_t n = cb_strided_runs(l);
  if (n == 0 || l->run == 0) {
    *src_span = *dst_span = 0;
    return;
  }
  uint64_t s, t;
  cb_strided_offsets(l, n - 1, &s, &t);
  *src_span = s + l->run;
  *dst_span = t + l->run;
}

/* Steps index `idx` to the next run; returns the offsets' changes. */
static void step(const cubert_backend_strided *l, uint64_t *idx, uint64_t *s, uint64_t *t) {
  for (uint32_t d = l->ndims; d-- > 0;) {
    if (++idx[d] < l->count[d]) {
      *s += l->src_pitch[d];
      *t += l->dst_pitch[d];
      return;
    }
    idx[d] = 0;
    *s -= (l->count[d] - 1) * l->src_pitch[d];
    *t -= (l->count[d] - 1) * l->dst_pitch[d];
  }
}

void cb_strided_move(unsigned char *dst, const unsigned char *src, const cubert_backend_strided *l,
                     uint64_t nruns) {
  uint64_t idx[CUBERT_BACKEND_MAX_DIMS] = {0}, s = 0, t = 0;
  for (uint64_t k = 0; k < nruns; k++) {
    memmove(dst + t, src + s, (size_t)l->run);
    if (k + 1 < nruns) step(l, idx, &s, &t);
  }
}

void cb_strided_each_dst(const cubert_backend_strided *l, uint64_t nruns,
                         void (*fn)(void *ctx, uint64_t dst_off, uint64_t len), void *ctx) {
  uint64_t idx[CUBERT_BACKEND_MAX_DIMS] = {0}, s = 0, t = 0;
  for (uint64_t k = 0; k < nruns; k++) {
    fn(ctx, t, l->run);
    if (k + 1 < nruns) step(l, idx, &s, &t);
  }
}
