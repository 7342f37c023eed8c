/* tests/test_strided.c: strided views (cubert/strided.h): validation that
 * names the dimension at fault, reads, writes and copies on every backend,
 * and failure accounting exact to the footprint: a failed strided write
 * taints its footprint and nothing between, as one ledger entry however
 * many rows; a read is refused only where its footprint meets taint;
 * partial overwrites both ways repair exactly. The ledger itself is checked
 * against a byte map under random strided and contiguous sets and clears.
 * Tensor parameters of kernels (cubert_arg_tensor) carry the same exact
 * footprints into launches (the "tensors" case), and the tensor built-ins
 * give every byte a reference written here gives, gaps included, over
 * layouts that take each of their walks (the "tensor_reference" case). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/faultinj.h"
#include "runtime/internal.h"
#include "tests/testutil.h"

/* ------------------------------------------------------------ helpers */

static cubert_runtime *fault_rt;

static bool open_host(int i, int min_devices, cb_test_env *env) {
  if (!cb_test_open(i, min_devices, env)) return false;
  if (strcmp(env->backend, "host") != 0) {
    cb_test_skip("no device: fault rules need the host backend (%s)", env->backend);
    cb_test_close(env);
    return false;
  }
  fault_rt = env->runtime;
  return true;
}

static void rule(const char *text) {
  cubert_faultinj_diag diag;
  ck_assert_msg(cubert_faultinj_add(fault_rt, text, "test", NULL, &diag) == CUBERT_OK, "%s", diag.message);
}

/* A rows x cols matrix of u32, element (r, c) = r * 1000 + c + base. */
static cubert_handle *matrix(cubert_client *c, uint64_t rows, uint64_t cols, uint32_t base) {
  uint32_t *m = malloc(rows * cols * 4);
  for (uint64_t r = 0; r < rows; r++)
    for (uint64_t k = 0; k < cols; k++) m[r * cols + k] = (uint32_t)(r * 1000 + k) + base;
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_create(c, m, rows * cols * 4, &h));
  free(m);
  return h;
}

/* Columns [c0, c0 + w) of a row-major matrix of `cols` u32 columns. */
static cubert_view columns(uint64_t rows, uint64_t cols, uint64_t c0, uint64_t w) {
  cubert_view v = {2, 4, c0, {rows, w}, {cols, 1}};
  return v;
}

static cubert_handle *slice(cubert_handle *h, uint64_t from, uint64_t to) {
  cubert_handle *s = NULL;
  cb_test_ok(cubert_handle_slice(h, from, cubert_handle_size_in_use(h) - to, &s));
  return s;
}

/* How many failures the thread's last error holds. */
static size_t failures_now(void) {
  cubert_error *e = cubert_last_error();
  size_t n = cubert_error_failure_count(e);
  cubert_error_release(e);
  return n;
}

static size_t ledger_entries(cubert_handle *h) {
  cb_alloc *a = h->alloc;
  cb_ledger *l = cb_alloc_ledger_lock(a);
  size_t n = l->n;
  cb_alloc_ledger_unlock(a);
  return n;
}

/* A strided write of zeros to `v` of `h` that the fault layer fails. */
static void failed_strided_write(cubert_client *c, cubert_handle *h, const cubert_view *v) {
  uint64_t n = cubert_view_bytes(v);
  void *zero = calloc(1, n ? n : 1);
  ck_assert_ptr_nonnull(zero);
  rule("write times=1 fault=fail");
  ck_assert_int_ne(cubert_handle_write_strided(c, h, v, zero, n), CUBERT_OK);
  free(zero);
}

/* A read of row `r` of `h`, a matrix of `cols` u32 columns, is refused
 * naming exactly the column ranges [at[2k], at[2k + 1]), k < n, in order. */
static void row_refused_naming(cubert_client *c, cubert_handle *h, uint64_t r, uint64_t cols, const uint64_t *at,
                               size_t n) {
  cubert_handle *row = slice(h, r * cols * 4, (r + 1) * cols * 4);
  uint32_t *buf = malloc(cols * 4);
  cb_test_status(cubert_handle_read(c, row, buf, cols * 4), CUBERT_ERR_TAINTED);
  cubert_error *e = cubert_last_error();
  ck_assert_uint_eq(cubert_error_failure_count(e), n);
  for (size_t k = 0; k < n; k++) {
    uint64_t s, t;
    cubert_error_failure(e, k, &s, &t);
    ck_assert_uint_eq(s, (r * cols + at[2 * k]) * 4);
    ck_assert_uint_eq(t, (r * cols + at[2 * k + 1]) * 4);
  }
  cubert_error_release(e);
  free(buf);
  cubert_handle_release(row);
}

/* In row `r` of `h` (`cols` u32 columns) the block of columns [c0, c0 + w)
 * is tainted and the bytes either side of it are good. */
static void row_block_alone_tainted(cubert_client *c, cubert_handle *h, uint64_t r, uint64_t cols, uint64_t c0,
                                    uint64_t w) {
  cubert_handle *left = slice(h, r * cols * 4, (r * cols + c0) * 4);
  cubert_handle *right = slice(h, (r * cols + c0 + w) * 4, (r + 1) * cols * 4);
  cubert_handle *block = slice(h, (r * cols + c0) * 4, (r * cols + c0 + w) * 4);
  cb_test_ok(cubert_handle_check(c, left));
  cb_test_ok(cubert_handle_check(c, right));
  cb_test_status(cubert_handle_check(c, block), CUBERT_ERR_TAINTED);
  cubert_handle_release(left);
  cubert_handle_release(right);
  cubert_handle_release(block);
}

/* ------------------------------------------------------------ validation */

START_TEST(test_view_check_names_the_dimension_at_fault) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty(env.clients[0], 64 * 32 * 4, &h));
  cubert_view ok = columns(64, 32, 3, 4);
  cb_test_ok(cubert_view_check(h, &ok));
  ck_assert_uint_eq(cubert_view_bytes(&ok), 64 * 4 * 4);

  cubert_view past = columns(65, 32, 3, 4); /* one row too many */
  cb_test_status(cubert_view_check(h, &past), CUBERT_ERR_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "dimension 0"));
  cubert_view wide = columns(64, 32, 30, 3); /* the last row runs off the end */
  cb_test_status(cubert_view_check(h, &wide), CUBERT_ERR_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "dimension 1"));
  cubert_view zero = {2, 4, 0, {4, 4}, {0, 1}};
  cb_test_status(cubert_view_check(h, &zero), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "dimension 0: stride 0"));
  cubert_view overlap = {2, 4, 0, {4, 8}, {4, 1}}; /* rows of 8 every 4 elements */
  cb_test_status(cubert_view_check(h, &overlap), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "dimension 0"));
  cubert_view over = {2, 4, 0, {2, 2}, {UINT64_MAX / 2, 1}};
  cb_test_status(cubert_view_check(h, &over), CUBERT_ERR_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "overflow"));
  cubert_view elem = {1, 3, 0, {4}, {1}};
  cb_test_status(cubert_view_check(h, &elem), CUBERT_ERR_INVALID_ARGUMENT);
  cubert_view unaligned = {1, 4, 0, {4}, {1}};
  cubert_handle *odd = slice(h, 2, 64 * 32 * 4);
  cb_test_status(cubert_view_check(odd, &unaligned), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "aligned"));
  cubert_view nine = {9, 4, 0, {1}, {1}};
  cb_test_status(cubert_view_check(h, &nine), CUBERT_ERR_INVALID_ARGUMENT);
  /* a refused view changes nothing: no work, no taint */
  uint32_t buf[4];
  cb_test_status(cubert_handle_write_strided(env.clients[0], h, &past, buf, cubert_view_bytes(&past)),
                 CUBERT_ERR_OUT_OF_RANGE);
  ck_assert_uint_eq(ledger_entries(h), 0);
  /* a shape with a 0 is valid and moves nothing */
  cubert_view none = {2, 4, 0, {0, 4}, {32, 1}};
  cb_test_ok(cubert_handle_write_strided(env.clients[0], h, &none, NULL, 0));
  cubert_handle_release(odd);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ data */

START_TEST(test_column_block_round_trips_and_leaves_the_rest) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  enum { R = 64, C = 32, C0 = 5, W = 7 };
  cubert_handle *h = matrix(c, R, C, 0);
  cubert_view v = columns(R, C, C0, W);
  uint32_t in[R * W], out[R * W], all[R * C];
  for (int i = 0; i < R * W; i++) in[i] = 0xa0000000u + (uint32_t)i;
  cb_test_ok(cubert_handle_write_strided(c, h, &v, in, sizeof in));
  cb_test_ok(cubert_handle_read_strided(c, h, &v, out, sizeof out));
  ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
  cb_test_ok(cubert_handle_read(c, h, all, sizeof all));
  for (int r = 0; r < R; r++)
    for (int k = 0; k < C; k++) {
      uint32_t want = k >= C0 && k < C0 + W ? in[r * W + k - C0] : (uint32_t)(r * 1000 + k);
      ck_assert_msg(all[r * C + k] == want, "(%d, %d): %u, want %u", r, k, all[r * C + k], want);
    }
  /* a 3-D box: planes of 8 x 8 over the matrix seen as 8 planes of 8 rows */
  cubert_view box = {3, 4, 2, {4, 3, 5}, {8 * C, C, 1}};
  uint32_t b[4 * 3 * 5];
  cb_test_ok(cubert_handle_read_strided(c, h, &box, b, sizeof b));
  for (int p = 0; p < 4; p++)
    for (int r = 0; r < 3; r++)
      for (int k = 0; k < 5; k++) {
        int row = p * 8 + r, col = 2 + k;
        ck_assert_uint_eq(b[(p * 3 + r) * 5 + k], all[row * C + col]);
      }
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_copy_between_views_transposes_and_refuses_shared_bytes) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  enum { R = 16, C = 24 };
  cubert_handle *a = matrix(c, R, C, 0), *t = NULL;
  cb_test_ok(cubert_handle_empty(c, R * C * 4, &t));
  uint32_t zero[R * C] = {0};
  cb_test_ok(cubert_handle_write(c, t, zero, sizeof zero));
  /* a's element (r, k) to t's element (k, r): t is C x R */
  cubert_view src = {2, 4, 0, {R, C}, {C, 1}}, dst = {2, 4, 0, {R, C}, {1, R}};
  cb_test_ok(cubert_handle_copy_strided(c, a, &src, t, &dst));
  uint32_t out[R * C];
  cb_test_ok(cubert_handle_read(c, t, out, sizeof out));
  for (int r = 0; r < R; r++)
    for (int k = 0; k < C; k++) ck_assert_uint_eq(out[k * R + r], (uint32_t)(r * 1000 + k));
  /* in place: even columns onto odd columns interleave without sharing a byte */
  cubert_view even = {2, 4, 0, {R, C / 2}, {C, 2}}, odd = {2, 4, 1, {R, C / 2}, {C, 2}};
  cb_test_ok(cubert_handle_copy_strided(c, a, &even, a, &odd));
  uint32_t m[R * C];
  cb_test_ok(cubert_handle_read(c, a, m, sizeof m));
  for (int r = 0; r < R; r++)
    for (int k = 1; k < C; k += 2) ck_assert_uint_eq(m[r * C + k], (uint32_t)(r * 1000 + k - 1));
  /* one column onto itself shifted by a row shares bytes: refused */
  cubert_view c1 = {1, 4, 3, {R - 1}, {C}}, c2 = {1, 4, 3 + C, {R - 1}, {C}};
  cb_test_status(cubert_handle_copy_strided(c, a, &c1, a, &c2), CUBERT_ERR_INVALID_ARGUMENT);
  /* shapes must match */
  cubert_view s3 = {1, 4, 0, {3}, {1}}, s4 = {1, 4, 0, {4}, {1}};
  cb_test_status(cubert_handle_copy_strided(c, a, &s3, t, &s4), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "dimension 0"));
  cubert_handle_release(a);
  cubert_handle_release(t);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_peer_strided_copy_moves_a_column_block) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  enum { R = 32, C = 16 };
  cubert_handle *a = matrix(env.clients[0], R, C, 0), *b = matrix(env.clients[1], R, C, 7);
  cubert_view v = columns(R, C, 4, 3), w = columns(R, C, 10, 3);
  cb_test_ok(cubert_handle_copy_strided_peer(env.clients[0], a, &v, env.clients[1], b, &w));
  uint32_t out[R * C];
  cb_test_ok(cubert_handle_read(env.clients[1], b, out, sizeof out));
  for (int r = 0; r < R; r++)
    for (int k = 0; k < C; k++) {
      uint32_t want = k >= 10 && k < 13 ? (uint32_t)(r * 1000 + k - 6) : (uint32_t)(r * 1000 + k + 7);
      ck_assert_uint_eq(out[r * C + k], want);
    }
  cubert_handle_release(a);
  cubert_handle_release(b);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ failures */

START_TEST(test_failed_column_write_taints_exactly_its_footprint) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  enum { R = 100, C = 10, C0 = 3, W = 2 };
  cubert_handle *h = matrix(c, R, C, 0);
  cubert_view v = columns(R, C, C0, W);
  failed_strided_write(c, h, &v);
  ck_assert_uint_eq(ledger_entries(h), 1); /* one claim, not 100 ranges */
  /* read back by rows: every row refused, naming exactly the block's bytes;
   * the bytes either side of the block are good */
  static const uint64_t block[2] = {C0, C0 + W};
  for (uint64_t r = 0; r < R; r++) {
    row_refused_naming(c, h, r, C, block, 1);
    row_block_alone_tainted(c, h, r, C, C0, W);
  }
  /* a strided read of the neighbouring columns passes between the taint */
  cubert_view before = columns(R, C, C0 - 1, 1), after = columns(R, C, C0 + W, 1);
  uint32_t col[R];
  cb_test_ok(cubert_handle_read_strided(c, h, &before, col, sizeof col));
  for (int r = 0; r < R; r++) ck_assert_uint_eq(col[r], (uint32_t)(r * 1000 + C0 - 1));
  cb_test_ok(cubert_handle_read_strided(c, h, &after, col, sizeof col));
  /* one tainted column inside a read of three: refused, one piece a row */
  cubert_view three = columns(R, C, C0 - 1, 3);
  uint32_t t3[R * 3];
  cb_test_status(cubert_handle_read_strided(c, h, &three, t3, sizeof t3), CUBERT_ERR_TAINTED);
  ck_assert_uint_eq(failures_now(), R);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "strided view"));
  /* the walk of tainted ranges gives the block row by row */
  uint64_t from = 0, s = 0, t = 0, n = 0;
  const cubert_failure *f = NULL;
  for (;; from = t, n++) {
    cb_test_ok(cubert_handle_tainted_range(c, h, from, &s, &t, &f));
    if (!f) break;
    ck_assert_uint_eq(s, (n * C + C0) * 4);
    ck_assert_uint_eq(t, (n * C + C0 + W) * 4);
    cubert_failure_release((cubert_failure *)f);
  }
  ck_assert_uint_eq(n, R);
  /* writing the block again repairs it, whole */
  cubert_faultinj_clear(fault_rt);
  uint32_t in[R * W] = {0};
  cb_test_ok(cubert_handle_write_strided(c, h, &v, in, sizeof in));
  ck_assert_uint_eq(ledger_entries(h), 0);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_million_row_column_is_one_ledger_entry) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  const uint64_t R = 1000000, C = 4;
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty(c, R * C * 4, &h));
  uint32_t fill = 7;
  cb_test_ok(cubert_handle_fill(c, h, &fill, 4));
  cubert_view v = columns(R, C, 1, 1);
  failed_strided_write(c, h, &v);
  ck_assert_uint_eq(ledger_entries(h), 1);
  cubert_handle *row = slice(h, 500000 * C * 4, 500001 * C * 4);
  uint32_t buf[4];
  cb_test_status(cubert_handle_read(c, row, buf, sizeof buf), CUBERT_ERR_TAINTED);
  cubert_view other = columns(R, C, 2, 1);
  cb_test_ok(cubert_handle_check_strided(c, h, &other));
  cubert_handle_release(row);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_contiguous_write_over_a_strided_taint_repairs_exactly) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  enum { R = 50, C = 8 };
  cubert_handle *h = matrix(c, R, C, 0);
  cubert_view v = columns(R, C, 2, 3);
  failed_strided_write(c, h, &v);
  /* rows 10..19 written whole, and half of row 30 from byte (30*C+3)*4 */
  cubert_handle *rows = slice(h, 10 * C * 4, 20 * C * 4);
  uint32_t ten[10 * C] = {0};
  cb_test_ok(cubert_handle_write(c, rows, ten, sizeof ten));
  cubert_handle *half = slice(h, (30 * C + 3) * 4, (30 * C + 8) * 4);
  uint32_t five[5] = {0};
  cb_test_ok(cubert_handle_write(c, half, five, sizeof five));
  ck_assert_uint_le(ledger_entries(h), 4); /* two claims, one cut run */
  cubert_view block = columns(R, C, 2, 3);
  uint32_t out[R * 3];
  cb_test_status(cubert_handle_read_strided(c, h, &block, out, sizeof out), CUBERT_ERR_TAINTED);
  cubert_error *e = cubert_last_error();
  /* 50 rows less 10 written; row 30 keeps only byte range (30*C+2)..(30*C+3) */
  ck_assert_uint_eq(cubert_error_failure_count(e), R - 10);
  for (size_t i = 0; i < cubert_error_failure_count(e); i++) {
    uint64_t s, t;
    cubert_error_failure(e, i, &s, &t);
    uint64_t r = s / 4 / C;
    ck_assert(r < 10 || r >= 20);
    ck_assert_uint_eq(s, (r * C + 2) * 4);
    ck_assert_uint_eq(t, (r * C + (r == 30 ? 3 : 5)) * 4);
  }
  cubert_error_release(e);
  cubert_view repaired = {2, 4, 10 * C + 2, {10, 3}, {C, 1}};
  cb_test_ok(cubert_handle_check_strided(c, h, &repaired));
  cubert_handle_release(rows);
  cubert_handle_release(half);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_strided_write_over_a_contiguous_taint_repairs_exactly) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  enum { R = 40, C = 6 };
  cubert_handle *h = matrix(c, R, C, 0);
  uint32_t zero[R * C] = {0};
  rule("write times=1 fault=fail");
  ck_assert_int_ne(cubert_handle_write(c, h, zero, sizeof zero), CUBERT_OK);
  cubert_view v = columns(R, C, 1, 2);
  uint32_t in[R * 2];
  for (int i = 0; i < R * 2; i++) in[i] = (uint32_t)i;
  cb_test_ok(cubert_handle_write_strided(c, h, &v, in, sizeof in));
  ck_assert_uint_le(ledger_entries(h), 3); /* head, one claim of the gaps, tail */
  uint32_t out[R * 2];
  cb_test_ok(cubert_handle_read_strided(c, h, &v, out, sizeof out));
  ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
  /* everything else still carries the failure: each row's other columns */
  static const uint64_t others[4] = {0, 1, 3, C};
  for (uint64_t r = 0; r < R; r++) row_refused_naming(c, h, r, C, others, 2);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_tainted_strided_source_gives_its_destination_a_child_exactly) {
  cb_test_env env;
  if (!open_host(_i, 2, &env)) return;
  enum { R = 20, C = 5 };
  cubert_handle *a = matrix(env.clients[0], R, C, 0), *b = matrix(env.clients[1], R, C, 0);
  cubert_view v = columns(R, C, 1, 1), w = columns(R, C, 3, 1);
  failed_strided_write(env.clients[0], a, &v);
  /* a copy of column 2 is fine (between the tainted column and the next) */
  cubert_view two = columns(R, C, 2, 1);
  cb_test_ok(cubert_handle_copy_strided_peer(env.clients[0], a, &two, env.clients[1], b, &w));
  /* a copy of column 1 is refused, and b's column 3 carries a child */
  cb_test_status(cubert_handle_copy_strided_peer(env.clients[0], a, &v, env.clients[1], b, &w), CUBERT_ERR_TAINTED);
  ck_assert_uint_eq(ledger_entries(b), 1);
  cb_test_status(cubert_handle_check_strided(env.clients[1], b, &w), CUBERT_ERR_TAINTED);
  cubert_view rest = {2, 4, 0, {R, 3}, {C, 1}};
  cb_test_ok(cubert_handle_check_strided(env.clients[1], b, &rest));
  cubert_handle_release(a);
  cubert_handle_release(b);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_async_strided_failure_replays_exactly) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  enum { R = 30, C = 4 };
  cubert_handle *h = matrix(c, R, C, 0);
  cubert_view v = columns(R, C, 2, 1);
  uint32_t in[R] = {0};
  rule("write times=1 fault=async");
  cb_test_ok(cubert_handle_write_strided(c, h, &v, in, sizeof in));
  ck_assert_int_ne(cubert_sync(c), CUBERT_OK);
  ck_assert_uint_eq(ledger_entries(h), 1);
  cubert_view col = columns(R, C, 2, 1), next = columns(R, C, 3, 1);
  cb_test_status(cubert_handle_check_strided(c, h, &col), CUBERT_ERR_TAINTED);
  ck_assert_uint_eq(failures_now(), R);
  cb_test_ok(cubert_handle_check_strided(c, h, &next));
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

/* A strided write that stops part way or scribbles fails whole (its whole
 * footprint tainted), and what it left in memory stays inside the
 * footprint: the columns beside the block hold their bytes. */
START_TEST(test_partial_and_scribbled_strided_writes_stay_in_the_footprint) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  enum { R = 64, C = 6 };
  const char *faults[2] = {"write times=1 fault=partial:0.5", "write times=1 fault=scribble:0.5"};
  for (int f = 0; f < 2; f++) {
    cubert_handle *h = matrix(c, R, C, 0);
    cubert_view v = columns(R, C, 2, 2);
    uint32_t in[R * 2];
    for (int i = 0; i < R * 2; i++) in[i] = 0xdead0000u + (uint32_t)i;
    rule(faults[f]);
    ck_assert_int_ne(cubert_handle_write_strided(c, h, &v, in, sizeof in), CUBERT_OK);
    cb_test_status(cubert_handle_check_strided(c, h, &v), CUBERT_ERR_TAINTED);
    ck_assert_uint_eq(failures_now(), R);
    cubert_view left = columns(R, C, 0, 2), right = columns(R, C, 4, 2);
    uint32_t l[R * 2], r[R * 2];
    cb_test_ok(cubert_handle_read_strided(c, h, &left, l, sizeof l));
    cb_test_ok(cubert_handle_read_strided(c, h, &right, r, sizeof r));
    int bad = 0;
    for (int i = 0; i < R; i++)
      for (int k = 0; k < 2; k++)
        bad += l[i * 2 + k] != (uint32_t)(i * 1000 + k) || r[i * 2 + k] != (uint32_t)(i * 1000 + 4 + k);
    ck_assert_msg(bad == 0, "%s: %d elements beside the block changed", faults[f], bad);
    cubert_handle_release(h);
  }
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ the ledger against a byte map */

#define SPACE 2048
#define NFAIL 3
static cubert_failure *model[SPACE];

static void random_pattern(uint64_t (*rnd)(void), cb_pattern *p) {
  cubert_view v = {0};
  v.elem_size = 1u << (rnd() % 3);
  v.ndims = 1 + (uint32_t)(rnd() % 3);
  uint64_t span = 1;
  for (uint32_t d = v.ndims; d-- > 0;) {
    v.shape[d] = 1 + rnd() % 5;
    v.strides[d] = span + rnd() % 4;
    span = v.strides[d] * v.shape[d];
  }
  v.offset = rnd() % 64;
  bool empty;
  char why[256];
  if (cb_pattern_from_view(&v, 0, SPACE, p, &empty, why, sizeof why) != CUBERT_OK) {
    /* too large: a single short run instead */
    cubert_view one = {1, 1, rnd() % (SPACE - 8), {1 + rnd() % 8}, {1}};
    ck_assert_int_eq(cb_pattern_from_view(&one, 0, SPACE, p, &empty, why, sizeof why), CUBERT_OK);
  }
  /* sometimes only part of the runs, as a cut claim would be */
  uint64_t total = cb_pattern_total(p);
  if (total > 2 && rnd() % 3 == 0) {
    p->lo = rnd() % (total / 2);
    p->hi = p->lo + 1 + rnd() % (total - p->lo);
  }
}

static uint64_t state = 88172645463325252ull;
static uint64_t rnd(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

static void model_pattern(const cb_pattern *p, cubert_failure *f) {
  for (uint64_t k = p->lo; k < p->hi; k++) {
    uint64_t o = cb_pattern_off(p, k);
    for (uint64_t b = o; b < o + p->run; b++) model[b] = f;
  }
}

START_TEST(test_ledger_strided_claims_match_a_byte_map) {
  cubert_failure *fails[NFAIL];
  for (int i = 0; i < NFAIL; i++) fails[i] = cb_failure_new(CUBERT_ERR_LAUNCH, "test", 0, "host:0", 0, "launch", "k", (uint64_t)i);
  cb_ledger l;
  memset(&l, 0, sizeof l);
  memset(model, 0, sizeof model);
  size_t most_claims = 0, cut_claims = 0;
  for (int step = 0; step < 3000; step++) {
    cubert_failure *f = rnd() % 3 ? fails[rnd() % NFAIL] : NULL;
    if (rnd() % 2) {
      cb_pattern p;
      random_pattern(rnd, &p);
      if (f)
        cb_ledger_set_pattern(&l, &p, f);
      else
        cb_ledger_clear_pattern(&l, &p);
      model_pattern(&p, f);
    } else {
      uint64_t s = rnd() % SPACE, e = s + 1 + rnd() % 300;
      if (e > SPACE) e = SPACE;
      if (f)
        cb_ledger_set(&l, s, e, f);
      else
        cb_ledger_clear(&l, s, e);
      for (uint64_t b = s; b < e; b++) model[b] = f;
    }
    if (l.ns > most_claims) most_claims = l.ns;
    for (const cb_sclaim *c = l.sroot; c; c = c->left) cut_claims += c->p.lo > 0;
    /* every byte, through the walk of pieces */
    cubert_failure *seen[SPACE] = {0};
    uint64_t s, e;
    cubert_failure *g;
    bool ordered = true;
    for (uint64_t from = 0; cb_ledger_first_piece(&l, from, SPACE, &s, &e, &g); from = e) {
      ordered = ordered && s < e && s >= from;
      for (uint64_t b = s; b < e; b++) seen[b] = g;
    }
    ck_assert_msg(ordered, "step %d: pieces out of order", step);
    uint64_t b = 0; /* asserting once: a Check assertion costs a pipe write */
    while (b < SPACE && seen[b] == model[b]) b++;
    ck_assert_msg(b == SPACE, "step %d byte %llu: ledger %p, model %p", step, (unsigned long long)b,
                  b < SPACE ? (void *)seen[b] : NULL, b < SPACE ? (void *)model[b] : NULL);
    /* a random strided read reports exactly the tainted bytes of its footprint */
    cb_pattern r;
    random_pattern(rnd, &r);
    cb_errb eb;
    cb_errb_init(&eb, CUBERT_ERR_TAINTED);
    cb_ledger_report_pattern(&l, &r, &eb);
    static unsigned char in_read[SPACE];
    memset(in_read, 0, sizeof in_read);
    for (uint64_t k = r.lo; k < r.hi; k++) {
      uint64_t o = cb_pattern_off(&r, k);
      memset(in_read + o, 1, r.run);
    }
    uint64_t reported = 0, want = 0, last = 0, wrong = 0;
    for (size_t i = 0; i < eb.n; i++) {
      wrong += eb.entries[i].start < last; /* address order, disjoint */
      last = eb.entries[i].end;
      for (uint64_t x = eb.entries[i].start; x < eb.entries[i].end; x++) {
        wrong += !in_read[x] || eb.entries[i].failure != model[x];
        reported++;
      }
    }
    for (uint64_t x = 0; x < SPACE; x++) want += in_read[x] && model[x];
    ck_assert_msg(wrong == 0 && reported == want, "step %d: %llu wrong bytes, %llu reported of %llu", step,
                  (unsigned long long)wrong, (unsigned long long)reported, (unsigned long long)want);
    cb_errb_discard(&eb);
  }
  ck_assert_uint_ge(most_claims, 5); /* the walk met many strided claims, */
  ck_assert_uint_gt(cut_claims, 0);   /* some of them cut */
  cb_ledger_free(&l);
  for (int i = 0; i < NFAIL; i++) {
    ck_assert_uint_eq(atomic_load(&fails[i]->refs), 1);
    cubert_failure_release(fails[i]);
  }
}
END_TEST

START_TEST(test_pattern_first_ge_matches_a_scan) {
  for (int step = 0; step < 2000; step++) {
    cb_pattern p;
    random_pattern(rnd, &p);
    uint64_t total = cb_pattern_total(&p);
    uint64_t x = rnd() % (SPACE + 16);
    uint64_t k = 0;
    while (k < total && cb_pattern_off(&p, k) < x) k++;
    ck_assert_uint_eq(cb_pattern_first_ge(&p, x), k);
  }
}
END_TEST

typedef struct marks {
  unsigned char *bytes;
  uint64_t last, wrong;
} marks;

static void mark_piece(void *ctx, uint64_t s, uint64_t e) {
  marks *m = ctx;
  m->wrong += s < m->last || s >= e; /* address order, disjoint, not empty */
  m->last = e;
  for (uint64_t b = s; b < e; b++) m->bytes[b]++;
}

/* Two layouts of one pitch (the fast path for column blocks of one matrix)
 * meet exactly where a byte scan says, pieces in address order. */
START_TEST(test_pattern_meet_of_one_pitch_matches_a_scan) {
  static unsigned char in_a[SPACE], in_b[SPACE], got[SPACE];
  for (int step = 0; step < 3000; step++) {
    uint64_t P = 2 + rnd() % 40;
    cb_pattern p[2];
    for (int i = 0; i < 2; i++) {
      memset(&p[i], 0, sizeof p[i]);
      p[i].nd = 1;
      p[i].pitch[0] = P;
      p[i].run = 1 + rnd() % (P - 1); /* shorter than the pitch: not merged */
      p[i].count[0] = 2 + rnd() % 20;
      p[i].base = rnd() % 200;
      p[i].lo = rnd() % 2;
      p[i].hi = p[i].lo + 1 + rnd() % (p[i].count[0] - p[i].lo);
    }
    memset(in_a, 0, sizeof in_a);
    memset(in_b, 0, sizeof in_b);
    memset(got, 0, sizeof got);
    model_pattern(&p[0], (cubert_failure *)in_a); /* only whether set matters */
    for (uint64_t b = 0; b < SPACE; b++) in_a[b] = model[b] != NULL;
    memset(model, 0, sizeof model);
    model_pattern(&p[1], (cubert_failure *)in_b);
    for (uint64_t b = 0; b < SPACE; b++) in_b[b] = model[b] != NULL;
    memset(model, 0, sizeof model);
    marks m = {got, 0, 0};
    bool met = cb_pattern_meet(&p[0], &p[1], mark_piece, &m);
    uint64_t want = 0, bad = m.wrong;
    for (uint64_t b = 0; b < SPACE; b++) {
      want += in_a[b] && in_b[b];
      bad += got[b] != (in_a[b] && in_b[b]);
    }
    ck_assert_msg(bad == 0 && met == (want > 0) && cb_pattern_meet(&p[0], &p[1], NULL, NULL) == met,
                  "step %d: %llu wrong bytes", step, (unsigned long long)bad);
  }
}
END_TEST

/* ------------------------------------------------------------ tensor parameters
 *
 * Tensor parameters (CUBERT_PARAM_TENSOR, cubert_arg_tensor) and the tensor
 * built-ins COPY_STRIDED and FILL_STRIDED: the kernels give the bytes
 * cubert's own strided copy gives and touch nothing between a view's
 * elements; a launch's read and write sets are the views' footprints, so a
 * failed launch taints exactly the output footprint (one ledger entry) and a
 * tainted input stops a launch only where the input's footprint meets the
 * taint; a bad view is refused before anything runs, naming the argument
 * and the dimension. */

enum { TR = 40, TC = 12 };

static void read_all(cubert_client *c, cubert_handle *h, uint32_t *m) {
  cb_test_ok(cubert_handle_read(c, h, m, (uint64_t)TR * TC * 4));
}

static cubert_status launch_copy(cubert_runtime *rt, cubert_client *c, const cubert_handle *src, const cubert_view *sv,
                                 const cubert_handle *dst, const cubert_view *dv) {
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_builtin_kernel(CUBERT_BUILTIN_COPY_STRIDED, &k));
  cubert_device_info info;
  cb_test_ok(cubert_runtime_device_info(rt, 0, &info));
  cubert_launch_config cfg;
  cb_test_ok(cubert_builtin_config(CUBERT_BUILTIN_COPY_STRIDED, &info, cubert_view_bytes(dv) / dv->elem_size,
                                   &cfg));
  cubert_arg args[2] = {cubert_arg_tensor(src, sv), cubert_arg_tensor(dst, dv)};
  cubert_status st = cubert_launch(c, k, &cfg, args, 2);
  cubert_kernel_release(k);
  return st;
}

static cubert_status launch_fill(cubert_client *c, const cubert_handle *h, const cubert_view *v,
                                 const unsigned char value[16]) {
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_builtin_kernel(CUBERT_BUILTIN_FILL_STRIDED, &k));
  cubert_launch_config cfg = {{3, 1, 1}, {64, 1, 1}, 0}; /* any shape: grid-stride */
  cubert_arg args[2] = {cubert_arg_tensor(h, v), cubert_arg_scalar(value, 16)};
  cubert_status st = cubert_launch(c, k, &cfg, args, 2);
  cubert_kernel_release(k);
  return st;
}

static const unsigned char fill_value[16] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
                                             0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01};

/* ------------------------------------------------------------ results */

START_TEST(test_tensor_copy_gives_the_bytes_of_the_strided_copy) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *src = matrix(c, TR, TC, 0), *a = matrix(c, TR, TC, 500000), *b = matrix(c, TR, TC, 500000);
  /* a column block into other columns */
  cubert_view sv = columns(TR, TC, 2, 3), dv = columns(TR, TC, 7, 3);
  cb_test_ok(launch_copy(env.runtime, c, src, &sv, a, &dv));
  cb_test_ok(cubert_handle_copy_strided(c, src, &sv, b, &dv));
  /* a transpose of a 3-D block of u16 (dimensions swapped on one side) into
   * rows 20..24, after the rows the check below reads */
  cubert_view s3 = {3, 2, 1, {4, 5, 6}, {120, 24, 1}}, d3 = {3, 2, 480, {4, 5, 6}, {1, 4, 20}};
  cb_test_ok(launch_copy(env.runtime, c, src, &s3, a, &d3));
  cb_test_ok(cubert_handle_copy_strided(c, src, &s3, b, &d3));
  uint32_t ma[TR * TC], mb[TR * TC];
  read_all(c, a, ma);
  read_all(c, b, mb);
  ck_assert_int_eq(memcmp(ma, mb, sizeof ma), 0);
  /* and it moved what it should: element (r, 7 + j) = source (r, 2 + j) */
  for (uint32_t r = 0; r < 20; r++)
    for (uint32_t j = 0; j < 3; j++) ck_assert_uint_eq(ma[r * TC + 7 + j], r * 1000 + 2 + j);
  ck_assert_uint_eq(ma[6], 500006); /* beside the block: untouched */
  cubert_handle_release(src);
  cubert_handle_release(a);
  cubert_handle_release(b);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_tensor_fill_writes_the_footprint_only) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *h = matrix(c, TR, TC, 0);
  cubert_view v = columns(TR, TC, 4, 2);
  v.shape[0] = TR / 2;
  v.strides[0] = 2 * TC; /* every other row */
  cb_test_ok(launch_fill(c, h, &v, fill_value));
  uint32_t m[TR * TC], want;
  memcpy(&want, fill_value, 4);
  read_all(c, h, m);
  for (uint32_t r = 0; r < TR; r++)
    for (uint32_t k = 0; k < TC; k++) {
      bool in = r % 2 == 0 && k >= 4 && k < 6;
      ck_assert_uint_eq(m[r * TC + k], in ? want : r * 1000 + k);
    }
  /* 16-byte elements take the whole value */
  cubert_view wide = {1, 16, 1, {3}, {2}};
  cb_test_ok(launch_fill(c, h, &wide, fill_value));
  read_all(c, h, m);
  const unsigned char *bytes = (const unsigned char *)m;
  ck_assert_int_eq(memcmp(bytes + 16, fill_value, 16), 0);
  ck_assert_int_eq(memcmp(bytes + 48, fill_value, 16), 0);
  ck_assert_int_ne(memcmp(bytes + 32, fill_value, 16), 0);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ validation */

START_TEST(test_bad_tensor_arguments_are_refused_naming_them) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *h = matrix(c, TR, TC, 0);
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_builtin_kernel(CUBERT_BUILTIN_COPY_STRIDED, &k));
  cubert_launch_config cfg = {{1, 1, 1}, {32, 1, 1}, 0};
  cubert_view ok = columns(TR, TC, 0, 2), far = columns(TR, TC, 0, 2);
  far.shape[0] = TR + 1; /* one row past the matrix */
  cubert_arg args[2] = {cubert_arg_tensor(h, &ok), cubert_arg_tensor(h, NULL)};
  cb_test_status(cubert_launch(c, k, &cfg, args, 2), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "argument 1 (`out`)"));
  args[1] = cubert_arg_tensor(h, &far);
  cb_test_status(cubert_launch(c, k, &cfg, args, 2), CUBERT_ERR_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "argument 1 (`out`)"));
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "dimension 0"));
  args[1] = cubert_arg_buffer(h);
  cb_test_status(cubert_launch(c, k, &cfg, args, 2), CUBERT_ERR_LAUNCH_CONFIG);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "must be a tensor"));
  /* nothing ran, nothing was claimed */
  ck_assert_uint_eq(ledger_entries(h), 0);
  uint32_t m[TR * TC];
  read_all(c, h, m);
  ck_assert_uint_eq(m[TC + 2], 1002);
  cubert_kernel_release(k);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ failures */

START_TEST(test_failed_tensor_launch_taints_exactly_the_footprint) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *h = matrix(c, TR, TC, 0);
  enum { C0 = 3, W = 2 };
  cubert_view v = columns(TR, TC, C0, W);
  rule("launch kernel=cubert_fill_strided times=1 fault=fail");
  ck_assert_int_ne(launch_fill(c, h, &v, fill_value), CUBERT_OK);
  ck_assert_uint_eq(ledger_entries(h), 1); /* one strided claim, not TR ranges */
  cb_test_status(cubert_handle_check_strided(c, h, &v), CUBERT_ERR_TAINTED);
  for (uint64_t r = 0; r < TR; r++) row_block_alone_tainted(c, h, r, TC, C0, W);
  /* the columns beside it read fine, strided */
  cubert_view before = columns(TR, TC, C0 - 1, 1);
  uint32_t col[TR];
  cb_test_ok(cubert_handle_read_strided(c, h, &before, col, sizeof col));
  ck_assert_uint_eq(col[TR - 1], (TR - 1) * 1000 + C0 - 1);
  /* a successful fill of the same view releases exactly it */
  cb_test_ok(launch_fill(c, h, &v, fill_value));
  ck_assert_uint_eq(ledger_entries(h), 0);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

/* A launch found failed at a fence, and one whose fault scribbles: the
 * output footprint is tainted exactly (replayed at the fence), and the
 * columns beside it keep their bytes and their good verdict. */
START_TEST(test_async_and_scribbled_tensor_launches_stay_in_the_footprint) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  const char *faults[2] = {"launch kernel=cubert_fill_strided times=1 fault=async",
                           "launch kernel=cubert_fill_strided times=1 fault=scribble:0.5"};
  for (int f = 0; f < 2; f++) {
    cubert_handle *h = matrix(c, TR, TC, 0);
    cubert_view v = columns(TR, TC, 4, 2), next = columns(TR, TC, 6, 1);
    rule(faults[f]);
    cubert_status st = launch_fill(c, h, &v, fill_value);
    if (st == CUBERT_OK) st = cubert_sync(c);
    ck_assert_msg(st != CUBERT_OK, "%s: no failure", faults[f]);
    ck_assert_uint_eq(ledger_entries(h), 1);
    cb_test_status(cubert_handle_check_strided(c, h, &v), CUBERT_ERR_TAINTED);
    cb_test_ok(cubert_handle_check_strided(c, h, &next));
    uint32_t col[TR];
    cb_test_ok(cubert_handle_read_strided(c, h, &next, col, sizeof col));
    for (uint32_t r = 0; r < TR; r++) ck_assert_uint_eq(col[r], r * 1000 + 6);
    cubert_faultinj_clear(fault_rt);
    cubert_handle_release(h);
  }
  cb_test_close(&env);
}
END_TEST

START_TEST(test_tainted_tensor_input_skips_only_where_the_footprint_meets_it) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *src = matrix(c, TR, TC, 0), *dst = matrix(c, TR, TC, 500000);
  cubert_view bad = columns(TR, TC, 5, 1);
  rule("launch kernel=cubert_fill_strided times=1 fault=fail");
  ck_assert_int_ne(launch_fill(c, src, &bad, fill_value), CUBERT_OK);
  /* columns 2..4 interleave with the tainted column 5 but do not meet it:
   * the copy runs (a bounding range would have met it in every row) */
  cubert_view clean = columns(TR, TC, 2, 3), out = columns(TR, TC, 0, 3);
  cb_test_ok(launch_copy(env.runtime, c, src, &clean, dst, &out));
  uint32_t m[TR * TC];
  read_all(c, dst, m);
  for (uint32_t r = 0; r < TR; r++)
    for (uint32_t j = 0; j < 3; j++) ck_assert_uint_eq(m[r * TC + j], r * 1000 + 2 + j);
  /* columns 4..6 meet it: not run, the destination footprint carries a
   * child, the rest of the destination stays good */
  cubert_view meets = columns(TR, TC, 4, 3), out2 = columns(TR, TC, 6, 3);
  cb_test_status(launch_copy(env.runtime, c, src, &meets, dst, &out2), CUBERT_ERR_TAINTED);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "input `in`"));
  cb_test_status(cubert_handle_check_strided(c, dst, &out2), CUBERT_ERR_TAINTED);
  cubert_view rest = columns(TR, TC, 0, 6);
  cb_test_ok(cubert_handle_check_strided(c, dst, &rest));
  cubert_view last = columns(TR, TC, 9, 3);
  cb_test_ok(cubert_handle_check_strided(c, dst, &last));
  ck_assert_uint_eq(ledger_entries(dst), 1);
  cubert_handle_release(src);
  cubert_handle_release(dst);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ against a host reference
 *
 * The tensor built-ins walk rows where rows are contiguous on both sides
 * (16-byte accesses where the two sides sit at the same offset modulo 16,
 * narrower ones where they do not, the ends of rows element by element) and
 * elements everywhere else (kernels/builtin.c). These tests compare every
 * byte of the destination allocation, the gaps between rows and the bytes
 * around the footprint included, with a reference written here element by
 * element, under launch shapes that differ (the results must not depend on
 * them): row starts misaligned against each other by 0..15 bytes, rows that
 * are not a multiple of 16 bytes, every element size, shapes that differ
 * between the sides (same count or not), innermost strides above 1,
 * dimensions of one element, ranks 1 to 8, empty tensors and 64 MiB ones. */

static uint64_t ref_state = 0x853C49E6748FEA9Bull;
static uint64_t ref_rand(uint64_t n) {
  ref_state ^= ref_state << 13;
  ref_state ^= ref_state >> 7;
  ref_state ^= ref_state << 17;
  return n ? ref_state % n : 0;
}

static uint64_t view_count(const cubert_view *v) {
  uint64_t n = 1;
  for (uint32_t d = 0; d < v->ndims; d++) n *= v->shape[d];
  return n;
}

/* Bytes from the buffer's start to one past the view's furthest element. */
static uint64_t view_end(const cubert_view *v) {
  uint64_t last = v->offset;
  for (uint32_t d = 0; d < v->ndims; d++) last += (v->shape[d] ? v->shape[d] - 1 : 0) * v->strides[d];
  return (last + 1) * v->elem_size;
}

/* Byte offset of element k (row-major order of the view's shape). */
static uint64_t ref_at(const cubert_view *v, uint64_t k) {
  uint64_t off = v->offset;
  for (uint32_t d = v->ndims; d-- > 0;) {
    off += (k % v->shape[d]) * v->strides[d];
    k /= v->shape[d];
  }
  return off * v->elem_size;
}

/* Launch shapes the cases take in turn; the last is cubert_builtin_config's. */
static const cubert_launch_config ref_shapes[] = {
    {{1, 1, 1}, {1, 1, 1}, 0},  {{3, 1, 1}, {64, 1, 1}, 0},  {{2, 1, 1}, {96, 1, 1}, 0},
    {{5, 1, 1}, {33, 1, 1}, 0}, {{2, 3, 1}, {16, 2, 2}, 0}, {{40, 1, 1}, {256, 1, 1}, 0},
};
enum { REF_SHAPES = sizeof ref_shapes / sizeof ref_shapes[0] + 1 };

static cubert_status ref_launch(cb_test_env *env, cubert_builtin which, cubert_arg *args, uint64_t n, int shape) {
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_builtin_kernel(which, &k));
  cubert_launch_config cfg;
  if (shape % REF_SHAPES < REF_SHAPES - 1) {
    cfg = ref_shapes[shape % REF_SHAPES];
  } else {
    cubert_device_info info;
    cb_test_ok(cubert_runtime_device_info(env->runtime, 0, &info));
    cb_test_ok(cubert_builtin_config(which, &info, n, &cfg));
  }
  cubert_status st = cubert_launch(env->clients[0], k, &cfg, args, 2);
  cubert_kernel_release(k);
  return st;
}

/* A handle of `size` bytes holding the pattern of `seed`, and the bytes in `copy`. */
static cubert_handle *ref_buffer(cubert_client *c, uint64_t size, uint64_t seed, unsigned char **copy) {
  *copy = malloc(size);
  ck_assert_ptr_nonnull(*copy);
  cb_test_pattern(*copy, size, seed);
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_create(c, *copy, size, &h));
  return h;
}

/* The destination read back whole equals `want`; else fails naming the
 * first wrong byte and whether it lies in the footprint. */
static void ref_compare(cubert_client *c, cubert_handle *h, const unsigned char *want, uint64_t size,
                        const cubert_view *dv, const char *what) {
  unsigned char *got = malloc(size);
  ck_assert_ptr_nonnull(got);
  cb_test_ok(cubert_handle_read(c, h, got, size));
  if (memcmp(got, want, size) != 0) {
    uint64_t at = 0;
    while (got[at] == want[at]) at++;
    uint64_t n = view_count(dv), k = 0;
    while (k < n && !(ref_at(dv, k) <= at && at < ref_at(dv, k) + dv->elem_size)) k++;
    ck_abort_msg("%s: byte %llu of %llu is 0x%02x, expected 0x%02x (%s)", what, (unsigned long long)at,
                 (unsigned long long)size, got[at], want[at],
                 k < n ? "in the footprint" : "outside the footprint: a gap or an edge");
  }
  free(got);
}

/* cubert_copy_strided of sv (in a buffer of its span plus `slack` bytes)
 * into dv (the same), launch shape `shape`, checked byte for byte. */
static void ref_copy_case(cb_test_env *env, const cubert_view *sv, const cubert_view *dv, uint64_t slack, int shape,
                          const char *what) {
  cubert_client *c = env->clients[0];
  uint64_t sbytes = view_end(sv) + slack, dbytes = view_end(dv) + slack;
  unsigned char *src, *want;
  cubert_handle *s = ref_buffer(c, sbytes, ref_rand(1u << 30), &src);
  cubert_handle *d = ref_buffer(c, dbytes, ref_rand(1u << 30), &want);
  uint64_t n = view_count(sv), m = view_count(dv);
  uint32_t bytes = sv->elem_size < dv->elem_size ? sv->elem_size : dv->elem_size;
  if (m < n) n = m;
  for (uint64_t k = 0; k < n; k++) memcpy(want + ref_at(dv, k), src + ref_at(sv, k), bytes);
  cubert_arg args[2] = {cubert_arg_tensor(s, sv), cubert_arg_tensor(d, dv)};
  cb_test_ok(ref_launch(env, CUBERT_BUILTIN_COPY_STRIDED, args, m, shape));
  ref_compare(c, d, want, dbytes, dv, what);
  cubert_handle_release(s);
  cubert_handle_release(d);
  free(src);
  free(want);
}

/* cubert_fill_strided of v with a random value, checked byte for byte. */
static void ref_fill_case(cb_test_env *env, const cubert_view *v, uint64_t slack, int shape, const char *what) {
  cubert_client *c = env->clients[0];
  uint64_t bytes = view_end(v) + slack;
  unsigned char *want, value[16];
  cubert_handle *h = ref_buffer(c, bytes, ref_rand(1u << 30), &want);
  for (int b = 0; b < 16; b++) value[b] = (unsigned char)ref_rand(256);
  uint64_t n = view_count(v);
  for (uint64_t k = 0; k < n; k++) memcpy(want + ref_at(v, k), value, v->elem_size);
  cubert_arg args[2] = {cubert_arg_tensor(h, v), cubert_arg_scalar(value, 16)};
  cb_test_ok(ref_launch(env, CUBERT_BUILTIN_FILL_STRIDED, args, n, shape));
  ref_compare(c, h, want, bytes, v, what);
  cubert_handle_release(h);
  free(want);
}

/* 2-D views of `rows` rows of at least `min_bytes` bytes at pitches that
 * are mostly not multiples of 16 bytes, the two sides' row starts at every
 * pair of offsets modulo 16 that elements of e bytes allow. */
START_TEST(test_tensor_rows_at_every_alignment_match_a_host_reference) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  char what[160];
  int step = 0;
  for (uint32_t e = 1; e <= 16; e *= 2)
    for (uint64_t oi = 0; oi < 16 / e; oi++)
      for (uint64_t oo = 0; oo < 16 / e; oo++, step++) {
        uint64_t width = (32 + (uint64_t)step * 37 % 200 + e - 1) / e, rows = 3 + step % 4;
        cubert_view sv = {2, e, oi, {rows, width}, {width + step % 5, 1}};
        cubert_view dv = {2, e, oo, {rows, width}, {width + step * 3 % 7 + step % 2, 1}};
        snprintf(what, sizeof what,
                 "copy, %u-byte elements, %llu rows of %llu, offsets %llu and %llu, pitches %llu and %llu", e,
                 (unsigned long long)rows, (unsigned long long)width, (unsigned long long)oi, (unsigned long long)oo,
                 (unsigned long long)sv.strides[0], (unsigned long long)dv.strides[0]);
        ref_copy_case(&env, &sv, &dv, 16 + step % 17, step, what);
        if (oi == 0) {
          snprintf(what, sizeof what, "fill, %u-byte elements, %llu rows of %llu, offset %llu, pitch %llu", e,
                   (unsigned long long)rows, (unsigned long long)width, (unsigned long long)oo,
                   (unsigned long long)dv.strides[0]);
          ref_fill_case(&env, &dv, 16 + step % 13, step + 3, what);
        }
      }
  cb_test_close(&env);
}
END_TEST

/* Strides for v's shape: the dimensions laid out in a random order (row-
 * major in 3 cases of 4), each one's stride the span of those inside it
 * plus a pad (none in half the cases), the innermost stride 1 in 3 cases of
 * 4, else 2 or 3; dimensions of one element get any stride. */
static void ref_lay_out(cubert_view *v) {
  uint32_t order[CUBERT_VIEW_MAX_DIMS];
  for (uint32_t d = 0; d < v->ndims; d++) order[d] = d;
  if (ref_rand(4) == 0)
    for (uint32_t d = v->ndims; d > 1; d--) {
      uint32_t j = (uint32_t)ref_rand(d), t = order[d - 1];
      order[d - 1] = order[j];
      order[j] = t;
    }
  uint64_t s = ref_rand(4) ? 1 : 2 + ref_rand(2);
  for (uint32_t i = v->ndims; i-- > 0;) {
    uint32_t d = order[i];
    if (v->shape[d] == 1) {
      v->strides[d] = ref_rand(3) ? ref_rand(1000) : 0;
      continue;
    }
    v->strides[d] = s;
    s = s * (v->shape[d] ? v->shape[d] : 1) + (ref_rand(2) ? 0 : 1 + ref_rand(5));
  }
}

/* A random shape of `rank` dimensions with about `count` elements at most:
 * ones in a case of 4. */
static void ref_shape(cubert_view *v, uint32_t rank, uint64_t count) {
  v->ndims = rank;
  for (uint32_t d = 0; d < rank; d++) {
    uint64_t most = count > 1 ? count : 1;
    v->shape[d] = ref_rand(4) == 0 || most < 2 ? 1 : 2 + ref_rand(most < 40 ? most - 1 : 40);
    count /= v->shape[d];
  }
}

/* `n` elements in `rank` dimensions: its prime factors dealt out at random. */
static void ref_refactor(cubert_view *v, uint32_t rank, uint64_t n) {
  v->ndims = rank;
  for (uint32_t d = 0; d < rank; d++) v->shape[d] = 1;
  for (uint64_t p = 2; n > 1;) {
    if (n % p) {
      p++;
      continue;
    }
    v->shape[ref_rand(rank)] *= p;
    n /= p;
  }
}

START_TEST(test_tensor_random_layouts_match_a_host_reference) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  char what[160];
  for (int step = 0; step < 400; step++) {
    cubert_view sv = {0}, dv = {0};
    uint32_t e = 1u << ref_rand(5);
    sv.elem_size = e;
    dv.elem_size = ref_rand(6) ? e : 1u << ref_rand(5);
    ref_shape(&sv, 1 + (uint32_t)ref_rand(CUBERT_VIEW_MAX_DIMS), 1 + ref_rand(3000));
    uint64_t n = view_count(&sv);
    int mode = (int)ref_rand(4);
    uint32_t rank = 1 + (uint32_t)ref_rand(CUBERT_VIEW_MAX_DIMS);
    if (mode == 0) { /* the same shape */
      dv.ndims = sv.ndims;
      memcpy(dv.shape, sv.shape, sizeof dv.shape);
    } else if (mode == 1) { /* the same count, another shape */
      ref_refactor(&dv, rank, n);
    } else if (mode == 2) { /* the same count, the same innermost extent */
      ref_refactor(&dv, rank, n / sv.shape[sv.ndims - 1]);
      dv.shape[rank - 1] *= sv.shape[sv.ndims - 1];
    } else { /* another count */
      ref_shape(&dv, rank, 1 + ref_rand(3000));
    }
    if (ref_rand(25) == 0) (ref_rand(2) ? &sv : &dv)->shape[ref_rand(sv.ndims < dv.ndims ? sv.ndims : dv.ndims)] = 0;
    ref_lay_out(&sv);
    ref_lay_out(&dv);
    sv.offset = ref_rand(16 / sv.elem_size + 2);
    dv.offset = ref_rand(16 / dv.elem_size + 2);
    snprintf(what, sizeof what, "step %d: copy of rank %u (%llu elements of %u bytes) into rank %u (%llu of %u)", step,
             sv.ndims, (unsigned long long)view_count(&sv), sv.elem_size, dv.ndims,
             (unsigned long long)view_count(&dv), dv.elem_size);
    ref_copy_case(&env, &sv, &dv, ref_rand(40), step, what);
    snprintf(what, sizeof what, "step %d: fill of rank %u (%llu elements of %u bytes)", step, dv.ndims,
             (unsigned long long)view_count(&dv), dv.elem_size);
    ref_fill_case(&env, &dv, ref_rand(40), step + 1, what);
  }
  cb_test_close(&env);
}
END_TEST

/* Named layouts at the edges of the walks. */
START_TEST(test_tensor_edge_layouts_match_a_host_reference) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  static const struct {
    const char *what;
    cubert_view in, out;
  } cases[] = {
      {"rank 1, contiguous, offsets 1 and 2", {1, 4, 1, {1000}, {1}}, {1, 4, 2, {1000}, {1}}},
      {"rank 1, 16-byte elements", {1, 16, 0, {77}, {1}}, {1, 16, 3, {77}, {1}}},
      {"rank 8, three contiguous inner dimensions, pitched outer ones",
       {8, 2, 3, {2, 2, 2, 2, 2, 3, 4, 9}, {2087, 1041, 520, 260, 130, 36, 9, 1}},
       {8, 2, 5, {2, 2, 2, 2, 2, 3, 4, 9}, {5000, 2500, 1250, 600, 300, 100, 9, 1}}},
      {"rank 8 into rank 1",
       {8, 1, 0, {1, 2, 1, 3, 1, 2, 1, 40}, {9, 400, 3, 130, 0, 41, 5, 1}},
       {1, 1, 7, {480}, {1}}},
      {"the same count, rows of 40 into rows of 30", {2, 4, 1, {6, 40}, {44, 1}}, {2, 4, 3, {8, 30}, {31, 1}}},
      {"a contiguous 2-D block into a rank-1 view", {2, 8, 0, {12, 20}, {20, 1}}, {1, 8, 1, {240}, {1}}},
      {"more elements in than out", {2, 4, 0, {10, 32}, {33, 1}}, {2, 4, 0, {7, 32}, {40, 1}}},
      {"innermost stride 2 on the source", {2, 4, 0, {9, 16}, {40, 2}}, {2, 4, 1, {9, 16}, {17, 1}}},
      {"innermost stride 3 on the destination", {2, 2, 0, {9, 16}, {16, 1}}, {2, 2, 1, {9, 16}, {50, 3}}},
      {"a transpose", {2, 4, 0, {16, 24}, {24, 1}}, {2, 4, 0, {16, 24}, {1, 16}}},
      {"elements of 8 bytes into elements of 4", {2, 8, 0, {5, 12}, {13, 1}}, {2, 4, 1, {5, 12}, {12, 1}}},
      {"elements of 2 bytes into elements of 16", {2, 2, 0, {5, 12}, {13, 1}}, {2, 16, 0, {5, 12}, {12, 1}}},
      {"an innermost dimension of one element", {3, 4, 0, {7, 33, 1}, {40, 1, 999}}, {3, 4, 2, {7, 33, 1}, {35, 1, 0}}},
      {"empty source", {3, 4, 0, {4, 0, 8}, {64, 8, 1}}, {1, 4, 0, {32}, {1}}},
      {"empty destination", {1, 4, 0, {32}, {1}}, {2, 4, 0, {0, 8}, {8, 1}}},
      {"rows of exactly 32 bytes", {2, 1, 5, {9, 32}, {37, 1}}, {2, 1, 0, {9, 32}, {32, 1}}},
      {"rows of 31 bytes (narrow: a thread a piece)", {2, 1, 5, {9, 31}, {37, 1}}, {2, 1, 0, {9, 31}, {33, 1}}},
      {"rows of 2 bytes, pitches 5 and 3", {2, 1, 1, {300, 2}, {5, 1}}, {2, 1, 0, {300, 2}, {3, 1}}},
      {"rows of 2 elements of 16 bytes", {2, 16, 1, {50, 2}, {3, 1}}, {2, 16, 0, {50, 2}, {5, 1}}},
      {"rows of 64 bytes at a 4 KiB pitch (bench narrow-64B)", {2, 4, 8, {2048, 16}, {1024, 1}},
       {2, 4, 8, {2048, 16}, {1024, 1}}},
      {"rows of 64 bytes, the sides 4 bytes apart, odd pitches", {2, 4, 1, {1500, 16}, {17, 1}},
       {2, 4, 2, {1500, 16}, {19, 1}}},
      {"rows of 100 bytes, 2 apart, into one row", {3, 2, 3, {7, 30, 50}, {1700, 53, 1}}, {1, 2, 2, {10500}, {1}}},
      {"runs of 72 into rows of 18 (4 rows a run), 36 bytes", {2, 2, 1, {400, 72}, {75, 1}},
       {2, 2, 3, {1600, 18}, {21, 1}}},
      {"rows of 496 bytes, 8 bytes apart", {2, 8, 1, {300, 62}, {63, 1}}, {2, 8, 2, {300, 62}, {64, 1}}},
      {"rows of 528 bytes (groups of threads)", {2, 8, 1, {300, 66}, {67, 1}}, {2, 8, 2, {300, 66}, {69, 1}}},
      {"one long row in pieces, the sides 4 bytes apart", {1, 4, 1, {70001}, {1}}, {1, 4, 0, {70001}, {1}}},
      {"one long row in pieces, both 12 bytes past 16", {1, 4, 3, {70001}, {1}}, {1, 4, 3, {70001}, {1}}},
      {"one long row in pieces, the sides 8 bytes apart", {1, 8, 1, {30001}, {1}}, {1, 8, 2, {30001}, {1}}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int shape = 0; shape < REF_SHAPES; shape++) {
      ref_copy_case(&env, &cases[i].in, &cases[i].out, 48, shape, cases[i].what);
      ref_fill_case(&env, &cases[i].out, 48, shape, cases[i].what);
    }
  cb_test_close(&env);
}
END_TEST

/* Under a sanitizer (CI's asan and tsan builds, host backend only) the
 * large cases below are a quarter as long in their outermost dimension:
 * the same layouts, rows and alignments, in a quarter of the time (the
 * element-by-element reference of 64 MiB took most of this test's 47 s
 * under TSan on the 2-core CI machine). The other builds, and every GPU
 * run, take them whole. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define REF_BIG_DIV 4u
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define REF_BIG_DIV 4u
#endif
#endif
#ifndef REF_BIG_DIV
#define REF_BIG_DIV 1u
#endif

/* 64 MiB: a rank-1 copy whose sides sit 8 bytes apart modulo 16, and a
 * 256 x 256 x 257 box of 4-byte elements (rows of 1028 bytes) between two
 * grids of other pitches, then fills of both with 16- and 1-byte elements;
 * the grid cubert_builtin_config gives. */
START_TEST(test_tensor_copies_and_fills_of_64_MiB_match_a_host_reference) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  int shape = REF_SHAPES - 1;
  cubert_view line_in = {1, 4, 1, {(16u << 20) / REF_BIG_DIV}, {1}};
  cubert_view line_out = {1, 4, 3, {(16u << 20) / REF_BIG_DIV}, {1}};
  ref_copy_case(&env, &line_in, &line_out, 64, shape, "64 MiB, rank 1");
  cubert_view box_in = {3, 4, 3, {256 / REF_BIG_DIV, 256, 257}, {256 * 260, 260, 1}};
  cubert_view box_out = {3, 4, 2, {256 / REF_BIG_DIV, 256, 257}, {256 * 258 + 5, 258, 1}};
  ref_copy_case(&env, &box_in, &box_out, 64, shape, "64 MiB, a 256 x 256 x 257 box");
  cubert_view wide = {1, 16, 1, {(4u << 20) / REF_BIG_DIV}, {1}};
  cubert_view bytes = {3, 1, 7, {256 / REF_BIG_DIV, 1024, 257}, {1024 * 263, 263, 1}};
  ref_fill_case(&env, &wide, 64, shape, "64 MiB fill, 16-byte elements");
  ref_fill_case(&env, &bytes, 64, shape, "64 MiB fill, a box of bytes");
  cb_test_close(&env);
}
END_TEST

int main(void) {
  Suite *s = suite_create("strided");
  TCase *tc = tcase_create("views");
  cb_test_add_backend_loop(tc, test_view_check_names_the_dimension_at_fault);
  cb_test_add_backend_loop(tc, test_column_block_round_trips_and_leaves_the_rest);
  cb_test_add_backend_loop(tc, test_copy_between_views_transposes_and_refuses_shared_bytes);
  cb_test_add_backend_loop(tc, test_peer_strided_copy_moves_a_column_block);
  suite_add_tcase(s, tc);
  tc = tcase_create("taint");
  cb_test_add_backend_loop(tc, test_failed_column_write_taints_exactly_its_footprint);
  cb_test_add_backend_loop(tc, test_million_row_column_is_one_ledger_entry);
  cb_test_add_backend_loop(tc, test_contiguous_write_over_a_strided_taint_repairs_exactly);
  cb_test_add_backend_loop(tc, test_strided_write_over_a_contiguous_taint_repairs_exactly);
  cb_test_add_backend_loop(tc, test_tainted_strided_source_gives_its_destination_a_child_exactly);
  cb_test_add_backend_loop(tc, test_async_strided_failure_replays_exactly);
  cb_test_add_backend_loop(tc, test_partial_and_scribbled_strided_writes_stay_in_the_footprint);
  suite_add_tcase(s, tc);
  tc = tcase_create("tensors");
  cb_test_add_backend_loop(tc, test_tensor_copy_gives_the_bytes_of_the_strided_copy);
  cb_test_add_backend_loop(tc, test_tensor_fill_writes_the_footprint_only);
  cb_test_add_backend_loop(tc, test_bad_tensor_arguments_are_refused_naming_them);
  cb_test_add_backend_loop(tc, test_failed_tensor_launch_taints_exactly_the_footprint);
  cb_test_add_backend_loop(tc, test_tainted_tensor_input_skips_only_where_the_footprint_meets_it);
  cb_test_add_backend_loop(tc, test_async_and_scribbled_tensor_launches_stay_in_the_footprint);
  suite_add_tcase(s, tc);
  tc = tcase_create("tensor_reference");
  tcase_set_timeout(tc, 240);
  cb_test_add_backend_loop(tc, test_tensor_rows_at_every_alignment_match_a_host_reference);
  cb_test_add_backend_loop(tc, test_tensor_random_layouts_match_a_host_reference);
  cb_test_add_backend_loop(tc, test_tensor_edge_layouts_match_a_host_reference);
  cb_test_add_backend_loop(tc, test_tensor_copies_and_fills_of_64_MiB_match_a_host_reference);
  suite_add_tcase(s, tc);
  tc = tcase_create("ledger");
  tcase_add_test(tc, test_ledger_strided_claims_match_a_byte_map);
  tcase_add_test(tc, test_pattern_first_ge_matches_a_scan);
  tcase_add_test(tc, test_pattern_meet_of_one_pitch_matches_a_scan);
  suite_add_tcase(s, tc);
  return cb_test_run(s);
}
