/* tools/faultinj/scenario.c: the scenario file parser, the embedded suite, pair
 * selection from the topology, and the suite runner (tools/faultinj/scenario.h).
 *
 * The parser checks what it can before anything runs: every view is made
 * before it is used, sizes match where a copy needs them, a peer buffer is
 * shared, `!` faults suit their step, and `fault` rule texts parse (by the
 * fault layer's own parser; its column is mapped back into the file). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tools/faultinj/scenario.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "faultinj/rules.h"
#include "tools/faultinj/scenarios_embedded.h"

#define MAX_ROLES 8
#define MAX_TOKENS 32

/* ------------------------------------------------------------ tokens */

typedef struct tok {
  const char *p;
  int len;
  int col;      /* 1-based */
  bool quoted;  /* "..." (p/len without the quotes, escapes kept) */
} tok;

typedef struct vstate {
  bool defined;
  int role;
  uint64_t size;
  int alloc;      /* static allocation id, for `shared` */
} vstate;

typedef struct parser {
  const char *source;
  int line;
  char *err;
  size_t errcap;
  bool failed;
  cb_fi_suite got;        /* scenarios of this text */
  cb_fi_program *cur;
  bool steps_started;
  vstate *vs;
  int nvs;
  bool *shared;           /* by static allocation id */
  int nallocs;
} parser;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void perr(parser *P, int col, const char *fmt, ...) {
  if (P->failed) return;
  P->failed = true;
  char what[512], shown[512 * 4];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  /* What it quotes from the file may be anything: bytes that are not
   * printable ASCII are shown as \xNN, never echoed raw. */
  size_t o = 0;
  for (const unsigned char *c = (const unsigned char *)what; *c && o + 5 < sizeof shown; c++) {
    if (*c >= 0x20 && *c < 0x7f) shown[o++] = (char)*c;
    else o += (size_t)snprintf(shown + o, sizeof shown - o, "\\x%02x", *c);
  }
  shown[o] = '\0';
  snprintf(P->err, P->errcap, "%s:%d:%d: %s", P->source, P->line, col, shown);
}

/* The first byte of a line that is not text (a control byte other than tab
 * and carriage return): its 1-based column, 0 when there is none. */
static int binary_column(const char *line, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)line[i];
    if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) return (int)i + 1;
  }
  return 0;
}

static bool tok_is(const tok *t, const char *w) {
  return !t->quoted && (size_t)t->len == strlen(w) && strncmp(t->p, w, (size_t)t->len) == 0;
}

static int tokenize(parser *P, const char *line, size_t len, tok *t, int cap) {
  int n = 0;
  size_t i = 0;
  while (i < len) {
    char c = line[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      i++;
      continue;
    }
    if (c == '#' && !(i + 1 < len && line[i + 1] >= '0' && line[i + 1] <= '9')) break; /* `#3` names an injection */
    if (n == cap) {
      perr(P, (int)i + 1, "too many words on one line (at most %d)", cap);
      return -1;
    }
    if (c == '"') {
      size_t j = i + 1;
      while (j < len && line[j] != '"') j += line[j] == '\\' && j + 1 < len ? 2 : 1;
      if (j >= len) {
        perr(P, (int)i + 1, "a quoted text that never ends");
        return -1;
      }
      t[n++] = (tok){line + i + 1, (int)(j - i - 1), (int)i + 1, true};
      i = j + 1;
      continue;
    }
    size_t j = i;
    while (j < len && line[j] != ' ' && line[j] != '\t' && line[j] != '\r' &&
           !(line[j] == '#' && j > i && !(j + 1 < len && line[j + 1] >= '0' && line[j + 1] <= '9')))
      j++;
    t[n++] = (tok){line + i, (int)(j - i), (int)i + 1, false};
    i = j;
  }
  return n;
}

static bool parse_u64(const tok *t, uint64_t *v) {
  if (t->quoted || t->len == 0) return false;
  const char *p = t->p, *e = t->p + t->len;
  int base = 10;
  if (t->len > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
  }
  uint64_t n = 0;
  if (p == e) return false;
  for (; p < e; p++) {
    int d;
    if (*p >= '0' && *p <= '9') d = *p - '0';
    else if (base == 16 && *p >= 'a' && *p <= 'f') d = *p - 'a' + 10;
    else if (base == 16 && *p >= 'A' && *p <= 'F') d = *p - 'A' + 10;
    else return false;
    if (n > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return false;
    n = n * (uint64_t)base + (uint64_t)d;
  }
  *v = n;
  return true;
}

static bool need_u64(parser *P, const tok *t, const char *what, uint64_t max, uint64_t *v) {
  if (!parse_u64(t, v) || *v > max) {
    perr(P, t->col, "%s: expected a number up to %" PRIu64 ", found `%.*s`", what, max, t->len, t->p);
    return false;
  }
  return true;
}

/* A decimal fraction 0..1, read without the locale: the digits as an
 * integer over a power of ten, one correctly rounded division (0.3 reads as
 * the double nearest 3/10, as strtod would). */
static bool parse_fraction(const char *p, int len, double *v) {
  uint64_t mant = 0, scale = 1;
  bool dot = false, digits = false;
  for (int i = 0; i < len; i++) {
    if (p[i] == '.' && !dot) {
      dot = true;
      continue;
    }
    if (p[i] < '0' || p[i] > '9' || mant > 100000000000000ull) return false;
    digits = true;
    mant = mant * 10 + (uint64_t)(p[i] - '0');
    if (dot) scale *= 10;
  }
  if (!digits || mant > scale) return false;
  *v = (double)mant / (double)scale;
  return true;
}

/* ------------------------------------------------------------ names */

static bool valid_name(const tok *t) {
  if (t->quoted || t->len == 0 || t->len > 63) return false;
  for (int i = 0; i < t->len; i++) {
    char c = t->p[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' || c == '.' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

static int role_of(parser *P, const tok *t) {
  if (t->len == 1 && t->p[0] >= 'A' && t->p[0] <= 'H') {
    int r = t->p[0] - 'A';
    if (r < P->cur->devices) return r;
    perr(P, t->col, "device %c: the scenario has `devices %d` (A..%c)", t->p[0], P->cur->devices,
         'A' + P->cur->devices - 1);
    return -1;
  }
  perr(P, t->col, "expected a device (A, B, ...), found `%.*s`", t->len, t->p);
  return -1;
}

static vstate *vs_at(parser *P, int slot) {
  if (slot >= P->nvs) {
    vstate *v = realloc(P->vs, (size_t)(slot + 1) * sizeof *v);
    if (!v) return NULL;
    memset(v + P->nvs, 0, (size_t)(slot + 1 - P->nvs) * sizeof *v);
    P->vs = v;
    P->nvs = slot + 1;
  }
  return &P->vs[slot];
}

/* A view being made: its slot. */
static int new_view(parser *P, const tok *t) {
  if (!valid_name(t)) {
    perr(P, t->col, "expected a view name (letters, digits, _ - .), found `%.*s`", t->len, t->p);
    return -1;
  }
  char name[64];
  snprintf(name, sizeof name, "%.*s", t->len, t->p);
  int slot = cb_fi_program_view(P->cur, name);
  if (slot < 0 || !vs_at(P, slot)) {
    perr(P, t->col, "out of memory");
    return -1;
  }
  return slot;
}

/* A view in use: it must exist. */
static int old_view(parser *P, const tok *t) {
  char name[64];
  snprintf(name, sizeof name, "%.*s", t->len < 63 ? t->len : 63, t->p);
  for (int i = 0; i < P->cur->nviews; i++)
    if (strcmp(P->cur->views[i], name) == 0 && i < P->nvs && P->vs[i].defined) return i;
  perr(P, t->col, "no view `%s` here (alloc, create or slice makes one; release ends it)", name);
  return -1;
}

static int new_alloc(parser *P) {
  bool *v = realloc(P->shared, (size_t)(P->nallocs + 1) * sizeof *v);
  if (!v) return -1;
  P->shared = v;
  v[P->nallocs] = false;
  return P->nallocs++;
}

/* ------------------------------------------------------------ faults */

static const struct {
  const char *name;
  cubert_fault_kind kind;
} fault_names[] = {
    {"fail", CUBERT_FAULT_FAIL},         {"fail-before-write", CUBERT_FAULT_FAIL},
    {"scribble", CUBERT_FAULT_SCRIBBLE}, {"partial", CUBERT_FAULT_PARTIAL},
    {"oom", CUBERT_FAULT_OOM},           {"compile-error", CUBERT_FAULT_COMPILE},
    {"device-lost", CUBERT_FAULT_DEVICE_LOST}, {"lost", CUBERT_FAULT_DEVICE_LOST},
    {"async", CUBERT_FAULT_ASYNC},       {"async-scribble", CUBERT_FAULT_ASYNC_SCRIBBLE},
    {"async-device-lost", CUBERT_FAULT_ASYNC_DEVICE_LOST},
};

static bool fault_allowed(cb_fi_step_kind k, cubert_fault_kind f) {
  switch (k) {
  case CB_FI_ALLOC:
    return f == CUBERT_FAULT_OOM || f == CUBERT_FAULT_DEVICE_LOST;
  case CB_FI_CREATE:
    return f != CUBERT_FAULT_COMPILE;
  case CB_FI_WRITE:
  case CB_FI_FILL:
  case CB_FI_COPY:
  case CB_FI_SWRITE:
  case CB_FI_SCOPY:
    return f != CUBERT_FAULT_OOM && f != CUBERT_FAULT_COMPILE;
  case CB_FI_LAUNCH:
    return f != CUBERT_FAULT_OOM && f != CUBERT_FAULT_PARTIAL;
  case CB_FI_SYNC:
    return f == CUBERT_FAULT_DEVICE_LOST || f == CUBERT_FAULT_FAIL;
  default:
    return false;
  }
}

/* `! KIND[:F]` from token i on; returns the next token index. */
static int parse_bang(parser *P, cb_fi_step *s, const tok *t, int i, int n) {
  tok f = t[i];
  f.p++;
  f.len--;
  f.col++;
  if (f.len == 0) {
    if (i + 1 >= n) {
      perr(P, t[i].col, "`!` needs a fault after it (fail, scribble, partial, oom, ...)");
      return -1;
    }
    f = t[++i];
  }
  int klen = f.len;
  const char *colon = memchr(f.p, ':', (size_t)f.len);
  if (colon) klen = (int)(colon - f.p);
  bool found = false;
  for (size_t k = 0; k < sizeof fault_names / sizeof fault_names[0]; k++)
    if ((size_t)klen == strlen(fault_names[k].name) && strncmp(f.p, fault_names[k].name, (size_t)klen) == 0) {
      s->fault = fault_names[k].kind;
      found = true;
    }
  if (!found) {
    perr(P, f.col,
         "unknown fault `%.*s` (expected fail, scribble, partial, oom, compile-error, device-lost, async, "
         "async-scribble or async-device-lost)",
         klen, f.p);
    return -1;
  }
  if (colon) {
    bool takes = s->fault == CUBERT_FAULT_SCRIBBLE || s->fault == CUBERT_FAULT_PARTIAL ||
                 s->fault == CUBERT_FAULT_ASYNC_SCRIBBLE;
    if (!takes || !parse_fraction(colon + 1, f.len - klen - 1, &s->fraction)) {
      perr(P, f.col + klen + 1, takes ? "expected a share from 0 to 1 after `:`" : "this fault takes no `:share`");
      return -1;
    }
  }
  if (!fault_allowed(s->kind, s->fault)) {
    perr(P, f.col, "a `%s` fault cannot act on this step", cubert_fault_kind_name(s->fault));
    return -1;
  }
  s->has_fault = true;
  return i + 1;
}

/* Trailing `stream N` and `! FAULT` of a step, from token i. */
static bool parse_tail(parser *P, cb_fi_step *s, const tok *t, int i, int n, bool streamed, bool faults) {
  while (i < n && !P->failed) {
    if (streamed && tok_is(&t[i], "stream")) {
      uint64_t v;
      if (i + 1 >= n) {
        perr(P, t[i].col, "`stream` needs a number");
        return false;
      }
      if (!need_u64(P, &t[i + 1], "stream", (uint64_t)P->cur->streams, &v)) return false;
      if (v == 0) {
        perr(P, t[i + 1].col, "streams count from 1");
        return false;
      }
      s->stream = (int)v;
      i += 2;
    } else if (faults && t[i].len >= 1 && t[i].p[0] == '!' && !t[i].quoted) {
      if ((i = parse_bang(P, s, t, i, n)) < 0) return false;
    } else {
      perr(P, t[i].col, "unexpected `%.*s`", t[i].len, t[i].p);
      return false;
    }
  }
  return !P->failed;
}

/* u32 X | pattern S, from token i; returns the next index. */
static int parse_data(parser *P, cb_fi_step *s, const tok *t, int i, int n) {
  if (i + 1 < n && tok_is(&t[i], "u32")) {
    uint64_t v;
    if (!need_u64(P, &t[i + 1], "u32", UINT32_MAX, &v)) return -1;
    s->value = (uint32_t)v;
    return i + 2;
  }
  if (i + 1 < n && tok_is(&t[i], "pattern")) {
    if (!need_u64(P, &t[i + 1], "pattern", UINT64_MAX, &s->seed)) return -1;
    s->pattern = true;
    return i + 2;
  }
  perr(P, i < n ? t[i].col : (int)(t[n - 1].col + t[n - 1].len), "expected `u32 VALUE` or `pattern SEED`");
  return -1;
}

static bool expect_word(parser *P, const tok *t, int i, int n, const char *w) {
  if (i < n && tok_is(&t[i], w)) return true;
  if (i < n)
    perr(P, t[i].col, "expected `%s`, found `%.*s`", w, t[i].len, t[i].p);
  else
    perr(P, n ? t[n - 1].col + t[n - 1].len : 1, "expected `%s` at the end of the line", w);
  return false;
}

static bool check_size(parser *P, const tok *t, uint64_t size) {
  if (size == 0 || size % 4 || size > (64u << 20)) {
    perr(P, t->col, "size %" PRIu64 ": a positive multiple of 4, at most 64 MiB", size);
    return false;
  }
  return true;
}

/* ------------------------------------------------------------ statements */

static void step_alloc(parser *P, cb_fi_step *s, const tok *t, int n) {
  /* alloc V on D size N ... / create V on D size N DATA ... */
  if (n < 6) {
    perr(P, t[0].col, "%s V on D size N%s", s->kind == CB_FI_ALLOC ? "alloc" : "create",
         s->kind == CB_FI_ALLOC ? "" : " (u32 X | pattern S)");
    return;
  }
  int v = new_view(P, &t[1]);
  if (v < 0 || !expect_word(P, t, 2, n, "on")) return;
  int role = role_of(P, &t[3]);
  if (role < 0 || !expect_word(P, t, 4, n, "size")) return;
  if (!need_u64(P, &t[5], "size", UINT64_MAX, &s->size) || !check_size(P, &t[5], s->size)) return;
  s->view = v;
  s->device = role;
  int i = 6;
  if (s->kind == CB_FI_CREATE && (i = parse_data(P, s, t, i, n)) < 0) return;
  if (!parse_tail(P, s, t, i, n, true, true)) return;
  int a = new_alloc(P);
  P->vs[v] = (vstate){true, role, s->size, a};
}

static void step_slice(parser *P, cb_fi_step *s, const tok *t, int n) {
  /* slice V of P at OFF size N */
  if (n != 8) {
    perr(P, t[0].col, "slice V of PARENT at OFFSET size N");
    return;
  }
  if (!expect_word(P, t, 2, n, "of")) return;
  int parent = old_view(P, &t[3]);
  if (parent < 0 || !expect_word(P, t, 4, n, "at")) return;
  if (!need_u64(P, &t[5], "offset", UINT64_MAX, &s->offset) || !expect_word(P, t, 6, n, "size")) return;
  if (!need_u64(P, &t[7], "size", UINT64_MAX, &s->size)) return;
  if (s->size % 4) { /* an empty slice is fine: rule 9 checks those too */
    perr(P, t[7].col, "size %" PRIu64 ": a multiple of 4", s->size);
    return;
  }
  vstate pv = P->vs[parent];
  if (s->offset % 4 || s->offset > pv.size || s->size > pv.size - s->offset) {
    perr(P, t[5].col, "bytes %" PRIu64 "..%" PRIu64 " are not inside `%s` (%" PRIu64 " bytes, offsets multiples of 4)",
         s->offset, s->offset + s->size, P->cur->views[parent], pv.size);
    return;
  }
  int v = new_view(P, &t[1]);
  if (v < 0) return;
  s->view = v;
  s->view2 = parent;
  s->device = pv.role;
  P->vs[v] = (vstate){true, pv.role, s->size, pv.alloc};
}

static void step_write(parser *P, cb_fi_step *s, const tok *t, int n) {
  /* write V DATA ... / fill V u32 X ... */
  if (n < 3) {
    perr(P, t[0].col, s->kind == CB_FI_WRITE ? "write V (u32 X | pattern S)" : "fill V u32 X");
    return;
  }
  int v = old_view(P, &t[1]);
  if (v < 0) return;
  s->view = v;
  s->device = P->vs[v].role;
  int i = 2;
  if (s->kind == CB_FI_FILL) {
    if (!expect_word(P, t, 2, n, "u32")) return;
    uint64_t val;
    if (n < 4) {
      perr(P, t[2].col, "fill V u32 X");
      return;
    }
    if (!need_u64(P, &t[3], "u32", UINT32_MAX, &val)) return;
    s->value = (uint32_t)val;
    i = 4;
  } else if ((i = parse_data(P, s, t, i, n)) < 0) {
    return;
  }
  parse_tail(P, s, t, i, n, true, true);
}

static void step_copy(parser *P, cb_fi_step *s, const tok *t, int n) {
  if (n < 4 || !expect_word(P, t, 2, n, "to")) {
    if (!P->failed) perr(P, t[0].col, "copy SRC to DST");
    return;
  }
  int a = old_view(P, &t[1]);
  if (a < 0) return;
  int b = old_view(P, &t[3]);
  if (b < 0) return;
  if (P->vs[a].size != P->vs[b].size) {
    perr(P, t[3].col, "`%s` has %" PRIu64 " bytes, `%s` %" PRIu64 ": a copy needs equal sizes", P->cur->views[a],
         P->vs[a].size, P->cur->views[b], P->vs[b].size);
    return;
  }
  s->view = a;
  s->view2 = b;
  s->device = P->vs[b].role;
  parse_tail(P, s, t, 4, n, true, true);
}

/* SHAPE from token i: `rows R width W pitch P at OFF` (4-byte elements);
 * checked to fit view `v`. Returns the next token index, -1 on error. */
static int parse_shape(parser *P, cb_fi_step *s, const tok *t, int i, int n, int v) {
  static const char *const words[] = {"rows", "width", "pitch", "at"};
  uint64_t x[4];
  for (int k = 0; k < 4; k++, i += 2) {
    if (i + 1 >= n || !tok_is(&t[i], words[k])) {
      perr(P, i < n ? t[i].col : t[0].col, "expected `%s` (SHAPE: rows R width W pitch P at OFF, in 4-byte elements)",
           words[k]);
      return -1;
    }
    if (!need_u64(P, &t[i + 1], words[k], k == 3 ? UINT32_MAX : UINT32_MAX, &x[k])) return -1;
  }
  if (!x[0] || x[0] > CB_FIM_MAX_PIECES || !x[1] || (x[0] > 1 && x[2] < x[1])) {
    perr(P, t[0].col, "shape: rows 1..%d, width at least 1, pitch at least width", CB_FIM_MAX_PIECES);
    return -1;
  }
  uint64_t last = x[3] + (x[0] - 1) * x[2] + x[1];
  if (last * 4 > P->vs[v].size) {
    perr(P, t[0].col, "shape ends at byte %" PRIu64 ", past `%s` (%" PRIu64 " bytes)", last * 4, P->cur->views[v],
         P->vs[v].size);
    return -1;
  }
  s->rows = (uint32_t)x[0];
  s->width = (uint32_t)x[1];
  s->pitch = (uint32_t)x[2];
  s->offset = x[3];
  return i;
}

static void step_strided(parser *P, cb_fi_step *s, const tok *t, int n) {
  /* swrite V SHAPE DATA / scheck V SHAPE / scopy S to D SHAPE */
  static const char *const usage[] = {"swrite V SHAPE (u32 X | pattern S)", "scheck V SHAPE", "scopy SRC to DST SHAPE"};
  int which = s->kind == CB_FI_SWRITE ? 0 : s->kind == CB_FI_SCHECK ? 1 : 2;
  if (n < (which == 2 ? 12 : 10)) {
    perr(P, t[0].col, "%s (SHAPE: rows R width W pitch P at OFF)", usage[which]);
    return;
  }
  int v = old_view(P, &t[1]);
  if (v < 0) return;
  s->view = v;
  s->device = P->vs[v].role;
  int i = 2;
  if (which == 2) {
    if (!expect_word(P, t, 2, n, "to")) return;
    int d = old_view(P, &t[3]);
    if (d < 0) return;
    if (P->vs[d].alloc == P->vs[v].alloc) {
      perr(P, t[3].col, "scopy between views of one allocation is not supported here");
      return;
    }
    s->view2 = d;
    s->device = P->vs[d].role;
    i = 4;
    if (parse_shape(P, s, t, i, n, d) < 0) return;
  }
  if ((i = parse_shape(P, s, t, i, n, v)) < 0) return;
  if (which == 0 && (i = parse_data(P, s, t, i, n)) < 0) return;
  parse_tail(P, s, t, i, n, which != 1, which != 1);
}

static void step_launch(parser *P, cb_fi_step *s, const tok *t, int n) {
  /* launch K on D param=V ... [value=X] */
  if (n < 4) {
    perr(P, t[0].col, "launch KERNEL on D PARAM=VIEW ... [value=X]");
    return;
  }
  int k = -1;
  for (int i = 0; i < CB_FIM_KERNEL_COUNT; i++)
    if (tok_is(&t[1], cb_fim_kernel_name((cb_fim_kernel)i))) k = i;
  if (k < 0) {
    perr(P, t[1].col,
         "unknown kernel `%.*s` (fill_u32, copy_u32, checksum_u32, copy_peer_read, copy_peer_write, fail_u32, "
         "sleep_u32)",
         t[1].len, t[1].p);
    return;
  }
  s->kernel = (cb_fim_kernel)k;
  if ((k == CB_FIM_FAIL_U32 || k == CB_FIM_SLEEP_U32) && !P->cur->host_only) {
    perr(P, t[1].col, "`%s` has only a host function: the scenario needs `backend host`", cb_fim_kernel_name(s->kernel));
    return;
  }
  if (!expect_word(P, t, 2, n, "on")) return;
  int role = role_of(P, &t[3]);
  if (role < 0) return;
  s->device = role;
  uint32_t nb = cb_fim_kernel_buffers(s->kernel);
  bool has_value = false;
  int i = 4;
  for (; i < n; i++) {
    if (t[i].quoted || !memchr(t[i].p, '=', (size_t)t[i].len)) break;
    int klen = (int)((const char *)memchr(t[i].p, '=', (size_t)t[i].len) - t[i].p);
    tok val = {t[i].p + klen + 1, t[i].len - klen - 1, t[i].col + klen + 1, false};
    if (klen == 5 && strncmp(t[i].p, "value", 5) == 0) {
      uint64_t v;
      if (!need_u64(P, &val, "value", UINT32_MAX, &v)) return;
      s->value = (uint32_t)v;
      has_value = true;
      continue;
    }
    int param = -1;
    for (uint32_t j = 0; j < nb; j++)
      if ((size_t)klen == strlen(cb_fim_kernel_param(s->kernel, j)) &&
          strncmp(t[i].p, cb_fim_kernel_param(s->kernel, j), (size_t)klen) == 0)
        param = (int)j;
    if (param < 0) {
      perr(P, t[i].col, "`%s` has no parameter `%.*s`", cb_fim_kernel_name(s->kernel), klen, t[i].p);
      return;
    }
    int v = old_view(P, &val);
    if (v < 0) return;
    s->args[param] = v;
  }
  for (uint32_t j = 0; j < nb; j++)
    if (s->args[j] < 0) {
      perr(P, t[1].col, "`%s` needs %s=VIEW", cb_fim_kernel_name(s->kernel), cb_fim_kernel_param(s->kernel, j));
      return;
    }
  bool wants_value = s->kernel == CB_FIM_FILL_U32 || s->kernel == CB_FIM_FAIL_U32 || s->kernel == CB_FIM_SLEEP_U32;
  if (wants_value && !has_value) {
    perr(P, t[1].col, "`%s` needs value=X", cb_fim_kernel_name(s->kernel));
    return;
  }
  /* what the runner would otherwise have to skip */
  for (uint32_t j = 0; j < nb; j++) {
    vstate *v = &P->vs[s->args[j]];
    if (v->role == role) continue;
    if (!cb_fim_kernel_peer(s->kernel, j)) {
      perr(P, t[3].col, "`%s` is on device %c: %s=%s must be memory of device %c (use a peer kernel)",
           P->cur->views[s->args[j]], 'A' + v->role, cb_fim_kernel_param(s->kernel, j), P->cur->views[s->args[j]],
           'A' + role);
      return;
    }
    if (!P->shared[v->alloc]) {
      perr(P, t[3].col, "`%s` is memory of device %c that was never shared (`share %s` first)",
           P->cur->views[s->args[j]], 'A' + v->role, P->cur->views[s->args[j]]);
      return;
    }
  }
  if (nb == 2) {
    vstate *a = &P->vs[s->args[0]], *b = &P->vs[s->args[1]];
    if (s->kernel == CB_FIM_CHECKSUM_U32 ? b->size != 8 : a->size != b->size) {
      perr(P, t[1].col, s->kernel == CB_FIM_CHECKSUM_U32 ? "`acc` must be an 8-byte view"
                                                          : "`in` and `out` must have the same size");
      return;
    }
  }
  parse_tail(P, s, t, i, n, true, true);
}

static void step_view_only(parser *P, cb_fi_step *s, const tok *t, int n) {
  if (n != 2) {
    perr(P, t[0].col, "%.*s V", t[0].len, t[0].p);
    return;
  }
  int v = old_view(P, &t[1]);
  if (v < 0) return;
  s->view = v;
  s->device = P->vs[v].role;
  if (s->kind == CB_FI_SHARE) P->shared[P->vs[v].alloc] = true;
  if (s->kind == CB_FI_RELEASE) P->vs[v].defined = false;
}

static void step_sync(parser *P, cb_fi_step *s, const tok *t, int n) {
  if (n < 2) {
    perr(P, t[0].col, "sync D | sync all");
    return;
  }
  if (tok_is(&t[1], "all")) {
    s->device = -1;
  } else if ((s->device = role_of(P, &t[1])) < 0) {
    return;
  }
  parse_tail(P, s, t, 2, n, false, true);
  if (s->has_fault && s->device < 0) perr(P, t[1].col, "a fault needs one device: sync A ! device-lost");
}

/* Checks a `fault` text with the fault layer's parser, roles as 0, 1, ... */
static void check_rules(parser *P, const char *text, int col) {
  char sub[2048];
  size_t o = 0;
  for (const char *p = text; *p && o + 2 < sizeof sub; p++) {
    bool role = *p >= 'A' && *p <= 'H' && (p == text || p[-1] == '=' || p[-1] == ',' || p[-1] == ' ') &&
                (p[1] == '\0' || p[1] == ',' || p[1] == ' ' || p[1] == ';' || p[1] == '-');
    sub[o++] = role ? (char)('0' + (*p - 'A')) : *p;
  }
  sub[o] = '\0';
  cubert_faultinj_diag diag;
  cb_fi_parsed parsed;
  if (cb_fi_parse(sub, strlen(sub), "x", &parsed, &diag) != CUBERT_OK) {
    const char *m = diag.message;
    for (int colons = 0; *m && colons < 3; m++) colons += *m == ':';
    while (*m == ' ') m++;
    perr(P, col + (diag.column > 0 ? diag.column - 1 : 0), "fault rules: %s", m);
    return;
  }
  /* A kernel= name that none of the kernels a scenario runs has would select
   * nothing: known here, so refused (the runtime names them cubert_...). */
  for (size_t r = 0; r < parsed.count && !P->failed; r++)
    for (uint32_t i = 0; i < parsed.rules[r].nkernels && !P->failed; i++) {
      const char *item = parsed.rules[r].kernels[i];
      bool any = cb_fi_kernel_matches(item, "cubert_faultinj_scribble");
      for (int k = 0; k < CB_FIM_KERNEL_COUNT && !any; k++)
        any = cb_fi_kernel_matches(item, cb_fim_kernel_runtime_name((cb_fim_kernel)k));
      if (any) continue;
      const char *at = strstr(text, item);
      char hint[96] = "";
      for (int k = 0; k < CB_FIM_KERNEL_COUNT && !hint[0]; k++)
        if (cb_fi_kernel_matches(item, cb_fim_kernel_name((cb_fim_kernel)k)))
          snprintf(hint, sizeof hint, " (`%s` is `%s` to the runtime)", cb_fim_kernel_name((cb_fim_kernel)k),
                   cb_fim_kernel_runtime_name((cb_fim_kernel)k));
      perr(P, col + (at ? (int)(at - text) : 0),
           "fault rules: kernel=%s selects nothing: no kernel a scenario runs has that name%s", item, hint);
    }
  /* checked, not kept: a run adds them when it reaches the step */
  cb_fi_parsed_free(&parsed);
}

static const struct {
  const char *name;
  cb_fi_expect_kind kind;
} view_expects[] = {
    {"clean", CB_FI_EXPECT_CLEAN}, {"tainted", CB_FI_EXPECT_TAINTED}, {"u32", CB_FI_EXPECT_U32},
    {"u64", CB_FI_EXPECT_U64},     {"chain", CB_FI_EXPECT_CHAIN},     {"lost", CB_FI_EXPECT_VIEW_LOST},
};

static void step_expect(parser *P, cb_fi_step *s, const tok *t, int n) {
  if (n < 3) {
    perr(P, t[0].col, "expect status S | expect V clean|tainted|u32 X|u64 X|chain N|lost | expect lost D | "
                      "expect injected N");
    return;
  }
  if (tok_is(&t[1], "status")) {
    s->expect = CB_FI_EXPECT_STATUS;
    char name[64];
    snprintf(name, sizeof name, "%.*s", t[2].len < 60 ? t[2].len : 60, t[2].p);
    const char *bare = strncmp(name, "CUBERT_", 7) == 0 ? name + 7 : name;
    for (int st = 0; st < CUBERT_STATUS_COUNT_; st++) {
      const char *sn = cubert_status_name((cubert_status)st);
      if (strcmp(bare, sn) == 0 || (strncmp(sn, "ERR_", 4) == 0 && strcmp(bare, sn + 4) == 0)) {
        s->status = (cubert_status)st;
        if (n > 3) perr(P, t[3].col, "unexpected `%.*s`", t[3].len, t[3].p);
        return;
      }
    }
    perr(P, t[2].col, "unknown status `%s` (OK, TAINTED, LAUNCH, COPY, DEVICE_LOST, ...)", name);
    return;
  }
  if (tok_is(&t[1], "injected")) {
    s->expect = CB_FI_EXPECT_INJECTED;
    need_u64(P, &t[2], "injected", UINT64_MAX, &s->number);
    if (!P->failed && n > 3) perr(P, t[3].col, "unexpected `%.*s`", t[3].len, t[3].p);
    return;
  }
  if (tok_is(&t[1], "lost")) {
    s->expect = CB_FI_EXPECT_LOST;
    s->device = role_of(P, &t[2]);
    if (!P->failed && n > 3) perr(P, t[3].col, "unexpected `%.*s`", t[3].len, t[3].p);
    return;
  }
  int v = old_view(P, &t[1]);
  if (v < 0) return;
  s->view = v;
  s->device = P->vs[v].role;
  int kind = -1;
  for (size_t i = 0; i < sizeof view_expects / sizeof view_expects[0]; i++)
    if (tok_is(&t[2], view_expects[i].name)) kind = (int)view_expects[i].kind;
  if (kind < 0) {
    perr(P, t[2].col, "expected clean, tainted, u32, u64, chain or lost after the view, found `%.*s`", t[2].len,
         t[2].p);
    return;
  }
  s->expect = (cb_fi_expect_kind)kind;
  int i = 3;
  switch (s->expect) {
  case CB_FI_EXPECT_U32:
  case CB_FI_EXPECT_U64:
  case CB_FI_EXPECT_CHAIN:
    if (n < 4) {
      perr(P, t[2].col, "`%.*s` needs a number", t[2].len, t[2].p);
      return;
    }
    if (!need_u64(P, &t[3], "value", s->expect == CB_FI_EXPECT_U32 ? UINT32_MAX : UINT64_MAX, &s->number)) return;
    if (s->expect == CB_FI_EXPECT_U64 && P->vs[v].size != 8) {
      perr(P, t[1].col, "`u64` needs an 8-byte view");
      return;
    }
    i = 4;
    break;
  case CB_FI_EXPECT_TAINTED:
    while (i < n && !P->failed) {
      if (tok_is(&t[i], "by") && i + 1 < n) {
        const tok *c = &t[i + 1];
        if (c->len > 1 && c->p[0] == '#') {
          tok num = {c->p + 1, c->len - 1, c->col + 1, false};
          if (!need_u64(P, &num, "injection", UINT64_MAX, &s->number)) return;
          s->cause_kind = CB_FIM_CAUSE_INJECTION;
          i += 2;
        } else if (tok_is(c, "tag") && i + 2 < n) {
          if (!need_u64(P, &t[i + 2], "tag", UINT32_MAX, &s->number)) return;
          s->cause_kind = CB_FIM_CAUSE_TAG;
          i += 3;
        } else {
          perr(P, c->col, "expected `#N` (an injection) or `tag N` after `by`");
          return;
        }
        s->has_cause = true;
      } else if (tok_is(&t[i], "bytes") && i + 1 < n) {
        const tok *r = &t[i + 1];
        const char *dots = NULL;
        for (int k = 0; k + 1 < r->len; k++)
          if (r->p[k] == '.' && r->p[k + 1] == '.') {
            dots = r->p + k;
            break;
          }
        tok a = {r->p, dots ? (int)(dots - r->p) : 0, r->col, false};
        tok b = {dots ? dots + 2 : r->p, dots ? r->len - a.len - 2 : 0, r->col + a.len + 2, false};
        if (!dots || !parse_u64(&a, &s->range_start) || !parse_u64(&b, &s->range_end) ||
            s->range_start >= s->range_end || s->range_end > P->vs[v].size) {
          perr(P, r->col, "expected START..END inside the view's %" PRIu64 " bytes", P->vs[v].size);
          return;
        }
        s->has_range = true;
        i += 2;
      } else {
        perr(P, t[i].col, "expected `by #N`, `by tag N` or `bytes S..E`, found `%.*s`", t[i].len, t[i].p);
        return;
      }
    }
    break;
  default:
    break;
  }
  if (!P->failed && i < n) perr(P, t[i].col, "unexpected `%.*s`", t[i].len, t[i].p);
}

static void header(parser *P, const tok *t, int n) {
  cb_fi_program *p = P->cur;
  if (P->steps_started) {
    perr(P, t[0].col, "`%.*s` belongs before the first step", t[0].len, t[0].p);
    return;
  }
  uint64_t v;
  if (tok_is(&t[0], "title")) {
    if (n != 2 || !t[1].quoted) {
      perr(P, t[0].col, "title \"TEXT\"");
      return;
    }
    char *s = malloc((size_t)t[1].len + 1);
    if (!s) return;
    int o = 0;
    for (int i = 0; i < t[1].len; i++) {
      if (t[1].p[i] == '\\' && i + 1 < t[1].len) i++;
      s[o++] = t[1].p[i];
    }
    s[o] = '\0';
    free(p->title);
    p->title = s;
  } else if (tok_is(&t[0], "rule")) {
    if (n < 2) {
      perr(P, t[0].col, "rule TEXT");
      return;
    }
    const char *end = t[n - 1].p + t[n - 1].len;
    size_t len = (size_t)(end - t[1].p);
    char *s = malloc(len + 1);
    if (!s) return;
    memcpy(s, t[1].p, len);
    s[len] = '\0';
    free(p->rules);
    p->rules = s;
  } else if (tok_is(&t[0], "devices")) {
    if (n != 2 || !need_u64(P, &t[1], "devices", MAX_ROLES, &v) || v == 0) {
      if (!P->failed) perr(P, t[0].col, "devices N (1 to %d)", MAX_ROLES);
      return;
    }
    p->devices = (int)v;
  } else if (tok_is(&t[0], "streams")) {
    if (n != 2 || !need_u64(P, &t[1], "streams", 8, &v) || v == 0) {
      if (!P->failed) perr(P, t[0].col, "streams N (1 to 8)");
      return;
    }
    p->streams = (int)v;
  } else if (tok_is(&t[0], "placement")) {
    if (n != 2 || (!tok_is(&t[1], "pairs") && !tok_is(&t[1], "fixed"))) {
      perr(P, t[0].col, "placement pairs|fixed");
      return;
    }
    p->fixed = tok_is(&t[1], "fixed");
  } else if (tok_is(&t[0], "backend")) {
    if (n != 2 || (!tok_is(&t[1], "any") && !tok_is(&t[1], "host"))) {
      perr(P, t[0].col, "backend any|host");
      return;
    }
    p->host_only = tok_is(&t[1], "host");
  } else if (tok_is(&t[0], "timeout")) {
    if (n != 2 || !need_u64(P, &t[1], "timeout (ms)", 3600000, &v)) return;
    p->timeout_ms = (uint32_t)v;
  }
}

static const struct {
  const char *word;
  cb_fi_step_kind kind;
} step_words[] = {
    {"alloc", CB_FI_ALLOC},     {"create", CB_FI_CREATE},   {"slice", CB_FI_SLICE},
    {"write", CB_FI_WRITE},     {"fill", CB_FI_FILL},       {"copy", CB_FI_COPY},
    {"launch", CB_FI_LAUNCH},   {"share", CB_FI_SHARE},     {"release", CB_FI_RELEASE},
    {"sync", CB_FI_SYNC},       {"fault", CB_FI_FAULT},     {"clear-faults", CB_FI_CLEAR_FAULTS},
    {"expect", CB_FI_EXPECT},   {"swrite", CB_FI_SWRITE},   {"scheck", CB_FI_SCHECK},
    {"scopy", CB_FI_SCOPY},
};

static bool is_header(const tok *t) {
  static const char *const words[] = {"title", "rule", "devices", "streams", "placement", "backend", "timeout"};
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (tok_is(t, words[i])) return true;
  return false;
}

static void statement(parser *P, const char *line, size_t len) {
  tok t[MAX_TOKENS];
  int n = tokenize(P, line, len, t, MAX_TOKENS);
  if (n <= 0) return;
  if (tok_is(&t[0], "scenario")) {
    if (P->cur) {
      perr(P, t[0].col, "`scenario` inside scenario `%s` (missing `end`?)", P->cur->name);
      return;
    }
    if (n != 2 || !valid_name(&t[1])) {
      perr(P, n > 1 ? t[1].col : t[0].col, "scenario NAME (letters, digits, _ - .)");
      return;
    }
    cb_fi_program *v = realloc(P->got.v, (P->got.n + 1) * sizeof *v);
    if (!v) {
      perr(P, 1, "out of memory");
      return;
    }
    P->got.v = v;
    char name[64];
    snprintf(name, sizeof name, "%.*s", t[1].len, t[1].p);
    for (size_t i = 0; i < P->got.n; i++)
      if (strcmp(P->got.v[i].name, name) == 0) {
        perr(P, t[1].col, "a second scenario `%s` in this file", name);
        return;
      }
    P->cur = &P->got.v[P->got.n++];
    cb_fi_program_init(P->cur, name, P->source);
    P->cur->line = P->line;
    P->steps_started = false;
    P->nvs = 0;
    P->nallocs = 0;
    return;
  }
  if (!P->cur) {
    perr(P, t[0].col, "`%.*s` outside a scenario (start one with `scenario NAME`)", t[0].len, t[0].p);
    return;
  }
  if (tok_is(&t[0], "end")) {
    if (n != 1) perr(P, t[1].col, "unexpected `%.*s` after `end`", t[1].len, t[1].p);
    if (!P->cur->nsteps) perr(P, t[0].col, "scenario `%s` has no steps", P->cur->name);
    P->cur = NULL;
    return;
  }
  if (is_header(&t[0])) {
    header(P, t, n);
    return;
  }
  int kind = -1;
  for (size_t i = 0; i < sizeof step_words / sizeof step_words[0]; i++)
    if (tok_is(&t[0], step_words[i].word)) kind = (int)step_words[i].kind;
  if (kind < 0) {
    perr(P, t[0].col,
         "unknown statement `%.*s` (alloc, create, slice, write, fill, copy, launch, share, release, sync, fault, "
         "clear-faults, expect, swrite, scheck, scopy, end)",
         t[0].len, t[0].p);
    return;
  }
  P->steps_started = true;
  cb_fi_step *s = cb_fi_program_add(P->cur, (cb_fi_step_kind)kind);
  if (!s) {
    perr(P, 1, "out of memory");
    return;
  }
  s->line = P->line;
  switch (s->kind) {
  case CB_FI_ALLOC:
  case CB_FI_CREATE:
    step_alloc(P, s, t, n);
    break;
  case CB_FI_SLICE:
    step_slice(P, s, t, n);
    break;
  case CB_FI_WRITE:
  case CB_FI_FILL:
    step_write(P, s, t, n);
    break;
  case CB_FI_COPY:
    step_copy(P, s, t, n);
    break;
  case CB_FI_LAUNCH:
    step_launch(P, s, t, n);
    break;
  case CB_FI_SHARE:
  case CB_FI_RELEASE:
    step_view_only(P, s, t, n);
    break;
  case CB_FI_SYNC:
    step_sync(P, s, t, n);
    break;
  case CB_FI_FAULT: {
    if (n < 2) {
      perr(P, t[0].col, "fault RULES (docs/faultinj.md)");
      break;
    }
    /* the rest of the line, comment and trailing blanks off */
    const char *start = t[1].p - (t[1].quoted ? 1 : 0);
    const char *end = line + len;
    const char *hash = memchr(start, '#', (size_t)(end - start));
    if (hash) end = hash;
    while (end > start && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) end--;
    size_t tl = (size_t)(end - start);
    s->text = malloc(tl + 1);
    if (!s->text) break;
    memcpy(s->text, start, tl);
    s->text[tl] = '\0';
    s->text_column = (int)(start - line) + 1;
    check_rules(P, s->text, s->text_column);
    break;
  }
  case CB_FI_CLEAR_FAULTS:
    if (n != 1) perr(P, t[1].col, "unexpected `%.*s`", t[1].len, t[1].p);
    break;
  case CB_FI_EXPECT:
    step_expect(P, s, t, n);
    break;
  case CB_FI_SWRITE:
  case CB_FI_SCHECK:
  case CB_FI_SCOPY:
    step_strided(P, s, t, n);
    break;
  default:
    break;
  }
}

void cb_fi_suite_free(cb_fi_suite *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n; i++) cb_fi_program_free(&s->v[i]);
  free(s->v);
  s->v = NULL;
  s->n = 0;
}

cubert_status cb_fi_scenario_parse(const char *text, const char *source, cb_fi_suite *suite, char *error,
                                   size_t capacity) {
  char dummy[8];
  if (!error || !capacity) {
    error = dummy;
    capacity = sizeof dummy;
  }
  error[0] = '\0';
  parser P = {0};
  P.source = source ? source : "scenario";
  P.err = error;
  P.errcap = capacity;
  const char *p = text ? text : "";
  while (*p && !P.failed) {
    P.line++;
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    int bad = binary_column(p, len);
    if (bad) perr(&P, bad, "a control byte 0x%02x: not a scenario file (text only)", (unsigned char)p[bad - 1]);
    else statement(&P, p, len);
    p = nl ? nl + 1 : p + len;
  }
  if (!P.failed && P.cur) {
    P.line++;
    perr(&P, 1, "scenario `%s` (line %d) has no `end`", P.cur->name, P.cur->line);
  }
  if (!P.failed && P.got.n == 0) {
    P.line = 1;
    perr(&P, 1, "no scenario here (%s; a scenario starts with `scenario NAME` and ends with `end`)",
         *(text ? text : "") ? "only comments and blank lines" : "the text is empty");
  }
  free(P.vs);
  free(P.shared);
  if (P.failed) {
    cb_fi_suite_free(&P.got);
    return CUBERT_ERR_PARSE;
  }
  cb_fi_program *v = realloc(suite->v, (suite->n + P.got.n + 1) * sizeof *v);
  if (!v) {
    cb_fi_suite_free(&P.got);
    snprintf(error, capacity, "%s: out of memory", P.source);
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  suite->v = v;
  memcpy(v + suite->n, P.got.v, P.got.n * sizeof *v); /* n > 0: an empty text is refused above */
  suite->n += P.got.n;
  free(P.got.v);
  return CUBERT_OK;
}

cubert_status cb_fi_scenario_load(const char *path, cb_fi_suite *suite, char *error, size_t capacity) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(error, capacity, "%s: %s", path, strerror(errno));
    return CUBERT_ERR_IO;
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  size_t got;
  int read_errno = 0;
  while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (n + 1 == cap) {
      char *b = realloc(buf, cap * 2);
      if (!b) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = b;
      cap *= 2;
    }
  }
  bool bad = ferror(f);
  if (bad) read_errno = errno; /* EISDIR for a directory, which fopen opens */
  fclose(f);
  if (!buf || bad) {
    free(buf);
    snprintf(error, capacity, "%s: %s", path,
             !bad ? "out of memory" : read_errno ? strerror(read_errno) : "read error");
    return CUBERT_ERR_IO;
  }
  buf[n] = '\0';
  const char *nul = memchr(buf, '\0', n);
  if (nul) { /* the parser reads C strings: say where here */
    int line = 1;
    const char *start = buf;
    for (const char *c = buf; c < nul; c++)
      if (*c == '\n') {
        line++;
        start = c + 1;
      }
    snprintf(error, capacity, "%s:%d:%d: a NUL byte: not a scenario file (text only)", path, line,
             (int)(nul - start) + 1);
    free(buf);
    return CUBERT_ERR_PARSE;
  }
  cubert_status st = cb_fi_scenario_parse(buf, path, suite, error, capacity);
  free(buf);
  return st;
}

size_t cb_fi_scenario_builtin_count(void) { return (size_t)cb_fi_embedded_scenario_count; }
const char *cb_fi_scenario_builtin_name(size_t i) {
  return i < (size_t)cb_fi_embedded_scenario_count ? cb_fi_embedded_scenarios[i].name : NULL;
}
const char *cb_fi_scenario_builtin_text(size_t i) {
  return i < (size_t)cb_fi_embedded_scenario_count ? cb_fi_embedded_scenarios[i].text : NULL;
}

cubert_status cb_fi_scenario_builtin(cb_fi_suite *suite, char *error, size_t capacity) {
  for (int i = 0; i < cb_fi_embedded_scenario_count; i++) {
    char source[128];
    snprintf(source, sizeof source, "<suite>/%s", cb_fi_embedded_scenarios[i].name);
    cubert_status st = cb_fi_scenario_parse(cb_fi_embedded_scenarios[i].text, source, suite, error, capacity);
    if (st != CUBERT_OK) return st;
  }
  return CUBERT_OK;
}

/* ------------------------------------------------------------ placements */

cubert_status cb_fi_pairs(const char *backend, int host_devices, cb_fi_placement *pairs, size_t cap, size_t *count,
                          char *error, size_t ecap) {
  *count = 0;
  cubert_runtime_options o;
  cubert_runtime_options_init(&o);
  o.backends = backend ? backend : "host";
  o.host_devices = host_devices;
  if (!o.host_devices && !getenv("CUBERT_HOST_NODE")) o.host_devices = 4;
  o.host_memory = 64ull << 20;
  o.faults = "";
  o.no_faultinj = true;
  cubert_runtime *rt = NULL;
  cubert_status st = cubert_runtime_create(&o, &rt);
  if (st != CUBERT_OK) {
    snprintf(error, ecap, "creating a %s runtime: %s: %s", o.backends, cubert_status_name(st),
             cubert_last_error_message());
    return st;
  }
  int n = cubert_runtime_device_count(rt);
  cubert_topology *topo = NULL;
  if (n >= 2 && (st = cubert_topology_create(rt, NULL, &topo)) != CUBERT_OK) {
    snprintf(error, ecap, "the topology of the %s devices: %s: %s", o.backends, cubert_status_name(st),
             cubert_last_error_message());
    cubert_runtime_destroy(rt);
    return st;
  }
  if (n == 1 && cap) {
    cb_fi_placement *p = &pairs[(*count)++];
    memset(p, 0, sizeof *p);
    snprintf(p->pair_class, sizeof p->pair_class, "SELF");
    p->devices[0] = 0;
    p->devices[1] = -1;
    p->ndevices = 1;
  }
  /* near to far, the first pair of each class */
  for (int cls = CUBERT_LINK_XGMI; n >= 2 && cls <= CUBERT_LINK_UNKNOWN && *count < cap; cls++) {
    int fa = -1, fb = -1;
    for (int a = 0; a < n && fa < 0; a++)
      for (int b = a + 1; b < n && fa < 0; b++) {
        cubert_topology_link l;
        if (cubert_topology_pair(topo, a, b, &l) == CUBERT_OK && (int)l.link_class == cls) {
          fa = a;
          fb = b;
        }
      }
    if (fa < 0) continue;
    cb_fi_placement *p = &pairs[(*count)++];
    memset(p, 0, sizeof *p);
    const char *name = cubert_topology_pair_name(topo, fa, fb);
    snprintf(p->pair_class, sizeof p->pair_class, "%s", name ? name : cubert_link_class_name((cubert_link_class)cls));
    p->devices[0] = fa;
    p->devices[1] = fb;
    int k = 2;
    for (int d = 0; d < n && k < 8; d++)
      if (d != fa && d != fb) p->devices[k++] = d;
    for (; k < 8; k++) p->devices[k] = -1;
    p->ndevices = n;
  }
  cubert_topology_destroy(topo);
  cubert_runtime_destroy(rt);
  if (*count == 0) {
    snprintf(error, ecap, "no %s device", o.backends);
    return CUBERT_ERR_NO_DEVICE;
  }
  return CUBERT_OK;
}

/* ------------------------------------------------------------ the suite */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void cb_fi_suite_report_free(cb_fi_suite_report *r) {
  if (!r) return;
  for (size_t i = 0; i < r->nruns; i++) cb_fi_result_free(&r->runs[i].result);
  free(r->runs);
  memset(r, 0, sizeof *r);
}

cubert_status cb_fi_suite_run(const cb_fi_suite *suite, const cb_fi_suite_config *cfg, cb_fi_suite_report *rep,
                              char *error, size_t ecap) {
  memset(rep, 0, sizeof *rep);
  cb_fi_suite_config c = {0};
  if (cfg) c = *cfg;
  const char *backend = c.backend ? c.backend : "host";
  snprintf(rep->backend, sizeof rep->backend, "%s", backend);
  double t0 = now_s();
  cubert_status st = cb_fi_pairs(backend, c.host_devices, rep->pairs, CUBERT_LINK_CLASS_COUNT, &rep->npairs, error, ecap);
  if (st != CUBERT_OK) return st;
  size_t cap = suite->n * (rep->npairs + 1);
  rep->runs = calloc(cap ? cap : 1, sizeof *rep->runs);
  if (!rep->runs) return CUBERT_ERR_OUT_OF_MEMORY;
  int ndev = rep->pairs[0].ndevices;
  for (size_t i = 0; i < suite->n && !rep->hang; i++) {
    const cb_fi_program *p = &suite->v[i];
    if (c.only && !strstr(p->name, c.only)) continue;
    size_t nplace = p->fixed ? 1 : rep->npairs;
    for (size_t k = 0; k < nplace && !rep->hang; k++) {
      cb_fi_scenario_run *run = &rep->runs[rep->nruns++];
      run->program = p;
      if (p->fixed) {
        memset(&run->placement, 0, sizeof run->placement);
        snprintf(run->placement.pair_class, sizeof run->placement.pair_class, "fixed");
        for (int d = 0; d < 8; d++) run->placement.devices[d] = d;
        run->placement.ndevices = ndev;
      } else {
        run->placement = rep->pairs[k];
      }
      char devs[64] = "";
      for (int d = 0; d < p->devices && d < 8; d++) {
        size_t l = strlen(devs);
        snprintf(devs + l, sizeof devs - l, "%s%c=%d", d ? " " : "", 'A' + d, run->placement.devices[d]);
      }
      snprintf(run->label, sizeof run->label, "%s %s (%s)", run->placement.pair_class, devs, backend);
      bool missing = false;
      for (int d = 0; d < p->devices && d < 8; d++) missing |= run->placement.devices[d] < 0;
      if ((p->host_only && strcmp(backend, "host") != 0) || missing) {
        run->result.skipped = true;
        snprintf(run->result.skip_reason, sizeof run->result.skip_reason, "%s",
                 missing ? "not enough devices" : "host-only kernels");
        run->status = CUBERT_OK;
        rep->skipped++;
        if (c.progress) fprintf(c.progress, "  skip  %-28s %-24s %s\n", p->name, run->label, run->result.skip_reason);
        continue;
      }
      cb_fi_run_config rc = {0};
      rc.backend = backend;
      rc.host_devices = c.host_devices;
      rc.device_map = run->placement.devices;
      rc.label = run->label;
      rc.timeout_ms = c.timeout_ms;
      rc.trace = c.trace;
      if (c.trace) fprintf(c.trace, "== %s (%s) on %s\n", p->name, p->source, run->label);
      run->status = cb_fi_run(p, &rc, &run->result);
      cb_fi_result *res = &run->result;
      rep->injected += res->injected;
      for (int f = 0; f < CUBERT_FAULT_KIND_COUNT_; f++) rep->by_kind[f] += res->by_kind[f];
      for (int v = 0; v < CB_FI_VIOLATION_KIND_COUNT; v++) rep->by_violation[v] += res->by_violation[v];
      rep->violations += res->nviolations;
      if (res->hang) rep->hang = true;
      bool ok = run->status == CUBERT_OK && !res->nviolations && !res->setup_failed;
      if (res->skipped) {
        rep->skipped++;
      } else if (ok) {
        rep->passed++;
      } else {
        rep->failed++;
      }
      if (c.progress)
        fprintf(c.progress, "  %-5s %-28s %-24s %3zu steps %3" PRIu64 " faults %2zu violations%s%s\n",
                res->skipped ? "skip" : ok ? "ok" : "FAIL", p->name, run->label, res->steps_run, res->injected,
                res->nviolations, res->setup_failed ? " setup: " : "", res->setup_failed ? res->setup_error : "");
    }
  }
  rep->seconds = now_s() - t0;
  return CUBERT_OK;
}
