/* tests/test_faultinj_misuse.c: every entry point of cubert/faultinj.h
 * misused: NULL for each pointer argument, bad text, bad files, unknown ids.
 * Each case asserts the status, that the thread's last error names what was
 * wrong, and that nothing changed (rules, log, counters, seed). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cubert/cubert.h"
#include "cubert/faultinj.h"
#include "tests/testutil.h"

/* ------------------------------------------------------------ helpers */

static cubert_runtime *rt;       /* a runtime with one rule and seed 5 */
static cubert_runtime *bare;     /* created with no_faultinj */

/* The state a refused call must leave alone. */
typedef struct snapshot {
  cubert_faultinj_stats stats;
  char rule1[256];
  size_t nlog;
} snapshot;

static void take(snapshot *s) {
  memset(s, 0, sizeof *s);
  ck_assert_int_eq(cubert_faultinj_get_stats(rt, &s->stats), CUBERT_OK);
  if (cubert_faultinj_rule_describe(rt, 1, s->rule1, sizeof s->rule1, NULL, NULL) != CUBERT_OK) s->rule1[0] = '\0';
  cubert_fault_record rec[4];
  s->nlog = cubert_faultinj_log(rt, 0, rec, 4);
}

static void same(const snapshot *before) {
  snapshot now;
  take(&now);
  ck_assert_uint_eq(now.stats.rules, before->stats.rules);
  ck_assert_uint_eq(now.stats.injected, before->stats.injected);
  ck_assert_uint_eq(now.stats.calls, before->stats.calls);
  ck_assert_uint_eq(now.stats.seed, before->stats.seed);
  ck_assert_uint_eq(now.nlog, before->nlog);
  ck_assert_str_eq(now.rule1, before->rule1);
}

/* The thread's last error has `status` and its message contains every
 * fragment given. */
static void last_error_says(cubert_status status, const char *a, const char *b) {
  cubert_error *e = cubert_last_error();
  ck_assert_msg(e != NULL, "no error recorded for the thread");
  ck_assert_msg(cubert_error_status(e) == status, "last error %s, expected %s (%s)",
                cubert_status_name(cubert_error_status(e)), cubert_status_name(status), cubert_error_message(e));
  const char *m = cubert_error_message(e);
  ck_assert_msg(a == NULL || strstr(m, a), "last error `%s` does not name `%s`", m, a);
  ck_assert_msg(b == NULL || strstr(m, b), "last error `%s` does not name `%s`", m, b);
  cubert_error_release(e);
}

static cubert_runtime *make(bool no_faultinj) {
  cubert_runtime_options o;
  cb_test_options("host", &o);
  o.no_faultinj = no_faultinj;
  cubert_runtime *r = NULL;
  ck_assert_msg(cubert_runtime_create(&o, &r) == CUBERT_OK, "%s", cubert_last_error_message());
  return r;
}

static void setup(void) {
  rt = make(false);
  bare = make(true);
  cubert_faultinj_diag diag;
  ck_assert_int_eq(cubert_faultinj_add(rt, "launch kernel=k nth=2", "setup", NULL, &diag), CUBERT_OK);
  ck_assert_int_eq(cubert_faultinj_set_seed(rt, 5), CUBERT_OK);
}

static void teardown(void) {
  cubert_runtime_destroy(rt);
  cubert_runtime_destroy(bare);
  rt = bare = NULL;
}

/* ------------------------------------------------------------ cases */

START_TEST(test_summary_null_text_is_refused) {
  snapshot s;
  take(&s);
  ck_assert_uint_eq(cubert_faultinj_summary(rt, NULL, 100), 0);
  last_error_says(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_summary", "text is NULL");
  same(&s);
  /* NULL with capacity 0 asks for the length, as snprintf. */
  char line[256];
  size_t want = cubert_faultinj_summary(rt, line, sizeof line);
  ck_assert_uint_gt(want, 0);
  ck_assert_uint_eq(cubert_faultinj_summary(rt, NULL, 0), want);
}
END_TEST

START_TEST(test_add_errors_reach_last_error) {
  snapshot s;
  take(&s);
  cubert_faultinj_diag diag;
  ck_assert_int_eq(cubert_faultinj_add(rt, NULL, "mine", NULL, &diag), CUBERT_ERR_INVALID_ARGUMENT);
  last_error_says(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_add", "text is NULL");
  ck_assert_int_eq(cubert_faultinj_add(rt, "launch nht=3", "mine", NULL, &diag), CUBERT_ERR_PARSE);
  last_error_says(CUBERT_ERR_PARSE, "mine:1:8:", "nht");
  ck_assert_int_eq(diag.line, 1);
  ck_assert_int_eq(diag.column, 8);
  /* diag NULL: the message still reaches the thread */
  ck_assert_int_eq(cubert_faultinj_add(rt, "copy kernel=k1", NULL, NULL, NULL), CUBERT_ERR_PARSE);
  last_error_says(CUBERT_ERR_PARSE, "api:1:", "kernel=");
  /* all or nothing: a good rule before a bad one is not added */
  uint32_t first = 77;
  ck_assert_int_eq(cubert_faultinj_add(rt, "copy nth=1\ncopy fault=wrong", NULL, &first, NULL), CUBERT_ERR_PARSE);
  last_error_says(CUBERT_ERR_PARSE, "api:2:", "wrong");
  ck_assert_uint_eq(first, 77);
  same(&s);
}
END_TEST

START_TEST(test_load_errors_reach_last_error) {
  snapshot s;
  take(&s);
  cubert_faultinj_diag diag;
  ck_assert_int_eq(cubert_faultinj_load(rt, NULL, NULL, &diag), CUBERT_ERR_INVALID_ARGUMENT);
  last_error_says(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_load", "path is NULL");
  ck_assert_int_eq(cubert_faultinj_load(rt, "", NULL, &diag), CUBERT_ERR_INVALID_ARGUMENT);
  last_error_says(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_load", "path is empty");
  ck_assert_int_eq(cubert_faultinj_load(rt, "/nonexistent/rules.fi", NULL, NULL), CUBERT_ERR_IO);
  last_error_says(CUBERT_ERR_IO, "/nonexistent/rules.fi", "cannot open");
  ck_assert_int_eq(cubert_faultinj_load(rt, "/", NULL, &diag), CUBERT_ERR_IO);
  last_error_says(CUBERT_ERR_IO, "/:", NULL);
  char path[] = "/tmp/cubert-misuse-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, "launch\nlaunch fault=wrong\n", 26), 26);
  close(fd);
  ck_assert_int_eq(cubert_faultinj_load(rt, path, NULL, &diag), CUBERT_ERR_PARSE);
  last_error_says(CUBERT_ERR_PARSE, path, ":2:");
  unlink(path);
  same(&s);
}
END_TEST

START_TEST(test_configure_errors_reach_last_error) {
  snapshot s;
  take(&s);
  cubert_faultinj_diag diag;
  ck_assert_int_eq(cubert_faultinj_configure(rt, "launch nth=", &diag), CUBERT_ERR_PARSE);
  last_error_says(CUBERT_ERR_PARSE, "faults option:1:", NULL);
  ck_assert_int_eq(cubert_faultinj_configure(rt, "@/nonexistent/x.rules", NULL), CUBERT_ERR_IO);
  last_error_says(CUBERT_ERR_IO, "/nonexistent/x.rules", NULL);
  /* a directory opens but cannot be read: said so, not "read error" */
  ck_assert_int_eq(cubert_faultinj_configure(rt, "@/", NULL), CUBERT_ERR_IO);
  last_error_says(CUBERT_ERR_IO, "cannot read the rule file", "directory");
  setenv("CUBERT_FAULTS", "alloc fault=partial", 1);
  ck_assert_int_eq(cubert_faultinj_configure(rt, NULL, &diag), CUBERT_ERR_PARSE);
  last_error_says(CUBERT_ERR_PARSE, "CUBERT_FAULTS:1:", "partial");
  unsetenv("CUBERT_FAULTS");
  same(&s);
}
END_TEST

START_TEST(test_remove_and_describe_unknown_ids) {
  snapshot s;
  take(&s);
  ck_assert_int_eq(cubert_faultinj_remove(rt, 99), CUBERT_ERR_INVALID_ARGUMENT);
  last_error_says(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_remove", "no rule 99");
  ck_assert_int_eq(cubert_faultinj_remove(rt, 0), CUBERT_ERR_INVALID_ARGUMENT);
  last_error_says(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_remove", "no rule 0");
  char text[64];
  ck_assert_int_eq(cubert_faultinj_rule_describe(rt, 77, text, sizeof text, NULL, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  last_error_says(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_rule_describe", "no rule 77");
  /* the optional outputs may be NULL */
  ck_assert_int_eq(cubert_faultinj_rule_describe(rt, 1, NULL, 0, NULL, NULL), CUBERT_OK);
  same(&s);
}
END_TEST

START_TEST(test_null_outputs_are_refused) {
  snapshot s;
  take(&s);
  ck_assert_int_eq(cubert_faultinj_get_stats(rt, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  last_error_says(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_get_stats", "stats is NULL");
  ck_assert_uint_eq(cubert_faultinj_log(rt, 0, NULL, 8), 0);
  last_error_says(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_log", "out is NULL");
  ck_assert(!cubert_faultinj_record(rt, 1, NULL));
  last_error_says(CUBERT_ERR_INVALID_ARGUMENT, "cubert_faultinj_record", "record is NULL");
  ck_assert_uint_eq(cubert_faultinj_log(rt, 0, NULL, 0), 0); /* nothing asked, nothing refused */
  same(&s);
}
END_TEST

/* Every entry point with a NULL runtime: INVALID_ARGUMENT naming the
 * function; with a runtime made with no_faultinj: UNSUPPORTED. */
static void refused_everywhere(cubert_runtime *r, cubert_status st, const char *why) {
  snapshot s;
  take(&s);
  cubert_faultinj_diag diag;
  cubert_faultinj_stats stats;
  cubert_fault_record rec;
  char text[128];
  uint32_t first = 0;
#define REFUSED(call, name)                                          \
  do {                                                               \
    ck_assert_int_eq((call), st);                                    \
    last_error_says(st, name, why);                                  \
  } while (0)
  REFUSED(cubert_faultinj_add(r, "launch", NULL, &first, &diag), "cubert_faultinj_add");
  REFUSED(cubert_faultinj_load(r, "/nonexistent", &first, &diag), "cubert_faultinj_load");
  REFUSED(cubert_faultinj_configure(r, "launch", &diag), "cubert_faultinj_configure");
  REFUSED(cubert_faultinj_remove(r, 1), "cubert_faultinj_remove");
  REFUSED(cubert_faultinj_clear(r), "cubert_faultinj_clear");
  REFUSED(cubert_faultinj_reset(r), "cubert_faultinj_reset");
  REFUSED(cubert_faultinj_set_seed(r, 9), "cubert_faultinj_set_seed");
  REFUSED(cubert_faultinj_set_pair_classifier(r, NULL, NULL), "cubert_faultinj_set_pair_classifier");
  REFUSED(cubert_faultinj_get_stats(r, &stats), "cubert_faultinj_get_stats");
  REFUSED(cubert_faultinj_rule_describe(r, 1, text, sizeof text, NULL, NULL), "cubert_faultinj_rule_describe");
#undef REFUSED
  ck_assert_uint_eq(cubert_faultinj_seed(r), 0);
  last_error_says(st, "cubert_faultinj_seed", why);
  ck_assert_uint_eq(cubert_faultinj_log(r, 0, &rec, 1), 0);
  last_error_says(st, "cubert_faultinj_log", why);
  ck_assert(!cubert_faultinj_record(r, 1, &rec));
  last_error_says(st, "cubert_faultinj_record", why);
  ck_assert_uint_eq(cubert_faultinj_injected(r), 0);
  last_error_says(st, "cubert_faultinj_injected", why);
  ck_assert_uint_eq(cubert_faultinj_summary(r, text, sizeof text), 0);
  last_error_says(st, "cubert_faultinj_summary", why);
  ck_assert_uint_eq(first, 0);
  same(&s);
}

START_TEST(test_null_runtime_is_refused_everywhere) {
  refused_everywhere(NULL, CUBERT_ERR_INVALID_ARGUMENT, "runtime is NULL");
}
END_TEST

START_TEST(test_runtime_without_fault_layer_is_refused_everywhere) {
  refused_everywhere(bare, CUBERT_ERR_UNSUPPORTED, "no_faultinj");
}
END_TEST

START_TEST(test_kind_names_outside_the_enum) {
  ck_assert_str_eq(cubert_fault_kind_name(CUBERT_FAULT_KIND_COUNT_), "unknown");
  ck_assert_str_eq(cubert_fault_kind_name((cubert_fault_kind)-1), "unknown");
  ck_assert_str_eq(cubert_fault_kind_name(CUBERT_FAULT_DEVICE_LOST), "device-lost");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("faultinj_misuse");
  TCase *t = tcase_create("misuse");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, test_summary_null_text_is_refused);
  tcase_add_test(t, test_add_errors_reach_last_error);
  tcase_add_test(t, test_load_errors_reach_last_error);
  tcase_add_test(t, test_configure_errors_reach_last_error);
  tcase_add_test(t, test_remove_and_describe_unknown_ids);
  tcase_add_test(t, test_null_outputs_are_refused);
  tcase_add_test(t, test_null_runtime_is_refused_everywhere);
  tcase_add_test(t, test_runtime_without_fault_layer_is_refused_everywhere);
  tcase_add_test(t, test_kind_names_outside_the_enum);
  suite_add_tcase(s, t);
  return s;
}

int main(void) { return cb_test_run(suite()); }
