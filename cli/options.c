/* cli/options.c: the shared option parser, outputs opened before work, the
 * subcommand tables and the environment list (cli/options.h); with
 * cb_cli_usage_error and cb_cli_parse_uint of cli/commands.h, the static
 * library cubert_cli_options that every tool links. */
#include "cli/options.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"

#define MAX_OPTS 48

static const char *program = "cubert";

void cb_cli_set_program(const char *name) { program = name ? name : "cubert"; }
const char *cb_cli_program(void) { return program; }

void cb_cli_error(const char *command, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s %s: ", program, command);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static bool is_choice(const char *choices, const char *value) {
  size_t n = strlen(value);
  for (const char *p = choices; *p;) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && strncmp(p, value, n) == 0) return true;
    if (!bar) break;
    p = bar + 1;
  }
  return false;
}

/* ------------------------------------------------------------ outputs */

static cb_cli_output *output_of(const cb_cli_opt *o) {
  return o->kind == CB_OPT_OUTPUT ? (cb_cli_output *)o->value : NULL;
}

/* At most one output may be `-`; *dash is it (NULL: none). False, with a
 * message naming both options, when two are. */
static bool one_stdout(const cb_cli_spec *spec, const cb_cli_opt **dash) {
  *dash = NULL;
  for (const cb_cli_opt *o = spec->opts; o->name; o++) {
    cb_cli_output *out = output_of(o);
    if (!out || !out->path || strcmp(out->path, "-") != 0) continue;
    if (*dash) {
      cb_cli_error(spec->name, "--%s and --%s both want stdout (-); give one of them a file", (*dash)->name, o->name);
      return false;
    }
    *dash = o;
  }
  return true;
}

/* Stores one option's value; false (with a message) when it is not valid. */
static bool store(const cb_cli_spec *spec, const cb_cli_opt *o, const char *arg) {
  uint64_t v = 0;
  switch (o->kind) {
  case CB_OPT_FLAG: *(bool *)o->value = true; return true;
  case CB_OPT_TEXT: *(const char **)o->value = arg; return true;
  case CB_OPT_OUTPUT: ((cb_cli_output *)o->value)->path = arg; return true;
  case CB_OPT_CHOICE:
    if (!is_choice(o->choices, arg)) {
      char list[128];
      snprintf(list, sizeof list, "%s", o->choices);
      for (char *p = list; *p; p++)
        if (*p == '|') *p = ',';
      cb_cli_error(spec->name, "--%s wants one of %s, not '%s'", o->name, list, arg);
      return false;
    }
    *(const char **)o->value = arg;
    return true;
  case CB_OPT_INT:
  case CB_OPT_UINT:
    if (!cb_cli_parse_uint(arg, o->max, &v) || v < o->min) {
      cb_cli_error(spec->name, "--%s wants a number from %llu to %llu, not '%s'", o->name,
                   (unsigned long long)o->min, (unsigned long long)o->max, arg);
      return false;
    }
    if (o->kind == CB_OPT_INT)
      *(int *)o->value = (int)v;
    else
      *(uint64_t *)o->value = v;
    return true;
  }
  return false;
}

int cb_cli_parse(const cb_cli_spec *spec, int argc, char **argv, int *first) {
  struct option longs[MAX_OPTS + 2];
  char shorts[2 * MAX_OPTS + 4] = ":h";
  size_t n = 0, s = 2;
  for (const cb_cli_opt *o = spec->opts; o && o->name; o++, n++) {
    if (n == MAX_OPTS) {
      cb_cli_error(spec->name, "too many options in its table (internal)");
      return CB_CLI_FAILED;
    }
    int has_arg = o->kind == CB_OPT_FLAG ? no_argument : required_argument;
    longs[n] = (struct option){o->name, has_arg, NULL, 256 + (int)n};
    if (o->short_name) {
      shorts[s++] = o->short_name;
      if (has_arg == required_argument) shorts[s++] = ':';
    }
  }
  shorts[s] = '\0';
  longs[n] = (struct option){"help", no_argument, NULL, 'h'};
  longs[n + 1] = (struct option){NULL, 0, NULL, 0};
  /* -h and --help print the usage wherever they appear (docs/cli.md), a bad
   * value or an unknown option before them included (`--reps=x --help`) */
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      spec->usage(stdout);
      return CB_CLI_OK;
    }
  optind = 0; /* glibc: a full reset, as the dispatcher may have parsed before */
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
    const cb_cli_opt *o = NULL;
    if (c == 'h') {
      spec->usage(stdout);
      return CB_CLI_OK;
    } else if (c >= 256) {
      o = &spec->opts[c - 256];
    } else if (c == '?' || c == ':') {
      const char *bad = argv[optind - 1];
      char shortopt[3] = {'-', (char)optopt, '\0'};
      if (optopt && optopt < 256 && strncmp(bad, "--", 2) != 0) bad = shortopt;
      if (c == ':') {
        cb_cli_error(spec->name, "%s wants a value", bad);
        fprintf(stderr, "`%s %s --help` lists the options.\n", program, spec->name);
        return CB_CLI_USAGE;
      }
      if (optopt >= 256 && optopt < 256 + (int)n) { /* glibc: a known flag given `=value` */
        cb_cli_error(spec->name, "--%s takes no value, not '%s'", spec->opts[optopt - 256].name, bad);
        fprintf(stderr, "`%s %s --help` lists the options.\n", program, spec->name);
        return CB_CLI_USAGE;
      }
      return cb_cli_usage_error(spec->name, "unknown option (or one that takes no value)", bad, spec->usage);
    } else {
      for (const cb_cli_opt *p = spec->opts; p->name; p++)
        if (p->short_name == c) o = p;
    }
    if (!o || !store(spec, o, optarg)) return CB_CLI_USAGE;
  }
  int operands = argc - optind;
  if (operands < spec->min_operands || (spec->max_operands >= 0 && operands > spec->max_operands)) {
    if (spec->max_operands == 0) return cb_cli_usage_error(spec->name, "unexpected argument", argv[optind], spec->usage);
    cb_cli_error(spec->name, "wants %s, got %d argument%s", spec->operands ? spec->operands : "other arguments",
                 operands, operands == 1 ? "" : "s");
    fprintf(stderr, "`%s %s --help` describes it.\n", program, spec->name);
    return CB_CLI_USAGE;
  }
  /* two outputs on stdout is a usage error (exit 2), found before any work */
  const cb_cli_opt *dash;
  if (!one_stdout(spec, &dash)) return CB_CLI_USAGE;
  *first = optind;
  return CB_CLI_PARSED;
}

int cb_cli_usage_error(const char *cmd, const char *what, const char *arg, void (*print_usage)(FILE *out)) {
  fprintf(stderr, "%s %s: %s '%s'\n", program, cmd, what, arg);
  print_usage(stderr);
  return CB_CLI_USAGE;
}

bool cb_cli_parse_uint(const char *text, uint64_t max, uint64_t *value) {
  if (text == NULL || *text < '0' || *text > '9') return false;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || v > max) return false;
  *value = v;
  return true;
}

/* ------------------------------------------------------------ outputs */

bool cb_cli_open_outputs(const cb_cli_spec *spec) {
  const cb_cli_opt *dash = NULL;
  if (!one_stdout(spec, &dash)) return false;
  for (const cb_cli_opt *o = spec->opts; o->name; o++) {
    cb_cli_output *out = output_of(o);
    if (!out || !out->path || o == dash) continue;
    out->file = fopen(out->path, "w");
    if (!out->file) {
      cb_cli_error(spec->name, "--%s: cannot write %s: %s", o->name, out->path, strerror(errno));
      cb_cli_close_outputs(spec);
      return false;
    }
  }
  if (dash) {
    /* The output keeps the real stdout; the text report moves to stderr. */
    fflush(stdout);
    int fd = dup(STDOUT_FILENO);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      cb_cli_error(spec->name, "--%s -: cannot use stdout: %s", dash->name, strerror(errno));
      if (f) fclose(f);
      else if (fd >= 0) close(fd);
      cb_cli_close_outputs(spec);
      return false;
    }
    output_of(dash)->file = f;
  }
  return true;
}

bool cb_cli_output_close(const char *command, const char *option, cb_cli_output *out) {
  if (!out->file) return true;
  bool ok = true, dash = strcmp(out->path, "-") == 0;
  if (dash) {
    fflush(stdout);
    fflush(out->file);
    if (dup2(fileno(out->file), STDOUT_FILENO) < 0) ok = false;
  }
  if (ferror(out->file) | fclose(out->file)) {
    cb_cli_error(command, "--%s: writing %s failed", option, dash ? "stdout" : out->path);
    ok = false;
  }
  out->file = NULL;
  return ok;
}

bool cb_cli_close_outputs(const cb_cli_spec *spec) {
  bool ok = true;
  for (const cb_cli_opt *o = spec->opts; o->name; o++)
    if (output_of(o) && !cb_cli_output_close(spec->name, o->name, output_of(o))) ok = false;
  return ok;
}

/* ------------------------------------------------------------ tables */

const cb_cli_command *cb_cli_find(const cb_cli_command *table, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(table[i].name, name) == 0) return &table[i];
  return NULL;
}

void cb_cli_list(FILE *out, const cb_cli_command *table, size_t n) {
  for (size_t i = 0; i < n; i++) fprintf(out, "  %-9s %s\n", table[i].name, table[i].summary);
}

/* Every variable the library and the tool read (tests/cli_env.cmake checks
 * this list against the sources' getenv calls, and README.md against it). */
static const struct {
  const char *name, *meaning;
} environment[] = {
    {"CUBERT_BACKENDS", "host, hip or a list such as hip,host, in device order\n"
     "                        (default: hip; host only when hip finds no device)"},
    {"CUBERT_LOG", "set, not 0: say on stderr which backends opened, and why none"},
    {"CUBERT_HOST_DEVICES", "simulated host devices, 1 to 64 (default 4, or the node's GPUs)"},
    {"CUBERT_HOST_MEMORY", "bytes per simulated host device (default 1 GiB)"},
    {"CUBERT_HOST_PEER_DENY", "host device pairs refused peer access, e.g. 0-2,1-3"},
    {"CUBERT_HOST_NODE", "host device layout: frontier, mi300x, pcie or FILE.xml"},
    {"CUBERT_TOPOLOGY", "an hwloc XML file read instead of this machine"},
    {"CUBERT_FAULTS", "fault rules for any program (docs/faultinj.md)"},
    {"CUBERT_CACHE_DIR", "compiled kernels (default ~/.cache/cubert)"},
    {"CUBERT_HIP_PIPE_FROM", "HIP: pageable transfers from this size use pinned chunks (reads 1M, writes 16M)"},
    {"CUBERT_HIP_STAGING_CHUNK", "HIP: bytes per pinned staging chunk (default 8M)"},
    {"CUBERT_HIP_STAGING_CHUNKS", "HIP: pinned staging chunks per device, 2 to 16 (default 8)"},
    {"CUBERT_HIP_COPY_THREADS", "HIP: threads of the staging copy (default 3/4 of the cores, at most 16)"},
    {"CUBERT_HIP_COPY_SPIN_US", "HIP: microseconds a staging copy thread spins before it sleeps (100)"},
    {"CUBERT_HIP_COPY_STREAM", "HIP: streaming stores in pipelined copies: 0 none, reads, all (default: reads, writes of one pass)"},
    {"CUBERT_HIP_PIPE_TRACE", "HIP: 1: one line on stderr per pipelined transfer, where its host time went"},
};

/* A name as wide as the column or wider goes on a line of its own: help2man
 * (the man page) needs two spaces between a name and its text to see an
 * entry, and merges one-space lines into the paragraph above. */
void cb_cli_print_environment(FILE *out) {
  for (size_t i = 0; i < sizeof environment / sizeof environment[0]; i++) {
    if (strlen(environment[i].name) >= 21)
      fprintf(out, "  %s\n  %-21s %s\n", environment[i].name, "", environment[i].meaning);
    else
      fprintf(out, "  %-21s %s\n", environment[i].name, environment[i].meaning);
  }
}

bool cb_cli_node_builtin(const char *node) {
  static const char *const names[] = {"frontier", "mi300x", "pcie"}; /* cb_host_node_names(), topology/host_node.c */
  for (size_t i = 0; node && i < sizeof names / sizeof names[0]; i++)
    if (strcmp(node, names[i]) == 0) return true;
  return false;
}

bool cb_cli_node_ok(const char *command, const char *node) {
  struct stat sb;
  if (!node || strchr(node, '/') || strchr(node, '.') || stat(node, &sb) == 0 || cb_cli_node_builtin(node)) return true;
  cb_cli_error(command, "--node wants frontier, mi300x, pcie or the path of an hwloc XML file, not '%s'", node);
  return false;
}
