/* bench/bench_engine.c: which engine carries a copy, for the rows' labels
 * (docs/bench.md). On ROCm the answer depends on the copy and on two
 * environment variables; the rules are ROCm/clr's:
 *   - rocclr/device/rocm/rocblit.cpp, KernelBlitManager::copyBuffer: a copy
 *     between device memories of one GPU always runs as a blit kernel; a
 *     peer copy does too up to ROC_P2P_SDMA_SIZE KiB (rocclr/utils/
 *     flags.hpp: 1024 by default, "the minimum size in KB for P2P transfer
 *     with SDMA"), and only larger ones go to SDMA; host memory goes through
 *     SDMA unless the size is at most GPU_FORCE_BLIT_COPY_SIZE KiB (0).
 *   - HSA_ENABLE_SDMA=0 makes ROCr do every SDMA copy with blit kernels.
 * CUDA's memcpy runs on copy engines; the host backend uses memcpy. */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

static uint64_t env_kib(const char *name, uint64_t fallback) {
  const char *v = getenv(name);
  if (!v || !*v) return fallback;
  char *end = NULL;
  unsigned long long k = strtoull(v, &end, 10);
  return end && *end == '\0' ? (uint64_t)k * 1024u : fallback;
}

const char *cb_bench_copy_engine(const char *backend, const char *arch, cb_bench_copy kind, uint64_t size) {
  if (kind == CB_BENCH_COPY_KERNEL) return "kernel";
  if (backend && strcmp(backend, "host") == 0) return "memcpy";
  if (!arch) return "";
  if (strncmp(arch, "sm_", 3) == 0) return "copy-engine";
  if (strncmp(arch, "gfx", 3) != 0) return "";
  const char *sdma = getenv("HSA_ENABLE_SDMA");
  bool sdma_off = sdma && strcmp(sdma, "0") == 0;
  switch (kind) {
  case CB_BENCH_COPY_SAME_DEVICE:
    return "blit-kernel";
  case CB_BENCH_COPY_PEER:
    return size > env_kib("ROC_P2P_SDMA_SIZE", 1024u * 1024u) && !sdma_off ? "sdma" : "blit-kernel";
  case CB_BENCH_COPY_HOST:
    return size > env_kib("GPU_FORCE_BLIT_COPY_SIZE", 0) && !sdma_off ? "sdma" : "blit-kernel";
  default:
    return "";
  }
}
