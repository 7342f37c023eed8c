/* tools/faultinj/run_strided.c: the strided steps of a program (swrite,
 * scheck, scopy), run through cubert/strided.h and checked against the
 * model's footprint pieces (internal). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/faultinj/checker_internal.h"

/* The step's SHAPE as a cubert_view and as the model's pieces inside view
 * `v`; false (nothing to run) when it does not fit the view. */
static bool shape_of(const cb_fi_step *s, const run_view *v, cubert_view *cv, cb_fim_view *pieces, size_t *n) {
  if (!s->rows || !s->width || s->rows > CB_FIM_MAX_PIECES || (s->rows > 1 && s->pitch < s->width)) return false;
  uint64_t last = s->offset + (uint64_t)(s->rows - 1) * s->pitch + s->width;
  if (last * 4 > v->end - v->start) return false;
  memset(cv, 0, sizeof *cv);
  cv->ndims = 2;
  cv->elem_size = 4;
  cv->offset = s->offset;
  cv->shape[0] = s->rows;
  cv->shape[1] = s->width;
  cv->strides[0] = s->rows > 1 ? s->pitch : s->width;
  cv->strides[1] = 1;
  for (uint32_t i = 0; i < s->rows; i++) {
    uint64_t at = v->start + (s->offset + (uint64_t)i * s->pitch) * 4;
    pieces[i] = (cb_fim_view){v->alloc, at, at + (uint64_t)s->width * 4};
  }
  *n = s->rows;
  return true;
}

/* A step's view and its SHAPE there: the shape as a cubert_view, the
 * model's pieces of it, and the bytes it packs. */
typedef struct shaped {
  run_view *v;
  cubert_view cv;
  cb_fim_view pieces[CB_FIM_MAX_PIECES];
  size_t np;
  uint64_t bytes;
} shaped;

/* The step's view and SHAPE; false (traced) when it cannot run. */
static bool view_shape(run *r, const cb_fi_step *s, shaped *sh) {
  sh->v = cb_fir_view_at(r, s->view);
  if (!sh->v || !shape_of(s, sh->v, &sh->cv, sh->pieces, &sh->np)) {
    cb_fir_trace(r, "    skipped: no view `%s`, or the shape does not fit it\n", cb_fi_view_name(r->p, s->view));
    return false;
  }
  sh->bytes = (uint64_t)s->rows * s->width * 4;
  return true;
}

static void step_swrite(run *r, const cb_fi_step *s) {
  shaped sh;
  if (!view_shape(r, s, &sh)) return;
  int d = cb_fir_device_of(r, sh.v);
  touch t = {sh.v->alloc, true};
  bool cross;
  cb_fir_prelude(r, d, &t, 1, &cross);
  if (!cb_fir_use_stream(r, d, s->stream)) return;
  uint8_t *data = malloc(sh.bytes);
  if (!data) return;
  cb_fir_step_data(s, data, sh.bytes);
  uint32_t rule = cb_fir_step_fault(r, s, d, false);
  cubert_status st = cubert_handle_write_strided(r->clients[d], sh.v->h, &sh.cv, data, sh.bytes);
  cb_fir_step_fault_done(r, rule);
  hitbuf hb;
  cb_fir_take_hits(r, &hb);
  cb_fim_outcome o = cb_fim_write_pieces(&r->model, r->chk.step, d, sh.pieces, sh.np, data, cb_fir_hits_of(&hb));
  free(data);
  cb_fir_check_status(r, "cubert_handle_write_strided", o, st);
}

static void step_scopy(run *r, const cb_fi_step *s) {
  run_view *src = cb_fir_view_at(r, s->view), *dst = cb_fir_view_at(r, s->view2);
  cubert_view sv, dv;
  cb_fim_view sp[CB_FIM_MAX_PIECES], dp[CB_FIM_MAX_PIECES];
  size_t n1, n2;
  if (!src || !dst || src->alloc == dst->alloc || !shape_of(s, src, &sv, sp, &n1) || !shape_of(s, dst, &dv, dp, &n2)) {
    cb_fir_trace(r, "    skipped: the views do not exist, share an allocation, or the shape does not fit\n");
    return;
  }
  int sd, dd;
  bool cross;
  if (!cb_fir_copy_prelude(r, s, src, dst, &sd, &dd, &cross)) return;
  uint32_t rule = cb_fir_step_fault(r, s, dd, sd != dd);
  cubert_status st = sd == dd ? cubert_handle_copy_strided(r->clients[dd], src->h, &sv, dst->h, &dv)
                              : cubert_handle_copy_strided_peer(r->clients[sd], src->h, &sv, r->clients[dd], dst->h, &dv);
  cb_fir_step_fault_done(r, rule);
  hitbuf hb;
  cb_fir_take_hits(r, &hb);
  cb_fim_outcome o = cb_fim_copy_pieces(&r->model, r->chk.step, dd, sp, dp, n1, cb_fir_hits_of(&hb));
  cb_fir_check_status(r, sd == dd ? "cubert_handle_copy_strided" : "cubert_handle_copy_strided_peer", o, st);
  if (cross) cb_fir_do_sync(r, dd, "the step reached another device's memory");
}

/* A refused strided read of `name`: each failure it names lies inside the
 * footprint's pieces, with a root the model gives those bytes. */
static void check_refusal(run *r, const char *name, const shaped *sh) {
  cubert_error *e = cubert_last_error();
  size_t nf = cubert_error_failure_count(e);
  for (size_t i = 0; i < nf; i++) {
    uint64_t fs = 0, fe = 0;
    const cubert_failure *f = cubert_error_failure(e, i, &fs, &fe);
    int cause = cb_fim_cause_of_message(&r->model, cubert_failure_message(cubert_failure_root(f)));
    /* a range may span neighbouring pieces (rows that touch) */
    uint64_t covered = 0;
    cb_fim_mask here = 0;
    for (size_t k = 0; k < sh->np; k++) {
      uint64_t lo = fs > sh->pieces[k].start ? fs : sh->pieces[k].start;
      uint64_t hi = fe < sh->pieces[k].end ? fe : sh->pieces[k].end;
      if (lo >= hi) continue;
      covered += hi - lo;
      here |= cb_fim_taint_of(&r->model, (cb_fim_view){sh->v->alloc, lo, hi});
    }
    if (fs >= fe || covered != fe - fs)
      cb_fi_violation_add(&r->chk, CB_FI_FALSE_TAINT, "strided read of `%s` named bytes %" PRIu64 "..%" PRIu64
                          " outside the footprint's pieces", name, fs, fe);
    else if (!(cb_fim_bit(cause) & here))
      cb_fi_violation_add(&r->chk, CB_FI_WRONG_CAUSE, "strided read of `%s` named bytes %" PRIu64 "..%" PRIu64
                          " with root `%s`, not one the model gives them", name, fs, fe,
                          cubert_failure_message(cubert_failure_root(f)));
  }
  cubert_error_release(e);
}

/* A strided read of `name` that succeeded: the packed bytes `b` are the
 * model's wherever it knows them (the first difference is reported). */
static void check_bytes(run *r, const char *name, const shaped *sh, const uint8_t *b) {
  const cb_fim_alloc *a = &r->model.allocs[sh->v->alloc];
  for (size_t i = 0; i < sh->np; i++)
    for (uint64_t x = sh->pieces[i].start; x < sh->pieces[i].end; x++, b++)
      if (a->known[x] && a->bytes[x] != *b) {
        cb_fi_violation_add(&r->chk, CB_FI_STALE_READ, "strided read of `%s`: byte %" PRIu64 " is 0x%02x, the model says 0x%02x",
                            name, x, *b, a->bytes[x]);
        return;
      }
}

/* A strided read of the footprint, against the model: refused exactly when
 * a piece is tainted (each failure named inside the footprint, with a root
 * the model allows), else the model's known bytes. */
static void step_scheck(run *r, const cb_fi_step *s) {
  shaped sh;
  if (!view_shape(r, s, &sh)) return;
  if (cb_fim_any_pending(&r->model)) {
    cb_fir_trace(r, "    not read: an asynchronous failure waits for a sync\n");
    return;
  }
  int d = cb_fir_device_of(r, sh.v);
  if (r->model.dev[d].lost_cause >= 0) return;
  if (!cb_fir_use_stream(r, d, 1)) return;
  uint8_t *b = malloc(sh.bytes);
  if (!b) return;
  cubert_status st = cubert_handle_read_strided(r->clients[d], sh.v->h, &sh.cv, b, sh.bytes);
  r->res.reads++;
  cb_fim_mask mask = 0;
  for (size_t i = 0; i < sh.np; i++) mask |= cb_fim_taint_of(&r->model, sh.pieces[i]);
  const char *name = cb_fi_view_name(r->p, s->view);
  if (mask && st == CUBERT_OK) {
    char why[256];
    cb_fim_mask_describe(&r->model, mask, why, sizeof why);
    cb_fi_violation_add(&r->chk, CB_FI_STALE_READ, "strided read of `%s` returned OK; the model says its footprint is tainted by %s",
                        name, why);
  } else if (!mask && st != CUBERT_OK) {
    cb_fi_violation_add(&r->chk, CB_FI_FALSE_TAINT, "strided read of `%s` returned %s (%s); the model says its footprint is clean",
                        name, cubert_status_name(st), cubert_last_error_message());
  } else if (mask && st != CUBERT_ERR_TAINTED) {
    cb_fi_violation_add(&r->chk, CB_FI_WRONG_STATUS, "strided read of `%s` returned %s (%s); tainted bytes give ERR_TAINTED", name,
                        cubert_status_name(st), cubert_last_error_message());
  } else if (mask) {
    check_refusal(r, name, &sh);
  } else {
    check_bytes(r, name, &sh, b);
  }
  free(b);
}

void cb_fir_exec_strided(run *r, const cb_fi_step *s) {
  switch (s->kind) {
  case CB_FI_SWRITE:
    step_swrite(r, s);
    break;
  case CB_FI_SCOPY:
    step_scopy(r, s);
    break;
  case CB_FI_SCHECK:
    step_scheck(r, s);
    break;
  default:
    break;
  }
}
