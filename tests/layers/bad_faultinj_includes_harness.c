/* Must not compile: the harness is a tool, not the library. */
#include "tools/faultinj/checker.h"
int cb_probe;
