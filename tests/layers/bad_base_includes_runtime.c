/* Must not compile: base/ is below everything. */
#include "runtime/fail.h"
int cb_probe;
