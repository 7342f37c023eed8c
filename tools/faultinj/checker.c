/* tools/faultinj/checker.c: programs, the comparison of what the runtime did with
 * what the model says it must do, and the runner that drives a program
 * through the public API under a watchdog (tools/faultinj/checker.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tools/faultinj/checker.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/str.h"
#include "runtime/limits.h"

#define DEFAULT_TIMEOUT_MS 10000u
#define DEFAULT_MAX_VIOLATIONS 20u
#define MAX_ROLES 8
/* Records a device may hold before the checker syncs it: the runtime reaps
 * (and so finds asynchronous failures) on its own every
 * CB_RUNTIME_REAP_INTERVAL records; the checker syncs a margin before. */
#define RECORDS_BEFORE_SYNC (CB_RUNTIME_REAP_INTERVAL - 56u)
_Static_assert(RECORDS_BEFORE_SYNC > 0 && RECORDS_BEFORE_SYNC < CB_RUNTIME_REAP_INTERVAL,
               "the checker syncs before the runtime reaps on its own");

bool cb_fi_break_rule_built(void) {
#ifdef CUBERT_BREAK_TRANSITIVE
  return true;
#else
  return false;
#endif
}

/* ------------------------------------------------------------ programs */

void cb_fi_program_init(cb_fi_program *p, const char *name, const char *source) {
  memset(p, 0, sizeof *p);
  p->name = cb_strdup(name);
  p->title = cb_strdup("");
  p->rules = cb_strdup("");
  p->source = cb_strdup(source);
  p->devices = 1;
  p->streams = 1;
}

void cb_fi_program_free(cb_fi_program *p) {
  if (!p) return;
  free(p->name);
  free(p->title);
  free(p->rules);
  free(p->source);
  for (int i = 0; i < p->nviews; i++) free(p->views[i]);
  free(p->views);
  for (size_t i = 0; i < p->nsteps; i++) free(p->steps[i].text);
  free(p->steps);
  memset(p, 0, sizeof *p);
}

bool cb_fi_program_copy(const cb_fi_program *p, cb_fi_program *o) {
  *o = *p;
  o->name = cb_strdup(p->name);
  o->title = cb_strdup(p->title);
  o->rules = cb_strdup(p->rules);
  o->source = cb_strdup(p->source);
  o->views = calloc((size_t)p->nviews + 1, sizeof *o->views);
  o->steps = calloc(p->nsteps + 1, sizeof *o->steps);
  o->capsteps = p->nsteps + 1;
  bool ok = o->name && o->title && o->rules && o->source && o->views && o->steps;
  for (int i = 0; ok && i < p->nviews; i++) ok = (o->views[i] = cb_strdup(p->views[i])) != NULL;
  if (ok) memcpy(o->steps, p->steps, p->nsteps * sizeof *o->steps);
  for (size_t i = 0; ok && i < p->nsteps; i++)
    if (p->steps[i].text) ok = (o->steps[i].text = cb_strdup(p->steps[i].text)) != NULL;
  if (!ok) {
    /* free what was copied, never what the original owns */
    if (o->steps)
      for (size_t i = 0; i < p->nsteps; i++)
        if (o->steps[i].text == p->steps[i].text) o->steps[i].text = NULL;
    if (o->views)
      for (int i = 0; i < p->nviews; i++)
        if (o->views[i] == p->views[i]) o->views[i] = NULL;
    cb_fi_program_free(o);
  }
  return ok;
}

cb_fi_step *cb_fi_program_add(cb_fi_program *p, cb_fi_step_kind kind) {
  if (p->nsteps == p->capsteps) {
    size_t cap = p->capsteps ? p->capsteps * 2 : 32;
    cb_fi_step *v = realloc(p->steps, cap * sizeof *v);
    if (!v) return NULL;
    p->steps = v;
    p->capsteps = cap;
  }
  cb_fi_step *s = &p->steps[p->nsteps++];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->stream = 1;
  s->view = s->view2 = s->args[0] = s->args[1] = -1;
  return s;
}

int cb_fi_program_view(cb_fi_program *p, const char *name) {
  for (int i = 0; i < p->nviews; i++)
    if (strcmp(p->views[i], name) == 0) return i;
  char **v = realloc(p->views, ((size_t)p->nviews + 1) * sizeof *v);
  if (!v) return -1;
  p->views = v;
  if (!(v[p->nviews] = cb_strdup(name))) return -1;
  return p->nviews++;
}

/* A growing string for formatting programs and reports. */
typedef struct sbuf {
  char *p;
  size_t n, cap;
  bool failed;
} sbuf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void sb_printf(sbuf *b, const char *fmt, ...) {
  if (b->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->cap - b->n;
    int w = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? room : 0, fmt, ap);
    va_end(ap);
    if (w < 0) {
      b->failed = true;
      return;
    }
    if (b->p && (size_t)w < room) {
      b->n += (size_t)w;
      return;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + (size_t)w + 1) cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) {
      b->failed = true;
      return;
    }
    b->p = q;
    b->cap = cap;
  }
}

static const char *view_name(const cb_fi_program *p, int v) {
  return v >= 0 && v < p->nviews ? p->views[v] : "?";
}

static char role_name(int role) { return role >= 0 && role < 26 ? (char)('A' + role) : '?'; }

static void format_fraction(char *buf, size_t cap, double f) {
  /* shortest decimal that reads back the same (0.5, 0.25, 0.125) */
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(buf, cap, "%.*f", digits, f);
    if (strtod(buf, NULL) == f) return;
  }
}

const char *cb_fi_step_fault_op(const cb_fi_program *p, const cb_fi_step *s, cubert_fault_kind fault) {
  (void)p;
  switch (s->kind) {
  case CB_FI_ALLOC:
    return fault == CUBERT_FAULT_OOM || fault == CUBERT_FAULT_DEVICE_LOST ? "alloc" : NULL;
  case CB_FI_CREATE:
    return fault == CUBERT_FAULT_OOM ? "alloc" : "write";
  case CB_FI_WRITE:
    return "write";
  case CB_FI_FILL:
    return "fill";
  case CB_FI_COPY:
    return "copy"; /* or copy_peer: the runner picks by the views' devices */
  case CB_FI_LAUNCH:
    return fault == CUBERT_FAULT_COMPILE ? "compile" : "launch";
  case CB_FI_SYNC:
    return fault == CUBERT_FAULT_DEVICE_LOST || fault == CUBERT_FAULT_FAIL ? "sync" : NULL;
  default:
    return NULL;
  }
}

static void format_data(sbuf *b, const cb_fi_step *s) {
  if (s->pattern)
    sb_printf(b, " pattern %" PRIu64, s->seed);
  else
    sb_printf(b, " u32 0x%08" PRIx32, s->value);
}

static void format_step(sbuf *b, const cb_fi_program *p, const cb_fi_step *s) {
  switch (s->kind) {
  case CB_FI_ALLOC:
    sb_printf(b, "alloc %s on %c size %" PRIu64, view_name(p, s->view), role_name(s->device), s->size);
    break;
  case CB_FI_CREATE:
    sb_printf(b, "create %s on %c size %" PRIu64, view_name(p, s->view), role_name(s->device), s->size);
    format_data(b, s);
    break;
  case CB_FI_SLICE:
    sb_printf(b, "slice %s of %s at %" PRIu64 " size %" PRIu64, view_name(p, s->view), view_name(p, s->view2),
              s->offset, s->size);
    break;
  case CB_FI_WRITE:
    sb_printf(b, "write %s", view_name(p, s->view));
    format_data(b, s);
    break;
  case CB_FI_FILL:
    sb_printf(b, "fill %s u32 0x%08" PRIx32, view_name(p, s->view), s->value);
    break;
  case CB_FI_COPY:
    sb_printf(b, "copy %s to %s", view_name(p, s->view), view_name(p, s->view2));
    break;
  case CB_FI_LAUNCH:
    sb_printf(b, "launch %s on %c", cb_fim_kernel_name(s->kernel), role_name(s->device));
    for (uint32_t i = 0; i < cb_fim_kernel_buffers(s->kernel); i++)
      sb_printf(b, " %s=%s", cb_fim_kernel_param(s->kernel, i), view_name(p, s->args[i]));
    if (s->kernel == CB_FIM_FILL_U32 || s->kernel == CB_FIM_FAIL_U32 || s->kernel == CB_FIM_SLEEP_U32)
      sb_printf(b, " value=%" PRIu32, s->value);
    break;
  case CB_FI_SHARE:
    sb_printf(b, "share %s", view_name(p, s->view));
    break;
  case CB_FI_RELEASE:
    sb_printf(b, "release %s", view_name(p, s->view));
    break;
  case CB_FI_SYNC:
    if (s->device < 0)
      sb_printf(b, "sync all");
    else
      sb_printf(b, "sync %c", role_name(s->device));
    break;
  case CB_FI_FAULT:
    sb_printf(b, "fault %s", s->text ? s->text : "");
    break;
  case CB_FI_CLEAR_FAULTS:
    sb_printf(b, "clear-faults");
    break;
  case CB_FI_EXPECT:
    sb_printf(b, "expect ");
    switch (s->expect) {
    case CB_FI_EXPECT_STATUS: {
      const char *sn = cubert_status_name(s->status);
      sb_printf(b, "status %s", strncmp(sn, "ERR_", 4) == 0 ? sn + 4 : sn);
    }
      break;
    case CB_FI_EXPECT_CLEAN:
      sb_printf(b, "%s clean", view_name(p, s->view));
      break;
    case CB_FI_EXPECT_TAINTED:
      sb_printf(b, "%s tainted", view_name(p, s->view));
      if (s->has_cause)
        sb_printf(b, s->cause_kind == CB_FIM_CAUSE_TAG ? " by tag %" PRIu64 : " by #%" PRIu64, s->number);
      if (s->has_range) sb_printf(b, " bytes %" PRIu64 "..%" PRIu64, s->range_start, s->range_end);
      break;
    case CB_FI_EXPECT_U32:
      sb_printf(b, "%s u32 0x%08" PRIx64, view_name(p, s->view), s->number);
      break;
    case CB_FI_EXPECT_U64:
      sb_printf(b, "%s u64 %" PRIu64, view_name(p, s->view), s->number);
      break;
    case CB_FI_EXPECT_CHAIN:
      sb_printf(b, "%s chain %" PRIu64, view_name(p, s->view), s->number);
      break;
    case CB_FI_EXPECT_LOST:
      sb_printf(b, "lost %c", role_name(s->device));
      break;
    case CB_FI_EXPECT_INJECTED:
      sb_printf(b, "injected %" PRIu64, s->number);
      break;
    case CB_FI_EXPECT_VIEW_LOST:
      sb_printf(b, "%s lost", view_name(p, s->view));
      break;
    }
    break;
  default:
    sb_printf(b, "?");
    break;
  }
  bool streamed = s->kind == CB_FI_ALLOC || s->kind == CB_FI_CREATE || s->kind == CB_FI_WRITE ||
                  s->kind == CB_FI_FILL || s->kind == CB_FI_COPY || s->kind == CB_FI_LAUNCH;
  if (streamed && s->stream > 1) sb_printf(b, " stream %d", s->stream);
  if (s->has_fault) {
    sb_printf(b, " ! %s", cubert_fault_kind_name(s->fault));
    if (s->fraction > 0 && (s->fault == CUBERT_FAULT_SCRIBBLE || s->fault == CUBERT_FAULT_PARTIAL ||
                            s->fault == CUBERT_FAULT_ASYNC_SCRIBBLE)) {
      char f[32];
      format_fraction(f, sizeof f, s->fraction);
      sb_printf(b, ":%s", f);
    }
  }
}

void cb_fi_step_format(const cb_fi_program *p, const cb_fi_step *s, char *buf, size_t capacity) {
  sbuf b = {0};
  format_step(&b, p, s);
  snprintf(buf, capacity, "%s", b.p && !b.failed ? b.p : "?");
  free(b.p);
}

char *cb_fi_program_format(const cb_fi_program *p) {
  sbuf b = {0};
  sb_printf(&b, "scenario %s\n", p->name);
  if (p->title && p->title[0]) {
    sb_printf(&b, "  title \"");
    for (const char *c = p->title; *c; c++) sb_printf(&b, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
    sb_printf(&b, "\"\n");
  }
  if (p->rules && p->rules[0]) sb_printf(&b, "  rule %s\n", p->rules);
  sb_printf(&b, "  devices %d\n", p->devices);
  if (p->fixed) sb_printf(&b, "  placement fixed\n");
  if (p->streams > 1) sb_printf(&b, "  streams %d\n", p->streams);
  if (p->host_only) sb_printf(&b, "  backend host\n");
  if (p->timeout_ms) sb_printf(&b, "  timeout %" PRIu32 "\n", p->timeout_ms);
  for (size_t i = 0; i < p->nsteps; i++) {
    sb_printf(&b, "  ");
    format_step(&b, p, &p->steps[i]);
    sb_printf(&b, "\n");
  }
  sb_printf(&b, "end\n");
  if (b.failed) {
    free(b.p);
    return NULL;
  }
  return b.p;
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
  sb_printf(&b, "%s", cb_fi_violation_name(kind));
  if (c->step > 0 && p && (size_t)c->step <= p->nsteps) {
    char st[256];
    cb_fi_step_format(p, &p->steps[c->step - 1], st, sizeof st);
    sb_printf(&b, " at step %d", c->step);
    if (c->line) sb_printf(&b, " (line %d)", c->line);
    sb_printf(&b, " `%s`", st);
  } else {
    sb_printf(&b, " after the last step");
  }
  if (p) {
    sb_printf(&b, " of %s (%s", p->name, p->source);
    if (p->seed) sb_printf(&b, ", seed %" PRIu64, p->seed);
    sb_printf(&b, ")");
  }
  if (c->config && c->config->label) sb_printf(&b, " on %s", c->config->label);
  sb_printf(&b, ": %s", what);
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

/* ------------------------------------------------------------ the runner */

typedef struct run_view {
  cubert_handle *h;
  int alloc;             /* model allocation */
  uint64_t start, end;   /* allocation bytes */
} run_view;

typedef struct run_alloc {
  cubert_handle *full;   /* the checker's own view of the whole allocation */
  int views;             /* program views on it */
  cubert_weak *weak;     /* a weak binding to it: upgrades while it lives, never after */
} run_alloc;

typedef struct run {
  const cb_fi_program *p; /* = &prog: the run's own copy (a hung run outlives the caller's) */
  cb_fi_program prog;
  cb_fi_run_config cfg;
  char label[256];
  int role_map[MAX_ROLES];
  cb_fi_result res;
  cubert_runtime *rt;
  int ndev;
  cubert_client *clients[CB_FIM_MAX_DEVICES];
  int map[MAX_ROLES];
  int nroles;
  cb_fim model;
  cb_fi_checker chk;
  run_view *views;
  run_alloc *allocs;
  int capallocs;
  uint64_t baseline[CB_FIM_MAX_DEVICES];
  uint64_t next_log;     /* first injection id not seen yet */
  cubert_status last_status;
  cubert_kernel *kernels[CB_FIM_KERNEL_COUNT];
  uint8_t *buf;
  size_t bufcap;
  struct timespec t0;
  /* watchdog */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  atomic_uint_fast64_t progress;
  atomic_int current_step, current_line;
  bool finished, abandoned;
  cubert_status status;
} run;

static uint8_t pattern_byte(uint64_t seed, uint64_t k) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + k * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (uint8_t)(z ^ (z >> 31));
}

static uint8_t *scratch(run *r, size_t n) {
  if (n > r->bufcap) {
    uint8_t *b = realloc(r->buf, n);
    if (!b) return NULL;
    r->buf = b;
    r->bufcap = n;
  }
  return r->buf;
}

static void step_data(const cb_fi_step *s, uint8_t *d, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    d[i] = s->pattern ? pattern_byte(s->seed, i) : (uint8_t)(s->value >> (8 * (i % 4)));
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void trace(run *r, const char *fmt, ...) {
  if (!r->cfg.trace) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(r->cfg.trace, fmt, ap);
  va_end(ap);
}

static void tick(run *r) { atomic_fetch_add(&r->progress, 1); }

/* ---- the injections of one call */

typedef struct hitbuf {
  cb_fim_hit v[16];
  size_t n;
} hitbuf;

/* Takes the injections logged since the last call into `hb` (and the
 * run's log), registering each as a cause. */
static void take_hits(run *r, hitbuf *hb) {
  hb->n = 0;
  cubert_fault_record recs[16];
  for (;;) {
    size_t n = cubert_faultinj_log(r->rt, r->next_log, recs, 16);
    for (size_t i = 0; i < n; i++) {
      cubert_fault_record *rec = &recs[i];
      r->next_log = rec->id + 1;
      cubert_fault_record *l = realloc(r->res.log, (r->res.nlog + 1) * sizeof *l);
      if (l) {
        r->res.log = l;
        l[r->res.nlog++] = *rec;
      }
      r->res.injected++;
      if ((unsigned)rec->fault < CUBERT_FAULT_KIND_COUNT_) r->res.by_kind[rec->fault]++;
      if (rec->fault == CUBERT_FAULT_DEVICE_LOST) r->res.device_lost = true;
      int cause = cb_fim_cause_add(&r->model, CB_FIM_CAUSE_INJECTION, rec->id, rec->message);
      if (hb->n < 16) {
        cb_fim_hit *h = &hb->v[hb->n++];
        h->fault = rec->fault;
        snprintf(h->operation, sizeof h->operation, "%s", rec->operation);
        h->status = rec->status;
        h->device = rec->device;
        h->cause = cause;
      }
      trace(r, "    injected #%" PRIu64 ": %s\n", rec->id, rec->message);
    }
    if (n < 16) break;
  }
}

static cb_fim_hits hits_of(const hitbuf *hb) {
  cb_fim_hits h = {hb->v, hb->n};
  return h;
}

/* ---- statuses */

/* The links of each failure an error names: a root has no parent; the
 * first link's parent is the root; a deeper link's parent is the link
 * before it, made after the root and before itself (so never the root). */
static void check_chains(run *r, const char *what, const cubert_error *e) {
  size_t n = cubert_error_failure_count(e);
  for (size_t i = 0; i < n; i++) {
    const cubert_failure *f = cubert_error_failure(e, i, NULL, NULL);
    uint64_t dropped = 0;
    uint64_t depth = cubert_failure_skip_count(f, &dropped) + dropped;
    uint64_t id = cubert_failure_id(f), pid = cubert_failure_parent_id(f);
    uint64_t root = cubert_failure_id(cubert_failure_root(f));
    bool ok = depth == 0 ? pid == 0 && root == id : depth == 1 ? pid == root : pid > root && pid < id;
    if (!ok) {
      cb_fi_violation_add(&r->chk, CB_FI_WRONG_CAUSE,
                          "%s: failure #%" PRIu64 " passed through %" PRIu64 " skipped step%s from root #%" PRIu64
                          ", yet names #%" PRIu64 " as its parent",
                          what, id, depth, depth == 1 ? "" : "s", root, pid);
      return;
    }
  }
}

/* Compares a call's status (and its error's root causes) with the model's
 * outcome. `err` is the thread's error when st != OK. */
static void check_status(run *r, const char *what, cb_fim_outcome o, cubert_status st) {
  r->last_status = st;
  char causes[256];
  if (st != o.status && st < 64 && (o.also & ((uint64_t)1 << st))) o.status = st; /* one the docs allow too */
  if (st != o.status) {
    cb_fim_mask_describe(&r->model, o.roots, causes, sizeof causes);
    const char *msg = st != CUBERT_OK ? cubert_last_error_message() : "";
    if (o.status == CUBERT_ERR_TAINTED && st == CUBERT_OK)
      cb_fi_violation_add(&r->chk, CB_FI_STALE_READ,
                          "%s ran and returned OK, but one of its inputs carries %s: it must not run on tainted "
                          "bytes (TAINTED)",
                          what, causes);
    else if (o.status == CUBERT_OK && st == CUBERT_ERR_TAINTED)
      cb_fi_violation_add(&r->chk, CB_FI_FALSE_TAINT,
                          "%s was refused as TAINTED, but the model says its inputs hold good data: %s", what, msg);
    else
      cb_fi_violation_add(&r->chk, CB_FI_WRONG_STATUS, "%s returned %s, the model says %s%s%s%s%s%s", what,
                          cubert_status_name(st), cubert_status_name(o.status), o.roots ? " (" : "",
                          o.roots ? causes : "", o.roots ? ")" : "", st != CUBERT_OK ? ": " : "", msg);
    if (st != CUBERT_OK) trace(r, "    error: %s\n", msg);
    return;
  }
  if (st == CUBERT_OK) return;
  cubert_error *e = cubert_last_error();
  if (!e) return;
  check_chains(r, what, e);
  if (!o.roots) {
    cubert_error_release(e);
    return;
  }
  size_t n = cubert_error_failure_count(e);
  for (size_t i = 0; i < n; i++) {
    const cubert_failure *f = cubert_error_failure(e, i, NULL, NULL);
    const cubert_failure *root = cubert_failure_root(f);
    const char *rm = cubert_failure_message(root);
    int cause = cb_fim_cause_of_message(&r->model, rm);
    if (!(o.roots & cb_fim_bit(cause))) {
      cb_fim_mask_describe(&r->model, o.roots, causes, sizeof causes);
      cb_fi_violation_add(&r->chk, CB_FI_WRONG_CAUSE, "%s returned %s with root cause `%s`; the model says %s",
                          what, cubert_status_name(st), rm, causes);
      break;
    }
  }
  if (n == 0 && st == CUBERT_ERR_TAINTED) {
    cb_fim_mask_describe(&r->model, o.roots, causes, sizeof causes);
    cb_fi_violation_add(&r->chk, CB_FI_WRONG_CAUSE, "%s returned TAINTED naming no failure; the model says %s",
                        what, causes);
  }
  cubert_error_release(e);
}

/* ---- syncs */

/* cubert_sync_device on `device`, checked. `why` is NULL for a program's
 * own sync, else why the checker added it. */
static void do_sync(run *r, int device, const char *why) {
  if (why) {
    if (r->model.dev[device].lost_cause >= 0) return; /* nothing to order on a lost device */
    r->res.syncs_added++;
    trace(r, "    sync device %d (%s)\n", device, why);
  }
  hitbuf hb;
  cubert_status st = cubert_sync_device(r->clients[device]);
  take_hits(r, &hb);
  cb_fim_outcome o = cb_fim_sync(&r->model, device, hits_of(&hb));
  char what[96];
  snprintf(what, sizeof what, "sync of device %d%s", device, why ? " (added by the checker)" : "");
  cubert_status keep = r->last_status;
  check_status(r, what, o, st);
  if (why) r->last_status = keep;
}

/* ---- views and allocations */

static run_view *view_at(run *r, int slot) {
  if (slot < 0 || slot >= r->p->nviews || !r->views[slot].h) return NULL;
  return &r->views[slot];
}

static cb_fim_view fim_view(const run_view *v) {
  cb_fim_view f = {v->alloc, v->start, v->end};
  return f;
}

static int device_of(run *r, const run_view *v) { return r->model.allocs[v->alloc].device; }

static bool allocs_reserve(run *r, int n) {
  if (n <= r->capallocs) return true;
  int cap = r->capallocs ? r->capallocs * 2 : 16;
  while (cap < n) cap *= 2;
  run_alloc *v = realloc(r->allocs, (size_t)cap * sizeof *v);
  if (!v) return false;
  memset(v + r->capallocs, 0, (size_t)(cap - r->capallocs) * sizeof *v);
  r->allocs = v;
  r->capallocs = cap;
  return true;
}

static void view_release(run *r, int slot) {
  run_view *v = view_at(r, slot);
  if (!v) return;
  cubert_handle_release(v->h);
  v->h = NULL;
  run_alloc *a = &r->allocs[v->alloc];
  if (--a->views == 0) {
    cubert_handle_release(a->full);
    a->full = NULL;
    cb_fim_release(&r->model, v->alloc);
  }
}

static void view_set(run *r, int slot, cubert_handle *h, int alloc, uint64_t start, uint64_t end) {
  view_release(r, slot); /* a name bound again drops its old view */
  r->views[slot] = (run_view){h, alloc, start, end};
  r->allocs[alloc].views++;
}

/* ---- what a step touches */

typedef struct touch {
  int alloc;
  bool write;
} touch;

/* Syncs before a step: every device it touches when it crosses devices
 * (nothing orders cross-device accesses), or its own device when records
 * pile up. Streams of one device get no sync: the runtime orders a write
 * after the last writer (a failed one too: it may have left garbage) and
 * every reader on other streams, and a read after the last writer, so the
 * checker holds it to that. */
static void prelude(run *r, int device, const touch *t, size_t n, bool *cross) {
  *cross = false;
  for (size_t i = 0; i < n; i++) *cross |= r->model.allocs[t[i].alloc].device != device;
  if (*cross) {
    bool done[CB_FIM_MAX_DEVICES] = {false};
    for (size_t i = 0; i < n; i++) {
      int d = r->model.allocs[t[i].alloc].device;
      if (!done[d]) do_sync(r, d, "the step reaches another device's memory");
      done[d] = true;
    }
    if (!done[device]) do_sync(r, device, "the step reaches another device's memory");
    return;
  }
  if (r->model.dev[device].nrecords >= RECORDS_BEFORE_SYNC) do_sync(r, device, "work piles up");
}

static bool use_stream(run *r, int device, int stream) {
  cubert_status st = cubert_client_use_stream(r->clients[device], (cubert_stream)stream);
  if (st != CUBERT_OK) {
    cb_fi_violation_add(&r->chk, CB_FI_WRONG_STATUS, "cubert_client_use_stream(device %d, stream %d) returned %s: %s",
                        device, stream, cubert_status_name(st), cubert_last_error_message());
    return false;
  }
  return true;
}

/* Installs the step's own fault (`! KIND`) as a one-shot rule for the
 * call it acts on; returns its id (0: none). */
static uint32_t step_fault(run *r, const cb_fi_step *s, int device, bool peer_copy) {
  if (!s->has_fault) return 0;
  const char *op = cb_fi_step_fault_op(r->p, s, s->fault);
  if (!op) return 0;
  if (s->kind == CB_FI_COPY && peer_copy) op = "copy_peer";
  char frac[40] = "";
  if (s->fraction > 0 && (s->fault == CUBERT_FAULT_SCRIBBLE || s->fault == CUBERT_FAULT_PARTIAL ||
                          s->fault == CUBERT_FAULT_ASYNC_SCRIBBLE)) {
    frac[0] = ':';
    format_fraction(frac + 1, sizeof frac - 1, s->fraction);
  }
  char text[160];
  /* an allocation is asked of the driver once more after an OOM: both fail */
  snprintf(text, sizeof text, "%s device=%d %sfault=%s%s", op, device,
           s->fault == CUBERT_FAULT_OOM ? "" : "times=1 ", cubert_fault_kind_name(s->fault), frac);
  uint32_t id = 0;
  cubert_faultinj_diag diag;
  if (cubert_faultinj_add(r->rt, text, "step fault", &id, &diag) != CUBERT_OK) {
    cb_fi_violation_add(&r->chk, CB_FI_WRONG_STATUS, "the step's fault `%s` was refused: %s", text, diag.message);
    return 0;
  }
  return id;
}

static void step_fault_done(run *r, uint32_t id) {
  if (id) cubert_faultinj_remove(r->rt, id);
}

/* ---- checks */

static void fill_obs(cb_fi_observation *o, cb_fi_obs_entry *ents, size_t cap, cubert_error *e) {
  o->entries = ents;
  o->nentries = 0;
  if (!e) return;
  size_t n = cubert_error_failure_count(e);
  for (size_t i = 0; i < n && o->nentries < cap; i++) {
    uint64_t s = 0, en = 0;
    const cubert_failure *f = cubert_error_failure(e, i, &s, &en);
    ents[o->nentries++] = (cb_fi_obs_entry){cubert_failure_message(cubert_failure_root(f)), s, en};
  }
}

/* Reads `h` (a view of allocation `alloc`, bytes [start, end)) on its owner and
 * compares with the model. */
static void check_read(run *r, cubert_handle *h, int alloc, uint64_t start, uint64_t end, const char *name) {
  int device = r->model.allocs[alloc].device;
  if (!use_stream(r, device, 1)) return;
  uint8_t *b = scratch(r, end - start ? end - start : 1);
  if (!b) return;
  cubert_status st = cubert_handle_read(r->clients[device], h, b, end - start);
  r->res.reads++;
  cubert_error *e = st != CUBERT_OK ? cubert_last_error() : NULL;
  cb_fi_obs_entry ents[64];
  cb_fi_observation o = {st, st == CUBERT_OK ? b : NULL, NULL, 0};
  fill_obs(&o, ents, 64, e);
  char what[160];
  snprintf(what, sizeof what, "read of %s (memory %" PRIu64 " bytes %" PRIu64 "..%" PRIu64 ", device %d)", name,
           cubert_handle_memory_id(h), start, end, device);
  cb_fim_view v = {alloc, start, end};
  cb_fi_check_observation(&r->chk, v, &o, what);
  if (e) check_chains(r, what, e);
  cubert_error_release(e);
}

static void check_alloc(run *r, int a, const char *name) {
  run_alloc *ra = &r->allocs[a];
  cb_fim_alloc *ma = &r->model.allocs[a];
  check_read(r, ra->full, a, 0, ma->size, name);
  /* what the refusal hid: the model-clean ranges, read alone */
  size_t nclean = r->chk.nclean;
  uint64_t cs[16], ce[16];
  memcpy(cs, r->chk.clean_start, sizeof cs);
  memcpy(ce, r->chk.clean_end, sizeof ce);
  for (size_t i = 0; i < nclean; i++) {
    cubert_handle *sl = NULL;
    if (cubert_handle_slice(ra->full, cs[i], ma->size - ce[i], &sl) != CUBERT_OK) continue;
    char sub[96];
    snprintf(sub, sizeof sub, "%s bytes %" PRIu64 "..%" PRIu64, name, cs[i], ce[i]);
    check_read(r, sl, a, cs[i], ce[i], sub);
    cubert_handle_release(sl);
  }
  /* shared memory as a peer sees it: the failure cell (rules 5, 6) */
  if (!ma->shared) return;
  int peer = -1;
  for (int k = 0; k < r->nroles && peer < 0; k++)
    if (r->map[k] != ma->device && r->model.dev[r->map[k]].lost_cause < 0) peer = r->map[k];
  if (peer < 0) return;
  cubert_status st = cubert_handle_check(r->clients[peer], ra->full);
  r->res.reads++;
  cubert_error *e = st != CUBERT_OK ? cubert_last_error() : NULL;
  cb_fi_obs_entry ents[64];
  cb_fi_observation o = {st, NULL, NULL, 0};
  fill_obs(&o, ents, 64, e);
  char what[160];
  snprintf(what, sizeof what, "check of shared %s from device %d", name, peer);
  cb_fim_view v = {a, 0, ma->size};
  cb_fi_check_observation(&r->chk, v, &o, what);
  cubert_error_release(e);
}

static const char *alloc_name(run *r, int a, char *buf, size_t cap) {
  for (int s = 0; s < r->p->nviews; s++)
    if (r->views[s].h && r->views[s].alloc == a && r->views[s].start == 0 &&
        r->views[s].end == r->model.allocs[a].size) {
      snprintf(buf, cap, "`%s`", r->p->views[s]);
      return buf;
    }
  for (int s = 0; s < r->p->nviews; s++)
    if (r->views[s].h && r->views[s].alloc == a) {
      snprintf(buf, cap, "the allocation of `%s`", r->p->views[s]);
      return buf;
    }
  snprintf(buf, cap, "allocation %d", a);
  return buf;
}

/* Calls at the edges, on one allocation per step (rule 9: every entry point
 * checks): its memory read through a client of another device is refused
 * as WRONG_DEVICE; a zero-byte view in its middle reads as the model says
 * (good, or DEVICE_LOST); its weak binding upgrades while it lives. */
static void check_edges(run *r, int a, const char *name) {
  run_alloc *ra = &r->allocs[a];
  cb_fim_alloc *ma = &r->model.allocs[a];
  int other = -1;
  for (int k = 0; k < r->nroles && other < 0; k++)
    if (r->map[k] != ma->device) other = r->map[k];
  uint8_t *b = scratch(r, ma->size ? ma->size : 1);
  if (other >= 0 && b) {
    cubert_status st = cubert_handle_read(r->clients[other], ra->full, b, ma->size);
    r->res.reads++;
    if (st != CUBERT_ERR_WRONG_DEVICE)
      cb_fi_violation_add(&r->chk, CB_FI_WRONG_STATUS,
                          "a read of %s (device %d) through a client of device %d returned %s, not WRONG_DEVICE%s%s",
                          name, ma->device, other, cubert_status_name(st), st ? ": " : "",
                          st ? cubert_last_error_message() : "");
  }
  cubert_handle *empty = NULL;
  uint64_t mid = ma->size / 2;
  if (cubert_handle_slice(ra->full, mid, ma->size - mid, &empty) == CUBERT_OK) {
    char sub[160];
    snprintf(sub, sizeof sub, "%.96s, zero bytes at %" PRIu64, name, mid);
    check_read(r, empty, a, mid, mid, sub);
    cubert_handle_release(empty);
  }
  if (ra->weak) {
    cubert_binding *bd = NULL;
    cubert_status st = cubert_weak_upgrade(ra->weak, &bd);
    if (st != CUBERT_OK)
      cb_fi_violation_add(&r->chk, CB_FI_WRONG_STATUS, "the weak binding of %s, alive, did not upgrade: %s: %s", name,
                          cubert_status_name(st), cubert_last_error_message());
    cubert_binding_release(bd);
  }
}

static void check_all(run *r) {
  if (r->cfg.no_checks || cb_fim_any_pending(&r->model)) return;
  for (int a = 0; a < r->model.nallocs; a++) {
    if (!r->model.allocs[a].live || !r->allocs[a].full) continue;
    char name[96];
    check_alloc(r, a, alloc_name(r, a, name, sizeof name));
    if (r->chk.step > 0 && a == r->chk.step % r->model.nallocs) check_edges(r, a, name);
  }
}

/* ---- kernels */

static cubert_status fi_fail_host(const cubert_host_launch *l, char *message, size_t cap) {
  /* out = value, then fail: a deliberately failing step, found at a fence */
  uint32_t v;
  memcpy(&v, l->args[2], 4);
  uint64_t n;
  memcpy(&n, l->args[1], 8);
  uint32_t *out = l->args[0];
  for (uint64_t i = 0; i < n; i++) out[i] = v;
  snprintf(message, cap, "deliberate failure (tag %" PRIu32 ")", v);
  return CUBERT_ERR_LAUNCH;
}

static cubert_status fi_sleep_host(const cubert_host_launch *l, char *message, size_t cap) {
  /* out = value after `value` milliseconds: a step that outlives the watchdog */
  uint32_t v;
  memcpy(&v, l->args[2], 4);
  uint64_t n;
  memcpy(&n, l->args[1], 8);
  struct timespec ts = {v / 1000, (long)(v % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  uint32_t *out = l->args[0];
  for (uint64_t i = 0; i < n; i++) out[i] = v;
  return CUBERT_OK;
}

static const cubert_param fi_kernel_params[] = {
    {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0},
    {"n", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 8},
    {"value", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 4},
};

static cubert_status kernel_get(run *r, cb_fim_kernel k, cubert_kernel **out) {
  if (r->kernels[k]) {
    *out = r->kernels[k];
    return CUBERT_OK;
  }
  cubert_status st;
  static const cubert_builtin builtin[] = {
      [CB_FIM_FILL_U32] = CUBERT_BUILTIN_FILL_U32,
      [CB_FIM_COPY_U32] = CUBERT_BUILTIN_COPY_U32,
      [CB_FIM_CHECKSUM_U32] = CUBERT_BUILTIN_CHECKSUM_U32,
      [CB_FIM_COPY_PEER_READ] = CUBERT_BUILTIN_COPY_PEER_READ,
      [CB_FIM_COPY_PEER_WRITE] = CUBERT_BUILTIN_COPY_PEER_WRITE,
  };
  if (k == CB_FIM_FAIL_U32 || k == CB_FIM_SLEEP_U32) {
    cubert_kernel_desc d = {0};
    d.name = cb_fim_kernel_runtime_name(k);
    d.params = fi_kernel_params;
    d.nparams = 3;
    d.host_fn = k == CB_FIM_FAIL_U32 ? fi_fail_host : fi_sleep_host;
    st = cubert_kernel_create(&d, &r->kernels[k]);
  } else {
    st = cubert_builtin_kernel(builtin[k], &r->kernels[k]);
  }
  if (st == CUBERT_OK) *out = r->kernels[k];
  return st;
}

/* ---- steps */

static void step_alloc(run *r, const cb_fi_step *s) {
  int d = r->map[s->device];
  if (!use_stream(r, d, s->stream)) return;
  uint8_t *data = NULL;
  if (s->kind == CB_FI_CREATE) {
    if (!(data = malloc(s->size ? s->size : 1))) return;
    step_data(s, data, s->size);
  }
  uint32_t rule = step_fault(r, s, d, false);
  cubert_handle *h = NULL;
  cubert_status st = s->kind == CB_FI_CREATE ? cubert_handle_create(r->clients[d], data, s->size, &h)
                                             : cubert_handle_empty(r->clients[d], s->size, &h);
  step_fault_done(r, rule);
  hitbuf hb;
  take_hits(r, &hb);
  cb_fim_outcome o = cb_fim_alloc_step(&r->model, r->chk.step, d, s->size, data, hits_of(&hb));
  free(data);
  if (!allocs_reserve(r, r->model.nallocs)) {
    cubert_handle_release(h);
    return;
  }
  check_status(r, s->kind == CB_FI_CREATE ? "cubert_handle_create" : "cubert_handle_empty", o, st);
  if (st == CUBERT_OK && o.alloc >= 0) {
    r->allocs[o.alloc].full = cubert_handle_clone(h);
    if (cubert_handle_downgrade(h, &r->allocs[o.alloc].weak) != CUBERT_OK) r->allocs[o.alloc].weak = NULL;
    view_set(r, s->view, h, o.alloc, 0, s->size);
  } else {
    cubert_handle_release(h);
    if (o.alloc >= 0) cb_fim_release(&r->model, o.alloc); /* the runtime made none: forget the model's */
  }
}

static void step_slice(run *r, const cb_fi_step *s) {
  run_view *p = view_at(r, s->view2);
  if (!p || s->offset > p->end - p->start || s->size > p->end - p->start - s->offset) {
    trace(r, "    skipped: the parent view does not exist or is too small\n");
    return;
  }
  uint64_t len = p->end - p->start;
  cubert_handle *h = NULL;
  cubert_status st = cubert_handle_slice(p->h, s->offset, len - s->offset - s->size, &h);
  r->last_status = st;
  if (st != CUBERT_OK) {
    cb_fi_violation_add(&r->chk, CB_FI_WRONG_STATUS, "cubert_handle_slice returned %s: %s", cubert_status_name(st),
                        cubert_last_error_message());
    return;
  }
  view_set(r, s->view, h, p->alloc, p->start + s->offset, p->start + s->offset + s->size);
}

static void step_write(run *r, const cb_fi_step *s) {
  run_view *v = view_at(r, s->view);
  if (!v) {
    trace(r, "    skipped: no view `%s`\n", view_name(r->p, s->view));
    return;
  }
  int d = device_of(r, v);
  touch t = {v->alloc, true};
  bool cross;
  prelude(r, d, &t, 1, &cross);
  if (!use_stream(r, d, s->stream)) return;
  uint64_t n = v->end - v->start;
  uint8_t *data = malloc(n ? n : 1);
  if (!data) return;
  step_data(s, data, n);
  uint32_t rule = step_fault(r, s, d, false);
  cubert_status st;
  if (s->kind == CB_FI_WRITE) {
    st = cubert_handle_write(r->clients[d], v->h, data, n);
  } else {
    uint32_t pat = s->value;
    st = cubert_handle_fill(r->clients[d], v->h, &pat, 4);
  }
  step_fault_done(r, rule);
  hitbuf hb;
  take_hits(r, &hb);
  cb_fim_outcome o = cb_fim_write(&r->model, r->chk.step, d, fim_view(v), data, hits_of(&hb));
  free(data);
  check_status(r, s->kind == CB_FI_WRITE ? "cubert_handle_write" : "cubert_handle_fill", o, st);
}

static void step_copy(run *r, const cb_fi_step *s) {
  run_view *src = view_at(r, s->view), *dst = view_at(r, s->view2);
  if (!src || !dst || src->end - src->start != dst->end - dst->start ||
      (src->alloc == dst->alloc && src->start < dst->end && dst->start < src->end)) {
    trace(r, "    skipped: the views do not exist, differ in size or overlap\n");
    return;
  }
  int sd = device_of(r, src), dd = device_of(r, dst);
  touch t[2] = {{src->alloc, false}, {dst->alloc, true}};
  bool cross;
  prelude(r, dd, t, 2, &cross);
  if (!use_stream(r, dd, s->stream)) return;
  if (sd != dd && !use_stream(r, sd, s->stream)) return;
  uint32_t rule = step_fault(r, s, dd, sd != dd);
  cubert_status st = sd == dd ? cubert_handle_copy(r->clients[dd], src->h, dst->h)
                              : cubert_handle_copy_peer(r->clients[sd], src->h, r->clients[dd], dst->h);
  step_fault_done(r, rule);
  hitbuf hb;
  take_hits(r, &hb);
  cb_fim_outcome o = cb_fim_copy(&r->model, r->chk.step, dd, fim_view(src), fim_view(dst), hits_of(&hb));
  check_status(r, sd == dd ? "cubert_handle_copy" : "cubert_handle_copy_peer", o, st);
  if (cross) do_sync(r, dd, "the step reached another device's memory");
}

static void step_launch(run *r, const cb_fi_step *s) {
  cb_fim_kernel k = s->kernel;
  uint32_t nb = cb_fim_kernel_buffers(k);
  run_view *v[2] = {NULL, NULL};
  for (uint32_t i = 0; i < nb; i++)
    if (!(v[i] = view_at(r, s->args[i]))) {
      trace(r, "    skipped: no view `%s`\n", view_name(r->p, s->args[i]));
      return;
    }
  uint64_t n = (v[0]->end - v[0]->start) / 4;
  if ((k == CB_FIM_COPY_U32 || k == CB_FIM_COPY_PEER_READ || k == CB_FIM_COPY_PEER_WRITE) &&
      (v[1]->end - v[1]->start != v[0]->end - v[0]->start ||
       (v[0]->alloc == v[1]->alloc && v[0]->start < v[1]->end && v[1]->start < v[0]->end))) {
    trace(r, "    skipped: in and out differ in size or overlap\n");
    return;
  }
  if (k == CB_FIM_CHECKSUM_U32 &&
      (v[1]->end - v[1]->start != 8 || (v[0]->alloc == v[1]->alloc && v[0]->start < v[1]->end && v[1]->start < v[0]->end))) {
    trace(r, "    skipped: acc must be 8 bytes apart from x\n");
    return;
  }
  int d = r->map[s->device];
  cubert_kernel *kern;
  cubert_status st = kernel_get(r, k, &kern);
  if (st != CUBERT_OK) {
    cb_fi_violation_add(&r->chk, CB_FI_WRONG_STATUS, "kernel `%s` could not be made: %s", cb_fim_kernel_name(k),
                        cubert_last_error_message());
    return;
  }
  touch t[2];
  for (uint32_t i = 0; i < nb; i++) t[i] = (touch){v[i]->alloc, (cb_fim_kernel_access(k, i) & CUBERT_ACCESS_WRITE) != 0};
  bool cross;
  prelude(r, d, t, nb, &cross);
  if (!use_stream(r, d, s->stream)) return;
  cubert_arg args[4];
  uint32_t na = 0;
  for (uint32_t i = 0; i < nb; i++)
    args[na++] = cb_fim_kernel_peer(k, i) ? cubert_arg_peer(v[i]->h) : cubert_arg_buffer(v[i]->h);
  uint32_t value = s->value;
  args[na++] = cubert_arg_scalar(&n, 8);
  if (k == CB_FIM_FILL_U32 || k == CB_FIM_FAIL_U32 || k == CB_FIM_SLEEP_U32) args[na++] = cubert_arg_scalar(&value, 4);
  uint64_t blocks = n / 64 + 1;
  cubert_launch_config cfg = {{(uint32_t)(blocks < 64 ? blocks : 64), 1, 1}, {64, 1, 1}, 0};
  int tag = -1;
  if (k == CB_FIM_FAIL_U32) {
    char text[96];
    snprintf(text, sizeof text, "deliberate failure (tag %" PRIu32 ") of fail_u32 at step %d", value, r->chk.step);
    tag = cb_fim_cause_add(&r->model, CB_FIM_CAUSE_TAG, value, text);
  }
  uint32_t rule = step_fault(r, s, d, false);
  st = cubert_launch(r->clients[d], kern, &cfg, args, na);
  step_fault_done(r, rule);
  hitbuf hb;
  take_hits(r, &hb);
  cb_fim_view fv[2];
  for (uint32_t i = 0; i < nb; i++) fv[i] = fim_view(v[i]);
  cb_fim_outcome o = cb_fim_launch(&r->model, r->chk.step, d, k, fv, value, tag, hits_of(&hb));
  char what[96];
  snprintf(what, sizeof what, "launch of %s on device %d", cb_fim_kernel_name(k), d);
  check_status(r, what, o, st);
  if (cross) do_sync(r, d, "the step reached another device's memory");
}

static void step_share(run *r, const cb_fi_step *s) {
  run_view *v = view_at(r, s->view);
  if (!v) return;
  int d = device_of(r, v);
  cubert_status st = cubert_handle_share(r->clients[d], v->h);
  hitbuf hb;
  take_hits(r, &hb);
  cb_fim_outcome o = cb_fim_share(&r->model, d, fim_view(v), hits_of(&hb));
  check_status(r, "cubert_handle_share", o, st);
}

/* A program's sync of `device`: with several streams, each stream alone
 * first (rule 8: a failure is reported once, by a sync of its own stream,
 * and a sync of another stream neither reports nor clears it), then the
 * device, which reports what is left. The step's status is the first
 * failure any of them returned. */
static void program_sync(run *r, int device, bool streams) {
  cubert_status first = CUBERT_OK;
  for (int t = 1; streams && t <= r->p->streams; t++) {
    hitbuf hb;
    cubert_status st = cubert_sync_stream(r->clients[device], (cubert_stream)t);
    take_hits(r, &hb);
    cb_fim_outcome o = cb_fim_sync_stream(&r->model, device, t, hits_of(&hb));
    char what[96];
    snprintf(what, sizeof what, "sync of stream %d of device %d", t, device);
    check_status(r, what, o, st);
    if (first == CUBERT_OK) first = st;
  }
  do_sync(r, device, NULL);
  if (first != CUBERT_OK) r->last_status = first;
}

static void step_sync(run *r, const cb_fi_step *s) {
  bool streams = r->p->streams > 1;
  if (s->device >= 0) {
    uint32_t rule = step_fault(r, s, r->map[s->device], false);
    program_sync(r, r->map[s->device], streams && !rule);
    step_fault_done(r, rule);
    return;
  }
  cubert_status first = CUBERT_OK;
  for (int k = 0; k < r->nroles; k++) {
    program_sync(r, r->map[k], streams);
    if (first == CUBERT_OK) first = r->last_status;
  }
  r->last_status = first;
}

/* Replaces device roles (A, B...) in `device=` and `peer=` values. */
static bool substitute_roles(const char *text, const int *map, int nroles, char *out, size_t cap) {
  size_t o = 0;
  const char *p = text;
  while (*p) {
    bool key = false;
    size_t klen = 0;
    if ((p == text || p[-1] == ' ' || p[-1] == '\t') && (strncmp(p, "device", 6) == 0 || strncmp(p, "peer", 4) == 0)) {
      klen = strncmp(p, "device", 6) == 0 ? 6 : 4;
      const char *q = p + klen;
      while (*q == ' ' || *q == '\t') q++;
      key = *q == '=';
    }
    if (!key) {
      if (o + 1 >= cap) return false;
      out[o++] = *p++;
      continue;
    }
    while (*p != '=') {
      if (o + 1 >= cap) return false;
      out[o++] = *p++;
    }
    if (o + 1 >= cap) return false;
    out[o++] = *p++;
    while (*p == ' ' || *p == '\t') {
      if (o + 1 >= cap) return false;
      out[o++] = *p++;
    }
    while (*p && *p != ' ' && *p != '\t' && *p != ';' && *p != '#') {
      if (*p >= 'A' && *p <= 'H' && *p - 'A' < nroles) {
        int w = snprintf(out + o, cap - o, "%d", map[*p - 'A']);
        if (w < 0 || (size_t)w >= cap - o) return false;
        o += (size_t)w;
        p++;
      } else {
        if (o + 1 >= cap) return false;
        out[o++] = *p++;
      }
    }
  }
  out[o] = '\0';
  return true;
}

static void step_fault_rules(run *r, const cb_fi_step *s) {
  char text[2048];
  if (!substitute_roles(s->text ? s->text : "", r->map, r->nroles, text, sizeof text)) {
    cb_fi_violation_add(&r->chk, CB_FI_EXPECTATION, "fault rule text too long");
    return;
  }
  cubert_faultinj_diag diag;
  char src[160];
  snprintf(src, sizeof src, "%s:%d", r->p->source, s->line);
  cubert_status st = cubert_faultinj_add(r->rt, text, src, NULL, &diag);
  r->last_status = st;
  if (st != CUBERT_OK)
    cb_fi_violation_add(&r->chk, CB_FI_EXPECTATION, "fault rules `%s` refused: %s", text, diag.message);
  else
    trace(r, "    rules added: %s\n", text);
}

/* ---- expectations */

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void expect_fail(run *r, const cb_fi_step *s, const char *fmt, ...) {
  char what[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  (void)s; /* the step is the checker's current one: the report names it */
  cb_fi_violation_add(&r->chk, CB_FI_EXPECTATION, "%s", what);
}

static void step_expect(run *r, const cb_fi_step *s) {
  cb_fim *m = &r->model;
  switch (s->expect) {
  case CB_FI_EXPECT_STATUS:
    if (r->last_status != s->status)
      expect_fail(r, s, "the step before returned %s", cubert_status_name(r->last_status));
    return;
  case CB_FI_EXPECT_INJECTED: {
    uint64_t n = cubert_faultinj_injected(r->rt);
    if (n != s->number) expect_fail(r, s, "%" PRIu64 " faults were injected so far", n);
    return;
  }
  case CB_FI_EXPECT_LOST: {
    int d = r->map[s->device];
    cubert_device_info info;
    bool lost = cubert_runtime_device_info(r->rt, d, &info) == CUBERT_OK && info.lost;
    if (!lost) expect_fail(r, s, "the runtime says device %d is not lost", d);
    if (m->dev[d].lost_cause < 0) expect_fail(r, s, "the model says device %d is not lost", d);
    return;
  }
  default:
    break;
  }
  run_view *v = view_at(r, s->view);
  if (!v) {
    expect_fail(r, s, "view `%s` does not exist here", view_name(r->p, s->view));
    return;
  }
  int d = device_of(r, v);
  if (m->dev[d].npending) {
    expect_fail(r, s, "device %d has work whose failure is found only at a fence: `sync` before reading", d);
    return;
  }
  if (!use_stream(r, d, 1)) return;
  uint64_t n = v->end - v->start;
  uint8_t *b = scratch(r, n ? n : 1);
  if (!b) return;
  cubert_status st = cubert_handle_read(r->clients[d], v->h, b, n);
  r->res.reads++;
  cubert_error *e = st != CUBERT_OK ? cubert_last_error() : NULL;
  cb_fim_view fv = fim_view(v);
  cb_fim_mask t = m->dev[d].lost_cause >= 0 ? cb_fim_bit(m->dev[d].lost_cause) : cb_fim_taint_of(m, fv);
  const char *msg = e ? cubert_error_message(e) : "";
  switch (s->expect) {
  case CB_FI_EXPECT_CLEAN:
    if (st != CUBERT_OK) expect_fail(r, s, "the read returned %s: %s", cubert_status_name(st), msg);
    if (t) expect_fail(r, s, "the model says it is tainted");
    break;
  case CB_FI_EXPECT_VIEW_LOST:
    if (st != CUBERT_ERR_DEVICE_LOST) expect_fail(r, s, "the read returned %s", cubert_status_name(st));
    if (m->dev[d].lost_cause < 0) expect_fail(r, s, "the model says device %d is not lost", d);
    break;
  case CB_FI_EXPECT_TAINTED: {
    if (st != CUBERT_ERR_TAINTED) {
      expect_fail(r, s, "the read returned %s%s%s", cubert_status_name(st), e ? ": " : "", msg);
      break;
    }
    int want = -1;
    if (s->has_cause) {
      want = cb_fim_cause_find(m, s->cause_kind, s->number);
      if (want < 0) expect_fail(r, s, "no such cause was met in this run");
    }
    size_t nf = cubert_error_failure_count(e);
    uint64_t lo = UINT64_MAX, hi = 0, covered = 0;
    for (size_t i = 0; i < nf; i++) {
      uint64_t fs = 0, fe = 0;
      const cubert_failure *f = cubert_error_failure(e, i, &fs, &fe);
      const char *rm = cubert_failure_message(cubert_failure_root(f));
      if (s->has_cause && want >= 0 && cb_fim_cause_of_message(m, rm) != want)
        expect_fail(r, s, "bytes %" PRIu64 "..%" PRIu64 " carry root cause `%s`", fs, fe, rm);
      if (fs < lo) lo = fs;
      if (fe > hi) hi = fe;
      covered += fe - fs;
    }
    if (s->has_range) {
      uint64_t ws = v->start + s->range_start, we = v->start + s->range_end;
      if (nf == 0 || lo != ws || hi != we || covered != we - ws)
        expect_fail(r, s, "the refusal names bytes %" PRIu64 "..%" PRIu64 " of the view (%" PRIu64 " bytes in %zu ranges)",
                    nf ? lo - v->start : 0, nf ? hi - v->start : 0, covered, nf);
      for (uint64_t i = v->start; i < v->end; i++)
        if ((m->allocs[v->alloc].taint[i] != 0) != (i >= ws && i < we)) {
          expect_fail(r, s, "the model says byte %" PRIu64 " of the view is %s", i - v->start,
                      m->allocs[v->alloc].taint[i] ? "tainted" : "clean");
          break;
        }
    }
    if (!t) expect_fail(r, s, "the model says it is clean");
    else if (want >= 0 && !(t & cb_fim_bit(want))) expect_fail(r, s, "the model names another cause");
    break;
  }
  case CB_FI_EXPECT_CHAIN: {
    if (st != CUBERT_ERR_TAINTED || !cubert_error_failure_count(e)) {
      expect_fail(r, s, "the read returned %s", cubert_status_name(st));
      break;
    }
    uint64_t dropped = 0;
    size_t nk = cubert_failure_skip_count(cubert_error_failure(e, 0, NULL, NULL), &dropped);
    if (nk + dropped != s->number) expect_fail(r, s, "the failure passed through %zu skipped steps: %s", nk, msg);
    break;
  }
  case CB_FI_EXPECT_U32:
  case CB_FI_EXPECT_U64: {
    if (st != CUBERT_OK) {
      expect_fail(r, s, "the read returned %s: %s", cubert_status_name(st), msg);
      break;
    }
    size_t w = s->expect == CB_FI_EXPECT_U32 ? 4 : 8;
    for (uint64_t i = 0; i + w <= n; i += w) {
      uint64_t got = 0, model = 0;
      bool known = true;
      for (size_t j = 0; j < w; j++) {
        got |= (uint64_t)b[i + j] << (8 * j);
        model |= (uint64_t)m->allocs[v->alloc].bytes[v->start + i + j] << (8 * j);
        known &= m->allocs[v->alloc].known[v->start + i + j] != 0;
      }
      if (got != s->number) {
        expect_fail(r, s, "byte %" PRIu64 " holds 0x%" PRIx64, i, got);
        break;
      }
      if (!known || model != s->number) {
        expect_fail(r, s, "the model says byte %" PRIu64 " holds %s0x%" PRIx64, i, known ? "" : "unknown ", model);
        break;
      }
    }
    break;
  }
  default:
    break;
  }
  cubert_error_release(e);
}

/* ---- one step */

static void exec_step(run *r, const cb_fi_step *s) {
  r->model.stream = s->stream; /* the stream its work records are enqueued on */
  switch (s->kind) {
  case CB_FI_ALLOC:
  case CB_FI_CREATE:
    step_alloc(r, s);
    break;
  case CB_FI_SLICE:
    step_slice(r, s);
    break;
  case CB_FI_WRITE:
  case CB_FI_FILL:
    step_write(r, s);
    break;
  case CB_FI_COPY:
    step_copy(r, s);
    break;
  case CB_FI_LAUNCH:
    step_launch(r, s);
    break;
  case CB_FI_SHARE:
    step_share(r, s);
    break;
  case CB_FI_RELEASE:
    view_release(r, s->view);
    break;
  case CB_FI_SYNC:
    step_sync(r, s);
    break;
  case CB_FI_FAULT:
    step_fault_rules(r, s);
    break;
  case CB_FI_CLEAR_FAULTS:
    cubert_faultinj_clear(r->rt);
    break;
  case CB_FI_EXPECT:
    step_expect(r, s);
    break;
  default:
    break;
  }
}

/* ---- setup and the end */

static uint64_t in_use(cubert_client *c) {
  cubert_pool_usage pools[16];
  size_t n = 0;
  if (cubert_memory_usage(c, pools, 16, &n) != CUBERT_OK) return 0;
  uint64_t sum = 0;
  for (size_t i = 0; i < n && i < 16; i++) sum += pools[i].in_use;
  return sum;
}

static cubert_status setup(run *r) {
  const cb_fi_program *p = r->p;
  cubert_runtime_options o;
  cubert_runtime_options_init(&o);
  o.backends = r->cfg.backend ? r->cfg.backend : "host";
  o.host_devices = r->cfg.host_devices;
  if (!o.host_devices && !getenv("CUBERT_HOST_NODE")) o.host_devices = 4;
  o.host_memory = r->cfg.host_memory ? r->cfg.host_memory : (256ull << 20);
  o.faults = ""; /* the program's rules only, never $CUBERT_FAULTS */
  cubert_status st = cubert_runtime_create(&o, &r->rt);
  if (st != CUBERT_OK) {
    r->res.setup_failed = true;
    snprintf(r->res.setup_error, sizeof r->res.setup_error, "creating the runtime: %s: %s",
             cubert_status_name(st), cubert_last_error_message());
    return st;
  }
  r->ndev = cubert_runtime_device_count(r->rt);
  if (r->ndev > CB_FIM_MAX_DEVICES) r->ndev = CB_FIM_MAX_DEVICES;
  r->nroles = p->devices < MAX_ROLES ? p->devices : MAX_ROLES;
  for (int k = 0; k < r->nroles; k++) {
    r->map[k] = r->cfg.device_map ? r->cfg.device_map[k] : k;
    if (r->map[k] < 0 || r->map[k] >= r->ndev) {
      r->res.skipped = true;
      snprintf(r->res.skip_reason, sizeof r->res.skip_reason, "needs %d devices, %s has %d", p->devices, o.backends,
               r->ndev);
      return CUBERT_ERR_NO_DEVICE;
    }
  }
  cb_fim_init(&r->model, r->ndev);
  for (int k = 0; k < r->nroles; k++) {
    int d = r->map[k];
    if (r->clients[d]) continue;
    if ((st = cubert_client_create(r->rt, d, &r->clients[d])) != CUBERT_OK) goto failed;
    for (int i = 1; i <= (p->streams > 0 ? p->streams : 1); i++) {
      cubert_stream sid = 0;
      if ((st = cubert_stream_create(r->clients[d], &sid)) != CUBERT_OK) goto failed;
      if (sid != (cubert_stream)i) {
        st = CUBERT_ERR_INTERNAL;
        snprintf(r->res.setup_error, sizeof r->res.setup_error, "device %d: stream %d was numbered %llu", d, i,
                 (unsigned long long)sid);
        r->res.setup_failed = true;
        return st;
      }
    }
    r->baseline[d] = in_use(r->clients[d]);
  }
  r->views = calloc((size_t)p->nviews + 1, sizeof *r->views);
  if (!r->views) {
    st = CUBERT_ERR_OUT_OF_MEMORY;
    goto failed;
  }
  r->next_log = 1;
  return CUBERT_OK;
failed:
  r->res.setup_failed = true;
  snprintf(r->res.setup_error, sizeof r->res.setup_error, "setting up devices: %s: %s", cubert_status_name(st),
           cubert_last_error_message());
  return st;
}

static void finish(run *r) {
  r->chk.step = 0;
  r->chk.line = 0;
  /* every device done: failures found, then one last look at everything */
  for (int k = 0; k < r->nroles; k++) {
    int d = r->map[k];
    if (r->model.dev[d].lost_cause < 0) do_sync(r, d, "the program ends");
  }
  check_all(r);
  cubert_handle *kept = NULL;
  if (r->cfg.test_keep_handle && r->allocs && r->model.nallocs && r->allocs[0].full)
    kept = cubert_handle_clone(r->allocs[0].full);
  for (int s = 0; s < r->p->nviews; s++) view_release(r, s);
  for (int a = 0; a < r->model.nallocs; a++)
    if (r->allocs && r->allocs[a].full) {
      cubert_handle_release(r->allocs[a].full);
      r->allocs[a].full = NULL;
    }
  cubert_faultinj_clear(r->rt);
  /* leaks: everything released, synced and cleaned up must be back to the
   * baseline; a lost device keeps its records (no call reaches it), and so
   * does memory its work bound */
  uint32_t lost = 0;
  for (int d = 0; d < r->ndev; d++)
    if (r->model.dev[d].lost_cause >= 0) lost |= 1u << d;
  for (int k = 0; k < r->nroles; k++) {
    int d = r->map[k];
    if (!(lost & (1u << d))) (void)cubert_sync_device(r->clients[d]);
  }
  r->res.leak_checked = true;
  for (int k = 0; k < r->nroles; k++) {
    int d = r->map[k];
    if ((lost & (1u << d)) || (r->model.dev[d].bound_by & lost)) {
      r->res.leak_checked = false;
      continue;
    }
    (void)cubert_memory_cleanup(r->clients[d]);
  }
  for (int k = 0; k < r->nroles; k++) {
    int d = r->map[k];
    if ((lost & (1u << d)) || (r->model.dev[d].bound_by & lost)) continue;
    uint64_t now = in_use(r->clients[d]);
    if (now != r->baseline[d])
      cb_fi_violation_add(&r->chk, CB_FI_LEAK,
                          "device %d has %" PRIu64 " bytes in use after every handle was released, the device "
                          "synced and its pools cleaned up (%" PRIu64 " before the program)",
                          d, now, r->baseline[d]);
  }
  /* every allocation gone: no weak binding upgrades any more */
  for (int a = 0; a < r->model.nallocs && r->allocs; a++) {
    run_alloc *ra = &r->allocs[a];
    int d = r->model.allocs[a].device;
    if (!ra->weak || (kept && a == 0) || (lost & (1u << d)) || (r->model.dev[d].bound_by & lost)) continue;
    cubert_binding *bd = NULL;
    cubert_status st = cubert_weak_upgrade(ra->weak, &bd);
    if (st != CUBERT_ERR_EXPIRED) {
      char name[96];
      snprintf(name, sizeof name, "allocation %d (device %d)", a, d);
      cb_fi_violation_add(&r->chk, CB_FI_WRONG_STATUS,
                          "the weak binding of %s upgraded to %s after every handle was released and the device "
                          "synced, not EXPIRED",
                          name, cubert_status_name(st));
    }
    cubert_binding_release(bd);
  }
  cubert_handle_release(kept);
}

static void teardown(run *r) {
  if (r->views)
    for (int s = 0; s < r->p->nviews; s++) cubert_handle_release(r->views[s].h);
  if (r->allocs)
    for (int a = 0; a < r->capallocs; a++) {
      cubert_handle_release(r->allocs[a].full);
      cubert_weak_release(r->allocs[a].weak);
    }
  for (int d = 0; d < CB_FIM_MAX_DEVICES; d++) cubert_client_destroy(r->clients[d]);
  if (r->rt) cubert_runtime_destroy(r->rt);
  for (int k = 0; k < CB_FIM_KERNEL_COUNT; k++) cubert_kernel_release(r->kernels[k]);
  cb_fim_free(&r->model);
  free(r->views);
  free(r->allocs);
  free(r->buf);
  r->views = NULL;
  r->allocs = NULL;
  r->buf = NULL;
  r->rt = NULL;
  memset(r->clients, 0, sizeof r->clients);
  memset(r->kernels, 0, sizeof r->kernels);
}

static double since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static void run_body(run *r) {
  r->chk = (cb_fi_checker){&r->model, r->p, &r->cfg, &r->res, 0, 0, {0}, {0}, 0};
  r->status = setup(r);
  if (r->status == CUBERT_OK) {
    size_t maxv = r->cfg.max_violations ? r->cfg.max_violations : DEFAULT_MAX_VIOLATIONS;
    for (size_t i = 0; i < r->p->nsteps && r->res.nviolations < maxv; i++) {
      const cb_fi_step *s = &r->p->steps[i];
      r->chk.step = (int)i + 1;
      r->chk.line = s->line;
      atomic_store(&r->current_step, (int)i + 1);
      atomic_store(&r->current_line, s->line);
      tick(r);
      if (r->cfg.trace) {
        char st[256];
        cb_fi_step_format(r->p, s, st, sizeof st);
        trace(r, "step %zu%s%.0d: %s\n", i + 1, s->line ? " line " : "", s->line, st);
      }
      exec_step(r, s);
      r->res.steps_run++;
      if (s->kind != CB_FI_EXPECT && s->kind != CB_FI_FAULT && s->kind != CB_FI_CLEAR_FAULTS &&
          s->kind != CB_FI_SLICE && s->kind != CB_FI_RELEASE)
        check_all(r);
      tick(r);
    }
    atomic_store(&r->current_step, 0);
    atomic_store(&r->current_line, 0);
    tick(r);
    finish(r);
  }
  teardown(r);
  r->res.seconds = since(&r->t0);
}

static void *run_thread(void *arg) {
  run *r = arg;
  run_body(r);
  pthread_mutex_lock(&r->lock);
  r->finished = true;
  bool abandoned = r->abandoned;
  pthread_cond_broadcast(&r->cond);
  pthread_mutex_unlock(&r->lock);
  if (abandoned) { /* the caller gave up on it: nobody else will free it */
    cb_fi_result_free(&r->res);
    cb_fi_program_free(&r->prog);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    free(r);
  }
  return NULL;
}

void cb_fi_result_free(cb_fi_result *res) {
  if (!res) return;
  for (size_t i = 0; i < res->nviolations; i++) free(res->violations[i].message);
  free(res->violations);
  free(res->log);
  memset(res, 0, sizeof *res);
}

cubert_status cb_fi_run(const cb_fi_program *p, const cb_fi_run_config *config, cb_fi_result *result) {
  memset(result, 0, sizeof *result);
  run *r = calloc(1, sizeof *r);
  if (!r) return CUBERT_ERR_OUT_OF_MEMORY;
  if (!cb_fi_program_copy(p, &r->prog)) {
    free(r);
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  r->p = &r->prog;
  if (config) r->cfg = *config;
  if (r->cfg.label) {
    snprintf(r->label, sizeof r->label, "%s", r->cfg.label);
    r->cfg.label = r->label;
  }
  if (r->cfg.device_map) {
    for (int k = 0; k < MAX_ROLES && k < p->devices; k++) r->role_map[k] = r->cfg.device_map[k];
    r->cfg.device_map = r->role_map;
  }
  clock_gettime(CLOCK_MONOTONIC, &r->t0);
  pthread_mutex_init(&r->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&r->cond, &ca);
  pthread_condattr_destroy(&ca);
  uint32_t timeout = p->timeout_ms ? p->timeout_ms : r->cfg.timeout_ms ? r->cfg.timeout_ms : DEFAULT_TIMEOUT_MS;
  pthread_t th;
  if (pthread_create(&th, NULL, run_thread, r) != 0) {
    cb_fi_program_free(&r->prog);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    free(r);
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  /* the watchdog: progress must move within `timeout` */
  pthread_mutex_lock(&r->lock);
  uint64_t seen = atomic_load(&r->progress);
  struct timespec last;
  clock_gettime(CLOCK_MONOTONIC, &last);
  bool hang = false;
  while (!r->finished) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += 50 * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&r->cond, &r->lock, &until);
    if (r->finished) break;
    uint64_t now = atomic_load(&r->progress);
    if (now != seen) {
      seen = now;
      clock_gettime(CLOCK_MONOTONIC, &last);
    } else if (since(&last) * 1000.0 >= timeout) {
      hang = true;
      r->abandoned = true; /* from here the runner owns `r` and frees it */
      break;
    }
  }
  /* what the report needs, read while the runner cannot free `r` */
  int hung_step = atomic_load(&r->current_step), hung_line = atomic_load(&r->current_line);
  double seconds = since(&r->t0);
  pthread_mutex_unlock(&r->lock);
  if (!hang) {
    pthread_join(th, NULL);
    *result = r->res;
    cubert_status st = r->status;
    cb_fi_program_free(&r->prog);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    free(r);
    if (st == CUBERT_ERR_NO_DEVICE && result->skipped) return CUBERT_OK;
    return st;
  }
  pthread_detach(th);
  result->hang = true;
  result->seconds = seconds;
  cb_fi_checker c = {NULL, p, config, result, hung_step, hung_line, {0}, {0}, 0};
  cb_fi_violation_add(&c, CB_FI_HANG,
                      "the step did not finish within %" PRIu32 " ms; the run was abandoned (its thread and runtime "
                      "are left as they are)",
                      timeout);
  return CUBERT_ERR_TIMEOUT;
}
