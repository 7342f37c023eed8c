/* mpi/inject.c: the send and receive rules ($CUBERT_FAULTS, $CUBERT_MPI_FAULTS,
 * cubert_mpi_faults) and their decisions. */
#include "mpi/inject.h"

#include "mpi/alloc.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_RULES 16

typedef struct rule {
  bool send, recv;
  int rank_lo, rank_hi; /* -1: any */
  int peer_lo, peer_hi;
  uint64_t nth, every, first;
  double prob;
  bool has_prob;
  uint64_t seed;
  mpi_fault fault;
  double fraction;
  uint64_t matched, prng;
} rule;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* libcubert_mpi's own allocations (mpi/alloc.h: test_mpi_send_oom fails
 * them one at a time over cubert_mpi_init), or the seam's and free() */
static void *(*alloc_fn)(size_t) = mb_malloc;
static void (*free_fn)(void *) = mb_free;
static rule rules[MAX_RULES];
static size_t nrules;
static uint64_t injected;

void mpi_inject_set_alloc(void *(*alloc)(size_t)) {
  alloc_fn = alloc ? alloc : mb_malloc;
  free_fn = alloc ? free : mb_free;
}

/* A copy of `n` bytes of `text` and a NUL; NULL when out of memory. */
static char *copy_of(const char *text, size_t n) {
  char *c = alloc_fn(n + 1);
  if (!c) return NULL;
  memcpy(c, text, n);
  c[n] = '\0';
  return c;
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static bool parse_range(const char *v, int *lo, int *hi) {
  char *end;
  long a = strtol(v, &end, 10), b = a;
  if (end == v || a < 0) return false;
  if (*end == '-') {
    const char *w = end + 1;
    b = strtol(w, &end, 10);
    if (end == w || b < a) return false;
  }
  if (*end) return false;
  *lo = (int)a;
  *hi = (int)b;
  return true;
}

static bool parse_u64(const char *v, uint64_t *out) {
  char *end;
  if (!isdigit((unsigned char)*v)) return false;
  unsigned long long x = strtoull(v, &end, 10);
  if (*end) return false;
  *out = x;
  return true;
}

static bool parse_fault(const char *v, rule *r) {
  const char *colon = strchr(v, ':');
  size_t n = colon ? (size_t)(colon - v) : strlen(v);
  r->fraction = 0.5;
  if (n == 4 && !strncasecmp(v, "fail", 4)) r->fault = MPI_FAULT_FAIL;
  else if (n == 7 && !strncasecmp(v, "partial", 7)) r->fault = MPI_FAULT_PARTIAL;
  else if (n == 8 && !strncasecmp(v, "scribble", 8)) r->fault = MPI_FAULT_SCRIBBLE;
  else return false;
  if (colon) {
    char *end;
    double f = strtod(colon + 1, &end);
    if (end == colon + 1 || *end || !(f > 0.0 && f <= 1.0) || r->fault == MPI_FAULT_FAIL) return false;
    r->fraction = f;
  }
  return true;
}

/* One rule: words separated by blanks. */
static bool parse_rule(char *text, rule *r, char *why, size_t cap) {
  memset(r, 0, sizeof *r);
  r->rank_lo = r->rank_hi = r->peer_lo = r->peer_hi = -1;
  char *save = NULL;
  bool first_word = true;
  for (char *w = strtok_r(text, " \t\r\n", &save); w; w = strtok_r(NULL, " \t\r\n", &save)) {
    if (first_word) {
      first_word = false;
      for (char *op = w, *bar; op; op = bar) {
        bar = strchr(op, '|');
        if (bar) *bar++ = '\0';
        if (!strcasecmp(op, "send")) r->send = true;
        else if (!strcasecmp(op, "recv")) r->recv = true;
        else {
          snprintf(why, cap, "unknown operation '%s' (send, recv)", op);
          return false;
        }
      }
      continue;
    }
    char *eq = strchr(w, '=');
    if (!eq) {
      snprintf(why, cap, "expected key=value, got '%s'", w);
      return false;
    }
    *eq = '\0';
    const char *k = w, *v = eq + 1;
    bool ok;
    if (!strcasecmp(k, "rank")) ok = parse_range(v, &r->rank_lo, &r->rank_hi);
    else if (!strcasecmp(k, "peer")) ok = parse_range(v, &r->peer_lo, &r->peer_hi);
    else if (!strcasecmp(k, "nth")) ok = parse_u64(v, &r->nth) && r->nth > 0;
    else if (!strcasecmp(k, "every")) ok = parse_u64(v, &r->every) && r->every > 0;
    else if (!strcasecmp(k, "first")) ok = parse_u64(v, &r->first) && r->first > 0;
    else if (!strcasecmp(k, "seed")) ok = parse_u64(v, &r->seed);
    else if (!strcasecmp(k, "prob")) {
      char *end;
      r->prob = strtod(v, &end);
      r->has_prob = true;
      ok = end != v && !*end && r->prob >= 0.0 && r->prob <= 1.0;
    } else if (!strcasecmp(k, "fault")) ok = parse_fault(v, r);
    else {
      snprintf(why, cap, "unknown key '%s' (rank, peer, nth, every, first, prob, seed, fault)", k);
      return false;
    }
    if (!ok) {
      snprintf(why, cap, "bad value '%s' for %s", v, k);
      return false;
    }
  }
  if (first_word) return false; /* empty */
  if (r->fault == MPI_FAULT_NONE) {
    snprintf(why, cap, "the rule has no fault= (fail, partial[:F], scribble[:F])");
    return false;
  }
  return true;
}

/* Whether the first word of a statement ("send|recv", "launch", "seed=3")
 * names an operation of ours. */
static bool ours(const char *stmt) {
  while (*stmt == ' ' || *stmt == '\t' || *stmt == '\r') stmt++;
  size_t n = strcspn(stmt, " \t\r");
  for (const char *op = stmt; op < stmt + n;) {
    size_t m = strcspn(op, "|");
    if (m > (size_t)(stmt + n - op)) m = (size_t)(stmt + n - op);
    if ((m == 4 && (!strncasecmp(op, "send", 4) || !strncasecmp(op, "recv", 4)))) return true;
    op += m + 1;
  }
  return false;
}

/* Adds the rules of `text` to parsed[*n]: statements split at ';' and new
 * lines (outside "quoted" values, which the runtime's rules may hold), '#'
 * to the end of the line a comment. only_ours: statements of other
 * operations (the runtime's, in $CUBERT_FAULTS) are skipped. */
static cubert_status parse_text(const char *text, const char *source, bool only_ours, rule *parsed, size_t *n,
                                char *why, size_t cap) {
  if (!text) return CUBERT_OK;
  char *copy = copy_of(text, strlen(text));
  if (!copy) {
    snprintf(why, cap, "%s: out of host memory copying %zu bytes of rules", source, strlen(text) + 1);
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  int index = 0;
  cubert_status st = CUBERT_OK;
  for (char *part = copy; part && st == CUBERT_OK;) {
    char *p = part, *next = NULL;
    bool quoted = false;
    for (; *p; p++) {
      if (*p == '\\' && quoted && p[1]) p++;
      else if (*p == '"') quoted = !quoted;
      else if (!quoted && *p == '#') {
        *p = '\0';
        char *nl = strchr(p + 1, '\n');
        next = nl ? nl + 1 : NULL;
        break;
      } else if (!quoted && (*p == ';' || *p == '\n')) {
        *p = '\0';
        next = p + 1;
        break;
      }
    }
    index++;
    char *stmt = part;
    part = next;
    if (only_ours && !ours(stmt)) continue;
    char msg[160] = "";
    rule r;
    if (!parse_rule(stmt, &r, msg, sizeof msg)) {
      if (!msg[0]) continue; /* blank */
      snprintf(why, cap, "%s rule %d: %s", source, index, msg);
      st = CUBERT_ERR_PARSE;
    } else if (*n == MAX_RULES) {
      snprintf(why, cap, "%s: more than %d send and receive rules in all", source, MAX_RULES);
      st = CUBERT_ERR_PARSE;
    } else {
      r.prng = r.seed ^ (0x6a09e667f3bcc909ull * (*n + 1));
      parsed[(*n)++] = r;
    }
  }
  free_fn(copy);
  return st;
}

cubert_status mpi_inject_set(const char *faults, const char *mpi_faults, const char *mpi_source, char *why,
                             size_t cap) {
  rule parsed[MAX_RULES];
  size_t n = 0;
  cubert_status st = parse_text(faults, "CUBERT_FAULTS", true, parsed, &n, why, cap);
  if (st == CUBERT_OK) st = parse_text(mpi_faults, mpi_source, false, parsed, &n, why, cap);
  if (st != CUBERT_OK) return st;
  pthread_mutex_lock(&lock);
  memcpy(rules, parsed, n * sizeof *parsed);
  nrules = n;
  pthread_mutex_unlock(&lock);
  return CUBERT_OK;
}

cubert_status mpi_inject_env(char *why, size_t cap) {
  const char *faults = getenv("CUBERT_FAULTS"), *mpi = getenv("CUBERT_MPI_FAULTS");
  if (!(faults && faults[0]) && !(mpi && mpi[0])) return CUBERT_OK;
  char *file = NULL;
  if (faults && faults[0] == '@') { /* a rule file, as the runtime reads it */
    FILE *f = fopen(faults + 1, "rb");
    size_t len = 0, got = 0;
    if (f && fseek(f, 0, SEEK_END) == 0 && (len = (size_t)ftell(f)) != (size_t)-1 && fseek(f, 0, SEEK_SET) == 0 &&
        (file = alloc_fn(len + 1)) != NULL)
      file[got = fread(file, 1, len, f)] = '\0';
    if (f) fclose(f);
    if (f && len != (size_t)-1 && !file) {
      snprintf(why, cap, "CUBERT_FAULTS: out of host memory reading the rule file %s (%zu bytes)", faults + 1, len);
      return CUBERT_ERR_OUT_OF_MEMORY;
    }
    if (!file || got != len) {
      free_fn(file);
      snprintf(why, cap, "CUBERT_FAULTS: cannot read the rule file %s", faults + 1);
      return CUBERT_ERR_PARSE;
    }
    faults = file;
  }
  /* a bad rule of $CUBERT_MPI_FAULTS is named so, $CUBERT_FAULTS set or not */
  cubert_status st = mpi_inject_set(faults, mpi, "CUBERT_MPI_FAULTS", why, cap);
  free_fn(file);
  return st;
}

static bool in(int lo, int hi, int v) { return lo < 0 || (v >= lo && v <= hi); }

bool mpi_inject_decide(bool send, int rank, int peer, mpi_hit *hit) {
  bool fired = false;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < nrules && !fired; i++) {
    rule *r = &rules[i];
    if (!(send ? r->send : r->recv) || !in(r->rank_lo, r->rank_hi, rank) || !in(r->peer_lo, r->peer_hi, peer))
      continue;
    uint64_t m = ++r->matched;
    bool go = true;
    if (r->nth) go = go && m == r->nth;
    if (r->every) go = go && m % r->every == 0;
    if (r->first) go = go && m <= r->first;
    if (r->has_prob) go = go && (double)(splitmix(&r->prng) >> 11) * 0x1.0p-53 < r->prob;
    if (!go) continue;
    fired = true;
    hit->fault = r->fault;
    hit->fraction = r->fraction;
    hit->id = ++injected;
    hit->rule = (uint32_t)i + 1;
    hit->seed = splitmix(&r->prng);
  }
  pthread_mutex_unlock(&lock);
  return fired;
}

uint64_t mpi_inject_count(void) {
  pthread_mutex_lock(&lock);
  uint64_t n = injected;
  pthread_mutex_unlock(&lock);
  return n;
}
