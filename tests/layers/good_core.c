/* Must compile: what the core may include. */
#include "base/env.h"
#include "runtime/internal.h"
#include "runtime/parts.h"
int cb_probe;
