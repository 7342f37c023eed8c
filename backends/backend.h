/* backends/backend.h: the interface between the runtime and its backends
 * (host, HIP) and the fault-injection decorator (internal; not installed).
 *
 * Not public: the runtime compiles in its backends (cubert_backend_host,
 * cubert_backend_hip) and offers no way to register another, so an installed
 * header would promise an ABI nobody can use. The table changes with the
 * runtime (a slot, a field) without a version dance; backends/CMakeLists of
 * a new backend adds it here, next to the two.
 *
 * A backend is a const table of operations (cubert_backend_ops) over four
 * kinds of opaque state it owns: the backend, its devices, their streams and
 * events, and loaded modules. The runtime never looks inside them, and a
 * backend never sees the runtime's objects: only addresses, sizes, work
 * numbers and the plain structs below.
 *
 * Rules every backend follows:
 *  - Every slot is filled but the ones marked optional (module_prepare,
 *    launch_image, mem_export and mem_import), which may be NULL. An
 *    operation a backend cannot do returns CUBERT_ERR_UNSUPPORTED with a
 *    message saying so (cubert_berr_set), so the runtime never checks any
 *    other slot for NULL.
 *  - Vendor status codes become cubert statuses at this boundary; the
 *    vendor's name and message go in `err->message`. An error the device
 *    cannot recover from (a sticky context error) sets `err->sticky`; the
 *    runtime then marks the device lost.
 *  - No device present means zero devices from open(), not an error; open
 *    then may say why in `err->message` (and still return CUBERT_OK): the
 *    runtime shows it (cubert_runtime_backend_note).
 *  - Work operations (write, fill, copy, copy_peer, launch) enqueue on a
 *    stream, in order, and carry `work`: the runtime's per-device sequence
 *    number, increasing. A failure found when the work executes (after the
 *    enqueue returned CUBERT_OK) is reported by drain_failures() with that
 *    number, and the stream goes on with the next work.
 *  - The runtime serialises calls per device (one lock a device), except
 *    read(), sync(), progress(), drain_failures(), timer_elapsed(),
 *    module_prepare() and module_unload(), which it may call without that
 *    lock, concurrently with other calls on the same device: they must be
 *    thread-safe. Calls on different devices may run
 *    concurrently.
 *  - Streams are created by the runtime in order; the runtime numbers them
 *    1, 2, 3... per device in that order (a decorator can count the same).
 *
 * Ownership: states returned through out-pointers belong to the backend and
 * are given back through the matching close/destroy/free/unload operation.
 * Pointers passed in (descriptors, host buffers, args) are borrowed for the
 * call only: copy what must outlive it. */
#ifndef CUBERT_BACKENDS_BACKEND_H
#define CUBERT_BACKENDS_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cubert/cubert.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUBERT_BACKEND_ABI 2 /* 2: launch_image */

/* Error detail a backend fills when an operation fails. */
typedef struct cubert_berr {
  bool sticky;          /* the device cannot recover: mark it lost */
  char message[512];
} cubert_berr;

/* printf into err->message (err may be NULL); returns `status`. */
cubert_status cubert_berr_set(cubert_berr *err, cubert_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

typedef struct cubert_backend_config {
  /* The backend's own settings, a struct its header defines (the host
   * backend: cb_host_options, backends/host/host_backend.h; HIP: none), or
   * NULL for its defaults. Borrowed for open only. */
  const void *options;
  /* Placement: a backend calls place_thread(place_ctx, index) at the start
   * of every thread it runs for its device `index` (e.g. a stream's worker),
   * so the runtime can bind it near the device (its local NUMA node).
   * place_alloc(place_ctx, index, size) returns `size` bytes of page-aligned
   * host memory bound to device `index`'s local NUMA node, or NULL when the
   * runtime cannot place it (one NUMA node, unknown locality, no memory):
   * the backend then allocates as it would without the hook. Memory from
   * place_alloc goes back through place_free(place_ctx, ptr, size) with the
   * same size, before the backend is closed. Any hook may be NULL (no
   * placement); they may run on any thread, take no lock of the backend or
   * the runtime's devices, and never call back into the backend. */
  void (*place_thread)(void *place_ctx, int index);
  void *(*place_alloc)(void *place_ctx, int index, size_t size);
  void (*place_free)(void *place_ctx, void *ptr, size_t size);
  void *place_ctx;
} cubert_backend_config;

/* A device allocation. `address` is what kernels dereference on the owning
 * device (a pointer on the host backend, a device VA on HIP). */
typedef struct cubert_backend_mem {
  uint64_t address;
  uint64_t size;
  void *cookie;                 /* the backend's own */
  uint32_t flags;               /* in: what the runtime asks for; the runtime
                                   zeroes the struct, then sets these before
                                   mem_alloc (CUBERT_BACKEND_MEM_*) */
} cubert_backend_mem;

/* cubert_backend_mem.flags: memory coherent with other devices and the host
 * while kernels run (CUBERT_MEMORY_FINE_GRAINED). HIP on AMD allocates it
 * with hipExtMallocWithFlags(hipDeviceMallocFinegrained); a backend whose
 * memory is always so (the host backend) ignores the flag. */
#define CUBERT_BACKEND_MEM_FINE_GRAINED 1u
/* Memory other processes of the node may map (CUBERT_MEMORY_SHAREABLE):
 * mem_export describes it. */
#define CUBERT_BACKEND_MEM_SHAREABLE 2u
/* Set by the runtime on memory that mem_import mapped, when it hands it to
 * mem_free (which then unmaps, never frees what another process owns). */
#define CUBERT_BACKEND_MEM_IMPORTED 4u
/* Bytes of a backend's description of shareable memory (a POSIX shm name on
 * the host backend, a hipIpcMemHandle_t on HIP). */
#define CUBERT_BACKEND_IPC_SIZE 128

/* Page-locked host memory of a host buffer (cubert_host_buffer). `ptr` and
 * `size` are the bytes; `cookie` and `registered` are the backend's own
 * record of how it got them (host_alloc or host_register), given back to
 * host_free unchanged. */
typedef struct cubert_backend_host_mem {
  void *ptr;
  uint64_t size;
  void *cookie;
  bool registered;              /* from host_register: host_free unpins only */
} cubert_backend_host_mem;

/* A kernel as the backend sees it. Strings and arrays are borrowed. */
typedef struct cubert_backend_kernel {
  const char *name;
  const char *entry;            /* symbol name, never NULL */
  const char *source;           /* may be NULL */
  const char *options;          /* may be NULL */
  const cubert_code_object *objects;
  uint32_t nobjects;
  cubert_host_fn host_fn;       /* may be NULL */
  const cubert_param *params;
  uint32_t nparams;
  uint64_t source_hash;         /* FNV-1a 64 of source, 0 without source */
} cubert_backend_kernel;

/* One launch argument, resolved: buffers by address (peer buffers at the
 * owner's address plus offset), scalars by value. A peer buffer carries its
 * allocation's identity: `owner`, the state (from device_open, of this
 * backend) of the device that owns the memory, which may be the launching
 * device itself; NULL for every other kind. */
typedef struct cubert_backend_arg {
  cubert_param_kind kind;
  cubert_access access;
  uint64_t address;
  uint64_t size;                /* bytes bound */
  const void *scalar;           /* borrowed for the call: copy it */
  uint32_t scalar_size;
  void *owner;                  /* PEER_BUFFER: the owning device's state */
} cubert_backend_arg;

/* A launch's arguments as one packed image (the optional launch_image):
 * argument i's value at data + layout->offset[i], in the C layout of the
 * parameter list: a buffer's address as 8 bytes, a scalar's bytes. The
 * layout is the kernel's, computed once (cubert_backend_image_layout); a
 * launch writes only the values. Only buffers of the launching device's
 * memory and scalars: no peer buffer (no owner to translate), no tensor.
 * `sizes` gives each argument's bytes (a buffer's bound bytes, a scalar's
 * size) for a backend that needs them (the host backend's kernels see
 * them; HIP does not read them). Borrowed for the call. */
typedef struct cubert_backend_layout {
  uint32_t nargs;
  uint32_t size;                /* bytes of an image: the end of the last argument, no tail padding */
  const uint32_t *offset;       /* per argument */
  const cubert_param *params;   /* per argument: its kind (buffer or scalar), access, scalar size */
} cubert_backend_layout;

typedef struct cubert_backend_image {
  const cubert_backend_layout *layout;
  const void *data;             /* layout->size bytes, 16-byte aligned */
  const uint64_t *sizes;        /* per argument */
} cubert_backend_image;

/* The most bytes an image holds (16 arguments of 64 bytes). */
#define CUBERT_BACKEND_IMAGE_MAX 1024u

/* The image layout of a parameter list, as hipModuleLaunchKernel's `extra`
 * (and CUDA's cuLaunchKernel) want it: each parameter at its type's
 * alignment, the size without tail padding (backends/hip/hip_backend.c,
 * cb_hip_pack_args, argues it from ROCm's clr and CUDA). Only sizes are
 * known, not types: a buffer is an 8-byte pointer, but a 4-byte scalar may
 * be an int (aligned to 4) or four chars (aligned to 1). C's alignment of a
 * type is a power of two dividing its size, so when the running offset is a
 * multiple of the largest power of two dividing the size, every type of
 * that size starts right there: no padding whatever the types. A list has
 * an image layout only when that holds at every parameter, it has only
 * buffers (peer ones too) and scalars of 1 to 64 bytes, and the image fits
 * CUBERT_BACKEND_IMAGE_MAX: the layout is then provably the one the kernel
 * expects. Fills offset[0..n) and *size; false: no image layout. */
static inline bool cubert_backend_image_layout(const cubert_param *params, uint32_t n, uint32_t *offset,
                                               uint32_t *size) {
  uint32_t off = 0;
  for (uint32_t i = 0; i < n; i++) {
    const cubert_param *p = &params[i];
    uint32_t len;
    if (p->kind == CUBERT_PARAM_BUFFER || p->kind == CUBERT_PARAM_PEER_BUFFER)
      len = 8;
    else if (p->kind == CUBERT_PARAM_SCALAR && p->size >= 1 && p->size <= 64)
      len = p->size;
    else
      return false;
    uint32_t align = len & (~len + 1u); /* the largest power of two dividing len */
    if ((off & (align - 1u)) || len > CUBERT_BACKEND_IMAGE_MAX - off) return false;
    offset[i] = off;
    off += len;
  }
  *size = off;
  return true;
}

/* The arguments of an image as launch() takes them, for a layer or backend that handles an image through its
 * launch(): a buffer's address read from the image, a scalar pointing into
 * it. */
static inline void cubert_backend_args_of_image(const cubert_backend_image *im, cubert_backend_arg *out) {
  const cubert_backend_layout *l = im->layout;
  const unsigned char *data = im->data;
  for (uint32_t i = 0; i < l->nargs; i++) {
    const cubert_param *p = &l->params[i];
    cubert_backend_arg *a = &out[i];
    a->kind = p->kind;
    a->access = p->access;
    a->owner = NULL;
    if (p->kind == CUBERT_PARAM_SCALAR) {
      a->address = 0;
      a->size = 0;
      a->scalar = data + l->offset[i];
      a->scalar_size = (uint32_t)im->sizes[i];
    } else {
      uint64_t address;
      memcpy(&address, data + l->offset[i], sizeof address);
      a->address = address;
      a->size = im->sizes[i];
      a->scalar = NULL;
      a->scalar_size = 0;
    }
  }
}

/* A failure found when work executed. */
typedef struct cubert_async_failure {
  uint64_t work;                /* the work's number; 0 when it cannot be attributed */
  cubert_status status;
  bool sticky;
  char message[256];
} cubert_async_failure;

/* A strided transfer: `count[0] x ... x count[ndims-1]` runs of `run`
 * bytes each (ndims 0: one run), the source run at index (i0, ...) at
 * src + sum i_d * src_pitch[d], the destination run at
 * dst + sum i_d * dst_pitch[d]. Runs go in row-major index order; `nruns`
 * is how many of them to move (the product of the counts, or fewer: a
 * transfer that stops part way moves a prefix). Host memory is packed or
 * strided like device memory: it is described the same way. */
#define CUBERT_BACKEND_MAX_DIMS 8
typedef struct cubert_backend_strided {
  uint64_t run;
  uint32_t ndims;
  uint64_t count[CUBERT_BACKEND_MAX_DIMS];
  uint64_t src_pitch[CUBERT_BACKEND_MAX_DIMS];
  uint64_t dst_pitch[CUBERT_BACKEND_MAX_DIMS];
  uint64_t nruns;
} cubert_backend_strided;

/* What a strided transfer moves between. */
typedef enum cubert_backend_direction {
  CUBERT_BACKEND_HOST_TO_DEVICE, /* src a host pointer (reusable on return) */
  CUBERT_BACKEND_DEVICE_TO_HOST, /* dst a host pointer; returns once it holds the bytes */
  CUBERT_BACKEND_DEVICE_TO_DEVICE,
  CUBERT_BACKEND_PEER_TO_DEVICE  /* src on src_device, another device of this backend */
} cubert_backend_direction;

/* Where two devices of one backend sit relative to each other, as far as the
 * driver knows (topology combines this with hwloc). */
typedef struct cubert_backend_link {
  int type;                     /* a cubert_link_type (cubert.h) */
  int hops;
  int links;                    /* link count, 0 when unknown */
} cubert_backend_link;

typedef struct cubert_backend_ops {
  uint32_t abi;                 /* CUBERT_BACKEND_ABI */
  const char *name;             /* "host", "hip" */

  cubert_status (*open)(const cubert_backend_config *config, void **backend, int *device_count,
                        cubert_berr *err);
  void (*close)(void *backend);
  /* Fills `info` except the runtime's own fields (device, backend,
   * backend_index, lost). */
  cubert_status (*device_open)(void *backend, int index, void **device, cubert_device_info *info,
                               cubert_berr *err);
  void (*device_close)(void *device);

  /* Driver allocations; the runtime pools on top. mem_free is called only
   * when no enqueued work uses the memory any more. */
  cubert_status (*mem_alloc)(void *device, uint64_t size, cubert_backend_mem *mem, cubert_berr *err);
  void (*mem_free)(void *device, cubert_backend_mem *mem);

  cubert_status (*stream_create)(void *device, void **stream, cubert_berr *err);
  void (*stream_destroy)(void *device, void *stream);
  /* An event at the stream's current end; stream_wait makes `stream` wait
   * for it. Both streams belong to `device`. */
  cubert_status (*event_record)(void *device, void *stream, void **event, cubert_berr *err);
  cubert_status (*stream_wait)(void *device, void *stream, void *event, cubert_berr *err);
  void (*event_destroy)(void *device, void *event);

  /* Host to device; `src` may be reused as soon as the call returns. */
  cubert_status (*write)(void *device, void *stream, uint64_t work, uint64_t dst, const void *src,
                         uint64_t size, cubert_berr *err);
  /* Device to host, after the stream's earlier work; returns once `dst`
   * holds the bytes. */
  cubert_status (*read)(void *device, void *stream, uint64_t work, void *dst, uint64_t src,
                        uint64_t size, cubert_berr *err);
  /* pattern_size is 1, 2, 4 or 8 and divides size. */
  cubert_status (*fill)(void *device, void *stream, uint64_t work, uint64_t dst, const void *pattern,
                        uint32_t pattern_size, uint64_t size, cubert_berr *err);
  cubert_status (*copy)(void *device, void *stream, uint64_t work, uint64_t dst, uint64_t src,
                        uint64_t size, cubert_berr *err);
  /* From src_device's memory to device's memory, enqueued on `stream` of
   * `device`. */
  cubert_status (*copy_peer)(void *device, void *stream, uint64_t work, uint64_t dst,
                             void *src_device, uint64_t src, uint64_t size, cubert_berr *err);

  /* A strided transfer (cubert_backend_strided), enqueued on `stream` of
   * `device` like write/read/copy/copy_peer by direction. src_device is the
   * source's device for PEER_TO_DEVICE, else NULL. */
  cubert_status (*copy_strided)(void *device, void *stream, uint64_t work, cubert_backend_direction direction,
                                uint64_t dst, void *src_device, uint64_t src,
                                const cubert_backend_strided *layout, cubert_berr *err);

  /* Compiles or loads the kernel for the device. The runtime caches modules
   * per device, so this is called once per (device, kernel) while the
   * kernel lives; when the kernel's last reference goes, module_unload. */
  cubert_status (*module_load)(void *device, const cubert_backend_kernel *kernel, void **module,
                               cubert_berr *err);
  /* May be called without the device's lock, concurrently with any other
   * call on the device (a kernel released on another thread). */
  void (*module_unload)(void *device, void *module);
  /* Optional (NULL: none). Called before module_load, without the device's
   * lock, concurrently with other calls on the device (so a slow compile
   * holds up nothing else): does the slow part of a later module_load
   * (HIP: the hiprtc compile into the backend's code cache). It changes
   * nothing any call sees but module_load's speed, and reports nothing: a
   * compile that fails here fails again, and is reported, in module_load.
   * The runtime calls it once per (device, kernel) at a time. */
  void (*module_prepare)(void *device, const cubert_backend_kernel *kernel);
  cubert_status (*launch)(void *device, void *stream, uint64_t work, void *module,
                          const cubert_launch_config *config, const cubert_backend_arg *args,
                          uint32_t nargs, cubert_berr *err);
  /* Optional (NULL: none; the runtime then calls launch). The same launch,
   * its arguments as one packed image (cubert_backend_image): the runtime
   * calls it for a launch of buffers of this device's memory and scalars
   * whose kernel has an image layout, and writes each argument's value
   * once, where launch() has a record of each to read and marshal. The
   * same contract as launch otherwise. */
  cubert_status (*launch_image)(void *device, void *stream, uint64_t work, void *module,
                                const cubert_launch_config *config, const cubert_backend_image *image,
                                cubert_berr *err);

  /* Waits for `stream` (NULL: every stream of the device). Failures of
   * individual work are reported by drain_failures, not here; this returns
   * an error only when waiting itself failed. */
  cubert_status (*sync)(void *device, void *stream, cubert_berr *err);
  /* The highest work number W such that all work on `stream` numbered W or
   * lower has completed (failed work counts as completed). Cheap. */
  uint64_t (*progress)(void *device, void *stream);
  /* Moves up to `capacity` failures found since the last drain into `out`;
   * returns how many. Failures beyond `capacity` stay for the next call. */
  size_t (*drain_failures)(void *device, cubert_async_failure *out, size_t capacity);

  /* Whether `device` can access memory of `peer`, and enabling it.
   * Enabling an enabled pair is success. */
  cubert_status (*peer_can_access)(void *device, void *peer, bool *can, cubert_berr *err);
  cubert_status (*peer_enable)(void *device, void *peer, cubert_berr *err);
  /* Link between two devices; CUBERT_ERR_UNSUPPORTED when the driver cannot
   * tell. */
  cubert_status (*link_info)(void *device, void *peer, cubert_backend_link *link, cubert_berr *err);

  /* Timing: a timestamp taken when the stream reaches this point; elapsed
   * waits until `end` completed and gives milliseconds from `start` to
   * `end` (both of `device`). */
  cubert_status (*timer_record)(void *device, void *stream, void **timer, cubert_berr *err);
  cubert_status (*timer_elapsed)(void *device, void *start, void *end, double *ms, cubert_berr *err);
  void (*timer_destroy)(void *device, void *timer);

  /* Host buffers (cubert_host_buffer). host_alloc: `size` bytes of
   * page-locked host memory near `device` (its local NUMA node when the
   * placement hooks can say), usable by every device of the backend;
   * host_register pins memory the caller allocated (mem->ptr, mem->size set
   * by the runtime); host_free frees or unpins it, once no enqueued work
   * uses it. */
  cubert_status (*host_alloc)(void *device, cubert_backend_host_mem *mem, cubert_berr *err);
  cubert_status (*host_register)(void *device, cubert_backend_host_mem *mem, cubert_berr *err);
  void (*host_free)(void *device, cubert_backend_host_mem *mem);
  /* Transfers with a host buffer, enqueued like copy: asynchronous, in the
   * stream's order, complete when a later sync or progress says so. `src`
   * and `dst` lie in host_alloc/host_register memory and stay valid until
   * the work completed (the runtime keeps the buffer until then). */
  cubert_status (*write_host)(void *device, void *stream, uint64_t work, uint64_t dst,
                              const void *src, uint64_t size, cubert_berr *err);
  cubert_status (*read_host)(void *device, void *stream, uint64_t work, void *dst, uint64_t src,
                             uint64_t size, cubert_berr *err);
  /* Memory shared between processes (optional; NULL: the backend cannot).
   * mem_export writes into `ipc` what another process needs to map the
   * whole of `mem` (allocated with CUBERT_BACKEND_MEM_SHAREABLE); mem_import
   * maps, on `device`, the `size` bytes of such a description made by
   * another process, filling mem->address, size and cookie; the runtime
   * later hands it to mem_free with CUBERT_BACKEND_MEM_IMPORTED set. */
  cubert_status (*mem_export)(void *device, const cubert_backend_mem *mem,
                              unsigned char ipc[CUBERT_BACKEND_IPC_SIZE], cubert_berr *err);
  cubert_status (*mem_import)(void *device, const unsigned char ipc[CUBERT_BACKEND_IPC_SIZE],
                              uint64_t size, cubert_backend_mem *mem, cubert_berr *err);
} cubert_backend_ops;

/* The backends compiled in. cubert_backend_hip() returns NULL when cubert was
 * built without HIP. */
const cubert_backend_ops *cubert_backend_host(void);
const cubert_backend_ops *cubert_backend_hip(void);

/* FNV-1a 64-bit over `size` bytes (0 for NULL). Used for kernel source
 * hashes and module cache keys. */
uint64_t cubert_hash64(const void *data, size_t size);

#ifdef __cplusplus
}
#endif
#endif
