/* bench/bench_raw.c: the raw baselines behind one interface (bench.h).
 *
 * HIP devices: plain HIP (backends/hip/hip_raw.c), timed with hipEvents.
 * Host backend: what its simulated devices do without the runtime: plain
 * memcpy for copies, the kernels' host functions called directly for kernel
 * copies and launches, malloc/free for allocations, all timed with the host
 * clock. Host "device memory" is plain heap memory here. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/hip/hip_raw.h"
#include "bench/bench.h"

struct cb_bench_raw {
  bool host;
  cb_hip_raw *hip;
  char message[1024];
};

static const char host_description[] =
    "host backend: plain memcpy (copy-engine rows), the kernels' host functions called directly "
    "(kernel rows, launches), malloc/free (allocations); host clock";
static const char hip_description[] =
    "plain HIP: hipMemcpyAsync, hipMemcpyPeerAsync, the same kernel source through hiprtc + "
    "hipModuleLaunchKernel, hipMalloc/hipFree; hipEvents";

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static cubert_status fail(cb_bench_raw *r, cubert_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
  return st;
}

/* A HIP call's status, its message copied on failure. */
static cubert_status hip(cb_bench_raw *r, cubert_status st) {
  if (st) snprintf(r->message, sizeof r->message, "%s", cb_hip_raw_error(r->hip));
  return st;
}

cubert_status cb_bench_raw_open(const char *backend, cb_bench_raw **raw) {
  cb_bench_raw *r = calloc(1, sizeof *r);
  if (!r) return CUBERT_ERR_OUT_OF_MEMORY;
  if (strcmp(backend, "host") == 0) {
    r->host = true;
  } else {
    cb_hip_raw_sources src = {cubert_builtin_desc(CUBERT_BUILTIN_COPY_U32)->source,
                              cubert_builtin_desc(CUBERT_BUILTIN_CHECKSUM_U32)->source,
                              cb_bench_kernel_source()};
    int n = 0;
    char msg[512] = "";
    cubert_status st = cb_hip_raw_open(&src, &r->hip, &n, msg, sizeof msg);
    if (st) {
      fprintf(stderr, "cubert bench: raw HIP baseline unavailable: %s\n", msg);
      free(r);
      return st;
    }
  }
  *raw = r;
  return CUBERT_OK;
}

void cb_bench_raw_close(cb_bench_raw *r) {
  if (!r) return;
  if (r->hip) cb_hip_raw_close(r->hip);
  free(r);
}

const char *cb_bench_raw_describe(const cb_bench_raw *r) {
  return r->host ? host_description : hip_description;
}
const char *cb_bench_raw_error(const cb_bench_raw *r) { return r->message; }
bool cb_bench_raw_is_host(const cb_bench_raw *r) { return r->host; }

/* ------------------------------------------------------------ memory */

static void *host_ptr(uint64_t a) { return (void *)(uintptr_t)a; }

cubert_status cb_bench_raw_hold_clock_khz(cb_bench_raw *r, int dev, int *khz) {
  if (r->host) return fail(r, CUBERT_ERR_UNSUPPORTED, "the host backend's hold counts nanoseconds");
  return hip(r, cb_hip_raw_wall_clock_khz(r->hip, dev, khz));
}

cubert_status cb_bench_raw_alloc(cb_bench_raw *r, int dev, uint64_t size, uint64_t *addr) {
  if (!r->host) return hip(r, cb_hip_raw_alloc(r->hip, dev, size, addr));
  void *p = aligned_alloc(256, (size + 255) / 256 * 256);
  if (!p) return fail(r, CUBERT_ERR_OUT_OF_MEMORY, "raw host: no %" PRIu64 " bytes", size);
  *addr = (uint64_t)(uintptr_t)p;
  return CUBERT_OK;
}

void cb_bench_raw_free(cb_bench_raw *r, int dev, uint64_t addr) {
  if (!r->host) cb_hip_raw_free(r->hip, dev, addr);
  else free(host_ptr(addr));
}

cubert_status cb_bench_raw_host_alloc(cb_bench_raw *r, uint64_t size, void **ptr) {
  if (!r->host) return hip(r, cb_hip_raw_host_alloc(r->hip, size, ptr));
  void *p = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  if (!p) return fail(r, CUBERT_ERR_OUT_OF_MEMORY, "raw host: no %" PRIu64 " bytes", size);
  *ptr = p;
  return CUBERT_OK;
}

void cb_bench_raw_host_free(cb_bench_raw *r, void *ptr) {
  if (!r->host) cb_hip_raw_host_free(r->hip, ptr);
  else free(ptr);
}

cubert_status cb_bench_raw_upload(cb_bench_raw *r, int dev, uint64_t dst, const void *src,
                                  uint64_t size) {
  if (!r->host) return hip(r, cb_hip_raw_upload(r->hip, dev, dst, src, size));
  memcpy(host_ptr(dst), src, size);
  return CUBERT_OK;
}

cubert_status cb_bench_raw_download(cb_bench_raw *r, int dev, void *dst, uint64_t src,
                                    uint64_t size) {
  if (!r->host) return hip(r, cb_hip_raw_download(r->hip, dev, dst, src, size));
  memcpy(dst, host_ptr(src), size);
  return CUBERT_OK;
}

cubert_status cb_bench_raw_fill(cb_bench_raw *r, int dev, uint64_t dst, uint32_t value,
                                uint64_t size) {
  if (!r->host) return hip(r, cb_hip_raw_fill(r->hip, dev, dst, value, size));
  uint32_t *p = host_ptr(dst);
  for (uint64_t i = 0; i < size / 4; i++) p[i] = value;
  return CUBERT_OK;
}

cubert_status cb_bench_raw_peer(cb_bench_raw *r, int dev, int peer, bool *can) {
  if (!r->host) return hip(r, cb_hip_raw_peer(r->hip, dev, peer, can));
  *can = true;
  return CUBERT_OK;
}

cubert_status cb_bench_raw_checksum(cb_bench_raw *r, int dev, uint64_t addr, uint64_t n,
                                    uint64_t *sum) {
  if (!r->host) return hip(r, cb_hip_raw_checksum(r->hip, dev, addr, n, sum));
  const uint32_t *x = host_ptr(addr);
  uint64_t s = 0;
  for (uint64_t i = 0; i < n; i++) s += (uint64_t)x[i] ^ (i * UINT64_C(2654435761));
  *sum = s;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ host timed work */

/* The COPY_U32 host function over one transfer, called as the host backend
 * would call it, minus the runtime. */
static cubert_status host_kernel_copy(const cb_bench_xfer *x, char *msg, size_t cap) {
  void *in = host_ptr(x->src), *out = host_ptr(x->dst);
  uint64_t n = x->size / 4;
  void *args[3] = {in, out, &n};
  uint64_t sizes[3] = {x->size, x->size, 8};
  cubert_host_launch l = {{x->grid ? x->grid : 1, 1, 1}, {x->block ? x->block : 1, 1, 1}, 0, 3, args, sizes};
  return cubert_builtin_desc(CUBERT_BUILTIN_COPY_U32)->host_fn(&l, msg, cap);
}

typedef struct host_job {
  const cb_bench_xfer *x;
  uint32_t count;
  double ms;
  cubert_status st;
  char msg[256];
} host_job;

static void *host_job_run(void *arg) {
  host_job *j = arg;
  double t0 = cb_bench_now();
  for (uint32_t k = 0; k < j->count && j->st == CUBERT_OK; k++) {
    if (j->x->op == CB_RAW_KERNEL) j->st = host_kernel_copy(j->x, j->msg, sizeof j->msg);
    else memcpy(host_ptr(j->x->dst), host_ptr(j->x->src), j->x->size);
  }
  j->ms = (cb_bench_now() - t0) * 1e3;
  return NULL;
}

cubert_status cb_bench_raw_run(cb_bench_raw *r, const cb_bench_xfer *x, int n, uint32_t count,
                               uint64_t hold_ticks, double *ms, double *enqueue_ms, bool *short_hold) {
  if (n < 1 || n > 2) return fail(r, CUBERT_ERR_INVALID_ARGUMENT, "raw: %d transfers in one run", n);
  if (!r->host) {
    cb_hip_raw_xfer hx[2];
    for (int i = 0; i < n; i++) {
      static const cb_hip_raw_op ops[] = {
          [CB_RAW_H2D] = CB_HIP_RAW_H2D,   [CB_RAW_H2D_PINNED] = CB_HIP_RAW_H2D,
          [CB_RAW_D2H] = CB_HIP_RAW_D2H,   [CB_RAW_D2D] = CB_HIP_RAW_D2D,
          [CB_RAW_PEER] = CB_HIP_RAW_PEER, [CB_RAW_KERNEL] = CB_HIP_RAW_KERNEL};
      hx[i] = (cb_hip_raw_xfer){ops[x[i].op], x[i].exec, x[i].src_dev, x[i].dst_dev, x[i].src,
                                x[i].dst, x[i].size, x[i].grid, x[i].block};
    }
    return hip(r, cb_hip_raw_run(r->hip, hx, n, count, hold_ticks, ms, enqueue_ms, short_hold));
  }
  (void)hold_ticks; /* nothing is queued on the host: nothing to hold */
  if (short_hold) *short_hold = false;
  host_job jobs[2] = {{&x[0], count, 0, CUBERT_OK, ""}, {n > 1 ? &x[1] : NULL, count, 0, CUBERT_OK, ""}};
  double t0 = cb_bench_now();
  if (n == 1) {
    host_job_run(&jobs[0]);
  } else {
    pthread_t t;
    if (pthread_create(&t, NULL, host_job_run, &jobs[1]) != 0)
      return fail(r, CUBERT_ERR_INTERNAL, "raw host: no thread for the second direction");
    host_job_run(&jobs[0]);
    pthread_join(t, NULL);
  }
  if (enqueue_ms) *enqueue_ms = (cb_bench_now() - t0) * 1e3;
  for (int i = 0; i < n; i++) {
    if (jobs[i].st) return fail(r, jobs[i].st, "raw host: copy kernel: %s", jobs[i].msg);
    ms[i] = jobs[i].ms;
  }
  return CUBERT_OK;
}

cubert_status cb_bench_raw_staged(cb_bench_raw *r, int src_dev, uint64_t src, int dst_dev,
                                  uint64_t dst, void *pinned, uint64_t size, uint32_t count,
                                  double *ms) {
  if (!r->host)
    return hip(r, cb_hip_raw_staged(r->hip, src_dev, src, dst_dev, dst, pinned, size, count, ms));
  double t0 = cb_bench_now();
  for (uint32_t k = 0; k < count; k++) {
    memcpy(pinned, host_ptr(src), size);
    memcpy(host_ptr(dst), pinned, size);
  }
  *ms = (cb_bench_now() - t0) * 1e3;
  return CUBERT_OK;
}

cubert_status cb_bench_raw_chase(cb_bench_raw *r, int exec, uint64_t next, uint64_t state,
                                 uint64_t steps, double *ms) {
  if (!r->host) return hip(r, cb_hip_raw_chase(r->hip, exec, next, state, steps, ms));
  uint32_t *s = host_ptr(state);
  double t0 = cb_bench_now();
  s[0] = cb_bench_chase_walk(host_ptr(next), s[0], steps);
  *ms = (cb_bench_now() - t0) * 1e3;
  return CUBERT_OK;
}

cubert_status cb_bench_raw_small(cb_bench_raw *r, int dev, int step, bool d2h, void *host, uint64_t dev_addr,
                                 uint64_t size, uint32_t count, double *us, uint32_t *busy) {
  if (r->host) return fail(r, CUBERT_ERR_UNSUPPORTED, "raw host: no small-transfer steps (HIP only)");
  if (step < 0 || step >= CB_HIP_RAW_STEP_COUNT) return fail(r, CUBERT_ERR_INVALID_ARGUMENT, "raw: no step %d", step);
  return hip(r, cb_hip_raw_small(r->hip, dev, (cb_hip_raw_step)step, d2h, host, dev_addr, size, count, us, busy));
}

cubert_status cb_bench_raw_small_each(cb_bench_raw *r, int dev, int step, bool d2h, void *host, uint64_t dev_addr,
                                      uint64_t size, uint32_t count, int (*before)(void *), void *arg,
                                      uint64_t *ns, double *us) {
  if (r->host) return fail(r, CUBERT_ERR_UNSUPPORTED, "raw host: no small-transfer steps (HIP only)");
  if (step < 0 || step >= CB_HIP_RAW_STEP_COUNT) return fail(r, CUBERT_ERR_INVALID_ARGUMENT, "raw: no step %d", step);
  cb_hip_raw_each each = {before, arg, ns, false};
  return hip(r, cb_hip_raw_small_each(r->hip, dev, (cb_hip_raw_step)step, d2h, host, dev_addr, size, count, &each,
                                      us, NULL));
}

cubert_status cb_bench_raw_launch_loop(cb_bench_raw *r, int dev, int nbuffers,
                                       const uint64_t *buffers, uint32_t count, bool packed, double *ns,
                                       double *enqueue_ns) {
  if (!r->host) return hip(r, cb_hip_raw_launch_loop(r->hip, dev, nbuffers, buffers, count, packed, ns, enqueue_ns));
  cb_bench_kernel_id id = nbuffers == 0 ? CB_BENCH_EMPTY0 : nbuffers == 4 ? CB_BENCH_EMPTY4 : CB_BENCH_EMPTY16;
  cubert_host_fn fn = cb_bench_kernel_host_fn(id);
  void *args[16];
  uint64_t sizes[16];
  for (int i = 0; i < nbuffers && i < 16; i++) {
    args[i] = host_ptr(buffers[i]);
    sizes[i] = 256;
  }
  cubert_host_launch l = {{1, 1, 1}, {1, 1, 1}, 0, (uint32_t)nbuffers, args, sizes};
  char msg[128];
  double t0 = cb_bench_now();
  for (uint32_t k = 0; k < count; k++) {
    cubert_status st = fn(&l, msg, sizeof msg);
    if (st) return fail(r, st, "raw host: empty kernel: %s", msg);
  }
  *ns = (cb_bench_now() - t0) * 1e9 / (count ? count : 1);
  if (enqueue_ns) *enqueue_ns = *ns; /* direct calls: nothing to wait for */
  return CUBERT_OK;
}

cubert_status cb_bench_raw_launch_step(cb_bench_raw *r, int dev, int step, int nbuffers, const uint64_t *buffers,
                                       uint32_t count, double *enqueue_ns) {
  if (r->host) return fail(r, CUBERT_ERR_UNSUPPORTED, "raw host: no launch steps (they need the HIP backend)");
  if (step < 0 || step >= CB_HIP_RAW_LSTEP_COUNT) return fail(r, CUBERT_ERR_INVALID_ARGUMENT, "raw: no launch step %d", step);
  return hip(r, cb_hip_raw_launch_step(r->hip, dev, (cb_hip_raw_lstep)step, nbuffers, buffers, count, enqueue_ns));
}

/* Keeps the compiler from pairing malloc with free and removing both. */
static void *volatile sink;

cubert_status cb_bench_raw_alloc_loop(cb_bench_raw *r, int dev, uint64_t size, uint32_t count,
                                      double *ns) {
  if (!r->host) return hip(r, cb_hip_raw_alloc_loop(r->hip, dev, size, count, ns));
  double t0 = cb_bench_now();
  for (uint32_t k = 0; k < count; k++) {
    void *p = malloc(size);
    if (!p) return fail(r, CUBERT_ERR_OUT_OF_MEMORY, "raw host: malloc(%" PRIu64 ")", size);
    sink = p;
    free(sink);
  }
  *ns = (cb_bench_now() - t0) * 1e9 / (count ? count : 1);
  return CUBERT_OK;
}

cubert_status cb_bench_raw_pitched(cb_bench_raw *r, int dev, const cb_hip_raw_pitched *p, uint32_t count,
                                   double *ms) {
  if (!r->host) return hip(r, cb_hip_raw_pitched_run(r->hip, dev, p, count, ms));
  uint64_t slices = p->depth ? p->depth : 1;
  uint64_t dslice = p->dst_pitch * (p->depth ? p->dst_rows : 0), sslice = p->src_pitch * (p->depth ? p->src_rows : 0);
  char *dst = host_ptr(p->dst);
  const char *src = host_ptr(p->src);
  double t0 = cb_bench_now();
  for (uint32_t k = 0; k < count; k++)
    for (uint64_t z = 0; z < slices; z++)
      for (uint64_t y = 0; y < p->height; y++)
        memcpy(dst + z * dslice + y * p->dst_pitch, src + z * sslice + y * p->src_pitch, p->width);
  *ms = (cb_bench_now() - t0) * 1e3;
  return CUBERT_OK;
}
