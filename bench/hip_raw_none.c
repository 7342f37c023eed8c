/* bench/hip_raw_none.c: the raw HIP baselines (backends/hip/hip_raw.h) when
 * cubert is built without HIP: every call says so. bench/CMakeLists.txt adds
 * this file only when backends/hip did not build hip_raw.c. */
#include <stdio.h>

#include "backends/hip/hip_raw.h"

struct cb_hip_raw {
  int unused;
};

static const char no_hip[] = "raw HIP: cubert was built without HIP";

cubert_status cb_hip_raw_open(const cb_hip_raw_sources *sources, cb_hip_raw **raw,
                              int *device_count, char *message, size_t capacity) {
  (void)sources;
  (void)raw;
  if (device_count) *device_count = 0;
  if (message && capacity) snprintf(message, capacity, "%s", no_hip);
  return CUBERT_ERR_UNSUPPORTED;
}

void cb_hip_raw_close(cb_hip_raw *raw) { (void)raw; }
const char *cb_hip_raw_error(const cb_hip_raw *raw) {
  (void)raw;
  return no_hip;
}
cubert_status cb_hip_raw_wall_clock_khz(cb_hip_raw *raw, int dev, int *khz) {
  (void)raw;
  (void)dev;
  (void)khz;
  return CUBERT_ERR_UNSUPPORTED;
}
cubert_status cb_hip_raw_alloc(cb_hip_raw *raw, int dev, uint64_t size, uint64_t *addr) {
  return CUBERT_ERR_UNSUPPORTED;
}
void cb_hip_raw_free(cb_hip_raw *raw, int dev, uint64_t addr) {}
cubert_status cb_hip_raw_host_alloc(cb_hip_raw *raw, uint64_t size, void **ptr) {
  return CUBERT_ERR_UNSUPPORTED;
}
void cb_hip_raw_host_free(cb_hip_raw *raw, void *ptr) {}
cubert_status cb_hip_raw_upload(cb_hip_raw *raw, int dev, uint64_t dst, const void *src,
                                uint64_t size) {
  return CUBERT_ERR_UNSUPPORTED;
}
cubert_status cb_hip_raw_download(cb_hip_raw *raw, int dev, void *dst, uint64_t src,
                                  uint64_t size) {
  return CUBERT_ERR_UNSUPPORTED;
}
cubert_status cb_hip_raw_fill(cb_hip_raw *raw, int dev, uint64_t dst, uint32_t value,
                              uint64_t size) {
  return CUBERT_ERR_UNSUPPORTED;
}
cubert_status cb_hip_raw_peer(cb_hip_raw *raw, int dev, int peer, bool *can) {
  return CUBERT_ERR_UNSUPPORTED;
}
cubert_status cb_hip_raw_checksum(cb_hip_raw *raw, int dev, uint64_t addr, uint64_t n,
                                  uint64_t *sum) {
  return CUBERT_ERR_UNSUPPORTED;
}
cubert_status cb_hip_raw_run(cb_hip_raw *raw, const cb_hip_raw_xfer *x, int n, uint32_t count,
                             uint64_t hold_ticks, double *ms, double *enqueue_ms, bool *short_hold) {
  return CUBERT_ERR_UNSUPPORTED;
}
cubert_status cb_hip_raw_staged(cb_hip_raw *raw, int src_dev, uint64_t src, int dst_dev,
                                uint64_t dst, void *pinned, uint64_t size, uint32_t count,
                                double *ms) {
  return CUBERT_ERR_UNSUPPORTED;
}
cubert_status cb_hip_raw_chase(cb_hip_raw *raw, int exec, uint64_t next, uint64_t state,
                               uint64_t steps, double *ms) {
  return CUBERT_ERR_UNSUPPORTED;
}
cubert_status cb_hip_raw_launch_loop(cb_hip_raw *raw, int dev, int nbuffers,
                                     const uint64_t *buffers, uint32_t count, bool packed, double *ns,
                                     double *enqueue_ns) {
  return CUBERT_ERR_UNSUPPORTED;
}
cubert_status cb_hip_raw_launch_step(cb_hip_raw *raw, int dev, cb_hip_raw_lstep step, int nbuffers,
                                     const uint64_t *buffers, uint32_t count, double *enqueue_ns) {
  return CUBERT_ERR_UNSUPPORTED;
}
cubert_status cb_hip_raw_alloc_loop(cb_hip_raw *raw, int dev, uint64_t size, uint32_t count,
                                    double *ns) {
  return CUBERT_ERR_UNSUPPORTED;
}
cubert_status cb_hip_raw_pitched_run(cb_hip_raw *raw, int dev, const cb_hip_raw_pitched *p, uint32_t count,
                                     double *ms) {
  return CUBERT_ERR_UNSUPPORTED;
}
cubert_status cb_hip_raw_small(cb_hip_raw *raw, int dev, cb_hip_raw_step step, bool d2h, void *host,
                               uint64_t dev_addr, uint64_t size, uint32_t count, double *us,
                               uint32_t *busy) {
  return CUBERT_ERR_UNSUPPORTED;
}

cubert_status cb_hip_raw_small_each(cb_hip_raw *raw, int dev, cb_hip_raw_step step, bool d2h, void *host,
                                    uint64_t dev_addr, uint64_t size, uint32_t count, cb_hip_raw_each *each,
                                    double *us, uint32_t *busy) {
  return CUBERT_ERR_UNSUPPORTED;
}
