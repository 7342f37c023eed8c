/* backends/hip/hip_raw.h: plain-HIP baselines for `cubert bench` (internal,
 * never installed). Each call does with HIP alone what the benchmark also
 * does through cubert: hipMalloc, hipMemcpyAsync, hipMemcpyPeerAsync, a copy
 * kernel compiled by hiprtc and launched with hipModuleLaunchKernel, timed
 * with hipEvents. No cubert object is involved, so the ratio cubert/raw is
 * the runtime's overhead.
 *
 * This header holds no HIP type, so bench/ can include it; hip_raw.c is the
 * only file that includes <hip/...> for it. Built without HIP, the same
 * functions come from bench/hip_raw_none.c and return CUBERT_ERR_UNSUPPORTED.
 *
 * Devices are HIP ordinals (cubert_device_info.backend_index). Addresses are
 * device addresses as integers. Each device gets two streams of its own
 * (transfer i of a run uses stream i), made on first use.
 *
 * Ownership: cb_hip_raw_open() returns a state owned by the caller, freed
 * with cb_hip_raw_close() (which frees the streams, events and modules it
 * made; memory from cb_hip_raw_alloc must be freed by the caller first). The
 * message of cb_hip_raw_error() belongs to the state.
 *
 * Threads: one thread at a time per state. */
#ifndef CUBERT_BACKENDS_HIP_RAW_H
#define CUBERT_BACKENDS_HIP_RAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubert/status.h"

typedef struct cb_hip_raw cb_hip_raw;

/* Kernel sources compiled on first use per device; entry names:
 *   copy:     cubert_copy_u32(const u32 *in, u32 *out, u64 n)
 *   checksum: cubert_checksum_u32(const u32 *x, u64 *acc, u64 n)
 *   bench:    cb_bench_empty0(), cb_bench_empty4(4 pointers),
 *             cb_bench_empty16(16 pointers), cb_bench_hold(u64 ticks),
 *             cb_bench_chase(const u32 *next, u32 *state, u64 steps)
 * The strings must outlive the state. */
typedef struct cb_hip_raw_sources {
  const char *copy;
  const char *checksum;
  const char *bench;
} cb_hip_raw_sources;

typedef enum cb_hip_raw_op {
  CB_HIP_RAW_H2D = 0,     /* hipMemcpyAsync from host memory as given */
  CB_HIP_RAW_D2H,
  CB_HIP_RAW_D2D,         /* hipMemcpyAsync device to device */
  CB_HIP_RAW_PEER,        /* hipMemcpyPeerAsync */
  CB_HIP_RAW_KERNEL       /* the copy kernel on `exec` */
} cb_hip_raw_op;

typedef struct cb_hip_raw_xfer {
  cb_hip_raw_op op;
  int exec;               /* whose stream runs and times it */
  int src_dev, dst_dev;   /* -1: host memory */
  uint64_t src, dst;      /* device addresses, or host pointers */
  uint64_t size;
  uint32_t grid, block;   /* CB_HIP_RAW_KERNEL */
} cb_hip_raw_xfer;

/* Opens HIP; `device_count` gets its devices (0 is not an error). On failure
 * `message` says why. */
cubert_status cb_hip_raw_open(const cb_hip_raw_sources *sources, cb_hip_raw **raw,
                              int *device_count, char *message, size_t capacity);
void cb_hip_raw_close(cb_hip_raw *raw);
const char *cb_hip_raw_error(const cb_hip_raw *raw);

cubert_status cb_hip_raw_alloc(cb_hip_raw *raw, int dev, uint64_t size, uint64_t *addr);
void cb_hip_raw_free(cb_hip_raw *raw, int dev, uint64_t addr);
/* Pinned host memory (hipHostMalloc, portable). */
cubert_status cb_hip_raw_host_alloc(cb_hip_raw *raw, uint64_t size, void **ptr);
void cb_hip_raw_host_free(cb_hip_raw *raw, void *ptr);
/* Synchronous transfers and a 32-bit fill (size a multiple of 4). */
cubert_status cb_hip_raw_upload(cb_hip_raw *raw, int dev, uint64_t dst, const void *src,
                                uint64_t size);
cubert_status cb_hip_raw_download(cb_hip_raw *raw, int dev, void *dst, uint64_t src,
                                  uint64_t size);
cubert_status cb_hip_raw_fill(cb_hip_raw *raw, int dev, uint64_t dst, uint32_t value,
                              uint64_t size);
/* hipDeviceCanAccessPeer, then hipDeviceEnablePeerAccess when it can
 * ("already enabled" is success). */
cubert_status cb_hip_raw_peer(cb_hip_raw *raw, int dev, int peer, bool *can);
cubert_status cb_hip_raw_checksum(cb_hip_raw *raw, int dev, uint64_t addr, uint64_t n,
                                  uint64_t *sum);
/* See cb_bench_raw_run (bench/bench.h). */
cubert_status cb_hip_raw_run(cb_hip_raw *raw, const cb_hip_raw_xfer *x, int n, uint32_t count,
                             uint64_t hold_ticks, double *ms, double *enqueue_ms, bool *short_hold);
cubert_status cb_hip_raw_staged(cb_hip_raw *raw, int src_dev, uint64_t src, int dst_dev,
                                uint64_t dst, void *pinned, uint64_t size, uint32_t count,
                                double *ms);
cubert_status cb_hip_raw_chase(cb_hip_raw *raw, int exec, uint64_t next, uint64_t state,
                               uint64_t steps, double *ms);
/* *ns: per launch, the sync included; *enqueue_ns (may be NULL): the
 * launches alone, before the sync. `packed`: the arguments in one buffer
 * (hipModuleLaunchKernel's `extra`, HIP_LAUNCH_PARAM_BUFFER_POINTER), not
 * an array of pointers to each. */
cubert_status cb_hip_raw_launch_loop(cb_hip_raw *raw, int dev, int nbuffers,
                                     const uint64_t *buffers, uint32_t count, bool packed, double *ns,
                                     double *enqueue_ns);
/* The rate of wall_clock64() on device `dev` in kHz
 * (hipDeviceAttributeWallClockRate): CUBERT_ERR_UNSUPPORTED on NVIDIA and
 * on HIP before 6.0, whose headers lack the attribute. */
cubert_status cb_hip_raw_wall_clock_khz(cb_hip_raw *raw, int dev, int *khz);
/* A pitched copy: `height` rows of `width` bytes per slice, `depth`
 * slices (0: a 2-D copy, hipMemcpy2DAsync; else hipMemcpy3DAsync). Rows lie
 * `*_pitch` bytes apart, slices `*_pitch * *_rows` bytes apart. `op` is
 * CB_HIP_RAW_H2D, D2H or D2D; host memory as given (pageable or pinned). */
typedef struct cb_hip_raw_pitched {
  cb_hip_raw_op op;
  uint64_t dst, src;
  uint64_t dst_pitch, src_pitch;
  uint64_t dst_rows, src_rows; /* 3-D: rows per slice */
  uint64_t width, height, depth;
} cb_hip_raw_pitched;

/* `count` pitched copies on device `dev`'s first stream between two
 * hipEvents; *ms the elapsed time the device measured. */
cubert_status cb_hip_raw_pitched_run(cb_hip_raw *raw, int dev, const cb_hip_raw_pitched *p, uint32_t count,
                                     double *ms);
/* Small host transfers, raw, with one of the HIP backend's extra steps
 * added (`cubert bench peer`'s small section: which step costs what). */
typedef enum cb_hip_raw_step {
  CB_HIP_RAW_STEP_PLAIN = 0,   /* raw's one hipMemcpyAsync */
  CB_HIP_RAW_STEP_CTX,         /* + hipCtxGetCurrent before it (AMD: hipGetDevice) */
  CB_HIP_RAW_STEP_LOCKS,       /* + two mutex lock/unlock pairs */
  CB_HIP_RAW_STEP_STACK,       /* host side a stack buffer in a frame of its own, no copy in or out */
  CB_HIP_RAW_STEP_BOUNCE,      /* host side a bounce buffer (the stack up to 4 KiB, else the heap)
                                  and a memcpy in (h2d) or out (d2h) */
  CB_HIP_RAW_STEP_QUERY,       /* + hipStreamQuery after it */
  CB_HIP_RAW_STEP_ATTRS,       /* + the pointer attributes of the host pointer (NVIDIA:
                                  cudaPointerGetAttributes) */
  CB_HIP_RAW_STEP_QUERY_ATTRS, /* + hipStreamQuery, the attributes when it says busy */
  CB_HIP_RAW_STEP_EVENT,       /* + an event recorded after it and waited for */
  CB_HIP_RAW_STEP_EVENTED,     /* on a stream that had an event (timing off) recorded just before the loop */
  CB_HIP_RAW_STEP_WAITED,      /* on a stream made to wait (hipStreamWaitEvent) for an event of the
                                  device's second stream just before the loop, as cubert orders a
                                  stream after another's writes */
  CB_HIP_RAW_STEP_MARKS,       /* + an event recorded every 32 copies, the older ones queried every 256 */
  CB_HIP_RAW_STEP_DRIVER,      /* plain through hipMemcpyHtoDAsync / hipMemcpyDtoHAsync instead (on
                                  NVIDIA the driver's cuMemcpyHtoDAsync / cuMemcpyDtoHAsync, where
                                  hipMemcpyAsync is the CUDA runtime's cudaMemcpyAsync) */
  CB_HIP_RAW_STEP_BACKEND,     /* every step the HIP backend takes for this direction and size
                                  (hip_stream.c cb_hip_write / cb_hip_read), the runtime left out */
  CB_HIP_RAW_STEP_COUNT
} cb_hip_raw_step;

/* `count` pageable transfers of `size` bytes between `host` and device
 * address `dev_addr` on device `dev`'s first stream, with `step`, timed on
 * the host clock from before the first call to after the last (then the
 * stream is synchronised, untimed). `d2h`: device to host, else host to
 * device. *us: microseconds per call. *busy: how many of the loop's stream
 * queries said not ready (0 where the step makes none). */
cubert_status cb_hip_raw_small(cb_hip_raw *raw, int dev, cb_hip_raw_step step, bool d2h, void *host,
                               uint64_t dev_addr, uint64_t size, uint32_t count, double *us,
                               uint32_t *busy);
/* cb_hip_raw_small's loop with, per call, `before(arg)` called first (in
 * the call's time; nonzero stops the loop: CUBERT_ERR_BACKEND) and the
 * call's nanoseconds on the host clock in ns[k] (count entries; the clock's
 * own reading included). Either may be NULL. */
typedef struct cb_hip_raw_each {
  int (*before)(void *arg);
  void *arg;
  uint64_t *ns;
  bool failed_before; /* out */
} cb_hip_raw_each;
cubert_status cb_hip_raw_small_each(cb_hip_raw *raw, int dev, cb_hip_raw_step step, bool d2h, void *host,
                                    uint64_t dev_addr, uint64_t size, uint32_t count, cb_hip_raw_each *each,
                                    double *us, uint32_t *busy);
cubert_status cb_hip_raw_alloc_loop(cb_hip_raw *raw, int dev, uint64_t size, uint32_t count,
                                    double *ns);
/* Launches of the empty kernel with 0, 4 or 16 buffers, raw, with one of
 * the HIP backend's costs added at a time (`cubert bench runtime`'s launch
 * steps: where cubert's launch spends its time beyond raw's). */
typedef enum cb_hip_raw_lstep {
  CB_HIP_RAW_LSTEP_PLAIN = 0, /* raw's hipModuleLaunchKernel, the arguments as an array of pointers */
  CB_HIP_RAW_LSTEP_CTX,       /* + the backend's context check first (enter_live: the lost flag,
                                 hipCtxGetCurrent; AMD: hipGetDevice) */
  CB_HIP_RAW_LSTEP_MARSHAL,   /* the backend's marshalling instead of raw's array: each argument from a
                                 48-byte record (cubert_backend_arg) into a 64-byte slot, an array of
                                 pointers to the slots, in a frame of its own (hip_launch) */
  CB_HIP_RAW_LSTEP_LOCK,      /* + one mutex lock/unlock pair (as the runtime's device lock) */
  CB_HIP_RAW_LSTEP_MARK,      /* + cb_hip_mark_work after it: a lock, an event recorded every 32
                                 launches, the pending ones queried every 256 (the reap) */
  CB_HIP_RAW_LSTEP_PACKED,    /* the arguments packed in one buffer (`extra`) instead of pointers */
  CB_HIP_RAW_LSTEP_BACKEND,   /* every backend step at once: context check, marshalling into
                                 pointers (hip_launch's path for tensors and padded layouts), mark */
  CB_HIP_RAW_LSTEP_BACKEND_PACKED, /* the same, the arguments packed into one buffer (cb_hip_pack_args)
                                      and passed through `extra`: hip_launch's path for buffers and
                                      scalars that need no padding */
  CB_HIP_RAW_LSTEP_BACKEND_IMAGE, /* the same, the arguments already packed (the runtime's image):
                                     context check, `extra` over the ready buffer, mark, nothing per
                                     argument: hip_launch_image, the path of cubert's usual launch */
  CB_HIP_RAW_LSTEP_COUNT
} cb_hip_raw_lstep;

/* `count` launches with `step` on device `dev`'s first stream (`buffers`:
 * `nbuffers` device addresses), timed on the host clock from before the
 * first call to after the last (then the stream is synchronised, untimed);
 * *enqueue_ns per launch. */
cubert_status cb_hip_raw_launch_step(cb_hip_raw *raw, int dev, cb_hip_raw_lstep step, int nbuffers,
                                     const uint64_t *buffers, uint32_t count, double *enqueue_ns);

#endif
