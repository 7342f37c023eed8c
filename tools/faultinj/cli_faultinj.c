/* tools/faultinj/cli_faultinj.c: `cubert faultinj`, the scenario suite, scenario
 * files and seeded campaigns, each checked against the model of
 * docs/failures.md; a summary on the terminal, JSON on request, a non-zero
 * exit status on any violation. Part of the cubert tool, not of the library. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "tools/faultinj/campaign.h"
#include "tools/faultinj/procs.h"
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
          "  check (or none)   the scenario suite, then a short campaign (%d faults)\n"
          "  suite             the built-in scenario suite, on one device pair per class\n"
          "  run [FILE...]     scenario files (docs/faultinj.md); no file: the suite\n"
          "  campaign          seeded random programs with seeded random faults\n"
          "  procs             across real processes sharing exported memory: the\n"
          "                    multi-process scenarios, then --programs seeded programs\n"
          "                    (default 20) of --steps steps (default 16, at most 48)\n"
          "  list              the built-in scenarios\n"
          "  show NAME         print a built-in scenario file: NAME is the file (edges.fi,\n"
          "                    edges) or a scenario in it, as `list` names them\n"
          "\n"
          "options:\n"
          "  --node NAME|FILE  host devices laid out as a simulated node (frontier, mi300x,\n"
          "                    pcie): sets CUBERT_HOST_NODE\n"
          "  --backend B       host (default) or hip\n"
          "  --json FILE       the whole report as JSON (- for stdout; the summary then\n"
          "                    goes to stderr); not with procs\n"
          "  --timeout MS      a step that takes longer is a HANG, 0 to 3600000\n"
          "                    (default, and 0: 10000)\n"
          "  --only TEXT       scenarios whose name contains TEXT\n"
          "  --trace           every step, injection and added sync, on stdout\n"
          "  -v, --verbose     one line per scenario run on stderr\n"
          "campaign options:\n"
          "  --seed S          campaign seed (default 1)\n"
          "  --faults N        stop once N faults were injected, 1 or more (default 10000)\n"
          "  --programs N      stop after N programs, 1 or more\n"
          "  --devices D       devices per program, 1 to 8 (default 4)\n"
          "  --streams S       streams per device, 1 to 8 (default 2)\n"
          "  --steps N         steps per program, 1 to 10000 (default 32)\n"
          "  --replay SEED     run the one program of that seed, print it and its log\n"
          "  --print           with --replay: print the program only\n"
          "\n"
          "Exit status: 0 no violation; 1 a violation, a hang, or a run that could not\n"
          "start (a scenario file that cannot be read or parsed); 2 bad usage.\n",
          DEFAULT_CHECK_FAULTS);
}

/* The human-readable summary: stdout, or stderr when JSON goes to stdout. */
static FILE *txt;

typedef struct opts {
  const char *node, *backend, *json, *only;
  uint64_t timeout_ms;
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

/* False, with a message, when --only names no scenario of the suite the
 * command runs (the built-in one, or the files): found before any output is
 * opened. A file that cannot be loaded is left for do_suite to report. */
static bool only_matches(const opts *o, int nfiles, char **files) {
  if (o->only == NULL) return true;
  cb_fi_suite suite = {0};
  char err[1024];
  cubert_status st = CUBERT_OK;
  if (nfiles == 0) st = cb_fi_scenario_builtin(&suite, err, sizeof err);
  for (int i = 0; i < nfiles && st == CUBERT_OK; i++) st = cb_fi_scenario_load(files[i], &suite, err, sizeof err);
  bool any = st != CUBERT_OK;
  for (size_t i = 0; i < suite.n && !any; i++) any = strstr(suite.v[i].name, o->only) != NULL; /* cb_fi_suite_run's test */
  cb_fi_suite_free(&suite);
  if (!any) cb_cli_error("faultinj", "--only '%s' matches no scenario's name (`cubert faultinj list` names them)", o->only);
  return any;
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
    return CB_CLI_FAILED; /* a file that cannot be read or parsed: the run could not start */
  }
  cb_fi_suite_config c = {0};
  c.backend = o->backend;
  c.timeout_ms = (uint32_t)o->timeout_ms;
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
  c->timeout_ms = (uint32_t)o->timeout_ms;
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
  rc.timeout_ms = (uint32_t)o->timeout_ms;
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
        /* the file's name outlives the suite it is read from */
        const char *file = strrchr(suite.v[i].source, '/');
        char held[256];
        snprintf(held, sizeof held, "%s", file ? file + 1 : suite.v[i].source);
        cb_fi_suite_free(&suite);
        return do_show(held);
      }
  cb_fi_suite_free(&suite);
  fprintf(stderr, "cubert faultinj show: no built-in scenario or file `%s` (see `cubert faultinj list`)\n", name);
  return CB_CLI_FAILED;
}

/* ------------------------------------------------------------ commands */

static opts o;                  /* the parsed options, for every command */
static cb_cli_output json_out;  /* --json */

typedef int (*command_fn)(int n, char **rest, json_t **json);

static int cmd_check(int n, char **rest, json_t **json) {
  json_t *js = NULL, *jc = NULL;
  int a = do_suite(&o, 0, NULL, "suite", json ? &js : NULL);
  fprintf(txt, "\n");
  opts oc = o;
  if (!oc.faults && !oc.programs) oc.faults = DEFAULT_CHECK_FAULTS;
  int b = do_campaign(&oc, json ? &jc : NULL);
  int rc = a != CB_CLI_OK ? a : b;
  fprintf(txt, "\ncubert faultinj: %s\n",
          rc == CB_CLI_OK ? "the suite and the campaign found no violation" : "VIOLATIONS FOUND (see above)");
  if (json) *json = json_pack("{s:s, s:o*, s:o*, s:b}", "command", "check", "suite", js, "campaign", jc, "ok", rc == CB_CLI_OK);
  return rc;
}

static int suite_command(const char *cmd, int n, char **rest, json_t **json) {
  json_t *js = NULL;
  int rc = do_suite(&o, n, rest, n ? "run" : "suite", json ? &js : NULL);
  if (json && js) *json = json_pack("{s:s, s:o, s:b}", "command", cmd, "suite", js, "ok", rc == CB_CLI_OK);
  return rc;
}

static int cmd_suite(int n, char **rest, json_t **json) { return suite_command("suite", 0, NULL, json); }

static int cmd_run(int n, char **rest, json_t **json) { return suite_command("run", n, rest, json); }

static int cmd_campaign(int n, char **rest, json_t **json) {
  json_t *jc = NULL;
  int rc = do_campaign(&o, json ? &jc : NULL);
  if (json && jc) *json = json_pack("{s:s, s:o, s:b}", "command", "campaign", "campaign", jc, "ok", rc == CB_CLI_OK);
  return rc;
}

static int cmd_list(int n, char **rest, json_t **json) { return do_list(); }

static int cmd_procs(int n, char **rest, json_t **json) {
  int steps = o.steps ? o.steps : 16;
  return cb_fi_procs(o.backend ? o.backend : "host", o.seed, o.programs ? o.programs : 20, steps, o.verbose)
             ? CB_CLI_FAILED
             : CB_CLI_OK;
}

/* One process of `procs`, spawned by it; not for people. */
static int cmd_procs_worker(int n, char **rest, json_t **json) {
  return cb_fi_procs_worker(o.backend ? o.backend : "host") ? CB_CLI_FAILED : CB_CLI_OK;
}

static int cmd_show(int n, char **rest, json_t **json) { return do_show(rest[0]); }

static const struct {
  const char *name;
  command_fn run;
  int min, max;  /* operands after the command's name; max -1: any */
  const char *operands;
  bool json;     /* takes --json */
} commands[] = {
    {"check", cmd_check, 0, 0, NULL, true},  /* what no command means */
    {"suite", cmd_suite, 0, 0, NULL, true},
    {"run", cmd_run, 0, -1, "scenario files", true},
    {"campaign", cmd_campaign, 0, 0, NULL, true},
    {"list", cmd_list, 0, 0, NULL, false},
    {"procs", cmd_procs, 0, 0, NULL, false},
    {"procs-worker", cmd_procs_worker, 0, 0, NULL, false},
    {"show", cmd_show, 1, 1, "one scenario NAME", false},
};

int cb_cli_faultinj(int argc, char **argv) {
  memset(&o, 0, sizeof o);
  memset(&json_out, 0, sizeof json_out);
  o.seed = 1;
  txt = stdout;
  const char *replay = NULL;
  const cb_cli_opt table[] = {
      CB_FLAG("verbose", 'v', &o.verbose),
      CB_TEXT("node", 0, &o.node),
      CB_CHOICE("backend", &o.backend, "host|hip"),
      CB_OUTPUT("json", &json_out),
      CB_UINT("timeout", &o.timeout_ms, 0, 3600000),
      CB_TEXT("only", 0, &o.only),
      CB_FLAG("trace", 0, &o.trace),
      CB_UINT("seed", &o.seed, 0, UINT64_MAX),
      /* 0 is how the options say "not given" (then the default): refused as a value */
      CB_UINT("faults", &o.faults, 1, UINT64_MAX),
      CB_UINT("programs", &o.programs, 1, UINT64_MAX),
      CB_INT("devices", &o.devices, 1, 8),
      CB_INT("streams", &o.streams, 1, 8),
      CB_INT("steps", &o.steps, 1, 10000),
      CB_TEXT("replay", 0, &replay),
      CB_FLAG("print", 0, &o.print),
      CB_END};
  const cb_cli_spec spec = {"faultinj", usage, table, 0, -1, NULL};
  int first, rc = cb_cli_parse(&spec, argc, argv, &first);
  if (rc != CB_CLI_PARSED) return rc;
  if (replay) {
    if (!cb_cli_parse_uint(replay, UINT64_MAX, &o.replay)) {
      cb_cli_error("faultinj", "--replay wants a program seed from 0 to %" PRIu64 ", not '%s'", UINT64_MAX, replay);
      return CB_CLI_USAGE;
    }
    o.has_replay = true;
  }
  const char *name = first < argc ? argv[first++] : "check";
  size_t k = 0, ncommands = sizeof commands / sizeof commands[0];
  while (k < ncommands && strcmp(commands[k].name, name) != 0) k++;
  if (k == ncommands) {
    cb_cli_error("faultinj", "unknown command '%s' (check, suite, run, campaign, procs, list or show)", name);
    fprintf(stderr, "`cubert faultinj --help` describes them.\n");
    return CB_CLI_USAGE;
  }
  int n = argc - first;
  if (n < commands[k].min || (commands[k].max >= 0 && n > commands[k].max)) {
    if (commands[k].max == 0)
      cb_cli_error("faultinj", "%s: unexpected argument '%s'%s", name, argv[first],
                   strcmp(name, "suite") == 0 ? " (scenario files go to `run`)" : "");
    else
      cb_cli_error("faultinj", "%s wants %s", name, commands[k].operands);
    return CB_CLI_USAGE;
  }
  if (o.print && !o.has_replay) {
    cb_cli_error("faultinj", "--print goes with --replay SEED (it prints that program)");
    return CB_CLI_USAGE;
  }
  if (strcmp(name, "procs") == 0 && o.steps > CB_FI_PROCS_MAX_STEPS) {
    cb_cli_error("faultinj", "procs: --steps wants a number from 1 to %d, not '%d'", CB_FI_PROCS_MAX_STEPS, o.steps);
    return CB_CLI_USAGE;
  }
  if (json_out.path && !commands[k].json) {
    cb_cli_error("faultinj", "--json goes with check, suite, run and campaign, not %s", name);
    return CB_CLI_USAGE;
  }
  if (!cb_cli_node_ok("faultinj", o.node)) return CB_CLI_USAGE;
  if (o.node && setenv("CUBERT_HOST_NODE", o.node, 1) != 0)
    return cb_cli_fail("faultinj", "setting CUBERT_HOST_NODE", CUBERT_ERR_INVALID_ARGUMENT);
  if (o.backend && strcmp(o.backend, "hip") == 0 && o.node)
    fprintf(stderr, "cubert faultinj: --node lays out host devices only; the hip devices keep their own layout\n");
  bool runs_suite = strcmp(name, "check") == 0 || strcmp(name, "suite") == 0 || strcmp(name, "run") == 0;
  if (runs_suite && !only_matches(&o, strcmp(name, "run") == 0 ? n : 0, argv + first)) return CB_CLI_USAGE;
  if (!cb_cli_open_outputs(&spec)) return CB_CLI_FAILED;
  json_t *json = NULL;
  rc = commands[k].run(n, argv + first, json_out.file ? &json : NULL);
  if (json) {
    if (json_dumpf(json, json_out.file, JSON_INDENT(2)) != 0 || fputc('\n', json_out.file) == EOF) {
      cb_cli_error("faultinj", "--json: could not write %s", json_out.path);
      rc = CB_CLI_FAILED;
    }
    json_decref(json);
  }
  if (!cb_cli_close_outputs(&spec) && rc == CB_CLI_OK) rc = CB_CLI_FAILED;
  return rc;
}
