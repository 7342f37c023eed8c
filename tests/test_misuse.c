/* tests/test_misuse.c: the no-crash promise from outside. Every public call
 * of cubert.h, kernels.h and topology.h (faultinj.h has its own cases, in the
 * fault-injection suites; backend.h is for backend authors) is made with
 * NULL for each pointer argument, with objects of another runtime, client
 * and device, with objects whose runtime is gone, with sizes and offsets at
 * the edges, and runtimes are created from every kind of bad environment.
 * Each case asserts the status, that the thread's last error message names
 * what was wrong, and that nothing else changed: no failure was made (no
 * taint), no memory was taken or given back, no handle became tainted.
 *
 * Run under AddressSanitizer and UndefinedBehaviorSanitizer in CI (the asan
 * stage runs every ctest test): a use after free, a double free or a leak
 * fails the test there even where the plain build cannot see it.
 *
 * Also the regression tests of issue 11's findings 1-3 and 7-11, each named
 * after what it proves. Host backend only: misuse is refused before any
 * backend is asked, and the host backend is always built. */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cubert/cubert.h"
#include "cubert/topology.h"
#include "tests/testutil.h"

/* Ids handed out to failures so far (runtime/failure.c): a call that made
 * no failure leaves it where it was. */
uint64_t cb_failure_last_id(void);

#define HOST_DEVICES 2
#define HANDLE_BYTES 4096

/* ------------------------------------------------------------ fixture */

typedef struct world {
  cubert_runtime *rt;
  cubert_client *c[HOST_DEVICES];
  cubert_handle *h[HOST_DEVICES]; /* HANDLE_BYTES of pattern on each device */
} world;

static void world_open(world *w) {
  memset(w, 0, sizeof *w);
  cubert_runtime_options o;
  cb_test_options("host", &o);
  o.host_devices = HOST_DEVICES;
  o.no_faultinj = true;
  cb_test_ok(cubert_runtime_create(&o, &w->rt));
  uint8_t buf[HANDLE_BYTES];
  for (int d = 0; d < HOST_DEVICES; d++) {
    cb_test_ok(cubert_client_create(w->rt, d, &w->c[d]));
    cb_test_ok(cubert_handle_create(w->c[d], cb_test_pattern(buf, sizeof buf, (uint64_t)d + 1),
                                    sizeof buf, &w->h[d]));
  }
}

/* Releases the world (its handles too, tainted or not). */
static void world_close(world *w) {
  for (int d = 0; d < HOST_DEVICES; d++) {
    cubert_handle_release(w->h[d]);
    cubert_client_destroy(w->c[d]);
  }
  cubert_runtime_destroy(w->rt);
  memset(w, 0, sizeof *w);
}

/* What a refused call must leave as it was. */
typedef struct snapshot {
  uint64_t failures;
  uint64_t in_use[HOST_DEVICES];
  size_t pools[HOST_DEVICES];
} snapshot;

static snapshot take(const world *w) {
  snapshot s;
  memset(&s, 0, sizeof s);
  s.failures = cb_failure_last_id();
  for (int d = 0; w && d < HOST_DEVICES; d++) {
    cubert_pool_usage u[16];
    size_t n = 0;
    cb_test_ok(cubert_memory_usage(w->c[d], u, 16, &n));
    s.pools[d] = n;
    for (size_t i = 0; i < n && i < 16; i++) s.in_use[d] += u[i].in_use;
  }
  return s;
}

/* Every handle of the world still reads back its pattern: nothing tainted,
 * nothing written. */
static void expect_world_intact(const world *w) {
  uint8_t buf[HANDLE_BYTES];
  for (int d = 0; d < HOST_DEVICES; d++) {
    cb_test_ok(cubert_handle_check(w->c[d], w->h[d]));
    cb_test_ok(cubert_handle_read(w->c[d], w->h[d], buf, sizeof buf));
    ck_assert_uint_eq(cb_test_pattern_mismatch(buf, sizeof buf, (uint64_t)d + 1), sizeof buf);
  }
}

static void expect_unchanged(const world *w, const snapshot *before, const char *call) {
  snapshot now = take(w);
  ck_assert_msg(now.failures == before->failures, "%s made %llu failure(s)", call,
                (unsigned long long)(now.failures - before->failures));
  for (int d = 0; w && d < HOST_DEVICES; d++)
    ck_assert_msg(now.in_use[d] == before->in_use[d], "%s moved device %d's memory in use: %llu -> %llu",
                  call, d, (unsigned long long)before->in_use[d], (unsigned long long)now.in_use[d]);
}

/* `call` returns `status`, the message names `needle`, nothing changed. */
#define REFUSED(w, call, status, needle)                                                       \
  do {                                                                                         \
    snapshot before_ = take(w);                                                                \
    cubert_status st_ = (call);                                                                \
    ck_assert_msg(st_ == (status), "%s returned %s, expected %s (%s)", #call,                   \
                  cubert_status_name(st_), cubert_status_name(status), cubert_last_error_message()); \
    ck_assert_msg(strstr(cubert_last_error_message(), (needle)) != NULL,                        \
                  "%s: message \"%s\" does not name \"%s\"", #call, cubert_last_error_message(), \
                  (needle));                                                                   \
    cubert_error *e_ = cubert_last_error();                                                    \
    ck_assert_msg(e_ && cubert_error_status(e_) == (status), "%s: last error not recorded", #call); \
    cubert_error_release(e_);                                                                  \
    expect_unchanged(w, &before_, #call);                                                      \
  } while (0)

#define EXPECT_MESSAGE(needle)                                                               \
  ck_assert_msg(strstr(cubert_last_error_message(), (needle)) != NULL,                        \
                "message \"%s\" does not name \"%s\"", cubert_last_error_message(), (needle))

/* ------------------------------------------------------------ kernels */

static atomic_int runs;

static cubert_status copy_fn(const cubert_host_launch *l, char *msg, size_t cap) {
  (void)msg;
  (void)cap;
  atomic_fetch_add(&runs, 1);
  uint64_t n = l->sizes[0] < l->sizes[1] ? l->sizes[0] : l->sizes[1];
  memmove(l->args[1], l->args[0], n);
  return CUBERT_OK;
}

static cubert_status lost_fn(const cubert_host_launch *l, char *msg, size_t cap) {
  (void)l;
  atomic_fetch_add(&runs, 1);
  snprintf(msg, cap, "the simulated device fell off the bus");
  return CUBERT_ERR_DEVICE_LOST;
}

static const cubert_param copy_params[] = {{"in", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0},
                                           {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0}};
static const cubert_param peer_params[] = {{"in", CUBERT_PARAM_PEER_BUFFER, CUBERT_ACCESS_READ, 0},
                                           {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0}};
static const cubert_param out_params[] = {{"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0}};

static cubert_kernel *make(const char *name, const cubert_param *p, uint32_t n, cubert_host_fn fn) {
  cubert_kernel_desc d = {0};
  d.name = name;
  d.params = p;
  d.nparams = n;
  d.host_fn = fn;
  if (!fn) d.source = "extern \"C\" __global__ void k( { not code"; /* never loads on host */
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_kernel_create(&d, &k));
  return k;
}

static const cubert_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0};

/* Launches a one-output kernel `name` (host function `fn`, NULL: one whose
 * code never loads) on `out` with client `c`. */
static cubert_status launch_out(cubert_client *c, const char *name, cubert_host_fn fn,
                                const cubert_handle *out) {
  cubert_kernel *k = make(name, out_params, 1, fn);
  cubert_arg args[1] = {cubert_arg_buffer(out)};
  cubert_status st = cubert_launch(c, k, &one, args, 1);
  cubert_kernel_release(k);
  return st;
}

/* ------------------------------------------------------------ finding 1 */

START_TEST(test_peer_copy_across_runtimes_is_refused_before_anything_is_queued) {
  world a, b;
  world_open(&a);
  world_open(&b);
  /* clients of two runtimes */
  REFUSED(&b, cubert_handle_copy_peer(a.c[0], a.h[0], b.c[1], b.h[1]), CUBERT_ERR_INVALID_ARGUMENT,
          "two runtimes");
  expect_world_intact(&a);
  expect_world_intact(&b);
  /* clients of one runtime, a handle of the other */
  REFUSED(&b, cubert_handle_copy_peer(b.c[0], a.h[0], b.c[1], b.h[1]), CUBERT_ERR_WRONG_DEVICE,
          "another runtime");
  REFUSED(&b, cubert_handle_copy_peer(b.c[0], b.h[0], b.c[1], a.h[1]), CUBERT_ERR_WRONG_DEVICE,
          "another runtime");
  expect_world_intact(&a);
  expect_world_intact(&b);
  /* the first runtime goes first: nothing of it is left in the second
   * (this was a use after free in cb_alloc_unref under ASan) */
  world_close(&a);
  expect_world_intact(&b);
  world_close(&b);
}
END_TEST

/* ------------------------------------------------------------ finding 2 */

START_TEST(test_objects_outliving_their_runtime_are_safe_to_use_and_release) {
  world w, other;
  world_open(&w);
  world_open(&other);
  cubert_handle *h = NULL, *slice = NULL;
  cubert_binding *bind = NULL, *bind2 = NULL;
  cubert_weak *weak = NULL, *weak2 = NULL;
  cubert_timer *t0 = NULL, *t1 = NULL;
  cubert_handle *fine = NULL; /* a driver allocation of its own, outside the pools */
  cb_test_ok(cubert_handle_empty(w.c[0], 256, &h));
  cb_test_ok(cubert_handle_empty_with(w.c[1], 512, CUBERT_MEMORY_FINE_GRAINED, &fine));
  cb_test_ok(cubert_handle_share(w.c[0], h));
  cb_test_ok(cubert_handle_slice(h, 16, 16, &slice));
  cb_test_ok(cubert_handle_bind(h, &bind));
  cb_test_ok(cubert_handle_downgrade(h, &weak));
  cb_test_ok(cubert_binding_downgrade(bind, &weak2));
  cb_test_ok(cubert_timer_record(w.c[0], &t0));
  cb_test_ok(cubert_timer_record(w.c[0], &t1));
  uint64_t id = cubert_handle_memory_id(h);
  world_close(&w); /* clients gone; handles, bindings, weaks and timers live on */

  /* what needs no device still answers */
  ck_assert_uint_eq(cubert_handle_size(h), 256);
  ck_assert_uint_eq(cubert_handle_size_in_use(slice), 224);
  ck_assert_uint_eq(cubert_handle_memory_id(h), id);
  ck_assert_int_eq(cubert_handle_device(h), 0);
  ck_assert_int_eq(cubert_handle_overlap(h, slice), CUBERT_OVERLAP_PARTIAL);
  ck_assert_uint_eq(cubert_binding_claim_key(bind).memory, id);
  cubert_handle *clone = cubert_handle_clone(slice);
  ck_assert_ptr_nonnull(clone);
  cb_test_ok(cubert_handle_bind(clone, &bind2));
  /* what needs the device is refused, naming why */
  cubert_binding *up = NULL;
  REFUSED(&other, cubert_weak_upgrade(weak, &up), CUBERT_ERR_EXPIRED, "destroyed");
  ck_assert_ptr_null(up);
  REFUSED(&other, cubert_weak_upgrade(weak2, &up), CUBERT_ERR_EXPIRED, "destroyed");
  double ms = -1;
  REFUSED(&other, cubert_timer_elapsed(t0, t1, &ms), CUBERT_ERR_EXPIRED, "destroyed");
  ck_assert(ms == -1);
  uint8_t buf[224];
  REFUSED(&other, cubert_handle_read(other.c[0], slice, buf, sizeof buf), CUBERT_ERR_EXPIRED,
          "destroyed");
  REFUSED(&other, cubert_handle_check(other.c[1], h), CUBERT_ERR_EXPIRED, "destroyed");
  REFUSED(&other, cubert_handle_copy(other.c[0], slice, other.h[0]), CUBERT_ERR_EXPIRED, "destroyed");
  REFUSED(&other, cubert_handle_share(other.c[0], h), CUBERT_ERR_EXPIRED, "destroyed");
  cubert_kernel *k = make("m_peer", peer_params, 2, copy_fn);
  cubert_arg args[2] = {cubert_arg_peer(h), cubert_arg_buffer(other.h[1])};
  REFUSED(&other, cubert_launch(other.c[1], k, &one, args, 2), CUBERT_ERR_EXPIRED, "destroyed");
  cubert_kernel_release(k);
  expect_world_intact(&other);
  /* releasing everything, in any order, is safe (ASan proves it) */
  ck_assert_uint_eq(cubert_handle_size(fine), 512);
  cubert_handle_release(fine);
  cubert_timer_release(t1);
  cubert_handle_release(h);
  cubert_weak_release(weak);
  cubert_binding_release(bind);
  cubert_handle_release(slice);
  cubert_binding_release(bind2);
  cubert_handle_release(clone);
  cubert_weak_release(weak2);
  cubert_timer_release(t0);
  world_close(&other);
}
END_TEST

/* ------------------------------------------------------------ finding 3 */

/* Environment variables a runtime reads. */
static const char *const runtime_env[] = {"CUBERT_BACKENDS",       "CUBERT_HOST_DEVICES",
                                          "CUBERT_HOST_MEMORY",    "CUBERT_HOST_PEER_DENY",
                                          "CUBERT_FAULTS",         "CUBERT_HOST_NODE",
                                          "CUBERT_TOPOLOGY"};

static void clear_env(void) {
  for (size_t i = 0; i < sizeof runtime_env / sizeof runtime_env[0]; i++) unsetenv(runtime_env[i]);
}

static char *temp_file(const char *contents) {
  char *path = strdup("/tmp/cubert-misuse-XXXXXX");
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  size_t n = strlen(contents);
  ck_assert_int_eq(write(fd, contents, n), (ssize_t)n);
  close(fd);
  return path;
}

/* Creating a runtime with `name`=`value` fails, names the variable, leaves
 * *runtime NULL and (under ASan) leaks nothing. */
static void expect_create_refused(const char *name, const char *value, const char *needle) {
  clear_env();
  setenv(name, value, 1);
  /* the host backend's settings matter where it opens: on a machine with a
   * GPU the default runtime does not open it (docs/processes.md) */
  if (strncmp(name, "CUBERT_HOST_", 12) == 0) setenv("CUBERT_BACKENDS", "host", 1);
  cubert_runtime *rt = NULL;
  cubert_status st = cubert_runtime_create(NULL, &rt);
  ck_assert_msg(st != CUBERT_OK, "%s=%s was accepted", name, value);
  ck_assert_ptr_null(rt);
  ck_assert_msg(strstr(cubert_last_error_message(), name) != NULL, "%s=%s: message \"%s\" does not name it",
                name, value, cubert_last_error_message());
  if (needle)
    ck_assert_msg(strstr(cubert_last_error_message(), needle) != NULL, "%s=%s: message \"%s\" lacks \"%s\"",
                  name, value, cubert_last_error_message(), needle);
  unsetenv(name);
}

START_TEST(test_failed_runtime_create_leaks_nothing_for_any_bad_environment) {
  char *empty = temp_file("");
  char *garbage = temp_file("this is not XML \x01\x02 at all <<<");
  /* nested far deeper than any real topology */
  size_t depth = 5000;
  char *deep = malloc(depth * 8 + 64);
  strcpy(deep, "<?xml version=\"1.0\"?>");
  for (size_t i = 0; i < depth; i++) strcat(deep, "<a>");
  char *nested = temp_file(deep);
  free(deep);
  const char *const nodes[] = {"/nonexistent/cubert/node.xml", "/tmp", "/dev/null", empty, garbage, nested,
                               "unknown"};
  for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++)
    expect_create_refused("CUBERT_HOST_NODE", nodes[i], NULL);
  expect_create_refused("CUBERT_BACKENDS", "host,cuda", "cuda");
  expect_create_refused("CUBERT_BACKENDS", ",", NULL);
  expect_create_refused("CUBERT_HOST_DEVICES", "lots", NULL);
  expect_create_refused("CUBERT_HOST_DEVICES", "65", "64");
  expect_create_refused("CUBERT_HOST_DEVICES", "0", "1 to 64"); /* README.md: 1 to 64 */
  expect_create_refused("CUBERT_HOST_MEMORY", "-5", NULL);
  expect_create_refused("CUBERT_HOST_MEMORY", "0", NULL);
  expect_create_refused("CUBERT_HOST_MEMORY", "99999999999999999999999", NULL);
  expect_create_refused("CUBERT_HOST_PEER_DENY", "0-x", NULL);
  expect_create_refused("CUBERT_HOST_PEER_DENY", "0-99", NULL);
  expect_create_refused("CUBERT_FAULTS", "launch:nonsense==", NULL);
  unlink(empty);
  unlink(garbage);
  unlink(nested);
  free(empty);
  free(garbage);
  free(nested);
  clear_env();
}
END_TEST

/* finding 11: a negative count is named as such, not as "not a size" */
START_TEST(test_negative_host_devices_in_environment_is_named_negative) {
  expect_create_refused("CUBERT_HOST_DEVICES", "-1", "negative");
  ck_assert_ptr_null(strstr(cubert_last_error_message(), "not a size"));
  /* nor is a word: a count is not a size */
  expect_create_refused("CUBERT_HOST_DEVICES", "lots", "not a number of host devices, 1 to 64");
  clear_env();
}
END_TEST

/* Bad fault rules fail the runtime too, leaking nothing. */
START_TEST(test_bad_fault_rules_fail_runtime_create_cleanly) {
  clear_env();
  setenv("CUBERT_FAULTS", "launch:this-is-not-a-rule=", 1);
  cubert_runtime *rt = NULL;
  cubert_status st = cubert_runtime_create(NULL, &rt);
  ck_assert_int_ne(st, CUBERT_OK);
  ck_assert_ptr_null(rt);
  EXPECT_MESSAGE("fault rules");
  clear_env();
}
END_TEST

/* ------------------------------------------------------------ finding 7 */

START_TEST(test_handle_of_another_runtime_is_named_as_such) {
  world a, b;
  world_open(&a);
  world_open(&b);
  uint8_t buf[HANDLE_BYTES];
  uint8_t pattern = 1;
  /* same device index, same device name: only the runtime differs */
  REFUSED(&b, cubert_handle_read(b.c[0], a.h[0], buf, sizeof buf), CUBERT_ERR_WRONG_DEVICE,
          "another runtime");
  ck_assert_ptr_null(strstr(cubert_last_error_message(), "the client to device 0 (host:0)"));
  REFUSED(&b, cubert_handle_write(b.c[0], a.h[0], buf, sizeof buf), CUBERT_ERR_WRONG_DEVICE,
          "another runtime");
  REFUSED(&b, cubert_handle_fill(b.c[0], a.h[0], &pattern, 1), CUBERT_ERR_WRONG_DEVICE, "another runtime");
  REFUSED(&b, cubert_handle_copy(b.c[0], a.h[0], b.h[0]), CUBERT_ERR_WRONG_DEVICE, "another runtime");
  REFUSED(&b, cubert_handle_copy(b.c[0], b.h[0], a.h[0]), CUBERT_ERR_WRONG_DEVICE, "another runtime");
  REFUSED(&b, cubert_handle_check(b.c[0], a.h[0]), CUBERT_ERR_WRONG_DEVICE, "another runtime");
  REFUSED(&b, cubert_handle_check(b.c[1], a.h[0]), CUBERT_ERR_WRONG_DEVICE, "another runtime");
  REFUSED(&b, cubert_handle_share(b.c[0], a.h[0]), CUBERT_ERR_WRONG_DEVICE, "another runtime");
  cubert_kernel *k = make("m_copy", copy_params, 2, copy_fn);
  cubert_arg args[2] = {cubert_arg_buffer(a.h[0]), cubert_arg_buffer(b.h[0])};
  int before = atomic_load(&runs);
  REFUSED(&b, cubert_launch(b.c[0], k, &one, args, 2), CUBERT_ERR_WRONG_DEVICE, "another runtime");
  args[0] = cubert_arg_buffer(b.h[0]);
  args[1] = cubert_arg_buffer(a.h[0]);
  REFUSED(&b, cubert_launch(b.c[0], k, &one, args, 2), CUBERT_ERR_WRONG_DEVICE, "another runtime");
  cubert_kernel_release(k);
  /* a shared peer buffer of the other runtime, even where the pair's index
   * has peer access enabled in this one */
  cb_test_ok(cubert_handle_share(a.c[1], a.h[1]));
  cb_test_ok(cubert_handle_share(b.c[1], b.h[1]));
  k = make("m_peer", peer_params, 2, copy_fn);
  cubert_arg pargs[2] = {cubert_arg_peer(a.h[1]), cubert_arg_buffer(b.h[0])};
  REFUSED(&b, cubert_launch(b.c[0], k, &one, pargs, 2), CUBERT_ERR_WRONG_DEVICE, "another runtime");
  cubert_kernel_release(k);
  ck_assert_int_eq(atomic_load(&runs), before);
  expect_world_intact(&a);
  expect_world_intact(&b);
  world_close(&a);
  world_close(&b);
}
END_TEST

/* ------------------------------------------------------------ finding 8 */

/* The decision (cubert.h, CUBERT_PARAM_PEER_BUFFER): a peer-buffer parameter
 * binds memory of the launching device as it is, shared or not (no peer
 * access is involved); memory of another device must have been shared. */
START_TEST(test_peer_buffer_binds_own_memory_unshared_and_others_only_shared) {
  world w;
  world_open(&w);
  cubert_kernel *k = make("m_peer", peer_params, 2, copy_fn);
  cubert_handle *own = NULL;
  cb_test_ok(cubert_handle_empty(w.c[0], HANDLE_BYTES, &own));
  ck_assert(!cubert_handle_is_shared(w.h[0]));
  cubert_arg args[2] = {cubert_arg_peer(w.h[0]), cubert_arg_buffer(own)};
  int before = atomic_load(&runs);
  cb_test_ok(cubert_launch(w.c[0], k, &one, args, 2));
  cb_test_ok(cubert_sync(w.c[0]));
  ck_assert_int_eq(atomic_load(&runs), before + 1);
  /* the same memory from another device: refused until shared */
  cubert_handle *out1 = NULL;
  cb_test_ok(cubert_handle_empty(w.c[1], HANDLE_BYTES, &out1));
  cubert_arg args1[2] = {cubert_arg_peer(w.h[0]), cubert_arg_buffer(out1)};
  REFUSED(&w, cubert_launch(w.c[1], k, &one, args1, 2), CUBERT_ERR_NOT_SHARED, "never shared");
  cb_test_ok(cubert_handle_share(w.c[0], w.h[0]));
  cb_test_ok(cubert_launch(w.c[1], k, &one, args1, 2));
  cb_test_ok(cubert_sync(w.c[1]));
  ck_assert_int_eq(atomic_load(&runs), before + 2);
  cubert_kernel_release(k);
  cubert_handle_release(own);
  cubert_handle_release(out1);
  world_close(&w);
}
END_TEST

/* ------------------------------------------------------------ finding 9 */

/* The last error's failure 0 names bytes [start, end) (entries: `count`). */
static void expect_range(size_t count, uint64_t start, uint64_t end) {
  cubert_error *e = cubert_last_error();
  ck_assert_uint_eq(cubert_error_failure_count(e), count);
  uint64_t s0 = 1, s1 = 1;
  ck_assert_ptr_nonnull(cubert_error_failure(e, 0, &s0, &s1));
  ck_assert_uint_eq(s0, start);
  ck_assert_uint_eq(s1, end);
  cubert_error_release(e);
}

START_TEST(test_failed_launch_reports_the_range_it_tainted) {
  world w;
  world_open(&w);
  ck_assert_int_ne(launch_out(w.c[0], "m_broken", NULL, w.h[0]), CUBERT_OK);
  expect_range(1, 0, HANDLE_BYTES);
  /* a slice: the range in allocation bytes, as a read would report it */
  cubert_handle *slice = NULL;
  cb_test_ok(cubert_handle_slice(w.h[1], 1024, 1000, &slice));
  ck_assert_int_ne(launch_out(w.c[1], "m_broken", NULL, slice), CUBERT_OK);
  expect_range(1, 1024, HANDLE_BYTES - 1000);
  /* and the read names the same range */
  uint8_t buf[HANDLE_BYTES];
  ck_assert_int_eq(cubert_handle_read(w.c[1], w.h[1], buf, sizeof buf), CUBERT_ERR_TAINTED);
  expect_range(1, 1024, HANDLE_BYTES - 1000);
  cubert_handle_release(slice);
  world_close(&w);
}
END_TEST

/* ------------------------------------------------------------ finding 11 */

START_TEST(test_host_kernel_returning_device_lost_marks_the_device_lost) {
  world w;
  world_open(&w);
  launch_out(w.c[0], "m_lost", lost_fn, w.h[0]); /* fails when it runs */
  cubert_status st = cubert_sync(w.c[0]);
  ck_assert_int_eq(st, CUBERT_ERR_DEVICE_LOST);
  cubert_device_info info;
  cb_test_ok(cubert_runtime_device_info(w.rt, 0, &info));
  ck_assert_msg(info.lost, "device 0 is not marked lost");
  cb_test_ok(cubert_runtime_device_info(w.rt, 1, &info));
  ck_assert(!info.lost);
  uint8_t buf[HANDLE_BYTES];
  ck_assert_int_eq(cubert_handle_read(w.c[0], w.h[0], buf, sizeof buf), CUBERT_ERR_DEVICE_LOST);
  EXPECT_MESSAGE("fell off the bus");
  world_close(&w);
}
END_TEST

/* docs/failures.md: a zero-byte view has no bytes to carry a failure, so
 * reading it succeeds even inside a tainted range. */
START_TEST(test_empty_view_inside_a_tainted_range_reads) {
  world w;
  world_open(&w);
  ck_assert_int_ne(launch_out(w.c[0], "m_broken", NULL, w.h[0]), CUBERT_OK);
  cubert_handle *empty = NULL, *edge = NULL;
  cb_test_ok(cubert_handle_slice(w.h[0], 100, HANDLE_BYTES - 100, &empty));
  ck_assert_uint_eq(cubert_handle_size_in_use(empty), 0);
  cb_test_ok(cubert_handle_read(w.c[0], empty, NULL, 0));
  cb_test_ok(cubert_handle_check(w.c[0], empty));
  /* but one byte of it is refused */
  cb_test_ok(cubert_handle_slice(w.h[0], 100, HANDLE_BYTES - 101, &edge));
  uint8_t b;
  ck_assert_int_eq(cubert_handle_read(w.c[0], edge, &b, 1), CUBERT_ERR_TAINTED);
  cubert_handle_release(empty);
  cubert_handle_release(edge);
  world_close(&w);
}
END_TEST

/* ------------------------------------------------------------ NULL */

START_TEST(test_every_call_refuses_null_for_each_pointer) {
  world w;
  world_open(&w);
  cubert_runtime *rt = w.rt;
  cubert_client *c = w.c[0];
  cubert_handle *h = w.h[0], *h1 = w.h[1], *hout = NULL;
  cubert_binding *b = NULL, *bout = NULL;
  cubert_weak *wk = NULL, *wout = NULL;
  cb_test_ok(cubert_handle_bind(h, &b));
  cb_test_ok(cubert_handle_downgrade(h, &wk));
  cubert_timer *t = NULL, *tout = NULL;
  cb_test_ok(cubert_timer_record(c, &t));
  cubert_kernel *k = make("m_copy", copy_params, 2, copy_fn), *kout = NULL;
  cubert_runtime *rtout = NULL;
  cubert_client *cout = NULL;
  cubert_device_info info;
  cubert_device_link link;
  cubert_stream s = 0;
  cubert_pool_usage pools[4];
  size_t count = 0;
  double ms = 0;
  uint8_t buf[HANDLE_BYTES];
  uint32_t pattern = 7;
  cubert_arg args[2] = {cubert_arg_buffer(h), cubert_arg_buffer(w.h[0])};
  cubert_kernel_desc desc = {0};
  desc.name = "m_desc";
  desc.host_fn = copy_fn;

  REFUSED(&w, cubert_runtime_create(NULL, NULL), CUBERT_ERR_INVALID_ARGUMENT, "runtime is NULL");
  REFUSED(&w, cubert_runtime_device_info(NULL, 0, &info), CUBERT_ERR_INVALID_ARGUMENT, "runtime is NULL");
  REFUSED(&w, cubert_runtime_device_info(rt, 0, NULL), CUBERT_ERR_INVALID_ARGUMENT, "info is NULL");
  REFUSED(&w, cubert_runtime_device_link(NULL, 0, 1, &link), CUBERT_ERR_INVALID_ARGUMENT, "runtime is NULL");
  REFUSED(&w, cubert_runtime_device_link(rt, 0, 1, NULL), CUBERT_ERR_INVALID_ARGUMENT, "link is NULL");
  REFUSED(&w, cubert_client_create(NULL, 0, &cout), CUBERT_ERR_INVALID_ARGUMENT, "runtime is NULL");
  REFUSED(&w, cubert_client_create(rt, 0, NULL), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_stream_create(NULL, &s), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_stream_create(c, NULL), CUBERT_ERR_INVALID_ARGUMENT, "stream is NULL");
  REFUSED(&w, cubert_client_use_stream(NULL, 0), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_sync(NULL), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_sync_stream(NULL, 0), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_sync_device(NULL), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_timer_record(NULL, &tout), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_timer_record(c, NULL), CUBERT_ERR_INVALID_ARGUMENT, "timer is NULL");
  REFUSED(&w, cubert_timer_elapsed(NULL, t, &ms), CUBERT_ERR_INVALID_ARGUMENT, "start is NULL");
  REFUSED(&w, cubert_timer_elapsed(t, NULL, &ms), CUBERT_ERR_INVALID_ARGUMENT, "end is NULL");
  REFUSED(&w, cubert_timer_elapsed(t, t, NULL), CUBERT_ERR_INVALID_ARGUMENT, "ms is NULL");
  REFUSED(&w, cubert_handle_empty(NULL, 16, &hout), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_handle_empty(c, 16, NULL), CUBERT_ERR_INVALID_ARGUMENT, "handle is NULL");
  REFUSED(&w, cubert_handle_create(NULL, buf, 16, &hout), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_handle_create(c, NULL, 16, &hout), CUBERT_ERR_INVALID_ARGUMENT, "data is NULL");
  REFUSED(&w, cubert_handle_create(c, buf, 16, NULL), CUBERT_ERR_INVALID_ARGUMENT, "handle is NULL");
  REFUSED(&w, cubert_handle_read(NULL, h, buf, HANDLE_BYTES), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_handle_read(c, NULL, buf, HANDLE_BYTES), CUBERT_ERR_INVALID_ARGUMENT, "handle is NULL");
  REFUSED(&w, cubert_handle_read(c, h, NULL, HANDLE_BYTES), CUBERT_ERR_INVALID_ARGUMENT, "dst is NULL");
  REFUSED(&w, cubert_handle_write(NULL, h, buf, HANDLE_BYTES), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_handle_write(c, NULL, buf, HANDLE_BYTES), CUBERT_ERR_INVALID_ARGUMENT, "handle is NULL");
  REFUSED(&w, cubert_handle_write(c, h, NULL, HANDLE_BYTES), CUBERT_ERR_INVALID_ARGUMENT, "src is NULL");
  REFUSED(&w, cubert_handle_fill(NULL, h, &pattern, 4), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_handle_fill(c, NULL, &pattern, 4), CUBERT_ERR_INVALID_ARGUMENT, "handle is NULL");
  REFUSED(&w, cubert_handle_fill(c, h, NULL, 4), CUBERT_ERR_INVALID_ARGUMENT, "pattern is NULL");
  REFUSED(&w, cubert_handle_copy(NULL, h, h1), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_handle_copy(c, NULL, h1), CUBERT_ERR_INVALID_ARGUMENT, "src is NULL");
  REFUSED(&w, cubert_handle_copy(c, h, NULL), CUBERT_ERR_INVALID_ARGUMENT, "dst is NULL");
  REFUSED(&w, cubert_handle_copy_peer(NULL, h, w.c[1], h1), CUBERT_ERR_INVALID_ARGUMENT, "src_client is NULL");
  REFUSED(&w, cubert_handle_copy_peer(c, NULL, w.c[1], h1), CUBERT_ERR_INVALID_ARGUMENT, "src is NULL");
  REFUSED(&w, cubert_handle_copy_peer(c, h, NULL, h1), CUBERT_ERR_INVALID_ARGUMENT, "dst_client is NULL");
  REFUSED(&w, cubert_handle_copy_peer(c, h, w.c[1], NULL), CUBERT_ERR_INVALID_ARGUMENT, "dst is NULL");
  /* on one device it is a copy, its refusals named as copy_peer's */
  cubert_handle *small = NULL;
  cb_test_ok(cubert_handle_empty(c, 8, &small));
  REFUSED(&w, cubert_handle_copy_peer(c, h, c, small), CUBERT_ERR_OUT_OF_RANGE, "cubert_handle_copy_peer: source has");
  REFUSED(&w, cubert_handle_copy_peer(c, h, c, h), CUBERT_ERR_INVALID_ARGUMENT,
          "cubert_handle_copy_peer: source and destination overlap");
  cubert_handle_release(small);
  REFUSED(&w, cubert_handle_check(NULL, h), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_handle_check(c, NULL), CUBERT_ERR_INVALID_ARGUMENT, "handle is NULL");
  REFUSED(&w, cubert_handle_slice(NULL, 0, 0, &hout), CUBERT_ERR_INVALID_ARGUMENT, "handle is NULL");
  REFUSED(&w, cubert_handle_slice(h, 0, 0, NULL), CUBERT_ERR_INVALID_ARGUMENT, "slice is NULL");
  REFUSED(&w, cubert_handle_share(NULL, h), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_handle_share(c, NULL), CUBERT_ERR_INVALID_ARGUMENT, "handle is NULL");
  REFUSED(&w, cubert_handle_bind(NULL, &bout), CUBERT_ERR_INVALID_ARGUMENT, "handle is NULL");
  REFUSED(&w, cubert_handle_bind(h, NULL), CUBERT_ERR_INVALID_ARGUMENT, "binding is NULL");
  REFUSED(&w, cubert_binding_downgrade(NULL, &wout), CUBERT_ERR_INVALID_ARGUMENT, "binding is NULL");
  REFUSED(&w, cubert_binding_downgrade(b, NULL), CUBERT_ERR_INVALID_ARGUMENT, "weak is NULL");
  REFUSED(&w, cubert_handle_downgrade(NULL, &wout), CUBERT_ERR_INVALID_ARGUMENT, "handle is NULL");
  REFUSED(&w, cubert_handle_downgrade(h, NULL), CUBERT_ERR_INVALID_ARGUMENT, "weak is NULL");
  REFUSED(&w, cubert_weak_upgrade(NULL, &bout), CUBERT_ERR_INVALID_ARGUMENT, "weak is NULL");
  REFUSED(&w, cubert_weak_upgrade(wk, NULL), CUBERT_ERR_INVALID_ARGUMENT, "binding is NULL");
  REFUSED(&w, cubert_memory_usage(NULL, pools, 4, &count), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_memory_usage(c, NULL, 4, &count), CUBERT_ERR_INVALID_ARGUMENT, "pools is NULL");
  REFUSED(&w, cubert_memory_usage(c, pools, 4, NULL), CUBERT_ERR_INVALID_ARGUMENT, "count is NULL");
  REFUSED(&w, cubert_memory_cleanup(NULL), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_kernel_create(NULL, &kout), CUBERT_ERR_INVALID_ARGUMENT, "desc is NULL");
  REFUSED(&w, cubert_kernel_create(&desc, NULL), CUBERT_ERR_INVALID_ARGUMENT, "kernel is NULL");
  REFUSED(&w, cubert_launch(NULL, k, &one, args, 2), CUBERT_ERR_INVALID_ARGUMENT, "client is NULL");
  REFUSED(&w, cubert_launch(c, NULL, &one, args, 2), CUBERT_ERR_INVALID_ARGUMENT, "kernel is NULL");
  REFUSED(&w, cubert_launch(c, k, NULL, args, 2), CUBERT_ERR_INVALID_ARGUMENT, "config is NULL");
  REFUSED(&w, cubert_launch(c, k, &one, NULL, 2), CUBERT_ERR_INVALID_ARGUMENT, "args is NULL");
  cubert_arg nullh[2] = {cubert_arg_buffer(NULL), cubert_arg_buffer(h1)};
  REFUSED(&w, cubert_launch(c, k, &one, nullh, 2), CUBERT_ERR_INVALID_ARGUMENT, "handle is NULL");
  REFUSED(&w, cubert_builtin_kernel(CUBERT_BUILTIN_FILL_U32, NULL), CUBERT_ERR_INVALID_ARGUMENT,
          "kernel is NULL");
  REFUSED(&w, cubert_builtin_kernel(CUBERT_BUILTIN_COUNT, &kout), CUBERT_ERR_INVALID_ARGUMENT, "builtin");
  ck_assert_ptr_null(kout);
  ck_assert_ptr_null(cubert_builtin_desc(CUBERT_BUILTIN_COUNT));
  ck_assert_ptr_null(cubert_builtin_desc((cubert_builtin)-1));

  /* Calls without a status answer NULL with a neutral value: every one of
   * them is in test_null_arguments_are_refused_by_every_call
   * (test_runtime_api.c); the one it lacks: */
  cubert_timer_release(NULL);

  /* nothing was made: every output is still NULL */
  ck_assert_ptr_null(rtout);
  ck_assert_ptr_null(cout);
  ck_assert_ptr_null(hout);
  ck_assert_ptr_null(bout);
  ck_assert_ptr_null(wout);
  ck_assert_ptr_null(tout);
  ck_assert_uint_eq(s, 0);
  expect_world_intact(&w);
  cubert_kernel_release(k);
  cubert_timer_release(t);
  cubert_weak_release(wk);
  cubert_binding_release(b);
  world_close(&w);
}
END_TEST

START_TEST(test_topology_calls_refuse_null_for_each_pointer) {
  world w;
  world_open(&w);
  cubert_topology *t = NULL, *tout = NULL;
  cb_test_ok(cubert_topology_create(w.rt, NULL, &t));
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  cubert_topology_device d;
  cubert_topology_link l;
  char *json = NULL;
  void *mem = NULL;
  cubert_placement how;
  REFUSED(&w, cubert_topology_create(NULL, NULL, &tout), CUBERT_ERR_INVALID_ARGUMENT, "runtime is NULL");
  REFUSED(&w, cubert_topology_create(w.rt, NULL, NULL), CUBERT_ERR_INVALID_ARGUMENT, "topology is NULL");
  REFUSED(&w, cubert_topology_create_from(NULL, &tout), CUBERT_ERR_INVALID_ARGUMENT, "source is NULL");
  REFUSED(&w, cubert_topology_create_from(&src, NULL), CUBERT_ERR_INVALID_ARGUMENT, "topology is NULL");
  REFUSED(&w, cubert_topology_device_info(NULL, 0, &d), CUBERT_ERR_INVALID_ARGUMENT, "topology is NULL");
  REFUSED(&w, cubert_topology_device_info(t, 0, NULL), CUBERT_ERR_INVALID_ARGUMENT, "info is NULL");
  REFUSED(&w, cubert_topology_pair(NULL, 0, 1, &l), CUBERT_ERR_INVALID_ARGUMENT, "topology is NULL");
  REFUSED(&w, cubert_topology_pair(t, 0, 1, NULL), CUBERT_ERR_INVALID_ARGUMENT, "link is NULL");
  REFUSED(&w, cubert_topology_json(NULL, &json), CUBERT_ERR_INVALID_ARGUMENT, "topology is NULL");
  REFUSED(&w, cubert_topology_json(t, NULL), CUBERT_ERR_INVALID_ARGUMENT, "json is NULL");
  REFUSED(&w, cubert_topology_bind_thread(NULL, 0, &how), CUBERT_ERR_INVALID_ARGUMENT, "topology is NULL");
  REFUSED(&w, cubert_topology_alloc_local(NULL, 0, 64, &mem, &how), CUBERT_ERR_INVALID_ARGUMENT,
          "topology is NULL");
  REFUSED(&w, cubert_topology_alloc_local(t, 0, 64, NULL, &how), CUBERT_ERR_INVALID_ARGUMENT, "memory is NULL");
  REFUSED(&w, cubert_topology_write_node(NULL, "/tmp"), CUBERT_ERR_INVALID_ARGUMENT, "node is NULL");
  REFUSED(&w, cubert_topology_write_node("frontier", NULL), CUBERT_ERR_INVALID_ARGUMENT, "dir is NULL");
  /* indices at the edges */
  REFUSED(&w, cubert_topology_device_info(t, -1, &d), CUBERT_ERR_NO_DEVICE, "device -1");
  REFUSED(&w, cubert_topology_device_info(t, HOST_DEVICES, &d), CUBERT_ERR_NO_DEVICE, "device 2");
  REFUSED(&w, cubert_topology_pair(t, 0, HOST_DEVICES, &l), CUBERT_ERR_NO_DEVICE, "device 2");
  ck_assert_ptr_null(tout);
  ck_assert_ptr_null(json);
  ck_assert_ptr_null(mem);
  cubert_topology_source_init(NULL);
  cubert_topology_destroy(NULL);
  cubert_topology_free_local(NULL, 0, NULL, 0);
  ck_assert_int_eq(cubert_topology_device_count(NULL), 0);
  ck_assert_ptr_null(cubert_topology_pair_name(NULL, 0, 1));
  ck_assert_ptr_null(cubert_topology_pair_name(t, 0, HOST_DEVICES));
  ck_assert_ptr_nonnull(cubert_topology_notes(NULL));
  cubert_topology_destroy(t);
  world_close(&w);
}
END_TEST

/* ------------------------------------------------------------ other objects */

START_TEST(test_objects_of_another_client_and_device_are_refused) {
  world w;
  world_open(&w);
  cubert_client *c0 = w.c[0], *c1 = w.c[1];
  cubert_client *c0b = NULL; /* a second client of device 0: as good as the first */
  cb_test_ok(cubert_client_create(w.rt, 0, &c0b));
  uint8_t buf[HANDLE_BYTES];
  cb_test_ok(cubert_handle_read(c0b, w.h[0], buf, sizeof buf));
  uint8_t pattern = 3;
  REFUSED(&w, cubert_handle_read(c1, w.h[0], buf, sizeof buf), CUBERT_ERR_WRONG_DEVICE, "device 0");
  REFUSED(&w, cubert_handle_write(c1, w.h[0], buf, sizeof buf), CUBERT_ERR_WRONG_DEVICE, "device 0");
  REFUSED(&w, cubert_handle_fill(c1, w.h[0], &pattern, 1), CUBERT_ERR_WRONG_DEVICE, "device 0");
  REFUSED(&w, cubert_handle_copy(c0, w.h[0], w.h[1]), CUBERT_ERR_WRONG_DEVICE, "device 1");
  REFUSED(&w, cubert_handle_check(c1, w.h[0]), CUBERT_ERR_WRONG_DEVICE, "device 0");
  REFUSED(&w, cubert_handle_share(c1, w.h[0]), CUBERT_ERR_WRONG_DEVICE, "device 0");
  REFUSED(&w, cubert_handle_copy_peer(c1, w.h[0], c0, w.h[1]), CUBERT_ERR_WRONG_DEVICE, "the source");
  REFUSED(&w, cubert_handle_copy_peer(c0, w.h[0], c1, w.h[0]), CUBERT_ERR_WRONG_DEVICE, "the destination");
  cubert_kernel *k = make("m_copy", copy_params, 2, copy_fn);
  cubert_arg args[2] = {cubert_arg_buffer(w.h[1]), cubert_arg_buffer(w.h[0])};
  int before = atomic_load(&runs);
  REFUSED(&w, cubert_launch(c0, k, &one, args, 2), CUBERT_ERR_WRONG_DEVICE, "peer-buffer");
  cubert_kernel_release(k);
  ck_assert_int_eq(atomic_load(&runs), before);
  /* timers of two devices */
  cubert_timer *t0 = NULL, *t1 = NULL;
  cb_test_ok(cubert_timer_record(c0, &t0));
  cb_test_ok(cubert_timer_record(c1, &t1));
  double ms = -1;
  REFUSED(&w, cubert_timer_elapsed(t0, t1, &ms), CUBERT_ERR_WRONG_DEVICE, "timers of device 0");
  ck_assert(ms == -1);
  cubert_timer_release(t0);
  cubert_timer_release(t1);
  /* a stream of another device */
  cubert_stream s1 = 0;
  cb_test_ok(cubert_stream_create(c1, &s1));
  cb_test_ok(cubert_stream_create(c1, &s1));
  REFUSED(&w, cubert_client_use_stream(c0, s1), CUBERT_ERR_INVALID_ARGUMENT, "does not exist");
  REFUSED(&w, cubert_sync_stream(c0, s1), CUBERT_ERR_INVALID_ARGUMENT, "does not exist");
  REFUSED(&w, cubert_sync_stream(c0, UINT64_MAX), CUBERT_ERR_INVALID_ARGUMENT, "does not exist");
  expect_world_intact(&w);
  cubert_client_destroy(c0b);
  world_close(&w);
}
END_TEST

/* ------------------------------------------------------------ edges */

START_TEST(test_sizes_and_offsets_at_the_edges_are_refused) {
  world w;
  world_open(&w);
  cubert_client *c = w.c[0];
  cubert_handle *h = w.h[0], *out = NULL;
  uint8_t buf[HANDLE_BYTES + 1];
  uint64_t pattern = 0;
  REFUSED(&w, cubert_handle_empty(c, 0, &out), CUBERT_ERR_INVALID_ARGUMENT, "size is 0");
  REFUSED(&w, cubert_handle_empty(c, UINT64_MAX, &out), CUBERT_ERR_OUT_OF_MEMORY, "device 0");
  REFUSED(&w, cubert_handle_empty(c, CB_TEST_HOST_MEMORY + 1, &out), CUBERT_ERR_OUT_OF_MEMORY, "device 0");
  REFUSED(&w, cubert_handle_read(c, h, buf, HANDLE_BYTES + 1), CUBERT_ERR_OUT_OF_RANGE, "4097");
  REFUSED(&w, cubert_handle_read(c, h, buf, HANDLE_BYTES - 1), CUBERT_ERR_OUT_OF_RANGE, "4095");
  REFUSED(&w, cubert_handle_write(c, h, buf, 0), CUBERT_ERR_OUT_OF_RANGE, "0 bytes");
  REFUSED(&w, cubert_handle_write(c, h, buf, UINT64_MAX), CUBERT_ERR_OUT_OF_RANGE, "4096");
  REFUSED(&w, cubert_handle_fill(c, h, &pattern, 3), CUBERT_ERR_INVALID_ARGUMENT, "3 bytes");
  REFUSED(&w, cubert_handle_fill(c, h, &pattern, 0), CUBERT_ERR_INVALID_ARGUMENT, "0 bytes");
  REFUSED(&w, cubert_handle_fill(c, h, &pattern, SIZE_MAX), CUBERT_ERR_INVALID_ARGUMENT, "pattern");
  REFUSED(&w, cubert_handle_slice(h, HANDLE_BYTES + 1, 0, &out), CUBERT_ERR_OUT_OF_RANGE, "4097");
  REFUSED(&w, cubert_handle_slice(h, 0, HANDLE_BYTES + 1, &out), CUBERT_ERR_OUT_OF_RANGE, "4097");
  REFUSED(&w, cubert_handle_slice(h, 1, HANDLE_BYTES, &out), CUBERT_ERR_OUT_OF_RANGE, "4096");
  REFUSED(&w, cubert_handle_slice(h, UINT64_MAX, UINT64_MAX, &out), CUBERT_ERR_OUT_OF_RANGE, "bytes");
  REFUSED(&w, cubert_handle_slice(h, 2, UINT64_MAX - 1, &out), CUBERT_ERR_OUT_OF_RANGE, "bytes");
  cubert_handle *odd = NULL, *shorter = NULL;
  cb_test_ok(cubert_handle_slice(h, 0, 1, &odd));
  REFUSED(&w, cubert_handle_fill(c, odd, &pattern, 2), CUBERT_ERR_INVALID_ARGUMENT, "4095");
  cb_test_ok(cubert_handle_slice(w.h[0], 0, 16, &shorter));
  REFUSED(&w, cubert_handle_copy(c, shorter, h), CUBERT_ERR_OUT_OF_RANGE, "4080");
  REFUSED(&w, cubert_handle_copy(c, h, h), CUBERT_ERR_INVALID_ARGUMENT, "overlap");
  REFUSED(&w, cubert_handle_copy(c, h, odd), CUBERT_ERR_OUT_OF_RANGE, "4095");
  REFUSED(&w, cubert_handle_copy_peer(c, h, w.c[1], odd), CUBERT_ERR_WRONG_DEVICE, "destination");
  REFUSED(&w, cubert_runtime_device_info(w.rt, -1, NULL), CUBERT_ERR_NO_DEVICE, "-1");
  cubert_device_info info;
  REFUSED(&w, cubert_runtime_device_info(w.rt, HOST_DEVICES, &info), CUBERT_ERR_NO_DEVICE, "2");
  REFUSED(&w, cubert_runtime_device_info(w.rt, INT32_MIN, &info), CUBERT_ERR_NO_DEVICE, "does not exist");
  cubert_client *cl = NULL;
  REFUSED(&w, cubert_client_create(w.rt, HOST_DEVICES, &cl), CUBERT_ERR_NO_DEVICE, "2");
  cubert_device_link link;
  REFUSED(&w, cubert_runtime_device_link(w.rt, 0, -1, &link), CUBERT_ERR_NO_DEVICE, "-1");
  REFUSED(&w, cubert_client_use_stream(c, 1u << 20), CUBERT_ERR_INVALID_ARGUMENT, "does not exist");
  ck_assert_ptr_null(out);
  ck_assert_ptr_null(cl);
  cubert_handle_release(odd);
  cubert_handle_release(shorter);
  expect_world_intact(&w);
  world_close(&w);
}
END_TEST

/* ------------------------------------------------------------ suite */

static Suite *misuse_suite(void) {
  Suite *s = suite_create("misuse");
  TCase *tc = tcase_create("findings");
  tcase_add_test(tc, test_peer_copy_across_runtimes_is_refused_before_anything_is_queued);
  tcase_add_test(tc, test_objects_outliving_their_runtime_are_safe_to_use_and_release);
  tcase_add_test(tc, test_failed_runtime_create_leaks_nothing_for_any_bad_environment);
  tcase_add_test(tc, test_negative_host_devices_in_environment_is_named_negative);
  tcase_add_test(tc, test_bad_fault_rules_fail_runtime_create_cleanly);
  tcase_add_test(tc, test_handle_of_another_runtime_is_named_as_such);
  tcase_add_test(tc, test_peer_buffer_binds_own_memory_unshared_and_others_only_shared);
  tcase_add_test(tc, test_failed_launch_reports_the_range_it_tainted);
  tcase_add_test(tc, test_host_kernel_returning_device_lost_marks_the_device_lost);
  tcase_add_test(tc, test_empty_view_inside_a_tainted_range_reads);
  suite_add_tcase(s, tc);
  TCase *api = tcase_create("api");
  tcase_add_test(api, test_every_call_refuses_null_for_each_pointer);
  tcase_add_test(api, test_topology_calls_refuse_null_for_each_pointer);
  tcase_add_test(api, test_objects_of_another_client_and_device_are_refused);
  tcase_add_test(api, test_sizes_and_offsets_at_the_edges_are_refused);
  suite_add_tcase(s, api);
  return s;
}

int main(void) { return cb_test_run(misuse_suite()); }
