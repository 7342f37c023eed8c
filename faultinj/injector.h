/* faultinj/injector.h: one runtime's fault state: its rules, their
 * decisions, the injection log and the pair classifier (internal; the public
 * face is cubert/faultinj.h, faultinj/api.c).
 *
 * Each runtime owns one cb_fi_state (made at create, freed at destroy) and
 * hands it to the decorator of each of its backends (cb_faultinj_open), so
 * rules, counts, ids, the log and the classifier of one runtime never touch
 * another's. Nothing here is process-wide.
 *
 * The decorator asks cb_fi_armed() first on every call: false while no rule
 * is set and no device is lost, so the layer then costs one predictable
 * branch. When armed it builds a cb_fi_call and asks cb_fi_decide(), which
 * counts the call against every rule (one lock, so the count order is the
 * call order and a seed replays a run) and logs the injection it picks.
 *
 * The cb_fi_state_* operations behind the public API report errors in
 * `diag` or `msg` (never the thread's last error: faultinj/api.c records
 * that).
 *
 * Threading: everything here is thread-safe. Ownership: the runtime owns the
 * state (cb_fi_state_free after its backends are closed); records are
 * copied. */
#ifndef CUBERT_FAULTINJ_INJECTOR_H
#define CUBERT_FAULTINJ_INJECTOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "faultinj/rules.h"

typedef struct cb_fi_state cb_fi_state;

/* A state with no rule, seed 0, an empty log. NULL when out of memory. */
cb_fi_state *cb_fi_state_new(void);
void cb_fi_state_free(cb_fi_state *s);

/* The state's armed flag: non-zero while a rule is set or a device the layer
 * lost is still open. Read relaxed: a rule added on another thread with
 * nothing ordering it against a call may or may not see that call, as any
 * racing pair. */
atomic_int *cb_fi_armed_flag(cb_fi_state *s);

static inline bool cb_fi_armed(const atomic_int *flag) {
  return __builtin_expect(atomic_load_explicit(flag, memory_order_relaxed) != 0, 0);
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
bool cb_fi_decide(cb_fi_state *s, const cb_fi_call *call, cb_fi_hit *hit);

/* Replaces the message of logged injection `id` with what was actually done. */
void cb_fi_note(cb_fi_state *s, uint64_t id, const char *message);

/* A device the layer lost was opened (+1) or closed (-1): lost devices keep
 * the layer armed, so their calls keep failing after the rules are gone. */
void cb_fi_lost_add(cb_fi_state *s, int delta);

/* ------------------------------------------------------------ the operations of cubert/faultinj.h */

/* Parses `len` bytes and adds the rules, all or nothing (`configured`:
 * they replace the configured rules). Errors fill `diag` (may be NULL). */
cubert_status cb_fi_state_add(cb_fi_state *s, const char *text, size_t len, const char *source, bool configured,
                              uint32_t *first_id, cubert_faultinj_diag *diag);
cubert_status cb_fi_state_load(cb_fi_state *s, const char *path, uint32_t *first_id, cubert_faultinj_diag *diag);
/* `text` NULL: $CUBERT_FAULTS. */
cubert_status cb_fi_state_configure(cb_fi_state *s, const char *text, cubert_faultinj_diag *diag);
bool cb_fi_state_remove(cb_fi_state *s, uint32_t rule_id);
void cb_fi_state_clear(cb_fi_state *s);
void cb_fi_state_reset(cb_fi_state *s);
void cb_fi_state_set_seed(cb_fi_state *s, uint64_t seed);
uint64_t cb_fi_state_seed(cb_fi_state *s);
void cb_fi_state_set_pair_classifier(cb_fi_state *s, cubert_faultinj_pair_classifier fn, void *ctx);
size_t cb_fi_state_log(cb_fi_state *s, uint64_t first_id, cubert_fault_record *out, size_t capacity);
bool cb_fi_state_record(cb_fi_state *s, uint64_t id, cubert_fault_record *record);
void cb_fi_state_stats(cb_fi_state *s, cubert_faultinj_stats *stats);
bool cb_fi_state_describe(cb_fi_state *s, uint32_t rule_id, char *text, size_t capacity, uint64_t *matched,
                          uint64_t *injected);
size_t cb_fi_state_summary(cb_fi_state *s, char *text, size_t capacity);

/* Rules whose kernel= names no kernel the runtime has launched or compiled
 * (so far): one sentence per rule, "; "-separated, into `text` (as
 * snprintf; returns the length wanted, 0 for none). `from_env_only`: only
 * the rules $CUBERT_FAULTS configured. */
size_t cb_fi_state_unmatched(cb_fi_state *s, bool from_env_only, char *text, size_t capacity);

#endif
