/* Must compile: what a backend may include. */
#include "backends/host/work_queue.h"
#include "base/str.h"
#include "backends/backend.h"
int cb_probe;
