/* tools/faultinj/run_steps.c: each step kind of a program run through the
 * public API and checked against the model: allocations, slices, writes,
 * copies, launches (and the checker's own kernels), shares, syncs, fault
 * rules and expectations. */
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
  if (!cb_fir_use_stream(r, d, s->stream)) return;
  uint8_t *data = NULL;
  if (s->kind == CB_FI_CREATE) {
    if (!(data = malloc(s->size ? s->size : 1))) return;
    cb_fir_step_data(s, data, s->size);
  }
  uint32_t rule = cb_fir_step_fault(r, s, d, false);
  cubert_handle *h = NULL;
  cubert_status st = s->kind == CB_FI_CREATE ? cubert_handle_create(r->clients[d], data, s->size, &h)
                                             : cubert_handle_empty(r->clients[d], s->size, &h);
  cb_fir_step_fault_done(r, rule);
  hitbuf hb;
  cb_fir_take_hits(r, &hb);
  cb_fim_outcome o = cb_fim_alloc_step(&r->model, r->chk.step, d, s->size, data, cb_fir_hits_of(&hb));
  free(data);
  if (!cb_fir_allocs_reserve(r, r->model.nallocs)) {
    cubert_handle_release(h);
    return;
  }
  cb_fir_check_status(r, s->kind == CB_FI_CREATE ? "cubert_handle_create" : "cubert_handle_empty", o, st);
  if (st == CUBERT_OK && o.alloc >= 0) {
    r->allocs[o.alloc].full = cubert_handle_clone(h);
    if (cubert_handle_downgrade(h, &r->allocs[o.alloc].weak) != CUBERT_OK) r->allocs[o.alloc].weak = NULL;
    cb_fir_view_set(r, s->view, h, o.alloc, 0, s->size);
  } else {
    cubert_handle_release(h);
    if (o.alloc >= 0) cb_fim_release(&r->model, o.alloc); /* the runtime made none: forget the model's */
  }
}

static void step_slice(run *r, const cb_fi_step *s) {
  run_view *p = cb_fir_view_at(r, s->view2);
  if (!p || s->offset > p->end - p->start || s->size > p->end - p->start - s->offset) {
    cb_fir_trace(r, "    skipped: the parent view does not exist or is too small\n");
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
  cb_fir_view_set(r, s->view, h, p->alloc, p->start + s->offset, p->start + s->offset + s->size);
}

static void step_write(run *r, const cb_fi_step *s) {
  run_view *v = cb_fir_view_at(r, s->view);
  if (!v) {
    cb_fir_trace(r, "    skipped: no view `%s`\n", cb_fi_view_name(r->p, s->view));
    return;
  }
  int d = cb_fir_device_of(r, v);
  touch t = {v->alloc, true};
  bool cross;
  cb_fir_prelude(r, d, &t, 1, &cross);
  if (!cb_fir_use_stream(r, d, s->stream)) return;
  uint64_t n = v->end - v->start;
  uint8_t *data = malloc(n ? n : 1);
  if (!data) return;
  cb_fir_step_data(s, data, n);
  uint32_t rule = cb_fir_step_fault(r, s, d, false);
  cubert_status st;
  if (s->kind == CB_FI_WRITE) {
    st = cubert_handle_write(r->clients[d], v->h, data, n);
  } else {
    uint32_t pat = s->value;
    st = cubert_handle_fill(r->clients[d], v->h, &pat, 4);
  }
  cb_fir_step_fault_done(r, rule);
  hitbuf hb;
  cb_fir_take_hits(r, &hb);
  cb_fim_outcome o = cb_fim_write(&r->model, r->chk.step, d, cb_fir_fim_view(v), data, cb_fir_hits_of(&hb));
  free(data);
  cb_fir_check_status(r, s->kind == CB_FI_WRITE ? "cubert_handle_write" : "cubert_handle_fill", o, st);
}

static void step_copy(run *r, const cb_fi_step *s) {
  run_view *src = cb_fir_view_at(r, s->view), *dst = cb_fir_view_at(r, s->view2);
  if (!src || !dst || src->end - src->start != dst->end - dst->start ||
      (src->alloc == dst->alloc && src->start < dst->end && dst->start < src->end)) {
    cb_fir_trace(r, "    skipped: the views do not exist, differ in size or overlap\n");
    return;
  }
  int sd, dd;
  bool cross;
  if (!cb_fir_copy_prelude(r, s, src, dst, &sd, &dd, &cross)) return;
  uint32_t rule = cb_fir_step_fault(r, s, dd, sd != dd);
  cubert_status st = sd == dd ? cubert_handle_copy(r->clients[dd], src->h, dst->h)
                              : cubert_handle_copy_peer(r->clients[sd], src->h, r->clients[dd], dst->h);
  cb_fir_step_fault_done(r, rule);
  hitbuf hb;
  cb_fir_take_hits(r, &hb);
  cb_fim_outcome o = cb_fim_copy(&r->model, r->chk.step, dd, cb_fir_fim_view(src), cb_fir_fim_view(dst), cb_fir_hits_of(&hb));
  cb_fir_check_status(r, sd == dd ? "cubert_handle_copy" : "cubert_handle_copy_peer", o, st);
  if (cross) cb_fir_do_sync(r, dd, "the step reached another device's memory");
}

static void step_launch(run *r, const cb_fi_step *s) {
  cb_fim_kernel k = s->kernel;
  uint32_t nb = cb_fim_kernel_buffers(k);
  run_view *v[2] = {NULL, NULL};
  for (uint32_t i = 0; i < nb; i++)
    if (!(v[i] = cb_fir_view_at(r, s->args[i]))) {
      cb_fir_trace(r, "    skipped: no view `%s`\n", cb_fi_view_name(r->p, s->args[i]));
      return;
    }
  uint64_t n = (v[0]->end - v[0]->start) / 4;
  if ((k == CB_FIM_COPY_U32 || k == CB_FIM_COPY_PEER_READ || k == CB_FIM_COPY_PEER_WRITE) &&
      (v[1]->end - v[1]->start != v[0]->end - v[0]->start ||
       (v[0]->alloc == v[1]->alloc && v[0]->start < v[1]->end && v[1]->start < v[0]->end))) {
    cb_fir_trace(r, "    skipped: in and out differ in size or overlap\n");
    return;
  }
  if (k == CB_FIM_CHECKSUM_U32 &&
      (v[1]->end - v[1]->start != 8 || (v[0]->alloc == v[1]->alloc && v[0]->start < v[1]->end && v[1]->start < v[0]->end))) {
    cb_fir_trace(r, "    skipped: acc must be 8 bytes apart from x\n");
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
  cb_fir_prelude(r, d, t, nb, &cross);
  if (!cb_fir_use_stream(r, d, s->stream)) return;
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
  uint32_t rule = cb_fir_step_fault(r, s, d, false);
  st = cubert_launch(r->clients[d], kern, &cfg, args, na);
  cb_fir_step_fault_done(r, rule);
  hitbuf hb;
  cb_fir_take_hits(r, &hb);
  cb_fim_view fv[2];
  for (uint32_t i = 0; i < nb; i++) fv[i] = cb_fir_fim_view(v[i]);
  cb_fim_outcome o = cb_fim_launch(&r->model, r->chk.step, d, k, fv, value, tag, cb_fir_hits_of(&hb));
  char what[96];
  snprintf(what, sizeof what, "launch of %s on device %d", cb_fim_kernel_name(k), d);
  cb_fir_check_status(r, what, o, st);
  if (cross) cb_fir_do_sync(r, d, "the step reached another device's memory");
}

static void step_share(run *r, const cb_fi_step *s) {
  run_view *v = cb_fir_view_at(r, s->view);
  if (!v) return;
  int d = cb_fir_device_of(r, v);
  cubert_status st = cubert_handle_share(r->clients[d], v->h);
  hitbuf hb;
  cb_fir_take_hits(r, &hb);
  cb_fim_outcome o = cb_fim_share(&r->model, d, cb_fir_fim_view(v), cb_fir_hits_of(&hb));
  cb_fir_check_status(r, "cubert_handle_share", o, st);
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
    cb_fir_take_hits(r, &hb);
    cb_fim_outcome o = cb_fim_sync_stream(&r->model, device, t, cb_fir_hits_of(&hb));
    char what[96];
    snprintf(what, sizeof what, "sync of stream %d of device %d", t, device);
    cb_fir_check_status(r, what, o, st);
    if (first == CUBERT_OK) first = st;
  }
  cb_fir_do_sync(r, device, NULL);
  if (first != CUBERT_OK) r->last_status = first;
}

static void step_sync(run *r, const cb_fi_step *s) {
  bool streams = r->p->streams > 1;
  if (s->device >= 0) {
    uint32_t rule = cb_fir_step_fault(r, s, r->map[s->device], false);
    program_sync(r, r->map[s->device], streams && !rule);
    cb_fir_step_fault_done(r, rule);
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
    cb_fir_trace(r, "    rules added: %s\n", text);
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

/* Expectations about the runtime as a whole: the last status, the number
 * of injections, a lost device. False: the expectation is about a view. */
static bool expect_runtime(run *r, const cb_fi_step *s) {
  cb_fim *m = &r->model;
  switch (s->expect) {
  case CB_FI_EXPECT_STATUS:
    if (r->last_status != s->status)
      expect_fail(r, s, "the step before returned %s", cubert_status_name(r->last_status));
    return true;
  case CB_FI_EXPECT_INJECTED: {
    uint64_t n = cubert_faultinj_injected(r->rt);
    if (n != s->number) expect_fail(r, s, "%" PRIu64 " faults were injected so far", n);
    return true;
  }
  case CB_FI_EXPECT_LOST: {
    int d = r->map[s->device];
    cubert_device_info info;
    bool lost = cubert_runtime_device_info(r->rt, d, &info) == CUBERT_OK && info.lost;
    if (!lost) expect_fail(r, s, "the runtime says device %d is not lost", d);
    if (m->dev[d].lost_cause < 0) expect_fail(r, s, "the model says device %d is not lost", d);
    return true;
  }
  default:
    return false;
  }
}

/* What reading a view returned, and what the model says of it. */
typedef struct expect_read {
  run_view *v;
  int device;
  const uint8_t *bytes;
  uint64_t n;
  cubert_status status;
  cubert_error *error;     /* NULL when the read succeeded */
  const char *message;     /* the error's message, "" when none */
  cb_fim_mask taint;       /* the model's causes on the view (or the device's loss) */
} expect_read;

/* `expect V tainted [by CAUSE] [bytes A..B]`: the refusal's failures, their
 * root causes and range against the step and the model. */
static void expect_tainted(run *r, const cb_fi_step *s, const expect_read *x) {
  cb_fim *m = &r->model;
  const run_view *v = x->v;
  if (x->status != CUBERT_ERR_TAINTED) {
    expect_fail(r, s, "the read returned %s%s%s", cubert_status_name(x->status), x->error ? ": " : "",
                x->message);
    return;
  }
  int want = -1;
  if (s->has_cause) {
    want = cb_fim_cause_find(m, s->cause_kind, s->number);
    if (want < 0) expect_fail(r, s, "no such cause was met in this run");
  }
  size_t nf = cubert_error_failure_count(x->error);
  uint64_t lo = UINT64_MAX, hi = 0, covered = 0;
  for (size_t i = 0; i < nf; i++) {
    uint64_t fs = 0, fe = 0;
    const cubert_failure *f = cubert_error_failure(x->error, i, &fs, &fe);
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
  if (!x->taint) expect_fail(r, s, "the model says it is clean");
  else if (want >= 0 && !(x->taint & cb_fim_bit(want))) expect_fail(r, s, "the model names another cause");
}

/* `expect V chain N`: the failure passed through N skipped steps. */
static void expect_chain(run *r, const cb_fi_step *s, const expect_read *x) {
  if (x->status != CUBERT_ERR_TAINTED || !cubert_error_failure_count(x->error)) {
    expect_fail(r, s, "the read returned %s", cubert_status_name(x->status));
    return;
  }
  uint64_t dropped = 0;
  size_t nk = cubert_failure_skip_count(cubert_error_failure(x->error, 0, NULL, NULL), &dropped);
  if (nk + dropped != s->number)
    expect_fail(r, s, "the failure passed through %zu skipped steps: %s", nk, x->message);
}

/* `expect V u32 X` / `u64 X`: every word of the view holds X, here and in
 * the model. */
static void expect_words(run *r, const cb_fi_step *s, const expect_read *x) {
  cb_fim *m = &r->model;
  const run_view *v = x->v;
  if (x->status != CUBERT_OK) {
    expect_fail(r, s, "the read returned %s: %s", cubert_status_name(x->status), x->message);
    return;
  }
  size_t w = s->expect == CB_FI_EXPECT_U32 ? 4 : 8;
  for (uint64_t i = 0; i + w <= x->n; i += w) {
    uint64_t got = 0, model = 0;
    bool known = true;
    for (size_t j = 0; j < w; j++) {
      got |= (uint64_t)x->bytes[i + j] << (8 * j);
      model |= (uint64_t)m->allocs[v->alloc].bytes[v->start + i + j] << (8 * j);
      known &= m->allocs[v->alloc].known[v->start + i + j] != 0;
    }
    if (got != s->number) {
      expect_fail(r, s, "byte %" PRIu64 " holds 0x%" PRIx64, i, got);
      return;
    }
    if (!known || model != s->number) {
      expect_fail(r, s, "the model says byte %" PRIu64 " holds %s0x%" PRIx64, i, known ? "" : "unknown ", model);
      return;
    }
  }
}

/* Reads the step's view for an expectation about it. False: the step is
 * already judged (no such view, pending failures, no stream, no memory). */
static bool expect_read_view(run *r, const cb_fi_step *s, expect_read *x) {
  cb_fim *m = &r->model;
  run_view *v = cb_fir_view_at(r, s->view);
  if (!v) {
    expect_fail(r, s, "view `%s` does not exist here", cb_fi_view_name(r->p, s->view));
    return false;
  }
  int d = cb_fir_device_of(r, v);
  if (m->dev[d].npending) {
    expect_fail(r, s, "device %d has work whose failure is found only at a fence: `sync` before reading", d);
    return false;
  }
  if (!cb_fir_use_stream(r, d, 1)) return false;
  uint64_t n = v->end - v->start;
  uint8_t *b = cb_fir_scratch(r, n ? n : 1);
  if (!b) return false;
  cubert_status st = cubert_handle_read(r->clients[d], v->h, b, n);
  r->res.reads++;
  cubert_error *e = st != CUBERT_OK ? cubert_last_error() : NULL;
  *x = (expect_read){
      .v = v,
      .device = d,
      .bytes = b,
      .n = n,
      .status = st,
      .error = e,
      .message = e ? cubert_error_message(e) : "",
      .taint = m->dev[d].lost_cause >= 0 ? cb_fim_bit(m->dev[d].lost_cause) : cb_fim_taint_of(m, cb_fir_fim_view(v)),
  };
  return true;
}

static void step_expect(run *r, const cb_fi_step *s) {
  if (expect_runtime(r, s)) return;
  expect_read x;
  if (!expect_read_view(r, s, &x)) return;
  switch (s->expect) {
  case CB_FI_EXPECT_CLEAN:
    if (x.status != CUBERT_OK)
      expect_fail(r, s, "the read returned %s: %s", cubert_status_name(x.status), x.message);
    if (x.taint) expect_fail(r, s, "the model says it is tainted");
    break;
  case CB_FI_EXPECT_VIEW_LOST:
    if (x.status != CUBERT_ERR_DEVICE_LOST) expect_fail(r, s, "the read returned %s", cubert_status_name(x.status));
    if (r->model.dev[x.device].lost_cause < 0)
      expect_fail(r, s, "the model says device %d is not lost", x.device);
    break;
  case CB_FI_EXPECT_TAINTED:
    expect_tainted(r, s, &x);
    break;
  case CB_FI_EXPECT_CHAIN:
    expect_chain(r, s, &x);
    break;
  case CB_FI_EXPECT_U32:
  case CB_FI_EXPECT_U64:
    expect_words(r, s, &x);
    break;
  default:
    break;
  }
  cubert_error_release(x.error);
}

/* ---- one step */

void cb_fir_exec_step(run *r, const cb_fi_step *s) {
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
    cb_fir_view_release(r, s->view);
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
  case CB_FI_SWRITE:
  case CB_FI_SCHECK:
  case CB_FI_SCOPY:
    cb_fir_exec_strided(r, s);
    break;
  default:
    break;
  }
}

