/* tools/faultinj/model.c: the checker's model of what every buffer must hold and
 * which bytes must be tainted, with which cause (tools/faultinj/model.h). Each
 * step function is one rule of docs/failures.md, applied to bytes. */
#include "tools/faultinj/model.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"

void cb_fim_init(cb_fim *m, int ndevices) {
  memset(m, 0, sizeof *m);
  m->ndevices = ndevices < CB_FIM_MAX_DEVICES ? ndevices : CB_FIM_MAX_DEVICES;
  for (int i = 0; i < CB_FIM_MAX_DEVICES; i++) m->dev[i].lost_cause = -1;
}

static void alloc_drop(cb_fim_alloc *a) {
  free(a->bytes);
  free(a->known);
  free(a->taint);
  a->bytes = a->known = NULL;
  a->taint = NULL;
  a->live = false;
}

void cb_fim_free(cb_fim *m) {
  for (int i = 0; i < m->nallocs; i++) alloc_drop(&m->allocs[i]);
  free(m->allocs);
  for (int d = 0; d < CB_FIM_MAX_DEVICES; d++) {
    free(m->dev[d].records);
    free(m->dev[d].pending);
  }
  memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------ causes */

int cb_fim_cause_find(const cb_fim *m, cb_fim_cause_kind kind, uint64_t id) {
  for (int i = 0; i < m->ncauses; i++)
    if (m->causes[i].kind == kind && m->causes[i].id == id) return i;
  /* a full table folds every later cause into its last bit */
  return m->ncauses == CB_FIM_MAX_CAUSES ? CB_FIM_MAX_CAUSES - 1 : -1;
}

int cb_fim_cause_add(cb_fim *m, cb_fim_cause_kind kind, uint64_t id, const char *text) {
  for (int i = 0; i < m->ncauses; i++)
    if (m->causes[i].kind == kind && m->causes[i].id == id) return i;
  if (m->ncauses == CB_FIM_MAX_CAUSES) return CB_FIM_MAX_CAUSES - 1;
  cb_fim_cause *c = &m->causes[m->ncauses];
  c->kind = kind;
  c->id = id;
  snprintf(c->text, sizeof c->text, "%s", text ? text : "");
  return m->ncauses++;
}

static bool parse_u64_at(const char *s, uint64_t *v) {
  if (*s < '0' || *s > '9') return false;
  uint64_t n = 0;
  while (*s >= '0' && *s <= '9') n = n * 10 + (uint64_t)(*s++ - '0');
  *v = n;
  return true;
}

int cb_fim_cause_of_message(const cb_fim *m, const char *message) {
  if (!message) return -1;
  static const char inj[] = "injected fault #";
  static const char tag[] = "deliberate failure (tag ";
  const char *p = strstr(message, inj);
  uint64_t id;
  if (p && parse_u64_at(p + sizeof inj - 1, &id)) return cb_fim_cause_find(m, CB_FIM_CAUSE_INJECTION, id);
  p = strstr(message, tag);
  if (p && parse_u64_at(p + sizeof tag - 1, &id)) return cb_fim_cause_find(m, CB_FIM_CAUSE_TAG, id);
  return -1;
}

void cb_fim_mask_describe(const cb_fim *m, cb_fim_mask mask, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = '\0';
  int count = 0;
  for (int i = 0; i < CB_FIM_MAX_CAUSES && n < cap; i++) {
    if (!(mask & cb_fim_bit(i))) continue;
    const char *sep = count ? " or " : "";
    int w;
    if (i >= m->ncauses)
      w = snprintf(buf + n, cap - n, "%scause %d", sep, i);
    else if (m->causes[i].kind == CB_FIM_CAUSE_INJECTION)
      w = snprintf(buf + n, cap - n, "%sinjected fault #%" PRIu64, sep, m->causes[i].id);
    else
      w = snprintf(buf + n, cap - n, "%sdeliberate failure (tag %" PRIu64 ")", sep, m->causes[i].id);
    if (w < 0) break;
    n += (size_t)w;
    count++;
  }
  if (!count) snprintf(buf, cap, "no failure");
}

/* ------------------------------------------------------------ bytes */

cb_fim_mask cb_fim_taint_of(const cb_fim *m, cb_fim_view v) {
  const cb_fim_alloc *a = &m->allocs[v.alloc];
  cb_fim_mask mask = 0;
  for (uint64_t i = v.start; i < v.end; i++) mask |= a->taint[i];
  return mask;
}

bool cb_fim_known(const cb_fim *m, cb_fim_view v) {
  const cb_fim_alloc *a = &m->allocs[v.alloc];
  for (uint64_t i = v.start; i < v.end; i++)
    if (!a->known[i]) return false;
  return true;
}

void cb_fim_taint(cb_fim *m, cb_fim_view v, cb_fim_mask mask) {
  cb_fim_alloc *a = &m->allocs[v.alloc];
  for (uint64_t i = v.start; i < v.end; i++) {
    a->taint[i] = mask;
    if (mask) a->known[i] = 0; /* what a failed write left is not trusted */
  }
}

void cb_fim_set_bytes(cb_fim *m, cb_fim_view v, const void *data) {
  cb_fim_alloc *a = &m->allocs[v.alloc];
  memcpy(a->bytes + v.start, data, v.end - v.start);
  memset(a->known + v.start, 1, v.end - v.start);
}

void cb_fim_forget(cb_fim *m, cb_fim_view v) {
  cb_fim_alloc *a = &m->allocs[v.alloc];
  memset(a->known + v.start, 0, v.end - v.start);
}

bool cb_fim_any_pending(const cb_fim *m) {
  for (int d = 0; d < CB_FIM_MAX_DEVICES; d++)
    if (m->dev[d].npending) return true;
  return false;
}

/* ------------------------------------------------------------ records */

static cb_fim_record *record_push(cb_fim *m, int device, int step) {
  cb_fim_device *d = &m->dev[device];
  if (d->nrecords == d->caprecords) {
    size_t cap;
    cb_fim_record *v = cb_array_grow(d->records, d->caprecords, d->nrecords + 1, sizeof *v, &cap);
    if (!v) return NULL;
    d->records = v;
    d->caprecords = cap;
  }
  cb_fim_record *r = &d->records[d->nrecords++];
  memset(r, 0, sizeof *r);
  r->step = step;
  r->stream = m->stream > 0 ? m->stream : 1;
  return r;
}

static void record_range(cb_fim *m, int device, cb_fim_record *r, cb_fim_view v, cubert_access access) {
  int owner = m->allocs[v.alloc].device;
  if (owner != device && owner >= 0 && owner < CB_FIM_MAX_DEVICES) m->dev[owner].bound_by |= 1u << device;
  if (r && r->n < CB_FIM_RANGES) r->r[r->n++] = (cb_fim_range){v.alloc, v.start, v.end, (uint8_t)access};
}

static void pending_push(cb_fim *m, int device, int cause, cubert_status status, bool lost) {
  cb_fim_device *d = &m->dev[device];
  if (!d->nrecords) return;
  if (d->npending == d->cappending) {
    size_t cap;
    cb_fim_pending *v = cb_array_grow(d->pending, d->cappending, d->npending + 1, sizeof *v, &cap);
    if (!v) return;
    d->pending = v;
    d->cappending = cap;
  }
  d->pending[d->npending++] = (cb_fim_pending){d->nrecords - 1, cause, status, lost, false};
}

/* ------------------------------------------------------------ hits */

static const cb_fim_hit *hit_op(cb_fim_hits h, const char *op) {
  for (size_t i = 0; i < h.n; i++)
    if (strcmp(h.v[i].operation, op) == 0) return &h.v[i];
  return NULL;
}

static const cb_fim_hit *hit_lost(cb_fim_hits h) {
  for (size_t i = 0; i < h.n; i++)
    if (h.v[i].fault == CUBERT_FAULT_DEVICE_LOST) return &h.v[i];
  return NULL;
}

/* Stream plumbing (event_record, stream_wait) failed: the work was not
 * enqueued, so by rule 1 its write set carries that failure. */
static const cb_fim_hit *hit_order(cb_fim_hits h) {
  const cb_fim_hit *x = hit_op(h, "event_record");
  return x ? x : hit_op(h, "stream_wait");
}

static cb_fim_outcome outcome(cubert_status status, cb_fim_mask roots) {
  cb_fim_outcome o = {status, 0, roots, false, -1};
  return o;
}

static cb_fim_outcome lost_outcome(const cb_fim *m, int device) {
  return outcome(CUBERT_ERR_DEVICE_LOST, cb_fim_bit(m->dev[device].lost_cause));
}

static void mark_lost(cb_fim *m, int device, int cause) {
  if (m->dev[device].lost_cause < 0) m->dev[device].lost_cause = cause;
}

/* ------------------------------------------------------------ allocations */

cb_fim_outcome cb_fim_alloc_step(cb_fim *m, int step, int device, uint64_t size, const void *data,
                                 cb_fim_hits hits) {
  if (m->dev[device].lost_cause >= 0) return lost_outcome(m, device);
  const cb_fim_hit *h = hit_op(hits, "alloc");
  if (h) {
    if (h->fault == CUBERT_FAULT_DEVICE_LOST) {
      mark_lost(m, device, h->cause);
      return lost_outcome(m, device);
    }
    return outcome(h->status, cb_fim_bit(h->cause));
  }
  if (m->nallocs == m->capallocs) {
    size_t cap;
    cb_fim_alloc *v = cb_array_grow(m->allocs, (size_t)m->capallocs, (size_t)m->nallocs + 1, sizeof *v, &cap);
    if (!v) return outcome(CUBERT_ERR_OUT_OF_MEMORY, 0);
    m->allocs = v;
    m->capallocs = cap > INT_MAX ? INT_MAX : (int)cap;
  }
  int ai = m->nallocs;
  cb_fim_alloc *a = &m->allocs[ai];
  memset(a, 0, sizeof *a);
  a->bytes = calloc(size, 1);
  a->known = calloc(size, 1); /* never written: any bytes will do */
  a->taint = calloc(size, sizeof *a->taint);
  if (!a->bytes || !a->known || !a->taint) {
    alloc_drop(a);
    return outcome(CUBERT_ERR_OUT_OF_MEMORY, 0);
  }
  a->live = true;
  a->device = device;
  a->size = size;
  m->nallocs++;
  cb_fim_outcome o = outcome(CUBERT_OK, 0);
  o.alloc = ai;
  if (!data) return o;
  /* cubert_handle_create: the write, and on its failure the handle goes */
  cb_fim_view v = {ai, 0, size};
  cb_fim_outcome w = cb_fim_write(m, step, device, v, data, hits);
  if (w.status != CUBERT_OK) {
    a->live = false;
    w.alloc = -1;
    return w;
  }
  w.alloc = ai;
  return w;
}

void cb_fim_release(cb_fim *m, int alloc) {
  if (alloc >= 0 && alloc < m->nallocs) {
    /* keep the arrays until the end: records may still name it */
    m->allocs[alloc].live = false;
  }
}

/* ------------------------------------------------------------ writes */

/* Applies an injection into work that writes `outs`: returns true when it
 * settled the work (outcome in *o); false when the work runs (async kinds
 * leave a pending failure and `*scribble` says whether its outputs are
 * garbage). */
static bool apply_hit(cb_fim *m, int device, const cb_fim_hit *h, cb_fim_record *r, const cb_fim_view *outs,
                      uint32_t nouts, cb_fim_outcome *o, bool *async, bool *scribble) {
  *async = *scribble = false;
  if (!h) return false;
  if (h->fault == CUBERT_FAULT_ASYNC || h->fault == CUBERT_FAULT_ASYNC_SCRIBBLE ||
      h->fault == CUBERT_FAULT_ASYNC_DEVICE_LOST) {
    *async = true;
    *scribble = h->fault == CUBERT_FAULT_ASYNC_SCRIBBLE;
    return false;
  }
  /* fail, scribble, partial, compile-error, device-lost: the whole write
   * set carries the injection (rule 1: tainted unless proven written) */
  if (h->fault == CUBERT_FAULT_DEVICE_LOST) mark_lost(m, device, h->cause);
  for (uint32_t i = 0; i < nouts; i++) cb_fim_taint(m, outs[i], cb_fim_bit(h->cause));
  if (r) r->failed = true;
  *o = outcome(h->fault == CUBERT_FAULT_DEVICE_LOST ? CUBERT_ERR_DEVICE_LOST : h->status, cb_fim_bit(h->cause));
  return true;
}

cb_fim_outcome cb_fim_write_pieces(cb_fim *m, int step, int device, const cb_fim_view *pieces, size_t n,
                                   const void *packed, cb_fim_hits hits) {
  if (m->dev[device].lost_cause >= 0) return lost_outcome(m, device);
  const cb_fim_hit *h = hit_op(hits, "write");
  if (!h) h = hit_op(hits, "fill");
  if (!h) h = hit_lost(hits);
  if (!h) h = hit_order(hits);
  cb_fim_record *r = record_push(m, device, step);
  for (size_t i = 0; i < n; i++) record_range(m, device, r, pieces[i], CUBERT_ACCESS_WRITE);
  cb_fim_outcome o = outcome(CUBERT_OK, 0);
  bool async, scribble;
  if (apply_hit(m, device, h, r, pieces, (uint32_t)n, &o, &async, &scribble)) return o;
  const uint8_t *at = packed;
  for (size_t i = 0; i < n; i++) {
    if (at) {
      cb_fim_set_bytes(m, pieces[i], at);
      at += pieces[i].end - pieces[i].start;
    }
    cb_fim_taint(m, pieces[i], 0);
    if (scribble) cb_fim_forget(m, pieces[i]);
  }
  if (async) {
    pending_push(m, device, h->cause, h->status, h->fault == CUBERT_FAULT_ASYNC_DEVICE_LOST);
    o.pending = true;
  }
  return o;
}

cb_fim_outcome cb_fim_write(cb_fim *m, int step, int device, cb_fim_view v, const void *data,
                            cb_fim_hits hits) {
  return cb_fim_write_pieces(m, step, device, &v, 1, data, hits);
}

cb_fim_outcome cb_fim_copy_pieces(cb_fim *m, int step, int device, const cb_fim_view *src, const cb_fim_view *dst,
                                  size_t n, cb_fim_hits hits) {
  if (!n) return outcome(CUBERT_OK, 0);
  int sdev = m->allocs[src[0].alloc].device;
  cb_fim_mask lost = 0;
  if (sdev != device && m->dev[sdev].lost_cause >= 0) lost |= cb_fim_bit(m->dev[sdev].lost_cause);
  if (m->dev[device].lost_cause >= 0) lost |= cb_fim_bit(m->dev[device].lost_cause);
  if (lost) return outcome(CUBERT_ERR_DEVICE_LOST, lost);
  cb_fim_record *r = record_push(m, device, step);
  for (size_t i = 0; i < n; i++) record_range(m, device, r, src[i], CUBERT_ACCESS_READ);
  for (size_t i = 0; i < n; i++) record_range(m, device, r, dst[i], CUBERT_ACCESS_WRITE);
  /* rule 2: a copy from a tainted source is refused, its destination
   * carries a child of the source's failure */
  cb_fim_mask in = 0;
  for (size_t i = 0; i < n; i++) in |= cb_fim_taint_of(m, src[i]);
  if (in) {
    for (size_t i = 0; i < n; i++) cb_fim_taint(m, dst[i], in);
    if (r) r->failed = true;
    return outcome(CUBERT_ERR_TAINTED, in);
  }
  const cb_fim_hit *h = hit_op(hits, sdev == device ? "copy" : "copy_peer");
  if (!h) h = hit_lost(hits);
  if (!h) h = hit_order(hits);
  cb_fim_outcome o = outcome(CUBERT_OK, 0);
  bool async, scribble;
  if (apply_hit(m, device, h, r, dst, (uint32_t)n, &o, &async, &scribble)) return o;
  for (size_t i = 0; i < n; i++) {
    cb_fim_alloc *sa = &m->allocs[src[i].alloc], *da = &m->allocs[dst[i].alloc];
    uint64_t len = src[i].end - src[i].start;
    memmove(da->bytes + dst[i].start, sa->bytes + src[i].start, len);
    memmove(da->known + dst[i].start, sa->known + src[i].start, len);
    cb_fim_taint(m, dst[i], 0);
    if (scribble) cb_fim_forget(m, dst[i]);
  }
  if (async) {
    pending_push(m, device, h->cause, h->status, h->fault == CUBERT_FAULT_ASYNC_DEVICE_LOST);
    o.pending = true;
  }
  return o;
}

cb_fim_outcome cb_fim_copy(cb_fim *m, int step, int device, cb_fim_view src, cb_fim_view dst,
                           cb_fim_hits hits) {
  return cb_fim_copy_pieces(m, step, device, &src, &dst, 1, hits);
}

/* ------------------------------------------------------------ kernels */

typedef struct kdesc {
  const char *name, *runtime_name;
  uint32_t nbuf;
  const char *params[2];
  cubert_access access[2];
  bool peer[2];
} kdesc;

static const kdesc kernels[CB_FIM_KERNEL_COUNT] = {
    [CB_FIM_FILL_U32] = {"fill_u32", "cubert_fill_u32", 1, {"out"}, {CUBERT_ACCESS_WRITE}, {false}},
    [CB_FIM_COPY_U32] = {"copy_u32", "cubert_copy_u32", 2, {"in", "out"},
                         {CUBERT_ACCESS_READ, CUBERT_ACCESS_WRITE}, {false, false}},
    [CB_FIM_CHECKSUM_U32] = {"checksum_u32", "cubert_checksum_u32", 2, {"x", "acc"},
                             {CUBERT_ACCESS_READ, CUBERT_ACCESS_READ_WRITE}, {false, false}},
    [CB_FIM_COPY_PEER_READ] = {"copy_peer_read", "cubert_copy_peer_read", 2, {"in", "out"},
                               {CUBERT_ACCESS_READ, CUBERT_ACCESS_WRITE}, {true, false}},
    [CB_FIM_COPY_PEER_WRITE] = {"copy_peer_write", "cubert_copy_peer_write", 2, {"in", "out"},
                                {CUBERT_ACCESS_READ, CUBERT_ACCESS_WRITE}, {false, true}},
    [CB_FIM_FAIL_U32] = {"fail_u32", "cubert_fi_fail_u32", 1, {"out"}, {CUBERT_ACCESS_WRITE}, {false}},
    [CB_FIM_SLEEP_U32] = {"sleep_u32", "cubert_fi_sleep_u32", 1, {"out"}, {CUBERT_ACCESS_WRITE}, {false}},
};

const char *cb_fim_kernel_runtime_name(cb_fim_kernel k) {
  return (unsigned)k < CB_FIM_KERNEL_COUNT ? kernels[k].runtime_name : "?";
}
const char *cb_fim_kernel_name(cb_fim_kernel k) {
  return (unsigned)k < CB_FIM_KERNEL_COUNT ? kernels[k].name : "?";
}
uint32_t cb_fim_kernel_buffers(cb_fim_kernel k) { return (unsigned)k < CB_FIM_KERNEL_COUNT ? kernels[k].nbuf : 0; }
const char *cb_fim_kernel_param(cb_fim_kernel k, uint32_t i) {
  return (unsigned)k < CB_FIM_KERNEL_COUNT && i < kernels[k].nbuf ? kernels[k].params[i] : "?";
}
cubert_access cb_fim_kernel_access(cb_fim_kernel k, uint32_t i) {
  return (unsigned)k < CB_FIM_KERNEL_COUNT && i < kernels[k].nbuf ? kernels[k].access[i] : CUBERT_ACCESS_READ;
}
bool cb_fim_kernel_peer(cb_fim_kernel k, uint32_t i) {
  return (unsigned)k < CB_FIM_KERNEL_COUNT && i < kernels[k].nbuf && kernels[k].peer[i];
}

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* What the kernel writes, as the built-ins' host functions compute it. */
static void compute(cb_fim *m, cb_fim_kernel k, const cb_fim_view *args, uint32_t value) {
  switch (k) {
  case CB_FIM_FILL_U32:
  case CB_FIM_FAIL_U32:
  case CB_FIM_SLEEP_U32: {
    cb_fim_alloc *a = &m->allocs[args[0].alloc];
    for (uint64_t i = args[0].start; i + 4 <= args[0].end; i += 4) put_u32(a->bytes + i, value);
    memset(a->known + args[0].start, 1, args[0].end - args[0].start);
    break;
  }
  case CB_FIM_COPY_U32:
  case CB_FIM_COPY_PEER_READ:
  case CB_FIM_COPY_PEER_WRITE: {
    cb_fim_alloc *s = &m->allocs[args[0].alloc], *d = &m->allocs[args[1].alloc];
    uint64_t n = args[0].end - args[0].start;
    memmove(d->bytes + args[1].start, s->bytes + args[0].start, n);
    memmove(d->known + args[1].start, s->known + args[0].start, n);
    break;
  }
  case CB_FIM_CHECKSUM_U32: {
    cb_fim_alloc *x = &m->allocs[args[0].alloc], *acc = &m->allocs[args[1].alloc];
    if (!cb_fim_known(m, args[0]) || !cb_fim_known(m, args[1])) {
      cb_fim_forget(m, args[1]);
      break;
    }
    uint64_t sum = 0, n = (args[0].end - args[0].start) / 4;
    for (uint64_t i = 0; i < n; i++) sum += (uint64_t)get_u32(x->bytes + args[0].start + 4 * i) ^ (i * UINT64_C(2654435761));
    uint8_t *p = acc->bytes + args[1].start;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    v += sum;
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
    break;
  }
  default:
    break;
  }
}

cb_fim_outcome cb_fim_launch(cb_fim *m, int step, int device, cb_fim_kernel k, const cb_fim_view *args,
                             uint32_t value, int tag_cause, cb_fim_hits hits) {
  if (m->dev[device].lost_cause >= 0) return lost_outcome(m, device);
  const kdesc *kd = &kernels[k];
  /* checked before anything is claimed: a peer buffer must be shared, and
   * the pair enabled */
  for (uint32_t i = 0; i < kd->nbuf; i++) {
    int owner = m->allocs[args[i].alloc].device;
    if (owner == device) continue;
    if (!kd->peer[i]) return outcome(CUBERT_ERR_WRONG_DEVICE, 0);
    if (!m->allocs[args[i].alloc].shared) return outcome(CUBERT_ERR_NOT_SHARED, 0);
    if (m->dev[device].peer[owner] != 1) return outcome(CUBERT_ERR_PEER_ACCESS, 0);
  }
  cb_fim_record *r = record_push(m, device, step);
  cb_fim_view outs[2];
  uint32_t nouts = 0;
  for (uint32_t i = 0; i < kd->nbuf; i++) {
    record_range(m, device, r, args[i], kd->access[i]);
    if (kd->access[i] & CUBERT_ACCESS_WRITE) outs[nouts++] = args[i];
  }
  /* rule 2: a kernel with a tainted input is not run; rule 8: nor one
   * reading shared memory of a lost device */
  cb_fim_mask in = 0;
  for (uint32_t i = 0; i < kd->nbuf; i++) {
    if (!(kd->access[i] & CUBERT_ACCESS_READ)) continue;
    int owner = m->allocs[args[i].alloc].device;
    if (owner != device && m->dev[owner].lost_cause >= 0)
      in |= cb_fim_bit(m->dev[owner].lost_cause);
    else
      in |= cb_fim_taint_of(m, args[i]);
  }
  if (in) {
    for (uint32_t i = 0; i < nouts; i++) cb_fim_taint(m, outs[i], in);
    r->failed = true;
    return outcome(CUBERT_ERR_TAINTED, in);
  }
  cb_fim_outcome o = outcome(CUBERT_OK, 0);
  bool async = false, scribble = false;
  const cb_fim_hit *c = hit_op(hits, "compile");
  if (c) {
    bool a2, s2;
    apply_hit(m, device, c, r, outs, nouts, &o, &a2, &s2);
    return o;
  }
  /* a peer output on a lost device: the fault layer refuses the launch */
  for (uint32_t i = 0; i < kd->nbuf; i++) {
    int owner = m->allocs[args[i].alloc].device;
    if (owner != device && (kd->access[i] & CUBERT_ACCESS_WRITE) && m->dev[owner].lost_cause >= 0) {
      cb_fim_mask lost = cb_fim_bit(m->dev[owner].lost_cause);
      for (uint32_t j = 0; j < nouts; j++) cb_fim_taint(m, outs[j], lost);
      r->failed = true;
      return outcome(CUBERT_ERR_DEVICE_LOST, lost);
    }
  }
  const cb_fim_hit *h = hit_op(hits, "launch");
  if (!h) h = hit_lost(hits);
  if (!h) h = hit_order(hits); /* ordering after another stream failed: rule 1, the claim carries it */
  if (apply_hit(m, device, h, r, outs, nouts, &o, &async, &scribble)) return o;
  compute(m, k, args, value);
  for (uint32_t i = 0; i < nouts; i++) cb_fim_taint(m, outs[i], 0);
  if (scribble) {
    for (uint32_t i = 0; i < nouts; i++) cb_fim_forget(m, outs[i]);
  }
  if (async) {
    pending_push(m, device, h->cause, h->status, h->fault == CUBERT_FAULT_ASYNC_DEVICE_LOST);
    o.pending = true;
  } else if (k == CB_FIM_FAIL_U32 && tag_cause >= 0) {
    /* the checker's own kernel fails when it runs: found at a fence */
    pending_push(m, device, tag_cause, CUBERT_ERR_LAUNCH, false);
    o.pending = true;
  }
  return o;
}

/* ------------------------------------------------------------ sharing */

cb_fim_outcome cb_fim_share(cb_fim *m, int owner, cb_fim_view v, cb_fim_hits hits) {
  if (m->dev[owner].lost_cause >= 0) return lost_outcome(m, owner);
  m->allocs[v.alloc].shared = true;
  cb_fim_outcome o = outcome(CUBERT_OK, 0);
  for (int e = 0; e < m->ndevices; e++) {
    if (e == owner) continue;
    cb_fim_device *d = &m->dev[e];
    if (d->peer[owner] == 0) {
      bool refused = d->lost_cause >= 0;
      for (size_t i = 0; i < hits.n; i++)
        if (hits.v[i].device == e && (strcmp(hits.v[i].operation, "peer_can_access") == 0 ||
                                      strcmp(hits.v[i].operation, "peer_enable") == 0))
          refused = true;
      d->peer[owner] = refused ? 2 : 1;
    }
    if (d->peer[owner] == 2) o.status = CUBERT_ERR_PEER_ACCESS;
  }
  return o;
}

/* ------------------------------------------------------------ fences */

/* Rule 8, replayed in enqueue order from the failed work. */
static void replay(cb_fim *m, cb_fim_device *d, const cb_fim_pending *p) {
  cb_fim_mask **bad = calloc((size_t)m->nallocs, sizeof *bad);
  if (!bad) return;
  cb_fim_record *w = &d->records[p->record];
  w->failed = true;
  cb_fim_mask f = cb_fim_bit(p->cause);
  for (uint32_t i = 0; i < w->n; i++) {
    cb_fim_range *g = &w->r[i];
    if (!(g->access & CUBERT_ACCESS_WRITE)) continue;
    if (!bad[g->alloc] && !(bad[g->alloc] = calloc(m->allocs[g->alloc].size, sizeof **bad))) goto out;
    for (uint64_t b = g->start; b < g->end; b++) bad[g->alloc][b] = f;
  }
  for (size_t j = p->record + 1; j < d->nrecords; j++) {
    cb_fim_record *r = &d->records[j];
    cb_fim_mask in = 0;
    for (uint32_t i = 0; i < r->n; i++) {
      cb_fim_range *g = &r->r[i];
      if (!(g->access & CUBERT_ACCESS_READ) || !bad[g->alloc]) continue;
      for (uint64_t b = g->start; b < g->end; b++) in |= bad[g->alloc][b];
    }
    /* Work that had failed already (at enqueue, or by an earlier replay)
     * and also read this failure's garbage had two tainted inputs: the
     * runtime names whichever failure it found first, and failures found at
     * fences arrive in the order the streams finished, so either root is
     * right (docs/failures.md, rule 8). Its outputs may carry both. */
    bool again = r->failed && in;
    if (in) r->failed = true; /* it ran on garbage: its outputs carry a child */
    for (uint32_t i = 0; i < r->n; i++) {
      cb_fim_range *g = &r->r[i];
      if (!(g->access & CUBERT_ACCESS_WRITE)) continue;
      if (!bad[g->alloc]) {
        if (!in) continue;
        if (!(bad[g->alloc] = calloc(m->allocs[g->alloc].size, sizeof **bad))) goto out;
      }
      const cb_fim_mask *had = m->allocs[g->alloc].taint;
      for (uint64_t b = g->start; b < g->end; b++) /* later writes keep their verdict */
        bad[g->alloc][b] = again ? in | had[b] : in;
    }
  }
  for (int a = 0; a < m->nallocs; a++) {
    if (!bad[a]) continue;
    cb_fim_alloc *al = &m->allocs[a];
    for (uint64_t b = 0; b < al->size; b++)
      if (bad[a][b]) {
        al->taint[b] = bad[a][b];
        al->known[b] = 0;
      }
  }
out:
  for (int a = 0; a < m->nallocs; a++) free(bad[a]);
  free(bad);
}

cb_fim_outcome cb_fim_sync(cb_fim *m, int device, cb_fim_hits hits) {
  cb_fim_device *d = &m->dev[device];
  if (d->lost_cause >= 0) return lost_outcome(m, device);
  const cb_fim_hit *h = hit_lost(hits);
  if (h) {
    mark_lost(m, device, h->cause);
    return lost_outcome(m, device);
  }
  h = hit_op(hits, "sync");
  if (h) /* the wait itself failed: it returns that, and found nothing */
    return outcome(h->status, cb_fim_bit(h->cause));
  cb_fim_outcome o = outcome(CUBERT_OK, 0);
  for (size_t i = 0; i < d->npending; i++) {
    cb_fim_record *w = &d->records[d->pending[i].record];
    if (w->failed) {
      /* it had already read an earlier failure's garbage, so its outputs
       * carry that failure's child; its own failure is as good a cause */
      for (uint32_t k = 0; k < w->n; k++) {
        cb_fim_range *g = &w->r[k];
        if (!(g->access & CUBERT_ACCESS_WRITE)) continue;
        cb_fim_alloc *a = &m->allocs[g->alloc];
        for (uint64_t b = g->start; b < g->end; b++)
          if (a->taint[b]) a->taint[b] |= cb_fim_bit(d->pending[i].cause);
      }
    } else {
      replay(m, d, &d->pending[i]);
    }
    if (!d->pending[i].reported) {
      if (o.status == CUBERT_OK) o.status = d->pending[i].status;
      o.also |= (uint64_t)1 << d->pending[i].status;
      o.roots |= cb_fim_bit(d->pending[i].cause);
    }
    if (d->pending[i].lost) mark_lost(m, device, d->pending[i].cause); /* the first found stays */
  }
  d->npending = 0;
  d->nrecords = 0; /* a full sync: everything completed */
  /* a sticky failure found at the fence: the device is lost, and the sync
   * says so whatever else it found */
  if (d->lost_cause >= 0) return lost_outcome(m, device);
  return o;
}

cb_fim_outcome cb_fim_sync_stream(cb_fim *m, int device, int stream, cb_fim_hits hits) {
  cb_fim_device *d = &m->dev[device];
  if (d->lost_cause >= 0) return lost_outcome(m, device);
  const cb_fim_hit *h = hit_lost(hits);
  if (h) {
    mark_lost(m, device, h->cause);
    return lost_outcome(m, device);
  }
  h = hit_op(hits, "sync");
  if (h) /* the wait itself failed: it returns that; what it found stays for later */
    return outcome(h->status, cb_fim_bit(h->cause));
  cb_fim_outcome o = outcome(CUBERT_OK, 0);
  for (size_t i = 0; i < d->npending; i++) {
    cb_fim_pending *p = &d->pending[i];
    if (p->lost) { /* found now or later: the device may be lost already */
      o.also |= (uint64_t)1 << CUBERT_ERR_DEVICE_LOST;
      o.roots |= cb_fim_bit(p->cause);
    }
    if (p->reported || d->records[p->record].stream != stream) continue;
    if (o.status == CUBERT_OK) o.status = p->status;
    o.also |= (uint64_t)1 << p->status;
    o.roots |= cb_fim_bit(p->cause);
    p->reported = true;
  }
  return o;
}
