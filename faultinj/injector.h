/* faultinj/injector.h: the process-wide rule set, its decisions and the
 * injection log (internal; the public face is cubert/faultinj.h).
 *
 * The decorator asks cb_fi_armed() first on every call: false while no rule
 * is set and no device is lost, so the layer then costs one predictable
 * branch. When armed it builds a cb_fi_call and asks cb_fi_decide(), which
 * counts the call against every rule (one lock, so the count order is the
 * call order and a seed replays a run) and logs the injection it picks.
 *
 * Threading: everything here is thread-safe. Ownership: nothing is handed
 * out; records are copied. */
#ifndef CUBERT_FAULTINJ_INJECTOR_H
#define CUBERT_FAULTINJ_INJECTOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "faultinj/rules.h"

/* Non-zero while a rule is set or a device the layer lost is still open.
 * Read relaxed: a rule added on another thread with nothing ordering it
 * against a call may or may not see that call, as any racing pair. */
extern atomic_int cb_fi_armed_flag;

static inline bool cb_fi_armed(void) {
  return __builtin_expect(atomic_load_explicit(&cb_fi_armed_flag, memory_order_relaxed) != 0, 0);
}

/* What to inject into one call. */
typedef struct cb_fi_hit {
  uint64_t id;                /* the injection's id: "injected fault #id" */
  uint32_t rule;
  cubert_fault_kind fault;
  double fraction;            /* scribble/partial share */
  cubert_status status;       /* what the call returns (or drain reports) */
  uint64_t match;             /* the rule's count of matching calls */
} cb_fi_hit;

/* Counts the call against every rule; when one fires (the first added wins
 * when several do) logs the injection, fills `hit` and returns true. */
bool cb_fi_decide(const cb_fi_call *call, cb_fi_hit *hit);

/* Replaces the message of logged injection `id` with what was actually done. */
void cb_fi_note(uint64_t id, const char *message);

/* A device the layer lost was opened (+1) or closed (-1): lost devices keep
 * the layer armed, so their calls keep failing after the rules are gone. */
void cb_fi_lost_add(int delta);

#endif
