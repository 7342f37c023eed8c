/* tools/faultinj/campaign.c: random programs from seeds, the campaign loop, and
 * the shrinking of failing programs (tools/faultinj/campaign.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tools/faultinj/campaign.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/array.h"
#include "base/str.h"

/* ------------------------------------------------------------ randomness */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t cb_fi_campaign_seed(uint64_t campaign_seed, uint64_t index) {
  uint64_t s = campaign_seed ^ (index * 0xD1B54A32D192ED03ull);
  uint64_t v = splitmix(&s);
  return v ? v : 1; /* 0 means "no seed" in reports */
}

void cb_fi_gen_config_init(cb_fi_gen_config *c) {
  c->devices = 4;
  c->streams = 2;
  c->steps = 32;
  c->fault_share = 0.35;
}

void cb_fi_campaign_config_init(cb_fi_campaign_config *c) {
  memset(c, 0, sizeof *c);
  cb_fi_gen_config_init(&c->gen);
  c->seed = 1;
  c->minimize = 3;
  c->max_failing = 20;
}

/* ------------------------------------------------------------ generator */

typedef struct gview {
  int slot;
  int role;
  uint64_t size;
  int alloc;
  uint64_t off;   /* within the allocation */
  bool alive;
} gview;

typedef struct galloc {
  int role;
  uint64_t size;
  bool shared;
} galloc;

typedef struct gen {
  cb_fi_program *p;
  const cb_fi_gen_config *cfg;
  uint64_t rng;
  gview *v;
  int nv, capv;
  galloc *a;
  int na, capa;
  bool lost_used;
  bool failed;
} gen;

static uint64_t rnd(gen *g) { return splitmix(&g->rng); }
static uint32_t below(gen *g, uint32_t n) { return n ? (uint32_t)(rnd(g) % n) : 0; }
static bool chance(gen *g, double p) { return (double)(rnd(g) >> 11) / 9007199254740992.0 < p; }

static int pick_weighted(gen *g, const int *w, int n) {
  int total = 0;
  for (int i = 0; i < n; i++) total += w[i];
  int x = (int)below(g, (uint32_t)total);
  for (int i = 0; i < n; i++) {
    if (x < w[i]) return i;
    x -= w[i];
  }
  return n - 1;
}

static cb_fi_step *add(gen *g, cb_fi_step_kind k) {
  cb_fi_step *s = cb_fi_program_add(g->p, k);
  if (!s) g->failed = true;
  return s;
}

static int new_gview(gen *g, int role, uint64_t size, int alloc, uint64_t off) {
  if (g->nv == g->capv) {
    size_t cap;
    gview *v = cb_array_grow(g->v, (size_t)g->capv, (size_t)g->nv + 1, sizeof *v, &cap);
    if (!v) {
      g->failed = true;
      return -1;
    }
    g->v = v;
    g->capv = cap > INT_MAX ? INT_MAX : (int)cap;
  }
  char name[16];
  snprintf(name, sizeof name, "v%d", g->nv);
  int slot = cb_fi_program_view(g->p, name);
  if (slot < 0) {
    g->failed = true;
    return -1;
  }
  g->v[g->nv] = (gview){slot, role, size, alloc, off, true};
  return g->nv++;
}

static int new_galloc(gen *g, int role, uint64_t size) {
  if (g->na == g->capa) {
    size_t cap;
    galloc *a = cb_array_grow(g->a, (size_t)g->capa, (size_t)g->na + 1, sizeof *a, &cap);
    if (!a) {
      g->failed = true;
      return -1;
    }
    g->a = a;
    g->capa = cap > INT_MAX ? INT_MAX : (int)cap;
  }
  g->a[g->na] = (galloc){role, size, false};
  return g->na++;
}

static int stream(gen *g) { return 1 + (int)below(g, (uint32_t)g->cfg->streams); }

/* A fault for a step, about fault_share of the time. */
static void maybe_fault(gen *g, cb_fi_step *s) {
  if (!s || !chance(g, g->cfg->fault_share)) return;
  static const cubert_fault_kind launch[] = {CUBERT_FAULT_FAIL, CUBERT_FAULT_SCRIBBLE, CUBERT_FAULT_ASYNC,
                                             CUBERT_FAULT_ASYNC_SCRIBBLE, CUBERT_FAULT_COMPILE};
  static const int launch_w[] = {3, 3, 2, 2, 1};
  static const cubert_fault_kind data[] = {CUBERT_FAULT_FAIL, CUBERT_FAULT_SCRIBBLE, CUBERT_FAULT_PARTIAL,
                                           CUBERT_FAULT_ASYNC, CUBERT_FAULT_ASYNC_SCRIBBLE};
  static const int data_w[] = {3, 2, 3, 2, 1};
  cubert_fault_kind f;
  bool lost = !g->lost_used && g->p->nsteps > 6 && chance(g, 0.025);
  switch (s->kind) {
  case CB_FI_LAUNCH:
    f = launch[pick_weighted(g, launch_w, 5)];
    break;
  case CB_FI_WRITE:
  case CB_FI_FILL:
  case CB_FI_COPY:
  case CB_FI_SWRITE:
  case CB_FI_SCOPY:
    f = data[pick_weighted(g, data_w, 5)];
    break;
  case CB_FI_ALLOC:
    if (!chance(g, 0.3)) return; /* most allocations come from a pool page: no driver call to fail */
    f = CUBERT_FAULT_OOM;
    lost = false;
    break;
  case CB_FI_CREATE:
    f = chance(g, 0.3) ? CUBERT_FAULT_OOM : data[pick_weighted(g, data_w, 5)];
    lost = false;
    break;
  case CB_FI_SYNC:
    if (!lost || s->device < 0) return;
    f = CUBERT_FAULT_DEVICE_LOST;
    break;
  default:
    return;
  }
  if (lost) {
    /* work may also lose its device when it runs, found at the next fence */
    bool work = s->kind == CB_FI_LAUNCH || s->kind == CB_FI_WRITE || s->kind == CB_FI_FILL || s->kind == CB_FI_COPY ||
                s->kind == CB_FI_SWRITE || s->kind == CB_FI_SCOPY;
    f = work && chance(g, 0.5) ? CUBERT_FAULT_ASYNC_DEVICE_LOST : CUBERT_FAULT_DEVICE_LOST;
    g->lost_used = true;
  }
  s->has_fault = true;
  s->fault = f;
  static const double shares[] = {0.25, 0.5, 0.75};
  if (f == CUBERT_FAULT_SCRIBBLE || f == CUBERT_FAULT_PARTIAL || f == CUBERT_FAULT_ASYNC_SCRIBBLE)
    s->fraction = shares[below(g, 3)];
}

/* A new buffer on `role`: create (with data) or alloc (uninitialised). */
static int new_buffer(gen *g, int role, uint64_t size, bool with_data) {
  int a = new_galloc(g, role, size);
  if (a < 0) return -1;
  int v = new_gview(g, role, size, a, 0);
  if (v < 0) return -1;
  cb_fi_step *s = add(g, with_data ? CB_FI_CREATE : CB_FI_ALLOC);
  if (!s) return -1;
  s->view = g->v[v].slot;
  s->device = role;
  s->size = size;
  s->stream = stream(g);
  if (with_data) {
    if (chance(g, 0.5)) {
      s->pattern = true;
      s->seed = rnd(g) % 100000;
    } else {
      s->value = (uint32_t)rnd(g);
    }
  }
  maybe_fault(g, s);
  return v;
}

static bool disjoint(const gview *x, const gview *y) {
  return x->alloc != y->alloc || x->off + x->size <= y->off || y->off + y->size <= x->off;
}

/* A random live view matching the filters (-1: none). */
static int find_view(gen *g, int role, uint64_t size, int apart, bool shared_only) {
  int cand[64], n = 0;
  for (int i = 0; i < g->nv && n < 64; i++) {
    gview *v = &g->v[i];
    if (!v->alive || (role >= 0 && v->role != role) || (size && v->size != size)) continue;
    if (apart >= 0 && !disjoint(v, &g->v[apart])) continue;
    if (shared_only && !g->a[v->alloc].shared) continue;
    cand[n++] = i;
  }
  return n ? cand[below(g, (uint32_t)n)] : -1;
}

/* A live view on `role` of `size`, apart from `apart`: found, sliced out of
 * a bigger one, or a new buffer. */
static int ensure_view(gen *g, int role, uint64_t size, int apart) {
  int v = find_view(g, role, size, apart, false);
  if (v >= 0 && chance(g, 0.8)) return v;
  for (int i = 0; i < g->nv; i++) {
    gview *p = &g->v[i];
    if (!p->alive || p->role != role || p->size < 2 * size || !chance(g, 0.5)) continue;
    uint64_t off = size * below(g, (uint32_t)(p->size / size));
    gview probe = {0, role, size, p->alloc, p->off + off, true};
    if (apart >= 0 && !disjoint(&probe, &g->v[apart])) continue;
    int nv = new_gview(g, role, size, p->alloc, p->off + off);
    if (nv < 0) return -1;
    cb_fi_step *s = add(g, CB_FI_SLICE);
    if (!s) return -1;
    s->view = g->v[nv].slot;
    s->view2 = g->v[i].slot;
    s->offset = off;
    s->size = size;
    s->device = role;
    return nv;
  }
  return new_buffer(g, role, size, chance(g, 0.7));
}

static int any_view(gen *g) { return find_view(g, -1, 0, -1, false); }

static void share(gen *g, int v) {
  cb_fi_step *s = add(g, CB_FI_SHARE);
  if (!s) return;
  s->view = g->v[v].slot;
  s->device = g->v[v].role;
  g->a[g->v[v].alloc].shared = true;
}

static int other_role(gen *g, int role) {
  if (g->cfg->devices < 2) return -1;
  int r = (int)below(g, (uint32_t)g->cfg->devices - 1);
  return r >= role ? r + 1 : r;
}

static cb_fi_step *launch(gen *g, cb_fim_kernel k, int role, int a0, int a1) {
  cb_fi_step *s = add(g, CB_FI_LAUNCH);
  if (!s) return NULL;
  s->kernel = k;
  s->device = role;
  s->args[0] = g->v[a0].slot;
  s->args[1] = a1 >= 0 ? g->v[a1].slot : -1;
  s->value = (uint32_t)rnd(g);
  s->stream = stream(g);
  maybe_fault(g, s);
  return s;
}

/* A strided step over view `v`: a write from host, a read checked against
 * the model, or a copy to a view of the same size (on another device
 * sometimes); a 2-D shape of 4-byte elements that fits the view. */
static void gen_strided(gen *g, int v, int multi) {
  uint32_t elems = (uint32_t)(g->v[v].size / 4);
  uint32_t pitch = 1 + below(g, elems < 16 ? elems : 16);
  uint32_t width = 1 + below(g, pitch);
  uint32_t maxrows = (elems - width) / pitch + 1;
  if (maxrows > 8) maxrows = 8;
  uint32_t rows = 1 + below(g, maxrows);
  uint32_t room = elems - ((rows - 1) * pitch + width);
  uint64_t off = below(g, room + 1);
  uint32_t what = below(g, 10);
  cb_fi_step *s;
  if (what < 5) {
    s = add(g, CB_FI_SWRITE);
    if (!s) return;
    if (chance(g, 0.5)) {
      s->pattern = true;
      s->seed = rnd(g) % 100000;
    } else {
      s->value = (uint32_t)rnd(g);
    }
  } else if (what < 8) {
    int role = multi && chance(g, 0.4) ? other_role(g, g->v[v].role) : g->v[v].role;
    int d = ensure_view(g, role, g->v[v].size, v);
    if (d < 0 || !g->v[v].alive || g->v[d].alloc == g->v[v].alloc) return;
    s = add(g, CB_FI_SCOPY);
    if (!s) return;
    s->view2 = g->v[d].slot;
    s->device = role;
  } else {
    s = add(g, CB_FI_SCHECK);
    if (!s) return;
  }
  s->view = g->v[v].slot;
  if (s->kind != CB_FI_SCOPY) s->device = g->v[v].role;
  s->rows = rows;
  s->width = width;
  s->pitch = pitch;
  s->offset = off;
  if (s->kind != CB_FI_SCHECK) {
    s->stream = stream(g);
    maybe_fault(g, s);
  }
}

static void gen_step(gen *g) {
  enum { FILLK, COPYK, CHECKSUM, PEER_READ, PEER_WRITE, COPY, COPY_PEER, WRITE, FILL, SLICE, SHARE, RELEASE,
         NEW, SYNC, STRIDED, NKINDS };
  static const int w[NKINDS] = {10, 12, 5, 8, 8, 8, 6, 6, 5, 5, 3, 4, 4, 6, 8};
  int kind = pick_weighted(g, w, NKINDS);
  int multi = g->cfg->devices >= 2;
  if (!multi && (kind == PEER_READ || kind == PEER_WRITE || kind == COPY_PEER)) kind = COPYK;
  int v = any_view(g);
  if (v < 0 && kind != SYNC) kind = NEW;
  if (kind == STRIDED && g->v[v].size < 16) kind = WRITE;
  switch (kind) {
  case FILLK:
    launch(g, CB_FIM_FILL_U32, g->v[v].role, v, -1);
    break;
  case COPYK: {
    int d = ensure_view(g, g->v[v].role, g->v[v].size, v);
    if (d >= 0 && g->v[v].alive) launch(g, CB_FIM_COPY_U32, g->v[v].role, v, d);
    break;
  }
  case CHECKSUM: {
    int acc = find_view(g, g->v[v].role, 8, v, false);
    if (acc < 0) {
      acc = new_buffer(g, g->v[v].role, 8, true);
      if (acc < 0) break;
      cb_fi_step *last = &g->p->steps[g->p->nsteps - 1];
      last->has_fault = false; /* a checksum wants its accumulator */
    }
    launch(g, CB_FIM_CHECKSUM_U32, g->v[v].role, v, acc);
    break;
  }
  case PEER_READ: {
    int src = find_view(g, -1, 0, -1, true);
    if (src < 0) {
      share(g, v);
      src = v;
    }
    int b = other_role(g, g->v[src].role);
    int d = ensure_view(g, b, g->v[src].size, -1);
    if (d >= 0) launch(g, CB_FIM_COPY_PEER_READ, b, src, d);
    break;
  }
  case PEER_WRITE: {
    int dst = find_view(g, -1, 0, -1, true);
    if (dst < 0) {
      share(g, v);
      dst = v;
    }
    int a = other_role(g, g->v[dst].role);
    int s = ensure_view(g, a, g->v[dst].size, -1);
    if (s >= 0) launch(g, CB_FIM_COPY_PEER_WRITE, a, s, dst);
    break;
  }
  case COPY:
  case COPY_PEER: {
    int role = kind == COPY ? g->v[v].role : other_role(g, g->v[v].role);
    int d = ensure_view(g, role, g->v[v].size, v);
    if (d < 0) break;
    cb_fi_step *s = add(g, CB_FI_COPY);
    if (!s) break;
    s->view = g->v[v].slot;
    s->view2 = g->v[d].slot;
    s->device = role;
    s->stream = stream(g);
    maybe_fault(g, s);
    break;
  }
  case WRITE:
  case FILL: {
    cb_fi_step *s = add(g, kind == WRITE ? CB_FI_WRITE : CB_FI_FILL);
    if (!s) break;
    s->view = g->v[v].slot;
    s->device = g->v[v].role;
    s->stream = stream(g);
    if (kind == WRITE && chance(g, 0.5)) {
      s->pattern = true;
      s->seed = rnd(g) % 100000;
    } else {
      s->value = (uint32_t)rnd(g);
    }
    maybe_fault(g, s);
    break;
  }
  case SLICE: {
    gview *p = &g->v[v];
    if (p->size < 32) break;
    uint64_t size = p->size / (chance(g, 0.5) ? 2 : 4);
    uint64_t off = size * below(g, (uint32_t)(p->size / size));
    int nv = new_gview(g, p->role, size, g->v[v].alloc, g->v[v].off + off);
    if (nv < 0) break;
    cb_fi_step *s = add(g, CB_FI_SLICE);
    if (!s) break;
    s->view = g->v[nv].slot;
    s->view2 = g->v[v].slot;
    s->offset = off;
    s->size = size;
    s->device = g->v[v].role;
    break;
  }
  case SHARE:
    share(g, v);
    break;
  case RELEASE: {
    cb_fi_step *s = add(g, CB_FI_RELEASE);
    if (!s) break;
    s->view = g->v[v].slot;
    s->device = g->v[v].role;
    g->v[v].alive = false;
    break;
  }
  case NEW: {
    static const uint64_t sizes[] = {64, 128, 256, 512};
    /* one draw per statement: the order of a call's arguments is unspecified,
     * and gcc and clang differ, so the same seed gave different programs */
    int dev = (int)below(g, (uint32_t)g->cfg->devices);
    uint64_t size = sizes[below(g, 4)];
    bool with_data = chance(g, 0.8);
    new_buffer(g, dev, size, with_data);
    break;
  }
  case STRIDED:
    gen_strided(g, v, multi);
    break;
  case SYNC: {
    cb_fi_step *s = add(g, CB_FI_SYNC);
    if (!s) break;
    s->device = chance(g, 0.6) ? -1 : (int)below(g, (uint32_t)g->cfg->devices);
    maybe_fault(g, s);
    break;
  }
  default:
    break;
  }
}

bool cb_fi_campaign_program(uint64_t seed, const cb_fi_gen_config *config, cb_fi_program *p) {
  cb_fi_gen_config c;
  if (config)
    c = *config;
  else
    cb_fi_gen_config_init(&c);
  if (c.devices < 1) c.devices = 1;
  if (c.devices > 8) c.devices = 8;
  if (c.streams < 1) c.streams = 1;
  if (c.streams > 8) c.streams = 8;
  char name[40];
  snprintf(name, sizeof name, "program-%" PRIu64, seed);
  cb_fi_program_init(p, name, "campaign");
  p->devices = c.devices;
  p->streams = c.streams;
  p->fixed = true;
  p->seed = seed;
  gen g = {0};
  g.p = p;
  g.cfg = &c;
  g.rng = seed;
  int first = 3 + (int)below(&g, 3);
  static const uint64_t sizes[] = {64, 128, 256, 512};
  for (int i = 0; i < first; i++) {
    int v = new_buffer(&g, (int)below(&g, (uint32_t)c.devices), sizes[below(&g, 4)], true);
    if (v >= 0 && chance(&g, 0.3)) share(&g, v);
  }
  size_t target = p->nsteps + (size_t)c.steps;
  while (p->nsteps < target && !g.failed) gen_step(&g);
  free(g.v);
  free(g.a);
  if (g.failed) cb_fi_program_free(p);
  return !g.failed;
}

/* ------------------------------------------------------------ normalizing */

typedef struct nview {
  bool defined;
  int role;
  uint64_t size;
  int alloc;
} nview;

void cb_fi_program_normalize(cb_fi_program *p) {
  nview *v = calloc((size_t)p->nviews + 1, sizeof *v);
  bool *shared = calloc(p->nsteps + 1, sizeof *shared);
  if (!v || !shared) {
    free(v);
    free(shared);
    return;
  }
  int nallocs = 0;
  size_t o = 0;
#define DEF(slot) ((slot) >= 0 && (slot) < p->nviews && v[slot].defined)
  for (size_t i = 0; i < p->nsteps; i++) {
    cb_fi_step *s = &p->steps[i];
    bool ok = true;
    switch (s->kind) {
    case CB_FI_ALLOC:
    case CB_FI_CREATE:
      v[s->view] = (nview){true, s->device, s->size, nallocs++};
      break;
    case CB_FI_SLICE:
      ok = DEF(s->view2) && s->offset + s->size <= v[s->view2].size;
      if (ok) v[s->view] = (nview){true, v[s->view2].role, s->size, v[s->view2].alloc};
      break;
    case CB_FI_WRITE:
    case CB_FI_FILL:
    case CB_FI_SHARE:
    case CB_FI_RELEASE:
      ok = DEF(s->view);
      if (ok && s->kind == CB_FI_SHARE) shared[v[s->view].alloc] = true;
      if (ok && s->kind == CB_FI_RELEASE) v[s->view].defined = false;
      break;
    case CB_FI_COPY:
      ok = DEF(s->view) && DEF(s->view2) && v[s->view].size == v[s->view2].size;
      break;
    case CB_FI_SWRITE:
    case CB_FI_SCHECK:
      ok = DEF(s->view);
      break;
    case CB_FI_SCOPY:
      ok = DEF(s->view) && DEF(s->view2) && v[s->view].alloc != v[s->view2].alloc;
      break;
    case CB_FI_LAUNCH:
      for (uint32_t k = 0; ok && k < cb_fim_kernel_buffers(s->kernel); k++) {
        ok = DEF(s->args[k]);
        if (ok && v[s->args[k]].role != s->device)
          ok = cb_fim_kernel_peer(s->kernel, k) && shared[v[s->args[k]].alloc];
      }
      break;
    case CB_FI_EXPECT:
      if (s->view >= 0) ok = DEF(s->view);
      break;
    default:
      break;
    }
    if (ok) {
      p->steps[o++] = *s;
    } else {
      free(s->text);
    }
  }
#undef DEF
  p->nsteps = o;
  free(v);
  free(shared);
}

/* ------------------------------------------------------------ shrinking */

static bool shows(const cb_fi_program *p, const cb_fi_run_config *rc, cb_fi_violation_kind kind) {
  cb_fi_result r;
  cubert_status st = cb_fi_run(p, rc, &r);
  bool yes = st == CUBERT_OK && r.by_violation[kind] > 0;
  if (kind == CB_FI_HANG) yes = r.hang;
  cb_fi_result_free(&r);
  return yes;
}

/* `p` without steps [from, to). */
static bool without(const cb_fi_program *p, size_t from, size_t to, cb_fi_program *out) {
  if (!cb_fi_program_copy(p, out)) return false;
  for (size_t i = from; i < to; i++) free(out->steps[i].text);
  memmove(out->steps + from, out->steps + to, (out->nsteps - to) * sizeof *out->steps);
  out->nsteps -= to - from;
  cb_fi_program_normalize(out);
  return true;
}

bool cb_fi_minimize(const cb_fi_program *failing, const cb_fi_run_config *rc, cb_fi_violation_kind kind,
                    size_t max_runs, cb_fi_program *best, size_t *runs_made) {
  size_t runs = 0;
  if (!cb_fi_program_copy(failing, best)) return false;
  size_t n = 2;
  while (best->nsteps >= 2 && runs < max_runs) {
    size_t len = best->nsteps;
    size_t chunk = (len + n - 1) / n;
    bool reduced = false;
    for (size_t from = 0; from < len && runs < max_runs; from += chunk) {
      size_t to = from + chunk < len ? from + chunk : len;
      cb_fi_program cand;
      if (!without(best, from, to, &cand)) break;
      runs++;
      if (cand.nsteps < len && shows(&cand, rc, kind)) {
        cb_fi_program_free(best);
        *best = cand;
        n = n > 2 ? n - 1 : 2;
        reduced = true;
        break;
      }
      cb_fi_program_free(&cand);
    }
    if (!reduced) {
      if (n >= len) break;
      n = n * 2 < len ? n * 2 : len;
    }
  }
  if (runs_made) *runs_made = runs;
  return true;
}

/* ------------------------------------------------------------ campaigns */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void cb_fi_campaign_report_free(cb_fi_campaign_report *r) {
  if (!r) return;
  for (size_t i = 0; i < r->nfailing; i++) {
    free(r->failing[i].first);
    free(r->failing[i].shortest);
    free(r->failing[i].shortest_report);
  }
  free(r->failing);
  memset(r, 0, sizeof *r);
}

cubert_status cb_fi_campaign_run(const cb_fi_campaign_config *config, cb_fi_campaign_report *rep) {
  memset(rep, 0, sizeof *rep);
  cb_fi_campaign_config c;
  if (config)
    c = *config;
  else
    cb_fi_campaign_config_init(&c);
  if (!c.faults && !c.programs) c.programs = 100;
  if (c.shards > 1 && (!c.programs || c.faults || c.shard >= c.shards)) return CUBERT_ERR_INVALID_ARGUMENT;
  rep->seed = c.seed;
  double t0 = now_s(), last = t0;
  cb_fi_run_config rc = {0};
  rc.backend = c.backend ? c.backend : "host";
  rc.host_devices = c.host_devices ? c.host_devices : getenv("CUBERT_HOST_NODE") ? 0 : c.gen.devices;
  rc.timeout_ms = c.timeout_ms;
  rc.trace = c.trace;
  rc.label = rc.backend;
  for (uint64_t i = 0; (!c.programs || i < c.programs) && (!c.faults || rep->injected < c.faults); i++) {
    if (c.shards > 1 && i % c.shards != c.shard) continue;
    uint64_t seed = cb_fi_campaign_seed(c.seed, i);
    cb_fi_program p;
    if (!cb_fi_campaign_program(seed, &c.gen, &p)) return CUBERT_ERR_OUT_OF_MEMORY;
    if (c.trace) fprintf(c.trace, "== program %" PRIu64 " (seed %" PRIu64 ")\n", i, seed);
    cb_fi_result r;
    cubert_status st = cb_fi_run(&p, &rc, &r);
    rep->programs++;
    rep->steps += r.steps_run;
    rep->syncs_added += r.syncs_added;
    rep->reads += r.reads;
    rep->injected += r.injected;
    for (int f = 0; f < CUBERT_FAULT_KIND_COUNT_; f++) rep->by_kind[f] += r.by_kind[f];
    for (int v = 0; v < CB_FI_VIOLATION_KIND_COUNT; v++) rep->by_violation[v] += r.by_violation[v];
    rep->violations += r.nviolations;
    rep->devices_lost += r.device_lost;
    rep->leak_skipped += !r.leak_checked && !r.hang && !r.setup_failed;
    if (r.setup_failed || (st != CUBERT_OK && !r.hang)) {
      rep->setup_failures++;
      if (c.progress)
        fprintf(c.progress, "campaign: program %" PRIu64 " (seed %" PRIu64 ") could not run: %s\n", i, seed,
                r.setup_error);
    }
    if (r.hang) rep->hang = true;
    if (r.nviolations) {
      cb_fi_failing *v = realloc(rep->failing, (rep->nfailing + 1) * sizeof *v);
      if (v) {
        rep->failing = v;
        cb_fi_failing *f = &v[rep->nfailing++];
        memset(f, 0, sizeof *f);
        f->program_seed = seed;
        f->index = i;
        f->kind = r.violations[0].kind;
        f->first = cb_strdup_or_null(r.violations[0].message);
        f->nviolations = r.nviolations;
        f->original_steps = p.nsteps;
        if (rep->nfailing <= c.minimize && !r.hang) {
          if (c.progress)
            fprintf(c.progress, "campaign: program %" PRIu64 " (seed %" PRIu64 ") shows %s; shrinking it\n", i, seed,
                    cb_fi_violation_name(f->kind));
          cb_fi_program best;
          cb_fi_run_config quiet = rc;
          quiet.trace = NULL;
          size_t runs = 0;
          if (cb_fi_minimize(&p, &quiet, f->kind, 400, &best, &runs)) {
            f->shortest = cb_fi_program_format(&best);
            f->shortest_steps = best.nsteps;
            cb_fi_result br;
            if (cb_fi_run(&best, &quiet, &br) == CUBERT_OK && br.nviolations)
              for (size_t k = 0; k < br.nviolations; k++)
                if (br.violations[k].kind == f->kind) {
                  f->shortest_report = cb_strdup_or_null(br.violations[k].message);
                  break;
                }
            cb_fi_result_free(&br);
            cb_fi_program_free(&best);
          }
        }
      }
    }
    cb_fi_result_free(&r);
    cb_fi_program_free(&p);
    double t = now_s();
    if (c.progress && t - last >= 2.0) {
      last = t;
      /* done: the larger share of whichever limits were set */
      double done = 0;
      if (c.programs) done = (double)rep->programs / (double)c.programs;
      if (c.faults && (double)rep->injected / (double)c.faults > done) done = (double)rep->injected / (double)c.faults;
      if (done > 1) done = 1;
      char of_programs[32] = "", of_faults[32] = "";
      if (c.programs) snprintf(of_programs, sizeof of_programs, " of %" PRIu64, c.programs);
      if (c.faults) snprintf(of_faults, sizeof of_faults, " of %" PRIu64, c.faults);
      fprintf(c.progress,
              "campaign: %" PRIu64 "%s programs, %" PRIu64 "%s faults injected, %zu violations, %.0f s, "
              "%.0f%% done, about %.0f s left\n",
              rep->programs, of_programs, rep->injected, of_faults, rep->violations, t - t0, 100 * done,
              done > 0 ? (t - t0) * (1 - done) / done : 0.0);
      fflush(c.progress);
    }
    if (rep->hang || (c.max_failing && rep->nfailing >= c.max_failing)) break;
  }
  rep->seconds = now_s() - t0;
  return CUBERT_OK;
}
