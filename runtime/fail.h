/* runtime/fail.h: the thread's last error, for the public entry points of
 * the library's other layers (internal; kernels/, topology/). The one
 * runtime header those layers may include: runtime/internal.h is the
 * core's own (docs/architecture.md). */
#ifndef CUBERT_RUNTIME_FAIL_H
#define CUBERT_RUNTIME_FAIL_H

#include "cubert/cubert.h"

/* The thread's last error as it is (a new reference or NULL), and putting
 * it back (takes the reference): for internal work whose failure must not
 * replace the error the caller will see. */
cubert_error *cb_error_save(void);
void cb_error_restore(cubert_error *saved);
/* Records a plain error for this thread and returns `status`. */
cubert_status cb_fail(cubert_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
