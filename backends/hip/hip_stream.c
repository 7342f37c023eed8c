/* backends/hip/hip_stream.c: streams, the marks progress() follows, failures
 * found when work executes, and the transfers (write, read, fill, copy).
 *
 * Progress. A mark is an event recorded on a stream after some work;
 * progress() queries the pending marks oldest first and reports the last
 * work of the newest completed one. An event after every item cost about a
 * microsecond a launch on CUDA (H200 run of 2026-11-29: 5.4 us a launch
 * against 3.5 us raw), so marks are amortised. Work handed to a stream
 * joins an "open" range, and a mark covering the open range is recorded
 *  - by the call that brings it to MARK_EVERY (32) items;
 *  - by progress() when it finds open work and no mark pending (the GPU has
 *    passed every mark): that mark completes later, so a caller polling
 *    progress() still sees it reach the newest work;
 *  - by sync(), before it waits; a read() waits on an event of its own and
 *    counts everything up to it as done.
 * progress() stays exact in the sense of backend.h (all work on the stream
 * numbered <= the value has completed), only coarser: it moves in steps of
 * up to 32 items, and work after the newest mark counts once a later mark,
 * sync or read covers it. Memory stays bounded: at most MARK_CAPACITY (256)
 * marks are pending on a stream; when full, the newest is re-recorded to
 * cover the new work as well.
 *
 * Attribution of asynchronous failures follows the marks: the first mark
 * whose query reports an error is blamed, and the failure carries a work
 * number only when that mark covers one item and, for a sticky error, was
 * the only one pending (on CUDA a sticky error makes every later query
 * fail, so an older pending mark cannot tell). Otherwise it carries work 0
 * and its message names the range of work it could be. With marks every 32
 * items that is now the usual case: a failure is exact only for work that a
 * sync or read closes alone (e.g. a launch, then sync: the fault test), and
 * is reported as a range otherwise. Sticky errors mark the device lost
 * whatever the attribution. Failed work counts as completed.
 *
 * Writes (host to device; backend.h: `src` is reusable when write returns).
 * A pageable source (malloc, the stack: memory HIP does not know) is copied
 * straight from the caller's pointer, as raw HIP would (hipMemcpyAsync; on
 * NVIDIA its driver entry hipMemcpyHtoDAsync: copy_pageable below),
 * because on both platforms the call returns only once the source has been
 * consumed: CUDA's cudaMemcpyAsync from pageable memory returns once the
 * bytes are in the driver's staging memory (CUDA runtime API documentation,
 * "API synchronization behavior"), and ROCm copies from unpinned host
 * memory synchronously (ROCm 5.2 ihipMemcpy waits for the command; later
 * clr enforces the wait in its copy layers). Sources HIP knows (hipHostMalloc,
 * hipHostRegister, managed memory) are copied by DMA after the call returns,
 * so they go through pinned staging buffers (memcpy into one, copy from it).
 * Large pageable writes (>= 16 MiB) and reads (>= 1 MiB) go through the device's
 * pipeline of pinned chunks (hip_pipe.c), the host-side copy split over
 * several threads: staging with one thread measured 1.09-1.16x raw at
 * >= 64 MiB in one H200 run and 0.76-1.05x in the next (the memcpy was the
 * bottleneck), so the pipeline copies with threads near the device. When
 * the pipeline is busy (another transfer of the device holds it) the direct
 * path serves. Staging buffers are 8 MiB, two halves
 * used alternately, taken from a per-device free list; at most 8 exist per
 * device, and a write that finds none free copies directly and waits. A
 * staged write returns as soon as its last chunk is in a staging buffer: the
 * buffer's events say when it may be overwritten. Note that on ROCm a direct
 * write waits until the copy has landed (and the stream's earlier work with
 * it), as a raw hipMemcpyAsync from pageable memory does. A staging
 * buffer's memory comes from the runtime's place_alloc hook when it gives
 * some (the device's local NUMA node, on a machine of several), pinned with
 * hipHostRegister; otherwise, or when that pinning fails, from
 * hipHostMalloc.
 *
 * Writes of up to SMALL_WRITE bytes are copied onto the stack first and go
 * the pageable way from there, so no driver query of the source's kind is
 * made for them.
 *
 * Reads (device to host): hipMemcpyAsync into the caller's buffer (on
 * NVIDIA, into pageable memory, its driver entry hipMemcpyDtoHAsync:
 * copy_to_pageable below). On NVIDIA a copy to pageable host memory has
 * completed when cudaMemcpyAsync returns (CUDA runtime API documentation, "API
 * synchronization behavior": to pageable host memory the call returns once
 * the copy has completed), so a read whose destination the driver calls
 * pageable (cudaPointerGetAttributes: unregistered) is done when the call
 * returns: no stream query, no event. Reads of up to SMALL_READ (64) bytes
 * land on the stack first (memory HIP cannot know) and are copied out, so
 * not even that question is asked: raw's one call. The bounce stops at 64
 * bytes because on the H200 a 4 KiB bounce cost the driver 0.8 us more
 * than the caller's buffer and its memcpy out 0.5 us more (the bytes come
 * in cold), where the question cost 0.2 us (docs/bench.md). Otherwise
 * (AMD, pinned or registered memory) hipStreamQuery confirms an idle
 * stream (ROCm copies to pageable memory synchronously too), and when it
 * says busy an event after the copy is waited for: the event is what says
 * the bytes landed. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "backends/hip/hip_internal.h"

#define MARK_EVERY 32u
#define MARK_CAPACITY 256u
#define STAGE_FROM UINT64_MAX /* pageable writes never stage (see above) */
#define SMALL_WRITE 4096u     /* writes up to this size bounce through the stack (cb_hip_write) */
#define SMALL_READ 64u        /* reads up to this size land on the stack first (cb_hip_read) */
#define STAGING_BYTES (8u << 20)
#define STAGING_HALF (STAGING_BYTES / 2)
#define STAGING_MAX 8
#define FAILURES_MAX 65536u

struct cb_hip_staging {
  cb_hip_staging *next;
  char *buf;              /* pinned host memory, STAGING_BYTES */
  bool placed;            /* buf is from place_alloc, pinned by hipHostRegister
                             (else from hipHostMalloc) */
  hipEvent_t done[2];     /* the last copy that used each half */
  bool pending[2];
};

/* ------------------------------------------------------------ failures */

void cb_hip_push_failure(cb_hip_device *dev, uint64_t work, cubert_status status, bool sticky,
                         const char *fmt, ...) {
  cubert_async_failure f;
  memset(&f, 0, sizeof f);
  f.work = work;
  f.status = status;
  f.sticky = sticky;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f.message, sizeof f.message, fmt, ap);
  va_end(ap);
  if (sticky) cb_hip_mark_lost(dev, f.message);
  pthread_mutex_lock(&dev->fail_lock);
  if (dev->nfailures == dev->cap_failures) {
    size_t cap = dev->cap_failures ? dev->cap_failures * 2 : 16;
    cubert_async_failure *p = cap <= FAILURES_MAX ? cb_realloc(dev->failures, cap * sizeof *p) : NULL;
    if (p) {
      dev->failures = p;
      dev->cap_failures = cap;
    }
  }
  if (dev->nfailures < dev->cap_failures) dev->failures[dev->nfailures++] = f;
  else dev->dropped_failures++;
  pthread_mutex_unlock(&dev->fail_lock);
}

size_t cb_hip_drain_failures(void *device, cubert_async_failure *out, size_t capacity) {
  cb_hip_device *dev = device;
  pthread_mutex_lock(&dev->fail_lock);
  size_t n = dev->nfailures < capacity ? dev->nfailures : capacity;
  memcpy(out, dev->failures, n * sizeof *out);
  memmove(dev->failures, dev->failures + n, (dev->nfailures - n) * sizeof *out);
  dev->nfailures -= n;
  if (n < capacity && dev->dropped_failures) {
    cubert_async_failure *f = &out[n++];
    memset(f, 0, sizeof *f);
    f->status = CUBERT_ERR_BACKEND;
    cb_hip_format(f->message, sizeof f->message,
             "%" PRIu64 " failures on %s were dropped: the queue was full", dev->dropped_failures,
             dev->label);
    dev->dropped_failures = 0;
  }
  pthread_mutex_unlock(&dev->fail_lock);
  return n;
}

/* ------------------------------------------------------------ marks */

static cubert_status op_status(const char *op) {
  if (strcmp(op, "launch") == 0) return CUBERT_ERR_LAUNCH;
  if (strcmp(op, "work") == 0) return CUBERT_ERR_BACKEND; /* a mix: launches and copies */
  return CUBERT_ERR_COPY;
}

static const char *op_join(const char *a, const char *b) {
  return a == b || strcmp(a, b) == 0 ? a : "work";
}

static void event_give(cb_hip_stream *s, hipEvent_t ev) {
  if (s->nspare < MARK_CAPACITY) s->spare[s->nspare++] = ev;
  else hipEventDestroy(ev);
}

static hipError_t event_take(cb_hip_stream *s, hipEvent_t *ev) {
  if (s->nspare) {
    *ev = s->spare[--s->nspare];
    return hipSuccess;
  }
  return hipEventCreateWithFlags(ev, hipEventDisableTiming);
}

static void mark_pop(cb_hip_stream *s) {
  event_give(s, s->marks[s->head].event);
  s->head = (s->head + 1) % s->capacity;
  s->count--;
}

/* Everything handed to the stream counts as completed (the device is
 * lost). */
static void marks_settle_all(cb_hip_stream *s) {
  while (s->count) mark_pop(s);
  s->open_items = 0;
  s->done = s->enqueued;
}

/* Queries marks oldest first; pops the completed ones and turns an error
 * into a failure. Returns the number of failures recorded. s->lock held; the
 * device is current. */
static int reap_locked(cb_hip_stream *s) {
  cb_hip_device *dev = s->device;
  int failures = 0;
  while (s->count) {
    if (atomic_load(&dev->lost)) {
      marks_settle_all(s);
      break;
    }
    cb_hip_mark *m = &s->marks[s->head];
    hipError_t e = hipEventQuery(m->event);
    if (e == hipErrorNotReady) break;
    if (e != hipSuccess) {
      bool only = s->count == 1;
      cubert_berr err = {0};
      cubert_status st = cb_hip_fail(NULL, &err, e, op_status(m->op), "%s", "");
      bool attributable = m->items == 1 && (!err.sticky || only);
      if (attributable)
        cb_hip_push_failure(dev, m->last, st, err.sticky, "%s (work %" PRIu64 ") on %s failed%s",
                            m->op, m->last, dev->label, err.message);
      else
        cb_hip_push_failure(dev, 0, st, err.sticky,
                            "work %" PRIu64 "..%" PRIu64 " on a stream of %s: one of them failed%s",
                            m->first, s->enqueued, dev->label, err.message);
      failures++;
    }
    if (m->last > s->done) s->done = m->last;
    mark_pop(s);
  }
  return failures;
}

/* Records a mark covering the open range. s->lock held; the device is
 * current. */
static void close_open_locked(cb_hip_stream *s) {
  if (!s->open_items) return;
  uint64_t first = s->open_first, last = s->open_last;
  uint32_t items = s->open_items;
  const char *op = s->open_op;
  s->open_items = 0;
  if (s->count == s->capacity) reap_locked(s);
  if (atomic_load(&s->device->lost)) {
    marks_settle_all(s);
    return;
  }
  hipError_t e = hipSuccess;
  if (s->count == s->capacity) {
    /* Full: the newest mark moves to the end of the stream and covers the
     * open work too. */
    cb_hip_mark *m = &s->marks[(s->head + s->count - 1) % s->capacity];
    e = hipEventRecord(m->event, s->stream);
    if (e == hipSuccess) {
      m->last = last;
      m->items += items;
      m->op = op_join(m->op, op);
    }
  } else {
    hipEvent_t ev = NULL;
    e = event_take(s, &ev);
    if (e == hipSuccess) e = hipEventRecord(ev, s->stream);
    if (e == hipSuccess) {
      cb_hip_mark *m = &s->marks[(s->head + s->count) % s->capacity];
      m->event = ev;
      m->first = first;
      m->last = last;
      m->items = items;
      m->op = op;
      s->count++;
    } else if (ev) {
      hipEventDestroy(ev);
    }
  }
  if (e != hipSuccess) {
    /* No event: wait here so progress stays true (rare: out of resources,
     * or the device is failing, which the wait reports). */
    hipError_t w = hipStreamSynchronize(s->stream);
    reap_locked(s);
    if (w != hipSuccess) {
      cubert_berr err = {0};
      cubert_status st = cb_hip_fail(NULL, &err, w, op_status(op), "%s", "");
      bool exact = items == 1 && s->count == 0;
      cb_hip_push_failure(s->device, exact ? last : 0, st, err.sticky,
                          "work %" PRIu64 "..%" PRIu64 " on a stream of %s: waiting failed%s", first,
                          last, s->device->label, err.message);
    }
    if (last > s->done) s->done = last;
  }
}

void cb_hip_mark_work(cb_hip_stream *s, uint64_t work, const char *op) {
  pthread_mutex_lock(&s->lock);
  if (work > s->enqueued) s->enqueued = work;
  if (atomic_load(&s->device->lost)) { /* nothing runs any more */
    marks_settle_all(s);
    pthread_mutex_unlock(&s->lock);
    return;
  }
  if (!s->open_items) {
    s->open_first = s->open_last = work;
    s->open_op = op;
  } else {
    s->open_op = op_join(s->open_op, op);
    if (work > s->open_last) s->open_last = work;
  }
  if (++s->open_items >= MARK_EVERY) close_open_locked(s);
  pthread_mutex_unlock(&s->lock);
}

uint64_t cb_hip_progress(void *device, void *stream) {
  cb_hip_device *dev = device;
  cb_hip_stream *s = stream;
  if (!s) return 0;
  pthread_mutex_lock(&s->lock);
  if (atomic_load(&dev->lost)) {
    marks_settle_all(s);
  } else if ((s->count || s->open_items) && cb_hip_enter(dev, NULL) == CUBERT_OK) {
    reap_locked(s);
    /* the GPU passed every mark: one for the newest work, seen next time */
    if (s->count == 0 && s->open_items) close_open_locked(s);
  }
  uint64_t done = s->done;
  pthread_mutex_unlock(&s->lock);
  return done;
}

/* ------------------------------------------------------------ streams */

cubert_status cb_hip_stream_create(void *device, void **stream, cubert_berr *err) {
  cb_hip_device *dev = device;
  cubert_status st;
  if ((st = cb_hip_check_lost(dev, err)) || (st = cb_hip_enter(dev, err))) return st;
  cb_hip_stream *s = cb_calloc(1, sizeof *s);
  cb_hip_mark *marks = cb_calloc(MARK_CAPACITY, sizeof *marks);
  hipEvent_t *spare = cb_calloc(MARK_CAPACITY, sizeof *spare);
  if (!s || !marks || !spare) {
    cb_free(s);
    cb_free(marks);
    cb_free(spare);
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory creating a stream");
  }
  hipError_t e = hipStreamCreateWithFlags(&s->stream, hipStreamNonBlocking);
  if (e != hipSuccess) {
    cb_free(s);
    cb_free(marks);
    cb_free(spare);
    return cb_hip_fail(dev, err, e, CUBERT_ERR_BACKEND, "hipStreamCreateWithFlags on %s", dev->label);
  }
  pthread_mutex_init(&s->lock, NULL);
  s->device = dev;
  s->marks = marks;
  s->spare = spare;
  s->capacity = MARK_CAPACITY;
  pthread_mutex_lock(&dev->streams_lock);
  s->next = dev->streams;
  dev->streams = s;
  pthread_mutex_unlock(&dev->streams_lock);
  *stream = s;
  return CUBERT_OK;
}

static void stream_free(cb_hip_device *dev, cb_hip_stream *s) {
  bool lost = atomic_load(&dev->lost);
  if (!lost) {
    pthread_mutex_lock(&s->lock);
    close_open_locked(s); /* so the reap below can report its failure */
    pthread_mutex_unlock(&s->lock);
    (void)hipStreamSynchronize(s->stream);
  }
  pthread_mutex_lock(&s->lock);
  if (!lost) reap_locked(s); /* keep the failures of its last work */
  marks_settle_all(s);
  for (uint32_t i = 0; i < s->nspare; i++) hipEventDestroy(s->spare[i]);
  pthread_mutex_unlock(&s->lock);
  (void)hipStreamDestroy(s->stream);
  pthread_mutex_destroy(&s->lock);
  cb_free(s->marks);
  cb_free(s->spare);
  cb_free(s);
}

void cb_hip_stream_destroy(void *device, void *stream) {
  cb_hip_device *dev = device;
  cb_hip_stream *s = stream;
  if (!s) return;
  (void)cb_hip_enter(dev, NULL);
  pthread_mutex_lock(&dev->streams_lock);
  for (cb_hip_stream **p = &dev->streams; *p; p = &(*p)->next) {
    if (*p == s) {
      *p = s->next;
      break;
    }
  }
  pthread_mutex_unlock(&dev->streams_lock);
  stream_free(dev, s);
}

cubert_status cb_hip_event_record(void *device, void *stream, void **event, cubert_berr *err) {
  cb_hip_device *dev = device;
  cb_hip_stream *s = stream;
  cubert_status st;
  if ((st = cb_hip_check_lost(dev, err)) || (st = cb_hip_enter(dev, err))) return st;
  if (!s) return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "event_record: no stream");
  hipEvent_t ev = NULL;
  hipError_t e = hipEventCreateWithFlags(&ev, hipEventDisableTiming);
  if (e == hipSuccess && (e = hipEventRecord(ev, s->stream)) != hipSuccess) hipEventDestroy(ev);
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_BACKEND, "recording an event on %s", dev->label);
  *event = ev;
  return CUBERT_OK;
}

cubert_status cb_hip_stream_wait(void *device, void *stream, void *event, cubert_berr *err) {
  cb_hip_device *dev = device;
  cb_hip_stream *s = stream;
  cubert_status st;
  if ((st = cb_hip_check_lost(dev, err)) || (st = cb_hip_enter(dev, err))) return st;
  if (!s || !event) return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "stream_wait: no stream or event");
  hipError_t e = hipStreamWaitEvent(s->stream, (hipEvent_t)event, 0);
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_BACKEND, "hipStreamWaitEvent on %s", dev->label);
  return CUBERT_OK;
}

/* Timers: events with timing on, read with hipEventElapsedTime. */
cubert_status cb_hip_timer_record(void *device, void *stream, void **timer, cubert_berr *err) {
  cb_hip_device *dev = device;
  cb_hip_stream *s = stream;
  cubert_status st;
  if ((st = cb_hip_check_lost(dev, err)) || (st = cb_hip_enter(dev, err))) return st;
  if (!s) return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "timer_record: no stream");
  hipEvent_t ev = NULL;
  hipError_t e = hipEventCreateWithFlags(&ev, hipEventDefault);
  if (e == hipSuccess && (e = hipEventRecord(ev, s->stream)) != hipSuccess) hipEventDestroy(ev);
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_BACKEND, "recording a timer on %s", dev->label);
  *timer = ev;
  return CUBERT_OK;
}

cubert_status cb_hip_timer_elapsed(void *device, void *start, void *end, double *ms, cubert_berr *err) {
  cb_hip_device *dev = device;
  cubert_status st;
  if ((st = cb_hip_check_lost(dev, err)) || (st = cb_hip_enter(dev, err))) return st;
  hipError_t e = hipEventSynchronize((hipEvent_t)end);
  float f = 0.0f;
  if (e == hipSuccess) e = hipEventElapsedTime(&f, (hipEvent_t)start, (hipEvent_t)end);
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_BACKEND, "reading timers on %s", dev->label);
  *ms = f;
  return CUBERT_OK;
}

void cb_hip_event_destroy(void *device, void *event) {
  if (!event) return;
  (void)cb_hip_enter(device, NULL);
  (void)hipEventDestroy((hipEvent_t)event);
}

/* ------------------------------------------------------------ sync */

/* Waits for one stream and records what the wait found. True when the
 * device is (now) lost. Work handed to the stream while it waits (the
 * runtime calls sync beside other calls) is not counted as done. */
static bool sync_one(cb_hip_device *dev, cb_hip_stream *s) {
  pthread_mutex_lock(&s->lock);
  uint64_t target = s->enqueued;
  if (!atomic_load(&dev->lost)) close_open_locked(s); /* the wait then completes a mark */
  pthread_mutex_unlock(&s->lock);
  hipError_t e = atomic_load(&dev->lost) ? hipSuccess : hipStreamSynchronize(s->stream);
  pthread_mutex_lock(&s->lock);
  int found = reap_locked(s);
  if (e != hipSuccess && !found) {
    /* The wait failed but no mark did: name what was pending. */
    cubert_berr err = {0};
    cubert_status st = cb_hip_fail(NULL, &err, e, CUBERT_ERR_BACKEND, "%s", "");
    cb_hip_push_failure(dev, 0, st, err.sticky,
                        "waiting for a stream of %s (work up to %" PRIu64 ") failed%s", dev->label,
                        target, err.message);
  }
  if (atomic_load(&dev->lost)) marks_settle_all(s);
  else if (e == hipSuccess && target > s->done) s->done = target;
  pthread_mutex_unlock(&s->lock);
  return atomic_load(&dev->lost);
}

cubert_status cb_hip_sync(void *device, void *stream, cubert_berr *err) {
  cb_hip_device *dev = device;
  cubert_status st = cb_hip_enter(dev, err);
  if (st && !atomic_load(&dev->lost)) return st;
  if (stream) {
    sync_one(dev, stream);
  } else {
    pthread_mutex_lock(&dev->streams_lock);
    for (cb_hip_stream *s = dev->streams; s; s = s->next) sync_one(dev, s);
    pthread_mutex_unlock(&dev->streams_lock);
  }
  return cb_hip_check_lost(dev, err);
}

/* ------------------------------------------------------------ staging */

/* The buffer of a new staging buffer: on the device's NUMA node when the
 * runtime places it (pinned and made portable to every device, as
 * hipHostMallocPortable does), else from hipHostMalloc. False: none. */
static bool staging_alloc(cb_hip_device *dev, cb_hip_staging *st) {
  cb_hip_backend *b = dev->backend;
  void *p = b->place_alloc ? b->place_alloc(b->place_ctx, dev->index, STAGING_BYTES) : NULL;
  if (p) {
    if (hipHostRegister(p, STAGING_BYTES, hipHostRegisterPortable) == hipSuccess) {
      st->buf = p;
      st->placed = true;
      return true;
    }
    /* not an error of anything enqueued: forget it, pin the usual way */
    (void)hipGetLastError();
    b->place_free(b->place_ctx, p, STAGING_BYTES);
  }
  st->placed = false;
  return hipHostMalloc((void **)&st->buf, STAGING_BYTES, hipHostMallocPortable) == hipSuccess;
}

/* Gives back the buffer of `st` (none is fine), as staging_alloc got it. */
static void staging_release(cb_hip_device *dev, cb_hip_staging *st) {
  if (!st->buf) return;
  if (st->placed) {
    cb_hip_backend *b = dev->backend;
    (void)hipHostUnregister(st->buf);
    b->place_free(b->place_ctx, st->buf, STAGING_BYTES);
  } else {
    (void)hipHostFree(st->buf);
  }
  st->buf = NULL;
}

static cb_hip_staging *staging_take(cb_hip_device *dev) {
  pthread_mutex_lock(&dev->staging_lock);
  cb_hip_staging *st = dev->staging_free;
  if (st) {
    dev->staging_free = st->next;
  } else if (dev->nstaging < STAGING_MAX) {
    dev->nstaging++; /* reserve the slot, allocate outside the lock */
  } else {
    pthread_mutex_unlock(&dev->staging_lock);
    return NULL;
  }
  pthread_mutex_unlock(&dev->staging_lock);
  if (st) return st;
  st = cb_calloc(1, sizeof *st);
  bool ok = st && staging_alloc(dev, st);
  if (ok && hipEventCreateWithFlags(&st->done[0], hipEventDisableTiming) != hipSuccess) ok = false;
  if (ok && hipEventCreateWithFlags(&st->done[1], hipEventDisableTiming) != hipSuccess) {
    hipEventDestroy(st->done[0]);
    ok = false;
  }
  if (!ok) {
    if (st) staging_release(dev, st);
    cb_free(st);
    pthread_mutex_lock(&dev->staging_lock);
    dev->nstaging--;
    pthread_mutex_unlock(&dev->staging_lock);
    return NULL; /* the caller copies directly */
  }
  return st;
}

static void staging_give(cb_hip_device *dev, cb_hip_staging *st) {
  pthread_mutex_lock(&dev->staging_lock);
  st->next = dev->staging_free;
  dev->staging_free = st;
  pthread_mutex_unlock(&dev->staging_lock);
}

/* Waits until half h may be reused. */
static hipError_t staging_wait(cb_hip_staging *st, int h) {
  if (!st->pending[h]) return hipSuccess;
  st->pending[h] = false;
  return hipEventSynchronize(st->done[h]);
}

void cb_hip_stream_teardown(cb_hip_device *dev) {
  pthread_mutex_lock(&dev->streams_lock);
  cb_hip_stream *s = dev->streams;
  dev->streams = NULL;
  pthread_mutex_unlock(&dev->streams_lock);
  while (s) {
    cb_hip_stream *next = s->next;
    stream_free(dev, s);
    s = next;
  }
  cb_hip_staging *st = dev->staging_free;
  dev->staging_free = NULL;
  while (st) {
    cb_hip_staging *next = st->next;
    (void)staging_wait(st, 0);
    (void)staging_wait(st, 1);
    hipEventDestroy(st->done[0]);
    hipEventDestroy(st->done[1]);
    staging_release(dev, st);
    cb_free(st);
    st = next;
  }
}

/* ------------------------------------------------------------ transfers */

/* Common prologue of work operations. */
cubert_status cb_hip_work_begin(cb_hip_device *dev, cb_hip_stream *s, const char *op,
                                cubert_berr *err) {
  cubert_status st;
  if (!s) return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s on %s: no stream", op, dev->label);
  if ((st = cb_hip_check_lost(dev, err)) || (st = cb_hip_enter(dev, err))) return st;
  return CUBERT_OK;
}

/* Whether `p` is pageable host memory HIP does not know (see the top: a
 * copy from it has consumed it when hipMemcpyAsync returns). False when in
 * doubt: the caller then stages. */
static bool host_pageable(const void *p) {
#if CB_HIP_NVIDIA
  /* HIP's wrapper turns every type but device and host into an error: ask
   * the CUDA runtime itself (CUDA >= 11 answers "unregistered"). */
  struct cudaPointerAttributes a;
  memset(&a, 0, sizeof a);
  cudaError_t c = cudaPointerGetAttributes(&a, p);
  if (c != cudaSuccess) {
    (void)cudaGetLastError(); /* not an error of anything enqueued */
    return false;
  }
  return a.type == cudaMemoryTypeUnregistered;
#else
  hipPointerAttribute_t a;
  memset(&a, 0, sizeof a);
  hipError_t e = hipPointerGetAttributes(&a, p);
  if (e == hipErrorInvalidValue) { /* ROCm 5: memory HIP has no object for */
    (void)hipGetLastError();
    return true;
  }
#if HIP_VERSION_MAJOR >= 6
  if (e == hipSuccess) return a.type == hipMemoryTypeUnregistered;
#endif
  if (e != hipSuccess) (void)hipGetLastError();
  return false;
#endif
}

/* The direct copy of a pageable source: the driver has consumed `src` when
 * it returns (see the top). On NVIDIA through the driver's own entry point
 * (hipMemcpyHtoDAsync is cuMemcpyHtoDAsync there), not hipMemcpyAsync,
 * which is the CUDA runtime's cudaMemcpyAsync: a layer of the runtime API in
 * front of the same driver copy, on every write. The CUDA documentation's
 * "API synchronization behavior" (the driver API's as the runtime API's)
 * says the same of both for a pageable source: the call returns once the
 * bytes are staged, so the write's contract and its failure account are
 * the same. The H200 runs of 2026-12-02 put the 4-byte write +0.28 us over
 * raw's hipMemcpyAsync with every one of cubert's own steps measured
 * (docs/bench.md, "Small host transfers, each call timed"); the entry point
 * is what was left to take away. On AMD hipMemcpyAsync as before. */
static hipError_t copy_pageable(uint64_t dst, const void *src, uint64_t size, hipStream_t stream,
                                const char **where) {
#if CB_HIP_NVIDIA
  *where = "hipMemcpyHtoDAsync";
  return hipMemcpyHtoDAsync((hipDeviceptr_t)(uintptr_t)dst, (void *)(uintptr_t)src, (size_t)size, stream);
#else
  (void)where;
  return hipMemcpyAsync(CB_HIP_PTR(dst), src, (size_t)size, hipMemcpyHostToDevice, stream);
#endif
}

/* The direct copy into pageable memory (the caller's, or the small read's
 * stack bounce): on NVIDIA the driver's entry (hipMemcpyDtoHAsync is
 * cuMemcpyDtoHAsync), as copy_pageable for writes, under the same rule for
 * pageable memory as the runtime's cudaMemcpyAsync (it returns once the copy
 * has completed: CUDA's "API synchronization behavior"), which cb_hip_read's
 * no-query path relies on; 0.12-0.29 us cheaper a call on the H200 from 4
 * bytes to 64 KiB (the steps table's "plain via hipMemcpyHtoDAsync /
 * DtoHAsync" row, 12:46Z run of 2026-12-02, docs/bench.md). On AMD
 * hipMemcpyAsync as before. */
static hipError_t copy_to_pageable(void *dst, uint64_t src, uint64_t size, hipStream_t stream, const char **where) {
#if CB_HIP_NVIDIA
  *where = "hipMemcpyDtoHAsync";
  return hipMemcpyDtoHAsync(dst, (hipDeviceptr_t)(uintptr_t)src, (size_t)size, stream);
#else
  (void)where;
  return hipMemcpyAsync(dst, CB_HIP_PTR(src), (size_t)size, hipMemcpyDeviceToHost, stream);
#endif
}

cubert_status cb_hip_write(void *device, void *stream, uint64_t work, uint64_t dst, const void *src,
                           uint64_t size, cubert_berr *err) {
  cb_hip_device *dev = device;
  cb_hip_stream *s = stream;
  cubert_status st = cb_hip_work_begin(dev, s, "write", err);
  if (st) return st;
  hipError_t e = hipSuccess;
  const char *where = "hipMemcpyAsync";
  /* A small source is copied onto this stack first, memory HIP cannot know:
   * a pageable copy like raw HIP's, without asking the driver what `src`
   * is (that query was a driver call per write, about a third of the
   * 4-byte write's overhead over raw on the H200: docs/bench.md). */
  unsigned char bounce[SMALL_WRITE];
  bool small = size && size <= SMALL_WRITE;
  if (small) {
    memcpy(bounce, src, (size_t)size);
    src = bounce;
  }
  bool pageable = small || (size && host_pageable(src));
  cb_hip_staging *sb = NULL;
  bool piped = pageable && size >= cb_hip_pipe_from(true) && cb_hip_pipe_write(dev, s, dst, src, size, &e, &where);
  if (piped) {
    /* hip_pipe.c: chunks through pinned memory, the memcpy over threads */
  } else if (pageable && size < STAGE_FROM) {
    e = copy_pageable(dst, src, size, s->stream, &where);
  } else if (size && !(sb = staging_take(dev))) {
    /* No staging buffer: copy directly, and for memory the DMA reads later
     * wait, so `src` is free on return. */
    e = hipMemcpyAsync(CB_HIP_PTR(dst), src, (size_t)size, hipMemcpyHostToDevice, s->stream);
    if (e == hipSuccess && !pageable) {
      where = "hipStreamSynchronize";
      e = hipStreamSynchronize(s->stream);
    }
  }
  for (uint64_t off = 0, k = 0; sb && off < size && e == hipSuccess; k++) {
    int h = (int)(k & 1);
    size_t n = size - off < STAGING_HALF ? (size_t)(size - off) : STAGING_HALF;
    char *half = sb->buf + (size_t)h * STAGING_HALF;
    if ((e = staging_wait(sb, h)) != hipSuccess) {
      where = "waiting for a staging buffer";
      break;
    }
    memcpy(half, (const char *)src + off, n);
    e = hipMemcpyAsync(CB_HIP_PTR(dst + off), half, n, hipMemcpyHostToDevice, s->stream);
    if (e == hipSuccess) {
      where = "hipEventRecord";
      e = hipEventRecord(sb->done[h], s->stream);
      sb->pending[h] = e == hipSuccess;
    }
    off += n;
  }
  if (sb) {
    /* after a failed enqueue a copy may still read the buffer: let it end */
    if (e != hipSuccess) (void)hipStreamSynchronize(s->stream);
    staging_give(dev, sb);
  }
  cb_hip_mark_work(s, work, "write");
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_COPY,
                       "write of %" PRIu64 " bytes to 0x%" PRIx64 " on %s (%s)", size, dst,
                       dev->label, where);
  return CUBERT_OK;
}

cubert_status cb_hip_read(void *device, void *stream, uint64_t work, void *dst, uint64_t src,
                          uint64_t size, cubert_berr *err) {
  cb_hip_device *dev = device;
  cb_hip_stream *s = stream;
  cubert_status st = cb_hip_work_begin(dev, s, "read", err);
  if (st) return st;
  pthread_mutex_lock(&s->lock);
  if (work > s->enqueued) s->enqueued = work;
  pthread_mutex_unlock(&s->lock);
  hipError_t e = hipSuccess;
  const char *where = "hipMemcpyAsync";
  /* A small read lands here first: pageable for certain, so no driver
   * query of what `dst` is and, on NVIDIA, no stream query (see the top).
   * Otherwise the driver is asked what `dst` is once: on NVIDIA for every
   * read (pageable: the copy has landed when hipMemcpyAsync returns), on
   * AMD where the pipeline would take it. */
  unsigned char bounce[SMALL_READ];
  bool small = size && size <= SMALL_READ;
  bool pageable = !small && size && (CB_HIP_NVIDIA || size >= cb_hip_pipe_from(false)) && host_pageable(dst);
  bool piped = pageable && size >= cb_hip_pipe_from(false) && cb_hip_pipe_read(dev, s, dst, src, size, &e, &where);
  if (size && !piped && (small || pageable))
    e = copy_to_pageable(small ? (void *)bounce : dst, src, size, s->stream, &where);
  else if (size && !piped)
    e = hipMemcpyAsync(dst, CB_HIP_PTR(src), (size_t)size, hipMemcpyDeviceToHost, s->stream);
  /* Into pageable memory the copy has completed when hipMemcpyAsync
   * returns (see the top), and with it everything before it on the stream.
   * On NVIDIA the driver's answer for `dst` (asked above) settles that:
   * it cost 0.13-0.70 us a read on the H200 where hipStreamQuery cost
   * 0.31-1.76 us (8 KiB to 128 KiB; docs/bench.md). Otherwise (AMD, pinned
   * or registered memory, an error) hipStreamQuery confirms an idle
   * stream, and the event below says when the bytes landed. An event
   * recorded after such a copy and waited for cost a second round trip,
   * about 2.8 us a read on the H200. */
  bool idle = false;
  if (e == hipSuccess && size && !piped)
    idle = (CB_HIP_NVIDIA && (small || pageable)) || hipStreamQuery(s->stream) == hipSuccess;
  /* An event of the read's own (not a mark: progress() may reap and reuse
   * a mark's event while this thread waits on it). */
  hipEvent_t ev = NULL;
  if (e == hipSuccess && !idle) {
    pthread_mutex_lock(&s->lock);
    if (event_take(s, &ev) != hipSuccess) ev = NULL;
    pthread_mutex_unlock(&s->lock);
  }
  if (idle) {
    /* done */
  } else if (e == hipSuccess && ev) {
    where = "hipEventRecord";
    if ((e = hipEventRecord(ev, s->stream)) == hipSuccess) {
      where = "waiting for the copy";
      e = hipEventSynchronize(ev);
    }
  } else if (e == hipSuccess) {
    where = "hipStreamSynchronize";
    e = hipStreamSynchronize(s->stream);
  }
  if (small && e == hipSuccess) memcpy(dst, bounce, (size_t)size);
  pthread_mutex_lock(&s->lock);
  if (ev) event_give(s, ev);
  /* Marks first: on a failed wait one of them may name the culprit. */
  reap_locked(s);
  if (e == hipSuccess) {
    /* Everything before the read on this stream has completed. */
    if (s->open_items && s->open_last <= work) s->open_items = 0;
    bool older_pending = (s->count && s->marks[s->head].first <= work) ||
                         (s->open_items && s->open_first <= work);
    if (!older_pending && work > s->done) s->done = work;
  }
  pthread_mutex_unlock(&s->lock);
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_COPY,
                       "read of %" PRIu64 " bytes from 0x%" PRIx64 " on %s (%s)", size, src,
                       dev->label, where);
  return CUBERT_OK;
}

cubert_status cb_hip_copy(void *device, void *stream, uint64_t work, uint64_t dst, uint64_t src,
                          uint64_t size, cubert_berr *err) {
  cb_hip_device *dev = device;
  cb_hip_stream *s = stream;
  cubert_status st = cb_hip_work_begin(dev, s, "copy", err);
  if (st) return st;
  hipError_t e = size ? hipMemcpyAsync(CB_HIP_PTR(dst), CB_HIP_PTR(src), (size_t)size,
                                       hipMemcpyDeviceToDevice, s->stream)
                      : hipSuccess;
  cb_hip_mark_work(s, work, "copy");
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_COPY,
                       "copy of %" PRIu64 " bytes 0x%" PRIx64 " -> 0x%" PRIx64 " on %s", size, src,
                       dst, dev->label);
  return CUBERT_OK;
}

/* Whether either device of the pair enabled access to the other. */
static bool peer_on(cb_hip_device *dev, cb_hip_device *from) {
  pthread_mutex_lock(&dev->peer_lock);
  bool on = dev->peer_enabled[from->index];
  pthread_mutex_unlock(&dev->peer_lock);
  if (on) return true;
  pthread_mutex_lock(&from->peer_lock);
  on = from->peer_enabled[dev->index];
  pthread_mutex_unlock(&from->peer_lock);
  return on;
}

cubert_status cb_hip_copy_peer(void *device, void *stream, uint64_t work, uint64_t dst,
                               void *src_device, uint64_t src, uint64_t size, cubert_berr *err) {
  cb_hip_device *dev = device;
  cb_hip_device *from = src_device;
  cb_hip_stream *s = stream;
  cubert_status st = cb_hip_work_begin(dev, s, "copy_peer", err);
  if (st) return st;
  if (!from) return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "copy_peer on %s: no source device", dev->label);
  if ((st = cb_hip_check_lost(from, err)) != CUBERT_OK) {
    cb_hip_mark_work(s, work, "copy-peer");
    return st;
  }
  hipError_t e = hipSuccess;
  const char *where = "hipMemcpyPeerAsync";
  if (size && from->index == dev->index)
    e = hipMemcpyAsync(CB_HIP_PTR(dst), CB_HIP_PTR(src), (size_t)size, hipMemcpyDeviceToDevice,
                       s->stream);
  else if (size && !peer_on(dev, from) && cb_hip_pipe_peer(dev, s, dst, from, src, size, &e, &where))
    (void)0; /* peer access off: staged through the pinned pipeline (hip_pipe.c) */
  else if (size)
    e = hipMemcpyPeerAsync(CB_HIP_PTR(dst), dev->index, CB_HIP_PTR(src), from->index, (size_t)size,
                           s->stream);
  cb_hip_mark_work(s, work, "copy-peer");
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_COPY, "peer copy of %" PRIu64 " bytes from %s to %s (%s)", size,
                       from->label, dev->label, where);
  return CUBERT_OK;
}

/* ------------------------------------------------------------ host buffers */

/* A host buffer's memory: on the device's NUMA node when the runtime places
 * it, pinned with hipHostRegister (portable: every device may copy from it);
 * else hipHostMalloc(portable). cookie: 1 placed, 2 hipHostMalloc. */
cubert_status cb_hip_host_alloc(void *device, cubert_backend_host_mem *mem, cubert_berr *err) {
  cb_hip_device *dev = device;
  cubert_status st = cb_hip_enter(dev, err);
  if (st) return st;
  cb_hip_backend *b = dev->backend;
  void *p = b->place_alloc ? b->place_alloc(b->place_ctx, dev->index, (size_t)mem->size) : NULL;
  if (p) {
    if (hipHostRegister(p, (size_t)mem->size, hipHostRegisterPortable) == hipSuccess) {
      *mem = (cubert_backend_host_mem){p, mem->size, (void *)(uintptr_t)1, false};
      return CUBERT_OK;
    }
    (void)hipGetLastError(); /* not an error of anything enqueued: pin the usual way */
    b->place_free(b->place_ctx, p, (size_t)mem->size);
  }
  hipError_t e = hipHostMalloc(&p, (size_t)mem->size, hipHostMallocPortable);
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_OUT_OF_MEMORY, "hipHostMalloc of %" PRIu64 " bytes for %s",
                       mem->size, dev->label);
  *mem = (cubert_backend_host_mem){p, mem->size, (void *)(uintptr_t)2, false};
  return CUBERT_OK;
}

/* cookie: 1 pinned here (unpinned at free), NULL already pinned by the
 * program (left as it is). */
cubert_status cb_hip_host_register(void *device, cubert_backend_host_mem *mem, cubert_berr *err) {
  cb_hip_device *dev = device;
  cubert_status st = cb_hip_enter(dev, err);
  if (st) return st;
  hipError_t e = hipHostRegister(mem->ptr, (size_t)mem->size, hipHostRegisterPortable);
  mem->registered = true;
  if (e == hipErrorHostMemoryAlreadyRegistered) {
    (void)hipGetLastError();
    mem->cookie = NULL;
    return CUBERT_OK;
  }
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_INVALID_ARGUMENT, "hipHostRegister of %" PRIu64 " bytes at %p for %s",
                       mem->size, mem->ptr, dev->label);
  mem->cookie = (void *)(uintptr_t)1;
  return CUBERT_OK;
}

void cb_hip_host_free(void *device, cubert_backend_host_mem *mem) {
  cb_hip_device *dev = device;
  if (!mem->ptr || !mem->cookie) return;
  (void)cb_hip_enter(dev, NULL);
  if (mem->registered) {
    (void)hipHostUnregister(mem->ptr);
  } else if ((uintptr_t)mem->cookie == 1) {
    (void)hipHostUnregister(mem->ptr);
    dev->backend->place_free(dev->backend->place_ctx, mem->ptr, (size_t)mem->size);
  } else {
    (void)hipHostFree(mem->ptr);
  }
}

/* One DMA between a host buffer and the device, queued like a copy. */
static cubert_status host_transfer(cb_hip_device *dev, cb_hip_stream *s, uint64_t work, void *dst, const void *src,
                                   uint64_t size, hipMemcpyKind kind, const char *op, cubert_berr *err) {
  cubert_status st = cb_hip_work_begin(dev, s, op, err);
  if (st) return st;
  hipError_t e = size ? hipMemcpyAsync(dst, src, (size_t)size, kind, s->stream) : hipSuccess;
  cb_hip_mark_work(s, work, op);
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_COPY, "%s of %" PRIu64 " bytes on %s", op, size, dev->label);
  return CUBERT_OK;
}

cubert_status cb_hip_write_host(void *device, void *stream, uint64_t work, uint64_t dst, const void *src,
                                uint64_t size, cubert_berr *err) {
  return host_transfer(device, stream, work, CB_HIP_PTR(dst), src, size, hipMemcpyHostToDevice,
                       "write-host", err);
}

cubert_status cb_hip_read_host(void *device, void *stream, uint64_t work, void *dst, uint64_t src,
                               uint64_t size, cubert_berr *err) {
  return host_transfer(device, stream, work, dst, CB_HIP_PTR(src), size, hipMemcpyDeviceToHost,
                       "read-host", err);
}
