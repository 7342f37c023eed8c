/* mpi/alloc.h: the host allocations of libcubert_mpi (internal).
 *
 * libcubert_mpi sees only cubert's public API, so its allocations cannot
 * go through the hooks of cubert_set_allocator() (base/alloc.h is
 * libcubert's own). They go through these instead: the C library's, or the
 * table last given to mpi_alloc_set(), a seam for tests that fail them one
 * at a time (tests/mpi/test_mpi_send_oom.c). Same rules as cubert's table:
 * not thread-safe against allocations in flight, memory freed with the
 * functions that made it. */
#ifndef CUBERT_MPI_ALLOC_H
#define CUBERT_MPI_ALLOC_H

#include <stddef.h>

#include "cubert/cubert.h"

/* NULL, or a table with a NULL member, restores the C library's. */
void mpi_alloc_set(const cubert_allocator *allocator);

void *mb_malloc(size_t size);
void *mb_calloc(size_t count, size_t size);
void *mb_realloc(void *ptr, size_t size);
void mb_free(void *ptr);

#endif
