/* mpi/inject.h: fault injection at the MPI component's own injection
 * points, send and receive (internal to libcubert_mpi).
 *
 * Rules come from the send and recv statements of $CUBERT_FAULTS (whose
 * other statements are the runtime's) and from $CUBERT_MPI_FAULTS, both read
 * by cubert_mpi_init() (each rank reads its own environment; rank= aims a
 * rule at one rank), or from cubert_mpi_faults(); the grammar is
 * docs/cluster.md's:
 *
 *   send|recv [rank=R[-R]] [peer=P[-P]] [nth=N|every=N|first=N|prob=P]
 *             [seed=S] fault=fail|partial[:F]|scribble[:F]
 *
 * rank= selects the rank that makes the call (in MPI_COMM_WORLD), peer= the
 * other rank (in the call's communicator). */
#ifndef CUBERT_MPI_INJECT_H
#define CUBERT_MPI_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubert/status.h"

typedef enum mpi_fault {
  MPI_FAULT_NONE = 0,
  MPI_FAULT_FAIL,     /* the call fails: nothing good crosses */
  MPI_FAULT_PARTIAL,  /* the first `fraction` of the chunks cross, then the call fails */
  MPI_FAULT_SCRIBBLE, /* `fraction` of the bytes of each chunk damaged in flight */
} mpi_fault;

typedef struct mpi_hit {
  mpi_fault fault;
  double fraction;
  uint64_t id;        /* 1, 2, 3... in this process */
  uint32_t rule;      /* 1-based */
  uint64_t seed;      /* for the garbage */
} mpi_hit;

/* Replaces the rules with the send and recv statements of `faults` (the
 * text of $CUBERT_FAULTS: other statements are skipped) followed by the
 * rules of `mpi_faults` (only send and recv); either may be NULL. On a
 * parse error returns CUBERT_ERR_PARSE with `why` filled (naming
 * CUBERT_FAULTS, or `mpi_source` for an error in `mpi_faults`:
 * "CUBERT_MPI_FAULTS", "rules"), out of host memory
 * CUBERT_ERR_OUT_OF_MEMORY ("out of host memory ..."), the rules unchanged
 * either way. */
cubert_status mpi_inject_set(const char *faults, const char *mpi_faults, const char *mpi_source, char *why,
                             size_t cap);
/* mpi_inject_set() of $CUBERT_FAULTS (a text, or "@path" of a rule file)
 * and $CUBERT_MPI_FAULTS; when both are unset or empty the rules stay. A
 * rule file that cannot be read: CUBERT_ERR_PARSE; one that does not fit
 * in host memory: CUBERT_ERR_OUT_OF_MEMORY. */
cubert_status mpi_inject_env(char *why, size_t cap);
/* Whether a send (or receive) by `rank` with `peer` fails, and how. */
bool mpi_inject_decide(bool send, int rank, int peer, mpi_hit *hit);
/* Faults injected so far in this process. */
uint64_t mpi_inject_count(void);

/* A test seam: the function the parser allocates with (the copy of a rule
 * text, a rule file read into memory; freed with free(), so it must give
 * memory free() takes, or NULL); NULL restores libcubert_mpi's own
 * (mb_malloc and mb_free, mpi/alloc.h, whose seam mpi_alloc_set reaches
 * them too). libcubert_mpi sees only cubert's public headers, so it cannot
 * use the core's allocator hooks (docs/architecture.md, "The allocator").
 * Not thread-safe: for tests (tests/mpi/test_mpi_inject.c). */
void mpi_inject_set_alloc(void *(*alloc)(size_t size));

#endif
