/* Must not compile: the host backend's settings are read in lib/settings.c
 * and reach the core as an opaque pointer (runtime/parts.h). */
#include "backends/host/host_backend.h"
int cb_probe;
