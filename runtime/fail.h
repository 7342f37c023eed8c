/* runtime/fail.h: the thread's last error, for the public entry points of
 * the library's other layers (internal; kernels/, topology/). The one
 * runtime header those layers may include: runtime/internal.h is the
 * core's own (docs/architecture.md). */
#ifndef CUBERT_RUNTIME_FAIL_H
#define CUBERT_RUNTIME_FAIL_H

#include "cubert/cubert.h"

/* Records a plain error for this thread and returns `status`. */
cubert_status cb_fail(cubert_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
