/* faultinj/decorator.c: a backend ops table that wraps another, forwards
 * every call unchanged and fails the calls the rules select.
 *
 * Every decorated call starts with cb_fi_armed(): while no rule of the
 * runtime is set and no device is lost it forwards at once. When armed it checks the lost
 * devices, asks cb_fi_decide(), and applies the fault it gets. Faults that
 * touch memory go through the INNER ops with the call's own work number (a
 * scribble is an inner fill of garbage, a partial copy an inner copy of a
 * prefix), so what the runtime sees is what a real half-done call leaves. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "base/alloc.h"
#include "base/array.h"
#include "faultinj/decorator.h"

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/strided.h"
#include "faultinj/injector.h"
#include "runtime/fault_state.h"

/* ------------------------------------------------------------ states */

typedef struct fi_lost {
  atomic_int flag;
  char message[320];          /* written once under the backend lock, before flag */
} fi_lost;

typedef struct fi_backend {
  const cubert_backend_ops *ops;
  void *inner;
  int base, count;
  cb_fi_state *fi;            /* the runtime's rules and log (borrowed) */
  atomic_int *armed;          /* cb_fi_armed_flag(fi) */
  /* The lost devices' messages. */
  pthread_mutex_t lock;
  fi_lost *lost;              /* one per device; outlives the device states */
} fi_backend;

#if defined(__GNUC__)
#define CB_FI_NOINLINE __attribute__((noinline))
#else
#define CB_FI_NOINLINE
#endif

typedef struct fi_stream {
  void *inner;
  uint64_t id;                /* 1, 2, 3... per device, as the runtime numbers it */
} fi_stream;

typedef struct fi_module {
  void *inner;
  char kernel[];              /* the kernel's name, for kernel= filters */
} fi_module;

typedef struct fi_pending {
  uint64_t work;
  fi_stream *stream;          /* NULL once the stream is gone: report at once */
  cubert_async_failure failure;
} fi_pending;

typedef struct fi_device {
  fi_backend *b;
  const cubert_backend_ops *ops;
  void *inner;
  int local;                  /* index within the backend */
  int index;                  /* runtime-wide */
  uint64_t nstreams;
  /* Injected asynchronous failures not yet drained. drain_failures runs
   * beside other calls on the device, hence a lock of their own. */
  pthread_mutex_t lock;
  atomic_size_t npending;
  fi_pending *pending;
  size_t pcount, pcap;
  /* The scribble kernel, loaded on the first peer scribble (launch holds the
   * device lock, so no lock of its own). */
  void *scribbler;
  bool scribbler_failed;
} fi_device;

#define FI_MAX_PEERS 16

/* ------------------------------------------------------------ helpers */

static void set_err(cubert_berr *err, bool sticky, const char *message) {
  if (!err) return;
  err->sticky = sticky;
  cb_fi_copy(err->message, sizeof err->message, message);
}

/* Fails the call with the hit's status: "injected fault #N (rule R): ...";
 * the log record gets the same words. */
#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
static cubert_status inject(const fi_device *d, cubert_berr *err, const cb_fi_hit *hit, bool sticky, const char *fmt,
                            ...) {
  char what[400], msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(msg, sizeof msg, "injected fault #%llu (rule %u): %s", (unsigned long long)hit->id, hit->rule, what);
  set_err(err, sticky, msg);
  cb_fi_note(d->b->fi, hit->id, msg);
  return hit->status;
}

/* "launch of `k1` on device 0 stream 1 (work 12)" */
static void describe(char *buf, size_t cap, uint32_t op, const fi_device *d, const fi_stream *s,
                     uint64_t work, const char *kernel, int peer) {
  int n = snprintf(buf, cap, "%s", cb_fi_op_name(op));
  if (kernel && n >= 0 && (size_t)n < cap) n += snprintf(buf + n, cap - (size_t)n, " of `%s`", kernel);
  if (n >= 0 && (size_t)n < cap) n += snprintf(buf + n, cap - (size_t)n, " on device %d", d->index);
  if (s && n >= 0 && (size_t)n < cap)
    n += snprintf(buf + n, cap - (size_t)n, " stream %llu", (unsigned long long)s->id);
  if (peer >= 0 && n >= 0 && (size_t)n < cap)
    n += snprintf(buf + n, cap - (size_t)n, op == CB_FI_OP_COPY_PEER ? " from device %d" : " with device %d", peer);
  if (work && n >= 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, " (work %llu)", (unsigned long long)work);
}

static bool decide(const fi_device *d, const fi_stream *s, uint32_t op, uint32_t extra, uint64_t work,
                   const char *kernel, const int *peers, uint32_t npeers, cb_fi_hit *hit) {
  int rank = cb_failure_rank();
  cb_fi_call call = {op, op | extra, d->index, s ? s->id : 0, work, kernel, peers, npeers, rank < 0 ? 0 : rank};
  return cb_fi_decide(d->b->fi, &call, hit);
}

/* Whether device `local` of `b` is lost; if so the error says so (sticky
 * when it is the device called, not when it is the peer). */
static bool lost(fi_backend *b, int local, bool self, cubert_berr *err) {
  if (local < 0 || local >= b->count) return false;
  if (!atomic_load_explicit(&b->lost[local].flag, memory_order_acquire)) return false;
  char msg[512];
  pthread_mutex_lock(&b->lock);
  snprintf(msg, sizeof msg, "%sdevice %d is lost: %s", self ? "" : "peer ", b->base + local,
           b->lost[local].message);
  pthread_mutex_unlock(&b->lock);
  set_err(err, self, msg);
  return true;
}

/* Marks the device lost (the first cause stays): every later call fails. */
static void mark_lost(fi_device *d, const char *msg) {
  fi_backend *b = d->b;
  bool first = false;
  pthread_mutex_lock(&b->lock);
  if (!atomic_load_explicit(&b->lost[d->local].flag, memory_order_relaxed)) {
    cb_fi_copy(b->lost[d->local].message, sizeof b->lost[d->local].message, msg);
    atomic_store_explicit(&b->lost[d->local].flag, 1, memory_order_release);
    first = true;
  }
  pthread_mutex_unlock(&b->lock);
  if (first) cb_fi_lost_add(b->fi, 1);
}

static cubert_status lose(fi_device *d, const cb_fi_hit *hit, const char *what, cubert_berr *err) {
  char msg[320];
  snprintf(msg, sizeof msg, "injected fault #%llu (rule %u): device %d lost during %s",
           (unsigned long long)hit->id, hit->rule, d->index, what);
  mark_lost(d, msg);
  set_err(err, true, msg);
  cb_fi_note(d->b->fi, hit->id, msg);
  return CUBERT_ERR_DEVICE_LOST;
}

/* Garbage that depends only on the injection id (a replay scribbles alike). */
static void garbage(uint64_t id, unsigned char pattern[8]) {
  uint64_t s = id * 0x9E3779B97F4A7C15ull ^ 0x6A09E667F3BCC909ull;
  uint64_t v = cb_fi_splitmix64(&s);
  for (int i = 0; i < 8; i++) pattern[i] = (unsigned char)(v >> (8 * i));
}

/* floor(size * fraction), where the fraction was written in decimal: 0.3
 * is a hair under 3/10 in binary, and 0.3 of 1000 bytes must be 300. */
static uint64_t share(uint64_t size, double fraction) {
  long double n = (long double)size * fraction * (1.0L + 1e-12L);
  return n >= (long double)size ? size : (uint64_t)n;
}

/* Bytes a scribble covers: a share of the size, at least one byte. */
static uint64_t scribble_len(uint64_t size, double fraction) {
  uint64_t k = share(size, fraction);
  return k || !size ? k : 1;
}

/* Bytes a partial transfer moves: a share of the size, down to whole units. */
static uint64_t partial_len(uint64_t size, double fraction, uint64_t unit) {
  uint64_t k = share(size, fraction);
  return k - k % unit;
}

/* An inner fill of garbage over [address, address + len). */
static void scribble(fi_device *d, fi_stream *s, uint64_t work, uint64_t address, uint64_t len, uint64_t id) {
  if (len == 0) return;
  unsigned char pattern[8];
  garbage(id, pattern);
  uint32_t size = len % 8 == 0 ? 8 : len % 4 == 0 ? 4 : len % 2 == 0 ? 2 : 1;
  cubert_berr ignored;
  /* A refused fill leaves the bytes as they were; the call fails either way. */
  (void)d->ops->fill(d->inner, s->inner, work, address, pattern, size, len, &ignored);
}

/* Garbage over a peer's memory. A backend fills only its own device's
 * memory (the host backend refuses anything else, as a copy engine might),
 * but the launch being failed could write the peer through its binding, so
 * the garbage goes the same way: a tiny kernel launched on the same stream,
 * writing through a peer binding. Falls back to a fill when the backend
 * cannot load or launch it. */
static const char scribble_source[] =
    "extern \"C\" __global__ void cubert_faultinj_scribble(unsigned char *dst, unsigned long long n,\n"
    "                                                      unsigned long long pattern) {\n"
    "  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "       i += stride)\n"
    "    dst[i] = (unsigned char)(pattern >> (8 * (i % 8)));\n"
    "}\n";

static cubert_status scribble_host_fn(const cubert_host_launch *l, char *message, size_t capacity) {
  unsigned char *dst = l->args[0];
  uint64_t n, pattern;
  memcpy(&n, l->args[1], 8);
  memcpy(&pattern, l->args[2], 8);
  for (uint64_t i = 0; i < n; i++) dst[i] = (unsigned char)(pattern >> (8 * (i % 8)));
  return CUBERT_OK;
}

static const cubert_param scribble_params[] = {
    {"dst", CUBERT_PARAM_PEER_BUFFER, CUBERT_ACCESS_WRITE, 0},
    {"n", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 8},
    {"pattern", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 8},
};

static void scribble_peer(fi_device *d, fi_stream *s, uint64_t work, uint64_t address, uint64_t len, uint64_t id,
                          void *owner) {
  if (len == 0) return;
  cubert_berr ignored;
  if (!d->scribbler && !d->scribbler_failed) {
    cubert_backend_kernel k = {"cubert_faultinj_scribble", "cubert_faultinj_scribble", scribble_source, NULL,
                               NULL, 0, scribble_host_fn, scribble_params, 3, cb_fnv1a64_str(scribble_source)};
    d->scribbler_failed = d->ops->module_load(d->inner, &k, &d->scribbler, &ignored) != CUBERT_OK;
    if (d->scribbler_failed) d->scribbler = NULL;
  }
  if (d->scribbler) {
    unsigned char bytes[8];
    garbage(id, bytes);
    uint64_t pattern = 0;
    for (int i = 0; i < 8; i++) pattern |= (uint64_t)bytes[i] << (8 * i);
    uint64_t blocks = (len + 255) / 256;
    cubert_launch_config cfg = {{blocks < 1024 ? (uint32_t)blocks : 1024, 1, 1}, {256, 1, 1}, 0};
    cubert_backend_arg args[3] = {
        {CUBERT_PARAM_PEER_BUFFER, CUBERT_ACCESS_WRITE, address, len, NULL, 0, owner},
        {CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 0, 0, &len, 8, NULL},
        {CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 0, 0, &pattern, 8, NULL},
    };
    if (d->ops->launch(d->inner, s->inner, work, d->scribbler, &cfg, args, 3, &ignored) == CUBERT_OK) return;
  }
  scribble(d, s, work, address, len, id);
}

/* Garbage over the first share of every range a launch writes. Returns the
 * bytes covered; `outputs` gets how many ranges. */
static uint64_t scribble_outputs(fi_device *d, fi_stream *s, uint64_t work, const cubert_backend_arg *args,
                                 uint32_t nargs, double fraction, uint64_t id, uint32_t *outputs) {
  uint64_t bytes = 0;
  *outputs = 0;
  for (uint32_t i = 0; i < nargs; i++) {
    /* a tensor's footprint is not one range: scribbling the range around it
     * would write bytes the launch never claimed, so tensors are left alone */
    if (args[i].kind == CUBERT_PARAM_SCALAR || args[i].kind == CUBERT_PARAM_TENSOR ||
        !(args[i].access & CUBERT_ACCESS_WRITE))
      continue;
    uint64_t len = scribble_len(args[i].size, fraction);
    if (args[i].kind == CUBERT_PARAM_PEER_BUFFER)
      scribble_peer(d, s, work, args[i].address, len, id, args[i].owner ? ((fi_device *)args[i].owner)->inner : NULL);
    else scribble(d, s, work, args[i].address, len, id);
    bytes += len;
    (*outputs)++;
  }
  return bytes;
}

/* Queues an asynchronous failure for drain_failures, once the inner stream
 * has run the work; async-device-lost queues it sticky (the device is lost
 * when it is drained). */
static cubert_status defer(fi_device *d, fi_stream *s, uint64_t work, const cb_fi_hit *hit, const char *what,
                           cubert_berr *err) {
  char msg[512];
  bool sticky = hit->fault == CUBERT_FAULT_ASYNC_DEVICE_LOST;
  snprintf(msg, sizeof msg, "injected fault #%llu (rule %u): %s %s when it ran (reported at sync)",
           (unsigned long long)hit->id, hit->rule, what, sticky ? "lost its device" : "failed");
  cb_fi_note(d->b->fi, hit->id, msg);
  pthread_mutex_lock(&d->lock);
  if (d->pcount == d->pcap) {
    size_t ncap = 0;
    fi_pending *n = cb_array_grow(d->pending, d->pcap, d->pcount + 1, sizeof *n, &ncap);
    if (!n) {
      pthread_mutex_unlock(&d->lock);
      /* Cannot remember it: fail at enqueue instead, never lose it. */
      set_err(err, false, msg);
      return hit->status;
    }
    d->pending = n;
    d->pcap = ncap;
  }
  fi_pending *p = &d->pending[d->pcount++];
  memset(p, 0, sizeof *p);
  p->work = work;
  p->stream = s;
  p->failure.work = work;
  p->failure.status = hit->status;
  p->failure.sticky = sticky;
  cb_fi_copy(p->failure.message, sizeof p->failure.message, msg);
  atomic_store_explicit(&d->npending, d->pcount, memory_order_release);
  pthread_mutex_unlock(&d->lock);
  return CUBERT_OK;
}

/* ------------------------------------------------------------ work that writes device memory */

/* write, fill, copy and copy_peer differ only in how they are forwarded. */
typedef struct fi_work {
  fi_device *d;
  fi_stream *s;
  uint64_t work;
  uint32_t op;
  uint64_t dst, size;
  const void *host_src;       /* write */
  bool host_buffer;           /* write: from a host buffer (write_host) */
  const void *pattern;        /* fill */
  uint32_t pattern_size;
  uint64_t src;               /* copy, copy_peer */
  fi_device *src_device;      /* copy_peer */
  const cubert_backend_strided *layout; /* a strided transfer: size is its bytes */
  cubert_backend_direction direction;
} fi_work;

/* Forwards the first `size` bytes (whole runs) of a strided transfer. */
static cubert_status forward_strided(const fi_work *w, uint64_t size, cubert_berr *err) {
  cubert_backend_strided l = *w->layout;
  l.nruns = l.run ? size / l.run : 0;
  if (l.nruns > w->layout->nruns) l.nruns = w->layout->nruns;
  return w->d->ops->copy_strided(w->d->inner, w->s->inner, w->work, w->direction, w->dst,
                                 w->src_device ? w->src_device->inner : NULL, w->src, &l, err);
}

typedef struct scribble_ctx {
  fi_device *d;
  fi_stream *s;
  uint64_t work, dst, left, id;
} scribble_ctx;

static void scribble_run(void *ctx, uint64_t off, uint64_t len) {
  scribble_ctx *c = ctx;
  uint64_t n = len < c->left ? len : c->left;
  scribble(c->d, c->s, c->work, c->dst + off, n, c->id);
  c->left -= n;
}

/* Garbage over the first `len` bytes of the destination's footprint, run
 * by run: never over the bytes between the runs, which the transfer would
 * not have written (and the runtime does not taint). */
static void scribble_strided(const fi_work *w, uint64_t len, uint64_t id) {
  scribble_ctx c = {w->d, w->s, w->work, w->dst, len, id};
  uint64_t runs = w->layout->run ? (len + w->layout->run - 1) / w->layout->run : 0;
  cb_strided_each_dst(w->layout, runs < w->layout->nruns ? runs : w->layout->nruns, scribble_run, &c);
}

static cubert_status forward_work(const fi_work *w, uint64_t size, cubert_berr *err) {
  const cubert_backend_ops *o = w->d->ops;
  void *dev = w->d->inner, *st = w->s->inner;
  if (w->layout) return forward_strided(w, size, err);
  switch (w->op) {
  case CB_FI_OP_WRITE:
    if (w->host_buffer) return o->write_host(dev, st, w->work, w->dst, w->host_src, size, err);
    return o->write(dev, st, w->work, w->dst, w->host_src, size, err);
  case CB_FI_OP_FILL:
    return o->fill(dev, st, w->work, w->dst, w->pattern, w->pattern_size, size, err);
  case CB_FI_OP_COPY:
    return o->copy(dev, st, w->work, w->dst, w->src, size, err);
  default:
    return o->copy_peer(dev, st, w->work, w->dst, w->src_device->inner, w->src, size, err);
  }
}

static cubert_status run_work(const fi_work *w, cubert_berr *err) {
  fi_device *d = w->d;
  if (!cb_fi_armed(d->b->armed)) return forward_work(w, w->size, err);
  if (lost(d->b, d->local, true, err)) return CUBERT_ERR_DEVICE_LOST;
  int peer = -1;
  uint32_t extra = 0;
  if (w->op == CB_FI_OP_COPY_PEER) {
    peer = w->src_device->index;
    extra = CB_FI_OP_PEER_WRITE;
    if (lost(d->b, w->src_device->local, false, err)) return CUBERT_ERR_DEVICE_LOST;
  }
  cb_fi_hit hit;
  if (!decide(d, w->s, w->op, extra, w->work, NULL, &peer, peer >= 0, &hit)) return forward_work(w, w->size, err);
  char what[256];
  describe(what, sizeof what, w->op, d, w->s, w->work, NULL, peer);
  unsigned long long size = (unsigned long long)w->size;
  switch (hit.fault) {
  case CUBERT_FAULT_SCRIBBLE: {
    uint64_t len = scribble_len(w->size, hit.fraction);
    if (w->layout) scribble_strided(w, len, hit.id);
    else scribble(d, w->s, w->work, w->dst, len, hit.id);
    return inject(d, err, &hit, false, "%s failed after scribbling garbage over %llu of its %llu bytes", what,
                  (unsigned long long)len, size);
  }
  case CUBERT_FAULT_PARTIAL: {
    uint64_t unit = w->layout ? w->layout->run : w->op == CB_FI_OP_FILL && w->pattern_size ? w->pattern_size : 1;
    uint64_t len = partial_len(w->size, hit.fraction, unit);
    cubert_berr ignored;
    if (len) (void)forward_work(w, len, &ignored);
    return inject(d, err, &hit, false, "%s stopped after %llu of %llu bytes", what, (unsigned long long)len, size);
  }
  case CUBERT_FAULT_DEVICE_LOST:
    return lose(d, &hit, what, err);
  case CUBERT_FAULT_ASYNC:
  case CUBERT_FAULT_ASYNC_SCRIBBLE:
  case CUBERT_FAULT_ASYNC_DEVICE_LOST: {
    cubert_status st = forward_work(w, w->size, err);
    if (st != CUBERT_OK) return st;
    if (hit.fault == CUBERT_FAULT_ASYNC_SCRIBBLE) {
      if (w->layout) scribble_strided(w, scribble_len(w->size, hit.fraction), hit.id);
      else scribble(d, w->s, w->work, w->dst, scribble_len(w->size, hit.fraction), hit.id);
    }
    return defer(d, w->s, w->work, &hit, what, err);
  }
  default:
    return inject(d, err, &hit, false, "%s failed", what);
  }
}

/* ------------------------------------------------------------ the ops */

static cubert_status fi_open_refused(const cubert_backend_config *config, void **backend, int *device_count,
                                     cubert_berr *err) {
  set_err(err, false, "the fault layer opens through cb_faultinj_open(inner, device_base, ...)");
  return CUBERT_ERR_UNSUPPORTED;
}

static void fi_close(void *backend) {
  fi_backend *b = backend;
  b->ops->close(b->inner);
  int nlost = 0;
  for (int i = 0; i < b->count; i++) nlost += atomic_load(&b->lost[i].flag) != 0;
  if (nlost) cb_fi_lost_add(b->fi, -nlost);
  pthread_mutex_destroy(&b->lock);
  cb_free(b->lost);
  cb_free(b);
}

static cubert_status fi_device_open(void *backend, int index, void **device, cubert_device_info *info,
                                    cubert_berr *err) {
  fi_backend *b = backend;
  fi_device *d = cb_calloc(1, sizeof *d);
  if (!d) {
    set_err(err, false, "fault layer: out of host memory opening a device");
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  d->b = b;
  d->ops = b->ops;
  d->local = index;
  d->index = b->base + index;
  if (cb_fi_armed(d->b->armed)) {
    cb_fi_hit hit;
    char what[64];
    cubert_status st = CUBERT_OK;
    if (lost(b, index, true, err)) st = CUBERT_ERR_DEVICE_LOST;
    else if (decide(d, NULL, CB_FI_OP_DEVICE_OPEN, 0, 0, NULL, NULL, 0, &hit)) {
      describe(what, sizeof what, CB_FI_OP_DEVICE_OPEN, d, NULL, 0, NULL, -1);
      st = (hit.fault == CUBERT_FAULT_DEVICE_LOST && index >= 0 && index < b->count)
               ? lose(d, &hit, what, err)
               : inject(d, err, &hit, hit.fault == CUBERT_FAULT_DEVICE_LOST, "%s failed", what);
    }
    if (st != CUBERT_OK) {
      cb_free(d);
      return st;
    }
  }
  cubert_status st = b->ops->device_open(b->inner, index, &d->inner, info, err);
  if (st != CUBERT_OK) {
    cb_free(d);
    return st;
  }
  pthread_mutex_init(&d->lock, NULL);
  atomic_init(&d->npending, 0);
  *device = d;
  return CUBERT_OK;
}

static void fi_device_close(void *device) {
  fi_device *d = device;
  if (d->scribbler) d->ops->module_unload(d->inner, d->scribbler);
  d->ops->device_close(d->inner);
  pthread_mutex_destroy(&d->lock);
  cb_free(d->pending);
  cb_free(d);
}

static cubert_status fi_mem_alloc(void *device, uint64_t size, cubert_backend_mem *mem, cubert_berr *err) {
  fi_device *d = device;
  if (cb_fi_armed(d->b->armed)) {
    if (lost(d->b, d->local, true, err)) return CUBERT_ERR_DEVICE_LOST;
    cb_fi_hit hit;
    if (decide(d, NULL, CB_FI_OP_ALLOC, 0, 0, NULL, NULL, 0, &hit)) {
      char what[64];
      describe(what, sizeof what, CB_FI_OP_ALLOC, d, NULL, 0, NULL, -1);
      if (hit.fault == CUBERT_FAULT_DEVICE_LOST) return lose(d, &hit, what, err);
      return inject(d, err, &hit, false, "allocation of %llu bytes on device %d failed", (unsigned long long)size,
                    d->index);
    }
  }
  return d->ops->mem_alloc(d->inner, size, mem, err);
}

static void fi_mem_free(void *device, cubert_backend_mem *mem) {
  fi_device *d = device;
  d->ops->mem_free(d->inner, mem);
}

static cubert_status fi_mem_export(void *device, const cubert_backend_mem *mem,
                                   unsigned char ipc[CUBERT_BACKEND_IPC_SIZE], cubert_berr *err) {
  fi_device *d = device;
  if (!d->ops->mem_export)
    return cubert_berr_set(err, CUBERT_ERR_UNSUPPORTED, "backend %s shares no memory between processes", d->ops->name);
  return d->ops->mem_export(d->inner, mem, ipc, err);
}

static cubert_status fi_mem_import(void *device, const unsigned char ipc[CUBERT_BACKEND_IPC_SIZE], uint64_t size,
                                   cubert_backend_mem *mem, cubert_berr *err) {
  fi_device *d = device;
  if (!d->ops->mem_import)
    return cubert_berr_set(err, CUBERT_ERR_UNSUPPORTED, "backend %s shares no memory between processes", d->ops->name);
  return d->ops->mem_import(d->inner, ipc, size, mem, err);
}

/* A plain failure for calls that only fail or lose the device. */
static bool plain_fault(fi_device *d, fi_stream *s, uint32_t op, int peer, cubert_berr *err, cubert_status *st) {
  if (lost(d->b, d->local, true, err)) {
    *st = CUBERT_ERR_DEVICE_LOST;
    return true;
  }
  if (peer >= 0 && lost(d->b, peer - d->b->base, false, err)) {
    *st = CUBERT_ERR_DEVICE_LOST;
    return true;
  }
  cb_fi_hit hit;
  if (!decide(d, s, op, 0, 0, NULL, &peer, peer >= 0, &hit)) return false;
  char what[128];
  describe(what, sizeof what, op, d, s, 0, NULL, peer);
  *st = hit.fault == CUBERT_FAULT_DEVICE_LOST ? lose(d, &hit, what, err) : inject(d, err, &hit, false, "%s failed", what);
  return true;
}

static cubert_status fi_stream_create(void *device, void **stream, cubert_berr *err) {
  fi_device *d = device;
  cubert_status st;
  if (cb_fi_armed(d->b->armed) && plain_fault(d, NULL, CB_FI_OP_STREAM_CREATE, -1, err, &st)) return st;
  fi_stream *s = cb_malloc(sizeof *s);
  if (!s) {
    set_err(err, false, "fault layer: out of host memory creating a stream");
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  st = d->ops->stream_create(d->inner, &s->inner, err);
  if (st != CUBERT_OK) {
    cb_free(s);
    return st;
  }
  s->id = ++d->nstreams;
  *stream = s;
  return CUBERT_OK;
}

static void fi_stream_destroy(void *device, void *stream) {
  fi_device *d = device;
  fi_stream *s = stream;
  pthread_mutex_lock(&d->lock);
  for (size_t i = 0; i < d->pcount; i++)
    if (d->pending[i].stream == s) d->pending[i].stream = NULL;
  pthread_mutex_unlock(&d->lock);
  d->ops->stream_destroy(d->inner, s->inner);
  cb_free(s);
}

static cubert_status fi_event_record(void *device, void *stream, void **event, cubert_berr *err) {
  fi_device *d = device;
  fi_stream *s = stream;
  cubert_status st;
  if (cb_fi_armed(d->b->armed) && plain_fault(d, s, CB_FI_OP_EVENT_RECORD, -1, err, &st)) return st;
  return d->ops->event_record(d->inner, s->inner, event, err);
}

static cubert_status fi_stream_wait(void *device, void *stream, void *event, cubert_berr *err) {
  fi_device *d = device;
  fi_stream *s = stream;
  cubert_status st;
  if (cb_fi_armed(d->b->armed) && plain_fault(d, s, CB_FI_OP_STREAM_WAIT, -1, err, &st)) return st;
  return d->ops->stream_wait(d->inner, s->inner, event, err);
}

static void fi_event_destroy(void *device, void *event) {
  fi_device *d = device;
  d->ops->event_destroy(d->inner, event);
}

static cubert_status fi_write(void *device, void *stream, uint64_t work, uint64_t dst, const void *src,
                              uint64_t size, cubert_berr *err) {
  fi_device *d = device;
  /* Unarmed: what run_work does then (forward_work of a plain write),
   * without building the fi_work first. The 4-byte write is issue 15's
   * tightest target: the fault layer cost it 0.03 us a call on the H200
   * (docs/bench.md, "The 4-byte h2d write, each call timed"). */
  if (!cb_fi_armed(d->b->armed)) return d->ops->write(d->inner, ((fi_stream *)stream)->inner, work, dst, src, size, err);
  fi_work w = {.d = device, .s = stream, .work = work, .op = CB_FI_OP_WRITE, .dst = dst, .size = size, .host_src = src};
  return run_work(&w, err);
}

static cubert_status fi_fill(void *device, void *stream, uint64_t work, uint64_t dst, const void *pattern,
                             uint32_t pattern_size, uint64_t size, cubert_berr *err) {
  fi_work w = {.d = device, .s = stream, .work = work, .op = CB_FI_OP_FILL, .dst = dst, .size = size,
               .pattern = pattern, .pattern_size = pattern_size};
  return run_work(&w, err);
}

static cubert_status fi_copy(void *device, void *stream, uint64_t work, uint64_t dst, uint64_t src, uint64_t size,
                             cubert_berr *err) {
  fi_work w = {.d = device, .s = stream, .work = work, .op = CB_FI_OP_COPY, .dst = dst, .size = size, .src = src};
  return run_work(&w, err);
}

static cubert_status fi_copy_peer(void *device, void *stream, uint64_t work, uint64_t dst, void *src_device,
                                  uint64_t src, uint64_t size, cubert_berr *err) {
  fi_work w = {.d = device, .s = stream, .work = work, .op = CB_FI_OP_COPY_PEER, .dst = dst, .size = size,
               .src = src, .src_device = src_device};
  return run_work(&w, err);
}

static cubert_status fi_copy_strided(void *device, void *stream, uint64_t work, cubert_backend_direction direction,
                                     uint64_t dst, void *src_device, uint64_t src,
                                     const cubert_backend_strided *layout, cubert_berr *err) {
  fi_device *d = device;
  fi_stream *s = stream;
  fi_device *from = src_device;
  if (direction == CUBERT_BACKEND_DEVICE_TO_HOST) {
    /* a read: it fails, stops part way or loses the device, writing no
     * device memory */
    if (!cb_fi_armed(d->b->armed))
      return d->ops->copy_strided(d->inner, s->inner, work, direction, dst, NULL, src, layout, err);
    if (lost(d->b, d->local, true, err)) return CUBERT_ERR_DEVICE_LOST;
    cb_fi_hit hit;
    if (!decide(d, s, CB_FI_OP_READ, 0, work, NULL, NULL, 0, &hit))
      return d->ops->copy_strided(d->inner, s->inner, work, direction, dst, NULL, src, layout, err);
    char what[160];
    describe(what, sizeof what, CB_FI_OP_READ, d, s, work, NULL, -1);
    if (hit.fault == CUBERT_FAULT_DEVICE_LOST) return lose(d, &hit, what, err);
    return inject(d, err, &hit, false, "%s (strided) failed", what);
  }
  uint32_t op = direction == CUBERT_BACKEND_HOST_TO_DEVICE     ? CB_FI_OP_WRITE
                : direction == CUBERT_BACKEND_DEVICE_TO_DEVICE ? CB_FI_OP_COPY
                                                               : CB_FI_OP_COPY_PEER;
  fi_work w = {.d = d, .s = s, .work = work, .op = op, .dst = dst, .size = layout->nruns * layout->run,
               .src = src, .src_device = direction == CUBERT_BACKEND_PEER_TO_DEVICE ? from : NULL,
               .layout = layout, .direction = direction};
  return run_work(&w, err);
}

/* A read forwarded: into the caller's memory (read, waits) or into a host
 * buffer (read_host, queued like a copy). */
static cubert_status forward_read(fi_device *d, fi_stream *s, bool host_buffer, uint64_t work, void *dst,
                                  uint64_t src, uint64_t size, cubert_berr *err) {
  if (host_buffer) return d->ops->read_host(d->inner, s->inner, work, dst, src, size, err);
  return d->ops->read(d->inner, s->inner, work, dst, src, size, err);
}

/* read and read_host: the same faults, selected by the same `read` rules.
 * A read into a host buffer is work the runtime records, so it may also
 * fail later, at a fence (the async faults); a plain read waits, so for it
 * they fail the call. */
static cubert_status run_read(fi_device *d, fi_stream *s, bool host_buffer, uint64_t work, void *dst, uint64_t src,
                              uint64_t size, cubert_berr *err) {
  if (!cb_fi_armed(d->b->armed)) return forward_read(d, s, host_buffer, work, dst, src, size, err);
  if (lost(d->b, d->local, true, err)) return CUBERT_ERR_DEVICE_LOST;
  cb_fi_hit hit;
  if (!decide(d, s, CB_FI_OP_READ, 0, work, NULL, NULL, 0, &hit))
    return forward_read(d, s, host_buffer, work, dst, src, size, err);
  char what[160];
  describe(what, sizeof what, CB_FI_OP_READ, d, s, work, NULL, -1);
  switch (hit.fault) {
  case CUBERT_FAULT_SCRIBBLE: {
    uint64_t len = scribble_len(size, hit.fraction);
    unsigned char pattern[8];
    garbage(hit.id, pattern);
    for (uint64_t i = 0; i < len; i++) ((unsigned char *)dst)[i] = pattern[i % 8];
    return inject(d, err, &hit, false, "%s failed after scribbling garbage over %llu of %llu bytes", what,
                  (unsigned long long)len, (unsigned long long)size);
  }
  case CUBERT_FAULT_PARTIAL: {
    uint64_t len = partial_len(size, hit.fraction, 1);
    cubert_berr ignored;
    if (len) (void)forward_read(d, s, host_buffer, work, dst, src, len, &ignored);
    return inject(d, err, &hit, false, "%s stopped after %llu of %llu bytes", what, (unsigned long long)len,
                  (unsigned long long)size);
  }
  case CUBERT_FAULT_DEVICE_LOST:
    return lose(d, &hit, what, err);
  case CUBERT_FAULT_ASYNC:
  case CUBERT_FAULT_ASYNC_SCRIBBLE:
  case CUBERT_FAULT_ASYNC_DEVICE_LOST:
    if (host_buffer) {
      cubert_status st = forward_read(d, s, true, work, dst, src, size, err);
      if (st != CUBERT_OK) return st;
      return defer(d, s, work, &hit, what, err);
    }
    return inject(d, err, &hit, false, "%s failed", what);
  default:
    return inject(d, err, &hit, false, "%s failed", what);
  }
}

static cubert_status fi_read(void *device, void *stream, uint64_t work, void *dst, uint64_t src, uint64_t size,
                             cubert_berr *err) {
  return run_read(device, stream, false, work, dst, src, size, err);
}

static cubert_status fi_read_host(void *device, void *stream, uint64_t work, void *dst, uint64_t src,
                                  uint64_t size, cubert_berr *err) {
  return run_read(device, stream, true, work, dst, src, size, err);
}

static cubert_status fi_write_host(void *device, void *stream, uint64_t work, uint64_t dst, const void *src,
                                   uint64_t size, cubert_berr *err) {
  fi_work w = {.d = device, .s = stream, .work = work, .op = CB_FI_OP_WRITE, .dst = dst, .size = size,
               .host_src = src, .host_buffer = true};
  return run_work(&w, err);
}

/* Host buffers' memory is forwarded as it is (no rule selects it). */
static cubert_status fi_host_alloc(void *device, cubert_backend_host_mem *mem, cubert_berr *err) {
  fi_device *d = device;
  return d->ops->host_alloc(d->inner, mem, err);
}

static cubert_status fi_host_register(void *device, cubert_backend_host_mem *mem, cubert_berr *err) {
  fi_device *d = device;
  return d->ops->host_register(d->inner, mem, err);
}

static void fi_host_free(void *device, cubert_backend_host_mem *mem) {
  fi_device *d = device;
  d->ops->host_free(d->inner, mem);
}

static cubert_status fi_module_load(void *device, const cubert_backend_kernel *kernel, void **module,
                                    cubert_berr *err) {
  fi_device *d = device;
  const char *name = kernel->name ? kernel->name : kernel->entry ? kernel->entry : "";
  if (cb_fi_armed(d->b->armed)) {
    if (lost(d->b, d->local, true, err)) return CUBERT_ERR_DEVICE_LOST;
    cb_fi_hit hit;
    if (decide(d, NULL, CB_FI_OP_COMPILE, 0, 0, name, NULL, 0, &hit)) {
      char what[256];
      describe(what, sizeof what, CB_FI_OP_COMPILE, d, NULL, 0, name, -1);
      if (hit.fault == CUBERT_FAULT_DEVICE_LOST) return lose(d, &hit, what, err);
      return inject(d, err, &hit, false, "%s failed", what);
    }
  }
  size_t len = strlen(name);
  fi_module *m = cb_malloc(sizeof *m + len + 1);
  if (!m) {
    set_err(err, false, "fault layer: out of host memory loading a module");
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  memcpy(m->kernel, name, len + 1);
  cubert_status st = d->ops->module_load(d->inner, kernel, &m->inner, err);
  if (st != CUBERT_OK) {
    cb_free(m);
    return st;
  }
  *module = m;
  return CUBERT_OK;
}

/* No fault is decided here: a prepare changes nothing a call sees, and the
 * compile's faults are decided in module_load (backend.h). */
static void fi_module_prepare(void *device, const cubert_backend_kernel *kernel) {
  fi_device *d = device;
  if (d->ops->module_prepare) d->ops->module_prepare(d->inner, kernel);
}

static void fi_module_unload(void *device, void *module) {
  fi_device *d = device;
  fi_module *m = module;
  d->ops->module_unload(d->inner, m->inner);
  cb_free(m);
}

/* Whether some argument names an owner (a peer buffer): one OR a binding,
 * no branch (the usual launch has none). */
static inline bool any_owner(const cubert_backend_arg *args, uint32_t nargs) {
  uintptr_t owners = 0;
  for (uint32_t i = 0; i < nargs; i++) owners |= (uintptr_t)args[i].owner;
  return owners != 0;
}

/* The inner launch of arguments naming owners: peer buffers name their
 * owner by the inner backend's device state, not the layer's wrapper. Out
 * of line: the usual launch (no owner) calls the inner launch directly
 * (forward_launch), one frame and a tail call. */
static CB_FI_NOINLINE cubert_status forward_owners(fi_device *d, fi_stream *s, uint64_t work, fi_module *m,
                                                   const cubert_launch_config *config,
                                                   const cubert_backend_arg *args, uint32_t nargs, cubert_berr *err) {
  cubert_backend_arg stack[16];
  cubert_backend_arg *copy = stack;
  if (nargs > 16 && !(copy = cb_malloc(nargs * sizeof *copy))) {
    set_err(err, false, "fault layer: out of host memory forwarding a launch");
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  const cubert_backend_arg *fwd = args; /* some owner: nargs >= 1, each copied */
  if (nargs) {
    for (uint32_t i = 0; i < nargs; i++) {
      copy[i] = args[i];
      if (args[i].owner) copy[i].owner = ((fi_device *)args[i].owner)->inner;
    }
    fwd = copy;
  }
  cubert_status st = d->ops->launch(d->inner, s->inner, work, m->inner, config, fwd, nargs, err);
  if (copy != stack) cb_free(copy);
  return st;
}

/* The inner launch. */
static inline cubert_status forward_launch(fi_device *d, fi_stream *s, uint64_t work, fi_module *m,
                                           const cubert_launch_config *config, const cubert_backend_arg *args,
                                           uint32_t nargs, cubert_berr *err) {
  if (any_owner(args, nargs)) return forward_owners(d, s, work, m, config, args, nargs, err);
  return d->ops->launch(d->inner, s->inner, work, m->inner, config, args, nargs, err);
}

static cubert_status fi_launch(void *device, void *stream, uint64_t work, void *module,
                               const cubert_launch_config *config, const cubert_backend_arg *args, uint32_t nargs,
                               cubert_berr *err) {
  fi_device *d = device;
  fi_stream *s = stream;
  fi_module *m = module;
  if (!cb_fi_armed(d->b->armed)) return forward_launch(d, s, work, m, config, args, nargs, err);
  if (lost(d->b, d->local, true, err)) return CUBERT_ERR_DEVICE_LOST;

  /* The other devices: owners of the peer buffers it binds (the argument
   * names its allocation's owner: backend.h). */
  int peers[FI_MAX_PEERS];
  uint32_t npeers = 0, extra = 0;
  for (uint32_t i = 0; i < nargs; i++) {
    if (args[i].kind != CUBERT_PARAM_PEER_BUFFER) continue;
    if (args[i].access & CUBERT_ACCESS_WRITE) extra |= CB_FI_OP_PEER_WRITE;
    const fi_device *o = args[i].owner;
    if (!o) continue;
    if (lost(d->b, o->local, false, err)) return CUBERT_ERR_DEVICE_LOST;
    bool seen = false;
    for (uint32_t k = 0; k < npeers; k++) seen |= peers[k] == o->index;
    if (!seen && npeers < FI_MAX_PEERS) peers[npeers++] = o->index;
  }
  cb_fi_hit hit;
  if (!decide(d, s, CB_FI_OP_LAUNCH, extra, work, m->kernel, peers, npeers, &hit))
    return forward_launch(d, s, work, m, config, args, nargs, err);
  char what[256];
  describe(what, sizeof what, CB_FI_OP_LAUNCH, d, s, work, m->kernel, npeers ? peers[0] : -1);

  switch (hit.fault) {
  case CUBERT_FAULT_SCRIBBLE: {
    uint32_t outputs;
    uint64_t bytes = scribble_outputs(d, s, work, args, nargs, hit.fraction, hit.id, &outputs);
    return inject(d, err, &hit, false, "%s failed after scribbling garbage over %llu bytes of %u output%s", what,
                  (unsigned long long)bytes, outputs, outputs == 1 ? "" : "s");
  }
  case CUBERT_FAULT_DEVICE_LOST:
    return lose(d, &hit, what, err);
  case CUBERT_FAULT_ASYNC:
  case CUBERT_FAULT_ASYNC_SCRIBBLE:
  case CUBERT_FAULT_ASYNC_DEVICE_LOST: {
    cubert_status st = forward_launch(d, s, work, m, config, args, nargs, err);
    if (st != CUBERT_OK) return st;
    if (hit.fault == CUBERT_FAULT_ASYNC_SCRIBBLE) {
      uint32_t outputs;
      (void)scribble_outputs(d, s, work, args, nargs, hit.fraction, hit.id, &outputs);
    }
    return defer(d, s, work, &hit, what, err);
  }
  default:
    return inject(d, err, &hit, false, "%s failed before writing", what);
  }
}

/* An image launch the inner backend cannot take as one, or one a rule may
 * decide on: its arguments as records, through fi_launch (rules, the
 * scribbles, the inner launch). Out of line: the usual launch (no rule, an
 * inner backend that takes images) is forwarded from fi_launch_image's
 * frame. */
static CB_FI_NOINLINE cubert_status image_as_args(void *device, void *stream, uint64_t work, void *module,
                                                  const cubert_launch_config *config,
                                                  const cubert_backend_image *image, cubert_berr *err) {
  cubert_backend_arg stack[16];
  cubert_backend_arg *args = stack;
  uint32_t nargs = image && image->layout ? image->layout->nargs : 0;
  if (nargs > 16 && !(args = cb_malloc(nargs * sizeof *args))) {
    set_err(err, false, "fault layer: out of host memory forwarding a launch");
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  if (!nargs) return fi_launch(device, stream, work, module, config, NULL, 0, err);
  cubert_backend_args_of_image(image, args);
  cubert_status st = fi_launch(device, stream, work, module, config, args, nargs, err);
  if (args != stack) cb_free(args);
  return st;
}

/* With no rule, the image goes to the inner backend as it is (it names no
 * owner to translate: backend.h); otherwise, or when the inner backend
 * takes no images, as records through fi_launch. */
static cubert_status fi_launch_image(void *device, void *stream, uint64_t work, void *module,
                                     const cubert_launch_config *config, const cubert_backend_image *image,
                                     cubert_berr *err) {
  fi_device *d = device;
  if (!cb_fi_armed(d->b->armed) && d->ops->launch_image)
    return d->ops->launch_image(d->inner, ((fi_stream *)stream)->inner, work, ((fi_module *)module)->inner, config,
                                image, err);
  return image_as_args(device, stream, work, module, config, image, err);
}

static cubert_status fi_sync(void *device, void *stream, cubert_berr *err) {
  fi_device *d = device;
  fi_stream *s = stream;
  cubert_status st;
  if (cb_fi_armed(d->b->armed) && plain_fault(d, s, CB_FI_OP_SYNC, -1, err, &st)) return st;
  return d->ops->sync(d->inner, s ? s->inner : NULL, err);
}

static uint64_t fi_progress(void *device, void *stream) {
  fi_device *d = device;
  fi_stream *s = stream;
  return d->ops->progress(d->inner, s ? s->inner : NULL);
}

static size_t fi_drain_failures(void *device, cubert_async_failure *out, size_t capacity) {
  fi_device *d = device;
  size_t n = d->ops->drain_failures(d->inner, out, capacity);
  if (atomic_load_explicit(&d->npending, memory_order_acquire) == 0 || n >= capacity) return n;
  size_t first = n;
  pthread_mutex_lock(&d->lock);
  size_t keep = 0;
  for (size_t i = 0; i < d->pcount; i++) {
    fi_pending *p = &d->pending[i];
    /* Reported once the stream has run the work, as a real failure is. */
    bool ran = !p->stream || d->ops->progress(d->inner, p->stream->inner) >= p->work;
    if (ran && n < capacity) out[n++] = p->failure;
    else d->pending[keep++] = *p;
  }
  d->pcount = keep;
  atomic_store_explicit(&d->npending, keep, memory_order_release);
  pthread_mutex_unlock(&d->lock);
  /* a sticky one (async-device-lost): every later call fails too */
  for (size_t i = first; i < n; i++)
    if (out[i].sticky) mark_lost(d, out[i].message);
  return n;
}

static cubert_status fi_peer_can_access(void *device, void *peer, bool *can, cubert_berr *err) {
  fi_device *d = device, *p = peer;
  cubert_status st;
  if (cb_fi_armed(d->b->armed) && plain_fault(d, NULL, CB_FI_OP_PEER_CAN_ACCESS, p->index, err, &st)) return st;
  return d->ops->peer_can_access(d->inner, p->inner, can, err);
}

static cubert_status fi_peer_enable(void *device, void *peer, cubert_berr *err) {
  fi_device *d = device, *p = peer;
  cubert_status st;
  if (cb_fi_armed(d->b->armed) && plain_fault(d, NULL, CB_FI_OP_PEER_ENABLE, p->index, err, &st)) return st;
  return d->ops->peer_enable(d->inner, p->inner, err);
}

static cubert_status fi_link_info(void *device, void *peer, cubert_backend_link *link, cubert_berr *err) {
  fi_device *d = device, *p = peer;
  cubert_status st;
  if (cb_fi_armed(d->b->armed) && plain_fault(d, NULL, CB_FI_OP_LINK_INFO, p->index, err, &st)) return st;
  return d->ops->link_info(d->inner, p->inner, link, err);
}

/* Timers only measure: forwarded, except on a lost device. */
static cubert_status fi_timer_record(void *device, void *stream, void **timer, cubert_berr *err) {
  fi_device *d = device;
  fi_stream *s = stream;
  if (cb_fi_armed(d->b->armed) && lost(d->b, d->local, true, err)) return CUBERT_ERR_DEVICE_LOST;
  return d->ops->timer_record(d->inner, s->inner, timer, err);
}

static cubert_status fi_timer_elapsed(void *device, void *start, void *end, double *ms, cubert_berr *err) {
  fi_device *d = device;
  if (cb_fi_armed(d->b->armed) && lost(d->b, d->local, true, err)) return CUBERT_ERR_DEVICE_LOST;
  return d->ops->timer_elapsed(d->inner, start, end, ms, err);
}

static void fi_timer_destroy(void *device, void *timer) {
  fi_device *d = device;
  d->ops->timer_destroy(d->inner, timer);
}

/* Every slot is decorated: a slot added to backend.h after timer_destroy
 * stops the build here rather than leave a NULL in the table. */
_Static_assert(sizeof(cubert_backend_ops) ==
                   offsetof(cubert_backend_ops, mem_import) +
                       sizeof(cubert_status (*)(void *, const unsigned char *, uint64_t, cubert_backend_mem *,
                                                cubert_berr *)),
               "backend.h has a slot the fault layer does not decorate");

static const cubert_backend_ops fi_ops = {
    .abi = CUBERT_BACKEND_ABI,
    .name = "faultinj",
    .open = fi_open_refused,
    .close = fi_close,
    .device_open = fi_device_open,
    .device_close = fi_device_close,
    .mem_alloc = fi_mem_alloc,
    .mem_free = fi_mem_free,
    .mem_export = fi_mem_export,
    .mem_import = fi_mem_import,
    .stream_create = fi_stream_create,
    .stream_destroy = fi_stream_destroy,
    .event_record = fi_event_record,
    .stream_wait = fi_stream_wait,
    .event_destroy = fi_event_destroy,
    .write = fi_write,
    .read = fi_read,
    .fill = fi_fill,
    .copy = fi_copy,
    .copy_peer = fi_copy_peer,
    .copy_strided = fi_copy_strided,
    .module_load = fi_module_load,
    .module_unload = fi_module_unload,
    .module_prepare = fi_module_prepare,
    .launch = fi_launch,
    .launch_image = fi_launch_image,
    .sync = fi_sync,
    .progress = fi_progress,
    .drain_failures = fi_drain_failures,
    .peer_can_access = fi_peer_can_access,
    .peer_enable = fi_peer_enable,
    .link_info = fi_link_info,
    .timer_record = fi_timer_record,
    .timer_elapsed = fi_timer_elapsed,
    .timer_destroy = fi_timer_destroy,
    .host_alloc = fi_host_alloc,
    .host_register = fi_host_register,
    .host_free = fi_host_free,
    .write_host = fi_write_host,
    .read_host = fi_read_host,
};

const cubert_backend_ops *cb_faultinj_ops(void) { return &fi_ops; }

cubert_status cb_faultinj_open(const cubert_backend_ops *inner, cb_fi_state *fi, int device_base,
                               const cubert_backend_config *config, void **backend, int *device_count,
                               cubert_berr *err) {
  if (!fi) {
    set_err(err, false, "fault layer: no fault state to open the backend with");
    return CUBERT_ERR_INVALID_ARGUMENT;
  }
  if (!inner || inner->abi != CUBERT_BACKEND_ABI) {
    set_err(err, false, "fault layer: the inner backend's ops table is missing or of another ABI");
    return CUBERT_ERR_BACKEND;
  }
  fi_backend *b = cb_calloc(1, sizeof *b);
  if (!b) {
    set_err(err, false, "fault layer: out of host memory opening a backend");
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  int count = 0;
  cubert_status st = inner->open(config, &b->inner, &count, err);
  if (st != CUBERT_OK) {
    cb_free(b);
    return st;
  }
  b->lost = cb_calloc(count > 0 ? (size_t)count : 1, sizeof *b->lost);
  if (!b->lost) {
    inner->close(b->inner);
    cb_free(b);
    set_err(err, false, "fault layer: out of host memory opening a backend");
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  b->ops = inner;
  b->fi = fi;
  b->armed = cb_fi_armed_flag(fi);
  b->base = device_base;
  b->count = count;
  pthread_mutex_init(&b->lock, NULL);
  *backend = b;
  *device_count = count;
  return CUBERT_OK;
}
