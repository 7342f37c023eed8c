/* tests/test_runtime_order.c: devices in the order users expect (issue 13
 * item 1). With no backend list, GPU backends open first and the host
 * backend (the simulator) only when none of them found a device; a list
 * opens exactly its backends in its order; a backend with no device says
 * why (cubert_runtime_backend_note).
 *
 * "A GPU" is simulated by a parts table whose first backend is the host
 * backend's ops under another name: the runtime's rule looks at names
 * only, so this proves the rule where no GPU is present. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "cubert/cubert.h"
#include "lib/settings.h"
#include "runtime/parts.h"
#include "tests/testutil.h"

static const char *const runtime_env[] = {"CUBERT_BACKENDS", "CUBERT_HOST_DEVICES", "CUBERT_HOST_MEMORY",
                                          "CUBERT_FAULTS", "CUBERT_HOST_NODE", "CUBERT_LOG"};

static void clear_env(void) {
  for (size_t i = 0; i < sizeof runtime_env / sizeof runtime_env[0]; i++) unsetenv(runtime_env[i]);
}

/* A "GPU" backend: the host backend's table named "hip". */
static cubert_backend_ops fake_gpu_ops;
static const cubert_backend_ops *fake_gpu(void) {
  fake_gpu_ops = *cubert_backend_host();
  fake_gpu_ops.name = "hip";
  return &fake_gpu_ops;
}

/* libcubert's order, GPU first, with the fake GPU, and libcubert's backend
 * settings (the host's); no fault layer, no topology. */
static cb_runtime_parts parts_with_gpu(void) {
  cb_runtime_parts p;
  memset(&p, 0, sizeof p);
  p.backends[0] = fake_gpu;
  p.backends[1] = cubert_backend_host;
  p.nbackends = 2;
  p.settings_new = cb_settings_new;
  p.settings_for = cb_settings_for;
  p.settings_explain = cb_settings_explain;
  p.settings_bus_ids_made_up = cb_settings_bus_ids_made_up;
  p.settings_free = cb_settings_free;
  return p;
}

static void small_options(cubert_runtime_options *o, const char *backends) {
  cubert_runtime_options_init(o);
  o->backends = backends;
  o->host_devices = 2;
  o->host_memory = 64ull << 20;
  o->faults = "";
}

START_TEST(test_gpu_backend_comes_first_and_the_host_stays_closed) {
  clear_env();
  cb_runtime_parts parts = parts_with_gpu();
  cubert_runtime_options o;
  small_options(&o, NULL);
  cubert_runtime *rt = NULL;
  cb_test_ok(cb_runtime_create(&parts, &o, &rt));
  ck_assert_int_eq(cubert_runtime_backend_count(rt), 1);
  ck_assert_str_eq(cubert_runtime_backend_name(rt, 0), "hip");
  ck_assert_int_eq(cubert_runtime_device_count(rt), 4); /* the fake GPU's own default, not 2 */
  cubert_device_info info;
  cb_test_ok(cubert_runtime_device_info(rt, 0, &info));
  ck_assert_str_eq(info.backend, "hip");
  ck_assert_str_eq(cubert_runtime_backend_note(rt, 0), "");
  ck_assert_ptr_null(cubert_runtime_backend_note(rt, 1));
  cubert_runtime_destroy(rt);
}
END_TEST

START_TEST(test_a_list_opens_its_backends_in_its_order) {
  clear_env();
  cb_runtime_parts parts = parts_with_gpu();
  cubert_runtime_options o;
  small_options(&o, "host,hip");
  cubert_runtime *rt = NULL;
  cb_test_ok(cb_runtime_create(&parts, &o, &rt));
  ck_assert_int_eq(cubert_runtime_backend_count(rt), 2);
  ck_assert_str_eq(cubert_runtime_backend_name(rt, 0), "host");
  ck_assert_str_eq(cubert_runtime_backend_name(rt, 1), "hip");
  cubert_device_info info;
  cb_test_ok(cubert_runtime_device_info(rt, 0, &info));
  ck_assert_str_eq(info.backend, "host");
  cb_test_ok(cubert_runtime_device_info(rt, 2, &info)); /* after the 2 host devices */
  ck_assert_str_eq(info.backend, "hip");
  cubert_runtime_destroy(rt);
  /* the same through the environment, the other way round */
  setenv("CUBERT_BACKENDS", "hip,host", 1);
  small_options(&o, NULL);
  cb_test_ok(cb_runtime_create(&parts, &o, &rt));
  ck_assert_int_eq(cubert_runtime_backend_count(rt), 2);
  ck_assert_str_eq(cubert_runtime_backend_name(rt, 0), "hip");
  ck_assert_str_eq(cubert_runtime_backend_name(rt, 1), "host");
  ck_assert_int_eq(cubert_runtime_device_count(rt), 6);
  cb_test_ok(cubert_runtime_device_info(rt, 4, &info));
  ck_assert_str_eq(info.backend, "host");
  cubert_runtime_destroy(rt);
  clear_env();
}
END_TEST

/* libcubert itself: where HIP finds no device (this machine in CI), device
 * 0 is host:0, the HIP backend says why and the host backend says it was
 * opened for that; where HIP finds one, device 0 is the GPU. */
START_TEST(test_default_runtime_says_why_it_opened_the_host) {
  clear_env();
  cubert_runtime_options o;
  small_options(&o, NULL);
  cubert_runtime *rt = NULL;
  cb_test_ok(cubert_runtime_create(&o, &rt));
  cubert_device_info info;
  ck_assert_int_ge(cubert_runtime_device_count(rt), 1);
  cb_test_ok(cubert_runtime_device_info(rt, 0, &info));
  int nb = cubert_runtime_backend_count(rt);
  if (!cb_test_backend_built("hip")) {
    ck_assert_int_eq(nb, 1);
    ck_assert_str_eq(info.backend, "host");
  } else if (strcmp(info.backend, "hip") == 0) {
    /* a GPU: the host backend stays closed */
    ck_assert_int_eq(nb, 1);
  } else {
    ck_assert_int_eq(nb, 2);
    ck_assert_str_eq(cubert_runtime_backend_name(rt, 0), "hip");
    ck_assert_str_eq(cubert_runtime_backend_name(rt, 1), "host");
    ck_assert_str_eq(info.name, "host:0");
    const char *why = cubert_runtime_backend_note(rt, 0);
    ck_assert_msg(strstr(why, "hipGetDeviceCount"), "%s", why);
    ck_assert_msg(strstr(why, "VISIBLE_DEVICES"), "%s", why);
    ck_assert_msg(strstr(cubert_runtime_backend_note(rt, 1), "no GPU backend found a device"), "%s",
                  cubert_runtime_backend_note(rt, 1));
  }
  cubert_runtime_destroy(rt);
}
END_TEST

/* HIP_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES set empty (no device on NVIDIA): named in the note. */
START_TEST(test_no_device_note_names_a_visibility_variable) {
  if (!cb_test_backend_built("hip")) {
    cb_test_skip("skipped: no device (hip backend not built)");
    return;
  }
  clear_env();
  setenv("HIP_VISIBLE_DEVICES", "", 1);
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  cubert_runtime_options o;
  small_options(&o, "hip");
  cubert_runtime *rt = NULL;
  cb_test_ok(cubert_runtime_create(&o, &rt));
  ck_assert_int_eq(cubert_runtime_device_count(rt), 0);
  const char *why = cubert_runtime_backend_note(rt, 0);
  ck_assert_msg(strstr(why, "HIP_VISIBLE_DEVICES=\"\" (set, empty)"), "%s", why);
  cubert_runtime_destroy(rt);
  unsetenv("HIP_VISIBLE_DEVICES");
  unsetenv("CUDA_VISIBLE_DEVICES");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_order");
  TCase *tc = tcase_create("order");
  tcase_add_test(tc, test_gpu_backend_comes_first_and_the_host_stays_closed);
  tcase_add_test(tc, test_a_list_opens_its_backends_in_its_order);
  tcase_add_test(tc, test_default_runtime_says_why_it_opened_the_host);
  tcase_add_test(tc, test_no_device_note_names_a_visibility_variable);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return cb_test_run(suite()); }
