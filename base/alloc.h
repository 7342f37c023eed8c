/* base/alloc.h: the library's host allocator hooks (internal).
 *
 * cb_malloc, cb_calloc, cb_realloc and cb_free call the functions last set
 * with cb_allocator_set(), the C library's by default. They behave as
 * their C library namesakes (cb_free(NULL) does nothing; cb_calloc checks
 * count * size for overflow; cb_free passes no NULL on). Every host
 * allocation of the library goes through them, in every layer
 * (docs/architecture.md, "The allocator", says what does not); the public
 * setter is cubert_set_allocator() (cubert.h), which checks the table.
 *
 * cb_allocator_set() is not thread-safe against allocations in flight: set
 * the hooks before any other call into the library. Memory must be freed
 * with the allocator that made it. */
#ifndef CUBERT_BASE_ALLOC_H
#define CUBERT_BASE_ALLOC_H

#include <stddef.h>

#include "cubert/cubert.h"

/* Replaces the hooks (cubert_allocator is the public table, cubert.h);
 * NULL, or a table with any NULL member, restores the C library's. */
void cb_allocator_set(const cubert_allocator *allocator);

void *cb_malloc(size_t size);
void *cb_calloc(size_t count, size_t size);
void *cb_realloc(void *ptr, size_t size);
void cb_free(void *ptr);

#endif
