/* runtime/pattern.h: strided footprints (the core's own; never installed).
 *
 * A cb_pattern is the footprint of a view, normalised: runs of `run`
 * contiguous bytes, counted by up to CUBERT_VIEW_MAX_DIMS dimensions ordered
 * by pitch (outermost first), each pitch at least the span of the
 * dimensions inside it, so run k (row-major over the counts) starts at
 * strictly increasing offsets: the runs are sorted and disjoint. A pattern
 * names the runs [lo, hi) of that layout (a claim cut by a later write keeps
 * the same layout and narrows its range). Every byte-level question is
 * answered by a descent over the dimensions, O(dimensions):
 * cb_pattern_first_ge finds the first run starting at or after a byte. */
#ifndef CUBERT_RUNTIME_PATTERN_H
#define CUBERT_RUNTIME_PATTERN_H

#include <stdbool.h>
#include <stdint.h>

#include "cubert/cubert.h"

typedef struct cb_pattern {
  uint64_t base; /* allocation byte of run 0 of the layout */
  uint64_t run;  /* bytes per run, > 0 */
  uint32_t nd;
  uint64_t count[CUBERT_VIEW_MAX_DIMS];
  uint64_t pitch[CUBERT_VIEW_MAX_DIMS];
  uint64_t lo, hi; /* the runs named */
} cb_pattern;

/* Runs of the whole layout. */
uint64_t cb_pattern_total(const cb_pattern *p);
/* Allocation byte where run k starts. */
uint64_t cb_pattern_off(const cb_pattern *p, uint64_t k);
/* The first run (of the layout, lo and hi aside) starting at or after byte
 * x; cb_pattern_total when none does. */
uint64_t cb_pattern_first_ge(const cb_pattern *p, uint64_t x);
/* The runs of [lo, hi) that share a byte with [s, e): [*k0, *k1), empty
 * when *k0 >= *k1. */
void cb_pattern_runs_in(const cb_pattern *p, uint64_t s, uint64_t e, uint64_t *k0, uint64_t *k1);
/* First byte and end of the runs [lo, hi) (hi > lo). */
uint64_t cb_pattern_start(const cb_pattern *p);
uint64_t cb_pattern_end(const cb_pattern *p);
/* Whether a and b are the same layout (runs [lo, hi) aside). */
bool cb_pattern_same_layout(const cb_pattern *a, const cb_pattern *b);
/* Whether the footprints share a byte; when `fn` is given, calls it for
 * every shared piece, in address order, and returns whether any was found.
 * Same layouts: O(1) plus the pieces; otherwise the runs of the sparser one
 * inside the other's bounds are walked. */
bool cb_pattern_meet(const cb_pattern *a, const cb_pattern *b, void (*fn)(void *ctx, uint64_t s, uint64_t e),
                     void *ctx);
/* The same for a pattern and the contiguous range [s, e): O(dims) plus the
 * pieces. */
bool cb_pattern_meet_range(const cb_pattern *a, uint64_t s, uint64_t e,
                           void (*fn)(void *ctx, uint64_t s, uint64_t e), void *ctx);

/* The footprint of `view` over the handle view [start, end) of an
 * allocation, checked (cubert_view_check's rules); on error returns the
 * status with the reason in `why` (names the dimension). *empty is set when
 * the shape names no byte (then *out is unset). */
cubert_status cb_pattern_from_view(const cubert_view *view, uint64_t start, uint64_t end, cb_pattern *out,
                                   bool *empty, char *why, size_t why_size);

#endif
