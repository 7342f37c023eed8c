/* runtime/tcache.c: per-thread caches of released allocations, the fast
 * path of an alloc+free pair (issue 15 item 5; internal.h says the rules).
 *
 * The slow path of a pair takes the device lock twice over: allocation
 * locks it for the pool and the slot table, and the last release pushes the
 * record onto the graveyard for the next locked call to free; each side also
 * mallocs or frees the handle object. The fast path keeps what a release
 * gives up whole, the handle object, its allocation record (slot, block,
 * device reference) and the block, in the releasing thread's cache for that
 * device, and the next allocation of the same block size on that thread
 * takes it back: no lock, no malloc, no pool call.
 *
 * What is parked: only the last reference of a handle to a pooled (sliced)
 * block whose ledger is empty, that is not shared with peers or processes,
 * of a device still alive. A taint therefore never reaches a new
 * allocation, and everything a tenant set (readers, last writer) is reset
 * when the record is taken back. The record stays in its slot with no
 * reference: a weak binding to it does not upgrade (cubert_weak_upgrade
 * takes a reference only from a non-zero count, then checks the
 * generation, which a reused record gets new before its count is set).
 *
 * Threads: each slot of a cache is an atomic pointer. Only the owning
 * thread stores a non-NULL one (into a slot it saw empty); the owner takes
 * one back with an exchange, and anyone holding the device lock may empty
 * any slot with an exchange (cb_tcache_drain: out of memory, usage,
 * cleanup, teardown), so a block parked on one thread never makes another
 * thread's allocation fail. `key` (the block size of each slot) and
 * `stream` are the owner's alone. A cache is linked in its device's list
 * (under the device lock) and in its thread's list; it holds a device
 * reference, so the device record outlives it, and goes at the thread's
 * exit (a pthread key) or when the thread destroys the runtime. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/internal.h"

/* Under AddressSanitizer a parked handle object is poisoned, so that a use
 * of a handle after its release still reports, as when the release freed it. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CB_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(CB_ASAN)
#include <sanitizer/asan_interface.h>
#define PARKED(h) ASAN_POISON_MEMORY_REGION((h), sizeof *(h))
#define UNPARKED(h) ASAN_UNPOISON_MEMORY_REGION((h), sizeof *(h))
#else
#define PARKED(h) ((void)(h))
#define UNPARKED(h) ((void)(h))
#endif

#define SLOTS 8u                      /* parked allocations per thread and device */
#define MAX_BYTES (UINT64_C(4) << 20) /* and at most this many bytes of blocks */

typedef struct cb_tcache {
  cb_device *dev;             /* holds a reference */
  struct cb_tcache *next_of_dev;    /* dev->tcaches, under dev->lock */
  struct cb_tcache *next_of_thread; /* the owner's list (`mine`) */
  uint32_t stream;            /* the owner's stream on dev; 0: not known yet */
  uint64_t key[SLOTS];        /* block size of what the owner parked in slot i */
  /* the owner's view of its slots: those it filled and has not taken back,
   * and their bytes; a drain by another thread makes it an overestimate,
   * counted again (recount) when it says the cache is full */
  uint32_t filled;
  uint64_t bytes;
  cubert_handle *_Atomic slot[SLOTS];
} cb_tcache;

static _Thread_local cb_tcache *mine; /* this thread's caches, one per device */
static pthread_key_t exit_key;        /* its value: `mine`, for the exit destructor */
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static bool exit_ok;

static cb_tcache *find(const cb_device *dev) {
  for (cb_tcache *t = mine; t; t = t->next_of_thread)
    if (t->dev == dev) return t;
  return NULL;
}

/* Frees what one slot holds; caller holds t->dev->lock. */
static bool empty_slot(cb_tcache *t, uint32_t i) {
  cubert_handle *h = atomic_exchange_explicit(&t->slot[i], NULL, memory_order_acquire);
  if (!h) return false;
  UNPARKED(h);
  cb_alloc *a = h->alloc;
  cb_free(h);
  cb_alloc_free(a);
  return true;
}

/* Unlinks `t` from its device and frees it; `t` is off its thread's list. */
static void cache_free(cb_tcache *t) {
  cb_device *dev = t->dev;
  pthread_mutex_lock(&dev->lock);
  for (uint32_t i = 0; i < SLOTS; i++) empty_slot(t, i); /* none left once the device is gone */
  for (cb_tcache **p = &dev->tcaches; *p; p = &(*p)->next_of_dev) {
    if (*p == t) {
      *p = t->next_of_dev;
      break;
    }
  }
  pthread_mutex_unlock(&dev->lock);
  cb_free(t);
  cb_device_unref(dev); /* may be the last: the runtime went first */
}

static void thread_exit(void *head) {
  mine = NULL;
  for (cb_tcache *t = head, *next; t; t = next) {
    next = t->next_of_thread;
    cache_free(t);
  }
}

static void exit_init(void) { exit_ok = pthread_key_create(&exit_key, thread_exit) == 0; }

/* The owner's view of its slots made exact again (after drains). */
static void recount(cb_tcache *t) {
  t->filled = 0;
  t->bytes = 0;
  for (uint32_t i = 0; i < SLOTS; i++) {
    if (!atomic_load_explicit(&t->slot[i], memory_order_relaxed)) continue;
    t->filled |= 1u << i;
    t->bytes += t->key[i];
  }
}

/* ------------------------------------------------------------ fast path */

cubert_handle *cb_tcache_reuse(cubert_client *c, uint64_t size) {
  cb_device *dev = c->dev;
  cb_tcache *t = find(dev);
  if (!t) return NULL;
  uint32_t stream = atomic_load_explicit(&c->pinned_stream, memory_order_relaxed);
  if (!stream) stream = t->stream;
  uint64_t bytes = cb_pool_sliced_size(dev->pool, size);
  if (!stream || !bytes || atomic_load_explicit(&dev->lost, memory_order_relaxed))
    return NULL; /* the slow path knows, or says why not */
  cubert_handle *h = NULL;
  for (uint32_t m = t->filled; m && !h; m &= m - 1) {
    uint32_t i = (uint32_t)__builtin_ctz(m);
    if (t->key[i] != bytes) continue;
    h = atomic_exchange_explicit(&t->slot[i], NULL, memory_order_acquire); /* NULL: drained meanwhile */
    t->filled &= ~(1u << i);
    t->bytes -= bytes;
  }
  if (!h) return NULL;
  UNPARKED(h);
  /* a new tenant, as cb_alloc_adopt makes one, with the slot, block, device
   * reference and the (empty) ledger kept; its generation before the count
   * (internal.h says why) */
  cb_alloc *a = h->alloc;
  cb_alloc_new_tenant(dev, a);
  a->size = size;
  a->last_writer = 0;
  a->last_write = 0;
  a->nreaders = 0;
  *h = (cubert_handle){a, 0, size, stream};
  atomic_store_explicit(&a->refs, CB_HANDLE_ONE, memory_order_release);
  return h;
}

bool cb_tcache_park(cubert_handle *h) {
  cb_alloc *a = h->alloc;
  if (a->host || a->orphan || a->xshare || a->ledger.n || !cb_pool_sliced(&a->block) ||
      atomic_load_explicit(&a->shared, memory_order_relaxed))
    return false;
  cb_tcache *t = find(a->dev);
  if (!t) return false;
  uint64_t size = a->block.size;
  if (t->filled == (1u << SLOTS) - 1 || t->bytes + size > MAX_BYTES) {
    recount(t);
    if (t->filled == (1u << SLOTS) - 1 || t->bytes + size > MAX_BYTES) return false;
  }
  uint32_t i = (uint32_t)__builtin_ctz(~t->filled);
  t->key[i] = size;
  t->filled |= 1u << i;
  t->bytes += size;
  PARKED(h);
  atomic_store_explicit(&t->slot[i], h, memory_order_release);
  return true;
}

/* ------------------------------------------------------------ slow path */

void cb_tcache_attach(cb_device *dev, uint32_t stream) {
  cb_tcache *t = find(dev);
  if (!t) {
    pthread_once(&exit_once, exit_init);
    if (!exit_ok || atomic_load(&dev->gone) || !(t = cb_calloc(1, sizeof *t))) return;
    t->next_of_thread = mine;
    if (pthread_setspecific(exit_key, t) != 0) { /* its exit would not free it: no cache */
      cb_free(t);
      return;
    }
    mine = t;
    t->dev = dev;
    cb_device_ref(dev);
    t->next_of_dev = dev->tcaches;
    dev->tcaches = t;
  }
  if (stream) t->stream = stream;
}

uint32_t cb_tcache_drain(cb_device *dev) {
  uint32_t n = 0;
  for (cb_tcache *t = dev->tcaches; t; t = t->next_of_dev)
    for (uint32_t i = 0; i < SLOTS; i++) n += empty_slot(t, i);
  return n;
}

void cb_tcache_forget(cb_device *dev) {
  for (cb_tcache **p = &mine; *p; p = &(*p)->next_of_thread) {
    if ((*p)->dev == dev) {
      cb_tcache *t = *p;
      *p = t->next_of_thread;
      if (exit_ok) pthread_setspecific(exit_key, mine);
      cache_free(t);
      return;
    }
  }
}
