/* tools/faultinj/scenario.h: scenario files and the built-in scenario suite
 * (internal, never installed; docs/faultinj.md has the format).
 *
 * A scenario file holds scenarios: each names the devices it needs (roles
 * A, B, C...), its steps (tools/faultinj/checker.h), the fault rules it sets and
 * the outcomes it expects. Parse errors name the file, the line and the
 * column. The built-in suite is tools/faultinj/scenarios/NAME.fi, embedded in the
 * library at build time, so an installed `cubert faultinj suite` needs no
 * source tree.
 *
 * Placement: a scenario with `placement pairs` (the default) runs once per
 * topology class present among the devices: A and B are the first pair of
 * that class (docs/topology.md), C, D... the lowest other devices. With
 * `placement fixed`, A is device 0, B device 1, and so on.
 *
 * Ownership: a cb_fi_suite owns its programs (cb_fi_suite_free); a report
 * owns its results (cb_fi_suite_report_free). */
#ifndef CUBERT_FAULTINJ_SCENARIO_H
#define CUBERT_FAULTINJ_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cubert/topology.h"
#include "tools/faultinj/checker.h"

typedef struct cb_fi_suite {
  cb_fi_program *v;
  size_t n;
} cb_fi_suite;

/* Parses `text` (named `source` in messages) and appends its scenarios to
 * `suite`. On an error nothing is appended, CUBERT_ERR_PARSE is returned and
 * `error` gets "source:line:column: what was wrong". */
cubert_status cb_fi_scenario_parse(const char *text, const char *source, cb_fi_suite *suite, char *error,
                                   size_t capacity);
/* The same over a file; CUBERT_ERR_IO when it cannot be read. */
cubert_status cb_fi_scenario_load(const char *path, cb_fi_suite *suite, char *error, size_t capacity);
/* The built-in suite (tools/faultinj/scenarios/NAME.fi as embedded). */
cubert_status cb_fi_scenario_builtin(cb_fi_suite *suite, char *error, size_t capacity);
/* Names and texts of the embedded files (for `cubert faultinj list`). */
size_t cb_fi_scenario_builtin_count(void);
const char *cb_fi_scenario_builtin_name(size_t i);
const char *cb_fi_scenario_builtin_text(size_t i);
void cb_fi_suite_free(cb_fi_suite *suite);

/* One placement: the class of (A, B) and the devices the roles get. */
typedef struct cb_fi_placement {
  char pair_class[16];   /* "XGMI", "PIX", ... "UNKNOWN"; "fixed" */
  int devices[8];        /* role -> runtime device */
  int ndevices;          /* devices of the runtime */
} cb_fi_placement;

/* The first pair of each class present on `backend` (a runtime made the way
 * cb_fi_run makes it, so $CUBERT_HOST_NODE applies), near to far. */
cubert_status cb_fi_pairs(const char *backend, int host_devices, cb_fi_placement *pairs, size_t capacity,
                          size_t *count, char *error, size_t error_capacity);

typedef struct cb_fi_suite_config {
  const char *backend;   /* "host" (default) or "hip" */
  int host_devices;      /* 0: the node's, else 4 */
  uint32_t timeout_ms;
  FILE *trace;           /* every step of every run */
  FILE *progress;        /* one line per run */
  const char *only;      /* run only scenarios whose name contains this */
} cb_fi_suite_config;

typedef struct cb_fi_scenario_run {
  const cb_fi_program *program; /* borrowed from the suite */
  cb_fi_placement placement;
  char label[128];
  cubert_status status;
  cb_fi_result result;
} cb_fi_scenario_run;

typedef struct cb_fi_suite_report {
  char backend[16];
  cb_fi_placement pairs[CUBERT_LINK_CLASS_COUNT];
  size_t npairs;
  cb_fi_scenario_run *runs;
  size_t nruns;
  size_t passed, failed, skipped;
  uint64_t injected;
  uint64_t by_kind[CUBERT_FAULT_KIND_COUNT_];
  size_t by_violation[CB_FI_VIOLATION_KIND_COUNT];
  size_t violations;
  bool hang;             /* the suite stopped at a hang */
  double seconds;
} cb_fi_suite_report;

/* Runs every scenario of `suite` on every placement it needs. CUBERT_OK when
 * it ran (see report->violations); an error when no placement could be
 * found (the message is in `error`). */
cubert_status cb_fi_suite_run(const cb_fi_suite *suite, const cb_fi_suite_config *config,
                              cb_fi_suite_report *report, char *error, size_t error_capacity);
void cb_fi_suite_report_free(cb_fi_suite_report *report);

#endif
