/* tools/faultinj/procs.h: fault injection and the checker across processes
 * (`cubert faultinj procs`, tools/faultinj/procs.c). */
#ifndef CUBERT_FAULTINJ_PROCS_H
#define CUBERT_FAULTINJ_PROCS_H

#include <stdbool.h>
#include <stdint.h>

/* The most steps a seeded program of cb_fi_procs holds (`--steps`). */
#define CB_FI_PROCS_MAX_STEPS 48

/* The built-in multi-process scenarios, then `programs` seeded programs of
 * `len` random steps (1 to CB_FI_PROCS_MAX_STEPS) from `seed` on, each over 2 or 3 worker processes
 * (this executable as `cubert faultinj procs-worker`). The number of
 * violations, each described on stderr; a summary line on stdout. */
int cb_fi_procs(const char *backend, uint64_t seed, uint64_t programs, int len, bool verbose);

/* A worker: one process of a program, answering the driver's lines on
 * stdin. 0 at the end of its input or on "quit". */
int cb_fi_procs_worker(const char *backend);

#endif
