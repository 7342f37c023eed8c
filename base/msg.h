/* base/msg.h: the error builder (internal): a status plus a message
 * formatted into the caller's buffer, for functions that report what went
 * wrong as (status, text) without touching the thread's last error. */
#ifndef CUBERT_BASE_MSG_H
#define CUBERT_BASE_MSG_H

#include <stddef.h>

#include "cubert/status.h"

/* Formats into msg[cap] (nothing when msg is NULL or cap is 0; the text is
 * cut to fit) and returns `status`. */
cubert_status cb_msgf(char *msg, size_t cap, cubert_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif
