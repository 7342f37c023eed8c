/* backends/host/host_stream.c: the host backend's streams (one work queue
 * and worker thread each, refcounted), events and stream waits, sync and
 * progress, the failures host functions report, and timers. */
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

/* ------------------------------------------------------------ helpers */

static void stream_unref(host_stream *s) {
  if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
    cb_work_queue_destroy(&s->queue);
    cb_free(s);
  }
}

static void stream_ref(host_stream *s) { atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed); }

cubert_status cb_host_check_stream(host_device *dev, void *stream, const char *op, cubert_berr *err) {
  if (!stream)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: %s: no stream", dev->name, op);
  if (((host_stream *)stream)->device != dev)
    return cubert_berr_set(err, CUBERT_ERR_WRONG_DEVICE, "%s: %s: the stream belongs to %s",
                           dev->name, op, ((host_stream *)stream)->device->name);
  return CUBERT_OK;
}

cubert_status cb_host_enqueue(host_stream *s, cb_work *w, const char *op, cubert_berr *err) {
  if (cb_work_queue_push(&s->queue, w) == 0) {
    if (w->release)
      w->release(w);
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: %s: the stream was destroyed",
                           s->device->name, op);
  }
  return CUBERT_OK;
}

void cb_host_record_failure(host_device *dev, uint64_t work, cubert_status status,
                            const char *message) {
  pthread_mutex_lock(&dev->fail_lock);
  if (dev->nfailures == dev->cap_failures) {
    size_t cap;
    cubert_async_failure *grown =
        cb_array_grow(dev->failures, dev->cap_failures, dev->nfailures + 1, sizeof *grown, &cap);
    if (!grown) {
      dev->lost_failures++; /* drain_failures reports them, unattributed */
      pthread_mutex_unlock(&dev->fail_lock);
      return;
    }
    dev->failures = grown;
    dev->cap_failures = cap;
  }
  cubert_async_failure *f = &dev->failures[dev->nfailures++];
  f->work = work;
  f->status = status;
  f->sticky = false;
  size_t len = strnlen(message, sizeof f->message - 1); /* a long message is cut */
  memcpy(f->message, message, len);
  f->message[len] = '\0';
  pthread_mutex_unlock(&dev->fail_lock);
}

/* ------------------------------------------------------------ streams */

cubert_status cb_host_stream_create(void *device, void **stream, cubert_berr *err) {
  host_device *d = device;
  host_stream *s = cb_calloc(1, sizeof *s);
  if (!s)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no host memory for a stream", d->name);
  s->device = d;
  atomic_init(&s->refs, 1);

  pthread_mutex_lock(&d->lock);
  if (d->nstreams == d->cap_streams) {
    size_t cap;
    host_stream **grown = cb_array_grow(d->streams, d->cap_streams, d->nstreams + 1, sizeof *grown, &cap);
    if (!grown) {
      pthread_mutex_unlock(&d->lock);
      cb_free(s);
      return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no host memory for a stream", d->name);
    }
    d->streams = grown;
    d->cap_streams = cap;
  }
  int rc = cb_work_queue_start_with(&s->queue, d->backend->place_thread, d->backend->place_ctx, d->index);
  if (rc) {
    pthread_mutex_unlock(&d->lock);
    cb_free(s);
    return cubert_berr_set(err, rc == EAGAIN ? CUBERT_ERR_OUT_OF_MEMORY : CUBERT_ERR_BACKEND,
                           "%s: cannot start a stream's worker thread: %s", d->name, strerror(rc));
  }
  d->streams[d->nstreams++] = s;
  pthread_mutex_unlock(&d->lock);
  *stream = s;
  return CUBERT_OK;
}

void cb_host_stream_destroy_impl(host_device *d, host_stream *s) {
  pthread_mutex_lock(&d->lock);
  bool found = false;
  for (size_t i = 0; i < d->nstreams; i++) {
    if (d->streams[i] == s) {
      d->streams[i] = d->streams[--d->nstreams];
      found = true;
      break;
    }
  }
  pthread_mutex_unlock(&d->lock);
  if (!found)
    return;
  cb_work_queue_stop(&s->queue); /* runs what is pending, joins the worker */
  stream_unref(s);
}

void cb_host_stream_destroy(void *device, void *stream) {
  if (stream)
    cb_host_stream_destroy_impl(device, stream);
}

cubert_status cb_host_event_record(void *device, void *stream, void **event, cubert_berr *err) {
  host_device *d = device;
  cubert_status st = cb_host_check_stream(d, stream, "event record", err);
  if (st != CUBERT_OK)
    return st;
  host_event *e = cb_malloc(sizeof *e);
  if (!e)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no host memory for an event", d->name);
  e->stream = stream;
  stream_ref(e->stream);
  e->position = cb_work_queue_end(&e->stream->queue);
  *event = e;
  return CUBERT_OK;
}

typedef struct wait_item {
  cb_work work;
  host_stream *target;      /* one reference */
  uint64_t position;
} wait_item;

static void wait_run(cb_work *w) {
  wait_item *it = (wait_item *)w;
  cb_work_queue_wait(&it->target->queue, it->position);
}

static void wait_release(cb_work *w) {
  wait_item *it = (wait_item *)w;
  stream_unref(it->target);
  cb_free(it);
}

cubert_status cb_host_stream_wait(void *device, void *stream, void *event, cubert_berr *err) {
  host_device *d = device;
  cubert_status st = cb_host_check_stream(d, stream, "stream wait", err);
  if (st != CUBERT_OK)
    return st;
  host_event *e = event;
  if (!e)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: stream wait: no event", d->name);
  /* Same stream: already in order. Reached: nothing to wait for. Events of
   * other host devices work too, as HIP events do across devices. */
  if (e->stream == stream || cb_work_queue_completed(&e->stream->queue) >= e->position)
    return CUBERT_OK;
  wait_item *it = cb_malloc(sizeof *it);
  if (!it)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no host memory for a stream wait", d->name);
  it->work.run = wait_run;
  it->work.release = wait_release;
  it->work.tag = 0;
  it->target = e->stream;
  stream_ref(it->target);
  it->position = e->position;
  return cb_host_enqueue(stream, &it->work, "stream wait", err);
}

void cb_host_event_destroy(void *device, void *event) {
  host_event *e = event;
  if (!e)
    return;
  stream_unref(e->stream);
  cb_free(e);
}

/* ------------------------------------------------------------ waiting */

cubert_status cb_host_sync(void *device, void *stream, cubert_berr *err) {
  host_device *d = device;
  if (stream) {
    cubert_status st = cb_host_check_stream(d, stream, "sync", err);
    if (st != CUBERT_OK)
      return st;
    host_stream *s = stream;
    cb_work_queue_wait(&s->queue, cb_work_queue_end(&s->queue));
    return CUBERT_OK;
  }
  /* Every stream: snapshot them and their ends, then wait without the
   * device lock, so enqueuers and stream creation are not held up. */
  pthread_mutex_lock(&d->lock);
  size_t n = d->nstreams;
  host_stream **snap = cb_malloc((n + 1) * sizeof *snap);
  uint64_t *ends = cb_malloc((n + 1) * sizeof *ends);
  if (!snap || !ends) {
    pthread_mutex_unlock(&d->lock);
    cb_free(snap);
    cb_free(ends);
    /* No memory for the snapshot: wait for the streams one at a time
     * instead, from the last down (a removed stream's place takes the last
     * one, already waited for), so that the wait still happens. A sync
     * that returned without waiting let the device's teardown free memory
     * that queued work then wrote. */
    for (size_t i = n; i > 0;) {
      pthread_mutex_lock(&d->lock);
      if (i > d->nstreams) i = d->nstreams;
      if (i == 0) {
        pthread_mutex_unlock(&d->lock);
        break;
      }
      host_stream *s = d->streams[--i];
      stream_ref(s);
      uint64_t end = cb_work_queue_end(&s->queue);
      pthread_mutex_unlock(&d->lock);
      cb_work_queue_wait(&s->queue, end);
      stream_unref(s);
    }
    return CUBERT_OK;
  }
  for (size_t i = 0; i < n; i++) {
    snap[i] = d->streams[i];
    stream_ref(snap[i]);
    ends[i] = cb_work_queue_end(&snap[i]->queue);
  }
  pthread_mutex_unlock(&d->lock);
  for (size_t i = 0; i < n; i++) {
    cb_work_queue_wait(&snap[i]->queue, ends[i]);
    stream_unref(snap[i]);
  }
  cb_free(snap);
  cb_free(ends);
  return CUBERT_OK;
}

uint64_t cb_host_progress(void *device, void *stream) {
  (void)device;
  if (!stream)
    return 0;
  return cb_work_queue_last_tag(&((host_stream *)stream)->queue);
}

size_t cb_host_drain_failures(void *device, cubert_async_failure *out, size_t capacity) {
  host_device *d = device;
  if (!out || capacity == 0)
    return 0;
  pthread_mutex_lock(&d->fail_lock);
  size_t n = d->nfailures < capacity ? d->nfailures : capacity;
  if (n) {
    memcpy(out, d->failures, n * sizeof *out);
    memmove(d->failures, d->failures + n, (d->nfailures - n) * sizeof *out);
    d->nfailures -= n;
  }
  if (n < capacity && d->lost_failures) {
    cubert_async_failure *f = &out[n++];
    f->work = 0;
    f->status = CUBERT_ERR_OUT_OF_MEMORY;
    f->sticky = false;
    snprintf(f->message, sizeof f->message,
             "%s: %" PRIu64 " failed work item(s) could not be recorded: no host memory", d->name,
             d->lost_failures);
    d->lost_failures = 0;
  }
  pthread_mutex_unlock(&d->fail_lock);
  return n;
}

/* ------------------------------------------------------------ timers */

/* A timer is its own work item: the worker stamps the clock when the stream
 * reaches it. The caller and the pending item each hold a reference, so the
 * timer may be destroyed before the stream got there. */
typedef struct host_timer {
  cb_work work;
  atomic_uint refs;
  host_stream *stream;      /* one reference */
  uint64_t position;
  struct timespec at;       /* written by the worker; read after waiting */
} host_timer;

static void timer_unref(host_timer *t) {
  if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1) {
    stream_unref(t->stream);
    cb_free(t);
  }
}

static void timer_run(cb_work *w) { clock_gettime(CLOCK_MONOTONIC, &((host_timer *)w)->at); }

static void timer_release(cb_work *w) { timer_unref((host_timer *)w); }

cubert_status cb_host_timer_record(void *device, void *stream, void **timer,
                                   cubert_berr *err) {
  host_device *d = device;
  cubert_status st = cb_host_check_stream(d, stream, "timer record", err);
  if (st != CUBERT_OK)
    return st;
  host_timer *t = cb_calloc(1, sizeof *t);
  if (!t)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no host memory for a timer", d->name);
  t->work.run = timer_run;
  t->work.release = timer_release;
  t->work.tag = 0;
  atomic_init(&t->refs, 2);
  t->stream = stream;
  stream_ref(t->stream);
  t->position = cb_work_queue_push(&t->stream->queue, &t->work);
  if (t->position == 0) {
    stream_unref(t->stream);
    cb_free(t);
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: timer record: the stream was destroyed", d->name);
  }
  *timer = t;
  return CUBERT_OK;
}

cubert_status cb_host_timer_elapsed(void *device, void *start, void *end, double *ms,
                                    cubert_berr *err) {
  host_device *d = device;
  host_timer *a = start, *b = end;
  if (!a || !b || !ms)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: timer elapsed: %s is NULL",
                           d->name, !a ? "start" : !b ? "end" : "ms");
  /* Both stamps exist once their positions completed; the queue's lock
   * orders the worker's write before these reads. */
  cb_work_queue_wait(&a->stream->queue, a->position);
  cb_work_queue_wait(&b->stream->queue, b->position);
  *ms = (double)(b->at.tv_sec - a->at.tv_sec) * 1e3 + (double)(b->at.tv_nsec - a->at.tv_nsec) / 1e6;
  return CUBERT_OK;
}

void cb_host_timer_destroy(void *device, void *timer) {
  if (timer)
    timer_unref(timer);
}
