/* Must not compile: the core reaches the fault layer through runtime/parts.h. */
#include "faultinj/decorator.h"
int cb_probe;
