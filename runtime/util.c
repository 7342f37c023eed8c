/* runtime/util.c: status strings, version, string builder, hashing and the
 * backend error helper. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

const char *cubert_version(void) { return CUBERT_VERSION_STRING; }

const char *cubert_status_string(cubert_status status) {
  switch (status) {
#define CB_CASE_(name, text) \
  case CUBERT_##name:        \
    return text;
    CUBERT_STATUS_MAP(CB_CASE_)
#undef CB_CASE_
    default:
      return "unknown status";
  }
}

const char *cubert_status_name(cubert_status status) {
  switch (status) {
#define CB_CASE_(name, text) \
  case CUBERT_##name:        \
    return #name;
    CUBERT_STATUS_MAP(CB_CASE_)
#undef CB_CASE_
    default:
      return "UNKNOWN";
  }
}

void cb_str_vprintf(cb_str *s, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int need = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (need < 0) return;
  if (s->n + (size_t)need + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 128;
    while (cap < s->n + (size_t)need + 1) cap *= 2;
    char *p = realloc(s->p, cap);
    if (!p) return; /* the message gets shorter, nothing else is lost */
    s->p = p;
    s->cap = cap;
  }
  vsnprintf(s->p + s->n, s->cap - s->n, fmt, ap);
  s->n += (size_t)need;
}

void cb_str_printf(cb_str *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cb_str_vprintf(s, fmt, ap);
  va_end(ap);
}

char *cb_str_take(cb_str *s) {
  char *p = s->p;
  if (!p) p = cb_strdup("");
  s->p = NULL;
  s->n = s->cap = 0;
  return p;
}

void cb_str_free(cb_str *s) {
  free(s->p);
  s->p = NULL;
  s->n = s->cap = 0;
}

char *cb_strdup(const char *s) {
  if (!s) s = "";
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

uint64_t cubert_hash64(const void *data, size_t size) {
  if (!data) return 0;
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

cubert_status cubert_berr_set(cubert_berr *err, cubert_status status, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
  }
  return status;
}

const char *cb_env(const char *name) {
  const char *v = getenv(name);
  return (v && *v) ? v : NULL;
}
