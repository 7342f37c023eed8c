/* mpi/tool/bench.c: `cubert-mpi bench` (docs/cluster.md): bandwidth one way
 * and both ways, and latency, between every pair of ranks through
 * cubert_mpi_send/recv beside raw MPI, every transfer validated; table,
 * CSV and JSON through bench/ (cubert_bench_common). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "cubert/mpi.h"
#include "mpi/tool/tool.h"


static double now(void) { return MPI_Wtime(); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct bench_ctx {
  cubert_client *client;
  cubert_handle *out, *in; /* cubert buffers of the largest size */
  unsigned char *hout, *hin, *check;
  uint64_t iters, reps;
  uint64_t validated, invalid;
} bench_ctx;

/* One measured operation between ranks a and b: returns seconds of one
 * sample (median of reps), on both ranks (a's clock, broadcast). */
enum mode { ONE_WAY, BOTH_WAYS, LATENCY };

static void sized(bench_ctx *x, uint64_t size, cubert_handle **out, cubert_handle **in) {
  uint64_t full = cubert_handle_size_in_use(x->out);
  cubert_handle_slice(x->out, 0, full - size, out);
  cubert_handle_slice(x->in, 0, full - size, in);
}

static bool cubert_step(bench_ctx *x, enum mode m, bool first, int peer, cubert_handle *out, cubert_handle *in) {
  cubert_status a = CUBERT_OK, b = CUBERT_OK;
  if (m == BOTH_WAYS) {
    cubert_mpi_request *rs = NULL, *rr = NULL;
    a = cubert_mpi_irecv(x->client, in, peer, 1, MPI_COMM_WORLD, &rr);
    b = cubert_mpi_isend(x->client, out, peer, 1, MPI_COMM_WORLD, &rs);
    if (b == CUBERT_OK) b = cubert_mpi_wait(rs, NULL);
    if (a == CUBERT_OK) a = cubert_mpi_wait(rr, NULL);
  } else if (first) {
    a = cubert_mpi_send(x->client, out, peer, 1, MPI_COMM_WORLD, NULL);
    if (m == LATENCY) b = cubert_mpi_recv(x->client, in, peer, 1, MPI_COMM_WORLD, NULL);
  } else {
    a = cubert_mpi_recv(x->client, in, peer, 1, MPI_COMM_WORLD, NULL);
    if (m == LATENCY) b = cubert_mpi_send(x->client, out, peer, 1, MPI_COMM_WORLD, NULL);
  }
  if (a != CUBERT_OK || b != CUBERT_OK) {
    fprintf(stderr, "rank %d: %s\n", cbt_rank, cubert_last_error_message());
    return false;
  }
  return true;
}

static void raw_step(bench_ctx *x, enum mode m, bool first, int peer, uint64_t size) {
  if (m == BOTH_WAYS) {
    MPI_Sendrecv(x->hout, (int)size, MPI_BYTE, peer, 2, x->hin, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
  } else if (first) {
    MPI_Send(x->hout, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
    if (m == LATENCY) MPI_Recv(x->hin, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(x->hin, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (m == LATENCY) MPI_Send(x->hout, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
  }
}

/* Seconds per iteration (median of reps samples), measured on rank a and
 * known to every rank afterwards; validation of what b (and a, both ways)
 * received. */
static double measure(bench_ctx *x, int a, int b, enum mode m, bool raw, uint64_t size) {
  bool in_pair = cbt_rank == a || cbt_rank == b, first = cbt_rank == a;
  int peer = first ? b : a;
  cubert_handle *out = NULL, *in = NULL;
  if (in_pair && !raw) sized(x, size, &out, &in);
  double *samples = calloc(x->reps + 1, sizeof *samples);
  bool ok = true;
  for (uint64_t r = 0; r <= x->reps; r++) { /* sample 0 warms up */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    if (in_pair) {
      for (uint64_t i = 0; i < x->iters && ok; i++) {
        if (raw) raw_step(x, m, first, peer, size);
        else ok = cubert_step(x, m, first, peer, out, in);
      }
      if (m == ONE_WAY) { /* the receiver says when it has the last one */
        char ack = 0;
        if (first) MPI_Recv(&ack, 1, MPI_CHAR, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else MPI_Send(&ack, 1, MPI_CHAR, peer, 3, MPI_COMM_WORLD);
      }
    }
    double per = (now() - t0) / (double)x->iters;
    if (m == LATENCY) per /= 2; /* half a round trip, as osu_latency */
    samples[r] = per;
  }
  /* validation: what arrived is what the peer sent (its pattern) */
  bool receives = in_pair && (m != ONE_WAY || !first);
  if (receives) {
    unsigned char *got = raw ? x->hin : x->check;
    bool good = ok;
    if (good && !raw) good = cubert_handle_read(x->client, in, got, size) == CUBERT_OK;
    for (uint64_t i = 0; good && i < size; i++) good = got[i] == (unsigned char)(i * 131 + (uint64_t)peer * 7 + 1);
    if (good) x->validated++;
    else x->invalid++;
  }
  cubert_handle_release(out);
  cubert_handle_release(in);
  qsort(samples + 1, x->reps, sizeof *samples, cmp_double);
  double med = samples[1 + x->reps / 2];
  free(samples);
  MPI_Bcast(&med, 1, MPI_DOUBLE, a, MPI_COMM_WORLD);
  return med;
}

/* The floor under cubert's latency that is not MPI's: one cubert_handle_read
 * and one cubert_handle_write of `size` bytes on this rank's device
 * (median of reps samples of iters each), in seconds. A transfer does one
 * of each (the sender reads, the receiver writes). */
static void core_floor(bench_ctx *x, uint64_t size, double *rd, double *wr) {
  cubert_handle *out = NULL, *in = NULL;
  sized(x, size, &out, &in);
  double *r = calloc(x->reps + 1, sizeof *r), *w = calloc(x->reps + 1, sizeof *w);
  for (uint64_t k = 0; r && w && k <= x->reps; k++) { /* sample 0 warms up */
    double t0 = now();
    for (uint64_t i = 0; i < x->iters; i++) cubert_handle_read(x->client, out, x->check, size);
    double t1 = now();
    for (uint64_t i = 0; i < x->iters; i++) cubert_handle_write(x->client, in, x->check, size);
    r[k] = (t1 - t0) / (double)x->iters;
    w[k] = (now() - t1) / (double)x->iters;
  }
  *rd = *wr = 0;
  if (r && w) {
    qsort(r + 1, x->reps, sizeof *r, cmp_double);
    qsort(w + 1, x->reps, sizeof *w, cmp_double);
    *rd = r[1 + x->reps / 2];
    *wr = w[1 + x->reps / 2];
  }
  free(r);
  free(w);
  cubert_handle_release(out);
  cubert_handle_release(in);
}

static void bench_usage(FILE *f) {
  fprintf(f, "usage: mpirun -n N cubert-mpi bench [--quick] [--sizes LIST] [--iters N] [--csv FILE]\n"
             "                                 [--json FILE]\n"
             "\n"
             "For every pair of ranks: bandwidth one way and both ways at each size, and latency\n"
             "at the smallest, through cubert_mpi_send/recv beside raw MPI; every transfer\n"
             "validated (docs/cluster.md).\n"
             "\n"
             "  --sizes LIST   bytes per transfer: 8,64K,1M or 1K..1M (default 8,4K,64K,1M,16M)\n"
             "  --iters N      transfers per sample (default 20; 5 with --quick)\n"
             "  --quick        sizes 8,64K,1M, 5 transfers, 3 samples (CI)\n"
             "  --csv FILE     the figures as CSV (- for stdout)\n"
             "  --json FILE    the figures as JSON (- for stdout)\n");
}

int cbt_bench(int argc, char **argv) {
  uint64_t *sizes = NULL;
  size_t nsizes = 0;
  bench_ctx x = {.iters = 0, .reps = 5};
  const char *size_text = NULL;
  bool quick = false;
  cb_cli_output csvo = {0}, jsono = {0};
  const cb_cli_opt opts[] = {CB_TEXT("sizes", 0, &size_text), CB_UINT("iters", &x.iters, 1, 1000000),
                             CB_FLAG("quick", 0, &quick),     CB_OUTPUT("csv", &csvo),
                             CB_OUTPUT("json", &jsono),       CB_END};
  const cb_cli_spec spec = {"bench", bench_usage, opts, 0, 0, NULL};
  int first, prc = cbt_parse(&spec, argc, argv, &first);
  if (prc != CB_CLI_PARSED) return prc;
  char msg[160];
  if (!cb_bench_parse_sizes(size_text ? size_text : quick ? "8,64K,1M" : "8,4K,64K,1M,16M", &sizes, &nsizes, msg,
                            sizeof msg) ||
      sizes[nsizes - 1] > (UINT64_C(1) << 30)) {
    if (cbt_rank == 0) {
      if (nsizes) snprintf(msg, sizeof msg, "sizes: at most 1G per transfer");
      cb_cli_error("bench", "--%s", msg);
    }
    free(sizes);
    return CB_CLI_USAGE;
  }
  if (!x.iters) x.iters = quick ? 5 : 20;
  if (quick) x.reps = 3;
  if (cbt_nranks < 2) {
    if (cbt_rank == 0) cb_cli_error("bench", "needs 2 ranks or more (mpirun -n 2)");
    free(sizes);
    return CB_CLI_USAGE;
  }
  if (!cbt_open_outputs(&spec)) {
    free(sizes);
    return CB_CLI_FAILED;
  }
  FILE *cf = cbt_rank == 0 ? csvo.file : NULL;
  const char *json = cbt_rank == 0 && jsono.file ? jsono.path : NULL;
  uint64_t max = sizes[nsizes - 1];

  cubert_runtime *rt = NULL;
  cubert_device_info di;
  if (cubert_runtime_create(NULL, &rt) != CUBERT_OK || cubert_runtime_device_count(rt) == 0 ||
      cubert_client_create(rt, cbt_rank % cubert_runtime_device_count(rt), &x.client) != CUBERT_OK ||
      cubert_runtime_device_info(rt, cubert_client_device(x.client), &di) != CUBERT_OK) {
    fprintf(stderr, "cubert-mpi bench: rank %d: no device: %s\n", cbt_rank, cubert_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  x.hout = malloc(max);
  x.hin = malloc(max);
  x.check = malloc(max);
  for (uint64_t i = 0; i < max; i++) x.hout[i] = (unsigned char)(i * 131 + (uint64_t)cbt_rank * 7 + 1);
  if (cubert_handle_create(x.client, x.hout, max, &x.out) != CUBERT_OK ||
      cubert_handle_empty(x.client, max, &x.in) != CUBERT_OK) {
    fprintf(stderr, "cubert-mpi bench: rank %d: %s\n", cbt_rank, cubert_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  char host[MPI_MAX_PROCESSOR_NAME];
  int hl = 0;
  MPI_Get_processor_name(host, &hl);
  json_t *rows = json_array();
  if (cbt_rank == 0) {
    printf("cubert-mpi bench: %d ranks on %s; rank 0 on %s (%s); %" PRIu64 " iterations, median of %" PRIu64
           " samples\n",
           cbt_nranks, host, di.name, di.backend, x.iters, x.reps);
    printf("GPU-aware MPI: %s; cubert stages through host memory in chunks (CUBERT_MPI_CHUNK)\n\n",
           cubert_mpi_gpu_aware() ? "reported by the library" : "no");
    printf("%-6s %10s  %12s %12s %7s  %12s %12s %7s\n", "pair", "size", "one-way", "raw MPI", "ratio", "both-ways",
           "raw MPI", "ratio");
    printf("%-6s %10s  %12s %12s %7s  %12s %12s %7s\n", "", "", "GB/s", "GB/s", "", "GB/s", "GB/s", "");
    if (cf) fprintf(cf, "rank_a,rank_b,size,mode,cubert,raw,ratio,unit\n");
  }
  for (int a = 0; a < cbt_nranks; a++)
    for (int b = a + 1; b < cbt_nranks; b++) {
      for (size_t s = 0; s < nsizes; s++) {
        uint64_t n = sizes[s];
        double c1 = measure(&x, a, b, ONE_WAY, false, n), r1 = measure(&x, a, b, ONE_WAY, true, n);
        double c2 = measure(&x, a, b, BOTH_WAYS, false, n), r2 = measure(&x, a, b, BOTH_WAYS, true, n);
        double g[4] = {n / c1 / 1e9, n / r1 / 1e9, 2.0 * n / c2 / 1e9, 2.0 * n / r2 / 1e9};
        if (cbt_rank == 0) {
          char pair[32];
          snprintf(pair, sizeof pair, "%d-%d", a, b);
          printf("%-6s %10" PRIu64 "  %12.3f %12.3f %7.2f  %12.3f %12.3f %7.2f\n", pair, n, g[0], g[1], g[0] / g[1],
                 g[2], g[3], g[2] / g[3]);
          const char *modes[2] = {"one-way", "both-ways"};
          for (int k = 0; k < 2; k++) {
            if (cf) fprintf(cf, "%d,%d,%" PRIu64 ",%s,%.6f,%.6f,%.4f,GB/s\n", a, b, n, modes[k], g[2 * k], g[2 * k + 1],
                            g[2 * k] / g[2 * k + 1]);
            json_array_append_new(rows, json_pack("{s:i, s:i, s:I, s:s, s:f, s:f, s:f, s:s}", "rank_a", a, "rank_b", b,
                                                  "size", (json_int_t)n, "mode", modes[k], "cubert", g[2 * k],
                                                  "raw", g[2 * k + 1], "ratio", g[2 * k] / g[2 * k + 1], "unit",
                                                  "GB/s"));
          }
        }
      }
      double lc = measure(&x, a, b, LATENCY, false, sizes[0]), lr = measure(&x, a, b, LATENCY, true, sizes[0]);
      if (cbt_rank == 0) {
        printf("%-6s latency (%" PRIu64 " B, half round trip): cubert %.2f us, raw MPI %.2f us, ratio %.2f\n", "", sizes[0],
               lc * 1e6, lr * 1e6, lc / lr);
        if (cf) fprintf(cf, "%d,%d,%" PRIu64 ",latency,%.3f,%.3f,%.4f,us\n", a, b, sizes[0], lc * 1e6, lr * 1e6, lc / lr);
        json_array_append_new(rows, json_pack("{s:i, s:i, s:I, s:s, s:f, s:f, s:f, s:s}", "rank_a", a, "rank_b", b,
                                              "size", (json_int_t)sizes[0], "mode", "latency", "cubert", lc * 1e6,
                                              "raw", lr * 1e6, "ratio", lc / lr, "unit", "us"));
      }
    }
  double frd = 0, fwr = 0;
  if (cbt_rank == 0) {
    core_floor(&x, sizes[0], &frd, &fwr);
    printf("%-6s of which not MPI's (rank 0's device, %" PRIu64
           " B): cubert_handle_read %.2f us + cubert_handle_write %.2f us per transfer\n",
           "", sizes[0], frd * 1e6, fwr * 1e6);
  }
  uint64_t mine[3] = {x.validated, x.invalid, cubert_mpi_shared_transfers()}, all[3] = {0, 0, 0};
  MPI_Reduce(mine, all, 3, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  int rc = 0;
  if (cbt_rank == 0) {
    rc = all[1] == 0 && all[0] > 0 ? 0 : 1;
    printf("\nvalidation: %s (%" PRIu64 " transfers checked byte for byte, %" PRIu64 " wrong)\n",
           rc ? "FAILED" : "passed", all[0] + all[1], all[1]);
    printf("through shared memory (CUBERT_MPI_IPC, ranks of one node): %" PRIu64 " sends and receives\n", all[2]);
    if (json) {
      json_t *o = json_pack("{s:i, s:s, s:s, s:b, s:I, s:I, s:o, s:I, s:I, s:s, s:{s:f, s:f}}", "ranks", cbt_nranks,
                            "device", di.name,
                            "backend", di.backend, "gpu_aware_mpi", cubert_mpi_gpu_aware(), "iterations",
                            (json_int_t)x.iters, "samples", (json_int_t)x.reps, "results", rows, "validated",
                            (json_int_t)all[0], "invalid", (json_int_t)all[1], "validation",
                            rc ? "failed" : "passed", "core_floor_us", "read", frd * 1e6, "write", fwr * 1e6);
      rows = NULL;
      if (!o || !cb_bench_write_json(o, jsono.file, "bench")) rc = 1;
      json_decref(o);
    }
    if (!cb_cli_close_outputs(&spec)) rc = 1;
  }
  json_decref(rows);
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  cubert_handle_release(x.out);
  cubert_handle_release(x.in);
  cubert_client_destroy(x.client);
  cubert_runtime_destroy(rt);
  free(x.hout);
  free(x.hin);
  free(x.check);
  free(sizes);
  return rc;
}

