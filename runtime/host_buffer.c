/* runtime/host_buffer.c: host buffers (cubert_host_buffer), page-locked host
 * memory that writes and reads move through asynchronously, and their
 * ledger.
 *
 * A host buffer carries a cb_alloc record marked `host`, so its bytes go
 * through the same rules as device memory with no new path: a transfer is a
 * work record binding the buffer's range (read side or write side), so
 * settling at enqueue (taint.c), skipping on a tainted input and the
 * replay of failures found at a fence (replay.c) taint and repair the
 * buffer's bytes exactly as they do a handle's. The record's ledger lives in
 * its own cell (`shared`, with its own lock) because a buffer may be used by
 * every device of the runtime; stream order is not tracked for it (a sync
 * orders host memory, docs/failures.md). */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/internal.h"

struct cubert_host_buffer {
  cb_alloc alloc; /* first: the ledger's record (alloc.host) */
  cb_shared cell;
  cubert_backend_host_mem mem;
  _Atomic uint64_t used; /* bit i % 64: device i queued transfers with it */
};

static _Atomic uint64_t next_host_buffer_id = 1;

#define NULL_ARG(eb, fn, what) cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, what)

static cubert_status make(cb_errb *eb, const char *fn, cubert_client *c, void *data, uint64_t size, bool reg,
                          cubert_host_buffer **out) {
  if (!c) return NULL_ARG(eb, fn, "client");
  if (!out) return NULL_ARG(eb, fn, "buffer");
  if (reg && !data) return NULL_ARG(eb, fn, "data");
  if (size == 0) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "%s: size is 0", fn);
  if (size > SIZE_MAX)
    return cb_errb_set(eb, CUBERT_ERR_OUT_OF_RANGE, "%s: %llu bytes do not fit the address space", fn,
                       (unsigned long long)size);
  cubert_host_buffer *b = cb_calloc(1, sizeof *b);
  if (!b) return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  cb_device *dev = c->dev;
  cubert_status st = cb_device_enter(dev);
  if (st) {
    cb_free(b);
    return st;
  }
  cubert_berr err = {0};
  b->mem.ptr = data;
  b->mem.size = size;
  st = reg ? dev->ops->host_register(dev->bdev, &b->mem, &err) : dev->ops->host_alloc(dev->bdev, &b->mem, &err);
  cb_device_leave(dev);
  if (st) {
    cb_free(b);
    return cb_errb_backend(eb, st, &err, reg ? "registering a host buffer" : "allocating a host buffer",
                           dev->info.name);
  }
  pthread_mutex_init(&b->cell.lock, NULL);
  b->cell.alloc = &b->alloc;
  b->alloc.dev = dev;
  cb_device_ref(dev); /* dropped when the buffer is freed */
  b->alloc.id = atomic_fetch_add(&next_host_buffer_id, 1);
  b->alloc.size = size;
  b->alloc.host = true;
  b->cell.memory_id = b->alloc.id;
  atomic_init(&b->alloc.refs, CB_HANDLE_ONE);
  atomic_init(&b->alloc.shared, &b->cell);
  *out = b;
  return CUBERT_OK;
}

cubert_status cubert_host_buffer_alloc(cubert_client *c, uint64_t size, cubert_host_buffer **out) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  return cb_errb_return(&eb, make(&eb, "cubert_host_buffer_alloc", c, NULL, size, false, out));
}

cubert_status cubert_host_buffer_register(cubert_client *c, void *data, uint64_t size, cubert_host_buffer **out) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  return cb_errb_return(&eb, make(&eb, "cubert_host_buffer_register", c, data, size, true, out));
}

void cb_host_buffer_free(cb_alloc *a) {
  cubert_host_buffer *b = (cubert_host_buffer *)a;
  cb_device *dev = a->dev;
  cb_ledger_free(&b->cell.ledger);
  pthread_mutex_destroy(&b->cell.lock);
  /* released after its runtime (a misuse cubert.h warns of): the backend is
   * gone and the memory with it, or unreachable; free the record only */
  if (!atomic_load(&dev->gone)) dev->ops->host_free(dev->bdev, &b->mem);
  cb_device_unref(dev);
  cb_free(b);
}

void cubert_host_buffer_release(cubert_host_buffer *b) {
  if (!b) return;
  cb_device *home = b->alloc.dev;
  uint64_t used = atomic_load(&b->used);
  if (used && !atomic_load(&home->gone)) {
    /* the records of its transfers hold it: wait for them and drop them */
    cubert_runtime *rt = home->rt;
    for (int i = 0; i < rt->ndevices; i++) {
      if (!(used & (UINT64_C(1) << (i % 64)))) continue;
      cb_device *d = rt->devices[i];
      pthread_mutex_lock(&d->lock);
      cb_device_reap_all(d);
      pthread_mutex_unlock(&d->lock);
    }
  }
  cb_alloc_unref(&b->alloc, CB_HANDLE_ONE, NULL);
}

void *cubert_host_buffer_data(const cubert_host_buffer *b) { return b ? b->mem.ptr : NULL; }

uint64_t cubert_host_buffer_size(const cubert_host_buffer *b) { return b ? b->mem.size : 0; }

/* `b` and bytes offset.. of `size` of it; the error names `fn`. */
static cubert_status check_range(cb_errb *eb, const char *fn, const cubert_host_buffer *b, uint64_t offset,
                                 uint64_t size) {
  if (!b) return NULL_ARG(eb, fn, "buffer");
  if (offset > b->mem.size || size > b->mem.size - offset)
    return cb_errb_set(eb, CUBERT_ERR_OUT_OF_RANGE, "%s: bytes %llu..+%llu lie outside host buffer %llu of %llu bytes",
                       fn, (unsigned long long)offset, (unsigned long long)size, (unsigned long long)b->alloc.id,
                       (unsigned long long)b->mem.size);
  return CUBERT_OK;
}

cubert_status cubert_host_buffer_check(const cubert_host_buffer *b, uint64_t offset, uint64_t size) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = check_range(&eb, "cubert_host_buffer_check", b, offset, size);
  if (st) return cb_errb_return(&eb, st);
  cb_errb report;
  cb_alloc *a = (cb_alloc *)&b->alloc; /* the ledger is asked, not changed */
  return cb_taint_refusal("check", a, offset, offset + size, &report) ? cb_errb_finish(&report) : CUBERT_OK;
}

cubert_status cubert_host_buffer_mark_written(cubert_host_buffer *b, uint64_t offset, uint64_t size) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = check_range(&eb, "cubert_host_buffer_mark_written", b, offset, size);
  if (st) return cb_errb_return(&eb, st);
  cb_ledger *l = cb_alloc_ledger_lock(&b->alloc);
  if (l->n) cb_ledger_clear(l, offset, offset + size);
  cb_alloc_ledger_unlock(&b->alloc);
  return CUBERT_OK;
}

/* Checks common to both directions; refuses before anything is queued. */
static cubert_status transfer_args(cb_errb *eb, const char *fn, cubert_client *c, const cubert_handle *h,
                                   const cubert_host_buffer *b, uint64_t offset, uint64_t size) {
  if (!c) return NULL_ARG(eb, fn, "client");
  if (!h) return NULL_ARG(eb, fn, "handle");
  if (!b) return NULL_ARG(eb, fn, "host buffer");
  if (size != h->end - h->start)
    return cb_errb_set(eb, CUBERT_ERR_OUT_OF_RANGE, "%s: %llu bytes given for a view of %llu bytes", fn,
                       (unsigned long long)size, (unsigned long long)(h->end - h->start));
  cubert_status st = check_range(eb, fn, b, offset, size);
  if (st) return st;
  if ((st = cb_check_runtime(eb, fn, "the host buffer", c->dev, &b->alloc))) return st;
  return cb_check_own(eb, fn, c, h, "the handle");
}

/* One transfer between the handle's view and bytes offset.. of `b`, queued
 * as work that reads one side and writes the other. */
static cubert_status transfer(cb_errb *eb, cubert_client *c, const cubert_handle *h, cubert_host_buffer *b,
                              uint64_t offset, bool to_host) {
  const char *op = to_host ? "read-host" : "write-host";
  cb_device *dev = c->dev;
  cubert_status st = cb_device_enter(dev);
  cubert_failure *lost = st ? atomic_load(&dev->lost) : NULL;
  if (lost && to_host && h->end > h->start) {
    /* a lost device delivers nothing: the host bytes this read should have
     * written carry the loss, as when the loss happens in the read itself */
    cb_ledger *l = cb_alloc_ledger_lock(&b->alloc);
    cb_ledger_set(l, offset, offset + (h->end - h->start), lost);
    cb_alloc_ledger_unlock(&b->alloc);
  }
  if (st) return st;
  cb_stream *s;
  cb_work *w = NULL;
  if ((st = cb_client_stream(c, &s)) || !(w = cb_work_begin(dev, s, op, NULL, 2))) {
    cb_device_leave(dev);
    return st ? st : cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  uint64_t len = h->end - h->start;
  cb_alloc *hb = &b->alloc;
  if (to_host) {
    cb_work_bind(w, 0, h->alloc, h->start, h->end, CUBERT_ACCESS_READ, "source");
    cb_work_bind(w, 1, hb, offset, offset + len, CUBERT_ACCESS_WRITE, "destination");
  } else {
    cb_work_bind(w, 0, hb, offset, offset + len, CUBERT_ACCESS_READ, "source");
    cb_work_bind(w, 1, h->alloc, h->start, h->end, CUBERT_ACCESS_WRITE, "destination");
  }
  atomic_fetch_or(&b->used, UINT64_C(1) << (dev->index % 64)); /* release waits for this device */
  cb_errb report;
  bool tainted = to_host ? cb_taint_refusal("read", h->alloc, h->start, h->end, &report)
                         : cb_taint_refusal("write source", hb, offset, offset + len, &report);
  if (tainted) {
    st = cb_skip_copy(dev, w, op, &report);
    cb_device_leave(dev);
    return st;
  }
  if (cb_order_access(dev, s, h->alloc, !to_host, &report)) {
    st = cb_work_fail_ordering(dev, w, s, &report, op, "");
    cb_device_leave(dev);
    return st;
  }
  cubert_berr err = {0};
  uint64_t addr = h->alloc->block.address + h->start;
  char *host = (char *)b->mem.ptr + offset;
  if (len)
    st = to_host ? dev->ops->read_host(dev->bdev, s->bs, w->work, host, addr, len, &err)
                 : dev->ops->write_host(dev->bdev, s->bs, w->work, addr, host, len, &err);
  if (st) {
    st = cb_write_failed(dev, w, s, st, &err, op);
  } else {
    cb_taint_settle(dev, w, NULL);
    cb_work_mark_uses(dev, w);
  }
  cb_device_leave(dev);
  return st;
}

cubert_status cubert_handle_write_host(cubert_client *c, cubert_handle *h, const cubert_host_buffer *src,
                                       uint64_t offset, uint64_t size) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = transfer_args(&eb, "cubert_handle_write_host", c, h, src, offset, size);
  /* the source's ledger is only read here; the record binds it read-only */
  if (!st) st = transfer(&eb, c, h, (cubert_host_buffer *)src, offset, false);
  return cb_errb_return(&eb, st);
}

cubert_status cubert_handle_read_host(cubert_client *c, const cubert_handle *h, cubert_host_buffer *dst,
                                      uint64_t offset, uint64_t size) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = transfer_args(&eb, "cubert_handle_read_host", c, h, dst, offset, size);
  if (!st) st = transfer(&eb, c, h, dst, offset, true);
  return cb_errb_return(&eb, st);
}
