/* backends/host/host_transfer.c: the host backend's writes (run in place
 * when the stream is idle, else staged at enqueue), reads (waited for on the
 * caller's stack), fills and copies, each a work item on the stream's queue. */
#include <errno.h>
#include <inttypes.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "backends/host/host_internal.h"
#include "backends/host/host_testing.h"
#include "base/strided.h"

/* ------------------------------------------------------------ transfers */

typedef struct copy_item {
  cb_work work;
  void *dst;
  const void *src;
  size_t size;
} copy_item;

static void copy_run(cb_work *w) {
  copy_item *it = (copy_item *)w;
  if (it->size)
    memmove(it->dst, it->src, it->size);
}

/* Runs `w` (the caller's, release NULL) in the stream's order and returns
 * once it ran: the item may live on the caller's stack. */
static cubert_status run_and_wait(host_device *d, host_stream *s, cb_work *w, const char *op,
                                  cubert_berr *err) {
  uint64_t position = cb_work_queue_push(&s->queue, w);
  if (position == 0)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: %s: the stream was destroyed", d->name, op);
  cb_work_queue_wait(&s->queue, position);
  return CUBERT_OK;
}

/* Runs `w` (the caller's, release NULL) when the stream has nothing
 * pending, and returns once it ran (*ran true): the item may live on the
 * caller's stack and read the caller's buffer in place. *ran false and
 * CUBERT_OK: the stream has work, nothing was queued. */
static cubert_status run_if_idle(host_device *d, host_stream *s, cb_work *w, const char *op, bool *ran,
                                 cubert_berr *err) {
  bool busy;
  uint64_t position = cb_work_queue_push_if_idle(&s->queue, w, &busy);
  *ran = position != 0;
  if (position)
    cb_work_queue_wait(&s->queue, position);
  else if (!busy)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: %s: the stream was destroyed", d->name, op);
  return CUBERT_OK;
}

/* A write's staged copy of the caller's bytes (a strided write's packed).
 * A large one (from HOST_WRITE_LARGE) goes back to its device's kept
 * blocks once it ran, when there is room, so the next large write queued
 * behind other work finds memory already faulted in instead of a fresh
 * mapping to fault in page by page (what made a 64 MiB write take a
 * second). */
typedef struct host_staging {
  cb_work work;
  host_device *keep;        /* whose kept blocks it returns to; NULL: freed */
  void *dst;
  size_t size;
  size_t capacity;          /* bytes of data */
  cubert_backend_strided layout; /* a strided write's: from data, packed, to dst */
  alignas(16) unsigned char data[];
} host_staging;

/* host_testing.h */
static atomic_uint_fast64_t staging_allocs, staging_kept_bytes;
uint64_t cb_host_testing_staging_allocs(void) { return atomic_load(&staging_allocs); }
uint64_t cb_host_testing_staging_kept(void) { return atomic_load(&staging_kept_bytes); }

static void staging_run(cb_work *w) {
  host_staging *it = (host_staging *)w;
  memcpy(it->dst, it->data, it->size);
}

static void staging_strided_run(cb_work *w) {
  host_staging *it = (host_staging *)w;
  cb_strided_move(it->dst, it->data, &it->layout, it->layout.nruns);
}

/* Removes kept block i (under staging_lock). */
static host_staging *staging_remove(host_device *d, size_t i) {
  host_staging *it = d->staging[i];
  d->staging[i] = d->staging[--d->nstaging];
  d->staging_bytes -= it->capacity;
  atomic_fetch_sub(&staging_kept_bytes, it->capacity);
  return it;
}

/* A large block that ran is kept for the next write, room made for it by
 * dropping the smallest kept blocks: what is kept follows the latest sizes
 * (a 64 MiB write after smaller ones would otherwise never find its block
 * kept, and fault a fresh one in every time). */
static void staging_release(cb_work *w) {
  host_staging *it = (host_staging *)w;
  host_device *d = it->keep;
  host_staging *drop[HOST_STAGING_KEEP];
  size_t ndrop = 0;
  if (!d || it->capacity > HOST_STAGING_KEEP_BYTES) {
    cb_free(it);
    return;
  }
  pthread_mutex_lock(&d->staging_lock);
  while (d->nstaging == HOST_STAGING_KEEP || d->staging_bytes + it->capacity > HOST_STAGING_KEEP_BYTES) {
    size_t smallest = 0;
    for (size_t i = 1; i < d->nstaging; i++)
      if (d->staging[i]->capacity < d->staging[smallest]->capacity)
        smallest = i;
    drop[ndrop++] = staging_remove(d, smallest);
  }
  d->staging[d->nstaging++] = it;
  d->staging_bytes += it->capacity;
  atomic_fetch_add(&staging_kept_bytes, it->capacity);
  pthread_mutex_unlock(&d->staging_lock);
  while (ndrop)
    cb_free(drop[--ndrop]);
}

/* The smallest kept block that holds `size` bytes; NULL when none does.
 * Then the largest kept block (too small) is dropped, so that what is kept
 * follows the sizes in use. */
static host_staging *staging_reuse(host_device *d, size_t size) {
  host_staging *it = NULL, *drop = NULL;
  pthread_mutex_lock(&d->staging_lock);
  size_t fit = d->nstaging, largest = d->nstaging;
  for (size_t i = 0; i < d->nstaging; i++) {
    size_t cap = d->staging[i]->capacity;
    if (cap >= size && (fit == d->nstaging || cap < d->staging[fit]->capacity))
      fit = i;
    if (largest == d->nstaging || cap > d->staging[largest]->capacity)
      largest = i;
  }
  if (fit < d->nstaging)
    it = staging_remove(d, fit);
  else if (largest < d->nstaging)
    drop = staging_remove(d, largest);
  pthread_mutex_unlock(&d->staging_lock);
  cb_free(drop);
  return it;
}

void cb_host_staging_free(host_device *d) {
  while (d->nstaging)
    cb_free(staging_remove(d, d->nstaging - 1));
}

/* A staging item holding `size` bytes: a kept block for a large write, else
 * a new allocation (a large one rounded up to HOST_WRITE_LARGE, so that
 * writes of nearly one size share blocks). NULL: no memory. */
static host_staging *staging_take(host_device *d, size_t size) {
  bool large = size >= HOST_WRITE_LARGE;
  host_staging *it = large ? staging_reuse(d, size) : NULL;
  if (it)
    return it;
  size_t capacity = large ? (size_t)align_up(size, HOST_WRITE_LARGE) : size;
  if (capacity < size || capacity > SIZE_MAX - sizeof *it || !(it = cb_malloc(sizeof *it + capacity)))
    return NULL;
  if (large)
    atomic_fetch_add(&staging_allocs, 1);
  it->keep = large ? d : NULL;
  it->capacity = capacity;
  return it;
}

cubert_status cb_host_write(void *device, void *stream, uint64_t work, uint64_t dst,
                            const void *src, uint64_t size, cubert_berr *err) {
  host_device *d = device;
  host_stream *s = stream;
  cubert_status st = cb_host_check_stream(d, stream, "write", err);
  if (st == CUBERT_OK)
    st = cb_host_check_range(d, "write", "destination", dst, size, err);
  if (st != CUBERT_OK)
    return st;
  if (size && !src)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: write: no source", d->name);
  if (size >= HOST_WRITE_LARGE) {
    /* Nothing pending on the stream: the worker copies straight from the
     * caller's buffer, and the call returns once it did (one copy, nothing
     * staged). The item lives on this stack until then. */
    copy_item direct = {{NULL, copy_run, NULL, work}, (void *)(uintptr_t)dst, src, (size_t)size};
    bool ran;
    st = run_if_idle(d, s, &direct.work, "write", &ran, err);
    if (st != CUBERT_OK || ran)
      return st;
  }
  host_staging *it = size <= SIZE_MAX ? staging_take(d, (size_t)size) : NULL;
  if (!it)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY,
                           "%s: write: no host memory to stage %" PRIu64 " bytes", d->name, size);
  it->work.run = staging_run;
  it->work.release = staging_release;
  it->work.tag = work;
  it->dst = (void *)(uintptr_t)dst;
  it->size = (size_t)size;
  if (size)
    memcpy(it->data, src, (size_t)size);
  return cb_host_enqueue(stream, &it->work, "write", err);
}

cubert_status cb_host_read(void *device, void *stream, uint64_t work, void *dst, uint64_t src,
                           uint64_t size, cubert_berr *err) {
  host_device *d = device;
  cubert_status st = cb_host_check_stream(d, stream, "read", err);
  if (st == CUBERT_OK)
    st = cb_host_check_range(d, "read", "source", src, size, err);
  if (st != CUBERT_OK)
    return st;
  if (size && !dst)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: read: no destination", d->name);
  /* The item lives on this stack: the worker does not touch it once its
   * position completed, which is what we wait for. */
  copy_item it = {{NULL, copy_run, NULL, work}, dst, (const void *)(uintptr_t)src, (size_t)size};
  return run_and_wait(d, stream, &it.work, "read", err);
}

typedef struct fill_item {
  cb_work work;
  unsigned char *dst;
  size_t size;
  uint32_t pattern_size;
  unsigned char pattern[8];
} fill_item;

static void fill_run(cb_work *w) {
  fill_item *it = (fill_item *)w;
  if (it->size == 0)
    return;
  if (it->pattern_size == 1) {
    memset(it->dst, it->pattern[0], it->size);
    return;
  }
  /* One pattern, then keep doubling the filled prefix. */
  memcpy(it->dst, it->pattern, it->pattern_size);
  size_t done = it->pattern_size;
  while (done < it->size) {
    size_t n = done < it->size - done ? done : it->size - done;
    memcpy(it->dst + done, it->dst, n);
    done += n;
  }
}

cubert_status cb_host_fill(void *device, void *stream, uint64_t work, uint64_t dst,
                           const void *pattern, uint32_t pattern_size, uint64_t size,
                           cubert_berr *err) {
  host_device *d = device;
  cubert_status st = cb_host_check_stream(d, stream, "fill", err);
  if (st != CUBERT_OK)
    return st;
  if (!pattern || (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8))
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: fill: pattern of %" PRIu32 " bytes (1, 2, 4 or 8)", d->name,
                           pattern_size);
  if (size % pattern_size)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: fill: %" PRIu64 " bytes is not a multiple of the %" PRIu32
                           "-byte pattern",
                           d->name, size, pattern_size);
  st = cb_host_check_range(d, "fill", "destination", dst, size, err);
  if (st != CUBERT_OK)
    return st;
  fill_item *it = cb_malloc(sizeof *it);
  if (!it)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no host memory for a fill", d->name);
  it->work.run = fill_run;
  it->work.release = cb_host_free_item;
  it->work.tag = work;
  it->dst = (unsigned char *)(uintptr_t)dst;
  it->size = (size_t)size;
  it->pattern_size = pattern_size;
  memcpy(it->pattern, pattern, pattern_size);
  return cb_host_enqueue(stream, &it->work, "fill", err);
}

static cubert_status enqueue_copy(host_device *d, host_stream *s, uint64_t work, uint64_t dst,
                                  uint64_t src, uint64_t size, const char *op, cubert_berr *err) {
  copy_item *it = cb_malloc(sizeof *it);
  if (!it)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no host memory for a %s", d->name, op);
  it->work.run = copy_run;
  it->work.release = cb_host_free_item;
  it->work.tag = work;
  it->dst = (void *)(uintptr_t)dst;
  it->src = (const void *)(uintptr_t)src;
  it->size = (size_t)size;
  return cb_host_enqueue(s, &it->work, op, err);
}

cubert_status cb_host_copy(void *device, void *stream, uint64_t work, uint64_t dst, uint64_t src,
                           uint64_t size, cubert_berr *err) {
  host_device *d = device;
  cubert_status st = cb_host_check_stream(d, stream, "copy", err);
  if (st == CUBERT_OK)
    st = cb_host_check_range(d, "copy", "source", src, size, err);
  if (st == CUBERT_OK)
    st = cb_host_check_range(d, "copy", "destination", dst, size, err);
  if (st != CUBERT_OK)
    return st;
  return enqueue_copy(d, stream, work, dst, src, size, "copy", err);
}

cubert_status cb_host_copy_peer(void *device, void *stream, uint64_t work, uint64_t dst,
                                void *src_device, uint64_t src, uint64_t size, cubert_berr *err) {
  host_device *d = device;
  host_device *sd = src_device;
  cubert_status st = cb_host_check_stream(d, stream, "peer copy", err);
  if (st != CUBERT_OK)
    return st;
  if (!sd || sd->backend != d->backend)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: peer copy: the source device is not of this host backend", d->name);
  st = cb_host_check_range(sd, "peer copy", "source", src, size, err);
  if (st == CUBERT_OK)
    st = cb_host_check_range(d, "peer copy", "destination", dst, size, err);
  if (st != CUBERT_OK)
    return st;
  return enqueue_copy(d, stream, work, dst, src, size, "peer copy", err);
}

/* ------------------------------------------------------------ host buffers */

/* Host memory is all the host backend has, so "page-locked" is plain memory
 * here: on the device's NUMA node when the runtime can place it, else
 * page-aligned from the C library. Registering pins nothing. Transfers are
 * queued copies, in the stream's order, like copy. */
cubert_status cb_host_host_alloc(void *device, cubert_backend_host_mem *mem, cubert_berr *err) {
  host_device *d = device;
  host_backend *b = d->backend;
  void *p = b->place_alloc ? b->place_alloc(b->place_ctx, d->index, (size_t)mem->size) : NULL;
  mem->cookie = p; /* non-NULL: placed, goes back through place_free */
  if (!p) {
    size_t page = 4096;
    if (mem->size > SIZE_MAX - page ||
        !(p = aligned_alloc(page, (size_t)((mem->size + page - 1) / page * page))))
      return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY,
                             "%s: no host memory for a %" PRIu64 "-byte host buffer", d->name, mem->size);
  }
  mem->ptr = p;
  mem->registered = false;
  return CUBERT_OK;
}

cubert_status cb_host_host_register(void *device, cubert_backend_host_mem *mem, cubert_berr *err) {
  (void)device;
  (void)err;
  mem->cookie = NULL;
  mem->registered = true;
  return CUBERT_OK;
}

void cb_host_host_free(void *device, cubert_backend_host_mem *mem) {
  host_device *d = device;
  if (mem->registered || !mem->ptr)
    return;
  if (mem->cookie)
    d->backend->place_free(d->backend->place_ctx, mem->ptr, (size_t)mem->size);
  else
    free(mem->ptr); /* pinned host memory: aligned_alloc, as device memory */
}

cubert_status cb_host_write_host(void *device, void *stream, uint64_t work, uint64_t dst, const void *src,
                                 uint64_t size, cubert_berr *err) {
  host_device *d = device;
  cubert_status st = cb_host_check_stream(d, stream, "write from a host buffer", err);
  if (st == CUBERT_OK)
    st = cb_host_check_range(d, "write from a host buffer", "destination", dst, size, err);
  if (st != CUBERT_OK)
    return st;
  return enqueue_copy(d, stream, work, dst, (uint64_t)(uintptr_t)src, size, "write from a host buffer", err);
}

cubert_status cb_host_read_host(void *device, void *stream, uint64_t work, void *dst, uint64_t src,
                                uint64_t size, cubert_berr *err) {
  host_device *d = device;
  cubert_status st = cb_host_check_stream(d, stream, "read into a host buffer", err);
  if (st == CUBERT_OK)
    st = cb_host_check_range(d, "read into a host buffer", "source", src, size, err);
  if (st != CUBERT_OK)
    return st;
  return enqueue_copy(d, stream, work, (uint64_t)(uintptr_t)dst, src, size, "read into a host buffer", err);
}

/* A strided transfer: a loop over runs on the stream's worker. */
typedef struct strided_item {
  cb_work work;
  unsigned char *dst;
  const unsigned char *src;
  cubert_backend_strided layout;
} strided_item;

static void strided_run(cb_work *w) {
  strided_item *it = (strided_item *)w;
  cb_strided_move(it->dst, it->src, &it->layout, it->layout.nruns);
}

/* A strided write from host memory, as cb_host_write: from HOST_WRITE_LARGE
 * packed bytes, in place from the caller's buffer when the stream is idle;
 * else the source is packed into a staging block (a kept one when large),
 * so it may be reused on return, and the worker scatters the packed copy. */
static cubert_status write_strided(host_device *d, host_stream *s, uint64_t work, uint64_t dst,
                                   const unsigned char *src, const cubert_backend_strided *layout,
                                   cubert_berr *err) {
  uint64_t packed = layout->nruns * layout->run;
  if (packed >= HOST_WRITE_LARGE) {
    strided_item direct = {{NULL, strided_run, NULL, work}, (unsigned char *)(uintptr_t)dst, src, *layout};
    bool ran;
    cubert_status st = run_if_idle(d, s, &direct.work, "strided copy", &ran, err);
    if (st != CUBERT_OK || ran)
      return st;
  }
  host_staging *it = packed <= SIZE_MAX ? staging_take(d, (size_t)packed) : NULL;
  if (!it)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no host memory for a strided copy", d->name);
  it->work.run = staging_strided_run;
  it->work.release = staging_release;
  it->work.tag = work;
  it->dst = (void *)(uintptr_t)dst;
  it->size = (size_t)packed;
  /* pack the source now; the worker then reads the packed copy */
  cubert_backend_strided pack = *layout;
  uint64_t pitch = pack.run;
  for (uint32_t i = pack.ndims; i-- > 0;) {
    pack.dst_pitch[i] = pitch;
    pitch *= pack.count[i];
  }
  cb_strided_move(it->data, src, &pack, layout->nruns);
  it->layout = *layout;
  memcpy(it->layout.src_pitch, pack.dst_pitch, sizeof pack.dst_pitch);
  return cb_host_enqueue(s, &it->work, "strided copy", err);
}

cubert_status cb_host_copy_strided(void *device, void *stream, uint64_t work,
                                       cubert_backend_direction direction, uint64_t dst,
                                       void *src_device, uint64_t src,
                                       const cubert_backend_strided *layout, cubert_berr *err) {
  host_device *d = device;
  host_device *sd = direction == CUBERT_BACKEND_PEER_TO_DEVICE ? src_device : d;
  cubert_status st = cb_host_check_stream(d, stream, "strided copy", err);
  if (st != CUBERT_OK)
    return st;
  if (!sd || sd->backend != d->backend)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: strided copy: the source device is not of this host backend", d->name);
  if (!layout || layout->ndims > CUBERT_BACKEND_MAX_DIMS || layout->nruns > cb_strided_runs(layout))
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: strided copy: bad layout", d->name);
  uint64_t src_span, dst_span;
  cb_strided_spans(layout, &src_span, &dst_span);
  bool host_src = direction == CUBERT_BACKEND_HOST_TO_DEVICE;
  bool host_dst = direction == CUBERT_BACKEND_DEVICE_TO_HOST;
  if (!host_src)
    st = cb_host_check_range(sd, "strided copy", "source", src, src_span, err);
  if (st == CUBERT_OK && !host_dst)
    st = cb_host_check_range(d, "strided copy", "destination", dst, dst_span, err);
  if (st != CUBERT_OK)
    return st;
  if (layout->nruns && ((host_src && !src) || (host_dst && !dst)))
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: strided copy: no host buffer", d->name);
  if (host_src)
    return write_strided(d, stream, work, dst, (const unsigned char *)(uintptr_t)src, layout, err);
  if (host_dst) {
    /* like read: the item lives on this stack until its position completed */
    strided_item it = {{NULL, strided_run, NULL, work}, (unsigned char *)(uintptr_t)dst,
                       (const unsigned char *)(uintptr_t)src, *layout};
    return run_and_wait(d, stream, &it.work, "strided copy", err);
  }
  strided_item *it = cb_malloc(sizeof *it);
  if (!it)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no host memory for a strided copy", d->name);
  it->work.run = strided_run;
  it->work.release = cb_host_free_item;
  it->work.tag = work;
  it->dst = (unsigned char *)(uintptr_t)dst;
  it->src = (const unsigned char *)(uintptr_t)src;
  it->layout = *layout;
  return cb_host_enqueue(stream, &it->work, "strided copy", err);
}
