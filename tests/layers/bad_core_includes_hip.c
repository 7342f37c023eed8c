/* Must not compile: only backends/hip/ includes <hip/...>. */
#include <hip/hip_runtime.h>
int cb_probe;
