/* Must not compile: topology/ sees runtime/fail.h only. */
#include "runtime/internal.h"
int cb_probe;
