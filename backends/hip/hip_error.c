/* backends/hip/hip_error.c: hipError_t becomes a cubert_status here, at the
 * boundary, keeping HIP's name and description in the message.
 *
 * Sticky errors (the device is marked lost: its context cannot run anything
 * more, on CUDA every later call returns the same error):
 *   hipErrorIllegalAddress      a kernel or copy touched unmapped memory
 *   hipErrorLaunchFailure       a kernel raised an exception (AMD: a
 *                               hardware exception or memory fault)
 *   hipErrorLaunchTimeOut       the watchdog killed a kernel
 *   hipErrorAssert              a device-side assert fired
 *   hipErrorECCNotCorrectable   uncorrectable ECC error in device memory
 *   hipErrorContextIsDestroyed  the context is gone
 *   hipErrorPriorLaunchFailure  an earlier launch failed and poisoned it
 *   hipErrorDeinitialized       the driver is shutting down
 *   hipErrorUnknown             only when a probe allocation right after it
 *                               fails too: HIP's NVIDIA table folds CUDA's
 *                               misaligned address, illegal instruction,
 *                               hardware stack error, invalid PC and NVLink
 *                               uncorrectable errors (all sticky on CUDA)
 *                               into hipErrorUnknown, with benign ones.
 * Everything else (out of memory, invalid values, launch configuration,
 * peer access, not ready) leaves the device usable.
 *
 * Sticky means found by a wait, or by any call other than a launch. What
 * hipModuleLaunchKernel itself returns is a configuration error, never
 * sticky: clr returns hipErrorLaunchFailure synchronously when the block
 * exceeds the kernel's __launch_bounds__ (ROCm/clr hipamd/src/hip_module.cpp,
 * ihipLaunchKernel_validate), and one over-sized launch must not lose the
 * device. On CUDA a launch after a real fault returns the fault's sticky
 * error; the next wait (every wait returns it too) then marks the device.
 *
 * On AMD, note that ROCm's default handler for a GPU memory fault aborts the
 * process before HIP returns anything; the sticky path matters where the
 * runtime reports the fault (CUDA always does). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backends/hip/hip_internal.h"
#include "backends/hip/hip_testing.h"

void cb_hip_format(char *buf, size_t capacity, const char *fmt, ...) {
  if (!buf || !capacity) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, capacity, fmt, ap);
  va_end(ap);
}

bool cb_hip_error_sticky(hipError_t e) {
  switch (e) {
  case hipErrorIllegalAddress:
  case hipErrorLaunchFailure:
  case hipErrorLaunchTimeOut:
  case hipErrorAssert:
  case hipErrorECCNotCorrectable:
  case hipErrorContextIsDestroyed:
  case hipErrorPriorLaunchFailure:
  case hipErrorDeinitialized:
    return true;
  default:
    return false;
  }
}

/* After hipErrorUnknown: does the context still serve a small allocation?
 * The device is current (every caller went through cb_hip_enter). */
static bool probe_fails(void) {
  void *p = NULL;
  hipError_t e = hipMalloc(&p, 256);
  if (e == hipSuccess) {
    (void)hipFree(p);
    return false;
  }
  return e != hipErrorOutOfMemory;
}

void cb_hip_describe(hipError_t e, char *buf, size_t capacity) {
  const char *name = hipGetErrorName(e);
  const char *text = hipGetErrorString(e);
  /* ROCm 5.2's hipGetErrorString answers the name itself: say it once */
  int n = name && text && strcmp(name, text) == 0
              ? snprintf(buf, capacity, "%s", name)
              : snprintf(buf, capacity, "%s (%s)", name ? name : "hipError?", text ? text : "no description");
#if CB_HIP_NVIDIA
  /* HIP's table maps many CUDA errors to hipErrorUnknown; the CUDA runtime
   * still knows which one it was. */
  if (e == hipErrorUnknown && n > 0 && (size_t)n < capacity) {
    cudaError_t c = cudaPeekAtLastError();
    if (c != cudaSuccess && c != cudaErrorUnknown)
      cb_hip_format(buf + n, capacity - (size_t)n, " [CUDA: %s: %s]", cudaGetErrorName(c),
               cudaGetErrorString(c));
  }
#else
  (void)n;
#endif
}

static cubert_status status_of(hipError_t e, cubert_status fallback) {
  switch (e) {
  case hipErrorOutOfMemory:
    return CUBERT_ERR_OUT_OF_MEMORY;
  case hipErrorNoDevice:
  case hipErrorInvalidDevice:
    return CUBERT_ERR_NO_DEVICE;
  case hipErrorPeerAccessUnsupported:
  case hipErrorPeerAccessNotEnabled:
    return CUBERT_ERR_PEER_ACCESS;
  case hipErrorNotSupported:
    return CUBERT_ERR_UNSUPPORTED;
  case hipErrorLaunchFailure: /* reaches here only from a launch call */
  case hipErrorInvalidConfiguration:
  case hipErrorLaunchOutOfResources:
  case hipErrorCooperativeLaunchTooLarge:
    return CUBERT_ERR_LAUNCH_CONFIG;
  case hipErrorInvalidImage:
  case hipErrorInvalidKernelFile:
  case hipErrorNoBinaryForGpu:
  case hipErrorSharedObjectInitFailed:
  case hipErrorSharedObjectSymbolNotFound:
  case hipErrorInvalidSource:
    return CUBERT_ERR_COMPILE;
  default:
    return fallback;
  }
}

/* Sticky as the table says, except what a launch call returned. */
static bool sticky_at(hipError_t e, bool launch_call) {
  return !launch_call && cb_hip_error_sticky(e);
}

static cubert_status vfail(cb_hip_device *dev, cubert_berr *err, hipError_t e, bool launch_call,
                           cubert_status fallback, const char *what, va_list ap) {
  bool sticky = sticky_at(e, launch_call) || (!launch_call && e == hipErrorUnknown && probe_fails());
  cubert_status st = sticky ? CUBERT_ERR_DEVICE_LOST : status_of(e, fallback);
  cubert_berr local;
  cubert_berr *out = err ? err : &local;
  char desc[200];
  cb_hip_describe(e, desc, sizeof desc);
#if CB_HIP_NVIDIA
  (void)cudaGetLastError(); /* read: a stale one must not reappear in a later message */
#endif
  char head[300];
  vsnprintf(head, sizeof head, what, ap);
  out->sticky = sticky;
  cb_hip_format(out->message, sizeof out->message, "%s: %s%s", head, desc,
           sticky ? "; the device cannot recover (sticky error)" : "");
  if (sticky && dev) cb_hip_mark_lost(dev, out->message);
  return st;
}

cubert_status cb_hip_fail(cb_hip_device *dev, cubert_berr *err, hipError_t e,
                          cubert_status fallback, const char *what, ...) {
  va_list ap;
  va_start(ap, what);
  cubert_status st = vfail(dev, err, e, false, fallback, what, ap);
  va_end(ap);
  return st;
}

cubert_status cb_hip_fail_launch(cb_hip_device *dev, cubert_berr *err, hipError_t e,
                                 const char *what, ...) {
  va_list ap;
  va_start(ap, what);
  cubert_status st = vfail(dev, err, e, true, CUBERT_ERR_LAUNCH, what, ap);
  va_end(ap);
  return st;
}

/* ------------------------------------------------------------ test seam */

#define CB_HIP_KNOWN_ERRORS(X)                                                                   \
  X(hipSuccess) X(hipErrorInvalidValue) X(hipErrorOutOfMemory) X(hipErrorInvalidConfiguration) \
  X(hipErrorLaunchFailure) X(hipErrorIllegalAddress) X(hipErrorLaunchTimeOut)                  \
  X(hipErrorAssert) X(hipErrorECCNotCorrectable) X(hipErrorPriorLaunchFailure)                 \
  X(hipErrorLaunchOutOfResources) X(hipErrorNotReady) X(hipErrorInvalidImage)

int cb_hip_error_code(const char *name) {
#define CB_HIP_NAME_IS(n) if (name && !strcmp(name, #n)) return (int)n;
  CB_HIP_KNOWN_ERRORS(CB_HIP_NAME_IS)
#undef CB_HIP_NAME_IS
  return -1;
}

cubert_status cb_hip_error_classify(int code, bool launch_call, bool *sticky) {
  hipError_t e = (hipError_t)code;
  bool s = sticky_at(e, launch_call);
  if (sticky) *sticky = s;
  return s ? CUBERT_ERR_DEVICE_LOST : status_of(e, CUBERT_ERR_BACKEND);
}

/* ------------------------------------------------------------ device state
 *
 * What an error changes: a sticky one marks the device lost (cb_hip_fail
 * above), and every later call checks that first. Making the device current
 * is here too: its only failure path is an error. Nothing in this file calls
 * another file of the backend (hip_internal.h says how they call each other). */

void cb_hip_mark_lost(cb_hip_device *dev, const char *message) {
  pthread_mutex_lock(&dev->fail_lock);
  if (!atomic_load(&dev->lost)) {
    cb_hip_format(dev->lost_message, sizeof dev->lost_message, "%s", message);
    atomic_store(&dev->lost, true);
  }
  pthread_mutex_unlock(&dev->fail_lock);
}

cubert_status cb_hip_check_lost(cb_hip_device *dev, cubert_berr *err) {
  if (!atomic_load(&dev->lost)) return CUBERT_OK;
  pthread_mutex_lock(&dev->fail_lock);
  cubert_berr_set(err, CUBERT_ERR_DEVICE_LOST, "%s is lost: %s", dev->label, dev->lost_message);
  pthread_mutex_unlock(&dev->fail_lock);
  if (err) err->sticky = true;
  return CUBERT_ERR_DEVICE_LOST;
}

cubert_status cb_hip_enter(cb_hip_device *dev, cubert_berr *err) {
  /* Already current: nothing to set (the usual case: one thread drives a
   * device). Asking costs a thread-local read in the driver, where
   * setting cost a runtime and a driver call on every operation; asking
   * rather than caching also notices a device the application made current
   * in between. */
#if CB_HIP_NVIDIA
  hipCtx_t cur = NULL;
  if (dev->context && hipCtxGetCurrent(&cur) == hipSuccess && cur == dev->context) return CUBERT_OK;
#else
  int cur = -1;
  if (hipGetDevice(&cur) == hipSuccess && cur == dev->index) return CUBERT_OK;
#endif
  hipError_t e = hipSetDevice(dev->index);
#if CB_HIP_NVIDIA
  if (e == hipSuccess && dev->context) e = hipCtxSetCurrent(dev->context);
#endif
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_BACKEND, "making %s current", dev->label);
  return CUBERT_OK;
}
