/* tests/test_runtime_api.c: the runtime's front door: creating and destroying
 * a runtime, its options (and the environment variables standing in for
 * them), device and backend queries, status strings, the version, the
 * thread's last error, and NULL arguments on every public function.
 *
 * Tests that need a device loop over every backend (tests/testutil.h);
 * tests of options and strings run once, on the host backend, which is
 * always built. */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/cubert.h"
#include "tests/testutil.h"

/* Fails unless the thread's last error message contains `needle`. */
#define expect_message(needle)                                                        \
  ck_assert_msg(strstr(cubert_last_error_message(), (needle)) != NULL,                \
                "last error message \"%s\" does not mention \"%s\"",                   \
                cubert_last_error_message(), (needle))

/* Environment variables a runtime reads; cleared so that the caller's shell
 * cannot change what a test sees. */
static const char *const runtime_env[] = {"CUBERT_BACKENDS",       "CUBERT_HOST_DEVICES",
                                          "CUBERT_HOST_MEMORY",    "CUBERT_HOST_PEER_DENY",
                                          "CUBERT_FAULTS",         "CUBERT_HOST_NODE"};

static void clear_runtime_env(void) {
  for (size_t i = 0; i < sizeof runtime_env / sizeof runtime_env[0]; i++) unsetenv(runtime_env[i]);
}

/* Host options as the tests use them (testutil), for tests that change them. */
static void host_options(cubert_runtime_options *o) { cb_test_options("host", o); }

/* ------------------------------------------------------------ runtime */

START_TEST(test_runtime_creates_one_client_per_device) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  ck_assert_int_eq(cubert_runtime_device_count(env.runtime), env.devices);
  if (strcmp(env.backend, "host") == 0) ck_assert_int_eq(env.devices, CB_TEST_HOST_DEVICES);
  for (int d = 0; d < env.nclients; d++) ck_assert_int_eq(cubert_client_device(env.clients[d]), d);
  /* a second client on a device is fine and names the same device */
  cubert_client *again = NULL;
  cb_test_ok(cubert_client_create(env.runtime, env.devices - 1, &again));
  ck_assert_int_eq(cubert_client_device(again), env.devices - 1);
  cubert_client_destroy(again);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_runtime_names_its_backends) {
  cb_test_env env;
  if (!cb_test_open(_i, 0, &env)) return;
  ck_assert_int_eq(cubert_runtime_backend_count(env.runtime), 1);
  ck_assert_str_eq(cubert_runtime_backend_name(env.runtime, 0), env.backend);
  ck_assert_ptr_null(cubert_runtime_backend_name(env.runtime, 1));
  ck_assert_ptr_null(cubert_runtime_backend_name(env.runtime, -1));
  cb_test_close(&env);
}
END_TEST

START_TEST(test_device_info_describes_each_device) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  bool host = strcmp(env.backend, "host") == 0;
  for (int d = 0; d < env.devices; d++) {
    cubert_device_info info;
    memset(&info, 0xA5, sizeof info);
    cb_test_ok(cubert_runtime_device_info(env.runtime, d, &info));
    ck_assert_int_eq(info.device, d);
    ck_assert_str_eq(info.backend, env.backend);
    ck_assert_int_eq(info.backend_index, d);
    ck_assert_msg(memchr(info.name, '\0', sizeof info.name) && info.name[0], "device %d has no name", d);
    ck_assert_msg(memchr(info.arch, '\0', sizeof info.arch) && info.arch[0], "device %d has no arch", d);
    ck_assert_ptr_nonnull(memchr(info.pci_bus_id, '\0', sizeof info.pci_bus_id));
    ck_assert_uint_gt(info.total_memory, 0);
    ck_assert_uint_gt(info.max_threads_per_block, 0);
    for (int k = 0; k < 3; k++) {
      ck_assert_uint_gt(info.max_block[k], 0);
      ck_assert_uint_gt(info.max_grid[k], 0);
    }
    ck_assert_uint_le(info.max_threads_per_block,
                      (uint64_t)info.max_block[0] * info.max_block[1] * info.max_block[2]);
    ck_assert_uint_gt(info.warp_size, 0);
    ck_assert_uint_gt(info.multiprocessors, 0);
    ck_assert(!info.lost);
    if (host) {
      char name[32];
      snprintf(name, sizeof name, "host:%d", d);
      ck_assert_str_eq(info.name, name);
      ck_assert_str_eq(info.arch, "host");
      ck_assert_str_eq(info.pci_bus_id, ""); /* no simulated node file */
      ck_assert_uint_eq(info.total_memory, CB_TEST_HOST_MEMORY);
      ck_assert_uint_eq(info.max_threads_per_block, 1024);
      ck_assert_uint_eq(info.max_shared_memory, 65536);
      ck_assert_uint_eq(info.warp_size, 32);
    }
  }
  /* devices that do not exist */
  cubert_device_info info;
  cb_test_status(cubert_runtime_device_info(env.runtime, env.devices, &info), CUBERT_ERR_NO_DEVICE);
  char num[16];
  snprintf(num, sizeof num, "%d", env.devices);
  expect_message(num);
  cb_test_status(cubert_runtime_device_info(env.runtime, -1, &info), CUBERT_ERR_NO_DEVICE);
  expect_message("-1");
  cubert_client *c = (cubert_client *)&info; /* a sentinel: must stay as it is */
  cb_test_status(cubert_client_create(env.runtime, env.devices, &c), CUBERT_ERR_NO_DEVICE);
  ck_assert_ptr_eq(c, (cubert_client *)&info);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_host_device_names_are_distinct) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  for (int a = 0; a < env.devices; a++)
    for (int b = a + 1; b < env.devices; b++) {
      cubert_device_info ia, ib;
      cb_test_ok(cubert_runtime_device_info(env.runtime, a, &ia));
      cb_test_ok(cubert_runtime_device_info(env.runtime, b, &ib));
      if (strcmp(env.backend, "host") == 0)
        ck_assert_str_ne(ia.name, ib.name);
      ck_assert_int_ne(ia.device, ib.device);
    }
  cb_test_close(&env);
}
END_TEST

START_TEST(test_device_link_is_unsupported_on_the_host_backend) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  cubert_device_link link = {7, 7, 7};
  cubert_status st = cubert_runtime_device_link(env.runtime, 0, 1, &link);
  if (strcmp(env.backend, "host") == 0) {
    ck_assert_int_eq(st, CUBERT_ERR_UNSUPPORTED);
    expect_message("host");
    ck_assert_int_eq(link.type, 7); /* untouched on failure */
  } else if (st == CUBERT_OK) {
    ck_assert_int_ge(link.type, CUBERT_LINK_TYPE_UNKNOWN);
    ck_assert_int_le(link.type, CUBERT_LINK_TYPE_PCIE);
  } else {
    ck_assert_int_eq(st, CUBERT_ERR_UNSUPPORTED);
  }
  cb_test_status(cubert_runtime_device_link(env.runtime, 0, env.devices, &link), CUBERT_ERR_NO_DEVICE);
  cb_test_status(cubert_runtime_device_link(env.runtime, -1, 0, &link), CUBERT_ERR_NO_DEVICE);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_options_struct_size_zero_is_refused) {
  clear_runtime_env();
  cubert_runtime_options o;
  host_options(&o);
  o.struct_size = 0;
  cubert_runtime *rt = (cubert_runtime *)&o; /* sentinel */
  cb_test_status(cubert_runtime_create(&o, &rt), CUBERT_ERR_INVALID_ARGUMENT);
  expect_message("struct_size");
  ck_assert_ptr_eq(rt, (cubert_runtime *)&o);
  /* a struct from a newer library than this one */
  o.struct_size = sizeof o + 8;
  cb_test_status(cubert_runtime_create(&o, &rt), CUBERT_ERR_INVALID_ARGUMENT);
  expect_message("struct_size");
}
END_TEST

START_TEST(test_options_of_an_older_layout_take_defaults_for_the_rest) {
  clear_runtime_env();
  cubert_runtime_options o;
  host_options(&o);
  o.host_devices = 7; /* beyond struct_size: must not be read */
  o.struct_size = (uint32_t)(offsetof(cubert_runtime_options, backends) + sizeof o.backends);
  cubert_runtime *rt = NULL;
  cb_test_ok(cubert_runtime_create(&o, &rt));
  ck_assert_int_eq(cubert_runtime_device_count(rt), 4); /* the documented default */
  cubert_device_info info;
  cb_test_ok(cubert_runtime_device_info(rt, 0, &info));
  ck_assert_uint_eq(info.total_memory, UINT64_C(1) << 30);
  cubert_runtime_destroy(rt);
}
END_TEST

START_TEST(test_unknown_backend_in_the_list_is_refused) {
  clear_runtime_env();
  static const char *const lists[] = {"cuda", "host,cuda", "hostx", "host,,host", "HOST",
                                      /* an empty name, at the end or alone, names no backend */
                                      "host,", ",host", ""};
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
    cubert_runtime_options o;
    host_options(&o);
    o.backends = lists[i];
    cubert_runtime *rt = NULL;
    cubert_status st = cubert_runtime_create(&o, &rt);
    ck_assert_msg(st == CUBERT_ERR_INVALID_ARGUMENT, "backends \"%s\" gave %s (%s)", lists[i],
                  cubert_status_name(st), cubert_last_error_message());
    expect_message(lists[i]);
    ck_assert_ptr_null(rt);
  }
  if (!cb_test_backend_built("hip")) {
    cubert_runtime_options o;
    host_options(&o);
    o.backends = "host,hip";
    cubert_runtime *rt = NULL;
    cb_test_status(cubert_runtime_create(&o, &rt), CUBERT_ERR_UNSUPPORTED);
    expect_message("hip");
  }
}
END_TEST

START_TEST(test_negative_host_devices_are_refused) {
  clear_runtime_env();
  static const int counts[] = {-1, -64, 65, 1000};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    cubert_runtime_options o;
    host_options(&o);
    o.host_devices = counts[i];
    cubert_runtime *rt = NULL;
    cb_test_status(cubert_runtime_create(&o, &rt), CUBERT_ERR_INVALID_ARGUMENT);
    expect_message("host_devices");
    char num[16];
    snprintf(num, sizeof num, "%d", counts[i]);
    expect_message(num);
    ck_assert_ptr_null(rt);
  }
}
END_TEST

START_TEST(test_host_memory_garbage_in_environment_is_refused) {
  clear_runtime_env();
  static const char *const garbage[] = {"lots", "12Q", "-5", "1.5G", "M", "99999999999999999999999"};
  for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
    setenv("CUBERT_HOST_MEMORY", garbage[i], 1);
    cubert_runtime_options o;
    host_options(&o);
    o.host_memory = 0; /* read the variable */
    cubert_runtime *rt = NULL;
    cubert_status st = cubert_runtime_create(&o, &rt);
    ck_assert_msg(st == CUBERT_ERR_INVALID_ARGUMENT, "CUBERT_HOST_MEMORY=%s gave %s (%s)", garbage[i],
                  cubert_status_name(st), cubert_last_error_message());
    expect_message("CUBERT_HOST_MEMORY");
    expect_message(garbage[i]);
    ck_assert_ptr_null(rt);
    if (rt) cubert_runtime_destroy(rt);
  }
  setenv("CUBERT_HOST_MEMORY", "0", 1);
  cubert_runtime_options o;
  host_options(&o);
  o.host_memory = 0;
  cubert_runtime *rt = NULL;
  cb_test_status(cubert_runtime_create(&o, &rt), CUBERT_ERR_INVALID_ARGUMENT);
  expect_message("CUBERT_HOST_MEMORY");

  /* the option wins over the variable: garbage there is never read */
  setenv("CUBERT_HOST_MEMORY", "lots", 1);
  host_options(&o);
  o.host_memory = 32ull << 20;
  cb_test_ok(cubert_runtime_create(&o, &rt));
  cubert_device_info info;
  cb_test_ok(cubert_runtime_device_info(rt, 0, &info));
  ck_assert_uint_eq(info.total_memory, 32ull << 20);
  cubert_runtime_destroy(rt);

  /* garbage device counts too */
  setenv("CUBERT_HOST_DEVICES", "two", 1);
  host_options(&o);
  o.host_devices = 0;
  rt = NULL;
  cb_test_status(cubert_runtime_create(&o, &rt), CUBERT_ERR_INVALID_ARGUMENT);
  expect_message("CUBERT_HOST_DEVICES");
  ck_assert_ptr_null(rt);
  clear_runtime_env();
}
END_TEST

START_TEST(test_null_options_read_the_environment) {
  clear_runtime_env();
  setenv("CUBERT_BACKENDS", "host", 1);
  setenv("CUBERT_HOST_DEVICES", "3", 1);
  setenv("CUBERT_HOST_MEMORY", "64M", 1);
  cubert_runtime *rt = NULL;
  cb_test_ok(cubert_runtime_create(NULL, &rt));
  ck_assert_int_eq(cubert_runtime_device_count(rt), 3);
  ck_assert_int_eq(cubert_runtime_backend_count(rt), 1);
  ck_assert_str_eq(cubert_runtime_backend_name(rt, 0), "host");
  for (int d = 0; d < 3; d++) {
    cubert_device_info info;
    cb_test_ok(cubert_runtime_device_info(rt, d, &info));
    ck_assert_uint_eq(info.total_memory, 64ull << 20);
  }
  cubert_runtime_destroy(rt);
  setenv("CUBERT_HOST_MEMORY", "2G", 1);
  cb_test_ok(cubert_runtime_create(NULL, &rt));
  cubert_device_info info;
  cb_test_ok(cubert_runtime_device_info(rt, 2, &info));
  ck_assert_uint_eq(info.total_memory, 2ull << 30);
  cubert_runtime_destroy(rt);
  /* every spelling of the size parser (base/env.h, README) */
  static const char *const spelled[] = {"96mb", "96MiB", "100663296"};
  for (size_t i = 0; i < sizeof spelled / sizeof spelled[0]; i++) {
    setenv("CUBERT_HOST_MEMORY", spelled[i], 1);
    cb_test_ok(cubert_runtime_create(NULL, &rt));
    cb_test_ok(cubert_runtime_device_info(rt, 0, &info));
    ck_assert_msg(info.total_memory == 96ull << 20, "CUBERT_HOST_MEMORY=%s", spelled[i]);
    cubert_runtime_destroy(rt);
  }
  clear_runtime_env();
}
END_TEST

/* ------------------------------------------------------------ strings */

START_TEST(test_status_strings_are_nonempty_and_distinct) {
  static const char *const names[] = {
#define NAME_(name, text) #name,
      CUBERT_STATUS_MAP(NAME_)
#undef NAME_
  };
  static const char *const texts[] = {
#define TEXT_(name, text) text,
      CUBERT_STATUS_MAP(TEXT_)
#undef TEXT_
  };
  ck_assert_int_eq(sizeof names / sizeof names[0], CUBERT_STATUS_COUNT_);
  for (int s = 0; s < CUBERT_STATUS_COUNT_; s++) {
    const char *str = cubert_status_string((cubert_status)s);
    const char *name = cubert_status_name((cubert_status)s);
    ck_assert_ptr_nonnull(str);
    ck_assert_ptr_nonnull(name);
    ck_assert_msg(str[0] != '\0', "status %d has an empty string", s);
    ck_assert_str_eq(str, texts[s]);
    ck_assert_str_eq(name, names[s]);
    for (int t = 0; t < s; t++) {
      ck_assert_msg(strcmp(str, cubert_status_string((cubert_status)t)) != 0,
                    "statuses %d and %d share the string \"%s\"", t, s, str);
      ck_assert_str_ne(name, cubert_status_name((cubert_status)t));
    }
  }
  ck_assert_int_eq(CUBERT_OK, 0);
  ck_assert_str_eq(cubert_status_name(CUBERT_OK), "OK");
  ck_assert_str_eq(cubert_status_name(CUBERT_ERR_DEVICE_LOST), "ERR_DEVICE_LOST");
  ck_assert_str_eq(cubert_status_string(CUBERT_ERR_DEVICE_LOST), "device lost");
  /* values outside the enum */
  ck_assert_str_eq(cubert_status_string(CUBERT_STATUS_COUNT_), "unknown status");
  ck_assert_str_eq(cubert_status_string((cubert_status)-1), "unknown status");
  ck_assert_str_eq(cubert_status_name(CUBERT_STATUS_COUNT_), "UNKNOWN");
  ck_assert_str_eq(cubert_status_name((cubert_status)12345), "UNKNOWN");
}
END_TEST

START_TEST(test_version_is_the_project_version) {
  const char *v = cubert_version();
  ck_assert_ptr_nonnull(v);
  ck_assert_str_eq(v, CUBERT_VERSION_STRING);
  unsigned major, minor, patch;
  int used = 0;
  ck_assert_int_eq(sscanf(v, "%u.%u.%u%n", &major, &minor, &patch, &used), 3);
  ck_assert_int_eq((int)strlen(v), used);
  ck_assert_uint_eq(major, CUBERT_VERSION_MAJOR);
  ck_assert_uint_eq(minor, CUBERT_VERSION_MINOR);
  ck_assert_uint_eq(patch, CUBERT_VERSION_PATCH);
  ck_assert_ptr_eq(cubert_version(), v); /* static */
}
END_TEST

/* ------------------------------------------------------------ last error */

typedef struct last_error_run {
  cubert_runtime *rt;
  char failure[256];
} last_error_run;

/* Runs in a thread of its own, so "no error yet" is known. */
static void *last_error_thread(void *arg) {
  last_error_run *run = arg;
#define FAIL_(...)                                                   \
  do {                                                               \
    snprintf(run->failure, sizeof run->failure, __VA_ARGS__);        \
    return NULL;                                                     \
  } while (0)
  if (cubert_last_error() != NULL) FAIL_("a new thread already has a last error");
  if (strcmp(cubert_last_error_message(), "") != 0) FAIL_("a new thread's message is not empty");

  cubert_device_info info;
  if (cubert_runtime_device_info(run->rt, 42, &info) != CUBERT_ERR_NO_DEVICE)
    FAIL_("device 42 was not refused");
  cubert_error *first = cubert_last_error();
  if (!first) FAIL_("a failed call recorded no error");
  if (cubert_error_status(first) != CUBERT_ERR_NO_DEVICE)
    FAIL_("the error's status is %s", cubert_status_name(cubert_error_status(first)));
  if (!strstr(cubert_error_message(first), "42"))
    FAIL_("the message \"%s\" does not name device 42", cubert_error_message(first));
  if (strcmp(cubert_error_message(first), cubert_last_error_message()) != 0)
    FAIL_("cubert_last_error_message differs from the error's message");
  if (cubert_error_failure_count(first) != 0) FAIL_("a plain error carries failures");
  if (cubert_error_failure(first, 0, NULL, NULL) != NULL) FAIL_("failure 0 of a plain error");
  char saved[512];
  snprintf(saved, sizeof saved, "%s", cubert_last_error_message());

  /* success clears nothing */
  if (cubert_runtime_device_info(run->rt, 0, &info) != CUBERT_OK) FAIL_("device 0: %s", cubert_last_error_message());
  cubert_error *still = cubert_last_error();
  if (still != first) FAIL_("a successful call replaced the last error");
  if (strcmp(cubert_last_error_message(), saved) != 0) FAIL_("a successful call changed the message");
  cubert_error_release(still);

  /* the next failure replaces it; the old report stays valid for its holder */
  cubert_client *c = NULL;
  if (cubert_client_create(run->rt, 0, &c) != CUBERT_OK) FAIL_("client: %s", cubert_last_error_message());
  cubert_handle *h = NULL;
  if (cubert_handle_empty(c, 0, &h) != CUBERT_ERR_INVALID_ARGUMENT) FAIL_("size 0 was not refused");
  cubert_client_destroy(c);
  cubert_error *second = cubert_last_error();
  if (second == first) FAIL_("a second failure did not replace the error");
  if (cubert_error_status(second) != CUBERT_ERR_INVALID_ARGUMENT) FAIL_("second status wrong");
  if (!strstr(cubert_last_error_message(), "size")) FAIL_("\"%s\" does not name the size", cubert_last_error_message());
  if (strcmp(cubert_error_message(first), saved) != 0) FAIL_("a held error changed its message");
  /* retain/release pairs keep it alive */
  cubert_error_retain(first);
  cubert_error_release(first);
  cubert_error_release(first);
  cubert_error_release(second);
  return NULL;
#undef FAIL_
}

START_TEST(test_last_error_names_the_problem_and_survives_success) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  /* an error of this thread, different from what the other thread makes */
  cubert_handle *h = NULL;
  cb_test_status(cubert_handle_empty(env.clients[0], 0, &h), CUBERT_ERR_INVALID_ARGUMENT);
  char mine[512];
  snprintf(mine, sizeof mine, "%s", cubert_last_error_message());

  last_error_run run = {env.runtime, ""};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, last_error_thread, &run), 0);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_msg(run.failure[0] == '\0', "%s", run.failure);
  /* the other thread's errors are its own */
  ck_assert_str_eq(cubert_last_error_message(), mine);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ NULL arguments */

/* `call` must return CUBERT_ERR_INVALID_ARGUMENT and record a new error. */
#define expect_null_refused(call)                                                            \
  do {                                                                                       \
    cubert_error *before_ = cubert_last_error();                                             \
    cubert_status st_ = (call);                                                              \
    cubert_error *after_ = cubert_last_error();                                              \
    bool recorded_ = after_ != NULL && after_ != before_;                                    \
    bool said_ = after_ != NULL && cubert_error_message(after_)[0] != '\0';                  \
    cubert_error_release(before_);                                                           \
    cubert_error_release(after_);                                                            \
    ck_assert_msg(st_ == CUBERT_ERR_INVALID_ARGUMENT, "%s returned %s (%s)", #call,          \
                  cubert_status_name(st_), cubert_last_error_message());                     \
    ck_assert_msg(recorded_, "%s recorded no error", #call);                                 \
    ck_assert_msg(said_, "%s recorded an empty message", #call);                             \
  } while (0)

START_TEST(test_null_arguments_are_refused_by_every_call) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_runtime *rt = env.runtime;
  cubert_client *c = env.clients[0];
  uint32_t data[64] = {0};
  cubert_handle *h = NULL, *h2 = NULL, *out = NULL;
  cb_test_ok(cubert_handle_create(c, data, sizeof data, &h));
  cb_test_ok(cubert_handle_create(c, data, sizeof data, &h2));
  cubert_binding *b = NULL;
  cubert_weak *w = NULL;
  cb_test_ok(cubert_handle_bind(h, &b));
  cb_test_ok(cubert_handle_downgrade(h, &w));
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_builtin_kernel(CUBERT_BUILTIN_FILL_U32, &k));
  cubert_device_info info;
  cubert_device_link link;
  cubert_client *cl = NULL;
  cubert_runtime *rtout = NULL;
  cubert_stream s = 0;
  cubert_binding *bout = NULL;
  cubert_weak *wout = NULL;
  cubert_kernel *kout = NULL;
  cubert_pool_usage pools[8];
  size_t count = 0;
  uint32_t pattern = 7;
  uint64_t n = 64;
  cubert_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0};
  cubert_arg args[3] = {cubert_arg_buffer(h), cubert_arg_scalar(&n, 8), cubert_arg_scalar(&pattern, 4)};
  cubert_kernel_desc desc = {.name = "k", .host_fn = NULL, .source = "x"};

  expect_null_refused(cubert_runtime_create(NULL, NULL));
  expect_null_refused(cubert_runtime_device_info(NULL, 0, &info));
  expect_null_refused(cubert_runtime_device_info(rt, 0, NULL));
  expect_null_refused(cubert_runtime_device_link(NULL, 0, 0, &link));
  expect_null_refused(cubert_runtime_device_link(rt, 0, 0, NULL));
  expect_null_refused(cubert_client_create(NULL, 0, &cl));
  expect_null_refused(cubert_client_create(rt, 0, NULL));
  expect_null_refused(cubert_stream_create(NULL, &s));
  expect_null_refused(cubert_stream_create(c, NULL));
  expect_null_refused(cubert_client_use_stream(NULL, 0));
  expect_null_refused(cubert_sync(NULL));
  expect_null_refused(cubert_sync_stream(NULL, 0));
  expect_null_refused(cubert_sync_device(NULL));
  expect_null_refused(cubert_handle_empty(NULL, 16, &out));
  expect_null_refused(cubert_handle_empty(c, 16, NULL));
  expect_null_refused(cubert_handle_create(NULL, data, 16, &out));
  expect_null_refused(cubert_handle_create(c, NULL, 16, &out));
  expect_null_refused(cubert_handle_read(NULL, h, data, sizeof data));
  expect_null_refused(cubert_handle_read(c, NULL, data, sizeof data));
  expect_null_refused(cubert_handle_read(c, h, NULL, sizeof data));
  expect_null_refused(cubert_handle_write(NULL, h, data, sizeof data));
  expect_null_refused(cubert_handle_write(c, NULL, data, sizeof data));
  expect_null_refused(cubert_handle_write(c, h, NULL, sizeof data));
  expect_null_refused(cubert_handle_fill(NULL, h, &pattern, 4));
  expect_null_refused(cubert_handle_fill(c, NULL, &pattern, 4));
  expect_null_refused(cubert_handle_fill(c, h, NULL, 4));
  expect_null_refused(cubert_handle_copy(NULL, h, h2));
  expect_null_refused(cubert_handle_copy(c, NULL, h2));
  expect_null_refused(cubert_handle_copy(c, h, NULL));
  expect_null_refused(cubert_handle_copy_peer(NULL, h, c, h2));
  expect_null_refused(cubert_handle_copy_peer(c, h, NULL, h2));
  expect_null_refused(cubert_handle_copy_peer(c, NULL, c, h2));
  expect_null_refused(cubert_handle_copy_peer(c, h, c, NULL));
  expect_null_refused(cubert_handle_check(NULL, h));
  expect_null_refused(cubert_handle_check(c, NULL));
  expect_null_refused(cubert_handle_slice(NULL, 0, 0, &out));
  expect_null_refused(cubert_handle_slice(h, 0, 0, NULL));
  expect_null_refused(cubert_handle_share(NULL, h));
  expect_null_refused(cubert_handle_share(c, NULL));
  expect_null_refused(cubert_handle_bind(NULL, &bout));
  expect_null_refused(cubert_handle_bind(h, NULL));
  expect_null_refused(cubert_binding_downgrade(NULL, &wout));
  expect_null_refused(cubert_binding_downgrade(b, NULL));
  expect_null_refused(cubert_handle_downgrade(NULL, &wout));
  expect_null_refused(cubert_handle_downgrade(h, NULL));
  expect_null_refused(cubert_weak_upgrade(NULL, &bout));
  expect_null_refused(cubert_weak_upgrade(w, NULL));
  expect_null_refused(cubert_memory_usage(NULL, pools, 8, &count));
  expect_null_refused(cubert_memory_usage(c, pools, 8, NULL));
  expect_null_refused(cubert_memory_usage(c, NULL, 8, &count));
  expect_null_refused(cubert_memory_cleanup(NULL));
  expect_null_refused(cubert_kernel_create(NULL, &kout));
  expect_null_refused(cubert_kernel_create(&desc, NULL));
  expect_null_refused(cubert_launch(NULL, k, &cfg, args, 3));
  expect_null_refused(cubert_launch(c, NULL, &cfg, args, 3));
  expect_null_refused(cubert_launch(c, k, NULL, args, 3));
  expect_null_refused(cubert_launch(c, k, &cfg, NULL, 3));
  /* outputs stay as they were */
  ck_assert_ptr_null(out);
  ck_assert_ptr_null(cl);
  ck_assert_ptr_null(rtout);
  ck_assert_ptr_null(bout);
  ck_assert_ptr_null(wout);
  ck_assert_ptr_null(kout);
  ck_assert_uint_eq(s, 0);

  /* calls without a status answer NULL with a neutral value */
  cubert_runtime_options_init(NULL);
  ck_assert_int_eq(cubert_runtime_device_count(NULL), 0);
  ck_assert_int_eq(cubert_runtime_backend_count(NULL), 0);
  ck_assert_ptr_null(cubert_runtime_backend_name(NULL, 0));
  ck_assert_int_eq(cubert_client_device(NULL), -1);
  ck_assert_uint_eq(cubert_client_stream(NULL), 0);
  ck_assert_ptr_null(cubert_handle_clone(NULL));
  ck_assert(!cubert_handle_can_mut(NULL));
  ck_assert_int_eq(cubert_handle_overlap(NULL, h), CUBERT_OVERLAP_DISJOINT);
  ck_assert_int_eq(cubert_handle_overlap(h, NULL), CUBERT_OVERLAP_DISJOINT);
  ck_assert_uint_eq(cubert_handle_size(NULL), 0);
  ck_assert_uint_eq(cubert_handle_size_in_use(NULL), 0);
  ck_assert_uint_eq(cubert_handle_offset_start(NULL), 0);
  ck_assert_uint_eq(cubert_handle_memory_id(NULL), 0);
  ck_assert_int_eq(cubert_handle_device(NULL), -1);
  ck_assert_uint_eq(cubert_handle_stream(NULL), 0);
  ck_assert(!cubert_handle_is_shared(NULL));
  ck_assert_uint_eq(cubert_handle_peer_address(NULL), 0);
  cubert_claim_key key = cubert_binding_claim_key(NULL);
  ck_assert_uint_eq(key.memory, 0);
  ck_assert_uint_eq(key.start, 0);
  ck_assert_uint_eq(key.end, 0);
  ck_assert_str_eq(cubert_kernel_name(NULL), "");
  ck_assert_ptr_null(cubert_builtin_desc(CUBERT_BUILTIN_COUNT));
  ck_assert_int_eq(cubert_error_status(NULL), CUBERT_OK);
  ck_assert_str_eq(cubert_error_message(NULL), "");
  ck_assert_uint_eq(cubert_error_failure_count(NULL), 0);
  ck_assert_ptr_null(cubert_error_failure(NULL, 0, NULL, NULL));
  ck_assert_uint_eq(cubert_failure_id(NULL), 0);
  ck_assert_str_eq(cubert_failure_message(NULL), "");
  ck_assert_uint_eq(cubert_failure_parent_id(NULL), 0);
  ck_assert_ptr_null(cubert_failure_root(NULL));
  uint64_t dropped = 99;
  ck_assert_uint_eq(cubert_failure_skip_count(NULL, &dropped), 0);
  ck_assert_uint_eq(dropped, 0);
  cubert_skip skip;
  ck_assert(!cubert_failure_skip(NULL, 0, &skip));
  cubert_origin origin = {.device = 77};
  cubert_failure_origin(NULL, &origin);
  ck_assert_int_eq(origin.device, 77);
  /* releases of NULL do nothing */
  cubert_runtime_destroy(NULL);
  cubert_client_destroy(NULL);
  cubert_handle_release(NULL);
  cubert_binding_release(NULL);
  cubert_weak_release(NULL);
  cubert_kernel_retain(NULL);
  cubert_kernel_release(NULL);
  cubert_error_retain(NULL);
  cubert_error_release(NULL);
  cubert_failure_retain(NULL);
  cubert_failure_release(NULL);

  /* everything still works afterwards */
  cb_test_ok(cubert_handle_fill(c, h, &pattern, 4));
  uint32_t back[64];
  cb_test_ok(cubert_handle_read(c, h, back, sizeof back));
  for (int i = 0; i < 64; i++) ck_assert_uint_eq(back[i], 7);

  cubert_kernel_release(k);
  cubert_weak_release(w);
  cubert_binding_release(b);
  cubert_handle_release(h2);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

/* Separate from the list above: each once crashed or stayed silent. */
START_TEST(test_null_output_of_handle_create_is_refused) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  uint8_t data[16] = {1, 2, 3};
  expect_null_refused(cubert_handle_create(env.clients[0], data, sizeof data, NULL));
  cb_test_close(&env);
}
END_TEST

START_TEST(test_builtin_kernel_with_null_output_records_an_error) {
  expect_null_refused(cubert_builtin_kernel(CUBERT_BUILTIN_FILL_U32, NULL));
  cubert_kernel *k = NULL;
  expect_null_refused(cubert_builtin_kernel(CUBERT_BUILTIN_COUNT, &k));
  ck_assert_ptr_null(k);
}
END_TEST


/* ------------------------------------------------------------ client hooks */

/* What a hook saw: the order it ran in, and whether the client could still
 * allocate a host buffer and write a handle inside it. */
typedef struct hook_log {
  int order[4];
  int n;
  bool usable;
  cubert_host_buffer *kept; /* released by the hook, as a component would */
} hook_log;

static hook_log hooks_seen;

static void hook_fn(cubert_client *c, void *arg) {
  hooks_seen.order[hooks_seen.n++ % 4] = (int)(intptr_t)arg;
  if ((intptr_t)arg == 2) {
    cubert_handle *h = NULL;
    unsigned char b[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    hooks_seen.usable = cubert_handle_create(c, b, sizeof b, &h) == CUBERT_OK &&
                        cubert_handle_write_host(c, h, hooks_seen.kept, 0, sizeof b) == CUBERT_OK &&
                        cubert_sync(c) == CUBERT_OK;
    cubert_handle_release(h);
    cubert_host_buffer_release(hooks_seen.kept);
    hooks_seen.kept = NULL;
  }
}

START_TEST(test_client_destroy_runs_its_hooks_newest_first_once) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  memset(&hooks_seen, 0, sizeof hooks_seen);
  cubert_client *c = NULL;
  cb_test_ok(cubert_client_create(env.runtime, 0, &c));
  cb_test_ok(cubert_host_buffer_alloc(c, 8, &hooks_seen.kept));
  cb_test_ok(cubert_client_on_destroy(c, hook_fn, (void *)(intptr_t)1));
  cb_test_ok(cubert_client_on_destroy(c, hook_fn, (void *)(intptr_t)2));
  cb_test_ok(cubert_client_on_destroy(c, hook_fn, (void *)(intptr_t)3));
  cb_test_ok(cubert_client_hook_remove(c, hook_fn, (void *)(intptr_t)3));
  ck_assert_int_eq(cubert_client_hook_remove(c, hook_fn, (void *)(intptr_t)3), CUBERT_ERR_INVALID_ARGUMENT);
  expect_message("no such hook");
  ck_assert_int_eq(cubert_client_on_destroy(c, NULL, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(cubert_client_on_destroy(NULL, hook_fn, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(hooks_seen.n, 0);
  cubert_client_destroy(c);
  ck_assert_int_eq(hooks_seen.n, 2);
  ck_assert_int_eq(hooks_seen.order[0], 2);
  ck_assert_int_eq(hooks_seen.order[1], 1);
  ck_assert_msg(hooks_seen.usable, "the client was not usable inside its hook: %s", cubert_last_error_message());
  ck_assert_ptr_null(hooks_seen.kept);
  /* the runtime goes after: nothing of the client is left to release */
  cb_test_close(&env);
  ck_assert_int_eq(hooks_seen.n, 2);
}
END_TEST

/* The backend's runtime (as cb_test_open) and one more client on device 0,
 * whose hooks a test registers. */
static bool open_with_client(int i, cb_test_env *env, cubert_client **c) {
  if (!cb_test_open(i, 1, env)) return false;
  cb_test_ok(cubert_client_create(env->runtime, 0, c));
  return true;
}

/* Registering the same (fn, arg) twice registers it twice: both run;
 * cubert_client_hook_remove takes away one registration, the newest. */
static int dup_runs;
static void dup_hook(cubert_client *c, void *arg) {
  (void)c;
  dup_runs += (int)(intptr_t)arg;
}

START_TEST(test_client_hook_registered_twice_runs_twice_and_removes_one_at_a_time) {
  dup_runs = 0;
  cb_test_env env;
  cubert_client *c = NULL;
  if (!open_with_client(_i, &env, &c)) return;
  for (int i = 0; i < 3; i++) cb_test_ok(cubert_client_on_destroy(c, dup_hook, (void *)(intptr_t)1));
  cb_test_ok(cubert_client_hook_remove(c, dup_hook, (void *)(intptr_t)1));
  cb_test_status(cubert_client_hook_remove(c, dup_hook, (void *)(intptr_t)2), CUBERT_ERR_INVALID_ARGUMENT);
  expect_message("no such hook");
  cb_test_status(cubert_client_hook_remove(NULL, dup_hook, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  cubert_client_destroy(c);
  ck_assert_int_eq(dup_runs, 2);
  cb_test_close(&env);
}
END_TEST

/* Inside teardown: a hook may remove one not yet run (it does not run),
 * may not remove itself (it is no longer registered once it runs:
 * CUBERT_ERR_INVALID_ARGUMENT), and may register another, which runs next
 * (it is the newest), before the older ones. */
static struct {
  int order[8];
  int n;
  cubert_status self_remove, later_add;
} td;

static void td_plain(cubert_client *c, void *arg) {
  (void)c;
  td.order[td.n++ % 8] = (int)(intptr_t)arg;
}

static void td_busy(cubert_client *c, void *arg) {
  td.order[td.n++ % 8] = (int)(intptr_t)arg;
  td.self_remove = cubert_client_hook_remove(c, td_busy, arg);
  cb_test_ok(cubert_client_hook_remove(c, td_plain, (void *)(intptr_t)2)); /* not run yet: it will not */
  td.later_add = cubert_client_on_destroy(c, td_plain, (void *)(intptr_t)9);
}

START_TEST(test_client_hooks_may_remove_and_register_during_teardown) {
  memset(&td, 0, sizeof td);
  cb_test_env env;
  cubert_client *c = NULL;
  if (!open_with_client(_i, &env, &c)) return;
  cb_test_ok(cubert_client_on_destroy(c, td_plain, (void *)(intptr_t)1));
  cb_test_ok(cubert_client_on_destroy(c, td_plain, (void *)(intptr_t)2));
  cb_test_ok(cubert_client_on_destroy(c, td_busy, (void *)(intptr_t)3));
  cb_test_ok(cubert_client_on_destroy(c, td_plain, (void *)(intptr_t)4));
  cubert_client_destroy(c);
  ck_assert_int_eq(td.self_remove, CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_ok(td.later_add);
  ck_assert_int_eq(td.n, 4);
  int want[4] = {4, 3, 9, 1};
  for (int i = 0; i < 4; i++) ck_assert_int_eq(td.order[i], want[i]);
  cb_test_close(&env);
}
END_TEST

/* A client still alive when its runtime is destroyed (a mistake: clients
 * go first) has its hooks run by cubert_runtime_destroy, newest client
 * first, while the devices and their memory are still there (a hook
 * writes a handle); the later cubert_client_destroy runs none again, and
 * registering on such a client is refused with CUBERT_ERR_EXPIRED. */
static struct {
  int order[4];
  int n;
  bool usable;
} orphan;

static void orphan_hook(cubert_client *c, void *arg) {
  orphan.order[orphan.n++ % 4] = (int)(intptr_t)arg;
  cubert_handle *h = NULL;
  unsigned char b[16] = {1};
  orphan.usable = cubert_handle_create(c, b, sizeof b, &h) == CUBERT_OK && cubert_sync(c) == CUBERT_OK;
  cubert_handle_release(h);
}

START_TEST(test_runtime_destroy_runs_the_hooks_of_clients_still_alive) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  memset(&orphan, 0, sizeof orphan);
  cubert_client *a = NULL, *b = NULL;
  cb_test_ok(cubert_client_create(env.runtime, 0, &a));
  cb_test_ok(cubert_client_create(env.runtime, env.devices - 1, &b));
  cb_test_ok(cubert_client_on_destroy(a, orphan_hook, (void *)(intptr_t)1));
  cb_test_ok(cubert_client_on_destroy(b, orphan_hook, (void *)(intptr_t)2));
  cb_test_close(&env); /* its own clients, then the runtime: a and b are still alive */
  ck_assert_int_eq(orphan.n, 2);
  ck_assert_int_eq(orphan.order[0], 2);
  ck_assert_int_eq(orphan.order[1], 1);
  ck_assert_msg(orphan.usable, "the client was not usable inside its hook: %s", cubert_last_error_message());
  cb_test_status(cubert_client_on_destroy(a, orphan_hook, NULL), CUBERT_ERR_EXPIRED);
  expect_message("destroyed");
  cb_test_status(cubert_client_hook_remove(a, orphan_hook, (void *)(intptr_t)1), CUBERT_ERR_EXPIRED);
  cubert_client_destroy(a);
  cubert_client_destroy(b);
  ck_assert_int_eq(orphan.n, 2);
}
END_TEST

/* Registrations and removals from several threads at once on one client:
 * none is lost. */
static _Atomic int mt_runs;
static void mt_hook(cubert_client *c, void *arg) {
  (void)c;
  (void)arg;
  mt_runs++;
}
static void *mt_register(void *p) {
  cubert_client *c = p;
  for (int i = 0; i < 200; i++) {
    if (cubert_client_on_destroy(c, mt_hook, (void *)(intptr_t)(i % 3)) != CUBERT_OK) return p;
    if (i % 2 && cubert_client_hook_remove(c, mt_hook, (void *)(intptr_t)(i % 3)) != CUBERT_OK) return p;
  }
  return NULL;
}

START_TEST(test_client_hooks_registered_from_threads_all_run) {
  mt_runs = 0;
  cb_test_env env;
  cubert_client *c = NULL;
  if (!open_with_client(_i, &env, &c)) return;
  pthread_t t[4];
  for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, mt_register, c), 0);
  for (int i = 0; i < 4; i++) {
    void *r = NULL;
    pthread_join(t[i], &r);
    ck_assert_ptr_null(r);
  }
  cubert_client_destroy(c);
  ck_assert_int_eq(mt_runs, 4 * 100);
  cb_test_close(&env);
}
END_TEST

/* The HIP backend's variables (README, "Environment"): a value that does
 * not parse or lies outside its range refuses the runtime when the backend
 * opens (before, each was quietly taken as its default or clamped at a
 * device's first large transfer); a runtime without HIP never reads them. */
START_TEST(test_hip_variables_out_of_range_are_refused) {
  clear_runtime_env();
  if (!cb_test_backend_built("hip")) return;
  static const struct {
    const char *name, *bad, *good;
  } vars[] = {
      {"CUBERT_HIP_PIPE_FROM", "0", "1M"},          {"CUBERT_HIP_PIPE_FROM", "lots", "64K"},
      {"CUBERT_HIP_STAGING_CHUNK", "0", "2M"},      {"CUBERT_HIP_STAGING_CHUNK", "2G", "1G"},
      {"CUBERT_HIP_STAGING_CHUNKS", "1", "2"},      {"CUBERT_HIP_STAGING_CHUNKS", "17", "16"},
      {"CUBERT_HIP_COPY_THREADS", "0", "1"},        {"CUBERT_HIP_COPY_THREADS", "257", "256"},
      {"CUBERT_HIP_COPY_SPIN_US", "100001", "0"},   {"CUBERT_HIP_COPY_SPIN_US", "-1", "100000"},
      {"CUBERT_HIP_COPY_STREAM", "none", "reads"},  {"CUBERT_HIP_COPY_STREAM", "ALL", "all"},
      {"CUBERT_HIP_PIPE_TRACE", "yes", "1"},        {"CUBERT_HIP_PIPE_TRACE", "2", "0"},
  };
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    cubert_runtime_options o;
    cubert_runtime *rt = NULL;
    setenv(vars[i].name, vars[i].bad, 1);
    cb_test_options("hip", &o);
    cubert_status st = cubert_runtime_create(&o, &rt);
    ck_assert_msg(st == CUBERT_ERR_INVALID_ARGUMENT, "%s=%s gave %s (%s)", vars[i].name, vars[i].bad,
                  cubert_status_name(st), cubert_last_error_message());
    expect_message(vars[i].name);
    expect_message(vars[i].bad);
    ck_assert_ptr_null(rt);
    host_options(&o); /* not read without the HIP backend */
    cb_test_ok(cubert_runtime_create(&o, &rt));
    cubert_runtime_destroy(rt);
    rt = NULL;
    setenv(vars[i].name, vars[i].good, 1);
    cb_test_options("hip", &o);
    cb_test_ok(cubert_runtime_create(&o, &rt));
    cubert_runtime_destroy(rt);
    unsetenv(vars[i].name);
  }
}
END_TEST

/* ------------------------------------------------------------ main */

static void add_loop(Suite *s, const char *name, const TTest *test) {
  TCase *tc = tcase_create(name);
  tcase_add_loop_test(tc, test, 0, CB_TEST_BACKEND_COUNT);
  suite_add_tcase(s, tc);
}

static void add_once(Suite *s, const char *name, const TTest *test) {
  TCase *tc = tcase_create(name);
  tcase_add_test(tc, test);
  suite_add_tcase(s, tc);
}

#define LOOP(s, fn) add_loop((s), #fn, fn)
#define ONCE(s, fn) add_once((s), #fn, fn)

int main(void) {
  Suite *s = suite_create("runtime_api");
  LOOP(s, test_runtime_creates_one_client_per_device);
  LOOP(s, test_runtime_names_its_backends);
  LOOP(s, test_device_info_describes_each_device);
  LOOP(s, test_host_device_names_are_distinct);
  LOOP(s, test_device_link_is_unsupported_on_the_host_backend);
  ONCE(s, test_options_struct_size_zero_is_refused);
  ONCE(s, test_options_of_an_older_layout_take_defaults_for_the_rest);
  ONCE(s, test_unknown_backend_in_the_list_is_refused);
  ONCE(s, test_negative_host_devices_are_refused);
  ONCE(s, test_host_memory_garbage_in_environment_is_refused);
  ONCE(s, test_hip_variables_out_of_range_are_refused);
  ONCE(s, test_null_options_read_the_environment);
  ONCE(s, test_status_strings_are_nonempty_and_distinct);
  ONCE(s, test_version_is_the_project_version);
  LOOP(s, test_last_error_names_the_problem_and_survives_success);
  LOOP(s, test_null_arguments_are_refused_by_every_call);
  LOOP(s, test_null_output_of_handle_create_is_refused);
  ONCE(s, test_builtin_kernel_with_null_output_records_an_error);
  LOOP(s, test_client_destroy_runs_its_hooks_newest_first_once);
  LOOP(s, test_client_hook_registered_twice_runs_twice_and_removes_one_at_a_time);
  LOOP(s, test_client_hooks_may_remove_and_register_during_teardown);
  LOOP(s, test_runtime_destroy_runs_the_hooks_of_clients_still_alive);
  LOOP(s, test_client_hooks_registered_from_threads_all_run);
  return cb_test_run(s);
}
