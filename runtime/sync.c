/* runtime/sync.c: waiting for a stream or a whole device, then reporting
 * the failures found there (once per stream; docs/failures.md rule 8). */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/internal.h"

/* Waits, then settles what the wait found (taint, replay, device lost).
 * `report`: the failures found on the stream(s) are reported, once (a
 * sync); else they stay for the next sync (cb_client_wait). */
static cubert_status sync_impl(cb_errb *eb, cubert_client *c, uint32_t stream_id, bool all, bool report) {
  cb_device *dev = c->dev;
  cubert_status st = cb_device_enter(dev);
  if (st) return st;
  cb_stream *s = NULL;
  if (!all) {
    if (stream_id) {
      if (stream_id > dev->nstreams) {
        cb_device_leave(dev);
        return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "stream %u does not exist on device %d",
                       stream_id, dev->index);
      }
      s = dev->streams[stream_id - 1];
    } else if ((st = cb_client_stream(c, &s)) != CUBERT_OK) {
      cb_device_leave(dev);
      return st;
    }
  }
  void *bs = s ? s->bs : NULL;
  /* what the sync waits for: everything enqueued on the stream(s) so far */
  uint32_t nfloor = dev->nstreams;
  uint64_t *floor = cb_calloc(nfloor ? nfloor : 1, sizeof *floor);
  for (uint32_t i = 0; floor && i < nfloor; i++)
    if (!s || dev->streams[i] == s) floor[i] = dev->streams[i]->last_work;
  cb_device_leave(dev);
  cubert_berr err = {0};
  st = dev->ops->sync(dev->bdev, bs, &err);
  pthread_mutex_lock(&dev->lock);
  if (st != CUBERT_OK) {
    cubert_failure *f = cb_device_failure(dev, st, &err, s, "sync", "", 0);
    cubert_failure_release(f);
  }
  cb_device_reap_floor(dev, st == CUBERT_OK ? floor : NULL, nfloor);
  cb_free(floor);
  if (st != CUBERT_OK && !atomic_load(&dev->lost)) {
    /* the wait itself failed: say so; failures found stay for the next sync */
    pthread_mutex_unlock(&dev->lock);
    return cb_errb_backend(eb, st, &err, "synchronising", dev->info.name);
  }
  if (!report) {
    pthread_mutex_unlock(&dev->lock);
    return CUBERT_OK;
  }
  cb_errb b;
  cb_errb_init(&b, CUBERT_OK);
  size_t nfail = 0;
  for (uint32_t i = 0; i < dev->nstreams; i++) {
    cb_stream *t = dev->streams[i];
    if (s && t != s) continue;
    /* a failure host memory was too short to keep: the static one says so */
    uint32_t n = t->nunreported + (t->unreported_lost ? 1 : 0);
    for (uint32_t j = 0; j < n; j++) {
      const cubert_failure *f = j < t->nunreported ? t->unreported[j] : cb_failure_unrecorded();
      if (nfail == 0) {
        b.status = f->status;
        cb_str_printf(&b.msg, "sync of device %d (%s) found failed work:", dev->index, dev->info.name);
      }
      cb_str_printf(&b.msg, "%s ", nfail ? ";" : "");
      cb_failure_describe(f, &b.msg);
      cb_errb_add(&b, f, 0, 0);
      cubert_failure_release(f);
      nfail++;
    }
    t->nunreported = 0;
    t->unreported_lost = false;
  }
  cubert_failure *lost = atomic_load(&dev->lost);
  pthread_mutex_unlock(&dev->lock);
  if (lost) {
    cb_errb_discard(&b);
    return cb_device_lost_error(dev);
  }
  if (nfail) {
    *eb = b;
    return b.status;
  }
  cb_errb_discard(&b);
  return CUBERT_OK;
}

cubert_status cubert_sync(cubert_client *c) {
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_sync: client is NULL");
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  return cb_errb_return(&eb, sync_impl(&eb, c, atomic_load(&c->pinned_stream), false, true));
}

cubert_status cubert_sync_stream(cubert_client *c, cubert_stream stream) {
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_sync_stream: client is NULL");
  if (stream > UINT32_MAX) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "stream %llu does not exist", (unsigned long long)stream);
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  return cb_errb_return(&eb, sync_impl(&eb, c, (uint32_t)stream, false, true));
}

cubert_status cubert_sync_device(cubert_client *c) {
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_sync_device: client is NULL");
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  return cb_errb_return(&eb, sync_impl(&eb, c, 0, true, true));
}

cubert_status cb_client_wait(cb_errb *eb, cubert_client *c) {
  return sync_impl(eb, c, atomic_load(&c->pinned_stream), false, false);
}
