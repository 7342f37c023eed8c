/* bench/cli_bench.c: `cubert bench`, the front door of the benchmarks
 * (cli/commands.h): peer bandwidth, the runtime's own costs, and redrawing
 * the pictures of a saved run. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/bench_numa.h"
#include "cli/commands.h"
#include "cli/options.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: cubert bench [<what>] [options]\n"
          "\n"
          "Without <what>, `cubert bench [options]` runs `cubert bench peer [options]`.\n"
          "\n"
          "  peer      peer bandwidth and latency: the all-pairs matrix, a size sweep, host\n"
          "            transfers; copy engine and kernel copies, peer access on and off;\n"
          "            each figure beside the raw baseline (plain HIP; memcpy on the host)\n"
          "  runtime   the runtime's own costs: pool allocation against hipMalloc, the\n"
          "            launch path against hipModuleLaunchKernel, the ledger with tainted\n"
          "            ranges, the fault layer present against absent\n"
          "  strided   strided copies (2-D, 3-D; cubert_handle_*_strided and the\n"
          "            built-in cubert_copy_strided) beside hipMemcpy2D/3DAsync\n"
          "  numa      host<->device bandwidth from host memory on each NUMA node, the\n"
          "            device's local node(s) marked\n"
          "  plot      draw the SVG pictures of a saved `bench peer --json` run:\n"
          "            cubert bench plot RUN.json PREFIX\n"
          "  mpi       bandwidth and latency between MPI ranks through cubert's send and\n"
          "            receive, beside plain MPI: runs `cubert-mpi bench` (the optional MPI\n"
          "            component's tool), so start it as `mpirun -n 2 cubert bench mpi`\n"
          "\n"
          "`cubert bench <what> --help` lists the options. docs/bench.md explains the\n"
          "columns. The measurements run on the host backend (--quick for CI) and on\n"
          "HIP devices.\n");
}

static void plot_usage(FILE *out) {
  fprintf(out, "usage: cubert bench plot RUN.json PREFIX\n"
               "\n"
               "Writes PREFIX-matrix.svg and PREFIX-sweep.svg from a `cubert bench peer --json` file\n"
               "(RUN.json may be - for stdin).\n");
}

int cb_bench_plot_main(int argc, char **argv) {
  const cb_cli_opt opts[] = {CB_END};
  const cb_cli_spec spec = {"bench plot", plot_usage, opts, 2, 2, "RUN.json PREFIX"};
  int first, rc = cb_cli_parse(&spec, argc, argv, &first);
  if (rc != CB_CLI_PARSED) return rc;
  const char *run = argv[first], *prefix = argv[first + 1];
  if (!cb_bench_svg_available()) {
    fprintf(stderr, "cubert bench plot: this cubert was built without cairo (libcairo2-dev)\n");
    return CB_CLI_FAILED;
  }
  if (!cb_bench_svg_writable(prefix, "bench plot")) return CB_CLI_FAILED;
  struct stat st;
  if (strcmp(run, "-") != 0 && stat(run, &st) == 0 && S_ISDIR(st.st_mode)) { /* jansson: "near end of file" */
    fprintf(stderr, "cubert bench plot: cannot read %s: %s\n", run, strerror(EISDIR));
    return CB_CLI_FAILED;
  }
  json_error_t jerr;
  json_t *doc = strcmp(run, "-") == 0 ? json_loadf(stdin, 0, &jerr) : json_load_file(run, 0, &jerr);
  if (!doc) {
    if (jerr.line > 0)
      fprintf(stderr, "cubert bench plot: %s:%d: not JSON: %s\n", run, jerr.line, jerr.text);
    else
      fprintf(stderr, "cubert bench plot: cannot read %s: %s\n", run, strerror(errno));
    return CB_CLI_FAILED;
  }
  const char *tool = json_string_value(json_object_get(doc, "tool"));
  if (!tool || strcmp(tool, "cubert bench peer") != 0) {
    fprintf(stderr, "cubert bench plot: %s is not the JSON of `cubert bench peer`\n", run);
    json_decref(doc);
    return CB_CLI_FAILED;
  }
  bool ok = cb_bench_svg_write(doc, prefix, stdout);
  json_decref(doc);
  return ok ? CB_CLI_OK : CB_CLI_FAILED;
}

/* `cubert bench mpi ...` is `cubert-mpi bench ...`: the MPI component is
 * optional and this tool never links MPI, so it replaces itself with the
 * MPI tool (same process, so mpirun's rank environment carries over): the
 * one installed beside this program, else the one of this build tree, else
 * the first on PATH. */
static int bench_mpi(int argc, char **argv) {
  char **args = calloc((size_t)argc + 2, sizeof *args);
  if (!args) {
    fputs("cubert bench mpi: out of memory\n", stderr);
    return CB_CLI_FAILED;
  }
  args[0] = "cubert-mpi";
  args[1] = "bench";
  for (int i = 1; i < argc; i++) args[i + 1] = argv[i];
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash && (size_t)(slash - self) + sizeof "/cubert-mpi" <= sizeof self) {
      strcpy(slash, "/cubert-mpi");
      execv(self, args);
    }
  }
#ifdef CB_MPI_TOOL_BUILD
  execv(CB_MPI_TOOL_BUILD, args);
#endif
  execvp("cubert-mpi", args);
  fprintf(stderr,
          "cubert bench mpi: no cubert-mpi beside cubert or on PATH (%s): this cubert was built "
          "without its MPI component (configure with -DCUBERT_MPI=ON where an MPI-3 library is "
          "installed; docs/cluster.md)\n",
          strerror(errno));
  free(args);
  return CB_CLI_FAILED;
}

static const cb_cli_command benchmarks[] = {
    {"peer", cb_bench_peer_main, "peer bandwidth and latency (the default)"},
    {"runtime", cb_bench_runtime_main, "the runtime's own costs"},
    {"strided", cb_bench_strided_main, "strided copies beside hipMemcpy2D/3DAsync"},
    {"numa", cb_bench_numa_main, "host<->device bandwidth per NUMA node"},
    {"plot", cb_bench_plot_main, "the SVG pictures of a saved run"},
    {"mpi", bench_mpi, "bandwidth and latency between MPI ranks (cubert-mpi bench)"},
};

int cb_cli_bench(int argc, char **argv) {
  if (argc < 2 || (argv[1][0] == '-' && strcmp(argv[1], "-h") != 0 && strcmp(argv[1], "--help") != 0)) {
    /* `cubert bench [options]` is `cubert bench peer [options]`: what a
     * batch job asking for "the benchmark" wants */
    argv[0] = "peer";
    return cb_bench_peer_main(argc, argv);
  }
  const char *what = argv[1];
  if (strcmp(what, "--help") == 0 || strcmp(what, "-h") == 0 || strcmp(what, "help") == 0) {
    usage(stdout);
    return CB_CLI_OK;
  }
  const cb_cli_command *b = cb_cli_find(benchmarks, sizeof benchmarks / sizeof benchmarks[0], what);
  if (b) return b->run(argc - 1, argv + 1);
  fprintf(stderr, "cubert bench: unknown benchmark '%s' (peer, runtime, strided, numa, plot or mpi)\n", what);
  usage(stderr);
  return CB_CLI_USAGE;
}
