/* base/strided.h: walking a strided transfer (cubert_backend_strided) run by
 * run, for every layer that moves or checks strided bytes: the host
 * backend's loops, the fault layer's partial transfers and scribbles, the
 * runtime's checks. Row-major order over the counts, the last fastest. */
#ifndef CUBERT_BASE_STRIDED_H
#define CUBERT_BASE_STRIDED_H

#include <stdint.h>

#include "backends/backend.h"

/* Runs in the layout: the product of its counts (1 with no dimension). */
uint64_t cb_strided_runs(const cubert_backend_strided *l);
/* Byte offsets of run `k` (row-major) from src and from dst. */
void cb_strided_offsets(const cubert_backend_strided *l, uint64_t k, uint64_t *src_off, uint64_t *dst_off);
/* Bytes from the first byte of run 0 to the end of the last run, on each
 * side (0 when the layout has no run); pitches must not overflow (the
 * runtime checked them). */
void cb_strided_spans(const cubert_backend_strided *l, uint64_t *src_span, uint64_t *dst_span);
/* Moves the first `nruns` runs from `src` to `dst` (host memory). */
void cb_strided_move(unsigned char *dst, const unsigned char *src, const cubert_backend_strided *l,
                     uint64_t nruns);
/* Calls `fn(ctx, dst_off, len)` for each of the first `nruns` runs, in
 * order, with its destination offset. */
void cb_strided_each_dst(const cubert_backend_strided *l, uint64_t nruns,
                         void (*fn)(void *ctx, uint64_t dst_off, uint64_t len), void *ctx);

#endif
