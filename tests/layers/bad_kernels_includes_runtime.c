/* Must not compile: kernels/ sees runtime/fail.h only. */
#include "runtime/internal.h"
int cb_probe;
