/* tools/faultinj/run_calls.c: what the runner does around each call of a
 * step: the pattern data, the injections a call met, the check of its
 * status, the syncs the checker adds, the program's views and the model's
 * allocations, and the end checks of every allocation. */
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

static uint8_t pattern_byte(uint64_t seed, uint64_t k) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + k * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (uint8_t)(z ^ (z >> 31));
}

uint8_t *cb_fir_scratch(run *r, size_t n) {
  if (n > r->bufcap) {
    uint8_t *b = realloc(r->buf, n);
    if (!b) return NULL;
    r->buf = b;
    r->bufcap = n;
  }
  return r->buf;
}

void cb_fir_step_data(const cb_fi_step *s, uint8_t *d, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    d[i] = s->pattern ? pattern_byte(s->seed, i) : (uint8_t)(s->value >> (8 * (i % 4)));
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void cb_fir_trace(run *r, const char *fmt, ...) {
  if (!r->cfg.trace) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(r->cfg.trace, fmt, ap);
  va_end(ap);
}

void cb_fir_tick(run *r) { atomic_fetch_add(&r->progress, 1); }

/* ---- the injections of one call */

/* Takes the injections logged since the last call into `hb` (and the
 * run's log), registering each as a cause. */
void cb_fir_take_hits(run *r, hitbuf *hb) {
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
      cb_fir_trace(r, "    injected #%" PRIu64 ": %s\n", rec->id, rec->message);
    }
    if (n < 16) break;
  }
}

cb_fim_hits cb_fir_hits_of(const hitbuf *hb) {
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
void cb_fir_check_status(run *r, const char *what, cb_fim_outcome o, cubert_status st) {
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
    if (st != CUBERT_OK) cb_fir_trace(r, "    error: %s\n", msg);
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
void cb_fir_do_sync(run *r, int device, const char *why) {
  if (why) {
    if (r->model.dev[device].lost_cause >= 0) return; /* nothing to order on a lost device */
    r->res.syncs_added++;
    cb_fir_trace(r, "    sync device %d (%s)\n", device, why);
  }
  hitbuf hb;
  cubert_status st = cubert_sync_device(r->clients[device]);
  cb_fir_take_hits(r, &hb);
  cb_fim_outcome o = cb_fim_sync(&r->model, device, cb_fir_hits_of(&hb));
  char what[96];
  snprintf(what, sizeof what, "sync of device %d%s", device, why ? " (added by the checker)" : "");
  cubert_status keep = r->last_status;
  cb_fir_check_status(r, what, o, st);
  if (why) r->last_status = keep;
}

/* ---- views and allocations */

run_view *cb_fir_view_at(run *r, int slot) {
  if (slot < 0 || slot >= r->p->nviews || !r->views[slot].h) return NULL;
  return &r->views[slot];
}

cb_fim_view cb_fir_fim_view(const run_view *v) {
  cb_fim_view f = {v->alloc, v->start, v->end};
  return f;
}

int cb_fir_device_of(run *r, const run_view *v) { return r->model.allocs[v->alloc].device; }

bool cb_fir_allocs_reserve(run *r, int n) {
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

void cb_fir_view_release(run *r, int slot) {
  run_view *v = cb_fir_view_at(r, slot);
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

void cb_fir_view_set(run *r, int slot, cubert_handle *h, int alloc, uint64_t start, uint64_t end) {
  cb_fir_view_release(r, slot); /* a name bound again drops its old view */
  r->views[slot] = (run_view){h, alloc, start, end};
  r->allocs[alloc].views++;
}

/* ---- what a step touches */

/* Syncs before a step: every device it touches when it crosses devices
 * (nothing orders cross-device accesses), or its own device when records
 * pile up. Streams of one device get no sync: the runtime orders a write
 * after the last writer (a failed one too: it may have left garbage) and
 * every reader on other streams, and a read after the last writer, so the
 * checker holds it to that. */
void cb_fir_prelude(run *r, int device, const touch *t, size_t n, bool *cross) {
  *cross = false;
  for (size_t i = 0; i < n; i++) *cross |= r->model.allocs[t[i].alloc].device != device;
  if (*cross) {
    bool done[CB_FIM_MAX_DEVICES] = {false};
    for (size_t i = 0; i < n; i++) {
      int d = r->model.allocs[t[i].alloc].device;
      if (!done[d]) cb_fir_do_sync(r, d, "the step reaches another device's memory");
      done[d] = true;
    }
    if (!done[device]) cb_fir_do_sync(r, device, "the step reaches another device's memory");
    return;
  }
  if (r->model.dev[device].nrecords >= RECORDS_BEFORE_SYNC) cb_fir_do_sync(r, device, "work piles up");
}

bool cb_fir_use_stream(run *r, int device, int stream) {
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
uint32_t cb_fir_step_fault(run *r, const cb_fi_step *s, int device, bool peer_copy) {
  if (!s->has_fault) return 0;
  const char *op = cb_fi_step_fault_op(r->p, s, s->fault);
  if (!op) return 0;
  if ((s->kind == CB_FI_COPY || s->kind == CB_FI_SCOPY) && peer_copy) op = "copy_peer";
  char frac[40] = "";
  if (s->fraction > 0 && (s->fault == CUBERT_FAULT_SCRIBBLE || s->fault == CUBERT_FAULT_PARTIAL ||
                          s->fault == CUBERT_FAULT_ASYNC_SCRIBBLE)) {
    frac[0] = ':';
    cb_fi_format_fraction(frac + 1, sizeof frac - 1, s->fraction);
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

bool cb_fir_copy_prelude(run *r, const cb_fi_step *s, const run_view *src, const run_view *dst, int *sd, int *dd,
                         bool *cross) {
  *sd = cb_fir_device_of(r, src);
  *dd = cb_fir_device_of(r, dst);
  touch t[2] = {{src->alloc, false}, {dst->alloc, true}};
  cb_fir_prelude(r, *dd, t, 2, cross);
  if (!cb_fir_use_stream(r, *dd, s->stream)) return false;
  return *sd == *dd || cb_fir_use_stream(r, *sd, s->stream);
}

void cb_fir_step_fault_done(run *r, uint32_t id) {
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
  if (!cb_fir_use_stream(r, device, 1)) return;
  uint8_t *b = cb_fir_scratch(r, end - start ? end - start : 1);
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
  uint8_t *b = cb_fir_scratch(r, ma->size ? ma->size : 1);
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

void cb_fir_check_all(run *r) {
  if (r->cfg.no_checks || cb_fim_any_pending(&r->model)) return;
  for (int a = 0; a < r->model.nallocs; a++) {
    if (!r->model.allocs[a].live || !r->allocs[a].full) continue;
    char name[96];
    check_alloc(r, a, alloc_name(r, a, name, sizeof name));
    if (r->chk.step > 0 && a == r->chk.step % r->model.nallocs) check_edges(r, a, name);
  }
}

