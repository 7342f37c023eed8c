/* tools/faultinj/cli_faultinj.c: `cubert faultinj`, the scenario suite, scenario
 * files and seeded campaigns, each checked against the model of
 * docs/failures.md; a summary on the terminal, JSON on request, a non-zero
 * exit status on any violation. Part of the cubert tool, not of the library. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/commands.h"
#include "tools/faultinj/campaign.h"
#include "tools/faultinj/scenario.h"

#define DEFAULT_CHECK_FAULTS 2000

static void usage(FILE *f) {
  fprintf(f,
          "usage: cubert faultinj [COMMAND] [options]\n"
          "\n"
          "Proves the failure account of docs/failures.md under injected faults: every\n"
          "program runs on a fresh runtime while a model of every buffer says what each\n"
          "byte must hold and which failure must taint it; any difference is a violation\n"
          "(STALE READ, FALSE TAINT, WRONG CAUSE, WRONG STATUS, LEAK, HANG, EXPECTATION).\n"
          "\n"
          "commands:\n"
          "  (none)            the scenario suite, then a short campaign (%d faults)\n"
          "  suite             the built-in scenario suite, on one device pair per class\n"
          "  run [FILE...]     scenario files (docs/faultinj.md); no file: the suite\n"
          "  campaign          seeded random programs with seeded random faults\n"
          "  list              the built-in scenarios\n"
          "  show NAME         print a built-in scenario file\n"
          "\n"
          "options:\n"
          "  --node NAME|FILE  host devices laid out as a simulated node (frontier, mi300x,\n"
          "                    pcie): sets CUBERT_HOST_NODE\n"
          "  --backend B       host (default) or hip\n"
          "  --json FILE       the whole report as JSON (- for stdout)\n"
          "  --timeout MS      a step that takes longer is a HANG (default 10000)\n"
          "  --only TEXT       scenarios whose name contains TEXT\n"
          "  --trace           every step, injection and added sync, on stdout\n"
          "  -v, --verbose     one line per scenario run on stderr\n"
          "campaign options:\n"
          "  --seed S          campaign seed (default 1)\n"
          "  --faults N        stop once N faults were injected (default 10000)\n"
          "  --programs N      stop after N programs\n"
          "  --devices D       devices per program, 1 to 8 (default 4)\n"
          "  --streams S       streams per device (default 2)\n"
          "  --steps N         steps per program (default 32)\n"
          "  --replay SEED     run the one program of that seed, print it and its log\n"
          "  --print           with --replay: print the program only\n"
          "\n"
          "Exit status: 0 no violation; 1 a violation (or a run that could not start);\n"
          "2 bad usage.\n",
          DEFAULT_CHECK_FAULTS);
}

/* The human-readable summary: stdout, or stderr when JSON goes to stdout. */
static FILE *txt;

typedef struct opts {
  const char *node, *backend, *json, *only;
  uint32_t timeout_ms;
  bool trace, verbose, print;
  uint64_t seed, faults, programs, replay;
  bool has_replay;
  int devices, streams, steps;
} opts;

static const char *fault_key(int k) { return cubert_fault_kind_name((cubert_fault_kind)k); }

static json_t *kinds_json(const uint64_t *by_kind) {
  json_t *o = json_object();
  for (int k = 0; k < CUBERT_FAULT_KIND_COUNT_; k++) json_object_set_new(o, fault_key(k), json_integer((json_int_t)by_kind[k]));
  return o;
}

static json_t *violations_json(const size_t *by) {
  json_t *o = json_object();
  for (int k = 0; k < CB_FI_VIOLATION_KIND_COUNT; k++)
    json_object_set_new(o, cb_fi_violation_name((cb_fi_violation_kind)k), json_integer((json_int_t)by[k]));
  return o;
}

static void print_faults(uint64_t injected, const uint64_t *by_kind) {
  fprintf(txt, "faults injected: %" PRIu64, injected);
  if (!injected) {
    fprintf(txt, " -- no fault was injected: nothing was proven under failure\n");
    return;
  }
  fprintf(txt, " (");
  bool first = true;
  for (int k = 0; k < CUBERT_FAULT_KIND_COUNT_; k++) {
    if (!by_kind[k]) continue;
    fprintf(txt, "%s%s %" PRIu64, first ? "" : ", ", fault_key(k), by_kind[k]);
    first = false;
  }
  fprintf(txt, ")\n");
}

static void print_violations(size_t total, const size_t *by) {
  fprintf(txt, "violations: %zu", total);
  if (total) {
    fprintf(txt, " (");
    bool first = true;
    for (int k = 0; k < CB_FI_VIOLATION_KIND_COUNT; k++) {
      if (!by[k]) continue;
      fprintf(txt, "%s%s %zu", first ? "" : ", ", cb_fi_violation_name((cb_fi_violation_kind)k), by[k]);
      first = false;
    }
    fprintf(txt, ")");
  }
  fprintf(txt, "\n");
}

static int write_json(const char *path, json_t *root) {
  int rc = 0;
  if (strcmp(path, "-") == 0) {
    rc = json_dumpf(root, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
  } else {
    rc = json_dump_file(root, path, JSON_INDENT(2));
  }
  if (rc != 0) fprintf(stderr, "cubert faultinj: could not write %s\n", path);
  return rc;
}

/* ------------------------------------------------------------ suites */

static bool run_failed(const cb_fi_scenario_run *r) {
  return !r->result.skipped && (r->status != CUBERT_OK || r->result.nviolations || r->result.setup_failed);
}

static void print_suite(const cb_fi_suite *suite, const cb_fi_suite_report *rep, const char *what) {
  fprintf(txt, "cubert faultinj %s: %zu scenario%s on %s", what, suite->n, suite->n == 1 ? "" : "s", rep->backend);
  const char *node = getenv("CUBERT_HOST_NODE");
  if (node && strcmp(rep->backend, "host") == 0) fprintf(txt, " (node %s)", node);
  fprintf(txt, ", pair classes:");
  for (size_t k = 0; k < rep->npairs; k++)
    fprintf(txt, " %s (%d-%d)", rep->pairs[k].pair_class, rep->pairs[k].devices[0], rep->pairs[k].devices[1]);
  fprintf(txt, "\n\n");
  /* scenario x class matrix */
  fprintf(txt, "  %-36s %-8s", "scenario", "rules");
  for (size_t k = 0; k < rep->npairs; k++) fprintf(txt, " %-8s", rep->pairs[k].pair_class);
  fprintf(txt, "\n");
  for (size_t i = 0; i < suite->n; i++) {
    const cb_fi_program *p = &suite->v[i];
    bool any = false;
    for (size_t j = 0; j < rep->nruns; j++) any |= rep->runs[j].program == p;
    if (!any) continue;
    fprintf(txt, "  %-36s %-8.8s", p->name, p->rules[0] ? p->rules : "-");
    for (size_t k = 0; k < rep->npairs; k++) {
      const char *cell = "";
      for (size_t j = 0; j < rep->nruns; j++) {
        const cb_fi_scenario_run *r = &rep->runs[j];
        if (r->program != p) continue;
        if (!p->fixed && strcmp(r->placement.pair_class, rep->pairs[k].pair_class) != 0) continue;
        if (p->fixed && k > 0) continue;
        cell = r->result.skipped ? "skip" : run_failed(r) ? "FAIL" : "ok";
        if (p->fixed) cell = r->result.skipped ? "skip" : run_failed(r) ? "FAIL(fixed)" : "ok(fixed)";
      }
      fprintf(txt, " %-8s", cell);
    }
    fprintf(txt, "\n");
  }
  fprintf(txt, "\nruns: %zu passed, %zu failed, %zu skipped; %.2f s\n", rep->passed, rep->failed, rep->skipped, rep->seconds);
  print_faults(rep->injected, rep->by_kind);
  print_violations(rep->violations, rep->by_violation);
  for (size_t j = 0; j < rep->nruns; j++) {
    const cb_fi_scenario_run *r = &rep->runs[j];
    if (r->result.setup_failed) fprintf(txt, "\n%s on %s could not run: %s\n", r->program->name, r->label, r->result.setup_error);
    for (size_t v = 0; v < r->result.nviolations; v++) fprintf(txt, "\n%s\n", r->result.violations[v].message);
  }
}

static json_t *suite_json(const cb_fi_suite_report *rep) {
  json_t *runs = json_array();
  for (size_t j = 0; j < rep->nruns; j++) {
    const cb_fi_scenario_run *r = &rep->runs[j];
    json_t *devs = json_array();
    for (int d = 0; d < r->program->devices && d < 8; d++) json_array_append_new(devs, json_integer(r->placement.devices[d]));
    json_t *vs = json_array();
    for (size_t v = 0; v < r->result.nviolations; v++)
      json_array_append_new(vs, json_pack("{s:s, s:i, s:i, s:s}", "kind",
                                          cb_fi_violation_name(r->result.violations[v].kind), "step",
                                          r->result.violations[v].step, "line", r->result.violations[v].line,
                                          "message", r->result.violations[v].message));
    json_array_append_new(
        runs, json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:I, s:I, s:o, s:o, s:f}", "scenario", r->program->name,
                        "source", r->program->source, "rules", r->program->rules, "pair_class",
                        r->placement.pair_class, "devices", devs,
                        "result", r->result.skipped ? "skip" : run_failed(r) ? "fail" : "pass", "steps",
                        (json_int_t)r->result.steps_run, "faults", (json_int_t)r->result.injected, "by_kind",
                        kinds_json(r->result.by_kind), "violations", vs, "seconds", r->result.seconds));
    if (r->result.skipped)
      json_object_set_new(json_array_get(runs, json_array_size(runs) - 1), "skip_reason", json_string(r->result.skip_reason));
  }
  json_t *pairs = json_array();
  for (size_t k = 0; k < rep->npairs; k++)
    json_array_append_new(pairs, json_pack("{s:s, s:i, s:i}", "class", rep->pairs[k].pair_class, "a",
                                           rep->pairs[k].devices[0], "b", rep->pairs[k].devices[1]));
  return json_pack("{s:s, s:o, s:I, s:I, s:I, s:I, s:o, s:I, s:o, s:b, s:f, s:o}", "backend", rep->backend, "pairs",
                   pairs, "passed", (json_int_t)rep->passed, "failed", (json_int_t)rep->failed, "skipped",
                   (json_int_t)rep->skipped, "faults_injected", (json_int_t)rep->injected, "faults_by_kind",
                   kinds_json(rep->by_kind), "violations", (json_int_t)rep->violations, "violations_by_kind",
                   violations_json(rep->by_violation), "hang", rep->hang, "seconds", rep->seconds, "runs", runs);
}

static void hang_exit(void) {
  /* a step never returned: its thread is stuck inside the runtime, so leave
   * without running exit handlers that might wait on it */
  fflush(stdout);
  fflush(stderr);
  _exit(CB_CLI_FAILED);
}

static int do_suite(const opts *o, int nfiles, char **files, const char *what, json_t **json_out) {
  cb_fi_suite suite = {0};
  char err[1024];
  cubert_status st = CUBERT_OK;
  if (nfiles == 0) {
    st = cb_fi_scenario_builtin(&suite, err, sizeof err);
  } else {
    for (int i = 0; i < nfiles && st == CUBERT_OK; i++) st = cb_fi_scenario_load(files[i], &suite, err, sizeof err);
  }
  if (st != CUBERT_OK) {
    fprintf(stderr, "cubert faultinj: %s\n", err);
    cb_fi_suite_free(&suite);
    return st == CUBERT_ERR_PARSE || st == CUBERT_ERR_IO ? CB_CLI_USAGE : CB_CLI_FAILED;
  }
  cb_fi_suite_config c = {0};
  c.backend = o->backend;
  c.timeout_ms = o->timeout_ms;
  c.trace = o->trace ? stdout : NULL;
  c.progress = o->verbose ? stderr : NULL;
  c.only = o->only;
  cb_fi_suite_report rep;
  if ((st = cb_fi_suite_run(&suite, &c, &rep, err, sizeof err)) != CUBERT_OK) {
    fprintf(stderr, "cubert faultinj: %s\n", err);
    cb_fi_suite_free(&suite);
    return CB_CLI_FAILED;
  }
  print_suite(&suite, &rep, what);
  int rc = rep.violations || rep.failed || rep.hang ? CB_CLI_FAILED : CB_CLI_OK;
  if (rep.hang) {
    fprintf(txt, "\nthe suite stopped at a HANG\n");
    hang_exit();
  }
  if (json_out) *json_out = suite_json(&rep);
  cb_fi_suite_report_free(&rep);
  cb_fi_suite_free(&suite);
  return rc;
}

/* ------------------------------------------------------------ campaigns */

static void campaign_config(const opts *o, cb_fi_campaign_config *c) {
  cb_fi_campaign_config_init(c);
  c->seed = o->seed;
  c->faults = o->faults;
  c->programs = o->programs;
  if (o->devices) c->gen.devices = o->devices;
  if (o->streams) c->gen.streams = o->streams;
  if (o->steps) c->gen.steps = o->steps;
  c->backend = o->backend;
  c->timeout_ms = o->timeout_ms;
  c->trace = o->trace ? stdout : NULL;
  c->progress = stderr;
}

static void print_campaign(const cb_fi_campaign_config *c, const cb_fi_campaign_report *r) {
  fprintf(txt, "cubert faultinj campaign: seed %" PRIu64 ", %d devices x %d streams on %s", c->seed, c->gen.devices,
         c->gen.streams, c->backend ? c->backend : "host");
  const char *node = getenv("CUBERT_HOST_NODE");
  if (node) fprintf(txt, " (node %s)", node);
  fprintf(txt, "\n\n");
  fprintf(txt, "programs: %" PRIu64 " (%" PRIu64 " steps, %" PRIu64 " syncs added by the checker, %" PRIu64
         " checks through the API); %.2f s\n",
         r->programs, r->steps, r->syncs_added, r->reads, r->seconds);
  print_faults(r->injected, r->by_kind);
  if (r->devices_lost)
    fprintf(txt, "devices lost: in %" PRIu64 " programs (their memory cannot be checked for leaks: %" PRIu64 " leak checks skipped)\n",
           r->devices_lost, r->leak_skipped);
  if (r->setup_failures) fprintf(txt, "programs that could not run: %" PRIu64 "\n", r->setup_failures);
  print_violations(r->violations, r->by_violation);
  for (size_t i = 0; i < r->nfailing; i++) {
    const cb_fi_failing *f = &r->failing[i];
    fprintf(txt, "\nprogram %" PRIu64 " (seed %" PRIu64 ", %zu violation%s; replay: cubert faultinj campaign --replay %" PRIu64
           " --devices %d --streams %d --steps %d):\n  %s\n",
           f->index, f->program_seed, f->nviolations, f->nviolations == 1 ? "" : "s", f->program_seed, c->gen.devices,
           c->gen.streams, c->gen.steps, f->first);
    if (f->shortest) {
      fprintf(txt, "  shortest failing program found (%zu of %zu steps; save it and `cubert faultinj run FILE`):\n\n%s",
             f->shortest_steps, f->original_steps, f->shortest);
      if (f->shortest_report) fprintf(txt, "  it shows: %s\n", f->shortest_report);
    }
  }
  if (r->hang) fprintf(txt, "\nthe campaign stopped at a HANG\n");
}

static json_t *campaign_json(const cb_fi_campaign_config *c, const cb_fi_campaign_report *r) {
  json_t *failing = json_array();
  for (size_t i = 0; i < r->nfailing; i++) {
    const cb_fi_failing *f = &r->failing[i];
    json_t *o = json_pack("{s:I, s:I, s:s, s:s, s:I, s:I}", "program", (json_int_t)f->index, "seed",
                          (json_int_t)f->program_seed, "kind", cb_fi_violation_name(f->kind), "report", f->first,
                          "violations", (json_int_t)f->nviolations, "steps", (json_int_t)f->original_steps);
    if (f->shortest) {
      json_object_set_new(o, "shortest_program", json_string(f->shortest));
      json_object_set_new(o, "shortest_steps", json_integer((json_int_t)f->shortest_steps));
    }
    if (f->shortest_report) json_object_set_new(o, "shortest_report", json_string(f->shortest_report));
    json_array_append_new(failing, o);
  }
  return json_pack("{s:I, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:o, s:I, s:o, s:I, s:I, s:b, s:f, s:o}", "seed",
                   (json_int_t)c->seed, "devices", c->gen.devices, "streams", c->gen.streams, "steps_per_program",
                   c->gen.steps, "programs", (json_int_t)r->programs, "steps", (json_int_t)r->steps, "checks",
                   (json_int_t)r->reads, "faults_injected", (json_int_t)r->injected, "faults_by_kind",
                   kinds_json(r->by_kind), "violations", (json_int_t)r->violations, "violations_by_kind",
                   violations_json(r->by_violation), "programs_with_device_lost", (json_int_t)r->devices_lost,
                   "leak_checks_skipped", (json_int_t)r->leak_skipped, "hang", r->hang, "seconds", r->seconds,
                   "failing", failing);
}

static int do_replay(const opts *o) {
  cb_fi_campaign_config c;
  campaign_config(o, &c);
  cb_fi_program p;
  if (!cb_fi_campaign_program(o->replay, &c.gen, &p)) return cb_cli_fail("faultinj", "making the program", CUBERT_ERR_OUT_OF_MEMORY);
  char *text = cb_fi_program_format(&p);
  fprintf(txt, "# program of seed %" PRIu64 " (%d devices, %d streams, %d steps)\n%s", o->replay, c.gen.devices,
         c.gen.streams, c.gen.steps, text ? text : "");
  free(text);
  if (o->print) {
    cb_fi_program_free(&p);
    return CB_CLI_OK;
  }
  cb_fi_run_config rc = {0};
  rc.backend = o->backend;
  rc.host_devices = getenv("CUBERT_HOST_NODE") ? 0 : c.gen.devices;
  rc.timeout_ms = o->timeout_ms;
  rc.trace = o->trace ? stdout : NULL;
  rc.label = o->backend ? o->backend : "host";
  cb_fi_result r;
  cubert_status st = cb_fi_run(&p, &rc, &r);
  fprintf(txt, "\ninjections:\n");
  for (size_t i = 0; i < r.nlog; i++) fprintf(txt, "  %s\n", r.log[i].message);
  if (!r.nlog) fprintf(txt, "  none: no fault was injected\n");
  fprintf(txt, "\n%zu steps, %" PRIu64 " faults injected, %zu violations%s%s\n", r.steps_run, r.injected, r.nviolations,
         r.setup_failed ? "; could not run: " : "", r.setup_failed ? r.setup_error : "");
  for (size_t i = 0; i < r.nviolations; i++) fprintf(txt, "\n%s\n", r.violations[i].message);
  int rc2 = st == CUBERT_OK && !r.nviolations && !r.setup_failed ? CB_CLI_OK : CB_CLI_FAILED;
  bool hang = r.hang;
  cb_fi_result_free(&r);
  cb_fi_program_free(&p);
  if (hang) hang_exit();
  return rc2;
}

static int do_campaign(const opts *o, json_t **json_out) {
  if (o->has_replay) return do_replay(o);
  cb_fi_campaign_config c;
  campaign_config(o, &c);
  if (!c.faults && !c.programs) c.faults = 10000;
  cb_fi_campaign_report r;
  cubert_status st = cb_fi_campaign_run(&c, &r);
  if (st != CUBERT_OK) return cb_cli_fail("faultinj", "the campaign", st);
  print_campaign(&c, &r);
  int rc = r.violations || r.setup_failures || r.hang ? CB_CLI_FAILED : CB_CLI_OK;
  if (r.hang) hang_exit();
  if (json_out) *json_out = campaign_json(&c, &r);
  cb_fi_campaign_report_free(&r);
  return rc;
}

/* ------------------------------------------------------------ list, show */

static int do_list(void) {
  cb_fi_suite suite = {0};
  char err[1024];
  if (cb_fi_scenario_builtin(&suite, err, sizeof err) != CUBERT_OK) {
    fprintf(stderr, "cubert faultinj: %s\n", err);
    return CB_CLI_FAILED;
  }
  fprintf(txt, "%-36s %-18s %-8s %s\n", "scenario", "file", "rules", "title");
  for (size_t i = 0; i < suite.n; i++) {
    const cb_fi_program *p = &suite.v[i];
    const char *file = strrchr(p->source, '/');
    fprintf(txt, "%-36s %-18s %-8s %s\n", p->name, file ? file + 1 : p->source, p->rules[0] ? p->rules : "-", p->title);
  }
  cb_fi_suite_free(&suite);
  return CB_CLI_OK;
}

static int do_show(const char *name) {
  for (size_t i = 0; i < cb_fi_scenario_builtin_count(); i++) {
    const char *file = cb_fi_scenario_builtin_name(i);
    size_t n = strlen(name);
    if (strcmp(file, name) == 0 || (strncmp(file, name, n) == 0 && strcmp(file + n, ".fi") == 0)) {
      fputs(cb_fi_scenario_builtin_text(i), stdout);
      return CB_CLI_OK;
    }
  }
  /* a scenario's name: print the file that holds it */
  cb_fi_suite suite = {0};
  char err[1024];
  if (cb_fi_scenario_builtin(&suite, err, sizeof err) == CUBERT_OK)
    for (size_t i = 0; i < suite.n; i++)
      if (strcmp(suite.v[i].name, name) == 0) {
        const char *file = strrchr(suite.v[i].source, '/');
        cb_fi_suite_free(&suite);
        return do_show(file ? file + 1 : name);
      }
  cb_fi_suite_free(&suite);
  fprintf(stderr, "cubert faultinj show: no built-in scenario or file `%s` (see `cubert faultinj list`)\n", name);
  return CB_CLI_USAGE;
}

/* ------------------------------------------------------------ main */

int cb_cli_faultinj(int argc, char **argv) {
  opts o = {0};
  o.seed = 1;
  txt = stdout;
  enum { O_NODE = 256, O_BACKEND, O_JSON, O_TIMEOUT, O_ONLY, O_TRACE, O_SEED, O_FAULTS, O_PROGRAMS, O_DEVICES,
         O_STREAMS, O_STEPS, O_REPLAY, O_PRINT };
  static const struct option longs[] = {
      {"help", no_argument, NULL, 'h'},       {"verbose", no_argument, NULL, 'v'},
      {"node", required_argument, NULL, O_NODE}, {"backend", required_argument, NULL, O_BACKEND},
      {"json", required_argument, NULL, O_JSON}, {"timeout", required_argument, NULL, O_TIMEOUT},
      {"only", required_argument, NULL, O_ONLY}, {"trace", no_argument, NULL, O_TRACE},
      {"seed", required_argument, NULL, O_SEED}, {"faults", required_argument, NULL, O_FAULTS},
      {"programs", required_argument, NULL, O_PROGRAMS}, {"devices", required_argument, NULL, O_DEVICES},
      {"streams", required_argument, NULL, O_STREAMS}, {"steps", required_argument, NULL, O_STEPS},
      {"replay", required_argument, NULL, O_REPLAY}, {"print", no_argument, NULL, O_PRINT},
      {NULL, 0, NULL, 0}};
  const char *cmd = NULL;
  int first = 1;
  if (argc > 1 && argv[1][0] != '-') {
    cmd = argv[1];
    first = 2;
  }
  /* getopt over the arguments after the command */
  int gargc = argc - first + 1;
  char **gargv = calloc((size_t)gargc + 1, sizeof *gargv);
  if (!gargv) return CB_CLI_FAILED;
  gargv[0] = argv[0];
  for (int i = first; i < argc; i++) gargv[i - first + 1] = argv[i];
  optind = 1;
  int c;
  uint64_t v;
  int rc = CB_CLI_OK;
  while (rc == CB_CLI_OK && (c = getopt_long(gargc, gargv, "hv", longs, NULL)) != -1) {
    switch (c) {
    case 'h':
      usage(stdout);
      free(gargv);
      return CB_CLI_OK;
    case 'v':
      o.verbose = true;
      break;
    case O_NODE:
      o.node = optarg;
      break;
    case O_BACKEND:
      if (strcmp(optarg, "host") != 0 && strcmp(optarg, "hip") != 0) {
        fprintf(stderr, "cubert faultinj: --backend: host or hip, not `%s`\n", optarg);
        rc = CB_CLI_USAGE;
      }
      o.backend = optarg;
      break;
    case O_JSON:
      o.json = optarg;
      break;
    case O_ONLY:
      o.only = optarg;
      break;
    case O_TRACE:
      o.trace = true;
      break;
    case O_PRINT:
      o.print = true;
      break;
    case O_TIMEOUT:
    case O_SEED:
    case O_FAULTS:
    case O_PROGRAMS:
    case O_DEVICES:
    case O_STREAMS:
    case O_STEPS:
    case O_REPLAY: {
      uint64_t max = c == O_DEVICES || c == O_STREAMS ? 8 : c == O_TIMEOUT ? 3600000 : c == O_STEPS ? 10000 : UINT64_MAX;
      if (!cb_cli_parse_uint(optarg, max, &v) || ((c == O_DEVICES || c == O_STREAMS) && v == 0)) {
        fprintf(stderr, "cubert faultinj: %s: expected a number%s, not `%s`\n", gargv[optind - 1],
                max == 8 ? " from 1 to 8" : "", optarg);
        rc = CB_CLI_USAGE;
        break;
      }
      if (c == O_TIMEOUT) o.timeout_ms = (uint32_t)v;
      if (c == O_SEED) o.seed = v;
      if (c == O_FAULTS) o.faults = v;
      if (c == O_PROGRAMS) o.programs = v;
      if (c == O_DEVICES) o.devices = (int)v;
      if (c == O_STREAMS) o.streams = (int)v;
      if (c == O_STEPS) o.steps = (int)v;
      if (c == O_REPLAY) {
        o.replay = v;
        o.has_replay = true;
      }
      break;
    }
    default:
      rc = CB_CLI_USAGE;
      break;
    }
  }
  if (rc != CB_CLI_OK) {
    usage(stderr);
    free(gargv);
    return rc;
  }
  if (o.json && strcmp(o.json, "-") == 0) txt = stderr;
  int nrest = gargc - optind;
  char **rest = gargv + optind;
  if (o.node && setenv("CUBERT_HOST_NODE", o.node, 1) != 0) {
    free(gargv);
    return cb_cli_fail("faultinj", "setting CUBERT_HOST_NODE", CUBERT_ERR_INVALID_ARGUMENT);
  }
  if (o.backend && strcmp(o.backend, "hip") == 0 && o.node)
    fprintf(stderr, "cubert faultinj: --node lays out host devices only; the hip devices keep their own layout\n");
  json_t *json = NULL;
  if (!cmd || strcmp(cmd, "check") == 0) {
    if (nrest) {
      fprintf(stderr, "cubert faultinj: unexpected `%s`\n", rest[0]);
      free(gargv);
      return CB_CLI_USAGE;
    }
    json_t *js = NULL, *jc = NULL;
    int a = do_suite(&o, 0, NULL, "suite", o.json ? &js : NULL);
    fprintf(txt, "\n");
    opts oc = o;
    if (!oc.faults && !oc.programs) oc.faults = DEFAULT_CHECK_FAULTS;
    int b = do_campaign(&oc, o.json ? &jc : NULL);
    rc = a != CB_CLI_OK ? a : b;
    fprintf(txt, "\ncubert faultinj: %s\n", rc == CB_CLI_OK ? "the suite and the campaign found no violation"
                                                      : "VIOLATIONS FOUND (see above)");
    if (o.json) json = json_pack("{s:s, s:o*, s:o*, s:b}", "command", "check", "suite", js, "campaign", jc, "ok",
                                 rc == CB_CLI_OK);
  } else if (strcmp(cmd, "suite") == 0 || strcmp(cmd, "run") == 0) {
    if (strcmp(cmd, "suite") == 0 && nrest) {
      fprintf(stderr, "cubert faultinj suite: unexpected `%s` (scenario files go to `run`)\n", rest[0]);
      free(gargv);
      return CB_CLI_USAGE;
    }
    json_t *js = NULL;
    rc = do_suite(&o, nrest, rest, nrest ? "run" : "suite", o.json ? &js : NULL);
    if (o.json && js) json = json_pack("{s:s, s:o, s:b}", "command", cmd, "suite", js, "ok", rc == CB_CLI_OK);
  } else if (strcmp(cmd, "campaign") == 0) {
    if (nrest) {
      fprintf(stderr, "cubert faultinj campaign: unexpected `%s`\n", rest[0]);
      free(gargv);
      return CB_CLI_USAGE;
    }
    json_t *jc = NULL;
    rc = do_campaign(&o, o.json ? &jc : NULL);
    if (o.json && jc) json = json_pack("{s:s, s:o, s:b}", "command", "campaign", "campaign", jc, "ok", rc == CB_CLI_OK);
  } else if (strcmp(cmd, "list") == 0) {
    if (nrest) {
      fprintf(stderr, "cubert faultinj list: unexpected `%s` (list takes no arguments)\n", rest[0]);
      rc = CB_CLI_USAGE;
    } else {
      rc = do_list();
    }
  } else if (strcmp(cmd, "show") == 0) {
    if (nrest != 1) {
      fprintf(stderr, "cubert faultinj show NAME\n");
      rc = CB_CLI_USAGE;
    } else {
      rc = do_show(rest[0]);
    }
  } else {
    fprintf(stderr, "cubert faultinj: unknown command `%s`\n", cmd);
    usage(stderr);
    rc = CB_CLI_USAGE;
  }
  if (json) {
    if (write_json(o.json, json) != 0 && rc == CB_CLI_OK) rc = CB_CLI_FAILED;
    json_decref(json);
  }
  free(gargv);
  return rc;
}
