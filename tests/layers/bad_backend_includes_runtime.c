/* Must not compile: a backend sees backends/backend.h, never runtime/. */
#include "runtime/internal.h"
int cb_probe;
