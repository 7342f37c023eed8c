/* Must compile: backends/hip/ gets the HIP headers. */
#include <hip/hip_runtime_api.h>

#include "backends/hip/hip_internal.h"
int cb_probe;
