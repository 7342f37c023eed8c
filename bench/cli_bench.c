/* bench/cli_bench.c: `cubert bench`, the front door of the benchmarks
 * (cli/commands.h): peer bandwidth, the runtime's own costs, and redrawing
 * the pictures of a saved run. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/bench_numa.h"
#include "cli/commands.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: cubert bench <what> [options]\n"
          "\n"
          "  peer      peer bandwidth and latency: the all-pairs matrix, a size sweep, host\n"
          "            transfers; copy engine and kernel copies, peer access on and off;\n"
          "            each figure beside the raw baseline (plain HIP; memcpy on the host)\n"
          "  runtime   the runtime's own costs: pool allocation against hipMalloc, the\n"
          "            launch path against hipModuleLaunchKernel, the ledger with tainted\n"
          "            ranges, the fault layer present against absent\n"
          "  numa      host<->device bandwidth from host memory on each NUMA node, the\n"
          "            device's local node(s) marked\n"
          "  plot      draw the SVG pictures of a saved `bench peer --json` run:\n"
          "            cubert bench plot RUN.json PREFIX\n"
          "\n"
          "`cubert bench <what> --help` lists the options. docs/bench.md explains the\n"
          "columns. Both run on the host backend (--quick for CI) and on HIP devices.\n");
}

int cb_bench_plot_main(int argc, char **argv) {
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: cubert bench plot RUN.json PREFIX\n"
           "Writes PREFIX-matrix.svg and PREFIX-sweep.svg from a `cubert bench peer --json` file.\n");
    return CB_CLI_OK;
  }
  if (argc != 3) {
    fprintf(stderr, "usage: cubert bench plot RUN.json PREFIX\n");
    return CB_CLI_USAGE;
  }
  if (!cb_bench_svg_available()) {
    fprintf(stderr, "cubert bench plot: this cubert was built without cairo (libcairo2-dev)\n");
    return CB_CLI_FAILED;
  }
  json_error_t jerr;
  json_t *doc = json_load_file(argv[1], 0, &jerr);
  if (!doc) {
    fprintf(stderr, "cubert bench plot: %s:%d: %s\n", argv[1], jerr.line, jerr.text);
    return CB_CLI_FAILED;
  }
  if (strcmp(json_string_value(json_object_get(doc, "tool")) ? json_string_value(json_object_get(doc, "tool")) : "",
             "cubert bench peer") != 0) {
    fprintf(stderr, "cubert bench plot: %s is not the JSON of `cubert bench peer`\n", argv[1]);
    json_decref(doc);
    return CB_CLI_FAILED;
  }
  bool ok = cb_bench_svg_write(doc, argv[2], stdout);
  json_decref(doc);
  return ok ? CB_CLI_OK : CB_CLI_FAILED;
}

int cb_cli_bench(int argc, char **argv) {
  if (argc < 2) {
    fputs("cubert bench: say what to measure: peer, runtime, numa or plot\n", stderr);
    usage(stderr);
    return CB_CLI_USAGE;
  }
  const char *what = argv[1];
  if (strcmp(what, "--help") == 0 || strcmp(what, "-h") == 0 || strcmp(what, "help") == 0) {
    usage(stdout);
    return CB_CLI_OK;
  }
  if (strcmp(what, "peer") == 0) return cb_bench_peer_main(argc - 1, argv + 1);
  if (strcmp(what, "runtime") == 0) return cb_bench_runtime_main(argc - 1, argv + 1);
  if (strcmp(what, "plot") == 0) return cb_bench_plot_main(argc - 1, argv + 1);
  if (strcmp(what, "numa") == 0) return cb_bench_numa_main(argc - 1, argv + 1);
  fprintf(stderr, "cubert bench: unknown benchmark '%s'\n", what);
  usage(stderr);
  return CB_CLI_USAGE;
}
