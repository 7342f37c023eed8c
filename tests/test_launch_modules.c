/* tests/test_launch_modules.c: the module cache and compiles outside the
 * device lock (runtime/module.c), on the host backend, whose
 * module_prepare calls a test's hook in place of a slow compile
 * (backends/host/host_testing.h):
 *   - a compile in flight for one kernel does not hold up a launch of
 *     another kernel on the same device;
 *   - two threads launching one new kernel prepare and load it once;
 *   - releasing a kernel unloads its module on every device; destroying
 *     the runtime unloads the rest, and a kernel released after that is
 *     still safe to release;
 *   - a kernel released while its launches are pending lives until they
 *     complete, whether the device pins it or its records each hold it. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "backends/host/host_testing.h"
#include "testutil.h"

static atomic_int runs_slow, runs_fast;

static cubert_status slow_host(const cubert_host_launch *l, char *message, size_t cap) {
  (void)l, (void)message, (void)cap;
  atomic_fetch_add(&runs_slow, 1);
  return CUBERT_OK;
}

static cubert_status fast_host(const cubert_host_launch *l, char *message, size_t cap) {
  (void)l, (void)message, (void)cap;
  atomic_fetch_add(&runs_fast, 1);
  return CUBERT_OK;
}

/* Also zeroes the run counters (CK_FORK=no runs every test in one process). */
static bool host_only(cb_test_env *env) {
  atomic_store(&runs_slow, 0);
  atomic_store(&runs_fast, 0);
  if (strcmp(env->backend, "host") == 0) return true;
  cb_test_skip("no device (%s: the test's hooks are the host backend's) in %s", env->backend, tcase_name());
  cb_test_close(env);
  return false;
}

static cubert_kernel *kernel(const char *name, cubert_host_fn fn) {
  cubert_kernel_desc d = {.name = name, .host_fn = fn};
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_kernel_create(&d, &k));
  return k;
}

static const cubert_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0};

static bool wait_sem(sem_t *s, int seconds) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec += seconds;
  int rc;
  while ((rc = sem_timedwait(s, &t)) != 0 && errno == EINTR) {
  }
  return rc == 0;
}

/* ------------------------------------------------------------ compile in flight */

typedef struct gate {
  sem_t entered, release;
} gate;

/* The "compile" of kernel `slow` blocks until the test releases it. */
static void gate_hook(const char *name, void *ctx) {
  gate *g = ctx;
  if (strcmp(name, "slow") != 0) return;
  sem_post(&g->entered);
  (void)wait_sem(&g->release, 30);
}

typedef struct launcher {
  cubert_client *c;
  cubert_kernel *k;
  cubert_status st;
} launcher;

static void *launch_thread(void *arg) {
  launcher *l = arg;
  l->st = cubert_launch(l->c, l->k, &one, NULL, 0);
  return NULL;
}

START_TEST(test_a_compile_in_flight_does_not_block_another_kernel) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) return;
  gate g;
  sem_init(&g.entered, 0, 0);
  sem_init(&g.release, 0, 0);
  cb_host_testing_set_prepare_hook(gate_hook, &g);
  cubert_kernel *slow = kernel("slow", slow_host), *fast = kernel("fast", fast_host);
  launcher l = {env.clients[0], slow, CUBERT_ERR_TIMEOUT};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, launch_thread, &l), 0);
  ck_assert_msg(wait_sem(&g.entered, 30), "the first launch of `slow` never prepared it");
  /* `slow` is compiling: another kernel launches, runs and syncs meanwhile */
  cb_test_ok(cubert_launch(env.clients[0], fast, &one, NULL, 0));
  cb_test_ok(cubert_launch(env.clients[0], fast, &one, NULL, 0));
  cb_test_ok(cubert_sync(env.clients[0]));
  ck_assert_int_eq(atomic_load(&runs_fast), 2);
  ck_assert_int_eq(atomic_load(&runs_slow), 0);
  sem_post(&g.release);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  cb_test_ok(l.st);
  cb_test_ok(cubert_sync_device(env.clients[0])); /* the thread's stream too */
  ck_assert_int_eq(atomic_load(&runs_slow), 1);
  cb_host_testing_set_prepare_hook(NULL, NULL);
  cubert_kernel_release(slow);
  cubert_kernel_release(fast);
  cb_test_close(&env);
  sem_destroy(&g.entered);
  sem_destroy(&g.release);
}
END_TEST

/* ------------------------------------------------------------ one compile */

static void sleepy_hook(const char *name, void *ctx) {
  (void)ctx;
  if (strcmp(name, "slow") != 0) return;
  struct timespec ts = {0, 200 * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

typedef struct racer {
  launcher l;
  pthread_barrier_t *start;
} racer;

static void *race_thread(void *arg) {
  racer *r = arg;
  pthread_barrier_wait(r->start);
  r->l.st = cubert_launch(r->l.c, r->l.k, &one, NULL, 0);
  return NULL;
}

START_TEST(test_two_threads_launching_one_new_kernel_compile_it_once) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) return;
  cb_host_testing_set_prepare_hook(sleepy_hook, NULL);
  cubert_kernel *slow = kernel("slow", slow_host);
  uint64_t prepares = cb_host_testing_prepares(), loads = cb_host_testing_loads();
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, 2);
  racer r[2];
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    r[i] = (racer){{env.clients[0], slow, CUBERT_ERR_TIMEOUT}, &start};
    ck_assert_int_eq(pthread_create(&t[i], NULL, race_thread, &r[i]), 0);
  }
  for (int i = 0; i < 2; i++) {
    ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    cb_test_ok(r[i].l.st);
  }
  cb_test_ok(cubert_sync_device(env.clients[0])); /* the threads' streams */
  ck_assert_int_eq(atomic_load(&runs_slow), 2);
  ck_assert_uint_eq(cb_host_testing_prepares() - prepares, 1);
  ck_assert_uint_eq(cb_host_testing_loads() - loads, 1);
  pthread_barrier_destroy(&start);
  cb_host_testing_set_prepare_hook(NULL, NULL);
  cubert_kernel_release(slow);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ lifetime */

START_TEST(test_releasing_a_kernel_unloads_its_modules) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  if (!host_only(&env)) return;
  int64_t before = cb_host_testing_live_modules();
  cubert_kernel *k = kernel("fast", fast_host), *kept = kernel("slow", slow_host);
  for (int d = 0; d < 2; d++) {
    cb_test_ok(cubert_launch(env.clients[d], k, &one, NULL, 0));
    cb_test_ok(cubert_launch(env.clients[d], k, &one, NULL, 0)); /* cached: no second load */
    cb_test_ok(cubert_launch(env.clients[d], kept, &one, NULL, 0));
    cb_test_ok(cubert_sync(env.clients[d]));
  }
  ck_assert_int_eq(atomic_load(&runs_fast), 4);
  ck_assert_int_eq(cb_host_testing_live_modules() - before, 4);
  cubert_kernel_release(k);
  /* the finished work records held the last references: the syncs reap them */
  for (int d = 0; d < 2; d++) cb_test_ok(cubert_sync(env.clients[d]));
  ck_assert_int_eq(cb_host_testing_live_modules() - before, 2);
  /* a kernel of the same name loads afresh */
  cubert_kernel *again = kernel("fast", fast_host);
  cb_test_ok(cubert_launch(env.clients[1], again, &one, NULL, 0));
  cb_test_ok(cubert_sync(env.clients[1]));
  ck_assert_int_eq(atomic_load(&runs_fast), 5);
  ck_assert_int_eq(cb_host_testing_live_modules() - before, 3);
  cubert_kernel_release(again);
  cb_test_ok(cubert_sync(env.clients[1]));
  ck_assert_int_eq(cb_host_testing_live_modules() - before, 2);
  /* the runtime's devices unload what is left; the kernel outlives them */
  cb_test_close(&env);
  ck_assert_int_eq(cb_host_testing_live_modules(), before);
  cubert_kernel_release(kept);
  ck_assert_int_eq(cb_host_testing_live_modules(), before);
}
END_TEST

/* A kernel run that waits until the test opens the gate (the stream's
 * worker thread blocks: the work stays pending). */
static sem_t held_gate;

static cubert_status held_host(const cubert_host_launch *l, char *message, size_t cap) {
  (void)l, (void)message, (void)cap;
  (void)wait_sem(&held_gate, 30);
  atomic_fetch_add(&runs_slow, 1);
  return CUBERT_OK;
}

/* Pending launches keep their kernel alive after the caller released it:
 * the device's pinned kernel (its records share one reference, work.c) and
 * another kernel launched between them (a reference a record) alike; the
 * last record reaped drops each, and both modules go. */
START_TEST(test_a_released_kernel_lives_until_its_launches_complete) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) return;
  ck_assert_int_eq(sem_init(&held_gate, 0, 0), 0);
  int64_t before = cb_host_testing_live_modules();
  cubert_kernel *held = kernel("held", held_host), *fast = kernel("fast", fast_host);
  cubert_client *c = env.clients[0];
  cb_test_ok(cubert_launch(c, held, &one, NULL, 0)); /* pins `held` on the device */
  cb_test_ok(cubert_launch(c, fast, &one, NULL, 0)); /* a reference of its own */
  cb_test_ok(cubert_launch(c, held, &one, NULL, 0));
  cb_test_ok(cubert_launch(c, fast, &one, NULL, 0));
  cubert_kernel_release(held);
  cubert_kernel_release(fast);
  /* nothing ran yet (the first run waits at the gate): both modules stay */
  ck_assert_int_eq(cb_host_testing_live_modules() - before, 2);
  /* a launch of a third kernel reaps nothing that is pending */
  cubert_kernel *other = kernel("other", fast_host);
  cb_test_ok(cubert_launch(c, other, &one, NULL, 0));
  ck_assert_int_eq(cb_host_testing_live_modules() - before, 3);
  for (int i = 0; i < 2; i++) sem_post(&held_gate);
  cb_test_ok(cubert_sync(c));
  ck_assert_int_eq(atomic_load(&runs_slow), 2);
  ck_assert_int_eq(atomic_load(&runs_fast), 3);
  /* the records are reaped: `held` and `fast` went with their last one */
  ck_assert_int_eq(cb_host_testing_live_modules() - before, 1);
  /* and the device pins a kernel again afterwards */
  cb_test_ok(cubert_launch(c, other, &one, NULL, 0));
  cubert_kernel_release(other);
  cb_test_ok(cubert_sync(c));
  ck_assert_int_eq(cb_host_testing_live_modules(), before);
  sem_destroy(&held_gate);
  cb_test_close(&env);
}
END_TEST

/* Many kernels made and dropped on one device: the cache keeps none of them
 * (the hash table's deletions keep every other entry findable). */
START_TEST(test_kernels_made_and_dropped_leave_no_module) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) return;
  int64_t before = cb_host_testing_live_modules();
  cubert_kernel *k[64];
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 64; i++) {
      k[i] = kernel("fast", fast_host);
      cb_test_ok(cubert_launch(env.clients[0], k[i], &one, NULL, 0));
    }
    cb_test_ok(cubert_sync(env.clients[0]));
    ck_assert_int_eq(cb_host_testing_live_modules() - before, 64);
    /* every other one first, then the rest, relaunching the survivors */
    for (int i = 0; i < 64; i += 2) cubert_kernel_release(k[i]);
    cb_test_ok(cubert_sync(env.clients[0]));
    ck_assert_int_eq(cb_host_testing_live_modules() - before, 32);
    uint64_t loads = cb_host_testing_loads();
    for (int i = 1; i < 64; i += 2) cb_test_ok(cubert_launch(env.clients[0], k[i], &one, NULL, 0));
    cb_test_ok(cubert_sync(env.clients[0]));
    ck_assert_uint_eq(cb_host_testing_loads(), loads); /* all still cached */
    for (int i = 1; i < 64; i += 2) cubert_kernel_release(k[i]);
    cb_test_ok(cubert_sync(env.clients[0]));
    ck_assert_int_eq(cb_host_testing_live_modules(), before);
  }
  ck_assert_int_eq(atomic_load(&runs_fast), 3 * 96);
  cb_test_close(&env);
}
END_TEST

int main(void) {
  Suite *s = suite_create("launch_modules");
  TCase *tc = tcase_create("modules");
  cb_test_add_backend_loop(tc, test_a_compile_in_flight_does_not_block_another_kernel);
  cb_test_add_backend_loop(tc, test_two_threads_launching_one_new_kernel_compile_it_once);
  cb_test_add_backend_loop(tc, test_releasing_a_kernel_unloads_its_modules);
  cb_test_add_backend_loop(tc, test_kernels_made_and_dropped_leave_no_module);
  cb_test_add_backend_loop(tc, test_a_released_kernel_lives_until_its_launches_complete);
  suite_add_tcase(s, tc);
  return cb_test_run(s);
}
