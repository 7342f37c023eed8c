/* runtime/fail.h: the error value (cb_errb) and the thread's last error, for
 * every layer of the library (internal; runtime/, kernels/, topology/,
 * faultinj/). The one runtime header the layers above the core may include:
 * runtime/internal.h is the core's own (docs/architecture.md).
 *
 * Inside the library a failure travels as a value: a helper fills a cb_errb
 * its caller owns (cb_errb_set) and never records anything; only a public
 * entry point records the thread's last error, from the value
 * (cb_errb_return, cb_errb_finish) or with a plain message (cb_fail).
 * tests/fail_only_public.sh keeps it so. A public entry point:
 *
 *   cb_errb eb;
 *   cb_errb_init(&eb, CUBERT_OK);
 *   cubert_status st = helper(..., &eb);
 *   ...
 *   return cb_errb_return(&eb, st);
 *
 * Ownership: a cb_errb owns its message and the failures it names; it is
 * emptied by cb_errb_finish, cb_errb_discard or cb_errb_return. */
#ifndef CUBERT_RUNTIME_FAIL_H
#define CUBERT_RUNTIME_FAIL_H

#include <stddef.h>
#include <stdint.h>

#include "base/str.h"
#include "cubert/cubert.h"

/* A failure an error names, over [start, end) (a reference held). */
typedef struct cb_err_entry {
  cubert_failure *failure;
  uint64_t start, end;
} cb_err_entry;

/* An error being built: its status, message and the failures it met. */
typedef struct cb_errb {
  cubert_status status;
  cb_str msg;
  cb_err_entry *entries;
  size_t n, cap;
  size_t dropped; /* failures cb_errb_add had no host memory to keep */
} cb_errb;

/* Starts `b` empty with `status` (CUBERT_OK: no error yet). Inline: every
 * public entry point starts one (each launch). */
static inline void cb_errb_init(cb_errb *b, cubert_status status) {
  *b = (cb_errb){.status = status};
}
/* Starts `b` as an error of `status` with a formatted message, records
 * nothing (the failure as a value: a public entry point finishes it);
 * returns `status`. */
cubert_status cb_errb_set(cb_errb *b, cubert_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Records the error for this thread (`b` is emptied); returns its status. */
cubert_status cb_errb_finish(cb_errb *b);
/* Drops what `b` holds; records nothing. */
void cb_errb_discard(cb_errb *b);
/* The end of a public entry point whose helpers fill `b` (started with
 * cb_errb_init(b, CUBERT_OK)): a failure `st` with `b` set is recorded from
 * it; otherwise `b` is discarded (a helper not yet converted recorded its
 * own, or a public call made on the way did). Returns `st`. */
cubert_status cb_errb_return_rest(cb_errb *b, cubert_status st);
/* Inline: the usual success (nothing held) is one test; the rest is
 * cb_errb_return_rest's. */
static inline cubert_status cb_errb_return(cb_errb *b, cubert_status st) {
  if (!st && !b->msg.p && !b->entries) return st;
  return cb_errb_return_rest(b, st);
}

/* Records a plain error for this thread and returns `status`: for a public
 * entry point's own refusals only. */
cubert_status cb_fail(cubert_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
