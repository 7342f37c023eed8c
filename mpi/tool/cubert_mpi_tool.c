/* mpi/tool/cubert_mpi_tool.c: `cubert-mpi`, the tool of the MPI component
 * (docs/cluster.md), run under mpirun or srun; its main, the helpers its
 * commands share (mpi/tool/tool.h) and `campaign`:
 *
 *   cubert-mpi campaign --seed S --programs P [--exchanges E]
 *                       [--shared-exchanges X] [--node NAME]
 *                       [--min-faults F] [--json FILE]
 *       the fault-injection campaign sharded over the ranks (program i on
 *       rank i mod N), then the exchanges between ranks (mpi/tool/exchange.h)
 *       through MPI's messages, then the shared exchanges through shared
 *       memory (two ranks or more), counts and verdicts reduced to rank 0;
 *       the same seed, programs and exchanges give the same `counts:` line
 *       whatever N, and the same `shared counts:` line whatever N > 1;
 *   cubert-mpi bench ...   (mpi/tool/bench.c)
 *       bandwidth (one way, both ways) and latency between every pair of
 *       ranks through cubert_mpi_send/recv, beside raw MPI, every transfer
 *       validated.
 *
 * Options are parsed as the `cubert` commands parse theirs (cli/options.h):
 * -h/--help, --opt value or --opt=value, `-` for stdout where a file is
 * written. Exit status: 0 when the run passed (no violation, every transfer
 * valid), 1 when it did not, 2 for a usage error. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cubert/mpi.h"
#include "mpi/tool/exchange.h"
#include "mpi/tool/tool.h"
#include "tools/faultinj/campaign.h"

int cbt_rank, cbt_nranks;

static const cb_cli_command commands[] = {
    {"campaign", cbt_campaign, "the fault-injection campaign sharded over the ranks"},
    {"bench", cbt_bench, "bandwidth and latency between every pair of ranks, beside raw MPI"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
  fprintf(f, "usage: mpirun -n N cubert-mpi <command> [options]\n"
             "       cubert-mpi --help\n"
             "\ncommands:\n");
  cb_cli_list(f, commands, NCOMMANDS);
  fprintf(f, "\n`cubert-mpi <command> --help` describes a command's options; docs/cluster.md says\n"
             "what each does. Exit status: 0 passed, 1 failed, 2 bad usage.\n"
             "\nenvironment (besides the cubert tool's, `cubert --help`):\n"
             "  CUBERT_MPI_CHUNK      bytes per chunk of a transfer, 64 to 1G (default 4M; 64k, 1M...)\n"
             "  CUBERT_FAULTS         also the rules at send and receive (its send/recv statements;\n"
             "                        rank= aims one at a rank)\n"
             "  CUBERT_MPI_FAULTS     more rules at send and receive (docs/cluster.md)\n"
             "  CUBERT_MPI_IPC        auto (default): ranks of one node move views of 512 KiB or more\n"
             "                        through shared device memory (HIP IPC; shm on the host backend);\n"
             "                        on: every view; off: everything through MPI's messages\n"
             "  CUBERT_MPI_GPU_AWARE  auto (default), force or off: hand device memory to MPI\n"
             "                        (the direct form, docs/cluster.md)\n"
             "  CUBERT_MPI_PROFILE    set, not 0: each rank prints where its transfers' time went\n"
             "A value that does not parse makes the command fail before it starts.\n");
}

int cbt_parse(const cb_cli_spec *spec, int argc, char **argv, int *first) {
  int saved_out = -1, saved_err = -1;
  if (cbt_rank != 0) { /* the same message from every rank says nothing more */
    fflush(stdout);
    fflush(stderr);
    int null = open("/dev/null", O_WRONLY);
    saved_out = dup(STDOUT_FILENO);
    saved_err = dup(STDERR_FILENO);
    if (null >= 0) {
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
      close(null);
    }
  }
  int rc = cb_cli_parse(spec, argc, argv, first);
  if (cbt_rank != 0) {
    fflush(stdout);
    fflush(stderr);
    if (saved_out >= 0) dup2(saved_out, STDOUT_FILENO), close(saved_out);
    if (saved_err >= 0) dup2(saved_err, STDERR_FILENO), close(saved_err);
  }
  return rc;
}

bool cbt_open_outputs(const cb_cli_spec *spec) {
  int ok = cbt_rank == 0 ? cb_cli_open_outputs(spec) : 1;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return ok != 0;
}

/* ------------------------------------------------------------ campaign */

/* "<head> E, steps, checks, faults (by kind), violations (by kind)" of
 * exchange counts (mpi/tool/exchange.h), without a new line. */
static void print_exchanges(const char *head, const uint64_t *x) {
  printf("%s %" PRIu64 ", steps %" PRIu64 ", checks %" PRIu64 ", faults %" PRIu64 " (", head, x[XC_PROGRAMS],
         x[XC_STEPS], x[XC_CHECKS], x[XC_FAULTS]);
  for (int k = XC_FIRST_KIND; k < XC_VIOLATIONS; k++)
    printf("%s%s %" PRIu64, k > XC_FIRST_KIND ? ", " : "", xc_name(k), x[k]);
  printf("), violations %" PRIu64 " (", x[XC_VIOLATIONS]);
  for (int k = XC_FIRST_VIOLATION; k < XC_COUNT; k++)
    printf("%s%s %" PRIu64, k > XC_FIRST_VIOLATION ? ", " : "", xc_name(k), x[k]);
  printf(")");
}

static void campaign_usage(FILE *f) {
  fprintf(f, "usage: mpirun -n N cubert-mpi campaign --programs P [--exchanges E] [--seed S]\n"
             "                                    [--shared-exchanges X] [--node NAME|FILE]\n"
             "                                    [--min-faults F] [--json FILE]\n"
             "\n"
             "The fault-injection campaign of `cubert faultinj campaign` sharded over the ranks\n"
             "(program i on rank i mod N), then exchanges: programs that send a view from one rank\n"
             "to another under runtime and MPI faults, every byte received checked, through MPI's\n"
             "messages, then shared exchanges through the shared memory of ranks of one node (with\n"
             "two ranks or more); the counts and verdicts reduced to rank 0.\n"
             "\n"
             "  --programs P     programs of the campaign (required: every rank must agree; may be 0)\n"
             "  --exchanges E    send/receive programs through MPI's messages (default P / 10)\n"
             "  --shared-exchanges X\n"
             "                   send/receive programs through shared memory (default E / 2; none\n"
             "                   on one rank: a rank does not send to itself that way)\n"
             "  --seed S         the campaign's seed (default: the harness's)\n"
             "  --node NAME      the simulated node: frontier, mi300x, pcie or FILE.xml\n"
             "                   (sets CUBERT_HOST_NODE on every rank)\n"
             "  --min-faults F   FAIL when fewer faults were injected over all ranks\n"
             "  --json FILE      the counts and verdict as JSON (- for stdout)\n");
}


/* The counts every rank contributes, summed on rank 0. */
enum { C_PROGRAMS, C_STEPS, C_SYNCS, C_READS, C_INJECTED, C_VIOLATIONS, C_LOST, C_LEAKSKIP, C_SETUP, C_HANG, C_FIXED };
#define C_KINDS C_FIXED
#define C_VKINDS (C_KINDS + CUBERT_FAULT_KIND_COUNT_)
#define C_COUNT (C_VKINDS + CB_FI_VIOLATION_KIND_COUNT)

int cbt_campaign(int argc, char **argv) {
  cb_fi_campaign_config c;
  cb_fi_campaign_config_init(&c);
  cb_cli_output json = {0};
  uint64_t min_faults = 0, exchanges = UINT64_MAX, shared = UINT64_MAX;
  const char *node = NULL;
  c.programs = UINT64_MAX; /* not given */
  const cb_cli_opt opts[] = {CB_UINT("seed", &c.seed, 0, UINT64_MAX),
                             CB_UINT("programs", &c.programs, 0, UINT64_MAX - 1),
                             CB_UINT("exchanges", &exchanges, 0, UINT64_MAX - 1),
                             CB_UINT("shared-exchanges", &shared, 0, UINT64_MAX - 1),
                             CB_UINT("min-faults", &min_faults, 0, UINT64_MAX),
                             CB_TEXT("node", 0, &node),
                             CB_OUTPUT("json", &json),
                             CB_END};
  const cb_cli_spec spec = {"campaign", campaign_usage, opts, 0, 0, NULL};
  int first, prc = cbt_parse(&spec, argc, argv, &first);
  if (prc != CB_CLI_PARSED) return prc;
  if (c.programs == UINT64_MAX) {
    if (cbt_rank == 0) cb_cli_error("campaign", "--programs is needed (every rank must know the programs)");
    return CB_CLI_USAGE;
  }
  if (exchanges == UINT64_MAX) exchanges = c.programs / 10;
  if (shared == UINT64_MAX) shared = exchanges / 2;
  uint64_t shared_run = cbt_nranks > 1 ? shared : 0; /* none on one rank */
  if (node && setenv("CUBERT_HOST_NODE", node, 1) != 0) {
    if (cbt_rank == 0) cb_cli_error("campaign", "--node: cannot set CUBERT_HOST_NODE");
    return CB_CLI_FAILED;
  }
  if (!cbt_open_outputs(&spec)) return CB_CLI_FAILED;
  c.shard = (uint64_t)cbt_rank;
  c.shards = (uint64_t)cbt_nranks;
  c.progress = cbt_rank == 0 ? stderr : NULL;
  c.minimize = 1;
  cb_fi_campaign_report r;
  memset(&r, 0, sizeof r);
  cubert_status st = c.programs ? cb_fi_campaign_run(&c, &r) : CUBERT_OK;
  uint64_t xmine[XC_COUNT] = {0}, xall[XC_COUNT] = {0}, smine[XC_COUNT] = {0}, sall[XC_COUNT] = {0};
  double x0 = MPI_Wtime();
  xc_run(c.seed, exchanges, false, cbt_rank, cbt_nranks, xmine, stderr);
  xc_run(c.seed, shared_run, true, cbt_rank, cbt_nranks, smine, stderr);
  r.seconds += MPI_Wtime() - x0;
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
            cbt_rank, f->index, f->program_seed, f->program_seed, f->first ? f->first : "",
            f->shortest ? f->shortest : "");
  }
  double secs = r.seconds, slowest = 0;
  cb_fi_campaign_report_free(&r);
  MPI_Reduce(mine, all, C_COUNT, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(xmine, xall, XC_COUNT, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(smine, sall, XC_COUNT, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&secs, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  int rc = 0;
  if (cbt_rank == 0) {
    bool pass = all[C_VIOLATIONS] == 0 && all[C_HANG] == 0 && all[C_SETUP] == 0 &&
                all[C_PROGRAMS] == c.programs && xall[XC_VIOLATIONS] == 0 && xall[XC_PROGRAMS] == exchanges &&
                sall[XC_VIOLATIONS] == 0 && sall[XC_PROGRAMS] == shared_run &&
                all[C_INJECTED] + xall[XC_FAULTS] >= min_faults;
    node = getenv("CUBERT_HOST_NODE");
    printf("cubert-mpi campaign: seed %" PRIu64 ", %" PRIu64 " programs over %d rank%s%s%s; %.1f s (slowest rank)\n",
           c.seed, c.programs, cbt_nranks, cbt_nranks == 1 ? "" : "s", node ? ", node " : "", node ? node : "", slowest);
    /* the line that must not depend on the number of ranks */
    printf("counts: programs %" PRIu64 ", steps %" PRIu64 ", syncs added %" PRIu64 ", checks %" PRIu64
           ", faults %" PRIu64 " (",
           all[C_PROGRAMS], all[C_STEPS], all[C_SYNCS], all[C_READS], all[C_INJECTED]);
    for (int k = 0; k < CUBERT_FAULT_KIND_COUNT_; k++)
      printf("%s%s %" PRIu64, k ? ", " : "", cubert_fault_kind_name((cubert_fault_kind)k), all[C_KINDS + k]);
    printf("), violations %" PRIu64 " (", all[C_VIOLATIONS]);
    for (int k = 0; k < CB_FI_VIOLATION_KIND_COUNT; k++)
      printf("%s%s %" PRIu64, k ? ", " : "", cb_fi_violation_name((cb_fi_violation_kind)k), all[C_VKINDS + k]);
    printf("), devices lost %" PRIu64 ", leak checks skipped %" PRIu64 ", could not run %" PRIu64 ", hang %s",
           all[C_LOST], all[C_LEAKSKIP], all[C_SETUP], all[C_HANG] ? "yes" : "no");
    /* the send/receive programs, on the same line */
    print_exchanges("; exchanges", xall);
    printf("\n");
    /* the shared exchanges: the same whatever the number of ranks above one */
    if (cbt_nranks > 1) {
      print_exchanges("shared counts: exchanges", sall);
      printf(", through shared memory %" PRIu64 "\n", sall[XC_SHARED]);
    } else {
      printf("shared counts: none (one rank does not send to itself through shared memory)\n");
    }
    if (sall[XC_PROGRAMS] != shared_run)
      printf("only %" PRIu64 " of %" PRIu64 " shared exchanges ran\n", sall[XC_PROGRAMS], shared_run);
    if (all[C_INJECTED] + xall[XC_FAULTS] < min_faults)
      printf("only %" PRIu64 " faults injected, fewer than --min-faults %" PRIu64 "\n", all[C_INJECTED] + xall[XC_FAULTS],
             min_faults);
    printf("verdict: %s\n", pass ? "PASS" : "FAIL");
    rc = pass ? 0 : 1;
    if (json.file) {
      json_t *kinds = json_object(), *vk = json_object(), *xo = json_object(), *so = json_object();
      for (int k = 0; k < XC_COUNT; k++) json_object_set_new(xo, xc_name(k), json_integer((json_int_t)xall[k]));
      for (int k = 0; k < XC_COUNT; k++) json_object_set_new(so, xc_name(k), json_integer((json_int_t)sall[k]));
      for (int k = 0; k < CUBERT_FAULT_KIND_COUNT_; k++)
        json_object_set_new(kinds, cubert_fault_kind_name((cubert_fault_kind)k), json_integer((json_int_t)all[C_KINDS + k]));
      for (int k = 0; k < CB_FI_VIOLATION_KIND_COUNT; k++)
        json_object_set_new(vk, cb_fi_violation_name((cb_fi_violation_kind)k), json_integer((json_int_t)all[C_VKINDS + k]));
      json_t *o = json_pack("{s:I, s:I, s:i, s:I, s:I, s:I, s:o, s:I, s:o, s:I, s:b, s:s, s:f}", "seed",
                            (json_int_t)c.seed, "programs", (json_int_t)all[C_PROGRAMS], "ranks", cbt_nranks, "steps",
                            (json_int_t)all[C_STEPS], "checks", (json_int_t)all[C_READS], "faults_injected",
                            (json_int_t)all[C_INJECTED], "faults_by_kind", kinds, "violations",
                            (json_int_t)all[C_VIOLATIONS], "violations_by_kind", vk, "could_not_run",
                            (json_int_t)all[C_SETUP], "hang", all[C_HANG] != 0, "verdict", pass ? "PASS" : "FAIL",
                            "seconds", slowest);
      if (o) {
        json_object_set_new(o, "exchanges", xo);
        json_object_set_new(o, "shared_exchanges", so);
      } else {
        json_decref(xo);
        json_decref(so);
      }
      if (!o || json_dumpf(o, json.file, JSON_INDENT(2)) != 0 || fputc('\n', json.file) == EOF) {
        cb_cli_error("campaign", "--json: could not write %s", json.path);
        rc = 1;
      }
      json_decref(o);
    }
    if (!cb_cli_close_outputs(&spec)) rc = 1;
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return rc;
}

/* ------------------------------------------------------------ main */

/* `cubert-mpi bench` where the benchmarks are not built
 * (CUBERT_BUILD_BENCH=OFF): bench.c defines the real one. */
__attribute__((weak)) int cbt_bench(int argc, char **argv) {
  (void)argc;
  (void)argv;
  if (cbt_rank == 0)
    cb_cli_error("bench", "not built into this cubert-mpi (configured with -DCUBERT_BUILD_BENCH=OFF)");
  return CB_CLI_FAILED;
}

int main(int argc, char **argv) {
  cb_cli_set_program("cubert-mpi");
  if (argc < 2) {
    fputs("cubert-mpi: no command given\n", stderr);
    usage(stderr);
    return CB_CLI_USAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(stdout);
    return CB_CLI_OK;
  }
  const cb_cli_command *cmd = cb_cli_find(commands, NCOMMANDS, argv[1]);
  if (!cmd) { /* before MPI_Init: the same message from every rank */
    fprintf(stderr, "cubert-mpi: unknown %s '%s'\n", argv[1][0] == '-' ? "option" : "command", argv[1]);
    usage(stderr);
    return CB_CLI_USAGE;
  }
  /* The campaign's exchanges on MPI_COMM_WORLD model the wire path (the
   * runtime's faults at the sender's reads and the receiver's writes): they
   * go through MPI's messages even between ranks of one node. Its shared
   * exchanges run on a duplicate given to cubert_mpi_init with the shared
   * path on (mpi/tool/exchange.c). */
  if (cmd->run == cbt_campaign) setenv("CUBERT_MPI_IPC", "off", 1);
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &cbt_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &cbt_nranks);
  if (cubert_mpi_init(MPI_COMM_WORLD) != CUBERT_OK) {
    fprintf(stderr, "cubert-mpi: %s\n", cubert_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int rc = cmd->run(argc - 1, argv + 1);
  cubert_mpi_finalize(MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
