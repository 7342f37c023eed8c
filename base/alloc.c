/* base/alloc.c: the allocator hooks (base/alloc.h). */
#include "base/alloc.h"

#include <stdlib.h>

static cubert_allocator current = {malloc, calloc, realloc, free};

void cb_allocator_set(const cubert_allocator *a) {
  if (a && a->malloc_fn && a->calloc_fn && a->realloc_fn && a->free_fn)
    current = *a;
  else
    current = (cubert_allocator){malloc, calloc, realloc, free};
}

void *cb_malloc(size_t size) { return current.malloc_fn(size); }
void *cb_calloc(size_t count, size_t size) { return current.calloc_fn(count, size); }
void *cb_realloc(void *ptr, size_t size) { return current.realloc_fn(ptr, size); }
void cb_free(void *ptr) {
  if (ptr) current.free_fn(ptr);
}
