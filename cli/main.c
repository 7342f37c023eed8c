/* cli/main.c: the `cubert` tool's front door: global options, dispatch to
 * the subcommands of commands.h, weak "not built" defaults for subcommands
 * whose folder did not add its implementation, and shared helpers. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"

static const cb_cli_command commands[] = {
    {"info", cb_cli_info, "backends, devices, limits and memory pools (--json)"},
    {"topo", cb_cli_topo, "where each device sits: pair classes, NUMA nodes (hwloc)"},
    {"demo", cb_cli_demo, "a short tour of the runtime and its failure account (host backend)"},
    {"faultinj", cb_cli_faultinj, "fault-injection scenarios and campaigns, checked"},
    {"bench", cb_cli_bench, "peer bandwidth and runtime-overhead benchmarks"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out) {
  fprintf(out,
          "usage: cubert <command> [options]\n"
          "       cubert --help | --version\n"
          "\n"
          "commands:\n");
  cb_cli_list(out, commands, NCOMMANDS);
  fprintf(out,
          "\n"
          "`cubert <command> --help` (or `cubert help <command>`) describes a command's\n"
          "options. Every command takes -h/--help, --opt value and --opt=value, and - for\n"
          "stdout where it writes a file.\n"
          "\n"
          "exit status: 0 done, nothing wrong; 1 the run found a problem (a failed check,\n"
          "a violation, a call that failed, a file that could not be read or written);\n"
          "2 bad usage (an unknown option, a value out of range).\n"
          "\n"
          "environment (read by the library and the tool):\n");
  cb_cli_print_environment(out);
  fprintf(out, "\nDocumentation: the man page cubert(1), and README.md and docs/ (docs/guide.md:\n"
               "the C API) in share/doc/cubert.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs("cubert: no command given\n", stderr);
    usage(stderr);
    return CB_CLI_USAGE;
  }
  const char *arg = argv[1];
  if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
    usage(stdout);
    return CB_CLI_OK;
  }
  if (strcmp(arg, "--version") == 0 || strcmp(arg, "-V") == 0) {
    for (int i = 2; i < argc; i++) /* -h wherever it appears; anything else is an extra operand */
      if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
        usage(stdout);
        return CB_CLI_OK;
      }
    if (argc > 2) {
      fprintf(stderr, "cubert: --version takes nothing after it, not '%s'\n", argv[2]);
      return CB_CLI_USAGE;
    }
    printf("cubert %s\n", cubert_version());
    return CB_CLI_OK;
  }
  if (strcmp(arg, "help") == 0) {
    if (argc < 3) {
      usage(stdout);
      return CB_CLI_OK;
    }
    const cb_cli_command *cmd = cb_cli_find(commands, NCOMMANDS, argv[2]);
    if (cmd == NULL) {
      fprintf(stderr, "cubert: unknown command '%s'\n", argv[2]);
      usage(stderr);
      return CB_CLI_USAGE;
    }
    /* `cubert help bench peer` is `cubert bench peer --help`: every word
     * after `help`, then --help */
    char **help_argv = calloc((size_t)argc, sizeof *help_argv);
    if (help_argv == NULL) {
      fputs("cubert: out of memory\n", stderr);
      return CB_CLI_FAILED;
    }
    for (int i = 2; i < argc; i++) help_argv[i - 2] = argv[i];
    help_argv[argc - 2] = "--help";
    int rc = cmd->run(argc - 1, help_argv);
    free(help_argv);
    return rc;
  }
  const cb_cli_command *cmd = cb_cli_find(commands, NCOMMANDS, arg);
  if (cmd == NULL) {
    fprintf(stderr, "cubert: unknown %s '%s'\n", arg[0] == '-' ? "option" : "command", arg);
    usage(stderr);
    return CB_CLI_USAGE;
  }
  return cmd->run(argc - 1, argv + 1);
}

/* ------------------------------------------------------------ defaults */

static int not_built(const char *name, const char *folder) {
  fprintf(stderr,
          "cubert %s: not built into this cubert (its implementation in %s/ was not "
          "compiled into the tool)\n",
          name, folder);
  return CB_CLI_FAILED;
}

__attribute__((weak)) int cb_cli_info(int argc, char **argv) { return not_built("info", "cli"); }
__attribute__((weak)) int cb_cli_demo(int argc, char **argv) { return not_built("demo", "cli"); }
__attribute__((weak)) int cb_cli_topo(int argc, char **argv) {
  return not_built("topo", "topology");
}
__attribute__((weak)) int cb_cli_faultinj(int argc, char **argv) {
  return not_built("faultinj", "faultinj");
}
__attribute__((weak)) int cb_cli_bench(int argc, char **argv) {
  return not_built("bench", "bench");
}

/* ------------------------------------------------------------ helpers */

const char *cb_cli_bytes(uint64_t bytes, char *buf, size_t capacity) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  size_t u = 0;
  double v = (double)bytes;
  while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1024.0;
    u++;
  }
  if (u == 0)
    snprintf(buf, capacity, "%" PRIu64 " B", bytes);
  else if (v == (double)(uint64_t)v)
    snprintf(buf, capacity, "%.0f %s", v, units[u]);
  else
    snprintf(buf, capacity, "%.1f %s", v, units[u]);
  return buf;
}

int cb_cli_fail(const char *cmd, const char *what, cubert_status status) {
  fprintf(stderr, "cubert %s: %s failed: %s: %s\n", cmd, what, cubert_status_name(status),
          cubert_last_error_message());
  return CB_CLI_FAILED;
}
