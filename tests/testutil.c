/* tests/testutil.c: backend parametrisation, skips, patterns and the suite
 * runner shared by every Check suite (see testutil.h). */
#include "tests/testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cb_test_backends[CB_TEST_BACKEND_COUNT] = {"host", "hip"};

const char *cb_test_backend_name(int i) {
  if (i < 0 || i >= CB_TEST_BACKEND_COUNT) return NULL;
  return cb_test_backends[i];
}

bool cb_test_backend_built(const char *backend) {
  if (strcmp(backend, "host") == 0) return true;
#if defined(CB_TEST_HAVE_HIP) && CB_TEST_HAVE_HIP
  if (strcmp(backend, "hip") == 0) return true;
#endif
  return false;
}

/* True when $CUBERT_TEST_BACKENDS is unset or lists `backend`. */
static bool backend_selected(const char *backend) {
  const char *list = getenv("CUBERT_TEST_BACKENDS");
  if (list == NULL || *list == '\0') return true;
  size_t n = strlen(backend);
  for (const char *p = list; *p != '\0';) {
    size_t len = strcspn(p, ", ");
    if (len == n && strncmp(p, backend, n) == 0) return true;
    p += len;
    p += strspn(p, ", ");
  }
  return false;
}

void cb_test_skip(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("skipped: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  fflush(stderr);
  va_end(ap);
}

void cb_test_options(const char *backend, cubert_runtime_options *options) {
  cubert_runtime_options_init(options);
  options->backends = backend;
  options->host_devices = CB_TEST_HOST_DEVICES;
  options->host_memory = CB_TEST_HOST_MEMORY;
  options->host_peer_deny = "";
  options->faults = "";
}

bool cb_test_open(int i, int min_devices, cb_test_env *env) {
  cubert_runtime_options options;
  cb_test_options(cb_test_backend_name(i) != NULL ? cb_test_backend_name(i) : "?", &options);
  return cb_test_open_with(i, &options, min_devices, env);
}

bool cb_test_open_with(int i, const cubert_runtime_options *options, int min_devices,
                       cb_test_env *env) {
  memset(env, 0, sizeof *env);
  const char *backend = cb_test_backend_name(i);
  ck_assert_msg(backend != NULL, "backend index %d out of range", i);
  env->backend = backend;
  const char *test = tcase_name();
  if (test == NULL) test = "?";
  if (!cb_test_backend_built(backend)) {
    cb_test_skip("no device (%s backend not built) in %s", backend, test);
    return false;
  }
  if (!backend_selected(backend)) {
    cb_test_skip("no device (%s backend excluded by CUBERT_TEST_BACKENDS) in %s", backend, test);
    return false;
  }

  cubert_runtime_options opts = *options;
  opts.backends = backend;
  cubert_status st = cubert_runtime_create(&opts, &env->runtime);
  ck_assert_msg(st == CUBERT_OK, "cubert_runtime_create(%s) returned %s: %s", backend,
                cubert_status_name(st), cubert_last_error_message());
  env->devices = cubert_runtime_device_count(env->runtime);
  if (env->devices < min_devices) {
    cb_test_skip("no device (%s backend has %d device%s, %s needs %d)", backend, env->devices,
                 env->devices == 1 ? "" : "s", test, min_devices);
    cb_test_close(env);
    return false;
  }
  env->nclients = env->devices < CB_TEST_MAX_CLIENTS ? env->devices : CB_TEST_MAX_CLIENTS;
  for (int d = 0; d < env->nclients; d++) {
    st = cubert_client_create(env->runtime, d, &env->clients[d]);
    ck_assert_msg(st == CUBERT_OK, "cubert_client_create(%s device %d) returned %s: %s", backend,
                  d, cubert_status_name(st), cubert_last_error_message());
  }
  return true;
}

void cb_test_close(cb_test_env *env) {
  for (int d = 0; d < CB_TEST_MAX_CLIENTS; d++) {
    if (env->clients[d] != NULL) cubert_client_destroy(env->clients[d]);
    env->clients[d] = NULL;
  }
  env->nclients = 0;
  if (env->runtime != NULL) cubert_runtime_destroy(env->runtime);
  env->runtime = NULL;
  env->devices = 0;
}

/* splitmix64: cheap, and every byte depends on seed and position. */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint8_t cb_test_pattern_byte(uint64_t seed, uint64_t k) {
  return (uint8_t)(mix(seed * 0x100000001b3ull + (k >> 3)) >> (8 * (k & 7)));
}

void *cb_test_pattern(void *buf, size_t size, uint64_t seed) {
  uint8_t *b = buf;
  for (size_t k = 0; k < size; k++) b[k] = cb_test_pattern_byte(seed, k);
  return buf;
}

size_t cb_test_pattern_mismatch(const void *buf, size_t size, uint64_t seed) {
  const uint8_t *b = buf;
  for (size_t k = 0; k < size; k++)
    if (b[k] != cb_test_pattern_byte(seed, k)) return k;
  return size;
}

int cb_test_run(Suite *suite) {
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_ENV);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
