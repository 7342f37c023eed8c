/* faultinj/injector.c: one runtime's fault rules, decisions, the injection
 * log and its pair classifier (faultinj/injector.h). One mutex per state
 * guards it all: calls reach it only while the layer is armed, and holding it
 * across the whole decision is what makes the count order the call order. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "base/alloc.h"
#include "base/array.h"
#include "base/str.h"
#include "faultinj/injector.h"

#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/kernels.h"
#include "faultinj/rules.h"

typedef struct live_rule {
  cb_fi_rule rule;
  uint32_t id;
  bool configured;            /* from cubert_faultinj_configure */
  bool from_env;              /* configured from $CUBERT_FAULTS */
  uint32_t kernels_seen;      /* bit i: kernel item i matched some call's kernel */
  uint64_t matched, injected;
  uint64_t prng;
} live_rule;

struct cb_fi_state {
  atomic_int armed;
  pthread_mutex_t lock;
  live_rule *rules;
  size_t nrules, cap;
  uint32_t next_rule;         /* last rule id given */
  uint64_t seed;
  int lost;                   /* open devices the layer lost */

  uint64_t next_id;           /* last injection id given */
  uint64_t calls, matched;
  cubert_fault_record *ring;  /* the newest records, oldest at `head` */
  size_t ring_cap, head, count;
  uint64_t dropped;

  char *configured_text;      /* what the last configure call installed */
  cubert_faultinj_pair_classifier classify;
  void *classify_ctx;
};

cb_fi_state *cb_fi_state_new(void) {
  cb_fi_state *s = cb_calloc(1, sizeof *s);
  if (!s) return NULL;
  atomic_init(&s->armed, 0);
  pthread_mutex_init(&s->lock, NULL);
  return s;
}

void cb_fi_state_free(cb_fi_state *s) {
  if (!s) return;
  pthread_mutex_destroy(&s->lock);
  cb_free(s->rules);
  cb_free(s->ring);
  cb_free(s->configured_text);
  cb_free(s);
}

atomic_int *cb_fi_armed_flag(cb_fi_state *s) { return &s->armed; }

/* Callers hold g->lock. */
static void rearm(cb_fi_state *g) {
  atomic_store_explicit(&g->armed, g->nrules > 0 || g->lost > 0, memory_order_relaxed);
}

void cb_fi_lost_add(cb_fi_state *g, int delta) {
  pthread_mutex_lock(&g->lock);
  g->lost += delta;
  rearm(g);
  pthread_mutex_unlock(&g->lock);
}

/* ------------------------------------------------------------ the log */

static cubert_fault_record *log_slot(cb_fi_state *g, uint64_t id) {
  uint64_t oldest = g->next_id - g->count + 1;
  if (g->count == 0 || id < oldest || id > g->next_id) return NULL;
  return &g->ring[(g->head + (size_t)(id - oldest)) % g->ring_cap];
}

/* A slot for the newest record (id g->next_id, already counted), or NULL
 * when memory ran out: then the record is dropped, never the program. */
static cubert_fault_record *log_push(cb_fi_state *g) {
  if (g->count == g->ring_cap && g->ring_cap < CUBERT_FAULTINJ_LOG_CAPACITY) {
    size_t ncap = g->ring_cap ? g->ring_cap * 2 : 64;
    if (ncap > CUBERT_FAULTINJ_LOG_CAPACITY) ncap = CUBERT_FAULTINJ_LOG_CAPACITY;
    cubert_fault_record *n = cb_malloc(ncap * sizeof *n);
    if (n) {
      for (size_t i = 0; i < g->count; i++) n[i] = g->ring[(g->head + i) % g->ring_cap];
      cb_free(g->ring);
      g->ring = n;
      g->ring_cap = ncap;
      g->head = 0;
    }
  }
  if (g->ring_cap == 0) {
    g->dropped++;
    return NULL;
  }
  if (g->count == g->ring_cap) { /* full: the oldest goes */
    cubert_fault_record *slot = &g->ring[g->head];
    g->head = (g->head + 1) % g->ring_cap;
    g->dropped++;
    return slot;
  }
  return &g->ring[(g->head + g->count++) % g->ring_cap];
}

/* ------------------------------------------------------------ decisions */

static bool pair_ok(const cb_fi_state *g, const live_rule *l, const cb_fi_call *call) {
  if (!g->classify) return false; /* no topology yet: an unknown class never matches */
  for (uint32_t i = 0; i < call->npeers; i++)
    if (cb_fi_rule_pair_matches(&l->rule, g->classify(g->classify_ctx, call->device, call->peers[i])))
      return true;
  return false;
}

/* Which kernel= items of the rule name the call's kernel (for the summary's
 * rules that select nothing). */
static void note_kernel(live_rule *l, const char *kernel) {
  for (uint32_t i = 0; i < l->rule.nkernels; i++)
    if (!(l->kernels_seen & (1u << i)) && cb_fi_kernel_matches(l->rule.kernels[i], kernel))
      l->kernels_seen |= 1u << i;
}

bool cb_fi_decide(cb_fi_state *g, const cb_fi_call *call, cb_fi_hit *hit) {
  pthread_mutex_lock(&g->lock);
  g->calls++;
  bool matched = false;
  live_rule *win = NULL;
  for (size_t i = 0; i < g->nrules; i++) {
    live_rule *l = &g->rules[i];
    if (call->kernel && l->rule.nkernels) note_kernel(l, call->kernel);
    if (!cb_fi_rule_filters(&l->rule, call)) continue;
    if (l->rule.npairs && !pair_ok(g, l, call)) continue;
    matched = true;
    /* Every matching rule counts the call and draws, fired or not, so one
     * rule's counts never depend on another's. */
    l->matched++;
    if (cb_fi_rule_trigger(&l->rule, l->matched, l->injected, &l->prng) && !win) win = l;
  }
  if (matched) g->matched++;
  if (!win) {
    pthread_mutex_unlock(&g->lock);
    return false;
  }
  win->injected++;
  hit->id = ++g->next_id;
  hit->rule = win->id;
  hit->fault = win->rule.fault;
  hit->fraction = win->rule.fraction;
  hit->status = win->rule.status != CUBERT_OK ? win->rule.status : cb_fi_default_status(call->op, win->rule.fault);
  hit->match = win->matched;

  cubert_fault_record *r = log_push(g);
  if (r) {
    memset(r, 0, sizeof *r);
    r->id = hit->id;
    r->rule = hit->rule;
    r->fault = hit->fault;
    r->status = hit->status;
    const char *op = cb_fi_op_name(call->op);
    cb_fi_copy(r->operation, sizeof r->operation, op ? op : "?");
    r->device = call->device;
    r->peer = call->npeers ? call->peers[0] : -1;
    r->stream = call->stream;
    r->work = call->work;
    r->match = hit->match;
    cb_fi_copy(r->kernel, sizeof r->kernel, call->kernel ? call->kernel : "");
    snprintf(r->message, sizeof r->message, "injected fault #%llu (rule %u): %s on %s on device %d",
             (unsigned long long)hit->id, hit->rule, cubert_fault_kind_name(hit->fault), r->operation,
             call->device);
  }
  pthread_mutex_unlock(&g->lock);
  return true;
}

void cb_fi_note(cb_fi_state *g, uint64_t id, const char *message) {
  pthread_mutex_lock(&g->lock);
  cubert_fault_record *r = log_slot(g, id);
  if (r) cb_fi_copy(r->message, sizeof r->message, message);
  pthread_mutex_unlock(&g->lock);
}

/* ------------------------------------------------------------ rule set */

static void reseed_locked(cb_fi_state *g, uint64_t seed) {
  g->seed = seed;
  for (size_t i = 0; i < g->nrules; i++)
    if (!g->rules[i].rule.has_seed) g->rules[i].prng = cb_fi_stream_seed(seed, g->rules[i].id, false);
}

/* Installs parsed rules (all or nothing); callers hold g->lock. */
static cubert_status install_locked(cb_fi_state *g, const cb_fi_parsed *p, bool configured, bool from_env,
                                    uint32_t *first_id) {
  if (g->nrules + p->count > g->cap) {
    size_t ncap = 0;
    live_rule *n = cb_array_grow(g->rules, g->cap, g->nrules + p->count, sizeof *n, &ncap);
    if (!n) return CUBERT_ERR_OUT_OF_MEMORY;
    g->rules = n;
    g->cap = ncap;
  }
  if (p->has_seed) reseed_locked(g, p->seed);
  if (first_id) *first_id = p->count ? g->next_rule + 1 : 0;
  for (size_t i = 0; i < p->count; i++) {
    live_rule *l = &g->rules[g->nrules++];
    memset(l, 0, sizeof *l);
    l->rule = p->rules[i];
    l->id = ++g->next_rule;
    l->configured = configured;
    l->from_env = from_env;
    l->prng = cb_fi_stream_seed(l->rule.has_seed ? l->rule.seed : g->seed, l->id, l->rule.has_seed);
  }
  rearm(g);
  return CUBERT_OK;
}

static void remove_if_locked(cb_fi_state *g, bool configured_only) {
  size_t k = 0;
  for (size_t i = 0; i < g->nrules; i++)
    if (configured_only && !g->rules[i].configured) g->rules[k++] = g->rules[i];
  g->nrules = k;
  rearm(g);
}

static cubert_status add_text(cb_fi_state *g, const char *text, size_t len, const char *source, bool configured,
                              bool from_env, uint32_t *first_id, cubert_faultinj_diag *diag) {
  cb_fi_parsed p;
  cubert_status st = cb_fi_parse(text, len, source, &p, diag);
  if (st != CUBERT_OK) return st;
  pthread_mutex_lock(&g->lock);
  if (configured) remove_if_locked(g, true);
  st = install_locked(g, &p, configured, from_env, first_id);
  pthread_mutex_unlock(&g->lock);
  cb_fi_parsed_free(&p);
  if (st != CUBERT_OK && diag) snprintf(diag->message, sizeof diag->message, "%s: out of host memory adding rules", source);
  return st;
}

static void diag_plain(cubert_faultinj_diag *diag, const char *source, const char *message) {
  if (!diag) return;
  memset(diag, 0, sizeof *diag);
  cb_fi_copy(diag->source, sizeof diag->source, source);
  snprintf(diag->message, sizeof diag->message, "%s: %s", source, message);
}

/* The whole file, NUL-terminated, in *text (caller frees). */
static cubert_status read_file(const char *path, char **text, size_t *len, cubert_faultinj_diag *diag) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    char msg[256];
    snprintf(msg, sizeof msg, "cannot open the rule file (%s)", strerror(errno));
    diag_plain(diag, path, msg);
    return CUBERT_ERR_IO;
  }
  size_t cap = 4096, n = 0;
  char *buf = cb_malloc(cap);
  cubert_status st = buf ? CUBERT_OK : CUBERT_ERR_OUT_OF_MEMORY;
  while (st == CUBERT_OK) {
    if (n + 1 >= cap) {
      if (cap >= ((size_t)16 << 20)) {
        diag_plain(diag, path, "rule file larger than 16 MiB");
        st = CUBERT_ERR_IO;
        break;
      }
      char *nb = cb_realloc(buf, cap * 2);
      if (!nb) {
        st = CUBERT_ERR_OUT_OF_MEMORY;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) { /* EISDIR: fopen opens a directory, the read fails */
        char msg[128];
        snprintf(msg, sizeof msg, "cannot read the rule file (%s)", errno ? strerror(errno) : "read error");
        diag_plain(diag, path, msg);
        st = CUBERT_ERR_IO;
      }
      break;
    }
  }
  fclose(f);
  if (st != CUBERT_OK) {
    if (st == CUBERT_ERR_OUT_OF_MEMORY) diag_plain(diag, path, "out of host memory reading the rule file");
    cb_free(buf);
    return st;
  }
  buf[n] = '\0';
  *text = buf;
  *len = n;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ the operations of cubert/faultinj.h */

cubert_status cb_fi_state_add(cb_fi_state *g, const char *text, size_t len, const char *source, bool configured,
                              uint32_t *first_id, cubert_faultinj_diag *diag) {
  return add_text(g, text, len, source ? source : "api", configured, false, first_id, diag);
}

cubert_status cb_fi_state_load(cb_fi_state *g, const char *path, uint32_t *first_id, cubert_faultinj_diag *diag) {
  char *text;
  size_t len;
  cubert_status st = read_file(path, &text, &len, diag);
  if (st != CUBERT_OK) return st;
  st = add_text(g, text, len, path, false, false, first_id, diag);
  cb_free(text);
  return st;
}

cubert_status cb_fi_state_configure(cb_fi_state *g, const char *text, cubert_faultinj_diag *diag) {
  const char *source = "faults option";
  if (!text) {
    text = getenv("CUBERT_FAULTS");
    source = "CUBERT_FAULTS";
  }
  bool from_env = text && source[0] == 'C';
  if (!text) text = "";
  pthread_mutex_lock(&g->lock);
  bool same = g->configured_text && strcmp(g->configured_text, text) == 0;
  if (!same && !*text && !g->configured_text) same = true;
  pthread_mutex_unlock(&g->lock);
  if (same) return CUBERT_OK;

  char *copy = cb_strdup(text);
  if (!copy) {
    diag_plain(diag, source, "out of host memory copying the rules");
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  const char *body = text;
  while (*body == ' ' || *body == '\t') body++;
  cubert_status st;
  if (*body == '@') {
    const char *path = body + 1;
    char *file;
    size_t len;
    st = read_file(path, &file, &len, diag);
    if (st == CUBERT_OK) {
      st = add_text(g, file, len, path, true, from_env, NULL, diag);
      cb_free(file);
    }
  } else {
    st = add_text(g, text, strlen(text), source, true, from_env, NULL, diag);
  }
  if (st != CUBERT_OK) {
    cb_free(copy);
    return st;
  }
  pthread_mutex_lock(&g->lock);
  cb_free(g->configured_text);
  g->configured_text = copy;
  pthread_mutex_unlock(&g->lock);
  return CUBERT_OK;
}

bool cb_fi_state_remove(cb_fi_state *g, uint32_t rule_id) {
  pthread_mutex_lock(&g->lock);
  size_t i = 0;
  while (i < g->nrules && g->rules[i].id != rule_id) i++;
  bool found = i < g->nrules;
  if (found) {
    memmove(&g->rules[i], &g->rules[i + 1], (g->nrules - i - 1) * sizeof g->rules[0]);
    g->nrules--;
    rearm(g);
  }
  pthread_mutex_unlock(&g->lock);
  return found;
}

void cb_fi_state_clear(cb_fi_state *g) {
  pthread_mutex_lock(&g->lock);
  remove_if_locked(g, false);
  cb_free(g->configured_text);
  g->configured_text = NULL;
  pthread_mutex_unlock(&g->lock);
}

void cb_fi_state_reset(cb_fi_state *g) {
  pthread_mutex_lock(&g->lock);
  remove_if_locked(g, false);
  cb_free(g->configured_text);
  g->configured_text = NULL;
  cb_free(g->rules);
  g->rules = NULL;
  g->cap = 0;
  cb_free(g->ring);
  g->ring = NULL;
  g->ring_cap = g->head = g->count = 0;
  g->next_rule = 0;
  g->next_id = 0;
  g->seed = 0;
  g->calls = g->matched = g->dropped = 0;
  pthread_mutex_unlock(&g->lock);
}

void cb_fi_state_set_seed(cb_fi_state *g, uint64_t seed) {
  pthread_mutex_lock(&g->lock);
  reseed_locked(g, seed);
  pthread_mutex_unlock(&g->lock);
}

uint64_t cb_fi_state_seed(cb_fi_state *g) {
  pthread_mutex_lock(&g->lock);
  uint64_t s = g->seed;
  pthread_mutex_unlock(&g->lock);
  return s;
}

void cb_fi_state_set_pair_classifier(cb_fi_state *g, cubert_faultinj_pair_classifier fn, void *ctx) {
  pthread_mutex_lock(&g->lock);
  g->classify = fn;
  g->classify_ctx = fn ? ctx : NULL;
  pthread_mutex_unlock(&g->lock);
}

size_t cb_fi_state_log(cb_fi_state *g, uint64_t first_id, cubert_fault_record *out, size_t capacity) {
  pthread_mutex_lock(&g->lock);
  size_t n = 0;
  if (g->count) {
    uint64_t oldest = g->next_id - g->count + 1;
    if (first_id < oldest) first_id = oldest;
    for (uint64_t id = first_id; id <= g->next_id && n < capacity; id++) {
      const cubert_fault_record *r = log_slot(g, id);
      if (r) out[n++] = *r;
    }
  }
  pthread_mutex_unlock(&g->lock);
  return n;
}

bool cb_fi_state_record(cb_fi_state *g, uint64_t id, cubert_fault_record *record) {
  pthread_mutex_lock(&g->lock);
  const cubert_fault_record *r = log_slot(g, id);
  if (r && record) *record = *r;
  pthread_mutex_unlock(&g->lock);
  return r != NULL;
}

/* Rules with a kernel= item that named no kernel of any call so far. */
static uint32_t idle_kernel_rules_locked(const cb_fi_state *g, bool from_env_only) {
  uint32_t n = 0;
  for (size_t i = 0; i < g->nrules; i++) {
    const live_rule *l = &g->rules[i];
    if ((!from_env_only || l->from_env) && l->rule.nkernels && l->kernels_seen != (1u << l->rule.nkernels) - 1u) n++;
  }
  return n;
}

void cb_fi_state_stats(cb_fi_state *g, cubert_faultinj_stats *stats) {
  pthread_mutex_lock(&g->lock);
  stats->injected = g->next_id;
  stats->calls = g->calls;
  stats->matched = g->matched;
  stats->log_dropped = g->dropped;
  stats->seed = g->seed;
  stats->rules = (uint32_t)g->nrules;
  stats->idle_kernel_rules = idle_kernel_rules_locked(g, false);
  pthread_mutex_unlock(&g->lock);
}

bool cb_fi_state_describe(cb_fi_state *g, uint32_t rule_id, char *text, size_t capacity, uint64_t *matched,
                          uint64_t *injected) {
  pthread_mutex_lock(&g->lock);
  size_t i = 0;
  while (i < g->nrules && g->rules[i].id != rule_id) i++;
  bool found = i < g->nrules;
  if (found) {
    if (text && capacity) cb_fi_rule_format(&g->rules[i].rule, text, capacity);
    if (matched) *matched = g->rules[i].matched;
    if (injected) *injected = g->rules[i].injected;
  }
  pthread_mutex_unlock(&g->lock);
  return found;
}

/* Appends with snprintf semantics: `n` counts what was wanted. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static void put(char *text, size_t capacity, size_t *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(*n < capacity ? text + *n : NULL, *n < capacity ? capacity - *n : 0, fmt, ap);
  va_end(ap);
  if (k > 0) *n += (size_t)k;
}

/* "did you mean `cubert_fill_u32`?" when the name is a built-in's without
 * its prefix. */
static const char *builtin_hint(const char *pattern) {
  for (int b = 0; b < CUBERT_BUILTIN_COUNT; b++) {
    const cubert_kernel_desc *d = cubert_builtin_desc((cubert_builtin)b);
    if (d && d->name && strncmp(d->name, "cubert_", 7) == 0 && cb_fi_kernel_matches(pattern, d->name + 7))
      return d->name;
  }
  return NULL;
}

size_t cb_fi_state_unmatched(cb_fi_state *g, bool from_env_only, char *text, size_t capacity) {
  size_t n = 0;
  if (text && capacity) text[0] = '\0';
  pthread_mutex_lock(&g->lock);
  for (size_t i = 0; i < g->nrules; i++) {
    const live_rule *l = &g->rules[i];
    if (from_env_only && !l->from_env) continue;
    for (uint32_t k = 0; k < l->rule.nkernels; k++) {
      if (l->kernels_seen & (1u << k)) continue;
      const char *hint = builtin_hint(l->rule.kernels[k]);
      put(text, capacity, &n, "%srule %u selects nothing through kernel=%s: no kernel launched or compiled in this "
                              "runtime has that name%s%s%s",
          n ? "; " : "", l->id, l->rule.kernels[k], hint ? " (the built-in is named `" : "", hint ? hint : "",
          hint ? "`)" : "");
    }
  }
  pthread_mutex_unlock(&g->lock);
  return n;
}

size_t cb_fi_state_summary(cb_fi_state *g, char *text, size_t capacity) {
  cubert_faultinj_stats s;
  cb_fi_state_stats(g, &s);
  size_t n = 0;
  if (text && capacity) text[0] = '\0';
  if (s.injected == 0 && s.rules == 0 && s.calls == 0)
    put(text, capacity, &n, "fault injection: no faults were injected (no rules set)");
  else if (s.injected == 0)
    put(text, capacity, &n, "fault injection: no faults were injected (%u rule%s set; %llu of %llu calls matched)",
        s.rules, s.rules == 1 ? "" : "s", (unsigned long long)s.matched, (unsigned long long)s.calls);
  else
    put(text, capacity, &n,
        "fault injection: %llu fault%s injected, #1-#%llu (seed %llu; %u rule%s set; %llu of %llu calls matched)",
        (unsigned long long)s.injected, s.injected == 1 ? "" : "s", (unsigned long long)s.injected,
        (unsigned long long)s.seed, s.rules, s.rules == 1 ? "" : "s", (unsigned long long)s.matched,
        (unsigned long long)s.calls);
  if (s.idle_kernel_rules) {
    put(text, capacity, &n, "; WARNING: ");
    size_t k = cb_fi_state_unmatched(g, false, n < capacity ? text + n : NULL, n < capacity ? capacity - n : 0);
    n += k;
  }
  return n;
}
