/* Must not compile: kernels/ sees runtime/fail.h and runtime/kcheck.h only. */
#include "runtime/internal.h"
int cb_probe;
