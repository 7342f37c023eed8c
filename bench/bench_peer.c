/* bench/bench_peer.c: `cubert bench peer`, the bandwidth and latency of every
 * way cubert moves bytes, each beside the same work done raw.
 *
 * What is measured (docs/bench.md says what each column means):
 *   matrix   every ordered pair at one size: copy engine (peer-ce:
 *            cubert_handle_copy_peer; the diagonal is d2d: cubert_handle_copy),
 *            kernel copies through peer bindings (peer-read: the destination
 *            runs COPY_PEER_READ; peer-write: the source runs COPY_PEER_WRITE;
 *            the diagonal is d2d-kernel: COPY_U32), peer access off (staged:
 *            read to the host, then write to the destination); every
 *            unordered pair both ways at once (bidi: each direction and the
 *            sum); latency: the pointer chase (chase: the device on the row
 *            reads memory of the device on the column) and 4-byte copies
 *            (lat-copy).
 *   sweep    sizes from --sizes on device 0 (h2d, d2h: pageable memory;
 *            h2d-pinned, d2h-pinned: a cubert host buffer beside raw pinned
 *            memory, and pinned-bidi: both at once on two streams; d2d,
 *            d2d-kernel) and on the pair 0,1 (peer-ce, peer-read,
 *            peer-write, staged, bidi).
 *   latency  4-byte host transfers (lat-h2d, lat-d2h).
 *
 * Method: per cell, warm-ups then repetitions; each repetition clears the
 * destination, (for asynchronous work) launches a hold kernel that keeps
 * the stream busy while the timed work is enqueued, records a timer,
 * enqueues `count` operations, records a timer, and reads the elapsed time
 * the device measured; then the destination is checked with the checksum
 * kernel (CHECKSUM_U32) against the pattern's checksum. Host-side checks
 * (d2h) are done on the last repetition. The raw side does the same with
 * plain HIP (or memcpy on the host backend). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/hip/hip_raw.h"
#include "bench/bench.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cubert/topology.h"

#define MAXDEV 16
#define NCHECKS 64

typedef enum ttype {
  T_H2D = 0,
  T_D2H,
  T_D2D,
  T_D2D_KERNEL,
  T_PEER_CE,
  T_PEER_READ,
  T_PEER_WRITE,
  T_STAGED,
  T_CHASE,
  T_H2D_PINNED,
  T_D2H_PINNED,
  T_COUNT
} ttype;

static const char *const ttype_name[T_COUNT] = {
    [T_H2D] = "h2d",           [T_D2H] = "d2h",
    [T_D2D] = "d2d",           [T_D2D_KERNEL] = "d2d-kernel",
    [T_PEER_CE] = "peer-ce",   [T_PEER_READ] = "peer-read",
    [T_PEER_WRITE] = "peer-write", [T_STAGED] = "staged",
    [T_CHASE] = "chase",       [T_H2D_PINNED] = "h2d-pinned",
    [T_D2H_PINNED] = "d2h-pinned"};

/* One transfer: a -> b (bench device indexes; -1 the host). */
typedef struct spec {
  ttype t;
  int a, b;
  uint64_t size;
} spec;

/* One cell to measure. */
typedef struct job {
  const char *section;
  const char *test;   /* row name */
  spec s[2];
  int n;              /* 1, or 2 for bidirectional */
  uint32_t count;
  bool latency;       /* report time per operation, not GB/s */
} job;

typedef struct opts {
  uint64_t *sizes;
  size_t nsizes;
  uint64_t matrix_size;
  int reps, warmup;
  cb_cli_output csv, json;
  const char *svg;
  const char *backend;
  int devices[MAXDEV];  /* --devices: runtime indexes to measure */
  int ndevices;         /* 0: every device of the backend */
  bool quick, quiet, hold, do_matrix, do_sweep, do_latency;
  uint64_t chase_bytes, chase_steps;
  uint32_t lat_count;
  uint64_t rep_bytes;   /* bytes per repetition aimed at (count = rep_bytes / size) */
} opts;

typedef struct ctx {
  opts o;
  cubert_runtime *rt;
  int ndev;
  int rt_index[MAXDEV];
  int raw_index[MAXDEV];
  cubert_device_info info[MAXDEV];
  cubert_client *client[MAXDEV];
  char link[MAXDEV][MAXDEV][16];
  bool topology_ok;
  cb_bench_raw *raw;
  char raw_note[256];
  uint64_t max;                       /* bytes of each src/dst buffer */
  cubert_handle *src[MAXDEV], *dst[MAXDEV], *acc[MAXDEV];
  cubert_handle *chase[MAXDEV], *state[MAXDEV];
  bool shared;                         /* src, dst and chase of every device shared */
  char share_note[256];
  uint64_t raw_src[MAXDEV], raw_dst[MAXDEV], raw_chase[MAXDEV], raw_state[MAXDEV];
  bool raw_peer[MAXDEV][MAXDEV];
  uint32_t *pattern;                  /* max bytes */
  uint32_t *host_buf;                 /* max bytes */
  uint32_t *chase_data;               /* chase_bytes */
  void *pinned;                       /* raw staging, max bytes */
  void *raw_hsrc, *raw_hdst;          /* raw pinned host memory, max bytes */
  cubert_host_buffer *hb_src, *hb_dst; /* cubert host buffers, max bytes */
  cubert_client *pclient[2];          /* device 0 on streams of their own: pinned h2d, d2h */
  struct sum_cache { uint64_t size, sum; } sums[NCHECKS];
  int nsums;
  double ticks_per_us[MAXDEV];
  int hold_khz[MAXDEV];       /* the hold clock's rate from the platform; 0: calibrated */
  bool hold_ok;
  char hold_note[200];
  double hold_check_us[MAXDEV]; /* a hold of HOLD_CHECK_US, timed by timers after calibration */
  /* timed repetitions behind a hold, and those whose hold ran out before
   * their last transfer was enqueued ([0] cubert, [1] raw): such a
   * repetition times the host's enqueue as well */
  uint32_t holds[2], holds_short[2];
  cubert_kernel *k_copy, *k_read, *k_write, *k_checksum, *k_hold, *k_chase, *k_chase_peer;
  cb_bench_rows rows;
  int checks, failed_checks, errors;
  json_t *notes;
  /* the small section's raw steps: busy stream queries per case and step
   * (cases in the order of their rows) */
  uint32_t step_busy[8][CB_HIP_RAW_STEP_COUNT + 1];
  int step_calls[8];
  int nstep_cases;
  char *each_text; /* the lines of small_each_call, printed with the report */
} ctx;

/* ------------------------------------------------------------ helpers */

static uint32_t pattern_at(uint64_t i) {
  return (uint32_t)(i * 0x9E3779B1u + 0x7F4A7C15u) ^ (uint32_t)(i >> 3);
}

static uint64_t checksum_host(const uint32_t *x, uint64_t n) {
  uint64_t s = 0;
  for (uint64_t i = 0; i < n; i++) s += (uint64_t)x[i] ^ (i * UINT64_C(2654435761));
  return s;
}

/* The checksum of the pattern's first `size` bytes (cached). */
static uint64_t expected(ctx *c, uint64_t size) {
  for (int i = 0; i < c->nsums; i++)
    if (c->sums[i].size == size) return c->sums[i].sum;
  uint64_t s = checksum_host(c->pattern, size / 4);
  if (c->nsums < NCHECKS) c->sums[c->nsums++] = (struct sum_cache){size, s};
  return s;
}

static void note(ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void note(ctx *c, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  json_array_append_new(c->notes, json_string(buf));
}

static uint32_t grid_for(const ctx *c, int dev, uint64_t n) {
  uint64_t g = (n + 255) / 256;
  uint64_t cap = (uint64_t)(c->info[dev].multiprocessors ? c->info[dev].multiprocessors : 1) * 4;
  if (g > cap) g = cap;
  return g ? (uint32_t)g : 1;
}

/* The kernel copies' shape on both sides: what cubert_builtin_config gives
 * the built-in copy on device `dev` (blocks from its compute units). */
static cubert_launch_config copy_config(const ctx *c, int dev, uint64_t n) {
  cubert_launch_config cfg = {{grid_for(c, dev, n), 1, 1}, {256, 1, 1}, 0};
  (void)cubert_builtin_config(CUBERT_BUILTIN_COPY_U32, &c->info[dev], n, &cfg); /* cannot fail here */
  return cfg;
}

static uint32_t count_for(const ctx *c, uint64_t size) {
  uint64_t k = c->o.rep_bytes / (size ? size : 1);
  if (k < 1) k = 1;
  if (k > 64) k = 64;
  return (uint32_t)k;
}

static int exec_of(const spec *s) {
  switch (s->t) {
  case T_H2D: case T_H2D_PINNED: case T_PEER_CE: case T_PEER_READ: return s->b;
  default: return s->a;
  }
}

static bool async_op(ttype t) {
  return t == T_D2D || t == T_D2D_KERNEL || t == T_PEER_CE || t == T_PEER_READ || t == T_PEER_WRITE ||
         t == T_H2D_PINNED || t == T_D2H_PINNED;
}

/* Whether a repetition of `t` runs behind a hold kernel. */
static bool held(const ctx *c, ttype t) { return c->o.hold && c->hold_ok && async_op(t); }

static bool pinned_op(ttype t) { return t == T_H2D_PINNED || t == T_D2H_PINNED; }

/* The client a transfer runs on: pinned transfers on device 0's streams of
 * their own (so both directions can run at once), the rest on the exec
 * device's client. */
static cubert_client *client_for(const ctx *c, const spec *s) {
  if (s->t == T_H2D_PINNED && c->pclient[0]) return c->pclient[0];
  if (s->t == T_D2H_PINNED && c->pclient[1]) return c->pclient[1];
  return c->client[exec_of(s)];
}

/* ------------------------------------------------------------ cubert side */

typedef struct views {
  cubert_handle *src, *dst; /* slices of `size` bytes */
} views;

static cubert_status make_views(ctx *c, const spec *s, views *v) {
  v->src = v->dst = NULL;
  cubert_status st = CUBERT_OK;
  if (s->a >= 0) st = cubert_handle_slice(c->src[s->a], 0, c->max - s->size, &v->src);
  if (!st && s->b >= 0) st = cubert_handle_slice(c->dst[s->b], 0, c->max - s->size, &v->dst);
  if (st) {
    cubert_handle_release(v->src);
    v->src = NULL;
  }
  return st;
}

static void drop_views(views *v) {
  cubert_handle_release(v->src);
  cubert_handle_release(v->dst);
}

static cubert_status cubert_op(ctx *c, const spec *s, const views *v) {
  uint64_t n = s->size / 4;
  switch (s->t) {
  case T_H2D: return cubert_handle_write(c->client[s->b], v->dst, c->pattern, s->size);
  case T_D2H: return cubert_handle_read(c->client[s->a], v->src, c->host_buf, s->size);
  case T_H2D_PINNED: return cubert_handle_write_host(client_for(c, s), v->dst, c->hb_src, 0, s->size);
  case T_D2H_PINNED: return cubert_handle_read_host(client_for(c, s), v->src, c->hb_dst, 0, s->size);
  case T_D2D: return cubert_handle_copy(c->client[s->a], v->src, v->dst);
  case T_PEER_CE: return cubert_handle_copy_peer(c->client[s->a], v->src, c->client[s->b], v->dst);
  case T_STAGED: { /* through a pinned host buffer, as raw stages through pinned memory */
    cubert_status st = cubert_handle_read_host(c->client[s->a], v->src, c->hb_dst, 0, s->size);
    if (!st) st = cubert_sync(c->client[s->a]);
    if (!st) st = cubert_handle_write_host(c->client[s->b], v->dst, c->hb_dst, 0, s->size);
    return st ? st : cubert_sync(c->client[s->b]);
  }
  case T_D2D_KERNEL: case T_PEER_READ: case T_PEER_WRITE: {
    int e = exec_of(s);
    cubert_launch_config cfg = copy_config(c, e, n);
    cubert_arg args[3] = {cubert_arg_buffer(v->src), cubert_arg_buffer(v->dst), cubert_arg_scalar(&n, 8)};
    const cubert_kernel *k = c->k_copy;
    if (s->t == T_PEER_READ) {
      args[0] = cubert_arg_peer(v->src);
      k = c->k_read;
    } else if (s->t == T_PEER_WRITE) {
      args[1] = cubert_arg_peer(v->dst);
      k = c->k_write;
    }
    return cubert_launch(c->client[e], k, &cfg, args, 3);
  }
  default: return CUBERT_ERR_INTERNAL;
  }
}

static cubert_status cubert_hold_on(ctx *c, cubert_client *cl, int dev, double hold_us) {
  uint64_t ticks = (uint64_t)(hold_us * c->ticks_per_us[dev]);
  cubert_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0};
  cubert_arg a = cubert_arg_scalar(&ticks, 8);
  return cubert_launch(cl, c->k_hold, &cfg, &a, 1);
}

static cubert_status cubert_hold(ctx *c, int dev, double hold_us) {
  return cubert_hold_on(c, c->client[dev], dev, hold_us);
}

/* Checksum of `n` u32 of `h` on device `dev`, through CHECKSUM_U32. */
static cubert_status cubert_checksum(ctx *c, int dev, const cubert_handle *h, uint64_t n, uint64_t *sum) {
  uint64_t zero = 0;
  cubert_status st = cubert_handle_fill(c->client[dev], c->acc[dev], &zero, 8);
  if (st) return st;
  cubert_launch_config cfg = {{grid_for(c, dev, n) * 2, 1, 1}, {256, 1, 1}, 0};
  cubert_arg args[3] = {cubert_arg_buffer(h), cubert_arg_buffer(c->acc[dev]), cubert_arg_scalar(&n, 8)};
  if ((st = cubert_launch(c->client[dev], c->k_checksum, &cfg, args, 3))) return st;
  return cubert_handle_read(c->client[dev], c->acc[dev], sum, 8);
}

static cubert_status sync_all(ctx *c, const spec *s, int n) {
  cubert_status st = CUBERT_OK;
  for (int i = 0; i < n && !st; i++) {
    if (s[i].a >= 0) st = cubert_sync(c->client[s[i].a]);
    if (!st && s[i].b >= 0) st = cubert_sync(c->client[s[i].b]);
    if (!st && pinned_op(s[i].t)) st = cubert_sync(client_for(c, &s[i]));
  }
  return st;
}

/* Clears the destinations of one repetition. */
static cubert_status cubert_clear(ctx *c, const spec *s, int n, views *v, bool host_check) {
  uint32_t zero = 0;
  cubert_status st = CUBERT_OK;
  for (int i = 0; i < n && !st; i++) {
    if (s[i].t == T_D2H) {
      if (host_check) memset(c->host_buf, 0, s[i].size);
    } else if (s[i].t == T_D2H_PINNED) {
      if (host_check) memset(cubert_host_buffer_data(c->hb_dst), 0, s[i].size);
    } else {
      st = cubert_handle_fill(c->client[s[i].b], v[i].dst, &zero, 4);
    }
  }
  return st ? st : sync_all(c, s, n);
}

/* Checks one repetition's destinations; false when one is wrong. */
static cubert_status cubert_check(ctx *c, const spec *s, int n, views *v, bool host_check, bool *ok) {
  *ok = true;
  for (int i = 0; i < n; i++) {
    uint64_t want = expected(c, s[i].size), got = 0;
    if (s[i].t == T_D2H) {
      if (!host_check) continue;
      got = checksum_host(c->host_buf, s[i].size / 4);
    } else if (s[i].t == T_D2H_PINNED) {
      if (!host_check) continue;
      /* the timer waited for the stream: the bytes are there, and the
       * buffer's ledger must call them good */
      got = cubert_host_buffer_check(c->hb_dst, 0, s[i].size) == CUBERT_OK
                ? checksum_host(cubert_host_buffer_data(c->hb_dst), s[i].size / 4)
                : ~want;
    } else {
      cubert_status st = cubert_checksum(c, s[i].b, v[i].dst, s[i].size / 4, &got);
      if (st) return st;
    }
    c->checks++;
    if (got != want) {
      *ok = false;
      c->failed_checks++;
    }
  }
  return CUBERT_OK;
}

/* One timed repetition: ms[i] per transfer. */
static cubert_status cubert_rep(ctx *c, const spec *s, int n, uint32_t count, views *v, double *hold_us,
                                double *ms, bool *short_hold) {
  cubert_status st = CUBERT_OK;
  *short_hold = false;
  if (s[0].t == T_STAGED) { /* two devices and the host: the host's clock */
    double t0 = cb_bench_now();
    for (uint32_t k = 0; k < count && !st; k++) st = cubert_op(c, &s[0], &v[0]);
    ms[0] = (cb_bench_now() - t0) * 1e3;
    return st;
  }
  bool hold = held(c, s[0].t);
  cubert_timer *th[2] = {NULL, NULL}, *t0[2] = {NULL, NULL}, *t1[2] = {NULL, NULL};
  for (int i = 0; i < n && !st; i++)
    if (hold && !(st = cubert_timer_record(client_for(c, &s[i]), &th[i])))
      st = cubert_hold_on(c, client_for(c, &s[i]), exec_of(&s[i]), *hold_us);
  double h0 = cb_bench_now(); /* the holds are running (or about to) */
  for (int i = 0; i < n && !st; i++) st = cubert_timer_record(client_for(c, &s[i]), &t0[i]);
  double e0 = cb_bench_now();
  for (uint32_t k = 0; k < count && !st; k++)
    for (int i = 0; i < n && !st; i++) st = cubert_op(c, &s[i], &v[i]);
  double enq_us = (cb_bench_now() - e0) * 1e6;
  for (int i = 0; i < n && !st; i++) st = cubert_timer_record(client_for(c, &s[i]), &t1[i]);
  double window_us = (cb_bench_now() - h0) * 1e6;
  for (int i = 0; i < n && !st; i++) st = cubert_timer_elapsed(t0[i], t1[i], &ms[i]);
  /* Whether each hold outlasted the enqueue: its length on the device
   * against the host's time from its launch to the last timer's record. */
  for (int i = 0; i < n && !st && hold; i++) {
    double held_ms = 0;
    if (!(st = cubert_timer_elapsed(th[i], t0[i], &held_ms)) && held_ms * 1e3 < window_us) *short_hold = true;
  }
  for (int i = 0; i < 2; i++) {
    cubert_timer_release(th[i]);
    cubert_timer_release(t0[i]);
    cubert_timer_release(t1[i]);
  }
  /* The next hold outlasts this enqueue with room to spare. */
  *hold_us = fmin(20000.0, fmax(20.0, 2.0 * enq_us + 20.0));
  return st;
}

/* ------------------------------------------------------------ raw side */

static cb_bench_xfer raw_xfer(ctx *c, const spec *s) {
  cb_bench_xfer x = {0};
  int e = exec_of(s);
  x.exec = c->raw_index[e];
  x.src_dev = s->a >= 0 ? c->raw_index[s->a] : -1;
  x.dst_dev = s->b >= 0 ? c->raw_index[s->b] : -1;
  x.size = s->size;
  x.src = s->a >= 0 ? c->raw_src[s->a] : (uint64_t)(uintptr_t)c->pattern;
  x.dst = s->b >= 0 ? c->raw_dst[s->b] : (uint64_t)(uintptr_t)c->host_buf;
  cubert_launch_config cfg = copy_config(c, e, s->size / 4);
  x.grid = cfg.grid[0];
  x.block = cfg.block[0];
  switch (s->t) {
  case T_H2D: x.op = CB_RAW_H2D; break;
  case T_D2H: x.op = CB_RAW_D2H; break;
  case T_H2D_PINNED:
    x.op = CB_RAW_H2D_PINNED;
    x.src = (uint64_t)(uintptr_t)c->raw_hsrc;
    break;
  case T_D2H_PINNED:
    x.op = CB_RAW_D2H;
    x.dst = (uint64_t)(uintptr_t)c->raw_hdst;
    break;
  case T_D2D: x.op = CB_RAW_D2D; break;
  case T_PEER_CE: x.op = CB_RAW_PEER; break;
  default: x.op = CB_RAW_KERNEL; break;
  }
  return x;
}

static cubert_status raw_clear(ctx *c, const spec *s, int n, bool host_check) {
  for (int i = 0; i < n; i++) {
    if (s[i].t == T_D2H || s[i].t == T_D2H_PINNED) {
      if (host_check) memset(s[i].t == T_D2H ? c->host_buf : c->raw_hdst, 0, s[i].size);
      continue;
    }
    cubert_status st = cb_bench_raw_fill(c->raw, c->raw_index[s[i].b], c->raw_dst[s[i].b], 0, s[i].size);
    if (st) return st;
  }
  return CUBERT_OK;
}

static cubert_status raw_check(ctx *c, const spec *s, int n, bool host_check, bool *ok) {
  *ok = true;
  for (int i = 0; i < n; i++) {
    uint64_t want = expected(c, s[i].size), got = 0;
    if (s[i].t == T_D2H || s[i].t == T_D2H_PINNED) {
      if (!host_check) continue;
      got = checksum_host(s[i].t == T_D2H ? c->host_buf : c->raw_hdst, s[i].size / 4);
    } else {
      cubert_status st = cb_bench_raw_checksum(c->raw, c->raw_index[s[i].b], c->raw_dst[s[i].b], s[i].size / 4, &got);
      if (st) return st;
    }
    c->checks++;
    if (got != want) {
      *ok = false;
      c->failed_checks++;
    }
  }
  return CUBERT_OK;
}

static cubert_status raw_rep(ctx *c, const spec *s, int n, uint32_t count, double *hold_us, double *ms,
                             bool *short_hold) {
  *short_hold = false;
  if (s[0].t == T_STAGED)
    return cb_bench_raw_staged(c->raw, c->raw_index[s[0].a], c->raw_src[s[0].a], c->raw_index[s[0].b],
                               c->raw_dst[s[0].b], c->pinned, s[0].size, count, ms);
  cb_bench_xfer x[2];
  for (int i = 0; i < n; i++) x[i] = raw_xfer(c, &s[i]);
  bool hold = held(c, s[0].t);
  uint64_t ticks = hold ? (uint64_t)(*hold_us * c->ticks_per_us[exec_of(&s[0])]) : 0;
  double enq_ms = 0;
  cubert_status st = cb_bench_raw_run(c->raw, x, n, count, ticks, ms, &enq_ms, short_hold);
  *hold_us = fmin(20000.0, fmax(20.0, 2.0 * enq_ms * 1e3 + 20.0));
  return st;
}

/* Why the raw side cannot do `s`, or NULL. */
static const char *raw_missing(ctx *c, const spec *s) {
  if (!c->raw) return c->raw_note;
  if (pinned_op(s->t) && (!c->raw_hsrc || !c->raw_hdst)) return "raw: no pinned host memory";
  if ((s->t == T_PEER_READ && !c->raw_peer[s->b][s->a]) ||
      ((s->t == T_PEER_WRITE || s->t == T_CHASE) && !c->raw_peer[s->a][s->b]))
    return "raw: no peer access between these devices";
  return NULL;
}

/* ------------------------------------------------------------ chase */

/* Start of repetition r's walk: each repetition walks nodes no earlier one
 * touched (steps << nodes), so caches warmed by the last do not help. */
static uint32_t chase_start(const ctx *c, int r) {
  uint64_t nodes = c->o.chase_bytes / 4 / 64;
  return (uint32_t)((((uint64_t)r * 7919u) % (nodes ? nodes : 1)) * 64);
}

static cubert_status cubert_chase_rep(ctx *c, int exec, int mem, int r, double *ms, bool *ok) {
  uint32_t start = chase_start(c, r);
  cubert_status st = cubert_handle_write(c->client[exec], c->state[exec], &start, 4);
  if (st) return st;
  cubert_timer *t0 = NULL, *t1 = NULL;
  cubert_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0};
  cubert_arg args[3] = {exec == mem ? cubert_arg_buffer(c->chase[mem]) : cubert_arg_peer(c->chase[mem]),
                        cubert_arg_buffer(c->state[exec]), cubert_arg_scalar(&c->o.chase_steps, 8)};
  /* the hold keeps the launch's enqueue out of the timed window */
  if (c->o.hold && c->hold_ok && (st = cubert_hold(c, exec, 50.0))) return st;
  if (!(st = cubert_timer_record(c->client[exec], &t0)) &&
      !(st = cubert_launch(c->client[exec], exec == mem ? c->k_chase : c->k_chase_peer, &cfg, args, 3)) &&
      !(st = cubert_timer_record(c->client[exec], &t1)))
    st = cubert_timer_elapsed(t0, t1, ms);
  cubert_timer_release(t0);
  cubert_timer_release(t1);
  uint32_t end = 0;
  if (!st) st = cubert_handle_read(c->client[exec], c->state[exec], &end, 4);
  if (!st) {
    c->checks++;
    *ok = end == cb_bench_chase_walk(c->chase_data, start, c->o.chase_steps);
    if (!*ok) c->failed_checks++;
  }
  return st;
}

static cubert_status raw_chase_rep(ctx *c, int exec, int mem, int r, double *ms, bool *ok) {
  uint32_t start = chase_start(c, r), end = 0;
  int re = c->raw_index[exec];
  cubert_status st = cb_bench_raw_upload(c->raw, re, c->raw_state[exec], &start, 4);
  if (!st) st = cb_bench_raw_chase(c->raw, re, c->raw_chase[mem], c->raw_state[exec], c->o.chase_steps, ms);
  if (!st) st = cb_bench_raw_download(c->raw, re, &end, c->raw_state[exec], 4);
  if (!st) {
    c->checks++;
    *ok = end == cb_bench_chase_walk(c->chase_data, start, c->o.chase_steps);
    if (!*ok) c->failed_checks++;
  }
  return st;
}

/* ------------------------------------------------------------ one cell */

static double per_rep_value(const job *j, const spec *s, double ms) {
  if (s->t == T_CHASE) return ms * 1e6 / (double)j->count; /* ns per step */
  if (j->latency) return ms * 1e3 / (double)j->count;      /* us per operation */
  return ms > 0 ? (double)s->size * (double)j->count / (ms * 1e6) : 0; /* GB/s */
}

static void fill_stats(cb_bench_row *row, bool raw, double *sum, double *fwd, double *rev, int n, int dirs) {
  cb_bench_row_set(row, raw, sum, n);
  if (dirs == 2) {
    double f = cb_bench_stats_of(fwd, n).median, r = cb_bench_stats_of(rev, n).median;
    if (raw) {
      row->raw_fwd = f;
      row->raw_rev = r;
    } else {
      row->cubert_fwd = f;
      row->cubert_rev = r;
    }
  }
}

/* Which engine the row's copies ran on (docs/bench.md): the device that
 * issues the copy decides. */
static void set_engine(const ctx *c, const spec *s, cb_bench_row *row) {
  cb_bench_copy kind;
  switch (s->t) {
  case T_H2D: case T_D2H: case T_H2D_PINNED: case T_D2H_PINNED: kind = CB_BENCH_COPY_HOST; break;
  case T_D2D: kind = CB_BENCH_COPY_SAME_DEVICE; break;
  case T_PEER_CE: kind = s->a == s->b ? CB_BENCH_COPY_SAME_DEVICE : CB_BENCH_COPY_PEER; break;
  case T_D2D_KERNEL: case T_PEER_READ: case T_PEER_WRITE: kind = CB_BENCH_COPY_KERNEL; break;
  default: return; /* staged (two copies through the host), chase: no one engine */
  }
  int dev = s->a >= 0 ? s->a : s->b;
  const char *arch = dev >= 0 && dev < c->ndev ? c->info[dev].arch : NULL;
  snprintf(row->engine, sizeof row->engine, "%s", cb_bench_copy_engine(c->o.backend, arch, kind, s->size));
}

/* One side of a cell (cubert or raw) while the two are interleaved. */
typedef struct side_run {
  bool skip;           /* not measured: no raw baseline for it, or no memory */
  cubert_status st;    /* its first error; the side stops there */
  char msg[256];       /* that error's message, taken when it happened */
  views v[2];          /* cubert's views of the cell */
  double hold_us;      /* its next hold kernel's length */
  int kept;            /* timed repetitions stored */
  double *sum, *fwd, *rev;
} side_run;

static void measure(ctx *c, const job *j) {
  cb_bench_row *row = cb_bench_rows_add(&c->rows);
  if (!row) {
    c->errors++;
    return;
  }
  const spec *s = j->s;
  snprintf(row->section, sizeof row->section, "%s", j->section);
  snprintf(row->test, sizeof row->test, "%s", j->test);
  snprintf(row->dir, sizeof row->dir, "%s", j->n == 2 ? "bidi" : "uni");
  row->src = s[0].a;
  row->dst = s[0].b;
  if (s[0].a >= 0 && s[0].b >= 0) snprintf(row->link, sizeof row->link, "%s", c->link[s[0].a][s[0].b]);
  else snprintf(row->link, sizeof row->link, "HOST");
  row->size = s[0].size;
  row->count = j->count;
  set_engine(c, &s[0], row);
  bool timed = j->latency || s[0].t == T_CHASE;
  snprintf(row->unit, sizeof row->unit, "%s", s[0].t == T_CHASE ? "ns" : j->latency ? "us" : "GB/s");
  row->higher_better = !timed;

  /* cubert's and raw's repetitions interleaved, the side that goes first
   * alternating (ABBA), so that a drift of the machine during the cell
   * weighs on both sides instead of landing in the ratio */
  int total = c->o.warmup + c->o.reps;
  side_run sd[2];
  memset(sd, 0, sizeof sd);
  bool all_ok = true, no_memory = false;
  for (int side = 0; side < 2; side++) {
    sd[side].hold_us = 100.0;
    sd[side].sum = calloc((size_t)c->o.reps + 1, sizeof(double));
    sd[side].fwd = calloc((size_t)c->o.reps + 1, sizeof(double));
    sd[side].rev = calloc((size_t)c->o.reps + 1, sizeof(double));
    no_memory = no_memory || !sd[side].sum || !sd[side].fwd || !sd[side].rev;
  }
  const char *why = raw_missing(c, &s[0]);
  if (why) {
    sd[1].skip = true;
    snprintf(row->note, sizeof row->note, "%.150s", why);
  }
  if (no_memory) {
    snprintf(row->note, sizeof row->note, "out of host memory");
    c->errors++;
    sd[0].skip = sd[1].skip = true;
  }
  if (!sd[0].skip && s[0].t != T_CHASE)
    for (int i = 0; i < j->n && !sd[0].st; i++) sd[0].st = make_views(c, &s[i], &sd[0].v[i]);
  for (int r = 0; r < total; r++) {
    bool last = r == total - 1;
    for (int k = 0; k < 2; k++) {
      int side = (r & 1) ? 1 - k : k;
      bool raw = side == 1;
      side_run *x = &sd[side];
      if (x->skip || x->st) continue;
      double ms[2] = {0, 0};
      bool ok = true, short_hold = false;
      if (s[0].t == T_CHASE) {
        x->st = raw ? raw_chase_rep(c, s[0].a, s[0].b, r, &ms[0], &ok)
                    : cubert_chase_rep(c, s[0].a, s[0].b, r, &ms[0], &ok);
      } else if (raw) {
        if (!(x->st = raw_clear(c, s, j->n, last)) && !(x->st = raw_rep(c, s, j->n, j->count, &x->hold_us, ms, &short_hold)))
          x->st = raw_check(c, s, j->n, last, &ok);
      } else {
        if (!(x->st = cubert_clear(c, s, j->n, x->v, last)) &&
            !(x->st = cubert_rep(c, s, j->n, j->count, x->v, &x->hold_us, ms, &short_hold)))
          x->st = cubert_check(c, s, j->n, x->v, last, &ok);
      }
      if (x->st) {
        /* the message now, before the other side's calls replace it */
        snprintf(x->msg, sizeof x->msg, "%s", raw ? cb_bench_raw_error(c->raw) : cubert_last_error_message());
        if (!raw) (void)sync_all(c, s, j->n); /* leave no half-done work behind */
        continue;
      }
      all_ok = all_ok && ok;
      if (r < c->o.warmup) continue;
      if (held(c, s[0].t)) {
        c->holds[side]++;
        c->holds_short[side] += short_hold;
      }
      double fa = per_rep_value(j, &s[0], ms[0]);
      double fb = j->n == 2 ? per_rep_value(j, &s[1], ms[1]) : 0;
      x->fwd[x->kept] = fa;
      x->rev[x->kept] = fb;
      x->sum[x->kept] = fa + fb;
      x->kept++;
    }
  }
  for (int side = 0; side < 2; side++) {
    bool raw = side == 1;
    side_run *x = &sd[side];
    if (!raw)
      for (int i = 0; i < j->n; i++) drop_views(&x->v[i]);
    if (x->skip) continue;
    if (x->st) {
      /* a pair without peer access is the machine's shape, not a failure */
      bool no_peer = !raw && (x->st == CUBERT_ERR_PEER_ACCESS || x->st == CUBERT_ERR_NOT_SHARED);
      snprintf(row->note, sizeof row->note, "%s%s: %.130s", no_peer ? "no peer access: " : "", raw ? "raw" : "cubert",
               x->msg);
      if (!no_peer) {
        c->errors++;
        all_ok = false;
      }
      continue;
    }
    fill_stats(row, raw, x->sum, x->fwd, x->rev, x->kept, j->n);
  }
  row->validated = (row->have_cubert || row->have_raw) ? (all_ok ? 1 : 0) : -1;
  for (int side = 0; side < 2; side++) {
    free(sd[side].sum);
    free(sd[side].fwd);
    free(sd[side].rev);
  }
}

/* ------------------------------------------------------------ small split */

/* Where a small host transfer's time goes (the `small` section): the loop of
 * the latency rows (`count` calls on device 0's client, into the same
 * reused host buffer) timed on the host clock per call, beside
 *   - raw's loop, host clock: its enqueue time, events around it as in the
 *     timed rows (cb_bench_raw_run);
 *   - the same cubert loop without a timer recorded on the stream first
 *     (the timed rows record one: does the stream's state change the call?);
 *   - the same call of 0 bytes: the runtime's whole path (checks, ledger,
 *     work record, ordering, the reap after a read) without the backend's
 *     call. cubert - raw - that share is the fault layer's and the backend's
 *     cost beyond raw's one hipMemcpyAsync. */
typedef enum {
  SPLIT_TIMER, SPLIT_NO_TIMER, SPLIT_ZERO, SPLIT_RAW, SPLIT_DEVICE, SPLIT_RAW_DEVICE, SPLIT_RAW_STACK, SPLIT_N
} split_kind;

/* One loop of `count` cubert calls; `host_us`, `dev_us` per call. The
 * host clock runs from before the first call to after the end timer's
 * record (raw's enqueue time likewise ends after its end event). */
static cubert_status small_loop(ctx *c, ttype t, cubert_handle *v, uint64_t size, uint32_t count, bool timer,
                                double *host_us, double *dev_us) {
  cubert_client *cl = c->client[0];
  cubert_timer *t0 = NULL, *t1 = NULL;
  cubert_status st = timer ? cubert_timer_record(cl, &t0) : CUBERT_OK;
  double h0 = cb_bench_now();
  for (uint32_t k = 0; k < count && !st; k++)
    st = t == T_H2D ? cubert_handle_write(cl, v, c->pattern, size) : cubert_handle_read(cl, v, c->host_buf, size);
  if (!st && timer) st = cubert_timer_record(cl, &t1);
  double h1 = cb_bench_now();
  double ms = 0;
  if (!st && timer) st = cubert_timer_elapsed(t0, t1, &ms);
  cubert_timer_release(t0);
  cubert_timer_release(t1);
  if (!st) st = cubert_sync(cl); /* 0-byte calls reach no backend: their records go here, untimed */
  *host_us = (h1 - h0) * 1e6 / count;
  *dev_us = ms * 1e3 / count;
  return st;
}

/* Whether the bytes of the last loop arrived: d2h in the host buffer, h2d
 * read back from the device. */
static bool small_arrived(ctx *c, ttype t, const cubert_handle *v, uint64_t size) {
  if (t == T_D2H) return memcmp(c->host_buf, c->pattern, size) == 0;
  uint32_t back[1024] = {0};
  return size <= sizeof back && cubert_handle_read(c->client[0], v, back, size) == CUBERT_OK &&
         memcmp(back, c->pattern, size) == 0;
}

/* Raw with one of the HIP backend's steps at a time (HIP only): for each
 * case, `count` raw transfers per step on raw's memory, plus raw's plain
 * loop from/into cubert's own device memory (cubert_handle_external_begin:
 * does the memory's origin change the driver's cost?). One sample per step
 * per repetition, kept in steps[step][kept]. */
#define STEP_CUBERT_MEMORY CB_HIP_RAW_STEP_COUNT /* the pseudo-step: plain, cubert's memory */
#define NSTEPS (CB_HIP_RAW_STEP_COUNT + 1)

/* Each step: its short name (the rows' test column) and what it adds (the
 * table's first column). */
static const struct {
  const char *name, *text;
} step_info[NSTEPS] = {
    [CB_HIP_RAW_STEP_PLAIN] = {"plain", "raw plain, us per call (below: difference to it)"},
    [CB_HIP_RAW_STEP_CTX] = {"+ctx check", "+ hipCtxGetCurrent before each (cb_hip_enter)"},
    [CB_HIP_RAW_STEP_LOCKS] = {"+2 locks", "+ two mutex lock/unlock pairs"},
    [CB_HIP_RAW_STEP_STACK] = {"bounce, no memcpy", "bounce (stack <= 4 KiB, else heap), no memcpy"},
    [CB_HIP_RAW_STEP_BOUNCE] = {"bounce+memcpy", "bounce + its memcpy in/out"},
    [CB_HIP_RAW_STEP_QUERY] = {"+query", "+ hipStreamQuery after each"},
    [CB_HIP_RAW_STEP_ATTRS] = {"+ptr attrs", "+ cudaPointerGetAttributes of the host pointer"},
    [CB_HIP_RAW_STEP_QUERY_ATTRS] = {"+query,attrs", "+ query, attributes when busy (read > 4 KiB)"},
    [CB_HIP_RAW_STEP_EVENT] = {"+event wait", "+ event recorded after each, waited for"},
    [CB_HIP_RAW_STEP_EVENTED] = {"evented stream", "plain on a stream with an event just recorded"},
    [CB_HIP_RAW_STEP_WAITED] = {"waited stream", "plain on a stream that waited for another's event"},
    [CB_HIP_RAW_STEP_MARKS] = {"+marks", "+ a mark event every 32, queried every 256"},
    [CB_HIP_RAW_STEP_DRIVER] = {"HtoD/DtoH entry", "plain via hipMemcpyHtoDAsync / DtoHAsync"},
    [CB_HIP_RAW_STEP_BACKEND] = {"all backend steps", "every backend step (cb_hip_write/cb_hip_read)"},
    [STEP_CUBERT_MEMORY] = {"cubert's memory", "plain from/into cubert's device memory"},
};

/* Whether the backend's path of this direction has the step (the others
 * are not measured: h2d makes no query and no bounce without a copy; a
 * read makes no marks). */
static bool step_applies(int step, ttype t) {
  if (t == T_H2D)
    return step != CB_HIP_RAW_STEP_STACK && step != CB_HIP_RAW_STEP_QUERY &&
           step != CB_HIP_RAW_STEP_QUERY_ATTRS && step != CB_HIP_RAW_STEP_EVENT;
  return step != CB_HIP_RAW_STEP_MARKS;
}

/* One repetition of every step; sample[step] us per call (0: not
 * measured), busy[step] added to. */
static void small_steps_rep(ctx *c, const spec *sp, cubert_handle *v, uint32_t count, double *sample,
                            uint32_t *busy) {
  bool d2h = sp->t == T_D2H;
  cb_bench_xfer x = raw_xfer(c, sp);
  void *host = (void *)(uintptr_t)(d2h ? x.dst : x.src);
  uint64_t dev_addr = d2h ? x.src : x.dst;
  for (int k = 0; k < NSTEPS; k++) {
    sample[k] = 0;
    if (!step_applies(k, sp->t)) continue;
    uint64_t addr = dev_addr;
    cubert_external *ext = NULL;
    if (k == STEP_CUBERT_MEMORY) {
      /* h2d writes the bytes cubert's loop wrote (the pattern's first
       * ones): ended as a good write */
      void *a = NULL;
      if (cubert_handle_external_begin(c->client[0], v, d2h ? CUBERT_ACCESS_READ : CUBERT_ACCESS_WRITE, &ext, &a))
        continue;
      addr = (uint64_t)(uintptr_t)a;
    }
    uint32_t b = 0;
    double us = 0;
    int step = k == STEP_CUBERT_MEMORY ? CB_HIP_RAW_STEP_PLAIN : k;
    if (cb_bench_raw_small(c->raw, x.exec, step, d2h, host, addr, sp->size, count, &us, &b) == CUBERT_OK) {
      sample[k] = us;
      busy[k] += b;
    }
    if (ext) (void)cubert_handle_external_end(ext, NULL);
  }
}

/* The steps' rows (section "small-steps"): cubert column = raw with the
 * step, raw column = raw's plain loop of the same repetitions. */
static void small_steps_rows(ctx *c, const spec *sp, uint32_t count, double *const *smp, const uint32_t *busy,
                             int kept) {
  bool any = false;
  double *plain = kept > 0 && smp[CB_HIP_RAW_STEP_PLAIN] ? malloc((size_t)kept * sizeof *plain) : NULL;
  for (int k = 1; k < NSTEPS && plain; k++) {
    if (!smp[k] || smp[k][0] <= 0 || smp[CB_HIP_RAW_STEP_PLAIN][0] <= 0) continue;
    cb_bench_row *row = cb_bench_rows_add(&c->rows);
    if (!row) break;
    any = true;
    snprintf(row->section, sizeof row->section, "small-steps");
    snprintf(row->test, sizeof row->test, "%s %s", ttype_name[sp->t], step_info[k].name);
    snprintf(row->dir, sizeof row->dir, "uni");
    snprintf(row->link, sizeof row->link, "HOST");
    row->src = sp->a;
    row->dst = sp->b;
    row->size = sp->size;
    row->count = count;
    snprintf(row->unit, sizeof row->unit, "us");
    row->higher_better = false;
    /* the rows keep the samples in repetition order (pairs); the stats sort
     * the array they are given */
    fill_stats(row, false, smp[k], smp[k], smp[k], kept, 1);
    memcpy(plain, smp[CB_HIP_RAW_STEP_PLAIN], (size_t)kept * sizeof *plain);
    fill_stats(row, true, plain, NULL, NULL, kept, 1);
    snprintf(row->baseline, sizeof row->baseline, "raw plain, same reps");
    row->validated = -1;
    snprintf(row->note, sizeof row->note, "raw with one backend step: %.100s; stream queries busy: %u of %d",
             step_info[k].text, busy[k], kept * (int)count);
  }
  free(plain);
  if (any && c->nstep_cases < 8) {
    memcpy(c->step_busy[c->nstep_cases], busy, sizeof c->step_busy[0]);
    c->step_calls[c->nstep_cases++] = kept * (int)count;
  }
}

static void small_split(ctx *c) {
  static const struct { ttype t; uint64_t size; } cases[] = {{T_H2D, 4}, {T_D2H, 4}, {T_D2H, 4096}, {T_D2H, 8192}, {T_D2H, 16384}, {T_D2H, 32768}, {T_D2H, 65536}, {T_D2H, 131072}};
  static const char *const suffix[SPLIT_N] = {"host", "no-timer", "0B", "", "", "", ""};
  int total = c->o.warmup + c->o.reps;
  uint32_t count = c->o.lat_count;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ttype t = cases[i].t;
    uint64_t size = cases[i].size;
    if (size > c->max) continue; /* buffers smaller than the case (--sizes, --matrix-size) */
    spec sp = {t, t == T_H2D ? -1 : 0, t == T_H2D ? 0 : -1, size};
    cubert_handle *base = t == T_H2D ? c->dst[0] : c->src[0];
    cubert_handle *v = NULL, *zero = NULL;
    double *smp[SPLIT_N];
    for (int k = 0; k < SPLIT_N; k++) smp[k] = calloc((size_t)total, sizeof(double));
    bool steps = c->raw && !cb_bench_raw_is_host(c->raw);
    double *ssmp[NSTEPS] = {NULL};
    uint32_t sbusy[NSTEPS] = {0};
    for (int k = 0; k < NSTEPS && steps; k++) ssmp[k] = calloc((size_t)total, sizeof(double));
    cubert_status st = cubert_handle_slice(base, 0, c->max - size, &v);
    if (!st) st = cubert_handle_slice(base, 0, c->max, &zero);
    bool ok = true;
    int kept = 0;
    for (int k = 0; k < SPLIT_N; k++)
      if (!smp[k]) st = st ? st : CUBERT_ERR_OUT_OF_MEMORY;
    char sz[32];
    cb_bench_size_name(size, sz, sizeof sz);
    for (int r = 0; r < total && !st; r++) {
      double h[SPLIT_N] = {0}, dev = 0, unused = 0;
      if (t == T_D2H) memset(c->host_buf, 0, size);
      if (!(st = small_loop(c, t, v, size, count, true, &h[SPLIT_TIMER], &dev))) ok = ok && small_arrived(c, t, v, size);
      if (!st && t == T_D2H) memset(c->host_buf, 0, size);
      if (!st && !(st = small_loop(c, t, v, size, count, false, &h[SPLIT_NO_TIMER], &unused)))
        ok = ok && small_arrived(c, t, v, size);
      if (!st) st = small_loop(c, t, zero, 0, count, false, &h[SPLIT_ZERO], &unused);
      if (!st && c->raw) {
        cb_bench_xfer x = raw_xfer(c, &sp);
        double ms = 0, enq_ms = 0;
        if (cb_bench_raw_run(c->raw, &x, 1, count, 0, &ms, &enq_ms, NULL) == CUBERT_OK) {
          h[SPLIT_RAW] = enq_ms * 1e3 / count;
          h[SPLIT_RAW_DEVICE] = ms * 1e3 / count;
        }
        /* raw into a buffer on this stack (the HIP backend landed reads of
         * up to 4 KiB on its own stack until the 09:35Z run of 2026-12-02):
         * does the destination's kind change the driver's cost? */
        uint32_t on_stack[1024];
        if (t == T_D2H && size <= sizeof on_stack) {
          x.dst = (uint64_t)(uintptr_t)on_stack;
          if (cb_bench_raw_run(c->raw, &x, 1, count, 0, &ms, &enq_ms, NULL) == CUBERT_OK)
            h[SPLIT_RAW_STACK] = enq_ms * 1e3 / count;
        }
      }
      h[SPLIT_DEVICE] = dev;
      double sh[NSTEPS] = {0};
      uint32_t ignored[NSTEPS] = {0};
      if (!st && steps) small_steps_rep(c, &sp, v, count, sh, r < c->o.warmup ? ignored : sbusy);
      if (r < c->o.warmup) continue;
      for (int k = 0; k < SPLIT_N; k++) smp[k][kept] = h[k];
      for (int k = 0; k < NSTEPS; k++)
        if (ssmp[k]) ssmp[k][kept] = sh[k];
      kept++;
    }
    if (st) {
      note(c, "small %s %s: %s", ttype_name[t], sz, cubert_last_error_message());
      c->errors++;
    }
    c->checks++;
    if (!ok) c->failed_checks++;
    for (int k = 0; k <= SPLIT_ZERO && !st && kept; k++) {
      cb_bench_row *row = cb_bench_rows_add(&c->rows);
      if (!row) break;
      snprintf(row->section, sizeof row->section, "small");
      snprintf(row->test, sizeof row->test, "%s %s", ttype_name[t], suffix[k]);
      snprintf(row->dir, sizeof row->dir, "uni");
      snprintf(row->link, sizeof row->link, "HOST");
      row->src = sp.a;
      row->dst = sp.b;
      row->size = k == SPLIT_ZERO ? 0 : size;
      row->count = count;
      snprintf(row->unit, sizeof row->unit, "us");
      row->higher_better = false;
      if (k != SPLIT_ZERO) set_engine(c, &sp, row);
      fill_stats(row, false, smp[k], smp[k], smp[k], kept, 1);
      if (k == SPLIT_TIMER && c->raw && smp[SPLIT_RAW][0] > 0) fill_stats(row, true, smp[SPLIT_RAW], NULL, NULL, kept, 1);
      row->validated = ok ? 1 : 0;
      if (k == SPLIT_TIMER) {
        int used = snprintf(row->note, sizeof row->note,
                            "host clock per call; the device's timers: cubert %.3f, raw %.3f us per call",
                            cb_bench_stats_of(smp[SPLIT_DEVICE], kept).median,
                            cb_bench_stats_of(smp[SPLIT_RAW_DEVICE], kept).median);
        if (smp[SPLIT_RAW_STACK][0] > 0 && used > 0 && (size_t)used < sizeof row->note)
          snprintf(row->note + used, sizeof row->note - (size_t)used, "; raw into a stack buffer %.3f us",
                   cb_bench_stats_of(smp[SPLIT_RAW_STACK], kept).median);
      } else if (k == SPLIT_NO_TIMER)
        snprintf(row->note, sizeof row->note, "host clock per call, no timer recorded on the stream before the loop");
      else
        snprintf(row->note, sizeof row->note, "0 bytes: the runtime's path without the backend call (beside %s of %s)",
                 ttype_name[t], sz);
    }
    if (!st && steps) small_steps_rows(c, &sp, count, ssmp, sbusy, kept);
    cubert_handle_release(v);
    cubert_handle_release(zero);
    for (int k = 0; k < SPLIT_N; k++) free(smp[k]);
    for (int k = 0; k < NSTEPS; k++) free(ssmp[k]);
  }
}

/* The small section's lines: each call's excess over raw split into the
 * runtime's share and the layers' below it. */
static void print_small(const ctx *c) {
  bool any = false;
  for (size_t i = 0; i < c->rows.n; i++) {
    const cb_bench_row *r = &c->rows.v[i];
    if (strcmp(r->section, "small") != 0 || r->size == 0 || !strstr(r->test, " host")) continue;
    if (!any)
      printf("\nSmall host transfers: where the time goes (the latency rows' loop on the host clock, us per call,\n"
             "median; runtime = the same call of 0 bytes; below = cubert - raw - runtime: fault layer + backend)\n");
    any = true;
    char dir[8];
    snprintf(dir, sizeof dir, "%.3s", r->test);
    /* small_split adds each case's rows in order: host, no-timer, 0B */
    const cb_bench_row *nt = i + 1 < c->rows.n && strstr(c->rows.v[i + 1].test, "no-timer") ? r + 1 : NULL;
    const cb_bench_row *z = i + 2 < c->rows.n && strstr(c->rows.v[i + 2].test, "0B") ? r + 2 : NULL;
    char sz[32];
    cb_bench_size_name(r->size, sz, sizeof sz);
    double cu = r->cubert.median, rt = z ? z->cubert.median : 0;
    printf("  %s %-6s cubert %7.3f", dir, sz, cu);
    if (r->have_raw)
      printf(", raw %7.3f: %+.3f = runtime %.3f + below %+.3f", r->raw.median, cu - r->raw.median, rt,
             cu - r->raw.median - rt);
    else
      printf(" (no raw figure), runtime %.3f", rt);
    if (nt) printf("; without a timer on the stream: cubert %.3f", nt->cubert.median);
    printf("\n");
    if (r->note[0]) printf("      (%s)\n", r->note);
  }
}

/* Issue 15's 4-byte h2d write, each call timed on its own (the host clock
 * read after every call, its own cost in every figure alike): where does
 * cubert's excess over raw sit? A periodic cost (a mark's event every 32
 * items, a reap, a progress call) shows as outliers at fixed call indices;
 * a cost in every call moves the median. Loops of lat_count calls then a
 * sync, as the lat-h2d row; the variants interleaved loop by loop. The
 * composed variants run raw's loop with a cubert call of 0 bytes before
 * each transfer: is cubert's excess the runtime's 0-byte share, the
 * backend's steps, or more than their sum (the two slowing each other)? */
enum {
  PC_RAW, PC_CUBERT, PC_ZERO, PC_RAW_ZERO, PC_BACKEND, PC_BACKEND_ZERO, PC_NOFI, PC_RAW_LINES16, PC_RAW_LINES64, PC_RAW_DRIVER, PC_N
};
#define PC_LOOPS 100
#define PC_WARM 4

static const char *const pc_name[PC_N] = {
    [PC_RAW] = "raw plain hipMemcpyAsync",
    [PC_CUBERT] = "cubert_handle_write",
    [PC_ZERO] = "cubert_handle_write of 0 bytes",
    [PC_RAW_ZERO] = "raw plain + a cubert 0-byte write before each",
    [PC_BACKEND] = "raw with every backend step",
    [PC_BACKEND_ZERO] = "raw every backend step + cubert 0-byte write",
    [PC_NOFI] = "cubert_handle_write, runtime without fault layer",
    [PC_RAW_LINES16] = "raw plain + 16 cache lines read+written before",
    [PC_RAW_LINES64] = "raw plain + 64 cache lines read+written before",
    [PC_RAW_DRIVER] = "raw hipMemcpyHtoDAsync (NVIDIA: cuMemcpyHtoDAsync)",
};

typedef struct pc_zero {
  cubert_client *cl;
  cubert_handle *zero;
  const void *src;
} pc_zero;

static int pc_zero_write(void *arg) {
  pc_zero *z = arg;
  return cubert_handle_write(z->cl, z->zero, z->src, 0) != CUBERT_OK;
}

/* The calibration of the composed variants: what touching the same
 * `n` cache lines between two driver calls costs (a dependent chain, each
 * line read and written, as the runtime's objects are on every call: are
 * they still cached after the driver's call?). The lines sit 4160 bytes
 * apart (different cache sets). */
#define PC_LINE_STRIDE 4160u
typedef struct pc_lines {
  unsigned char *buf; /* 64 lines */
  int n;
} pc_lines;

static int pc_touch_lines(void *arg) {
  pc_lines *l = arg;
  size_t at = 0;
  for (int i = 0; i < l->n; i++) {
    uint64_t *w = (uint64_t *)(void *)(l->buf + at);
    w[1]++;
    at = (size_t)w[0]; /* the next line's offset: a dependent load */
  }
  return 0;
}

/* One loop of cubert writes, ns[k] each call's nanoseconds. */
static cubert_status pc_cubert_loop(cubert_client *cl, cubert_handle *v, const void *src, uint64_t size,
                                    uint32_t count, uint64_t *ns) {
  cubert_status st = CUBERT_OK;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (uint32_t k = 0; k < count && !st; k++) {
    st = cubert_handle_write(cl, v, src, size);
    clock_gettime(CLOCK_MONOTONIC, &b);
    ns[k] = (uint64_t)((int64_t)(b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec));
    a = b;
  }
  cubert_status s2 = cubert_sync(cl);
  return st ? st : s2;
}

/* One variant's lines: the distribution, then the mean by call index mod
 * 32 (k = 0, the first after the sync, on its own), then where the slowest
 * 1 % sit. */
static void pc_print(FILE *f, const char *name, const uint64_t *ns, uint32_t count, int loops) {
  size_t n = (size_t)count * (size_t)loops;
  uint64_t *s = malloc(n * sizeof *s);
  if (!s || !n) {
    free(s);
    return;
  }
  memcpy(s, ns, n * sizeof *s);
  qsort(s, n, sizeof *s, cb_bench_cmp_u64);
  double total = 0, top1 = 0, top3 = 0;
  size_t n1 = n / 100 ? n / 100 : 1, n3 = 3 * n / 100 ? 3 * n / 100 : 1;
  for (size_t i = 0; i < n; i++) {
    total += (double)s[i];
    if (i >= n - n1) top1 += (double)s[i];
    if (i >= n - n3) top3 += (double)s[i];
  }
  uint64_t p99 = s[n * 99 / 100], p90 = s[n * 9 / 10], med = s[n / 2], cut = s[n - n1];
  fprintf(f, "  %-50s %7.3f %7.3f %7.3f %7.3f %8.3f %5.1f%% %5.1f%%\n", name, total / (double)n * 1e-3,
         (double)med * 1e-3, (double)p90 * 1e-3, (double)p99 * 1e-3, (double)s[n - 1] * 1e-3,
         100.0 * top1 / total, 100.0 * top3 / total);
  double by[32] = {0}, first = 0;
  int nby[32] = {0}, slow[32] = {0}, slow0 = 0;
  for (int l = 0; l < loops; l++)
    for (uint32_t k = 0; k < count; k++) {
      uint64_t v = ns[(size_t)l * count + k];
      if (k == 0) first += (double)v;
      else {
        by[k % 32] += (double)v;
        nby[k % 32]++;
      }
      if (v >= cut) {
        if (k == 0) slow0++;
        else slow[k % 32]++;
      }
    }
  fprintf(f, "    mean by k mod 32, us (k = 0 apart: %.3f):", first / loops * 1e-3);
  for (int r = 0; r < 32; r++) fprintf(f, "%s%.2f", r % 8 ? " " : " | ", nby[r] ? by[r] / nby[r] * 1e-3 : 0.0);
  fprintf(f, "\n    slowest 1%% (>= %.3f us) by k mod 32 (k = 0 apart: %d):", (double)cut * 1e-3, slow0);
  for (int r = 0; r < 32; r++)
    if (slow[r]) fprintf(f, " %d:%d", r, slow[r]);
  fprintf(f, "\n");
  free(s);
}

/* A runtime without the fault layer, one client of the bench's first
 * device and 4 bytes of its memory. */
static cubert_status pc_nofi_open(ctx *c, cubert_runtime **rt, cubert_client **cl, cubert_handle **h) {
  cubert_runtime_options ro;
  cubert_runtime_options_init(&ro);
  ro.backends = c->o.backend;
  ro.no_faultinj = true;
  cubert_status st = cubert_runtime_create(&ro, rt);
  if (!st) st = cubert_client_create(*rt, c->rt_index[0], cl);
  if (!st) st = cubert_handle_empty(*cl, 4, h);
  return st;
}

static void small_each_call(ctx *c) {
  uint32_t count = c->o.lat_count;
  spec sp = {T_H2D, -1, 0, 4};
  if (c->max < 4 || count > 4096) return; /* scratch below: the warm-up loops' figures */
  uint64_t *ns[PC_N] = {NULL};
  bool have[PC_N] = {false};
  cubert_handle *v = NULL, *zero = NULL, *nh = NULL;
  cubert_runtime *nrt = NULL;
  cubert_client *ncl = NULL;
  unsigned char *lbuf = NULL;
  cubert_status st = cubert_handle_slice(c->dst[0], 0, c->max - 4, &v);
  if (!st) st = cubert_handle_slice(c->dst[0], 0, c->max, &zero);
  for (int k = 0; k < PC_N && !st; k++)
    if (!(ns[k] = calloc((size_t)count * PC_LOOPS, sizeof(uint64_t)))) st = CUBERT_ERR_OUT_OF_MEMORY;
  if (st) {
    note(c, "each call timed: %s", cubert_last_error_message());
    c->errors++;
    goto out;
  }
  bool nofi = pc_nofi_open(c, &nrt, &ncl, &nh) == CUBERT_OK;
  char nofi_msg[200] = "";
  if (!nofi) snprintf(nofi_msg, sizeof nofi_msg, "%.190s", cubert_last_error_message());
  cb_bench_xfer x = raw_xfer(c, &sp);
  pc_zero z = {c->client[0], zero, c->pattern};
  lbuf = calloc(64, PC_LINE_STRIDE);
  for (size_t i = 0; lbuf && i < 64; i++) {
    uint64_t next = (uint64_t)((i + 1) % 64) * PC_LINE_STRIDE;
    memcpy(lbuf + i * PC_LINE_STRIDE, &next, sizeof next);
  }
  pc_lines l16 = {lbuf, 16}, l64 = {lbuf, 64};
  uint64_t scratch[4096];
  for (int l = 0; l < PC_WARM + PC_LOOPS; l++) {
    bool warm = l < PC_WARM;
    for (int k = 0; k < PC_N; k++) {
      uint64_t *out = warm ? NULL : ns[k] + (size_t)(l - PC_WARM) * count;
      uint64_t *dst = out ? out : scratch;
      cubert_status s = CUBERT_OK;
      double us = 0;
      bool raw = k == PC_RAW || k == PC_RAW_ZERO || k == PC_BACKEND || k == PC_BACKEND_ZERO ||
                 k == PC_RAW_LINES16 || k == PC_RAW_LINES64 || k == PC_RAW_DRIVER;
      if ((raw && !c->raw) || ((k == PC_RAW_LINES16 || k == PC_RAW_LINES64) && !lbuf)) continue;
      switch (k) {
      case PC_CUBERT: s = pc_cubert_loop(c->client[0], v, c->pattern, 4, count, dst); break;
      case PC_ZERO: s = pc_cubert_loop(c->client[0], zero, c->pattern, 0, count, dst); break;
      case PC_NOFI:
        if (!nofi) continue;
        s = pc_cubert_loop(ncl, nh, c->pattern, 4, count, dst);
        break;
      default: {
        int step = k == PC_BACKEND || k == PC_BACKEND_ZERO ? CB_HIP_RAW_STEP_BACKEND
                   : k == PC_RAW_DRIVER                 ? CB_HIP_RAW_STEP_DRIVER
                                                        : CB_HIP_RAW_STEP_PLAIN;
        bool with0 = k == PC_RAW_ZERO || k == PC_BACKEND_ZERO, lines = k == PC_RAW_LINES16 || k == PC_RAW_LINES64;
        s = cb_bench_raw_small_each(c->raw, x.exec, step, false, c->pattern, x.dst, 4, count,
                                    with0 ? pc_zero_write : lines ? pc_touch_lines : NULL,
                                    with0 ? (void *)&z : k == PC_RAW_LINES16 ? (void *)&l16 : (void *)&l64, dst, &us);
        if (with0 && !s) s = cubert_sync(c->client[0]); /* the 0-byte records, untimed */
        break;
      }
      }
      if (s == CUBERT_ERR_UNSUPPORTED && raw) continue; /* raw host: no such loop */
      if (s) {
        note(c, "each call timed, %s: %s", pc_name[k],
             raw ? cb_bench_raw_error(c->raw) : cubert_last_error_message());
        c->errors++;
        goto out;
      }
      if (out) have[k] = true;
    }
  }
  size_t len = 0;
  FILE *f = open_memstream(&c->each_text, &len);
  if (!f) goto out;
  fprintf(f, "\nSmall host transfers, each call timed on its own: h2d 4 B (%d loops of %u calls then a sync,\n"
         "the variants interleaved loop by loop; us per call, the clock's reading included; top1%%/top3%%: the\n"
         "share of the loops' time the slowest 1 %%/3 %% of calls carry)\n", PC_LOOPS, count);
  fprintf(f, "  %-50s %7s %7s %7s %7s %8s %6s %6s\n", "", "mean", "median", "p90", "p99", "max", "top1%", "top3%");
  for (int k = 0; k < PC_N; k++) {
    if (have[k]) pc_print(f, pc_name[k], ns[k], count, PC_LOOPS);
    else if (k == PC_NOFI && !nofi) fprintf(f, "  %-50s (no runtime without the fault layer: %s)\n", pc_name[k], nofi_msg);
    else fprintf(f, "  %-50s (not measured: no raw HIP)\n", pc_name[k]);
  }
  /* the differences of the means, each variant against raw's plain loop */
  double mean[PC_N] = {0};
  for (int k = 0; k < PC_N; k++)
    for (size_t i = 0; have[k] && i < (size_t)count * PC_LOOPS; i++) mean[k] += (double)ns[k][i] * 1e-3 / ((double)count * PC_LOOPS);
  if (have[PC_RAW] && have[PC_CUBERT]) {
    fprintf(f, "  means over raw plain: cubert %+.3f; 0-byte cubert alone %.3f", mean[PC_CUBERT] - mean[PC_RAW],
            have[PC_ZERO] ? mean[PC_ZERO] : 0.0);
    if (have[PC_RAW_ZERO]) fprintf(f, "; raw + 0-byte %+.3f", mean[PC_RAW_ZERO] - mean[PC_RAW]);
    if (have[PC_BACKEND]) fprintf(f, "; backend steps %+.3f", mean[PC_BACKEND] - mean[PC_RAW]);
    if (have[PC_BACKEND_ZERO]) fprintf(f, "; backend steps + 0-byte %+.3f", mean[PC_BACKEND_ZERO] - mean[PC_RAW]);
    if (have[PC_NOFI]) fprintf(f, "; cubert without fault layer %+.3f", mean[PC_NOFI] - mean[PC_RAW]);
    if (have[PC_RAW_DRIVER]) fprintf(f, "; raw via hipMemcpyHtoDAsync %+.3f", mean[PC_RAW_DRIVER] - mean[PC_RAW]);
    fprintf(f, "\n");
  }
  if (have[PC_RAW] && have[PC_RAW_LINES16] && have[PC_RAW_LINES64]) {
    /* the lines' walk alone, without driver calls between: their cost when cached */
    double t0 = cb_bench_now();
    for (int i = 0; i < 10000; i++) (void)pc_touch_lines(&l64);
    double hot = (cb_bench_now() - t0) * 1e6 / 10000;
    fprintf(f, "  same lines between driver calls over raw plain: 16 lines %+.3f, 64 lines %+.3f us (64 lines alone, hot: %.3f us)\n",
            mean[PC_RAW_LINES16] - mean[PC_RAW], mean[PC_RAW_LINES64] - mean[PC_RAW], hot);
  }
  fclose(f);
out:
  free(lbuf);
  cubert_handle_release(nh);
  if (ncl) cubert_client_destroy(ncl);
  if (nrt) cubert_runtime_destroy(nrt);
  cubert_handle_release(v);
  cubert_handle_release(zero);
  for (int k = 0; k < PC_N; k++) free(ns[k]);
}

/* The steps' table: one line per step, one column per case; the plain
 * loop in us per call, every other step the median over repetitions of
 * its difference to the plain loop of the same repetition. */
static void print_steps(const ctx *c) {
  const cb_bench_row *first[8];
  int n = 0;
  for (size_t i = 0; i < c->rows.n && n < 8; i++) {
    const cb_bench_row *r = &c->rows.v[i];
    if (strcmp(r->section, "small-steps") != 0) continue;
    if (n && strncmp(first[n - 1]->test, r->test, 3) == 0 && first[n - 1]->size == r->size) continue;
    first[n++] = r;
  }
  if (!n) return;
  printf("\nSmall host transfers: raw with one of the HIP backend's steps at a time (host clock, us per call;\n"
         "first line raw's plain loop, the others the median over repetitions of the difference to it)\n");
  printf("  %-50s", "");
  for (int j = 0; j < n; j++) {
    char sz[32], head[48];
    cb_bench_size_name(first[j]->size, sz, sizeof sz);
    snprintf(head, sizeof head, "%.3s %s", first[j]->test, sz);
    printf(" %10s", head);
  }
  printf("\n");
  for (int k = 0; k < NSTEPS; k++) {
    printf("  %-50s", step_info[k].text);
    for (int j = 0; j < n; j++) {
      char want[48];
      snprintf(want, sizeof want, "%.3s %s", first[j]->test, step_info[k].name);
      const cb_bench_row *r = NULL;
      for (size_t i = (size_t)(first[j] - c->rows.v); i < c->rows.n && !r; i++) {
        const cb_bench_row *q = &c->rows.v[i];
        if (strcmp(q->section, "small-steps") != 0 || q->size != first[j]->size ||
            strncmp(q->test, first[j]->test, 3) != 0)
          break;
        if (strcmp(q->test, want) == 0) r = q;
      }
      if (k == CB_HIP_RAW_STEP_PLAIN) {
        printf(" %10.3f", first[j]->raw.median);
      } else if (!r || !r->cubert_samples || !r->raw_samples) {
        printf(" %10s", "-");
      } else {
        int m = r->cubert.n;
        double *d = malloc((size_t)(m > 0 ? m : 1) * sizeof *d);
        for (int i = 0; d && i < m; i++) d[i] = r->cubert_samples[i] - r->raw_samples[i];
        printf(" %+10.3f", d ? cb_bench_stats_of(d, m).median : 0.0);
        free(d);
      }
    }
    printf("\n");
  }
  static const int queried[] = {CB_HIP_RAW_STEP_QUERY, CB_HIP_RAW_STEP_QUERY_ATTRS, CB_HIP_RAW_STEP_BACKEND};
  for (size_t q = 0; q < sizeof queried / sizeof queried[0]; q++) {
    char label[64];
    snprintf(label, sizeof label, "busy queries of all calls, %s", step_info[queried[q]].name);
    printf("  %-50s", label);
    for (int j = 0; j < n && j < c->nstep_cases; j++) {
      char cell[32];
      snprintf(cell, sizeof cell, "%u/%d", c->step_busy[j][queried[q]], c->step_calls[j]);
      printf(" %10s", cell);
    }
    printf("\n");
  }
}

/* ------------------------------------------------------------ the plan */

typedef struct plan {
  job *v;
  size_t n, cap;
} plan;

static void plan_add(plan *p, const char *section, const char *test, ttype t, int a, int b, uint64_t size,
                     bool bidi, uint32_t count, bool latency) {
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 64;
    job *v = realloc(p->v, cap * sizeof *v);
    if (!v) return;
    p->v = v;
    p->cap = cap;
  }
  job *j = &p->v[p->n++];
  memset(j, 0, sizeof *j);
  j->section = section;
  j->test = test;
  j->s[0] = (spec){t, a, b, size};
  j->n = bidi ? 2 : 1;
  if (bidi) j->s[1] = (spec){t, b, a, size};
  j->count = count;
  j->latency = latency;
}

static void make_plan(ctx *c, plan *p) {
  int n = c->ndev;
  uint64_t ms = c->o.matrix_size;
  uint32_t mk = count_for(c, ms);
  if (c->o.do_matrix) {
    for (int a = 0; a < n; a++)
      for (int b = 0; b < n; b++) {
        if (a == b) {
          plan_add(p, "matrix", "d2d", T_D2D, a, a, ms, false, mk, false);
          plan_add(p, "matrix", "d2d-kernel", T_D2D_KERNEL, a, a, ms, false, mk, false);
          continue;
        }
        plan_add(p, "matrix", "peer-ce", T_PEER_CE, a, b, ms, false, mk, false);
        plan_add(p, "matrix", "peer-read", T_PEER_READ, a, b, ms, false, mk, false);
        plan_add(p, "matrix", "peer-write", T_PEER_WRITE, a, b, ms, false, mk, false);
        plan_add(p, "matrix", "staged", T_STAGED, a, b, ms, false, mk, false);
      }
    for (int a = 0; a < n; a++)
      for (int b = a + 1; b < n; b++) {
        plan_add(p, "matrix", "peer-ce", T_PEER_CE, a, b, ms, true, mk, false);
        plan_add(p, "matrix", "peer-read", T_PEER_READ, a, b, ms, true, mk, false);
        plan_add(p, "matrix", "peer-write", T_PEER_WRITE, a, b, ms, true, mk, false);
      }
  }
  if (c->o.do_latency) {
    for (int a = 0; a < n; a++)
      for (int b = 0; b < n; b++) {
        /* chase: device a reads device b's memory (spec a = exec, b = memory) */
        plan_add(p, "latency", "chase", T_CHASE, a, b, c->o.chase_bytes, false, (uint32_t)c->o.chase_steps, true);
        plan_add(p, "latency", "lat-copy", a == b ? T_D2D : T_PEER_CE, a, b, 4, false, c->o.lat_count, true);
      }
    plan_add(p, "latency", "lat-h2d", T_H2D, -1, 0, 4, false, c->o.lat_count, true);
    plan_add(p, "latency", "lat-d2h", T_D2H, 0, -1, 4, false, c->o.lat_count, true);
  }
  if (c->o.do_sweep) {
    static const ttype dev_tests[] = {T_H2D, T_D2H, T_H2D_PINNED, T_D2H_PINNED, T_D2D, T_D2D_KERNEL};
    static const ttype pair_tests[] = {T_PEER_CE, T_PEER_READ, T_PEER_WRITE, T_STAGED};
    for (size_t t = 0; t < sizeof dev_tests / sizeof dev_tests[0]; t++)
      for (size_t i = 0; i < c->o.nsizes; i++) {
        uint64_t sz = c->o.sizes[i];
        ttype tt = dev_tests[t];
        plan_add(p, "sweep", ttype_name[tt], tt, tt == T_H2D || tt == T_H2D_PINNED ? -1 : 0,
                 tt == T_D2H || tt == T_D2H_PINNED ? -1 : 0, sz, false, count_for(c, sz), false);
      }
    /* pinned both ways at once: h2d and d2h of device 0 on two streams */
    for (size_t i = 0; i < c->o.nsizes; i++) {
      uint64_t sz = c->o.sizes[i];
      plan_add(p, "sweep", "pinned-bidi", T_H2D_PINNED, -1, 0, sz, false, count_for(c, sz), false);
      job *j = &p->v[p->n - 1];
      j->s[1] = (spec){T_D2H_PINNED, 0, -1, sz};
      j->n = 2;
    }
    if (n >= 2) {
      for (size_t t = 0; t < sizeof pair_tests / sizeof pair_tests[0]; t++)
        for (size_t i = 0; i < c->o.nsizes; i++)
          plan_add(p, "sweep", ttype_name[pair_tests[t]], pair_tests[t], 0, 1, c->o.sizes[i], false,
                   count_for(c, c->o.sizes[i]), false);
      for (size_t i = 0; i < c->o.nsizes; i++)
        plan_add(p, "sweep", "peer-ce", T_PEER_CE, 0, 1, c->o.sizes[i], true, count_for(c, c->o.sizes[i]), false);
    } else {
      /* one device: the staged rows' calls with both halves on it (read into
       * a pinned host buffer, sync, write from it, sync; raw the same way),
       * so the path is measured where no pair is; never the pair's target */
      for (size_t i = 0; i < c->o.nsizes; i++)
        plan_add(p, "sweep", "staged", T_STAGED, 0, 0, c->o.sizes[i], false, count_for(c, c->o.sizes[i]), false);
    }
  }
}

/* ------------------------------------------------------------ setup */

/* One hold of `ticks` on device `d` between two timers: *ms its length. */
static cubert_status timed_hold(ctx *c, int d, uint64_t ticks, double *ms) {
  cubert_timer *t0 = NULL, *t1 = NULL;
  cubert_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0};
  cubert_arg a = cubert_arg_scalar(&ticks, 8);
  cubert_status st;
  if (!(st = cubert_timer_record(c->client[d], &t0)) && !(st = cubert_launch(c->client[d], c->k_hold, &cfg, &a, 1)) &&
      !(st = cubert_timer_record(c->client[d], &t1)))
    st = cubert_timer_elapsed(t0, t1, ms);
  cubert_timer_release(t0);
  cubert_timer_release(t1);
  return st;
}

#define HOLD_CHECK_US 500.0

static cubert_status calibrate_hold(ctx *c, int d) {
  cubert_status st;
  /* Where the platform gives the hold clock's rate (AMD: wall_clock64 at
   * hipDeviceAttributeWallClockRate), it is used as is. */
  int khz = 0;
  if (c->raw && !cb_bench_raw_is_host(c->raw) &&
      cb_bench_raw_hold_clock_khz(c->raw, c->info[d].backend_index, &khz) == CUBERT_OK && khz > 0) {
    c->hold_khz[d] = khz;
    c->ticks_per_us[d] = khz / 1000.0;
  } else {
    /* Otherwise ticks per microsecond of the device's clock64 (ns on the
     * host), measured against timers: a first hold untimed (the kernel's
     * first launch loads, even compiles, its module while the start timer
     * is already recorded), then the shortest of three. A timed hold is its
     * ticks plus overheads, never less, so the shortest is the nearest; the
     * longest, taken until 2026-12-02, held the first launch's module load
     * (about 45 ms on the H200 against 1 ms of ticks) and made every hold
     * about 45 times shorter than asked. */
    uint64_t ticks = strcmp(c->o.backend, "host") == 0 ? 200000 : 2000000;
    double ms = 0, best = 0;
    if ((st = timed_hold(c, d, ticks / 100, &ms))) return st;
    for (int r = 0; r < 3; r++) {
      if ((st = timed_hold(c, d, ticks, &ms))) return st;
      if (ms > 0 && (best == 0 || ms < best)) best = ms;
    }
    c->ticks_per_us[d] = best > 0 ? (double)ticks / (best * 1e3) : 1000.0;
  }
  /* What a hold of HOLD_CHECK_US lasts now, reported beside the figures. */
  double ms = 0;
  if ((st = timed_hold(c, d, (uint64_t)(HOLD_CHECK_US * c->ticks_per_us[d]), &ms))) return st;
  c->hold_check_us[d] = ms * 1e3;
  return CUBERT_OK;
}

static cubert_status alloc_all(ctx *c) {
  cubert_status st;
  bool raw = c->raw != NULL;
  c->pattern = malloc(c->max);
  c->host_buf = malloc(c->max);
  c->chase_data = malloc(c->o.chase_bytes);
  if (!c->pattern || !c->host_buf || !c->chase_data) {
    fprintf(stderr, "cubert bench peer: no host memory for %" PRIu64 "-byte buffers\n", c->max);
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  for (uint64_t i = 0; i < c->max / 4; i++) c->pattern[i] = pattern_at(i);
  cb_bench_chase_fill(c->chase_data, c->o.chase_bytes, 64, 0x5eed);
  for (int d = 0; d < c->ndev; d++) {
    cubert_client *cl = c->client[d];
    if ((st = cubert_handle_create(cl, c->pattern, c->max, &c->src[d])) ||
        (st = cubert_handle_empty(cl, c->max, &c->dst[d])) || (st = cubert_handle_empty(cl, 8, &c->acc[d])) ||
        (st = cubert_handle_create(cl, c->chase_data, c->o.chase_bytes, &c->chase[d])) ||
        (st = cubert_handle_empty(cl, 4, &c->state[d])) || (st = cubert_sync(cl))) {
      fprintf(stderr, "cubert bench peer: buffers on device %d: %s\n", c->rt_index[d], cubert_last_error_message());
      return st;
    }
  }
  /* Pinned rows: cubert host buffers and device 0 on two streams of its own. */
  for (int i = 0; i < 2 && c->ndev > 0; i++) {
    cubert_stream ps = 0;
    if ((st = cubert_client_create(c->rt, c->rt_index[0], &c->pclient[i])) ||
        (st = cubert_stream_create(c->pclient[i], &ps)) || (st = cubert_client_use_stream(c->pclient[i], ps))) {
      fprintf(stderr, "cubert bench peer: a client for pinned transfers: %s\n", cubert_last_error_message());
      return st;
    }
  }
  if (c->ndev > 0 && ((st = cubert_host_buffer_alloc(c->client[0], c->max, &c->hb_src)) ||
                      (st = cubert_host_buffer_alloc(c->client[0], c->max, &c->hb_dst)))) {
    fprintf(stderr, "cubert bench peer: host buffers: %s\n", cubert_last_error_message());
    return st;
  }
  if (c->hb_src) memcpy(cubert_host_buffer_data(c->hb_src), c->pattern, c->max);
  /* Peer bindings need the memory shared by its owner. */
  c->shared = c->ndev > 1;
  for (int d = 0; d < c->ndev && c->ndev > 1; d++) {
    /* each one on its own: a refused pair leaves the other pairs usable */
    cubert_handle *h[3] = {c->src[d], c->dst[d], c->chase[d]};
    for (int i = 0; i < 3; i++)
      if (cubert_handle_share(c->client[d], h[i]) != CUBERT_OK && c->shared) {
        snprintf(c->share_note, sizeof c->share_note, "sharing device %d's buffers: %s", c->rt_index[d],
                 cubert_last_error_message());
        note(c, "%s", c->share_note);
        c->shared = false;
      }
  }
  if (raw) {
    for (int d = 0; d < c->ndev; d++) {
      int rd = c->raw_index[d];
      if ((st = cb_bench_raw_alloc(c->raw, rd, c->max, &c->raw_src[d])) ||
          (st = cb_bench_raw_alloc(c->raw, rd, c->max, &c->raw_dst[d])) ||
          (st = cb_bench_raw_alloc(c->raw, rd, c->o.chase_bytes, &c->raw_chase[d])) ||
          (st = cb_bench_raw_alloc(c->raw, rd, 256, &c->raw_state[d])) ||
          (st = cb_bench_raw_upload(c->raw, rd, c->raw_src[d], c->pattern, c->max)) ||
          (st = cb_bench_raw_upload(c->raw, rd, c->raw_chase[d], c->chase_data, c->o.chase_bytes))) {
        fprintf(stderr, "cubert bench peer: raw buffers on device %d: %s\n", c->rt_index[d],
                cb_bench_raw_error(c->raw));
        return st;
      }
      for (int p = 0; p < c->ndev; p++) {
        bool can = false;
        if (cb_bench_raw_peer(c->raw, rd, c->raw_index[p], &can) == CUBERT_OK) c->raw_peer[d][p] = can;
      }
    }
    if ((st = cb_bench_raw_host_alloc(c->raw, c->max, &c->raw_hsrc)) ||
        (st = cb_bench_raw_host_alloc(c->raw, c->max, &c->raw_hdst))) {
      fprintf(stderr, "cubert bench peer: raw pinned host memory: %s\n", cb_bench_raw_error(c->raw));
      return st;
    }
    memcpy(c->raw_hsrc, c->pattern, c->max);
    if ((c->ndev > 1 || c->o.do_sweep) && (st = cb_bench_raw_host_alloc(c->raw, c->max, &c->pinned))) {
      fprintf(stderr, "cubert bench peer: pinned host buffer: %s\n", cb_bench_raw_error(c->raw));
      return st;
    }
  }
  return CUBERT_OK;
}

static void free_all(ctx *c) {
  free(c->each_text);
  c->each_text = NULL;
  for (int d = 0; d < c->ndev; d++) {
    cubert_handle_release(c->src[d]);
    cubert_handle_release(c->dst[d]);
    cubert_handle_release(c->acc[d]);
    cubert_handle_release(c->chase[d]);
    cubert_handle_release(c->state[d]);
    if (c->raw) {
      int rd = c->raw_index[d];
      cb_bench_raw_free(c->raw, rd, c->raw_src[d]);
      cb_bench_raw_free(c->raw, rd, c->raw_dst[d]);
      cb_bench_raw_free(c->raw, rd, c->raw_chase[d]);
      cb_bench_raw_free(c->raw, rd, c->raw_state[d]);
    }
  }
  if (c->raw && c->pinned) cb_bench_raw_host_free(c->raw, c->pinned);
  if (c->raw && c->raw_hsrc) cb_bench_raw_host_free(c->raw, c->raw_hsrc);
  if (c->raw && c->raw_hdst) cb_bench_raw_host_free(c->raw, c->raw_hdst);
  cubert_host_buffer_release(c->hb_src);
  cubert_host_buffer_release(c->hb_dst);
  for (int i = 0; i < 2; i++)
    if (c->pclient[i]) cubert_client_destroy(c->pclient[i]);
  free(c->pattern);
  free(c->host_buf);
  free(c->chase_data);
}

/* ------------------------------------------------------------ report */

static const cb_bench_row *find_row(const ctx *c, const char *section, const char *test, const char *dir, int a,
                                    int b) {
  for (size_t i = 0; i < c->rows.n; i++) {
    const cb_bench_row *r = &c->rows.v[i];
    if (strcmp(r->section, section) == 0 && strcmp(r->test, test) == 0 && strcmp(r->dir, dir) == 0 &&
        r->src == a && r->dst == b)
      return r;
  }
  return NULL;
}

/* A raw time per operation below this (us) is a few instructions (a 4-byte
 * memcpy on the host backend) measured near the clock's own cost: a ratio
 * to it would read as thousands and mean nothing, so the text shows none. */
#define RAW_US_FLOOR 0.02

/* cubert/raw as the text report shows it; <= 0 for none. */
static double shown_ratio(const cb_bench_row *r) {
  if (strcmp(r->unit, "us") == 0 && r->have_raw && r->raw.median < RAW_US_FLOOR) return -1;
  return cb_bench_ratio(r);
}

/* A time in us, in ns below 1 us so that small raw figures keep their digits. */
static void time_text(char *buf, size_t cap, const cb_bench_row *r, double v) {
  if (strcmp(r->unit, "us") == 0 && v < 1)
    snprintf(buf, cap, "%.4gns", v * 1000);
  else
    snprintf(buf, cap, "%.4g", v);
}

static void cell(char *buf, size_t cap, const cb_bench_row *r) {
  if (!r) snprintf(buf, cap, "-");
  else if (!r->have_cubert) snprintf(buf, cap, strncmp(r->note, "no peer access", 14) == 0 ? "no peer" : "error");
  else {
    double ratio = shown_ratio(r);
    const char *mark = r->validated == 0 ? "!" : "";
    if (ratio > 0) snprintf(buf, cap, "%.4g%s (%.2f)", r->cubert.median, mark, ratio);
    else snprintf(buf, cap, "%.4g%s", r->cubert.median, mark);
  }
}

static void print_matrix(const ctx *c, const char *title, const char *test, const char *diag, const char *dir,
                         bool chase) {
  bool any = false;
  for (size_t i = 0; i < c->rows.n && !any; i++)
    any = strcmp(c->rows.v[i].test, test) == 0 || (diag && strcmp(c->rows.v[i].test, diag) == 0);
  if (!any) return;
  printf("\n%s\n%-8s", title, chase ? "exec\\mem" : "src\\dst");
  for (int b = 0; b < c->ndev; b++) printf(" %20d", c->rt_index[b]);
  printf("\n");
  for (int a = 0; a < c->ndev; a++) {
    printf("%-8d", c->rt_index[a]);
    for (int b = 0; b < c->ndev; b++) {
      const char *sec = strcmp(test, "lat-copy") == 0 || chase ? "latency" : "matrix";
      const cb_bench_row *r = a == b ? (diag ? find_row(c, sec, diag, "uni", a, a) : NULL)
                                     : (strcmp(dir, "bidi") == 0 ? (a < b ? find_row(c, sec, test, dir, a, b)
                                                                          : find_row(c, sec, test, dir, b, a))
                                                                 : find_row(c, sec, test, dir, a, b));
      char buf[40];
      cell(buf, sizeof buf, r);
      printf(" %20s", buf);
    }
    printf("\n");
  }
}

static void print_table(const ctx *c, const char *section) {
  bool header = false;
  for (size_t i = 0; i < c->rows.n; i++) {
    const cb_bench_row *r = &c->rows.v[i];
    if (strcmp(r->section, section) != 0) continue;
    if (!header) {
      printf("\n%-11s %-8s %-9s %-9s %10s %5s %11s %11s %11s %6s %11s %6s %5s\n", "test", "dir", "src->dst",
             "link", "size", "count", "cubert", "min", "max", "cv%", "raw", "ratio", "check");
      header = true;
    }
    char sz[32], pair[40], cm[16], mn[16], mx[16], cv[12], rw[16], ra[12];
    cb_bench_size_name(r->size, sz, sizeof sz);
    char sa[16], sb[16];
    if (r->src >= 0) snprintf(sa, sizeof sa, "%d", r->src);
    else snprintf(sa, sizeof sa, "host");
    if (r->dst >= 0) snprintf(sb, sizeof sb, "%d", r->dst);
    else snprintf(sb, sizeof sb, "host");
    snprintf(pair, sizeof pair, "%s%s%s", sa, strcmp(r->dir, "bidi") == 0 ? "<>" : "->", sb);
    if (r->have_cubert) {
      time_text(cm, sizeof cm, r, r->cubert.median);
      time_text(mn, sizeof mn, r, r->cubert.min);
      time_text(mx, sizeof mx, r, r->cubert.max);
      snprintf(cv, sizeof cv, "%.1f", r->cubert.cv * 100);
    } else {
      snprintf(cm, sizeof cm, "%s", strncmp(r->note, "no peer access", 14) == 0 ? "no peer" : "error");
      mn[0] = mx[0] = cv[0] = '\0';
    }
    if (r->have_raw) time_text(rw, sizeof rw, r, r->raw.median);
    else snprintf(rw, sizeof rw, "-");
    double ratio = shown_ratio(r);
    if (ratio > 0) snprintf(ra, sizeof ra, "%.3f", ratio);
    else snprintf(ra, sizeof ra, "-");
    /* a bidi figure is the sum of both directions (nvbandwidth reports one
     * direction under load: cubert_forward in the JSON and CSV) */
    printf("%-11s %-8s %-9s %-9s %10s %5" PRIu32 " %11s %11s %11s %6s %11s %6s %5s %s\n", r->test,
           strcmp(r->dir, "bidi") == 0 ? "bidi-sum" : r->dir, pair,
           r->link, sz, r->count, cm, mn, mx, cv, rw, ra,
           r->validated < 0 ? "-" : r->validated ? "ok" : "FAIL", r->unit);
    if (r->note[0]) printf("            note: %s\n", r->note);
  }
}

/* Kernel copies beside the copy engine on the same devices and size (the
 * raw figure of d2d for d2d-kernel, of peer-ce for peer-read/peer-write):
 * the row's engine_ratio, and its note when it has none. */
static void kernel_vs_engine(ctx *c) {
  for (size_t i = 0; i < c->rows.n; i++) {
    cb_bench_row *r = &c->rows.v[i];
    bool local = strcmp(r->test, "d2d-kernel") == 0;
    if (!r->have_cubert || strcmp(r->dir, "uni") != 0 ||
        (!local && strcmp(r->test, "peer-read") != 0 && strcmp(r->test, "peer-write") != 0))
      continue;
    const char *engine = local ? "d2d" : "peer-ce";
    for (size_t j = 0; j < c->rows.n; j++) {
      const cb_bench_row *e = &c->rows.v[j];
      if (!e->have_raw || e->raw.median <= 0 || strcmp(e->test, engine) != 0 || strcmp(e->dir, "uni") != 0 ||
          strcmp(e->section, r->section) != 0 || e->src != r->src || e->dst != r->dst || e->size != r->size)
        continue;
      r->engine_ratio = r->cubert.median / e->raw.median;
      if (!r->note[0])
        snprintf(r->note, sizeof r->note, "copy engine (raw %s) %.4g GB/s: kernel / engine %.3f", engine,
                 e->raw.median, r->engine_ratio);
      break;
    }
  }
}

static void host_targets(const ctx *c, json_t *out);

/* Targets (printed, never asserted): appended to `targets` too. */
static void targets(const ctx *c, json_t *out) {
  printf("\nTargets (printed, not asserted%s):\n",
         strcmp(c->o.backend, "host") == 0 ? "; they are set for HIP devices, the host backend only shows the method" : "");
  /* 1. copies >= 64 MiB at >= 0.97 of raw */
  double worst = 0;
  const cb_bench_row *wr = NULL;
  for (size_t i = 0; i < c->rows.n; i++) {
    const cb_bench_row *r = &c->rows.v[i];
    if (!r->higher_better || r->size < (UINT64_C(64) << 20) || strcmp(r->test, "staged") == 0) continue;
    double ratio = cb_bench_ratio(r);
    if (ratio <= 0) continue;
    if (!wr || ratio < worst) {
      worst = ratio;
      wr = r;
    }
  }
  json_t *t = json_object();
  json_object_set_new(t, "name", json_string("copies >= 64 MiB: cubert/raw bandwidth"));
  json_object_set_new(t, "target", json_real(0.97));
  if (wr) {
    char sz[32];
    printf("  copies >= 64 MiB at >= 0.97 of raw: worst %.3f (%s %s %d->%d %s): %s\n", worst, wr->test, wr->dir,
           wr->src, wr->dst, cb_bench_size_name(wr->size, sz, sizeof sz), worst >= 0.97 ? "met" : "NOT met");
    json_object_set_new(t, "value", json_real(worst));
    json_object_set_new(t, "met", json_boolean(worst >= 0.97));
  } else {
    printf("  copies >= 64 MiB at >= 0.97 of raw: no copy of 64 MiB or more with a raw figure in this run\n");
    json_object_set_new(t, "value", json_null());
  }
  json_array_append_new(out, t);

  /* 2. d2d against the raw copy ceiling (the best raw d2d of the run) */
  double ceiling = 0, best = 0;
  uint64_t best_size = 0;
  for (size_t i = 0; i < c->rows.n; i++) {
    const cb_bench_row *r = &c->rows.v[i];
    if (strcmp(r->test, "d2d") != 0 || !r->higher_better) continue;
    if (r->have_raw && r->raw.median > ceiling) ceiling = r->raw.median;
    if (r->have_cubert && r->cubert.median > best) {
      best = r->cubert.median;
      best_size = r->size;
    }
  }
  t = json_object();
  json_object_set_new(t, "name", json_string("d2d: best cubert / raw copy ceiling"));
  json_object_set_new(t, "target", json_real(0.9));
  if (ceiling > 0 && best > 0) {
    char sz[32];
    printf("  d2d at >= 0.9 of the raw copy ceiling: %.4g GB/s (%s) / %.4g GB/s = %.3f: %s\n", best,
           cb_bench_size_name(best_size, sz, sizeof sz), ceiling, best / ceiling,
           best / ceiling >= 0.9 ? "met" : "NOT met");
    json_object_set_new(t, "value", json_real(best / ceiling));
    json_object_set_new(t, "met", json_boolean(best / ceiling >= 0.9));
  } else {
    printf("  d2d at >= 0.9 of the raw copy ceiling: no d2d figures with a raw baseline\n");
    json_object_set_new(t, "value", json_null());
  }
  json_array_append_new(out, t);

  /* 3. the built-in kernel copy against the copy engine on the same GPU, at
   * 1 GiB (else the largest size measured) */
  const cb_bench_row *kr = NULL;
  for (size_t i = 0; i < c->rows.n; i++) {
    const cb_bench_row *r = &c->rows.v[i];
    if (strcmp(r->test, "d2d-kernel") != 0 || r->engine_ratio <= 0 || r->size > (UINT64_C(1) << 30)) continue;
    if (!kr || r->size > kr->size) kr = r;
  }
  t = json_object();
  json_object_set_new(t, "name", json_string("d2d-kernel at 1 GiB: built-in copy / copy engine (raw d2d)"));
  json_object_set_new(t, "target", json_real(0.9));
  if (kr) {
    char sz[32];
    bool met = kr->engine_ratio >= 0.9;
    printf("  built-in kernel copy at >= 0.90 of the copy engine (raw d2d, same GPU) at 1 GiB: %.4g / %.4g GB/s = "
           "%.3f at %s%s: %s\n",
           kr->cubert.median, kr->cubert.median / kr->engine_ratio, kr->engine_ratio,
           cb_bench_size_name(kr->size, sz, sizeof sz), kr->size == (UINT64_C(1) << 30) ? "" : " (no 1 GiB row)",
           met ? "met" : "NOT met");
    if (!met) printf("    missed by %.3f (%.4g GB/s)\n", 0.9 - kr->engine_ratio,
                     0.9 * kr->cubert.median / kr->engine_ratio - kr->cubert.median);
    json_object_set_new(t, "value", json_real(kr->engine_ratio));
    json_object_set_new(t, "size", json_integer((json_int_t)kr->size));
    json_object_set_new(t, "met", json_boolean(met));
  } else {
    printf("  built-in kernel copy at >= 0.90 of the copy engine: no d2d-kernel row beside a raw d2d in this run\n");
    json_object_set_new(t, "value", json_null());
  }
  json_array_append_new(out, t);

  /* 4. small transfers: 4-byte host latency <= 1.15 of raw each way, and
   * small reads (d2h from 4 KiB, below 64 MiB) >= 0.9 of raw */
  for (int dir = 0; dir < 2; dir++) {
    const char *test = dir ? "lat-d2h" : "lat-h2d";
    const cb_bench_row *lr = NULL;
    for (size_t i = 0; i < c->rows.n && !lr; i++)
      if (strcmp(c->rows.v[i].test, test) == 0 && cb_bench_ratio(&c->rows.v[i]) > 0) lr = &c->rows.v[i];
    t = json_object();
    char name[64];
    snprintf(name, sizeof name, "%s: 4-byte latency cubert/raw", test);
    json_object_set_new(t, "name", json_string(name));
    json_object_set_new(t, "target", json_real(1.15));
    if (lr) {
      double ratio = cb_bench_ratio(lr);
      printf("  %s (4 bytes) at <= 1.15 of raw latency: %.3f us / %.3f us = %.3f: %s (%+.3f us)\n", test,
             lr->cubert.median, lr->raw.median, ratio, ratio <= 1.15 ? "met" : "NOT met",
             lr->cubert.median - lr->raw.median);
      json_object_set_new(t, "value", json_real(ratio));
      json_object_set_new(t, "met", json_boolean(ratio <= 1.15));
    } else {
      printf("  %s (4 bytes) at <= 1.15 of raw latency: no figure with a raw baseline in this run\n", test);
      json_object_set_new(t, "value", json_null());
    }
    json_array_append_new(out, t);
  }
  const cb_bench_row *sr = NULL;
  double small_worst = 0;
  for (size_t i = 0; i < c->rows.n; i++) {
    const cb_bench_row *r = &c->rows.v[i];
    double ratio = cb_bench_ratio(r);
    if (strcmp(r->test, "d2h") != 0 || strcmp(r->section, "sweep") != 0 || r->size < 4096 ||
        r->size >= (UINT64_C(64) << 20) || ratio <= 0)
      continue;
    if (!sr || ratio < small_worst) {
      sr = r;
      small_worst = ratio;
    }
  }
  t = json_object();
  json_object_set_new(t, "name", json_string("d2h from 4 KiB, below 64 MiB: worst cubert/raw bandwidth"));
  json_object_set_new(t, "target", json_real(0.9));
  if (sr) {
    char sz[32];
    printf("  small d2h (4 KiB up to 64 MiB) at >= 0.90 of raw: worst %.3f at %s (%.4g / %.4g GB/s): %s\n", small_worst,
           cb_bench_size_name(sr->size, sz, sizeof sz), sr->cubert.median, sr->raw.median,
           small_worst >= 0.9 ? "met" : "NOT met");
    json_object_set_new(t, "value", json_real(small_worst));
    json_object_set_new(t, "met", json_boolean(small_worst >= 0.9));
  } else {
    printf("  small d2h (4 KiB up to 64 MiB) at >= 0.90 of raw: no d2h sweep row in that range in this run\n");
    json_object_set_new(t, "value", json_null());
  }
  json_array_append_new(out, t);
  host_targets(c, out);
}

/* One target of issue 15 on one row: prints the line and appends the JSON. */
static void host_target(json_t *out, const char *name, const cb_bench_row *r, double min_ratio, double min_gbs) {
  json_t *t = json_object();
  json_object_set_new(t, "name", json_string(name));
  json_object_set_new(t, "target", json_real(min_ratio));
  if (min_gbs > 0) json_object_set_new(t, "target_gbs", json_real(min_gbs));
  double ratio = r ? cb_bench_ratio(r) : 0;
  if (!r || !r->have_cubert || ratio <= 0) {
    printf("  %s: not measured in this run (needs the size in --sizes and a raw figure)\n", name);
    json_object_set_new(t, "value", json_null());
  } else {
    double gbs = r->cubert.median;
    bool met = ratio >= min_ratio && gbs >= min_gbs;
    char want[48];
    if (min_gbs > 0) snprintf(want, sizeof want, ">= %.2fx, >= %.0f GB/s", min_ratio, min_gbs);
    else snprintf(want, sizeof want, ">= %.2fx", min_ratio);
    printf("  %s: %.4g GB/s, raw %.4g GB/s, %.3fx raw (target %s): %s", name, gbs, r->raw.median, ratio, want,
           met ? "met" : "NOT met");
    if (!met)
      printf(" (short by %s)", ratio < min_ratio ? "the ratio" : "GB/s");
    printf("\n");
    json_object_set_new(t, "value", json_real(ratio));
    json_object_set_new(t, "gbs", json_real(gbs));
    json_object_set_new(t, "met", json_boolean(met));
  }
  json_array_append_new(out, t);
}

/* Issue 15's host-transfer targets: pinned rows at 64 MiB and 1 GiB >= 0.97
 * of raw pinned and >= 53 GB/s, both ways at once >= 0.97 of raw; pageable
 * rows >= 64 MiB >= 3x raw pageable and >= 25 GB/s; staged peer copies
 * >= 0.97 of raw staged. */
static void host_targets(const ctx *c, json_t *out) {
  static const uint64_t sizes[] = {UINT64_C(64) << 20, UINT64_C(1) << 30};
  char name[160], sz[32];
  for (size_t i = 0; i < 2; i++) {
    cb_bench_size_name(sizes[i], sz, sizeof sz);
    for (int d = 0; d < 2; d++) {
      const char *test = d ? "d2h-pinned" : "h2d-pinned";
      const cb_bench_row *r = NULL;
      for (size_t k = 0; k < c->rows.n && !r; k++)
        if (strcmp(c->rows.v[k].test, test) == 0 && c->rows.v[k].size == sizes[i]) r = &c->rows.v[k];
      snprintf(name, sizeof name, "%s %s", test, sz);
      host_target(out, name, r, 0.97, 53.0);
    }
    const cb_bench_row *r = NULL;
    for (size_t k = 0; k < c->rows.n && !r; k++)
      if (strcmp(c->rows.v[k].test, "pinned-bidi") == 0 && c->rows.v[k].size == sizes[i]) r = &c->rows.v[k];
    snprintf(name, sizeof name, "pinned-bidi %s (sum of both ways)", sz);
    host_target(out, name, r, 0.97, 0);
  }
  bool staged = false;
  for (size_t k = 0; k < c->rows.n; k++) {
    const cb_bench_row *r = &c->rows.v[k];
    if (r->size < (UINT64_C(64) << 20) || strcmp(r->section, "sweep") != 0) continue;
    staged = staged || (strcmp(r->test, "staged") == 0 && r->src != r->dst);
    cb_bench_size_name(r->size, sz, sizeof sz);
    if (strcmp(r->test, "h2d") == 0 || strcmp(r->test, "d2h") == 0) {
      snprintf(name, sizeof name, "%s (pageable) %s", r->test, sz);
      host_target(out, name, r, 3.0, 25.0);
      /* the aim: 0.75 of the pinned rate at the same size */
      char pin[48];
      snprintf(pin, sizeof pin, "%s-pinned", r->test);
      for (size_t m = 0; m < c->rows.n; m++) {
        const cb_bench_row *q = &c->rows.v[m];
        if (strcmp(q->test, pin) != 0 || q->size != r->size || !q->have_cubert || !r->have_cubert ||
            q->cubert.median <= 0)
          continue;
        printf("    aim: %.3f of the pinned rate (%.4g GB/s); aim 0.75: %s\n", r->cubert.median / q->cubert.median,
               q->cubert.median, r->cubert.median >= 0.75 * q->cubert.median ? "met" : "not yet");
      }
    } else if (strcmp(r->test, "staged") == 0) {
      if (r->src == r->dst) /* one device's proxy (make_plan): named so, never the pair's verdict */
        snprintf(name, sizeof name, "staged %d->%d %s (one device, both halves on it: the path, not the pair)",
                 r->src, r->dst, sz);
      else
        snprintf(name, sizeof name, "staged %d->%d %s", r->src, r->dst, sz);
      host_target(out, name, r, 0.97, 0);
    }
  }
  if (!staged) { /* said, not left out: the target needs a pair of devices */
    json_t *t = json_object();
    json_object_set_new(t, "name", json_string("staged peer copies (peer access off) >= 64 MiB"));
    json_object_set_new(t, "target", json_real(0.97));
    json_object_set_new(t, "value", json_null());
    printf("  staged peer copies (peer access off) >= 64 MiB, target >= 0.97x raw staged: not measured in "
           "this run (%s)\n",
           c->ndev < 2 ? "one device: needs two; the staged 0->0 rows make the same calls on one device"
                       : "no staged sweep row of 64 MiB or more");
    json_array_append_new(out, t);
  }
}

static json_t *document(ctx *c, json_t *target_list) {
  json_t *doc = cb_bench_json_head("cubert bench peer", c->o.backend);
  json_object_set_new(doc, "raw_baseline", json_string(c->raw ? cb_bench_raw_describe(c->raw) : c->raw_note));
  json_t *o = json_object();
  json_object_set_new(o, "reps", json_integer(c->o.reps));
  json_object_set_new(o, "warmup", json_integer(c->o.warmup));
  json_object_set_new(o, "matrix_size", json_integer((json_int_t)c->o.matrix_size));
  json_t *sz = json_array();
  for (size_t i = 0; i < c->o.nsizes; i++) json_array_append_new(sz, json_integer((json_int_t)c->o.sizes[i]));
  json_object_set_new(o, "sizes", sz);
  json_object_set_new(o, "quick", json_boolean(c->o.quick));
  json_object_set_new(o, "hold", json_boolean(c->o.hold && c->hold_ok));
  json_object_set_new(o, "hold_check_us", json_real(HOLD_CHECK_US));
  json_t *hs = json_object();
  json_object_set_new(hs, "cubert_reps", json_integer(c->holds[0]));
  json_object_set_new(hs, "cubert_short", json_integer(c->holds_short[0]));
  json_object_set_new(hs, "raw_reps", json_integer(c->holds[1]));
  json_object_set_new(hs, "raw_short", json_integer(c->holds_short[1]));
  json_object_set_new(o, "holds", hs);
  json_object_set_new(o, "chase_bytes", json_integer((json_int_t)c->o.chase_bytes));
  json_object_set_new(o, "chase_steps", json_integer((json_int_t)c->o.chase_steps));
  json_object_set_new(doc, "options", o);
  json_t *devs = json_array();
  for (int d = 0; d < c->ndev; d++) {
    json_t *x = json_object();
    json_object_set_new(x, "index", json_integer(c->rt_index[d]));
    json_object_set_new(x, "name", json_string(c->info[d].name));
    json_object_set_new(x, "arch", json_string(c->info[d].arch));
    json_object_set_new(x, "pci_bus_id", json_string(c->info[d].pci_bus_id));
    json_object_set_new(x, "total_memory", json_integer((json_int_t)c->info[d].total_memory));
    json_object_set_new(x, "hold_ticks_per_us", json_real(c->ticks_per_us[d]));
    json_object_set_new(x, "hold_check_us", json_real(c->hold_check_us[d]));
    json_object_set_new(x, "hold_clock", json_string(c->hold_khz[d] ? "wall_clock64 at hipDeviceAttributeWallClockRate"
                                                                     : "calibrated against timers"));
    json_array_append_new(devs, x);
  }
  json_object_set_new(doc, "devices", devs);
  json_t *links = json_array();
  for (int a = 0; a < c->ndev; a++) {
    json_t *row = json_array();
    for (int b = 0; b < c->ndev; b++) json_array_append_new(row, json_string(c->link[a][b]));
    json_array_append_new(links, row);
  }
  json_object_set_new(doc, "links", links);
  cb_bench_json_tail(doc, &c->rows, target_list, (long)c->checks, (long)c->failed_checks,
                     (long)c->errors, c->notes);
  return doc;
}

/* ------------------------------------------------------------ options */

static void usage(FILE *out) {
  fprintf(out,
          "usage: cubert bench peer [options]\n"
          "\n"
          "Peer bandwidth and latency: the all-pairs matrix (copy engine, kernel copies\n"
          "through peer bindings, peer access off = staged through the host), one and both\n"
          "directions, a size sweep, host transfers and latency; each cubert figure beside\n"
          "the same work done raw (plain HIP, or memcpy on the host backend), with the\n"
          "ratio cubert/raw. Every repetition's data is checked.\n"
          "\n"
          "  --sizes SPEC        sweep sizes: 1K..1G (powers of 2), 1K..1G:4, 4K,1M,64M\n"
          "                      (default 1K..1G, capped by device memory)\n"
          "  --matrix-size SIZE  size of the matrix cells (default 256M; 16M on the host;\n"
          "                      at most an eighth of device memory, cut with a note)\n"
          "  --reps N            timed repetitions per cell (default 10)\n"
          "  --warmup N          untimed repetitions first (default 3)\n"
          "  --only LIST         matrix,sweep,latency (default all three)\n"
          "  --backend NAME      hip or host (default: hip when it has devices)\n"
          "  --devices LIST      only these runtime devices (as `cubert info` numbers\n"
          "                      them), e.g. 0,2,5 or 0-3 (default: every device)\n"
          "  --no-hold           no hold kernel before timed asynchronous work\n"
          "  --csv FILE          every cell as CSV (- for stdout)\n"
          "  --json FILE         everything as JSON, what `cubert bench plot` reads\n"
          "                      (- for stdout; the text report then goes to stderr)\n"
          "  --svg PREFIX        PREFIX-matrix.svg (heatmaps) and PREFIX-sweep.svg\n"
          "  --quick             small sizes, few repetitions (CI, the host backend)\n"
          "  --quiet             no progress on stderr\n"
          "  --help              this text\n"
          "\n"
          "Units: GB/s = 1e9 bytes per second; latency in us per operation, the chase in\n"
          "ns per dependent load. ratio = cubert / raw of the medians (for GB/s higher is\n"
          "better, for times lower). Exit status 1 when any check or measurement failed.\n");
}

/* "0,2,5" or "0-3,6": runtime device indexes, each once. */
static bool parse_devices(const char *text, opts *o) {
  const char *p = text;
  o->ndevices = 0;
  while (*p) {
    char *end = NULL;
    if (*p < '0' || *p > '9') return false;
    unsigned long lo = strtoul(p, &end, 10), hi = lo;
    if (*end == '-') {
      if (end[1] < '0' || end[1] > '9') return false;
      hi = strtoul(end + 1, &end, 10);
    }
    if (hi < lo || hi > 4095 || (*end && *end != ',')) return false;
    for (unsigned long d = lo; d <= hi; d++) {
      for (int k = 0; k < o->ndevices; k++)
        if (o->devices[k] == (int)d) return false;
      if (o->ndevices == MAXDEV) return false;
      o->devices[o->ndevices++] = (int)d;
    }
    p = *end ? end + 1 : end;
  }
  return o->ndevices > 0;
}

static int parse_options(int argc, char **argv, opts *o) {
  const char *sizes = NULL, *matrix = NULL, *only = NULL, *devices = NULL;
  int reps = -1, warmup = -1;
  bool no_hold = false;
  const cb_cli_opt table[] = {
      CB_TEXT("sizes", 0, &sizes),         CB_TEXT("matrix-size", 0, &matrix),
      CB_INT("reps", &reps, 1, 100000),    CB_INT("warmup", &warmup, 0, 100000),
      CB_TEXT("only", 0, &only),           CB_CHOICE("backend", &o->backend, "hip|host"),
      CB_TEXT("devices", 0, &devices),     CB_FLAG("no-hold", 0, &no_hold),
      CB_OUTPUT("csv", &o->csv),           CB_OUTPUT("json", &o->json),
      CB_TEXT("svg", 0, &o->svg),          CB_FLAG("quick", 0, &o->quick),
      CB_FLAG("quiet", 0, &o->quiet),      CB_END};
  const cb_cli_spec cli = {"bench peer", usage, table, 0, 0, NULL};
  int first, rc = cb_cli_parse(&cli, argc, argv, &first);
  if (rc != CB_CLI_PARSED) return rc;
  o->hold = !no_hold;
  if (devices && !parse_devices(devices, o)) {
    fprintf(stderr,
            "cubert bench peer: --devices wants runtime device indexes from 0 to 4095, each once and at most "
            "%d, such as 0,2,5 or 0-3; not '%s'\n",
            MAXDEV, devices);
    return 2;
  }
  o->reps = reps >= 0 ? reps : o->quick ? 5 : 10;
  o->warmup = warmup >= 0 ? warmup : o->quick ? 1 : 3;
  char msg[256];
  if (!cb_bench_parse_sizes(sizes ? sizes : o->quick ? "4K..1M:4" : "1K..1G", &o->sizes, &o->nsizes, msg,
                            sizeof msg)) {
    fprintf(stderr, "cubert bench peer: %s\n", msg);
    return 2;
  }
  for (size_t i = 0; i < o->nsizes; i++)
    if (o->sizes[i] % 4) {
      fprintf(stderr, "cubert bench peer: --sizes: sizes must be multiples of 4 bytes, not %" PRIu64 "\n", o->sizes[i]);
      return 2;
    }
  o->matrix_size = 0;
  if (matrix && (!cb_bench_parse_size(matrix, &o->matrix_size) || o->matrix_size % 4)) {
    fprintf(stderr, "cubert bench peer: --matrix-size '%s' is not a size in multiples of 4 bytes\n", matrix);
    return 2;
  }
  o->do_matrix = o->do_sweep = o->do_latency = only == NULL;
  if (only) {
    char *copy = strdup(only), *save = NULL;
    for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
      if (strcmp(w, "matrix") == 0) o->do_matrix = true;
      else if (strcmp(w, "sweep") == 0) o->do_sweep = true;
      else if (strcmp(w, "latency") == 0) o->do_latency = true;
      else {
        fprintf(stderr, "cubert bench peer: --only takes matrix, sweep and latency, not '%s'\n", w);
        free(copy);
        return 2;
      }
    }
    free(copy);
    if (!o->do_matrix && !o->do_sweep && !o->do_latency) { /* `--only ""` or `--only ,` */
      fprintf(stderr, "cubert bench peer: --only wants one or more of matrix, sweep and latency, not '%s'\n", only);
      return 2;
    }
  }
  if (o->svg && !cb_bench_svg_available()) {
    fprintf(stderr, "cubert bench peer: --svg: this cubert was built without cairo (libcairo2-dev); "
                    "write --json and render it with `cubert bench plot` where cairo is\n");
    return 2;
  }
  if (o->svg && !cb_bench_svg_writable(o->svg, "bench peer")) return 1;
  return cb_cli_open_outputs(&cli) ? CB_CLI_PARSED : 1;
}

/* ------------------------------------------------------------ main */

static uint64_t pow2_floor(uint64_t v) {
  uint64_t p = 1;
  while (p <= v / 2) p *= 2;
  return p;
}

/* The runtime, the backend measured (hip when it has any, unless told,
 * else host) and its chosen devices, a client each. 0, or the exit code. */
static int open_devices(ctx *c) {
  opts *o = &c->o;
  cubert_runtime_options ro;
  cubert_runtime_options_init(&ro);
  if (o->backend) ro.backends = o->backend;
  cubert_status st = cubert_runtime_create(&ro, &c->rt);
  if (st) {
    fprintf(stderr, "cubert bench peer: cubert_runtime_create: %s: %s\n", cubert_status_name(st),
            cubert_last_error_message());
    return 1;
  }
  /* Devices of one backend: hip when it has any (unless told), else host. */
  int total = cubert_runtime_device_count(c->rt);
  const char *want = o->backend;
  if (!want) {
    want = "host";
    for (int d = 0; d < total; d++) {
      cubert_device_info info;
      if (cubert_runtime_device_info(c->rt, d, &info) == CUBERT_OK && strcmp(info.backend, "hip") == 0) want = "hip";
    }
  }
  o->backend = want;
  for (int k = 0; k < o->ndevices; k++) {
    cubert_device_info info;
    int d = o->devices[k];
    if (d >= total || cubert_runtime_device_info(c->rt, d, &info) || strcmp(info.backend, want) != 0) {
      fprintf(stderr, "cubert bench peer: --devices: %d is not a %s device (`cubert info` lists them)\n", d, want);
      return 2;
    }
  }
  for (int d = 0; d < total; d++) {
    cubert_device_info info;
    if (cubert_runtime_device_info(c->rt, d, &info) || strcmp(info.backend, want) != 0) continue;
    bool chosen = o->ndevices == 0;
    for (int k = 0; k < o->ndevices; k++) chosen |= o->devices[k] == d;
    if (!chosen) continue;
    if (c->ndev == MAXDEV) {
      note(c, "only the first %d devices are measured", MAXDEV);
      break;
    }
    c->info[c->ndev] = info;
    c->rt_index[c->ndev] = d;
    c->raw_index[c->ndev] = info.backend_index;
    c->ndev++;
  }
  if (c->ndev == 0) {
    fprintf(stderr, "cubert bench peer: no %s device (%d device%s in the backends opened:", want, total,
            total == 1 ? "" : "s");
    for (int i = 0; i < cubert_runtime_backend_count(c->rt); i++)
      fprintf(stderr, " %s", cubert_runtime_backend_name(c->rt, i));
    fprintf(stderr, "); CUBERT_BACKENDS or --backend choose them\n");
    return 1;
  }
  for (int d = 0; d < c->ndev; d++)
    if (cubert_client_create(c->rt, c->rt_index[d], &c->client[d])) {
      fprintf(stderr, "cubert bench peer: client of device %d: %s\n", c->rt_index[d], cubert_last_error_message());
      return 1;
    }
  return 0;
}

/* Topology classes of the pairs ('?' when the topology is unavailable). */
static void label_pairs(ctx *c) {
  for (int a = 0; a < c->ndev; a++)
    for (int b = 0; b < c->ndev; b++) snprintf(c->link[a][b], sizeof c->link[a][b], "%s", a == b ? "SELF" : "?");
  cubert_topology *topo = NULL;
  if (cubert_topology_create(c->rt, NULL, &topo) == CUBERT_OK) {
    c->topology_ok = true;
    for (int a = 0; a < c->ndev; a++)
      for (int b = 0; b < c->ndev; b++) {
        const char *name = cubert_topology_pair_name(topo, c->rt_index[a], c->rt_index[b]);
        snprintf(c->link[a][b], sizeof c->link[a][b], "%s", name ? name : "?");
      }
    cubert_topology_destroy(topo);
  } else {
    note(c, "topology unavailable (%s): pairs are labelled '?'", cubert_last_error_message());
  }
}

/* Sizes capped by the smallest device: src and dst per device, each side;
 * the matrix, chase and repetition sizes for the backend. */
static void choose_sizes(ctx *c) {
  opts *o = &c->o;
  const char *want = o->backend;
  uint64_t mem = UINT64_MAX;
  for (int d = 0; d < c->ndev; d++)
    if (c->info[d].total_memory < mem) mem = c->info[d].total_memory;
  uint64_t cap = pow2_floor(mem / 8);
  size_t kept = 0;
  for (size_t i = 0; i < o->nsizes; i++)
    if (o->sizes[i] <= cap) o->sizes[kept++] = o->sizes[i];
  if (kept < o->nsizes) note(c, "sizes above %" PRIu64 " bytes left out (device memory %" PRIu64 ")", cap, mem);
  o->nsizes = kept;
  if (!o->matrix_size) o->matrix_size = o->quick ? (UINT64_C(1) << 20) : strcmp(want, "host") == 0 ? (UINT64_C(16) << 20) : (UINT64_C(256) << 20);
  if (o->matrix_size > cap) {
    note(c, "matrix cells of %" PRIu64 " bytes cut to %" PRIu64 " (device memory %" PRIu64 ")", o->matrix_size, cap, mem);
    o->matrix_size = cap;
  }
  o->chase_bytes = o->quick || strcmp(want, "host") == 0 ? (UINT64_C(1) << 20) : (UINT64_C(256) << 20);
  if (o->chase_bytes > cap) o->chase_bytes = cap;
  if (o->chase_bytes < 4096) o->chase_bytes = 4096;
  o->chase_steps = o->quick ? 2000 : 20000;
  o->lat_count = o->quick ? 20 : 100;
  o->rep_bytes = o->quick || strcmp(want, "host") == 0 ? (UINT64_C(4) << 20) : (UINT64_C(64) << 20);
  c->max = o->matrix_size;
  for (size_t i = 0; i < o->nsizes; i++)
    if (o->sizes[i] > c->max) c->max = o->sizes[i];
  if (c->max < 4096) c->max = 4096;
}

/* The raw baseline, the kernels, the buffers and the hold kernel's
 * calibration. 0, or the exit code. */
static int prepare(ctx *c) {
  opts *o = &c->o;
  const char *want = o->backend;
  cubert_status st;
  if (cb_bench_raw_open(want, &c->raw) != CUBERT_OK) {
    c->raw = NULL;
    snprintf(c->raw_note, sizeof c->raw_note, "no raw baseline: the raw %s calls are not available", want);
    note(c, "%s", c->raw_note);
  }

  /* Kernels. */
  if ((st = cubert_builtin_kernel(CUBERT_BUILTIN_COPY_U32, &c->k_copy)) ||
      (st = cubert_builtin_kernel(CUBERT_BUILTIN_COPY_PEER_READ, &c->k_read)) ||
      (st = cubert_builtin_kernel(CUBERT_BUILTIN_COPY_PEER_WRITE, &c->k_write)) ||
      (st = cubert_builtin_kernel(CUBERT_BUILTIN_CHECKSUM_U32, &c->k_checksum)) ||
      (st = cb_bench_kernel(CB_BENCH_HOLD, &c->k_hold)) || (st = cb_bench_kernel(CB_BENCH_CHASE, &c->k_chase)) ||
      (st = cb_bench_kernel(CB_BENCH_CHASE_PEER, &c->k_chase_peer))) {
    fprintf(stderr, "cubert bench peer: kernels: %s\n", cubert_last_error_message());
    return 1;
  }
  if (alloc_all(c)) return 1;
  c->hold_ok = true;
  for (int d = 0; d < c->ndev && o->hold; d++)
    if (calibrate_hold(c, d)) {
      snprintf(c->hold_note, sizeof c->hold_note, "no hold kernel (%s): small-size figures include enqueue time",
               cubert_last_error_message());
      note(c, "%s", c->hold_note);
      c->hold_ok = false;
      break;
    }
  if (!c->shared && c->ndev > 1)
    note(c, "some pairs have no peer access: their kernel copies and chases are left out");
  return 0;
}

/* Runs every job of the plan, with a progress line. */
static void measure_all(ctx *c) {
  opts *o = &c->o;
  const char *want = o->backend;
  printf("cubert bench peer: backend %s, %d device%s", want, c->ndev, c->ndev == 1 ? "" : "s");
  for (int d = 0; d < c->ndev; d++) printf("%s %d %s", d ? "," : ":", c->rt_index[d], c->info[d].name);
  printf("\nraw baseline: %s\n", c->raw ? cb_bench_raw_describe(c->raw) : c->raw_note);
  char mz[32];
  printf("%d warm-up + %d timed repetitions per cell, median [min max] and cv; matrix at %s; GB/s = 1e9 B/s\n",
         o->warmup, o->reps, cb_bench_size_name(o->matrix_size, mz, sizeof mz));
  if (c->ndev == 1) printf("one device: the matrix is 1x1 (device-to-device); peer pairs need two devices\n");

  plan p = {0};
  make_plan(c, &p);
  for (size_t i = 0; i < p.n; i++) {
    const job *j = &p.v[i];
    char sz[32];
    cb_bench_progress(o->quiet, (int)i + 1, (int)p.n, "%s %s %s %d->%d %s", j->section, j->test,
                      j->n == 2 ? "bidi" : "uni", j->s[0].a, j->s[0].b, cb_bench_size_name(j->s[0].size, sz, sizeof sz));
    measure(c, j);
  }
  if (o->do_latency && c->ndev > 0) {
    cb_bench_progress(o->quiet, (int)p.n, (int)p.n, "small: where the time of small host transfers goes");
    small_split(c);
    cb_bench_progress(o->quiet, (int)p.n, (int)p.n, "small: h2d 4 B, each call timed");
    small_each_call(c);
  }
  cb_bench_progress_done(o->quiet);
  free(p.v);
}

/* The hold kernel, as calibrated and as it held: a note (text and JSON). */
static void hold_report(ctx *c) {
  if (!c->o.hold || !c->hold_ok) return;
  for (int d = 0; d < c->ndev; d++)
    note(c, "hold kernel on device %d: %.4g ticks/us (%s); a hold of %.0f us measured %.1f us by timers", c->rt_index[d],
         c->ticks_per_us[d], c->hold_khz[d] ? "the platform's wall clock rate" : "calibrated: shortest of 3 timed holds",
         HOLD_CHECK_US, c->hold_check_us[d]);
  note(c, "timed repetitions behind a hold whose hold ended before their last transfer was enqueued (their time "
          "then includes some enqueue): cubert %u of %u, raw %u of %u",
       c->holds_short[0], c->holds[0], c->holds_short[1], c->holds[1]);
}

/* The topology classes, the matrices, the tables, the notes and the
 * validation line. True when every check passed. */
static bool print_report(ctx *c, json_t *target_list) {
  kernel_vs_engine(c);
  printf("\nTopology classes (%s)\n%-8s", c->topology_ok ? "cubert_topology" : "unknown", "");
  for (int b = 0; b < c->ndev; b++) printf(" %8d", c->rt_index[b]);
  printf("\n");
  for (int a = 0; a < c->ndev; a++) {
    printf("%-8d", c->rt_index[a]);
    for (int b = 0; b < c->ndev; b++) printf(" %8s", c->link[a][b]);
    printf("\n");
  }
  printf("\nMatrices: cubert median (ratio cubert/raw); '!' marks a failed check\n");
  print_matrix(c, "Copy engine, one direction, GB/s (peer-ce; diagonal d2d)", "peer-ce", "d2d", "uni", false);
  print_matrix(c, "Copy engine, both directions at once, sum GB/s (peer-ce bidi)", "peer-ce", NULL, "bidi", false);
  print_matrix(c, "Kernel copy, the destination reads the peer, GB/s (peer-read; diagonal d2d-kernel)", "peer-read",
               "d2d-kernel", "uni", false);
  print_matrix(c, "Kernel copy, the source writes the peer, GB/s (peer-write; diagonal d2d-kernel)", "peer-write",
               "d2d-kernel", "uni", false);
  print_matrix(c, "Peer access off: staged through the host, GB/s (staged)", "staged", NULL, "uni", false);
  print_matrix(c, "Pointer chase, ns per dependent load (row: executing device, column: memory)", "chase", "chase",
               "uni", true);
  print_matrix(c, "4-byte copy latency, us per copy (lat-copy; no ratio where raw is under 20 ns)", "lat-copy",
               "lat-copy", "uni", false);
  for (int pass = 0; pass < 3; pass++) {
    static const char *const sections[] = {"matrix", "sweep", "latency"};
    static const char *const titles[] = {"All matrix cells", "Size sweep", "Latency"};
    bool any = false;
    for (size_t i = 0; i < c->rows.n && !any; i++) any = strcmp(c->rows.v[i].section, sections[pass]) == 0;
    if (!any) continue;
    printf("\n%s\n", titles[pass]);
    print_table(c, sections[pass]);
  }
  print_small(c);
  print_steps(c);
  if (c->each_text) fputs(c->each_text, stdout);
  hold_report(c);
  targets(c, target_list);
  size_t nnotes = json_array_size(c->notes);
  if (nnotes) printf("\nNotes:\n");
  for (size_t i = 0; i < nnotes; i++) printf("  %s\n", json_string_value(json_array_get(c->notes, i)));
  bool passed = c->failed_checks == 0 && c->checks > 0;
  printf("\nvalidation: %s (%d checks, %d failed; %d measurement errors)\n", passed ? "passed" : "FAILED", c->checks,
         c->failed_checks, c->errors);
  return passed;
}

static int run(ctx *c) {
  int rc = open_devices(c);
  if (rc) return rc;
  label_pairs(c);
  choose_sizes(c);
  if ((rc = prepare(c))) return rc;
  measure_all(c);
  json_t *target_list = json_array();
  rc = print_report(c, target_list) && c->errors == 0 ? 0 : 1;
  opts *o = &c->o;
  json_t *doc = document(c, target_list);
  json_decref(target_list);
  if (o->json.file && !cb_bench_write_json(doc, o->json.file, "bench peer")) rc = 1;
  if (o->csv.file && !cb_bench_rows_csv(&c->rows, o->csv.file)) rc = 1;
  if (o->svg && !cb_bench_svg_write(doc, o->svg, stdout)) rc = 1;
  json_decref(doc);
  return rc;
}

int cb_bench_peer_main(int argc, char **argv) {
  ctx *c = calloc(1, sizeof *c);
  if (!c) return 1;
  int rc = parse_options(argc, argv, &c->o);
  if (rc != CB_CLI_PARSED) {
    free(c->o.sizes);
    free(c);
    return rc;
  }
  c->notes = json_array();
  rc = run(c);
  if (!cb_cli_output_close("bench peer", "json", &c->o.json)) rc = 1;
  if (!cb_cli_output_close("bench peer", "csv", &c->o.csv)) rc = 1;
  free_all(c);
  cubert_kernel *ks[] = {c->k_copy, c->k_read, c->k_write, c->k_checksum, c->k_hold, c->k_chase, c->k_chase_peer};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
    if (ks[i]) cubert_kernel_release(ks[i]);
  for (int d = 0; d < c->ndev; d++)
    if (c->client[d]) cubert_client_destroy(c->client[d]);
  if (c->raw) cb_bench_raw_close(c->raw);
  if (c->rt) cubert_runtime_destroy(c->rt);
  cb_bench_rows_free(&c->rows);
  json_decref(c->notes);
  free(c->o.sizes);
  free(c);
  return rc;
}
