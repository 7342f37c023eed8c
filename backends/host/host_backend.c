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
 * lock its failure list; a staging lock its kept staging blocks; each queue
 * its own items. The only nesting is
 * device lock -> queue lock (sync's snapshot of stream ends).
 *
 * Ownership: the backend owns its devices (device_close frees one, close
 * frees what is left); a device owns its streams, allocations, modules,
 * failures and kept staging blocks, and device_close frees whatever the
 * runtime left behind. An
 * event keeps the stream it names alive (refcount), so a wait never reads
 * freed memory, even after the stream was destroyed.
 *
 * The backend is split by what each file holds: host_internal.h lists them. */
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
#include "backends/host/host_internal.h"

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
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "host backend: no host memory for the backend");
  size_t nn = (size_t)n;
  b->ndevices = n;
  b->memory = o->memory;
  b->place_thread = config->place_thread;
  b->place_ctx = config->place_ctx;
  b->place_alloc = config->place_alloc;
  b->place_free = config->place_free;
  b->deny = cb_calloc(nn * nn + 1, sizeof *b->deny);
  b->bus_ids = cb_calloc(nn + 1, sizeof *b->bus_ids);
  b->devices = cb_calloc(nn + 1, sizeof *b->devices);
  if (!b->deny || !b->bus_ids || !b->devices) {
    cb_free(b->deny);
    cb_free(b->bus_ids);
    cb_free(b->devices);
    cb_free(b);
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "host backend: no host memory for %d devices", n);
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
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "host:%d: no host memory for the device", index);
  }
  d->backend = b;
  d->index = index;
  d->peer_enabled = peers;
  snprintf(d->name, sizeof d->name, "host:%d", index);
  int rc = pthread_mutex_init(&d->lock, NULL);
  if (rc == 0 && (rc = pthread_mutex_init(&d->fail_lock, NULL)) != 0)
    pthread_mutex_destroy(&d->lock);
  if (rc == 0 && (rc = pthread_mutex_init(&d->staging_lock, NULL)) != 0) {
    pthread_mutex_destroy(&d->fail_lock);
    pthread_mutex_destroy(&d->lock);
  }
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
    pthread_mutex_destroy(&d->staging_lock);
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
    cb_host_stream_destroy_impl(d, s);
    pthread_mutex_lock(&d->lock);
  }
  pthread_mutex_unlock(&d->lock);

  pthread_mutex_lock(&b->lock);
  size_t kept = 0;
  for (size_t i = 0; i < b->nallocs; i++) {
    if (b->allocs[i].device == d->index)
      cb_host_alloc_release(&b->allocs[i]); /* the C library's or a shared segment's, never the hooks' */
    else
      b->allocs[kept++] = b->allocs[i];
  }
  b->nallocs = kept;
  b->devices[d->index] = NULL;
  pthread_mutex_unlock(&b->lock);

  while (d->modules) {
    host_module *m = d->modules;
    d->modules = m->next;
    cb_host_module_free(m);
  }
  cb_host_staging_free(d); /* after the streams, whose items give blocks back */
  pthread_mutex_destroy(&d->staging_lock);
  pthread_mutex_destroy(&d->fail_lock);
  pthread_mutex_destroy(&d->lock);
  cb_free(d->failures);
  cb_free(d->streams);
  cb_free(d->peer_enabled);
  cb_free(d);
}

/* ------------------------------------------------------------ the table */

static const cubert_backend_ops host_ops = {
    .abi = CUBERT_BACKEND_ABI,
    .name = "host",
    .open = host_open,
    .close = host_close,
    .device_open = host_device_open,
    .device_close = device_close_impl,
    .mem_alloc = cb_host_mem_alloc,
    .mem_free = cb_host_mem_free,
    .mem_export = cb_host_mem_export,
    .mem_import = cb_host_mem_import,
    .stream_create = cb_host_stream_create,
    .stream_destroy = cb_host_stream_destroy,
    .event_record = cb_host_event_record,
    .stream_wait = cb_host_stream_wait,
    .event_destroy = cb_host_event_destroy,
    .write = cb_host_write,
    .read = cb_host_read,
    .fill = cb_host_fill,
    .copy = cb_host_copy,
    .copy_peer = cb_host_copy_peer,
    .copy_strided = cb_host_copy_strided,
    .module_load = cb_host_module_load,
    .module_unload = cb_host_module_unload,
    .module_prepare = cb_host_module_prepare,
    .launch = cb_host_launch,
    .launch_image = cb_host_launch_image,
    .sync = cb_host_sync,
    .progress = cb_host_progress,
    .drain_failures = cb_host_drain_failures,
    .peer_can_access = cb_host_peer_can_access,
    .peer_enable = cb_host_peer_enable,
    .link_info = cb_host_link_info,
    .timer_record = cb_host_timer_record,
    .timer_elapsed = cb_host_timer_elapsed,
    .timer_destroy = cb_host_timer_destroy,
    .host_alloc = cb_host_host_alloc,
    .host_register = cb_host_host_register,
    .host_free = cb_host_host_free,
    .write_host = cb_host_write_host,
    .read_host = cb_host_read_host,
};

const cubert_backend_ops *cubert_backend_host(void) { return &host_ops; }
