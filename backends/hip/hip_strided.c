/* backends/hip/hip_strided.c: strided transfers (copy_strided). The vendor's
 * pitched copies carry them where the layout fits: one run dimension is a
 * hipMemcpy2DAsync (width the run, height the count, a pitch a side), two
 * whose outer pitch is a multiple of the inner one on both sides a
 * hipMemcpy3DAsync; deeper layouts are a 2-D copy per slab of the two
 * innermost dimensions, and a prefix of the runs (a transfer the fault layer
 * stops part way) one copy per run. Host memory: the copy is enqueued, then
 * the stream waits, so a host source may be reused and a host destination
 * holds the bytes on return. Peer sources go through unified addressing
 * (hipMemcpyDefault): the runtime enabled peer access when the memory was
 * shared, and the driver stages through the host otherwise.
 *
 * Calls hip_stream.c (cb_hip_work_begin, cb_hip_mark_work) and hip_error.c
 * (cb_hip_fail), as hip_backend.c does: nothing calls into this file but the
 * ops table. */
#include <inttypes.h>
#include <string.h>

#include "backends/hip/hip_internal.h"
#include "base/strided.h"

/* The largest pitch the pitched copies take: CUDA refuses pitches above
 * its cudaDevAttrMaxPitch (2^31 - 1 on every GPU it lists). */
#define MAX_PITCH ((uint64_t)INT32_MAX)

static hipMemcpyKind kind_of(cubert_backend_direction d) {
  switch (d) {
  case CUBERT_BACKEND_HOST_TO_DEVICE: return hipMemcpyHostToDevice;
  case CUBERT_BACKEND_DEVICE_TO_HOST: return hipMemcpyDeviceToHost;
  case CUBERT_BACKEND_DEVICE_TO_DEVICE: return hipMemcpyDeviceToDevice;
  default: return hipMemcpyDefault;
  }
}

static bool pitch_fits(uint64_t p) { return p <= MAX_PITCH; }

/* The 3-D parameters: HIP's NVIDIA headers name CUDA's struct without its
 * tag and build the pointers with C++-only helpers, so C fills the members
 * (the same names on both platforms). */
#if CB_HIP_NVIDIA
typedef struct cudaMemcpy3DParms cb_3d_parms;
#else
typedef hipMemcpy3DParms cb_3d_parms;
#endif

/* One 3-D copy: counts c0 (slabs) x c1 (rows) of `run` bytes. */
static hipError_t copy_3d(uint64_t dst, uint64_t src, const cubert_backend_strided *l, hipMemcpyKind kind,
                          hipStream_t stream) {
  cb_3d_parms p;
  memset(&p, 0, sizeof p);
  p.srcPtr.ptr = CB_HIP_PTR(src);
  p.srcPtr.pitch = (size_t)l->src_pitch[1];
  p.srcPtr.xsize = (size_t)l->run;
  p.srcPtr.ysize = (size_t)(l->src_pitch[0] / l->src_pitch[1]);
  p.dstPtr.ptr = CB_HIP_PTR(dst);
  p.dstPtr.pitch = (size_t)l->dst_pitch[1];
  p.dstPtr.xsize = (size_t)l->run;
  p.dstPtr.ysize = (size_t)(l->dst_pitch[0] / l->dst_pitch[1]);
  p.extent.width = (size_t)l->run;
  p.extent.height = (size_t)l->count[1];
  p.extent.depth = (size_t)l->count[0];
  p.kind = kind;
  return hipMemcpy3DAsync(&p, stream);
}

static hipError_t enqueue(uint64_t dst, uint64_t src, const cubert_backend_strided *l, hipMemcpyKind kind,
                          hipStream_t stream, const char **how) {
  uint64_t total = cb_strided_runs(l);
  if (l->nruns == 0 || l->run == 0) return hipSuccess;
  uint32_t nd = l->ndims;
  bool pitched = nd >= 1 && l->nruns == total;
  for (uint32_t d = 0; pitched && d < nd; d++)
    pitched = pitch_fits(l->src_pitch[d]) && pitch_fits(l->dst_pitch[d]) &&
              l->src_pitch[d] >= l->run && l->dst_pitch[d] >= l->run;
  /* 3-D: each slab is ysize whole rows of the inner pitch, and holds the
   * count[1] rows the copy moves */
  if (pitched && nd == 2 && l->src_pitch[1] && l->dst_pitch[1] && l->src_pitch[0] % l->src_pitch[1] == 0 &&
      l->dst_pitch[0] % l->dst_pitch[1] == 0 && l->src_pitch[0] / l->src_pitch[1] >= l->count[1] &&
      l->dst_pitch[0] / l->dst_pitch[1] >= l->count[1]) {
    *how = "hipMemcpy3DAsync";
    return copy_3d(dst, src, l, kind, stream);
  }
  if (pitched) {
    /* a 2-D copy per slab of the innermost dimension */
    *how = "hipMemcpy2DAsync";
    uint32_t in = nd - 1;
    cubert_backend_strided outer = *l;
    outer.ndims = in;
    uint64_t slabs = cb_strided_runs(&outer);
    for (uint64_t k = 0; k < slabs; k++) {
      uint64_t so, dof;
      cb_strided_offsets(&outer, k, &so, &dof);
      hipError_t e = hipMemcpy2DAsync(CB_HIP_PTR(dst + dof), (size_t)l->dst_pitch[in], CB_HIP_PTR(src + so),
                                      (size_t)l->src_pitch[in], (size_t)l->run, (size_t)l->count[in], kind,
                                      stream);
      if (e != hipSuccess) return e;
    }
    return hipSuccess;
  }
  *how = "hipMemcpyAsync";
  for (uint64_t k = 0; k < l->nruns; k++) {
    uint64_t so, dof;
    cb_strided_offsets(l, k, &so, &dof);
    hipError_t e = hipMemcpyAsync(CB_HIP_PTR(dst + dof), CB_HIP_PTR(src + so), (size_t)l->run, kind, stream);
    if (e != hipSuccess) return e;
  }
  return hipSuccess;
}

cubert_status cb_hip_copy_strided(void *device, void *stream, uint64_t work, cubert_backend_direction direction,
                                  uint64_t dst, void *src_device, uint64_t src,
                                  const cubert_backend_strided *layout, cubert_berr *err) {
  cb_hip_device *dev = device;
  cb_hip_stream *s = stream;
  cubert_status st = cb_hip_work_begin(dev, s, "strided copy", err);
  if (st) return st;
  if (!layout || layout->ndims > CUBERT_BACKEND_MAX_DIMS || layout->nruns > cb_strided_runs(layout))
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "strided copy on %s: bad layout", dev->label);
  if (direction == CUBERT_BACKEND_PEER_TO_DEVICE) {
    cb_hip_device *from = src_device;
    if (!from)
      return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "strided copy on %s: no source device",
                             dev->label);
    if ((st = cb_hip_check_lost(from, err)) != CUBERT_OK) {
      cb_hip_mark_work(s, work, "strided-copy");
      return st;
    }
  }
  const char *how = "hipMemcpyAsync";
  hipError_t e = enqueue(dst, src, layout, kind_of(direction), s->stream, &how);
  cb_hip_mark_work(s, work, "strided-copy");
  if (e == hipSuccess &&
      (direction == CUBERT_BACKEND_HOST_TO_DEVICE || direction == CUBERT_BACKEND_DEVICE_TO_HOST)) {
    how = "hipStreamSynchronize";
    e = hipStreamSynchronize(s->stream);
  } else if (e != hipSuccess && direction == CUBERT_BACKEND_HOST_TO_DEVICE) {
    (void)hipStreamSynchronize(s->stream); /* a copy may still read the source */
  }
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_COPY,
                       "strided copy of %" PRIu64 " runs of %" PRIu64 " bytes 0x%" PRIx64 " -> 0x%" PRIx64
                       " on %s (%s)",
                       layout->nruns, layout->run, src, dst, dev->label, how);
  return CUBERT_OK;
}
