/* tests/test_streams.c: streams: each thread's current stream, created and
 * pinned streams, refused stream ids, ordering across streams (work on
 * stream B that uses memory written on stream A waits for A; a write on B
 * waits for every pending reader of that memory on other streams), memory
 * of pending work never reused, and the three syncs.
 *
 * The ordering tests use a host kernel that sleeps 50 ms and then writes:
 * without the event wait, work on the other stream would run during the
 * sleep and see the old bytes, so a missing wait fails every time rather
 * than now and then. Those tests need host functions, so they run on the
 * host backend and print "skipped" on the others. */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cubert/cubert.h"
#include "tests/testutil.h"

#define SLOW_MS 50

#define expect_message(needle)                                                        \
  ck_assert_msg(strstr(cubert_last_error_message(), (needle)) != NULL,                \
                "last error message \"%s\" does not mention \"%s\"",                   \
                cubert_last_error_message(), (needle))

/* How many slow kernels have finished (written their output). */
static atomic_int slow_done;

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* out[i] = value for every u32 of `out`, after SLOW_MS. */
static cubert_status slow_fill_host(const cubert_host_launch *l, char *message, size_t capacity) {
  if (l->nargs != 2 || l->sizes[1] != 4) {
    snprintf(message, capacity, "slow_fill: wrong arguments");
    return CUBERT_ERR_INVALID_ARGUMENT;
  }
  sleep_ms(SLOW_MS);
  uint32_t value;
  memcpy(&value, l->args[1], 4);
  uint32_t *out = l->args[0];
  for (uint64_t i = 0; i < l->sizes[0] / 4; i++) out[i] = value;
  atomic_fetch_add(&slow_done, 1);
  return CUBERT_OK;
}

static cubert_kernel *slow_fill_kernel(void) {
  static const cubert_param params[] = {{"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0},
                                        {"value", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 4}};
  cubert_kernel_desc d = {.name = "slow_fill", .params = params, .nparams = 2, .host_fn = slow_fill_host};
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_kernel_create(&d, &k));
  return k;
}

static void launch_slow_fill(cubert_client *c, cubert_kernel *k, cubert_handle *out, uint32_t value) {
  cubert_arg args[2] = {cubert_arg_buffer(out), cubert_arg_scalar(&value, 4)};
  cubert_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0};
  cb_test_ok(cubert_launch(c, k, &cfg, args, 2));
}

/* Fails unless every u32 of the handle, read through `c`, is `value`. */
static void expect_words(cubert_client *c, const cubert_handle *h, uint32_t value, const char *what) {
  uint64_t n = cubert_handle_size_in_use(h);
  uint32_t *w = malloc(n);
  ck_assert_ptr_nonnull(w);
  cb_test_ok(cubert_handle_read(c, h, w, n));
  for (uint64_t i = 0; i < n / 4; i++)
    if (w[i] != value) {
      uint32_t got = w[i];
      free(w);
      ck_abort_msg("%s: word %" PRIu64 " is 0x%08x, expected 0x%08x", what, i, got, value);
    }
  free(w);
}

static cubert_handle *filled(cubert_client *c, uint64_t size, uint32_t value) {
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty(c, size, &h));
  cb_test_ok(cubert_handle_fill(c, h, &value, 4));
  return h;
}

/* A second client on device `d`, pinned to a new stream of its own. */
static cubert_client *pinned_client(cb_test_env *env, int d, cubert_stream *stream) {
  cubert_client *c = NULL;
  cb_test_ok(cubert_client_create(env->runtime, d, &c));
  cb_test_ok(cubert_stream_create(c, stream));
  cb_test_ok(cubert_client_use_stream(c, *stream));
  ck_assert_uint_eq(cubert_client_stream(c), *stream);
  return c;
}

static bool host_only(const cb_test_env *env) {
  if (strcmp(env->backend, "host") == 0) return true;
  cb_test_skip("no device (%s: the test's kernels are host functions) in %s", env->backend, tcase_name());
  return false;
}

/* ------------------------------------------------------------ current streams */

typedef struct stream_probe {
  cubert_client *c;
  cubert_stream first, second, handle_stream;
  cubert_status st;
} stream_probe;

static void *probe_thread(void *arg) {
  stream_probe *p = arg;
  p->first = cubert_client_stream(p->c);
  p->second = cubert_client_stream(p->c);
  cubert_handle *h = NULL;
  p->st = cubert_handle_empty(p->c, 64, &h);
  if (p->st == CUBERT_OK) {
    p->handle_stream = cubert_handle_stream(h);
    cubert_handle_release(h);
  }
  return NULL;
}

static stream_probe probe_in_thread(cubert_client *c) {
  stream_probe p = {c, 0, 0, 0, CUBERT_OK};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, probe_thread, &p), 0);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  cb_test_ok(p.st);
  return p;
}

START_TEST(test_each_thread_has_its_own_current_stream) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_stream mine = cubert_client_stream(c);
  ck_assert_uint_ne(mine, 0);
  ck_assert_uint_eq(cubert_client_stream(c), mine);
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty(c, 64, &h));
  ck_assert_uint_eq(cubert_handle_stream(h), mine);
  cubert_handle_release(h);

  stream_probe p = probe_in_thread(c);
  ck_assert_uint_ne(p.first, 0);
  ck_assert_uint_eq(p.second, p.first);
  ck_assert_uint_eq(p.handle_stream, p.first);
  ck_assert_uint_ne(p.first, mine);
  /* this thread's stream did not change */
  ck_assert_uint_eq(cubert_client_stream(c), mine);

  /* the current stream is the thread's, whichever client asks */
  cubert_client *c2 = NULL;
  cb_test_ok(cubert_client_create(env.runtime, 0, &c2));
  ck_assert_uint_eq(cubert_client_stream(c2), mine);
  cubert_client_destroy(c2);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_created_stream_pins_a_client) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_stream mine = cubert_client_stream(c);
  cubert_stream s1 = 0, s2 = 0;
  cb_test_ok(cubert_stream_create(c, &s1));
  cb_test_ok(cubert_stream_create(c, &s2));
  ck_assert_uint_ne(s1, 0);
  ck_assert_uint_ne(s1, mine);
  ck_assert_uint_ne(s2, s1);
  ck_assert_uint_ne(s2, mine);
  /* creating a stream does not switch to it */
  ck_assert_uint_eq(cubert_client_stream(c), mine);

  cb_test_ok(cubert_client_use_stream(c, s1));
  ck_assert_uint_eq(cubert_client_stream(c), s1);
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty(c, 64, &h));
  ck_assert_uint_eq(cubert_handle_stream(h), s1);
  cubert_handle_release(h);
  /* pinned on every thread */
  stream_probe p = probe_in_thread(c);
  ck_assert_uint_eq(p.first, s1);
  ck_assert_uint_eq(p.handle_stream, s1);
  /* other clients of the device keep the thread's stream */
  cubert_client *other = NULL;
  cb_test_ok(cubert_client_create(env.runtime, 0, &other));
  ck_assert_uint_eq(cubert_client_stream(other), mine);
  cubert_client_destroy(other);

  cb_test_ok(cubert_client_use_stream(c, s2));
  ck_assert_uint_eq(cubert_client_stream(c), s2);
  cb_test_ok(cubert_client_use_stream(c, 0)); /* unpin */
  ck_assert_uint_eq(cubert_client_stream(c), mine);
  /* pinning to the thread's own stream by number is fine too */
  cb_test_ok(cubert_client_use_stream(c, mine));
  ck_assert_uint_eq(cubert_client_stream(c), mine);
  cb_test_ok(cubert_client_use_stream(c, 0));
  cb_test_close(&env);
}
END_TEST

START_TEST(test_bad_stream_ids_are_refused) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_stream mine = cubert_client_stream(c);
  cubert_stream s = 0;
  cb_test_ok(cubert_stream_create(c, &s));
  static const cubert_stream bad[] = {1000, UINT32_MAX, (UINT64_C(1) << 32) + 1, UINT64_MAX};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cubert_status st = cubert_client_use_stream(c, bad[i]);
    ck_assert_msg(st == CUBERT_ERR_INVALID_ARGUMENT, "use_stream(%" PRIu64 ") gave %s", bad[i],
                  cubert_status_name(st));
    char num[32];
    snprintf(num, sizeof num, "%" PRIu64, bad[i]);
    expect_message(num);
    ck_assert_uint_eq(cubert_client_stream(c), mine); /* unchanged */
    st = cubert_sync_stream(c, bad[i]);
    ck_assert_msg(st == CUBERT_ERR_INVALID_ARGUMENT, "sync_stream(%" PRIu64 ") gave %s", bad[i],
                  cubert_status_name(st));
  }
  /* the next number is not a stream until it is created */
  cb_test_status(cubert_client_use_stream(c, s + 1), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_sync_stream(c, s + 1), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_ok(cubert_sync_stream(c, s));
  cb_test_ok(cubert_sync_stream(c, 0)); /* the client's own */
  /* a pinned client refuses bad ids and stays pinned */
  cb_test_ok(cubert_client_use_stream(c, s));
  cb_test_status(cubert_client_use_stream(c, 1000), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_uint_eq(cubert_client_stream(c), s);
  cb_test_ok(cubert_client_use_stream(c, 0));
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ ordering */

START_TEST(test_read_on_another_stream_sees_a_slow_launch) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) {
    cb_test_close(&env);
    return;
  }
  cubert_stream sa, sb;
  cubert_client *a = pinned_client(&env, 0, &sa), *b = pinned_client(&env, 0, &sb);
  ck_assert_uint_ne(sa, sb);
  cubert_kernel *slow = slow_fill_kernel();
  cubert_handle *h = filled(a, 64 * 1024, 0x11111111);
  cb_test_ok(cubert_sync(a));
  atomic_store(&slow_done, 0);
  launch_slow_fill(a, slow, h, 0xA5A5A5A5);
  expect_words(b, h, 0xA5A5A5A5, "read on stream B after a slow launch on A");
  ck_assert_int_eq(atomic_load(&slow_done), 1);
  /* and again, now that stream B waited once */
  launch_slow_fill(a, slow, h, 0x5A5A5A5A);
  expect_words(b, h, 0x5A5A5A5A, "second read on B");
  ck_assert_int_eq(atomic_load(&slow_done), 2);
  cubert_handle_release(h);
  cubert_kernel_release(slow);
  cubert_client_destroy(a);
  cubert_client_destroy(b);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_write_queued_behind_slow_work_is_seen_on_another_stream) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) {
    cb_test_close(&env);
    return;
  }
  cubert_stream sa, sb;
  cubert_client *a = pinned_client(&env, 0, &sa), *b = pinned_client(&env, 0, &sb);
  cubert_kernel *slow = slow_fill_kernel();
  cubert_handle *x = filled(a, 4096, 0), *y = filled(a, 4096, 0);
  cb_test_ok(cubert_sync(a));
  /* A: slow kernel on x, then a write of y queued behind it */
  launch_slow_fill(a, slow, x, 0xCAFEF00D);
  uint32_t words[1024];
  for (int i = 0; i < 1024; i++) words[i] = 0xBEEF0000u + (uint32_t)i;
  cb_test_ok(cubert_handle_write(a, y, words, sizeof words));
  uint32_t back[1024];
  cb_test_ok(cubert_handle_read(b, y, back, sizeof back));
  ck_assert_mem_eq(back, words, sizeof words);
  expect_words(b, x, 0xCAFEF00D, "x on B");
  cubert_handle_release(x);
  cubert_handle_release(y);
  cubert_kernel_release(slow);
  cubert_client_destroy(a);
  cubert_client_destroy(b);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_write_on_another_stream_lands_after_a_slow_launch) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) {
    cb_test_close(&env);
    return;
  }
  cubert_stream sa, sb;
  cubert_client *a = pinned_client(&env, 0, &sa), *b = pinned_client(&env, 0, &sb);
  cubert_kernel *slow = slow_fill_kernel();
  cubert_handle *h = filled(a, 4096, 0);
  cb_test_ok(cubert_sync(a));
  /* write after write: B's fill must not run under A's slow kernel */
  launch_slow_fill(a, slow, h, 0x01010101);
  const uint32_t later = 0x02020202;
  cb_test_ok(cubert_handle_fill(b, h, &later, 4));
  cb_test_ok(cubert_sync_device(a));
  expect_words(a, h, later, "after A's launch then B's fill");
  cubert_handle_release(h);
  cubert_kernel_release(slow);
  cubert_client_destroy(a);
  cubert_client_destroy(b);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_copy_and_launch_on_another_stream_see_a_slow_launch) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) {
    cb_test_close(&env);
    return;
  }
  cubert_stream sa, sb;
  cubert_client *a = pinned_client(&env, 0, &sa), *b = pinned_client(&env, 0, &sb);
  cubert_kernel *slow = slow_fill_kernel(), *copy = NULL;
  cb_test_ok(cubert_builtin_kernel(CUBERT_BUILTIN_COPY_U32, &copy));
  const uint64_t n = 2048;
  cubert_handle *x = filled(a, n * 4, 0), *z = filled(b, n * 4, 0), *w = filled(b, n * 4, 0);
  cb_test_ok(cubert_sync_device(a));

  launch_slow_fill(a, slow, x, 0x600DF00D);
  cb_test_ok(cubert_handle_copy(b, x, z));
  expect_words(b, z, 0x600DF00D, "copy on B of what A wrote");

  launch_slow_fill(a, slow, x, 0x0BADCAFE);
  cubert_arg args[3] = {cubert_arg_buffer(x), cubert_arg_buffer(w), cubert_arg_scalar(&n, 8)};
  cubert_launch_config cfg = {{4, 1, 1}, {64, 1, 1}, 0};
  cb_test_ok(cubert_launch(b, copy, &cfg, args, 3));
  expect_words(b, w, 0x0BADCAFE, "kernel on B reading what A wrote");
  cubert_handle_release(x);
  cubert_handle_release(z);
  cubert_handle_release(w);
  cubert_kernel_release(copy);
  cubert_kernel_release(slow);
  cubert_client_destroy(a);
  cubert_client_destroy(b);
  cb_test_close(&env);
}
END_TEST

/* A slow kernel copying in -> out after `ms` milliseconds. */
static cubert_status slow_copy_host(const cubert_host_launch *l, char *message, size_t capacity) {
  if (l->nargs != 3 || l->sizes[0] != l->sizes[1] || l->sizes[2] != 4) {
    snprintf(message, capacity, "slow_copy: wrong arguments");
    return CUBERT_ERR_INVALID_ARGUMENT;
  }
  uint32_t ms;
  memcpy(&ms, l->args[2], 4);
  sleep_ms(ms);
  memcpy(l->args[1], l->args[0], l->sizes[0]);
  atomic_fetch_add(&slow_done, 1);
  return CUBERT_OK;
}

static cubert_kernel *slow_copy_kernel(void) {
  static const cubert_param params[] = {{"in", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0},
                                        {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0},
                                        {"ms", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 4}};
  cubert_kernel_desc d = {.name = "slow_copy", .params = params, .nparams = 3, .host_fn = slow_copy_host};
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_kernel_create(&d, &k));
  return k;
}

static void launch_slow_copy(cubert_client *c, cubert_kernel *k, cubert_handle *in, cubert_handle *out,
                             uint32_t ms) {
  cubert_arg args[3] = {cubert_arg_buffer(in), cubert_arg_buffer(out), cubert_arg_scalar(&ms, 4)};
  cubert_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0};
  cb_test_ok(cubert_launch(c, k, &cfg, args, 3));
}

/* Write after read: work on B that overwrites memory a pending kernel on A
 * still reads must wait for that kernel, or the kernel reads bytes written
 * after it was enqueued. The memory's last writer is B itself, so waiting
 * for the last writer alone is not enough. */
START_TEST(test_write_on_another_stream_waits_for_a_slow_reader) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) {
    cb_test_close(&env);
    return;
  }
  cubert_stream sa, sb;
  cubert_client *a = pinned_client(&env, 0, &sa), *b = pinned_client(&env, 0, &sb);
  cubert_kernel *slow = slow_copy_kernel();
  cubert_handle *x = filled(b, 4096, 0x0A0A0A0A); /* last written on B */
  cubert_handle *y = filled(a, 4096, 0);
  cb_test_ok(cubert_sync_device(a));
  launch_slow_copy(a, slow, x, y, SLOW_MS); /* A reads x */
  const uint32_t later = 0x0B0B0B0B;
  cb_test_ok(cubert_handle_fill(b, x, &later, 4)); /* B overwrites x */
  cb_test_ok(cubert_sync_device(a));
  expect_words(a, y, 0x0A0A0A0A, "what A's kernel read of x");
  expect_words(a, x, later, "x after B's fill");
  cubert_handle_release(x);
  cubert_handle_release(y);
  cubert_kernel_release(slow);
  cubert_client_destroy(a);
  cubert_client_destroy(b);
  cb_test_close(&env);
}
END_TEST

/* The same with two readers on two streams: the one enqueued first is the
 * slower, so waiting only for the latest reader lets the write land under
 * the first. */
START_TEST(test_write_on_another_stream_waits_for_every_slow_reader) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) {
    cb_test_close(&env);
    return;
  }
  cubert_stream sa, sb, sc;
  cubert_client *a = pinned_client(&env, 0, &sa), *b = pinned_client(&env, 0, &sb);
  cubert_client *c = pinned_client(&env, 0, &sc);
  cubert_kernel *slow = slow_copy_kernel();
  cubert_handle *x = filled(b, 4096, 0x0A0A0A0A);
  cubert_handle *ya = filled(a, 4096, 0), *yc = filled(c, 4096, 0);
  cb_test_ok(cubert_sync_device(a));
  launch_slow_copy(a, slow, x, ya, 3 * SLOW_MS); /* the slow reader */
  launch_slow_copy(c, slow, x, yc, SLOW_MS);     /* the latest reader */
  const uint32_t later = 0x0B0B0B0B;
  cb_test_ok(cubert_handle_fill(b, x, &later, 4));
  cb_test_ok(cubert_sync_device(a));
  expect_words(a, ya, 0x0A0A0A0A, "what the first reader (stream A) read of x");
  expect_words(a, yc, 0x0A0A0A0A, "what the second reader (stream C) read of x");
  expect_words(a, x, later, "x after B's fill");
  cubert_handle_release(x);
  cubert_handle_release(ya);
  cubert_handle_release(yc);
  cubert_kernel_release(slow);
  cubert_client_destroy(a);
  cubert_client_destroy(b);
  cubert_client_destroy(c);
  cb_test_close(&env);
}
END_TEST

/* The same with one stream reading twice: a fast read, then a slow one.
 * The stream's reader entry must name its latest read: B, which already
 * waited for A up to a point after the fast read (through z), would
 * otherwise find that wait enough and write x under the slow read. x is
 * last written on A, so both reads take the launch's one pass
 * (cb_mark_local). */
START_TEST(test_write_on_another_stream_waits_for_a_readers_latest_read) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) {
    cb_test_close(&env);
    return;
  }
  cubert_stream sa, sb;
  cubert_client *a = pinned_client(&env, 0, &sa), *b = pinned_client(&env, 0, &sb);
  cubert_kernel *slow = slow_copy_kernel();
  cubert_handle *x = filled(a, 4096, 0x0A0A0A0A); /* last written on A */
  cubert_handle *y1 = filled(a, 4096, 0), *y2 = filled(a, 4096, 0), *z = filled(a, 64, 0);
  cb_test_ok(cubert_sync_device(a));
  launch_slow_copy(a, slow, x, y1, 0); /* A reads x, fast */
  const uint32_t one = 1, two = 2, later = 0x0B0B0B0B;
  cb_test_ok(cubert_handle_fill(a, z, &one, 4)); /* A writes z after that read */
  cb_test_ok(cubert_handle_fill(b, z, &two, 4)); /* B waits for A up to that write */
  launch_slow_copy(a, slow, x, y2, SLOW_MS);     /* A reads x again, slowly */
  cb_test_ok(cubert_handle_fill(b, x, &later, 4)); /* B overwrites x */
  cb_test_ok(cubert_sync_device(a));
  expect_words(a, y1, 0x0A0A0A0A, "what A's first read of x got");
  expect_words(a, y2, 0x0A0A0A0A, "what A's second (slow) read of x got");
  expect_words(a, x, later, "x after B's fill");
  expect_words(a, z, two, "z after B's fill");
  cubert_handle_release(x);
  cubert_handle_release(y1);
  cubert_handle_release(y2);
  cubert_handle_release(z);
  cubert_kernel_release(slow);
  cubert_client_destroy(a);
  cubert_client_destroy(b);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_memory_of_pending_work_is_not_reused) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) {
    cb_test_close(&env);
    return;
  }
  cubert_stream sa, sb;
  cubert_client *a = pinned_client(&env, 0, &sa), *b = pinned_client(&env, 0, &sb);
  cubert_kernel *slow = slow_fill_kernel();
  atomic_store(&slow_done, 0);
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty(a, 4096, &h));
  launch_slow_fill(a, slow, h, 0xDEADDEAD);
  cubert_handle_release(h); /* the launch still holds the memory */
  /* new memory of the same size on B, written at once */
  cubert_handle *n = filled(b, 4096, 0x12345678);
  cb_test_ok(cubert_sync_device(a));
  ck_assert_int_eq(atomic_load(&slow_done), 1);
  expect_words(b, n, 0x12345678, "new memory after the old tenant's kernel ran");
  cubert_handle_release(n);
  cubert_kernel_release(slow);
  cubert_client_destroy(a);
  cubert_client_destroy(b);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ syncs */

START_TEST(test_sync_waits_for_the_clients_stream) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) {
    cb_test_close(&env);
    return;
  }
  cubert_stream sa;
  cubert_client *a = pinned_client(&env, 0, &sa);
  cubert_kernel *slow = slow_fill_kernel();
  cubert_handle *h = filled(a, 256, 0);
  atomic_store(&slow_done, 0);
  launch_slow_fill(a, slow, h, 1);
  launch_slow_fill(a, slow, h, 2);
  cb_test_ok(cubert_sync(a));
  ck_assert_int_eq(atomic_load(&slow_done), 2);
  cb_test_ok(cubert_sync(a)); /* nothing pending: fine */
  /* an unpinned client syncs the thread's stream */
  cubert_client *c = env.clients[0];
  cubert_handle *g = filled(c, 256, 0);
  launch_slow_fill(c, slow, g, 3);
  cb_test_ok(cubert_sync(c));
  ck_assert_int_eq(atomic_load(&slow_done), 3);
  cubert_handle_release(g);
  cubert_handle_release(h);
  cubert_kernel_release(slow);
  cubert_client_destroy(a);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_sync_stream_waits_for_that_stream) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) {
    cb_test_close(&env);
    return;
  }
  cubert_stream sa, sb;
  cubert_client *a = pinned_client(&env, 0, &sa), *b = pinned_client(&env, 0, &sb);
  cubert_kernel *slow = slow_fill_kernel();
  cubert_handle *h = filled(a, 256, 0);
  atomic_store(&slow_done, 0);
  launch_slow_fill(a, slow, h, 7);
  /* B's client waits for A's stream by number */
  cb_test_ok(cubert_sync_stream(b, sa));
  ck_assert_int_eq(atomic_load(&slow_done), 1);
  cubert_handle_release(h);
  cubert_kernel_release(slow);
  cubert_client_destroy(a);
  cubert_client_destroy(b);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_sync_device_waits_for_every_stream) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) {
    cb_test_close(&env);
    return;
  }
  cubert_stream sa, sb;
  cubert_client *a = pinned_client(&env, 0, &sa), *b = pinned_client(&env, 0, &sb);
  cubert_client *c = env.clients[0];
  cubert_kernel *slow = slow_fill_kernel();
  cubert_handle *ha = filled(a, 256, 0), *hb = filled(b, 256, 0), *hc = filled(c, 256, 0);
  cb_test_ok(cubert_sync_device(c));
  atomic_store(&slow_done, 0);
  launch_slow_fill(a, slow, ha, 1);
  launch_slow_fill(b, slow, hb, 2);
  launch_slow_fill(c, slow, hc, 3);
  cb_test_ok(cubert_sync_device(c));
  ck_assert_int_eq(atomic_load(&slow_done), 3);
  /* other devices are not waited for, and their work is not lost */
  if (env.devices > 1) {
    cubert_client *d1 = env.clients[1];
    cubert_handle *h1 = filled(d1, 256, 0);
    launch_slow_fill(d1, slow, h1, 4);
    cb_test_ok(cubert_sync_device(c));
    cb_test_ok(cubert_sync_device(d1));
    ck_assert_int_eq(atomic_load(&slow_done), 4);
    expect_words(d1, h1, 4, "device 1");
    cubert_handle_release(h1);
  }
  expect_words(c, ha, 1, "stream A");
  expect_words(c, hb, 2, "stream B");
  expect_words(c, hc, 3, "thread stream");
  cubert_handle_release(ha);
  cubert_handle_release(hb);
  cubert_handle_release(hc);
  cubert_kernel_release(slow);
  cubert_client_destroy(a);
  cubert_client_destroy(b);
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
  Suite *s = suite_create("streams");
  LOOP(s, test_each_thread_has_its_own_current_stream);
  LOOP(s, test_created_stream_pins_a_client);
  LOOP(s, test_bad_stream_ids_are_refused);
  LOOP(s, test_read_on_another_stream_sees_a_slow_launch);
  LOOP(s, test_write_queued_behind_slow_work_is_seen_on_another_stream);
  LOOP(s, test_write_on_another_stream_lands_after_a_slow_launch);
  LOOP(s, test_copy_and_launch_on_another_stream_see_a_slow_launch);
  LOOP(s, test_write_on_another_stream_waits_for_a_slow_reader);
  LOOP(s, test_write_on_another_stream_waits_for_every_slow_reader);
  LOOP(s, test_write_on_another_stream_waits_for_a_readers_latest_read);
  LOOP(s, test_memory_of_pending_work_is_not_reused);
  LOOP(s, test_sync_waits_for_the_clients_stream);
  LOOP(s, test_sync_stream_waits_for_that_stream);
  LOOP(s, test_sync_device_waits_for_every_stream);
  return cb_test_run(s);
}
