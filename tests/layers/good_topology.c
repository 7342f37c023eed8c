/* Must compile: what topology/ may include. */
#include "runtime/fail.h"
#include "topology/placement.h"
int cb_probe;
