/* backends/host/host_memory.c: the host backend's allocations (one table
 * of every device's, sorted by address, under the backend lock), the checks
 * that an address handed in is memory of the right device, and peer access
 * (a device may reach a peer's memory once it enabled access to it). */
#include <errno.h>
#include <inttypes.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/alloc.h"
#include "backends/host/host_internal.h"
#include "base/shm.h"

/* ------------------------------------------------------------ address checks */

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
cubert_status cb_host_check_range(host_device *dev, const char *op, const char *what, uint64_t addr,
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

bool cb_host_buffers_local(host_device *dev, const cubert_backend_arg *args, uint32_t nargs) {
  host_backend *b = dev->backend;
  bool ok = true;
  pthread_mutex_lock(&b->lock);
  for (uint32_t i = 0; i < nargs && ok; i++) {
    const cubert_backend_arg *a = &args[i];
    if (a->kind != CUBERT_PARAM_BUFFER || a->size == 0) continue;
    ok = a->address + a->size >= a->address && range_owner(b, a->address, a->size) == dev->index;
  }
  pthread_mutex_unlock(&b->lock);
  return ok;
}

/* A peer buffer: memory of a device that `d` enabled peer access to (or its
 * own). Under nothing; takes the backend lock. */
cubert_status cb_host_check_peer_range(host_device *d, const char *what, uint64_t addr,
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

/* ------------------------------------------------------------ memory */

/* A shareable allocation's or an import's segment (mem->cookie). */
typedef struct host_shm {
  char name[CB_SHM_NAME];
  size_t length; /* bytes mapped */
  bool owner;    /* made here: removed (shm_unlink) when freed */
} host_shm;

/* Gets `size` bytes for the device: heap memory; a new shared segment
 * (CUBERT_BACKEND_MEM_SHAREABLE); or, with `import`, the segment of that
 * name. Accounts and tracks them like any allocation. */
static cubert_status place(host_device *d, uint64_t size, const char *import, cubert_backend_mem *mem,
                           cubert_berr *err) {
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
  host_shm *shm = NULL;
  char why[192] = "";
  if (size <= SIZE_MAX - HOST_ALIGN) {
    size_t length = (size_t)align_up(size, HOST_ALIGN);
    if (import || (mem->flags & CUBERT_BACKEND_MEM_SHAREABLE)) {
      shm = cb_calloc(1, sizeof *shm);
      int rc = !shm ? -1
               : import ? cb_shm_open(import, length, &p, why, sizeof why)
                        : cb_shm_create(length, shm->name, &p, why, sizeof why);
      if (rc) {
        cb_free(shm);
        shm = NULL;
        p = NULL;
      } else {
        if (import) snprintf(shm->name, sizeof shm->name, "%s", import);
        shm->length = length;
        shm->owner = !import;
      }
    } else {
      p = aligned_alloc(HOST_ALIGN, length);
    }
  }

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
    if (shm) {
      munmap(p, shm->length);
      if (shm->owner) shm_unlink(shm->name);
      cb_free(shm);
    } else {
      free(p);
    }
    if (why[0])
      return cubert_berr_set(err, import ? CUBERT_ERR_INVALID_ARGUMENT : CUBERT_ERR_OUT_OF_MEMORY, "%s: %s", d->name,
                             why);
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY,
                           "%s: out of memory: the host has no %" PRIu64 " bytes to give", d->name,
                           size);
  }
  uint64_t addr = (uint64_t)(uintptr_t)p;
  size_t at = (size_t)(alloc_find(b, addr) + 1);
  memmove(&b->allocs[at + 1], &b->allocs[at], (b->nallocs - at) * sizeof *b->allocs);
  b->allocs[at] = (host_alloc){addr, size, d->index, shm};
  b->nallocs++;
  pthread_mutex_unlock(&b->lock);

  mem->address = addr;
  mem->size = size;
  mem->cookie = shm ? (void *)shm : p;
  return CUBERT_OK;
}

cubert_status cb_host_mem_alloc(void *device, uint64_t size, cubert_backend_mem *mem,
                                cubert_berr *err) {
  return place(device, size, NULL, mem, err);
}

cubert_status cb_host_mem_export(void *device, const cubert_backend_mem *mem,
                                 unsigned char ipc[CUBERT_BACKEND_IPC_SIZE], cubert_berr *err) {
  host_device *d = device;
  if (!(mem->flags & CUBERT_BACKEND_MEM_SHAREABLE) || !mem->cookie)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: memory not allocated shareable", d->name);
  const host_shm *shm = mem->cookie;
  memset(ipc, 0, CUBERT_BACKEND_IPC_SIZE);
  memcpy(ipc, shm->name, strlen(shm->name));
  return CUBERT_OK;
}

cubert_status cb_host_mem_import(void *device, const unsigned char ipc[CUBERT_BACKEND_IPC_SIZE], uint64_t size,
                                 cubert_backend_mem *mem, cubert_berr *err) {
  host_device *d = device;
  char name[CB_SHM_NAME];
  memcpy(name, ipc, sizeof name);
  name[sizeof name - 1] = '\0';
  if (!cb_shm_name_ok(name))
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: the description names no cubert segment",
                           d->name);
  return place(d, size, name, mem, err);
}

static void shm_release(host_shm *shm, void *address) {
  munmap(address, shm->length);
  if (shm->owner) shm_unlink(shm->name);
  cb_free(shm);
}

void cb_host_alloc_release(const host_alloc *a) {
  if (a->shm)
    shm_release(a->shm, (void *)(uintptr_t)a->address);
  else
    free((void *)(uintptr_t)a->address); /* device memory: aligned_alloc */
}

void cb_host_mem_free(void *device, cubert_backend_mem *mem) {
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
  if (!found) return;
  if (mem->flags & (CUBERT_BACKEND_MEM_SHAREABLE | CUBERT_BACKEND_MEM_IMPORTED)) {
    shm_release(mem->cookie, (void *)(uintptr_t)mem->address);
  } else {
    free((void *)(uintptr_t)mem->address); /* device memory: aligned_alloc */
  }
}

/* ------------------------------------------------------------ peers */

static cubert_status check_pair(host_device *d, host_device *p, const char *op, cubert_berr *err) {
  if (!p || p->backend != d->backend)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: %s: the peer is not a device of this host backend", d->name, op);
  return CUBERT_OK;
}

cubert_status cb_host_peer_can_access(void *device, void *peer, bool *can, cubert_berr *err) {
  host_device *d = device, *p = peer;
  cubert_status st = check_pair(d, p, "peer query", err);
  if (st != CUBERT_OK)
    return st;
  /* A device is not its own peer (as hipDeviceCanAccessPeer says). */
  *can = d != p && !d->backend->deny[d->index * d->backend->ndevices + p->index];
  return CUBERT_OK;
}

cubert_status cb_host_peer_enable(void *device, void *peer, cubert_berr *err) {
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

cubert_status cb_host_link_info(void *device, void *peer, cubert_backend_link *link,
                                cubert_berr *err) {
  host_device *d = device;
  return cubert_berr_set(err, CUBERT_ERR_UNSUPPORTED,
                         "%s: the host backend knows no links (a simulated node file gives the "
                         "layout)",
                         d->name);
}
