/* backends/hip/hip_testing.h: seams for tests of the HIP backend's error
 * rules without a device (internal, never installed). No HIP type: tests
 * include it without <hip/...>. Built without HIP (hip_none.c),
 * cb_hip_error_code() is -1 and cb_hip_error_classify() is
 * CUBERT_ERR_UNSUPPORTED, cb_hip_comgr_version() false. */
#ifndef CUBERT_BACKENDS_HIP_TESTING_H
#define CUBERT_BACKENDS_HIP_TESTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubert/status.h"

struct cubert_backend_arg;

/* The hipError_t value named `name` ("hipErrorLaunchFailure") on the
 * platform built for, among those hip_error.c lists; -1 for another name. */
int cb_hip_error_code(const char *name);

/* What the backend makes of HIP error `code`: the status and whether it is
 * sticky (the device is marked lost), when `launch_call` returned it from
 * hipModuleLaunchKernel, or otherwise from a wait or another call. The
 * probe after hipErrorUnknown is not run (it needs a device). */
cubert_status cb_hip_error_classify(int code, bool launch_call, bool *sticky);

/* The comgr version in the compiled-kernel cache's key (AMD); false when
 * it is not known (NVIDIA, no comgr, or built without HIP). */
bool cb_hip_comgr_version(size_t *major, size_t *minor);

/* A launch's arguments packed into `buf` (`capacity` bytes) in the layout
 * the kernel expects, *size their bytes, when that layout is certain from
 * the sizes alone (hip_backend.c says when); false: the launch passes an
 * array of pointers. Built without HIP: false. */
bool cb_hip_pack_args(const struct cubert_backend_arg *args, uint32_t nargs, void *buf, size_t capacity,
                      size_t *size);

#endif
