/* backends/host/host_backend.c: the host backend, simulated devices in host
 * memory (the embedded default, and what CI runs everything on).
 *
 * A device is a memory budget, a table of streams and a list of failures.
 * Memory is plain host memory (256-byte aligned) whose address is the
 * pointer, on the owner and on peers alike, so a peer kernel dereferences
 * the owner's bytes directly. Each stream is a work_queue: one worker thread
 * running writes, fills, copies, launches (the kernel's host function),
 * event waits and timer stamps in order. An event is a stream and a
 * position in it; a timer, the worker's monotonic clock at its position.
 * A worker first calls config->place_thread(place_ctx, device index) when
 * the runtime gave one (placement near the device's NUMA node).
 *
 * Every address handed in is checked against the allocations of the backend
 * before the work is enqueued, so a wrong address is an error, never a
 * write to random host memory. A launch's peer buffer must lie in memory of
 * a device this one enabled peer access to, as on real GPUs.
 *
 * Asynchronous failures: a host function returning an error is recorded
 * {work, status, message} before its item counts as completed, so once
 * progress() reaches W, drain_failures() already holds W's failure.
 *
 * Threading (backend.h): the runtime serialises calls per device, except
 * read, sync, progress and drain_failures; everything here is thread-safe
 * regardless. The backend lock guards the allocation table, memory budgets
 * and peer state; a device lock its stream table and module list; a failure
 * lock its failure list; each queue its own items. The only nesting is
 * device lock -> queue lock (sync's snapshot of stream ends).
 *
 * Ownership: the backend owns its devices (device_close frees one, close
 * frees what is left); a device owns its streams, allocations, modules and
 * failures, and device_close frees whatever the runtime left behind. An
 * event keeps the stream it names alive (refcount), so a wait never reads
 * freed memory, even after the stream was destroyed. */
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
#include "base/str.h"
#include "backends/host/work_queue.h"
#include "backends/backend.h"
#include "backends/host/host_backend.h"
#include "base/array.h"

#define HOST_ALIGN 256u
#define HOST_MAX_DEVICES 4096
#define HOST_DEFAULT_DEVICES 4
#define HOST_DEFAULT_MEMORY (UINT64_C(1) << 30)
#define HOST_MAX_THREADS 1024u
#define HOST_MAX_SHARED 65536u
#define HOST_MAX_SCALAR 64u

typedef struct host_backend host_backend;
typedef struct host_device host_device;

/* One allocation of any device, in the backend's table sorted by address. */
typedef struct host_alloc {
  uint64_t address;
  uint64_t size;
  int device;
} host_alloc;

struct host_backend {
  pthread_mutex_t lock;
  int ndevices;
  uint64_t memory;          /* budget per device */
  bool *deny;               /* ndevices x ndevices, symmetric */
  char (*bus_ids)[32];      /* per device, "" when none */
  host_device **devices;    /* open devices, NULL when closed */
  host_alloc *allocs;       /* sorted by address */
  size_t nallocs, cap_allocs;
  /* config->place_thread/place_ctx: called first on every stream worker
   * with the device's index (the runtime binds it near the device) */
  void (*place_thread)(void *ctx, int index);
  void *place_ctx;
};

typedef struct host_stream {
  cb_work_queue queue;
  host_device *device;
  atomic_uint refs;         /* the device's table, events, pending waits */
} host_stream;

struct host_device {
  host_backend *backend;
  int index;
  char name[24];            /* "host:N" */
  uint64_t memory_used;     /* under backend->lock */
  bool *peer_enabled;       /* per peer index, under backend->lock */

  pthread_mutex_t lock;     /* the stream table and the module list */
  host_stream **streams;
  size_t nstreams, cap_streams;
  struct host_module *modules;

  pthread_mutex_t fail_lock;
  cubert_async_failure *failures;
  size_t nfailures, cap_failures;
  uint64_t lost_failures;   /* not recorded for want of memory */
};

typedef struct host_event {
  host_stream *stream;      /* one reference */
  uint64_t position;
} host_event;

typedef struct host_module {
  struct host_module *prev, *next; /* the device's list, so close frees leftovers */
  cubert_host_fn fn;
  char *name;
  uint32_t nparams;
  cubert_param_kind *kinds;
  uint32_t *scalar_sizes;
} host_module;

/* ------------------------------------------------------------ helpers */

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

static void stream_unref(host_stream *s) {
  if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
    cb_work_queue_destroy(&s->queue);
    cb_free(s);
  }
}

static void stream_ref(host_stream *s) { atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed); }

/* Index of the allocation with the greatest address <= addr, or -1. Under
 * backend->lock. */
static ptrdiff_t alloc_find(const host_backend *b, uint64_t addr) {
  size_t lo = 0, hi = b->nallocs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (b->allocs[mid].address <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (ptrdiff_t)lo - 1;
}

/* The device owning [addr, addr + size), or -1 when the range is not inside
 * one allocation. Under backend->lock. */
static int range_owner(const host_backend *b, uint64_t addr, uint64_t size) {
  ptrdiff_t i = alloc_find(b, addr);
  if (i < 0)
    return -1;
  const host_alloc *a = &b->allocs[i];
  if (addr - a->address > a->size || size > a->size - (addr - a->address))
    return -1;
  return a->device;
}

/* Checks that [addr, addr + size) is memory of device `dev`. `what` names
 * the range in the message ("destination", "argument 2 (`x`)"). */
static cubert_status check_range(host_device *dev, const char *op, const char *what, uint64_t addr,
                                 uint64_t size, cubert_berr *err) {
  if (size == 0)
    return CUBERT_OK;
  if (addr + size < addr)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_RANGE, "%s: %s %s at 0x%" PRIx64 " (%" PRIu64
                           " bytes) wraps around the address space", dev->name, op, what, addr, size);
  host_backend *b = dev->backend;
  pthread_mutex_lock(&b->lock);
  int owner = range_owner(b, addr, size);
  pthread_mutex_unlock(&b->lock);
  if (owner == dev->index)
    return CUBERT_OK;
  if (owner >= 0)
    return cubert_berr_set(err, CUBERT_ERR_WRONG_DEVICE,
                           "%s: %s %s at 0x%" PRIx64 " (%" PRIu64 " bytes) is memory of host:%d",
                           dev->name, op, what, addr, size, owner);
  return cubert_berr_set(err, CUBERT_ERR_OUT_OF_RANGE,
                         "%s: %s %s at 0x%" PRIx64 " (%" PRIu64
                         " bytes) is not inside one allocation of the backend",
                         dev->name, op, what, addr, size);
}

static cubert_status check_stream(host_device *dev, void *stream, const char *op, cubert_berr *err) {
  if (!stream)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: %s: no stream", dev->name, op);
  if (((host_stream *)stream)->device != dev)
    return cubert_berr_set(err, CUBERT_ERR_WRONG_DEVICE, "%s: %s: the stream belongs to %s",
                           dev->name, op, ((host_stream *)stream)->device->name);
  return CUBERT_OK;
}

static cubert_status enqueue(host_stream *s, cb_work *w, const char *op, cubert_berr *err) {
  if (cb_work_queue_push(&s->queue, w) == 0) {
    if (w->release)
      w->release(w);
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: %s: the stream was destroyed",
                           s->device->name, op);
  }
  return CUBERT_OK;
}

static void record_failure(host_device *dev, uint64_t work, cubert_status status,
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

/* ------------------------------------------------------------ config */

/* Parses "0-2,1-3" into the symmetric deny matrix. Strict: decimal device
 * numbers below n, two different ones per pair, pairs separated by single
 * commas, no spaces. "" denies nothing. */
static cubert_status parse_deny(const char *text, int n, bool *deny, cubert_berr *err) {
  const char *p = text;
  if (!*p)
    return CUBERT_OK;
  for (;;) {
    const char *item = p;
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    long dev[2];
    const char *q = item;
    for (int k = 0; k < 2; k++) {
      if (q >= item + len || *q < '0' || *q > '9')
        goto bad;
      long v = 0;
      while (q < item + len && *q >= '0' && *q <= '9') {
        v = v * 10 + (*q - '0');
        if (v > HOST_MAX_DEVICES * 10L)
          goto bad;
        q++;
      }
      dev[k] = v;
      if (k == 0) {
        if (q >= item + len || *q != '-')
          goto bad;
        q++;
      }
    }
    if (q != item + len)
      goto bad;
    for (int k = 0; k < 2; k++)
      if (dev[k] >= n)
        return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                               "host_peer_deny: pair `%.*s` names device %ld, but there %s %d "
                               "host device%s",
                               (int)len, item, dev[k], n == 1 ? "is" : "are", n, n == 1 ? "" : "s");
    if (dev[0] == dev[1])
      return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                             "host_peer_deny: pair `%.*s` names one device twice", (int)len, item);
    deny[dev[0] * n + dev[1]] = true;
    deny[dev[1] * n + dev[0]] = true;
    if (!end)
      return CUBERT_OK;
    p = end + 1;
    continue;
  bad:
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "host_peer_deny: bad pair `%.*s` in \"%s\": expected two device "
                           "numbers joined by '-', pairs separated by ',', as in \"0-2,1-3\"",
                           (int)len, item, text);
  }
}

/* ------------------------------------------------------------ backend */

static void device_close_impl(void *device);

static void backend_free(host_backend *b) {
  pthread_mutex_destroy(&b->lock);
  cb_free(b->deny);
  cb_free(b->bus_ids);
  cb_free(b->devices);
  cb_free(b->allocs);
  cb_free(b);
}

static cubert_status host_open(const cubert_backend_config *config, void **backend,
                               int *device_count, cubert_berr *err) {
  static const cubert_backend_config no_config = {0};
  static const cb_host_options defaults = {.devices = HOST_DEFAULT_DEVICES, .memory = HOST_DEFAULT_MEMORY};
  if (!config)
    config = &no_config;
  const cb_host_options *o = config->options ? config->options : &defaults;
  if (!backend || !device_count)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "host backend: open without outputs");
  int n = o->devices;
  if (n < 0 || n > HOST_MAX_DEVICES)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "host backend: %d devices asked for (0 to %d)", n, HOST_MAX_DEVICES);
  if (o->memory == 0)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "host backend: host_memory is 0 bytes per device");
  if (o->pci_bus_ids && o->pci_bus_id_count < 0)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "host backend: host_pci_bus_id_count is %d",
                           o->pci_bus_id_count);

  host_backend *b = cb_calloc(1, sizeof *b);
  if (!b)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "host backend: no memory for the backend");
  size_t nn = (size_t)n;
  b->ndevices = n;
  b->memory = o->memory;
  b->place_thread = config->place_thread;
  b->place_ctx = config->place_ctx;
  b->deny = cb_calloc(nn * nn + 1, sizeof *b->deny);
  b->bus_ids = cb_calloc(nn + 1, sizeof *b->bus_ids);
  b->devices = cb_calloc(nn + 1, sizeof *b->devices);
  if (!b->deny || !b->bus_ids || !b->devices) {
    cb_free(b->deny);
    cb_free(b->bus_ids);
    cb_free(b->devices);
    cb_free(b);
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "host backend: no memory for %d devices", n);
  }
  int rc = pthread_mutex_init(&b->lock, NULL);
  if (rc) {
    cb_free(b->deny);
    cb_free(b->bus_ids);
    cb_free(b->devices);
    cb_free(b);
    return cubert_berr_set(err, CUBERT_ERR_BACKEND, "host backend: mutex: %s", strerror(rc));
  }

  cubert_status st = CUBERT_OK;
  if (o->peer_deny)
    st = parse_deny(o->peer_deny, n, b->deny, err);
  if (st == CUBERT_OK && o->pci_bus_ids) {
    int count = o->pci_bus_id_count < n ? o->pci_bus_id_count : n;
    for (int i = 0; i < count; i++) {
      const char *id = o->pci_bus_ids[i];
      if (!id)
        continue;
      if (strlen(id) >= sizeof b->bus_ids[i]) {
        st = cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                             "host backend: PCI bus id %d \"%.40s...\" is longer than %zu characters",
                             i, id, sizeof b->bus_ids[i] - 1);
        break;
      }
      strcpy(b->bus_ids[i], id);
    }
  }
  if (st != CUBERT_OK) {
    backend_free(b);
    return st;
  }
  *backend = b;
  *device_count = n;
  return CUBERT_OK;
}

static void host_close(void *backend) {
  host_backend *b = backend;
  if (!b)
    return;
  for (int i = 0; i < b->ndevices; i++)
    if (b->devices[i])
      device_close_impl(b->devices[i]);
  backend_free(b);
}

/* ------------------------------------------------------------ devices */

static cubert_status host_device_open(void *backend, int index, void **device,
                                      cubert_device_info *info, cubert_berr *err) {
  host_backend *b = backend;
  if (index < 0 || index >= b->ndevices)
    return cubert_berr_set(err, CUBERT_ERR_NO_DEVICE, "host backend: no device %d (%d devices)",
                           index, b->ndevices);
  host_device *d = cb_calloc(1, sizeof *d);
  bool *peers = cb_calloc((size_t)b->ndevices, sizeof *peers);
  if (!d || !peers) {
    cb_free(d);
    cb_free(peers);
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "host:%d: no memory for the device", index);
  }
  d->backend = b;
  d->index = index;
  d->peer_enabled = peers;
  snprintf(d->name, sizeof d->name, "host:%d", index);
  int rc = pthread_mutex_init(&d->lock, NULL);
  if (rc == 0 && (rc = pthread_mutex_init(&d->fail_lock, NULL)) != 0)
    pthread_mutex_destroy(&d->lock);
  if (rc) {
    cb_free(peers);
    cb_free(d);
    return cubert_berr_set(err, CUBERT_ERR_BACKEND, "host:%d: mutex: %s", index, strerror(rc));
  }

  pthread_mutex_lock(&b->lock);
  bool busy = b->devices[index] != NULL;
  if (!busy)
    b->devices[index] = d;
  pthread_mutex_unlock(&b->lock);
  if (busy) {
    pthread_mutex_destroy(&d->fail_lock);
    pthread_mutex_destroy(&d->lock);
    cb_free(peers);
    cb_free(d);
    return cubert_berr_set(err, CUBERT_ERR_BUSY, "host:%d is already open", index);
  }

  if (info) {
    snprintf(info->name, sizeof info->name, "%s", d->name);
    snprintf(info->arch, sizeof info->arch, "host");
    snprintf(info->pci_bus_id, sizeof info->pci_bus_id, "%s", b->bus_ids[index]);
    info->total_memory = b->memory;
    info->max_threads_per_block = HOST_MAX_THREADS;
    info->max_block[0] = 1024;
    info->max_block[1] = 1024;
    info->max_block[2] = 64;
    info->max_grid[0] = 2147483647u;
    info->max_grid[1] = 65535;
    info->max_grid[2] = 65535;
    info->max_shared_memory = HOST_MAX_SHARED;
    info->warp_size = 32;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    info->multiprocessors = cpus > 0 ? (uint32_t)cpus : 1;
  }
  *device = d;
  return CUBERT_OK;
}

static void stream_destroy_impl(host_device *dev, host_stream *s);
static void module_free(struct host_module *m);

static void device_close_impl(void *device) {
  host_device *d = device;
  if (!d)
    return;
  host_backend *b = d->backend;
  /* Streams first: their pending work may still touch the memory. */
  pthread_mutex_lock(&d->lock);
  while (d->nstreams) {
    host_stream *s = d->streams[d->nstreams - 1];
    pthread_mutex_unlock(&d->lock);
    stream_destroy_impl(d, s);
    pthread_mutex_lock(&d->lock);
  }
  pthread_mutex_unlock(&d->lock);

  pthread_mutex_lock(&b->lock);
  size_t kept = 0;
  for (size_t i = 0; i < b->nallocs; i++) {
    if (b->allocs[i].device == d->index)
      free((void *)(uintptr_t)b->allocs[i].address); /* device memory: aligned_alloc */
    else
      b->allocs[kept++] = b->allocs[i];
  }
  b->nallocs = kept;
  b->devices[d->index] = NULL;
  pthread_mutex_unlock(&b->lock);

  while (d->modules) {
    host_module *m = d->modules;
    d->modules = m->next;
    module_free(m);
  }
  pthread_mutex_destroy(&d->fail_lock);
  pthread_mutex_destroy(&d->lock);
  cb_free(d->failures);
  cb_free(d->streams);
  cb_free(d->peer_enabled);
  cb_free(d);
}

/* ------------------------------------------------------------ memory */

static cubert_status host_mem_alloc(void *device, uint64_t size, cubert_backend_mem *mem,
                                    cubert_berr *err) {
  host_device *d = device;
  host_backend *b = d->backend;
  if (size == 0)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: allocation of 0 bytes", d->name);

  pthread_mutex_lock(&b->lock);
  uint64_t used = d->memory_used;
  if (size > b->memory - used) {
    pthread_mutex_unlock(&b->lock);
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY,
                           "%s: out of memory: %" PRIu64 " bytes asked for, %" PRIu64 " of %" PRIu64
                           " bytes in use",
                           d->name, size, used, b->memory);
  }
  d->memory_used += size; /* reserved before the slow part, outside the lock */
  pthread_mutex_unlock(&b->lock);

  /* The simulated device's memory, not the library's bookkeeping: it comes
   * from the C library (aligned, and counted against the device's size),
   * never from the allocator hooks (base/alloc.h). */
  void *p = NULL;
  if (size <= SIZE_MAX - HOST_ALIGN)
    p = aligned_alloc(HOST_ALIGN, (size_t)align_up(size, HOST_ALIGN));

  pthread_mutex_lock(&b->lock);
  host_alloc *grown = b->allocs;
  if (p && b->nallocs == b->cap_allocs) {
    size_t cap;
    grown = cb_array_grow(b->allocs, b->cap_allocs, b->nallocs + 1, sizeof *grown, &cap);
    if (grown) {
      b->allocs = grown;
      b->cap_allocs = cap;
    }
  }
  if (!p || !grown) {
    d->memory_used -= size;
    pthread_mutex_unlock(&b->lock);
    free(p);
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY,
                           "%s: out of memory: the host has no %" PRIu64 " bytes to give", d->name,
                           size);
  }
  uint64_t addr = (uint64_t)(uintptr_t)p;
  size_t at = (size_t)(alloc_find(b, addr) + 1);
  memmove(&b->allocs[at + 1], &b->allocs[at], (b->nallocs - at) * sizeof *b->allocs);
  b->allocs[at] = (host_alloc){addr, size, d->index};
  b->nallocs++;
  pthread_mutex_unlock(&b->lock);

  mem->address = addr;
  mem->size = size;
  mem->cookie = p;
  return CUBERT_OK;
}

static void host_mem_free(void *device, cubert_backend_mem *mem) {
  host_device *d = device;
  host_backend *b = d->backend;
  if (!mem || !mem->address)
    return;
  pthread_mutex_lock(&b->lock);
  ptrdiff_t i = alloc_find(b, mem->address);
  bool found = i >= 0 && b->allocs[i].address == mem->address && b->allocs[i].device == d->index;
  if (found) {
    d->memory_used -= b->allocs[i].size;
    memmove(&b->allocs[i], &b->allocs[i + 1], (b->nallocs - (size_t)i - 1) * sizeof *b->allocs);
    b->nallocs--;
  }
  pthread_mutex_unlock(&b->lock);
  /* An address this device never handed out is ignored: freeing it could
   * only corrupt the host heap. */
  if (found)
    free((void *)(uintptr_t)mem->address); /* device memory: aligned_alloc */
}

/* ------------------------------------------------------------ streams */

static cubert_status host_stream_create(void *device, void **stream, cubert_berr *err) {
  host_device *d = device;
  host_stream *s = cb_calloc(1, sizeof *s);
  if (!s)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no memory for a stream", d->name);
  s->device = d;
  atomic_init(&s->refs, 1);

  pthread_mutex_lock(&d->lock);
  if (d->nstreams == d->cap_streams) {
    size_t cap;
    host_stream **grown = cb_array_grow(d->streams, d->cap_streams, d->nstreams + 1, sizeof *grown, &cap);
    if (!grown) {
      pthread_mutex_unlock(&d->lock);
      cb_free(s);
      return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no memory for a stream", d->name);
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

static void stream_destroy_impl(host_device *d, host_stream *s) {
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

static void host_stream_destroy(void *device, void *stream) {
  if (stream)
    stream_destroy_impl(device, stream);
}

static cubert_status host_event_record(void *device, void *stream, void **event, cubert_berr *err) {
  host_device *d = device;
  cubert_status st = check_stream(d, stream, "event record", err);
  if (st != CUBERT_OK)
    return st;
  host_event *e = cb_malloc(sizeof *e);
  if (!e)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no memory for an event", d->name);
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

static cubert_status host_stream_wait(void *device, void *stream, void *event, cubert_berr *err) {
  host_device *d = device;
  cubert_status st = check_stream(d, stream, "stream wait", err);
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
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no memory for a stream wait", d->name);
  it->work.run = wait_run;
  it->work.release = wait_release;
  it->work.tag = 0;
  it->target = e->stream;
  stream_ref(it->target);
  it->position = e->position;
  return enqueue(stream, &it->work, "stream wait", err);
}

static void host_event_destroy(void *device, void *event) {
  host_event *e = event;
  if (!e)
    return;
  stream_unref(e->stream);
  cb_free(e);
}

/* ------------------------------------------------------------ transfers */

typedef struct write_item {
  cb_work work;
  void *dst;
  size_t size;
  alignas(16) unsigned char data[];
} write_item;

static void write_run(cb_work *w) {
  write_item *it = (write_item *)w;
  memcpy(it->dst, it->data, it->size);
}

static void free_item(cb_work *w) { cb_free(w); }

static cubert_status host_write(void *device, void *stream, uint64_t work, uint64_t dst,
                                const void *src, uint64_t size, cubert_berr *err) {
  host_device *d = device;
  cubert_status st = check_stream(d, stream, "write", err);
  if (st == CUBERT_OK)
    st = check_range(d, "write", "destination", dst, size, err);
  if (st != CUBERT_OK)
    return st;
  if (size && !src)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: write: no source", d->name);
  write_item *it = size <= SIZE_MAX - sizeof *it ? cb_malloc(sizeof *it + (size_t)size) : NULL;
  if (!it)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY,
                           "%s: write: no host memory to stage %" PRIu64 " bytes", d->name, size);
  it->work.run = write_run;
  it->work.release = free_item;
  it->work.tag = work;
  it->dst = (void *)(uintptr_t)dst;
  it->size = (size_t)size;
  if (size)
    memcpy(it->data, src, (size_t)size);
  return enqueue(stream, &it->work, "write", err);
}

typedef struct copy_item {
  cb_work work;
  void *dst;
  const void *src;
  size_t size;
} copy_item;

static void copy_run(cb_work *w) {
  copy_item *it = (copy_item *)w;
  if (it->size)
    memmove(it->dst, it->src, it->size);
}

static cubert_status host_read(void *device, void *stream, uint64_t work, void *dst, uint64_t src,
                               uint64_t size, cubert_berr *err) {
  host_device *d = device;
  cubert_status st = check_stream(d, stream, "read", err);
  if (st == CUBERT_OK)
    st = check_range(d, "read", "source", src, size, err);
  if (st != CUBERT_OK)
    return st;
  if (size && !dst)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: read: no destination", d->name);
  /* The item lives on this stack: the worker does not touch it once its
   * position completed, which is what we wait for. */
  copy_item it = {{NULL, copy_run, NULL, work}, dst, (const void *)(uintptr_t)src, (size_t)size};
  host_stream *s = stream;
  uint64_t position = cb_work_queue_push(&s->queue, &it.work);
  if (position == 0)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: read: the stream was destroyed",
                           d->name);
  cb_work_queue_wait(&s->queue, position);
  return CUBERT_OK;
}

typedef struct fill_item {
  cb_work work;
  unsigned char *dst;
  size_t size;
  uint32_t pattern_size;
  unsigned char pattern[8];
} fill_item;

static void fill_run(cb_work *w) {
  fill_item *it = (fill_item *)w;
  if (it->size == 0)
    return;
  if (it->pattern_size == 1) {
    memset(it->dst, it->pattern[0], it->size);
    return;
  }
  /* One pattern, then keep doubling the filled prefix. */
  memcpy(it->dst, it->pattern, it->pattern_size);
  size_t done = it->pattern_size;
  while (done < it->size) {
    size_t n = done < it->size - done ? done : it->size - done;
    memcpy(it->dst + done, it->dst, n);
    done += n;
  }
}

static cubert_status host_fill(void *device, void *stream, uint64_t work, uint64_t dst,
                               const void *pattern, uint32_t pattern_size, uint64_t size,
                               cubert_berr *err) {
  host_device *d = device;
  cubert_status st = check_stream(d, stream, "fill", err);
  if (st != CUBERT_OK)
    return st;
  if (!pattern || (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8))
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: fill: pattern of %" PRIu32 " bytes (1, 2, 4 or 8)", d->name,
                           pattern_size);
  if (size % pattern_size)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: fill: %" PRIu64 " bytes is not a multiple of the %" PRIu32
                           "-byte pattern",
                           d->name, size, pattern_size);
  st = check_range(d, "fill", "destination", dst, size, err);
  if (st != CUBERT_OK)
    return st;
  fill_item *it = cb_malloc(sizeof *it);
  if (!it)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no memory for a fill", d->name);
  it->work.run = fill_run;
  it->work.release = free_item;
  it->work.tag = work;
  it->dst = (unsigned char *)(uintptr_t)dst;
  it->size = (size_t)size;
  it->pattern_size = pattern_size;
  memcpy(it->pattern, pattern, pattern_size);
  return enqueue(stream, &it->work, "fill", err);
}

static cubert_status enqueue_copy(host_device *d, host_stream *s, uint64_t work, uint64_t dst,
                                  uint64_t src, uint64_t size, const char *op, cubert_berr *err) {
  copy_item *it = cb_malloc(sizeof *it);
  if (!it)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no memory for a %s", d->name, op);
  it->work.run = copy_run;
  it->work.release = free_item;
  it->work.tag = work;
  it->dst = (void *)(uintptr_t)dst;
  it->src = (const void *)(uintptr_t)src;
  it->size = (size_t)size;
  return enqueue(s, &it->work, op, err);
}

static cubert_status host_copy(void *device, void *stream, uint64_t work, uint64_t dst, uint64_t src,
                               uint64_t size, cubert_berr *err) {
  host_device *d = device;
  cubert_status st = check_stream(d, stream, "copy", err);
  if (st == CUBERT_OK)
    st = check_range(d, "copy", "source", src, size, err);
  if (st == CUBERT_OK)
    st = check_range(d, "copy", "destination", dst, size, err);
  if (st != CUBERT_OK)
    return st;
  return enqueue_copy(d, stream, work, dst, src, size, "copy", err);
}

static cubert_status host_copy_peer(void *device, void *stream, uint64_t work, uint64_t dst,
                                    void *src_device, uint64_t src, uint64_t size, cubert_berr *err) {
  host_device *d = device;
  host_device *sd = src_device;
  cubert_status st = check_stream(d, stream, "peer copy", err);
  if (st != CUBERT_OK)
    return st;
  if (!sd || sd->backend != d->backend)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: peer copy: the source device is not of this host backend", d->name);
  st = check_range(sd, "peer copy", "source", src, size, err);
  if (st == CUBERT_OK)
    st = check_range(d, "peer copy", "destination", dst, size, err);
  if (st != CUBERT_OK)
    return st;
  return enqueue_copy(d, stream, work, dst, src, size, "peer copy", err);
}

/* ------------------------------------------------------------ kernels */

static cubert_status host_module_load(void *device, const cubert_backend_kernel *kernel,
                                      void **module, cubert_berr *err) {
  host_device *d = device;
  if (!kernel || !kernel->name)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: module load: no kernel", d->name);
  if (!kernel->host_fn)
    return cubert_berr_set(err, CUBERT_ERR_UNSUPPORTED, "%s: kernel `%s` has no host function",
                           d->name, kernel->name);
  if (kernel->nparams && !kernel->params)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: kernel `%s`: %" PRIu32 " parameters but no list", d->name,
                           kernel->name, kernel->nparams);
  host_module *m = cb_calloc(1, sizeof *m);
  size_t nparams = kernel->nparams;
  if (m) {
    m->name = cb_strdup(kernel->name);
    m->kinds = cb_calloc(nparams + 1, sizeof *m->kinds);
    m->scalar_sizes = cb_calloc(nparams + 1, sizeof *m->scalar_sizes);
  }
  if (!m || !m->name || !m->kinds || !m->scalar_sizes) {
    if (m) {
      cb_free(m->name);
      cb_free(m->kinds);
      cb_free(m->scalar_sizes);
    }
    cb_free(m);
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no memory to load kernel `%s`",
                           d->name, kernel->name);
  }
  m->fn = kernel->host_fn;
  m->nparams = kernel->nparams;
  for (size_t i = 0; i < nparams; i++) {
    m->kinds[i] = kernel->params[i].kind;
    m->scalar_sizes[i] = kernel->params[i].size;
  }
  pthread_mutex_lock(&d->lock);
  m->next = d->modules;
  if (m->next)
    m->next->prev = m;
  d->modules = m;
  pthread_mutex_unlock(&d->lock);
  *module = m;
  return CUBERT_OK;
}

static void module_free(host_module *m) {
  cb_free(m->name);
  cb_free(m->kinds);
  cb_free(m->scalar_sizes);
  cb_free(m);
}

static void host_module_unload(void *device, void *module) {
  host_device *d = device;
  host_module *m = module;
  if (!m)
    return;
  pthread_mutex_lock(&d->lock);
  if (m->prev)
    m->prev->next = m->next;
  else
    d->modules = m->next;
  if (m->next)
    m->next->prev = m->prev;
  pthread_mutex_unlock(&d->lock);
  module_free(m);
}

/* A launch and everything it needs, in one block: argument pointers, sizes,
 * scalar copies (64 bytes each, aligned for any scalar type), the name. */
typedef struct launch_item {
  cb_work work;
  host_device *device;
  cubert_host_fn fn;
  const char *name;
  cubert_host_launch launch;
} launch_item;

typedef struct scalar_slot {
  alignas(16) unsigned char bytes[HOST_MAX_SCALAR];
} scalar_slot;

static void launch_run(cb_work *w) {
  launch_item *it = (launch_item *)w;
  char message[256] = "";
  cubert_status st = it->fn(&it->launch, message, sizeof message);
  if (st == CUBERT_OK)
    return;
  if ((int)st < 0 || st >= CUBERT_STATUS_COUNT_)
    st = CUBERT_ERR_LAUNCH; /* a host function returning garbage still failed */
  message[sizeof message - 1] = '\0';
  char full[400]; /* room for every part; record_failure cuts it to the record's size */
  int len = snprintf(full, sizeof full, "%s: kernel `%s` failed: %s", it->device->name, it->name,
                     message[0] ? message : "(no message)");
  (void)len; /* a long message is cut, never overrun */
  record_failure(it->device, w->tag, st, full);
}

static cubert_status check_shape(host_device *d, const char *kernel, const cubert_launch_config *c,
                                 cubert_berr *err) {
  static const uint32_t max_grid[3] = {2147483647u, 65535, 65535};
  static const uint32_t max_block[3] = {1024, 1024, 64};
  for (int k = 0; k < 3; k++) {
    if (c->grid[k] == 0 || c->grid[k] > max_grid[k] || c->block[k] == 0 ||
        c->block[k] > max_block[k])
      return cubert_berr_set(err, CUBERT_ERR_LAUNCH_CONFIG,
                             "%s: kernel `%s`: grid (%" PRIu32 ", %" PRIu32 ", %" PRIu32
                             ") block (%" PRIu32 ", %" PRIu32 ", %" PRIu32 ") outside the limits",
                             d->name, kernel, c->grid[0], c->grid[1], c->grid[2], c->block[0],
                             c->block[1], c->block[2]);
  }
  uint64_t threads = (uint64_t)c->block[0] * c->block[1] * c->block[2];
  if (threads > HOST_MAX_THREADS)
    return cubert_berr_set(err, CUBERT_ERR_LAUNCH_CONFIG,
                           "%s: kernel `%s`: %" PRIu64 " threads per block (at most %u)", d->name,
                           kernel, threads, HOST_MAX_THREADS);
  if (c->shared_memory > HOST_MAX_SHARED)
    return cubert_berr_set(err, CUBERT_ERR_LAUNCH_CONFIG,
                           "%s: kernel `%s`: %" PRIu32 " bytes of shared memory (at most %u)",
                           d->name, kernel, c->shared_memory, HOST_MAX_SHARED);
  return CUBERT_OK;
}

/* A peer buffer: memory of a device that `d` enabled peer access to (or its
 * own). Under nothing; takes the backend lock. */
static cubert_status check_peer_range(host_device *d, const char *what, uint64_t addr,
                                      uint64_t size, cubert_berr *err) {
  if (size == 0)
    return CUBERT_OK;
  host_backend *b = d->backend;
  pthread_mutex_lock(&b->lock);
  int owner = addr + size < addr ? -1 : range_owner(b, addr, size);
  bool enabled = owner >= 0 && (owner == d->index || d->peer_enabled[owner]);
  pthread_mutex_unlock(&b->lock);
  if (owner < 0)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_RANGE,
                           "%s: launch: %s at 0x%" PRIx64 " (%" PRIu64
                           " bytes) is not inside one allocation of the backend",
                           d->name, what, addr, size);
  if (!enabled)
    return cubert_berr_set(err, CUBERT_ERR_PEER_ACCESS,
                           "%s: launch: %s is memory of host:%d, and peer access %s -> host:%d "
                           "was never enabled",
                           d->name, what, owner, d->name, owner);
  return CUBERT_OK;
}

/* Writes i in decimal at p (NUL-terminated); p has room for 11 bytes. */
static void arg_number(char *p, uint32_t i) {
  char digits[10];
  int n = 0;
  do {
    digits[n++] = (char)('0' + i % 10);
    i /= 10;
  } while (i);
  while (n) *p++ = digits[--n];
  *p = 0;
}

static cubert_status host_launch(void *device, void *stream, uint64_t work, void *module,
                                 const cubert_launch_config *config,
                                 const cubert_backend_arg *args, uint32_t nargs, cubert_berr *err) {
  host_device *d = device;
  host_module *m = module;
  cubert_status st = check_stream(d, stream, "launch", err);
  if (st != CUBERT_OK)
    return st;
  if (!m || !config)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: launch without %s", d->name,
                           m ? "a configuration" : "a module");
  st = check_shape(d, m->name, config, err);
  if (st != CUBERT_OK)
    return st;
  if (nargs != m->nparams || (nargs && !args))
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: kernel `%s` takes %" PRIu32 " arguments, %" PRIu32 " given", d->name,
                           m->name, m->nparams, nargs);
  for (uint32_t i = 0; i < nargs; i++) {
    const cubert_backend_arg *a = &args[i];
    char what[24] = "argument ";
    arg_number(what + 9, i); /* not snprintf: this runs for every argument of every launch */
    if (a->kind != m->kinds[i])
      return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                             "%s: kernel `%s`: %s is of kind %d, the kernel wants %d", d->name,
                             m->name, what, (int)a->kind, (int)m->kinds[i]);
    if (a->kind == CUBERT_PARAM_SCALAR) {
      if (!a->scalar || a->scalar_size == 0 || a->scalar_size > HOST_MAX_SCALAR ||
          a->scalar_size != m->scalar_sizes[i])
        return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                               "%s: kernel `%s`: %s is a %" PRIu32 "-byte scalar, the kernel "
                               "wants %" PRIu32 " bytes",
                               d->name, m->name, what, a->scalar ? a->scalar_size : 0,
                               m->scalar_sizes[i]);
    } else if (a->kind == CUBERT_PARAM_BUFFER) {
      st = check_range(d, "launch", what, a->address, a->size, err);
    } else if (a->kind == CUBERT_PARAM_PEER_BUFFER) {
      st = check_peer_range(d, what, a->address, a->size, err);
    } else {
      st = cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: kernel `%s`: %s of unknown kind %d",
                           d->name, m->name, what, (int)a->kind);
    }
    if (st != CUBERT_OK)
      return st;
  }

  size_t n = nargs;
  size_t namelen = strlen(m->name) + 1;
  size_t off_slots = align_up(sizeof(launch_item), alignof(scalar_slot));
  size_t off_args = off_slots + n * sizeof(scalar_slot);
  size_t off_sizes = off_args + n * sizeof(void *);
  size_t off_name = off_sizes + n * sizeof(uint64_t);
  unsigned char *block = cb_malloc(off_name + namelen);
  if (!block)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no memory to launch `%s`", d->name,
                           m->name);
  launch_item *it = (launch_item *)block;
  scalar_slot *slots = (scalar_slot *)(block + off_slots);
  void **ptrs = (void **)(block + off_args);
  uint64_t *sizes = (uint64_t *)(block + off_sizes);
  char *name = (char *)(block + off_name);
  memcpy(name, m->name, namelen);
  for (size_t i = 0; i < n; i++) {
    if (args[i].kind == CUBERT_PARAM_SCALAR) {
      memcpy(slots[i].bytes, args[i].scalar, args[i].scalar_size);
      ptrs[i] = slots[i].bytes;
      sizes[i] = args[i].scalar_size;
    } else {
      ptrs[i] = (void *)(uintptr_t)args[i].address;
      sizes[i] = args[i].size;
    }
  }
  it->work.run = launch_run;
  it->work.release = free_item;
  it->work.tag = work;
  it->device = d;
  it->fn = m->fn;
  it->name = name;
  memcpy(it->launch.grid, config->grid, sizeof it->launch.grid);
  memcpy(it->launch.block, config->block, sizeof it->launch.block);
  it->launch.shared_memory = config->shared_memory;
  it->launch.nargs = nargs;
  it->launch.args = ptrs;
  it->launch.sizes = sizes;
  return enqueue(stream, &it->work, "launch", err);
}

/* ------------------------------------------------------------ waiting */

static cubert_status host_sync(void *device, void *stream, cubert_berr *err) {
  host_device *d = device;
  if (stream) {
    cubert_status st = check_stream(d, stream, "sync", err);
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
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: sync: no memory", d->name);
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

static uint64_t host_progress(void *device, void *stream) {
  (void)device;
  if (!stream)
    return 0;
  return cb_work_queue_last_tag(&((host_stream *)stream)->queue);
}

static size_t host_drain_failures(void *device, cubert_async_failure *out, size_t capacity) {
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
             "%s: %" PRIu64 " failed work item(s) could not be recorded: no memory", d->name,
             d->lost_failures);
    d->lost_failures = 0;
  }
  pthread_mutex_unlock(&d->fail_lock);
  return n;
}

/* ------------------------------------------------------------ peers */

static cubert_status check_pair(host_device *d, host_device *p, const char *op, cubert_berr *err) {
  if (!p || p->backend != d->backend)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: %s: the peer is not a device of this host backend", d->name, op);
  return CUBERT_OK;
}

static cubert_status host_peer_can_access(void *device, void *peer, bool *can, cubert_berr *err) {
  host_device *d = device, *p = peer;
  cubert_status st = check_pair(d, p, "peer query", err);
  if (st != CUBERT_OK)
    return st;
  /* A device is not its own peer (as hipDeviceCanAccessPeer says). */
  *can = d != p && !d->backend->deny[d->index * d->backend->ndevices + p->index];
  return CUBERT_OK;
}

static cubert_status host_peer_enable(void *device, void *peer, cubert_berr *err) {
  host_device *d = device, *p = peer;
  cubert_status st = check_pair(d, p, "peer enable", err);
  if (st != CUBERT_OK)
    return st;
  if (d == p)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: peer access to itself cannot be enabled", d->name);
  host_backend *b = d->backend;
  if (b->deny[d->index * b->ndevices + p->index])
    return cubert_berr_set(err, CUBERT_ERR_PEER_ACCESS,
                           "peer access %s -> %s refused (host_peer_deny)", d->name, p->name);
  pthread_mutex_lock(&b->lock);
  d->peer_enabled[p->index] = true;
  pthread_mutex_unlock(&b->lock);
  return CUBERT_OK;
}

static cubert_status host_link_info(void *device, void *peer, cubert_backend_link *link,
                                    cubert_berr *err) {
  host_device *d = device;
  return cubert_berr_set(err, CUBERT_ERR_UNSUPPORTED,
                         "%s: the host backend knows no links (a simulated node file gives the "
                         "layout)",
                         d->name);
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

static cubert_status host_timer_record(void *device, void *stream, void **timer,
                                       cubert_berr *err) {
  host_device *d = device;
  cubert_status st = check_stream(d, stream, "timer record", err);
  if (st != CUBERT_OK)
    return st;
  host_timer *t = cb_calloc(1, sizeof *t);
  if (!t)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no memory for a timer", d->name);
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

static cubert_status host_timer_elapsed(void *device, void *start, void *end, double *ms,
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

static void host_timer_destroy(void *device, void *timer) {
  if (timer)
    timer_unref(timer);
}

/* ------------------------------------------------------------ the table */

static const cubert_backend_ops host_ops = {
    .abi = CUBERT_BACKEND_ABI,
    .name = "host",
    .open = host_open,
    .close = host_close,
    .device_open = host_device_open,
    .device_close = device_close_impl,
    .mem_alloc = host_mem_alloc,
    .mem_free = host_mem_free,
    .stream_create = host_stream_create,
    .stream_destroy = host_stream_destroy,
    .event_record = host_event_record,
    .stream_wait = host_stream_wait,
    .event_destroy = host_event_destroy,
    .write = host_write,
    .read = host_read,
    .fill = host_fill,
    .copy = host_copy,
    .copy_peer = host_copy_peer,
    .module_load = host_module_load,
    .module_unload = host_module_unload,
    .launch = host_launch,
    .sync = host_sync,
    .progress = host_progress,
    .drain_failures = host_drain_failures,
    .peer_can_access = host_peer_can_access,
    .peer_enable = host_peer_enable,
    .link_info = host_link_info,
    .timer_record = host_timer_record,
    .timer_elapsed = host_timer_elapsed,
    .timer_destroy = host_timer_destroy,
};

const cubert_backend_ops *cubert_backend_host(void) { return &host_ops; }
