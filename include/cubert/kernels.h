/* cubert/kernels.h: the built-in kernel library, the same on every backend.
 *
 * Each built-in has one HIP/CUDA source (compiled by hiprtc/NVRTC) and one
 * host function (the host backend) with the same results, bit for bit.
 * Launch them with any grid and block: every kernel loops grid-stride over n;
 * cubert_builtin_config() gives the configuration that is fast on a device.
 *
 *   FILL_U32        out[i] = value                    (out: write, n: u64, value: u32)
 *   COPY_U32        out[i] = in[i]                    (in: read, out: write, n: u64)
 *                   16 bytes per access when in and out sit at the same
 *                   offset modulo 16 (whole allocations do), else 4
 *   SCALE_ADD_F32   y[i] = a * x[i] + y[i]            (x: read, y: read-write, a: f32, n: u64)
 *   SUM_F32         partial[b] = sum of block b's share of x, reduced as a
 *                   tree in shared memory; grid[0] partials; block[0] a power
 *                   of two; shared memory block[0] * 4 bytes
 *                                                     (x: read, partial: write, n: u64)
 *   CHECKSUM_U32    *acc += sum over i of (x[i] ^ (i * 2654435761)) mod 2^64
 *                                                     (x: read, acc: read-write u64, n: u64)
 *   COPY_PEER_READ  COPY_U32 with `in` a peer buffer  (the destination's device executes)
 *   COPY_PEER_WRITE COPY_U32 with `out` a peer buffer (the source's device executes)
 *   COPY_STRIDED    element k of out = element k of in, k in row-major order
 *                   of each tensor's shape (the last dimension fastest), for
 *                   k below the smaller element count; the first
 *                   min(in, out) element-size bytes of each element move
 *                   (same shape and element size: a plain strided copy, the
 *                   same bytes as cubert_handle_copy_strided)
 *                                                     (in: tensor read, out: tensor write)
 *   FILL_STRIDED    every element of out = the first elem_size bytes of value
 *                                                     (out: tensor write, value: 16 bytes)
 *   The tensor kernels' n for cubert_builtin_config() is the element count.
 *   Both walk rows where the tensors' innermost dimensions are contiguous
 *   (stride 1, elements of one size; rows of at least 2 elements that line
 *   up on both sides: element k of a row of one is element k of a row of
 *   the other), one index computation a piece of a row (16 bytes a thread
 *   for rows under 32 bytes, and up to 512 where the grid has a thread for
 *   every such piece; longer pieces for groups of threads otherwise) and
 *   16 bytes an access where both sides sit at the same offset modulo 16
 *   (8, 4, 2 or 1 where they sit at the same offset modulo that; the ends
 *   of a row in narrower units); every other layout element by element.
 *   Either way each element is written once: the bytes do not depend on
 *   the walk or the launch shape.
 *   Footprints of in and out that share a byte give results that depend on
 *   the order (as for any kernel whose input and output alias).
 *
 * Every launch of a built-in is checked by cubert_launch before anything is
 * enqueued, on every backend, by the rules its host function applies: the
 * argument count, the scalars' sizes, n against the bytes each buffer binds
 * (and, for SUM_F32, grid[0] partials against `partial`), each buffer's
 * alignment to its element, SUM_F32's shape (one dimension, block[0] a power
 * of two, its shared memory); the tensor kernels' views against their
 * handles. A launch that breaks one is refused at once, naming the kernel,
 * the argument and the sizes (CUBERT_ERR_OUT_OF_RANGE for a size,
 * CUBERT_ERR_INVALID_ARGUMENT or CUBERT_ERR_LAUNCH_CONFIG otherwise): nothing
 * is enqueued, nothing tainted, no failure made. A wrong n is an error,
 * never an access past a buffer.
 *
 * The write set (docs/failures.md, rule 3) of a built-in is what it writes
 * where its arguments say: FILL_U32, COPY_U32, COPY_PEER_READ and
 * COPY_PEER_WRITE write out's first 4n bytes and SUM_F32 partial's first
 * grid[0] * 4, and a launch releases on success (taints on failure) those
 * bytes only; the rest of the buffer keeps what it carried. COPY_STRIDED
 * with an `out` of more elements, or larger ones, than `in` is not narrowed:
 * it releases (taints) out's whole footprint, bytes it did not write
 * included, like a user kernel's binding. SCALE_ADD_F32's y and
 * CHECKSUM_U32's acc are read-write and bound as they are. Only kernels from
 * cubert_builtin_kernel() are checked so: a kernel made with
 * cubert_kernel_create() from a cubert_builtin_desc() descriptor is a user
 * kernel (its host function still refuses a wrong launch, at the fence).
 *
 * Each kernel's name (cubert_kernel_name(), and what a fault rule's kernel=
 * selects) is "cubert_" and the lower-case name: cubert_fill_u32,
 * cubert_copy_u32, cubert_scale_add_f32, cubert_sum_f32, cubert_checksum_u32,
 * cubert_copy_peer_read, cubert_copy_peer_write, cubert_copy_strided,
 * cubert_fill_strided. docs/guide.md shows them in
 * use.
 *
 * Each built-in kernel is made on first use and kept until the process
 * ends (through the allocator set then, cubert_set_allocator()).
 *
 * Ownership: cubert_builtin_kernel() returns a new reference; descriptors
 * from cubert_builtin_desc() are static. */
#ifndef CUBERT_KERNELS_H
#define CUBERT_KERNELS_H

#include "cubert/cubert.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cubert_builtin {
  CUBERT_BUILTIN_FILL_U32 = 0,
  CUBERT_BUILTIN_COPY_U32,
  CUBERT_BUILTIN_SCALE_ADD_F32,
  CUBERT_BUILTIN_SUM_F32,
  CUBERT_BUILTIN_CHECKSUM_U32,
  CUBERT_BUILTIN_COPY_PEER_READ,
  CUBERT_BUILTIN_COPY_PEER_WRITE,
  CUBERT_BUILTIN_COPY_STRIDED,
  CUBERT_BUILTIN_FILL_STRIDED,
  CUBERT_BUILTIN_COUNT
} cubert_builtin;

CUBERT_API cubert_status cubert_builtin_kernel(cubert_builtin which, cubert_kernel **kernel);
/* NULL for a value outside the enum. */
CUBERT_API const cubert_kernel_desc *cubert_builtin_desc(cubert_builtin which);

/* Threads per block, and blocks per compute unit at most, that
 * cubert_builtin_config() chooses. */
#define CUBERT_BUILTIN_BLOCK 256u
#define CUBERT_BUILTIN_BLOCKS_PER_CU 8u

/* A launch configuration for built-in `which` over `n` elements on the
 * device `info` describes (cubert_runtime_device_info): one dimension,
 * CUBERT_BUILTIN_BLOCK threads per block, as many blocks as cover n (a copy
 * covers 4 words per thread: it moves 16 bytes at a time) but at most
 * CUBERT_BUILTIN_BLOCKS_PER_CU per compute unit (info->multiprocessors; 1
 * when 0), at least 1; SUM_F32 also gets its shared memory (block * 4
 * bytes). Any configuration gives the same results (grid-stride); this one
 * is the fast one: the built-in copy moves data at the copy engine's rate
 * with it (docs/bench.md). CUBERT_ERR_INVALID_ARGUMENT for a value outside
 * the enum or a NULL pointer; `config` is written only on success. */
CUBERT_API cubert_status cubert_builtin_config(cubert_builtin which, const cubert_device_info *info,
                                               uint64_t n, cubert_launch_config *config);

#ifdef __cplusplus
}
#endif
#endif
