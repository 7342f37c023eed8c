/* mpi/tool/cubert_mpi_tool.c: `cubert-mpi`, the tool of the MPI component
 * (docs/cluster.md), run under mpirun or srun:
 *
 *   cubert-mpi campaign --seed S --programs P [--node NAME] [--min-faults F] [--json FILE]
 *       the fault-injection campaign sharded over the ranks (program i on
 *       rank i mod N), counts and verdicts reduced to rank 0; the same seed
 *       and programs give the same counts whatever N;
 *   cubert-mpi bench [--quick] [--sizes LIST] [--iters N] [--csv FILE] [--json FILE]
 *       bandwidth (one way, both ways) and latency between every pair of
 *       ranks through cubert_mpi_send/recv, beside raw MPI on host buffers,
 *       every transfer validated.
 *
 * Exit status: 0 when the run passed (no violation, every transfer valid),
 * 1 when it did not, 2 for a usage error. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cubert/mpi.h"
#include "tools/faultinj/campaign.h"

static int rank, nranks;

static void usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -n N cubert-mpi campaign --seed S --programs P [--node NAME|FILE]\n"
          "                                    [--min-faults F] [--json FILE]\n"
          "       mpirun -n N cubert-mpi bench [--quick] [--sizes 8,64K,1M] [--iters N] [--csv FILE]\n"
          "                                 [--json FILE]\n"
          "docs/cluster.md says what each does.\n"
          "\nenvironment (besides the cubert tool's, `cubert --help`):\n"
          "  CUBERT_MPI_CHUNK   bytes per chunk of a transfer (default 4M; 64k, 1M... accepted)\n"
          "  CUBERT_MPI_FAULTS  fault rules at send and receive (docs/cluster.md), per rank\n"
          "  CUBERT_MPI_IPC     auto (default): ranks of one node move the bytes through shared device\n"
          "                     memory (HIP IPC; shm on the host backend); off: through MPI's messages\n");
}

static bool parse_u64(const char *s, uint64_t *out) {
  char *end;
  if (!s || !*s) return false;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end == 'K' || *end == 'k') v <<= 10, end++;
  else if (*end == 'M' || *end == 'm') v <<= 20, end++;
  if (*end) return false;
  *out = v;
  return true;
}

/* ------------------------------------------------------------ campaign */

/* The counts every rank contributes, summed on rank 0. */
enum { C_PROGRAMS, C_STEPS, C_SYNCS, C_READS, C_INJECTED, C_VIOLATIONS, C_LOST, C_LEAKSKIP, C_SETUP, C_HANG, C_FIXED };
#define C_KINDS C_FIXED
#define C_VKINDS (C_KINDS + CUBERT_FAULT_KIND_COUNT_)
#define C_COUNT (C_VKINDS + CB_FI_VIOLATION_KIND_COUNT)

static int campaign(int argc, char **argv) {
  cb_fi_campaign_config c;
  cb_fi_campaign_config_init(&c);
  const char *json = NULL;
  uint64_t min_faults = 0;
  for (int i = 0; i < argc; i += 2) { /* every option takes a value */
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool ok = v != NULL;
    if (!strcmp(a, "--seed")) ok = ok && parse_u64(v, &c.seed);
    else if (!strcmp(a, "--programs")) ok = ok && parse_u64(v, &c.programs);
    else if (!strcmp(a, "--min-faults")) ok = ok && parse_u64(v, &min_faults);
    else if (!strcmp(a, "--json")) json = v;
    else if (!strcmp(a, "--node")) ok = ok && setenv("CUBERT_HOST_NODE", v, 1) == 0;
    else ok = false;
    if (!ok) {
      if (rank == 0) fprintf(stderr, "cubert-mpi campaign: bad option '%s'%s\n", a, v ? "" : " (no value)");
      if (rank == 0) usage(stderr);
      return 2;
    }
  }
  if (!c.programs) {
    if (rank == 0) fprintf(stderr, "cubert-mpi campaign: --programs is needed (every rank must know the programs)\n");
    return 2;
  }
  c.shard = (uint64_t)rank;
  c.shards = (uint64_t)nranks;
  c.progress = rank == 0 ? stderr : NULL;
  c.minimize = 1;
  cb_fi_campaign_report r;
  cubert_status st = cb_fi_campaign_run(&c, &r);
  uint64_t mine[C_COUNT] = {0}, all[C_COUNT] = {0};
  mine[C_PROGRAMS] = r.programs;
  mine[C_STEPS] = r.steps;
  mine[C_SYNCS] = r.syncs_added;
  mine[C_READS] = r.reads;
  mine[C_INJECTED] = r.injected;
  mine[C_VIOLATIONS] = r.violations;
  mine[C_LOST] = r.devices_lost;
  mine[C_LEAKSKIP] = r.leak_skipped;
  mine[C_SETUP] = r.setup_failures + (st != CUBERT_OK);
  mine[C_HANG] = r.hang;
  for (int k = 0; k < CUBERT_FAULT_KIND_COUNT_; k++) mine[C_KINDS + k] = r.by_kind[k];
  for (int k = 0; k < CB_FI_VIOLATION_KIND_COUNT; k++) mine[C_VKINDS + k] = r.by_violation[k];
  for (size_t i = 0; i < r.nfailing; i++) {
    const cb_fi_failing *f = &r.failing[i];
    fprintf(stderr, "rank %d: program %" PRIu64 " (seed %" PRIu64 "; replay: cubert faultinj campaign --replay %" PRIu64
                    "): %s\n%s",
            rank, f->index, f->program_seed, f->program_seed, f->first ? f->first : "",
            f->shortest ? f->shortest : "");
  }
  double secs = r.seconds, slowest = 0;
  cb_fi_campaign_report_free(&r);
  MPI_Reduce(mine, all, C_COUNT, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&secs, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  int rc = 0;
  if (rank == 0) {
    bool pass = all[C_VIOLATIONS] == 0 && all[C_HANG] == 0 && all[C_SETUP] == 0 &&
                all[C_PROGRAMS] == c.programs && all[C_INJECTED] >= min_faults;
    const char *node = getenv("CUBERT_HOST_NODE");
    printf("cubert-mpi campaign: seed %" PRIu64 ", %" PRIu64 " programs over %d rank%s%s%s; %.1f s (slowest rank)\n",
           c.seed, c.programs, nranks, nranks == 1 ? "" : "s", node ? ", node " : "", node ? node : "", slowest);
    /* the line that must not depend on the number of ranks */
    printf("counts: programs %" PRIu64 ", steps %" PRIu64 ", syncs added %" PRIu64 ", checks %" PRIu64
           ", faults %" PRIu64 " (",
           all[C_PROGRAMS], all[C_STEPS], all[C_SYNCS], all[C_READS], all[C_INJECTED]);
    for (int k = 0; k < CUBERT_FAULT_KIND_COUNT_; k++)
      printf("%s%s %" PRIu64, k ? ", " : "", cubert_fault_kind_name((cubert_fault_kind)k), all[C_KINDS + k]);
    printf("), violations %" PRIu64 " (", all[C_VIOLATIONS]);
    for (int k = 0; k < CB_FI_VIOLATION_KIND_COUNT; k++)
      printf("%s%s %" PRIu64, k ? ", " : "", cb_fi_violation_name((cb_fi_violation_kind)k), all[C_VKINDS + k]);
    printf("), devices lost %" PRIu64 ", leak checks skipped %" PRIu64 ", could not run %" PRIu64 ", hang %s\n",
           all[C_LOST], all[C_LEAKSKIP], all[C_SETUP], all[C_HANG] ? "yes" : "no");
    if (all[C_INJECTED] < min_faults)
      printf("only %" PRIu64 " faults injected, fewer than --min-faults %" PRIu64 "\n", all[C_INJECTED], min_faults);
    printf("verdict: %s\n", pass ? "PASS" : "FAIL");
    rc = pass ? 0 : 1;
    if (json) {
      json_t *kinds = json_object(), *vk = json_object();
      for (int k = 0; k < CUBERT_FAULT_KIND_COUNT_; k++)
        json_object_set_new(kinds, cubert_fault_kind_name((cubert_fault_kind)k), json_integer((json_int_t)all[C_KINDS + k]));
      for (int k = 0; k < CB_FI_VIOLATION_KIND_COUNT; k++)
        json_object_set_new(vk, cb_fi_violation_name((cb_fi_violation_kind)k), json_integer((json_int_t)all[C_VKINDS + k]));
      json_t *o = json_pack("{s:I, s:I, s:i, s:I, s:I, s:I, s:o, s:I, s:o, s:I, s:b, s:s, s:f}", "seed",
                            (json_int_t)c.seed, "programs", (json_int_t)all[C_PROGRAMS], "ranks", nranks, "steps",
                            (json_int_t)all[C_STEPS], "checks", (json_int_t)all[C_READS], "faults_injected",
                            (json_int_t)all[C_INJECTED], "faults_by_kind", kinds, "violations",
                            (json_int_t)all[C_VIOLATIONS], "violations_by_kind", vk, "could_not_run",
                            (json_int_t)all[C_SETUP], "hang", all[C_HANG] != 0, "verdict", pass ? "PASS" : "FAIL",
                            "seconds", slowest);
      if (!o || json_dump_file(o, json, JSON_INDENT(2)) != 0) {
        fprintf(stderr, "cubert-mpi campaign: could not write %s\n", json);
        rc = 1;
      }
      json_decref(o);
    }
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return rc;
}

/* ------------------------------------------------------------ bench */

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
    fprintf(stderr, "rank %d: %s\n", rank, cubert_last_error_message());
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
  bool in_pair = rank == a || rank == b, first = rank == a;
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

static int bench(int argc, char **argv) {
  uint64_t sizes[16] = {8, 4096, 65536, 1u << 20, 16u << 20};
  int nsizes = 5;
  bench_ctx x = {.iters = 20, .reps = 5};
  const char *csv = NULL, *json = NULL;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool ok = true;
    if (!strcmp(a, "--quick")) {
      sizes[0] = 8, sizes[1] = 65536, sizes[2] = 1u << 20, nsizes = 3;
      x.iters = 5, x.reps = 3;
      continue;
    }
    ok = v != NULL;
    if (ok && !strcmp(a, "--sizes")) {
      nsizes = 0;
      char *copy = strdup(v), *save = NULL;
      for (char *t = strtok_r(copy, ",", &save); t && ok; t = strtok_r(NULL, ",", &save))
        ok = nsizes < 16 && parse_u64(t, &sizes[nsizes++]) && sizes[nsizes - 1] > 0 && sizes[nsizes - 1] <= (1u << 30);
      free(copy);
      ok = ok && nsizes > 0;
    } else if (ok && !strcmp(a, "--iters")) ok = parse_u64(v, &x.iters) && x.iters > 0;
    else if (ok && !strcmp(a, "--csv")) csv = v;
    else if (ok && !strcmp(a, "--json")) json = v;
    else ok = false;
    if (!ok) {
      if (rank == 0) fprintf(stderr, "cubert-mpi bench: bad option '%s'\n", a);
      if (rank == 0) usage(stderr);
      return 2;
    }
    i++;
  }
  if (nranks < 2) {
    if (rank == 0) fprintf(stderr, "cubert-mpi bench: needs 2 ranks or more (mpirun -n 2)\n");
    return 2;
  }
  uint64_t max = 0;
  for (int i = 0; i < nsizes; i++) max = sizes[i] > max ? sizes[i] : max;

  cubert_runtime *rt = NULL;
  cubert_device_info di;
  if (cubert_runtime_create(NULL, &rt) != CUBERT_OK || cubert_runtime_device_count(rt) == 0 ||
      cubert_client_create(rt, rank % cubert_runtime_device_count(rt), &x.client) != CUBERT_OK ||
      cubert_runtime_device_info(rt, cubert_client_device(x.client), &di) != CUBERT_OK) {
    fprintf(stderr, "cubert-mpi bench: rank %d: no device: %s\n", rank, cubert_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  x.hout = malloc(max);
  x.hin = malloc(max);
  x.check = malloc(max);
  for (uint64_t i = 0; i < max; i++) x.hout[i] = (unsigned char)(i * 131 + (uint64_t)rank * 7 + 1);
  if (cubert_handle_create(x.client, x.hout, max, &x.out) != CUBERT_OK ||
      cubert_handle_empty(x.client, max, &x.in) != CUBERT_OK) {
    fprintf(stderr, "cubert-mpi bench: rank %d: %s\n", rank, cubert_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  char host[MPI_MAX_PROCESSOR_NAME];
  int hl = 0;
  MPI_Get_processor_name(host, &hl);
  FILE *cf = NULL;
  json_t *rows = json_array();
  if (rank == 0) {
    printf("cubert-mpi bench: %d ranks on %s; rank 0 on %s (%s); %" PRIu64 " iterations, median of %" PRIu64
           " samples\n",
           nranks, host, di.name, di.backend, x.iters, x.reps);
    printf("GPU-aware MPI: %s; cubert stages through host memory in chunks (CUBERT_MPI_CHUNK)\n\n",
           cubert_mpi_gpu_aware() ? "reported by the library" : "no");
    printf("%-6s %10s  %12s %12s %7s  %12s %12s %7s\n", "pair", "size", "one-way", "raw MPI", "ratio", "both-ways",
           "raw MPI", "ratio");
    printf("%-6s %10s  %12s %12s %7s  %12s %12s %7s\n", "", "", "GB/s", "GB/s", "", "GB/s", "GB/s", "");
    if (csv && !(cf = fopen(csv, "w"))) fprintf(stderr, "cubert-mpi bench: cannot write %s\n", csv);
    if (cf) fprintf(cf, "rank_a,rank_b,size,mode,cubert,raw,ratio,unit\n");
  }
  for (int a = 0; a < nranks; a++)
    for (int b = a + 1; b < nranks; b++) {
      for (int s = 0; s < nsizes; s++) {
        uint64_t n = sizes[s];
        double c1 = measure(&x, a, b, ONE_WAY, false, n), r1 = measure(&x, a, b, ONE_WAY, true, n);
        double c2 = measure(&x, a, b, BOTH_WAYS, false, n), r2 = measure(&x, a, b, BOTH_WAYS, true, n);
        double g[4] = {n / c1 / 1e9, n / r1 / 1e9, 2.0 * n / c2 / 1e9, 2.0 * n / r2 / 1e9};
        if (rank == 0) {
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
      if (rank == 0) {
        printf("%-6s latency (%" PRIu64 " B, half round trip): cubert %.2f us, raw MPI %.2f us, ratio %.2f\n", "", sizes[0],
               lc * 1e6, lr * 1e6, lc / lr);
        if (cf) fprintf(cf, "%d,%d,%" PRIu64 ",latency,%.3f,%.3f,%.4f,us\n", a, b, sizes[0], lc * 1e6, lr * 1e6, lc / lr);
        json_array_append_new(rows, json_pack("{s:i, s:i, s:I, s:s, s:f, s:f, s:f, s:s}", "rank_a", a, "rank_b", b,
                                              "size", (json_int_t)sizes[0], "mode", "latency", "cubert", lc * 1e6,
                                              "raw", lr * 1e6, "ratio", lc / lr, "unit", "us"));
      }
    }
  double frd = 0, fwr = 0;
  if (rank == 0) {
    core_floor(&x, sizes[0], &frd, &fwr);
    printf("%-6s of which not MPI's (rank 0's device, %" PRIu64
           " B): cubert_handle_read %.2f us + cubert_handle_write %.2f us per transfer\n",
           "", sizes[0], frd * 1e6, fwr * 1e6);
  }
  uint64_t mine[3] = {x.validated, x.invalid, cubert_mpi_shared_transfers()}, all[3] = {0, 0, 0};
  MPI_Reduce(mine, all, 3, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  int rc = 0;
  if (rank == 0) {
    rc = all[1] == 0 && all[0] > 0 ? 0 : 1;
    printf("\nvalidation: %s (%" PRIu64 " transfers checked byte for byte, %" PRIu64 " wrong)\n",
           rc ? "FAILED" : "passed", all[0] + all[1], all[1]);
    printf("through shared memory (CUBERT_MPI_IPC, ranks of one node): %" PRIu64 " sends and receives\n", all[2]);
    if (cf) fclose(cf);
    if (json) {
      json_t *o = json_pack("{s:i, s:s, s:s, s:b, s:I, s:I, s:o, s:I, s:I, s:s, s:{s:f, s:f}}", "ranks", nranks,
                            "device", di.name,
                            "backend", di.backend, "gpu_aware_mpi", cubert_mpi_gpu_aware(), "iterations",
                            (json_int_t)x.iters, "samples", (json_int_t)x.reps, "results", rows, "validated",
                            (json_int_t)all[0], "invalid", (json_int_t)all[1], "validation",
                            rc ? "failed" : "passed", "core_floor_us", "read", frd * 1e6, "write", fwr * 1e6);
      rows = NULL;
      if (!o || json_dump_file(o, json, JSON_INDENT(2)) != 0) {
        fprintf(stderr, "cubert-mpi bench: could not write %s\n", json);
        rc = 1;
      }
      json_decref(o);
    }
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
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  if (cubert_mpi_init(MPI_COMM_WORLD) != CUBERT_OK) {
    fprintf(stderr, "cubert-mpi: %s\n", cubert_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int rc;
  if (!strcmp(argv[1], "campaign")) rc = campaign(argc - 2, argv + 2);
  else if (!strcmp(argv[1], "bench")) rc = bench(argc - 2, argv + 2);
  else {
    if (rank == 0) {
      fprintf(stderr, "cubert-mpi: unknown command '%s'\n", argv[1]);
      usage(stderr);
    }
    rc = 2;
  }
  cubert_mpi_finalize(MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
