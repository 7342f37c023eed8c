/* bench/bench_kernels.c: the kernels `cubert bench` launches besides the
 * built-ins: empty kernels for the launch path, the hold kernel that keeps a
 * stream busy while the timed work is enqueued (as nvbandwidth's spin
 * kernel), and the pointer chase that measures memory latency.
 *
 * One HIP source holds them all, so the raw baseline compiles exactly the
 * text cubert compiles. Each has a host function for the host backend with
 * the same effect (the hold counts nanoseconds instead of clock ticks). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"

static const char source[] =
    "extern \"C\" __global__ void cb_bench_empty0() {}\n"
    "extern \"C\" __global__ void cb_bench_empty4(const unsigned int *r0, const unsigned int *r1,\n"
    "                                            unsigned int *w0, unsigned int *w1) {}\n"
    "extern \"C\" __global__ void cb_bench_empty16(\n"
    "    const unsigned int *r0, const unsigned int *r1, const unsigned int *r2,\n"
    "    const unsigned int *r3, const unsigned int *r4, const unsigned int *r5,\n"
    "    const unsigned int *r6, const unsigned int *r7, unsigned int *w0, unsigned int *w1,\n"
    "    unsigned int *w2, unsigned int *w3, unsigned int *w4, unsigned int *w5,\n"
    "    unsigned int *w6, unsigned int *w7) {}\n"
    "extern \"C\" __global__ void cb_bench_touch(const unsigned int *in, unsigned int *out) {}\n"
    "extern \"C\" __global__ void cb_bench_taint(unsigned int *out) {}\n"
    /* One thread spins: the stream is busy, the device nearly idle. On AMD
     * (clang's HIP mode: __HIP__) it counts wall_clock64(), a constant-rate
     * counter (hipDeviceAttributeWallClockRate kHz), not clock64(), the
     * shader clock, whose rate follows the power state; on NVIDIA clock64(),
     * calibrated at start. */
    "#if defined(__HIP__)\n"
    "#define CB_HOLD_CLOCK() wall_clock64()\n"
    "#else\n"
    "#define CB_HOLD_CLOCK() clock64()\n"
    "#endif\n"
    "extern \"C\" __global__ void cb_bench_hold(unsigned long long ticks)\n"
    "{\n"
    "  if (threadIdx.x != 0 || blockIdx.x != 0)\n"
    "    return;\n"
    "  long long start = CB_HOLD_CLOCK();\n"
    "  while ((unsigned long long)(CB_HOLD_CLOCK() - start) < ticks) {\n"
    "  }\n"
    "}\n"
    /* Each load's address is the previous load's value: the time per step
     * is the latency of one access to the memory `next` lives in. */
    "extern \"C\" __global__ void cb_bench_chase(const unsigned int *next, unsigned int *state,\n"
    "                                           unsigned long long steps)\n"
    "{\n"
    "  if (threadIdx.x != 0 || blockIdx.x != 0)\n"
    "    return;\n"
    "  unsigned int j = state[0];\n"
    "  for (unsigned long long s = 0; s < steps; s++)\n"
    "    j = next[j];\n"
    "  state[0] = j;\n"
    "}\n";

const char *cb_bench_kernel_source(void) { return source; }

/* ------------------------------------------------------------ host side */

static cubert_status host_nothing(const cubert_host_launch *l, char *msg, size_t cap) {
  (void)l;
  (void)msg;
  (void)cap;
  return CUBERT_OK;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static cubert_status host_hold(const cubert_host_launch *l, char *msg, size_t cap) {
  if (l->nargs != 1 || l->sizes[0] != 8) {
    snprintf(msg, cap, "cb_bench_hold: expects one 8-byte scalar");
    return CUBERT_ERR_INVALID_ARGUMENT;
  }
  uint64_t ticks;
  memcpy(&ticks, l->args[0], 8);
  uint64_t start = now_ns();
  while (now_ns() - start < ticks) {
  }
  return CUBERT_OK;
}

static cubert_status host_chase(const cubert_host_launch *l, char *msg, size_t cap) {
  if (l->nargs != 3 || l->sizes[1] < 4 || l->sizes[2] != 8) {
    snprintf(msg, cap, "cb_bench_chase: expects next, state (4 bytes) and steps (8 bytes)");
    return CUBERT_ERR_INVALID_ARGUMENT;
  }
  uint64_t steps;
  memcpy(&steps, l->args[2], 8);
  const uint32_t *next = l->args[0];
  uint32_t *state = l->args[1];
  uint64_t n = l->sizes[0] / 4;
  uint32_t j = state[0];
  for (uint64_t s = 0; s < steps; s++) {
    if (j >= n) {
      snprintf(msg, cap, "cb_bench_chase: index %" PRIu32 " outside the %" PRIu64 " entries", j, n);
      return CUBERT_ERR_OUT_OF_RANGE;
    }
    j = next[j];
  }
  state[0] = j;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ descriptors */

#define BUF(n, a) {n, CUBERT_PARAM_BUFFER, CUBERT_ACCESS_##a, 0}
static const cubert_param empty4_params[] = {BUF("r0", READ), BUF("r1", READ), BUF("w0", WRITE),
                                             BUF("w1", WRITE)};
static const cubert_param empty16_params[] = {
    BUF("r0", READ),  BUF("r1", READ),  BUF("r2", READ),  BUF("r3", READ),
    BUF("r4", READ),  BUF("r5", READ),  BUF("r6", READ),  BUF("r7", READ),
    BUF("w0", WRITE), BUF("w1", WRITE), BUF("w2", WRITE), BUF("w3", WRITE),
    BUF("w4", WRITE), BUF("w5", WRITE), BUF("w6", WRITE), BUF("w7", WRITE)};
static const cubert_param touch_params[] = {BUF("in", READ), BUF("out", WRITE)};
static const cubert_param taint_params[] = {BUF("out", WRITE)};
static const cubert_param hold_params[] = {{"ticks", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 8}};
static const cubert_param chase_params[] = {
    BUF("next", READ), BUF("state", READ_WRITE), {"steps", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 8}};
static const cubert_param chase_peer_params[] = {
    {"next", CUBERT_PARAM_PEER_BUFFER, CUBERT_ACCESS_READ, 0},
    BUF("state", READ_WRITE),
    {"steps", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 8}};
#undef BUF

#define COUNT_OF(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))
#define DESC(name_, entry_, params_, nparams_, fn_)                                          \
  {.name = name_, .params = params_, .nparams = nparams_, .source = source, .entry = entry_, \
   .host_fn = fn_}

static const cubert_kernel_desc descs[CB_BENCH_KERNEL_COUNT] = {
    [CB_BENCH_EMPTY0] = DESC("cb_bench_empty0", "cb_bench_empty0", NULL, 0, host_nothing),
    [CB_BENCH_EMPTY4] = DESC("cb_bench_empty4", "cb_bench_empty4", empty4_params,
                             COUNT_OF(empty4_params), host_nothing),
    [CB_BENCH_EMPTY16] = DESC("cb_bench_empty16", "cb_bench_empty16", empty16_params,
                              COUNT_OF(empty16_params), host_nothing),
    [CB_BENCH_TOUCH] = DESC("cb_bench_touch", "cb_bench_touch", touch_params,
                            COUNT_OF(touch_params), host_nothing),
    [CB_BENCH_TAINT] = DESC("cb_bench_taint", "cb_bench_taint", taint_params,
                            COUNT_OF(taint_params), host_nothing),
    [CB_BENCH_HOLD] = DESC("cb_bench_hold", "cb_bench_hold", hold_params, COUNT_OF(hold_params),
                           host_hold),
    [CB_BENCH_CHASE] = DESC("cb_bench_chase", "cb_bench_chase", chase_params,
                            COUNT_OF(chase_params), host_chase),
    [CB_BENCH_CHASE_PEER] = DESC("cb_bench_chase_peer", "cb_bench_chase", chase_peer_params,
                                 COUNT_OF(chase_peer_params), host_chase),
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cubert_kernel *cache[CB_BENCH_KERNEL_COUNT];

cubert_status cb_bench_kernel(cb_bench_kernel_id id, cubert_kernel **kernel) {
  if ((unsigned)id >= CB_BENCH_KERNEL_COUNT || !kernel) return CUBERT_ERR_INVALID_ARGUMENT;
  cubert_status st = CUBERT_OK;
  pthread_mutex_lock(&cache_lock);
  if (!cache[id]) st = cubert_kernel_create(&descs[id], &cache[id]);
  if (st == CUBERT_OK) {
    cubert_kernel_retain(cache[id]);
    *kernel = cache[id];
  }
  pthread_mutex_unlock(&cache_lock);
  return st;
}

cubert_host_fn cb_bench_kernel_host_fn(cb_bench_kernel_id id) {
  return (unsigned)id < CB_BENCH_KERNEL_COUNT ? descs[id].host_fn : NULL;
}

/* ------------------------------------------------------------ chase data */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

void cb_bench_chase_fill(uint32_t *next, uint64_t bytes, uint32_t stride, uint64_t seed) {
  uint64_t n = bytes / 4;
  memset(next, 0, n * 4);
  if (stride == 0) stride = 1;
  uint64_t nodes = n / stride;
  if (nodes < 2) return;
  /* Sattolo's shuffle of the node order gives one cycle through all nodes:
   * order[] is a random cyclic permutation, each node points to the next. */
  uint32_t *order = malloc(nodes * sizeof *order);
  if (!order) {
    for (uint64_t i = 0; i < nodes; i++) next[i * stride] = (uint32_t)(((i + 1) % nodes) * stride);
    return;
  }
  for (uint64_t i = 0; i < nodes; i++) order[i] = (uint32_t)i;
  uint64_t s = seed;
  for (uint64_t i = nodes - 1; i > 0; i--) {
    uint64_t j = splitmix(&s) % i; /* j < i: Sattolo, a single cycle */
    uint32_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (uint64_t i = 0; i < nodes; i++)
    next[(uint64_t)order[i] * stride] = (uint32_t)((uint64_t)order[(i + 1) % nodes] * stride);
  free(order);
}

uint32_t cb_bench_chase_walk(const uint32_t *next, uint32_t start, uint64_t steps) {
  uint32_t j = start;
  for (uint64_t s = 0; s < steps; s++) j = next[j];
  return j;
}
