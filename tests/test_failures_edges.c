/* tests/test_failures_edges.c: the edges of the failure account that
 * mutation testing found unguarded (issue 11; ci/mutants/ names the
 * mutants each test kills): a failed launch as its outputs' last writer,
 * repairs that end where a taint ends, asynchronous failures reported once
 * per stream, parents below the first level of a chain, peer work and the
 * owner's stream order, freed memory and its failures, an asynchronous
 * device loss, and a launch that gives up its one pass part way.
 *
 * Faults come from the fault layer (cubert_faultinj_add), so each test runs
 * on the host backend, whose devices exist everywhere; on HIP it prints a
 * skip. Some tests look at runtime internals (runtime/internal.h) where the
 * public API cannot see the difference: a reference count, a stream id. */
#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cubert/cubert.h"
#include "cubert/faultinj.h"
#include "runtime/internal.h"
#include "tests/testutil.h"

/* ------------------------------------------------------------ helpers */

/* The runtime the fault rules go to: the test's own (fault rules are per
 * runtime). */
static cubert_runtime *fault_rt;

static bool open_host(int i, int min_devices, cb_test_env *env) {
  if (!cb_test_open(i, min_devices, env)) return false;
  if (strcmp(env->backend, "host") != 0) {
    cb_test_skip("no device: fault rules and host kernels need the host backend (%s)", env->backend);
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

static cubert_handle *words(cubert_client *c, uint64_t n, uint32_t v) {
  uint32_t *w = malloc(n * 4);
  for (uint64_t i = 0; i < n; i++) w[i] = v;
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_create(c, w, n * 4, &h));
  free(w);
  return h;
}

static cubert_status fill_u32(cubert_client *c, cubert_handle *out, uint32_t v) {
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_builtin_kernel(CUBERT_BUILTIN_FILL_U32, &k));
  uint64_t n = cubert_handle_size_in_use(out) / 4;
  cubert_arg a[3] = {cubert_arg_buffer(out), cubert_arg_scalar(&n, 8), cubert_arg_scalar(&v, 4)};
  cubert_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  cubert_status st = cubert_launch(c, k, &cfg, a, 3);
  cubert_kernel_release(k);
  return st;
}

static cubert_status copy_u32(cubert_client *c, const cubert_handle *in, cubert_handle *out) {
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_builtin_kernel(CUBERT_BUILTIN_COPY_U32, &k));
  uint64_t n = cubert_handle_size_in_use(out) / 4;
  cubert_arg a[3] = {cubert_arg_buffer(in), cubert_arg_buffer(out), cubert_arg_scalar(&n, 8)};
  cubert_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  cubert_status st = cubert_launch(c, k, &cfg, a, 3);
  cubert_kernel_release(k);
  return st;
}

/* Taints all of `h`: a fill of it that fails at enqueue (an injected
 * fault). */
static void taint_by_failed_fill(cb_test_env *env, cubert_client *c, cubert_handle *h) {
  rule("launch times=1 fault=fail");
  cb_test_status(fill_u32(c, h, 5), CUBERT_ERR_LAUNCH);
  cb_test_ok(cubert_faultinj_clear(env->runtime));
}

/* Every 32-bit word of `h` read as `v` (the read must succeed). */
static void expect_words(cubert_client *c, const cubert_handle *h, uint32_t v) {
  uint64_t size = cubert_handle_size_in_use(h);
  uint32_t *w = malloc(size ? size : 4);
  cb_test_ok(cubert_handle_read(c, h, w, size));
  for (uint64_t i = 0; i < size / 4; i++)
    ck_assert_msg(w[i] == v, "word %llu is 0x%08x, expected 0x%08x", (unsigned long long)i, w[i], v);
  free(w);
}

/* The failure the thread's last error names first (a new reference). */
static const cubert_failure *first_failure(void) {
  cubert_error *e = cubert_last_error();
  const cubert_failure *f = cubert_error_failure(e, 0, NULL, NULL);
  ck_assert_ptr_nonnull(f);
  cubert_failure_retain(f);
  cubert_error_release(e);
  return f;
}

/* A host kernel that sleeps, then writes its output: work a stream is
 * still busy with when later calls are made. */
static cubert_status slow_fn(const cubert_host_launch *l, char *msg, size_t cap) {
  (void)msg;
  (void)cap;
  struct timespec ts = {0, 300 * 1000000L};
  nanosleep(&ts, NULL);
  memset(l->args[0], 0x11, l->sizes[0]);
  return CUBERT_OK;
}

/* A kernel of host function `fn` only (a new reference). */
static cubert_kernel *host_kernel(const char *name, const cubert_param *p, uint32_t n, cubert_host_fn fn) {
  cubert_kernel_desc d = {0};
  d.name = name;
  d.params = p;
  d.nparams = n;
  d.host_fn = fn;
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_kernel_create(&d, &k));
  return k;
}

static cubert_status slow_write(cubert_client *c, cubert_handle *out) {
  static const cubert_param p[] = {{"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0}};
  cubert_kernel *k = host_kernel("t_slow", p, 1, slow_fn);
  cubert_arg a = cubert_arg_buffer(out);
  cubert_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0};
  cubert_status st = cubert_launch(c, k, &cfg, &a, 1);
  cubert_kernel_release(k);
  return st;
}

/* ------------------------------------------------------------ tests */

/* A launch that failed after scribbling over its output is still that
 * output's last writer: a later write on another stream lands after the
 * garbage, never under it. */
START_TEST(test_failed_launch_that_scribbled_orders_a_later_write_on_another_stream) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_stream a = 0, b = 0;
  cb_test_ok(cubert_stream_create(c, &a));
  cb_test_ok(cubert_stream_create(c, &b));
  cubert_handle *x = words(c, 64, 0), *y = words(c, 64, 0);
  cb_test_ok(cubert_sync_device(c));
  cb_test_ok(cubert_client_use_stream(c, a));
  cb_test_ok(slow_write(c, y)); /* stream a is busy for 300 ms */
  rule("launch times=1 fault=scribble:1");
  cb_test_status(fill_u32(c, x, 7), CUBERT_ERR_LAUNCH); /* its garbage lands after the slow work */
  cb_test_ok(cubert_faultinj_clear(env.runtime));
  cb_test_ok(cubert_client_use_stream(c, b));
  uint32_t v = 0x4B4B4B4B;
  cb_test_ok(cubert_handle_fill(c, x, &v, 4)); /* must wait for stream a */
  cb_test_ok(cubert_sync_device(c));
  expect_words(c, x, v);
  cubert_handle_release(x);
  cubert_handle_release(y);
  cb_test_close(&env);
}
END_TEST

/* Words [from, to) of a read of `h` (the read must succeed) are `v`. */
static void expect_words_at(cubert_client *c, const cubert_handle *h, uint64_t from, uint64_t to, uint32_t v) {
  uint64_t size = cubert_handle_size_in_use(h);
  uint32_t *w = malloc(size ? size : 4);
  cb_test_ok(cubert_handle_read(c, h, w, size));
  for (uint64_t i = from; i < to; i++)
    ck_assert_msg(w[i] == v, "word %llu is 0x%08x, expected 0x%08x", (unsigned long long)i, w[i], v);
  free(w);
}

/* A repair that ends exactly where the tainted range ends leaves nothing
 * behind: reads across that end succeed, and a refusal never names an
 * empty range. */
START_TEST(test_repair_ending_where_the_taint_ends_leaves_no_empty_range) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *x = words(c, 128, 3), *mid = NULL, *across = NULL, *tail = NULL;
  cb_test_ok(cubert_handle_slice(x, 128, 256, &mid));    /* bytes 128..256 */
  cb_test_ok(cubert_handle_slice(x, 192, 192, &across)); /* bytes 192..320 */
  cb_test_ok(cubert_handle_slice(x, 160, 0, &tail));     /* bytes 160..512 */
  rule("launch times=1 fault=fail");
  cb_test_status(fill_u32(c, mid, 9), CUBERT_ERR_LAUNCH);
  cb_test_ok(cubert_faultinj_clear(env.runtime));
  /* the second half repaired first, up to the taint's end: [128,192) stays
   * tainted */
  cubert_handle *left = NULL, *right = NULL;
  cb_test_ok(cubert_handle_slice(mid, 0, 64, &left));
  cb_test_ok(cubert_handle_slice(mid, 64, 0, &right));
  uint32_t v = 0x55555555;
  cb_test_ok(cubert_handle_fill(c, right, &v, 4));
  expect_words_at(c, across, 0, 16, v);
  expect_words_at(c, across, 16, 32, 3);
  /* a refusal across the end names exactly the tainted bytes */
  uint8_t buf[352];
  cb_test_status(cubert_handle_read(c, tail, buf, sizeof buf), CUBERT_ERR_TAINTED);
  cubert_error *e = cubert_last_error();
  ck_assert_uint_eq(cubert_error_failure_count(e), 1);
  uint64_t s0 = 0, s1 = 0;
  ck_assert_ptr_nonnull(cubert_error_failure(e, 0, &s0, &s1));
  ck_assert_uint_eq(s0, 160);
  ck_assert_uint_eq(s1, 192);
  cubert_error_release(e);
  cb_test_ok(cubert_handle_fill(c, left, &v, 4)); /* repair the rest, exactly to its end */
  expect_words_at(c, x, 32, 64, v);
  expect_words_at(c, x, 64, 128, 3);
  cubert_handle_release(left);
  cubert_handle_release(right);
  cubert_handle_release(tail);
  cubert_handle_release(across);
  cubert_handle_release(mid);
  cubert_handle_release(x);
  cb_test_close(&env);
}
END_TEST

/* Rule 8, once per stream: an asynchronous failure is reported by a sync of
 * the stream its work ran on (and of the device), once; a sync of another
 * stream neither reports nor clears it. */
START_TEST(test_async_failure_is_reported_once_by_its_own_streams_sync) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *x = words(c, 64, 1); /* the thread's stream first: streams 1..b are all */
  cubert_stream a = 0, b = 0;
  cb_test_ok(cubert_stream_create(c, &a));
  cb_test_ok(cubert_stream_create(c, &b));
  cb_test_ok(cubert_sync_device(c));
  cb_test_ok(cubert_client_use_stream(c, b));
  rule("launch times=1 fault=async");
  cb_test_ok(fill_u32(c, x, 2)); /* fails when it runs, on stream b */
  cb_test_ok(cubert_faultinj_clear(env.runtime));
  const cubert_failure *f = NULL;
  /* a read on stream a waits for b's write: it finds the failure (rule 8) */
  cb_test_ok(cubert_client_use_stream(c, a));
  uint8_t buf[256];
  cb_test_status(cubert_handle_read(c, x, buf, sizeof buf), CUBERT_ERR_TAINTED);
  f = first_failure();
  /* every other stream syncs clean, before and after */
  for (cubert_stream t = 1; t <= b; t++)
    if (t != b) cb_test_ok(cubert_sync_stream(c, t));
  cb_test_status(cubert_sync_stream(c, b), CUBERT_ERR_LAUNCH);
  cubert_error *e = cubert_last_error();
  ck_assert_uint_eq(cubert_error_failure_count(e), 1);
  ck_assert_uint_eq(cubert_failure_id(cubert_error_failure(e, 0, NULL, NULL)), cubert_failure_id(f));
  cubert_error_release(e);
  cb_test_ok(cubert_sync_stream(c, b)); /* reported once */
  cb_test_ok(cubert_sync_device(c));
  for (cubert_stream t = 1; t <= b; t++) cb_test_ok(cubert_sync_stream(c, t));
  cubert_failure_release(f);
  cubert_handle_release(x);
  cb_test_close(&env);
}
END_TEST

/* Each link of a chain names the failure it was passed on from, and every
 * link the same root. */
START_TEST(test_grandchild_failure_names_its_parent_and_the_root) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *x = words(c, 16, 1), *y = words(c, 16, 2), *z = words(c, 16, 3), *w = words(c, 16, 4);
  taint_by_failed_fill(&env, c, x);
  cb_test_status(copy_u32(c, x, y), CUBERT_ERR_TAINTED);
  cb_test_status(copy_u32(c, y, z), CUBERT_ERR_TAINTED);
  cb_test_status(copy_u32(c, z, w), CUBERT_ERR_TAINTED);
  const cubert_failure *chain[4];
  cubert_handle *h[4] = {x, y, z, w};
  uint8_t buf[64];
  for (int i = 0; i < 4; i++) {
    cb_test_status(cubert_handle_read(c, h[i], buf, sizeof buf), CUBERT_ERR_TAINTED);
    chain[i] = first_failure();
  }
  ck_assert_uint_eq(cubert_failure_parent_id(chain[0]), 0);
  for (int i = 1; i < 4; i++) {
    ck_assert_msg(cubert_failure_parent_id(chain[i]) == cubert_failure_id(chain[i - 1]),
                  "link %d names parent #%llu, not #%llu", i,
                  (unsigned long long)cubert_failure_parent_id(chain[i]),
                  (unsigned long long)cubert_failure_id(chain[i - 1]));
    ck_assert_ptr_eq(cubert_failure_root(chain[i]), chain[0]);
    ck_assert_str_eq(cubert_failure_message(chain[i]), cubert_failure_message(chain[0]));
    uint64_t dropped = 1;
    ck_assert_uint_eq(cubert_failure_skip_count(chain[i], &dropped), (size_t)i);
    ck_assert_uint_eq(dropped, 0);
  }
  for (int i = 0; i < 4; i++) {
    cubert_failure_release(chain[i]);
    cubert_handle_release(h[i]);
  }
  cb_test_close(&env);
}
END_TEST

/* Stream order means something on the owning device only: a peer's launch
 * on a stream the owner does not have leaves the owner's order alone, and
 * the owner keeps working on that memory. */
START_TEST(test_peer_work_stays_out_of_the_owners_stream_order) {
  cb_test_env env;
  if (!open_host(_i, 2, &env)) return;
  cubert_client *c0 = env.clients[0], *c1 = env.clients[1];
  cubert_handle *x = words(c0, 64, 1), *y = words(c1, 64, 2);
  cb_test_ok(cubert_handle_share(c0, x));
  cb_test_ok(cubert_sync_device(c0));
  uint32_t owner_writer = x->alloc->last_writer;
  cubert_stream s = 0;
  for (int i = 0; i < 6; i++) cb_test_ok(cubert_stream_create(c1, &s)); /* the peer has many more */
  cb_test_ok(cubert_client_use_stream(c1, s));
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_builtin_kernel(CUBERT_BUILTIN_COPY_PEER_WRITE, &k));
  uint64_t n = 64;
  cubert_arg a[3] = {cubert_arg_buffer(y), cubert_arg_peer(x), cubert_arg_scalar(&n, 8)};
  cubert_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  cb_test_ok(cubert_launch(c1, k, &cfg, a, 3));
  cb_test_ok(cubert_sync_device(c1));
  ck_assert_uint_eq(x->alloc->last_writer, owner_writer); /* the peer's stream id means nothing here */
  expect_words(c0, x, 2);
  uint32_t v = 9;
  cb_test_ok(cubert_handle_fill(c0, x, &v, 4));
  expect_words(c0, x, 9);
  cubert_kernel_release(k);
  cubert_handle_release(x);
  cubert_handle_release(y);
  cb_test_close(&env);
}
END_TEST

/* Freed memory drops its ledger and with it its references to failures: a
 * failure no allocation carries any more is held only by who retained it. */
START_TEST(test_freed_memory_lets_go_of_its_failures) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *x = words(c, 64, 1), *y = words(c, 64, 1);
  cb_test_ok(cubert_handle_share(c, y)); /* a shared one keeps its ledger in its cell */
  rule("launch times=2 fault=fail");
  cb_test_status(fill_u32(c, x, 5), CUBERT_ERR_LAUNCH);
  const cubert_failure *fx = first_failure();
  cb_test_status(fill_u32(c, y, 5), CUBERT_ERR_LAUNCH);
  const cubert_failure *fy = first_failure();
  cb_test_ok(cubert_faultinj_clear(env.runtime));
  cubert_handle *none = NULL;
  cb_test_status(cubert_handle_slice(x, 1000, 0, &none), CUBERT_ERR_OUT_OF_RANGE); /* replaces the last error */
  cubert_handle_release(x);
  cubert_handle_release(y);
  cb_test_ok(cubert_sync_device(c));
  cb_test_ok(cubert_memory_cleanup(c));
  ck_assert_uint_eq(atomic_load(&fx->refs), 1);
  ck_assert_uint_eq(atomic_load(&fy->refs), 1);
  cubert_failure_release(fx);
  cubert_failure_release(fy);
  cb_test_close(&env);
}
END_TEST

/* Rule 8: an asynchronous failure the device cannot recover from (sticky)
 * marks the whole device lost when a sync finds it; other devices keep
 * working. */
START_TEST(test_sticky_async_failure_marks_the_device_lost) {
  cb_test_env env;
  if (!open_host(_i, 2, &env)) return;
  cubert_client *c0 = env.clients[0], *c1 = env.clients[1];
  cubert_handle *x = words(c0, 64, 1), *y = words(c1, 64, 1);
  cb_test_ok(cubert_sync_device(c0));
  rule("launch device=0 times=1 fault=async-device-lost");
  cb_test_ok(fill_u32(c0, x, 2)); /* accepted: the loss surfaces at the fence */
  cb_test_ok(cubert_faultinj_clear(env.runtime));
  cb_test_status(cubert_sync_device(c0), CUBERT_ERR_DEVICE_LOST);
  const cubert_failure *f = first_failure();
  ck_assert_ptr_nonnull(strstr(cubert_failure_message(f), "injected fault"));
  cubert_device_info info;
  cb_test_ok(cubert_runtime_device_info(env.runtime, cubert_client_device(c0), &info));
  ck_assert_msg(info.lost, "the device is not marked lost");
  uint8_t buf[256];
  cb_test_status(cubert_handle_read(c0, x, buf, sizeof buf), CUBERT_ERR_DEVICE_LOST);
  cb_test_status(fill_u32(c0, x, 3), CUBERT_ERR_DEVICE_LOST);
  cb_test_ok(cubert_runtime_device_info(env.runtime, cubert_client_device(c1), &info));
  ck_assert(!info.lost);
  cb_test_ok(fill_u32(c1, y, 4));
  expect_words(c1, y, 4);
  cubert_failure_release(f);
  cubert_handle_release(x);
  cubert_handle_release(y);
  cb_test_close(&env);
}
END_TEST

/* Many tainted ranges: a refused read's message names the first few and
 * counts the rest (its size does not grow with them), the error lists them
 * all, and cubert_handle_tainted_range walks them all, clipped to the view
 * and to where the walk starts. */
START_TEST(test_many_tainted_ranges_bounded_message_and_walk) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  enum { N = 40 };
  cubert_handle *x = words(c, N * 32, 1); /* N pieces of 128 bytes */
  rule("launch fault=fail");
  for (int i = 0; i < N; i++) { /* taint bytes 64..128 of each piece */
    cubert_handle *s = NULL;
    cb_test_ok(cubert_handle_slice(x, (uint64_t)i * 128 + 64, (uint64_t)(N - 1 - i) * 128, &s));
    cb_test_status(fill_u32(c, s, 9), CUBERT_ERR_LAUNCH);
    cubert_handle_release(s);
  }
  cb_test_ok(cubert_faultinj_clear(env.runtime));
  cb_test_status(cubert_handle_check(c, x), CUBERT_ERR_TAINTED);
  cubert_error *e = cubert_last_error();
  ck_assert_uint_eq(cubert_error_failure_count(e), N);
  const char *msg = cubert_error_message(e);
  ck_assert_msg(strstr(msg, "40 tainted ranges:") != NULL, "%s", msg);
  ck_assert_msg(strstr(msg, "... and 32 more ranges") != NULL, "%s", msg);
  ck_assert_msg(strstr(msg, "bytes 960..1024") != NULL, "%s", msg);  /* the 8th is named */
  ck_assert_msg(strstr(msg, "bytes 1088..1152") == NULL, "%s", msg); /* the 9th is not */
  size_t len = strlen(msg);
  cubert_error_release(e);
  /* the walk: every range, in order */
  uint64_t from = 0, s0 = 0, s1 = 0;
  const cubert_failure *f = NULL;
  int n = 0;
  for (;;) {
    cb_test_ok(cubert_handle_tainted_range(c, x, from, &s0, &s1, &f));
    if (!f) break;
    ck_assert_uint_eq(s0, (uint64_t)n * 128 + 64);
    ck_assert_uint_eq(s1, (uint64_t)n * 128 + 128);
    cubert_failure_release(f);
    from = s1;
    n++;
  }
  ck_assert_int_eq(n, N);
  ck_assert_uint_eq(s0, 0);
  ck_assert_uint_eq(s1, 0);
  /* clipped to `from` and to a view */
  cb_test_ok(cubert_handle_tainted_range(c, x, 100, &s0, &s1, &f));
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(s0, 100);
  ck_assert_uint_eq(s1, 128);
  cubert_failure_release(f);
  cubert_handle *v = NULL;
  cb_test_ok(cubert_handle_slice(x, 200, 40, &v)); /* bytes 200..N*128-40 */
  cb_test_ok(cubert_handle_tainted_range(c, v, 0, &s0, &s1, &f));
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(s0, 200);
  ck_assert_uint_eq(s1, 256);
  cubert_failure_release(f);
  cb_test_ok(cubert_handle_tainted_range(c, v, N * 128 - 60, &s0, &s1, &f));
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(s0, N * 128 - 60);
  ck_assert_uint_eq(s1, N * 128 - 40); /* the last range, clipped to the view */
  cubert_failure_release(f);
  cb_test_ok(cubert_handle_tainted_range(c, v, N * 128 - 40, NULL, NULL, &f));
  ck_assert_ptr_null(f);
  cb_test_status(cubert_handle_tainted_range(c, v, 0, NULL, NULL, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  cubert_handle_release(v);
  /* ten times the ranges: the same message length, give or take digits */
  cubert_handle *y = words(c, N * 320, 1);
  rule("launch fault=fail");
  for (int i = 0; i < N * 10; i++) {
    cubert_handle *s = NULL;
    cb_test_ok(cubert_handle_slice(y, (uint64_t)i * 128 + 64, (uint64_t)(N * 10 - 1 - i) * 128, &s));
    cb_test_status(fill_u32(c, s, 9), CUBERT_ERR_LAUNCH);
    cubert_handle_release(s);
  }
  cb_test_ok(cubert_faultinj_clear(env.runtime));
  cb_test_status(cubert_handle_check(c, y), CUBERT_ERR_TAINTED);
  e = cubert_last_error();
  ck_assert_uint_eq(cubert_error_failure_count(e), N * 10);
  ck_assert_uint_le(strlen(cubert_error_message(e)), len + 64);
  cubert_error_release(e);
  cubert_handle_release(y);
  cubert_handle_release(x);
  cb_test_close(&env);
}
END_TEST

/* Records of work that failed at enqueue are reclaimed without a program
 * sync: past the 65,536 pending records where the runtime waits for the
 * device, it reaps up to every stream's newest work (issue 15: those
 * records stayed, and every later call paid a wait and a walk of them all).
 * Each failure was the failed call's own error: the sync has none to add. */
START_TEST(test_records_of_failed_calls_are_reclaimed_without_a_sync) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *x = words(c, 16, 1);
  cb_test_ok(cubert_sync(c));
  rule("launch fault=fail");
  size_t most = 0;
  for (uint32_t i = 0; i < 70000; i++) {
    cb_test_status(fill_u32(c, x, 5), CUBERT_ERR_LAUNCH);
    pthread_mutex_lock(&c->dev->lock);
    if (c->dev->npending > most) most = c->dev->npending;
    size_t now = c->dev->npending;
    pthread_mutex_unlock(&c->dev->lock);
    if (i == 69999) ck_assert_msg(now < 8192, "%zu records held after 70000 failed calls", now);
  }
  ck_assert_uint_le(most, 1u << 16);
  cb_test_ok(cubert_faultinj_clear(env.runtime));
  cb_test_ok(cubert_sync(c));
  cb_test_ok(fill_u32(c, x, 6));
  expect_words(c, x, 6);
  cubert_handle_release(x);
  cb_test_close(&env);
}
END_TEST

/* A write skipped at enqueue is newer than an earlier write still running on
 * another stream: when that earlier write fails asynchronously, the skipped
 * write's taint stays, even if a sync of its own stream let go of its record
 * in between (found by a campaign: program 1759 of seed 20261129). */
START_TEST(test_async_failure_does_not_override_a_later_skipped_write) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_stream a = 0, b = 0;
  cb_test_ok(cubert_stream_create(c, &a));
  cb_test_ok(cubert_stream_create(c, &b));
  cubert_handle *in = words(c, 64, 0), *out = words(c, 64, 0);
  cb_test_ok(cubert_sync_device(c));
  /* stream a: a slow write of `out` that fails when it runs (#2) */
  cb_test_ok(cubert_client_use_stream(c, a));
  rule("launch kernel=t_slow times=1 fault=async");
  cb_test_ok(slow_write(c, out));
  cb_test_ok(cubert_faultinj_clear(env.runtime));
  /* stream b: `in` fails at enqueue (#1); a copy in -> out is skipped */
  cb_test_ok(cubert_client_use_stream(c, b));
  rule("launch times=1 fault=fail");
  cb_test_status(fill_u32(c, in, 5), CUBERT_ERR_LAUNCH);
  cb_test_ok(cubert_faultinj_clear(env.runtime));
  const cubert_failure *root = first_failure();
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_builtin_kernel(CUBERT_BUILTIN_COPY_U32, &k));
  uint64_t n = 64;
  cubert_arg args[3] = {cubert_arg_buffer(in), cubert_arg_buffer(out), cubert_arg_scalar(&n, 8)};
  cubert_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  ck_assert_int_ne(cubert_launch(c, k, &cfg, args, 3), CUBERT_OK);
  cubert_kernel_release(k);
  (void)cubert_sync_stream(c, b); /* stream b's records may go: the slow write still runs */
  (void)cubert_sync_device(c);    /* the async failure surfaces */
  uint8_t buf[256];
  cb_test_status(cubert_handle_read(c, out, buf, sizeof buf), CUBERT_ERR_TAINTED);
  const cubert_failure *f = first_failure();
  ck_assert_msg(cubert_failure_id(cubert_failure_root(f)) == cubert_failure_id(root),
                "out's failure has root #%llu (%s), expected the skipped copy's root #%llu",
                (unsigned long long)cubert_failure_id(cubert_failure_root(f)),
                cubert_failure_message(cubert_failure_root(f)), (unsigned long long)cubert_failure_id(root));
  cubert_failure_release(f);
  cubert_failure_release(root);
  cubert_handle_release(in);
  cubert_handle_release(out);
  cb_test_close(&env);
}
END_TEST

/* The usual launch is checked, bound and marshalled in one pass under the
 * device lock (runtime/launch.c); at an argument it does not take (here a
 * tainted input, after two plain buffers were bound) it gives up and the
 * general path handles the launch. Giving up leaves no trace: the skipped
 * launch has the one work number that follows the last one, and once its
 * record is reaped the buffers the pass had bound hold no binding. */
static cubert_status nothing_fn(const cubert_host_launch *l, char *msg, size_t cap) {
  (void)l;
  (void)msg;
  (void)cap;
  return CUBERT_OK;
}

START_TEST(test_launch_giving_up_its_one_pass_leaves_no_trace) {
  cb_test_env env;
  if (!open_host(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *in = words(c, 16, 1), *out = words(c, 16, 2), *bad = words(c, 16, 3), *out2 = words(c, 16, 4);
  taint_by_failed_fill(&env, c, bad);
  cb_test_ok(cubert_sync(c));
  static const cubert_param p[] = {{"in", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0},
                                   {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0},
                                   {"bad", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0},
                                   {"out2", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0}};
  cubert_kernel *k = host_kernel("t_four", p, 4, nothing_fn);
  cubert_arg a[4] = {cubert_arg_buffer(in), cubert_arg_buffer(out), cubert_arg_buffer(bad), cubert_arg_buffer(out2)};
  cubert_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0};
  pthread_mutex_lock(&c->dev->lock);
  uint64_t before = c->dev->next_work;
  pthread_mutex_unlock(&c->dev->lock);
  cb_test_status(cubert_launch(c, k, &cfg, a, 4), CUBERT_ERR_TAINTED);
  uint8_t buf[64];
  cb_test_status(cubert_handle_read(c, out, buf, sizeof buf), CUBERT_ERR_TAINTED);
  const cubert_failure *f = first_failure();
  cubert_skip skip;
  ck_assert_uint_eq(cubert_failure_skip_count(f, NULL), 1);
  ck_assert(cubert_failure_skip(f, 0, &skip));
  ck_assert_str_eq(skip.kernel, "t_four");
  ck_assert_str_eq(skip.input, "bad");
  ck_assert_msg(skip.sequence == before + 1, "the skipped launch is work %llu, the work before it %llu",
                (unsigned long long)skip.sequence, (unsigned long long)before);
  cubert_failure_release(f);
  cb_test_ok(cubert_sync(c));
  cubert_handle *h[2] = {in, out};
  for (int i = 0; i < 2; i++) {
    cb_alloc *al = h[i]->alloc;
    pthread_mutex_lock(&c->dev->lock);
    uint64_t local = al->local_binds, binds = atomic_load(&al->refs) & 0xffffffffu;
    pthread_mutex_unlock(&c->dev->lock);
    ck_assert_msg(local == 0 && binds == 0, "%s: %llu local bindings, %llu binding references after the sync",
                  i ? "out" : "in", (unsigned long long)local, (unsigned long long)binds);
  }
  /* and the plain launch after it takes the one pass and runs */
  cubert_arg ok[4] = {cubert_arg_buffer(in), cubert_arg_buffer(out2), cubert_arg_buffer(in), cubert_arg_buffer(out2)};
  cb_test_ok(cubert_launch(c, k, &cfg, ok, 4));
  cb_test_ok(cubert_sync(c));
  cubert_kernel_release(k);
  cubert_handle_release(in);
  cubert_handle_release(out);
  cubert_handle_release(bad);
  cubert_handle_release(out2);
  cb_test_close(&env);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("failures_edges");
  TCase *tc = tcase_create("edges");
  tcase_set_timeout(tc, 120);
  cb_test_add_backend_loop(tc, test_failed_launch_that_scribbled_orders_a_later_write_on_another_stream);
  cb_test_add_backend_loop(tc, test_repair_ending_where_the_taint_ends_leaves_no_empty_range);
  cb_test_add_backend_loop(tc, test_async_failure_is_reported_once_by_its_own_streams_sync);
  cb_test_add_backend_loop(tc, test_grandchild_failure_names_its_parent_and_the_root);
  cb_test_add_backend_loop(tc, test_peer_work_stays_out_of_the_owners_stream_order);
  cb_test_add_backend_loop(tc, test_freed_memory_lets_go_of_its_failures);
  cb_test_add_backend_loop(tc, test_sticky_async_failure_marks_the_device_lost);
  cb_test_add_backend_loop(tc, test_many_tainted_ranges_bounded_message_and_walk);
  cb_test_add_backend_loop(tc, test_records_of_failed_calls_are_reclaimed_without_a_sync);
  cb_test_add_backend_loop(tc, test_async_failure_does_not_override_a_later_skipped_write);
  cb_test_add_backend_loop(tc, test_launch_giving_up_its_one_pass_leaves_no_trace);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return cb_test_run(suite()); }
