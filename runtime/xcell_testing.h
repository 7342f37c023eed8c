/* runtime/xcell_testing.h: a seam for tests of what runtime/xshare.c does
 * when the lock of a failure cell fails (internal, never installed; no
 * caller but tests). */
#ifndef CUBERT_RUNTIME_XCELL_TESTING_H
#define CUBERT_RUNTIME_XCELL_TESTING_H

#include <stdint.h>

/* The next `n` cb_xcell_lock calls of this process, on any cell, fail
 * (CUBERT_ERR_BACKEND) as a pthread error would, without touching the
 * lock; other processes lock as usual. 0 (the default) fails none.
 * Returns how many of the failures asked for before were still to come. */
uint32_t cb_xcell_testing_fail_locks(uint32_t n);

#endif
