/* tests/testutil.h: helpers shared by every Check suite (tests/test_*.c).
 *
 * Backend parametrisation. Suites run each test once per backend of the
 * list cb_test_backends ("host", then "hip"), with Check's loop tests:
 *
 *   START_TEST(test_copy_round_trips) {
 *     cb_test_env env;
 *     if (!cb_test_open(_i, 1, &env)) return;   // printed "skipped: ..."
 *     ... env.runtime, env.clients[0], env.devices ...
 *     cb_test_close(&env);
 *   }
 *   ...
 *   cb_test_add_backend_loop(tc, test_copy_round_trips);
 *
 * The list is fixed at compile time, and the runtime is created inside the
 * test, so that with Check's default fork mode every GPU context is made in
 * the child process (a context made before a fork is unusable in the child).
 * Never create a runtime in main() before srunner_run_all().
 *
 * A backend that is not built, has no device, or has fewer devices than the
 * test needs is skipped with a line "skipped: no device (...)" on stderr;
 * ctest keeps it in the log, and ci/test.sh lists every skip after a run.
 * $CUBERT_TEST_BACKENDS ("host", "host,hip") narrows the list.
 *
 * Building (tests/CMakeLists.txt): each tests/test_<area>_*.c is one
 * executable and one ctest test labelled "unit" and <area>, linked with
 * libcubert.a (cb_ internals reachable) and Check, compiled with
 * -D_GNU_SOURCE and the repository root on the include path. ctest sets
 * CK_DEFAULT_TIMEOUT=60 (times CK_TIMEOUT_MULTIPLIER, 4 under sanitizers);
 * CK_RUN_CASE=<tcase> runs one case, CK_FORK=no runs in one process.
 *
 * Ownership: cb_test_env owns its runtime and clients; cb_test_close()
 * destroys them (clients first). Strings returned are static. */
#ifndef CUBERT_TESTS_TESTUTIL_H
#define CUBERT_TESTS_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubert/cubert.h"

/* Backends in the order suites loop over them. */
#define CB_TEST_BACKEND_COUNT 2
extern const char *const cb_test_backends[CB_TEST_BACKEND_COUNT];

/* At most this many clients are opened by cb_test_open(). */
#define CB_TEST_MAX_CLIENTS 16

/* Host backend defaults for tests: small devices, so leaks and pools show. */
#define CB_TEST_HOST_DEVICES 4
#define CB_TEST_HOST_MEMORY (256ull << 20)

typedef struct cb_test_env {
  const char *backend;         /* "host", "hip" */
  cubert_runtime *runtime;
  int devices;                 /* devices of the runtime */
  int nclients;                /* min(devices, CB_TEST_MAX_CLIENTS) */
  cubert_client *clients[CB_TEST_MAX_CLIENTS]; /* clients[d] is device d */
} cb_test_env;

/* Name of backend `i` (the loop index `_i`), NULL when out of range. */
const char *cb_test_backend_name(int i);

/* True when `backend` was compiled into this build. */
bool cb_test_backend_built(const char *backend);

/* Options the tests use for `backend`: only that backend, host devices
 * CB_TEST_HOST_DEVICES of CB_TEST_HOST_MEMORY bytes, and no fault rules from
 * the environment (faults = ""). */
void cb_test_options(const char *backend, cubert_runtime_options *options);

/* Creates a runtime on backend `i` (cb_test_options) and one client per
 * device. Returns false, after printing "skipped: ...", when the backend is
 * not built, is excluded by $CUBERT_TEST_BACKENDS, or has fewer than
 * `min_devices` devices. Any other failure fails the test (ck_abort). */
bool cb_test_open(int i, int min_devices, cb_test_env *env);

/* The same with caller-chosen options (`options->backends` is overridden
 * with backend i's name). */
bool cb_test_open_with(int i, const cubert_runtime_options *options, int min_devices,
                       cb_test_env *env);

/* Destroys clients then the runtime; safe on a zeroed env. */
void cb_test_close(cb_test_env *env);

/* Adds `fn` to `tc` as a loop test over every backend (_i is the index). */
#define cb_test_add_backend_loop(tc, fn) \
  tcase_add_loop_test((tc), (fn), 0, CB_TEST_BACKEND_COUNT)

/* Prints "skipped: <why>" on stderr and flushes it. */
void cb_test_skip(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Fails the test when `status` is not CUBERT_OK, quoting the call and the
 * thread's last error message. */
#define cb_test_ok(call)                                                             \
  do {                                                                               \
    cubert_status cb_test_st_ = (call);                                              \
    ck_assert_msg(cb_test_st_ == CUBERT_OK, "%s returned %s: %s", #call,              \
                  cubert_status_name(cb_test_st_), cubert_last_error_message());     \
  } while (0)

/* Fails the test when `call` does not return `expected`. */
#define cb_test_status(call, expected)                                               \
  do {                                                                               \
    cubert_status cb_test_st_ = (call);                                              \
    ck_assert_msg(cb_test_st_ == (expected), "%s returned %s, expected %s (%s)",     \
                  #call, cubert_status_name(cb_test_st_), cubert_status_name(expected), \
                  cubert_last_error_message());                                      \
  } while (0)

/* A pseudo-random byte pattern: byte k of a buffer made with `seed`. */
uint8_t cb_test_pattern_byte(uint64_t seed, uint64_t k);
/* Fills `buf` with the pattern; returns `buf`. */
void *cb_test_pattern(void *buf, size_t size, uint64_t seed);
/* Index of the first byte of `buf` not matching the pattern, or `size`. */
size_t cb_test_pattern_mismatch(const void *buf, size_t size, uint64_t seed);

/* Runs `suite` (Check's fork mode unless CK_FORK=no), frees the runner and
 * returns the process exit code: 0 when every test passed. */
int cb_test_run(Suite *suite);

#endif
