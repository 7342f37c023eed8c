/* tools/faultinj/program.c: checker programs (tools/faultinj/checker.h):
 * building and copying them, and formatting a step or a whole program in
 * the scenario language. */
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

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void cb_fi_sb_printf(sbuf *b, const char *fmt, ...) {
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

const char *cb_fi_view_name(const cb_fi_program *p, int v) {
  return v >= 0 && v < p->nviews ? p->views[v] : "?";
}

static char role_name(int role) { return role >= 0 && role < 26 ? (char)('A' + role) : '?'; }

void cb_fi_format_fraction(char *buf, size_t cap, double f) {
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
  case CB_FI_SWRITE:
    return "write";
  case CB_FI_COPY:
  case CB_FI_SCOPY:
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
    cb_fi_sb_printf(b, " pattern %" PRIu64, s->seed);
  else
    cb_fi_sb_printf(b, " u32 0x%08" PRIx32, s->value);
}

static void format_shape(sbuf *b, const cb_fi_step *s) {
  cb_fi_sb_printf(b, " rows %" PRIu32 " width %" PRIu32 " pitch %" PRIu32 " at %" PRIu64, s->rows, s->width, s->pitch,
                  s->offset);
}

static void format_step(sbuf *b, const cb_fi_program *p, const cb_fi_step *s) {
  switch (s->kind) {
  case CB_FI_ALLOC:
    cb_fi_sb_printf(b, "alloc %s on %c size %" PRIu64, cb_fi_view_name(p, s->view), role_name(s->device), s->size);
    break;
  case CB_FI_CREATE:
    cb_fi_sb_printf(b, "create %s on %c size %" PRIu64, cb_fi_view_name(p, s->view), role_name(s->device), s->size);
    format_data(b, s);
    break;
  case CB_FI_SLICE:
    cb_fi_sb_printf(b, "slice %s of %s at %" PRIu64 " size %" PRIu64, cb_fi_view_name(p, s->view), cb_fi_view_name(p, s->view2),
              s->offset, s->size);
    break;
  case CB_FI_WRITE:
    cb_fi_sb_printf(b, "write %s", cb_fi_view_name(p, s->view));
    format_data(b, s);
    break;
  case CB_FI_FILL:
    cb_fi_sb_printf(b, "fill %s u32 0x%08" PRIx32, cb_fi_view_name(p, s->view), s->value);
    break;
  case CB_FI_COPY:
    cb_fi_sb_printf(b, "copy %s to %s", cb_fi_view_name(p, s->view), cb_fi_view_name(p, s->view2));
    break;
  case CB_FI_LAUNCH:
    cb_fi_sb_printf(b, "launch %s on %c", cb_fim_kernel_name(s->kernel), role_name(s->device));
    for (uint32_t i = 0; i < cb_fim_kernel_buffers(s->kernel); i++)
      cb_fi_sb_printf(b, " %s=%s", cb_fim_kernel_param(s->kernel, i), cb_fi_view_name(p, s->args[i]));
    if (s->kernel == CB_FIM_FILL_U32 || s->kernel == CB_FIM_FAIL_U32 || s->kernel == CB_FIM_SLEEP_U32)
      cb_fi_sb_printf(b, " value=%" PRIu32, s->value);
    break;
  case CB_FI_SWRITE:
    cb_fi_sb_printf(b, "swrite %s", cb_fi_view_name(p, s->view));
    format_shape(b, s);
    format_data(b, s);
    break;
  case CB_FI_SCHECK:
    cb_fi_sb_printf(b, "scheck %s", cb_fi_view_name(p, s->view));
    format_shape(b, s);
    break;
  case CB_FI_SCOPY:
    cb_fi_sb_printf(b, "scopy %s to %s", cb_fi_view_name(p, s->view), cb_fi_view_name(p, s->view2));
    format_shape(b, s);
    break;
  case CB_FI_SHARE:
    cb_fi_sb_printf(b, "share %s", cb_fi_view_name(p, s->view));
    break;
  case CB_FI_RELEASE:
    cb_fi_sb_printf(b, "release %s", cb_fi_view_name(p, s->view));
    break;
  case CB_FI_SYNC:
    if (s->device < 0)
      cb_fi_sb_printf(b, "sync all");
    else
      cb_fi_sb_printf(b, "sync %c", role_name(s->device));
    break;
  case CB_FI_FAULT:
    cb_fi_sb_printf(b, "fault %s", s->text ? s->text : "");
    break;
  case CB_FI_CLEAR_FAULTS:
    cb_fi_sb_printf(b, "clear-faults");
    break;
  case CB_FI_EXPECT:
    cb_fi_sb_printf(b, "expect ");
    switch (s->expect) {
    case CB_FI_EXPECT_STATUS: {
      const char *sn = cubert_status_name(s->status);
      cb_fi_sb_printf(b, "status %s", strncmp(sn, "ERR_", 4) == 0 ? sn + 4 : sn);
    }
      break;
    case CB_FI_EXPECT_CLEAN:
      cb_fi_sb_printf(b, "%s clean", cb_fi_view_name(p, s->view));
      break;
    case CB_FI_EXPECT_TAINTED:
      cb_fi_sb_printf(b, "%s tainted", cb_fi_view_name(p, s->view));
      if (s->has_cause)
        cb_fi_sb_printf(b, s->cause_kind == CB_FIM_CAUSE_TAG ? " by tag %" PRIu64 : " by #%" PRIu64, s->number);
      if (s->has_range) cb_fi_sb_printf(b, " bytes %" PRIu64 "..%" PRIu64, s->range_start, s->range_end);
      break;
    case CB_FI_EXPECT_U32:
      cb_fi_sb_printf(b, "%s u32 0x%08" PRIx64, cb_fi_view_name(p, s->view), s->number);
      break;
    case CB_FI_EXPECT_U64:
      cb_fi_sb_printf(b, "%s u64 %" PRIu64, cb_fi_view_name(p, s->view), s->number);
      break;
    case CB_FI_EXPECT_CHAIN:
      cb_fi_sb_printf(b, "%s chain %" PRIu64, cb_fi_view_name(p, s->view), s->number);
      break;
    case CB_FI_EXPECT_LOST:
      cb_fi_sb_printf(b, "lost %c", role_name(s->device));
      break;
    case CB_FI_EXPECT_INJECTED:
      cb_fi_sb_printf(b, "injected %" PRIu64, s->number);
      break;
    case CB_FI_EXPECT_VIEW_LOST:
      cb_fi_sb_printf(b, "%s lost", cb_fi_view_name(p, s->view));
      break;
    }
    break;
  default:
    cb_fi_sb_printf(b, "?");
    break;
  }
  bool streamed = s->kind == CB_FI_ALLOC || s->kind == CB_FI_CREATE || s->kind == CB_FI_WRITE ||
                  s->kind == CB_FI_FILL || s->kind == CB_FI_COPY || s->kind == CB_FI_LAUNCH ||
                  s->kind == CB_FI_SWRITE || s->kind == CB_FI_SCOPY;
  if (streamed && s->stream > 1) cb_fi_sb_printf(b, " stream %d", s->stream);
  if (s->has_fault) {
    cb_fi_sb_printf(b, " ! %s", cubert_fault_kind_name(s->fault));
    if (s->fraction > 0 && (s->fault == CUBERT_FAULT_SCRIBBLE || s->fault == CUBERT_FAULT_PARTIAL ||
                            s->fault == CUBERT_FAULT_ASYNC_SCRIBBLE)) {
      char f[32];
      cb_fi_format_fraction(f, sizeof f, s->fraction);
      cb_fi_sb_printf(b, ":%s", f);
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
  cb_fi_sb_printf(&b, "scenario %s\n", p->name);
  if (p->title && p->title[0]) {
    cb_fi_sb_printf(&b, "  title \"");
    for (const char *c = p->title; *c; c++) cb_fi_sb_printf(&b, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
    cb_fi_sb_printf(&b, "\"\n");
  }
  if (p->rules && p->rules[0]) cb_fi_sb_printf(&b, "  rule %s\n", p->rules);
  cb_fi_sb_printf(&b, "  devices %d\n", p->devices);
  if (p->fixed) cb_fi_sb_printf(&b, "  placement fixed\n");
  if (p->streams > 1) cb_fi_sb_printf(&b, "  streams %d\n", p->streams);
  if (p->host_only) cb_fi_sb_printf(&b, "  backend host\n");
  if (p->timeout_ms) cb_fi_sb_printf(&b, "  timeout %" PRIu32 "\n", p->timeout_ms);
  for (size_t i = 0; i < p->nsteps; i++) {
    cb_fi_sb_printf(&b, "  ");
    format_step(&b, p, &p->steps[i]);
    cb_fi_sb_printf(&b, "\n");
  }
  cb_fi_sb_printf(&b, "end\n");
  if (b.failed) {
    free(b.p);
    return NULL;
  }
  return b.p;
}

