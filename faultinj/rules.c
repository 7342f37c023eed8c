/* faultinj/rules.c: rule syntax (parser and canonical printer), filters,
 * triggers and the per-rule random streams. No process state lives here. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "base/alloc.h"
#include "base/array.h"
#include "faultinj/rules.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ names */

static const struct {
  const char *name;
  uint32_t op;
} op_names[] = {
    {"launch", CB_FI_OP_LAUNCH},
    {"write", CB_FI_OP_WRITE},
    {"read", CB_FI_OP_READ},
    {"fill", CB_FI_OP_FILL},
    {"copy", CB_FI_OP_COPY},
    {"copy_peer", CB_FI_OP_COPY_PEER},
    {"peer_write", CB_FI_OP_PEER_WRITE},
    {"alloc", CB_FI_OP_ALLOC},
    {"compile", CB_FI_OP_COMPILE},
    {"sync", CB_FI_OP_SYNC},
    {"peer_enable", CB_FI_OP_PEER_ENABLE},
    {"peer_can_access", CB_FI_OP_PEER_CAN_ACCESS},
    {"stream_create", CB_FI_OP_STREAM_CREATE},
    {"event_record", CB_FI_OP_EVENT_RECORD},
    {"stream_wait", CB_FI_OP_STREAM_WAIT},
    {"device_open", CB_FI_OP_DEVICE_OPEN},
    {"link_info", CB_FI_OP_LINK_INFO},
};
#define NOPS (sizeof op_names / sizeof op_names[0])

const char *cb_fi_op_name(uint32_t op) {
  for (size_t i = 0; i < NOPS; i++)
    if (op_names[i].op == op) return op_names[i].name;
  return NULL;
}

static const char *const fault_names[CUBERT_FAULT_KIND_COUNT_] = {
    [CUBERT_FAULT_FAIL] = "fail",
    [CUBERT_FAULT_SCRIBBLE] = "scribble",
    [CUBERT_FAULT_PARTIAL] = "partial",
    [CUBERT_FAULT_OOM] = "oom",
    [CUBERT_FAULT_COMPILE] = "compile-error",
    [CUBERT_FAULT_DEVICE_LOST] = "device-lost",
    [CUBERT_FAULT_ASYNC] = "async",
    [CUBERT_FAULT_ASYNC_SCRIBBLE] = "async-scribble",
    [CUBERT_FAULT_ASYNC_DEVICE_LOST] = "async-device-lost",
};

const char *cubert_fault_kind_name(cubert_fault_kind kind) {
  if ((unsigned)kind >= CUBERT_FAULT_KIND_COUNT_) return "unknown";
  return fault_names[kind];
}

/* The operations each fault can act on. */
static uint32_t fault_applies(cubert_fault_kind kind) {
  switch (kind) {
  case CUBERT_FAULT_FAIL:
  case CUBERT_FAULT_DEVICE_LOST:
  case CUBERT_FAULT_KIND_COUNT_:
    return CB_FI_OP_ALL;
  case CUBERT_FAULT_SCRIBBLE:
    return CB_FI_OP_WORK | CB_FI_OP_READ;
  case CUBERT_FAULT_PARTIAL:
    return CB_FI_OP_WRITE | CB_FI_OP_READ | CB_FI_OP_FILL | CB_FI_OP_COPY | CB_FI_OP_COPY_PEER;
  case CUBERT_FAULT_OOM:
    return CB_FI_OP_ALLOC;
  case CUBERT_FAULT_COMPILE:
    return CB_FI_OP_COMPILE;
  case CUBERT_FAULT_ASYNC:
  case CUBERT_FAULT_ASYNC_SCRIBBLE:
  case CUBERT_FAULT_ASYNC_DEVICE_LOST:
    return CB_FI_OP_WORK | CB_FI_OP_READ; /* a read into a host buffer is queued work */
  }
  return 0;
}

static const char *const status_names[] = {
#define STATUS_NAME_(name, text) #name,
    CUBERT_STATUS_MAP(STATUS_NAME_)
#undef STATUS_NAME_
};
#define NSTATUS (sizeof status_names / sizeof status_names[0])

/* The classes topology knows (DESIGN.md), near to far. */
static const char *const pair_class_names[] = {"SELF", "XGMI", "NVLINK", "PIX",
                                               "PXB",  "PHB",  "NODE",   "SYS"};
#define NCLASSES (sizeof pair_class_names / sizeof pair_class_names[0])

cubert_status cb_fi_default_status(uint32_t op, cubert_fault_kind fault) {
  switch (fault) {
  case CUBERT_FAULT_OOM:
    return CUBERT_ERR_OUT_OF_MEMORY;
  case CUBERT_FAULT_COMPILE:
    return CUBERT_ERR_COMPILE;
  case CUBERT_FAULT_DEVICE_LOST:
  case CUBERT_FAULT_ASYNC_DEVICE_LOST:
    return CUBERT_ERR_DEVICE_LOST;
  default:
    break;
  }
  switch (op) {
  case CB_FI_OP_LAUNCH:
    return CUBERT_ERR_LAUNCH;
  case CB_FI_OP_WRITE:
  case CB_FI_OP_READ:
  case CB_FI_OP_COPY:
  case CB_FI_OP_COPY_PEER:
    return CUBERT_ERR_COPY;
  case CB_FI_OP_ALLOC:
    return CUBERT_ERR_OUT_OF_MEMORY;
  case CB_FI_OP_COMPILE:
    return CUBERT_ERR_COMPILE;
  case CB_FI_OP_PEER_ENABLE:
  case CB_FI_OP_PEER_CAN_ACCESS:
    return CUBERT_ERR_PEER_ACCESS;
  default:
    return CUBERT_ERR_BACKEND;
  }
}

void cb_fi_copy(char *dst, size_t cap, const char *src) {
  size_t n = strnlen(src, cap - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* ------------------------------------------------------------ random streams */

uint64_t cb_fi_splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t cb_fi_stream_seed(uint64_t seed, uint32_t rule_id, bool own_seed) {
  /* A rule with its own seed draws exactly that stream (two rules given the
   * same seed draw alike); otherwise the rule id separates the streams. */
  uint64_t s = seed ^ (own_seed ? 0 : (uint64_t)rule_id * 0xD1B54A32D192ED03ull);
  return cb_fi_splitmix64(&s);
}

/* ------------------------------------------------------------ matching */

static bool in_ranges(const cb_fi_range *r, uint32_t n, uint64_t v) {
  for (uint32_t i = 0; i < n; i++)
    if (v >= r[i].lo && v <= r[i].hi) return true;
  return false;
}

bool cb_fi_kernel_matches(const char *pattern, const char *name) {
  size_t len = strlen(pattern);
  if (len > 0 && pattern[len - 1] == '*') return strncmp(pattern, name, len - 1) == 0;
  return strcmp(pattern, name) == 0;
}

bool cb_fi_rule_filters(const cb_fi_rule *rule, const cb_fi_call *call) {
  if (!(rule->ops & call->ops)) return false;
  if (rule->nkernels) {
    if (!call->kernel) return false;
    bool any = false;
    for (uint32_t i = 0; i < rule->nkernels && !any; i++) any = cb_fi_kernel_matches(rule->kernels[i], call->kernel);
    if (!any) return false;
  }
  if (rule->ndevices && (call->device < 0 || !in_ranges(rule->devices, rule->ndevices, (uint64_t)call->device)))
    return false;
  if (rule->nstreams && (call->stream == 0 || !in_ranges(rule->streams, rule->nstreams, call->stream)))
    return false;
  if (rule->nranks && !in_ranges(rule->ranks, rule->nranks, (uint64_t)(call->rank < 0 ? 0 : call->rank)))
    return false;
  if (rule->npeers) {
    bool any = false;
    for (uint32_t i = 0; i < call->npeers && !any; i++)
      any = call->peers[i] >= 0 && in_ranges(rule->peers, rule->npeers, (uint64_t)call->peers[i]);
    if (!any) return false;
  }
  return true;
}

bool cb_fi_rule_pair_matches(const cb_fi_rule *rule, const char *pair_class) {
  if (!pair_class) return false;
  for (uint32_t i = 0; i < rule->npairs; i++) {
    const char *a = rule->pairs[i], *b = pair_class;
    while (*a && (*a == *b || (*b >= 'a' && *b <= 'z' && *a == *b - 'a' + 'A'))) a++, b++;
    if (!*a && !*b) return true;
  }
  return false;
}

bool cb_fi_rule_trigger(const cb_fi_rule *rule, uint64_t count, uint64_t injected, uint64_t *prng) {
  if (rule->times && injected >= rule->times) return false;
  if (rule->nth && count != rule->nth) return false;
  if (rule->every && count % rule->every != 0) return false;
  if (rule->first && count > rule->first) return false;
  if (rule->has_after && count <= rule->after) return false;
  if (rule->has_prob) {
    /* 53 uniform bits against prob * 2^53: prob 1 always fires, 0 never. */
    uint64_t x = cb_fi_splitmix64(prng) >> 11;
    return (double)x < rule->prob * 9007199254740992.0;
  }
  return true;
}

/* ------------------------------------------------------------ lexer */

typedef struct lexer {
  const char *s;
  size_t n, i;
  int line;
  size_t line_start;
  const char *source;
  cubert_faultinj_diag *diag;
} lexer;

#define VALUE_MAX 256

typedef struct token {
  size_t pos;                 /* offset of its first byte */
  bool quoted;
  size_t len;
  char text[VALUE_MAX];       /* decoded, NUL-terminated */
} token;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static cubert_status error_at(lexer *lx, size_t pos, const char *fmt, ...) {
  cubert_faultinj_diag *d = lx->diag;
  if (!d) return CUBERT_ERR_PARSE;
  memset(d, 0, sizeof *d);
  cb_fi_copy(d->source, sizeof d->source, lx->source);
  d->line = lx->line;
  d->column = (int)(pos - lx->line_start) + 1;
  char what[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  int n = snprintf(d->message, sizeof d->message, "%s:%d:%d: ", d->source, d->line, d->column);
  if (n > 0 && (size_t)n < sizeof d->message) cb_fi_copy(d->message + n, sizeof d->message - (size_t)n, what);
  return CUBERT_ERR_PARSE;
}

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }
static bool at_statement_end(const lexer *lx) {
  return lx->i >= lx->n || lx->s[lx->i] == '\n' || lx->s[lx->i] == ';' || lx->s[lx->i] == '#';
}
static void skip_blank(lexer *lx) {
  while (lx->i < lx->n && is_blank(lx->s[lx->i])) lx->i++;
}
static bool is_word_byte(unsigned char c) {
  return c > 0x20 && c < 0x7f && c != ';' && c != '#' && c != '=' && c != '|' && c != '"';
}

/* A bare word or, when allowed, a "quoted string" with \" and \\ escapes. */
static cubert_status read_token(lexer *lx, token *t, bool allow_quoted, const char *what) {
  t->pos = lx->i;
  t->quoted = false;
  t->len = 0;
  t->text[0] = '\0';
  if (lx->i >= lx->n) return error_at(lx, lx->i, "expected %s, found the end of the text", what);
  unsigned char c = (unsigned char)lx->s[lx->i];
  if (c == '"') {
    if (!allow_quoted) return error_at(lx, lx->i, "expected %s, found a quoted string", what);
    t->quoted = true;
    lx->i++;
    for (;;) {
      if (lx->i >= lx->n || lx->s[lx->i] == '\n')
        return error_at(lx, t->pos, "unterminated quoted string");
      c = (unsigned char)lx->s[lx->i];
      if (c == '"') break;
      if (c == '\\') {
        if (lx->i + 1 >= lx->n || (lx->s[lx->i + 1] != '"' && lx->s[lx->i + 1] != '\\'))
          return error_at(lx, lx->i, "only \\\" and \\\\ are escapes in a quoted string");
        c = (unsigned char)lx->s[++lx->i];
      } else if (c < 0x20 || c >= 0x7f) {
        return error_at(lx, lx->i, "unexpected byte 0x%02x in a quoted string", c);
      }
      if (t->len + 1 >= VALUE_MAX) return error_at(lx, t->pos, "value longer than %d bytes", VALUE_MAX - 1);
      t->text[t->len++] = (char)c;
      lx->i++;
    }
    lx->i++;
    t->text[t->len] = '\0';
    return CUBERT_OK;
  }
  while (lx->i < lx->n && is_word_byte((unsigned char)lx->s[lx->i])) {
    if (t->len + 1 >= VALUE_MAX) return error_at(lx, t->pos, "word longer than %d bytes", VALUE_MAX - 1);
    t->text[t->len++] = lx->s[lx->i++];
  }
  t->text[t->len] = '\0';
  if (t->len == 0) {
    if (lx->i >= lx->n || lx->s[lx->i] == '\n')
      return error_at(lx, lx->i, "expected %s, found the end of the line", what);
    c = (unsigned char)lx->s[lx->i];
    if (c >= 0x20 && c < 0x7f) return error_at(lx, lx->i, "expected %s, found `%c`", what, c);
    return error_at(lx, lx->i, "expected %s, found byte 0x%02x", what, c);
  }
  return CUBERT_OK;
}

/* ------------------------------------------------------------ values */

static bool word_eq(const char *a, const char *b) {
  /* Case-insensitive; '-' and '_' are the same letter. */
  for (;; a++, b++) {
    char x = *a, y = *b;
    if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = (char)(y - 'A' + 'a');
    if (x == '-') x = '_';
    if (y == '-') y = '_';
    if (x != y) return false;
    if (!x) return true;
  }
}

static cubert_status parse_u64(lexer *lx, const char *s, size_t pos, const char *what, uint64_t *out) {
  uint64_t v = 0;
  const char *p = s;
  int base = 10;
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) base = 16, p += 2;
  if (!*p) return error_at(lx, pos, "%s: expected a number, found `%s`", what, s);
  for (; *p; p++) {
    int d;
    if (*p >= '0' && *p <= '9') d = *p - '0';
    else if (base == 16 && *p >= 'a' && *p <= 'f') d = *p - 'a' + 10;
    else if (base == 16 && *p >= 'A' && *p <= 'F') d = *p - 'A' + 10;
    else return error_at(lx, pos + (size_t)(p - s), "%s: expected a number, found `%s`", what, s);
    if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
      return error_at(lx, pos, "%s: %s is too large", what, s);
    v = v * (uint64_t)base + (uint64_t)d;
  }
  *out = v;
  return CUBERT_OK;
}

/* A decimal in [lo, hi]: digits, an optional fraction and exponent. Parsed by
 * hand because strtod follows the locale's decimal point. */
static cubert_status parse_decimal(lexer *lx, const char *s, size_t pos, const char *what, double lo,
                                   double hi, double *out) {
  const char *p = s;
  uint64_t mant = 0;
  int digits = 0, exp10 = 0;
  bool any = false;
  for (; *p >= '0' && *p <= '9'; p++, any = true) {
    if (digits < 19) mant = mant * 10 + (uint64_t)(*p - '0'), digits += mant != 0;
    else exp10++;
  }
  if (*p == '.') {
    for (p++; *p >= '0' && *p <= '9'; p++, any = true) {
      if (digits < 19) mant = mant * 10 + (uint64_t)(*p - '0'), digits += mant != 0, exp10--;
    }
  }
  if (any && (*p == 'e' || *p == 'E')) {
    p++;
    int sign = 1, e = 0;
    if (*p == '+' || *p == '-') sign = *p++ == '-' ? -1 : 1;
    if (!(*p >= '0' && *p <= '9')) return error_at(lx, pos, "%s: `%s` is not a number", what, s);
    for (; *p >= '0' && *p <= '9'; p++)
      if (e < 10000) e = e * 10 + (*p - '0');
    exp10 += sign * e;
  }
  if (!any || *p) return error_at(lx, pos, "%s: `%s` is not a number", what, s);
  long double v = (long double)mant;
  if (mant != 0) {
    if (exp10 > 400) v = 1e300L * 1e300L; /* beyond any range we accept */
    else if (exp10 < -400) v = 0;
    else {
      for (; exp10 > 0; exp10--) v *= 10;
      for (; exp10 < 0; exp10++) v /= 10;
    }
  }
  if (!(v >= lo && v <= hi)) return error_at(lx, pos, "%s: %s is outside [%g, %g]", what, s, lo, hi);
  *out = (double)v;
  return CUBERT_OK;
}

/* "1,3-5": up to CB_FI_MAX_LIST inclusive ranges, each within [min, max]. */
static cubert_status parse_ranges(lexer *lx, const token *t, const char *what, uint64_t min, uint64_t max,
                                  cb_fi_range *out, uint32_t *n) {
  const char *s = t->text;
  *n = 0;
  while (*s) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    size_t pos = t->pos + (t->quoted ? 1 : 0) + (size_t)(s - t->text);
    char item[VALUE_MAX];
    memcpy(item, s, len);
    item[len] = '\0';
    if (len == 0) return error_at(lx, pos, "%s: empty item in the list", what);
    if (*n == CB_FI_MAX_LIST) return error_at(lx, pos, "%s: at most %d items", what, CB_FI_MAX_LIST);
    char *dash = strchr(item + 1, '-');
    cb_fi_range r;
    cubert_status st;
    if (dash) {
      *dash = '\0';
      if ((st = parse_u64(lx, item, pos, what, &r.lo)) != CUBERT_OK) return st;
      if ((st = parse_u64(lx, dash + 1, pos + (size_t)(dash + 1 - item), what, &r.hi)) != CUBERT_OK) return st;
      if (r.hi < r.lo) return error_at(lx, pos, "%s: range %s-%s runs backwards", what, item, dash + 1);
    } else {
      if ((st = parse_u64(lx, item, pos, what, &r.lo)) != CUBERT_OK) return st;
      r.hi = r.lo;
    }
    if (r.lo < min || r.hi > max)
      return error_at(lx, pos, "%s: %llu is outside [%llu, %llu]", what,
                      (unsigned long long)(r.lo < min ? r.lo : r.hi), (unsigned long long)min,
                      (unsigned long long)max);
    out[(*n)++] = r;
    s += len;
    if (*s == ',') {
      s++;
      if (!*s) return error_at(lx, pos + len, "%s: empty item in the list", what);
    }
  }
  return CUBERT_OK;
}

static cubert_status parse_kernels(lexer *lx, const token *t, cb_fi_rule *r) {
  /* A quoted value is one pattern, commas and all. */
  const char *s = t->text;
  r->nkernels = 0;
  for (;;) {
    const char *end = t->quoted ? NULL : strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    size_t pos = t->pos + (t->quoted ? 1 : 0) + (size_t)(s - t->text);
    if (len == 0) return error_at(lx, pos, "kernel: empty name");
    if (r->nkernels == CB_FI_MAX_LIST) return error_at(lx, pos, "kernel: at most %d names", CB_FI_MAX_LIST);
    if (len >= CB_FI_NAME_MAX) return error_at(lx, pos, "kernel: name longer than %d bytes", CB_FI_NAME_MAX - 1);
    const char *star = memchr(s, '*', len);
    if (star && star != s + len - 1)
      return error_at(lx, pos + (size_t)(star - s), "kernel: `*` may only end a name (a prefix)");
    memcpy(r->kernels[r->nkernels], s, len);
    r->kernels[r->nkernels][len] = '\0';
    r->nkernels++;
    if (!end) break;
    s = end + 1;
    if (!*s) return error_at(lx, pos + len, "kernel: empty name");
  }
  return CUBERT_OK;
}

static cubert_status parse_pairs(lexer *lx, const token *t, cb_fi_rule *r) {
  const char *s = t->text;
  r->npairs = 0;
  for (;;) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    size_t pos = t->pos + (t->quoted ? 1 : 0) + (size_t)(s - t->text);
    if (r->npairs == CB_FI_MAX_LIST) return error_at(lx, pos, "pair: at most %d classes", CB_FI_MAX_LIST);
    size_t k = 0;
    for (; k < NCLASSES; k++) {
      const char *c = pair_class_names[k];
      if (strlen(c) != len) continue;
      size_t j = 0;
      for (; j < len; j++) {
        char x = s[j];
        if (x >= 'a' && x <= 'z') x = (char)(x - 'a' + 'A');
        if (x != c[j]) break;
      }
      if (j == len) break;
    }
    if (k == NCLASSES)
      return error_at(lx, pos, "pair: unknown class `%.*s` (expected SELF, XGMI, NVLINK, PIX, PXB, PHB, NODE or SYS)",
                      (int)len, s);
    cb_fi_copy(r->pairs[r->npairs++], CB_FI_CLASS_MAX, pair_class_names[k]);
    if (!end) break;
    s = end + 1;
  }
  return CUBERT_OK;
}

static cubert_status parse_fault(lexer *lx, const token *t, cb_fi_rule *r) {
  char name[VALUE_MAX];
  cb_fi_copy(name, sizeof name, t->text);
  char *colon = strchr(name, ':');
  if (colon) *colon = '\0';
  size_t k = 0;
  for (; k < CUBERT_FAULT_KIND_COUNT_; k++)
    if (word_eq(name, fault_names[k])) break;
  if (k == CUBERT_FAULT_KIND_COUNT_) {
    if (word_eq(name, "fail-before-write")) k = CUBERT_FAULT_FAIL;
    else if (word_eq(name, "lost")) k = CUBERT_FAULT_DEVICE_LOST;
    else
      return error_at(lx, t->pos,
                      "fault: unknown fault `%s` (expected fail, fail-before-write, scribble, partial, oom, "
                      "compile-error, device-lost, async, async-scribble or async-device-lost)",
                      name);
  }
  r->fault = (cubert_fault_kind)k;
  if (colon) {
    size_t pos = t->pos + (t->quoted ? 1 : 0) + (size_t)(colon + 1 - name);
    if (r->fault != CUBERT_FAULT_SCRIBBLE && r->fault != CUBERT_FAULT_PARTIAL &&
        r->fault != CUBERT_FAULT_ASYNC_SCRIBBLE)
      return error_at(lx, pos, "fault: `%s` takes no fraction", fault_names[k]);
    if (strlen(colon + 1) >= CB_FI_LEXEME_MAX) return error_at(lx, pos, "fault: fraction too long");
    cubert_status st = parse_decimal(lx, colon + 1, pos, "fault fraction", 0.0, 1.0, &r->fraction);
    if (st != CUBERT_OK) return st;
    if (r->fraction == 0.0 && r->fault != CUBERT_FAULT_PARTIAL)
      return error_at(lx, pos, "fault: a scribble fraction must be above 0");
    cb_fi_copy(r->fraction_text, sizeof r->fraction_text, colon + 1);
  }
  return CUBERT_OK;
}

static cubert_status parse_status(lexer *lx, const token *t, cb_fi_rule *r) {
  const char *s = t->text;
  if (strncmp(s, "CUBERT_", 7) == 0 || strncmp(s, "cubert_", 7) == 0) s += 7;
  for (size_t k = 1; k < NSTATUS; k++) /* 0 is OK: not a failure */
    if (word_eq(s, status_names[k])) {
      r->status = (cubert_status)k;
      return CUBERT_OK;
    }
  return error_at(lx, t->pos, "status: `%s` is not an error status (e.g. ERR_LAUNCH, ERR_COPY, ERR_BACKEND)",
                  t->text);
}

/* ------------------------------------------------------------ statements */

enum { K_FAULT, K_KERNEL, K_DEVICE, K_PEER, K_STREAM, K_PAIR, K_NTH, K_EVERY, K_FIRST, K_AFTER, K_PROB,
       K_SEED, K_TIMES, K_STATUS, K_RANK, K_COUNT_ };
static const char *const key_names[K_COUNT_] = {"fault", "kernel", "device", "peer", "stream",
                                                "pair",  "nth",    "every",  "first", "after",
                                                "prob",  "seed",   "times",  "status", "rank"};

/* The operations of the MPI component's rules (mpi/inject.c). */
static bool is_mpi_op(const char *name) { return word_eq(name, "send") || word_eq(name, "recv"); }

static cubert_status parse_ops(lexer *lx, const token *t, uint32_t *ops) {
  const char *s = t->text;
  for (;;) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    size_t pos = t->pos + (size_t)(s - t->text);
    char name[VALUE_MAX];
    memcpy(name, s, len);
    name[len] = '\0';
    uint32_t op = 0;
    if (word_eq(name, "*") || word_eq(name, "any")) op = CB_FI_OP_ALL;
    else if (word_eq(name, "work")) op = CB_FI_OP_WORK;
    else
      for (size_t k = 0; k < NOPS; k++)
        if (word_eq(name, op_names[k].name)) op = op_names[k].op;
    if (!op) {
      if (len == 0) return error_at(lx, pos, "empty operation name in the list");
      if (is_mpi_op(name))
        return error_at(lx, pos,
                        "`%s` is an operation of the MPI component (libcubert_mpi), not of the runtime: "
                        "give it a rule of its own (`send|recv ... fault=...`)",
                        name);
      return error_at(lx, pos,
                      "unknown operation `%s` (expected launch, write, read, fill, copy, copy_peer, "
                      "peer_write, alloc, compile, sync, peer_enable, peer_can_access, stream_create, "
                      "event_record, stream_wait, device_open, link_info, work or *)",
                      name);
    }
    *ops |= op;
    if (!end) return CUBERT_OK;
    s = end + 1;
  }
}

static const char *first_op_name(uint32_t ops) {
  for (size_t k = 0; k < NOPS; k++)
    if (ops & op_names[k].op) return op_names[k].name;
  return "?";
}

static cubert_status parse_rule(lexer *lx, const token *first, cb_fi_rule *r) {
  memset(r, 0, sizeof *r);
  r->fault = CUBERT_FAULT_FAIL;
  r->fraction = 0.5;
  cubert_status st = parse_ops(lx, first, &r->ops);
  if (st != CUBERT_OK) return st;
  size_t ops_pos = first->pos;
  for (;;) {
    skip_blank(lx);
    if (lx->i >= lx->n || lx->s[lx->i] != '|') break;
    lx->i++;
    skip_blank(lx);
    token t;
    if ((st = read_token(lx, &t, false, "an operation after `|`")) != CUBERT_OK) return st;
    if ((st = parse_ops(lx, &t, &r->ops)) != CUBERT_OK) return st;
  }

  size_t key_pos[K_COUNT_];
  bool seen[K_COUNT_] = {false};
  for (;;) {
    skip_blank(lx);
    if (at_statement_end(lx)) break;
    token key, value;
    if ((st = read_token(lx, &key, false, "a field (key=value)")) != CUBERT_OK) return st;
    size_t k = 0;
    for (; k < K_COUNT_; k++)
      if (word_eq(key.text, key_names[k])) break;
    if (k == K_COUNT_) {
      bool is_op = false;
      for (size_t j = 0; j < NOPS; j++) is_op |= word_eq(key.text, op_names[j].name);
      if (is_op) return error_at(lx, key.pos, "operations are joined with `|`: write `...|%s`", key.text);
      return error_at(lx, key.pos,
                      "unknown field `%s` (expected fault, kernel, device, peer, stream, pair, rank, nth, "
                      "every, first, after, prob, seed, times or status)",
                      key.text);
    }
    if (seen[k]) return error_at(lx, key.pos, "`%s` given twice", key_names[k]);
    seen[k] = true;
    key_pos[k] = key.pos;
    skip_blank(lx);
    if (lx->i >= lx->n || lx->s[lx->i] != '=')
      return error_at(lx, lx->i, "expected `=` after `%s`", key_names[k]);
    lx->i++;
    skip_blank(lx);
    if ((st = read_token(lx, &value, true, "a value")) != CUBERT_OK) return st;
    if (value.len == 0) return error_at(lx, value.pos, "`%s`: empty value", key_names[k]);
    const char *v = value.text;
    size_t vp = value.pos + (value.quoted ? 1 : 0);
    switch (k) {
    case K_FAULT: st = parse_fault(lx, &value, r); break;
    case K_KERNEL: st = parse_kernels(lx, &value, r); break;
    case K_DEVICE: st = parse_ranges(lx, &value, "device", 0, INT32_MAX, r->devices, &r->ndevices); break;
    case K_PEER: st = parse_ranges(lx, &value, "peer", 0, INT32_MAX, r->peers, &r->npeers); break;
    case K_RANK: st = parse_ranges(lx, &value, "rank", 0, INT32_MAX, r->ranks, &r->nranks); break;
    case K_STREAM: st = parse_ranges(lx, &value, "stream", 1, UINT64_MAX, r->streams, &r->nstreams); break;
    case K_PAIR: st = parse_pairs(lx, &value, r); break;
    case K_NTH: st = parse_u64(lx, v, vp, "nth", &r->nth); break;
    case K_EVERY: st = parse_u64(lx, v, vp, "every", &r->every); break;
    case K_FIRST: st = parse_u64(lx, v, vp, "first", &r->first); break;
    case K_AFTER: st = parse_u64(lx, v, vp, "after", &r->after), r->has_after = true; break;
    case K_TIMES: st = parse_u64(lx, v, vp, "times", &r->times); break;
    case K_SEED: st = parse_u64(lx, v, vp, "seed", &r->seed), r->has_seed = true; break;
    case K_PROB:
      if (value.len >= CB_FI_LEXEME_MAX) return error_at(lx, vp, "prob: number too long");
      st = parse_decimal(lx, v, vp, "prob", 0.0, 1.0, &r->prob);
      r->has_prob = true;
      cb_fi_copy(r->prob_text, sizeof r->prob_text, v);
      break;
    case K_STATUS: st = parse_status(lx, &value, r); break;
    }
    if (st != CUBERT_OK) return st;
    if ((k == K_NTH && r->nth == 0) || (k == K_EVERY && r->every == 0) || (k == K_FIRST && r->first == 0) ||
        (k == K_TIMES && r->times == 0))
      return error_at(lx, vp, "%s: must be at least 1", key_names[k]);
  }

  /* What only makes sense together. */
  uint32_t outside = r->ops & ~fault_applies(r->fault);
  if (outside) {
    size_t at = seen[K_FAULT] ? key_pos[K_FAULT] : ops_pos;
    return error_at(lx, at, "fault `%s` does not apply to %s", fault_names[r->fault],
                    first_op_name(outside));
  }
  if (seen[K_KERNEL] && !(r->ops & CB_FI_OP_KERNEL))
    return error_at(lx, key_pos[K_KERNEL], "kernel= needs launch, compile or peer_write: no other call has a kernel");
  if (seen[K_STREAM] && !(r->ops & CB_FI_OP_STREAMED))
    return error_at(lx, key_pos[K_STREAM], "stream= needs an operation made on a stream");
  if (seen[K_PAIR] && !(r->ops & CB_FI_OP_PAIRED))
    return error_at(lx, key_pos[K_PAIR], "pair= needs an operation between two devices");
  if (seen[K_PEER] && !(r->ops & CB_FI_OP_PAIRED))
    return error_at(lx, key_pos[K_PEER], "peer= needs an operation between two devices");
  if (seen[K_SEED] && !r->has_prob)
    return error_at(lx, key_pos[K_SEED], "seed= without prob= draws nothing");
  if (seen[K_STATUS] &&
      (r->fault == CUBERT_FAULT_OOM || r->fault == CUBERT_FAULT_COMPILE || r->fault == CUBERT_FAULT_DEVICE_LOST))
    return error_at(lx, key_pos[K_STATUS], "status= cannot change the status of fault `%s`",
                    fault_names[r->fault]);
  return CUBERT_OK;
}

static cubert_status append(cb_fi_parsed *out, size_t *cap, const cb_fi_rule *r) {
  if (out->count == *cap) {
    cb_fi_rule *n = cb_array_grow(out->rules, *cap, out->count + 1, sizeof *n, cap);
    if (!n) return CUBERT_ERR_OUT_OF_MEMORY;
    out->rules = n;
  }
  out->rules[out->count++] = *r;
  return CUBERT_OK;
}

cubert_status cb_fi_parse(const char *text, size_t len, const char *source, cb_fi_parsed *out,
                          cubert_faultinj_diag *diag) {
  memset(out, 0, sizeof *out);
  lexer lx = {text, len, 0, 1, 0, source ? source : "api", diag};
  if (diag) memset(diag, 0, sizeof *diag);
  if (!text && len) return error_at(&lx, 0, "no text");
  size_t cap = 0;
  cb_fi_rule *r = cb_malloc(sizeof *r); /* large: keep it off the stack */
  cubert_status st = r ? CUBERT_OK : CUBERT_ERR_OUT_OF_MEMORY;
  while (st == CUBERT_OK && lx.i < lx.n) {
    skip_blank(&lx);
    if (lx.i >= lx.n) break;
    char c = lx.s[lx.i];
    if (c == '\n') {
      lx.i++;
      lx.line++;
      lx.line_start = lx.i;
      continue;
    }
    if (c == ';') {
      lx.i++;
      continue;
    }
    if (c == '#') {
      while (lx.i < lx.n && lx.s[lx.i] != '\n') lx.i++;
      continue;
    }
    token first;
    if ((st = read_token(&lx, &first, false, "an operation or `seed=`")) != CUBERT_OK) break;
    size_t after_word = lx.i;
    skip_blank(&lx);
    if (is_mpi_op(first.text)) {
      /* the MPI component's rule (its grammar, docs/cluster.md): not ours */
      while (!at_statement_end(&lx)) lx.i++;
      out->mpi_rules++;
      continue;
    }
    if (word_eq(first.text, "seed") && lx.i < lx.n && lx.s[lx.i] == '=') {
      lx.i++;
      skip_blank(&lx);
      token v;
      if ((st = read_token(&lx, &v, false, "a seed")) != CUBERT_OK) break;
      if ((st = parse_u64(&lx, v.text, v.pos, "seed", &out->seed)) != CUBERT_OK) break;
      out->has_seed = true;
    } else {
      lx.i = after_word;
      if ((st = parse_rule(&lx, &first, r)) != CUBERT_OK) break;
      if ((st = append(out, &cap, r)) != CUBERT_OK) break;
    }
    skip_blank(&lx);
    if (!at_statement_end(&lx)) st = error_at(&lx, lx.i, "expected `;` or the end of the line");
  }
  cb_free(r);
  if (st != CUBERT_OK) {
    if (st == CUBERT_ERR_OUT_OF_MEMORY && diag)
      snprintf(diag->message, sizeof diag->message, "%s: out of host memory while parsing", lx.source);
    cb_fi_parsed_free(out);
  }
  return st;
}

void cb_fi_parsed_free(cb_fi_parsed *parsed) {
  cb_free(parsed->rules);
  memset(parsed, 0, sizeof *parsed);
}

/* ------------------------------------------------------------ printing */

typedef struct outbuf {
  char *buf;
  size_t cap, len;
} outbuf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void put(outbuf *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *dst = o->len < o->cap ? o->buf + o->len : NULL;
  size_t room = o->len < o->cap ? o->cap - o->len : 0;
  int n = vsnprintf(dst, room, fmt, ap);
  va_end(ap);
  if (n > 0) o->len += (size_t)n;
}

static void put_ranges(outbuf *o, const char *key, const cb_fi_range *r, uint32_t n) {
  if (!n) return;
  put(o, " %s=", key);
  for (uint32_t i = 0; i < n; i++) {
    put(o, "%s%llu", i ? "," : "", (unsigned long long)r[i].lo);
    if (r[i].hi != r[i].lo) put(o, "-%llu", (unsigned long long)r[i].hi);
  }
}

static void put_kernel(outbuf *o, const char *name) {
  bool plain = true;
  for (const char *p = name; *p; p++) plain &= is_word_byte((unsigned char)*p) && *p != ',';
  if (plain) {
    put(o, "%s", name);
    return;
  }
  put(o, "\"");
  for (const char *p = name; *p; p++) put(o, "%s%c", (*p == '"' || *p == '\\') ? "\\" : "", *p);
  put(o, "\"");
}

size_t cb_fi_rule_format(const cb_fi_rule *r, char *buf, size_t capacity) {
  outbuf o = {buf, capacity, 0};
  if (capacity) buf[0] = '\0';
  if ((r->ops & CB_FI_OP_ALL) == CB_FI_OP_ALL) {
    put(&o, "*");
  } else {
    bool first = true;
    for (size_t k = 0; k < NOPS; k++)
      if (r->ops & op_names[k].op) put(&o, "%s%s", first ? "" : "|", op_names[k].name), first = false;
  }
  if (r->nkernels) {
    /* Only a single name can need quotes: a quoted value is one pattern, and
     * names from a bare list hold nothing a bare word cannot. */
    put(&o, " kernel=");
    for (uint32_t i = 0; i < r->nkernels; i++) {
      if (i) put(&o, ",");
      if (r->nkernels == 1) put_kernel(&o, r->kernels[i]);
      else put(&o, "%s", r->kernels[i]);
    }
  }
  put_ranges(&o, "device", r->devices, r->ndevices);
  put_ranges(&o, "peer", r->peers, r->npeers);
  put_ranges(&o, "rank", r->ranks, r->nranks);
  put_ranges(&o, "stream", r->streams, r->nstreams);
  if (r->npairs) {
    put(&o, " pair=");
    for (uint32_t i = 0; i < r->npairs; i++) put(&o, "%s%s", i ? "," : "", r->pairs[i]);
  }
  if (r->nth) put(&o, " nth=%llu", (unsigned long long)r->nth);
  if (r->every) put(&o, " every=%llu", (unsigned long long)r->every);
  if (r->first) put(&o, " first=%llu", (unsigned long long)r->first);
  if (r->has_after) put(&o, " after=%llu", (unsigned long long)r->after);
  if (r->has_prob) put(&o, " prob=%s", r->prob_text);
  if (r->has_seed) put(&o, " seed=%llu", (unsigned long long)r->seed);
  if (r->times) put(&o, " times=%llu", (unsigned long long)r->times);
  put(&o, " fault=%s", fault_names[r->fault < CUBERT_FAULT_KIND_COUNT_ ? r->fault : 0]);
  if (r->fraction_text[0]) put(&o, ":%s", r->fraction_text);
  if (r->status != CUBERT_OK && (size_t)r->status < NSTATUS) put(&o, " status=%s", status_names[r->status]);
  return o.len;
}
