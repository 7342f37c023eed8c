/* base/copier.h: a pool of threads that split large memory copies with
 * their caller, for the staging pipelines of the backends (the HIP
 * backend's pageable transfers: backends/hip/hip_pipe.c).
 *
 * One copy at a time: cb_copier_copy cuts the bytes into pieces that the
 * caller and the pool's threads take as they come free, and returns when
 * every piece is copied. The threads spin a while after each copy (the
 * next one of a transfer follows within microseconds), then sleep.
 *
 * Ownership: cb_copier_new returns a pool the caller owns and ends with
 * cb_copier_free (which joins its threads). Thread safety: one thread at a
 * time may call cb_copier_copy on a pool (the caller serialises, e.g. under
 * its pipeline's lock); the pool's own threads never touch memory outside
 * the copy they were handed. No allocation after cb_copier_new. */
#ifndef CUBERT_BASE_COPIER_H
#define CUBERT_BASE_COPIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cb_copier cb_copier;

/* Each pool thread calls place(ctx, index) once when it starts (NULL: no
 * placement), e.g. to run near a device. */
typedef void (*cb_copier_place)(void *ctx, int index);

/* A pool of `threads` threads beside the caller (0: the caller copies
 * alone), spinning `spin_ns` after a copy before they sleep. Fewer threads
 * when some cannot be started (cb_copier_threads says how many). NULL when
 * out of memory. */
cb_copier *cb_copier_new(int threads, uint64_t spin_ns, cb_copier_place place, void *place_ctx, int place_index);

/* Stops and joins the threads, frees the pool. NULL is ignored. */
void cb_copier_free(cb_copier *c);

/* Threads beside the caller (0 for NULL). */
int cb_copier_threads(const cb_copier *c);

/* Copies `size` bytes from src to dst (not overlapping), split among the
 * caller and the pool; with streaming stores (base/copy.h) when `stream`.
 * Small copies (under 256 KiB) and a NULL pool: the caller alone. */
void cb_copier_copy(cb_copier *c, void *dst, const void *src, size_t size, bool stream);

/* How many pool threads took part in the last cb_copier_copy (a trace). */
int cb_copier_joined(const cb_copier *c);

#endif
