/* base/msg.c: the error builder (base/msg.h) and the backend helper
 * cubert_berr_set() (backends/backend.h), which is the same thing for a
 * backend's error record. */
#include "base/msg.h"

#include <stdarg.h>
#include <stdio.h>

#include "backends/backend.h"

cubert_status cb_msgf(char *msg, size_t cap, cubert_status status, const char *fmt, ...) {
  if (msg && cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
  }
  return status;
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
