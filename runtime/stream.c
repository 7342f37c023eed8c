/* runtime/stream.c: a device's streams (one per client thread slot unless
 * pinned, more on request) and the order between them: work that uses
 * memory last written, or (for a write) read, on another stream waits on an
 * event of that stream, recorded once per producer position. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/array.h"
#include "runtime/internal.h"

static cb_stream *stream_new(cb_device *dev, cubert_berr *err, cubert_status *st) {
  void *bs = NULL;
  *st = dev->ops->stream_create(dev->bdev, &bs, err);
  if (*st != CUBERT_OK) return NULL;
  cb_stream *s = cb_calloc(1, sizeof *s);
  if (!s) {
    dev->ops->stream_destroy(dev->bdev, bs);
    *st = cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "no host memory for the stream's record");
    return NULL;
  }
  if (dev->nstreams == dev->capstreams) {
    size_t cap = 0;
    cb_stream **v = cb_array_grow(dev->streams, dev->capstreams, (size_t)dev->nstreams + 1, sizeof *v, &cap);
    if (v) dev->streams = v;
    if (!v || cap > UINT32_MAX) {
      dev->ops->stream_destroy(dev->bdev, bs);
      cb_free(s);
      *st = cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "no host memory for the device's table of streams");
      return NULL;
    }
    dev->capstreams = (uint32_t)cap;
  }
  s->bs = bs;
  dev->streams[dev->nstreams++] = s;
  s->id = dev->nstreams;
  return s;
}

_Thread_local int cb_thread_slot CB_TLS_IE = -1;
static atomic_int next_thread_slot;

cubert_status cb_client_stream(cubert_client *c, cb_stream **out) {
  if ((*out = cb_client_stream_made(c))) return CUBERT_OK;
  /* not pinned (that stream exists), and no stream for this thread's slot
   * yet, or no slot */
  cb_device *dev = c->dev;
  if (cb_thread_slot < 0) cb_thread_slot = atomic_fetch_add(&next_thread_slot, 1) % CB_THREAD_STREAMS;
  uint32_t id = dev->thread_streams[cb_thread_slot];
  if (!id) {
    cubert_berr err = {0};
    cubert_status st;
    cb_stream *s = stream_new(dev, &err, &st);
    if (!s) return cb_fail_backend(st, &err, "creating a stream", dev->info.name);
    dev->thread_streams[cb_thread_slot] = s->id;
    id = s->id;
  }
  *out = dev->streams[id - 1];
  return CUBERT_OK;
}

cubert_status cubert_stream_create(cubert_client *c, cubert_stream *stream) {
  if (!c || !stream) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_stream_create: %s is NULL", c ? "stream" : "client");
  cubert_status st = cb_device_enter(c->dev);
  if (st) return st;
  cubert_berr err = {0};
  cb_stream *s = stream_new(c->dev, &err, &st);
  cb_device_leave(c->dev);
  if (!s) return cb_fail_backend(st, &err, "creating a stream", c->dev->info.name);
  *stream = s->id;
  return CUBERT_OK;
}

cubert_status cubert_client_use_stream(cubert_client *c, cubert_stream stream) {
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_client_use_stream: client is NULL");
  pthread_mutex_lock(&c->dev->lock);
  uint32_t n = c->dev->nstreams;
  pthread_mutex_unlock(&c->dev->lock);
  if (stream > n)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "stream %llu does not exist on device %d (%u streams)",
                   (unsigned long long)stream, c->dev->index, n);
  atomic_store(&c->pinned_stream, (uint32_t)stream);
  return CUBERT_OK;
}

cubert_stream cubert_client_stream(const cubert_client *c) {
  if (!c) return 0;
  uint32_t pinned = atomic_load(&c->pinned_stream);
  if (pinned) return pinned;
  pthread_mutex_lock(&c->dev->lock);
  cb_stream *s = NULL;
  cubert_status st = cb_client_stream((cubert_client *)c, &s);
  pthread_mutex_unlock(&c->dev->lock);
  return st == CUBERT_OK ? s->id : 0;
}

/* Makes `s` wait for stream `pid`'s work up to `w`. */
static cubert_status wait_for(cb_device *dev, cb_stream *s, uint32_t pid, uint64_t w, cb_errb *e) {
  cb_stream *p = dev->streams[pid - 1];
  if (s->nwaited < dev->nstreams) {
    uint64_t *v = cb_realloc(s->waited, dev->nstreams * sizeof *v);
    if (!v) return cb_errb_set(e, CUBERT_ERR_OUT_OF_MEMORY, "ordering streams: out of host memory");
    memset(v + s->nwaited, 0, (dev->nstreams - s->nwaited) * sizeof *v);
    s->waited = v;
    s->nwaited = dev->nstreams;
  }
  if (s->waited[p->id - 1] >= w) return CUBERT_OK;
  cubert_berr err = {0};
  cubert_status st;
  if (!p->event || p->event_work < w) {
    /* record once per producer position, not per launch */
    void *ev = NULL;
    st = dev->ops->event_record(dev->bdev, p->bs, &ev, &err);
    if (st) return cb_errb_backend(e, st, &err, "recording an event", dev->info.name);
    if (p->event) dev->ops->event_destroy(dev->bdev, p->event);
    p->event = ev;
    p->event_work = p->last_work;
  }
  st = dev->ops->stream_wait(dev->bdev, s->bs, p->event, &err);
  if (st) return cb_errb_backend(e, st, &err, "waiting for an event", dev->info.name);
  s->waited[p->id - 1] = p->event_work;
  return CUBERT_OK;
}

cubert_status cb_order_access(cb_device *dev, cb_stream *s, cb_alloc *a, bool write, cb_errb *err) {
  if (a->dev != dev) return CUBERT_OK;
  cubert_status st = CUBERT_OK;
  if (a->last_writer && a->last_writer != s->id)
    st = wait_for(dev, s, a->last_writer, a->last_write, err);
  if (write) {
    for (uint32_t i = 0; !st && i < a->nreaders; i++)
      if (a->readers[i].stream != s->id)
        st = wait_for(dev, s, a->readers[i].stream, a->readers[i].work, err);
    if (!st) a->nreaders = 0; /* ordered after all of them */
  }
  return st;
}
