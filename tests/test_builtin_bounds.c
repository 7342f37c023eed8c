/* tests/test_builtin_bounds.c: a launch of a built-in kernel is checked by
 * the rules of its host function on every backend, before anything is
 * enqueued (runtime/kcheck.h): a wrong n, shape, size or alignment is
 * refused by cubert_launch itself, naming the kernel, the argument and the
 * sizes, with nothing changed (no failure made, no taint, no byte
 * written); and a built-in that writes fewer bytes than its write-only
 * buffer binds (FILL_U32, COPY_U32 and the peer copies with n below out's
 * words, SUM_F32's grid[0] partials) releases on success, and taints on
 * failure, only the bytes it writes (kernels.h, docs/failures.md rule 3).
 * Each test runs on every backend: on HIP without a GPU it skips ("skipped:
 * no device"); on a GPU the same launches would write past the buffer if
 * they were enqueued. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/cubert.h"
#include "cubert/faultinj.h"
#include "cubert/kernels.h"
#include "cubert/strided.h"
#include "tests/testutil.h"

/* Ids handed out to failures so far (runtime/failure.c): a call that made
 * no failure leaves it where it was. */
uint64_t cb_failure_last_id(void);

#define BYTES 64

static cubert_handle *patterned(cubert_client *c, uint64_t size, uint64_t seed) {
  unsigned char buf[4096];
  ck_assert_uint_le(size, sizeof buf);
  cb_test_pattern(buf, (size_t)size, seed);
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_create(c, buf, size, &h));
  return h;
}

/* The handle still holds pattern `seed`, untainted. */
static void unchanged(cubert_client *c, const cubert_handle *h, uint64_t size, uint64_t seed) {
  unsigned char buf[4096];
  cb_test_ok(cubert_handle_check(c, h));
  cb_test_ok(cubert_handle_read(c, h, buf, size));
  ck_assert_uint_eq(cb_test_pattern_mismatch(buf, (size_t)size, seed), size);
}

static cubert_kernel *builtin(cubert_builtin which) {
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_builtin_kernel(which, &k));
  return k;
}

static cubert_launch_config config(uint32_t grid, uint32_t block, uint32_t shared) {
  cubert_launch_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.grid[0] = grid;
  cfg.grid[1] = cfg.grid[2] = 1;
  cfg.block[0] = block;
  cfg.block[1] = cfg.block[2] = 1;
  cfg.shared_memory = shared;
  return cfg;
}

static cubert_arg scalar(const void *v, uint32_t size) {
  cubert_arg a = {CUBERT_PARAM_SCALAR, NULL, v, size, NULL};
  return a;
}

/* cubert_launch refuses with `want` at once, its message naming every one
 * of `words`; no failure is made, and nothing fails later either. */
static void refused(cubert_client *c, cubert_builtin which, const cubert_launch_config *cfg,
                    const cubert_arg *args, uint32_t nargs, cubert_status want, const char *const *words) {
  cubert_kernel *k = builtin(which);
  uint64_t ids = cb_failure_last_id();
  cb_test_status(cubert_launch(c, k, cfg, args, nargs), want);
  const char *msg = cubert_last_error_message();
  for (; *words; words++)
    ck_assert_msg(strstr(msg, *words) != NULL, "the refusal `%s` does not name `%s`", msg, *words);
  ck_assert_uint_eq(cb_failure_last_id(), ids); /* no failure made */
  cb_test_ok(cubert_sync(c));                   /* nothing was enqueued to fail */
  ck_assert_uint_eq(cb_failure_last_id(), ids);
  cubert_kernel_release(k);
}

/* ------------------------------------------------------------ refusals */

START_TEST(fill_past_the_buffer_is_refused_at_launch) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *out = patterned(c, BYTES, 1);
  uint64_t n = 1000;
  uint32_t value = 0xabcdef01u;
  cubert_arg a[3] = {cubert_arg_buffer(out), scalar(&n, 8), scalar(&value, 4)};
  cubert_launch_config cfg = config(1, 64, 0);
  refused(c, CUBERT_BUILTIN_FILL_U32, &cfg, a, 3, CUBERT_ERR_OUT_OF_RANGE,
          (const char *const[]){"cubert_fill_u32", "`out`", "1000 elements of 4 bytes", "64 bytes", NULL});
  unchanged(c, out, BYTES, 1);
  /* one word past: refused too */
  n = BYTES / 4 + 1;
  refused(c, CUBERT_BUILTIN_FILL_U32, &cfg, a, 3, CUBERT_ERR_OUT_OF_RANGE,
          (const char *const[]){"cubert_fill_u32", "`out`", "17 elements", NULL});
  unchanged(c, out, BYTES, 1);
  /* a misaligned out */
  cubert_handle *odd = NULL;
  cb_test_ok(cubert_handle_slice(out, 2, 2, &odd));
  n = 1;
  a[0] = cubert_arg_buffer(odd);
  refused(c, CUBERT_BUILTIN_FILL_U32, &cfg, a, 3, CUBERT_ERR_INVALID_ARGUMENT,
          (const char *const[]){"cubert_fill_u32", "`out`", "aligned to 4 bytes", NULL});
  unchanged(c, out, BYTES, 1);
  /* exactly the buffer: launched */
  n = BYTES / 4;
  a[0] = cubert_arg_buffer(out);
  cubert_kernel *k = builtin(CUBERT_BUILTIN_FILL_U32);
  cb_test_ok(cubert_launch(c, k, &cfg, a, 3));
  cb_test_ok(cubert_sync(c));
  uint32_t got[BYTES / 4];
  cb_test_ok(cubert_handle_read(c, out, got, BYTES));
  for (int i = 0; i < BYTES / 4; i++) ck_assert_uint_eq(got[i], value);
  cubert_kernel_release(k);
  cubert_handle_release(odd);
  cubert_handle_release(out);
  cb_test_close(&env);
}
END_TEST

START_TEST(copy_scale_add_sum_checksum_are_refused_at_launch) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *small = patterned(c, BYTES / 2, 2), *out = patterned(c, BYTES, 3);
  cubert_launch_config cfg = config(2, 64, 0);
  /* COPY_U32: n past `in`, then past `out` */
  uint64_t n = BYTES / 4;
  cubert_arg copy[3] = {cubert_arg_buffer(small), cubert_arg_buffer(out), scalar(&n, 8)};
  refused(c, CUBERT_BUILTIN_COPY_U32, &cfg, copy, 3, CUBERT_ERR_OUT_OF_RANGE,
          (const char *const[]){"cubert_copy_u32", "`in`", "16 elements of 4 bytes", "32 bytes", NULL});
  cubert_arg copy_back[3] = {cubert_arg_buffer(out), cubert_arg_buffer(small), scalar(&n, 8)};
  refused(c, CUBERT_BUILTIN_COPY_U32, &cfg, copy_back, 3, CUBERT_ERR_OUT_OF_RANGE,
          (const char *const[]){"cubert_copy_u32", "`out`", "16 elements of 4 bytes", "32 bytes", NULL});
  /* SCALE_ADD_F32: y shorter than n */
  float alpha = 2.0f;
  cubert_arg sa[4] = {cubert_arg_buffer(out), cubert_arg_buffer(small), scalar(&alpha, 4), scalar(&n, 8)};
  refused(c, CUBERT_BUILTIN_SCALE_ADD_F32, &cfg, sa, 4, CUBERT_ERR_OUT_OF_RANGE,
          (const char *const[]){"cubert_scale_add_f32", "`y`", "16 elements", "32 bytes", NULL});
  /* SUM_F32: a block that is not a power of two; more partials than bound */
  cubert_arg sum[3] = {cubert_arg_buffer(out), cubert_arg_buffer(small), scalar(&n, 8)};
  cubert_launch_config odd = config(2, 24, 96);
  refused(c, CUBERT_BUILTIN_SUM_F32, &odd, sum, 3, CUBERT_ERR_LAUNCH_CONFIG,
          (const char *const[]){"cubert_sum_f32", "block[0] = 24", "power of two", NULL});
  cubert_launch_config wide = config(9, 32, 128);
  refused(c, CUBERT_BUILTIN_SUM_F32, &wide, sum, 3, CUBERT_ERR_OUT_OF_RANGE,
          (const char *const[]){"cubert_sum_f32", "`partial`", "9 elements of 4 bytes", "32 bytes", NULL});
  cubert_launch_config little = config(2, 32, 64);
  refused(c, CUBERT_BUILTIN_SUM_F32, &little, sum, 3, CUBERT_ERR_LAUNCH_CONFIG,
          (const char *const[]){"cubert_sum_f32", "shared memory", NULL});
  /* CHECKSUM_U32: an accumulator of 4 bytes */
  cubert_handle *acc4 = NULL;
  cb_test_ok(cubert_handle_slice(small, 0, BYTES / 2 - 4, &acc4));
  cubert_arg ck[3] = {cubert_arg_buffer(out), cubert_arg_buffer(acc4), scalar(&n, 8)};
  refused(c, CUBERT_BUILTIN_CHECKSUM_U32, &cfg, ck, 3, CUBERT_ERR_OUT_OF_RANGE,
          (const char *const[]){"cubert_checksum_u32", "`acc`", "1 elements of 8 bytes", "4 bytes", NULL});
  unchanged(c, small, BYTES / 2, 2);
  unchanged(c, out, BYTES, 3);
  cubert_handle_release(acc4);
  cubert_handle_release(small);
  cubert_handle_release(out);
  cb_test_close(&env);
}
END_TEST

START_TEST(peer_copies_past_the_buffer_are_refused_at_launch) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  cubert_client *c0 = env.clients[0], *c1 = env.clients[1];
  cubert_handle *x = patterned(c0, BYTES, 4), *y = patterned(c1, 4 * BYTES, 5);
  cubert_status st = cubert_handle_share(c0, x);
  if (st == CUBERT_ERR_PEER_ACCESS) {
    cb_test_skip("no device: peer access refused between devices 0 and 1 (%s)", cubert_last_error_message());
    goto done;
  }
  cb_test_ok(st);
  cb_test_ok(cubert_sync(c0));
  uint64_t n = BYTES; /* words: 4x x's bytes */
  cubert_launch_config cfg = config(1, 64, 0);
  /* device 1 reads x (64 bytes) into y (256) */
  cubert_arg rd[3] = {cubert_arg_peer(x), cubert_arg_buffer(y), scalar(&n, 8)};
  refused(c1, CUBERT_BUILTIN_COPY_PEER_READ, &cfg, rd, 3, CUBERT_ERR_OUT_OF_RANGE,
          (const char *const[]){"cubert_copy_peer_read", "`in`", "64 elements of 4 bytes", "64 bytes", NULL});
  /* device 1 writes 256 bytes of y into x (64) */
  cubert_arg wr[3] = {cubert_arg_buffer(y), cubert_arg_peer(x), scalar(&n, 8)};
  refused(c1, CUBERT_BUILTIN_COPY_PEER_WRITE, &cfg, wr, 3, CUBERT_ERR_OUT_OF_RANGE,
          (const char *const[]){"cubert_copy_peer_write", "`out`", "64 elements of 4 bytes", "64 bytes", NULL});
  unchanged(c0, x, BYTES, 4);
  unchanged(c1, y, 4 * BYTES, 5);
done:
  cubert_handle_release(x);
  cubert_handle_release(y);
  cb_test_close(&env);
}
END_TEST

/* The tensor built-ins had their views checked at launch already (each
 * footprint within its handle); they stay so. */
START_TEST(tensor_builtins_past_the_handle_are_refused_at_launch) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *in = patterned(c, BYTES, 6), *out = patterned(c, BYTES, 7);
  cubert_view fits = {.ndims = 1, .elem_size = 4, .offset = 0, .shape = {BYTES / 4}, .strides = {1}};
  cubert_view past = {.ndims = 1, .elem_size = 4, .offset = 0, .shape = {BYTES / 4 + 1}, .strides = {1}};
  cubert_arg cp[2] = {{CUBERT_PARAM_TENSOR, in, NULL, 0, &fits}, {CUBERT_PARAM_TENSOR, out, NULL, 0, &past}};
  cubert_launch_config cfg = config(1, 64, 0);
  refused(c, CUBERT_BUILTIN_COPY_STRIDED, &cfg, cp, 2, CUBERT_ERR_OUT_OF_RANGE,
          (const char *const[]){"cubert_copy_strided", "`out`", NULL});
  unsigned char value[16] = {1, 2, 3, 4};
  cubert_arg fl[2] = {{CUBERT_PARAM_TENSOR, out, NULL, 0, &past}, scalar(value, 16)};
  refused(c, CUBERT_BUILTIN_FILL_STRIDED, &cfg, fl, 2, CUBERT_ERR_OUT_OF_RANGE,
          (const char *const[]){"cubert_fill_strided", "`out`", NULL});
  unchanged(c, in, BYTES, 6);
  unchanged(c, out, BYTES, 7);
  cubert_handle_release(in);
  cubert_handle_release(out);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ exact write sets */

/* Bytes [from, to) of `h`: readable (`good`: holding `expect`, when not
 * NULL) or tainted by the failure `id` (0: any). */
static void bytes_are(cubert_client *c, const cubert_handle *h, uint64_t size, uint64_t from, uint64_t to,
                      bool good, const void *expect, uint64_t id) {
  cubert_handle *s = NULL;
  cb_test_ok(cubert_handle_slice(h, from, size - to, &s));
  unsigned char buf[4096];
  cubert_status st = cubert_handle_read(c, s, buf, to - from);
  if (good) {
    ck_assert_msg(st == CUBERT_OK, "bytes %llu..%llu: %s (%s)", (unsigned long long)from, (unsigned long long)to,
                  cubert_status_name(st), cubert_last_error_message());
    if (expect) ck_assert_int_eq(memcmp(buf, expect, (size_t)(to - from)), 0);
  } else {
    ck_assert_msg(st == CUBERT_ERR_TAINTED, "bytes %llu..%llu read as %s, tainted expected",
                  (unsigned long long)from, (unsigned long long)to, cubert_status_name(st));
    if (id) {
      cubert_error *e = cubert_last_error(); /* a reference: released below */
      const cubert_failure *f = cubert_error_failure(e, 0, NULL, NULL);
      ck_assert_ptr_nonnull(f);
      uint64_t got = cubert_failure_id(cubert_failure_root(f));
      cubert_error_release(e);
      ck_assert_uint_eq(got, id);
    }
  }
  cubert_handle_release(s);
}

/* Launches FILL_U32 of n words of `value` over `out`; its status (the
 * launch's, else the sync's). */
static cubert_status fill(cubert_client *c, cubert_handle *out, uint64_t n, uint32_t value) {
  cubert_kernel *k = builtin(CUBERT_BUILTIN_FILL_U32);
  cubert_arg a[3] = {cubert_arg_buffer(out), scalar(&n, 8), scalar(&value, 4)};
  cubert_launch_config cfg = config(1, 64, 0);
  cubert_status st = cubert_launch(c, k, &cfg, a, 3);
  cubert_status sy = cubert_sync(c);
  cubert_kernel_release(k);
  return st ? st : sy;
}

START_TEST(short_fill_after_a_failed_write_releases_only_its_words) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *out = patterned(c, BYTES, 8);
  cubert_faultinj_diag diag;
  cb_test_ok(cubert_faultinj_add(env.runtime, "launch kernel=cubert_fill_u32 times=1 fault=fail", "test", NULL, &diag));
  ck_assert_int_ne(fill(c, out, BYTES / 4, 1), CUBERT_OK); /* the whole buffer: all tainted */
  uint64_t root = cb_failure_last_id();
  bytes_are(c, out, BYTES, 0, BYTES, false, NULL, 0);
  /* 4 words written: those are good, the 48 bytes after keep their taint */
  cb_test_ok(fill(c, out, 4, 0x11223344u));
  uint32_t words[4] = {0x11223344u, 0x11223344u, 0x11223344u, 0x11223344u};
  bytes_are(c, out, BYTES, 0, 16, true, words, 0);
  bytes_are(c, out, BYTES, 16, BYTES, false, NULL, root);
  cb_test_status(cubert_handle_check(c, out), CUBERT_ERR_TAINTED);
  /* n = 0 writes nothing, releases nothing */
  cb_test_ok(fill(c, out, 0, 7));
  bytes_are(c, out, BYTES, 16, BYTES, false, NULL, root);
  /* the rest written: all good */
  cubert_handle *rest = NULL;
  cb_test_ok(cubert_handle_slice(out, 16, 0, &rest));
  cb_test_ok(fill(c, rest, (BYTES - 16) / 4, 0x11223344u));
  cb_test_ok(cubert_handle_check(c, out));
  cubert_handle_release(rest);
  cubert_handle_release(out);
  cb_test_close(&env);
}
END_TEST

START_TEST(failed_short_fill_taints_only_its_words) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *out = patterned(c, BYTES, 9);
  unsigned char want[BYTES];
  cb_test_pattern(want, BYTES, 9);
  cubert_faultinj_diag diag;
  cb_test_ok(cubert_faultinj_add(env.runtime, "launch kernel=cubert_fill_u32 times=1 fault=fail", "test", NULL, &diag));
  ck_assert_int_ne(fill(c, out, 4, 1), CUBERT_OK);
  uint64_t root = cb_failure_last_id();
  bytes_are(c, out, BYTES, 0, 16, false, NULL, root);
  bytes_are(c, out, BYTES, 16, BYTES, true, want + 16, 0); /* never written, never tainted */
  cubert_handle_release(out);
  cb_test_close(&env);
}
END_TEST

START_TEST(short_copy_and_sum_release_only_what_they_write) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *in = patterned(c, BYTES, 10), *out = patterned(c, BYTES, 11);
  unsigned char src[BYTES];
  cb_test_pattern(src, BYTES, 10);
  cubert_faultinj_diag diag;
  cb_test_ok(cubert_faultinj_add(env.runtime, "launch kernel=cubert_fill_u32 times=1 fault=fail", "test", NULL, &diag));
  ck_assert_int_ne(fill(c, out, BYTES / 4, 1), CUBERT_OK);
  uint64_t root = cb_failure_last_id();
  /* COPY_U32 of 5 words: 20 bytes released */
  cubert_kernel *k = builtin(CUBERT_BUILTIN_COPY_U32);
  uint64_t n = 5;
  cubert_arg a[3] = {cubert_arg_buffer(in), cubert_arg_buffer(out), scalar(&n, 8)};
  cubert_launch_config cfg = config(1, 64, 0);
  cb_test_ok(cubert_launch(c, k, &cfg, a, 3));
  cb_test_ok(cubert_sync(c));
  bytes_are(c, out, BYTES, 0, 20, true, src, 0);
  bytes_are(c, out, BYTES, 20, BYTES, false, NULL, root);
  cubert_kernel_release(k);
  /* SUM_F32 with grid 2: partial's first 8 bytes released */
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = (float)i;
  cb_test_ok(cubert_handle_write(c, in, x, BYTES));
  k = builtin(CUBERT_BUILTIN_SUM_F32);
  n = 16;
  cubert_handle *partial = NULL;
  cb_test_ok(cubert_handle_slice(out, 20, 4, &partial)); /* 40 tainted bytes */
  cubert_arg s[3] = {cubert_arg_buffer(in), cubert_arg_buffer(partial), scalar(&n, 8)};
  cubert_launch_config two = config(2, 8, 32);
  cb_test_ok(cubert_launch(c, k, &two, s, 3));
  cb_test_ok(cubert_sync(c));
  bytes_are(c, out, BYTES, 20, 28, true, NULL, 0);
  bytes_are(c, out, BYTES, 28, BYTES, false, NULL, root);
  cubert_kernel_release(k);
  cubert_handle_release(partial);
  cubert_handle_release(in);
  cubert_handle_release(out);
  cb_test_close(&env);
}
END_TEST

START_TEST(short_peer_copies_release_only_what_they_write) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  cubert_client *c0 = env.clients[0], *c1 = env.clients[1];
  cubert_handle *x = patterned(c0, BYTES, 12), *y = patterned(c1, BYTES, 13), *z = patterned(c1, BYTES, 14);
  unsigned char ys[BYTES];
  cb_test_pattern(ys, BYTES, 13);
  cubert_status st = cubert_handle_share(c0, x);
  if (st == CUBERT_ERR_PEER_ACCESS) {
    cb_test_skip("no device: peer access refused between devices 0 and 1 (%s)", cubert_last_error_message());
    goto done;
  }
  cb_test_ok(st);
  cubert_faultinj_diag diag;
  cb_test_ok(cubert_faultinj_add(env.runtime, "launch kernel=cubert_fill_u32 times=2 fault=fail", "test", NULL, &diag));
  ck_assert_int_ne(fill(c0, x, BYTES / 4, 1), CUBERT_OK); /* x, shared: all tainted */
  uint64_t rx = cb_failure_last_id();
  ck_assert_int_ne(fill(c1, z, BYTES / 4, 1), CUBERT_OK); /* z, local to device 1 */
  uint64_t rz = cb_failure_last_id();
  cubert_launch_config cfg = config(1, 64, 0);
  uint64_t n = 3;
  /* device 1 writes 3 words of y into x: x's first 12 bytes repaired */
  cubert_kernel *k = builtin(CUBERT_BUILTIN_COPY_PEER_WRITE);
  cubert_arg wr[3] = {cubert_arg_buffer(y), cubert_arg_peer(x), scalar(&n, 8)};
  cb_test_ok(cubert_launch(c1, k, &cfg, wr, 3));
  cb_test_ok(cubert_sync(c1));
  cubert_kernel_release(k);
  bytes_are(c0, x, BYTES, 0, 12, true, ys, 0);
  bytes_are(c0, x, BYTES, 12, BYTES, false, NULL, rx);
  /* device 1 reads x's 3 good words into z: z's first 12 bytes repaired */
  k = builtin(CUBERT_BUILTIN_COPY_PEER_READ);
  cubert_arg rd[3] = {cubert_arg_peer(x), cubert_arg_buffer(z), scalar(&n, 8)};
  cubert_handle *x12 = NULL;
  cb_test_ok(cubert_handle_slice(x, 0, BYTES - 12, &x12)); /* in: the good words only */
  rd[0] = cubert_arg_peer(x12);
  cb_test_ok(cubert_launch(c1, k, &cfg, rd, 3));
  cb_test_ok(cubert_sync(c1));
  cubert_kernel_release(k);
  bytes_are(c1, z, BYTES, 0, 12, true, ys, 0);
  bytes_are(c1, z, BYTES, 12, BYTES, false, NULL, rz);
  cubert_handle_release(x12);
done:
  cubert_handle_release(x);
  cubert_handle_release(y);
  cubert_handle_release(z);
  cb_test_close(&env);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("builtin_bounds");
  TCase *tc = tcase_create("refused");
  cb_test_add_backend_loop(tc, fill_past_the_buffer_is_refused_at_launch);
  cb_test_add_backend_loop(tc, copy_scale_add_sum_checksum_are_refused_at_launch);
  cb_test_add_backend_loop(tc, peer_copies_past_the_buffer_are_refused_at_launch);
  cb_test_add_backend_loop(tc, tensor_builtins_past_the_handle_are_refused_at_launch);
  suite_add_tcase(s, tc);
  tc = tcase_create("exact");
  cb_test_add_backend_loop(tc, short_fill_after_a_failed_write_releases_only_its_words);
  cb_test_add_backend_loop(tc, failed_short_fill_taints_only_its_words);
  cb_test_add_backend_loop(tc, short_copy_and_sum_release_only_what_they_write);
  cb_test_add_backend_loop(tc, short_peer_copies_release_only_what_they_write);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return cb_test_run(suite()); }
