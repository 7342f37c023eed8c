/* backends/hip/hip_raw.c: the plain-HIP baselines of `cubert bench`
 * (hip_raw.h). Nothing here touches cubert's objects: these are the calls a
 * program without cubert would make, so that the benchmark can set each
 * cubert figure beside the same work done raw, in the same run.
 *
 * Per device, made on first use: the primary context (hipSetDevice then
 * hipFree(0); on NVIDIA also retained and made current, as the module API
 * needs), two non-blocking streams with a start and an end event each, an
 * 8-byte accumulator for the checksum, and the three modules compiled by
 * hiprtc (NVRTC on NVIDIA) from the sources the bench hands in: the same
 * source text cubert compiles, so both sides run the same kernel. */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/hip/hip_raw.h"

#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>

#if defined(__HIP_PLATFORM_NVIDIA__)
#define RAW_NVIDIA 1
#else
#define RAW_NVIDIA 0
#endif

#define DPTR(a) ((hipDeviceptr_t)(uintptr_t)(a))
#define PTR(a) ((void *)(uintptr_t)(a))
#define NSLOTS 2

enum { MOD_COPY = 0, MOD_CHECKSUM, MOD_BENCH, MOD_COUNT };
enum { FN_COPY = 0, FN_CHECKSUM, FN_EMPTY0, FN_EMPTY4, FN_EMPTY16, FN_HOLD, FN_CHASE, FN_COUNT };
static const struct {
  int module;
  const char *entry;
} fn_entries[FN_COUNT] = {
    [FN_COPY] = {MOD_COPY, "cubert_copy_u32"},
    [FN_CHECKSUM] = {MOD_CHECKSUM, "cubert_checksum_u32"},
    [FN_EMPTY0] = {MOD_BENCH, "cb_bench_empty0"},
    [FN_EMPTY4] = {MOD_BENCH, "cb_bench_empty4"},
    [FN_EMPTY16] = {MOD_BENCH, "cb_bench_empty16"},
    [FN_HOLD] = {MOD_BENCH, "cb_bench_hold"},
    [FN_CHASE] = {MOD_BENCH, "cb_bench_chase"},
};

typedef struct raw_dev {
  bool ready;
#if RAW_NVIDIA
  hipCtx_t context;
  bool retained;
#endif
  char arch_option[288];     /* "--offload-arch=" + gcnArchName (256) */
  int multiprocessors;
  hipStream_t stream[NSLOTS];
  hipEvent_t start[NSLOTS], end[NSLOTS];
  void *acc;                      /* 8 bytes for the checksum */
  bool tried[MOD_COUNT];          /* a failed compile is not retried */
  hipModule_t module[MOD_COUNT];
  void *image[MOD_COUNT];         /* kept while the module is loaded */
  hipFunction_t fn[FN_COUNT];
} raw_dev;

struct cb_hip_raw {
  cb_hip_raw_sources src;
  int ndev;
  raw_dev *dev;
  char message[1024];
};

/* ------------------------------------------------------------ errors */

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static cubert_status fail(cb_hip_raw *r, hipError_t e, cubert_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
  if (e != hipSuccess && n >= 0 && (size_t)n < sizeof r->message) {
    const char *name = hipGetErrorName(e), *text = hipGetErrorString(e);
    snprintf(r->message + n, sizeof r->message - (size_t)n, ": %s (%s)", name ? name : "hipError?",
             text ? text : "no description");
  }
  return st;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ devices */

static cubert_status enter(cb_hip_raw *r, int d) {
  if (d < 0 || d >= r->ndev)
    return fail(r, hipSuccess, CUBERT_ERR_NO_DEVICE, "raw HIP: no device %d (%d devices)", d,
                r->ndev);
  raw_dev *v = &r->dev[d];
  hipError_t e = hipSetDevice(d);
  if (e != hipSuccess) return fail(r, e, CUBERT_ERR_BACKEND, "raw HIP: hipSetDevice(%d)", d);
#if RAW_NVIDIA
  if (v->ready && (e = hipCtxSetCurrent(v->context)) != hipSuccess)
    return fail(r, e, CUBERT_ERR_BACKEND, "raw HIP: making device %d's context current", d);
#endif
  if (v->ready) return CUBERT_OK;

  if ((e = hipFree(NULL)) != hipSuccess)
    return fail(r, e, CUBERT_ERR_BACKEND, "raw HIP: hipFree(0) on device %d", d);
#if RAW_NVIDIA
  hipDevice_t hd = 0;
  if ((e = hipDeviceGet(&hd, d)) != hipSuccess ||
      (e = hipDevicePrimaryCtxRetain(&v->context, hd)) != hipSuccess)
    return fail(r, e, CUBERT_ERR_BACKEND, "raw HIP: retaining device %d's primary context", d);
  v->retained = true;
  if ((e = hipCtxSetCurrent(v->context)) != hipSuccess)
    return fail(r, e, CUBERT_ERR_BACKEND, "raw HIP: making device %d's context current", d);
#endif
  hipDeviceProp_t p;
  memset(&p, 0, sizeof p);
  if ((e = hipGetDeviceProperties(&p, d)) != hipSuccess)
    return fail(r, e, CUBERT_ERR_BACKEND, "raw HIP: hipGetDeviceProperties(%d)", d);
#if RAW_NVIDIA
  snprintf(v->arch_option, sizeof v->arch_option, "--gpu-architecture=compute_%d%d", p.major,
           p.minor);
#else
  /* gcnArchName ("gfx90a:sramecc+:xnack-") is in ROCm 5.2 and 6.x; the
   * number gcnArch is gone from ROCm 6's hipDeviceProp_t (R0600). */
  if (!p.gcnArchName[0])
    return fail(r, hipSuccess, CUBERT_ERR_BACKEND, "raw HIP: device %d reports no gcnArchName", d);
  snprintf(v->arch_option, sizeof v->arch_option, "--offload-arch=%s", p.gcnArchName);
#endif
  v->multiprocessors = p.multiProcessorCount > 0 ? p.multiProcessorCount : 1;
  for (int i = 0; i < NSLOTS; i++) {
    if ((e = hipStreamCreateWithFlags(&v->stream[i], hipStreamNonBlocking)) != hipSuccess ||
        (e = hipEventCreate(&v->start[i])) != hipSuccess ||
        (e = hipEventCreate(&v->end[i])) != hipSuccess)
      return fail(r, e, CUBERT_ERR_BACKEND, "raw HIP: streams and events on device %d", d);
  }
  if ((e = hipMalloc(&v->acc, 8)) != hipSuccess)
    return fail(r, e, CUBERT_ERR_OUT_OF_MEMORY, "raw HIP: hipMalloc(8) on device %d", d);
  v->ready = true;
  return CUBERT_OK;
}

cubert_status cb_hip_raw_wall_clock_khz(cb_hip_raw *r, int d, int *khz) {
#if RAW_NVIDIA || HIP_VERSION_MAJOR < 6
  (void)khz;
  return fail(r, hipSuccess, CUBERT_ERR_UNSUPPORTED,
              "raw HIP: no wall-clock rate on device %d (%s)", d,
              RAW_NVIDIA ? "NVIDIA" : "HIP before 6.0 has no hipDeviceAttributeWallClockRate");
#else
  if (d < 0 || d >= r->ndev)
    return fail(r, hipSuccess, CUBERT_ERR_NO_DEVICE, "raw HIP: no device %d (%d devices)", d, r->ndev);
  int v = 0;
  hipError_t e = hipDeviceGetAttribute(&v, hipDeviceAttributeWallClockRate, d);
  if (e != hipSuccess) return fail(r, e, CUBERT_ERR_UNSUPPORTED, "raw HIP: the wall-clock rate of device %d", d);
  if (v <= 0)
    return fail(r, hipSuccess, CUBERT_ERR_UNSUPPORTED, "raw HIP: device %d reports a wall-clock rate of %d kHz", d, v);
  *khz = v;
  return CUBERT_OK;
#endif
}

/* Compiles and loads module `m` on device d (current), once. */
static cubert_status load_module(cb_hip_raw *r, int d, int m) {
  raw_dev *v = &r->dev[d];
  if (v->module[m]) return CUBERT_OK;
  static const char *const names[MOD_COUNT] = {"copy", "checksum", "bench"};
  if (v->tried[m])
    return fail(r, hipSuccess, CUBERT_ERR_COMPILE,
                "raw HIP: the %s kernels did not compile for device %d earlier", names[m], d);
  v->tried[m] = true;
  const char *source = m == MOD_COPY ? r->src.copy : m == MOD_CHECKSUM ? r->src.checksum : r->src.bench;
  if (!source)
    return fail(r, hipSuccess, CUBERT_ERR_INVALID_ARGUMENT, "raw HIP: no source for the %s kernels",
                names[m]);
  hiprtcProgram prog;
  hiprtcResult rr = hiprtcCreateProgram(&prog, source, "cb_bench_raw.cu", 0, NULL, NULL);
  if (rr != HIPRTC_SUCCESS)
    return fail(r, hipSuccess, CUBERT_ERR_COMPILE, "raw HIP: hiprtcCreateProgram (%s): %s",
                names[m], hiprtcGetErrorString(rr));
  const char *opts[] = {v->arch_option};
  rr = hiprtcCompileProgram(prog, 1, opts);
  if (rr != HIPRTC_SUCCESS) {
    size_t n = 0;
    char log[512] = "";
    if (hiprtcGetProgramLogSize(prog, &n) == HIPRTC_SUCCESS && n > 0) {
      char *full = malloc(n + 1);
      if (full && hiprtcGetProgramLog(prog, full) == HIPRTC_SUCCESS) {
        full[n] = '\0';
        snprintf(log, sizeof log, "%s", full);
      }
      free(full);
    }
    hiprtcDestroyProgram(&prog);
    return fail(r, hipSuccess, CUBERT_ERR_COMPILE, "raw HIP: compiling the %s kernels (%s): %s: %s",
                names[m], v->arch_option, hiprtcGetErrorString(rr), log);
  }
  size_t size = 0;
  void *code = NULL;
  if ((rr = hiprtcGetCodeSize(prog, &size)) == HIPRTC_SUCCESS && size > 0 && (code = malloc(size)))
    rr = hiprtcGetCode(prog, code);
  hiprtcDestroyProgram(&prog);
  if (rr != HIPRTC_SUCCESS || !code) {
    free(code);
    return fail(r, hipSuccess, CUBERT_ERR_COMPILE, "raw HIP: getting the %s kernels' code: %s",
                names[m], rr != HIPRTC_SUCCESS ? hiprtcGetErrorString(rr) : "out of host memory");
  }
  hipModule_t mod;
  hipError_t e = hipModuleLoadData(&mod, code);
  if (e != hipSuccess) {
    free(code);
    return fail(r, e, CUBERT_ERR_COMPILE, "raw HIP: loading the %s kernels on device %d", names[m], d);
  }
  for (int f = 0; f < FN_COUNT; f++) {
    if (fn_entries[f].module != m) continue;
    if ((e = hipModuleGetFunction(&v->fn[f], mod, fn_entries[f].entry)) != hipSuccess) {
      (void)hipModuleUnload(mod);
      free(code);
      return fail(r, e, CUBERT_ERR_COMPILE, "raw HIP: no `%s` in the %s kernels", fn_entries[f].entry,
                  names[m]);
    }
  }
  v->module[m] = mod;
  v->image[m] = code;
  return CUBERT_OK;
}

/* Device d current, its function f loaded. */
static cubert_status enter_fn(cb_hip_raw *r, int d, int f, hipFunction_t *fn) {
  cubert_status st = enter(r, d);
  if (!st) st = load_module(r, d, fn_entries[f].module);
  if (!st) *fn = r->dev[d].fn[f];
  return st;
}

static hipError_t launch(hipFunction_t f, uint32_t grid, uint32_t block, hipStream_t s,
                         void **params) {
  return hipModuleLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, params, NULL);
}

/* ------------------------------------------------------------ open/close */

cubert_status cb_hip_raw_open(const cb_hip_raw_sources *sources, cb_hip_raw **raw,
                              int *device_count, char *message, size_t capacity) {
  if (!sources || !raw || !device_count) {
    if (message && capacity) snprintf(message, capacity, "raw HIP: NULL argument");
    return CUBERT_ERR_INVALID_ARGUMENT;
  }
  int n = 0;
  hipError_t e = hipGetDeviceCount(&n);
  if (e != hipSuccess) n = 0; /* no driver or no device: zero devices */
  cb_hip_raw *r = calloc(1, sizeof *r);
  raw_dev *devs = n > 0 ? calloc((size_t)n, sizeof *devs) : NULL;
  if (!r || (n > 0 && !devs)) {
    free(r);
    free(devs);
    if (message && capacity) snprintf(message, capacity, "raw HIP: out of host memory");
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  r->src = *sources;
  r->ndev = n;
  r->dev = devs;
  *raw = r;
  *device_count = n;
  return CUBERT_OK;
}

void cb_hip_raw_close(cb_hip_raw *r) {
  if (!r) return;
  for (int d = 0; d < r->ndev; d++) {
    raw_dev *v = &r->dev[d];
    if (!v->ready) continue;
    if (hipSetDevice(d) != hipSuccess) continue;
#if RAW_NVIDIA
    (void)hipCtxSetCurrent(v->context);
#endif
    for (int i = 0; i < NSLOTS; i++) {
      if (v->stream[i]) (void)hipStreamSynchronize(v->stream[i]);
    }
    for (int m = 0; m < MOD_COUNT; m++) {
      if (v->module[m]) (void)hipModuleUnload(v->module[m]);
      free(v->image[m]);
    }
    for (int i = 0; i < NSLOTS; i++) {
      if (v->start[i]) (void)hipEventDestroy(v->start[i]);
      if (v->end[i]) (void)hipEventDestroy(v->end[i]);
      if (v->stream[i]) (void)hipStreamDestroy(v->stream[i]);
    }
    if (v->acc) (void)hipFree(v->acc);
#if RAW_NVIDIA
    hipDevice_t hd = 0;
    if (v->retained && hipDeviceGet(&hd, d) == hipSuccess) (void)hipDevicePrimaryCtxRelease(hd);
#endif
  }
  free(r->dev);
  free(r);
}

const char *cb_hip_raw_error(const cb_hip_raw *r) { return r ? r->message : "raw HIP: no state"; }

/* ------------------------------------------------------------ memory */

cubert_status cb_hip_raw_alloc(cb_hip_raw *r, int dev, uint64_t size, uint64_t *addr) {
  cubert_status st = enter(r, dev);
  if (st) return st;
  void *p = NULL;
  hipError_t e = hipMalloc(&p, size);
  if (e != hipSuccess)
    return fail(r, e, CUBERT_ERR_OUT_OF_MEMORY, "raw HIP: hipMalloc(%" PRIu64 ") on device %d", size,
                dev);
  *addr = (uint64_t)(uintptr_t)p;
  return CUBERT_OK;
}

void cb_hip_raw_free(cb_hip_raw *r, int dev, uint64_t addr) {
  if (!addr || enter(r, dev)) return;
  (void)hipFree(PTR(addr));
}

cubert_status cb_hip_raw_host_alloc(cb_hip_raw *r, uint64_t size, void **ptr) {
  void *p = NULL;
  hipError_t e = hipHostMalloc(&p, size, hipHostMallocPortable);
  if (e != hipSuccess)
    return fail(r, e, CUBERT_ERR_OUT_OF_MEMORY, "raw HIP: hipHostMalloc(%" PRIu64 ")", size);
  *ptr = p;
  return CUBERT_OK;
}

void cb_hip_raw_host_free(cb_hip_raw *r, void *ptr) {
  (void)r;
  if (ptr) (void)hipHostFree(ptr);
}

static cubert_status sync_slot(cb_hip_raw *r, int dev, int slot, const char *what) {
  hipError_t e = hipStreamSynchronize(r->dev[dev].stream[slot]);
  if (e != hipSuccess) return fail(r, e, CUBERT_ERR_BACKEND, "raw HIP: %s on device %d", what, dev);
  return CUBERT_OK;
}

cubert_status cb_hip_raw_upload(cb_hip_raw *r, int dev, uint64_t dst, const void *src,
                                uint64_t size) {
  cubert_status st = enter(r, dev);
  if (st) return st;
  hipError_t e = hipMemcpyAsync(PTR(dst), src, size, hipMemcpyHostToDevice, r->dev[dev].stream[0]);
  if (e != hipSuccess) return fail(r, e, CUBERT_ERR_COPY, "raw HIP: upload to device %d", dev);
  return sync_slot(r, dev, 0, "upload");
}

cubert_status cb_hip_raw_download(cb_hip_raw *r, int dev, void *dst, uint64_t src,
                                  uint64_t size) {
  cubert_status st = enter(r, dev);
  if (st) return st;
  hipError_t e = hipMemcpyAsync(dst, PTR(src), size, hipMemcpyDeviceToHost, r->dev[dev].stream[0]);
  if (e != hipSuccess) return fail(r, e, CUBERT_ERR_COPY, "raw HIP: download from device %d", dev);
  return sync_slot(r, dev, 0, "download");
}

cubert_status cb_hip_raw_fill(cb_hip_raw *r, int dev, uint64_t dst, uint32_t value,
                              uint64_t size) {
  cubert_status st = enter(r, dev);
  if (st) return st;
  hipError_t e = hipMemsetD32Async(DPTR(dst), (int)value, size / 4, r->dev[dev].stream[0]);
  if (e != hipSuccess) return fail(r, e, CUBERT_ERR_BACKEND, "raw HIP: hipMemsetD32Async on device %d", dev);
  return sync_slot(r, dev, 0, "fill");
}

cubert_status cb_hip_raw_peer(cb_hip_raw *r, int dev, int peer, bool *can) {
  cubert_status st = enter(r, dev);
  if (st) return st;
  if (peer < 0 || peer >= r->ndev)
    return fail(r, hipSuccess, CUBERT_ERR_NO_DEVICE, "raw HIP: no device %d", peer);
  if (peer == dev) {
    *can = true;
    return CUBERT_OK;
  }
  int ok = 0;
  hipError_t e = hipDeviceCanAccessPeer(&ok, dev, peer);
  if (e != hipSuccess)
    return fail(r, e, CUBERT_ERR_PEER_ACCESS, "raw HIP: hipDeviceCanAccessPeer(%d, %d)", dev, peer);
  if (ok) {
    e = hipDeviceEnablePeerAccess(peer, 0);
    if (e != hipSuccess && e != hipErrorPeerAccessAlreadyEnabled)
      return fail(r, e, CUBERT_ERR_PEER_ACCESS, "raw HIP: hipDeviceEnablePeerAccess(%d -> %d)", dev,
                  peer);
    (void)hipGetLastError(); /* "already enabled" is success; do not leave it behind */
  }
  *can = ok != 0;
  return CUBERT_OK;
}

cubert_status cb_hip_raw_checksum(cb_hip_raw *r, int dev, uint64_t addr, uint64_t n,
                                  uint64_t *sum) {
  hipFunction_t f;
  cubert_status st = enter_fn(r, dev, FN_CHECKSUM, &f);
  if (st) return st;
  raw_dev *v = &r->dev[dev];
  hipStream_t s = v->stream[0];
  hipError_t e = hipMemsetAsync(v->acc, 0, 8, s);
  uint64_t grid = (n + 255) / 256;
  uint64_t cap = (uint64_t)v->multiprocessors * 8;
  if (grid > cap) grid = cap;
  if (grid == 0) grid = 1;
  void *x = PTR(addr), *acc = v->acc;
  unsigned long long nn = n;
  void *params[] = {&x, &acc, &nn};
  if (e == hipSuccess) e = launch(v->fn[FN_CHECKSUM], (uint32_t)grid, 256, s, params);
  uint64_t host = 0;
  if (e == hipSuccess) e = hipMemcpyAsync(&host, v->acc, 8, hipMemcpyDeviceToHost, s);
  if (e == hipSuccess) e = hipStreamSynchronize(s);
  if (e != hipSuccess) return fail(r, e, CUBERT_ERR_LAUNCH, "raw HIP: checksum kernel on device %d", dev);
  *sum = host;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ timed work */

static hipError_t enqueue(cb_hip_raw *r, const cb_hip_raw_xfer *x, hipStream_t s, void **kparams) {
  switch (x->op) {
  case CB_HIP_RAW_H2D:
    return hipMemcpyAsync(PTR(x->dst), PTR(x->src), x->size, hipMemcpyHostToDevice, s);
  case CB_HIP_RAW_D2H:
    return hipMemcpyAsync(PTR(x->dst), PTR(x->src), x->size, hipMemcpyDeviceToHost, s);
  case CB_HIP_RAW_D2D:
    return hipMemcpyAsync(PTR(x->dst), PTR(x->src), x->size, hipMemcpyDeviceToDevice, s);
  case CB_HIP_RAW_PEER:
    return hipMemcpyPeerAsync(PTR(x->dst), x->dst_dev, PTR(x->src), x->src_dev, x->size, s);
  case CB_HIP_RAW_KERNEL:
    return launch(r->dev[x->exec].fn[FN_COPY], x->grid ? x->grid : 1, x->block ? x->block : 256, s,
                  kparams);
  }
  return hipErrorInvalidValue;
}

cubert_status cb_hip_raw_run(cb_hip_raw *r, const cb_hip_raw_xfer *x, int n, uint32_t count,
                             uint64_t hold_ticks, double *ms, double *enqueue_ms, bool *short_hold) {
  if (n < 1 || n > NSLOTS)
    return fail(r, hipSuccess, CUBERT_ERR_INVALID_ARGUMENT, "raw HIP: %d transfers in one run", n);
  /* Kernel parameters live here for the whole run (launches read them at
   * enqueue, but one array per transfer keeps that obvious). */
  void *in[NSLOTS], *out[NSLOTS];
  unsigned long long elems[NSLOTS];
  void *kparams[NSLOTS][3];
  hipError_t e = hipSuccess;
  cubert_status st;
  for (int i = 0; i < n; i++) {
    hipFunction_t f;
    if ((st = enter(r, x[i].exec))) return st;
    if (x[i].op == CB_HIP_RAW_KERNEL && (st = enter_fn(r, x[i].exec, FN_COPY, &f))) return st;
    if (hold_ticks && (st = enter_fn(r, x[i].exec, FN_HOLD, &f))) return st;
    in[i] = PTR(x[i].src);
    out[i] = PTR(x[i].dst);
    elems[i] = x[i].size / 4;
    kparams[i][0] = &in[i];
    kparams[i][1] = &out[i];
    kparams[i][2] = &elems[i];
  }
  /* Holds first, so every copy is queued before the start events fire. */
  for (int i = 0; i < n; i++) {
    raw_dev *v = &r->dev[x[i].exec];
    if ((st = enter(r, x[i].exec))) return st;
    if (hold_ticks) {
      unsigned long long ticks = hold_ticks;
      void *hp[] = {&ticks};
      if ((e = launch(v->fn[FN_HOLD], 1, 1, v->stream[i], hp)) != hipSuccess)
        return fail(r, e, CUBERT_ERR_LAUNCH, "raw HIP: hold kernel on device %d", x[i].exec);
    }
    if ((e = hipEventRecord(v->start[i], v->stream[i])) != hipSuccess)
      return fail(r, e, CUBERT_ERR_BACKEND, "raw HIP: hipEventRecord on device %d", x[i].exec);
  }
  double t0 = now();
  for (uint32_t k = 0; k < count; k++) {
    for (int i = 0; i < n; i++) {
      if (n > 1 && (st = enter(r, x[i].exec))) return st;
      if ((e = enqueue(r, &x[i], r->dev[x[i].exec].stream[i], kparams[i])) != hipSuccess)
        return fail(r, e, CUBERT_ERR_COPY, "raw HIP: transfer %d of a run on device %d", i, x[i].exec);
    }
  }
  for (int i = 0; i < n; i++) {
    raw_dev *v = &r->dev[x[i].exec];
    if ((st = enter(r, x[i].exec))) return st;
    if ((e = hipEventRecord(v->end[i], v->stream[i])) != hipSuccess)
      return fail(r, e, CUBERT_ERR_BACKEND, "raw HIP: hipEventRecord on device %d", x[i].exec);
  }
  if (enqueue_ms) *enqueue_ms = (now() - t0) * 1e3;
  /* A start event that has already fired: its hold ran out before the last
   * transfer was enqueued, so the timed window holds some of the enqueue. */
  if (short_hold) *short_hold = false;
  for (int i = 0; i < n && hold_ticks && short_hold; i++) {
    if ((st = enter(r, x[i].exec))) return st;
    if (hipEventQuery(r->dev[x[i].exec].start[i]) == hipSuccess) *short_hold = true;
  }
  for (int i = 0; i < n; i++) {
    raw_dev *v = &r->dev[x[i].exec];
    float f = 0;
    if ((st = enter(r, x[i].exec))) return st;
    if ((e = hipEventSynchronize(v->end[i])) != hipSuccess ||
        (e = hipEventElapsedTime(&f, v->start[i], v->end[i])) != hipSuccess)
      return fail(r, e, CUBERT_ERR_BACKEND, "raw HIP: timing a run on device %d", x[i].exec);
    ms[i] = f;
  }
  return CUBERT_OK;
}

cubert_status cb_hip_raw_staged(cb_hip_raw *r, int src_dev, uint64_t src, int dst_dev,
                                uint64_t dst, void *pinned, uint64_t size, uint32_t count,
                                double *ms) {
  cubert_status st;
  if ((st = enter(r, dst_dev)) || (st = enter(r, src_dev))) return st;
  double t0 = now();
  for (uint32_t k = 0; k < count; k++) {
    hipError_t e;
    if ((st = enter(r, src_dev))) return st;
    if ((e = hipMemcpyAsync(pinned, PTR(src), size, hipMemcpyDeviceToHost, r->dev[src_dev].stream[0])) !=
            hipSuccess ||
        (e = hipStreamSynchronize(r->dev[src_dev].stream[0])) != hipSuccess)
      return fail(r, e, CUBERT_ERR_COPY, "raw HIP: staging from device %d", src_dev);
    if ((st = enter(r, dst_dev))) return st;
    if ((e = hipMemcpyAsync(PTR(dst), pinned, size, hipMemcpyHostToDevice, r->dev[dst_dev].stream[0])) !=
            hipSuccess ||
        (e = hipStreamSynchronize(r->dev[dst_dev].stream[0])) != hipSuccess)
      return fail(r, e, CUBERT_ERR_COPY, "raw HIP: staging to device %d", dst_dev);
  }
  *ms = (now() - t0) * 1e3;
  return CUBERT_OK;
}

cubert_status cb_hip_raw_chase(cb_hip_raw *r, int exec, uint64_t next, uint64_t state,
                               uint64_t steps, double *ms) {
  hipFunction_t f;
  cubert_status st = enter_fn(r, exec, FN_CHASE, &f);
  if (st) return st;
  raw_dev *v = &r->dev[exec];
  void *np = PTR(next), *sp = PTR(state);
  unsigned long long s = steps;
  void *params[] = {&np, &sp, &s};
  hipError_t e;
  float f_ms = 0;
  if ((e = hipEventRecord(v->start[0], v->stream[0])) != hipSuccess ||
      (e = launch(f, 1, 1, v->stream[0], params)) != hipSuccess ||
      (e = hipEventRecord(v->end[0], v->stream[0])) != hipSuccess ||
      (e = hipEventSynchronize(v->end[0])) != hipSuccess ||
      (e = hipEventElapsedTime(&f_ms, v->start[0], v->end[0])) != hipSuccess)
    return fail(r, e, CUBERT_ERR_LAUNCH, "raw HIP: pointer chase on device %d", exec);
  *ms = f_ms;
  return CUBERT_OK;
}

cubert_status cb_hip_raw_launch_loop(cb_hip_raw *r, int dev, int nbuffers,
                                     const uint64_t *buffers, uint32_t count, bool packed, double *ns,
                                     double *enqueue_ns) {
  int which = nbuffers == 0 ? FN_EMPTY0 : nbuffers == 4 ? FN_EMPTY4 : nbuffers == 16 ? FN_EMPTY16 : -1;
  if (which < 0)
    return fail(r, hipSuccess, CUBERT_ERR_INVALID_ARGUMENT, "raw HIP: no empty kernel with %d buffers",
                nbuffers);
  hipFunction_t f;
  cubert_status st = enter_fn(r, dev, which, &f);
  if (st) return st;
  void *ptrs[16];
  void *params[16];
  for (int i = 0; i < nbuffers; i++) {
    ptrs[i] = PTR(buffers[i]);
    params[i] = &ptrs[i];
  }
  size_t bytes = (size_t)nbuffers * sizeof ptrs[0];
  void *extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, ptrs, HIP_LAUNCH_PARAM_BUFFER_SIZE, &bytes,
                   HIP_LAUNCH_PARAM_END};
  hipStream_t s = r->dev[dev].stream[0];
  double t0 = now();
  for (uint32_t k = 0; k < count; k++) {
    hipError_t e = packed && nbuffers
                       ? hipModuleLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra)
                       : launch(f, 1, 1, s, nbuffers ? params : NULL);
    if (e != hipSuccess) return fail(r, e, CUBERT_ERR_LAUNCH, "raw HIP: empty kernel on device %d", dev);
  }
  if (enqueue_ns) *enqueue_ns = (now() - t0) * 1e9 / (count ? count : 1);
  if ((st = sync_slot(r, dev, 0, "launch loop"))) return st;
  *ns = (now() - t0) * 1e9 / (count ? count : 1);
  return CUBERT_OK;
}

cubert_status cb_hip_raw_alloc_loop(cb_hip_raw *r, int dev, uint64_t size, uint32_t count,
                                    double *ns) {
  cubert_status st = enter(r, dev);
  if (st) return st;
  double t0 = now();
  for (uint32_t k = 0; k < count; k++) {
    void *p = NULL;
    hipError_t e = hipMalloc(&p, size);
    if (e != hipSuccess)
      return fail(r, e, CUBERT_ERR_OUT_OF_MEMORY, "raw HIP: hipMalloc(%" PRIu64 ") on device %d", size,
                  dev);
    if ((e = hipFree(p)) != hipSuccess) return fail(r, e, CUBERT_ERR_BACKEND, "raw HIP: hipFree on device %d", dev);
  }
  *ns = (now() - t0) * 1e9 / (count ? count : 1);
  return CUBERT_OK;
}

/* ------------------------------------------------------------ pitched copies */

/* HIP's NVIDIA headers name CUDA's 3-D parameters without a tag and build
 * the pointers with C++-only helpers: C fills the members (as
 * hip_strided.c does). */
#if RAW_NVIDIA
typedef struct cudaMemcpy3DParms raw_3d_parms;
#else
typedef hipMemcpy3DParms raw_3d_parms;
#endif

static hipError_t pitched_enqueue(const cb_hip_raw_pitched *p, hipStream_t s) {
  hipMemcpyKind kind = p->op == CB_HIP_RAW_H2D   ? hipMemcpyHostToDevice
                       : p->op == CB_HIP_RAW_D2H ? hipMemcpyDeviceToHost
                                                 : hipMemcpyDeviceToDevice;
  if (p->depth == 0)
    return hipMemcpy2DAsync(PTR(p->dst), (size_t)p->dst_pitch, PTR(p->src), (size_t)p->src_pitch,
                            (size_t)p->width, (size_t)p->height, kind, s);
  raw_3d_parms q;
  memset(&q, 0, sizeof q);
  q.srcPtr.ptr = PTR(p->src);
  q.srcPtr.pitch = (size_t)p->src_pitch;
  q.srcPtr.xsize = (size_t)p->width;
  q.srcPtr.ysize = (size_t)p->src_rows;
  q.dstPtr.ptr = PTR(p->dst);
  q.dstPtr.pitch = (size_t)p->dst_pitch;
  q.dstPtr.xsize = (size_t)p->width;
  q.dstPtr.ysize = (size_t)p->dst_rows;
  q.extent.width = (size_t)p->width;
  q.extent.height = (size_t)p->height;
  q.extent.depth = (size_t)p->depth;
  q.kind = kind;
  return hipMemcpy3DAsync(&q, s);
}

cubert_status cb_hip_raw_pitched_run(cb_hip_raw *r, int dev, const cb_hip_raw_pitched *p, uint32_t count,
                                     double *ms) {
  cubert_status st = enter(r, dev);
  if (st) return st;
  raw_dev *v = &r->dev[dev];
  const char *what = p->depth ? "hipMemcpy3DAsync" : "hipMemcpy2DAsync";
  hipError_t e = hipEventRecord(v->start[0], v->stream[0]);
  for (uint32_t k = 0; k < count && e == hipSuccess; k++) e = pitched_enqueue(p, v->stream[0]);
  if (e == hipSuccess) e = hipEventRecord(v->end[0], v->stream[0]);
  float f = 0;
  if (e == hipSuccess) e = hipEventSynchronize(v->end[0]);
  if (e == hipSuccess) e = hipEventElapsedTime(&f, v->start[0], v->end[0]);
  if (e != hipSuccess) {
    (void)hipStreamSynchronize(v->stream[0]);
    return fail(r, e, CUBERT_ERR_COPY,
                "raw HIP: %s of %" PRIu64 " x %" PRIu64 " x %" PRIu64 " bytes on device %d", what, p->width,
                p->height, p->depth ? p->depth : 1, dev);
  }
  *ms = f;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ small transfers, step by step */

#define SMALL_STACK 4096u /* hip_stream.c's SMALL_WRITE; the bounce steps' stack buffer */
#define SMALL_READ 64u    /* hip_stream.c's SMALL_READ */
#define SMALL_MARK_EVERY 32u
#define SMALL_REAP_EVERY 256u
#define SMALL_MARKS 16u

#if defined(__GNUC__)
#define RAW_NOINLINE __attribute__((noinline))
#else
#define RAW_NOINLINE
#endif

/* What the backend's context check (cb_hip_enter) compares with. */
typedef struct raw_ctx {
#if RAW_NVIDIA
  hipCtx_t context;
#else
  int device;
#endif
} raw_ctx;

static raw_ctx ctx_of(cb_hip_raw *raw, int dev) {
#if RAW_NVIDIA
  return (raw_ctx){raw->dev[dev].context};
#else
  (void)raw;
  return (raw_ctx){dev};
#endif
}

/* The backend's context check (cb_hip_enter): ask, set only when not current. */
static hipError_t ctx_check(const raw_ctx *c) {
#if RAW_NVIDIA
  hipCtx_t cur = NULL;
  if (hipCtxGetCurrent(&cur) == hipSuccess && cur == c->context) return hipSuccess;
  return hipCtxSetCurrent(c->context);
#else
  int cur = -1;
  if (hipGetDevice(&cur) == hipSuccess && cur == c->device) return hipSuccess;
  return hipSetDevice(c->device);
#endif
}

/* The backend's marks (hip_stream.c), as the small and launch steps add
 * them: events recorded and not yet seen complete, oldest at head. */
typedef struct mark_ring {
  hipEvent_t ev[SMALL_MARKS];
  uint32_t made, head, pending;
} mark_ring;

static hipError_t ring_make(mark_ring *m) {
  hipError_t e = hipSuccess;
  while (m->made < SMALL_MARKS && (e = hipEventCreateWithFlags(&m->ev[m->made], hipEventDisableTiming)) == hipSuccess)
    m->made++;
  return e;
}

static void ring_free(mark_ring *m) {
  for (uint32_t i = 0; i < m->made; i++) (void)hipEventDestroy(m->ev[i]);
  m->made = 0;
}

/* After the n-th operation on stream s: an event every SMALL_MARK_EVERY
 * (the oldest waited for when SMALL_MARKS are pending), and every
 * SMALL_REAP_EVERY the pending ones queried oldest first (the runtime's
 * reap asks the backend's progress that often). */
static hipError_t ring_mark(mark_ring *m, hipStream_t s, uint32_t n) {
  hipError_t e = hipSuccess;
  if (n % SMALL_MARK_EVERY == 0) {
    if (m->pending == SMALL_MARKS) { /* full: the oldest is waited for */
      e = hipEventSynchronize(m->ev[m->head]);
      m->head = (m->head + 1) % SMALL_MARKS;
      m->pending--;
    }
    if (e == hipSuccess) e = hipEventRecord(m->ev[(m->head + m->pending) % SMALL_MARKS], s);
    if (e == hipSuccess) m->pending++;
  }
  if (e == hipSuccess && n % SMALL_REAP_EVERY == 0) {
    while (m->pending) {
      hipError_t q = hipEventQuery(m->ev[m->head]);
      if (q == hipErrorNotReady) break;
      if (q != hipSuccess) return q;
      m->head = (m->head + 1) % SMALL_MARKS;
      m->pending--;
    }
  }
  return e;
}

typedef struct small_run {
  hipStream_t s;
  bool d2h;
  void *host;             /* the caller's host memory */
  void *dev;
  size_t size;
  char *heap;             /* the bounce above SMALL_STACK bytes */
  pthread_mutex_t lock;
  hipEvent_t wait;        /* STEP_EVENT, STEP_EVENTED */
  mark_ring marks;
  uint32_t copies, busy;
  raw_ctx ctx;
  bool driver;            /* copies through hipMemcpyHtoDAsync / DtoHAsync */
} small_run;

static hipError_t small_copy(small_run *r, void *host) {
  if (r->driver)
    return r->d2h ? hipMemcpyDtoHAsync(host, DPTR(r->dev), r->size, r->s)
                  : hipMemcpyHtoDAsync(DPTR(r->dev), host, r->size, r->s);
  return r->d2h ? hipMemcpyAsync(host, r->dev, r->size, hipMemcpyDeviceToHost, r->s)
                : hipMemcpyAsync(r->dev, host, r->size, hipMemcpyHostToDevice, r->s);
}

/* Host side a buffer of the backend's bounce kind: on this frame's stack up
 * to SMALL_STACK bytes (a frame of its own, as cb_hip_read's), else the
 * heap; `copy`: the memcpy in (h2d) or out (d2h) too. */
static RAW_NOINLINE hipError_t small_bounce(small_run *r, bool copy) {
  unsigned char stack[SMALL_STACK];
  unsigned char *buf = r->size <= SMALL_STACK ? stack : (unsigned char *)r->heap;
  if (!r->d2h) memcpy(buf, r->host, r->size); /* h2d: the bytes must be there to send */
  hipError_t e = small_copy(r, buf);
  if (copy && r->d2h && e == hipSuccess) memcpy(r->host, buf, r->size);
  return e;
}

static hipError_t small_ctx(small_run *r) { return ctx_check(&r->ctx); }

static void small_locks(small_run *r) {
  pthread_mutex_lock(&r->lock);
  pthread_mutex_unlock(&r->lock);
  pthread_mutex_lock(&r->lock);
  pthread_mutex_unlock(&r->lock);
}

/* The driver call hip_stream.c's host_pageable() makes; true: pageable. */
static bool small_attrs(const void *p) {
#if RAW_NVIDIA
  struct cudaPointerAttributes a;
  memset(&a, 0, sizeof a);
  bool ok = cudaPointerGetAttributes(&a, p) == cudaSuccess;
  if (!ok) (void)cudaGetLastError();
  return ok && a.type == cudaMemoryTypeUnregistered;
#else
  hipPointerAttribute_t a;
  memset(&a, 0, sizeof a);
  hipError_t e = hipPointerGetAttributes(&a, p);
  if (e != hipSuccess) (void)hipGetLastError();
  return e == hipErrorInvalidValue;
#endif
}

/* hipStreamQuery; not ready counts as busy, not as an error. */
static hipError_t small_query(small_run *r, bool *busy) {
  hipError_t q = hipStreamQuery(r->s);
  *busy = q == hipErrorNotReady;
  if (*busy) r->busy++;
  return *busy ? hipSuccess : q;
}

static hipError_t small_wait(small_run *r) {
  hipError_t e = hipEventRecord(r->wait, r->s);
  return e == hipSuccess ? hipEventSynchronize(r->wait) : e;
}

/* The backend's marks, one step per copy. */
static hipError_t small_mark(small_run *r) { return ring_mark(&r->marks, r->s, r->copies); }

static hipError_t small_backend(small_run *r) {
  hipError_t e = small_ctx(r);
  bool small = r->size <= (r->d2h ? SMALL_READ : SMALL_STACK), busy = false;
  if (r->d2h) {
    pthread_mutex_lock(&r->lock); /* cb_hip_read: the stream's enqueued count */
    pthread_mutex_unlock(&r->lock);
    bool pageable = !small && RAW_NVIDIA && small_attrs(r->host), idle = false;
    if (e == hipSuccess && small) e = small_bounce(r, true);
    else if (e == hipSuccess) e = small_copy(r, r->host);
    if (e == hipSuccess) idle = RAW_NVIDIA && (small || pageable);
    if (e == hipSuccess && !idle) {
      e = small_query(r, &busy);
      idle = e == hipSuccess && !busy;
    }
    if (e == hipSuccess && !idle) e = small_wait(r);
    pthread_mutex_lock(&r->lock); /* the reap after the read */
    pthread_mutex_unlock(&r->lock);
    return e;
  }
  if (e == hipSuccess && small) {
    e = small_bounce(r, true);
  } else if (e == hipSuccess) {
    (void)small_attrs(r->host); /* cb_hip_write asks what a larger source is */
    e = small_copy(r, r->host);
  }
  pthread_mutex_lock(&r->lock); /* cb_hip_mark_work */
  if (e == hipSuccess) e = small_mark(r);
  pthread_mutex_unlock(&r->lock);
  return e;
}

static hipError_t small_step(small_run *r, cb_hip_raw_step step) {
  hipError_t e = hipSuccess;
  bool busy = false;
  r->copies++;
  switch (step) {
  case CB_HIP_RAW_STEP_CTX:
    if ((e = small_ctx(r)) != hipSuccess) return e;
    return small_copy(r, r->host);
  case CB_HIP_RAW_STEP_LOCKS:
    small_locks(r);
    return small_copy(r, r->host);
  case CB_HIP_RAW_STEP_STACK:
  case CB_HIP_RAW_STEP_BOUNCE:
    return small_bounce(r, step == CB_HIP_RAW_STEP_BOUNCE);
  case CB_HIP_RAW_STEP_QUERY:
    if ((e = small_copy(r, r->host)) != hipSuccess) return e;
    return small_query(r, &busy);
  case CB_HIP_RAW_STEP_ATTRS:
    if ((e = small_copy(r, r->host)) != hipSuccess) return e;
    (void)small_attrs(r->host);
    return hipSuccess;
  case CB_HIP_RAW_STEP_QUERY_ATTRS:
    if ((e = small_copy(r, r->host)) != hipSuccess || (e = small_query(r, &busy)) != hipSuccess) return e;
    if (busy) (void)small_attrs(r->host);
    return hipSuccess;
  case CB_HIP_RAW_STEP_EVENT:
    if ((e = small_copy(r, r->host)) != hipSuccess) return e;
    return small_wait(r);
  case CB_HIP_RAW_STEP_MARKS:
    if ((e = small_copy(r, r->host)) != hipSuccess) return e;
    return small_mark(r);
  case CB_HIP_RAW_STEP_BACKEND:
    return small_backend(r);
  case CB_HIP_RAW_STEP_PLAIN:
  case CB_HIP_RAW_STEP_DRIVER:
  case CB_HIP_RAW_STEP_EVENTED:
  case CB_HIP_RAW_STEP_WAITED:
  case CB_HIP_RAW_STEP_COUNT:
    break;
  }
  return small_copy(r, r->host);
}

cubert_status cb_hip_raw_small(cb_hip_raw *raw, int dev, cb_hip_raw_step step, bool d2h, void *host,
                               uint64_t dev_addr, uint64_t size, uint32_t count, double *us,
                               uint32_t *busy) {
  cb_hip_raw_each each = {0};
  return cb_hip_raw_small_each(raw, dev, step, d2h, host, dev_addr, size, count, &each, us, busy);
}

/* The timed loop; without `before` and `ns`, the calls back to back. */
static hipError_t small_calls(small_run *r, cb_hip_raw_step step, uint32_t count, cb_hip_raw_each *each,
                              double *t0, double *t1) {
  hipError_t e = hipSuccess;
  *t0 = now();
  if (!each->before && !each->ns) {
    for (uint32_t k = 0; k < count && e == hipSuccess; k++) e = small_step(r, step);
    *t1 = now();
    return e;
  }
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (uint32_t k = 0; k < count && e == hipSuccess; k++) {
    if (each->before && each->before(each->arg) != 0) {
      each->failed_before = true;
      break;
    }
    e = small_step(r, step);
    if (each->ns) {
      clock_gettime(CLOCK_MONOTONIC, &b);
      each->ns[k] = (uint64_t)((int64_t)(b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec));
      a = b;
    }
  }
  *t1 = now();
  return e;
}

cubert_status cb_hip_raw_small_each(cb_hip_raw *raw, int dev, cb_hip_raw_step step, bool d2h, void *host,
                                    uint64_t dev_addr, uint64_t size, uint32_t count, cb_hip_raw_each *each,
                                    double *us, uint32_t *busy) {
  if ((unsigned)step >= CB_HIP_RAW_STEP_COUNT || !host || !dev_addr || !size || size > SIZE_MAX)
    return fail(raw, hipSuccess, CUBERT_ERR_INVALID_ARGUMENT, "raw HIP: small transfer: bad arguments");
  cubert_status st = enter(raw, dev);
  if (st) return st;
  small_run r;
  memset(&r, 0, sizeof r);
  r.s = raw->dev[dev].stream[0];
  r.d2h = d2h;
  r.host = host;
  r.dev = PTR(dev_addr);
  r.size = (size_t)size;
  r.ctx = ctx_of(raw, dev);
  /* the backend's pageable copies take the driver's entry on NVIDIA (hip_stream.c: copy_pageable, copy_to_pageable) */
  r.driver = step == CB_HIP_RAW_STEP_DRIVER || (RAW_NVIDIA && step == CB_HIP_RAW_STEP_BACKEND);
  if (size > SMALL_STACK && !(r.heap = malloc((size_t)size)))
    return fail(raw, hipSuccess, CUBERT_ERR_OUT_OF_MEMORY, "raw HIP: small transfer: no host bounce");
  pthread_mutex_init(&r.lock, NULL);
  hipError_t e = hipEventCreateWithFlags(&r.wait, hipEventDisableTiming);
  if (e == hipSuccess) e = ring_make(&r.marks);
  if (e == hipSuccess) e = hipStreamSynchronize(r.s);
  if (e == hipSuccess && step == CB_HIP_RAW_STEP_EVENTED) e = hipEventRecord(r.wait, r.s);
  if (e == hipSuccess && step == CB_HIP_RAW_STEP_WAITED && (e = hipEventRecord(r.wait, raw->dev[dev].stream[1])) == hipSuccess)
    e = hipStreamWaitEvent(r.s, r.wait, 0);
  double t0 = now(), t1 = t0;
  each->failed_before = false;
  if (e == hipSuccess) e = small_calls(&r, step, count, each, &t0, &t1);
  hipError_t w = hipStreamSynchronize(r.s);
  if (e == hipSuccess) e = w;
  ring_free(&r.marks);
  if (r.wait) (void)hipEventDestroy(r.wait);
  pthread_mutex_destroy(&r.lock);
  free(r.heap);
  if (e != hipSuccess)
    return fail(raw, e, CUBERT_ERR_COPY, "raw HIP: small %s of %" PRIu64 " bytes (step %d) on device %d",
                d2h ? "d2h" : "h2d", size, (int)step, dev);
  if (each->failed_before)
    return fail(raw, hipSuccess, CUBERT_ERR_BACKEND, "raw HIP: small %s of %" PRIu64 " bytes: the caller's call before one failed",
                d2h ? "d2h" : "h2d", size);
  *us = (t1 - t0) * 1e6 / (count ? count : 1);
  if (busy) *busy = r.busy;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ launches, step by step */

/* cubert_backend_arg's layout (backends/backend.h), which the HIP backend's
 * hip_launch reads each argument from; mirrored, not included: nothing here
 * touches cubert's objects. */
typedef struct launch_arg_rec {
  int kind, access;
  uint64_t address, size;
  const void *scalar;
  uint32_t scalar_size;
  void *owner;
} launch_arg_rec;

/* hip_backend.c's arg_slot: one argument's value as the kernel receives it. */
typedef union launch_slot {
  void *pointer;
  unsigned char bytes[64];
  long double align_;
} launch_slot;

#define LAUNCH_KIND_SCALAR 2 /* cubert_param_kind's CUBERT_PARAM_SCALAR, TENSOR */
#define LAUNCH_KIND_TENSOR 3

typedef struct launch_run {
  hipFunction_t f;
  hipStream_t s;
  uint32_t n;
  void *ptrs[16];         /* raw's values ... */
  void *params[16];       /* ... and the array of pointers to them */
  size_t bytes;
  void *extra[5];         /* the same values packed (STEP_PACKED) */
  launch_arg_rec args[16]; /* what the backend is handed (STEP_MARSHAL) */
  pthread_mutex_t lock;
  atomic_bool lost;       /* cb_hip_check_lost's flag */
  mark_ring marks;
  uint32_t launches;
  raw_ctx ctx;
} launch_run;

/* The backend's context check (enter_live: the lost flag, then
 * cb_hip_enter's ask-and-compare). */
static hipError_t launch_ctx(launch_run *r) {
  return atomic_load(&r->lost) ? hipErrorUnknown : ctx_check(&r->ctx);
}

/* hip_launch's marshalling: each argument record into a slot of its own
 * (scalars and tensors copied, buffers by address), an array of pointers to
 * the slots, then the launch; a frame of its own, as hip_launch's. */
static RAW_NOINLINE hipError_t launch_marshalled(launch_run *r) {
  launch_slot slots[16];
  void *params[16];
  for (uint32_t i = 0; i < r->n; i++) {
    const launch_arg_rec *a = &r->args[i];
    if (a->kind == LAUNCH_KIND_SCALAR) {
      if (!a->scalar || a->scalar_size == 0 || a->scalar_size > sizeof slots[i].bytes) return hipErrorInvalidValue;
      memcpy(slots[i].bytes, a->scalar, a->scalar_size);
    } else if (a->kind == LAUNCH_KIND_TENSOR) {
      return hipErrorInvalidValue; /* the bench binds no tensor */
    } else {
      slots[i].pointer = PTR(a->address);
    }
    params[i] = &slots[i];
  }
  return hipModuleLaunchKernel(r->f, 1, 1, 1, 1, 1, 1, 0, r->s, r->n ? params : NULL, NULL);
}

/* The backend's packed marshalling (hip_backend.c, cb_hip_pack_args): each
 * argument at the running offset when no padding is needed (buffers 8-byte
 * pointers), one buffer handed through `extra`; a frame of its own. */
static RAW_NOINLINE hipError_t launch_packed_marshalled(launch_run *r) {
  _Alignas(16) unsigned char buf[16 * 64];
  size_t off = 0;
  for (uint32_t i = 0; i < r->n; i++) {
    const launch_arg_rec *a = &r->args[i];
    size_t size = a->kind == LAUNCH_KIND_SCALAR ? a->scalar_size : sizeof(void *);
    if (a->kind == LAUNCH_KIND_TENSOR || size == 0 || size > 8 || (off & ((size & (~size + 1)) - 1)))
      return hipErrorInvalidValue; /* the bench binds buffers only */
    if (a->kind == LAUNCH_KIND_SCALAR) {
      memcpy(buf + off, a->scalar, size);
    } else {
      void *p = PTR(a->address);
      memcpy(buf + off, &p, sizeof p);
    }
    off += size;
  }
  void *extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, buf, HIP_LAUNCH_PARAM_BUFFER_SIZE, &off, HIP_LAUNCH_PARAM_END};
  return hipModuleLaunchKernel(r->f, 1, 1, 1, 1, 1, 1, 0, r->s, NULL, r->n ? extra : NULL);
}

/* hip_launch_image's part: the image the runtime wrote (here raw's packed
 * pointers, written once) through `extra`, its size copied; a frame of its
 * own. */
static RAW_NOINLINE hipError_t launch_image_marshalled(launch_run *r) {
  size_t size = r->bytes;
  void *extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, r->ptrs, HIP_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   HIP_LAUNCH_PARAM_END};
  return hipModuleLaunchKernel(r->f, 1, 1, 1, 1, 1, 1, 0, r->s, NULL, r->n ? extra : NULL);
}

/* cb_hip_mark_work's part: under a lock, the backend's marks (ring_mark). */
static hipError_t launch_mark(launch_run *r) {
  pthread_mutex_lock(&r->lock);
  hipError_t e = ring_mark(&r->marks, r->s, ++r->launches);
  pthread_mutex_unlock(&r->lock);
  return e;
}

static hipError_t launch_plain(launch_run *r) {
  return hipModuleLaunchKernel(r->f, 1, 1, 1, 1, 1, 1, 0, r->s, r->n ? r->params : NULL, NULL);
}

static hipError_t launch_step(launch_run *r, cb_hip_raw_lstep step) {
  hipError_t e;
  switch (step) {
  case CB_HIP_RAW_LSTEP_CTX:
    if ((e = launch_ctx(r)) != hipSuccess) return e;
    return launch_plain(r);
  case CB_HIP_RAW_LSTEP_MARSHAL:
    return launch_marshalled(r);
  case CB_HIP_RAW_LSTEP_LOCK:
    pthread_mutex_lock(&r->lock);
    pthread_mutex_unlock(&r->lock);
    return launch_plain(r);
  case CB_HIP_RAW_LSTEP_MARK:
    if ((e = launch_plain(r)) != hipSuccess) return e;
    return launch_mark(r);
  case CB_HIP_RAW_LSTEP_PACKED:
    return hipModuleLaunchKernel(r->f, 1, 1, 1, 1, 1, 1, 0, r->s, NULL, r->n ? r->extra : NULL);
  case CB_HIP_RAW_LSTEP_BACKEND:
  case CB_HIP_RAW_LSTEP_BACKEND_PACKED:
  case CB_HIP_RAW_LSTEP_BACKEND_IMAGE: {
    if ((e = launch_ctx(r)) != hipSuccess) return e;
    e = step == CB_HIP_RAW_LSTEP_BACKEND          ? launch_marshalled(r)
        : step == CB_HIP_RAW_LSTEP_BACKEND_PACKED ? launch_packed_marshalled(r)
                                                  : launch_image_marshalled(r);
    hipError_t m = launch_mark(r);
    return e != hipSuccess ? e : m;
  }
  case CB_HIP_RAW_LSTEP_PLAIN:
  case CB_HIP_RAW_LSTEP_COUNT:
    break;
  }
  return launch_plain(r);
}

cubert_status cb_hip_raw_launch_step(cb_hip_raw *raw, int dev, cb_hip_raw_lstep step, int nbuffers,
                                     const uint64_t *buffers, uint32_t count, double *enqueue_ns) {
  int which = nbuffers == 0 ? FN_EMPTY0 : nbuffers == 4 ? FN_EMPTY4 : nbuffers == 16 ? FN_EMPTY16 : -1;
  if ((unsigned)step >= CB_HIP_RAW_LSTEP_COUNT || which < 0 || (nbuffers && !buffers) || !enqueue_ns)
    return fail(raw, hipSuccess, CUBERT_ERR_INVALID_ARGUMENT, "raw HIP: launch step: bad arguments");
  launch_run *r = calloc(1, sizeof *r);
  if (!r) return fail(raw, hipSuccess, CUBERT_ERR_OUT_OF_MEMORY, "raw HIP: launch step: out of host memory");
  cubert_status st = enter_fn(raw, dev, which, &r->f);
  if (st) {
    free(r);
    return st;
  }
  r->s = raw->dev[dev].stream[0];
  r->n = (uint32_t)nbuffers;
  for (uint32_t i = 0; i < r->n; i++) {
    r->ptrs[i] = PTR(buffers[i]);
    r->params[i] = &r->ptrs[i];
    r->args[i] = (launch_arg_rec){.kind = 0, .access = 3, .address = buffers[i], .size = 256};
  }
  r->bytes = r->n * sizeof r->ptrs[0];
  r->extra[0] = HIP_LAUNCH_PARAM_BUFFER_POINTER;
  r->extra[1] = r->ptrs;
  r->extra[2] = HIP_LAUNCH_PARAM_BUFFER_SIZE;
  r->extra[3] = &r->bytes;
  r->extra[4] = HIP_LAUNCH_PARAM_END;
  atomic_init(&r->lost, false);
  r->ctx = ctx_of(raw, dev);
  pthread_mutex_init(&r->lock, NULL);
  hipError_t e = ring_make(&r->marks);
  if (e == hipSuccess) e = hipStreamSynchronize(r->s);
  double t0 = now();
  for (uint32_t k = 0; k < count && e == hipSuccess; k++) e = launch_step(r, step);
  double t1 = now();
  hipError_t w = hipStreamSynchronize(r->s);
  if (e == hipSuccess) e = w;
  ring_free(&r->marks);
  pthread_mutex_destroy(&r->lock);
  free(r);
  if (e != hipSuccess)
    return fail(raw, e, CUBERT_ERR_LAUNCH, "raw HIP: empty kernel with %d buffers (launch step %d) on device %d",
                nbuffers, (int)step, dev);
  *enqueue_ns = (t1 - t0) * 1e9 / (count ? count : 1);
  return CUBERT_OK;
}
