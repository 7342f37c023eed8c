/* runtime/strided.c: strided views (include/cubert/strided.h): reads into
 * and writes from packed host memory, copies between views on one device
 * and across peers. Each binds its footprint (runtime/pattern.h) to the
 * work record, so taint, repair and replay are exact to the footprint
 * (runtime/ledger.c keeps a failed one as one strided claim). The flow of
 * each call is that of its contiguous twin in memory.c. */
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

#define NULL_ARG(fn, what) cb_fail(CUBERT_ERR_INVALID_ARGUMENT, fn ": " what " is NULL")

/* The footprint of `v` over `h`, checked; the error names `fn`, `what` and
 * the dimension at fault. */
static cubert_status footprint(cb_errb *eb, const char *fn, const char *what, const cubert_handle *h,
                               const cubert_view *v, cb_pattern *p) {
  if (!v) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "%s: the view of %s is NULL", fn, what);
  char why[256];
  bool empty = false;
  cubert_status st = cb_pattern_from_view(v, h->start, h->end, p, &empty, why, sizeof why);
  if (st)
    return cb_errb_set(eb, st, "%s: view of %s (memory %llu, bytes %llu..%llu): %s", fn, what,
                       (unsigned long long)h->alloc->id, (unsigned long long)h->start, (unsigned long long)h->end,
                       why);
  if (empty) {
    memset(p, 0, sizeof *p);
    p->run = 1;
  }
  return CUBERT_OK;
}

cubert_status cubert_view_check(const cubert_handle *h, const cubert_view *v) {
  if (!h) return NULL_ARG("cubert_view_check", "handle");
  cb_pattern p;
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  return cb_errb_return(&eb, footprint(&eb, "cubert_view_check", "the handle", h, v, &p));
}

uint64_t cubert_view_bytes(const cubert_view *v) {
  if (!v || v->ndims == 0 || v->ndims > CUBERT_VIEW_MAX_DIMS) return 0;
  uint64_t n = v->elem_size;
  for (uint32_t d = 0; d < v->ndims; d++)
    if (__builtin_mul_overflow(n, v->shape[d], &n)) return 0;
  return n;
}

/* The transfer between two views of one shape (NULL: packed host memory),
 * dimensions in the views' order: element (i0, ...) goes to element
 * (i0, ...). Dimensions of one element go, and neighbours that nest on both
 * sides merge, so a layout contiguous on both sides is one run. */
static void layout_of(const cubert_view *src, const cubert_view *dst, cubert_backend_strided *l) {
  const cubert_view *v = src ? src : dst;
  uint64_t elem = v->elem_size;
  uint64_t sp[CUBERT_VIEW_MAX_DIMS], dp[CUBERT_VIEW_MAX_DIMS], packed = elem;
  for (uint32_t d = v->ndims; d-- > 0;) {
    sp[d] = src ? src->strides[d] * elem : packed;
    dp[d] = dst ? dst->strides[d] * elem : packed;
    packed *= v->shape[d];
  }
  memset(l, 0, sizeof *l);
  l->run = elem;
  for (uint32_t d = 0; d < v->ndims; d++) {
    if (v->shape[d] == 1) continue;
    uint32_t k = l->ndims;
    if (k && l->src_pitch[k - 1] == sp[d] * v->shape[d] && l->dst_pitch[k - 1] == dp[d] * v->shape[d]) {
      l->count[k - 1] *= v->shape[d];
      l->src_pitch[k - 1] = sp[d];
      l->dst_pitch[k - 1] = dp[d];
    } else {
      l->count[k] = v->shape[d];
      l->src_pitch[k] = sp[d];
      l->dst_pitch[k] = dp[d];
      l->ndims++;
    }
  }
  while (l->ndims && l->src_pitch[l->ndims - 1] == l->run && l->dst_pitch[l->ndims - 1] == l->run)
    l->run *= l->count[--l->ndims];
  l->nruns = 1;
  for (uint32_t d = 0; d < l->ndims; d++) l->nruns *= l->count[d];
  if (cubert_view_bytes(v) == 0) l->nruns = 0;
}

/* Byte offset of element (0, ...) of `v` in its allocation. */
static uint64_t first_byte(const cubert_handle *h, const cubert_view *v) {
  return h->start + v->offset * v->elem_size;
}

static cubert_status same_shape(cb_errb *eb, const char *fn, const cubert_view *a, const cubert_view *b) {
  if (a->elem_size != b->elem_size)
    return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "%s: elements of %u bytes in the source, %u in the destination",
                       fn, a->elem_size, b->elem_size);
  if (a->ndims != b->ndims)
    return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "%s: %u dimensions in the source, %u in the destination", fn,
                       a->ndims, b->ndims);
  for (uint32_t d = 0; d < a->ndims; d++)
    if (a->shape[d] != b->shape[d])
      return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT,
                         "%s: dimension %u: %llu elements in the source, %llu in the destination", fn, d,
                         (unsigned long long)a->shape[d], (unsigned long long)b->shape[d]);
  return CUBERT_OK;
}

static cubert_status size_matches(cb_errb *eb, const char *fn, const cubert_view *v, uint64_t size) {
  uint64_t want = cubert_view_bytes(v);
  if (size != want)
    return cb_errb_set(eb, CUBERT_ERR_OUT_OF_RANGE, "%s: %llu bytes given for a view of %llu packed bytes", fn,
                       (unsigned long long)size, (unsigned long long)want);
  return CUBERT_OK;
}

/* The checks of a read or write between `h` and packed host memory `buf`
 * of `size` bytes; the footprint in *p. */
static cubert_status host_args(cb_errb *eb, const char *fn, cubert_client *c, const cubert_handle *h,
                               const cubert_view *v, const void *buf, uint64_t size, cb_pattern *p) {
  if (!c) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "%s: client is NULL", fn);
  if (!h) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "%s: handle is NULL", fn);
  if (!buf && size) /* the caller's pointer (dst of a read, src of a write), not a cubert_host_buffer */
    return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, strstr(fn, "read") ? "dst" : "src");
  cubert_status st;
  if ((st = cb_check_own(eb, fn, c, h, "the handle")) || (st = footprint(eb, fn, "the handle", h, v, p)) ||
      (st = size_matches(eb, fn, v, size)))
    return st;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ checks and reads */

cubert_status cubert_handle_check_strided(cubert_client *c, const cubert_handle *h, const cubert_view *v) {
#define fn "cubert_handle_check_strided"
  if (!c) return NULL_ARG(fn, "client");
  if (!h) return NULL_ARG(fn, "handle");
  cb_pattern p;
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = footprint(&eb, fn, "the handle", h, v, &p);
  cb_alloc *a = h->alloc;
  bool own = a->dev == c->dev;
  if (!st && !own) {
    st = cb_check_runtime(&eb, fn, "the handle", c->dev, a);
    if (!st && !atomic_load(&a->shared)) st = cb_check_own(&eb, fn, c, h, "the handle");
  }
  if (st) return cb_errb_return(&eb, st);
  if (!own && atomic_load(&a->dev->lost)) return cb_device_lost_error(a->dev);
  if (own && (st = cb_device_enter(c->dev))) return st;
  cb_errb report; /* a peer asks through the cell: no device lock */
  bool tainted = cb_taint_refusal_pattern("check", a, &p, &report);
  if (own) cb_device_leave(c->dev);
  return tainted ? cb_errb_finish(&report) : CUBERT_OK;
#undef fn
}

cubert_status cubert_handle_read_strided(cubert_client *c, const cubert_handle *h, const cubert_view *v, void *dst,
                                         uint64_t size) {
#define fn "cubert_handle_read_strided"
  cb_pattern p;
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = host_args(&eb, fn, c, h, v, dst, size, &p);
  if (st) return cb_errb_return(&eb, st);
  cb_device *dev = c->dev;
  cb_alloc *a = h->alloc;
  if ((st = cb_device_enter(dev))) return st;
  cb_stream *s;
  cb_errb report;
  if ((st = cb_client_stream(c, &s))) {
    cb_device_leave(dev);
    return st;
  }
  if (cb_taint_refusal_pattern("strided read", a, &p, &report) || cb_order_access(dev, s, a, false, &report)) {
    cb_device_leave(dev);
    return cb_errb_finish(&report);
  }
  cb_alloc_ref(a, CB_BINDING_ONE);
  uint64_t work = ++dev->next_work;
  s->last_work = work;
  void *bs = s->bs;
  cb_device_leave(dev);
  /* the wait happens without the device lock */
  cubert_backend_strided l;
  layout_of(v, NULL, &l);
  cubert_berr err = {0};
  if (l.nruns)
    st = dev->ops->copy_strided(dev->bdev, bs, work, CUBERT_BACKEND_DEVICE_TO_HOST, (uint64_t)(uintptr_t)dst, NULL,
                                a->block.address + first_byte(h, v), &l, &err);
  return cb_read_finish(dev, s, work, st, &err, a, 0, 0, &p, "strided read");
#undef fn
}

/* ------------------------------------------------------------ writes and copies */

/* Enqueues work `w` (its bindings made) on `dev`: the transfer, then the
 * settling of its write set. */
static cubert_status transfer(cb_device *dev, cb_stream *s, cb_work *w, cubert_backend_direction dir, uint64_t dst,
                              void *src_device, uint64_t src, const cubert_backend_strided *l, const char *op) {
  cubert_berr err = {0};
  cubert_status st = CUBERT_OK;
  if (l->nruns) st = dev->ops->copy_strided(dev->bdev, s->bs, w->work, dir, dst, src_device, src, l, &err);
  if (st) return cb_write_failed(dev, w, s, st, &err, op);
  cb_taint_settle(dev, w, NULL);
  cb_work_mark_uses(dev, w);
  return CUBERT_OK;
}

static cb_work *begin(cb_device *dev, cb_stream *s, const char *op, uint32_t n) {
  return cb_work_begin(dev, s, op, NULL, n);
}

cubert_status cubert_handle_write_strided(cubert_client *c, cubert_handle *h, const cubert_view *v, const void *src,
                                          uint64_t size) {
#define fn "cubert_handle_write_strided"
  cb_pattern p;
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = host_args(&eb, fn, c, h, v, src, size, &p);
  if (st) return cb_errb_return(&eb, st);
  cb_device *dev = c->dev;
  if ((st = cb_device_enter(dev))) return st;
  cb_stream *s;
  cb_work *w = NULL;
  if ((st = cb_client_stream(c, &s)) || !(w = begin(dev, s, "strided write", 1))) {
    cb_device_leave(dev);
    return st ? st : cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  if (!cb_work_bind_pattern(w, 0, h->alloc, &p, CUBERT_ACCESS_WRITE, "destination"))
    cb_work_bind(w, 0, h->alloc, h->start, h->end, CUBERT_ACCESS_WRITE, "destination"); /* out of memory: the view */
  cb_errb order;
  if ((st = cb_order_access(dev, s, h->alloc, true, &order))) {
    st = cb_work_fail_ordering(dev, w, s, &order, "strided write", ""); /* not enqueued: rule 1 */
    cb_device_leave(dev);
    return st;
  }
  cubert_backend_strided l;
  layout_of(NULL, v, &l);
  st = transfer(dev, s, w, CUBERT_BACKEND_HOST_TO_DEVICE, h->alloc->block.address + first_byte(h, v), NULL,
                (uint64_t)(uintptr_t)src, &l, "strided write");
  cb_device_leave(dev);
  return st;
#undef fn
}

/* The checks both copies make before taking a device: each handle memory
 * of its client's device, each view valid on its handle, one shape. */
static cubert_status copy_args(cb_errb *eb, const char *fn, cubert_client *sc, const cubert_handle *src,
                               const cubert_view *sv, cb_pattern *sp, cubert_client *dc, const cubert_handle *dst,
                               const cubert_view *dv, cb_pattern *dp) {
  cubert_status st;
  if ((st = cb_check_own(eb, fn, sc, src, "the source")) || (st = cb_check_own(eb, fn, dc, dst, "the destination")) ||
      (st = footprint(eb, fn, "the source", src, sv, sp)) ||
      (st = footprint(eb, fn, "the destination", dst, dv, dp)) || (st = same_shape(eb, fn, sv, dv)))
    return st;
  return CUBERT_OK;
}

cubert_status cubert_handle_copy_strided(cubert_client *c, const cubert_handle *src, const cubert_view *sv,
                                         cubert_handle *dst, const cubert_view *dv) {
#define fn "cubert_handle_copy_strided"
  if (!c) return NULL_ARG(fn, "client");
  if (!src) return NULL_ARG(fn, "src");
  if (!dst) return NULL_ARG(fn, "dst");
  cb_pattern sp, dp;
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = copy_args(&eb, fn, c, src, sv, &sp, c, dst, dv, &dp);
  if (st) return cb_errb_return(&eb, st);
  if (src->alloc == dst->alloc && cb_pattern_meet(&sp, &dp, NULL, NULL))
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT,
                   "%s: the source and destination footprints share bytes of memory %llu (a strided copy "
                   "needs disjoint footprints; interleaved ones are fine)",
                   fn, (unsigned long long)src->alloc->id);
  cb_device *dev = c->dev;
  if ((st = cb_device_enter(dev))) return st;
  cb_stream *s;
  cb_work *w = NULL;
  if ((st = cb_client_stream(c, &s)) || !(w = begin(dev, s, "strided copy", 2))) {
    cb_device_leave(dev);
    return st ? st : cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  cb_work_bind_copy(w, src, &sp, dst, &dp);
  cb_errb report;
  if (cb_taint_refusal_pattern("strided copy source", src->alloc, &sp, &report)) {
    st = cb_skip_copy(dev, w, "strided copy", &report);
    cb_device_leave(dev);
    return st;
  }
  if (cb_order_access(dev, s, src->alloc, false, &report) || cb_order_access(dev, s, dst->alloc, true, &report)) {
    st = cb_work_fail_ordering(dev, w, s, &report, "strided copy", "");
    cb_device_leave(dev);
    return st;
  }
  cubert_backend_strided l;
  layout_of(sv, dv, &l);
  st = transfer(dev, s, w, CUBERT_BACKEND_DEVICE_TO_DEVICE, dst->alloc->block.address + first_byte(dst, dv), NULL,
                src->alloc->block.address + first_byte(src, sv), &l, "strided copy");
  cb_device_leave(dev);
  return st;
#undef fn
}

cubert_status cubert_handle_copy_strided_peer(cubert_client *sc, const cubert_handle *src, const cubert_view *sv,
                                              cubert_client *dc, cubert_handle *dst, const cubert_view *dv) {
#define fn "cubert_handle_copy_strided_peer"
  if (!sc) return NULL_ARG(fn, "src_client");
  if (!src) return NULL_ARG(fn, "src");
  if (!dc) return NULL_ARG(fn, "dst_client");
  if (!dst) return NULL_ARG(fn, "dst");
  if (sc->rt != dc->rt)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT,
                   "%s: the source client (device %d) and the destination client (device %d) belong to two "
                   "runtimes; a copy cannot cross runtimes",
                   fn, sc->dev->index, dc->dev->index);
  cb_pattern sp, dp;
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = copy_args(&eb, fn, sc, src, sv, &sp, dc, dst, dv, &dp);
  if (st) return cb_errb_return(&eb, st);
  cb_device *sd = sc->dev, *dd = dc->dev;
  if (sd == dd) { /* one device: a strided copy, its refusals named as this call's (checked above and here) */
    if (src->alloc == dst->alloc && cb_pattern_meet(&sp, &dp, NULL, NULL))
      return cb_fail(CUBERT_ERR_INVALID_ARGUMENT,
                     "%s: the source and destination footprints share bytes of memory %llu (a strided copy "
                     "needs disjoint footprints; interleaved ones are fine)",
                     fn, (unsigned long long)src->alloc->id);
    return cubert_handle_copy_strided(dc, src, sv, dst, dv);
  }
  if (sd->backend != dd->backend)
    return cb_fail(CUBERT_ERR_UNSUPPORTED, "%s: %s and %s belong to different backends", fn, sd->info.name,
                   dd->info.name);
  cb_stream *s;
  cb_work *w;
  if ((st = cb_peer_copy_begin(&eb, dc, src, &sp, dst, &dp, "strided copy-peer", &s, &w)))
    return cb_errb_return(&eb, st);
  cubert_backend_strided l;
  layout_of(sv, dv, &l);
  st = transfer(dd, s, w, CUBERT_BACKEND_PEER_TO_DEVICE, dst->alloc->block.address + first_byte(dst, dv), sd->bdev,
                src->alloc->block.address + first_byte(src, sv), &l, "strided copy-peer");
  cb_device_leave(dd);
  return st;
#undef fn
}
