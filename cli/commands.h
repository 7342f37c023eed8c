/* cli/commands.h: the subcommands of the `cubert` tool and the helpers they
 * share (internal, never installed).
 *
 * Each subcommand is `int cb_cli_<name>(int argc, char **argv)`: argv[0] is
 * the subcommand's name, the rest its arguments. It returns the process exit
 * status: 0 done, 1 the work failed (a cubert call, a check), 2 bad usage
 * (message on stderr). `--help` prints its usage on stdout and returns 0.
 * Subcommands describe their options in a table and parse them with
 * cb_cli_parse (cli/options.h), so every command takes -h, --opt=value and
 * `-` for stdout alike; docs/cli.md is the user's side of it.
 *
 * Where each one lives:
 *   info      cli/info.c       backends, devices, limits, memory pools, --json
 *   demo      cli/demo.c       a short tour of the runtime on the host backend
 *   topo      topology/        device pairs and NUMA placement
 *   faultinj  faultinj/        scenarios and campaigns
 *   bench     bench/           peer bandwidth and runtime overhead
 * cli/main.c defines a weak default of each that prints "not built", so the
 * tool always links. A folder that implements one adds its file to the tool,
 * not to the library (a weak definition in the executable would keep the
 * linker from pulling a strong one out of libcubert.a):
 *
 *   set_property(GLOBAL APPEND PROPERTY CUBERT_CLI_SOURCES
 *                ${CMAKE_CURRENT_SOURCE_DIR}/cli_bench.c)
 *   set_property(GLOBAL APPEND PROPERTY CUBERT_CLI_LIBS m)   # if it needs any
 *
 * The tool links cubert_static, so cb_ internals are reachable from there. */
#ifndef CUBERT_CLI_COMMANDS_H
#define CUBERT_CLI_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cubert/cubert.h"

int cb_cli_info(int argc, char **argv);
int cb_cli_topo(int argc, char **argv);
int cb_cli_faultinj(int argc, char **argv);
int cb_cli_bench(int argc, char **argv);
int cb_cli_demo(int argc, char **argv);

/* Exit statuses every subcommand uses. */
enum { CB_CLI_OK = 0, CB_CLI_FAILED = 1, CB_CLI_USAGE = 2 };

/* "1.5 GiB", "64 KiB", "512 B" into buf; returns buf. */
const char *cb_cli_bytes(uint64_t bytes, char *buf, size_t capacity);

/* Prints "cubert <cmd>: <what> failed: STATUS_NAME: <last error message>"
 * on stderr; returns CB_CLI_FAILED. */
int cb_cli_fail(const char *cmd, const char *what, cubert_status status);

/* The tail of every option parser: prints "cubert <cmd>: <what> '<arg>'"
 * (the tool's name, cb_cli_set_program) and the command's usage on stderr;
 * returns CB_CLI_USAGE. This and cb_cli_parse_uint are in cli/options.c. */
int cb_cli_usage_error(const char *cmd, const char *what, const char *arg, void (*print_usage)(FILE *out));

/* Parses a non-negative decimal integer option value; false when `text` is
 * not one (or exceeds `max`). */
bool cb_cli_parse_uint(const char *text, uint64_t max, uint64_t *value);

#endif
