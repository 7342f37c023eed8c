/* cli/options.h: the one option parser of the `cubert` tool (internal, never
 * installed). Every subcommand describes its options in a table and calls
 * cb_cli_parse, so all of them behave alike:
 *
 *   -h and --help          print the command's usage on stdout, exit 0
 *   --opt value, --opt=value, and -x value where an option has a short name
 *   FILE options take `-`  for stdout (the text report then goes to stderr)
 *   errors                 "cubert <command>: --opt wants ..., not 'x'" and
 *                          exit status 2 (CB_CLI_USAGE)
 *
 * Other tools use it too (`cubert-mpi`, mpi/tool/): it is the static library
 * cubert_cli_options (cli/CMakeLists.txt), and cb_cli_set_program() names the
 * tool its messages begin with.
 *
 * Outputs are opened by cb_cli_open_outputs before any work starts, so a path
 * that cannot be written fails at once, not after a long measurement. */
#ifndef CUBERT_CLI_OPTIONS_H
#define CUBERT_CLI_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef enum cb_cli_opt_kind {
  CB_OPT_FLAG,   /* bool *: set to true */
  CB_OPT_TEXT,   /* const char **: the value as given */
  CB_OPT_CHOICE, /* const char **: one of `choices` ("host|hip") */
  CB_OPT_INT,    /* int *: a decimal number from min to max */
  CB_OPT_UINT,   /* uint64_t *: a decimal number from min to max */
  CB_OPT_OUTPUT, /* cb_cli_output *: a file to write, `-` for stdout */
} cb_cli_opt_kind;

/* A file an option names; opened by cb_cli_open_outputs. */
typedef struct cb_cli_output {
  const char *path; /* NULL: not asked for */
  FILE *file;       /* open after cb_cli_open_outputs (stdout's stream for `-`) */
} cb_cli_output;

typedef struct cb_cli_opt {
  const char *name;    /* long name, without "--" */
  char short_name;     /* 0: none */
  cb_cli_opt_kind kind;
  void *value;         /* where the value goes (type by kind) */
  uint64_t min, max;   /* CB_OPT_INT, CB_OPT_UINT */
  const char *choices; /* CB_OPT_CHOICE: "a|b|c" */
} cb_cli_opt;

/* Table entries (designated, so the table reads as a list of options). */
#define CB_FLAG(n, s, p) {.name = (n), .short_name = (s), .kind = CB_OPT_FLAG, .value = (p)}
#define CB_TEXT(n, s, p) {.name = (n), .short_name = (s), .kind = CB_OPT_TEXT, .value = (p)}
#define CB_CHOICE(n, p, c) {.name = (n), .kind = CB_OPT_CHOICE, .value = (p), .choices = (c)}
#define CB_INT(n, p, lo, hi) {.name = (n), .kind = CB_OPT_INT, .value = (p), .min = (lo), .max = (hi)}
#define CB_UINT(n, p, lo, hi) {.name = (n), .kind = CB_OPT_UINT, .value = (p), .min = (lo), .max = (hi)}
#define CB_OUTPUT(n, p) {.name = (n), .kind = CB_OPT_OUTPUT, .value = (p)}
#define CB_END {.name = NULL}

/* A command's options and operands: `name` is how messages begin after
 * "cubert " ("bench peer"); `opts` ends with an entry whose name is NULL. */
typedef struct cb_cli_spec {
  const char *name;
  void (*usage)(FILE *out);
  const cb_cli_opt *opts;
  int min_operands, max_operands; /* max -1: any number */
  const char *operands;           /* named in the message when the count is wrong */
} cb_cli_spec;

/* Returned by cb_cli_parse when the command should run. */
#define CB_CLI_PARSED (-1)

/* Parses argv[1..argc-1] (options and operands may be mixed; `--` ends the
 * options). Returns CB_CLI_PARSED with the operands at argv[*first ..
 * argc-1]; CB_CLI_OK after printing the usage for -h/--help; CB_CLI_USAGE
 * after a message on stderr (a bad option or value, a wrong operand count,
 * two CB_OPT_OUTPUTs given as `-`). */
int cb_cli_parse(const cb_cli_spec *spec, int argc, char **argv, int *first);

/* Opens every CB_OPT_OUTPUT of `spec` that was given, for writing. At most one
 * may be `-`: it gets the process's stdout and what the command prints on
 * stdout afterwards goes to stderr. False, with a message naming the option
 * and the path, when one cannot be opened (nothing is left open then). */
bool cb_cli_open_outputs(const cb_cli_spec *spec);

/* Closes what cb_cli_open_outputs opened; false, with a message, when a
 * write or close failed. */
bool cb_cli_close_outputs(const cb_cli_spec *spec);

/* Closes one output (what cb_cli_close_outputs does for each), for commands
 * whose option table is gone by then; `option` is the long name. */
bool cb_cli_output_close(const char *command, const char *option, cb_cli_output *out);

/* The tool messages begin with: "cubert" unless cb_cli_set_program() named
 * another ("cubert-mpi"). `name` must outlive the process's parsing. */
void cb_cli_set_program(const char *name);
const char *cb_cli_program(void);

/* Prints "cubert <command>: <message>" on stderr (the program's name
 * instead of "cubert" where one was set). */
void cb_cli_error(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A table of subcommands and the lookup every dispatcher uses. */
typedef struct cb_cli_command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} cb_cli_command;

const cb_cli_command *cb_cli_find(const cb_cli_command *table, size_t n, const char *name);

/* Prints "  name      summary" per entry. */
void cb_cli_list(FILE *out, const cb_cli_command *table, size_t n);

/* --node's value (topo, faultinj): a built-in node (frontier, mi300x, pcie)
 * or the path of an hwloc XML file. A bare word (no '/' or '.') that is
 * neither a built-in node nor a file is a bad value: false, after a message
 * naming --node, what it takes and the value (the caller exits 2). A path
 * is left to the load, which says why it cannot be read (exit 1, as for any
 * file). */
bool cb_cli_node_ok(const char *command, const char *node);
/* Whether `node` names a built-in node (frontier, mi300x, pcie). */
bool cb_cli_node_builtin(const char *node);

/* The environment variables cubert reads, as `cubert --help` and the README
 * list them. */
void cb_cli_print_environment(FILE *out);

#endif
