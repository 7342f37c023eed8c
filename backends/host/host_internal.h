/* backends/host/host_internal.h: what the files of the host backend share
 * (internal to backends/host/; the overview, threading and ownership rules
 * are at the top of host_backend.c).
 *
 *   host_backend.c   the backend and its settings, devices, the ops table
 *   host_memory.c    allocations, address checks, peer access
 *   host_stream.c    streams, events, waits, sync, failures, timers
 *   host_transfer.c  writes, reads, fills, copies
 *   host_launch.c    modules and launches
 *
 * The cb_host_ functions below the ops are the ops table's entries, each
 * defined in the file named above it. */
#ifndef CUBERT_BACKENDS_HOST_INTERNAL_H
#define CUBERT_BACKENDS_HOST_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "backends/host/work_queue.h"
#include "backends/backend.h"
#include "backends/host/host_backend.h"
#include "base/array.h"

#define HOST_ALIGN 256u
#define HOST_MAX_DEVICES 4096
#define HOST_DEFAULT_DEVICES 4
#define HOST_DEFAULT_MEMORY (UINT64_C(1) << 30)
#define HOST_MAX_THREADS 1024u
#define HOST_MAX_SHARED 65536u
#define HOST_MAX_SCALAR 64u
/* Writes from this size (host_transfer.c; a strided write's size is its
 * packed bytes): run in place from the caller's buffer when the stream is
 * idle; else staged in a block that is kept for the next one (as many as
 * HOST_STAGING_KEEP, HOST_STAGING_KEEP_BYTES in all, per device, the
 * smallest dropped to keep the latest; contiguous and strided writes share
 * them). Below it, a write is staged in a small allocation. */
#define HOST_WRITE_LARGE (UINT64_C(64) << 10)
#define HOST_STAGING_KEEP 4
#define HOST_STAGING_KEEP_BYTES (UINT64_C(64) << 20)

typedef struct host_backend host_backend;
typedef struct host_device host_device;

/* One allocation of any device, in the backend's table sorted by address. */
typedef struct host_alloc {
  uint64_t address;
  uint64_t size;
  int device;
  void *shm; /* the shared segment it lives in (host_memory.c), NULL: aligned_alloc */
} host_alloc;

/* Gives an allocation's memory back to where it came from (the C library,
 * or its shared segment); for device_close, which frees what was left. */
void cb_host_alloc_release(const host_alloc *a);

struct host_backend {
  pthread_mutex_t lock;
  int ndevices;
  uint64_t memory;          /* budget per device */
  bool *deny;               /* ndevices x ndevices, symmetric */
  char (*bus_ids)[32];      /* per device, "" when none */
  host_device **devices;    /* open devices, NULL when closed */
  host_alloc *allocs;       /* sorted by address */
  size_t nallocs, cap_allocs;
  /* config->place_thread/place_ctx: called first on every stream worker
   * with the device's index (the runtime binds it near the device) */
  void (*place_thread)(void *ctx, int index);
  void *place_ctx;
  /* config->place_alloc/place_free: host buffers near their device */
  void *(*place_alloc)(void *ctx, int index, size_t size);
  void (*place_free)(void *ctx, void *ptr, size_t size);
};

typedef struct host_stream {
  cb_work_queue queue;
  host_device *device;
  atomic_uint refs;         /* the device's table, events, pending waits */
} host_stream;

struct host_device {
  host_backend *backend;
  int index;
  char name[24];            /* "host:N" */
  uint64_t memory_used;     /* under backend->lock */
  bool *peer_enabled;       /* per peer index, under backend->lock */

  pthread_mutex_t lock;     /* the stream table and the module list */
  host_stream **streams;
  size_t nstreams, cap_streams;
  struct host_module *modules;

  pthread_mutex_t fail_lock;
  cubert_async_failure *failures;
  size_t nfailures, cap_failures;
  uint64_t lost_failures;   /* not recorded for want of memory */

  /* Staging blocks of writes queued behind other work, kept for the next
   * such write (host_transfer.c): at most HOST_STAGING_KEEP of them and
   * HOST_STAGING_KEEP_BYTES in all; device_close frees them. */
  pthread_mutex_t staging_lock;
  struct host_staging *staging[HOST_STAGING_KEEP];
  size_t nstaging;
  uint64_t staging_bytes;
};

typedef struct host_event {
  host_stream *stream;      /* one reference */
  uint64_t position;
} host_event;

typedef struct host_module {
  struct host_module *prev, *next; /* the device's list, so close frees leftovers */
  cubert_host_fn fn;
  char *name;
  uint32_t nparams;
  cubert_param_kind *kinds;
  uint32_t *scalar_sizes;
} host_module;

static inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* A work item's release when the item is one malloc'd block. */
static inline void cb_host_free_item(cb_work *w) { cb_free(w); }
                                     
                                     /* host_memory.c */
                                     cubert_status cb_host_check_range(host_device *dev, const char *op, const char *what, uint64_t addr,
                                     uint64_t size, cubert_berr *err);
cubert_status cb_host_check_peer_range(host_device *d, const char *what, uint64_t addr,
                                       uint64_t size, cubert_berr *err);
/* Whether every buffer argument (CUBERT_PARAM_BUFFER) lies in memory of
 * `dev`, under one take of the backend lock: a launch's common case; when
 * false, cb_host_check_range on each says which and why. */
bool cb_host_buffers_local(host_device *dev, const cubert_backend_arg *args, uint32_t nargs);
cubert_status cb_host_mem_alloc(void *device, uint64_t size, cubert_backend_mem *mem,
                                cubert_berr *err);
void cb_host_mem_free(void *device, cubert_backend_mem *mem);
cubert_status cb_host_mem_export(void *device, const cubert_backend_mem *mem,
                                 unsigned char ipc[CUBERT_BACKEND_IPC_SIZE], cubert_berr *err);
cubert_status cb_host_mem_import(void *device, const unsigned char ipc[CUBERT_BACKEND_IPC_SIZE], uint64_t size,
                                 cubert_backend_mem *mem, cubert_berr *err);
cubert_status cb_host_peer_can_access(void *device, void *peer, bool *can, cubert_berr *err);
cubert_status cb_host_peer_enable(void *device, void *peer, cubert_berr *err);
cubert_status cb_host_link_info(void *device, void *peer, cubert_backend_link *link,
                                cubert_berr *err);

/* host_stream.c */
cubert_status cb_host_check_stream(host_device *dev, void *stream, const char *op, cubert_berr *err);
cubert_status cb_host_enqueue(host_stream *s, cb_work *w, const char *op, cubert_berr *err);
void cb_host_record_failure(host_device *dev, uint64_t work, cubert_status status,
                            const char *message);
void cb_host_stream_destroy_impl(host_device *d, host_stream *s);
cubert_status cb_host_stream_create(void *device, void **stream, cubert_berr *err);
void cb_host_stream_destroy(void *device, void *stream);
cubert_status cb_host_event_record(void *device, void *stream, void **event, cubert_berr *err);
cubert_status cb_host_stream_wait(void *device, void *stream, void *event, cubert_berr *err);
void cb_host_event_destroy(void *device, void *event);
cubert_status cb_host_sync(void *device, void *stream, cubert_berr *err);
uint64_t cb_host_progress(void *device, void *stream);
size_t cb_host_drain_failures(void *device, cubert_async_failure *out, size_t capacity);
cubert_status cb_host_timer_record(void *device, void *stream, void **timer, cubert_berr *err);
cubert_status cb_host_timer_elapsed(void *device, void *start, void *end, double *ms,
                                    cubert_berr *err);
void cb_host_timer_destroy(void *device, void *timer);

/* host_transfer.c */
/* Frees the device's kept staging blocks (device_close, after its streams). */
void cb_host_staging_free(host_device *dev);
cubert_status cb_host_write(void *device, void *stream, uint64_t work, uint64_t dst,
                            const void *src, uint64_t size, cubert_berr *err);
cubert_status cb_host_read(void *device, void *stream, uint64_t work, void *dst, uint64_t src,
                           uint64_t size, cubert_berr *err);
cubert_status cb_host_fill(void *device, void *stream, uint64_t work, uint64_t dst,
                           const void *pattern, uint32_t pattern_size, uint64_t size,
                           cubert_berr *err);
cubert_status cb_host_copy(void *device, void *stream, uint64_t work, uint64_t dst, uint64_t src,
                           uint64_t size, cubert_berr *err);
cubert_status cb_host_copy_peer(void *device, void *stream, uint64_t work, uint64_t dst,
                                void *src_device, uint64_t src, uint64_t size, cubert_berr *err);
cubert_status cb_host_copy_strided(void *device, void *stream, uint64_t work,
                                   cubert_backend_direction direction, uint64_t dst, void *src_device,
                                   uint64_t src, const cubert_backend_strided *layout, cubert_berr *err);
/* Host buffers (host_transfer.c): placed or page-aligned memory, queued copies. */
cubert_status cb_host_host_alloc(void *device, cubert_backend_host_mem *mem, cubert_berr *err);
cubert_status cb_host_host_register(void *device, cubert_backend_host_mem *mem, cubert_berr *err);
void cb_host_host_free(void *device, cubert_backend_host_mem *mem);
cubert_status cb_host_write_host(void *device, void *stream, uint64_t work, uint64_t dst, const void *src,
                                 uint64_t size, cubert_berr *err);
cubert_status cb_host_read_host(void *device, void *stream, uint64_t work, void *dst, uint64_t src,
                                uint64_t size, cubert_berr *err);

/* host_launch.c */
void cb_host_module_free(host_module *m);
cubert_status cb_host_module_load(void *device, const cubert_backend_kernel *kernel,
                                  void **module, cubert_berr *err);
void cb_host_module_unload(void *device, void *module);
void cb_host_module_prepare(void *device, const cubert_backend_kernel *kernel);
cubert_status cb_host_launch(void *device, void *stream, uint64_t work, void *module,
                             const cubert_launch_config *config,
                             const cubert_backend_arg *args, uint32_t nargs, cubert_berr *err);
/* The same launch from a packed image (backend.h): its arguments as
 * records, then cb_host_launch (the host's kernels see pointers and sizes,
 * which the image and its sizes give). */
cubert_status cb_host_launch_image(void *device, void *stream, uint64_t work, void *module,
                                   const cubert_launch_config *config, const cubert_backend_image *image,
                                   cubert_berr *err);

#endif
