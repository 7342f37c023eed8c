/* tests/test_failures.c: the failure-accounting rules of DESIGN.md, one test
 * (at least) per rule, on every backend that can run them.
 *
 * Failing work is made three ways: a kernel whose code cannot be loaded (a
 * broken source and no host function: fails at enqueue on every backend), a
 * host kernel that returns an error when it runs (an asynchronous failure,
 * host backend), and peers through shared memory. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cubert/cubert.h"
#include "tests/testutil.h"

/* ------------------------------------------------------------ kernels */

static atomic_int runs; /* host kernel executions, to prove a kernel did not run */

static cubert_status copy_fn(const cubert_host_launch *l, char *msg, size_t cap) {
  (void)msg;
  (void)cap;
  atomic_fetch_add(&runs, 1);
  uint64_t n = l->sizes[0] < l->sizes[1] ? l->sizes[0] : l->sizes[1];
  memcpy(l->args[1], l->args[0], n);
  return CUBERT_OK;
}

static cubert_status fill_fn(const cubert_host_launch *l, char *msg, size_t cap) {
  (void)msg;
  (void)cap;
  atomic_fetch_add(&runs, 1);
  memset(l->args[0], *(const uint8_t *)l->args[1], l->sizes[0]);
  return CUBERT_OK;
}

static cubert_status fail_fn(const cubert_host_launch *l, char *msg, size_t cap) {
  atomic_fetch_add(&runs, 1);
  memset(l->args[0], 0xEE, l->sizes[0] / 2); /* garbage over part of the output */
  snprintf(msg, cap, "boom: the kernel hit a bad value");
  return CUBERT_ERR_LAUNCH;
}

static const char copy_src[] =
    "extern \"C\" __global__ void t_copy(const unsigned char *in, unsigned char *out, "
    "unsigned long long n) {\n"
    "  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;\n"
    "       i += (unsigned long long)gridDim.x * blockDim.x) out[i] = in[i];\n"
    "}\n";
static const char broken_src[] = "extern \"C\" __global__ void t_broken( { this is not code";

static const cubert_param copy_params[] = {{"in", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0},
                                           {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0},
                                           {"n", CUBERT_PARAM_SCALAR, 0, 8}};
static const cubert_param broken_params[] = {{"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0}};
static const cubert_param peer_read_params[] = {
    {"in", CUBERT_PARAM_PEER_BUFFER, CUBERT_ACCESS_READ, 0},
    {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0}};
static const cubert_param peer_fill_params[] = {
    {"out", CUBERT_PARAM_PEER_BUFFER, CUBERT_ACCESS_WRITE, 0}, {"value", CUBERT_PARAM_SCALAR, 0, 1}};
static const cubert_param peer_broken_params[] = {
    {"out", CUBERT_PARAM_PEER_BUFFER, CUBERT_ACCESS_WRITE, 0}};

static cubert_kernel *make(const char *name, const cubert_param *p, uint32_t n, cubert_host_fn fn,
                           const char *src) {
  cubert_kernel_desc d = {0};
  d.name = name;
  if (src == copy_src) d.entry = "t_copy";
  d.params = p;
  d.nparams = n;
  d.host_fn = fn;
  d.source = src;
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_kernel_create(&d, &k));
  return k;
}

static const cubert_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0};

static cubert_status run_copy(cubert_client *c, const char *name, const cubert_handle *in,
                              cubert_handle *out) {
  cubert_kernel *k = make(name, copy_params, 3, copy_fn, copy_src);
  uint64_t n = cubert_handle_size_in_use(out);
  cubert_arg a[3] = {cubert_arg_buffer(in), cubert_arg_buffer(out), cubert_arg_scalar(&n, 8)};
  cubert_status st = cubert_launch(c, k, &one, a, 3);
  cubert_kernel_release(k);
  return st;
}

/* A launch that fails at enqueue on every backend: its code cannot load. */
static cubert_status run_broken(cubert_client *c, const char *name, cubert_handle *out) {
  cubert_kernel *k = make(name, broken_params, 1, NULL, broken_src);
  cubert_arg a[1] = {cubert_arg_buffer(out)};
  cubert_status st = cubert_launch(c, k, &one, a, 1);
  cubert_kernel_release(k);
  return st;
}

/* A launch that fails when it runs (host backend). */
static cubert_status run_async_fail(cubert_client *c, cubert_handle *out) {
  cubert_kernel *k = make("t_async_fail", broken_params, 1, fail_fn, NULL);
  cubert_arg a[1] = {cubert_arg_buffer(out)};
  cubert_status st = cubert_launch(c, k, &one, a, 1);
  cubert_kernel_release(k);
  return st;
}

static cubert_handle *filled(cubert_client *c, uint64_t size, uint8_t v) {
  uint8_t *buf = malloc(size);
  memset(buf, v, size);
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_create(c, buf, size, &h));
  free(buf);
  return h;
}

/* Reads `h`; returns the status and keeps the last error in *err. */
static cubert_status read_all(cubert_client *c, const cubert_handle *h, uint8_t *dst, cubert_error **err) {
  cubert_status st = cubert_handle_read(c, h, dst, cubert_handle_size_in_use(h));
  if (err) *err = st ? cubert_last_error() : NULL;
  return st;
}

static uint64_t last_failure_id(void) {
  cubert_error *e = cubert_last_error();
  const cubert_failure *f = cubert_error_failure(e, 0, NULL, NULL);
  uint64_t id = cubert_failure_id(f);
  cubert_error_release(e);
  return id;
}

static bool is_host(const cb_test_env *env) { return !strcmp(env->backend, "host"); }

/* ------------------------------------------------------------ rule 1 */

START_TEST(test_failed_launch_taints_exactly_its_write_set) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *in = filled(c, 256, 1), *out = filled(c, 256, 2);
  cubert_status st = run_broken(c, "t_broken", out);
  ck_assert_int_ne(st, CUBERT_OK);
  uint64_t id = last_failure_id();
  ck_assert_uint_gt(id, 0);
  uint8_t buf[256];
  cubert_error *e = NULL;
  ck_assert_int_eq(read_all(c, out, buf, &e), CUBERT_ERR_TAINTED);
  ck_assert_uint_eq(cubert_error_failure_count(e), 1);
  uint64_t s0, s1;
  const cubert_failure *f = cubert_error_failure(e, 0, &s0, &s1);
  ck_assert_uint_eq(cubert_failure_id(f), id);
  ck_assert_int_eq(cubert_failure_status(f), st);
  ck_assert_uint_eq(s0, 0);
  ck_assert_uint_eq(s1, 256);
  cubert_origin o;
  cubert_failure_origin(f, &o);
  ck_assert_str_eq(o.kernel, "t_broken");
  ck_assert_int_eq(o.device, cubert_client_device(c));
  ck_assert_ptr_nonnull(strstr(cubert_error_message(e), "t_broken"));
  cubert_error_release(e);
  /* the input was not written: it is still good */
  cb_test_ok(read_all(c, in, buf, NULL));
  ck_assert_uint_eq(buf[17], 1);
  ck_assert_int_eq(cubert_handle_check(c, in), CUBERT_OK);
  ck_assert_int_eq(cubert_handle_check(c, out), CUBERT_ERR_TAINTED);
  cubert_handle_release(in);
  cubert_handle_release(out);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_async_failure_taints_write_set_and_fails_the_wait) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!is_host(&env)) {
    cb_test_skip("no device: asynchronous host kernels run on the host backend only");
    cb_test_close(&env);
    return;
  }
  cubert_client *c = env.clients[0];
  cubert_handle *out = filled(c, 128, 3);
  cb_test_ok(run_async_fail(c, out)); /* enqueued fine; fails when it runs */
  cubert_status st = cubert_sync(c);
  ck_assert_int_eq(st, CUBERT_ERR_LAUNCH);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "boom"));
  /* the sync reported it; the bytes still carry it */
  uint8_t buf[128];
  cubert_error *e = NULL;
  ck_assert_int_eq(read_all(c, out, buf, &e), CUBERT_ERR_TAINTED);
  ck_assert_ptr_nonnull(strstr(cubert_error_message(e), "boom"));
  cubert_error_release(e);
  /* a read that waits for the fence itself sees it too */
  cubert_handle *out2 = filled(c, 128, 3);
  cb_test_ok(run_async_fail(c, out2));
  ck_assert_int_eq(read_all(c, out2, buf, NULL), CUBERT_ERR_TAINTED);
  cubert_handle_release(out);
  cubert_handle_release(out2);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ rule 2 */

START_TEST(test_kernel_with_tainted_input_is_not_run) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *x = filled(c, 64, 0), *y = filled(c, 64, 9);
  ck_assert_int_ne(run_broken(c, "k1", x), CUBERT_OK);
  uint64_t root = last_failure_id();
  int before = atomic_load(&runs);
  cubert_status st = run_copy(c, "k2", x, y);
  ck_assert_int_eq(st, CUBERT_ERR_TAINTED);
  ck_assert_int_eq(atomic_load(&runs), before); /* k2 never ran */
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "`k2` was not run"));
  uint8_t buf[64];
  cubert_error *e = NULL;
  ck_assert_int_eq(read_all(c, y, buf, &e), CUBERT_ERR_TAINTED);
  const cubert_failure *f = cubert_error_failure(e, 0, NULL, NULL);
  ck_assert_uint_ne(cubert_failure_id(f), root); /* a child ... */
  ck_assert_uint_eq(cubert_failure_id(cubert_failure_root(f)), root); /* ... of k1's */
  ck_assert_uint_eq(cubert_failure_parent_id(f), root);
  ck_assert_ptr_nonnull(strstr(cubert_error_message(e), "skipped `k2`: it needed in"));
  ck_assert_ptr_nonnull(strstr(cubert_error_message(e), "k1"));
  cubert_error_release(e);
  cubert_handle_release(x);
  cubert_handle_release(y);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_read_overlapping_several_failures_reports_each) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *all = filled(c, 300, 5), *a = NULL, *b = NULL;
  cb_test_ok(cubert_handle_slice(all, 0, 200, &a));   /* 0..100 */
  cb_test_ok(cubert_handle_slice(all, 200, 0, &b));   /* 200..300 */
  ck_assert_int_ne(run_broken(c, "ka", a), CUBERT_OK);
  uint64_t ida = last_failure_id();
  ck_assert_int_ne(run_broken(c, "kb", b), CUBERT_OK);
  uint64_t idb = last_failure_id();
  uint8_t buf[300];
  cubert_error *e = NULL;
  ck_assert_int_eq(read_all(c, all, buf, &e), CUBERT_ERR_TAINTED);
  ck_assert_uint_eq(cubert_error_failure_count(e), 2);
  uint64_t s0, s1;
  ck_assert_uint_eq(cubert_failure_id(cubert_error_failure(e, 0, &s0, &s1)), ida);
  ck_assert_uint_eq(s0, 0);
  ck_assert_uint_eq(s1, 100);
  ck_assert_uint_eq(cubert_failure_id(cubert_error_failure(e, 1, &s0, &s1)), idb);
  ck_assert_uint_eq(s0, 200);
  ck_assert_uint_eq(s1, 300);
  cubert_error_release(e);
  /* reporting clears nothing */
  ck_assert_int_eq(read_all(c, all, buf, NULL), CUBERT_ERR_TAINTED);
  ck_assert_int_eq(read_all(c, a, buf, NULL), CUBERT_ERR_TAINTED);
  /* the middle was never failed */
  cubert_handle *mid = NULL;
  cb_test_ok(cubert_handle_slice(all, 100, 100, &mid));
  cb_test_ok(read_all(c, mid, buf, NULL));
  ck_assert_uint_eq(buf[0], 5);
  cubert_handle_release(mid);
  cubert_handle_release(a);
  cubert_handle_release(b);
  cubert_handle_release(all);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_copy_from_tainted_source_fails_and_taints_destination) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *x = filled(c, 64, 1), *y = filled(c, 64, 2);
  ck_assert_int_ne(run_broken(c, "kx", x), CUBERT_OK);
  uint64_t root = last_failure_id();
  cb_test_status(cubert_handle_copy(c, x, y), CUBERT_ERR_TAINTED);
  uint8_t buf[64];
  cubert_error *e = NULL;
  ck_assert_int_eq(read_all(c, y, buf, &e), CUBERT_ERR_TAINTED);
  ck_assert_uint_eq(cubert_failure_id(cubert_failure_root(cubert_error_failure(e, 0, NULL, NULL))), root);
  cubert_error_release(e);
  cubert_handle_release(x);
  cubert_handle_release(y);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ rule 3 */

START_TEST(test_success_releases_exactly_what_it_wrote) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *all = filled(c, 1024, 4), *part = NULL;
  ck_assert_int_ne(run_broken(c, "kall", all), CUBERT_OK);
  cb_test_ok(cubert_handle_slice(all, 256, 512, &part)); /* 256..512 */
  uint8_t v[256];
  memset(v, 7, sizeof v);
  cb_test_ok(cubert_handle_write(c, part, v, 256));
  uint8_t buf[1024];
  cb_test_ok(read_all(c, part, buf, NULL));
  ck_assert_uint_eq(buf[0], 7);
  cubert_error *e = NULL;
  ck_assert_int_eq(read_all(c, all, buf, &e), CUBERT_ERR_TAINTED);
  ck_assert_uint_eq(cubert_error_failure_count(e), 2);
  uint64_t s0, s1;
  cubert_error_failure(e, 0, &s0, &s1);
  ck_assert_uint_eq(s0, 0);
  ck_assert_uint_eq(s1, 256);
  cubert_error_failure(e, 1, &s0, &s1);
  ck_assert_uint_eq(s0, 512);
  ck_assert_uint_eq(s1, 1024);
  cubert_error_release(e);
  /* a kernel writing everything releases everything */
  cubert_handle *src = filled(c, 1024, 8);
  cb_test_ok(run_copy(c, "kfix", src, all));
  cb_test_ok(read_all(c, all, buf, NULL));
  ck_assert_uint_eq(buf[1000], 8);
  cubert_handle_release(src);
  cubert_handle_release(part);
  cubert_handle_release(all);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_tainting_is_set_not_add) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *x = filled(c, 512, 0);
  uint64_t last = 0;
  for (int i = 0; i < 100; i++) {
    ck_assert_int_ne(run_broken(c, "kloop", x), CUBERT_OK);
    uint64_t id = last_failure_id();
    ck_assert_uint_gt(id, last); /* ids grow, never reused */
    last = id;
  }
  uint8_t buf[512];
  cubert_error *e = NULL;
  ck_assert_int_eq(read_all(c, x, buf, &e), CUBERT_ERR_TAINTED);
  ck_assert_uint_eq(cubert_error_failure_count(e), 1); /* one range, the newest failure */
  ck_assert_uint_eq(cubert_failure_id(cubert_error_failure(e, 0, NULL, NULL)), last);
  cubert_error_release(e);
  cubert_handle_release(x);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_freed_memory_drops_taint_and_new_memory_inherits_nothing) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  for (int round = 0; round < 20; round++) {
    cubert_handle *x = filled(c, 4096, 1);
    ck_assert_int_ne(run_broken(c, "kfree", x), CUBERT_OK);
    ck_assert_int_eq(cubert_handle_check(c, x), CUBERT_ERR_TAINTED);
    cubert_handle_release(x);
    cubert_handle *y = NULL;
    cb_test_ok(cubert_handle_empty(c, 4096, &y)); /* likely the same bytes again */
    cb_test_ok(cubert_handle_check(c, y));
    uint8_t buf[4096];
    cb_test_ok(read_all(c, y, buf, NULL));
    cubert_handle_release(y);
  }
  cb_test_close(&env);
}
END_TEST

START_TEST(test_skip_chain_is_bounded) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *h[21];
  for (int i = 0; i < 21; i++) h[i] = filled(c, 32, (uint8_t)i);
  ck_assert_int_ne(run_broken(c, "k0", h[0]), CUBERT_OK);
  for (int i = 1; i < 21; i++) {
    char name[16];
    snprintf(name, sizeof name, "k%d", i);
    ck_assert_int_eq(run_copy(c, name, h[i - 1], h[i]), CUBERT_ERR_TAINTED);
  }
  uint8_t buf[32];
  cubert_error *e = NULL;
  ck_assert_int_eq(read_all(c, h[20], buf, &e), CUBERT_ERR_TAINTED);
  const cubert_failure *f = cubert_error_failure(e, 0, NULL, NULL);
  uint64_t dropped = 0;
  size_t n = cubert_failure_skip_count(f, &dropped);
  ck_assert_uint_le(n, 8);
  ck_assert_uint_eq(n + dropped, 20);
  cubert_skip sk;
  ck_assert(cubert_failure_skip(f, n - 1, &sk));
  ck_assert_str_eq(sk.kernel, "k20"); /* the newest link is kept */
  ck_assert_ptr_nonnull(strstr(cubert_error_message(e), "earlier links dropped"));
  ck_assert_str_eq(cubert_failure_message(f), cubert_failure_message(cubert_failure_root(f)));
  cubert_error_release(e);
  for (int i = 0; i < 21; i++) cubert_handle_release(h[i]);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ rule 4 */

START_TEST(test_sibling_claims_of_one_allocation_are_independent) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *all = filled(c, 1024, 6), *t1 = NULL, *t2 = NULL;
  cb_test_ok(cubert_handle_slice(all, 0, 512, &t1));
  cb_test_ok(cubert_handle_slice(all, 512, 0, &t2));
  cubert_binding *b1 = NULL, *b2 = NULL;
  cb_test_ok(cubert_handle_bind(t1, &b1));
  cb_test_ok(cubert_handle_bind(t2, &b2));
  cubert_claim_key k1 = cubert_binding_claim_key(b1), k2 = cubert_binding_claim_key(b2);
  ck_assert_uint_eq(k1.memory, k2.memory);
  ck_assert(k1.start != k2.start || k1.end != k2.end);
  ck_assert_int_ne(run_broken(c, "ksib", t1), CUBERT_OK);
  uint8_t buf[1024];
  ck_assert_int_eq(read_all(c, t1, buf, NULL), CUBERT_ERR_TAINTED);
  cb_test_ok(read_all(c, t2, buf, NULL));
  ck_assert_uint_eq(buf[0], 6);
  /* releasing one sibling leaves the other's claim as it was */
  uint8_t v[512];
  memset(v, 1, sizeof v);
  cb_test_ok(cubert_handle_write(c, t2, v, 512));
  ck_assert_int_eq(read_all(c, t1, buf, NULL), CUBERT_ERR_TAINTED);
  cubert_binding_release(b1);
  cubert_binding_release(b2);
  cubert_handle_release(t1);
  cubert_handle_release(t2);
  cubert_handle_release(all);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ rules 5-7 */

START_TEST(test_owner_failure_stops_peer_kernel_and_taints_its_outputs) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  cubert_client *c0 = env.clients[0], *c1 = env.clients[1];
  cubert_handle *x = filled(c0, 256, 1), *y = filled(c1, 256, 2), *z = filled(c1, 256, 3);
  cubert_status st = cubert_handle_share(c0, x);
  if (st == CUBERT_ERR_PEER_ACCESS) {
    cb_test_skip("no device: peer access refused between devices 0 and 1 (%s)", cubert_last_error_message());
    goto done;
  }
  cb_test_ok(st);
  cb_test_ok(cubert_sync(c0)); /* nothing orders devices: the caller does */
  ck_assert_int_ne(run_broken(c0, "k1", x), CUBERT_OK); /* owner fails to write x */
  uint64_t root = last_failure_id();
  int before = atomic_load(&runs);
  cubert_kernel *k2 = make("k2", peer_read_params, 2, copy_fn, NULL);
  cubert_arg a[2] = {cubert_arg_peer(x), cubert_arg_buffer(y)};
  cb_test_status(cubert_launch(c1, k2, &one, a, 2), CUBERT_ERR_TAINTED);
  ck_assert_int_eq(atomic_load(&runs), before); /* not run on stale bytes */
  /* three kernels, two devices: k3 on device 1 reads y */
  ck_assert_int_eq(run_copy(c1, "k3", y, z), CUBERT_ERR_TAINTED);
  uint8_t buf[256];
  cubert_error *e = NULL;
  ck_assert_int_eq(read_all(c1, z, buf, &e), CUBERT_ERR_TAINTED);
  const cubert_failure *f = cubert_error_failure(e, 0, NULL, NULL);
  ck_assert_uint_eq(cubert_failure_id(cubert_failure_root(f)), root);
  cubert_origin o;
  cubert_failure_origin(cubert_failure_root(f), &o);
  ck_assert_int_eq(o.device, cubert_client_device(c0));
  ck_assert_str_eq(o.kernel, "k1");
  uint64_t dropped;
  ck_assert_uint_eq(cubert_failure_skip_count(f, &dropped), 2);
  cubert_skip sk;
  ck_assert(cubert_failure_skip(f, 0, &sk));
  ck_assert_str_eq(sk.kernel, "k2");
  ck_assert_int_eq(sk.device, cubert_client_device(c1));
  ck_assert(cubert_failure_skip(f, 1, &sk));
  ck_assert_str_eq(sk.kernel, "k3");
  ck_assert_ptr_nonnull(strstr(cubert_error_message(e), "`k2`"));
  cubert_error_release(e);
  cubert_kernel_release(k2);
done:
  cubert_handle_release(x);
  cubert_handle_release(y);
  cubert_handle_release(z);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_peer_failure_taints_owner_and_a_later_write_repairs) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  cubert_client *c0 = env.clients[0], *c1 = env.clients[1];
  cubert_handle *x = filled(c0, 512, 1), *half = NULL;
  cubert_status st = cubert_handle_share(c0, x);
  if (st == CUBERT_ERR_PEER_ACCESS) {
    cb_test_skip("no device: peer access refused between devices 0 and 1 (%s)", cubert_last_error_message());
    cubert_handle_release(x);
    cb_test_close(&env);
    return;
  }
  cb_test_ok(st);
  cb_test_ok(cubert_sync(c0)); /* nothing orders devices: the caller does */
  cb_test_ok(cubert_handle_slice(x, 256, 0, &half)); /* bytes 256..512 */
  cubert_kernel *bad = make("kpeer", peer_broken_params, 1, NULL, broken_src);
  cubert_arg a[1] = {cubert_arg_peer(half)};
  ck_assert_int_ne(cubert_launch(c1, bad, &one, a, 1), CUBERT_OK);
  uint64_t root = last_failure_id();
  uint8_t buf[512];
  cubert_error *e = NULL;
  ck_assert_int_eq(read_all(c0, x, buf, &e), CUBERT_ERR_TAINTED); /* on the owner */
  uint64_t s0, s1;
  const cubert_failure *f = cubert_error_failure(e, 0, &s0, &s1);
  ck_assert_uint_eq(cubert_failure_id(f), root);
  ck_assert_uint_eq(s0, 256); /* range-exact */
  ck_assert_uint_eq(s1, 512);
  cubert_origin o;
  cubert_failure_origin(f, &o);
  ck_assert_int_eq(o.device, cubert_client_device(c1));
  cubert_error_release(e);
  cubert_handle *lo = NULL;
  cb_test_ok(cubert_handle_slice(x, 0, 256, &lo));
  cb_test_ok(read_all(c0, lo, buf, NULL)); /* the other half is fine */
  if (is_host(&env)) {
    /* repair: the peer writes it successfully */
    cubert_kernel *good = make("kpeer_fill", peer_fill_params, 2, fill_fn, NULL);
    uint8_t v = 0x5A;
    cubert_arg g[2] = {cubert_arg_peer(half), cubert_arg_scalar(&v, 1)};
    cb_test_ok(cubert_launch(c1, good, &one, g, 2));
    cb_test_ok(cubert_sync(c1));
    cb_test_ok(read_all(c0, x, buf, NULL));
    ck_assert_uint_eq(buf[300], 0x5A);
    ck_assert_uint_eq(buf[10], 1);
    cubert_kernel_release(good);
  } else {
    uint8_t v[256];
    memset(v, 0x5A, sizeof v);
    cb_test_ok(cubert_handle_write(c0, half, v, 256)); /* the owner repairs */
    cb_test_ok(read_all(c0, x, buf, NULL));
  }
  cubert_kernel_release(bad);
  cubert_handle_release(lo);
  cubert_handle_release(half);
  cubert_handle_release(x);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_peer_binding_refused_when_never_shared) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  cubert_client *c0 = env.clients[0], *c1 = env.clients[1];
  cubert_handle *x = filled(c0, 64, 1), *y = filled(c1, 64, 2);
  cubert_kernel *k = make("kpr", peer_read_params, 2, copy_fn, NULL);
  cubert_arg a[2] = {cubert_arg_peer(x), cubert_arg_buffer(y)};
  cb_test_status(cubert_launch(c1, k, &one, a, 2), CUBERT_ERR_NOT_SHARED);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "never shared"));
  /* a plain buffer parameter never takes memory of another device */
  uint64_t n = 64;
  cubert_arg b[3] = {cubert_arg_buffer(x), cubert_arg_buffer(y), cubert_arg_scalar(&n, 8)};
  cubert_kernel *kc = make("kc", copy_params, 3, copy_fn, NULL);
  cb_test_status(cubert_launch(c1, kc, &one, b, 3), CUBERT_ERR_WRONG_DEVICE);
  ck_assert(!cubert_handle_is_shared(x));
  ck_assert_uint_eq(cubert_handle_peer_address(x), 0);
  cubert_kernel_release(k);
  cubert_kernel_release(kc);
  cubert_handle_release(x);
  cubert_handle_release(y);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_refused_pair_names_both_devices) {
  if (strcmp(cb_test_backend_name(_i), "host")) {
    cb_test_skip("no device: denying chosen pairs is a host-backend setting");
    return;
  }
  cubert_runtime_options o;
  cb_test_options("host", &o);
  o.host_peer_deny = "1-0";
  cb_test_env env;
  if (!cb_test_open_with(_i, &o, 3, &env)) return;
  cubert_client *c0 = env.clients[0], *c1 = env.clients[1], *c2 = env.clients[2];
  cubert_handle *x = filled(c0, 64, 1);
  cb_test_ok(cubert_sync(c0));
  cb_test_status(cubert_handle_share(c0, x), CUBERT_ERR_PEER_ACCESS);
  const char *m = cubert_last_error_message();
  ck_assert_ptr_nonnull(strstr(m, "device 1"));
  ck_assert_ptr_nonnull(strstr(m, "device 0"));
  ck_assert(cubert_handle_is_shared(x)); /* the other pairs stay usable */
  cubert_kernel *k = make("kpr", peer_read_params, 2, copy_fn, NULL);
  cubert_handle *y1 = filled(c1, 64, 0), *y2 = filled(c2, 64, 0);
  cubert_arg a1[2] = {cubert_arg_peer(x), cubert_arg_buffer(y1)};
  cb_test_status(cubert_launch(c1, k, &one, a1, 2), CUBERT_ERR_PEER_ACCESS);
  cubert_arg a2[2] = {cubert_arg_peer(x), cubert_arg_buffer(y2)};
  cb_test_ok(cubert_launch(c2, k, &one, a2, 2));
  uint8_t buf[64];
  cb_test_ok(read_all(c2, y2, buf, NULL));
  ck_assert_uint_eq(buf[5], 1);
  ck_assert_uint_eq(cubert_handle_peer_address(x), (uint64_t)cubert_handle_peer_address(x));
  cubert_kernel_release(k);
  cubert_handle_release(x);
  cubert_handle_release(y1);
  cubert_handle_release(y2);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ rule 8 */

static cubert_status slow_copy_fn(const cubert_host_launch *l, char *msg, size_t cap) {
  struct timespec ts = {0, 2000000};
  nanosleep(&ts, NULL);
  return copy_fn(l, msg, cap);
}

START_TEST(test_async_failure_replays_in_order) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!is_host(&env)) {
    cb_test_skip("no device: asynchronous host kernels run on the host backend only");
    cb_test_close(&env);
    return;
  }
  cubert_client *c = env.clients[0];
  cubert_handle *x = filled(c, 64, 1), *y = filled(c, 64, 2), *w = filled(c, 64, 3),
                *good = filled(c, 64, 4), *z = filled(c, 64, 5);
  cb_test_ok(run_async_fail(c, x));           /* x fails when it runs */
  cubert_kernel *slow = make("k_read_x", copy_params, 3, slow_copy_fn, NULL);
  uint64_t n = 64;
  cubert_arg a[3] = {cubert_arg_buffer(x), cubert_arg_buffer(y), cubert_arg_scalar(&n, 8)};
  cb_test_ok(cubert_launch(c, slow, &one, a, 3)); /* x looked clean at enqueue: y gets garbage */
  cb_test_ok(run_copy(c, "k_rewrite_x", good, x)); /* x written again, after */
  cb_test_ok(run_copy(c, "k_unrelated", w, z));
  ck_assert_int_eq(cubert_sync(c), CUBERT_ERR_LAUNCH);
  uint8_t buf[64];
  cubert_error *e = NULL;
  ck_assert_int_eq(read_all(c, y, buf, &e), CUBERT_ERR_TAINTED); /* passed on */
  ck_assert_ptr_nonnull(strstr(cubert_error_message(e), "k_read_x"));
  cubert_error_release(e);
  cb_test_ok(read_all(c, x, buf, NULL)); /* the newer write stands */
  ck_assert_uint_eq(buf[0], 4);
  cb_test_ok(read_all(c, z, buf, NULL));
  ck_assert_uint_eq(buf[0], 3);
  cubert_kernel_release(slow);
  cubert_handle_release(x);
  cubert_handle_release(y);
  cubert_handle_release(w);
  cubert_handle_release(good);
  cubert_handle_release(z);
  cb_test_close(&env);
}
END_TEST


/* A launch that fails at enqueue on stream A still counts as the last writer
 * of its outputs; a later write on stream A must therefore still wait for a
 * slow writer of the same bytes on stream B (found by a campaign). */
static cubert_status slow_fill_fn(const cubert_host_launch *l, char *msg, size_t cap) {
  (void)msg;
  (void)cap;
  struct timespec ts = {0, 50000000};
  nanosleep(&ts, NULL);
  memset(l->args[0], 0xC2, l->sizes[0]);
  return CUBERT_OK;
}

START_TEST(test_failed_launch_keeps_stream_order) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!is_host(&env)) {
    cb_test_skip("no device: this test's slow kernel is a host function");
    cb_test_close(&env);
    return;
  }
  cubert_client *c = env.clients[0];
  cubert_stream a = 0, b = 0;
  cb_test_ok(cubert_stream_create(c, &a));
  cb_test_ok(cubert_stream_create(c, &b));
  cubert_handle *x = filled(c, 64, 0);
  cb_test_ok(cubert_sync_device(c));
  cb_test_ok(cubert_client_use_stream(c, b));
  cubert_kernel *slow = make("k_slow_fill", broken_params, 1, slow_fill_fn, NULL);
  cubert_arg ax = cubert_arg_buffer(x);
  cb_test_ok(cubert_launch(c, slow, &one, &ax, 1)); /* stream B writes x in 50 ms */
  cb_test_ok(cubert_client_use_stream(c, a));
  ck_assert_int_ne(run_broken(c, "k_broken", x), CUBERT_OK); /* stream A: fails at enqueue */
  uint8_t v[64];
  memset(v, 0x4B, sizeof v);
  cb_test_ok(cubert_handle_fill(c, x, v, 1)); /* stream A: must land after B's write */
  cb_test_ok(cubert_sync_device(c));
  uint8_t buf[64];
  cb_test_ok(read_all(c, x, buf, NULL));
  ck_assert_uint_eq(buf[0], 0x4B);
  ck_assert_uint_eq(buf[63], 0x4B);
  cubert_kernel_release(slow);
  cubert_handle_release(x);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ rule 9 */

START_TEST(test_zero_byte_views_still_check) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  cubert_client *c0 = env.clients[0], *c1 = env.clients[1];
  cubert_handle *x = filled(c0, 64, 1), *empty = NULL, *empty2 = NULL;
  cb_test_ok(cubert_handle_slice(x, 32, 32, &empty));
  cb_test_ok(cubert_handle_slice(x, 0, 64, &empty2));
  ck_assert_uint_eq(cubert_handle_size_in_use(empty), 0);
  uint8_t b = 0;
  cb_test_ok(cubert_handle_read(c0, empty, NULL, 0));
  cb_test_ok(cubert_handle_write(c0, empty, NULL, 0));
  cb_test_ok(cubert_handle_fill(c0, empty, &b, 1));
  cb_test_ok(cubert_handle_copy(c0, empty, empty2));
  cb_test_status(cubert_handle_read(c1, empty, NULL, 0), CUBERT_ERR_WRONG_DEVICE);
  cb_test_status(cubert_handle_write(c1, empty, NULL, 0), CUBERT_ERR_WRONG_DEVICE);
  cb_test_status(cubert_handle_fill(c1, empty, &b, 1), CUBERT_ERR_WRONG_DEVICE);
  cb_test_status(cubert_handle_copy(c1, empty, empty2), CUBERT_ERR_WRONG_DEVICE);
  cb_test_status(cubert_handle_read(c0, empty, &b, 1), CUBERT_ERR_OUT_OF_RANGE);
  cubert_handle_release(empty);
  cubert_handle_release(empty2);
  cubert_handle_release(x);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ threads */

typedef struct worker {
  cubert_client *c;
  cubert_client *peer;
  cubert_handle *shared; /* memory of `peer`, shared */
  int id;
  int bad_reads; /* stale bytes handed out: must stay 0 */
} worker;

static void *worker_main(void *arg) {
  worker *w = arg;
  uint8_t buf[128];
  for (int i = 0; i < 100; i++) {
    cubert_handle *x = filled(w->c, 128, (uint8_t)(w->id + 1)), *y = filled(w->c, 128, 0);
    bool fail = (i % 3) == 0;
    if (fail)
      run_broken(w->c, "kt_broken", x);
    cubert_status st = run_copy(w->c, "kt_copy", x, y);
    cubert_status rs = cubert_handle_read(w->c, y, buf, 128);
    if (fail) {
      if (st != CUBERT_ERR_TAINTED || rs != CUBERT_ERR_TAINTED) w->bad_reads++;
    } else if (st != CUBERT_OK || rs != CUBERT_OK || buf[77] != (uint8_t)(w->id + 1)) {
      w->bad_reads++;
    }
    if (w->shared && (i % 10) == 0) {
      cubert_kernel *k = make("kt_peer", peer_read_params, 2, copy_fn, NULL);
      cubert_arg a[2] = {cubert_arg_peer(w->shared), cubert_arg_buffer(y)};
      cubert_launch(w->c, k, &one, a, 2); /* races the owner: either outcome is allowed */
      cubert_kernel_release(k);
    }
    cubert_handle_release(x);
    cubert_handle_release(y);
  }
  cubert_sync(w->c);
  return NULL;
}

START_TEST(test_concurrent_launches_keep_the_account) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!is_host(&env)) {
    cb_test_skip("no device: this test's kernels are host functions");
    cb_test_close(&env);
    return;
  }
  enum { T = 8 };
  pthread_t th[T];
  worker w[T];
  cubert_handle *shared = NULL;
  if (env.nclients > 1) {
    shared = filled(env.clients[1], 128, 9);
    cubert_handle_share(env.clients[1], shared);
    cb_test_ok(cubert_sync(env.clients[1]));
  }
  for (int t = 0; t < T; t++) {
    w[t] = (worker){env.clients[t % env.nclients], NULL, NULL, t, 0};
    if (shared && t % env.nclients != 1) w[t].shared = shared;
    pthread_create(&th[t], NULL, worker_main, &w[t]);
  }
  for (int t = 0; t < T; t++) {
    pthread_join(th[t], NULL);
    ck_assert_int_eq(w[t].bad_reads, 0);
  }
  cubert_handle_release(shared);
  cb_test_close(&env);
}
END_TEST

typedef struct handoff {
  cubert_client *c;
  cubert_kernel *k;
  cubert_handle *mem;
  cubert_status st;
  bool peer;
} handoff;

/* Producer: data then a release store of the flag; consumer: acquire load
 * of the flag, then the data. The memory is device 1's, shared. */
static cubert_status producer_fn(const cubert_host_launch *l, char *msg, size_t cap) {
  (void)msg;
  (void)cap;
  uint32_t *data = l->args[0];
  _Atomic uint32_t *flag = (_Atomic uint32_t *)(data + 63);
  for (int i = 0; i < 63; i++) data[i] = 1000u + (uint32_t)i;
  atomic_store_explicit(flag, 1, memory_order_release);
  return CUBERT_OK;
}

static cubert_status consumer_fn(const cubert_host_launch *l, char *msg, size_t cap) {
  uint32_t *data = l->args[0];
  _Atomic uint32_t *flag = (_Atomic uint32_t *)(data + 63);
  for (long spin = 0; atomic_load_explicit(flag, memory_order_acquire) == 0; spin++) {
    if (spin > 200000000L) {
      snprintf(msg, cap, "hand-off flag never set");
      return CUBERT_ERR_TIMEOUT;
    }
  }
  for (int i = 0; i < 63; i++)
    if (data[i] != 1000u + (uint32_t)i) {
      snprintf(msg, cap, "data[%d] = %u after the hand-off", i, data[i]);
      return CUBERT_ERR_LAUNCH;
    }
  data[0] = 7; /* consumed */
  return CUBERT_OK;
}

/* The same on GPUs: the producer (device 0) writes device 1's memory through
 * its peer address, fences system-wide and raises the flag with a
 * system-scope atomic; the consumer (device 1), already running, polls the
 * flag with system-scope atomics (bounded: 0xdead when it never comes),
 * fences, and checks the data (0xbad when wrong, 7 when right). */
static const char handoff_src[] =
    "extern \"C\" __global__ void handoff_producer(unsigned int *data)\n"
    "{\n"
    "  for (int i = 0; i < 63; i++) data[i] = 1000u + (unsigned int)i;\n"
    "  __threadfence_system();\n"
    "  atomicAdd_system(&data[63], 1u);\n"
    "}\n"
    "extern \"C\" __global__ void handoff_consumer(unsigned int *data)\n"
    "{\n"
    "  unsigned long long spins = 0;\n"
    "  while (atomicAdd_system(&data[63], 0u) == 0u)\n"
    "    if (++spins > 50000000ull) { data[0] = 0xdeadu; return; }\n"
    "  __threadfence_system();\n"
    "  volatile unsigned int *v = data;\n"
    "  for (int i = 0; i < 63; i++)\n"
    "    if (v[i] != 1000u + (unsigned int)i) { data[0] = 0xbadu; return; }\n"
    "  data[0] = 7u;\n"
    "}\n";

START_TEST(test_handoff_through_system_scope_atomics) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  cubert_client *c0 = env.clients[0], *c1 = env.clients[1];
  uint32_t zero[64] = {0};
  cubert_handle *mem = NULL;
  /* hand-off memory is fine-grained: on AMD, plain device memory is
   * coherent only at synchronisation points */
  cb_test_ok(cubert_handle_empty_with(c1, sizeof zero, CUBERT_MEMORY_FINE_GRAINED, &mem));
  cb_test_ok(cubert_handle_write(c1, mem, zero, sizeof zero));
  cb_test_ok(cubert_handle_share(c1, mem));
  cb_test_ok(cubert_sync(c1));
  cubert_param pp = {"mem", CUBERT_PARAM_PEER_BUFFER, CUBERT_ACCESS_READ_WRITE, 0};
  cubert_param pb = {"mem", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ_WRITE, 0};
  cubert_kernel *cons = make("handoff_consumer", &pb, 1, consumer_fn, handoff_src);
  cubert_kernel *prod = make("handoff_producer", &pp, 1, producer_fn, handoff_src);
  cubert_arg a = cubert_arg_buffer(mem), p = cubert_arg_peer(mem);
  cb_test_ok(cubert_launch(c1, cons, &one, &a, 1)); /* waits on device 1 ... */
  cb_test_ok(cubert_launch(c0, prod, &one, &p, 1)); /* ... for device 0 */
  cb_test_ok(cubert_sync(c0));
  cb_test_ok(cubert_sync(c1));
  uint32_t out[64];
  cb_test_ok(cubert_handle_read(c1, mem, out, sizeof out));
  ck_assert_msg(out[0] == 7, "the consumer saw 0x%x (0xdead: the flag never came; 0xbad: wrong data)", out[0]);
  ck_assert_uint_eq(out[62], 1062);
  cubert_kernel_release(cons);
  cubert_kernel_release(prod);
  cubert_handle_release(mem);
  cb_test_close(&env);
}
END_TEST

/* The same hand-off inside one device (the one-GPU machine runs it): one
 * launch of two blocks on fine-grained memory, block 0 the producer and block
 * 1 the consumer, both resident at once. cubert orders conflicting work on
 * one device's memory (a hand-off between two launches on one device would
 * wait for itself), so inside one launch is where a single GPU can show the
 * coherence that a hand-off through system-scope atomics needs. */
static const char handoff_pair_src[] =
    "extern \"C\" __global__ void handoff_pair(unsigned int *data)\n"
    "{\n"
    "  if (threadIdx.x != 0) return;\n"
    "  if (blockIdx.x == 0) {\n"
    "    for (int i = 1; i < 63; i++) data[i] = 1000u + (unsigned int)i;\n"
    "    __threadfence_system();\n"
    "    atomicAdd_system(&data[63], 1u);\n"
    "    return;\n"
    "  }\n"
    "  unsigned long long spins = 0;\n"
    "  while (atomicAdd_system(&data[63], 0u) == 0u)\n"
    "    if (++spins > 50000000ull) { data[0] = 0xdeadu; return; }\n"
    "  __threadfence_system();\n"
    "  volatile unsigned int *v = data;\n"
    "  for (int i = 1; i < 63; i++)\n"
    "    if (v[i] != 1000u + (unsigned int)i) { data[0] = 0xbadu; return; }\n"
    "  data[0] = 7u;\n"
    "}\n";

static cubert_status pair_fn(const cubert_host_launch *l, char *msg, size_t cap) {
  uint32_t *data = l->args[0];
  _Atomic uint32_t *flag = (_Atomic uint32_t *)(data + 63);
  for (int i = 1; i < 63; i++) data[i] = 1000u + (uint32_t)i;
  atomic_store_explicit(flag, 1, memory_order_release);
  if (atomic_load_explicit(flag, memory_order_acquire) == 0) {
    snprintf(msg, cap, "hand-off flag never set");
    return CUBERT_ERR_TIMEOUT;
  }
  data[0] = 7;
  return CUBERT_OK;
}

START_TEST(test_handoff_between_blocks_of_one_device) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  uint32_t zero[64] = {0};
  cubert_handle *mem = NULL;
  cb_test_ok(cubert_handle_empty_with(c, sizeof zero, CUBERT_MEMORY_FINE_GRAINED, &mem));
  cb_test_ok(cubert_handle_write(c, mem, zero, sizeof zero));
  cubert_param pb = {"mem", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ_WRITE, 0};
  cubert_kernel *k = make("handoff_pair", &pb, 1, pair_fn, handoff_pair_src);
  cubert_arg a = cubert_arg_buffer(mem);
  const cubert_launch_config two = {{2, 1, 1}, {1, 1, 1}, 0};
  cb_test_ok(cubert_launch(c, k, &two, &a, 1));
  cb_test_ok(cubert_sync(c));
  uint32_t out[64];
  cb_test_ok(cubert_handle_read(c, mem, out, sizeof out));
  ck_assert_msg(out[0] == 7, "the consumer saw 0x%x (0xdead: the flag never came; 0xbad: wrong data)", out[0]);
  ck_assert_uint_eq(out[62], 1062);
  ck_assert_uint_eq(out[63], 1);
  cubert_kernel_release(k);
  cubert_handle_release(mem);
  cb_test_close(&env);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("failures");
  TCase *tc = tcase_create("rules");
  tcase_set_timeout(tc, 120);
  cb_test_add_backend_loop(tc, test_failed_launch_taints_exactly_its_write_set);
  cb_test_add_backend_loop(tc, test_async_failure_taints_write_set_and_fails_the_wait);
  cb_test_add_backend_loop(tc, test_kernel_with_tainted_input_is_not_run);
  cb_test_add_backend_loop(tc, test_read_overlapping_several_failures_reports_each);
  cb_test_add_backend_loop(tc, test_copy_from_tainted_source_fails_and_taints_destination);
  cb_test_add_backend_loop(tc, test_success_releases_exactly_what_it_wrote);
  cb_test_add_backend_loop(tc, test_tainting_is_set_not_add);
  cb_test_add_backend_loop(tc, test_freed_memory_drops_taint_and_new_memory_inherits_nothing);
  cb_test_add_backend_loop(tc, test_skip_chain_is_bounded);
  cb_test_add_backend_loop(tc, test_sibling_claims_of_one_allocation_are_independent);
  cb_test_add_backend_loop(tc, test_owner_failure_stops_peer_kernel_and_taints_its_outputs);
  cb_test_add_backend_loop(tc, test_peer_failure_taints_owner_and_a_later_write_repairs);
  cb_test_add_backend_loop(tc, test_peer_binding_refused_when_never_shared);
  cb_test_add_backend_loop(tc, test_refused_pair_names_both_devices);
  cb_test_add_backend_loop(tc, test_async_failure_replays_in_order);
  cb_test_add_backend_loop(tc, test_failed_launch_keeps_stream_order);
  cb_test_add_backend_loop(tc, test_zero_byte_views_still_check);
  cb_test_add_backend_loop(tc, test_concurrent_launches_keep_the_account);
  cb_test_add_backend_loop(tc, test_handoff_through_system_scope_atomics);
  cb_test_add_backend_loop(tc, test_handoff_between_blocks_of_one_device);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return cb_test_run(suite()); }
