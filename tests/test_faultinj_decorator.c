/* tests/test_faultinj_decorator.c: the fault-injection decorator over a real
 * ops table.
 *
 * Each test runs over every inner backend available: a small fake backend
 * of this file (streams queue work and run it at sync, and it logs every call
 * it receives with addresses as device offsets, so a run through the
 * decorator can be compared call for call with a run without it), and the
 * host backend, cubert_backend_host().
 *
 * Proven here: with no rule, or rules that match nothing, the inner backend
 * sees exactly the calls it would see without the layer; each fault does
 * what it says (a launch fails before writing, or after scribbling garbage
 * over part of each output through an inner fill; a copy fails or stops
 * after a prefix; an allocation or compile fails; a lost device stays lost;
 * a sync-only failure is drained with its work number after the work ran);
 * peer writes and pair classes are selected; injections are logged with ids;
 * a seed replays a run; and it all holds under threads (run under TSan). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/host/host_backend.h"
#include "cubert/faultinj.h"
#include "faultinj/decorator.h"
#include "faultinj/injector.h"

/* ============================================================ the fake backend */

#define FAKE_ARENA (1u << 20)
#define FAKE_MAX_DEV 4
#define FAKE_MAX_STREAMS 8
#define FAKE_MAX_ARGS 8

enum { W_WRITE, W_FILL, W_COPY, W_LAUNCH };

typedef struct fake_module {
  cubert_host_fn fn;
  char name[64];
} fake_module;

typedef struct fake_item {
  int kind;
  uint64_t work, dst, src, size;
  unsigned char *data;          /* write bytes or fill pattern (owned) */
  uint32_t pattern_size;
  fake_module *mod;
  cubert_launch_config cfg;
  uint32_t nargs;
  uint64_t addr[FAKE_MAX_ARGS], sizes[FAKE_MAX_ARGS];
  unsigned char scalar[FAKE_MAX_ARGS][8];
  int scalar_arg[FAKE_MAX_ARGS];
} fake_item;

struct fake_device;

typedef struct fake_stream {
  struct fake_device *d;
  int id;
  pthread_mutex_t lock;
  fake_item *items;
  size_t n, cap;
  _Atomic uint64_t done;
} fake_stream;

typedef struct fake_device {
  int index;
  unsigned char *arena;
  uint64_t used;
  int nstreams;
  fake_stream *streams[FAKE_MAX_STREAMS];
  pthread_mutex_t lock;         /* failures: drained beside other calls */
  cubert_async_failure failures[32];
  size_t nfailures;
  uint64_t fail_work;           /* test knob: this work fails when it runs */
} fake_device;

typedef struct fake_backend {
  int ndev;
  fake_device *dev[FAKE_MAX_DEV];
} fake_backend;

typedef struct fake_event {
  fake_stream *stream;
} fake_event;

/* The call log: what the inner backend received. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char call_log[1 << 16];
static size_t call_log_len;
static fake_backend *current_fake;
static int fake_calls[32]; /* per call kind, for "the inner was not called" */
enum { C_ALLOC, C_MODULE, C_LAUNCH, C_WRITE, C_COPY, C_COPY_PEER, C_FILL, C_READ, C_SYNC, C_STREAM, C_COUNT };

static void log_reset(void) {
  pthread_mutex_lock(&log_lock);
  call_log_len = 0;
  call_log[0] = '\0';
  memset(fake_calls, 0, sizeof fake_calls);
  pthread_mutex_unlock(&log_lock);
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void logf_(int kind, const char *fmt, ...) {
  pthread_mutex_lock(&log_lock);
  if (kind >= 0) fake_calls[kind]++;
  if (call_log_len + 256 < sizeof call_log) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(call_log + call_log_len, sizeof call_log - call_log_len, fmt, ap);
    va_end(ap);
    if (n > 0) call_log_len += (size_t)n;
    call_log[call_log_len++] = '\n';
    call_log[call_log_len] = '\0';
  }
  pthread_mutex_unlock(&log_lock);
}

static int calls_of(int kind) {
  pthread_mutex_lock(&log_lock);
  int n = fake_calls[kind];
  pthread_mutex_unlock(&log_lock);
  return n;
}

/* "d1+256": an address as device and offset, the same in every run. */
static const char *where(uint64_t a, char *buf) {
  fake_backend *b = current_fake;
  for (int i = 0; b && i < b->ndev; i++) {
    uint64_t base = (uint64_t)(uintptr_t)b->dev[i]->arena;
    if (a >= base && a < base + FAKE_ARENA) {
      sprintf(buf, "d%d+%llu", i, (unsigned long long)(a - base));
      return buf;
    }
  }
  sprintf(buf, "?");
  return buf;
}

static uint32_t hash_bytes(const void *p, uint64_t n) {
  uint32_t h = 2166136261u;
  for (uint64_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 16777619u;
  return h;
}

static cubert_status fake_err(cubert_berr *err, cubert_status st, const char *msg) {
  if (err) {
    err->sticky = false;
    snprintf(err->message, sizeof err->message, "fake: %s", msg);
  }
  return st;
}

static cubert_status fake_open(const cubert_backend_config *config, void **backend, int *device_count,
                               cubert_berr *err) {
  fake_backend *b = calloc(1, sizeof *b);
  const cb_host_options *o = config ? config->options : NULL; /* the fake reads the host's settings */
  b->ndev = o && o->devices > 0 ? o->devices : 2;
  if (b->ndev > FAKE_MAX_DEV) b->ndev = FAKE_MAX_DEV;
  for (int i = 0; i < b->ndev; i++) {
    fake_device *d = calloc(1, sizeof *d);
    d->index = i;
    d->arena = calloc(1, FAKE_ARENA);
    pthread_mutex_init(&d->lock, NULL);
    b->dev[i] = d;
  }
  current_fake = b;
  logf_(-1, "open %d", b->ndev);
  *backend = b;
  *device_count = b->ndev;
  return CUBERT_OK;
}

static void fake_close(void *backend) {
  fake_backend *b = backend;
  logf_(-1, "close");
  for (int i = 0; i < b->ndev; i++) {
    pthread_mutex_destroy(&b->dev[i]->lock);
    free(b->dev[i]->arena);
    free(b->dev[i]);
  }
  if (current_fake == b) current_fake = NULL;
  free(b);
}

static cubert_status fake_device_open(void *backend, int index, void **device, cubert_device_info *info,
                                      cubert_berr *err) {
  fake_backend *b = backend;
  if (index < 0 || index >= b->ndev) return fake_err(err, CUBERT_ERR_NO_DEVICE, "no such device");
  logf_(-1, "device_open %d", index);
  snprintf(info->name, sizeof info->name, "fake:%d", index);
  snprintf(info->arch, sizeof info->arch, "fake");
  info->total_memory = FAKE_ARENA;
  *device = b->dev[index];
  return CUBERT_OK;
}

static void fake_device_close(void *device) { logf_(-1, "device_close %d", ((fake_device *)device)->index); }

static cubert_status fake_mem_alloc(void *device, uint64_t size, cubert_backend_mem *mem, cubert_berr *err) {
  fake_device *d = device;
  uint64_t at = (d->used + 255) & ~(uint64_t)255;
  if (at + size > FAKE_ARENA) return fake_err(err, CUBERT_ERR_OUT_OF_MEMORY, "arena full");
  d->used = at + size;
  mem->address = (uint64_t)(uintptr_t)(d->arena + at);
  mem->size = size;
  mem->cookie = NULL;
  char w[32];
  logf_(C_ALLOC, "alloc d%d size=%llu -> %s", d->index, (unsigned long long)size, where(mem->address, w));
  return CUBERT_OK;
}

static void fake_mem_free(void *device, cubert_backend_mem *mem) {
  char w[32];
  logf_(-1, "free d%d %s", ((fake_device *)device)->index, where(mem->address, w));
}

static cubert_status fake_stream_create(void *device, void **stream, cubert_berr *err) {
  fake_device *d = device;
  if (d->nstreams == FAKE_MAX_STREAMS) return fake_err(err, CUBERT_ERR_BACKEND, "too many streams");
  fake_stream *s = calloc(1, sizeof *s);
  s->d = d;
  s->id = ++d->nstreams;
  pthread_mutex_init(&s->lock, NULL);
  d->streams[s->id - 1] = s;
  logf_(C_STREAM, "stream_create d%d -> s%d", d->index, s->id);
  *stream = s;
  return CUBERT_OK;
}

static void run_item(fake_device *d, fake_item *it) {
  unsigned char *dst = (unsigned char *)(uintptr_t)it->dst;
  cubert_status failed = CUBERT_OK;
  switch (it->kind) {
  case W_WRITE:
    memcpy(dst, it->data, it->size);
    break;
  case W_FILL:
    for (uint64_t i = 0; i < it->size; i++) dst[i] = it->data[i % it->pattern_size];
    break;
  case W_COPY:
    memmove(dst, (void *)(uintptr_t)it->src, it->size);
    break;
  case W_LAUNCH: {
    void *args[FAKE_MAX_ARGS];
    for (uint32_t i = 0; i < it->nargs; i++)
      args[i] = it->scalar_arg[i] ? (void *)it->scalar[i] : (void *)(uintptr_t)it->addr[i];
    cubert_host_launch l = {{it->cfg.grid[0], it->cfg.grid[1], it->cfg.grid[2]},
                            {it->cfg.block[0], it->cfg.block[1], it->cfg.block[2]},
                            it->cfg.shared_memory, it->nargs, args, it->sizes};
    char msg[128];
    failed = it->mod->fn(&l, msg, sizeof msg);
    break;
  }
  }
  if (failed != CUBERT_OK || it->work == d->fail_work) {
    pthread_mutex_lock(&d->lock);
    cubert_async_failure *f = &d->failures[d->nfailures++ % 32];
    memset(f, 0, sizeof *f);
    f->work = it->work;
    f->status = failed != CUBERT_OK ? failed : CUBERT_ERR_BACKEND;
    snprintf(f->message, sizeof f->message, "fake: work %llu failed", (unsigned long long)it->work);
    pthread_mutex_unlock(&d->lock);
  }
  free(it->data);
}

static void flush(fake_stream *s) {
  pthread_mutex_lock(&s->lock);
  for (size_t i = 0; i < s->n; i++) {
    run_item(s->d, &s->items[i]);
    atomic_store(&s->done, s->items[i].work);
  }
  s->n = 0;
  pthread_mutex_unlock(&s->lock);
}

static void enqueue(fake_stream *s, const fake_item *it) {
  pthread_mutex_lock(&s->lock);
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 16;
    s->items = realloc(s->items, s->cap * sizeof *s->items);
  }
  s->items[s->n++] = *it;
  pthread_mutex_unlock(&s->lock);
}

static void fake_stream_destroy(void *device, void *stream) {
  fake_stream *s = stream;
  flush(s);
  logf_(-1, "stream_destroy d%d s%d", s->d->index, s->id);
  s->d->streams[s->id - 1] = NULL;
  pthread_mutex_destroy(&s->lock);
  free(s->items);
  free(s);
}

static cubert_status fake_event_record(void *device, void *stream, void **event, cubert_berr *err) {
  fake_stream *s = stream;
  fake_event *e = malloc(sizeof *e);
  e->stream = s;
  logf_(-1, "event_record d%d s%d", s->d->index, s->id);
  *event = e;
  return CUBERT_OK;
}

static cubert_status fake_stream_wait(void *device, void *stream, void *event, cubert_berr *err) {
  fake_stream *s = stream;
  fake_event *e = event;
  flush(e->stream); /* crude but ordered: the awaited work has run */
  logf_(-1, "stream_wait d%d s%d on s%d", s->d->index, s->id, e->stream->id);
  return CUBERT_OK;
}

static void fake_event_destroy(void *device, void *event) {
  logf_(-1, "event_destroy");
  free(event);
}

static cubert_status fake_write(void *device, void *stream, uint64_t work, uint64_t dst, const void *src,
                                uint64_t size, cubert_berr *err) {
  fake_stream *s = stream;
  fake_item it = {.kind = W_WRITE, .work = work, .dst = dst, .size = size, .data = malloc(size ? size : 1)};
  memcpy(it.data, src, size);
  char w[32];
  logf_(C_WRITE, "write d%d s%d w%llu %s size=%llu data=%08x", s->d->index, s->id, (unsigned long long)work,
        where(dst, w), (unsigned long long)size, hash_bytes(src, size));
  enqueue(s, &it);
  return CUBERT_OK;
}

static cubert_status fake_read(void *device, void *stream, uint64_t work, void *dst, uint64_t src, uint64_t size,
                               cubert_berr *err) {
  fake_stream *s = stream;
  flush(s);
  memcpy(dst, (void *)(uintptr_t)src, size);
  atomic_store(&s->done, work);
  char w[32];
  logf_(C_READ, "read d%d s%d w%llu %s size=%llu", s->d->index, s->id, (unsigned long long)work, where(src, w),
        (unsigned long long)size);
  return CUBERT_OK;
}

static cubert_status fake_fill(void *device, void *stream, uint64_t work, uint64_t dst, const void *pattern,
                               uint32_t pattern_size, uint64_t size, cubert_berr *err) {
  fake_stream *s = stream;
  if (pattern_size == 0 || size % pattern_size) return fake_err(err, CUBERT_ERR_INVALID_ARGUMENT, "bad pattern");
  fake_item it = {.kind = W_FILL, .work = work, .dst = dst, .size = size, .pattern_size = pattern_size,
                  .data = malloc(pattern_size)};
  memcpy(it.data, pattern, pattern_size);
  char w[32];
  logf_(C_FILL, "fill d%d s%d w%llu %s ps=%u size=%llu pat=%08x", s->d->index, s->id, (unsigned long long)work,
        where(dst, w), pattern_size, (unsigned long long)size, hash_bytes(pattern, pattern_size));
  enqueue(s, &it);
  return CUBERT_OK;
}

static cubert_status fake_copy(void *device, void *stream, uint64_t work, uint64_t dst, uint64_t src, uint64_t size,
                               cubert_berr *err) {
  fake_stream *s = stream;
  fake_item it = {.kind = W_COPY, .work = work, .dst = dst, .src = src, .size = size};
  char w1[32], w2[32];
  logf_(C_COPY, "copy d%d s%d w%llu %s <- %s size=%llu", s->d->index, s->id, (unsigned long long)work,
        where(dst, w1), where(src, w2), (unsigned long long)size);
  enqueue(s, &it);
  return CUBERT_OK;
}

static cubert_status fake_copy_strided(void *d, void *s, uint64_t w, cubert_backend_direction dir, uint64_t dst,
                                        void *sd, uint64_t src, const cubert_backend_strided *l, cubert_berr *e) {
  (void)d, (void)s, (void)w, (void)dir, (void)dst, (void)sd, (void)src, (void)l;
  return cubert_berr_set(e, CUBERT_ERR_UNSUPPORTED, "no strided copies here");
}
static cubert_status fake_copy_peer(void *device, void *stream, uint64_t work, uint64_t dst, void *src_device,
                                    uint64_t src, uint64_t size, cubert_berr *err) {
  fake_stream *s = stream;
  fake_item it = {.kind = W_COPY, .work = work, .dst = dst, .src = src, .size = size};
  char w1[32], w2[32];
  logf_(C_COPY_PEER, "copy_peer d%d s%d w%llu %s <- d%d %s size=%llu", s->d->index, s->id,
        (unsigned long long)work, where(dst, w1), ((fake_device *)src_device)->index, where(src, w2),
        (unsigned long long)size);
  enqueue(s, &it);
  return CUBERT_OK;
}

static cubert_status fake_module_load(void *device, const cubert_backend_kernel *kernel, void **module,
                                      cubert_berr *err) {
  logf_(C_MODULE, "module_load d%d %s", ((fake_device *)device)->index, kernel->name);
  if (!kernel->host_fn) return fake_err(err, CUBERT_ERR_COMPILE, "no host function");
  fake_module *m = calloc(1, sizeof *m);
  m->fn = kernel->host_fn;
  snprintf(m->name, sizeof m->name, "%s", kernel->name);
  *module = m;
  return CUBERT_OK;
}

static void fake_module_unload(void *device, void *module) {
  logf_(-1, "module_unload %s", ((fake_module *)module)->name);
  free(module);
}

static cubert_status fake_launch(void *device, void *stream, uint64_t work, void *module,
                                 const cubert_launch_config *config, const cubert_backend_arg *args, uint32_t nargs,
                                 cubert_berr *err) {
  fake_stream *s = stream;
  fake_module *m = module;
  if (nargs > FAKE_MAX_ARGS) return fake_err(err, CUBERT_ERR_INVALID_ARGUMENT, "too many args");
  fake_item it = {.kind = W_LAUNCH, .work = work, .mod = m, .cfg = *config, .nargs = nargs};
  char line[512];
  int n = snprintf(line, sizeof line, "launch d%d s%d w%llu %s", s->d->index, s->id, (unsigned long long)work,
                   m->name);
  for (uint32_t i = 0; i < nargs; i++) {
    char w[32];
    if (args[i].kind == CUBERT_PARAM_SCALAR) {
      it.scalar_arg[i] = 1;
      memcpy(it.scalar[i], args[i].scalar, args[i].scalar_size <= 8 ? args[i].scalar_size : 8);
      it.sizes[i] = args[i].scalar_size;
      n += snprintf(line + n, sizeof line - (size_t)n, " %uB=%08x", args[i].scalar_size,
                    hash_bytes(args[i].scalar, args[i].scalar_size));
    } else {
      it.addr[i] = args[i].address;
      it.sizes[i] = args[i].size;
      n += snprintf(line + n, sizeof line - (size_t)n, " %s%s:%llu/%d", args[i].kind == CUBERT_PARAM_PEER_BUFFER ? "peer:" : "",
                    where(args[i].address, w), (unsigned long long)args[i].size, args[i].access);
      /* which of the fake's devices a peer buffer names as its owner
       * (backend.h): the fault layer must hand on the inner device, not
       * its wrapper (the logs with and without the layer are compared) */
      if (args[i].kind == CUBERT_PARAM_PEER_BUFFER) {
        int owner = -1;
        for (int d = 0; current_fake && d < current_fake->ndev; d++)
          if (args[i].owner == current_fake->dev[d]) owner = d;
        n += snprintf(line + n, sizeof line - (size_t)n, " owner=%d", owner);
      }
    }
  }
  logf_(C_LAUNCH, "%s", line);
  enqueue(s, &it);
  return CUBERT_OK;
}

static cubert_status fake_sync(void *device, void *stream, cubert_berr *err) {
  fake_device *d = device;
  if (stream) {
    flush(stream);
  } else {
    for (int i = 0; i < FAKE_MAX_STREAMS; i++)
      if (d->streams[i]) flush(d->streams[i]);
  }
  logf_(C_SYNC, "sync d%d s%d", d->index, stream ? ((fake_stream *)stream)->id : 0);
  return CUBERT_OK;
}

static uint64_t fake_progress(void *device, void *stream) {
  return stream ? atomic_load(&((fake_stream *)stream)->done) : 0;
}

static size_t fake_drain_failures(void *device, cubert_async_failure *out, size_t capacity) {
  fake_device *d = device;
  pthread_mutex_lock(&d->lock);
  size_t n = d->nfailures < capacity ? d->nfailures : capacity;
  memcpy(out, d->failures, n * sizeof *out);
  memmove(d->failures, d->failures + n, (d->nfailures - n) * sizeof *out);
  d->nfailures -= n;
  pthread_mutex_unlock(&d->lock);
  return n;
}

static cubert_status fake_peer_can_access(void *device, void *peer, bool *can, cubert_berr *err) {
  logf_(-1, "peer_can_access d%d d%d", ((fake_device *)device)->index, ((fake_device *)peer)->index);
  *can = true;
  return CUBERT_OK;
}

static cubert_status fake_peer_enable(void *device, void *peer, cubert_berr *err) {
  logf_(-1, "peer_enable d%d d%d", ((fake_device *)device)->index, ((fake_device *)peer)->index);
  return CUBERT_OK;
}

static cubert_status fake_link_info(void *device, void *peer, cubert_backend_link *link, cubert_berr *err) {
  logf_(-1, "link_info d%d d%d", ((fake_device *)device)->index, ((fake_device *)peer)->index);
  return fake_err(err, CUBERT_ERR_UNSUPPORTED, "no link information");
}

typedef struct fake_timer {
  fake_stream *stream;
  uint64_t at;
} fake_timer;

static cubert_status fake_timer_record(void *device, void *stream, void **timer, cubert_berr *err) {
  fake_stream *s = stream;
  fake_timer *t = malloc(sizeof *t);
  t->stream = s;
  t->at = (uint64_t)s->n;
  logf_(-1, "timer_record d%d s%d", s->d->index, s->id);
  *timer = t;
  return CUBERT_OK;
}

static cubert_status fake_timer_elapsed(void *device, void *start, void *end, double *ms, cubert_berr *err) {
  fake_timer *a = start, *b = end;
  flush(b->stream);
  *ms = (double)(b->at - a->at); /* queue positions: what the test can predict */
  logf_(-1, "timer_elapsed d%d", ((fake_device *)device)->index);
  return CUBERT_OK;
}

static void fake_timer_destroy(void *device, void *timer) {
  logf_(-1, "timer_destroy");
  free(timer);
}

/* Host buffers: the fake has none (every slot is filled, backend.h). */
static cubert_status fake_host_mem(void *device, cubert_backend_host_mem *mem, cubert_berr *err) {
  (void)device;
  (void)mem;
  return cubert_berr_set(err, CUBERT_ERR_UNSUPPORTED, "fake: no host buffers");
}

static void fake_host_free(void *device, cubert_backend_host_mem *mem) {
  (void)device;
  (void)mem;
}

static cubert_status fake_write_host(void *device, void *stream, uint64_t work, uint64_t dst, const void *src,
                                     uint64_t size, cubert_berr *err) {
  return fake_write(device, stream, work, dst, src, size, err);
}

static cubert_status fake_read_host(void *device, void *stream, uint64_t work, void *dst, uint64_t src,
                                    uint64_t size, cubert_berr *err) {
  return fake_read(device, stream, work, dst, src, size, err);
}

static const cubert_backend_ops fake_ops = {
    .abi = CUBERT_BACKEND_ABI,
    .name = "fake",
    .open = fake_open,
    .close = fake_close,
    .device_open = fake_device_open,
    .device_close = fake_device_close,
    .mem_alloc = fake_mem_alloc,
    .mem_free = fake_mem_free,
    .stream_create = fake_stream_create,
    .stream_destroy = fake_stream_destroy,
    .event_record = fake_event_record,
    .stream_wait = fake_stream_wait,
    .event_destroy = fake_event_destroy,
    .write = fake_write,
    .read = fake_read,
    .fill = fake_fill,
    .copy = fake_copy,
    .copy_peer = fake_copy_peer,
    .copy_strided = fake_copy_strided,
    .module_load = fake_module_load,
    .module_unload = fake_module_unload,
    .launch = fake_launch,
    .sync = fake_sync,
    .progress = fake_progress,
    .drain_failures = fake_drain_failures,
    .peer_can_access = fake_peer_can_access,
    .peer_enable = fake_peer_enable,
    .link_info = fake_link_info,
    .timer_record = fake_timer_record,
    .timer_elapsed = fake_timer_elapsed,
    .timer_destroy = fake_timer_destroy,
    .host_alloc = fake_host_mem,
    .host_register = fake_host_mem,
    .host_free = fake_host_free,
    .write_host = fake_write_host,
    .read_host = fake_read_host,
};

/* ============================================================ kernels (host functions) */

/* fill_u32(out: write, value: u32): out[i] = value */
static cubert_status k_fill_u32(const cubert_host_launch *l, char *msg, size_t cap) {
  uint32_t *out = l->args[0], v;
  memcpy(&v, l->args[1], 4);
  for (uint64_t i = 0; i < l->sizes[0] / 4; i++) out[i] = v;
  return CUBERT_OK;
}

/* add1(in: read, out: write): out[i] = in[i] + 1, bytewise */
static cubert_status k_add1(const cubert_host_launch *l, char *msg, size_t cap) {
  const unsigned char *in = l->args[0];
  unsigned char *out = l->args[1];
  for (uint64_t i = 0; i < l->sizes[1]; i++) out[i] = (unsigned char)(in[i] + 1);
  return CUBERT_OK;
}

static const cubert_param fill_params[] = {{"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0},
                                           {"value", CUBERT_PARAM_SCALAR, 0, 4}};
static const cubert_param add1_params[] = {{"in", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0},
                                           {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0}};
/* The same host function with `out` a peer buffer: a peer write. */
static const cubert_param add1_peer_params[] = {{"in", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0},
                                                {"out", CUBERT_PARAM_PEER_BUFFER, CUBERT_ACCESS_WRITE, 0}};

static const cubert_backend_kernel kern_fill = {"fill_u32", "fill_u32", NULL, NULL, NULL, 0, k_fill_u32,
                                                fill_params, 2, 0};
static const cubert_backend_kernel kern_add1 = {"add1", "add1", NULL, NULL, NULL, 0, k_add1, add1_params, 2, 0};
static const cubert_backend_kernel kern_add1_peer = {"add1_peer", "add1_peer", NULL, NULL, NULL, 0, k_add1,
                                                     add1_peer_params, 2, 0};

/* ============================================================ the rig: a backend opened through the layer */

#define NDEV 3

typedef struct rig {
  const cubert_backend_ops *ops;
  const cubert_backend_ops *inner;
  bool fake;
  void *backend;
  int ndev;
  void *dev[NDEV];
  void *stream[NDEV][2];
  void *mod_fill[NDEV], *mod_add1[NDEV], *mod_add1_peer[NDEV];
  uint64_t work[NDEV];
  cubert_backend_mem mems[64];
  int nmems, mem_dev[64];
} rig;

/* The inner backends: 0 is the fake, 1 the host backend when linked. */
static const cubert_backend_ops *inner_backend(int which) {
  if (which == 0) return &fake_ops;
  return cubert_backend_host();
}

#define NEED_BACKEND(which)                                                   \
  do {                                                                        \
    if (!inner_backend(which)) {                                              \
      printf("skipped: no host backend (%s)\n", __func__);                   \
      return;                                                                 \
    }                                                                         \
  } while (0)

/* The fault state the rigs' decorators are opened with (a runtime's own). */
static cb_fi_state *fi;

static void rig_open(rig *r, int which, bool decorated) {
  memset(r, 0, sizeof *r);
  r->inner = inner_backend(which);
  r->fake = which == 0;
  r->ops = decorated ? cb_faultinj_ops() : r->inner;
  cb_host_options cfg_host = {.devices = NDEV, .memory = 16u << 20};
  cubert_backend_config cfg = {.options = &cfg_host};
  cubert_berr err = {0};
  int n = 0;
  cubert_status st = decorated ? cb_faultinj_open(r->inner, fi, 0, &cfg, &r->backend, &n, &err)
                               : r->inner->open(&cfg, &r->backend, &n, &err);
  ck_assert_msg(st == CUBERT_OK, "open: %s", err.message);
  ck_assert_int_ge(n, NDEV);
  r->ndev = NDEV;
  for (int d = 0; d < NDEV; d++) {
    cubert_device_info info;
    memset(&info, 0, sizeof info);
    ck_assert_int_eq(r->ops->device_open(r->backend, d, &r->dev[d], &info, &err), CUBERT_OK);
    for (int s = 0; s < 2; s++) ck_assert_int_eq(r->ops->stream_create(r->dev[d], &r->stream[d][s], &err), CUBERT_OK);
  }
}

static void rig_load(rig *r, int d) {
  cubert_berr err;
  ck_assert_int_eq(r->ops->module_load(r->dev[d], &kern_fill, &r->mod_fill[d], &err), CUBERT_OK);
  ck_assert_int_eq(r->ops->module_load(r->dev[d], &kern_add1, &r->mod_add1[d], &err), CUBERT_OK);
  ck_assert_int_eq(r->ops->module_load(r->dev[d], &kern_add1_peer, &r->mod_add1_peer[d], &err), CUBERT_OK);
}

static void rig_close(rig *r) {
  cubert_berr err;
  for (int d = 0; d < r->ndev; d++) (void)r->ops->sync(r->dev[d], NULL, &err);
  for (int i = 0; i < r->nmems; i++) r->ops->mem_free(r->dev[r->mem_dev[i]], &r->mems[i]);
  for (int d = 0; d < r->ndev; d++) {
    if (r->mod_fill[d]) r->ops->module_unload(r->dev[d], r->mod_fill[d]);
    if (r->mod_add1[d]) r->ops->module_unload(r->dev[d], r->mod_add1[d]);
    if (r->mod_add1_peer[d]) r->ops->module_unload(r->dev[d], r->mod_add1_peer[d]);
    for (int s = 0; s < 2; s++) r->ops->stream_destroy(r->dev[d], r->stream[d][s]);
    r->ops->device_close(r->dev[d]);
  }
  r->ops->close(r->backend);
}

static uint64_t rig_alloc(rig *r, int d, uint64_t size) {
  cubert_berr err;
  cubert_backend_mem *m = &r->mems[r->nmems];
  ck_assert_msg(r->ops->mem_alloc(r->dev[d], size, m, &err) == CUBERT_OK, "alloc: %s", err.message);
  r->mem_dev[r->nmems++] = d;
  return m->address;
}

static uint64_t next_work(rig *r, int d) { return ++r->work[d]; }

/* The state of the device whose allocation holds `addr`: what the runtime
 * passes as a peer buffer's owner (backend.h). */
static void *rig_owner(rig *r, uint64_t addr) {
  for (int i = 0; i < r->nmems; i++)
    if (addr - r->mems[i].address < r->mems[i].size) return r->dev[r->mem_dev[i]];
  return NULL;
}

/* Writes `size` bytes of `byte` and waits for them. */
static void rig_set(rig *r, int d, uint64_t addr, unsigned char byte, uint64_t size) {
  unsigned char *buf = malloc(size);
  memset(buf, byte, size);
  cubert_berr err;
  ck_assert_int_eq(r->ops->write(r->dev[d], r->stream[d][0], next_work(r, d), addr, buf, size, &err), CUBERT_OK);
  ck_assert_int_eq(r->ops->sync(r->dev[d], r->stream[d][0], &err), CUBERT_OK);
  free(buf);
}

static void rig_get(rig *r, int d, uint64_t addr, void *dst, uint64_t size) {
  cubert_berr err;
  ck_assert_int_eq(r->ops->sync(r->dev[d], NULL, &err), CUBERT_OK);
  ck_assert_msg(r->ops->read(r->dev[d], r->stream[d][0], next_work(r, d), dst, addr, size, &err) == CUBERT_OK,
                "read: %s", err.message);
}

static bool all_bytes(const unsigned char *p, unsigned char v, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    if (p[i] != v) return false;
  return true;
}

static cubert_status launch_fill(rig *r, int d, int s, uint64_t out, uint64_t size, uint32_t value, uint64_t *work,
                                 cubert_berr *err) {
  cubert_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  cubert_backend_arg args[2] = {{CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, out, size, NULL, 0, NULL},
                                {CUBERT_PARAM_SCALAR, 0, 0, 0, &value, 4, NULL}};
  *work = next_work(r, d);
  return r->ops->launch(r->dev[d], r->stream[d][s], *work, r->mod_fill[d], &cfg, args, 2, err);
}

static cubert_status launch_add1(rig *r, int d, uint64_t in, uint64_t out, uint64_t size, bool peer_out,
                                 uint64_t *work, cubert_berr *err) {
  cubert_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  cubert_backend_arg args[2] = {
      {CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, in, size, NULL, 0, NULL},
      {peer_out ? CUBERT_PARAM_PEER_BUFFER : CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, out, size, NULL, 0,
       peer_out ? rig_owner(r, out) : NULL}};
  *work = next_work(r, d);
  return r->ops->launch(r->dev[d], r->stream[d][0], *work, peer_out ? r->mod_add1_peer[d] : r->mod_add1[d], &cfg,
                        args, 2, err);
}

/* launch_fill as an image (backend.h, launch_image): the runtime's form of
 * a launch of buffers and scalars. */
static cubert_status launch_fill_image(rig *r, int d, uint64_t out, uint64_t size, uint32_t value, uint64_t *work,
                                       cubert_berr *err) {
  cubert_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  uint32_t off[2];
  cubert_backend_layout l = {2, 0, off, fill_params};
  ck_assert(cubert_backend_image_layout(fill_params, 2, off, &l.size));
  ck_assert_uint_eq(l.size, 12);
  _Alignas(16) unsigned char data[16];
  memcpy(data + off[0], &out, 8);
  memcpy(data + off[1], &value, 4);
  uint64_t sizes[2] = {size, 4};
  cubert_backend_image im = {&l, data, sizes};
  *work = next_work(r, d);
  return r->ops->launch_image(r->dev[d], r->stream[d][0], *work, r->mod_fill[d], &cfg, &im, err);
}

static uint64_t injected(void) {
  cubert_faultinj_stats st;
  cb_fi_state_stats(fi, &st);
  return st.injected;
}

static void teardown(void) {
  cb_fi_state_free(fi);
  fi = NULL;
}

static void setup(void) {
  teardown(); /* tests call setup() again to start over */
  fi = cb_fi_state_new();
  ck_assert_ptr_nonnull(fi);
  cb_fi_state_reset(fi);
  cb_fi_state_set_pair_classifier(fi, NULL, NULL);
  log_reset();
}

static void rules(const char *text) {
  cubert_faultinj_diag diag;
  ck_assert_msg(cb_fi_state_add(fi, text, strlen(text), "test", false, NULL, &diag) == CUBERT_OK, "%s", diag.message);
}

static void assert_injected(const cubert_berr *err, uint64_t id, uint32_t rule) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "injected fault #%llu (rule %u): ", (unsigned long long)id, rule);
  ck_assert_msg(strncmp(err->message, prefix, strlen(prefix)) == 0, "message `%s` lacks `%s`", err->message, prefix);
}

/* ============================================================ no rule: identical */

typedef struct script_result {
  cubert_status st[64];
  int nst;
  unsigned char bytes[4][512];
  char *log;
} script_result;

/* Every kind of call, with its status and the bytes it left. */
static void script(rig *r, script_result *out) {
  cubert_berr err;
  int k = 0;
#define S(call) (out->st[k++] = (call))
  for (int d = 0; d < 2; d++) rig_load(r, d);
  uint64_t a = rig_alloc(r, 0, 512), b = rig_alloc(r, 0, 512), c = rig_alloc(r, 1, 512), e = rig_alloc(r, 1, 512);
  unsigned char src[512];
  for (int i = 0; i < 512; i++) src[i] = (unsigned char)(i * 7);
  S(r->ops->write(r->dev[0], r->stream[0][0], next_work(r, 0), a, src, 512, &err));
  uint16_t pat = 0xBEEF;
  S(r->ops->fill(r->dev[0], r->stream[0][1], next_work(r, 0), b, &pat, 2, 512, &err));
  void *ev = NULL;
  S(r->ops->event_record(r->dev[0], r->stream[0][1], &ev, &err));
  S(r->ops->stream_wait(r->dev[0], r->stream[0][0], ev, &err));
  r->ops->event_destroy(r->dev[0], ev);
  void *t0 = NULL, *t1 = NULL;
  double ms = -1;
  S(r->ops->timer_record(r->dev[0], r->stream[0][0], &t0, &err));
  S(r->ops->copy(r->dev[0], r->stream[0][0], next_work(r, 0), b + 256, a, 128, &err));
  S(r->ops->timer_record(r->dev[0], r->stream[0][0], &t1, &err));
  S(r->ops->timer_elapsed(r->dev[0], t0, t1, &ms, &err));
  out->st[k++] = (cubert_status)(ms >= 0);
  r->ops->timer_destroy(r->dev[0], t0);
  r->ops->timer_destroy(r->dev[0], t1);
  uint64_t w;
  S(launch_add1(r, 0, a, b, 64, false, &w, &err));
  bool can = false;
  S(r->ops->peer_can_access(r->dev[1], r->dev[0], &can, &err));
  S(r->ops->peer_enable(r->dev[1], r->dev[0], &err));
  cubert_backend_link link;
  S(r->ops->link_info(r->dev[0], r->dev[1], &link, &err));
  S(r->ops->sync(r->dev[0], NULL, &err));
  S(r->ops->copy_peer(r->dev[1], r->stream[1][0], next_work(r, 1), c, r->dev[0], a, 512, &err));
  S(launch_fill(r, 1, 1, e, 512, 0x01020304u, &w, &err));
  S(r->ops->sync(r->dev[1], r->stream[1][0], &err));
  S(r->ops->sync(r->dev[1], r->stream[1][1], &err));
  S(launch_add1(r, 1, c, b, 32, true, &w, &err)); /* device 1 writes device 0's memory */
  S(r->ops->sync(r->dev[1], NULL, &err));
  cubert_async_failure f[4];
  out->st[k++] = (cubert_status)r->ops->drain_failures(r->dev[0], f, 4);
  out->st[k++] = (cubert_status)(r->ops->progress(r->dev[0], r->stream[0][0]) > 0);
  S(r->ops->read(r->dev[0], r->stream[0][0], next_work(r, 0), out->bytes[0], a, 512, &err));
  S(r->ops->read(r->dev[0], r->stream[0][0], next_work(r, 0), out->bytes[1], b, 512, &err));
  S(r->ops->read(r->dev[1], r->stream[1][0], next_work(r, 1), out->bytes[2], c, 512, &err));
  S(r->ops->read(r->dev[1], r->stream[1][0], next_work(r, 1), out->bytes[3], e, 512, &err));
#undef S
  out->nst = k;
}

static void run_script(int which, bool decorated, const char *with_rules, script_result *out) {
  setup();
  if (with_rules) rules(with_rules);
  rig r;
  rig_open(&r, which, decorated);
  script(&r, out);
  rig_close(&r);
  out->log = strdup(call_log);
}

START_TEST(test_no_rule_forwards_every_call_unchanged) {
  NEED_BACKEND(_i);
  script_result bare, layered, armed;
  run_script(_i, false, NULL, &bare);
  run_script(_i, true, NULL, &layered);
  /* Rules that match none of the calls: the armed path, still identical. */
  run_script(_i, true, "launch kernel=never; alloc device=7; copy_peer pair=SYS; sync stream=9", &armed);
  ck_assert_uint_eq(injected(), 0);
  ck_assert_int_eq(bare.nst, layered.nst);
  for (int i = 0; i < bare.nst; i++) {
    ck_assert_msg(bare.st[i] == layered.st[i], "call %d: %d without the layer, %d with", i, bare.st[i], layered.st[i]);
    ck_assert_msg(bare.st[i] == armed.st[i], "call %d: %d without the layer, %d armed", i, bare.st[i], armed.st[i]);
  }
  ck_assert(memcmp(bare.bytes, layered.bytes, sizeof bare.bytes) == 0);
  ck_assert(memcmp(bare.bytes, armed.bytes, sizeof bare.bytes) == 0);
  if (_i == 0) {
    /* The kernels ran: bytes are what they computed, not zeros. */
    ck_assert_int_eq(bare.bytes[1][0], 1);                         /* add1 over a */
    ck_assert_int_eq(bare.bytes[1][40], (unsigned char)(40 * 7 + 1));
    ck_assert_int_eq(bare.bytes[1][100], 0xEF);                    /* the fill */
    ck_assert_int_eq(bare.bytes[1][256 + 3], 3 * 7);               /* the copy */
    ck_assert_int_eq(bare.bytes[2][9], 9 * 7);                     /* copy_peer */
    ck_assert_int_eq(bare.bytes[3][0], 0x04);                      /* fill_u32 */
    ck_assert(strlen(bare.log) > 500);
    ck_assert_str_eq(bare.log, layered.log);
    ck_assert_str_eq(bare.log, armed.log);
  }
  free(bare.log), free(layered.log), free(armed.log);
}
END_TEST

/* ============================================================ launch faults */

START_TEST(test_launch_fails_before_writing) {
  NEED_BACKEND(_i);
  rules("launch kernel=fill_u32 nth=1 fault=fail-before-write");
  rig r;
  rig_open(&r, _i, true);
  rig_load(&r, 0);
  uint64_t out = rig_alloc(&r, 0, 256);
  rig_set(&r, 0, out, 0x5A, 256);
  int launches = calls_of(C_LAUNCH);
  cubert_berr err = {0};
  uint64_t w, failed_work;
  ck_assert_int_eq(launch_fill(&r, 0, 0, out, 256, 0x11111111u, &failed_work, &err), CUBERT_ERR_LAUNCH);
  assert_injected(&err, 1, 1);
  ck_assert(!err.sticky);
  ck_assert_ptr_nonnull(strstr(err.message, "launch of `fill_u32` on device 0 stream 1"));
  ck_assert_ptr_nonnull(strstr(err.message, "failed before writing"));
  unsigned char got[256];
  rig_get(&r, 0, out, got, 256);
  ck_assert(all_bytes(got, 0x5A, 256));
  if (r.fake) ck_assert_int_eq(calls_of(C_LAUNCH), launches); /* nothing reached the inner backend */
  /* The next launch is not selected and runs. */
  ck_assert_int_eq(launch_fill(&r, 0, 0, out, 256, 0x11111111u, &w, &err), CUBERT_OK);
  rig_get(&r, 0, out, got, 256);
  ck_assert(all_bytes(got, 0x11, 256));
  cubert_fault_record rec;
  ck_assert(cb_fi_state_record(fi, 1, &rec));
  ck_assert_str_eq(rec.operation, "launch");
  ck_assert_str_eq(rec.kernel, "fill_u32");
  ck_assert_uint_eq(rec.stream, 1);
  ck_assert_uint_eq(rec.work, failed_work);
  ck_assert_uint_lt(failed_work, w);
  ck_assert_uint_eq(rec.rule, 1);
  ck_assert_uint_eq(rec.match, 1);
  ck_assert_str_eq(rec.message, err.message); /* the log says what the caller was told */
  rig_close(&r);
}
END_TEST

/* A launch as an image (launch_image, backend.h) through the layer: with
 * no rule it reaches the inner backend whole (as records when the inner
 * backend takes no images: the fake's launch sees it); with rules it is
 * decided like any launch, and one not selected still runs whole. */
START_TEST(test_image_launches_pass_the_layer_and_meet_its_rules) {
  NEED_BACKEND(_i);
  unsigned char got[256];
  cubert_berr err = {0};
  uint64_t w, failed_work;
  rig r;
  rig_open(&r, _i, true);
  rig_load(&r, 0);
  uint64_t out = rig_alloc(&r, 0, 256);
  rig_set(&r, 0, out, 0x5A, 256);
  int launches = calls_of(C_LAUNCH);
  ck_assert_int_eq(launch_fill_image(&r, 0, out, 256, 0x11111111u, &w, &err), CUBERT_OK);
  rig_get(&r, 0, out, got, 256);
  ck_assert(all_bytes(got, 0x11, 256));
  if (r.fake) {
    ck_assert_int_eq(calls_of(C_LAUNCH), launches + 1); /* the inner launch, with records */
    /* the buffer at its address with its bound bytes and access, the scalar's 4 bytes */
    ck_assert_msg(strstr(call_log, "fill_u32 d0+") && strstr(call_log, ":256/2 4B="), "%s", call_log);
  }
  rig_close(&r);

  setup(); /* now with a rule: the second launch fails before writing */
  rules("launch kernel=fill_u32 nth=2 fault=fail-before-write");
  rig_open(&r, _i, true);
  rig_load(&r, 0);
  out = rig_alloc(&r, 0, 256);
  rig_set(&r, 0, out, 0x5A, 256);
  ck_assert_int_eq(launch_fill_image(&r, 0, out, 256, 0x22222222u, &w, &err), CUBERT_OK);
  rig_get(&r, 0, out, got, 256);
  ck_assert(all_bytes(got, 0x22, 256));
  launches = calls_of(C_LAUNCH);
  ck_assert_int_eq(launch_fill_image(&r, 0, out, 256, 0x33333333u, &failed_work, &err), CUBERT_ERR_LAUNCH);
  assert_injected(&err, 1, 1);
  ck_assert_ptr_nonnull(strstr(err.message, "launch of `fill_u32` on device 0 stream 1"));
  rig_get(&r, 0, out, got, 256);
  ck_assert(all_bytes(got, 0x22, 256));
  if (r.fake) ck_assert_int_eq(calls_of(C_LAUNCH), launches); /* nothing reached the inner backend */
  cubert_fault_record rec;
  ck_assert(cb_fi_state_record(fi, 1, &rec));
  ck_assert_str_eq(rec.kernel, "fill_u32");
  ck_assert_uint_eq(rec.work, failed_work);
  rig_close(&r);
}
END_TEST

START_TEST(test_launch_scribbles_part_of_each_output_then_fails) {
  NEED_BACKEND(_i);
  rules("launch kernel=add1 fault=scribble:0.25");
  rig r;
  rig_open(&r, _i, true);
  rig_load(&r, 0);
  uint64_t in = rig_alloc(&r, 0, 1024), out = rig_alloc(&r, 0, 1024);
  rig_set(&r, 0, in, 0x22, 1024);
  rig_set(&r, 0, out, 0x11, 1024);
  int fills = calls_of(C_FILL), launches = calls_of(C_LAUNCH);
  cubert_berr err = {0};
  uint64_t w;
  ck_assert_int_eq(launch_add1(&r, 0, in, out, 1024, false, &w, &err), CUBERT_ERR_LAUNCH);
  assert_injected(&err, 1, 1);
  ck_assert_ptr_nonnull(strstr(err.message, "scribbling garbage over 256 bytes of 1 output"));
  unsigned char got[1024], src[1024];
  rig_get(&r, 0, out, got, 1024);
  rig_get(&r, 0, in, src, 1024);
  /* The first quarter is garbage: changed, and neither the old bytes nor
   * what the kernel computes; the rest and the input are untouched. */
  ck_assert(!all_bytes(got, 0x11, 256));
  ck_assert(!all_bytes(got, 0x23, 256));
  for (int i = 0; i < 256; i++) ck_assert_int_eq(got[i], got[i % 8]); /* a repeated pattern */
  ck_assert(all_bytes(got + 256, 0x11, 768));
  ck_assert(all_bytes(src, 0x22, 1024));
  if (r.fake) {
    ck_assert_int_eq(calls_of(C_LAUNCH), launches); /* the kernel never ran */
    ck_assert_int_eq(calls_of(C_FILL), fills + 1); /* the garbage went through an inner fill */
    char expect[64];
    snprintf(expect, sizeof expect, "fill d0 s1 w%llu d0+1024 ps=8 size=256", (unsigned long long)w);
    ck_assert_msg(strstr(call_log, expect), "no `%s` in\n%s", expect, call_log);
  }
  /* The same injection id scribbles the same garbage: a replay is exact. */
  unsigned char first[256];
  memcpy(first, got, 256);
  rig_close(&r);
  cb_fi_state_reset(fi);
  rules("launch kernel=add1 fault=scribble:0.25");
  rig_open(&r, _i, true);
  rig_load(&r, 0);
  in = rig_alloc(&r, 0, 1024), out = rig_alloc(&r, 0, 1024);
  rig_set(&r, 0, out, 0x11, 1024);
  ck_assert_int_eq(launch_add1(&r, 0, in, out, 1024, false, &w, &err), CUBERT_ERR_LAUNCH);
  rig_get(&r, 0, out, got, 1024);
  ck_assert(memcmp(first, got, 256) == 0);
  rig_close(&r);
}
END_TEST

/* ============================================================ peer writes and pairs */

static const char *classify(void *ctx, int a, int b) {
  if ((a == 1 && b == 0) || (a == 0 && b == 1)) return "XGMI";
  if ((a == 2 && b == 0) || (a == 0 && b == 2)) return "PIX";
  return NULL;
}

START_TEST(test_peer_write_fails) {
  NEED_BACKEND(_i);
  rules("peer_write fault=fail");
  rig r;
  rig_open(&r, _i, true);
  for (int d = 0; d < 2; d++) rig_load(&r, d);
  uint64_t shared = rig_alloc(&r, 0, 512), in1 = rig_alloc(&r, 1, 512), out1 = rig_alloc(&r, 1, 512);
  rig_set(&r, 0, shared, 0x33, 512);
  rig_set(&r, 1, in1, 0x44, 512);
  cubert_berr err = {0};
  ck_assert_int_eq(r.ops->peer_enable(r.dev[1], r.dev[0], &err), CUBERT_OK); /* as sharing does */
  uint64_t w;
  /* A launch on device 1 writing device 0's memory through a peer binding. */
  ck_assert_int_eq(launch_add1(&r, 1, in1, shared, 512, true, &w, &err), CUBERT_ERR_LAUNCH);
  assert_injected(&err, 1, 1);
  ck_assert_ptr_nonnull(strstr(err.message, "with device 0"));
  /* A launch writing only its own memory is not a peer write. */
  ck_assert_int_eq(launch_add1(&r, 1, in1, out1, 512, false, &w, &err), CUBERT_OK);
  /* copy_peer is one. */
  ck_assert_int_eq(r.ops->copy_peer(r.dev[1], r.stream[1][0], next_work(&r, 1), out1, r.dev[0], shared, 512, &err),
                   CUBERT_ERR_COPY);
  assert_injected(&err, 2, 1);
  unsigned char got[512];
  rig_get(&r, 0, shared, got, 512);
  ck_assert(all_bytes(got, 0x33, 512));
  rig_get(&r, 1, out1, got, 512);
  ck_assert(all_bytes(got, 0x45, 512));
  cubert_fault_record rec;
  ck_assert(cb_fi_state_record(fi, 1, &rec));
  ck_assert_int_eq(rec.device, 1);
  ck_assert_int_eq(rec.peer, 0);
  ck_assert_str_eq(rec.kernel, "add1_peer");
  ck_assert(cb_fi_state_record(fi, 2, &rec));
  ck_assert_str_eq(rec.operation, "copy_peer");
  ck_assert_int_eq(rec.peer, 0);

  /* A scribbled peer write garbles the owner's bytes. */
  cb_fi_state_clear(fi);
  rules("peer_write kernel=add1_peer fault=scribble:0.5");
  ck_assert_int_eq(launch_add1(&r, 1, in1, shared, 512, true, &w, &err), CUBERT_ERR_LAUNCH);
  ck_assert_int_eq(r.ops->sync(r.dev[1], NULL, &err), CUBERT_OK); /* device 1 ran the scribble */
  rig_get(&r, 0, shared, got, 512);
  ck_assert(!all_bytes(got, 0x33, 256));
  ck_assert(all_bytes(got + 256, 0x33, 256));
  if (r.fake) { /* through a peer binding, as the failed kernel would have written */
    char expect[96];
    snprintf(expect, sizeof expect, "launch d1 s1 w%llu cubert_faultinj_scribble peer:d0+0:256/2",
             (unsigned long long)w);
    ck_assert_msg(strstr(call_log, expect), "no `%s` in\n%s", expect, call_log);
  }
  rig_close(&r);
}
END_TEST

START_TEST(test_pair_and_peer_filters_select_device_pairs) {
  NEED_BACKEND(_i);
  rig r;
  rig_open(&r, _i, true);
  uint64_t src = rig_alloc(&r, 0, 64), d1 = rig_alloc(&r, 1, 64), d2 = rig_alloc(&r, 2, 64);
  cubert_berr err;
  /* Without a classifier the pair class is unknown: never selected. */
  rules("copy_peer pair=PIX");
  ck_assert_int_eq(r.ops->copy_peer(r.dev[2], r.stream[2][0], next_work(&r, 2), d2, r.dev[0], src, 64, &err), CUBERT_OK);
  cb_fi_state_set_pair_classifier(fi, classify, NULL);
  ck_assert_int_eq(r.ops->copy_peer(r.dev[1], r.stream[1][0], next_work(&r, 1), d1, r.dev[0], src, 64, &err), CUBERT_OK);
  ck_assert_int_eq(r.ops->copy_peer(r.dev[2], r.stream[2][0], next_work(&r, 2), d2, r.dev[0], src, 64, &err),
                   CUBERT_ERR_COPY);
  ck_assert_uint_eq(injected(), 1);
  /* peer= names the other device; device= the one called. */
  cb_fi_state_clear(fi);
  rules("peer_enable device=1 peer=2 fault=fail");
  ck_assert_int_eq(r.ops->peer_enable(r.dev[1], r.dev[0], &err), CUBERT_OK);
  ck_assert_int_eq(r.ops->peer_enable(r.dev[2], r.dev[1], &err), CUBERT_OK);
  ck_assert_int_eq(r.ops->peer_enable(r.dev[1], r.dev[2], &err), CUBERT_ERR_PEER_ACCESS);
  assert_injected(&err, 2, 2);
  cb_fi_state_set_pair_classifier(fi, NULL, NULL);
  rig_close(&r);
}
END_TEST

/* ============================================================ copies */

START_TEST(test_copy_fails_or_stops_part_way) {
  NEED_BACKEND(_i);
  rig r;
  rig_open(&r, _i, true);
  uint64_t a = rig_alloc(&r, 0, 1000), b = rig_alloc(&r, 0, 1000), p = rig_alloc(&r, 1, 1000);
  unsigned char pattern[1000], got[1000];
  for (int i = 0; i < 1000; i++) pattern[i] = (unsigned char)(i * 13 + 1);
  cubert_berr err = {0};
  ck_assert_int_eq(r.ops->write(r.dev[0], r.stream[0][0], next_work(&r, 0), a, pattern, 1000, &err), CUBERT_OK);
  rig_set(&r, 0, b, 0xEE, 1000);
  rig_set(&r, 1, p, 0xEE, 1000);

  rules("copy nth=1 fault=fail; copy nth=2 fault=partial:0.3; copy_peer fault=partial:0.5");
  ck_assert_int_eq(r.ops->copy(r.dev[0], r.stream[0][0], next_work(&r, 0), b, a, 1000, &err), CUBERT_ERR_COPY);
  assert_injected(&err, 1, 1);
  rig_get(&r, 0, b, got, 1000);
  ck_assert(all_bytes(got, 0xEE, 1000));

  ck_assert_int_eq(r.ops->copy(r.dev[0], r.stream[0][0], next_work(&r, 0), b, a, 1000, &err), CUBERT_ERR_COPY);
  assert_injected(&err, 2, 2);
  ck_assert_ptr_nonnull(strstr(err.message, "stopped after 300 of 1000 bytes"));
  rig_get(&r, 0, b, got, 1000);
  ck_assert(memcmp(got, pattern, 300) == 0);
  ck_assert(all_bytes(got + 300, 0xEE, 700));

  ck_assert_int_eq(r.ops->copy_peer(r.dev[1], r.stream[1][0], next_work(&r, 1), p, r.dev[0], a, 1000, &err),
                   CUBERT_ERR_COPY);
  assert_injected(&err, 3, 3);
  rig_get(&r, 1, p, got, 1000);
  ck_assert(memcmp(got, pattern, 500) == 0);
  ck_assert(all_bytes(got + 500, 0xEE, 500));

  /* The third copy is selected by no rule. */
  ck_assert_int_eq(r.ops->copy(r.dev[0], r.stream[0][0], next_work(&r, 0), b, a, 1000, &err), CUBERT_OK);
  rig_get(&r, 0, b, got, 1000);
  ck_assert(memcmp(got, pattern, 1000) == 0);

  /* Writes, fills and reads stop part way too; a fill stops on a whole pattern. */
  cb_fi_state_clear(fi);
  rules("write fault=partial:0.5; fill fault=partial:0.5; read fault=partial:0.25");
  unsigned char ee[1000];
  memset(ee, 0xEE, sizeof ee);
  ck_assert_int_eq(r.ops->write(r.dev[0], r.stream[0][0], next_work(&r, 0), b, ee, 1000, &err), CUBERT_ERR_COPY);
  ck_assert_ptr_nonnull(strstr(err.message, "stopped after 500 of 1000 bytes"));
  uint32_t pat4 = 0x01020304;
  ck_assert_int_eq(r.ops->fill(r.dev[0], r.stream[0][0], next_work(&r, 0), b, &pat4, 4, 12, &err), CUBERT_ERR_BACKEND);
  ck_assert_ptr_nonnull(strstr(err.message, "stopped after 4 of 12 bytes"));
  memset(got, 0x77, sizeof got);
  ck_assert_int_eq(r.ops->sync(r.dev[0], NULL, &err), CUBERT_OK);
  ck_assert_int_eq(r.ops->read(r.dev[0], r.stream[0][0], next_work(&r, 0), got, a, 1000, &err), CUBERT_ERR_COPY);
  ck_assert_ptr_nonnull(strstr(err.message, "stopped after 250 of 1000 bytes"));
  ck_assert(memcmp(got, pattern, 250) == 0);
  ck_assert(all_bytes(got + 250, 0x77, 750));
  cb_fi_state_clear(fi);
  rig_get(&r, 0, b, got, 1000);
  ck_assert(memcmp(got, &pat4, 4) == 0);
  ck_assert(all_bytes(got + 4, 0xEE, 496));
  ck_assert(memcmp(got + 500, pattern + 500, 500) == 0);
  rig_close(&r);
}
END_TEST

/* ============================================================ allocation, compile */

START_TEST(test_alloc_fails_out_of_memory) {
  NEED_BACKEND(_i);
  rules("alloc device=1 nth=2 fault=oom");
  rig r;
  rig_open(&r, _i, true);
  (void)rig_alloc(&r, 0, 64);
  (void)rig_alloc(&r, 0, 64);
  (void)rig_alloc(&r, 1, 64);
  int allocs = calls_of(C_ALLOC);
  cubert_backend_mem m;
  cubert_berr err = {0};
  ck_assert_int_eq(r.ops->mem_alloc(r.dev[1], 4096, &m, &err), CUBERT_ERR_OUT_OF_MEMORY);
  assert_injected(&err, 1, 1);
  ck_assert_ptr_nonnull(strstr(err.message, "allocation of 4096 bytes on device 1 failed"));
  if (r.fake) ck_assert_int_eq(calls_of(C_ALLOC), allocs);
  (void)rig_alloc(&r, 1, 64);
  rig_close(&r);
}
END_TEST

START_TEST(test_compile_fails) {
  NEED_BACKEND(_i);
  rules("compile kernel=add* fault=compile-error");
  rig r;
  rig_open(&r, _i, true);
  cubert_berr err = {0};
  int loads = calls_of(C_MODULE);
  void *m = NULL;
  ck_assert_int_eq(r.ops->module_load(r.dev[0], &kern_add1, &m, &err), CUBERT_ERR_COMPILE);
  assert_injected(&err, 1, 1);
  ck_assert_ptr_nonnull(strstr(err.message, "compile of `add1` on device 0 failed"));
  if (r.fake) ck_assert_int_eq(calls_of(C_MODULE), loads);
  ck_assert_int_eq(r.ops->module_load(r.dev[0], &kern_fill, &r.mod_fill[0], &err), CUBERT_OK);
  cubert_fault_record rec;
  ck_assert(cb_fi_state_record(fi, 1, &rec));
  ck_assert_str_eq(rec.operation, "compile");
  ck_assert_str_eq(rec.kernel, "add1");
  ck_assert_int_eq(rec.status, CUBERT_ERR_COMPILE);
  rig_close(&r);
}
END_TEST

/* ============================================================ device lost */

START_TEST(test_device_lost_is_sticky) {
  NEED_BACKEND(_i);
  rules("launch device=1 nth=1 fault=device-lost");
  rig r;
  rig_open(&r, _i, true);
  for (int d = 0; d < 2; d++) rig_load(&r, d);
  uint64_t mem1 = rig_alloc(&r, 1, 256), mem0 = rig_alloc(&r, 0, 256);
  cubert_berr err = {0};
  uint64_t w;
  ck_assert_int_eq(launch_fill(&r, 1, 0, mem1, 256, 7, &w, &err), CUBERT_ERR_DEVICE_LOST);
  ck_assert(err.sticky);
  assert_injected(&err, 1, 1);
  ck_assert_ptr_nonnull(strstr(err.message, "device 1 lost during launch of `fill_u32`"));

  /* The rule is gone, the loss is not: every call on device 1 fails, sticky. */
  cb_fi_state_clear(fi);
  int before = calls_of(C_WRITE) + calls_of(C_READ) + calls_of(C_SYNC) + calls_of(C_ALLOC) + calls_of(C_MODULE) +
               calls_of(C_STREAM) + calls_of(C_LAUNCH);
  unsigned char buf[256] = {0};
  cubert_status got[8];
  cubert_backend_mem m;
  void *s = NULL, *mod = NULL;
  got[0] = r.ops->write(r.dev[1], r.stream[1][0], next_work(&r, 1), mem1, buf, 256, &err);
  got[1] = r.ops->read(r.dev[1], r.stream[1][0], next_work(&r, 1), buf, mem1, 256, &err);
  got[2] = r.ops->sync(r.dev[1], NULL, &err);
  got[3] = r.ops->mem_alloc(r.dev[1], 64, &m, &err);
  got[4] = r.ops->module_load(r.dev[1], &kern_add1, &mod, &err);
  got[5] = r.ops->stream_create(r.dev[1], &s, &err);
  got[6] = launch_fill(&r, 1, 1, mem1, 256, 7, &w, &err);
  got[7] = r.ops->peer_enable(r.dev[1], r.dev[0], &err);
  for (int i = 0; i < 8; i++) ck_assert_msg(got[i] == CUBERT_ERR_DEVICE_LOST, "call %d: %d", i, got[i]);
  ck_assert(err.sticky);
  ck_assert_ptr_nonnull(strstr(err.message, "device 1 is lost: injected fault #1 (rule 1)"));
  if (r.fake)
    ck_assert_int_eq(calls_of(C_WRITE) + calls_of(C_READ) + calls_of(C_SYNC) + calls_of(C_ALLOC) +
                         calls_of(C_MODULE) + calls_of(C_STREAM) + calls_of(C_LAUNCH),
                     before);
  ck_assert_uint_eq(injected(), 1); /* failing on a lost device injects nothing new */

  /* Other devices keep working; reaching the lost one from them fails, not sticky. */
  rig_set(&r, 0, mem0, 0x42, 256);
  ck_assert_int_eq(r.ops->copy_peer(r.dev[0], r.stream[0][0], next_work(&r, 0), mem0, r.dev[1], mem1, 256, &err),
                   CUBERT_ERR_DEVICE_LOST);
  ck_assert(!err.sticky);
  ck_assert_ptr_nonnull(strstr(err.message, "peer device 1 is lost"));
  ck_assert_int_eq(launch_add1(&r, 0, mem0, mem1, 256, true, &w, &err), CUBERT_ERR_DEVICE_LOST);
  ck_assert(!err.sticky);
  ck_assert_int_eq(launch_fill(&r, 0, 0, mem0, 256, 0x09090909u, &w, &err), CUBERT_OK);
  unsigned char back[256];
  rig_get(&r, 0, mem0, back, 256);
  ck_assert(all_bytes(back, 0x09, 256));

  ck_assert(cb_fi_armed(cb_fi_armed_flag(fi))); /* the lost device keeps the layer armed */
  rig_close(&r);
  ck_assert(!cb_fi_armed(cb_fi_armed_flag(fi)));
}
END_TEST

/* ============================================================ failures that surface at sync */

START_TEST(test_sync_only_failure_is_drained_with_its_work_number) {
  NEED_BACKEND(_i);
  rules("copy nth=2 fault=async");
  rig r;
  rig_open(&r, _i, true);
  uint64_t a = rig_alloc(&r, 0, 128), b = rig_alloc(&r, 0, 128);
  rig_set(&r, 0, a, 0x61, 128);
  cubert_berr err = {0};
  cubert_async_failure f[4];
  ck_assert_int_eq(r.ops->copy(r.dev[0], r.stream[0][0], next_work(&r, 0), b, a, 64, &err), CUBERT_OK);
  uint64_t w = next_work(&r, 0);
  ck_assert_int_eq(r.ops->copy(r.dev[0], r.stream[0][0], w, b + 64, a, 64, &err), CUBERT_OK);
  if (r.fake) /* not run yet: nothing to report */
    ck_assert_uint_eq(r.ops->drain_failures(r.dev[0], f, 4), 0);
  ck_assert_int_eq(r.ops->sync(r.dev[0], NULL, &err), CUBERT_OK);
  size_t n = r.ops->drain_failures(r.dev[0], f, 4);
  ck_assert_uint_eq(n, 1);
  ck_assert_uint_eq(f[0].work, w);
  ck_assert_int_eq(f[0].status, CUBERT_ERR_COPY);
  ck_assert(!f[0].sticky);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "injected fault #1 (rule 1): copy on device 0 stream 1 (work %llu)",
           (unsigned long long)w);
  ck_assert_msg(strncmp(f[0].message, prefix, strlen(prefix)) == 0, "%s", f[0].message);
  ck_assert_uint_eq(r.ops->drain_failures(r.dev[0], f, 4), 0); /* drained once */
  unsigned char got[128];
  rig_get(&r, 0, b, got, 128);
  ck_assert(all_bytes(got, 0x61, 128)); /* the work itself ran */

  /* async-scribble garbles the outputs too; the inner backend's own failures
   * are drained beside the injected ones; a destroyed stream still reports. */
  cb_fi_state_clear(fi);
  rules("launch fault=async-scribble:0.5");
  rig_load(&r, 0);
  uint64_t lw;
  ck_assert_int_eq(launch_fill(&r, 0, 1, b, 128, 0x01010101u, &lw, &err), CUBERT_OK);
  ck_assert_int_eq(r.ops->sync(r.dev[0], NULL, &err), CUBERT_OK);
  n = r.ops->drain_failures(r.dev[0], f, 4);
  ck_assert_uint_eq(n, 1);
  ck_assert_uint_eq(f[0].work, lw);
  ck_assert_int_eq(f[0].status, CUBERT_ERR_LAUNCH);
  rig_get(&r, 0, b, got, 128);
  ck_assert(!all_bytes(got, 0x01, 64));
  ck_assert(all_bytes(got + 64, 0x01, 64));
  rig_close(&r);
}
END_TEST

START_TEST(test_async_failures_merge_with_the_inner_ones_and_outlive_streams) {
  /* Fake only: it can fail work on demand and defers work until sync. */
  rules("write nth=1 fault=async");
  rig r;
  rig_open(&r, 0, true);
  uint64_t a = rig_alloc(&r, 0, 64);
  fake_device *fd = current_fake->dev[0];
  unsigned char buf[64] = {0};
  cubert_berr err;
  uint64_t w1 = next_work(&r, 0), w2 = next_work(&r, 0);
  fd->fail_work = w2;
  ck_assert_int_eq(r.ops->write(r.dev[0], r.stream[0][1], w1, a, buf, 64, &err), CUBERT_OK);
  ck_assert_int_eq(r.ops->write(r.dev[0], r.stream[0][1], w2, a, buf, 64, &err), CUBERT_OK);
  cubert_async_failure f[4];
  ck_assert_uint_eq(r.ops->drain_failures(r.dev[0], f, 4), 0);
  /* Capacity 1: the rest waits for the next drain. */
  ck_assert_int_eq(r.ops->sync(r.dev[0], r.stream[0][1], &err), CUBERT_OK);
  ck_assert_uint_eq(r.ops->drain_failures(r.dev[0], f, 1), 1);
  ck_assert_uint_eq(f[0].work, w2); /* the inner backend's own */
  ck_assert_uint_eq(r.ops->drain_failures(r.dev[0], f, 1), 1);
  ck_assert_uint_eq(f[0].work, w1); /* the injected one */
  ck_assert_uint_eq(r.ops->drain_failures(r.dev[0], f, 4), 0);

  /* Destroying the stream does not lose a pending injected failure. */
  cb_fi_state_clear(fi);
  rules("fill fault=async");
  uint8_t p = 1;
  uint64_t w3 = next_work(&r, 0);
  ck_assert_int_eq(r.ops->fill(r.dev[0], r.stream[0][1], w3, a, &p, 1, 64, &err), CUBERT_OK);
  r.ops->stream_destroy(r.dev[0], r.stream[0][1]);
  ck_assert_int_eq(r.ops->stream_create(r.dev[0], &r.stream[0][1], &err), CUBERT_OK);
  cb_fi_state_clear(fi); /* the report does not need the rule */
  ck_assert_uint_eq(r.ops->drain_failures(r.dev[0], f, 4), 1);
  ck_assert_uint_eq(f[0].work, w3);
  rig_close(&r);
}
END_TEST

/* ============================================================ streams, log, seeds */

START_TEST(test_streams_are_numbered_in_creation_order) {
  NEED_BACKEND(_i);
  rules("write stream=2 device=0 fault=fail");
  rig r;
  rig_open(&r, _i, true);
  uint64_t a = rig_alloc(&r, 0, 16);
  unsigned char buf[16] = {0};
  cubert_berr err;
  ck_assert_int_eq(r.ops->write(r.dev[0], r.stream[0][0], next_work(&r, 0), a, buf, 16, &err), CUBERT_OK);
  ck_assert_int_eq(r.ops->write(r.dev[1], r.stream[1][1], next_work(&r, 1), rig_alloc(&r, 1, 16), buf, 16, &err),
                   CUBERT_OK);
  ck_assert_int_eq(r.ops->write(r.dev[0], r.stream[0][1], next_work(&r, 0), a, buf, 16, &err), CUBERT_ERR_COPY);
  ck_assert_ptr_nonnull(strstr(err.message, "write on device 0 stream 2"));
  cubert_fault_record rec;
  ck_assert(cb_fi_state_record(fi, 1, &rec));
  ck_assert_uint_eq(rec.stream, 2);
  /* A third stream is number 3. */
  cb_fi_state_clear(fi);
  rules("event_record stream=3");
  void *s3, *ev;
  ck_assert_int_eq(r.ops->stream_create(r.dev[0], &s3, &err), CUBERT_OK);
  ck_assert_int_eq(r.ops->event_record(r.dev[0], r.stream[0][1], &ev, &err), CUBERT_OK);
  r.ops->event_destroy(r.dev[0], ev);
  ck_assert_int_eq(r.ops->event_record(r.dev[0], s3, &ev, &err), CUBERT_ERR_BACKEND);
  r.ops->stream_destroy(r.dev[0], s3);
  rig_close(&r);
}
END_TEST

/* A fixed program of mixed calls; returns its injection log as text. */
static char *seeded_program(int which, uint64_t seed) {
  setup();
  cb_fi_state_set_seed(fi, seed);
  rig r;
  rig_open(&r, which, true);
  rig_load(&r, 0);
  rules("alloc prob=0.1 fault=oom");
  cubert_berr err;
  uint64_t bufs[8];
  int nbufs = 0;
  for (int i = 0; i < 16 && nbufs < 8; i++) {
    cubert_backend_mem *m = &r.mems[r.nmems];
    if (r.ops->mem_alloc(r.dev[0], 256, m, &err) == CUBERT_OK) {
      r.mem_dev[r.nmems++] = 0;
      bufs[nbufs++] = m->address;
    }
  }
  ck_assert_int_ge(nbufs, 2);
  /* Backend memory starts uninitialised: give every buffer known bytes
   * (without faults) so the bytes a run leaves depend on the run alone. */
  cb_fi_state_clear(fi);
  for (int i = 0; i < nbufs; i++) rig_set(&r, 0, bufs[i], (unsigned char)(0xA0 + i), 256);
  rules("work prob=0.2 fault=scribble:0.5; read prob=0.1; alloc prob=0.1 fault=oom");
  unsigned char data[256];
  for (int i = 0; i < 256; i++) data[i] = (unsigned char)i;
  for (int i = 0; i < 120; i++) {
    uint64_t x = bufs[i % nbufs], y = bufs[(i * 5 + 1) % nbufs], w;
    switch (i % 4) {
    case 0: (void)r.ops->write(r.dev[0], r.stream[0][0], next_work(&r, 0), x, data, 256, &err); break;
    case 1: (void)r.ops->copy(r.dev[0], r.stream[0][0], next_work(&r, 0), y, x, 256, &err); break;
    case 2: (void)launch_fill(&r, 0, 0, x, 256, (uint32_t)i, &w, &err); break;
    default: (void)r.ops->read(r.dev[0], r.stream[0][0], next_work(&r, 0), data, y, 256, &err); break;
    }
  }
  (void)r.ops->sync(r.dev[0], NULL, &err);
  /* The log, and the bytes the run left (scribbles included). */
  size_t cap = 1 << 16, len = 0;
  char *out = malloc(cap);
  out[0] = '\0';
  cubert_fault_record rec[256];
  size_t n = cb_fi_state_log(fi, 0, rec, 256);
  for (size_t i = 0; i < n; i++)
    len += (size_t)snprintf(out + len, cap - len, "#%llu r%u %s w%llu\n", (unsigned long long)rec[i].id, rec[i].rule,
                            rec[i].operation, (unsigned long long)rec[i].work);
  for (int i = 0; i < nbufs; i++) {
    unsigned char got[256];
    cb_fi_state_clear(fi);
    rig_get(&r, 0, bufs[i], got, 256);
    len += (size_t)snprintf(out + len, cap - len, "buf%d %08x\n", i, hash_bytes(got, 256));
  }
  ck_assert_uint_gt(n, 5);
  rig_close(&r);
  return out;
}

START_TEST(test_same_seed_replays_the_run) {
  NEED_BACKEND(_i);
  char *a = seeded_program(_i, 1234), *b = seeded_program(_i, 1234), *c = seeded_program(_i, 99);
  ck_assert_str_eq(a, b);
  ck_assert_str_ne(a, c);
  free(a), free(b), free(c);
}
END_TEST

START_TEST(test_log_ids_follow_the_injections) {
  NEED_BACKEND(_i);
  rules("alloc nth=1 fault=oom; write nth=1; launch nth=1; sync nth=1");
  rig r;
  rig_open(&r, _i, true);
  rig_load(&r, 0);
  cubert_backend_mem m;
  cubert_berr err;
  ck_assert_int_eq(r.ops->mem_alloc(r.dev[0], 64, &m, &err), CUBERT_ERR_OUT_OF_MEMORY);
  assert_injected(&err, 1, 1);
  uint64_t a = rig_alloc(&r, 0, 64), w;
  unsigned char buf[64] = {0};
  ck_assert_int_eq(r.ops->write(r.dev[0], r.stream[0][0], next_work(&r, 0), a, buf, 64, &err), CUBERT_ERR_COPY);
  assert_injected(&err, 2, 2);
  ck_assert_int_eq(launch_fill(&r, 0, 0, a, 64, 1, &w, &err), CUBERT_ERR_LAUNCH);
  assert_injected(&err, 3, 3);
  ck_assert_int_eq(r.ops->sync(r.dev[0], r.stream[0][0], &err), CUBERT_ERR_BACKEND);
  assert_injected(&err, 4, 4);
  cubert_fault_record rec[8];
  ck_assert_uint_eq(cb_fi_state_log(fi, 0, rec, 8), 4);
  const char *ops[] = {"alloc", "write", "launch", "sync"};
  for (int i = 0; i < 4; i++) {
    ck_assert_uint_eq(rec[i].id, (uint64_t)i + 1);
    ck_assert_uint_eq(rec[i].rule, (uint32_t)i + 1);
    ck_assert_str_eq(rec[i].operation, ops[i]);
    ck_assert_int_eq(rec[i].device, 0);
  }
  ck_assert_uint_eq(rec[2].work, w);
  ck_assert_str_eq(rec[2].kernel, "fill_u32");
  ck_assert_ptr_nonnull(strstr(rec[2].message, "failed before writing"));
  char line[256];
  cb_fi_state_summary(fi, line, sizeof line);
  ck_assert_ptr_nonnull(strstr(line, "4 faults injected, #1-#4"));
  rig_close(&r);
}
END_TEST

START_TEST(test_device_base_makes_indices_runtime_wide) {
  /* A second backend's device 0 is runtime device 5. */
  rules("alloc device=5 fault=oom");
  cb_host_options cfg_host = {.devices = 2};
  cubert_backend_config cfg = {.options = &cfg_host};
  void *b, *d0, *d1;
  int n;
  cubert_berr err;
  cubert_device_info info;
  ck_assert_int_eq(cb_faultinj_open(&fake_ops, fi, 5, &cfg, &b, &n, &err), CUBERT_OK);
  const cubert_backend_ops *o = cb_faultinj_ops();
  ck_assert_str_eq(o->name, "faultinj");
  ck_assert_int_eq(o->open(&cfg, &b, &n, &err), CUBERT_ERR_UNSUPPORTED);
  ck_assert_int_eq(o->device_open(b, 0, &d0, &info, &err), CUBERT_OK);
  ck_assert_int_eq(o->device_open(b, 1, &d1, &info, &err), CUBERT_OK);
  cubert_backend_mem m;
  ck_assert_int_eq(o->mem_alloc(d1, 64, &m, &err), CUBERT_OK);
  o->mem_free(d1, &m);
  ck_assert_int_eq(o->mem_alloc(d0, 64, &m, &err), CUBERT_ERR_OUT_OF_MEMORY);
  ck_assert_ptr_nonnull(strstr(err.message, "on device 5"));
  o->device_close(d0);
  o->device_close(d1);
  o->close(b);
}
END_TEST

/* ============================================================ through the runtime */

static cubert_runtime *runtime_with(const char *faults, bool no_faultinj) {
  cubert_runtime_options o;
  cubert_runtime_options_init(&o);
  o.backends = "host";
  o.host_devices = 2;
  o.host_memory = 64u << 20;
  o.faults = faults;
  o.no_faultinj = no_faultinj;
  cubert_runtime *rt = NULL;
  ck_assert_msg(cubert_runtime_create(&o, &rt) == CUBERT_OK, "%s", cubert_last_error_message());
  return rt;
}

static cubert_status copy_u32(cubert_client *c, cubert_kernel *k, cubert_handle *in, cubert_handle *out, uint64_t n) {
  cubert_arg args[3] = {cubert_arg_buffer(in), cubert_arg_buffer(out), cubert_arg_scalar(&n, 8)};
  cubert_launch_config cfg = {{4, 1, 1}, {64, 1, 1}, 0};
  return cubert_launch(c, k, &cfg, args, 3);
}

START_TEST(test_runtime_reports_the_injection_and_never_hands_out_scribbled_bytes) {
  cubert_runtime *rt = runtime_with("launch kernel=cubert_copy_u32 nth=1 fault=scribble:0.5", false);
  cubert_client *c = NULL;
  ck_assert_int_eq(cubert_client_create(rt, 0, &c), CUBERT_OK);
  cubert_kernel *k = NULL;
  ck_assert_int_eq(cubert_builtin_kernel(CUBERT_BUILTIN_COPY_U32, &k), CUBERT_OK);
  uint32_t data[256], got[256];
  for (int i = 0; i < 256; i++) data[i] = 0x1000u + (uint32_t)i;
  cubert_handle *a = NULL, *b = NULL;
  ck_assert_int_eq(cubert_handle_create(c, data, sizeof data, &a), CUBERT_OK);
  ck_assert_int_eq(cubert_handle_create(c, data, sizeof data, &b), CUBERT_OK);
  cubert_status st = copy_u32(c, k, a, b, 256);
  ck_assert_int_ne(st, CUBERT_OK);
  ck_assert_msg(strstr(cubert_last_error_message(), "injected fault #1 (rule 1)"), "%s", cubert_last_error_message());
  ck_assert_uint_eq(cubert_faultinj_injected(rt), 1);
  (void)cubert_sync(c);
  /* Half of b is garbage now; the runtime must refuse all of it. */
  ck_assert_int_eq(cubert_handle_read(c, b, got, sizeof got), CUBERT_ERR_TAINTED);
  ck_assert_msg(strstr(cubert_last_error_message(), "injected fault #1"), "%s", cubert_last_error_message());
  /* The next launch is not selected: it writes b again, which repairs it. */
  ck_assert_int_eq(copy_u32(c, k, a, b, 256), CUBERT_OK);
  ck_assert_int_eq(cubert_handle_read(c, b, got, sizeof got), CUBERT_OK);
  ck_assert(memcmp(got, data, sizeof got) == 0);
  cubert_handle_release(a);
  cubert_handle_release(b);
  cubert_kernel_release(k);
  cubert_client_destroy(c);
  cubert_runtime_destroy(rt);
}
END_TEST

/* What mix_host saw: every argument's size and bytes (a buffer's: the
 * first 8 of its memory). */
static struct {
  uint32_t nargs;
  uint64_t sizes[9];
  unsigned char bytes[9][16];
} mix_seen;

static cubert_status mix_host(const cubert_host_launch *l, char *msg, size_t cap) {
  (void)msg;
  (void)cap;
  mix_seen.nargs = l->nargs;
  for (uint32_t i = 0; i < l->nargs && i < 9; i++) {
    mix_seen.sizes[i] = l->sizes[i];
    memcpy(mix_seen.bytes[i], l->args[i], l->sizes[i] < 16 ? l->sizes[i] : 16);
  }
  return CUBERT_OK;
}

/* A launch of buffers and scalars of every alignment, with an image
 * layout (in, u8, u8, u16, u32, out, u64, 16 bytes, 3 bytes: offsets 0, 8,
 * 9, 10, 12, 16, 24, 32, 48) and without one (u32, in: the pointer would
 * need padding), reaches the kernel whole: through the layer with no rule
 * (the image to the host backend's launch_image), through the layer with a
 * rule that selects other kernels (the image as records, fi_launch), and
 * without the layer (the runtime to the host backend directly). */
START_TEST(test_runtime_image_launches_reach_the_kernel_whole) {
  static const cubert_param mix_params[] = {
      {"in", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0},   {"a", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 1},
      {"b", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 1},    {"c", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 2},
      {"d", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 4},    {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0},
      {"e", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 8},    {"f", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 16},
      {"g", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 3}};
  static const cubert_param pad_params[] = {{"n", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 4},
                                            {"in", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0}};
  const char *faults[] = {"", "launch kernel=some_other_kernel", ""};
  for (int v = 0; v < 3; v++) {
    cubert_runtime *rt = runtime_with(faults[v], v == 2);
    cubert_client *c = NULL;
    ck_assert_int_eq(cubert_client_create(rt, 0, &c), CUBERT_OK);
    cubert_kernel_desc md = {.name = "mix", .params = mix_params, .nparams = 9, .host_fn = mix_host};
    cubert_kernel_desc pd = {.name = "pad", .params = pad_params, .nparams = 2, .host_fn = mix_host};
    cubert_kernel *mk = NULL, *pk = NULL;
    ck_assert_int_eq(cubert_kernel_create(&md, &mk), CUBERT_OK);
    ck_assert_int_eq(cubert_kernel_create(&pd, &pk), CUBERT_OK);
    unsigned char data[96];
    for (int i = 0; i < 96; i++) data[i] = (unsigned char)(0xA0 + i);
    cubert_handle *whole = NULL, *in = NULL, *out = NULL;
    ck_assert_int_eq(cubert_handle_create(c, data, sizeof data, &whole), CUBERT_OK);
    ck_assert_int_eq(cubert_handle_slice(whole, 8, 48, &in), CUBERT_OK); /* 40 bytes from byte 8 */
    ck_assert_int_eq(cubert_handle_empty(c, 24, &out), CUBERT_OK);
    uint8_t a = 0x11, b = 0x22;
    uint16_t cc = 0x3344;
    uint32_t d = 0x55667788u;
    uint64_t e = 0x99aabbccddeeff01ull;
    unsigned char f[16], g[3] = {0x7a, 0x7b, 0x7c};
    for (int i = 0; i < 16; i++) f[i] = (unsigned char)(0x40 + i);
    cubert_arg args[9] = {cubert_arg_buffer(in),       cubert_arg_scalar(&a, 1), cubert_arg_scalar(&b, 1),
                          cubert_arg_scalar(&cc, 2),   cubert_arg_scalar(&d, 4), cubert_arg_buffer(out),
                          cubert_arg_scalar(&e, 8),    cubert_arg_scalar(f, 16), cubert_arg_scalar(g, 3)};
    cubert_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0};
    memset(&mix_seen, 0, sizeof mix_seen);
    ck_assert_msg(cubert_launch(c, mk, &cfg, args, 9) == CUBERT_OK, "%s", cubert_last_error_message());
    ck_assert_int_eq(cubert_sync(c), CUBERT_OK);
    static const uint64_t want_sizes[9] = {40, 1, 1, 2, 4, 24, 8, 16, 3};
    ck_assert_uint_eq(mix_seen.nargs, 9);
    for (int i = 0; i < 9; i++) ck_assert_msg(mix_seen.sizes[i] == want_sizes[i], "variant %d argument %d", v, i);
    ck_assert(memcmp(mix_seen.bytes[0], data + 8, 16) == 0); /* the slice's memory, from its start */
    ck_assert_uint_eq(mix_seen.bytes[1][0], a);
    ck_assert_uint_eq(mix_seen.bytes[2][0], b);
    ck_assert(memcmp(mix_seen.bytes[3], &cc, 2) == 0);
    ck_assert(memcmp(mix_seen.bytes[4], &d, 4) == 0);
    ck_assert(memcmp(mix_seen.bytes[6], &e, 8) == 0);
    ck_assert(memcmp(mix_seen.bytes[7], f, 16) == 0);
    ck_assert(memcmp(mix_seen.bytes[8], g, 3) == 0);
    cubert_arg pargs[2] = {cubert_arg_scalar(&d, 4), cubert_arg_buffer(in)};
    memset(&mix_seen, 0, sizeof mix_seen);
    ck_assert_msg(cubert_launch(c, pk, &cfg, pargs, 2) == CUBERT_OK, "%s", cubert_last_error_message());
    ck_assert_int_eq(cubert_sync(c), CUBERT_OK);
    ck_assert_uint_eq(mix_seen.nargs, 2);
    ck_assert_uint_eq(mix_seen.sizes[0], 4);
    ck_assert_uint_eq(mix_seen.sizes[1], 40);
    ck_assert(memcmp(mix_seen.bytes[0], &d, 4) == 0);
    ck_assert(memcmp(mix_seen.bytes[1], data + 8, 16) == 0);
    ck_assert_uint_eq(cubert_faultinj_injected(rt), 0);
    cubert_handle_release(in);
    cubert_handle_release(out);
    cubert_handle_release(whole);
    cubert_kernel_release(mk);
    cubert_kernel_release(pk);
    cubert_client_destroy(c);
    cubert_runtime_destroy(rt);
  }
}
END_TEST

START_TEST(test_runtime_without_the_layer_ignores_rules) {
  setenv("CUBERT_FAULTS", "launch", 1);
  cubert_runtime *rt = runtime_with(NULL, true);
  unsetenv("CUBERT_FAULTS");
  cubert_faultinj_diag diag;
  ck_assert_int_eq(cubert_faultinj_add(rt, "launch", NULL, NULL, &diag), CUBERT_ERR_UNSUPPORTED);
  cubert_client *c = NULL;
  ck_assert_int_eq(cubert_client_create(rt, 0, &c), CUBERT_OK);
  cubert_kernel *k = NULL;
  ck_assert_int_eq(cubert_builtin_kernel(CUBERT_BUILTIN_COPY_U32, &k), CUBERT_OK);
  uint32_t data[64] = {7}, got[64];
  cubert_handle *a = NULL, *b = NULL;
  ck_assert_int_eq(cubert_handle_create(c, data, sizeof data, &a), CUBERT_OK);
  ck_assert_int_eq(cubert_handle_empty(c, sizeof data, &b), CUBERT_OK);
  ck_assert_int_eq(copy_u32(c, k, a, b, 64), CUBERT_OK);
  ck_assert_int_eq(cubert_handle_read(c, b, got, sizeof got), CUBERT_OK);
  ck_assert_uint_eq(got[0], 7);
  ck_assert_uint_eq(cubert_faultinj_injected(rt), 0);
  cubert_handle_release(a);
  cubert_handle_release(b);
  cubert_kernel_release(k);
  cubert_client_destroy(c);
  cubert_runtime_destroy(rt);
}
END_TEST

/* Fills device `d` of `rt` with a launch of cubert_fill_u32; its status. */
static cubert_status fill_on(cubert_runtime *rt, int d) {
  cubert_client *c = NULL;
  ck_assert_int_eq(cubert_client_create(rt, d, &c), CUBERT_OK);
  cubert_kernel *k = NULL;
  ck_assert_int_eq(cubert_builtin_kernel(CUBERT_BUILTIN_FILL_U32, &k), CUBERT_OK);
  cubert_handle *h = NULL;
  ck_assert_int_eq(cubert_handle_empty(c, 256, &h), CUBERT_OK);
  uint64_t n = 64;
  uint32_t v = 7;
  cubert_arg args[3] = {cubert_arg_buffer(h), cubert_arg_scalar(&n, 8), cubert_arg_scalar(&v, 4)};
  cubert_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  cubert_status st = cubert_launch(c, k, &cfg, args, 3);
  (void)cubert_sync(c);
  cubert_handle_release(h);
  cubert_kernel_release(k);
  cubert_client_destroy(c);
  return st;
}

static const char *always_xgmi(void *ctx, int device, int peer) { return "XGMI"; }

START_TEST(test_two_runtimes_have_their_own_rules_logs_and_classifiers) {
  /* Rules of one runtime never select calls of another, device= included. */
  cubert_runtime *a = runtime_with("launch kernel=cubert_fill_u32 device=1 fault=fail", false);
  cubert_runtime *b = runtime_with(NULL, false); /* default options: $CUBERT_FAULTS is unset */
  ck_assert_int_eq(fill_on(b, 1), CUBERT_OK);
  ck_assert_int_eq(fill_on(a, 0), CUBERT_OK);
  ck_assert_int_eq(fill_on(a, 1), CUBERT_ERR_LAUNCH);
  ck_assert_uint_eq(cubert_faultinj_injected(a), 1);
  ck_assert_uint_eq(cubert_faultinj_injected(b), 0);
  cubert_faultinj_stats sa, sb;
  ck_assert_int_eq(cubert_faultinj_get_stats(a, &sa), CUBERT_OK);
  ck_assert_int_eq(cubert_faultinj_get_stats(b, &sb), CUBERT_OK);
  ck_assert_uint_eq(sa.rules, 1);
  ck_assert_uint_eq(sb.rules, 0);
  ck_assert_uint_eq(sb.calls, 0);
  /* A rule added to b is b's alone; ids and logs are per runtime. */
  cubert_faultinj_diag diag;
  uint32_t id = 0;
  ck_assert_int_eq(cubert_faultinj_add(b, "launch device=0 nth=1", "b", &id, &diag), CUBERT_OK);
  ck_assert_uint_eq(id, 1);
  ck_assert_int_eq(fill_on(a, 0), CUBERT_OK);
  ck_assert_int_eq(fill_on(b, 0), CUBERT_ERR_LAUNCH);
  cubert_fault_record ra, rb;
  ck_assert(cubert_faultinj_record(a, 1, &ra));
  ck_assert(cubert_faultinj_record(b, 1, &rb));
  ck_assert_int_eq(ra.device, 1);
  ck_assert_int_eq(rb.device, 0);
  ck_assert(!cubert_faultinj_record(a, 2, &ra));
  /* A pair classifier is the runtime's: a runtime whose rules need its own
   * topology, made and destroyed later, neither replaces nor clears a's. */
  ck_assert_int_eq(cubert_faultinj_set_pair_classifier(a, always_xgmi, NULL), CUBERT_OK);
  ck_assert_int_eq(cubert_faultinj_add(a, "link_info pair=XGMI fault=fail", NULL, NULL, &diag), CUBERT_OK);
  cubert_runtime *c = runtime_with("link_info pair=SYS nth=1000", false);
  cubert_runtime_destroy(c);
  cubert_device_link link;
  ck_assert_int_eq(cubert_runtime_device_link(a, 0, 1, &link), CUBERT_ERR_BACKEND);
  ck_assert_msg(strstr(cubert_last_error_message(), "injected fault #2 (rule 2)"), "%s", cubert_last_error_message());
  if (cubert_runtime_device_link(b, 0, 1, &link) != CUBERT_OK) /* the host backend may not know links */
    ck_assert_msg(!strstr(cubert_last_error_message(), "injected"), "%s", cubert_last_error_message());
  cubert_runtime_destroy(b);
  cubert_runtime_destroy(a);
}
END_TEST

START_TEST(test_cubert_faults_configures_each_runtime) {
  /* Each runtime gets its own copy of $CUBERT_FAULTS: nth=1 fires once in
   * each, and a second runtime leaves the first one's rules and counts. */
  setenv("CUBERT_FAULTS", "launch kernel=cubert_fill_u32 nth=1 fault=fail", 1);
  cubert_runtime *a = runtime_with(NULL, false);
  ck_assert_int_eq(fill_on(a, 0), CUBERT_ERR_LAUNCH);
  cubert_runtime *b = runtime_with(NULL, false);
  unsetenv("CUBERT_FAULTS");
  ck_assert_int_eq(fill_on(a, 0), CUBERT_OK);
  ck_assert_int_eq(fill_on(b, 0), CUBERT_ERR_LAUNCH);
  ck_assert_int_eq(fill_on(b, 0), CUBERT_OK);
  ck_assert_uint_eq(cubert_faultinj_injected(a), 1);
  ck_assert_uint_eq(cubert_faultinj_injected(b), 1);
  uint64_t matched = 0;
  ck_assert_int_eq(cubert_faultinj_rule_describe(a, 1, NULL, 0, &matched, NULL), CUBERT_OK);
  ck_assert_uint_eq(matched, 2);
  cubert_runtime_destroy(a);
  cubert_runtime_destroy(b);
}
END_TEST

/* ============================================================ threads (TSan) */

typedef struct worker {
  rig *r;
  int dev;
  int injected_async;
  _Atomic int *stop;
  _Atomic int *started;         /* helpers running: workers wait for them */
} worker;

static void *work_loop(void *arg) {
  worker *k = arg;
  rig *r = k->r;
  int d = k->dev;
  cubert_berr err;
  uint64_t a = r->mems[d * 2].address, b = r->mems[d * 2 + 1].address, w;
  unsigned char buf[256];
  memset(buf, d, sizeof buf);
  while (atomic_load(k->started) < 2) {
  }
  for (int i = 0; i < 2000; i++) {
    cubert_status st;
    switch (i % 4) {
    case 0: st = r->ops->write(r->dev[d], r->stream[d][0], next_work(r, d), a, buf, 256, &err); break;
    case 1: st = r->ops->copy(r->dev[d], r->stream[d][0], next_work(r, d), b, a, 256, &err); break;
    case 2: st = launch_fill(r, d, 0, b, 256, (uint32_t)i, &w, &err); break;
    default: st = r->ops->read(r->dev[d], r->stream[d][0], next_work(r, d), buf, b, 256, &err); break;
    }
    (void)st;
    if (i % 50 == 0) (void)r->ops->sync(r->dev[d], NULL, &err);
  }
  (void)r->ops->sync(r->dev[d], NULL, &err);
  return NULL;
}

/* Drains and reads progress beside the workers, as the runtime may. */
static void *drain_loop(void *arg) {
  worker *k = arg;
  cubert_async_failure f[8];
  atomic_fetch_add(k->started, 1);
  while (!atomic_load(k->stop)) {
    for (int d = 0; d < k->r->ndev; d++) {
      k->injected_async += (int)k->r->ops->drain_failures(k->r->dev[d], f, 8);
      (void)k->r->ops->progress(k->r->dev[d], k->r->stream[d][0]);
    }
  }
  return NULL;
}

/* Adds and removes rules while calls run. */
static void *rule_loop(void *arg) {
  worker *k = arg;
  atomic_fetch_add(k->started, 1);
  while (!atomic_load(k->stop)) {
    uint32_t id = 0;
    cubert_faultinj_diag diag;
    (void)cb_fi_state_add(fi, "read prob=0.01", 14, "thread", false, &id, &diag);
    (void)cb_fi_state_remove(fi, id);
    cubert_fault_record rec[4];
    (void)cb_fi_state_log(fi, 0, rec, 4);
  }
  return NULL;
}

START_TEST(test_threads_share_the_layer_safely) {
  NEED_BACKEND(_i);
  cb_fi_state_set_seed(fi, 3);
  rules("work prob=0.1 fault=async; launch prob=0.05 fault=scribble");
  rig r;
  rig_open(&r, _i, true);
  for (int d = 0; d < NDEV; d++) {
    rig_load(&r, d);
    (void)rig_alloc(&r, d, 256);
    (void)rig_alloc(&r, d, 256);
  }
  _Atomic int stop = 0, started = 0;
  worker w[NDEV], drainer = {&r, 0, 0, &stop, &started}, ruler = {&r, 0, 0, &stop, &started};
  pthread_t t[NDEV], td, tr;
  pthread_create(&td, NULL, drain_loop, &drainer);
  pthread_create(&tr, NULL, rule_loop, &ruler);
  for (int d = 0; d < NDEV; d++) {
    w[d] = (worker){&r, d, 0, &stop, &started};
    pthread_create(&t[d], NULL, work_loop, &w[d]);
  }
  for (int d = 0; d < NDEV; d++) pthread_join(t[d], NULL);
  atomic_store(&stop, 1);
  pthread_join(td, NULL);
  pthread_join(tr, NULL);
  cubert_async_failure f[64];
  int drained = drainer.injected_async;
  for (int d = 0; d < NDEV; d++) {
    size_t n;
    while ((n = r.ops->drain_failures(r.dev[d], f, 64)) > 0) drained += (int)n;
  }
  /* Every async injection was drained exactly once. */
  cubert_fault_record *rec = malloc(CUBERT_FAULTINJ_LOG_CAPACITY * sizeof *rec);
  size_t n = cb_fi_state_log(fi, 0, rec, CUBERT_FAULTINJ_LOG_CAPACITY);
  cubert_faultinj_stats stats;
  cb_fi_state_stats(fi, &stats);
  ck_assert_uint_eq(stats.log_dropped, 0);
  int async = 0;
  for (size_t i = 0; i < n; i++) async += rec[i].fault == CUBERT_FAULT_ASYNC;
  ck_assert_int_gt(async, 10);
  ck_assert_int_eq(drained, async);
  free(rec);
  rig_close(&r);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("faultinj_decorator");
  TCase *t = tcase_create("decorator");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 60);
  int backends = 2; /* fake, host */
  tcase_add_loop_test(t, test_no_rule_forwards_every_call_unchanged, 0, backends);
  tcase_add_loop_test(t, test_launch_fails_before_writing, 0, backends);
  tcase_add_loop_test(t, test_launch_scribbles_part_of_each_output_then_fails, 0, backends);
  tcase_add_loop_test(t, test_image_launches_pass_the_layer_and_meet_its_rules, 0, backends);
  tcase_add_loop_test(t, test_peer_write_fails, 0, backends);
  tcase_add_loop_test(t, test_pair_and_peer_filters_select_device_pairs, 0, backends);
  tcase_add_loop_test(t, test_copy_fails_or_stops_part_way, 0, backends);
  tcase_add_loop_test(t, test_alloc_fails_out_of_memory, 0, backends);
  tcase_add_loop_test(t, test_compile_fails, 0, backends);
  tcase_add_loop_test(t, test_device_lost_is_sticky, 0, backends);
  tcase_add_loop_test(t, test_sync_only_failure_is_drained_with_its_work_number, 0, backends);
  tcase_add_test(t, test_async_failures_merge_with_the_inner_ones_and_outlive_streams);
  tcase_add_loop_test(t, test_streams_are_numbered_in_creation_order, 0, backends);
  tcase_add_loop_test(t, test_same_seed_replays_the_run, 0, backends);
  tcase_add_loop_test(t, test_log_ids_follow_the_injections, 0, backends);
  tcase_add_test(t, test_device_base_makes_indices_runtime_wide);
  tcase_add_loop_test(t, test_threads_share_the_layer_safely, 0, backends);
  tcase_add_test(t, test_runtime_reports_the_injection_and_never_hands_out_scribbled_bytes);
  tcase_add_test(t, test_runtime_without_the_layer_ignores_rules);
  tcase_add_test(t, test_runtime_image_launches_reach_the_kernel_whole);
  tcase_add_test(t, test_two_runtimes_have_their_own_rules_logs_and_classifiers);
  tcase_add_test(t, test_cubert_faults_configures_each_runtime);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
