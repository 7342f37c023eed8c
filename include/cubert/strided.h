/* cubert/strided.h: strided views of device memory (copy descriptors).
 *
 * A cubert_view describes elements inside one handle's view: up to
 * CUBERT_VIEW_MAX_DIMS dimensions, a shape, strides in elements and an
 * element size. The bytes it names are its *footprint*: element
 * (i0, ..., in-1) lies at byte
 *
 *     handle start + (offset + sum_d i_d * strides[d]) * elem_size
 *
 * and covers elem_size bytes. A column block of a row-major matrix of
 * `cols` columns is {2, elem, first, {rows, width}, {cols, 1}}.
 *
 * Every call here checks the view against the handle before anything is
 * claimed or queued (cubert_view_check): a refused view changes nothing.
 * Reads and writes move the footprint to or from *packed* host memory: the
 * elements in row-major order of the view's shape (the last dimension
 * fastest), cubert_view_bytes() bytes in all.
 *
 * Failure accounting is exact to the footprint (docs/failures.md, "Strided
 * views"): a strided write that fails taints exactly the bytes it would have
 * written, not the range around them, and a strided read is refused only
 * where its footprint meets tainted bytes. The ledger keeps a failed strided
 * write as one compact claim whatever its number of rows.
 *
 * Ownership: views are plain structs owned by the caller, read during the
 * call only; handles and clients are borrowed as everywhere in cubert.h. */
#ifndef CUBERT_STRIDED_H
#define CUBERT_STRIDED_H

#include <stdint.h>

#include "cubert/export.h"
#include "cubert/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUBERT_VIEW_MAX_DIMS 8

typedef struct cubert_view {
  uint32_t ndims;     /* 1 .. CUBERT_VIEW_MAX_DIMS */
  uint32_t elem_size; /* bytes per element: 1, 2, 4, 8 or 16 */
  uint64_t offset;    /* elements from the handle's first byte to element (0, ..., 0) */
  uint64_t shape[CUBERT_VIEW_MAX_DIMS];   /* elements per dimension, outermost first */
  uint64_t strides[CUBERT_VIEW_MAX_DIMS]; /* elements between neighbours in each dimension */
} cubert_view;

/* What a kernel gets for a tensor parameter (CUBERT_PARAM_TENSOR), by
 * value: a plain struct of 144 bytes, 8-byte aligned, with no padding, laid
 * out the same in host C and in device code. Kernel source declares it as
 *
 *   struct cubert_tensor {
 *     unsigned long long address;        // element (0, ..., 0)
 *     unsigned int rank, elem_size;
 *     unsigned long long shape[8], strides[8];
 *   };
 *
 * and takes it by value (`cubert_tensor out`). `address` is the device
 * address of element (0, ..., 0) (host backend: a host pointer); element
 * (i0, ...) lies at address + sum_d i_d * strides[d] * elem_size. `rank`,
 * `shape` and `strides` are the view's, in its order (entries past rank are
 * 0). The built-ins CUBERT_BUILTIN_COPY_STRIDED and FILL_STRIDED take
 * tensors (cubert/kernels.h). */
typedef struct cubert_tensor {
  uint64_t address;
  uint32_t rank;
  uint32_t elem_size;
  uint64_t shape[CUBERT_VIEW_MAX_DIMS];
  uint64_t strides[CUBERT_VIEW_MAX_DIMS];
} cubert_tensor;

/* Whether `view` is a valid view of `handle`'s bytes. CUBERT_OK, or:
 *  - CUBERT_ERR_INVALID_ARGUMENT: NULL, ndims 0 or above 8, an element size
 *    other than 1, 2, 4, 8 or 16, a first element not aligned to the element
 *    size (in allocation bytes), a stride of 0 in a dimension of more than
 *    one element, or dimensions that do not nest: taken by stride, each
 *    dimension's stride must cover the span of the dimensions inside it
 *    (the message names the dimension whose stride is too small). That
 *    refuses every view with two elements sharing bytes, and also views
 *    whose dimensions interleave without sharing ({3, 3} elements at
 *    strides {3, 2}: the ledger keeps a footprint as sorted runs);
 *  - CUBERT_ERR_OUT_OF_RANGE: an element past the handle's view, or an
 *    extent whose byte offset overflows 64 bits (the message names the
 *    dimension).
 * A shape with a 0 names no bytes: its extents are not checked (it reaches
 * nothing), but the rest is: ndims, the element size, a stride of 0 in a
 * dimension of more than one element, and its offset, which must lie
 * within the handle's view (at most its end: else CUBERT_ERR_OUT_OF_RANGE)
 * with the first element aligned. Such a view moves nothing, and every
 * call on it is still checked. Dimensions need not be ordered by stride. */
CUBERT_API cubert_status cubert_view_check(const cubert_handle *handle, const cubert_view *view);

/* Packed bytes of the view's elements (product of the shape times the
 * element size); 0 for NULL, for ndims 0 or above CUBERT_VIEW_MAX_DIMS, and
 * when the product overflows 64 bits. It checks nothing else (an element
 * size of 3 gives 3 bytes an element): cubert_view_check says whether a
 * view is valid. */
CUBERT_API uint64_t cubert_view_bytes(const cubert_view *view);

/* Reads the footprint of `view` into `dst`, packed (`size` must be
 * cubert_view_bytes(view), else CUBERT_ERR_OUT_OF_RANGE as for
 * cubert_handle_read; `dst` may be NULL only when that is 0). Waits for the work before it, like
 * cubert_handle_read. Refused with CUBERT_ERR_TAINTED only when tainted
 * bytes lie inside the footprint; the error names each tainted piece of
 * the footprint it met (cubert_error_failure gives allocation bytes). */
CUBERT_API cubert_status cubert_handle_read_strided(cubert_client *client, const cubert_handle *handle,
                                                    const cubert_view *view, void *dst, uint64_t size);

/* Writes packed host bytes `src` (`size` = cubert_view_bytes(view), else
 * CUBERT_ERR_OUT_OF_RANGE) into the footprint of `view`; bytes between its
 * elements are untouched. `src`
 * may be reused when the call returns. A write that fails taints exactly the
 * footprint; one that succeeds releases exactly the footprint. */
CUBERT_API cubert_status cubert_handle_write_strided(cubert_client *client, cubert_handle *handle,
                                                     const cubert_view *view, const void *src,
                                                     uint64_t size);

/* Copies element (i0, ...) of `src_view` to element (i0, ...) of
 * `dst_view` for every index of the shape, which both views must share
 * (element sizes too). Same device. Footprints that share a byte are
 * refused (CUBERT_ERR_INVALID_ARGUMENT); footprints that interleave without
 * sharing a byte are fine. A tainted source footprint: the copy is not done,
 * the destination footprint carries a child failure, and the call returns
 * CUBERT_ERR_TAINTED naming the tainted pieces. */
CUBERT_API cubert_status cubert_handle_copy_strided(cubert_client *client, const cubert_handle *src,
                                                    const cubert_view *src_view, cubert_handle *dst,
                                                    const cubert_view *dst_view);

/* The same from memory of `src_client`'s device to memory of
 * `dst_client`'s device (one runtime, one backend), as
 * cubert_handle_copy_peer: the source's last writer is waited for, the
 * copy runs on the destination's stream. One device: cubert_handle_copy_strided. */
CUBERT_API cubert_status cubert_handle_copy_strided_peer(cubert_client *src_client,
                                                         const cubert_handle *src,
                                                         const cubert_view *src_view,
                                                         cubert_client *dst_client, cubert_handle *dst,
                                                         const cubert_view *dst_view);

/* cubert_handle_check over the footprint only: CUBERT_OK when no byte of
 * it is tainted (bytes between its elements may be), else
 * CUBERT_ERR_TAINTED naming the tainted pieces. Waits for nothing. */
CUBERT_API cubert_status cubert_handle_check_strided(cubert_client *client, const cubert_handle *handle,
                                                     const cubert_view *view);

#ifdef __cplusplus
}
#endif
#endif
