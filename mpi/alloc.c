/* mpi/alloc.c: libcubert_mpi's host allocations (mpi/alloc.h). */
#include "mpi/alloc.h"

#include <stdlib.h>

static cubert_allocator table = {malloc, calloc, realloc, free};

void mpi_alloc_set(const cubert_allocator *a) {
  if (a && a->malloc_fn && a->calloc_fn && a->realloc_fn && a->free_fn) table = *a;
  else table = (cubert_allocator){malloc, calloc, realloc, free};
}

void *mb_malloc(size_t size) { return table.malloc_fn(size); }
void *mb_calloc(size_t count, size_t size) { return table.calloc_fn(count, size); }
void *mb_realloc(void *ptr, size_t size) { return table.realloc_fn(ptr, size); }
void mb_free(void *ptr) {
  if (ptr) table.free_fn(ptr);
}
