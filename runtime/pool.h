/* runtime/pool.h: the memory manager of one device (internal).
 *
 * Pools, not one driver call per buffer: small sizes are sliced out of
 * shared pages (first fit, coalescing neighbours on free), large sizes get
 * exclusive pages (reused by later allocations that fit), and a ladder routes
 * each size to a pool. Idle pages go back to the driver periodically and on
 * cb_pool_cleanup(). Nothing is ever relocated: a block keeps its address
 * until it is freed.
 *
 * Threading: not thread-safe; the owning device's lock serialises calls.
 * Ownership: the pool owns its pages (freed through the backend's mem_free
 * in cb_pool_destroy or when idle); blocks are handed out by value and given
 * back with cb_pool_free. */
#ifndef CUBERT_RUNTIME_POOL_H
#define CUBERT_RUNTIME_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"

typedef struct cb_pool cb_pool;

/* Every this many allocations, pages idle (no block out, no allocation)
 * since the previous check go back to the driver. */
#define CB_POOL_IDLE_INTERVAL 1024

/* A block handed out by the pool. */
typedef struct cb_block {
  uint64_t address;   /* device address of the first byte (aligned to 256) */
  uint64_t size;      /* bytes reserved for the block: the size asked, rounded up
                         to the pool's unit (256 B, 1 KiB), or a whole page */
  void *page;         /* the pool's own (the page it lies in) */
  uint32_t pool;      /* index of the pool that served it */
} cb_block;

/* Whether a block came from a sliced pool (sizes up to 1 MiB): such memory
 * stays the pool's when freed, so a free may wait for the device's next
 * locked call (cb_alloc_unref). */
static inline bool cb_pool_sliced(const cb_block *block) { return block->pool < 2; }

/* `ops`/`device` are the backend's (borrowed for the pool's life);
 * `device_memory` (0: unknown) caps page sizes at an eighth of it, and a
 * size above it fails at once. */
cubert_status cb_pool_create(const cubert_backend_ops *ops, void *device, uint64_t device_memory,
                             cb_pool **pool);
/* Frees every page. Blocks still out are lost. */
void cb_pool_destroy(cb_pool *pool);

/* A block of at least `size` bytes (size > 0). Out of memory: one cleanup of
 * idle pages and one retry, then CUBERT_ERR_OUT_OF_MEMORY with a message
 * naming the size asked for (in err). Other backend failures are passed on. */
cubert_status cb_pool_alloc(cb_pool *pool, uint64_t size, cb_block *block, cubert_berr *err);
/* The size of the block a sliced pool would hand out for `size` bytes, or
 * 0 when `size` goes to no sliced pool (0, too big, the pools off). Reads
 * only what cb_pool_create set, so it needs no lock (runtime/tcache.c). */
uint64_t cb_pool_sliced_size(const cb_pool *pool, uint64_t size);
/* Gives a block back; no work may use it any more. A block the pool does
 * not have out (freed twice, altered) is ignored, as far as cheap checks
 * tell; its page must still be alive. */
void cb_pool_free(cb_pool *pool, const cb_block *block);

/* Returns every page that has no block out to the driver. */
void cb_pool_cleanup(cb_pool *pool);

/* Reports per pool; returns the number of pools (copies at most capacity). */
size_t cb_pool_usage(const cb_pool *pool, cubert_pool_usage *out, size_t capacity);

/* Checks the pool's bookkeeping against itself (pages, bitmaps, search
 * trees, counters, idle lists): for tests, slow. False with a reason in
 * `why` (may be NULL) when something disagrees. */
bool cb_pool_verify(const cb_pool *pool, char *why, size_t len);

#endif
