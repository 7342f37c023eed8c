/* tests/test_faultinj_scenarios.c: the built-in scenario suite passes on the
 * host backend laid out as each simulated node (CUBERT_HOST_NODE frontier,
 * mi300x, pcie: one device pair per topology class) and on every backend
 * with devices; a 2,000-fault campaign passes; a seed replays the identical
 * injection log.
 *
 * In a build with CUBERT_BREAK_RULE=ON (transitive taint switched off in
 * the runtime) the same tests assert the opposite: the suite and the
 * campaign MUST report stale reads, proving the checker bites. */
#include <stdlib.h>
#include <string.h>

#include "tools/faultinj/campaign.h"
#include "tools/faultinj/scenario.h"
#include "tests/testutil.h"

static const char *first_violation(const cb_fi_suite_report *rep) {
  for (size_t i = 0; i < rep->nruns; i++) {
    if (rep->runs[i].result.nviolations) return rep->runs[i].result.violations[0].message;
    if (rep->runs[i].result.setup_failed) return rep->runs[i].result.setup_error;
  }
  return "(none)";
}

/* Runs the suite on `backend` and checks the outcome this build must give;
 * `want_class` (may be NULL) must be among the pair classes found. */
static void suite_on(const char *backend, const char *want_class) {
  cb_fi_suite suite = {0};
  char err[1024];
  ck_assert_msg(cb_fi_scenario_builtin(&suite, err, sizeof err) == CUBERT_OK, "%s", err);
  ck_assert_uint_ge(suite.n, 18);
  cb_fi_suite_config c = {0};
  c.backend = backend;
  cb_fi_suite_report rep;
  ck_assert_msg(cb_fi_suite_run(&suite, &c, &rep, err, sizeof err) == CUBERT_OK, "%s", err);
  if (want_class) {
    bool found = false;
    for (size_t k = 0; k < rep.npairs; k++) found |= strcmp(rep.pairs[k].pair_class, want_class) == 0;
    ck_assert_msg(found, "no %s pair among the %zu classes found", want_class, rep.npairs);
  }
  ck_assert_uint_gt(rep.injected, 0);
  ck_assert(!rep.hang);
  if (cb_fi_break_rule_built()) {
    ck_assert_msg(rep.by_violation[CB_FI_STALE_READ] > 0,
                  "with CUBERT_BREAK_RULE the suite must report stale reads; it reported %zu violations", rep.violations);
  } else {
    ck_assert_msg(rep.violations == 0 && rep.failed == 0, "%zu violations in %zu failed runs; the first: %s",
                  rep.violations, rep.failed, first_violation(&rep));
    ck_assert_uint_eq(rep.passed + rep.skipped, rep.nruns);
    ck_assert_uint_gt(rep.passed, 0);
  }
  cb_fi_suite_report_free(&rep);
  cb_fi_suite_free(&suite);
}

START_TEST(test_suite_passes_on_a_simulated_frontier_node) {
  setenv("CUBERT_HOST_NODE", "frontier", 1);
  setenv("CUBERT_FAULTS", "", 1);
  suite_on("host", "XGMI");
}
END_TEST

START_TEST(test_suite_passes_on_a_simulated_mi300x_node) {
  setenv("CUBERT_HOST_NODE", "mi300x", 1);
  suite_on("host", "XGMI");
}
END_TEST

START_TEST(test_suite_passes_on_a_simulated_pcie_node) {
  setenv("CUBERT_HOST_NODE", "pcie", 1);
  suite_on("host", "PXB");
}
END_TEST

START_TEST(test_suite_passes_on_each_backend) {
  unsetenv("CUBERT_HOST_NODE");
  const char *name = cb_test_backend_name(_i);
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return; /* prints "skipped: ..." */
  cb_test_close(&env);
  suite_on(name, NULL);
}
END_TEST

START_TEST(test_campaign_of_2000_faults_passes) {
  unsetenv("CUBERT_HOST_NODE");
  cb_fi_campaign_config c;
  cb_fi_campaign_config_init(&c);
  c.seed = 2024;
  c.faults = 2000;
  c.minimize = 1;
  cb_fi_campaign_report r;
  ck_assert_int_eq(cb_fi_campaign_run(&c, &r), CUBERT_OK);
  ck_assert(!r.hang);
  ck_assert_uint_eq(r.setup_failures, 0);
  if (cb_fi_break_rule_built()) {
    ck_assert_msg(r.by_violation[CB_FI_STALE_READ] > 0, "with CUBERT_BREAK_RULE the campaign must report stale reads");
    ck_assert_ptr_nonnull(r.failing[0].shortest);
  } else {
    ck_assert_msg(r.violations == 0, "%zu violations; the first: %s\nshortest program:\n%s", r.violations,
                  r.nfailing ? r.failing[0].first : "", r.nfailing && r.failing[0].shortest ? r.failing[0].shortest : "");
    ck_assert_uint_ge(r.injected, 2000);
    /* every kind the campaign asks for was injected */
    for (int k = 0; k < CUBERT_FAULT_KIND_COUNT_; k++)
      ck_assert_msg(r.by_kind[k] > 0, "no `%s` fault in %llu", cubert_fault_kind_name((cubert_fault_kind)k),
                    (unsigned long long)r.injected);
  }
  cb_fi_campaign_report_free(&r);
}
END_TEST

START_TEST(test_a_seed_replays_the_identical_injection_log) {
  unsetenv("CUBERT_HOST_NODE");
  cb_fi_gen_config g;
  cb_fi_gen_config_init(&g);
  g.fault_share = 0.6;
  cb_fi_run_config rc = {0};
  uint64_t seed = cb_fi_campaign_seed(99, 3);
  cb_fi_program p1, p2;
  ck_assert(cb_fi_campaign_program(seed, &g, &p1));
  ck_assert(cb_fi_campaign_program(seed, &g, &p2));
  cb_fi_result a, b;
  ck_assert_int_eq(cb_fi_run(&p1, &rc, &a), CUBERT_OK);
  ck_assert_int_eq(cb_fi_run(&p2, &rc, &b), CUBERT_OK);
  ck_assert_uint_gt(a.nlog, 3);
  ck_assert_uint_eq(a.nlog, b.nlog);
  for (size_t i = 0; i < a.nlog; i++) {
    const cubert_fault_record *x = &a.log[i], *y = &b.log[i];
    ck_assert_uint_eq(x->id, y->id);
    ck_assert_uint_eq(x->rule, y->rule);
    ck_assert_int_eq(x->fault, y->fault);
    ck_assert_int_eq(x->status, y->status);
    ck_assert_str_eq(x->operation, y->operation);
    ck_assert_int_eq(x->device, y->device);
    ck_assert_uint_eq(x->stream, y->stream);
    ck_assert_uint_eq(x->work, y->work);
    ck_assert_uint_eq(x->match, y->match);
    ck_assert_str_eq(x->kernel, y->kernel);
    ck_assert_str_eq(x->message, y->message);
  }
  ck_assert_uint_eq(a.steps_run, b.steps_run);
  ck_assert_uint_eq(a.nviolations, b.nviolations);
  cb_fi_result_free(&a);
  cb_fi_result_free(&b);
  cb_fi_program_free(&p1);
  cb_fi_program_free(&p2);
}
END_TEST

int main(void) {
  Suite *s = suite_create("faultinj_scenarios");
  TCase *suite = tcase_create("suite");
  /* the pcie node's suite: 16 s under TSan at load 5, 52 s at load 8-14,
   * past the default 60 x 4 at load ~20 (2 cores): twice the default */
  tcase_set_timeout(suite, 120);
  tcase_add_test(suite, test_suite_passes_on_a_simulated_frontier_node);
  tcase_add_test(suite, test_suite_passes_on_a_simulated_mi300x_node);
  tcase_add_test(suite, test_suite_passes_on_a_simulated_pcie_node);
  cb_test_add_backend_loop(suite, test_suite_passes_on_each_backend);
  suite_add_tcase(s, suite);
  TCase *camp = tcase_create("campaign");
  /* 134 s under TSan on two loaded cores, of the default 60 x 4: twice that
   * (times CK_TIMEOUT_MULTIPLIER, 4 under a sanitizer) */
  tcase_set_timeout(camp, 120);
  tcase_add_test(camp, test_campaign_of_2000_faults_passes);
  tcase_add_test(camp, test_a_seed_replays_the_identical_injection_log);
  suite_add_tcase(s, camp);
  return cb_test_run(s);
}
