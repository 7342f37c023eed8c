/* runtime/memory.c: handles, bindings, weak bindings, peer sharing, and the
 * host-facing memory operations (create, read, write, fill, copy), each
 * checked against the ledger. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/array.h"
#include "runtime/internal.h"
#include "runtime/limits.h"

static _Atomic uint64_t next_memory_id = 1;

void cb_alloc_new_tenant(cb_device *dev, cb_alloc *a) {
  a->id = atomic_fetch_add_explicit(&next_memory_id, 1, memory_order_relaxed);
  /* a generation no tenant had (the device's count), so a weak binding to
   * an earlier tenant of the slot never upgrades to this one. Relaxed: the
   * caller publishes it after (tcache.c: the release store of the count;
   * cb_alloc_adopt: the slot table, under the device lock). */
  atomic_store_explicit(&a->gen, atomic_fetch_add(&dev->next_gen, 1) + 1, memory_order_relaxed);
}

#define NULL_ARG(fn, what) cb_fail(CUBERT_ERR_INVALID_ARGUMENT, fn ": " what " is NULL")

/* ------------------------------------------------------------ allocation */

static cubert_status alloc_new(cb_errb *eb, cb_device *dev, uint64_t size, uint32_t flags, cb_alloc **out) {
  cubert_berr err = {0};
  cb_block block;
  cubert_status st = cb_block_alloc(dev, size, flags, &block, &err);
  if (st == CUBERT_ERR_OUT_OF_MEMORY && cb_tcache_drain(dev)) { /* blocks parked in threads' caches */
    memset(&err, 0, sizeof err);
    st = cb_block_alloc(dev, size, flags, &block, &err);
  }
  if (st) {
    if (err.sticky) {
      cubert_failure *f = cb_device_failure(dev, st, &err, NULL, "alloc", "", 0);
      cubert_failure_release(f);
    }
    if (st == CUBERT_ERR_OUT_OF_MEMORY) /* the pool's message names the size */
      return cb_errb_set(eb, st, "device %d (%s): %s", dev->index, dev->info.name, err.message);
    return cb_errb_backend(eb, st, &err, "allocating memory", dev->info.name);
  }
  return cb_alloc_adopt(eb, dev, size, &block, out);
}

cubert_status cb_alloc_adopt(cb_errb *eb, cb_device *dev, uint64_t size, const cb_block *given, cb_alloc **out) {
  cb_block block = *given;
  cb_alloc *a = cb_alloc_record(dev);
  if (!a) {
    cb_block_free(dev, &block);
    return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  if (!dev->nfree && dev->nslots == dev->capslots) {
    size_t cap = 0, fcap = 0;
    cb_alloc **v = cb_array_grow(dev->slots, dev->capslots, (size_t)dev->nslots + 1, sizeof *v, &cap);
    if (v) dev->slots = v;
    uint32_t *f = v ? cb_array_grow(dev->free_slots, dev->capslots, cap, sizeof *f, &fcap) : NULL;
    if (f) dev->free_slots = f;
    if (!v || !f || cap > UINT32_MAX) {
      cb_free(a);
      cb_device_unref(dev); /* the record's (cb_alloc_record) */
      cb_block_free(dev, &block);
      return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    dev->capslots = (uint32_t)cap;
  }
  a->slot = dev->nfree ? dev->free_slots[--dev->nfree] : dev->nslots++;
  cb_alloc_new_tenant(dev, a); /* before the count: see internal.h */
  atomic_init(&a->refs, CB_HANDLE_ONE);
  atomic_init(&a->shared, NULL);
  a->block = block;
  a->size = size;
  dev->slots[a->slot] = a;
  *out = a;
  return CUBERT_OK;
}

static cubert_handle *handle_new(cb_alloc *a, uint64_t start, uint64_t end, cubert_stream stream) {
  cubert_handle *h = cb_malloc(sizeof *h);
  if (!h) return NULL;
  *h = (cubert_handle){a, start, end, stream};
  return h;
}

cubert_status cb_handle_adopt(cb_errb *eb, cubert_client *c, uint64_t size, const cb_block *block, uint64_t start,
                              uint64_t end, cb_alloc **alloc, cubert_handle **out) {
  cb_device *dev = c->dev;
  cubert_status st = cb_device_enter(dev);
  if (st) return st;
  cb_stream *s = NULL;
  cb_alloc *a = NULL;
  if ((st = cb_client_stream(c, &s))) cb_block_free(dev, block);
  if (st || (st = cb_alloc_adopt(eb, dev, size, block, &a))) { /* the block is gone either way */
    cb_device_leave(dev);
    return st;
  }
  cb_device_leave(dev);
  cubert_handle *h = handle_new(a, start, end, s->id);
  if (!h) {
    cb_alloc_unref(a, CB_HANDLE_ONE, NULL);
    return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  *alloc = a;
  *out = h;
  return CUBERT_OK;
}

static cubert_status empty_with(cb_errb *eb, const char *fn, cubert_client *c, uint64_t size, uint32_t flags,
                                cubert_handle **out) {
  if (!c) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "%s: client is NULL", fn);
  if (!out) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "%s: handle is NULL", fn);
  if (size == 0) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "%s: size is 0", fn);
  if (flags & ~CB_MEMORY_FLAGS)
    return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT,
                       "%s: unknown flags 0x%x (known: CUBERT_MEMORY_FINE_GRAINED, CUBERT_MEMORY_SHAREABLE)", fn,
                       (unsigned)(flags & ~CB_MEMORY_FLAGS));
  cb_device *dev = c->dev;
  cubert_status st = cb_device_enter(dev);
  if (st) return st;
  cb_stream *s = NULL;
  cb_alloc *a = NULL;
  if ((st = cb_client_stream(c, &s)) || (st = alloc_new(eb, dev, size, flags, &a))) {
    cb_device_leave(dev);
    return st;
  }
  if (!flags) cb_tcache_attach(dev, atomic_load(&c->pinned_stream) ? 0 : s->id);
  cb_device_leave(dev);
  cubert_handle *h = handle_new(a, 0, size, s->id);
  if (!h) {
    cb_alloc_unref(a, CB_HANDLE_ONE, NULL);
    return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  *out = h;
  return CUBERT_OK;
}

/* The fast path (tcache.c): a block of this size that this thread released,
 * taken back with no lock and no host allocation; false: the slow path. */
static bool empty_fast(cubert_client *c, uint64_t size, uint32_t flags, cubert_handle **out) {
  cubert_handle *h = c && out && size && !flags ? cb_tcache_reuse(c, size) : NULL;
  if (h) *out = h;
  return h != NULL;
}

cubert_status cubert_handle_empty(cubert_client *c, uint64_t size, cubert_handle **out) {
  if (empty_fast(c, size, 0, out)) return CUBERT_OK;
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  return cb_errb_return(&eb, empty_with(&eb, "cubert_handle_empty", c, size, 0, out));
}

cubert_status cubert_handle_empty_with(cubert_client *c, uint64_t size, uint32_t flags, cubert_handle **out) {
  if (empty_fast(c, size, flags, out)) return CUBERT_OK;
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  return cb_errb_return(&eb, empty_with(&eb, "cubert_handle_empty_with", c, size, flags, out));
}

cubert_status cubert_handle_create(cubert_client *c, const void *data, uint64_t size,
                                   cubert_handle **out) {
  if (!out) return NULL_ARG("cubert_handle_create", "handle");
  if (!data && size) return NULL_ARG("cubert_handle_create", "data");
  cubert_handle *h = NULL;
  cubert_status st = CUBERT_OK;
  if (!empty_fast(c, size, 0, &h)) { /* refusals (size 0, a NULL client...) named as this call's */
    cb_errb eb;
    cb_errb_init(&eb, CUBERT_OK);
    if ((st = cb_errb_return(&eb, empty_with(&eb, "cubert_handle_create", c, size, 0, &h)))) return st;
  }
  if ((st = cubert_handle_write(c, h, data, size))) {
    cubert_handle_release(h);
    return st;
  }
  *out = h;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ views */

cubert_handle *cubert_handle_clone(const cubert_handle *h) {
  if (!h) return NULL;
  cubert_handle *n = handle_new(h->alloc, h->start, h->end, h->stream);
  if (n) cb_alloc_ref(h->alloc, CB_HANDLE_ONE);
  return n;
}

void cubert_handle_release(cubert_handle *h) {
  if (!h) return;
  cb_alloc *a = h->alloc;
  if (atomic_fetch_sub(&a->refs, CB_HANDLE_ONE) != CB_HANDLE_ONE) {
    cb_free(h);
    return;
  }
  if (cb_tcache_park(h)) return; /* the fast path: kept whole for this thread's next allocation */
  cb_free(h);
  cb_alloc_last_ref(a, NULL);
}

cubert_status cubert_handle_slice(const cubert_handle *h, uint64_t offset_start, uint64_t offset_end,
                                  cubert_handle **out) {
  if (!h) return NULL_ARG("cubert_handle_slice", "handle");
  if (!out) return NULL_ARG("cubert_handle_slice", "slice");
  uint64_t len = h->end - h->start;
  if (offset_start > len || offset_end > len - offset_start)
    return cb_fail(CUBERT_ERR_OUT_OF_RANGE,
                   "slice of %llu bytes from the start and %llu from the end of a %llu-byte view "
                   "(memory %llu, bytes %llu..%llu)",
                   (unsigned long long)offset_start, (unsigned long long)offset_end,
                   (unsigned long long)len, (unsigned long long)h->alloc->id,
                   (unsigned long long)h->start, (unsigned long long)h->end);
  cubert_handle *n = handle_new(h->alloc, h->start + offset_start, h->end - offset_end, h->stream);
  if (!n) return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  cb_alloc_ref(h->alloc, CB_HANDLE_ONE);
  *out = n;
  return CUBERT_OK;
}

bool cubert_handle_can_mut(const cubert_handle *h) {
  return h && (atomic_load(&h->alloc->refs) >> 32) == 1;
}

cubert_overlap cubert_handle_overlap(const cubert_handle *a, const cubert_handle *b) {
  /* an empty view shares no byte with anything */
  if (!a || !b || a->alloc != b->alloc || a->start == a->end || b->start == b->end ||
      a->end <= b->start || b->end <= a->start)
    return CUBERT_OVERLAP_DISJOINT;
  if (a->start == b->start && a->end == b->end) return CUBERT_OVERLAP_SAME;
  return CUBERT_OVERLAP_PARTIAL;
}

uint64_t cubert_handle_size(const cubert_handle *h) { return h ? h->alloc->size : 0; }
uint64_t cubert_handle_size_in_use(const cubert_handle *h) { return h ? h->end - h->start : 0; }
uint64_t cubert_handle_offset_start(const cubert_handle *h) { return h ? h->start : 0; }
uint64_t cubert_handle_memory_id(const cubert_handle *h) { return h ? h->alloc->id : 0; }
int cubert_handle_device(const cubert_handle *h) { return h ? h->alloc->dev->index : -1; }
cubert_stream cubert_handle_stream(const cubert_handle *h) { return h ? h->stream : 0; }

/* ------------------------------------------------------------ bindings */

cubert_status cubert_handle_bind(const cubert_handle *h, cubert_binding **out) {
  if (!h) return NULL_ARG("cubert_handle_bind", "handle");
  if (!out) return NULL_ARG("cubert_handle_bind", "binding");
  cubert_binding *b = cb_malloc(sizeof *b);
  if (!b) return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  cb_alloc_ref(h->alloc, CB_BINDING_ONE);
  *b = (cubert_binding){h->alloc, h->start, h->end, h->stream};
  *out = b;
  return CUBERT_OK;
}

void cubert_binding_release(cubert_binding *b) {
  if (!b) return;
  cb_alloc_unref(b->alloc, CB_BINDING_ONE, NULL);
  cb_free(b);
}

cubert_claim_key cubert_binding_claim_key(const cubert_binding *b) {
  cubert_claim_key k = {0, 0, 0};
  if (b) k = (cubert_claim_key){b->alloc->id, b->start, b->end};
  return k;
}

static cubert_status weak_new(cb_errb *eb, cb_alloc *a, uint64_t start, uint64_t end, cubert_stream stream,
                              cubert_weak **out) {
  cubert_weak *w = cb_malloc(sizeof *w);
  if (!w) return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  *w = (cubert_weak){a->dev, a->slot, a->gen, a->id, start, end, stream};
  cb_device_ref(a->dev); /* the device record outlives its runtime for it */
  *out = w;
  return CUBERT_OK;
}

cubert_status cubert_binding_downgrade(const cubert_binding *b, cubert_weak **out) {
  if (!b) return NULL_ARG("cubert_binding_downgrade", "binding");
  if (!out) return NULL_ARG("cubert_binding_downgrade", "weak");
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  return cb_errb_return(&eb, weak_new(&eb, b->alloc, b->start, b->end, b->stream, out));
}

cubert_status cubert_handle_downgrade(const cubert_handle *h, cubert_weak **out) {
  if (!h) return NULL_ARG("cubert_handle_downgrade", "handle");
  if (!out) return NULL_ARG("cubert_handle_downgrade", "weak");
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  return cb_errb_return(&eb, weak_new(&eb, h->alloc, h->start, h->end, h->stream, out));
}

/* A reference to `a` if it is alive and still generation `gen`; caller
 * holds a->dev->lock. A record parked in a thread's cache (tcache.c) has no
 * reference and may get a new tenant without the lock: the reference is
 * taken only from a non-zero count, and the generation checked after it
 * (a new tenant's is set before its count). */
static bool ref_if_tenant(cb_alloc *a, uint32_t gen, cb_device *dev) {
  uint64_t refs = atomic_load(&a->refs);
  do {
    if (refs == 0) return false;
  } while (!atomic_compare_exchange_weak(&a->refs, &refs, refs + CB_BINDING_ONE));
  if (atomic_load(&a->gen) == gen) return true;
  cb_alloc_unref(a, CB_BINDING_ONE, dev); /* a later tenant's */
  return false;
}

cubert_status cubert_weak_upgrade(const cubert_weak *w, cubert_binding **out) {
  if (!w) return NULL_ARG("cubert_weak_upgrade", "weak");
  if (!out) return NULL_ARG("cubert_weak_upgrade", "binding");
  cb_device *dev = w->dev;
  pthread_mutex_lock(&dev->lock);
  if (atomic_load(&dev->gone)) {
    pthread_mutex_unlock(&dev->lock);
    return cb_fail(CUBERT_ERR_EXPIRED,
                   "cubert_weak_upgrade: memory %llu of device %d (%s) went with its runtime, which "
                   "was destroyed",
                   (unsigned long long)w->memory_id, dev->index, dev->info.name);
  }
  cb_device_collect(dev);
  cb_alloc *a = w->slot < dev->nslots ? dev->slots[w->slot] : NULL;
  bool alive = a && ref_if_tenant(a, w->gen, dev);
  pthread_mutex_unlock(&dev->lock);
  if (!alive)
    return cb_fail(CUBERT_ERR_EXPIRED, "memory %llu of device %d was freed; the weak binding cannot upgrade",
                   (unsigned long long)w->memory_id, dev->index);
  cubert_binding *b = cb_malloc(sizeof *b);
  if (!b) {
    cb_alloc_unref(a, CB_BINDING_ONE, NULL);
    return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  *b = (cubert_binding){a, w->start, w->end, w->stream};
  *out = b;
  return CUBERT_OK;
}

void cubert_weak_release(cubert_weak *w) {
  if (!w) return;
  cb_device_unref(w->dev);
  cb_free(w);
}

/* ------------------------------------------------------------ checks */

cubert_status cb_check_own(cb_errb *eb, const char *fn, cubert_client *c, const cubert_handle *h, const char *what) {
  cubert_status st = cb_check_runtime(eb, fn, what, c->dev, h->alloc);
  if (st) return st;
  if (h->alloc->dev != c->dev)
    return cb_errb_set(eb, CUBERT_ERR_WRONG_DEVICE,
                       "%s: %s (memory %llu) belongs to device %d (%s), the client to device %d (%s)", fn,
                       what, (unsigned long long)h->alloc->id, h->alloc->dev->index,
                       h->alloc->dev->info.name, c->dev->index, c->dev->info.name);
  return CUBERT_OK;
}

cubert_status cubert_handle_check(cubert_client *c, const cubert_handle *h) {
  if (!c) return NULL_ARG("cubert_handle_check", "client");
  if (!h) return NULL_ARG("cubert_handle_check", "handle");
  cb_alloc *a = h->alloc;
  if (a->dev != c->dev) {
    cb_errb eb;
    cb_errb_init(&eb, CUBERT_OK);
    cubert_status st = cb_check_runtime(&eb, "cubert_handle_check", "the handle", c->dev, a);
    if (!st && !atomic_load(&a->shared)) st = cb_check_own(&eb, "cubert_handle_check", c, h, "the handle");
    if (st) return cb_errb_return(&eb, st);
    if (atomic_load(&a->dev->lost)) return cb_device_lost_error(a->dev);
    cb_errb report; /* a peer asks through the cell: no device lock */
    return cb_taint_refusal("check", a, h->start, h->end, &report) ? cb_errb_finish(&report) : CUBERT_OK;
  }
  cubert_status st = cb_device_enter(c->dev);
  if (st) return st;
  cb_errb report;
  bool tainted = cb_taint_refusal("check", a, h->start, h->end, &report);
  cb_device_leave(c->dev);
  return tainted ? cb_errb_finish(&report) : CUBERT_OK;
}

cubert_status cubert_handle_tainted_range(cubert_client *c, const cubert_handle *h, uint64_t from,
                                          uint64_t *range_start, uint64_t *range_end,
                                          const cubert_failure **failure) {
#define fn "cubert_handle_tainted_range"
  if (!c) return NULL_ARG(fn, "client");
  if (!h) return NULL_ARG(fn, "handle");
  if (!failure) return NULL_ARG(fn, "failure");
  cb_alloc *a = h->alloc;
  bool own = a->dev == c->dev;
  if (!own && !atomic_load(&a->shared)) {
    cb_errb eb;
    cb_errb_init(&eb, CUBERT_OK);
    return cb_errb_return(&eb, cb_check_own(&eb, fn, c, h, "the handle"));
  }
  cubert_status st = own ? cb_device_enter(c->dev) : CUBERT_OK;
  if (st) return st;
  uint64_t start = from > h->start ? from : h->start;
  cubert_failure *f = NULL;
  uint64_t s = 0, e = 0;
  cb_ledger *l = cb_alloc_ledger_lock(a);
  if (start < h->end && cb_ledger_first_piece(l, start, h->end, &s, &e, &f)) cubert_failure_retain(f);
  cb_alloc_ledger_unlock(a);
  if (own) cb_device_leave(c->dev);
  *failure = f;
  if (range_start) *range_start = s;
  if (range_end) *range_end = e;
  return CUBERT_OK;
#undef fn
}

/* ------------------------------------------------------------ operations */

/* Settles a write that failed at enqueue and records the error. */
cubert_status cb_write_failed(cb_device *dev, cb_work *w, cb_stream *s, cubert_status st,
                              const cubert_berr *err, const char *op) {
  cubert_failure *f = cb_device_failure(dev, st, err, s, op, "", w ? w->work : 0);
  if (w) {
    cb_taint_settle(dev, w, f);
    cb_work_mark_uses(dev, w); /* a partial copy or write may have landed: order after it */
  }
  cb_errb b;
  cb_errb_init(&b, st);
  cb_str_printf(&b.msg, "%s on device %d (%s) failed: ", op, dev->index, dev->info.name);
  if (f) {
    cb_failure_describe(f, &b.msg);
    cb_work_report(w, f, &b);
  }
  cubert_failure_release(f);
  return cb_errb_finish(&b);
}

typedef enum { OP_WRITE, OP_FILL } wop;

static cubert_status host_write(cb_errb *eb, cubert_client *c, cubert_handle *h, wop op, const void *src,
                                uint32_t pattern_size) {
  cb_device *dev = c->dev;
  cubert_status st = cb_device_enter(dev);
  if (st) return st;
  cb_stream *s;
  if ((st = cb_client_stream(c, &s))) {
    cb_device_leave(dev);
    return st;
  }
  const char *opname = op == OP_WRITE ? "write" : "fill";
  cb_work *w = cb_work_begin(dev, s, opname, NULL, 1);
  if (!w) {
    cb_device_leave(dev);
    return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  cb_work_bind(w, 0, h->alloc, h->start, h->end, CUBERT_ACCESS_WRITE, "destination");
  uint64_t work = w->work;
  cubert_berr err = {0};
  cb_errb order;
  if ((st = cb_order_access(dev, s, h->alloc, true, &order))) {
    st = cb_work_fail_ordering(dev, w, s, &order, opname, ""); /* not enqueued: rule 1 */
    cb_device_leave(dev);
    return st;
  }
  uint64_t addr = h->alloc->block.address + h->start;
  uint64_t len = h->end - h->start;
  if (len == 0) {
    st = CUBERT_OK; /* nothing to move; every check above still ran */
  } else if (op == OP_WRITE) {
    st = dev->ops->write(dev->bdev, s->bs, work, addr, src, len, &err);
  } else {
    st = dev->ops->fill(dev->bdev, s->bs, work, addr, src, pattern_size, len, &err);
  }
  if (st) {
    st = cb_write_failed(dev, w, s, st, &err, opname);
  } else {
    cb_taint_settle(dev, w, NULL);
    cb_work_mark_uses(dev, w);
  }
  cb_device_leave(dev);
  return st;
}

cubert_status cubert_handle_write(cubert_client *c, cubert_handle *h, const void *src, uint64_t size) {
  if (!c) return NULL_ARG("cubert_handle_write", "client");
  if (!h) return NULL_ARG("cubert_handle_write", "handle");
  if (!src && size) return NULL_ARG("cubert_handle_write", "src");
  if (size != h->end - h->start)
    return cb_fail(CUBERT_ERR_OUT_OF_RANGE, "cubert_handle_write: %llu bytes given for a view of %llu bytes",
                   (unsigned long long)size, (unsigned long long)(h->end - h->start));
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = cb_check_own(&eb, "cubert_handle_write", c, h, "the handle");
  if (!st) st = host_write(&eb, c, h, OP_WRITE, src, 0);
  return cb_errb_return(&eb, st);
}

cubert_status cubert_handle_fill(cubert_client *c, cubert_handle *h, const void *pattern,
                                 size_t pattern_size) {
  if (!c) return NULL_ARG("cubert_handle_fill", "client");
  if (!h) return NULL_ARG("cubert_handle_fill", "handle");
  if (!pattern) return NULL_ARG("cubert_handle_fill", "pattern");
  if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_handle_fill: pattern of %zu bytes (1, 2, 4 or 8)",
                   pattern_size);
  if ((h->end - h->start) % pattern_size)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT,
                   "cubert_handle_fill: a %zu-byte pattern does not divide the view's %llu bytes",
                   pattern_size, (unsigned long long)(h->end - h->start));
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = cb_check_own(&eb, "cubert_handle_fill", c, h, "the handle");
  if (!st) st = host_write(&eb, c, h, OP_FILL, pattern, (uint32_t)pattern_size);
  return cb_errb_return(&eb, st);
}

cubert_status cb_read_finish(cb_device *dev, cb_stream *s, uint64_t work, cubert_status st, const cubert_berr *err,
                             cb_alloc *a, uint64_t start, uint64_t end, const cb_pattern *p, const char *op) {
  cb_errb report;
  pthread_mutex_lock(&dev->lock);
  if (st) {
    cubert_failure *f = cb_device_failure(dev, st, err, s, op, "", work);
    cb_errb b;
    cb_errb_init(&b, st);
    cb_str_printf(&b.msg, "%s on device %d (%s) failed: ", op, dev->index, dev->info.name);
    if (f) cb_failure_describe(f, &b.msg);
    cb_errb_add(&b, f, 0, 0);
    cubert_failure_release(f);
    st = cb_errb_finish(&b);
  } else {
    /* failures found at the fence the read waited for */
    cb_device_reap(dev);
    if (atomic_load(&dev->lost))
      st = cb_device_lost_error(dev);
    else if (p ? cb_taint_refusal_pattern(op, a, p, &report) : cb_taint_refusal(op, a, start, end, &report))
      st = cb_errb_finish(&report);
  }
  pthread_mutex_unlock(&dev->lock);
  cb_alloc_unref(a, CB_BINDING_ONE, NULL);
  return st;
}

cubert_status cubert_handle_read(cubert_client *c, const cubert_handle *h, void *dst, uint64_t size) {
  if (!c) return NULL_ARG("cubert_handle_read", "client");
  if (!h) return NULL_ARG("cubert_handle_read", "handle");
  if (!dst && size) return NULL_ARG("cubert_handle_read", "dst");
  if (size != h->end - h->start)
    return cb_fail(CUBERT_ERR_OUT_OF_RANGE, "cubert_handle_read: %llu bytes asked of a view of %llu bytes",
                   (unsigned long long)size, (unsigned long long)(h->end - h->start));
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = cb_check_own(&eb, "cubert_handle_read", c, h, "the handle");
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
  if (cb_taint_refusal("read", a, h->start, h->end, &report) ||
      cb_order_access(dev, s, a, false, &report)) {
    cb_device_leave(dev);
    return cb_errb_finish(&report);
  }
  cb_alloc_ref(a, CB_BINDING_ONE);
  uint64_t work = ++dev->next_work;
  s->last_work = work;
  void *bs = s->bs;
  cb_device_leave(dev);
  /* the wait happens without the device lock */
  cubert_berr err = {0};
  if (size) st = dev->ops->read(dev->bdev, bs, work, dst, a->block.address + h->start, size, &err);
  return cb_read_finish(dev, s, work, st, &err, a, h->start, h->end, NULL, "read");
}

cubert_status cubert_handle_taint(cubert_client *c, cubert_handle *h, const cubert_failure *failure) {
#define fn "cubert_handle_taint"
  if (!c) return NULL_ARG(fn, "client");
  if (!h) return NULL_ARG(fn, "view");
  if (!failure) return NULL_ARG(fn, "failure");
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = cb_check_own(&eb, fn, c, h, "the view");
  if (st) return cb_errb_return(&eb, st);
  cb_device *dev = c->dev;
  if ((st = cb_device_enter(dev))) return st;
  cb_stream *s;
  cb_work *w = NULL;
  if ((st = cb_client_stream(c, &s)) || !(w = cb_work_begin(dev, s, "taint", NULL, 1))) {
    cb_device_leave(dev);
    return st ? st : cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  cb_work_bind(w, 0, h->alloc, h->start, h->end, CUBERT_ACCESS_WRITE, "view");
  cb_errb order;
  if (cb_order_access(dev, s, h->alloc, true, &order)) {
    st = cb_work_fail_ordering(dev, w, s, &order, "taint", ""); /* tainted all the same */
    cb_device_leave(dev);
    return st;
  }
  /* the write that brought these bytes failed elsewhere: settle it as a
   * failed write, with that failure */
  cb_taint_settle(dev, w, (cubert_failure *)failure);
  cb_work_mark_uses(dev, w);
  cb_device_leave(dev);
  return CUBERT_OK;
#undef fn
}

/* Copy work whose source is tainted (`report`, from cb_taint_refusal) is
 * skipped: its destination carries a child failure, and the refusal says so.
 * Returns the refusal, recorded. */
cubert_status cb_skip_copy(cb_device *dev, cb_work *w, const char *op, cb_errb *report) {
  /* a refusal found with no host memory to list its failure (dropped) has
   * no entry: the source is still bad, with the static failure */
  const cubert_failure *in = report->n ? report->entries[0].failure : cb_failure_unrecorded();
  cubert_failure *child = cb_taint_skip(dev, w, in, op, "its source", op);
  if (child) {
    cb_str_printf(&report->msg, ". The destination now carries ");
    cb_failure_describe(child, &report->msg);
    cubert_failure_release(child);
  }
  return cb_errb_finish(report);
}

void cb_work_bind_copy(cb_work *w, const cubert_handle *src, const cb_pattern *sp, const cubert_handle *dst,
                       const cb_pattern *dp) {
  if (!sp || !cb_work_bind_pattern(w, 0, src->alloc, sp, CUBERT_ACCESS_READ, "source"))
    cb_work_bind(w, 0, src->alloc, src->start, src->end, CUBERT_ACCESS_READ, "source");
  if (!dp || !cb_work_bind_pattern(w, 1, dst->alloc, dp, CUBERT_ACCESS_WRITE, "destination"))
    cb_work_bind(w, 1, dst->alloc, dst->start, dst->end, CUBERT_ACCESS_WRITE, "destination");
}

cubert_status cubert_handle_copy(cubert_client *c, const cubert_handle *src, cubert_handle *dst) {
  if (!c) return NULL_ARG("cubert_handle_copy", "client");
  if (!src) return NULL_ARG("cubert_handle_copy", "src");
  if (!dst) return NULL_ARG("cubert_handle_copy", "dst");
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st;
  if ((st = cb_check_own(&eb, "cubert_handle_copy", c, src, "the source")) ||
      (st = cb_check_own(&eb, "cubert_handle_copy", c, dst, "the destination")))
    return cb_errb_return(&eb, st);
  uint64_t len = src->end - src->start;
  if (len != dst->end - dst->start)
    return cb_fail(CUBERT_ERR_OUT_OF_RANGE, "cubert_handle_copy: source has %llu bytes, destination %llu",
                   (unsigned long long)len, (unsigned long long)(dst->end - dst->start));
  if (len && cubert_handle_overlap(src, dst) != CUBERT_OVERLAP_DISJOINT)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_handle_copy: source and destination overlap");
  cb_device *dev = c->dev;
  if ((st = cb_device_enter(dev))) return st;
  cb_stream *s;
  if ((st = cb_client_stream(c, &s))) {
    cb_device_leave(dev);
    return st;
  }
  cb_work *w = cb_work_begin(dev, s, "copy", NULL, 2);
  if (!w) {
    cb_device_leave(dev);
    return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  cb_work_bind_copy(w, src, NULL, dst, NULL);
  cb_errb report;
  bool tainted = cb_taint_refusal("copy source", src->alloc, src->start, src->end, &report);
#ifdef CUBERT_BREAK_TRANSITIVE
  if (tainted) cb_errb_discard(&report);
  tainted = false; /* test build: the checker must catch this */
#endif
  if (tainted) {
    st = cb_skip_copy(dev, w, "copy", &report);
    cb_device_leave(dev);
    return st;
  }
  if (cb_order_access(dev, s, src->alloc, false, &report) ||
      cb_order_access(dev, s, dst->alloc, true, &report)) {
    st = cb_work_fail_ordering(dev, w, s, &report, "copy", "");
    cb_device_leave(dev);
    return st;
  }
  cubert_berr err = {0};
  uint64_t work = w->work;
  if (len)
    st = dev->ops->copy(dev->bdev, s->bs, work, dst->alloc->block.address + dst->start,
                        src->alloc->block.address + src->start, len, &err);
  if (st) {
    st = cb_write_failed(dev, w, s, st, &err, "copy");
  } else {
    cb_taint_settle(dev, w, NULL);
    cb_work_mark_uses(dev, w);
  }
  cb_device_leave(dev);
  return st;
}

cubert_status cb_peer_copy_begin(cb_errb *eb, cubert_client *dc, const cubert_handle *src, const cb_pattern *sp,
                                 const cubert_handle *dst, const cb_pattern *dp, const char *op, cb_stream **out_s,
                                 cb_work **out_w) {
  cb_device *sd = src->alloc->dev, *dd = dc->dev;
  cubert_status st;
  cb_errb refusal; /* the source's verdict, carried to the destination side */
  /* 1. the source side: its verdict, and its last writer finished */
  if ((st = cb_device_enter(sd))) return st;
  bool tainted = sp ? cb_taint_refusal_pattern("copy source", src->alloc, sp, &refusal)
                    : cb_taint_refusal("copy source", src->alloc, src->start, src->end, &refusal);
#ifdef CUBERT_BREAK_TRANSITIVE
  if (tainted) cb_errb_discard(&refusal);
  tainted = false;
#endif
  void *src_stream = NULL;
  if (!tainted && src->alloc->last_writer) {
    cb_stream *p = sd->streams[src->alloc->last_writer - 1];
    if (sd->ops->progress(sd->bdev, p->bs) < src->alloc->last_write) src_stream = p->bs;
  }
  cb_alloc_ref(src->alloc, CB_BINDING_ONE);
  cb_device_leave(sd);
  cubert_berr err = {0};
  if (src_stream && (st = sd->ops->sync(sd->bdev, src_stream, &err)) != CUBERT_OK) {
    cb_alloc_unref(src->alloc, CB_BINDING_ONE, NULL);
    return cb_errb_backend(eb, st, &err, "waiting for the copy source", sd->info.name);
  }
  /* 2. the destination side */
  if ((st = cb_device_enter(dd))) {
    cb_alloc_unref(src->alloc, CB_BINDING_ONE, NULL);
    if (tainted) cb_errb_discard(&refusal);
    return st;
  }
  cb_stream *s;
  cb_work *w = NULL;
  if ((st = cb_client_stream(dc, &s)) || !(w = cb_work_begin(dd, s, op, NULL, 2))) {
    cb_device_leave(dd);
    cb_alloc_unref(src->alloc, CB_BINDING_ONE, NULL);
    if (tainted) cb_errb_discard(&refusal);
    return st ? st : cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  cb_work_bind_copy(w, src, sp, dst, dp);
  cb_alloc_unref(src->alloc, CB_BINDING_ONE, dd); /* the record holds it now */
  /* 3. a tainted source skips the work; a destination out of order fails it */
  if (tainted || cb_order_access(dd, s, dst->alloc, true, &refusal)) {
    st = tainted ? cb_skip_copy(dd, w, op, &refusal) : cb_work_fail_ordering(dd, w, s, &refusal, op, "");
    cb_device_leave(dd);
    return st;
  }
  *out_s = s;
  *out_w = w;
  return CUBERT_OK;
}

cubert_status cubert_handle_copy_peer(cubert_client *sc, const cubert_handle *src, cubert_client *dc,
                                      cubert_handle *dst) {
  if (!sc) return NULL_ARG("cubert_handle_copy_peer", "src_client");
  if (!src) return NULL_ARG("cubert_handle_copy_peer", "src");
  if (!dc) return NULL_ARG("cubert_handle_copy_peer", "dst_client");
  if (!dst) return NULL_ARG("cubert_handle_copy_peer", "dst");
  if (sc->rt != dc->rt)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT,
                   "cubert_handle_copy_peer: the source client (device %d, %s) and the destination "
                   "client (device %d, %s) belong to two runtimes; a copy cannot cross runtimes",
                   sc->dev->index, sc->dev->info.name, dc->dev->index, dc->dev->info.name);
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st;
  if ((st = cb_check_own(&eb, "cubert_handle_copy_peer", sc, src, "the source")) ||
      (st = cb_check_own(&eb, "cubert_handle_copy_peer", dc, dst, "the destination")))
    return cb_errb_return(&eb, st);
  cb_device *sd = sc->dev, *dd = dc->dev;
  if (sd->backend != dd->backend)
    return cb_fail(CUBERT_ERR_UNSUPPORTED, "cubert_handle_copy_peer: %s and %s belong to different backends",
                   sd->info.name, dd->info.name);
  uint64_t len = src->end - src->start;
  if (len != dst->end - dst->start)
    return cb_fail(CUBERT_ERR_OUT_OF_RANGE, "cubert_handle_copy_peer: source has %llu bytes, destination %llu",
                   (unsigned long long)len, (unsigned long long)(dst->end - dst->start));
  if (sd == dd) { /* one device: a copy, its refusals named as this call's (checked above and here) */
    if (len && cubert_handle_overlap(src, dst) != CUBERT_OVERLAP_DISJOINT)
      return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_handle_copy_peer: source and destination overlap");
    return cubert_handle_copy(dc, src, dst);
  }
  cb_stream *s;
  cb_work *w;
  if ((st = cb_peer_copy_begin(&eb, dc, src, NULL, dst, NULL, "copy-peer", &s, &w))) return cb_errb_return(&eb, st);
  uint64_t work = w->work;
  cubert_berr err = {0};
  if (len)
    st = dd->ops->copy_peer(dd->bdev, s->bs, work, dst->alloc->block.address + dst->start, sd->bdev,
                            src->alloc->block.address + src->start, len, &err);
  if (st) {
    st = cb_write_failed(dd, w, s, st, &err, "copy-peer");
  } else {
    cb_taint_settle(dd, w, NULL);
    cb_work_mark_uses(dd, w);
  }
  cb_device_leave(dd);
  return st;
}

/* ------------------------------------------------------------ sharing */

cubert_status cubert_handle_share(cubert_client *c, cubert_handle *h) {
  if (!c) return NULL_ARG("cubert_handle_share", "client");
  if (!h) return NULL_ARG("cubert_handle_share", "handle");
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = cb_check_own(&eb, "cubert_handle_share", c, h, "the handle");
  if (st) return cb_errb_return(&eb, st);
  cb_device *owner = c->dev;
  cb_alloc *a = h->alloc;
  if ((st = cb_device_enter(owner))) return st;
  if (!atomic_load(&a->shared)) {
    cb_shared *sh = cb_calloc(1, sizeof *sh);
    if (!sh) {
      cb_device_leave(owner);
      return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    pthread_mutex_init(&sh->lock, NULL);
    sh->ledger = a->ledger; /* the cell takes the ledger over, range-exact */
    memset(&a->ledger, 0, sizeof a->ledger);
    sh->address = a->block.address;
    sh->alloc = a;
    sh->memory_id = a->id;
    atomic_store(&a->shared, sh);
  }
  cb_device_leave(owner);
  /* Enable access for each peer once, holding one device lock at a time. */
  cubert_runtime *rt = c->rt;
  cb_errb b;
  cb_errb_init(&b, CUBERT_OK);
  for (int i = 0; i < rt->ndevices; i++) {
    cb_device *d = rt->devices[i];
    if (d == owner || d->backend != owner->backend) continue;
    pthread_mutex_lock(&d->lock);
    if (d->peer_state[owner->index] == 0) {
      cubert_berr err = {0};
      bool can = false;
      cubert_status pst = d->ops->peer_can_access(d->bdev, owner->bdev, &can, &err);
      if (pst == CUBERT_OK && !can)
        pst = cubert_berr_set(&err, CUBERT_ERR_PEER_ACCESS, "the driver says %s cannot access %s",
                              d->info.name, owner->info.name);
      if (pst == CUBERT_OK) pst = d->ops->peer_enable(d->bdev, owner->bdev, &err);
      d->peer_state[owner->index] = pst == CUBERT_OK ? 1 : 2;
      if (pst) d->peer_message[owner->index] = cb_strdup(err.message);
    }
    if (d->peer_state[owner->index] == 2) {
      if (b.status == CUBERT_OK) {
        b.status = CUBERT_ERR_PEER_ACCESS;
        cb_str_printf(&b.msg, "memory %llu of device %d (%s) is shared, but peer access was refused for:",
                      (unsigned long long)a->id, owner->index, owner->info.name);
      }
      cb_str_printf(&b.msg, "%s device %d (%s) -> device %d (%s): %s",
                    b.msg.n && b.msg.p[b.msg.n - 1] != ':' ? ";" : "", d->index, d->info.name,
                    owner->index, owner->info.name, d->peer_message[owner->index]);
    }
    pthread_mutex_unlock(&d->lock);
  }
  if (b.status != CUBERT_OK) return cb_errb_finish(&b);
  cb_errb_discard(&b);
  return CUBERT_OK;
}

bool cubert_handle_is_shared(const cubert_handle *h) { return h && atomic_load(&h->alloc->shared); }

uint64_t cubert_handle_peer_address(const cubert_handle *h) {
  cb_shared *sh = h ? atomic_load(&h->alloc->shared) : NULL;
  return sh ? sh->address + h->start : 0;
}

/* ------------------------------------------------------------ pools */

cubert_status cubert_memory_usage(cubert_client *c, cubert_pool_usage *pools, size_t capacity,
                                  size_t *count) {
  if (!c) return NULL_ARG("cubert_memory_usage", "client");
  if (!count) return NULL_ARG("cubert_memory_usage", "count");
  if (capacity && !pools) return NULL_ARG("cubert_memory_usage", "pools");
  pthread_mutex_lock(&c->dev->lock);
  cb_device_collect(c->dev);
  cb_tcache_drain(c->dev); /* released memory is not in use, wherever it waits */
  *count = cb_pool_usage(c->dev->pool, pools, capacity);
  pthread_mutex_unlock(&c->dev->lock);
  return CUBERT_OK;
}

cubert_status cubert_memory_cleanup(cubert_client *c) {
  if (!c) return NULL_ARG("cubert_memory_cleanup", "client");
  cubert_status st = cb_device_enter(c->dev);
  if (st) return st;
  cb_device_reap(c->dev);
  cb_device_collect(c->dev);
  cb_tcache_drain(c->dev);
  cb_pool_cleanup(c->dev->pool);
  cb_device_leave(c->dev);
  return CUBERT_OK;
}
