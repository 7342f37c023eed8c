/* base/str.h: a growable string builder and string copies (internal).
 *
 * Ownership: a cb_str owns its buffer (cb_str_free, or cb_str_take hands it
 * to the caller); every string these functions return is malloc'd (base's
 * allocator, base/alloc.h) and owned by the caller, who frees it with
 * cb_free(). Out of memory: the builder stops growing (the text is cut
 * short, nothing else is lost); the copies return NULL. */
#ifndef CUBERT_BASE_STR_H
#define CUBERT_BASE_STR_H

#include <stdarg.h>
#include <stddef.h>

typedef struct cb_str {
  char *p;
  size_t n, cap;
} cb_str;

void cb_str_printf(cb_str *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void cb_str_vprintf(cb_str *s, const char *fmt, va_list ap);
/* The string (never NULL unless out of memory); ownership passes to the
 * caller and `s` is empty again. */
char *cb_str_take(cb_str *s);
void cb_str_free(cb_str *s);

/* A copy of `s`; NULL is copied as "". */
char *cb_strdup(const char *s);
/* A copy of `s`; NULL stays NULL. */
char *cb_strdup_or_null(const char *s);

#endif
