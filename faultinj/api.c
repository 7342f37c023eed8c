/* faultinj/api.c: the public entry points of cubert/faultinj.h. Each finds
 * the runtime's fault state (faultinj/injector.h), refuses a NULL or a
 * runtime without a fault layer, and records every refusal for the calling
 * thread (runtime/fail.h: the helpers fill a cb_errb, the entry point
 * records it), so that cubert_last_error() names what was wrong. The
 * runtime's state is found through runtime/fault_state.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "cubert/faultinj.h"
#include "faultinj/injector.h"
#include "runtime/fail.h"
#include "runtime/fault_state.h"

/* The fault state of `rt`, or NULL with why there is none in `eb`. Starts
 * `eb` (left empty, nothing to free, when there is a state). */
static cb_fi_state *state_of(cubert_runtime *rt, const char *fn, cb_errb *eb) {
  cb_errb_init(eb, CUBERT_OK);
  cb_fi_state *s = NULL;
  if (!rt)
    cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "%s: runtime is NULL", fn);
  else if (!(s = cb_runtime_fault_state(rt)))
    cb_errb_set(eb, CUBERT_ERR_UNSUPPORTED, "%s: the runtime was created with no_faultinj: it has no fault layer",
                fn);
  return s;
}

/* A refused rule text: the diagnostic's message becomes the error in `eb`. */
static cubert_status diag_fail(cubert_status st, const cubert_faultinj_diag *diag, const char *fn, cb_errb *eb) {
  if (st == CUBERT_OK) return st;
  if (diag->message[0]) return cb_errb_set(eb, st, "%s", diag->message);
  return cb_errb_set(eb, st, "%s failed", fn);
}

cubert_status cubert_faultinj_add(cubert_runtime *rt, const char *text, const char *source, uint32_t *first_id,
                                  cubert_faultinj_diag *diag) {
  cubert_faultinj_diag local;
  if (!diag) diag = &local;
  memset(diag, 0, sizeof *diag);
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_add", &eb);
  if (!s) return cb_errb_finish(&eb);
  if (!text) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_add: text is NULL");
  cubert_status st = cb_fi_state_add(s, text, strlen(text), source, false, first_id, diag);
  return cb_errb_return(&eb, diag_fail(st, diag, "cubert_faultinj_add", &eb));
}

cubert_status cubert_faultinj_load(cubert_runtime *rt, const char *path, uint32_t *first_id,
                                   cubert_faultinj_diag *diag) {
  cubert_faultinj_diag local;
  if (!diag) diag = &local;
  memset(diag, 0, sizeof *diag);
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_load", &eb);
  if (!s) return cb_errb_finish(&eb);
  if (!path || !*path)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_load: path is %s", path ? "empty" : "NULL");
  cubert_status st = cb_fi_state_load(s, path, first_id, diag);
  return cb_errb_return(&eb, diag_fail(st, diag, "cubert_faultinj_load", &eb));
}

cubert_status cubert_faultinj_configure(cubert_runtime *rt, const char *text, cubert_faultinj_diag *diag) {
  cubert_faultinj_diag local;
  if (!diag) diag = &local;
  memset(diag, 0, sizeof *diag);
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_configure", &eb);
  if (!s) return cb_errb_finish(&eb);
  cubert_status st = cb_fi_state_configure(s, text, diag);
  return cb_errb_return(&eb, diag_fail(st, diag, "cubert_faultinj_configure", &eb));
}

cubert_status cubert_faultinj_remove(cubert_runtime *rt, uint32_t rule_id) {
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_remove", &eb);
  if (!s) return cb_errb_finish(&eb);
  if (!cb_fi_state_remove(s, rule_id))
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_remove: the runtime has no rule %u", rule_id);
  return CUBERT_OK;
}

cubert_status cubert_faultinj_clear(cubert_runtime *rt) {
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_clear", &eb);
  if (!s) return cb_errb_finish(&eb);
  cb_fi_state_clear(s);
  return CUBERT_OK;
}

cubert_status cubert_faultinj_reset(cubert_runtime *rt) {
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_reset", &eb);
  if (!s) return cb_errb_finish(&eb);
  cb_fi_state_reset(s);
  return CUBERT_OK;
}

cubert_status cubert_faultinj_set_seed(cubert_runtime *rt, uint64_t seed) {
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_set_seed", &eb);
  if (!s) return cb_errb_finish(&eb);
  cb_fi_state_set_seed(s, seed);
  return CUBERT_OK;
}

uint64_t cubert_faultinj_seed(cubert_runtime *rt) {
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_seed", &eb);
  if (!s) {
    cb_errb_finish(&eb);
    return 0;
  }
  return cb_fi_state_seed(s);
}

cubert_status cubert_faultinj_set_pair_classifier(cubert_runtime *rt, cubert_faultinj_pair_classifier fn,
                                                  void *ctx) {
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_set_pair_classifier", &eb);
  if (!s) return cb_errb_finish(&eb);
  cb_fi_state_set_pair_classifier(s, fn, ctx);
  return CUBERT_OK;
}

size_t cubert_faultinj_log(cubert_runtime *rt, uint64_t first_id, cubert_fault_record *out, size_t capacity) {
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_log", &eb);
  if (!s) {
    cb_errb_finish(&eb);
    return 0;
  }
  if (!out && capacity) {
    cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_log: out is NULL with capacity %zu", capacity);
    return 0;
  }
  return capacity ? cb_fi_state_log(s, first_id, out, capacity) : 0;
}

bool cubert_faultinj_record(cubert_runtime *rt, uint64_t id, cubert_fault_record *record) {
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_record", &eb);
  if (!s) {
    cb_errb_finish(&eb);
    return false;
  }
  if (!record) {
    cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_record: record is NULL");
    return false;
  }
  return cb_fi_state_record(s, id, record);
}

uint64_t cubert_faultinj_injected(cubert_runtime *rt) {
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_injected", &eb);
  if (!s) {
    cb_errb_finish(&eb);
    return 0;
  }
  cubert_faultinj_stats st;
  cb_fi_state_stats(s, &st);
  return st.injected;
}

cubert_status cubert_faultinj_get_stats(cubert_runtime *rt, cubert_faultinj_stats *stats) {
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_get_stats", &eb);
  if (!s) return cb_errb_finish(&eb);
  if (!stats) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_get_stats: stats is NULL");
  cb_fi_state_stats(s, stats);
  return CUBERT_OK;
}

cubert_status cubert_faultinj_rule_describe(cubert_runtime *rt, uint32_t rule_id, char *text, size_t capacity,
                                            uint64_t *matched, uint64_t *injected) {
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_rule_describe", &eb);
  if (!s) return cb_errb_finish(&eb);
  if (!cb_fi_state_describe(s, rule_id, text, capacity, matched, injected))
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_rule_describe: the runtime has no rule %u",
                   rule_id);
  return CUBERT_OK;
}

size_t cubert_faultinj_summary(cubert_runtime *rt, char *text, size_t capacity) {
  cb_errb eb;
  cb_fi_state *s = state_of(rt, "cubert_faultinj_summary", &eb);
  if (!s) {
    cb_errb_finish(&eb);
    return 0;
  }
  if (!text && capacity) {
    cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_summary: text is NULL with capacity %zu", capacity);
    return 0;
  }
  return cb_fi_state_summary(s, text, capacity);
}
