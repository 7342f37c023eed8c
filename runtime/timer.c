/* runtime/timer.c: timers, marks of a client's stream measured by the
 * device. A timer keeps its device record alive (device.c), so releasing it
 * after its runtime is gone stays safe. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/internal.h"

cubert_status cubert_timer_record(cubert_client *c, cubert_timer **out) {
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_timer_record: client is NULL");
  if (!out) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_timer_record: timer is NULL");
  cb_device *dev = c->dev;
  cubert_timer *tm = cb_malloc(sizeof *tm);
  if (!tm) return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "cubert_timer_record: out of host memory");
  cubert_status st = cb_device_enter(dev);
  if (st) {
    cb_free(tm);
    return st;
  }
  cb_stream *s;
  cubert_berr err = {0};
  void *t = NULL;
  if ((st = cb_client_stream(c, &s)) == CUBERT_OK) {
    st = dev->ops->timer_record(dev->bdev, s->bs, &t, &err);
    if (st) st = cb_fail_backend(st, &err, "recording a timer", dev->info.name);
  }
  if (st == CUBERT_OK) {
    *tm = (cubert_timer){dev, t, dev->timers, &dev->timers};
    if (dev->timers) dev->timers->prev = &tm->next;
    dev->timers = tm;
    cb_device_ref(dev);
  }
  cb_device_leave(dev);
  if (st) {
    cb_free(tm);
    return st;
  }
  *out = tm;
  return CUBERT_OK;
}

cubert_status cubert_timer_elapsed(const cubert_timer *a, const cubert_timer *b, double *ms) {
  if (!a || !b || !ms)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_timer_elapsed: %s is NULL", !a ? "start" : !b ? "end" : "ms");
  if (!a->t || !b->t)
    return cb_fail(CUBERT_ERR_EXPIRED, "cubert_timer_elapsed: the %s timer's runtime was destroyed",
                   !a->t ? "start" : "end");
  if (a->dev != b->dev)
    return cb_fail(CUBERT_ERR_WRONG_DEVICE, "cubert_timer_elapsed: timers of device %d (%s) and device %d (%s)%s",
                   a->dev->index, a->dev->info.name, b->dev->index, b->dev->info.name,
                   a->dev->rt != b->dev->rt ? " of two runtimes" : "");
  cubert_berr err = {0};
  cubert_status st = a->dev->ops->timer_elapsed(a->dev->bdev, a->t, b->t, ms, &err);
  if (st) return cb_fail_backend(st, &err, "reading timers", a->dev->info.name);
  return CUBERT_OK;
}

void cubert_timer_release(cubert_timer *t) {
  if (!t) return;
  cb_device *dev = t->dev;
  pthread_mutex_lock(&dev->lock);
  if (t->t) { /* else its runtime already destroyed it and unlinked it */
    dev->ops->timer_destroy(dev->bdev, t->t);
    *t->prev = t->next;
    if (t->next) t->next->prev = t->prev;
  }
  pthread_mutex_unlock(&dev->lock);
  cb_free(t);
  cb_device_unref(dev);
}
