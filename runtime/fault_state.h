/* runtime/fault_state.h: where a runtime keeps its fault-injection state
 * (internal). The entry points of cubert/faultinj.h (faultinj/api.c) find a
 * runtime's state here; the state itself (struct cb_fi_state) is the fault
 * layer's (faultinj/injector.h), made and freed by the runtime through its
 * parts (runtime/parts.h). */
#ifndef CUBERT_RUNTIME_FAULT_STATE_H
#define CUBERT_RUNTIME_FAULT_STATE_H

#include "cubert/cubert.h"

struct cb_fi_state;

/* The fault state of `rt`; NULL when it was created with no_faultinj (or
 * without a fault layer). `rt` must not be NULL. */
struct cb_fi_state *cb_runtime_fault_state(const cubert_runtime *rt);

/* The rank set by cubert_set_rank(), -1 when none: what failures exported
 * from this process name, and what the rank= filter of a fault rule
 * compares (none counts as rank 0 there). */
int cb_failure_rank(void);

#endif
