/* tests/test_handles.c: memory handles: empty/create/read/write/fill/copy,
 * slicing, can_mut, overlap, claim keys, bindings and weak bindings, wrong
 * devices, out of memory and the pools' usage report.
 *
 * Every test loops over the backends (tests/testutil.h). Where a result
 * depends on the host backend's fixed size (CB_TEST_HOST_MEMORY), the test
 * says so and takes the size from the device's info instead where it can. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/cubert.h"
#include "tests/testutil.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)

#define expect_message(needle)                                                        \
  ck_assert_msg(strstr(cubert_last_error_message(), (needle)) != NULL,                \
                "last error message \"%s\" does not mention \"%s\"",                   \
                cubert_last_error_message(), (needle))

/* A handle of `size` bytes holding cb_test_pattern(seed). */
static cubert_handle *make(cubert_client *c, uint64_t size, uint64_t seed) {
  uint8_t *buf = malloc(size);
  ck_assert_ptr_nonnull(buf);
  cb_test_pattern(buf, size, seed);
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_create(c, buf, size, &h));
  free(buf);
  ck_assert_ptr_nonnull(h);
  return h;
}

static cubert_handle *slice(const cubert_handle *h, uint64_t start, uint64_t end) {
  cubert_handle *s = NULL;
  cb_test_ok(cubert_handle_slice(h, start, end, &s));
  ck_assert_ptr_nonnull(s);
  return s;
}

/* Reads the handle and compares with `want` (size_in_use bytes). */
static void expect_bytes(cubert_client *c, const cubert_handle *h, const void *want, const char *what) {
  uint64_t n = cubert_handle_size_in_use(h);
  uint8_t *got = malloc(n ? n : 1);
  ck_assert_ptr_nonnull(got);
  cb_test_ok(cubert_handle_read(c, h, got, n));
  const uint8_t *w = want;
  for (uint64_t k = 0; k < n; k++)
    if (got[k] != w[k]) {
      uint8_t g = got[k];
      free(got);
      ck_abort_msg("%s: byte %" PRIu64 " of %" PRIu64 " is 0x%02x, expected 0x%02x", what, k, n, g, w[k]);
    }
  free(got);
}

/* Reads the handle and checks it still holds cb_test_pattern(seed). */
static void expect_pattern(cubert_client *c, const cubert_handle *h, uint64_t seed, const char *what) {
  uint64_t n = cubert_handle_size_in_use(h);
  uint8_t *want = malloc(n ? n : 1);
  ck_assert_ptr_nonnull(want);
  cb_test_pattern(want, n, seed);
  expect_bytes(c, h, want, what);
  free(want);
}

/* Bytes in use / reserved over every pool of the client's device. */
typedef struct usage_sum {
  uint64_t reserved, in_use, high_water;
  size_t pools;
} usage_sum;

static usage_sum usage(cubert_client *c) {
  cubert_pool_usage p[16];
  size_t count = 0;
  cb_test_ok(cubert_memory_usage(c, p, 16, &count));
  ck_assert_uint_ge(count, 1);
  ck_assert_uint_le(count, 16);
  usage_sum u = {0, 0, 0, count};
  for (size_t i = 0; i < count; i++) {
    ck_assert_msg(p[i].name[0] != '\0', "pool %zu has no name", i);
    ck_assert_msg(p[i].reserved >= p[i].in_use, "pool %s: %" PRIu64 " in use of %" PRIu64 " reserved",
                  p[i].name, p[i].in_use, p[i].reserved);
    ck_assert_msg(p[i].high_water >= p[i].in_use, "pool %s: high water %" PRIu64 " below in use %" PRIu64,
                  p[i].name, p[i].high_water, p[i].in_use);
    u.reserved += p[i].reserved;
    u.in_use += p[i].in_use;
    u.high_water += p[i].high_water;
  }
  return u;
}

/* ------------------------------------------------------------ basics */

START_TEST(test_empty_handle_has_the_size_asked_for) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  static const uint64_t sizes[] = {1, 3, 255, 256, 4097, 65536, 3 * MiB + 5};
  uint64_t ids[sizeof sizes / sizeof sizes[0]];
  cubert_handle *hs[sizeof sizes / sizeof sizes[0]];
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    cubert_handle *h = NULL;
    cb_test_ok(cubert_handle_empty(c, sizes[i], &h));
    ck_assert_uint_eq(cubert_handle_size(h), sizes[i]);
    ck_assert_uint_eq(cubert_handle_size_in_use(h), sizes[i]);
    ck_assert_uint_eq(cubert_handle_offset_start(h), 0);
    ck_assert_int_eq(cubert_handle_device(h), 0);
    ck_assert_uint_eq(cubert_handle_stream(h), cubert_client_stream(c));
    ck_assert(cubert_handle_can_mut(h));
    ck_assert(!cubert_handle_is_shared(h));
    ck_assert_uint_eq(cubert_handle_peer_address(h), 0);
    ids[i] = cubert_handle_memory_id(h);
    ck_assert_uint_ne(ids[i], 0);
    for (size_t j = 0; j < i; j++) ck_assert_uint_ne(ids[i], ids[j]);
    hs[i] = h;
  }
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) cubert_handle_release(hs[i]);

  cubert_handle *h = (cubert_handle *)&env; /* sentinel */
  cb_test_status(cubert_handle_empty(c, 0, &h), CUBERT_ERR_INVALID_ARGUMENT);
  expect_message("size");
  ck_assert_ptr_eq(h, (cubert_handle *)&env);
  cb_test_status(cubert_handle_create(c, ids, 0, &h), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_eq(h, (cubert_handle *)&env);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_create_then_read_round_trips) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  static const uint64_t sizes[] = {1, 3, 1000, 65536 + 7, 2 * MiB + 1};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    cubert_handle *h = make(c, sizes[i], 100 + i);
    expect_pattern(c, h, 100 + i, "created");
    uint8_t *buf = malloc(sizes[i]);
    cb_test_ok(cubert_handle_write(c, h, cb_test_pattern(buf, sizes[i], 200 + i), sizes[i]));
    expect_pattern(c, h, 200 + i, "rewritten");
    free(buf);
    cubert_handle_release(h);
  }
  /* sizes must be exactly the view's */
  cubert_handle *h = make(c, 1000, 7);
  uint8_t buf[1001];
  cb_test_status(cubert_handle_read(c, h, buf, 999), CUBERT_ERR_OUT_OF_RANGE);
  expect_message("999");
  expect_message("1000");
  cb_test_status(cubert_handle_read(c, h, buf, 1001), CUBERT_ERR_OUT_OF_RANGE);
  memset(buf, 0xEE, sizeof buf);
  cb_test_status(cubert_handle_write(c, h, buf, 1001), CUBERT_ERR_OUT_OF_RANGE);
  expect_message("1001");
  cb_test_status(cubert_handle_write(c, h, buf, 10), CUBERT_ERR_OUT_OF_RANGE);
  expect_pattern(c, h, 7, "after refused writes");
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_fill_repeats_each_pattern_size) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  const uint64_t n = 4096 + 24;
  static const uint8_t pattern[8] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  cubert_handle *h = make(c, n, 1);
  uint8_t *want = malloc(n);
  for (size_t ps = 1; ps <= 8; ps *= 2) {
    cb_test_ok(cubert_handle_fill(c, h, pattern, ps));
    for (uint64_t k = 0; k < n; k++) want[k] = pattern[k % ps];
    expect_bytes(c, h, want, "filled");
  }
  /* a slice at an odd offset: the pattern starts at the slice's first byte,
   * and nothing outside it changes */
  cb_test_pattern(want, n, 2);
  cb_test_ok(cubert_handle_write(c, h, want, n));
  cubert_handle *s = slice(h, 3, n - 3 - 40);
  ck_assert_uint_eq(cubert_handle_size_in_use(s), 40);
  cb_test_ok(cubert_handle_fill(c, s, pattern, 8));
  for (uint64_t k = 0; k < 40; k++) want[3 + k] = pattern[k % 8];
  expect_bytes(c, h, want, "slice filled");
  cubert_handle_release(s);
  free(want);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_fill_refuses_bad_pattern_sizes) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *h = make(c, 4096, 3);
  static const size_t bad[] = {0, 3, 5, 6, 7, 9, 16, 4096};
  uint8_t pattern[4096] = {0xAB};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cubert_status st = cubert_handle_fill(c, h, pattern, bad[i]);
    ck_assert_msg(st == CUBERT_ERR_INVALID_ARGUMENT, "pattern of %zu bytes gave %s", bad[i],
                  cubert_status_name(st));
    expect_message("pattern");
  }
  expect_pattern(c, h, 3, "after refused fills");
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_fill_refuses_a_pattern_not_dividing_the_size) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *h = make(c, 10, 4);
  const uint64_t pattern = 0x0102030405060708ull;
  cb_test_status(cubert_handle_fill(c, h, &pattern, 4), CUBERT_ERR_INVALID_ARGUMENT);
  expect_message("10");
  cb_test_status(cubert_handle_fill(c, h, &pattern, 8), CUBERT_ERR_INVALID_ARGUMENT);
  expect_pattern(c, h, 4, "after refused fills");
  /* a slice of 8 bytes of it takes the 8-byte pattern */
  cubert_handle *s = slice(h, 1, 1);
  cb_test_ok(cubert_handle_fill(c, s, &pattern, 8));
  uint8_t want[10];
  cb_test_pattern(want, 10, 4);
  memcpy(want + 1, &pattern, 8);
  expect_bytes(c, h, want, "slice filled");
  cb_test_ok(cubert_handle_fill(c, h, &pattern, 2));
  for (int k = 0; k < 10; k++) want[k] = ((const uint8_t *)&pattern)[k % 2];
  expect_bytes(c, h, want, "2-byte fill");
  cubert_handle_release(s);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_copy_within_a_device_copies_every_byte) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  const uint64_t n = 300 * KiB + 13;
  cubert_handle *src = make(c, n, 10);
  cubert_handle *dst = make(c, n, 11);
  cb_test_ok(cubert_handle_copy(c, src, dst));
  expect_pattern(c, dst, 10, "destination");
  expect_pattern(c, src, 10, "source");

  /* between two slices of one allocation: low half -> high half */
  cubert_handle *both = make(c, 2048, 12);
  cubert_handle *lo = slice(both, 0, 1024), *hi = slice(both, 1024, 0);
  cb_test_ok(cubert_handle_copy(c, lo, hi));
  uint8_t want[2048];
  cb_test_pattern(want, 2048, 12);
  memcpy(want + 1024, want, 1024);
  expect_bytes(c, both, want, "halves");

  /* refused: overlapping views, itself, different sizes */
  cubert_handle *mid = slice(both, 512, 512);
  cb_test_status(cubert_handle_copy(c, lo, mid), CUBERT_ERR_INVALID_ARGUMENT);
  expect_message("overlap");
  cb_test_status(cubert_handle_copy(c, both, both), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_handle_copy(c, src, lo), CUBERT_ERR_OUT_OF_RANGE);
  expect_message("1024");
  expect_bytes(c, both, want, "after refused copies");
  expect_pattern(c, src, 10, "source after refused copies");
  cubert_handle_release(mid);
  cubert_handle_release(lo);
  cubert_handle_release(hi);
  cubert_handle_release(both);
  cubert_handle_release(src);
  cubert_handle_release(dst);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ slices */

START_TEST(test_slices_view_the_right_bytes) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  uint8_t want[1024];
  cb_test_pattern(want, sizeof want, 20);
  cubert_handle *h = make(c, 1024, 20);
  cubert_handle *s = slice(h, 100, 24);
  ck_assert_uint_eq(cubert_handle_size(s), 1024);
  ck_assert_uint_eq(cubert_handle_size_in_use(s), 900);
  ck_assert_uint_eq(cubert_handle_offset_start(s), 100);
  ck_assert_uint_eq(cubert_handle_memory_id(s), cubert_handle_memory_id(h));
  ck_assert_int_eq(cubert_handle_device(s), cubert_handle_device(h));
  ck_assert_uint_eq(cubert_handle_stream(s), cubert_handle_stream(h));
  expect_bytes(c, s, want + 100, "slice");
  /* a slice of a slice: offsets add up */
  cubert_handle *ss = slice(s, 50, 50);
  ck_assert_uint_eq(cubert_handle_offset_start(ss), 150);
  ck_assert_uint_eq(cubert_handle_size_in_use(ss), 800);
  ck_assert_uint_eq(cubert_handle_size(ss), 1024);
  expect_bytes(c, ss, want + 150, "slice of slice");
  cubert_handle *sss = slice(ss, 799, 0);
  ck_assert_uint_eq(cubert_handle_size_in_use(sss), 1);
  ck_assert_uint_eq(cubert_handle_offset_start(sss), 949);
  expect_bytes(c, sss, want + 949, "last byte of slice of slice");
  /* a slice outlives its parent */
  cubert_handle_release(h);
  cubert_handle_release(s);
  expect_bytes(c, ss, want + 150, "slice after its parents went");
  cubert_handle_release(sss);
  cubert_handle_release(ss);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_slice_offsets_past_the_end_are_out_of_range) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *h = make(c, 1024, 21);
  static const uint64_t bad[][2] = {{1025, 0}, {0, 1025},         {512, 513},
                                    {1024, 1}, {UINT64_MAX, 0},   {1, UINT64_MAX},
                                    {UINT64_MAX, UINT64_MAX},     {UINT64_MAX - 10, 12}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cubert_handle *s = (cubert_handle *)&env;
    cubert_status st = cubert_handle_slice(h, bad[i][0], bad[i][1], &s);
    ck_assert_msg(st == CUBERT_ERR_OUT_OF_RANGE, "slice(%" PRIu64 ", %" PRIu64 ") gave %s", bad[i][0],
                  bad[i][1], cubert_status_name(st));
    ck_assert_ptr_eq(s, (cubert_handle *)&env);
    expect_message("1024");
  }
  /* relative to the view, not the allocation */
  cubert_handle *v = slice(h, 100, 24);
  cubert_handle *s = NULL;
  cb_test_status(cubert_handle_slice(v, 901, 0, &s), CUBERT_ERR_OUT_OF_RANGE);
  expect_message("900");
  cb_test_status(cubert_handle_slice(v, 0, 901, &s), CUBERT_ERR_OUT_OF_RANGE);
  cb_test_status(cubert_handle_slice(v, 450, 451, &s), CUBERT_ERR_OUT_OF_RANGE);
  ck_assert_ptr_null(s);
  ck_assert(cubert_handle_can_mut(h) == false); /* v is alive */
  cubert_handle_release(v);
  ck_assert(cubert_handle_can_mut(h)); /* no failed slice left a reference */
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_zero_byte_slice_works_and_still_checks_the_device) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  cubert_client *c0 = env.clients[0], *c1 = env.clients[1];
  cubert_handle *h = make(c0, 1024, 22);
  cubert_handle *other = make(c0, 64, 23);
  cubert_handle *z_end = slice(h, 1024, 0);
  cubert_handle *z_mid = slice(h, 512, 512);
  cubert_handle *z_other = slice(other, 0, 64);
  ck_assert_uint_eq(cubert_handle_size_in_use(z_end), 0);
  ck_assert_uint_eq(cubert_handle_size_in_use(z_mid), 0);
  ck_assert_uint_eq(cubert_handle_offset_start(z_mid), 512);
  ck_assert_uint_eq(cubert_handle_size(z_mid), 1024);
  uint8_t buf[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  const uint32_t pattern = 0xDEADBEEF;
  cb_test_ok(cubert_handle_read(c0, z_mid, buf, 0));
  cb_test_ok(cubert_handle_read(c0, z_mid, NULL, 0));
  ck_assert_uint_eq(buf[0], 0xFF);
  cb_test_ok(cubert_handle_write(c0, z_mid, buf, 0));
  cb_test_ok(cubert_handle_fill(c0, z_mid, &pattern, 4));
  cb_test_ok(cubert_handle_fill(c0, z_end, &pattern, 8));
  cb_test_ok(cubert_handle_copy(c0, z_mid, z_other));
  cb_test_ok(cubert_handle_copy(c0, z_end, z_mid));
  cb_test_ok(cubert_handle_check(c0, z_mid));
  cb_test_status(cubert_handle_read(c0, z_mid, buf, 1), CUBERT_ERR_OUT_OF_RANGE);
  expect_pattern(c0, h, 22, "allocation after zero-byte work");
  expect_pattern(c0, other, 23, "other allocation after zero-byte work");
  /* zero bytes are still memory of device 0 */
  cb_test_status(cubert_handle_read(c1, z_mid, buf, 0), CUBERT_ERR_WRONG_DEVICE);
  cb_test_status(cubert_handle_write(c1, z_mid, buf, 0), CUBERT_ERR_WRONG_DEVICE);
  cb_test_status(cubert_handle_fill(c1, z_mid, &pattern, 4), CUBERT_ERR_WRONG_DEVICE);
  cb_test_status(cubert_handle_copy(c1, z_mid, z_other), CUBERT_ERR_WRONG_DEVICE);
  cb_test_status(cubert_handle_check(c1, z_mid), CUBERT_ERR_WRONG_DEVICE);
  cubert_handle *z1 = NULL, *h1 = make(c1, 16, 24);
  cb_test_ok(cubert_handle_slice(h1, 8, 8, &z1));
  cb_test_status(cubert_handle_copy(c0, z_mid, z1), CUBERT_ERR_WRONG_DEVICE);
  cb_test_status(cubert_handle_copy(c1, z_mid, z1), CUBERT_ERR_WRONG_DEVICE);
  cubert_handle_release(z1);
  cubert_handle_release(h1);
  cubert_handle_release(z_end);
  cubert_handle_release(z_mid);
  cubert_handle_release(z_other);
  cubert_handle_release(other);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

/* xorshift64*: the random walk of the model test, reproducible by seed. */
static uint64_t rnd(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}

START_TEST(test_slice_operations_touch_exactly_their_bytes) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  enum { N = 8192, OPS = 300 };
  static uint8_t model[N], model2[N], buf[N];
  cubert_handle *h = make(c, N, 30), *h2 = make(c, N, 31);
  cb_test_pattern(model, N, 30);
  cb_test_pattern(model2, N, 31);
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  for (int op = 0; op < OPS; op++) {
    uint64_t a = rnd(&seed) % (N + 1), b = rnd(&seed) % (N + 1);
    uint64_t start = a < b ? a : b, end = a < b ? b : a;
    uint64_t len = end - start;
    cubert_handle *s = slice(h, start, N - end);
    ck_assert_uint_eq(cubert_handle_size_in_use(s), len);
    switch (rnd(&seed) % 4) {
      case 0: /* write */
        cb_test_pattern(buf, len, 1000 + op);
        cb_test_ok(cubert_handle_write(c, s, buf, len));
        memcpy(model + start, buf, len);
        break;
      case 1: { /* fill with a pattern size dividing the length */
        uint8_t pat[8];
        cb_test_pattern(pat, 8, 2000 + op);
        size_t ps = (size_t)1 << (rnd(&seed) % 4);
        while (len % ps) ps /= 2;
        cb_test_ok(cubert_handle_fill(c, s, pat, ps));
        for (uint64_t k = 0; k < len; k++) model[start + k] = pat[k % ps];
        break;
      }
      case 2: { /* copy from the same place of the other allocation */
        cubert_handle *from = slice(h2, start, N - end);
        cb_test_ok(cubert_handle_copy(c, from, s));
        memcpy(model + start, model2 + start, len);
        cubert_handle_release(from);
        break;
      }
      default: { /* copy into the other allocation, at another place */
        uint64_t at = rnd(&seed) % (N - len + 1);
        cubert_handle *to = slice(h2, at, N - at - len);
        cb_test_ok(cubert_handle_copy(c, s, to));
        memcpy(model2 + at, model + start, len);
        cubert_handle_release(to);
        break;
      }
    }
    /* the slice reads back its bytes, the whole allocations match the model */
    expect_bytes(c, s, model + start, "slice");
    cubert_handle_release(s);
    if (op % 25 == 0 || op == OPS - 1) {
      expect_bytes(c, h, model, "allocation 1");
      expect_bytes(c, h2, model2, "allocation 2");
    }
  }
  cubert_handle_release(h);
  cubert_handle_release(h2);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_size_reports_allocation_and_view) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty(env.clients[0], 5000, &h));
  cubert_handle *s = slice(h, 1000, 999);
  ck_assert_uint_eq(cubert_handle_size(h), 5000);
  ck_assert_uint_eq(cubert_handle_size_in_use(h), 5000);
  ck_assert_uint_eq(cubert_handle_size(s), 5000);
  ck_assert_uint_eq(cubert_handle_size_in_use(s), 3001);
  cubert_handle *cl = cubert_handle_clone(s);
  ck_assert_ptr_nonnull(cl);
  ck_assert_ptr_ne(cl, s);
  ck_assert_uint_eq(cubert_handle_size(cl), 5000);
  ck_assert_uint_eq(cubert_handle_size_in_use(cl), 3001);
  ck_assert_uint_eq(cubert_handle_offset_start(cl), 1000);
  ck_assert_int_eq(cubert_handle_overlap(cl, s), CUBERT_OVERLAP_SAME);
  cubert_handle_release(cl);
  cubert_handle_release(s);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ can_mut, overlap */

START_TEST(test_can_mut_counts_handles_not_bindings) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty(env.clients[0], 4096, &h));
  ck_assert(cubert_handle_can_mut(h));
  cubert_handle *cl = cubert_handle_clone(h);
  ck_assert(!cubert_handle_can_mut(h));
  ck_assert(!cubert_handle_can_mut(cl));
  cubert_handle_release(cl);
  ck_assert(cubert_handle_can_mut(h));
  cubert_binding *b1 = NULL, *b2 = NULL;
  cb_test_ok(cubert_handle_bind(h, &b1));
  cb_test_ok(cubert_handle_bind(h, &b2));
  ck_assert(cubert_handle_can_mut(h));
  cubert_weak *w = NULL;
  cb_test_ok(cubert_handle_downgrade(h, &w));
  ck_assert(cubert_handle_can_mut(h));
  cubert_binding *b3 = NULL;
  cb_test_ok(cubert_weak_upgrade(w, &b3));
  ck_assert(cubert_handle_can_mut(h));
  /* a slice is a handle on the same memory */
  cubert_handle *s = slice(h, 10, 10);
  ck_assert(!cubert_handle_can_mut(h));
  ck_assert(!cubert_handle_can_mut(s));
  cubert_handle_release(h);
  ck_assert(cubert_handle_can_mut(s)); /* now the only handle */
  cubert_binding_release(b1);
  cubert_binding_release(b2);
  cubert_binding_release(b3);
  cubert_weak_release(w);
  ck_assert(cubert_handle_can_mut(s));
  /* another allocation's handles do not count */
  cubert_handle *o = NULL;
  cb_test_ok(cubert_handle_empty(env.clients[0], 4096, &o));
  cubert_handle *oc = cubert_handle_clone(o);
  ck_assert(cubert_handle_can_mut(s));
  cubert_handle_release(oc);
  cubert_handle_release(o);
  cubert_handle_release(s);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_overlap_classifies_views) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_handle *h = NULL, *g = NULL;
  cb_test_ok(cubert_handle_empty(env.clients[0], 1024, &h));
  cb_test_ok(cubert_handle_empty(env.clients[0], 1024, &g));
  cubert_handle *a = slice(h, 0, 512);    /* [0, 512) */
  cubert_handle *b = slice(h, 256, 256);  /* [256, 768) */
  cubert_handle *c = slice(h, 512, 0);    /* [512, 1024) */
  cubert_handle *a2 = slice(h, 0, 512);   /* [0, 512) again */
  cubert_handle *ga = slice(g, 0, 512);   /* same offsets, other memory */
  cubert_handle *cl = cubert_handle_clone(h);
  struct { const cubert_handle *x, *y; cubert_overlap want; const char *what; } cases[] = {
      {h, h, CUBERT_OVERLAP_SAME, "h, h"},
      {h, cl, CUBERT_OVERLAP_SAME, "h, clone"},
      {a, a2, CUBERT_OVERLAP_SAME, "two equal slices"},
      {a, b, CUBERT_OVERLAP_PARTIAL, "[0,512) [256,768)"},
      {b, c, CUBERT_OVERLAP_PARTIAL, "[256,768) [512,1024)"},
      {h, a, CUBERT_OVERLAP_PARTIAL, "whole, first half"},
      {h, b, CUBERT_OVERLAP_PARTIAL, "whole, middle"},
      {a, c, CUBERT_OVERLAP_DISJOINT, "adjacent halves"},
      {a, ga, CUBERT_OVERLAP_DISJOINT, "same offsets, other allocation"},
      {h, g, CUBERT_OVERLAP_DISJOINT, "two allocations"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ck_assert_msg(cubert_handle_overlap(cases[i].x, cases[i].y) == cases[i].want, "%s: got %d, want %d",
                  cases[i].what, (int)cubert_handle_overlap(cases[i].x, cases[i].y), (int)cases[i].want);
    ck_assert_msg(cubert_handle_overlap(cases[i].y, cases[i].x) == cases[i].want, "%s (swapped): got %d",
                  cases[i].what, (int)cubert_handle_overlap(cases[i].y, cases[i].x));
  }
  cubert_handle_release(cl);
  cubert_handle_release(ga);
  cubert_handle_release(a2);
  cubert_handle_release(c);
  cubert_handle_release(b);
  cubert_handle_release(a);
  cubert_handle_release(g);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

/* An empty view has no bytes, so it shares none with any view (DESIGN:
 * overlap is "over the bytes the offsets leave"), wherever it sits. */
START_TEST(test_overlap_of_an_empty_view_is_disjoint) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty(env.clients[0], 1024, &h));
  static const uint64_t at[] = {0, 1, 300, 512, 1023, 1024};
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    cubert_handle *z = slice(h, at[i], 1024 - at[i]);
    ck_assert_msg(cubert_handle_overlap(z, h) == CUBERT_OVERLAP_DISJOINT,
                  "an empty view at %" PRIu64 " overlaps the whole allocation as %d", at[i],
                  (int)cubert_handle_overlap(z, h));
    ck_assert_msg(cubert_handle_overlap(h, z) == CUBERT_OVERLAP_DISJOINT,
                  "the whole allocation overlaps an empty view at %" PRIu64 " as %d", at[i],
                  (int)cubert_handle_overlap(h, z));
    cubert_handle_release(z);
  }
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ claim keys, bindings */

static cubert_claim_key key_of(const cubert_handle *h) {
  cubert_binding *b = NULL;
  cb_test_ok(cubert_handle_bind(h, &b));
  cubert_claim_key k = cubert_binding_claim_key(b);
  cubert_binding_release(b);
  return k;
}

START_TEST(test_claim_key_names_memory_and_range) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty(env.clients[0], 1024, &h));
  uint64_t id = cubert_handle_memory_id(h);
  cubert_claim_key k = key_of(h);
  ck_assert_uint_eq(k.memory, id);
  ck_assert_uint_eq(k.start, 0);
  ck_assert_uint_eq(k.end, 1024);
  cubert_handle *lo = slice(h, 0, 512), *hi = slice(h, 512, 0);
  cubert_claim_key kl = key_of(lo), kh = key_of(hi);
  ck_assert_uint_eq(kl.memory, id);
  ck_assert_uint_eq(kh.memory, id);
  ck_assert_uint_eq(kl.start, 0);
  ck_assert_uint_eq(kl.end, 512);
  ck_assert_uint_eq(kh.start, 512);
  ck_assert_uint_eq(kh.end, 1024);
  ck_assert(kl.start != kh.start || kl.end != kh.end);
  /* range = offset_start .. size - offset_end, in allocation bytes */
  cubert_handle *inner = slice(hi, 100, 100);
  cubert_claim_key ki = key_of(inner);
  ck_assert_uint_eq(ki.memory, id);
  ck_assert_uint_eq(ki.start, 612);
  ck_assert_uint_eq(ki.end, 924);
  /* a binding upgraded from a weak keeps the key */
  cubert_weak *w = NULL;
  cubert_binding *b = NULL;
  cb_test_ok(cubert_handle_downgrade(inner, &w));
  cb_test_ok(cubert_weak_upgrade(w, &b));
  cubert_claim_key ku = cubert_binding_claim_key(b);
  ck_assert_uint_eq(ku.memory, id);
  ck_assert_uint_eq(ku.start, 612);
  ck_assert_uint_eq(ku.end, 924);
  /* and so does a weak made from a binding */
  cubert_weak *w2 = NULL;
  cubert_binding *b2 = NULL;
  cb_test_ok(cubert_binding_downgrade(b, &w2));
  cb_test_ok(cubert_weak_upgrade(w2, &b2));
  cubert_claim_key k2 = cubert_binding_claim_key(b2);
  ck_assert_uint_eq(k2.memory, id);
  ck_assert_uint_eq(k2.start, 612);
  ck_assert_uint_eq(k2.end, 924);
  /* another allocation, same range: another key */
  cubert_handle *g = NULL;
  cb_test_ok(cubert_handle_empty(env.clients[0], 1024, &g));
  ck_assert_uint_ne(key_of(g).memory, id);
  cubert_handle_release(g);
  cubert_binding_release(b2);
  cubert_weak_release(w2);
  cubert_binding_release(b);
  cubert_weak_release(w);
  cubert_handle_release(inner);
  cubert_handle_release(lo);
  cubert_handle_release(hi);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_bindings_keep_memory_reserved_after_the_last_handle) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  usage_sum base = usage(c);
  cubert_handle *h = make(c, 3000, 40);
  cb_test_ok(cubert_sync_device(c)); /* the write is done and forgotten */
  uint64_t id = cubert_handle_memory_id(h);
  usage_sum with = usage(c);
  ck_assert_uint_ge(with.in_use, base.in_use + 3000);
  cubert_binding *b = NULL;
  cb_test_ok(cubert_handle_bind(h, &b));
  cubert_weak *w = NULL;
  cb_test_ok(cubert_binding_downgrade(b, &w));
  cubert_handle_release(h);
  /* the binding alone keeps it */
  usage_sum held = usage(c);
  ck_assert_uint_eq(held.in_use, with.in_use);
  cubert_binding *again = NULL;
  cb_test_ok(cubert_weak_upgrade(w, &again));
  ck_assert_uint_eq(cubert_binding_claim_key(again).memory, id);
  cubert_binding_release(again);
  ck_assert_uint_eq(usage(c).in_use, with.in_use);
  cubert_binding_release(b);
  ck_assert_uint_eq(usage(c).in_use, base.in_use);
  cb_test_status(cubert_weak_upgrade(w, &again), CUBERT_ERR_EXPIRED);
  cubert_weak_release(w);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_weak_upgrades_only_while_alive) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty(c, 2048, &h));
  uint64_t id = cubert_handle_memory_id(h);
  cubert_weak *w = NULL;
  cb_test_ok(cubert_handle_downgrade(h, &w));
  ck_assert(cubert_handle_can_mut(h)); /* a weak counts for nothing */
  cubert_binding *b = NULL;
  cb_test_ok(cubert_weak_upgrade(w, &b));
  cubert_claim_key k = cubert_binding_claim_key(b);
  ck_assert_uint_eq(k.memory, id);
  ck_assert_uint_eq(k.end, 2048);
  cubert_binding_release(b);
  cb_test_ok(cubert_weak_upgrade(w, &b)); /* still alive: h */
  cubert_binding_release(b);
  cubert_handle_release(h);
  b = (cubert_binding *)&env;
  cb_test_status(cubert_weak_upgrade(w, &b), CUBERT_ERR_EXPIRED);
  ck_assert_ptr_eq(b, (cubert_binding *)&env);
  char num[32];
  snprintf(num, sizeof num, "%" PRIu64, id);
  expect_message(num);
  cubert_weak_release(w);

  /* memory that work wrote: once that work is done and the handle gone */
  cubert_handle *h2 = make(c, 4096, 41);
  cubert_weak *w2 = NULL;
  cb_test_ok(cubert_handle_downgrade(h2, &w2));
  cb_test_ok(cubert_weak_upgrade(w2, &b));
  cubert_binding_release(b);
  cubert_handle_release(h2);
  cb_test_ok(cubert_sync_device(c));
  cb_test_status(cubert_weak_upgrade(w2, &b), CUBERT_ERR_EXPIRED);
  cubert_weak_release(w2);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_reused_slot_never_upgrades) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  uint64_t last_id = 0;
  for (int round = 0; round < 100; round++) {
    cubert_handle *h = NULL;
    cb_test_ok(cubert_handle_empty(c, 1000, &h));
    uint64_t id = cubert_handle_memory_id(h);
    ck_assert_uint_ne(id, last_id);
    cubert_weak *w = NULL;
    cb_test_ok(cubert_handle_downgrade(h, &w));
    cubert_handle_release(h);
    /* the next tenant, most likely of the same slot and the same bytes */
    cubert_handle *n = NULL;
    cb_test_ok(cubert_handle_empty(c, 1000, &n));
    uint64_t nid = cubert_handle_memory_id(n);
    ck_assert_uint_ne(nid, id);
    cubert_binding *b = NULL;
    cb_test_status(cubert_weak_upgrade(w, &b), CUBERT_ERR_EXPIRED);
    ck_assert_ptr_null(b);
    cubert_weak *nw = NULL;
    cb_test_ok(cubert_handle_downgrade(n, &nw));
    cb_test_ok(cubert_weak_upgrade(nw, &b));
    ck_assert_uint_eq(cubert_binding_claim_key(b).memory, nid);
    cubert_binding_release(b);
    cubert_weak_release(nw);
    cubert_weak_release(w);
    cubert_handle_release(n);
    last_id = nid;
  }
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ wrong device */

START_TEST(test_wrong_device_is_refused_by_every_operation) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  cubert_client *c0 = env.clients[0], *c1 = env.clients[1];
  const uint64_t n = 1024;
  cubert_handle *h0 = make(c0, n, 50), *h1 = make(c1, n, 51), *x0 = make(c0, n, 52);
  uint8_t buf[1024];
  const uint32_t pattern = 0x01010101;

  cb_test_status(cubert_handle_read(c1, h0, buf, n), CUBERT_ERR_WRONG_DEVICE);
  expect_message("device 0");
  expect_message("device 1");
  cb_test_status(cubert_handle_write(c1, h0, buf, n), CUBERT_ERR_WRONG_DEVICE);
  cb_test_status(cubert_handle_fill(c1, h0, &pattern, 4), CUBERT_ERR_WRONG_DEVICE);
  cb_test_status(cubert_handle_copy(c1, h0, h1), CUBERT_ERR_WRONG_DEVICE); /* source */
  cb_test_status(cubert_handle_copy(c1, h1, h0), CUBERT_ERR_WRONG_DEVICE); /* destination */
  cb_test_status(cubert_handle_copy(c0, h0, h1), CUBERT_ERR_WRONG_DEVICE);
  cb_test_status(cubert_handle_copy(c1, h0, x0), CUBERT_ERR_WRONG_DEVICE); /* both */
  cb_test_status(cubert_handle_copy_peer(c1, h0, c0, x0), CUBERT_ERR_WRONG_DEVICE);
  cb_test_status(cubert_handle_copy_peer(c0, h0, c0, h1), CUBERT_ERR_WRONG_DEVICE);
  cb_test_status(cubert_handle_share(c1, h0), CUBERT_ERR_WRONG_DEVICE);
  ck_assert(!cubert_handle_is_shared(h0));
  cb_test_status(cubert_handle_check(c1, h0), CUBERT_ERR_WRONG_DEVICE);

  cubert_kernel *fill = NULL;
  cb_test_ok(cubert_builtin_kernel(CUBERT_BUILTIN_FILL_U32, &fill));
  uint64_t count = n / 4;
  uint32_t value = 0x77777777;
  cubert_arg args[3] = {cubert_arg_buffer(h0), cubert_arg_scalar(&count, 8), cubert_arg_scalar(&value, 4)};
  cubert_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  cb_test_status(cubert_launch(c1, fill, &cfg, args, 3), CUBERT_ERR_WRONG_DEVICE);
  expect_message("out");
  cubert_kernel *copy = NULL;
  cb_test_ok(cubert_builtin_kernel(CUBERT_BUILTIN_COPY_U32, &copy));
  cubert_arg cargs[3] = {cubert_arg_buffer(h0), cubert_arg_buffer(h1), cubert_arg_scalar(&count, 8)};
  cb_test_status(cubert_launch(c1, copy, &cfg, cargs, 3), CUBERT_ERR_WRONG_DEVICE);
  expect_message("in");
  cb_test_ok(cubert_sync_device(c1));

  /* nothing was touched, nothing tainted */
  expect_pattern(c0, h0, 50, "device 0 memory");
  expect_pattern(c1, h1, 51, "device 1 memory");
  expect_pattern(c0, x0, 52, "device 0 other memory");
  cb_test_ok(cubert_handle_check(c0, h0));
  cb_test_ok(cubert_handle_check(c1, h1));
  /* the right client still works */
  cb_test_ok(cubert_launch(c0, fill, &cfg, args, 3));
  uint32_t words[256];
  cb_test_ok(cubert_handle_read(c0, h0, words, n));
  for (int i = 0; i < 256; i++) ck_assert_uint_eq(words[i], value);
  cubert_kernel_release(copy);
  cubert_kernel_release(fill);
  cubert_handle_release(x0);
  cubert_handle_release(h1);
  cubert_handle_release(h0);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ out of memory, pools */

START_TEST(test_out_of_memory_names_the_size_and_recovers) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_device_info info;
  cb_test_ok(cubert_runtime_device_info(env.runtime, 0, &info));
  const uint64_t huge = info.total_memory * 2;
  cubert_handle *h = (cubert_handle *)&env;
  cb_test_status(cubert_handle_empty(c, huge, &h), CUBERT_ERR_OUT_OF_MEMORY);
  ck_assert_ptr_eq(h, (cubert_handle *)&env);
  char num[32];
  snprintf(num, sizeof num, "%" PRIu64, huge);
  expect_message(num);
  cb_test_status(cubert_handle_empty(c, UINT64_MAX, &h), CUBERT_ERR_OUT_OF_MEMORY);
  /* memory is usable afterwards */
  cubert_handle *ok = make(c, MiB, 60);
  expect_pattern(c, ok, 60, "after out of memory");
  cubert_handle_release(ok);

  if (strcmp(env.backend, "host") == 0) {
    /* fits the device, not what is left of it (CB_TEST_HOST_MEMORY = 256 MiB) */
    ck_assert_uint_eq(info.total_memory, 256 * MiB);
    cubert_handle *big = NULL, *more = NULL;
    cb_test_ok(cubert_handle_empty(c, 200 * MiB, &big));
    cb_test_status(cubert_handle_empty(c, 100 * MiB, &more), CUBERT_ERR_OUT_OF_MEMORY);
    snprintf(num, sizeof num, "%" PRIu64, 100 * MiB);
    expect_message(num);
    ck_assert_ptr_null(more);
    cubert_handle_release(big);
    /* the idle 200 MiB page is returned to make room (cleanup, one retry) */
    cb_test_ok(cubert_handle_empty(c, 100 * MiB, &more));
    cubert_handle *small = make(c, 4096, 61);
    expect_pattern(c, small, 61, "small after the big one");
    cubert_handle_release(small);
    cubert_handle_release(more);
  }
  cb_test_close(&env);
}
END_TEST

START_TEST(test_memory_usage_moves_and_cleanup_returns_idle_pages) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  size_t count = 0;
  cb_test_ok(cubert_memory_usage(c, NULL, 0, &count));
  ck_assert_uint_ge(count, 2);
  cubert_pool_usage pools[16];
  ck_assert_uint_le(count, 16);
  size_t count2 = 0;
  cb_test_ok(cubert_memory_usage(c, pools, 1, &count2)); /* capacity below the count */
  ck_assert_uint_eq(count2, count);
  cb_test_ok(cubert_memory_usage(c, pools, 16, &count2));
  for (size_t i = 0; i < count; i++)
    for (size_t j = 0; j < i; j++) ck_assert_str_ne(pools[i].name, pools[j].name);

  usage_sum base = usage(c);
  cubert_handle *small = NULL, *big = NULL;
  cb_test_ok(cubert_handle_empty(c, 1000, &small));
  usage_sum one = usage(c);
  ck_assert_uint_ge(one.in_use, base.in_use + 1000);
  ck_assert_uint_ge(one.reserved, base.reserved + 1000);
  cb_test_ok(cubert_handle_empty(c, 4 * MiB, &big));
  usage_sum two = usage(c);
  ck_assert_uint_ge(two.in_use, one.in_use + 4 * MiB);
  ck_assert_uint_ge(two.reserved, one.reserved + 4 * MiB);
  ck_assert_uint_ge(two.high_water, two.in_use);
  /* the usage report counts exactly these two */
  cubert_handle_release(small);
  usage_sum less = usage(c);
  ck_assert_uint_eq(less.in_use, two.in_use - (one.in_use - base.in_use));
  cubert_handle_release(big);
  usage_sum none = usage(c);
  ck_assert_uint_eq(none.in_use, base.in_use);
  ck_assert_uint_ge(none.high_water, two.in_use); /* the high-water mark stays */
  /* cleanup gives back what no handle uses */
  cb_test_ok(cubert_memory_cleanup(c));
  usage_sum clean = usage(c);
  ck_assert_uint_eq(clean.in_use, base.in_use);
  ck_assert_msg(clean.reserved < two.reserved, "cleanup kept %" PRIu64 " of %" PRIu64 " bytes reserved",
                clean.reserved, two.reserved);
  ck_assert_uint_le(clean.reserved, base.reserved);
  ck_assert_uint_eq(clean.reserved, 0); /* a fresh device: nothing else was allocated */

  /* cleanup keeps pages with blocks out */
  cubert_handle *kept = make(c, 1000, 70);
  cb_test_ok(cubert_sync_device(c));
  cb_test_ok(cubert_memory_cleanup(c));
  usage_sum k = usage(c);
  ck_assert_uint_ge(k.reserved, 1000);
  expect_pattern(c, kept, 70, "after cleanup");
  cubert_handle_release(kept);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ fine-grained memory */

/* CUBERT_MEMORY_FINE_GRAINED: a driver allocation of its own, outside the
 * pools (hipExtMallocWithFlags(hipDeviceMallocFinegrained) on AMD; the host
 * backend accepts the flag and its memory is no different); a handle like
 * any other; an unknown flag is refused and allocates nothing. */
START_TEST(test_fine_grained_memory_is_a_handle_outside_the_pools) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  usage_sum before = usage(c);
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty_with(c, 3 * MiB + 5, CUBERT_MEMORY_FINE_GRAINED, &h));
  ck_assert_uint_eq(cubert_handle_size(h), 3 * MiB + 5);
  usage_sum during = usage(c);
  ck_assert_uint_eq(during.in_use, before.in_use);   /* not from a pool */
  ck_assert_uint_eq(during.reserved, before.reserved);
  uint32_t words[64];
  for (int i = 0; i < 64; i++) words[i] = 0xf1e00000u + (uint32_t)i;
  cubert_handle *head = NULL;
  cb_test_ok(cubert_handle_slice(h, 0, cubert_handle_size(h) - sizeof words, &head));
  cb_test_ok(cubert_handle_write(c, head, words, sizeof words));
  uint32_t back[64] = {0};
  cb_test_ok(cubert_handle_read(c, head, back, sizeof back));
  ck_assert_mem_eq(back, words, sizeof words);
  cubert_handle_release(head);
  cubert_handle_release(h);
  cb_test_ok(cubert_sync(c));
  /* flags 0 is cubert_handle_empty: from the pools */
  cb_test_ok(cubert_handle_empty_with(c, 4096, 0, &h));
  ck_assert_uint_gt(usage(c).in_use, before.in_use);
  cubert_handle_release(h);
  h = (cubert_handle *)&env; /* sentinel */
  cb_test_status(cubert_handle_empty_with(c, 4096, 0x80u, &h), CUBERT_ERR_INVALID_ARGUMENT);
  expect_message("unknown flags 0x80");
  ck_assert_ptr_eq(h, (cubert_handle *)&env);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ main */

static void add_loop(Suite *s, const char *name, const TTest *test) {
  TCase *tc = tcase_create(name);
  tcase_add_loop_test(tc, test, 0, CB_TEST_BACKEND_COUNT);
  suite_add_tcase(s, tc);
}

#define LOOP(s, fn) add_loop((s), #fn, fn)

int main(void) {
  Suite *s = suite_create("handles");
  LOOP(s, test_empty_handle_has_the_size_asked_for);
  LOOP(s, test_fine_grained_memory_is_a_handle_outside_the_pools);
  LOOP(s, test_create_then_read_round_trips);
  LOOP(s, test_fill_repeats_each_pattern_size);
  LOOP(s, test_fill_refuses_bad_pattern_sizes);
  LOOP(s, test_fill_refuses_a_pattern_not_dividing_the_size);
  LOOP(s, test_copy_within_a_device_copies_every_byte);
  LOOP(s, test_slices_view_the_right_bytes);
  LOOP(s, test_slice_offsets_past_the_end_are_out_of_range);
  LOOP(s, test_zero_byte_slice_works_and_still_checks_the_device);
  LOOP(s, test_slice_operations_touch_exactly_their_bytes);
  LOOP(s, test_size_reports_allocation_and_view);
  LOOP(s, test_can_mut_counts_handles_not_bindings);
  LOOP(s, test_overlap_classifies_views);
  LOOP(s, test_overlap_of_an_empty_view_is_disjoint);
  LOOP(s, test_claim_key_names_memory_and_range);
  LOOP(s, test_bindings_keep_memory_reserved_after_the_last_handle);
  LOOP(s, test_weak_upgrades_only_while_alive);
  LOOP(s, test_reused_slot_never_upgrades);
  LOOP(s, test_wrong_device_is_refused_by_every_operation);
  LOOP(s, test_out_of_memory_names_the_size_and_recovers);
  LOOP(s, test_memory_usage_moves_and_cleanup_returns_idle_pages);
  return cb_test_run(s);
}
