/* Must not compile: a backend sees cubert/backend.h, never runtime/. */
#include "runtime/internal.h"
int cb_probe;
