/* tests/test_external.c: external access (cubert_handle_external_begin/end):
 * the device address of a view for a transport that moves bytes itself,
 * with the ledger kept exact. The host backend's device memory is host
 * memory, so a test can be the transport there; on HIP only the ledger and
 * the refusals are checked (the address is a device pointer). */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/cubert.h"
#include "tests/testutil.h"

#define SIZE 4096u

static bool host(const cb_test_env *env) { return strcmp(env->backend, "host") == 0; }

static cubert_handle *pattern(cb_test_env *env, uint64_t seed) {
  unsigned char buf[SIZE];
  cb_test_pattern(buf, SIZE, seed);
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_create(env->clients[0], buf, SIZE, &h));
  return h;
}

START_TEST(test_external_read_gives_the_bytes_and_refuses_taint) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *h = pattern(&env, 5), *part = NULL;
  cubert_external *x = NULL;
  void *addr = NULL;
  cb_test_ok(cubert_handle_external_begin(c, h, CUBERT_ACCESS_READ, &x, &addr));
  ck_assert_ptr_nonnull(addr);
  if (host(&env)) {
    unsigned char want[SIZE];
    cb_test_pattern(want, SIZE, 5);
    ck_assert(memcmp(addr, want, SIZE) == 0);
  }
  cb_test_ok(cubert_handle_external_end(x, NULL));
  /* a tainted byte: refused, naming the failure; nothing handed out */
  const cubert_failure *f = NULL;
  cb_test_ok(cubert_failure_create(c, CUBERT_ERR_LAUNCH, "kernel k failed", &f));
  cb_test_ok(cubert_handle_slice(h, 100, SIZE - 101, &part));
  cb_test_ok(cubert_handle_taint(c, part, f));
  x = NULL;
  addr = NULL;
  cb_test_status(cubert_handle_external_begin(c, h, CUBERT_ACCESS_READ, &x, &addr), CUBERT_ERR_TAINTED);
  ck_assert_ptr_null(x);
  ck_assert_ptr_null(addr);
  ck_assert_msg(strstr(cubert_last_error_message(), "kernel k failed") != NULL, "%s", cubert_last_error_message());
  /* a clean slice beside it is fine */
  cubert_handle *clean = NULL;
  cb_test_ok(cubert_handle_slice(h, 200, 0, &clean));
  cb_test_ok(cubert_handle_external_begin(c, clean, CUBERT_ACCESS_READ, &x, &addr));
  cb_test_ok(cubert_handle_external_end(x, NULL));
  cubert_failure_release(f);
  cubert_handle_release(clean);
  cubert_handle_release(part);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_external_write_is_pending_then_repaired_or_tainted) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *h = pattern(&env, 6), *a = NULL, *b = NULL;
  cb_test_ok(cubert_handle_slice(h, 0, SIZE / 2, &a));
  cb_test_ok(cubert_handle_slice(h, SIZE / 2, 0, &b));
  /* an earlier failure on the first half: a good external write repairs it */
  const cubert_failure *old = NULL, *bad = NULL;
  cb_test_ok(cubert_failure_create(c, CUBERT_ERR_LAUNCH, "stale failure", &old));
  cb_test_ok(cubert_handle_taint(c, a, old));
  cubert_external *xa = NULL, *xb = NULL;
  void *pa = NULL, *pb = NULL;
  cb_test_ok(cubert_handle_external_begin(c, a, CUBERT_ACCESS_WRITE, &xa, &pa));
  cb_test_ok(cubert_handle_external_begin(c, b, CUBERT_ACCESS_WRITE, &xb, &pb));
  ck_assert_ptr_eq((unsigned char *)pb, (unsigned char *)pa + SIZE / 2);
  /* in flight: a read is refused, as pending */
  unsigned char got[SIZE];
  cb_test_status(cubert_handle_read(c, h, got, SIZE), CUBERT_ERR_TAINTED);
  ck_assert_msg(strstr(cubert_last_error_message(), "external transfer that has not ended") != NULL, "%s",
                cubert_last_error_message());
  unsigned char want[SIZE];
  cb_test_pattern(want, SIZE, 66);
  if (host(&env)) memcpy(pa, want, SIZE); /* the transport writes */
  cb_test_ok(cubert_handle_external_end(xa, NULL));
  cb_test_ok(cubert_failure_create(c, CUBERT_ERR_BACKEND, "the transport broke", &bad));
  cb_test_ok(cubert_handle_external_end(xb, bad));
  /* first half good (repaired), second half carries the transport's failure */
  cb_test_ok(cubert_handle_read(c, a, got, SIZE / 2));
  if (host(&env)) ck_assert(memcmp(got, want, SIZE / 2) == 0);
  cb_test_status(cubert_handle_read(c, b, got, SIZE / 2), CUBERT_ERR_TAINTED);
  ck_assert_msg(strstr(cubert_last_error_message(), "the transport broke") != NULL, "%s", cubert_last_error_message());
  uint64_t s = 0, e = 0;
  const cubert_failure *f = NULL;
  cb_test_ok(cubert_handle_tainted_range(c, h, 0, &s, &e, &f));
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(s, SIZE / 2);
  ck_assert_uint_eq(e, SIZE);
  ck_assert_uint_eq(cubert_failure_id(f), cubert_failure_id(bad));
  cubert_failure_release(f);
  cubert_failure_release(old);
  cubert_failure_release(bad);
  cubert_handle_release(a);
  cubert_handle_release(b);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_external_refusals_change_nothing) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *h = pattern(&env, 7);
  cubert_external *x = NULL;
  void *addr = NULL;
  cb_test_status(cubert_handle_external_begin(NULL, h, CUBERT_ACCESS_READ, &x, &addr), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_handle_external_begin(c, NULL, CUBERT_ACCESS_READ, &x, &addr), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_handle_external_begin(c, h, CUBERT_ACCESS_READ, NULL, &addr), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_handle_external_begin(c, h, CUBERT_ACCESS_READ, &x, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_handle_external_begin(c, h, CUBERT_ACCESS_READ_WRITE, &x, &addr),
                 CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_handle_external_end(NULL, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  /* another device's memory */
  cb_test_status(cubert_handle_external_begin(env.clients[1], h, CUBERT_ACCESS_WRITE, &x, &addr),
                 CUBERT_ERR_WRONG_DEVICE);
  ck_assert_ptr_null(x);
  cb_test_ok(cubert_handle_check(c, h)); /* no pending failure was left */
  unsigned char got[SIZE], want[SIZE];
  cb_test_ok(cubert_handle_read(c, h, got, SIZE));
  cb_test_pattern(want, SIZE, 7);
  ck_assert(memcmp(got, want, SIZE) == 0);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

int main(void) {
  Suite *s = suite_create("external");
  TCase *tc = tcase_create("external");
  tcase_add_loop_test(tc, test_external_read_gives_the_bytes_and_refuses_taint, 0, CB_TEST_BACKEND_COUNT);
  tcase_add_loop_test(tc, test_external_write_is_pending_then_repaired_or_tainted, 0, CB_TEST_BACKEND_COUNT);
  tcase_add_loop_test(tc, test_external_refusals_change_nothing, 0, CB_TEST_BACKEND_COUNT);
  suite_add_tcase(s, tc);
  return cb_test_run(s);
}
