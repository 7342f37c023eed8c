/* mpi/tool/bench.c: `cubert-mpi bench` (docs/cluster.md): for every pair of
 * ranks, bandwidth one way and both ways and latency through
 * cubert_mpi_isend/irecv/send/recv, beside the same transfers done raw in
 * the same run, as the OSU micro-benchmarks measure them:
 *
 *   one way    osu_bw: per iteration the sender posts a window of
 *              nonblocking sends, the receiver a window of nonblocking
 *              receives; both wait for all, then the receiver sends a
 *              short acknowledgement; GB/s = bytes of all windows / the
 *              sender's time;
 *   both ways  osu_bibw: both ranks post the window of receives and of
 *              sends and wait for all; GB/s = bytes both ways / time;
 *   latency    osu_latency: ping-pong of blocking send and receive at the
 *              smallest size; half the round trip.
 *
 * The raw transfers (plain MPI and the raw baselines of bench/, never
 * cubert's runtime):
 *   direct     MPI_Isend/Irecv straight on device buffers, when MPI says it
 *              is GPU-aware (cubert_mpi_gpu_aware());
 *   staged     what a user writes without cubert when it is not: a copy of
 *              each transfer from the device buffer into pinned host memory
 *              (hipMemcpy; memcpy on the host backend, whose "device" memory
 *              is host memory), MPI on that, and a copy to the receiver's
 *              device buffer as each receive completes;
 *   host       MPI on host buffers: what MPI itself moves (the ceiling).
 * The ratio is cubert's against `direct` where it ran, else `staged`.
 *
 * Validation: every transfer's status (cubert's call returned CUBERT_OK; a
 * raw receive got exactly its bytes), and after each sample the bytes of
 * the receiver's whole last window, each slot its own buffer, compared with
 * what the sender wrote (the slots are overwritten with other bytes before
 * each cell, so a transfer that did not arrive cannot pass).
 *
 * Table on stdout, CSV, JSON and SVG (bench/: cubert_bench_common) on
 * request, written by rank 0. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "cubert/mpi.h"
#include "mpi/tool/tool.h"

/* Bytes in flight per window at most: the window shrinks for big
 * transfers (at least one transfer), so that its buffers stay small. */
#define WINDOW_BYTES (UINT64_C(64) << 20)
#define TAG_DATA 11
#define TAG_ACK 12
#define TAG_SYNC 13
#define TAG_SAMPLES 14

enum impl { I_CUBERT, I_DIRECT, I_STAGED, I_HOST, I_COUNT };
static const char *const impl_name[I_COUNT] = {"cubert", "MPI on device buffers", "staged by hand",
                                                "MPI on host buffers"};
enum mode { ONE_WAY, BOTH_WAYS, LATENCY, M_COUNT };

typedef struct bench {
  uint64_t iters, reps, window;
  uint64_t *sizes;
  size_t nsizes;
  uint64_t slots_bytes; /* the largest window * size */
  cubert_client *client;
  cubert_handle *out, *in; /* out: the pattern (largest size); in: the window's slots */
  unsigned char *hout, *hin, *check, *junk;
  cb_bench_raw *raw;       /* NULL: no device baseline */
  int dev;                 /* the raw baseline's device (backend index) */
  uint64_t dout, din;      /* raw device buffers */
  unsigned char *pout, *pin; /* pinned staging slots */
  bool run[I_COUNT];
  char why[I_COUNT][160];  /* why a raw baseline did not run */
  uint64_t checked, wrong; /* this rank's validations */
} bench;

static uint64_t window_of(const bench *x, uint64_t size) {
  uint64_t w = WINDOW_BYTES / size;
  if (w > x->window) w = x->window;
  return w ? w : 1;
}

static unsigned char pattern(int rank, uint64_t i) { return (unsigned char)(i * 131 + (uint64_t)rank * 7 + 1); }

static bool mpi_ok(int rc, MPI_Status *st, uint64_t size) {
  int n = -1;
  if (rc != MPI_SUCCESS) return false;
  if (st && MPI_Get_count(st, MPI_BYTE, &n) == MPI_SUCCESS) return (uint64_t)n == size;
  return true;
}

/* ------------------------------------------------------------ one window */

/* The state of one rank's part of a measured cell. */
typedef struct cell {
  bench *x;
  enum impl impl;
  enum mode mode;
  int peer;
  bool sends, receives; /* this rank's part */
  uint64_t size, w;
  cubert_handle *src, **dst; /* cubert: the sent view and w receive slots */
  bool ok;                   /* every transfer so far had its status */
} cell;

static void cubert_failed(cell *c, const char *what, cubert_status st) {
  if (c->ok)
    fprintf(stderr, "cubert-mpi bench: rank %d: %s to/from rank %d: %s: %s\n", cbt_rank, what, c->peer,
            cubert_status_name(st), cubert_last_error_message());
  c->ok = false;
}

static void raw_failed(cell *c, const char *what) {
  if (c->ok) fprintf(stderr, "cubert-mpi bench: rank %d: %s with rank %d failed\n", cbt_rank, what, c->peer);
  c->ok = false;
}

/* The window of receives and of sends of this rank, as osu_bw/osu_bibw
 * post them, finished. */
static void window_cubert(cell *c) {
  cubert_mpi_request *rq[2 * 64];
  uint64_t nr = 0, ns = 0;
  cubert_mpi_request **rr = rq, **sr = rq + c->w;
  for (uint64_t k = 0; c->receives && k < c->w; k++) {
    cubert_status st = cubert_mpi_irecv(c->x->client, c->dst[k], c->peer, TAG_DATA, MPI_COMM_WORLD, &rr[nr]);
    if (st) cubert_failed(c, "cubert_mpi_irecv", st);
    else nr++;
  }
  for (uint64_t k = 0; c->sends && k < c->w; k++) {
    cubert_status st = cubert_mpi_isend(c->x->client, c->src, c->peer, TAG_DATA, MPI_COMM_WORLD, &sr[ns]);
    if (st) cubert_failed(c, "cubert_mpi_isend", st);
    else ns++;
  }
  for (uint64_t k = 0; k < ns; k++) {
    cubert_status st = cubert_mpi_wait(sr[k], NULL);
    if (st) cubert_failed(c, "cubert_mpi_wait (send)", st);
  }
  for (uint64_t k = 0; k < nr; k++) {
    cubert_status st = cubert_mpi_wait(rr[k], NULL);
    if (st) cubert_failed(c, "cubert_mpi_wait (receive)", st);
  }
}

static void window_raw(cell *c) {
  bench *x = c->x;
  MPI_Request rq[2 * 64];
  MPI_Status sts[2 * 64];
  MPI_Request *rr = rq, *sr = rq + c->w;
  uint64_t sz = c->size;
  for (uint64_t k = 0; c->receives && k < c->w; k++) {
    void *buf = c->impl == I_HOST     ? (void *)(x->hin + k * sz)
                : c->impl == I_STAGED ? (void *)(x->pin + k * sz)
                                      : (void *)(uintptr_t)(x->din + k * sz);
    MPI_Irecv(buf, (int)sz, MPI_BYTE, c->peer, TAG_DATA, MPI_COMM_WORLD, &rr[k]);
  }
  for (uint64_t k = 0; c->sends && k < c->w; k++) {
    void *buf = c->impl == I_HOST ? (void *)x->hout : (void *)(uintptr_t)x->dout;
    if (c->impl == I_STAGED) { /* each transfer copied out of the device, as a user would */
      if (cb_bench_raw_download(x->raw, x->dev, x->pout + k * sz, x->dout, sz) != CUBERT_OK)
        raw_failed(c, cb_bench_raw_error(x->raw));
      buf = x->pout + k * sz;
    }
    MPI_Isend(buf, (int)sz, MPI_BYTE, c->peer, TAG_DATA, MPI_COMM_WORLD, &sr[k]);
  }
  if (c->receives) {
    for (uint64_t done = 0; done < c->w; done++) {
      int k = 0;
      MPI_Status st;
      int mrc = MPI_Waitany((int)c->w, rr, &k, &st);
      if (k == MPI_UNDEFINED) break;
      if (!mpi_ok(mrc, &st, sz)) raw_failed(c, "MPI receive");
      if (c->impl == I_STAGED && /* into the device as each one arrives */
          cb_bench_raw_upload(x->raw, x->dev, x->din + (uint64_t)k * sz, x->pin + (uint64_t)k * sz, sz) != CUBERT_OK)
        raw_failed(c, cb_bench_raw_error(x->raw));
    }
  }
  if (c->sends && MPI_Waitall((int)c->w, sr, sts) != MPI_SUCCESS) raw_failed(c, "MPI send");
}

/* One ping-pong round trip of osu_latency (blocking calls). */
static void round_trip(cell *c, bool first) {
  bench *x = c->x;
  uint64_t sz = c->size;
  for (int leg = 0; leg < 2; leg++) {
    bool send = (leg == 0) == first;
    if (c->impl == I_CUBERT) {
      cubert_status st = send ? cubert_mpi_send(x->client, c->src, c->peer, TAG_DATA, MPI_COMM_WORLD, NULL)
                              : cubert_mpi_recv(x->client, c->dst[0], c->peer, TAG_DATA, MPI_COMM_WORLD, NULL);
      if (st) cubert_failed(c, send ? "cubert_mpi_send" : "cubert_mpi_recv", st);
      continue;
    }
    void *sbuf = c->impl == I_HOST ? (void *)x->hout : c->impl == I_STAGED ? (void *)x->pout : (void *)(uintptr_t)x->dout;
    void *rbuf = c->impl == I_HOST ? (void *)x->hin : c->impl == I_STAGED ? (void *)x->pin : (void *)(uintptr_t)x->din;
    if (send) {
      if (c->impl == I_STAGED && cb_bench_raw_download(x->raw, x->dev, x->pout, x->dout, sz) != CUBERT_OK)
        raw_failed(c, cb_bench_raw_error(x->raw));
      if (MPI_Send(sbuf, (int)sz, MPI_BYTE, c->peer, TAG_DATA, MPI_COMM_WORLD) != MPI_SUCCESS) raw_failed(c, "MPI_Send");
    } else {
      MPI_Status st;
      if (!mpi_ok(MPI_Recv(rbuf, (int)sz, MPI_BYTE, c->peer, TAG_DATA, MPI_COMM_WORLD, &st), &st, sz))
        raw_failed(c, "MPI_Recv");
      if (c->impl == I_STAGED && cb_bench_raw_upload(x->raw, x->dev, x->din, x->pin, sz) != CUBERT_OK)
        raw_failed(c, cb_bench_raw_error(x->raw));
    }
  }
}

/* ------------------------------------------------------------ a cell */

/* The receive slots overwritten with bytes no sender sends. */
static bool spoil(cell *c) {
  bench *x = c->x;
  uint64_t n = c->w * c->size;
  switch (c->impl) {
  case I_CUBERT:
    for (uint64_t k = 0; k < c->w; k++)
      if (cubert_handle_write(x->client, c->dst[k], x->junk, c->size) != CUBERT_OK) return false;
    return true;
  case I_HOST: memset(x->hin, 0xA5, n); return true;
  default: return cb_bench_raw_upload(x->raw, x->dev, x->din, x->junk, n) == CUBERT_OK;
  }
}

/* Whether every slot of the last window holds the peer's bytes. */
static bool received_good(cell *c) {
  bench *x = c->x;
  uint64_t n = c->mode == LATENCY ? c->size : c->w * c->size;
  const unsigned char *got = x->check;
  if (c->impl == I_CUBERT) {
    for (uint64_t k = 0; k * c->size < n; k++)
      if (cubert_handle_read(x->client, c->dst[k], x->check + k * c->size, c->size) != CUBERT_OK) return false;
  } else if (c->impl == I_HOST) {
    got = x->hin;
  } else if (cb_bench_raw_download(x->raw, x->dev, x->check, x->din, n) != CUBERT_OK) {
    return false;
  }
  for (uint64_t i = 0; i < n; i++)
    if (got[i] != pattern(c->peer, i % c->size)) return false;
  return true;
}

/* Measures one implementation on pair (a, b): reps samples (after one
 * warm-up) of seconds per transfer (one way, both ways: per window of w;
 * latency: half a round trip), into samples[reps] on rank 0; returns
 * whether every transfer of the pair was valid (on every rank). */
static bool measure(bench *x, int a, int b, enum impl impl, enum mode m, uint64_t size, double *samples,
                    uint64_t *count) {
  bool in_pair = cbt_rank == a || cbt_rank == b, first = cbt_rank == a;
  cell c = {.x = x, .impl = impl, .mode = m, .peer = first ? b : a, .size = size, .ok = true};
  c.w = m == LATENCY ? 1 : window_of(x, size);
  c.sends = in_pair && (m != ONE_WAY || first);
  c.receives = in_pair && (m != ONE_WAY || !first);
  uint64_t per_sample = m == LATENCY ? x->iters * x->window : x->iters;
  *count = m == LATENCY ? per_sample : per_sample * c.w;
  cubert_handle *slots[64] = {0};
  if (in_pair && impl == I_CUBERT) {
    uint64_t full = cubert_handle_size_in_use(x->in), fo = cubert_handle_size_in_use(x->out);
    c.dst = slots;
    bool made = cubert_handle_slice(x->out, 0, fo - size, &c.src) == CUBERT_OK;
    for (uint64_t k = 0; made && k < c.w; k++)
      made = cubert_handle_slice(x->in, k * size, full - (k + 1) * size, &slots[k]) == CUBERT_OK;
    if (!made) cubert_failed(&c, "cubert_handle_slice", cubert_error_status(cubert_last_error()));
  }
  if (c.receives && c.ok && !spoil(&c)) raw_failed(&c, "overwriting the receive buffers");
  /* every rank waits here (so one pair measures at a time), and the pair
   * goes on only when both are ready: a rank that left the exchange would
   * leave its peer waiting */
  int ready = c.ok, both = 0;
  MPI_Allreduce(&ready, &both, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  bool skip = !both;
  if (skip && in_pair) raw_failed(&c, "setting up the cell (the other rank could not)");
  for (uint64_t r = 0; r <= x->reps; r++) { /* sample 0 warms up */
    if (in_pair && !skip) /* the two start together */
      MPI_Sendrecv(NULL, 0, MPI_BYTE, c.peer, TAG_SYNC, NULL, 0, MPI_BYTE, c.peer, TAG_SYNC, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    double t0 = MPI_Wtime();
    /* a transfer that fails still completes on both sides (cubert's
     * promise; MPI's errors abort the job): the loop goes on */
    for (uint64_t i = 0; in_pair && !skip && i < per_sample; i++) {
      if (m == LATENCY) {
        round_trip(&c, first);
        continue;
      }
      if (impl == I_CUBERT) window_cubert(&c);
      else window_raw(&c);
      if (m == ONE_WAY) { /* osu_bw: the receiver acknowledges each window */
        char ack = 0;
        if (first) MPI_Recv(&ack, 1, MPI_CHAR, c.peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else MPI_Send(&ack, 1, MPI_CHAR, c.peer, TAG_ACK, MPI_COMM_WORLD);
      }
    }
    double t = MPI_Wtime() - t0;
    if (r > 0) samples[r - 1] = m == LATENCY ? t / (2.0 * (double)per_sample) : t / (double)per_sample;
    if (c.receives && !skip) { /* between samples, untimed */
      bool good = received_good(&c);
      x->checked++;
      if (!good && c.ok) {
        x->wrong++;
        fprintf(stderr, "cubert-mpi bench: rank %d: %s, %" PRIu64 " B from rank %d: wrong bytes arrived\n", cbt_rank,
                impl_name[impl], size, c.peer);
        c.ok = false;
      }
      if (r < x->reps && !spoil(&c)) raw_failed(&c, "overwriting the receive buffers");
    }
  }
  if (c.receives && !c.ok) x->wrong++;
  for (uint64_t k = 0; k < 64; k++) cubert_handle_release(slots[k]);
  cubert_handle_release(c.src);
  if (first && a != 0) /* rank a's clock; rank 0 writes the results */
    MPI_Send(samples, (int)x->reps, MPI_DOUBLE, 0, TAG_SAMPLES, MPI_COMM_WORLD);
  else if (cbt_rank == 0 && a != 0)
    MPI_Recv(samples, (int)x->reps, MPI_DOUBLE, a, TAG_SAMPLES, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  int mine = !in_pair || c.ok, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all != 0;
}

/* ------------------------------------------------------------ rows */

/* Figures of one side of a row from seconds per transfer (or window). */
static double *figures(const double *secs, uint64_t reps, enum mode m, uint64_t bytes) {
  double *v = malloc(reps * sizeof *v);
  for (uint64_t i = 0; v && i < reps; i++)
    v[i] = m == LATENCY ? secs[i] * 1e6 : (double)bytes / secs[i] / 1e9;
  return v;
}

static void side(cb_bench_row *r, bool cubert_side, const double *secs, uint64_t reps, enum mode m, uint64_t bytes) {
  double *v = figures(secs, reps, m, bytes);
  if (!v) return;
  double *sorted = malloc(reps * sizeof *sorted);
  if (!sorted) {
    free(v);
    return;
  }
  memcpy(sorted, v, reps * sizeof *v);
  cb_bench_stats s = cb_bench_stats_of(sorted, (int)reps);
  free(sorted);
  if (cubert_side) r->cubert = s, r->cubert_samples = v, r->have_cubert = true;
  else r->raw = s, r->raw_samples = v, r->have_raw = true;
}

/* ------------------------------------------------------------ setup */

static void bench_usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -n N cubert-mpi bench [--quick] [--sizes LIST] [--iters N] [--window W]\n"
          "                                 [--reps N] [--csv FILE] [--json FILE] [--svg PREFIX]\n"
          "\n"
          "For every pair of ranks: bandwidth one way (osu_bw) and both ways (osu_bibw) at each\n"
          "size, and latency (osu_latency, half a round trip) at the smallest, through cubert's\n"
          "send/receive between device buffers, beside the same transfers done raw in the same\n"
          "run: MPI on device buffers where MPI is GPU-aware, else staged by hand through pinned\n"
          "host memory; and MPI on host buffers. Every transfer validated (docs/cluster.md).\n"
          "\n"
          "  --sizes LIST   bytes per transfer: 8,64K,1M or 1K..1M (default 8,4K,64K,1M,16M)\n"
          "  --iters N      windows per sample (default 10; 1 with --quick)\n"
          "  --window W     transfers in flight per window, 1 to 64 (osu_bw's 64; 4 with\n"
          "                 --quick); fewer where W transfers would pass 64 MiB\n"
          "  --reps N       samples per figure, after one warm-up (default 5; 3 with --quick)\n"
          "  --quick        sizes 8,64K,1M and the --quick counts above (CI)\n"
          "  --csv FILE     the figures as CSV (- for stdout)\n"
          "  --json FILE    the figures as JSON (- for stdout)\n"
          "  --svg PREFIX   PREFIX-matrix.svg (rank pairs) and PREFIX-sweep.svg (GB/s against\n"
          "                 size, ranks 0 and 1), cubert beside raw (needs cairo)\n");
}

/* Buffers, the device baselines and what did not run, agreed by all ranks.
 * False after a message: the run cannot go on. */
static bool setup(bench *x, cubert_runtime *rt, cubert_device_info *di) {
  uint64_t max = x->sizes[x->nsizes - 1];
  for (size_t i = 0; i < x->nsizes; i++) {
    uint64_t b = window_of(x, x->sizes[i]) * x->sizes[i];
    if (b > x->slots_bytes) x->slots_bytes = b;
  }
  int ndev = cubert_runtime_device_count(rt);
  cubert_status st = ndev > 0 ? cubert_client_create(rt, cbt_rank % ndev, &x->client) : CUBERT_ERR_NO_DEVICE;
  if (!st) st = cubert_runtime_device_info(rt, cubert_client_device(x->client), di);
  x->hout = malloc(max);
  x->hin = malloc(x->slots_bytes);
  x->check = malloc(x->slots_bytes);
  x->junk = malloc(x->slots_bytes);
  bool ok = !st && x->hout && x->hin && x->check && x->junk;
  if (ok) {
    for (uint64_t i = 0; i < max; i++) x->hout[i] = pattern(cbt_rank, i);
    memset(x->junk, 0x5A, x->slots_bytes);
    ok = cubert_handle_create(x->client, x->hout, max, &x->out) == CUBERT_OK &&
         cubert_handle_empty(x->client, x->slots_bytes, &x->in) == CUBERT_OK;
  }
  if (!ok) fprintf(stderr, "cubert-mpi bench: rank %d: no device or memory: %s\n", cbt_rank, cubert_last_error_message());
  int mine = ok, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) return false;

  /* the raw device buffers, on the same device as cubert's */
  char why[160] = "";
  x->dev = di->backend_index;
  if (cb_bench_raw_open(di->backend, &x->raw) != CUBERT_OK) {
    snprintf(why, sizeof why, "the raw %s calls are not available on rank %d", di->backend, cbt_rank);
    x->raw = NULL;
  } else if (cb_bench_raw_alloc(x->raw, x->dev, max, &x->dout) != CUBERT_OK ||
             cb_bench_raw_alloc(x->raw, x->dev, x->slots_bytes, &x->din) != CUBERT_OK ||
             cb_bench_raw_host_alloc(x->raw, x->slots_bytes, (void **)&x->pout) != CUBERT_OK ||
             cb_bench_raw_host_alloc(x->raw, x->slots_bytes, (void **)&x->pin) != CUBERT_OK ||
             cb_bench_raw_upload(x->raw, x->dev, x->dout, x->hout, max) != CUBERT_OK) {
    snprintf(why, sizeof why, "rank %d: %s", cbt_rank, cb_bench_raw_error(x->raw));
  }
  mine = why[0] == '\0';
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  int gpu_aware = cubert_mpi_gpu_aware(), all_aware = 0;
  MPI_Allreduce(&gpu_aware, &all_aware, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  x->run[I_CUBERT] = x->run[I_HOST] = true;
  x->run[I_STAGED] = all != 0;
  x->run[I_DIRECT] = all != 0 && all_aware != 0;
  if (!all) { /* say on rank 0 why, whichever rank could not */
    int from = mine ? cbt_nranks : cbt_rank, first = 0;
    MPI_Allreduce(&from, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Bcast(why, sizeof why, MPI_CHAR, first, MPI_COMM_WORLD);
    snprintf(x->why[I_STAGED], sizeof x->why[I_STAGED], "%s", why);
    snprintf(x->why[I_DIRECT], sizeof x->why[I_DIRECT], "%s", why);
  } else if (!all_aware) {
    snprintf(x->why[I_DIRECT], sizeof x->why[I_DIRECT], "MPI is not GPU-aware%s",
             gpu_aware ? " on every rank" : " (MPIX_Query_cuda_support/rocm_support say no, or are absent)");
  }
  return true;
}

static void teardown(bench *x) {
  if (x->raw) {
    if (x->dout) cb_bench_raw_free(x->raw, x->dev, x->dout);
    if (x->din) cb_bench_raw_free(x->raw, x->dev, x->din);
    if (x->pout) cb_bench_raw_host_free(x->raw, x->pout);
    if (x->pin) cb_bench_raw_host_free(x->raw, x->pin);
    cb_bench_raw_close(x->raw);
  }
  cubert_handle_release(x->out);
  cubert_handle_release(x->in);
  cubert_client_destroy(x->client);
  free(x->hout);
  free(x->hin);
  free(x->check);
  free(x->junk);
}

/* The floor under cubert's latency that is not MPI's: one cubert_handle_read
 * and one cubert_handle_write of `size` bytes on this rank's device
 * (median of reps samples of iters each), in microseconds. A transfer does
 * one of each (the sender reads, the receiver writes). */
static void core_floor(bench *x, uint64_t size, double *rd, double *wr) {
  cubert_handle *out = NULL, *in = NULL;
  cubert_handle_slice(x->out, 0, cubert_handle_size_in_use(x->out) - size, &out);
  cubert_handle_slice(x->in, 0, cubert_handle_size_in_use(x->in) - size, &in);
  uint64_t n = x->iters * x->window;
  double *r = calloc(x->reps, sizeof *r), *w = calloc(x->reps, sizeof *w);
  for (uint64_t k = 0; r && w && k <= x->reps; k++) { /* sample 0 warms up */
    double t0 = MPI_Wtime();
    for (uint64_t i = 0; i < n; i++) cubert_handle_read(x->client, out, x->check, size);
    double t1 = MPI_Wtime();
    for (uint64_t i = 0; i < n; i++) cubert_handle_write(x->client, in, x->check, size);
    if (k) r[k - 1] = (t1 - t0) / (double)n * 1e6, w[k - 1] = (MPI_Wtime() - t1) / (double)n * 1e6;
  }
  *rd = r && w ? cb_bench_stats_of(r, (int)x->reps).median : 0;
  *wr = r && w ? cb_bench_stats_of(w, (int)x->reps).median : 0;
  free(r);
  free(w);
  cubert_handle_release(out);
  cubert_handle_release(in);
}

/* ------------------------------------------------------------ the run */

/* What the raw device baselines do, in a line. */
static const char *raw_text(const bench *x) {
  if (!x->raw) return "no raw device calls (MPI on host buffers only)";
  if (cb_bench_raw_is_host(x->raw))
    return "the host backend's device memory is host memory: staged = memcpy to and from a page-aligned "
           "buffer around MPI";
  return "staged = hipMemcpyAsync + hipStreamSynchronize between hipMalloc'd device buffers and hipHostMalloc'd "
         "pinned memory around MPI; direct = MPI on the hipMalloc'd buffers";
}

static const char *const mode_dir[M_COUNT] = {"uni", "bidi", "uni"};

/* One figure of the table: "12.345" or "-" (not run). */
static const char *fig(char *buf, size_t n, const cb_bench_row *r, bool cubert_side) {
  bool have = r && (cubert_side ? r->have_cubert : r->have_raw);
  if (!have) snprintf(buf, n, "-");
  else snprintf(buf, n, "%.3f", cubert_side ? r->cubert.median : r->raw.median);
  return buf;
}

/* What a run found, for rank 0's table and files. */
typedef struct results {
  cb_bench_rows rows;
  enum impl primary;                     /* the ratio's baseline */
  cubert_device_info di;                 /* this rank's device */
  char (*hosts)[MPI_MAX_PROCESSOR_NAME]; /* each rank's */
  double floor_rd, floor_wr;             /* core_floor, rank 0 */
} results;

/* Rank 0: what runs, and the table's head. */
static void print_intro(const bench *x, const results *res) {
  printf("cubert-mpi bench: %d ranks; rank 0 on %s, %s (%s); window %" PRIu64 ", %" PRIu64
         " windows per sample, median of %" PRIu64 " samples after a warm-up\n",
         cbt_nranks, res->hosts[0], res->di.name, res->di.backend, x->window, x->iters, x->reps);
  printf("cubert: device buffers through cubert_mpi_isend/irecv (osu_bw, osu_bibw) and send/recv\n"
         "(osu_latency), staged through host memory in chunks (CUBERT_MPI_CHUNK)\n");
  printf("raw baselines (plain MPI; %s):\n", raw_text(x));
  for (int i = I_DIRECT; i < I_COUNT; i++)
    printf("  %-22s %s%s%s\n", impl_name[i], x->run[i] ? "ran" : "not run: ", x->run[i] ? "" : x->why[i],
           x->run[i] && i == (int)res->primary ? " (the ratio's baseline)" : "");
  printf("\n%-6s %9s  %-31s  %-31s\n", "", "", "one way, GB/s", "both ways, GB/s (sum)");
  printf("%-6s %9s  %7s %7s %6s %8s  %7s %7s %6s %8s\n", "pair", "size", "cubert", res->primary == I_DIRECT ? "direct" : "staged",
         "ratio", "host MPI", "cubert", res->primary == I_DIRECT ? "direct" : "staged", "ratio", "host MPI");
}

/* Rank 0: the rows of one measured cell (pair a-b, mode m, size): cubert
 * beside the ratio's baseline, the other raw ones alone. */
static void add_rows(const bench *x, results *res, int a, int b, enum mode m, uint64_t size, uint64_t count,
                     double *const secs[I_COUNT], const bool valid[I_COUNT]) {
  const char *link = strcmp(res->hosts[a], res->hosts[b]) == 0 ? "same-host" : "network";
  uint64_t bytes = m == LATENCY ? size : (m == BOTH_WAYS ? 2 : 1) * window_of(x, size) * size;
  /* cubert beside the res->primary baseline; the other raw ones alone */
  cb_bench_row *row[I_COUNT] = {0};
  for (int i = I_CUBERT; i < I_COUNT; i++) {
    if (!x->run[i] || i == (int)res->primary) continue;
    cb_bench_row *r = row[i] = cb_bench_rows_add(&res->rows);
    if (!r) continue;
    snprintf(r->section, sizeof r->section, "%s", m == LATENCY ? "latency" : "matrix");
    snprintf(r->test, sizeof r->test, "%s",
             i == I_CUBERT ? "send-recv" : i == I_HOST ? "raw-host-buffers" : i == I_STAGED ? "raw-staged" : "raw-direct");
    snprintf(r->dir, sizeof r->dir, "%s", mode_dir[m]);
    snprintf(r->link, sizeof r->link, "%s", link);
    snprintf(r->unit, sizeof r->unit, "%s", m == LATENCY ? "us" : "GB/s");
    r->src = a, r->dst = b, r->size = size, r->count = (uint32_t)count, r->higher_better = m != LATENCY;
    side(r, i == I_CUBERT, secs[i], x->reps, (enum mode)m, bytes);
    if (i == I_CUBERT && x->run[res->primary]) {
      side(r, false, secs[res->primary], x->reps, (enum mode)m, bytes);
      snprintf(r->baseline, sizeof r->baseline, "%s", impl_name[res->primary]);
    }
    r->validated = valid[i] && (i != I_CUBERT || valid[res->primary]);
    if (m != ONE_WAY) r->cubert_fwd = r->cubert_rev = r->raw_fwd = r->raw_rev = NAN;
  }
}

/* Rank 0: the table's lines of pair a-b, one per size, then its latency. */
static void print_pair(const bench *x, const results *res, int a, int b) {
  for (size_t s = 0; s < x->nsizes; s++) {
    const cb_bench_row *one[2] = {0}, *hostr[2] = {0};
    for (size_t k = 0; k < res->rows.n; k++) {
      const cb_bench_row *r = &res->rows.v[k];
      if (r->src != a || r->dst != b || r->size != x->sizes[s] || strcmp(r->section, "matrix")) continue;
      int d = strcmp(r->dir, "bidi") == 0;
      if (!strcmp(r->test, "send-recv")) one[d] = r;
      if (!strcmp(r->test, "raw-host-buffers")) hostr[d] = r;
    }
    char pair[32], f[6][24];
    snprintf(pair, sizeof pair, "%d-%d", a, b);
    bool bad = false;
    for (int d = 0; d < 2; d++) bad = bad || (one[d] && one[d]->validated != 1) || (hostr[d] && hostr[d]->validated != 1);
    printf("%-6s %9" PRIu64 "  %7s %7s %6.2f %8s  %7s %7s %6.2f %8s%s\n", pair, x->sizes[s],
           fig(f[0], 24, one[0], true), fig(f[1], 24, one[0], false), one[0] ? cb_bench_ratio(one[0]) : 0,
           fig(f[2], 24, hostr[0], false), fig(f[3], 24, one[1], true), fig(f[4], 24, one[1], false),
           one[1] ? cb_bench_ratio(one[1]) : 0, fig(f[5], 24, hostr[1], false), bad ? "  NOT VALID" : "");
  }
  const cb_bench_row *lat[I_COUNT] = {0};
  for (size_t k = 0; k < res->rows.n; k++) {
    const cb_bench_row *r = &res->rows.v[k];
    if (r->src != a || r->dst != b || strcmp(r->section, "latency")) continue;
    lat[!strcmp(r->test, "send-recv") ? I_CUBERT : !strcmp(r->test, "raw-host-buffers") ? I_HOST
        : !strcmp(r->test, "raw-staged") ? I_STAGED : I_DIRECT] = r;
  }
  char f[4][24];
  printf("%-6s latency (%" PRIu64 " B, half a round trip): cubert %s us, %s %s us (ratio %.2f), host MPI %s us",
         "", x->sizes[0], fig(f[0], 24, lat[I_CUBERT], true), res->primary == I_DIRECT ? "direct" : "staged",
         fig(f[1], 24, lat[I_CUBERT], false), lat[I_CUBERT] ? cb_bench_ratio(lat[I_CUBERT]) : 0,
         fig(f[2], 24, lat[I_HOST], false));
  if (lat[I_STAGED]) printf(", staged %s us", fig(f[3], 24, lat[I_STAGED], false));
  bool bad = false;
  for (int i = 0; i < I_COUNT; i++) bad = bad || (lat[i] && lat[i]->validated != 1);
  printf("%s\n", bad ? "  NOT VALID" : "");
}

/* Every pair, mode and size measured; rank 0 prints each pair's lines. */
static void measure_all(bench *x, results *res) {
  double *secs[I_COUNT];
  for (int i = 0; i < I_COUNT; i++) secs[i] = calloc(x->reps, sizeof(double));
  uint64_t npairs = (uint64_t)cbt_nranks * (uint64_t)(cbt_nranks - 1) / 2, step = 0;
  uint64_t nsteps = npairs * (x->nsizes * 2 + 1);
  for (int a = 0; a < cbt_nranks; a++)
    for (int b = a + 1; b < cbt_nranks; b++) {
      for (int m = 0; m < M_COUNT; m++)
        for (size_t s = 0; s < (m == LATENCY ? 1 : x->nsizes); s++) {
          uint64_t size = x->sizes[s], count = 0;
          cb_bench_progress(cbt_rank != 0, (int)++step, (int)nsteps, "ranks %d-%d %s %" PRIu64 " B", a, b,
                            m == LATENCY ? "latency" : mode_dir[m], size);
          bool valid[I_COUNT];
          for (int i = 0; i < I_COUNT; i++)
            valid[i] = x->run[i] ? measure(x, a, b, (enum impl)i, (enum mode)m, size, secs[i], &count) : true;
          if (cbt_rank == 0) add_rows(x, res, a, b, (enum mode)m, size, count, secs, valid);
        }
      if (cbt_rank == 0) print_pair(x, res, a, b);
    }
  cb_bench_progress_done(cbt_rank != 0);
  for (int i = 0; i < I_COUNT; i++) free(secs[i]);
}

/* Rank 0: the verdict of validation, the JSON, CSV and pictures asked
 * for; returns the exit status. `all`: windows checked, wrong, transfers
 * through shared memory (every rank's). */
static int write_results(const bench *x, results *res, const uint64_t all[3], const char *svg,
                         const cb_cli_spec *spec, const cb_cli_output *csvo, const cb_cli_output *jsono) {
  bool passed = all[1] == 0 && all[0] > 0;
  for (size_t k = 0; k < res->rows.n; k++) passed = passed && res->rows.v[k].validated == 1;
  int rc = passed ? CB_CLI_OK : CB_CLI_FAILED;
  printf("\nvalidation: %s (%" PRIu64 " windows checked byte for byte, %" PRIu64 " wrong; every transfer's status)\n",
         passed ? "passed" : "FAILED", all[0], all[1]);
  printf("through shared memory (CUBERT_MPI_IPC, ranks of one node): %" PRIu64 " sends and receives\n", all[2]);
  json_t *doc = cb_bench_json_head("cubert-mpi bench", res->di.backend);
  json_t *devs = json_array(), *base = json_object(), *notes = json_array(), *targets = json_array();
  for (int r = 0; r < cbt_nranks; r++)
    json_array_append_new(devs, json_pack("{s:i, s:i, s:s}", "index", r, "rank", r, "host", res->hosts[r]));
  for (int i = I_DIRECT; i < I_COUNT; i++)
    json_object_set_new(base, impl_name[i],
                        x->run[i] ? json_pack("{s:b, s:b}", "ran", 1, "ratio_baseline", i == (int)res->primary)
                                 : json_pack("{s:b, s:s}", "ran", 0, "why", x->why[i]));
  json_object_set_new(doc, "ranks", json_integer(cbt_nranks));
  json_object_set_new(doc, "devices", devs);
  json_object_set_new(doc, "device", json_string(res->di.name));
  json_object_set_new(doc, "gpu_aware_mpi", json_boolean(cubert_mpi_gpu_aware()));
  json_object_set_new(doc, "raw_baselines", base);
  json_object_set_new(doc, "raw_baseline", json_string(raw_text(x)));
  json_object_set_new(doc, "window", json_integer((json_int_t)x->window));
  json_object_set_new(doc, "iterations", json_integer((json_int_t)x->iters));
  json_object_set_new(doc, "samples", json_integer((json_int_t)x->reps));
  json_object_set_new(doc, "core_floor_us", json_pack("{s:f, s:f}", "read", res->floor_rd, "write", res->floor_wr));
  cb_bench_note(notes, "ratio: cubert / %s (GB/s: higher is better for cubert; us: lower)", impl_name[res->primary]);
  for (int i = I_DIRECT; i < I_COUNT; i++)
    if (!x->run[i]) cb_bench_note(notes, "%s not run: %s", impl_name[i], x->why[i]);
  cb_bench_json_tail(doc, &res->rows, targets, (long)all[0], (long)all[1], 0, notes);
  if (jsono->file && !cb_bench_write_json(doc, jsono->file, "bench")) rc = CB_CLI_FAILED;
  if (csvo->file && !cb_bench_rows_csv(&res->rows, csvo->file)) rc = CB_CLI_FAILED;
  if (!cb_cli_close_outputs(spec)) rc = CB_CLI_FAILED;
  if (svg && !cb_bench_svg_write(doc, svg, stdout)) rc = CB_CLI_FAILED;
  json_decref(doc);
  json_decref(notes);
  json_decref(targets);
  return rc;
}

int cbt_bench(int argc, char **argv) {
  bench x = {.reps = 0};
  const char *size_text = NULL, *svg = NULL;
  bool quick = false;
  cb_cli_output csvo = {0}, jsono = {0};
  const cb_cli_opt opts[] = {CB_TEXT("sizes", 0, &size_text), CB_UINT("iters", &x.iters, 1, 1000000),
                             CB_UINT("window", &x.window, 1, 64), CB_UINT("reps", &x.reps, 1, 1000),
                             CB_FLAG("quick", 0, &quick),       CB_OUTPUT("csv", &csvo),
                             CB_OUTPUT("json", &jsono),         CB_TEXT("svg", 0, &svg),
                             CB_END};
  const cb_cli_spec spec = {"bench", bench_usage, opts, 0, 0, NULL};
  int first, prc = cbt_parse(&spec, argc, argv, &first);
  if (prc != CB_CLI_PARSED) return prc;
  char msg[160] = "";
  if (!cb_bench_parse_sizes(size_text ? size_text : quick ? "8,64K,1M" : "8,4K,64K,1M,16M", &x.sizes, &x.nsizes, msg,
                            sizeof msg) ||
      x.sizes[x.nsizes - 1] > (UINT64_C(1) << 30) || x.nsizes > 64) {
    if (cbt_rank == 0) {
      if (!msg[0]) snprintf(msg, sizeof msg, "--sizes: at most 64 sizes of at most 1G each");
      cb_cli_error("bench", "%s", msg);
    }
    free(x.sizes);
    return CB_CLI_USAGE;
  }
  if (!x.iters) x.iters = quick ? 1 : 10;
  if (!x.window) x.window = quick ? 4 : 64;
  if (!x.reps) x.reps = quick ? 3 : 5;
  int rc = CB_CLI_OK;
  if (cbt_nranks < 2) {
    if (cbt_rank == 0) cb_cli_error("bench", "needs 2 ranks or more (mpirun -n 2)");
    rc = CB_CLI_USAGE;
  } else if (svg && !cb_bench_svg_available()) {
    if (cbt_rank == 0) cb_cli_error("bench", "--svg: this cubert-mpi was built without cairo (libcairo2-dev)");
    rc = CB_CLI_FAILED;
  } else {
    int ok = cbt_rank != 0 || !svg || cb_bench_svg_writable(svg, "bench");
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok || !cbt_open_outputs(&spec)) rc = CB_CLI_FAILED;
  }
  if (rc != CB_CLI_OK) {
    free(x.sizes);
    return rc;
  }

  cubert_runtime *rt = NULL;
  results res = {.rows = {0}};
  if (cubert_runtime_create(NULL, &rt) != CUBERT_OK)
    fprintf(stderr, "cubert-mpi bench: rank %d: %s\n", cbt_rank, cubert_last_error_message());
  if (!rt || !setup(&x, rt, &res.di)) {
    if (rt) teardown(&x);
    cubert_runtime_destroy(rt);
    if (cbt_rank == 0) cb_cli_close_outputs(&spec);
    free(x.sizes);
    return CB_CLI_FAILED;
  }
  res.primary = x.run[I_DIRECT] ? I_DIRECT : I_STAGED;
  char host[MPI_MAX_PROCESSOR_NAME] = "";
  int hl = 0;
  MPI_Get_processor_name(host, &hl);
  res.hosts = calloc((size_t)cbt_nranks, sizeof *res.hosts);
  MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, res.hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
  if (cbt_rank == 0) print_intro(&x, &res);
  measure_all(&x, &res);
  if (cbt_rank == 0) {
    core_floor(&x, x.sizes[0], &res.floor_rd, &res.floor_wr);
    printf("%-6s of which not MPI's (rank 0's device, %" PRIu64
           " B): cubert_handle_read %.2f us + cubert_handle_write %.2f us per transfer\n",
           "", x.sizes[0], res.floor_rd, res.floor_wr);
  }
  uint64_t mine[3] = {x.checked, x.wrong, cubert_mpi_shared_transfers()}, all[3] = {0, 0, 0};
  MPI_Reduce(mine, all, 3, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (cbt_rank == 0) rc = write_results(&x, &res, all, svg, &spec, &csvo, &jsono);
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  cb_bench_rows_free(&res.rows);
  free(res.hosts);
  teardown(&x);
  cubert_runtime_destroy(rt);
  free(x.sizes);
  return rc;
}
