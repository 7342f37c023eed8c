/* tests/test_faultinj_parser.c: the scenario parser on input that is not a
 * scenario file: empty files, NUL bytes and other binary bytes get the file,
 * line and column, messages never echo raw bytes, and `fault` rules whose
 * kernel= names no kernel a scenario runs are refused where they stand. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/faultinj/scenario.h"
#include "tests/testutil.h"

/* Writes `len` bytes to a new temporary file; its path (free it). */
static char *temp_file(const void *data, size_t len) {
  char *path = strdup("/tmp/cubert-parser-XXXXXX");
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
  close(fd);
  return path;
}

/* Every byte of `msg` is printable ASCII. */
static bool printable(const char *msg) {
  for (const unsigned char *c = (const unsigned char *)msg; *c; c++)
    if (*c < 0x20 || *c >= 0x7f) return false;
  return true;
}

static void load_refused(const void *data, size_t len, const char *want) {
  char *path = temp_file(data, len);
  cb_fi_suite s = {0};
  char err[512];
  ck_assert_int_eq(cb_fi_scenario_load(path, &s, err, sizeof err), CUBERT_ERR_PARSE);
  char expect[512];
  snprintf(expect, sizeof expect, "%s%s", path, want);
  ck_assert_msg(strncmp(err, expect, strlen(expect)) == 0, "error `%s` does not start `%s`", err, expect);
  ck_assert_msg(printable(err), "error echoes raw bytes: `%s`", err);
  ck_assert_uint_eq(s.n, 0);
  cb_fi_suite_free(&s);
  unlink(path);
  free(path);
}

static void parse_refused(const char *text, const char *want) {
  cb_fi_suite s = {0};
  char err[512];
  ck_assert_int_eq(cb_fi_scenario_parse(text, "t.fi", &s, err, sizeof err), CUBERT_ERR_PARSE);
  ck_assert_msg(strstr(err, want) != NULL, "error `%s` does not contain `%s`", err, want);
  ck_assert_msg(printable(err), "error echoes raw bytes: `%s`", err);
  ck_assert_uint_eq(s.n, 0);
  cb_fi_suite_free(&s);
}

START_TEST(test_empty_files_are_refused) {
  load_refused("", 0, ":1:1: no scenario here (the text is empty;");
  load_refused("# only a comment\n\n   \n", 22, ":1:1: no scenario here (only comments and blank lines;");
  parse_refused("", "t.fi:1:1: no scenario here");
  parse_refused(NULL, "t.fi:1:1: no scenario here");
}
END_TEST

START_TEST(test_nul_and_binary_bytes_name_line_and_column) {
  static const char nul[] = "scenario a\n  devices 1\n  cre\0te x on A size 64 u32 1\nend\n";
  load_refused(nul, sizeof nul - 1, ":3:6: a NUL byte: not a scenario file");
  static const char ctl[] = "scenario a\n  devices\x01 1\nend\n";
  load_refused(ctl, sizeof ctl - 1, ":2:10: a control byte 0x01: not a scenario file");
  parse_refused("scenario a\n\x7f\nend\n", "t.fi:2:1: a control byte 0x7f");
}
END_TEST

START_TEST(test_messages_escape_what_they_quote) {
  parse_refused("scenario a\n  devices 1\n  alloc v\xff\xfe on A size 64\nend\n",
                "t.fi:3:9: expected a view name (letters, digits, _ - .), found `v\\xff\\xfe`");
  parse_refused("scenario a\n  frobnicate\xc3\xa9\nend\n", "unknown statement `frobnicate\\xc3\\xa9`");
}
END_TEST

START_TEST(test_fault_kernel_names_that_select_nothing_are_refused) {
  /* The runtime names the built-ins cubert_fill_u32, ...: a rule on the
   * scenario's short name would select nothing. */
  parse_refused("scenario a\n  devices 1\n  create x on A size 64 u32 1\n  fault launch kernel=fill_u32 nth=1\nend\n",
                "t.fi:4:23: fault rules: kernel=fill_u32 selects nothing: no kernel a scenario runs has that name "
                "(`fill_u32` is `cubert_fill_u32` to the runtime)");
  parse_refused("scenario a\n  devices 1\n  fault compile kernel=nope*\nend\n", "t.fi:3:24: fault rules: kernel=nope*");
  /* Real names, prefixes of them and the layer's own scribble kernel pass. */
  cb_fi_suite s = {0};
  char err[512];
  ck_assert_msg(cb_fi_scenario_parse("scenario a\n  devices 1\n  fault launch kernel=cubert_fill_u32,cubert_copy* nth=1\n"
                                     "  fault compile kernel=cubert_faultinj_scribble\nend\n",
                                     "t.fi", &s, err, sizeof err) == CUBERT_OK,
                "%s", err);
  ck_assert_uint_eq(s.n, 1);
  cb_fi_suite_free(&s);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("faultinj_parser");
  TCase *t = tcase_create("parser");
  tcase_add_test(t, test_empty_files_are_refused);
  tcase_add_test(t, test_nul_and_binary_bytes_name_line_and_column);
  tcase_add_test(t, test_messages_escape_what_they_quote);
  tcase_add_test(t, test_fault_kernel_names_that_select_nothing_are_refused);
  suite_add_tcase(s, t);
  return s;
}

int main(void) { return cb_test_run(suite()); }
