/* backends/hip/hip_internal.h: state shared by the files of the HIP backend
 * (internal). With the hip_*.c files of this folder it is the only code in
 * cubert that includes <hip/...>; nothing outside backends/hip may include it.
 *
 * One source for both HIP platforms: built with __HIP_PLATFORM_AMD__ it
 * drives ROCm, with __HIP_PLATFORM_NVIDIA__ the same calls go to the CUDA
 * runtime and driver through HIP's NVIDIA headers. The few differences
 * (device pointer types, the primary context the CUDA driver API needs, the
 * target names, xGMI) are marked with CB_HIP_NVIDIA.
 *
 * Objects and who owns them:
 *   cb_hip_backend  from open(), freed by close(); owns the in-memory code
 *                   cache and keeps the runtime's placement hooks. Devices
 *                   point to it and must be closed first.
 *   cb_hip_device   from device_open(), freed by device_close(); owns its
 *                   streams (a list, so sync(NULL) can reach them all), its
 *                   failure queue, pinned staging buffers (writes from
 *                   pinned host memory; on the device's NUMA node when the
 *                   runtime can place them), the staging pipeline of large
 *                   pageable transfers and unshared peer copies (hip_pipe.c:
 *                   pinned chunks and copy threads, made on first use) and
 *                   the built-in fill module.
 *   cb_hip_stream   from stream_create(); owns the events marking its work.
 *   cb_hip_module   from module_load(); owns the hipModule_t.
 *
 * Locks, and the only orders they nest in: streams_lock -> stream->lock ->
 * fail_lock (sync of every stream; a mark's failure), and fill_lock ->
 * compile_lock (code_for drops it around a compile, so it never nests with
 * hip_compile.c's compiler lock). No lock is held while
 * waiting on the GPU, except streams_lock by sync(NULL) (stream_create
 * waits for it; the runtime creates streams rarely) and stream->lock in the
 * rare fallback of a mark that could not be recorded.
 *   backend->compile_lock  the code cache and module loads (not held while compiling)
 *   device->streams_lock   the stream list
 *   device->fail_lock      the failure queue and the lost flag's message
 *   device->staging_lock   the free list of staging buffers
 *   device->peer_lock      which peers were enabled
 *   device->fill_lock      the lazily built fill module
 *   device->pipe_lock      the staging pipeline, held through one transfer
 *                          (taken with trylock: never waited for)
 *   stream->lock           the stream's marks (progress may run beside work)
 *
 * Who calls whom, one way only (no file calls a file above it):
 *   hip_backend.c  the ops table: devices, memory, modules, launches, fill
 *     -> hip_strided.c  strided transfers (pitched copies)
 *     -> hip_stream.c  streams, marks, progress, transfers
 *       -> hip_pipe.c  the pinned staging pipeline of large transfers
 *     -> hip_compile.c  hiprtc and the code cache
 *     -> hip_nvml.c  NVLink from NVML (NVIDIA only)
 *   hip_stream.c, hip_compile.c, hip_nvml.c -> hip_error.c
 *   hip_error.c  errors, the lost state they set, making a device current;
 *                calls no other file */
#ifndef CUBERT_BACKENDS_HIP_INTERNAL_H
#define CUBERT_BACKENDS_HIP_INTERNAL_H

#if !defined(__HIP_PLATFORM_AMD__) && !defined(__HIP_PLATFORM_NVIDIA__)
#error "backends/hip is built with -D__HIP_PLATFORM_AMD__ or -D__HIP_PLATFORM_NVIDIA__"
#endif

#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"

#if defined(__HIP_PLATFORM_NVIDIA__)
#define CB_HIP_NVIDIA 1
#else
#define CB_HIP_NVIDIA 0
#endif

/* A device address as HIP's memset/launch calls take it (void * on AMD, an
 * integer CUdeviceptr on NVIDIA), and as a plain pointer. */
#define CB_HIP_DPTR(a) ((hipDeviceptr_t)(uintptr_t)(a))
#define CB_HIP_PTR(a) ((void *)(uintptr_t)(a))

typedef struct cb_hip_backend cb_hip_backend;
typedef struct cb_hip_device cb_hip_device;
typedef struct cb_hip_stream cb_hip_stream;
typedef struct cb_hip_module cb_hip_module;
typedef struct cb_hip_staging cb_hip_staging;
typedef struct cb_hip_pipe cb_hip_pipe;

/* snprintf for messages and names, where cutting a long value is fine
 * (gcc's -Wformat-truncation does not follow it). */
void cb_hip_format(char *buf, size_t capacity, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ------------------------------------------------------------ errors */

/* Whether a HIP error leaves the device's context unusable (the runtime
 * then marks the device lost). The list and why: hip_error.c. */
bool cb_hip_error_sticky(hipError_t e);

/* Converts `e` at the boundary: the cubert status (`fallback` for errors
 * with no closer status), err->sticky, and err->message = "<what>: <name>
 * (<description>)". `what` is printf-formatted; err may be NULL. A sticky
 * error marks `dev` (may be NULL) lost. */
cubert_status cb_hip_fail(cb_hip_device *dev, cubert_berr *err, hipError_t e,
                          cubert_status fallback, const char *what, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* cb_hip_fail for what hipModuleLaunchKernel returned: never sticky (a
 * synchronous launch error is the launch's configuration; hip_error.c);
 * hipErrorLaunchFailure is CUBERT_ERR_LAUNCH_CONFIG, unlisted errors
 * CUBERT_ERR_LAUNCH. */
cubert_status cb_hip_fail_launch(cb_hip_device *dev, cubert_berr *err, hipError_t e,
                                 const char *what, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* "<name> (<description>)" of `e` into buf; on NVIDIA, for errors HIP's
 * table folds into hipErrorUnknown, the CUDA runtime's own name is added. */
void cb_hip_describe(hipError_t e, char *buf, size_t capacity);

/* ------------------------------------------------------------ objects */


/* Code compiled for one target, kept for the other devices of that target. */
typedef struct cb_hip_code {
  struct cb_hip_code *next;
  uint64_t key;           /* hash of the cache key */
  char *key_text;         /* the key itself (collisions) */
  void *data;
  size_t size;
} cb_hip_code;

struct cb_hip_backend {
  int device_count;
  pthread_mutex_t compile_lock;
  cb_hip_code *codes;
  /* cubert_backend_config's placement hooks (NULL: none): staging buffers
   * are allocated through them, near the device, when they can be */
  void *(*place_alloc)(void *ctx, int index, size_t size);
  void (*place_free)(void *ctx, void *ptr, size_t size);
  void *place_ctx;
  void (*place_thread)(void *ctx, int index); /* the pipeline's copy threads */
};

/* A mark: an event recorded on a stream after work `last`; it covers the
 * `items` work items numbered `first`..`last` handed to the stream since the
 * previous mark (hip_stream.c: when marks are recorded). */
typedef struct cb_hip_mark {
  hipEvent_t event;
  uint64_t first;
  uint64_t last;
  uint32_t items;
  const char *op;         /* "write", "launch", ...; "work" when they differ */
} cb_hip_mark;

struct cb_hip_stream {
  cb_hip_stream *next;    /* device->streams */
  cb_hip_device *device;
  hipStream_t stream;
  pthread_mutex_t lock;
  cb_hip_mark *marks;     /* ring of pending marks, oldest at head */
  uint32_t head, count, capacity;
  hipEvent_t *spare;      /* completed events kept for reuse */
  uint32_t nspare;
  uint64_t done;          /* highest work known complete (progress) */
  uint64_t enqueued;      /* highest work handed to the stream */
  /* work handed to the stream after the newest mark, covered by none yet */
  uint64_t open_first, open_last;
  uint32_t open_items;
  const char *open_op;
};

struct cb_hip_module {
  hipModule_t module;
  hipFunction_t function;
  void *image;            /* the code it was loaded from */
  uint32_t nparams;       /* arguments the kernel takes */
  char name[64];
};

struct cb_hip_device {
  cb_hip_backend *backend;
  int index;
  char name[128];
  char arch[64];          /* gcnArchName on AMD, "sm_XY" on NVIDIA */
  char label[192];        /* "hip device 0 (NVIDIA H200, 0000:00:06.0)" for messages */
#if CB_HIP_NVIDIA
  hipCtx_t context;       /* the primary context, retained */
#endif
  atomic_bool lost;
  char lost_message[256]; /* under fail_lock */

  pthread_mutex_t streams_lock;
  cb_hip_stream *streams;

  pthread_mutex_t fail_lock;
  cubert_async_failure *failures;
  size_t nfailures, cap_failures;
  uint64_t dropped_failures;

  pthread_mutex_t staging_lock;
  cb_hip_staging *staging_free;
  int nstaging;

  pthread_mutex_t peer_lock;
  bool *peer_enabled;     /* per peer index */

  pthread_mutex_t fill_lock;
  cb_hip_module *fill;

  pthread_mutex_t pipe_lock; /* one transfer at a time through the pipeline */
  cb_hip_pipe *pipe;         /* hip_pipe.c, made on first use */
  bool pipe_failed;          /* could not be made: never tried again */
};

/* hip_error.c: the device state errors change, and making a device current.
 *
 * Makes `dev` current on the calling thread (and on NVIDIA its primary
 * context, which the driver-API calls behind hipModule* and hipMemsetD*
 * need). Every operation calls it first: calls come from many threads. It
 * asks the driver what is current (a thread-local read) and sets nothing
 * when `dev` already is, so the common case costs no set call, and a device
 * the application made current in between is still noticed. */
cubert_status cb_hip_enter(cb_hip_device *dev, cubert_berr *err);

/* CUBERT_ERR_DEVICE_LOST with the recorded cause when `dev` is lost. */
cubert_status cb_hip_check_lost(cb_hip_device *dev, cubert_berr *err);

/* Records a failure found when work executed (work 0: not attributable);
 * a sticky one marks the device lost. */
void cb_hip_push_failure(cb_hip_device *dev, uint64_t work, cubert_status status, bool sticky,
                         const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
void cb_hip_mark_lost(cb_hip_device *dev, const char *message);

/* hip_stream.c: streams, marks, progress, transfers. push_failure is here
 * too. cb_hip_work_begin: the checks every operation on a stream starts
 * with (a stream, a live device, made current). */
cubert_status cb_hip_work_begin(cb_hip_device *dev, cb_hip_stream *s, const char *op,
                                cubert_berr *err);
cubert_status cb_hip_stream_create(void *device, void **stream, cubert_berr *err);
void cb_hip_stream_destroy(void *device, void *stream);
cubert_status cb_hip_event_record(void *device, void *stream, void **event, cubert_berr *err);
cubert_status cb_hip_stream_wait(void *device, void *stream, void *event, cubert_berr *err);
cubert_status cb_hip_timer_record(void *device, void *stream, void **timer, cubert_berr *err);
cubert_status cb_hip_timer_elapsed(void *device, void *start, void *end, double *ms, cubert_berr *err);
void cb_hip_event_destroy(void *device, void *event);
cubert_status cb_hip_write(void *device, void *stream, uint64_t work, uint64_t dst, const void *src,
                           uint64_t size, cubert_berr *err);
cubert_status cb_hip_read(void *device, void *stream, uint64_t work, void *dst, uint64_t src,
                          uint64_t size, cubert_berr *err);
cubert_status cb_hip_copy(void *device, void *stream, uint64_t work, uint64_t dst, uint64_t src,
                          uint64_t size, cubert_berr *err);
cubert_status cb_hip_copy_peer(void *device, void *stream, uint64_t work, uint64_t dst,
                               void *src_device, uint64_t src, uint64_t size, cubert_berr *err);
cubert_status cb_hip_sync(void *device, void *stream, cubert_berr *err);
/* hip_strided.c: strided transfers (calls hip_stream.c and hip_error.c). */
cubert_status cb_hip_copy_strided(void *device, void *stream, uint64_t work, cubert_backend_direction direction,
                                  uint64_t dst, void *src_device, uint64_t src,
                                  const cubert_backend_strided *layout, cubert_berr *err);
/* Host buffers: pinned memory and the transfers with it (queued like copy). */
cubert_status cb_hip_host_alloc(void *device, cubert_backend_host_mem *mem, cubert_berr *err);
cubert_status cb_hip_host_register(void *device, cubert_backend_host_mem *mem, cubert_berr *err);
void cb_hip_host_free(void *device, cubert_backend_host_mem *mem);
cubert_status cb_hip_write_host(void *device, void *stream, uint64_t work, uint64_t dst, const void *src,
                                uint64_t size, cubert_berr *err);
cubert_status cb_hip_read_host(void *device, void *stream, uint64_t work, void *dst, uint64_t src,
                               uint64_t size, cubert_berr *err);
uint64_t cb_hip_progress(void *device, void *stream);
size_t cb_hip_drain_failures(void *device, cubert_async_failure *out, size_t capacity);

/* After work `work` (operation `op`, a static string) was handed to the
 * stream, successfully or not: counts it for progress(), recording a mark
 * every few items (hip_stream.c). */
void cb_hip_mark_work(cb_hip_stream *s, uint64_t work, const char *op);

/* Frees the device's staging buffers and the streams left open. */
void cb_hip_stream_teardown(cb_hip_device *dev);

/* hip_pipe.c: the pinned staging pipeline (chunks, copy threads) for large
 * pageable writes and reads and for peer copies with peer access off. Each
 * returns false, having done nothing, when the pipeline is busy or cannot
 * be made (the caller takes the direct path); else true with *e the HIP
 * result and *where the step that failed. The device is current. */
/* The pipeline's variables (CUBERT_HIP_*), checked when the backend opens:
 * CUBERT_ERR_INVALID_ARGUMENT naming one set to what it does not take. */
cubert_status cb_hip_pipe_check_env(cubert_berr *err);
uint64_t cb_hip_pipe_from(bool write);
bool cb_hip_pipe_write(cb_hip_device *dev, cb_hip_stream *s, uint64_t dst, const void *src, uint64_t size,
                       hipError_t *e, const char **where);
bool cb_hip_pipe_read(cb_hip_device *dev, cb_hip_stream *s, void *dst, uint64_t src, uint64_t size,
                      hipError_t *e, const char **where);
bool cb_hip_pipe_peer(cb_hip_device *dev, cb_hip_stream *s, uint64_t dst, cb_hip_device *from, uint64_t src,
                      uint64_t size, hipError_t *e, const char **where);
void cb_hip_pipe_teardown(cb_hip_device *dev);

/* hip_nvml.c (NVIDIA platform only): the NVLink between two devices from
 * NVML, loaded at run time: type 1, links, hops 1 when joined (directly or
 * both through NVSwitches); type 2 when NVML says they are not;
 * CUBERT_ERR_UNSUPPORTED when NVML is absent or knows nothing of them. */
cubert_status cb_hip_nvml_link(cb_hip_device *dev, cb_hip_device *peer, cubert_backend_link *link,
                               cubert_berr *err);

/* hip_backend.c: fill (8-byte and unaligned patterns run the built-in fill
 * kernel, loaded on first use), and launching a module. */
cubert_status cb_hip_fill(void *device, void *stream, uint64_t work, uint64_t dst,
                          const void *pattern, uint32_t pattern_size, uint64_t size,
                          cubert_berr *err);
cubert_status cb_hip_fill_module(cb_hip_device *dev, cb_hip_module **module, cubert_berr *err);
/* `params` (an array of pointers) or `extra` (packed: cb_hip_pack_args), the
 * other NULL, as hipModuleLaunchKernel takes them. */
cubert_status cb_hip_launch_raw(cb_hip_device *dev, cb_hip_stream *s, cb_hip_module *m,
                                const uint32_t grid[3], const uint32_t block[3], uint32_t shared,
                                void **params, void **extra, cubert_berr *err);

#endif
