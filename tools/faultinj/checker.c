/* tools/faultinj/checker.c: the comparison of what the runtime did with
 * what the model says it must do: violations and their reports, and the
 * check of one observation (a read's status, failures and bytes) against
 * the model (tools/faultinj/checker.h). The runner that drives a program is
 * run_calls.c, run_steps.c and runner.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tools/faultinj/checker_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/str.h"

bool cb_fi_break_rule_built(void) {
#ifdef CUBERT_BREAK_TRANSITIVE
  return true;
#else
  return false;
#endif
}

/* ------------------------------------------------------------ violations */

static const char *const violation_names[CB_FI_VIOLATION_KIND_COUNT] = {
    [CB_FI_STALE_READ] = "STALE READ",     [CB_FI_FALSE_TAINT] = "FALSE TAINT",
    [CB_FI_WRONG_CAUSE] = "WRONG CAUSE",   [CB_FI_WRONG_STATUS] = "WRONG STATUS",
    [CB_FI_LEAK] = "LEAK",                 [CB_FI_HANG] = "HANG",
    [CB_FI_EXPECTATION] = "EXPECTATION",
};

const char *cb_fi_violation_name(cb_fi_violation_kind kind) {
  return (unsigned)kind < CB_FI_VIOLATION_KIND_COUNT ? violation_names[kind] : "?";
}

static void result_add_violation(cb_fi_result *r, cb_fi_violation_kind kind, int step, int line, char *message) {
  cb_fi_violation *v = realloc(r->violations, (r->nviolations + 1) * sizeof *v);
  if (!v) {
    free(message);
    return;
  }
  r->violations = v;
  v[r->nviolations++] = (cb_fi_violation){kind, step, line, message};
  r->by_violation[kind]++;
}

void cb_fi_violation_add(cb_fi_checker *c, cb_fi_violation_kind kind, const char *fmt, ...) {
  char what[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const cb_fi_program *p = c->program;
  sbuf b = {0};
  cb_fi_sb_printf(&b, "%s", cb_fi_violation_name(kind));
  if (c->step > 0 && p && (size_t)c->step <= p->nsteps) {
    char st[256];
    cb_fi_step_format(p, &p->steps[c->step - 1], st, sizeof st);
    cb_fi_sb_printf(&b, " at step %d", c->step);
    if (c->line) cb_fi_sb_printf(&b, " (line %d)", c->line);
    cb_fi_sb_printf(&b, " `%s`", st);
  } else {
    cb_fi_sb_printf(&b, " after the last step");
  }
  if (p) {
    cb_fi_sb_printf(&b, " of %s (%s", p->name, p->source);
    if (p->seed) cb_fi_sb_printf(&b, ", seed %" PRIu64, p->seed);
    cb_fi_sb_printf(&b, ")");
  }
  if (c->config && c->config->label) cb_fi_sb_printf(&b, " on %s", c->config->label);
  cb_fi_sb_printf(&b, ": %s", what);
  if (b.failed) {
    free(b.p);
    b.p = cb_strdup(what);
  }
  result_add_violation(c->result, kind, c->step, c->line, b.p);
}

/* ------------------------------------------------------------ observations */

/* First maximal run [*s, *e) inside [from, to) where pred holds. */
static bool next_run(const cb_fim_mask *t, uint64_t from, uint64_t to, bool tainted, uint64_t *s, uint64_t *e) {
  uint64_t i = from;
  while (i < to && (t[i] != 0) != tainted) i++;
  if (i >= to) return false;
  uint64_t j = i;
  while (j < to && (t[j] != 0) == tainted) j++;
  *s = i;
  *e = j;
  return true;
}

size_t cb_fi_check_observation(cb_fi_checker *c, cb_fim_view v, const cb_fi_observation *obs, const char *what) {
  cb_fim *m = c->model;
  const cb_fim_alloc *a = &m->allocs[v.alloc];
  size_t before = c->result->nviolations;
  c->nclean = 0;
  char causes[256];
  int lost = a->device >= 0 && a->device < CB_FIM_MAX_DEVICES ? m->dev[a->device].lost_cause : -1;
  if (lost >= 0) {
    cb_fim_mask_describe(m, cb_fim_bit(lost), causes, sizeof causes);
    if (obs->status == CUBERT_OK) {
      cb_fi_violation_add(c, CB_FI_STALE_READ,
                          "%s succeeded, but device %d is lost (%s): its memory must not be handed out", what,
                          a->device, causes);
    } else if (obs->status != CUBERT_ERR_DEVICE_LOST) {
      cb_fi_violation_add(c, CB_FI_WRONG_STATUS, "%s returned %s; device %d is lost (%s), so DEVICE_LOST", what,
                          cubert_status_name(obs->status), a->device, causes);
    } else if (obs->nentries) {
      bool named = false;
      for (size_t i = 0; i < obs->nentries; i++)
        named |= cb_fim_cause_of_message(m, obs->entries[i].root_message) == lost;
      if (!named)
        cb_fi_violation_add(c, CB_FI_WRONG_CAUSE, "%s: DEVICE_LOST names `%s`, not the loss (%s)", what,
                            obs->entries[0].root_message, causes);
    }
    return c->result->nviolations - before;
  }
  if (obs->status == CUBERT_OK) {
    uint64_t s, e;
    if (next_run(a->taint, v.start, v.end, true, &s, &e)) {
      cb_fim_mask_describe(m, a->taint[s], causes, sizeof causes);
      cb_fi_violation_add(c, CB_FI_STALE_READ,
                          "%s succeeded, but bytes %" PRIu64 "..%" PRIu64 " of memory (allocation bytes) carry %s",
                          what, s, e, causes);
    } else if (obs->bytes) {
      for (uint64_t i = v.start; i < v.end; i++) {
        uint8_t got = obs->bytes[i - v.start];
        if (a->known[i] && got != a->bytes[i]) {
          cb_fi_violation_add(c, CB_FI_STALE_READ,
                              "%s handed out wrong bytes: byte %" PRIu64 " is 0x%02x, it must be 0x%02x "
                              "(the last write that succeeded)",
                              what, i, got, a->bytes[i]);
          break;
        }
      }
    }
    return c->result->nviolations - before;
  }
  if (obs->status == CUBERT_ERR_DEVICE_LOST) {
    cb_fi_violation_add(c, CB_FI_FALSE_TAINT, "%s failed with DEVICE_LOST, but device %d is not lost", what,
                        a->device);
    return c->result->nviolations - before;
  }
  if (obs->status != CUBERT_ERR_TAINTED) {
    cb_fi_violation_add(c, CB_FI_WRONG_STATUS, "%s returned %s (a read returns OK, TAINTED or DEVICE_LOST)",
                        what, cubert_status_name(obs->status));
    return c->result->nviolations - before;
  }
  /* refused: every range it names must lie inside the view, name bytes and
   * be tainted in the model, with that root; every tainted byte must be
   * named; and a refusal of a view the model says is good is wrong whatever
   * it names */
  uint64_t len = v.end - v.start;
  uint8_t *covered = calloc(len ? len : 1, 1);
  bool false_taint = false, wrong_cause = false, bad_range = false;
  size_t first_violation = c->result->nviolations;
  for (size_t i = 0; i < obs->nentries; i++) {
    const cb_fi_obs_entry *en = &obs->entries[i];
    if (!bad_range && (en->start >= en->end || en->start < v.start || en->end > v.end)) {
      cb_fi_violation_add(c, CB_FI_FALSE_TAINT,
                          "%s was refused naming bytes %" PRIu64 "..%" PRIu64 " with `%s`: %s (the read was of "
                          "bytes %" PRIu64 "..%" PRIu64 ")",
                          what, en->start, en->end, en->root_message,
                          en->start >= en->end ? "no bytes at all" : "bytes outside what was read", v.start, v.end);
      bad_range = true;
    }
    uint64_t s = en->start > v.start ? en->start : v.start;
    uint64_t e = en->end < v.end ? en->end : v.end;
    int cause = cb_fim_cause_of_message(m, en->root_message);
    for (uint64_t b = s; b < e; b++) {
      if (covered) covered[b - v.start] = 1;
      if (!a->taint[b]) {
        if (!false_taint) {
          uint64_t fe = b;
          while (fe < e && !a->taint[fe]) fe++;
          cb_fi_violation_add(c, CB_FI_FALSE_TAINT,
                              "%s refused bytes %" PRIu64 "..%" PRIu64 " with `%s`, but the model says they "
                              "hold good data",
                              what, b, fe, en->root_message);
        }
        false_taint = true;
      } else if (!wrong_cause && !(a->taint[b] & cb_fim_bit(cause))) {
        cb_fim_mask_describe(m, a->taint[b], causes, sizeof causes);
        cb_fi_violation_add(c, CB_FI_WRONG_CAUSE,
                            "%s: bytes %" PRIu64 "..%" PRIu64 " are refused with root cause `%s`; the model "
                            "says %s",
                            what, s, e, en->root_message, causes);
        wrong_cause = true;
      }
    }
  }
  if (!cb_fim_taint_of(m, v) && c->result->nviolations == first_violation)
    cb_fi_violation_add(c, CB_FI_FALSE_TAINT, "%s was refused as TAINTED%s, and the model says every byte is good",
                        what, obs->nentries ? "" : " naming no failure");
  if (covered && obs->nentries) {
    for (uint64_t b = v.start; b < v.end; b++) {
      if (!a->taint[b] || covered[b - v.start]) continue;
      uint64_t e = b;
      while (e < v.end && a->taint[e] && !covered[e - v.start]) e++;
      cb_fim_mask_describe(m, a->taint[b], causes, sizeof causes);
      cb_fi_violation_add(c, CB_FI_STALE_READ,
                          "%s was refused, but the refusal does not name bytes %" PRIu64 "..%" PRIu64
                          ", which carry %s: the runtime holds them as good (a read of them alone succeeds)",
                          what, b, e, causes);
      break;
    }
  }
  free(covered);
  /* the model-clean ranges the refusal hid: the runner reads them alone */
  uint64_t s, e, from = v.start;
  while (c->nclean < 16 && next_run(a->taint, from, v.end, false, &s, &e)) {
    c->clean_start[c->nclean] = s;
    c->clean_end[c->nclean++] = e;
    from = e;
  }
  return c->result->nviolations - before;
}

