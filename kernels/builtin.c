/* kernels/builtin.c: the built-in kernel library (include/cubert/kernels.h).
 *
 * Each built-in is a static descriptor: parameters, one source in the subset
 * HIP and CUDA share (compiled at run time by hiprtc/NVRTC; no includes,
 * `unsigned long long` for 64 bits) and a host function for the host
 * backend that gives the same bytes. Element-wise kernels walk the whole
 * grid (all three dimensions, linearised) grid-stride, so any shape covers
 * every index exactly once; their results do not depend on the order. The
 * two whose results could depend on order are pinned down:
 *  - SCALE_ADD_F32 uses fmaf() on both sides, so neither compiler's choice
 *    of contracting a*x+y changes a bit;
 *  - SUM_F32's host function replays the device's assignment of elements to
 *    threads and its reduction tree, addition for addition.
 * Each built-in's check (check_*: argument count, scalar sizes, buffer
 * sizes and alignment, the shape SUM_F32 needs) refuses with a message: a
 * wrong n is an error, never a read past a buffer. It is the first half of
 * the host function and, installed on the kernel (runtime/kcheck.h), the
 * check cubert_launch runs before enqueueing on every backend; it also says
 * how many bytes of each write-only buffer the kernel writes.
 *
 * Ownership: descriptors and sources are static; cubert_builtin_kernel()
 * creates each kernel once (cubert_kernel_create copies the descriptor) and
 * hands out new references; the cache's own reference lives as long as the
 * process. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "cubert/cubert.h"
#include "cubert/kernels.h"
#include "runtime/fail.h" /* cb_fail: a failed public call records its error */
#include "runtime/kcheck.h" /* each built-in's launch check, installed on the kernel */

/* ------------------------------------------------------------ sources */

/* The global index of this thread over the whole grid, and the stride. */
#define GRID_STRIDE_PROLOGUE                                                                 \
  "  unsigned long long threads = (unsigned long long)blockDim.x * blockDim.y * blockDim.z;\n" \
  "  unsigned long long block = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y)\n"   \
  "                             * gridDim.x + blockIdx.x;\n"                                   \
  "  unsigned long long i = block * threads\n"                                                 \
  "      + ((unsigned long long)threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x\n"        \
  "      + threadIdx.x;\n"                                                                     \
  "  unsigned long long stride = threads * gridDim.x * gridDim.y * gridDim.z;\n"

static const char fill_source[] =
    "extern \"C\" __global__ void cubert_fill_u32(unsigned int *out, unsigned long long n,\n"
    "                                           unsigned int value)\n"
    "{\n" GRID_STRIDE_PROLOGUE
    "  for (; i < n; i += stride)\n"
    "    out[i] = value;\n"
    "}\n";

/* The copy moves 16 bytes per load and store (a 16-byte-aligned struct: a
 * 128-bit access on both vendors, no header needed) with four of them in
 * flight per thread each step, grid-stride over 16-byte chunks, so a grid
 * of a few blocks per compute unit (cubert_builtin_config) keeps the memory
 * busy. When `in` and `out` sit at the same offset modulo 16 (whole
 * allocations always do: blocks are 256-byte aligned), the words before the
 * first 16-byte boundary (the head, at most 3) and after the last whole
 * chunk (the tail, at most 3) are copied one word each; otherwise every
 * word is copied one by one. Every element is written once with in[i]: the
 * result does not depend on the grid or the order. */
static const char copy_source[] =
    "struct __attribute__((aligned(16))) cubert_chunk16 { unsigned long long lo, hi; };\n"
    "extern \"C\" __global__ void cubert_copy_u32(const unsigned int *__restrict__ in,\n"
    "                                           unsigned int *__restrict__ out,\n"
    "                                           unsigned long long n)\n"
    "{\n" GRID_STRIDE_PROLOGUE
    "  unsigned long long head = 0, chunks = 0;\n"
    "  if (((unsigned long long)in & 15) == ((unsigned long long)out & 15)) {\n"
    "    head = ((16 - ((unsigned long long)in & 15)) & 15) / 4;\n"
    "    if (head > n)\n"
    "      head = n;\n"
    "    chunks = (n - head) / 4;\n"
    "  }\n"
    "  const cubert_chunk16 *src = (const cubert_chunk16 *)(in + head);\n"
    "  cubert_chunk16 *dst = (cubert_chunk16 *)(out + head);\n"
    "  unsigned long long c = i;\n"
    "  for (; c + 3 * stride < chunks; c += 4 * stride) {\n"
    "    cubert_chunk16 a = src[c], b = src[c + stride], d = src[c + 2 * stride],\n"
    "                   e = src[c + 3 * stride];\n"
    "    dst[c] = a;\n"
    "    dst[c + stride] = b;\n"
    "    dst[c + 2 * stride] = d;\n"
    "    dst[c + 3 * stride] = e;\n"
    "  }\n"
    "  for (; c < chunks; c += stride)\n"
    "    dst[c] = src[c];\n"
    "  for (unsigned long long j = i; j < head; j += stride)\n"
    "    out[j] = in[j];\n"
    "  for (unsigned long long j = head + chunks * 4 + i; j < n; j += stride)\n"
    "    out[j] = in[j];\n"
    "}\n";

/* The tensor built-ins: the descriptor (cubert_tensor, cubert/strided.h),
 * element k in row-major order of a tensor's shape (the last dimension
 * fastest), and moves of elem_size bytes (1, 2, 4, 8 or 16: every element
 * sits at a multiple of its size, so the typed accesses are aligned).
 *
 * Two walks, chosen from the descriptors alone (the same for every thread):
 *  - rows: a tensor's *run* is its innermost dimensions that lie as one
 *    contiguous block of elements (each stride the product of the extents
 *    inside it, 1 for the innermost; extents of 1 skipped). Rows of `len`
 *    elements, len dividing the run of every tensor involved (the copy: the
 *    gcd of both runs, elements of one size on both sides), are contiguous
 *    on every side, and row j holds elements j * len .. j * len + len - 1 of
 *    each: so shapes may differ, as long as the rows line up. Rows are
 *    cut into pieces (cubert_pieces: the grid of pieces, one row-index
 *    unravel a piece (cubert_row_offset), a piece's bytes), in one of two
 *    mappings chosen from the row length and the grid:
 *     - narrow (rows under 32 bytes, or up to 512 bytes when the grid has
 *       a thread for every 16-byte piece of every row): pieces of 16 bytes
 *       (2^k a row, k the least with 16 * 2^k >= the row), one thread a
 *       piece, the pieces of all rows numbered one after another, so a
 *       warp covers several short rows with no thread left without a row.
 *       A thread moves its piece (the first also takes the bytes before
 *       the row's first 16-byte boundary: at most 31 bytes) with
 *       cubert_copy_short: the bytes before the source's 16-byte boundary
 *       and after its last one greedily (at each byte the widest of 16,
 *       8, 4, 2, 1 at which both sides are aligned and that fits: at most
 *       four moves each where both sides sit at the same offset modulo
 *       16), the 16 bytes between in units of the widest width at which
 *       the destination is aligned, their loads before their stores; the
 *       fill (cubert_fill_short) greedily, the destination alone.
 *     - groups: each row cut into pieces of 64 * g bytes for groups of g
 *       consecutive threads (cubert_lanes: g a power of two up to 256 and
 *       up to the grid's threads, about four 16-byte accesses a lane, down
 *       to one where the grid has threads to spare); groups take pieces
 *       grid-stride. Within a piece the bytes move w at a time, w the
 *       largest of 16, 8, 4, 2, 1 (at least the element size) at which
 *       source and destination sit at the same offset modulo w, four loads
 *       in flight a lane before their stores (the fill: 16-byte stores of
 *       the value repeated); the elements before the first w-aligned byte
 *       and after the last whole w-byte unit move one by one.
 *    Piece boundaries after the first fall on 16-byte boundaries of the
 *    source (the fill: the destination), so only a row's two ends move in
 *    narrower units. Taken when rows hold at least 2 elements.
 *  - elements: otherwise (an innermost stride other than 1, element sizes
 *    that differ, rows that do not line up) each thread takes elements
 *    grid-stride and unravels each index.
 * Either way every element is written once with its own value, so the
 * result does not depend on the grid, the walk or the order.
 * What depends on the descriptors and the grid alone (counts and runs, read
 * in one pass a descriptor by cubert_tensor_run; the row length, the
 * mapping, pieces a row) is worked out once a block, by its first thread,
 * into a __shared__ plan (cubert_copy_plan, cubert_fill_plan) that the
 * block's threads read after __syncthreads(): every thread reaches the
 * barrier, and a thread with no piece then returns after a few loads
 * instead of redoing that work. Divisions are done in 32 bits when both
 * operands fit (cubert_divmod; a narrow piece's row is a shift), and the
 * loops over dimensions are unrolled so the descriptors are read at fixed
 * offsets. */
#define TENSOR_SOURCE                                                                                         \
  "struct cubert_tensor {\n"                                                                                  \
  "  unsigned long long address;\n"                                                                           \
  "  unsigned int rank, elem_size;\n"                                                                         \
  "  unsigned long long shape[8], strides[8];\n"                                                              \
  "};\n"                                                                                                      \
  "struct cubert_value16 { unsigned long long lo, hi; };\n"                                                   \
  "struct __attribute__((aligned(16))) cubert_chunk16 { unsigned long long lo, hi; };\n"                      \
  "__device__ static unsigned long long cubert_divmod(unsigned long long a, unsigned long long b,\n"          \
  "                                                   unsigned long long &r)\n"                               \
  "{\n"                                                                                                       \
  "  if (((a | b) >> 32) == 0) {\n"                                                                           \
  "    unsigned int q = (unsigned int)a / (unsigned int)b;\n"                                                 \
  "    r = (unsigned int)a - q * (unsigned int)b;\n"                                                          \
  "    return q;\n"                                                                                           \
  "  }\n"                                                                                                     \
  "  unsigned long long q = a / b;\n"                                                                         \
  "  r = a - q * b;\n"                                                                                        \
  "  return q;\n"                                                                                             \
  "}\n"                                                                                                       \
  "__device__ static unsigned char *cubert_tensor_at(const cubert_tensor &t, unsigned long long k)\n"         \
  "{\n"                                                                                                       \
  "  unsigned long long off = 0, r;\n"                                                                        \
  "#pragma unroll\n"                                                                                          \
  "  for (unsigned int d = 7; d > 0; d--)\n"                                                                  \
  "    if (d < t.rank) {\n"                                                                                   \
  "      k = cubert_divmod(k, t.shape[d], r);\n"                                                              \
  "      off += r * t.strides[d];\n"                                                                          \
  "    }\n"                                                                                                   \
  "  off += k * t.strides[0];\n"                                                                              \
  "  return (unsigned char *)t.address + off * t.elem_size;\n"                                                \
  "}\n"                                                                                                       \
  "__device__ static unsigned long long cubert_tensor_run(const cubert_tensor &t, unsigned int &outer,\n"     \
  "                                                      unsigned long long &count)\n"                        \
  "{\n"                                                                                                       \
  "  unsigned long long run = 1, n = t.rank ? 1 : 0;\n"                                                       \
  "  bool open = true;\n"                                                                                     \
  "  outer = 0;\n"                                                                                            \
  "#pragma unroll\n"                                                                                          \
  "  for (int d = 7; d >= 0; d--)\n"                                                                          \
  "    if ((unsigned int)d < t.rank) {\n"                                                                     \
  "      n *= t.shape[d];\n"                                                                                  \
  "      if (open && t.shape[d] != 1) {\n"                                                                    \
  "        if (t.strides[d] == run) {\n"                                                                      \
  "          run *= t.shape[d];\n"                                                                            \
  "        } else {\n"                                                                                        \
  "          outer = d + 1;\n"                                                                                \
  "          open = false;\n"                                                                                 \
  "        }\n"                                                                                               \
  "      }\n"                                                                                                 \
  "    }\n"                                                                                                   \
  "  count = n;\n"                                                                                            \
  "  return run;\n"                                                                                           \
  "}\n"                                                                                                       \
  "__device__ static unsigned long long cubert_row_offset(const cubert_tensor &t, unsigned int outer,\n"      \
  "                                                       unsigned long long per, unsigned long long len,\n"  \
  "                                                       unsigned long long j)\n"                            \
  "{\n"                                                                                                       \
  "  unsigned long long r = 0, off;\n"                                                                        \
  "  if (per > 1)\n"                                                                                          \
  "    j = cubert_divmod(j, per, r);\n"                                                                       \
  "  off = r * len;\n"                                                                                        \
  "#pragma unroll\n"                                                                                          \
  "  for (unsigned int d = 7; d > 0; d--)\n"                                                                  \
  "    if (d < outer && t.shape[d] != 1) {\n"                                                                 \
  "      j = cubert_divmod(j, t.shape[d], r);\n"                                                              \
  "      off += r * t.strides[d];\n"                                                                          \
  "    }\n"                                                                                                   \
  "  if (outer)\n"                                                                                            \
  "    off += j * t.strides[0];\n"                                                                            \
  "  return off;\n"                                                                                           \
  "}\n"                                                                                                       \
  "__device__ static unsigned int cubert_lanes(unsigned long long row_bytes, unsigned long long rows,\n"      \
  "                                            unsigned long long threads, unsigned int &lg)\n"               \
  "{\n"                                                                                                       \
  "  lg = 0;\n"                                                                                               \
  "  while (lg < 8 && (2ull << lg) <= threads &&\n"                                                           \
  "         ((64ull << lg) < row_bytes || ((16ull << lg) < row_bytes && (rows << (lg + 1)) <= threads)))\n"   \
  "    lg++;\n"                                                                                               \
  "  return 1u << lg;\n"                                                                                      \
  "}\n"                                                                                                       \
  "struct cubert_pieces {\n"                                                                                  \
  "  unsigned long long row_bytes, size, per_row, count;\n"                                                   \
  "  unsigned int lg, shift;\n"                                                                               \
  "  bool narrow;\n"                                                                                          \
  "  __device__ void plan(unsigned long long rows, unsigned long long bytes, unsigned long long threads)\n"   \
  "  {\n"                                                                                                     \
  "    unsigned int ls = 0;\n"                                                                                \
  "    row_bytes = bytes;\n"                                                                                  \
  "    lg = 0;\n"                                                                                             \
  "    while (ls < 6 && (16ull << ls) < bytes)\n"                                                             \
  "      ls++;\n"                                                                                             \
  "    narrow = bytes < 32 || (ls < 6 && (rows << ls) <= threads);\n"                                         \
  "    shift = ls;\n"                                                                                         \
  "    if (narrow) {\n"                                                                                       \
  "      size = 16;\n"                                                                                        \
  "      per_row = 1ull << ls;\n"                                                                             \
  "    } else {\n"                                                                                            \
  "      cubert_lanes(bytes, rows, threads, lg);\n"                                                           \
  "      size = 64ull << lg;\n"                                                                               \
  "      per_row = (bytes + size - 1) >> (6 + lg);\n"                                                         \
  "    }\n"                                                                                                   \
  "    count = rows * per_row;\n"                                                                             \
  "  }\n"                                                                                                     \
  "  __device__ unsigned long long row(unsigned long long it, unsigned long long &p) const\n"                 \
  "  {\n"                                                                                                     \
  "    if (narrow) {\n"                                                                                       \
  "      p = it & (per_row - 1);\n"                                                                           \
  "      return it >> shift;\n"                                                                               \
  "    }\n"                                                                                                   \
  "    return cubert_divmod(it, per_row, p);\n"                                                               \
  "  }\n"                                                                                                     \
  "  __device__ bool bounds(unsigned long long p, unsigned long long address, unsigned long long &lo,\n"      \
  "                         unsigned long long &hi) const\n"                                                  \
  "  {\n"                                                                                                     \
  "    unsigned long long a = (16 - (address & 15)) & 15;\n"                                                  \
  "    lo = p ? p * size + a : 0;\n"                                                                          \
  "    hi = (p + 1) * size + a;\n"                                                                            \
  "    if (hi > row_bytes)\n"                                                                                 \
  "      hi = row_bytes;\n"                                                                                   \
  "    return lo < hi;\n"                                                                                     \
  "  }\n"                                                                                                     \
  "};\n"

/* The copy's moves: one element (n bytes), and a piece of a row (see above). */
#define TENSOR_COPY_SOURCE                                                                                         \
  "__device__ static void cubert_move(unsigned char *d, const unsigned char *s, unsigned int n)\n"                 \
  "{\n"                                                                                                            \
  "  if (n == 1) *d = *s;\n"                                                                                       \
  "  else if (n == 2) *(unsigned short *)d = *(const unsigned short *)s;\n"                                        \
  "  else if (n == 4) *(unsigned int *)d = *(const unsigned int *)s;\n"                                            \
  "  else if (n == 8) *(unsigned long long *)d = *(const unsigned long long *)s;\n"                                \
  "  else if (n == 16) *(cubert_chunk16 *)d = *(const cubert_chunk16 *)s;\n"                                       \
  "}\n"                                                                                                            \
  "template <typename T>\n"                                                                                        \
  "__device__ static void cubert_span(unsigned char *d, const unsigned char *s, unsigned int units,\n"             \
  "                                   unsigned int lane, unsigned int g)\n"                                        \
  "{\n"                                                                                                            \
  "  T *dt = (T *)d;\n"                                                                                            \
  "  const T *st = (const T *)s;\n"                                                                                \
  "  unsigned int u = lane;\n"                                                                                     \
  "  for (; u + 3 * g < units; u += 4 * g) {\n"                                                                    \
  "    T a = st[u], b = st[u + g], c = st[u + 2 * g], e = st[u + 3 * g];\n"                                        \
  "    dt[u] = a;\n"                                                                                               \
  "    dt[u + g] = b;\n"                                                                                           \
  "    dt[u + 2 * g] = c;\n"                                                                                       \
  "    dt[u + 3 * g] = e;\n"                                                                                       \
  "  }\n"                                                                                                          \
  "  for (; u < units; u += g)\n"                                                                                  \
  "    dt[u] = st[u];\n"                                                                                           \
  "}\n"                                                                                                            \
  "__device__ static void cubert_copy_piece(unsigned char *d, const unsigned char *s, unsigned int n,\n"           \
  "                                         unsigned int e, unsigned int w, unsigned int lane, unsigned int g)\n"  \
  "{\n"                                                                                                            \
  "  unsigned int head = (w - ((unsigned int)(unsigned long long)s & (w - 1))) & (w - 1);\n"                       \
  "  if (head > n)\n"                                                                                              \
  "    head = n;\n"                                                                                                \
  "  unsigned int units = (n - head) / w;\n"                                                                       \
  "  for (unsigned int x = lane * e; x < head; x += g * e)\n"                                                      \
  "    cubert_move(d + x, s + x, e);\n"                                                                            \
  "  for (unsigned int x = head + units * w + lane * e; x < n; x += g * e)\n"                                      \
  "    cubert_move(d + x, s + x, e);\n"                                                                            \
  "  d += head;\n"                                                                                                 \
  "  s += head;\n"                                                                                                 \
  "  if (w == 16) cubert_span<cubert_chunk16>(d, s, units, lane, g);\n"                                            \
  "  else if (w == 8) cubert_span<unsigned long long>(d, s, units, lane, g);\n"                                    \
  "  else if (w == 4) cubert_span<unsigned int>(d, s, units, lane, g);\n"                                          \
  "  else if (w == 2) cubert_span<unsigned short>(d, s, units, lane, g);\n"                                        \
  "  else cubert_span<unsigned char>(d, s, units, lane, g);\n"                                                     \
  "}\n"                                                                                                            \
  "__device__ static void cubert_copy_short(unsigned char *d, const unsigned char *s, unsigned int n)\n"           \
  "{\n"                                                                                                            \
  "  unsigned int x = 0, m;\n"                                                                                     \
  "  for (; x < n && (((unsigned long long)s + x) & 15); x += m) {\n"                                              \
  "    m = (unsigned int)(((unsigned long long)s + x) | ((unsigned long long)d + x));\n"                           \
  "    m &= 0u - m;\n"                                                                                             \
  "    while (m > n - x)\n"                                                                                        \
  "      m >>= 1;\n"                                                                                               \
  "    cubert_move(d + x, s + x, m);\n"                                                                            \
  "  }\n"                                                                                                          \
  "  for (; n - x >= 16; x += 16) {\n"                                                                             \
  "    m = (unsigned int)((unsigned long long)d + x) | 16u;\n"                                                     \
  "    m &= 0u - m;\n"                                                                                             \
  "    if (m == 16) cubert_span<cubert_chunk16>(d + x, s + x, 1, 0, 1);\n"                                         \
  "    else if (m == 8) cubert_span<unsigned long long>(d + x, s + x, 2, 0, 1);\n"                                 \
  "    else if (m == 4) cubert_span<unsigned int>(d + x, s + x, 4, 0, 1);\n"                                       \
  "    else if (m == 2) cubert_span<unsigned short>(d + x, s + x, 8, 0, 1);\n"                                     \
  "    else cubert_span<unsigned char>(d + x, s + x, 16, 0, 1);\n"                                                 \
  "  }\n"                                                                                                          \
  "  for (; x < n; x += m) {\n"                                                                                    \
  "    m = (unsigned int)(((unsigned long long)s + x) | ((unsigned long long)d + x)) | 16u;\n"                     \
  "    m &= 0u - m;\n"                                                                                             \
  "    while (m > n - x)\n"                                                                                        \
  "      m >>= 1;\n"                                                                                               \
  "    cubert_move(d + x, s + x, m);\n"                                                                            \
  "  }\n"                                                                                                          \
  "}\n"

/* The fill's stores: one element from the repeated value, and a piece of a row. */
#define TENSOR_FILL_SOURCE                                                                                 \
  "__device__ static void cubert_store(unsigned char *d, const cubert_chunk16 &v, unsigned int n)\n"       \
  "{\n"                                                                                                    \
  "  if (n == 1) *d = (unsigned char)v.lo;\n"                                                              \
  "  else if (n == 2) *(unsigned short *)d = (unsigned short)v.lo;\n"                                      \
  "  else if (n == 4) *(unsigned int *)d = (unsigned int)v.lo;\n"                                          \
  "  else if (n == 8) *(unsigned long long *)d = v.lo;\n"                                                  \
  "  else if (n == 16) *(cubert_chunk16 *)d = v;\n"                                                        \
  "}\n"                                                                                                    \
  "__device__ static void cubert_fill_piece(unsigned char *d, unsigned int n, const cubert_chunk16 &v,\n"  \
  "                                         unsigned int e, unsigned int lane, unsigned int g)\n"          \
  "{\n"                                                                                                    \
  "  unsigned int head = (16 - ((unsigned int)(unsigned long long)d & 15)) & 15;\n"                        \
  "  if (head > n)\n"                                                                                      \
  "    head = n;\n"                                                                                        \
  "  unsigned int units = (n - head) / 16;\n"                                                              \
  "  for (unsigned int x = lane * e; x < head; x += g * e)\n"                                              \
  "    cubert_store(d + x, v, e);\n"                                                                       \
  "  for (unsigned int x = head + units * 16 + lane * e; x < n; x += g * e)\n"                             \
  "    cubert_store(d + x, v, e);\n"                                                                       \
  "  cubert_chunk16 *c = (cubert_chunk16 *)(d + head);\n"                                                  \
  "  for (unsigned int u = lane; u < units; u += g)\n"                                                     \
  "    c[u] = v;\n"                                                                                        \
  "}\n"                                                                                                    \
  "__device__ static void cubert_fill_short(unsigned char *d, unsigned int n, const cubert_chunk16 &v)\n"  \
  "{\n"                                                                                                    \
  "  for (unsigned int x = 0, m; x < n; x += m) {\n"                                                       \
  "    m = (unsigned int)((unsigned long long)d + x) | 16u;\n"                                             \
  "    m &= 0u - m;\n"                                                                                     \
  "    while (m > n - x)\n"                                                                                \
  "      m >>= 1;\n"                                                                                       \
  "    cubert_store(d + x, v, m);\n"                                                                       \
  "  }\n"                                                                                                  \
  "}\n"

static const char copy_strided_source[] =
    TENSOR_SOURCE TENSOR_COPY_SOURCE
    "struct cubert_copy_plan {\n"
    "  cubert_pieces w;\n"
    "  unsigned long long n, len, pi, po;\n"
    "  unsigned int oi, oo;\n"
    "};\n"
    "extern \"C\" __global__ void cubert_copy_strided(cubert_tensor in, cubert_tensor out)\n"
    "{\n" GRID_STRIDE_PROLOGUE
    "  __shared__ cubert_copy_plan plan;\n"
    "  unsigned int bytes = in.elem_size < out.elem_size ? in.elem_size : out.elem_size;\n"
    "  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {\n"
    "    unsigned long long n, m, r, ri = cubert_tensor_run(in, plan.oi, n), ro = cubert_tensor_run(out, plan.oo, m);\n"
    "    unsigned long long len = 0, b = ro;\n"
    "    if (m < n)\n"
    "      n = m;\n"
    "    if (n && in.elem_size == out.elem_size) {\n"
    "      len = ri;\n"
    "      while (b != len && b) {\n"
    "        cubert_divmod(len, b, r);\n"
    "        len = b;\n"
    "        b = r;\n"
    "      }\n"
    "    }\n"
    "    if (len >= 2) {\n"
    "      plan.w.plan(cubert_divmod(n, len, r), len * bytes, stride);\n"
    "      plan.pi = ri == len ? 1 : cubert_divmod(ri, len, r);\n"
    "      plan.po = ro == len ? 1 : cubert_divmod(ro, len, r);\n"
    "    }\n"
    "    plan.n = n;\n"
    "    plan.len = len;\n"
    "  }\n"
    "  __syncthreads();\n"
    "  unsigned long long len = plan.len;\n"
    "  if (len >= 2) {\n"
    "    unsigned int lg = plan.w.lg, lane = (unsigned int)i & ((1u << lg) - 1);\n"
    "    unsigned long long step = stride >> lg, it = i >> lg, pi = plan.pi, po = plan.po;\n"
    "    if (it >= step)\n"
    "      return;\n"
    "    for (; it < plan.w.count; it += step) {\n"
    "      unsigned long long p, lo, hi, row = plan.w.row(it, p);\n"
    "      const unsigned char *s =\n"
    "          (const unsigned char *)in.address + cubert_row_offset(in, plan.oi, pi, len, row) * bytes;\n"
    "      unsigned char *d = (unsigned char *)out.address + cubert_row_offset(out, plan.oo, po, len, row) * bytes;\n"
    "      if (!plan.w.bounds(p, (unsigned long long)s, lo, hi))\n"
    "        continue;\n"
    "      if (plan.w.narrow) {\n"
    "        cubert_copy_short(d + lo, s + lo, (unsigned int)(hi - lo));\n"
    "        continue;\n"
    "      }\n"
    "      unsigned long long x = ((unsigned long long)s ^ (unsigned long long)d) & 15;\n"
    "      unsigned int u = 16;\n"
    "      while (u > bytes && (x & (u - 1)))\n"
    "        u >>= 1;\n"
    "      cubert_copy_piece(d + lo, s + lo, (unsigned int)(hi - lo), bytes, u, lane, 1u << lg);\n"
    "    }\n"
    "    return;\n"
    "  }\n"
    "  for (unsigned long long n = plan.n; i < n; i += stride)\n"
    "    cubert_move(cubert_tensor_at(out, i), cubert_tensor_at(in, i), bytes);\n"
    "}\n";

static const char fill_strided_source[] =
    TENSOR_SOURCE TENSOR_FILL_SOURCE
    "struct cubert_fill_plan {\n"
    "  cubert_pieces w;\n"
    "  unsigned long long n, len;\n"
    "  unsigned int oo;\n"
    "};\n"
    "extern \"C\" __global__ void cubert_fill_strided(cubert_tensor out, cubert_value16 value)\n"
    "{\n" GRID_STRIDE_PROLOGUE
    "  __shared__ cubert_fill_plan plan;\n"
    "  unsigned int e = out.elem_size;\n"
    "  cubert_chunk16 v;\n"
    "  v.lo = value.lo;\n"
    "  v.hi = value.hi;\n"
    "  if (e == 1)\n"
    "    v.lo = (v.lo & 0xffull) * 0x0101010101010101ull;\n"
    "  else if (e == 2)\n"
    "    v.lo = (v.lo & 0xffffull) * 0x0001000100010001ull;\n"
    "  else if (e == 4)\n"
    "    v.lo = (v.lo & 0xffffffffull) * 0x0000000100000001ull;\n"
    "  if (e < 16)\n"
    "    v.hi = v.lo;\n"
    "  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {\n"
    "    unsigned long long n, r, len = cubert_tensor_run(out, plan.oo, n);\n"
    "    if (!n)\n"
    "      len = 0;\n"
    "    if (len >= 2)\n"
    "      plan.w.plan(cubert_divmod(n, len, r), len * e, stride);\n"
    "    plan.n = n;\n"
    "    plan.len = len;\n"
    "  }\n"
    "  __syncthreads();\n"
    "  unsigned long long len = plan.len;\n"
    "  if (len >= 2) {\n"
    "    unsigned int lg = plan.w.lg, lane = (unsigned int)i & ((1u << lg) - 1);\n"
    "    unsigned long long step = stride >> lg, it = i >> lg;\n"
    "    if (it >= step)\n"
    "      return;\n"
    "    for (; it < plan.w.count; it += step) {\n"
    "      unsigned long long p, lo, hi, row = plan.w.row(it, p);\n"
    "      unsigned char *d = (unsigned char *)out.address + cubert_row_offset(out, plan.oo, 1, len, row) * e;\n"
    "      if (!plan.w.bounds(p, (unsigned long long)d, lo, hi))\n"
    "        continue;\n"
    "      if (plan.w.narrow)\n"
    "        cubert_fill_short(d + lo, (unsigned int)(hi - lo), v);\n"
    "      else\n"
    "        cubert_fill_piece(d + lo, (unsigned int)(hi - lo), v, e, lane, 1u << lg);\n"
    "    }\n"
    "    return;\n"
    "  }\n"
    "  for (unsigned long long n = plan.n; i < n; i += stride)\n"
    "    cubert_store(cubert_tensor_at(out, i), v, e);\n"
    "}\n";

static const char scale_add_source[] =
    "extern \"C\" __global__ void cubert_scale_add_f32(const float *x, float *y, float a,\n"
    "                                                unsigned long long n)\n"
    "{\n" GRID_STRIDE_PROLOGUE
    "  for (; i < n; i += stride)\n"
    "    y[i] = fmaf(a, x[i], y[i]);\n"
    "}\n";

/* One partial per block: each thread sums its grid-stride share in order,
 * then the block reduces its blockDim.x values as a tree (blockDim.x a power
 * of two). Only x dimensions are used. */
static const char sum_source[] =
    "extern \"C\" __global__ void cubert_sum_f32(const float *x, float *partial,\n"
    "                                          unsigned long long n)\n"
    "{\n"
    "  extern __shared__ float cubert_sum_shared[];\n"
    "  unsigned int t = threadIdx.x;\n"
    "  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  float acc = 0.0f;\n"
    "  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + t; i < n;\n"
    "       i += stride)\n"
    "    acc += x[i];\n"
    "  cubert_sum_shared[t] = acc;\n"
    "  __syncthreads();\n"
    "  for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {\n"
    "    if (t < s)\n"
    "      cubert_sum_shared[t] += cubert_sum_shared[t + s];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (t == 0)\n"
    "    partial[blockIdx.x] = cubert_sum_shared[0];\n"
    "}\n";

static const char checksum_source[] =
    "extern \"C\" __global__ void cubert_checksum_u32(const unsigned int *x,\n"
    "                                               unsigned long long *acc,\n"
    "                                               unsigned long long n)\n"
    "{\n" GRID_STRIDE_PROLOGUE
    "  unsigned long long sum = 0;\n"
    "  for (; i < n; i += stride)\n"
    "    sum += (unsigned long long)x[i] ^ (i * 2654435761ull);\n"
    "  if (sum)\n"
    "    atomicAdd(acc, sum);\n"
    "}\n";

/* ------------------------------------------------------------ host side */

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static cubert_status refuse(char *message, size_t capacity, cubert_status status, const char *fmt,
                            ...) {
  if (message && capacity) {
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(message, capacity, fmt, ap);
    va_end(ap);
    (void)len; /* a long message is cut, never overrun */
  }
  return status;
}

/* What every host function needs from the launch: `nargs` arguments, and the
 * 8-byte scalar n at index `n_index`. */
static cubert_status take_n(const cubert_host_launch *l, const char *kernel, uint32_t nargs,
                            uint32_t n_index, uint64_t *n, char *msg, size_t cap) {
  if (!l || (l->nargs && (!l->args || !l->sizes)))
    return refuse(msg, cap, CUBERT_ERR_INVALID_ARGUMENT, "%s: no launch description", kernel);
  if (l->nargs != nargs)
    return refuse(msg, cap, CUBERT_ERR_INVALID_ARGUMENT, "%s: %" PRIu32 " arguments, %" PRIu32
                  " expected", kernel, l->nargs, nargs);
  if (l->sizes[n_index] != sizeof(uint64_t) || !l->args[n_index])
    return refuse(msg, cap, CUBERT_ERR_INVALID_ARGUMENT,
                  "%s: `n` is a %" PRIu64 "-byte scalar, expected 8 (unsigned 64-bit)", kernel,
                  l->sizes[n_index]);
  memcpy(n, l->args[n_index], sizeof *n);
  return CUBERT_OK;
}

/* Argument `index`, a buffer named `param` that must hold `count` elements of
 * `elem` bytes, aligned to `elem`. */
static cubert_status take_buffer(const cubert_host_launch *l, const char *kernel, uint32_t index,
                                 const char *param, uint64_t count, uint64_t elem, void **out,
                                 char *msg, size_t cap) {
  void *p = l->args[index];
  if (count > UINT64_MAX / elem || count * elem > l->sizes[index])
    return refuse(msg, cap, CUBERT_ERR_OUT_OF_RANGE,
                  "%s: `%s` must hold %" PRIu64 " elements of %" PRIu64 " bytes, but %" PRIu64
                  " bytes are bound",
                  kernel, param, count, elem, l->sizes[index]);
  if (count && !p)
    return refuse(msg, cap, CUBERT_ERR_INVALID_ARGUMENT, "%s: `%s` is a null buffer", kernel, param);
  if ((uintptr_t)p % elem)
    return refuse(msg, cap, CUBERT_ERR_INVALID_ARGUMENT,
                  "%s: `%s` at %p is not aligned to %" PRIu64 " bytes", kernel, param, p, elem);
  if (out) *out = p;
  return CUBERT_OK;
}

/* Each built-in's check (check_*) is the first half of its host function
 * and the launch check the runtime runs on every backend before anything
 * is enqueued (runtime/kcheck.h): one function, so the two cannot drift.
 * It sets written[] (when not NULL) to the bytes each write-only buffer
 * gets, where the arguments say. */

static cubert_status check_fill_u32(const cubert_host_launch *l, uint64_t *written, char *msg, size_t cap) {
  static const char k[] = "cubert_fill_u32";
  uint64_t n = 0; /* take_n sets it only on success */
  cubert_status st = take_n(l, k, 3, 1, &n, msg, cap);
  if (st != CUBERT_OK)
    return st;
  if (l->sizes[2] != sizeof(uint32_t) || !l->args[2])
    return refuse(msg, cap, CUBERT_ERR_INVALID_ARGUMENT,
                  "%s: `value` is a %" PRIu64 "-byte scalar, expected 4 (unsigned 32-bit)", k,
                  l->sizes[2]);
  if ((st = take_buffer(l, k, 0, "out", n, 4, NULL, msg, cap)) != CUBERT_OK)
    return st;
  if (written)
    written[0] = n * 4;
  return CUBERT_OK;
}

static cubert_status host_fill_u32(const cubert_host_launch *l, char *msg, size_t cap) {
  cubert_status st = check_fill_u32(l, NULL, msg, cap);
  if (st != CUBERT_OK)
    return st;
  uint64_t n;
  uint32_t value;
  memcpy(&n, l->args[1], sizeof n);
  memcpy(&value, l->args[2], sizeof value);
  uint32_t *o = l->args[0];
  for (uint64_t i = 0; i < n; i++)
    o[i] = value;
  return CUBERT_OK;
}

/* COPY_U32 and both peer copies (the same host function and source; each
 * launch check names its own kernel). */
static cubert_status check_copy(const char *k, const cubert_host_launch *l, uint64_t *written, char *msg,
                                size_t cap) {
  uint64_t n = 0; /* take_n sets it only on success */
  cubert_status st = take_n(l, k, 3, 2, &n, msg, cap);
  if (st == CUBERT_OK)
    st = take_buffer(l, k, 0, "in", n, 4, NULL, msg, cap);
  if (st == CUBERT_OK)
    st = take_buffer(l, k, 1, "out", n, 4, NULL, msg, cap);
  if (st == CUBERT_OK && written)
    written[1] = n * 4;
  return st;
}

static cubert_status check_copy_u32(const cubert_host_launch *l, uint64_t *written, char *msg, size_t cap) {
  return check_copy("cubert_copy_u32", l, written, msg, cap);
}

static cubert_status check_copy_peer_read(const cubert_host_launch *l, uint64_t *written, char *msg,
                                          size_t cap) {
  return check_copy("cubert_copy_peer_read", l, written, msg, cap);
}

static cubert_status check_copy_peer_write(const cubert_host_launch *l, uint64_t *written, char *msg,
                                           size_t cap) {
  return check_copy("cubert_copy_peer_write", l, written, msg, cap);
}

static cubert_status host_copy_u32(const cubert_host_launch *l, char *msg, size_t cap) {
  cubert_status st = check_copy_u32(l, NULL, msg, cap);
  if (st != CUBERT_OK)
    return st;
  uint64_t n;
  memcpy(&n, l->args[2], sizeof n);
  if (n)
    memmove(l->args[1], l->args[0], (size_t)(n * 4));
  return CUBERT_OK;
}

static cubert_status check_scale_add_f32(const cubert_host_launch *l, uint64_t *written, char *msg,
                                         size_t cap) {
  static const char k[] = "cubert_scale_add_f32";
  uint64_t n = 0; /* take_n sets it only on success */
  (void)written; /* y is read-write: bound as it is */
  cubert_status st = take_n(l, k, 4, 3, &n, msg, cap);
  if (st != CUBERT_OK)
    return st;
  if (l->sizes[2] != sizeof(float) || !l->args[2])
    return refuse(msg, cap, CUBERT_ERR_INVALID_ARGUMENT,
                  "%s: `a` is a %" PRIu64 "-byte scalar, expected 4 (float)", k, l->sizes[2]);
  if ((st = take_buffer(l, k, 0, "x", n, 4, NULL, msg, cap)) != CUBERT_OK ||
      (st = take_buffer(l, k, 1, "y", n, 4, NULL, msg, cap)) != CUBERT_OK)
    return st;
  return CUBERT_OK;
}

static cubert_status host_scale_add_f32(const cubert_host_launch *l, char *msg, size_t cap) {
  cubert_status st = check_scale_add_f32(l, NULL, msg, cap);
  if (st != CUBERT_OK)
    return st;
  uint64_t n;
  float a;
  memcpy(&n, l->args[3], sizeof n);
  memcpy(&a, l->args[2], sizeof a);
  const float *x = l->args[0];
  float *y = l->args[1];
  for (uint64_t i = 0; i < n; i++)
    y[i] = fmaf(a, x[i], y[i]);
  return CUBERT_OK;
}

static cubert_status check_sum_f32(const cubert_host_launch *l, uint64_t *written, char *msg, size_t cap) {
  static const char k[] = "cubert_sum_f32";
  uint64_t n = 0; /* take_n sets it only on success */
  cubert_status st = take_n(l, k, 3, 2, &n, msg, cap);
  if (st != CUBERT_OK)
    return st;
  uint32_t blocks = l->grid[0], threads = l->block[0];
  if (l->grid[1] != 1 || l->grid[2] != 1 || l->block[1] != 1 || l->block[2] != 1)
    return refuse(msg, cap, CUBERT_ERR_LAUNCH_CONFIG,
                  "%s: one-dimensional launches only (grid %" PRIu32 "x%" PRIu32 "x%" PRIu32
                  ", block %" PRIu32 "x%" PRIu32 "x%" PRIu32 ")",
                  k, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2]);
  if (blocks == 0 || threads == 0 || (threads & (threads - 1)))
    return refuse(msg, cap, CUBERT_ERR_LAUNCH_CONFIG,
                  "%s: block[0] = %" PRIu32 " must be a power of two (and grid[0] = %" PRIu32
                  " at least 1)",
                  k, threads, blocks);
  if ((uint64_t)l->shared_memory < (uint64_t)threads * sizeof(float))
    return refuse(msg, cap, CUBERT_ERR_LAUNCH_CONFIG,
                  "%s: needs block[0] * 4 = %" PRIu64 " bytes of shared memory, %" PRIu32 " given",
                  k, (uint64_t)threads * sizeof(float), l->shared_memory);
  if ((st = take_buffer(l, k, 0, "x", n, 4, NULL, msg, cap)) != CUBERT_OK ||
      (st = take_buffer(l, k, 1, "partial", blocks, 4, NULL, msg, cap)) != CUBERT_OK)
    return st;
  if (written)
    written[1] = (uint64_t)blocks * 4;
  return CUBERT_OK;
}

static cubert_status host_sum_f32(const cubert_host_launch *l, char *msg, size_t cap) {
  static const char k[] = "cubert_sum_f32";
  cubert_status st = check_sum_f32(l, NULL, msg, cap);
  if (st != CUBERT_OK)
    return st;
  uint64_t n;
  memcpy(&n, l->args[2], sizeof n);
  uint32_t blocks = l->grid[0], threads = l->block[0];
  float *shared = cb_malloc((size_t)threads * sizeof *shared);
  if (!shared)
    return refuse(msg, cap, CUBERT_ERR_OUT_OF_MEMORY, "%s: no host memory for %" PRIu32
                  " threads' shared values", k, threads);
  const float *x = l->args[0];
  float *partial = l->args[1];
  const uint64_t stride = (uint64_t)blocks * threads;
  for (uint64_t b = 0; b < blocks; b++) {
    /* Each thread's share, summed in the order the device thread reads it. */
    for (uint32_t t = 0; t < threads; t++) {
      float acc = 0.0f;
      for (uint64_t i = b * threads + t; i < n; i += stride)
        acc = (float)(acc + x[i]);
      shared[t] = acc;
    }
    /* The same tree as the device's, level by level. */
    for (uint32_t s = threads / 2; s > 0; s >>= 1)
      for (uint32_t t = 0; t < s; t++)
        shared[t] = (float)(shared[t] + shared[t + s]);
    partial[b] = shared[0];
  }
  cb_free(shared);
  return CUBERT_OK;
}

static cubert_status check_checksum_u32(const cubert_host_launch *l, uint64_t *written, char *msg,
                                        size_t cap) {
  static const char k[] = "cubert_checksum_u32";
  uint64_t n = 0; /* take_n sets it only on success */
  (void)written; /* acc is read-write: bound as it is */
  cubert_status st = take_n(l, k, 3, 2, &n, msg, cap);
  if (st == CUBERT_OK)
    st = take_buffer(l, k, 0, "x", n, 4, NULL, msg, cap);
  if (st == CUBERT_OK)
    st = take_buffer(l, k, 1, "acc", 1, 8, NULL, msg, cap);
  return st;
}

static cubert_status host_checksum_u32(const cubert_host_launch *l, char *msg, size_t cap) {
  cubert_status st = check_checksum_u32(l, NULL, msg, cap);
  if (st != CUBERT_OK)
    return st;
  uint64_t n;
  memcpy(&n, l->args[2], sizeof n);
  void *accv = l->args[1];
  const uint32_t *x = l->args[0];
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n; i++)
    sum += (uint64_t)x[i] ^ (i * UINT64_C(2654435761));
  uint64_t *acc = accv;
  *acc += sum;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ tensors */

/* The device source declares the descriptor with the same fields in the
 * same order (TENSOR_SOURCE): no padding, 144 bytes (cubert/strided.h). */
_Static_assert(sizeof(cubert_tensor) == 144 && offsetof(cubert_tensor, shape) == 16 &&
                   offsetof(cubert_tensor, strides) == 80,
               "cubert_tensor must match the kernels' struct cubert_tensor");

/* Argument `index`, a tensor named `param`: its descriptor, checked for what
 * the walk needs (a rank of 1 to 8, an element size of 1, 2, 4, 8 or 16;
 * the runtime made it from a checked view). */
static cubert_status take_tensor(const cubert_host_launch *l, const char *kernel, uint32_t index,
                                 const char *param, cubert_tensor *t, char *msg, size_t cap) {
  if (l->sizes[index] != sizeof *t || !l->args[index])
    return refuse(msg, cap, CUBERT_ERR_INVALID_ARGUMENT,
                  "%s: `%s` is %" PRIu64 " bytes, a tensor descriptor is %zu", kernel, param,
                  l->sizes[index], sizeof *t);
  memcpy(t, l->args[index], sizeof *t);
  uint32_t e = t->elem_size;
  if (t->rank == 0 || t->rank > CUBERT_VIEW_MAX_DIMS || (e != 1 && e != 2 && e != 4 && e != 8 && e != 16))
    return refuse(msg, cap, CUBERT_ERR_INVALID_ARGUMENT,
                  "%s: `%s` has rank %" PRIu32 " and %" PRIu32 "-byte elements (rank 1 to 8; 1, 2, 4, "
                  "8 or 16 bytes)",
                  kernel, param, t->rank, e);
  return CUBERT_OK;
}

/* Elements of `t`, in row-major order of its shape (the kernels' order). */
typedef struct tensor_walk {
  const cubert_tensor *t;
  uint64_t idx[CUBERT_VIEW_MAX_DIMS];
  uint64_t off; /* elements from element 0 */
} tensor_walk;

static uint64_t tensor_count(const cubert_tensor *t) {
  uint64_t n = 1;
  for (uint32_t d = 0; d < t->rank; d++) n *= t->shape[d];
  return n;
}

static unsigned char *walk_at(const tensor_walk *w) {
  return (unsigned char *)(uintptr_t)w->t->address + w->off * w->t->elem_size;
}

static void walk_next(tensor_walk *w) {
  const cubert_tensor *t = w->t;
  for (uint32_t d = t->rank; d-- > 0;) {
    w->off += t->strides[d];
    if (++w->idx[d] < t->shape[d]) return;
    w->off -= t->shape[d] * t->strides[d];
    w->idx[d] = 0;
  }
}

/* The innermost dimensions of `t` that lie as one contiguous block of
 * elements (extents of 1 skipped): the block's element count, and in
 * *outer the number of dimensions outside it (the kernels'
 * cubert_tensor_run). */
static uint64_t tensor_run(const cubert_tensor *t, uint32_t *outer) {
  uint64_t run = 1;
  *outer = 0;
  for (uint32_t d = t->rank; d-- > 0;) {
    if (t->shape[d] == 1) continue;
    if (t->strides[d] != run) {
      *outer = d + 1;
      break;
    }
    run *= t->shape[d];
  }
  return run;
}

/* `t` as rows of `len` elements (len >= 2 divides its run of `run`
 * elements, `outer` dimensions outside it): a tensor whose element j is the
 * first element of row j. Its rank is at most t's: a run of 2 or more
 * elements holds a dimension. */
static cubert_tensor tensor_rows(const cubert_tensor *t, uint32_t outer, uint64_t run, uint64_t len) {
  cubert_tensor rows = *t;
  rows.rank = outer + 1;
  rows.shape[outer] = run / len;
  rows.strides[outer] = len;
  return rows;
}

static uint64_t gcd64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

/* Element k of out = element k of in for k below the smaller count, in
 * rows of the gcd of both runs when the element sizes agree (one memmove
 * a row), else element by element: the same bytes either way. */
/* The tensors' checks; the runtime checks each view against its handle
 * (its footprint within the bytes bound) before either runs. `out`'s write
 * set stays its footprint (kernels.h): a tensor is not narrowed. */
static cubert_status check_copy_strided(const cubert_host_launch *l, uint64_t *written, char *msg, size_t cap) {
  static const char k[] = "cubert_copy_strided";
  (void)written;
  if (!l || l->nargs != 2 || !l->args || !l->sizes)
    return refuse(msg, cap, CUBERT_ERR_INVALID_ARGUMENT, "%s: 2 arguments expected", k);
  cubert_tensor in, out;
  cubert_status st = take_tensor(l, k, 0, "in", &in, msg, cap);
  if (st == CUBERT_OK) st = take_tensor(l, k, 1, "out", &out, msg, cap);
  return st;
}

static cubert_status host_copy_strided(const cubert_host_launch *l, char *msg, size_t cap) {
  cubert_status st = check_copy_strided(l, NULL, msg, cap);
  if (st != CUBERT_OK) return st;
  cubert_tensor in, out;
  memcpy(&in, l->args[0], sizeof in);
  memcpy(&out, l->args[1], sizeof out);
  uint64_t n = tensor_count(&in), m = tensor_count(&out);
  if (m < n) n = m;
  size_t bytes = in.elem_size < out.elem_size ? in.elem_size : out.elem_size;
  if (n && in.elem_size == out.elem_size) {
    uint32_t oi, oo;
    uint64_t ri = tensor_run(&in, &oi), ro = tensor_run(&out, &oo), len = gcd64(ri, ro);
    if (len >= 2) {
      cubert_tensor rin = tensor_rows(&in, oi, ri, len), rout = tensor_rows(&out, oo, ro, len);
      tensor_walk r = {&rin, {0}, 0}, w = {&rout, {0}, 0};
      for (uint64_t j = 0; j < n / len; j++, walk_next(&r), walk_next(&w))
        memmove(walk_at(&w), walk_at(&r), (size_t)(len * bytes));
      return CUBERT_OK;
    }
  }
  tensor_walk r = {&in, {0}, 0}, w = {&out, {0}, 0};
  for (uint64_t i = 0; i < n; i++, walk_next(&r), walk_next(&w)) memcpy(walk_at(&w), walk_at(&r), bytes);
  return CUBERT_OK;
}

static cubert_status check_fill_strided(const cubert_host_launch *l, uint64_t *written, char *msg, size_t cap) {
  static const char k[] = "cubert_fill_strided";
  (void)written;
  if (!l || l->nargs != 2 || !l->args || !l->sizes)
    return refuse(msg, cap, CUBERT_ERR_INVALID_ARGUMENT, "%s: 2 arguments expected", k);
  cubert_tensor out;
  cubert_status st = take_tensor(l, k, 0, "out", &out, msg, cap);
  if (st != CUBERT_OK) return st;
  if (l->sizes[1] != 16 || !l->args[1])
    return refuse(msg, cap, CUBERT_ERR_INVALID_ARGUMENT,
                  "%s: `value` is a %" PRIu64 "-byte scalar, expected 16", k, l->sizes[1]);
  return CUBERT_OK;
}

static cubert_status host_fill_strided(const cubert_host_launch *l, char *msg, size_t cap) {
  cubert_status st = check_fill_strided(l, NULL, msg, cap);
  if (st != CUBERT_OK) return st;
  cubert_tensor out;
  memcpy(&out, l->args[0], sizeof out);
  unsigned char value[16];
  memcpy(value, l->args[1], sizeof value);
  uint64_t n = tensor_count(&out);
  size_t e = out.elem_size;
  uint32_t oo;
  uint64_t run = n ? tensor_run(&out, &oo) : 0;
  if (run >= 2) { /* a row of values, then one memcpy a row */
    cubert_tensor rows = tensor_rows(&out, oo, run, run);
    tensor_walk w = {&rows, {0}, 0};
    unsigned char *first = walk_at(&w);
    for (uint64_t x = 0; x < run; x++) memcpy(first + x * e, value, e);
    walk_next(&w);
    for (uint64_t j = 1; j < n / run; j++, walk_next(&w)) memcpy(walk_at(&w), first, (size_t)(run * e));
    return CUBERT_OK;
  }
  tensor_walk w = {&out, {0}, 0};
  for (uint64_t i = 0; i < n; i++, walk_next(&w)) memcpy(walk_at(&w), value, e);
  return CUBERT_OK;
}

/* ------------------------------------------------------------ descriptors */

#define BUF(n, a) {n, CUBERT_PARAM_BUFFER, CUBERT_ACCESS_##a, 0}
#define PEER(n, a) {n, CUBERT_PARAM_PEER_BUFFER, CUBERT_ACCESS_##a, 0}
#define SCALAR(n, s) {n, CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, s}
#define TENSOR(n, a) {n, CUBERT_PARAM_TENSOR, CUBERT_ACCESS_##a, 0}

static const cubert_param fill_params[] = {BUF("out", WRITE), SCALAR("n", 8), SCALAR("value", 4)};
static const cubert_param copy_params[] = {BUF("in", READ), BUF("out", WRITE), SCALAR("n", 8)};
static const cubert_param scale_add_params[] = {BUF("x", READ), BUF("y", READ_WRITE),
                                                SCALAR("a", 4), SCALAR("n", 8)};
static const cubert_param sum_params[] = {BUF("x", READ), BUF("partial", WRITE), SCALAR("n", 8)};
static const cubert_param checksum_params[] = {BUF("x", READ), BUF("acc", READ_WRITE),
                                               SCALAR("n", 8)};
static const cubert_param copy_peer_read_params[] = {PEER("in", READ), BUF("out", WRITE),
                                                     SCALAR("n", 8)};
static const cubert_param copy_peer_write_params[] = {BUF("in", READ), PEER("out", WRITE),
                                                      SCALAR("n", 8)};
static const cubert_param copy_strided_params[] = {TENSOR("in", READ), TENSOR("out", WRITE)};
static const cubert_param fill_strided_params[] = {TENSOR("out", WRITE), SCALAR("value", 16)};

#define COUNT_OF(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))
#define DESC(name_, entry_, params_, source_, fn_)                                            \
  {.name = name_, .params = params_, .nparams = COUNT_OF(params_), .source = source_,          \
   .entry = entry_, .compile_options = NULL, .objects = NULL, .nobjects = 0, .host_fn = fn_}

static const cubert_kernel_desc builtins[CUBERT_BUILTIN_COUNT] = {
    [CUBERT_BUILTIN_FILL_U32] =
        DESC("cubert_fill_u32", "cubert_fill_u32", fill_params, fill_source, host_fill_u32),
    [CUBERT_BUILTIN_COPY_U32] =
        DESC("cubert_copy_u32", "cubert_copy_u32", copy_params, copy_source, host_copy_u32),
    [CUBERT_BUILTIN_SCALE_ADD_F32] = DESC("cubert_scale_add_f32", "cubert_scale_add_f32",
                                          scale_add_params, scale_add_source, host_scale_add_f32),
    [CUBERT_BUILTIN_SUM_F32] =
        DESC("cubert_sum_f32", "cubert_sum_f32", sum_params, sum_source, host_sum_f32),
    [CUBERT_BUILTIN_CHECKSUM_U32] = DESC("cubert_checksum_u32", "cubert_checksum_u32",
                                         checksum_params, checksum_source, host_checksum_u32),
    [CUBERT_BUILTIN_COPY_PEER_READ] = DESC("cubert_copy_peer_read", "cubert_copy_u32",
                                           copy_peer_read_params, copy_source, host_copy_u32),
    [CUBERT_BUILTIN_COPY_PEER_WRITE] = DESC("cubert_copy_peer_write", "cubert_copy_u32",
                                            copy_peer_write_params, copy_source, host_copy_u32),
    [CUBERT_BUILTIN_COPY_STRIDED] = DESC("cubert_copy_strided", "cubert_copy_strided", copy_strided_params,
                                         copy_strided_source, host_copy_strided),
    [CUBERT_BUILTIN_FILL_STRIDED] = DESC("cubert_fill_strided", "cubert_fill_strided", fill_strided_params,
                                         fill_strided_source, host_fill_strided),
};

/* Each built-in's launch check (runtime/kcheck.h): its host function's first half. */
static const cb_kernel_check_fn checks[CUBERT_BUILTIN_COUNT] = {
    [CUBERT_BUILTIN_FILL_U32] = check_fill_u32,
    [CUBERT_BUILTIN_COPY_U32] = check_copy_u32,
    [CUBERT_BUILTIN_SCALE_ADD_F32] = check_scale_add_f32,
    [CUBERT_BUILTIN_SUM_F32] = check_sum_f32,
    [CUBERT_BUILTIN_CHECKSUM_U32] = check_checksum_u32,
    [CUBERT_BUILTIN_COPY_PEER_READ] = check_copy_peer_read,
    [CUBERT_BUILTIN_COPY_PEER_WRITE] = check_copy_peer_write,
    [CUBERT_BUILTIN_COPY_STRIDED] = check_copy_strided,
    [CUBERT_BUILTIN_FILL_STRIDED] = check_fill_strided,
};

const cubert_kernel_desc *cubert_builtin_desc(cubert_builtin which) {
  if ((unsigned)which >= CUBERT_BUILTIN_COUNT)
    return NULL;
  return &builtins[which];
}

/* Created on first use, under a lock (a failed creation is retried by the
 * next call rather than remembered). */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cubert_kernel *cache[CUBERT_BUILTIN_COUNT];

cubert_status cubert_builtin_kernel(cubert_builtin which, cubert_kernel **kernel) {
  if ((unsigned)which >= CUBERT_BUILTIN_COUNT)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_builtin_kernel: no built-in kernel %d",
                   (int)which);
  if (!kernel)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_builtin_kernel: kernel is NULL");
  cubert_status st = CUBERT_OK;
  pthread_mutex_lock(&cache_lock);
  if (!cache[which]) {
    st = cubert_kernel_create(&builtins[which], &cache[which]);
    /* checked at launch on every backend, before it is handed out */
    if (st == CUBERT_OK)
      cb_kernel_set_check(cache[which], checks[which]);
  }
  cubert_kernel *k = st == CUBERT_OK ? cache[which] : NULL;
  if (k)
    cubert_kernel_retain(k);
  pthread_mutex_unlock(&cache_lock);
  if (st != CUBERT_OK)
    return st;
  *kernel = k;
  return CUBERT_OK;
}

cubert_status cubert_builtin_config(cubert_builtin which, const cubert_device_info *info, uint64_t n,
                                    cubert_launch_config *config) {
  if ((unsigned)which >= CUBERT_BUILTIN_COUNT)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_builtin_config: no built-in kernel %d",
                   (int)which);
  if (!info || !config)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_builtin_config: %s is NULL",
                   info ? "config" : "info");
  bool copy = which == CUBERT_BUILTIN_COPY_U32 || which == CUBERT_BUILTIN_COPY_PEER_READ ||
              which == CUBERT_BUILTIN_COPY_PEER_WRITE;
  /* a copy's thread moves 4 words per chunk, the others 1 word per step */
  uint64_t per_block = (uint64_t)CUBERT_BUILTIN_BLOCK * (copy ? 4 : 1);
  uint64_t blocks = n / per_block + (n % per_block != 0);
  uint64_t cap = (uint64_t)(info->multiprocessors ? info->multiprocessors : 1) *
                 CUBERT_BUILTIN_BLOCKS_PER_CU;
  if (blocks > cap) blocks = cap;
  if (blocks == 0) blocks = 1;
  memset(config, 0, sizeof *config);
  config->grid[0] = (uint32_t)blocks;
  config->grid[1] = config->grid[2] = 1;
  config->block[0] = CUBERT_BUILTIN_BLOCK;
  config->block[1] = config->block[2] = 1;
  if (which == CUBERT_BUILTIN_SUM_F32) config->shared_memory = CUBERT_BUILTIN_BLOCK * sizeof(float);
  return CUBERT_OK;
}
