/* base/str.c: the string builder and copies (base/str.h). */
#include "base/str.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

void cb_str_vprintf(cb_str *s, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int need = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (need < 0) return;
  if (s->n + (size_t)need + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 128;
    while (cap < s->n + (size_t)need + 1) cap *= 2;
    char *p = cb_realloc(s->p, cap);
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
  cb_free(s->p);
  s->p = NULL;
  s->n = s->cap = 0;
}

char *cb_strdup(const char *s) {
  if (!s) s = "";
  size_t n = strlen(s) + 1;
  char *p = cb_malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

char *cb_strdup_or_null(const char *s) { return s ? cb_strdup(s) : NULL; }
