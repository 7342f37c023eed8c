/* runtime/dedicated.c: allocations outside the pools. Fine-grained memory
 * (CUBERT_MEMORY_FINE_GRAINED) cannot come from the pools' pages, which are
 * ordinary device memory, and shareable memory (CUBERT_MEMORY_SHAREABLE)
 * must be a driver allocation another process can map whole: each such
 * handle gets a driver allocation of its own, given back when the
 * allocation is freed. Memory imported from another process
 * (runtime/xshare.c) is a block of its own too, unmapped when freed.
 * Everything else goes to the pools (runtime/pool.h). */
#include <string.h>

#include "runtime/internal.h"

cubert_status cb_block_alloc(cb_device *dev, uint64_t size, uint32_t flags, cb_block *block,
                             cubert_berr *err) {
  if (!(flags & (CUBERT_MEMORY_FINE_GRAINED | CUBERT_MEMORY_SHAREABLE)))
    return cb_pool_alloc(dev->pool, size, block, err);
  cubert_backend_mem mem;
  memset(&mem, 0, sizeof mem);
  mem.flags = (flags & CUBERT_MEMORY_FINE_GRAINED ? CUBERT_BACKEND_MEM_FINE_GRAINED : 0) |
              (flags & CUBERT_MEMORY_SHAREABLE ? CUBERT_BACKEND_MEM_SHAREABLE : 0);
  cubert_status st = dev->ops->mem_alloc(dev->bdev, size, &mem, err);
  if (st) return st;
  memset(block, 0, sizeof *block);
  block->address = mem.address;
  block->size = mem.size > size ? mem.size : size;
  block->page = mem.cookie;
  block->pool = flags & CUBERT_MEMORY_SHAREABLE ? CB_BLOCK_SHAREABLE : CB_BLOCK_DEDICATED;
  return CUBERT_OK;
}

void cb_block_free(cb_device *dev, const cb_block *block) {
  if (!CB_BLOCK_OWN(block)) {
    cb_pool_free(dev->pool, block);
    return;
  }
  cubert_backend_mem mem;
  cb_block_mem(block, &mem);
  dev->ops->mem_free(dev->bdev, &mem);
}

void cb_block_mem(const cb_block *block, cubert_backend_mem *mem) {
  memset(mem, 0, sizeof *mem);
  mem->address = block->address;
  mem->size = block->size;
  mem->cookie = block->page;
  mem->flags = block->pool == CB_BLOCK_SHAREABLE ? CUBERT_BACKEND_MEM_SHAREABLE
               : block->pool == CB_BLOCK_IMPORTED ? CUBERT_BACKEND_MEM_IMPORTED
                                                  : CUBERT_BACKEND_MEM_FINE_GRAINED;
}
