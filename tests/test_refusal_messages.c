/* tests/test_refusal_messages.c: a refusal made by a helper inside the
 * library (one that fills a cb_errb its public entry point owns, issue 12
 * item 2) reaches the caller whole: the thread's last error is this call's,
 * with its status and its exact message, and carries no failures. Each
 * call is made with a decoy error recorded first, so that a refusal that
 * recorded nothing, or recorded something else, shows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/cubert.h"
#include "cubert/strided.h"
#include "tests/testutil.h"

#define BYTES 4096

/* True when `msg` is `pattern`, where each '#' in the pattern stands for a
 * run of one or more digits (memory and buffer ids) and a '*' ending it for
 * any rest (a backend's own words). */
static bool matches(const char *msg, const char *pattern) {
  while (*pattern) {
    if (pattern[0] == '*' && pattern[1] == '\0') return true;
    if (*pattern == '#') {
      if (*msg < '0' || *msg > '9') return false;
      while (*msg >= '0' && *msg <= '9') msg++;
      pattern++;
    } else if (*msg++ != *pattern++) {
      return false;
    }
  }
  return *msg == '\0';
}

static void decoy(void) { cubert_error_record(CUBERT_ERR_BUSY, "decoy: not this call's error"); }

static void expect_refusal(const char *call, cubert_status st, cubert_status want, const char *pattern) {
  ck_assert_msg(st == want, "%s returned %s, expected %s (%s)", call, cubert_status_name(st),
                cubert_status_name(want), cubert_last_error_message());
  cubert_error *e = cubert_last_error();
  ck_assert_msg(e != NULL, "%s: no last error", call);
  ck_assert_msg(cubert_error_status(e) == want, "%s: last error has status %s", call,
                cubert_status_name(cubert_error_status(e)));
  ck_assert_msg(matches(cubert_error_message(e), pattern), "%s: message\n  \"%s\"\nexpected\n  \"%s\"", call,
                cubert_error_message(e), pattern);
  ck_assert_uint_eq(cubert_error_failure_count(e), 0);
  cubert_error_release(e);
}

#define REFUSES(call, status, ...)                                    \
  do {                                                                \
    char want_[512];                                                  \
    snprintf(want_, sizeof want_, __VA_ARGS__);                       \
    decoy();                                                          \
    expect_refusal(#call, (call), (status), want_);                   \
  } while (0)

/* `call`, made on device 1's client (t.c1) with a handle of device 0, is
 * refused naming both devices, after the called function's name. */
#define REFUSES_FOREIGN_HANDLE(call, t)                                                            \
  REFUSES(call, CUBERT_ERR_WRONG_DEVICE,                                                            \
          "%.*s: the handle (memory #) belongs to device 0 (%s), the client to device 1 (%s)",      \
          (int)strcspn(#call, "("), #call, (t).n0, (t).n1)

static const char *name_of(cubert_runtime *rt, int d, cubert_device_info *info) {
  cb_test_ok(cubert_runtime_device_info(rt, d, info));
  return info->name;
}

/* A runtime of backend `i` with two devices, their clients and names. */
typedef struct two {
  cb_test_env env;
  cubert_client *c0, *c1;
  cubert_device_info i0, i1;
  const char *n0, *n1;
} two;

static bool open_two(int i, two *t) {
  if (!cb_test_open(i, 2, &t->env)) return false;
  t->c0 = t->env.clients[0];
  t->c1 = t->env.clients[1];
  t->n0 = name_of(t->env.runtime, 0, &t->i0);
  t->n1 = name_of(t->env.runtime, 1, &t->i1);
  return true;
}

START_TEST(test_memory_refusals_reach_the_caller_whole) {
  two t;
  if (!open_two(_i, &t)) return;
  cubert_client *c0 = t.c0, *c1 = t.c1;
  const char *n0 = t.n0, *n1 = t.n1;
  cubert_handle *h = NULL, *h1 = NULL, *out = NULL;
  cb_test_ok(cubert_handle_empty(c0, BYTES, &h));
  cb_test_ok(cubert_handle_empty(c1, BYTES, &h1));
  uint8_t buf[BYTES] = {0};
  uint8_t pattern = 7;

  REFUSES(cubert_handle_empty(c0, 0, &out), CUBERT_ERR_INVALID_ARGUMENT, "cubert_handle_empty: size is 0");
  REFUSES(cubert_handle_empty(NULL, 8, &out), CUBERT_ERR_INVALID_ARGUMENT, "cubert_handle_empty: client is NULL");
  REFUSES(cubert_handle_empty_with(c0, 8, 0x100, &out), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_handle_empty_with: unknown flags 0x100 (known: CUBERT_MEMORY_FINE_GRAINED, "
          "CUBERT_MEMORY_SHAREABLE)");
  REFUSES(cubert_handle_empty(c0, UINT64_MAX, &out), CUBERT_ERR_OUT_OF_MEMORY, "device 0 (%s): *", n0);
  /* cubert_handle_create's own refusals are named as its, not cubert_handle_empty's */
  REFUSES(cubert_handle_create(c0, buf, 0, &out), CUBERT_ERR_INVALID_ARGUMENT, "cubert_handle_create: size is 0");
  REFUSES(cubert_handle_create(NULL, buf, 8, &out), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_handle_create: client is NULL");
  ck_assert_ptr_null(out);
  REFUSES_FOREIGN_HANDLE(cubert_handle_read(c1, h, buf, BYTES), t);
  REFUSES_FOREIGN_HANDLE(cubert_handle_write(c1, h, buf, BYTES), t);
  REFUSES_FOREIGN_HANDLE(cubert_handle_fill(c1, h, &pattern, 1), t);
  REFUSES_FOREIGN_HANDLE(cubert_handle_check(c1, h), t);
  REFUSES_FOREIGN_HANDLE(cubert_handle_share(c1, h), t);
  REFUSES(cubert_handle_copy_peer(c0, h, c1, h), CUBERT_ERR_WRONG_DEVICE,
          "cubert_handle_copy_peer: the destination (memory #) belongs to device 0 (%s), the client to device 1 "
          "(%s)",
          n0, n1);
  REFUSES(cubert_handle_copy(c0, h, h1), CUBERT_ERR_WRONG_DEVICE,
          "cubert_handle_copy: the destination (memory #) belongs to device 1 (%s), the client to device 0 (%s)",
          n1, n0);
  cubert_handle_release(h);
  cubert_handle_release(h1);
  cb_test_close(&t.env);
}
END_TEST

START_TEST(test_memory_of_another_or_a_destroyed_runtime_is_named_whole) {
  cb_test_env a, b;
  if (!cb_test_open(_i, 1, &a)) return;
  if (!cb_test_open(_i, 1, &b)) {
    cb_test_close(&a);
    return;
  }
  cubert_device_info ia, ib;
  const char *na = name_of(a.runtime, 0, &ia), *nb = name_of(b.runtime, 0, &ib);
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty(a.clients[0], BYTES, &h));
  uint8_t buf[BYTES] = {0};
  REFUSES(cubert_handle_read(b.clients[0], h, buf, BYTES), CUBERT_ERR_WRONG_DEVICE,
          "cubert_handle_read: the handle (memory #) belongs to device 0 (%s) of another runtime; the client is "
          "on device 0 (%s) of this one",
          na, nb);
  cb_test_close(&a);
  REFUSES(cubert_handle_write(b.clients[0], h, buf, BYTES), CUBERT_ERR_EXPIRED,
          "cubert_handle_write: the handle (memory # of device 0, %s) belongs to a runtime that was destroyed",
          na);
  cubert_handle_release(h);
  cb_test_close(&b);
}
END_TEST

START_TEST(test_host_buffer_refusals_reach_the_caller_whole) {
  two t;
  if (!open_two(_i, &t)) return;
  cubert_client *c0 = t.c0, *c1 = t.c1;
  cubert_host_buffer *hb = NULL, *none = NULL;
  cubert_handle *h = NULL;
  cb_test_ok(cubert_host_buffer_alloc(c0, BYTES, &hb));
  cb_test_ok(cubert_handle_empty(c0, BYTES, &h));

  REFUSES(cubert_host_buffer_alloc(c0, 0, &none), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_host_buffer_alloc: size is 0");
  REFUSES(cubert_host_buffer_register(c0, NULL, 64, &none), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_host_buffer_register: data is NULL");
  ck_assert_ptr_null(none);
  REFUSES(cubert_host_buffer_check(NULL, 0, 1), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_host_buffer_check: buffer is NULL");
  REFUSES(cubert_host_buffer_check(hb, 10, BYTES), CUBERT_ERR_OUT_OF_RANGE,
          "cubert_host_buffer_check: bytes 10..+%d lie outside host buffer # of %d bytes", BYTES, BYTES);
  REFUSES(cubert_host_buffer_mark_written(hb, BYTES + 1, 0), CUBERT_ERR_OUT_OF_RANGE,
          "cubert_host_buffer_mark_written: bytes %d..+0 lie outside host buffer # of %d bytes", BYTES + 1, BYTES);
  REFUSES(cubert_handle_read_host(c0, h, NULL, 0, BYTES), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_handle_read_host: host buffer is NULL");
  REFUSES(cubert_handle_write_host(c0, h, hb, 0, 5), CUBERT_ERR_OUT_OF_RANGE,
          "cubert_handle_write_host: 5 bytes given for a view of %d bytes", BYTES);
  REFUSES(cubert_handle_write_host(c0, h, hb, 1, BYTES), CUBERT_ERR_OUT_OF_RANGE,
          "cubert_handle_write_host: bytes 1..+%d lie outside host buffer # of %d bytes", BYTES, BYTES);
  REFUSES_FOREIGN_HANDLE(cubert_handle_read_host(c1, h, hb, 0, BYTES), t);
  cubert_handle_release(h);
  cubert_host_buffer_release(hb);
  cb_test_close(&t.env);
}
END_TEST

static cubert_view rows(uint32_t elem, uint64_t r, uint64_t cols, uint64_t stride) {
  cubert_view v = {2, elem, 0, {r, cols}, {stride, 1}};
  return v;
}

START_TEST(test_strided_refusals_reach_the_caller_whole) {
  two t;
  if (!open_two(_i, &t)) return;
  cubert_client *c0 = t.c0, *c1 = t.c1;
  const char *n0 = t.n0, *n1 = t.n1;
  cubert_handle *a = NULL, *b = NULL;
  cb_test_ok(cubert_handle_empty(c0, BYTES, &a));
  cb_test_ok(cubert_handle_empty(c0, BYTES, &b));
  uint8_t buf[BYTES] = {0};
  cubert_view v = rows(4, 4, 8, 16), w = rows(4, 4, 4, 16), wide = rows(8, 4, 8, 16);
  cubert_view flat = {1, 4, 0, {32}, {1}};

  REFUSES(cubert_view_check(a, NULL), CUBERT_ERR_INVALID_ARGUMENT, "cubert_view_check: the view of the handle is NULL");
  REFUSES(cubert_handle_read_strided(c0, a, &v, buf, 7), CUBERT_ERR_OUT_OF_RANGE,
          "cubert_handle_read_strided: 7 bytes given for a view of 128 packed bytes");
  REFUSES(cubert_handle_write_strided(c0, a, &v, NULL, 128), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_handle_write_strided: src is NULL");
  REFUSES(cubert_handle_read_strided(c0, a, &v, NULL, 128), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_handle_read_strided: dst is NULL");
  REFUSES_FOREIGN_HANDLE(cubert_handle_write_strided(c1, a, &v, buf, 128), t);
  REFUSES(cubert_handle_copy_strided(c0, a, &v, b, &w), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_handle_copy_strided: dimension 1: 8 elements in the source, 4 in the destination");
  REFUSES(cubert_handle_copy_strided(c0, a, &v, b, &wide), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_handle_copy_strided: elements of 4 bytes in the source, 8 in the destination");
  REFUSES(cubert_handle_copy_strided(c0, a, &v, b, &flat), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_handle_copy_strided: 2 dimensions in the source, 1 in the destination");
  REFUSES(cubert_handle_copy_strided(c0, a, &v, b, NULL), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_handle_copy_strided: the view of the destination is NULL");
  REFUSES(cubert_handle_copy_strided_peer(c0, a, &v, c1, b, &v), CUBERT_ERR_WRONG_DEVICE,
          "cubert_handle_copy_strided_peer: the destination (memory #) belongs to device 0 (%s), the client to "
          "device 1 (%s)",
          n0, n1);
  REFUSES_FOREIGN_HANDLE(cubert_handle_check_strided(c1, a, &v), t);
  /* the peer copy on one device is a strided copy, its refusals named as the peer copy's */
  REFUSES(cubert_handle_copy_strided_peer(c0, a, &v, c0, b, &w), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_handle_copy_strided_peer: dimension 1: 8 elements in the source, 4 in the destination");
  REFUSES(cubert_handle_copy_strided_peer(c0, a, &v, c0, a, &v), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_handle_copy_strided_peer: the source and destination footprints share bytes of memory # (a "
          "strided copy needs disjoint footprints; interleaved ones are fine)");
  cubert_handle_release(a);
  cubert_handle_release(b);
  cb_test_close(&t.env);
}
END_TEST

static Suite *refusal_suite(void) {
  Suite *s = suite_create("refusal_messages");
  TCase *tc = tcase_create("whole");
  cb_test_add_backend_loop(tc, test_memory_refusals_reach_the_caller_whole);
  cb_test_add_backend_loop(tc, test_memory_of_another_or_a_destroyed_runtime_is_named_whole);
  cb_test_add_backend_loop(tc, test_host_buffer_refusals_reach_the_caller_whole);
  cb_test_add_backend_loop(tc, test_strided_refusals_reach_the_caller_whole);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return cb_test_run(refusal_suite()); }
