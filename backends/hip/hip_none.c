/* backends/hip/hip_none.c: what a build without HIP has in place of the HIP
 * backend: no ops table, and compiling for a GPU target is unsupported. */
#include "backends/hip/hip_compile.h"
#include "backends/hip/hip_testing.h"

const cubert_backend_ops *cubert_backend_hip(void) { return NULL; }

const char *cb_hip_platform(void) { return "none"; }

cubert_status cb_hip_compile(const char *arch, const cubert_backend_kernel *kernel, unsigned flags,
                             void **code, size_t *size, bool *from_cache, cubert_berr *err) {
  (void)kernel;
  (void)flags;
  (void)code;
  (void)size;
  (void)from_cache;
  return cubert_berr_set(err, CUBERT_ERR_UNSUPPORTED,
                         "cannot compile for %s: cubert was built without HIP", arch ? arch : "a GPU");
}

bool cb_hip_cache_dir(char *buf, size_t capacity) {
  (void)buf;
  (void)capacity;
  return false;
}

int cb_hip_error_code(const char *name) {
  (void)name;
  return -1;
}

cubert_status cb_hip_error_classify(int code, bool launch_call, bool *sticky) {
  (void)code;
  (void)launch_call;
  if (sticky) *sticky = false;
  return CUBERT_ERR_UNSUPPORTED;
}

bool cb_hip_comgr_version(size_t *major, size_t *minor) {
  *major = *minor = 0;
  return false;
}

bool cb_hip_pack_args(const struct cubert_backend_arg *args, uint32_t nargs, void *buf, size_t capacity,
                      size_t *size) {
  (void)args;
  (void)nargs;
  (void)buf;
  (void)capacity;
  (void)size;
  return false;
}
