/* tests/test_bench_labels.c: which engine `cubert bench` says a copy ran on
 * (bench/bench_engine.c). ROCm picks blit kernels or SDMA from the copy, its
 * size and the environment (ROCm/clr rocblit.cpp, KernelBlitManager::
 * copyBuffer; flags.hpp ROC_P2P_SDMA_SIZE); CUDA's copies run on copy
 * engines; the host backend uses memcpy.
 *
 * Built without the bench's sources, the test prints "skipped: no bench". */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/testutil.h"

#if CB_TEST_BENCH
#include "bench/bench.h"

static void clear_env(void) {
  unsetenv("HSA_ENABLE_SDMA");
  unsetenv("ROC_P2P_SDMA_SIZE");
  unsetenv("GPU_FORCE_BLIT_COPY_SIZE");
}

START_TEST(test_rocm_same_device_copies_are_blit_kernels) {
  clear_env();
  ck_assert_str_eq(cb_bench_copy_engine("hip", "gfx90a:sramecc+:xnack-", CB_BENCH_COPY_SAME_DEVICE, 1u << 30),
                   "blit-kernel");
  ck_assert_str_eq(cb_bench_copy_engine("hip", "gfx942", CB_BENCH_COPY_SAME_DEVICE, 4), "blit-kernel");
}
END_TEST

START_TEST(test_rocm_peer_copies_use_sdma_only_above_roc_p2p_sdma_size) {
  clear_env();
  /* the default threshold: 1024 KiB */
  ck_assert_str_eq(cb_bench_copy_engine("hip", "gfx90a", CB_BENCH_COPY_PEER, 1u << 20), "blit-kernel");
  ck_assert_str_eq(cb_bench_copy_engine("hip", "gfx90a", CB_BENCH_COPY_PEER, (1u << 20) + 4), "sdma");
  setenv("ROC_P2P_SDMA_SIZE", "64", 1);
  ck_assert_str_eq(cb_bench_copy_engine("hip", "gfx90a", CB_BENCH_COPY_PEER, 64u << 10), "blit-kernel");
  ck_assert_str_eq(cb_bench_copy_engine("hip", "gfx90a", CB_BENCH_COPY_PEER, 128u << 10), "sdma");
  /* SDMA off: every copy is a blit kernel */
  setenv("HSA_ENABLE_SDMA", "0", 1);
  ck_assert_str_eq(cb_bench_copy_engine("hip", "gfx90a", CB_BENCH_COPY_PEER, 1u << 30), "blit-kernel");
  ck_assert_str_eq(cb_bench_copy_engine("hip", "gfx90a", CB_BENCH_COPY_HOST, 1u << 30), "blit-kernel");
  clear_env();
  ck_assert_str_eq(cb_bench_copy_engine("hip", "gfx90a", CB_BENCH_COPY_HOST, 4), "sdma");
  setenv("GPU_FORCE_BLIT_COPY_SIZE", "16", 1);
  ck_assert_str_eq(cb_bench_copy_engine("hip", "gfx90a", CB_BENCH_COPY_HOST, 4), "blit-kernel");
  clear_env();
}
END_TEST

START_TEST(test_other_platforms_and_kernels) {
  clear_env();
  setenv("HSA_ENABLE_SDMA", "0", 1); /* ROCm's variables mean nothing elsewhere */
  ck_assert_str_eq(cb_bench_copy_engine("hip", "sm_90", CB_BENCH_COPY_PEER, 4), "copy-engine");
  ck_assert_str_eq(cb_bench_copy_engine("hip", "sm_90", CB_BENCH_COPY_SAME_DEVICE, 1u << 30), "copy-engine");
  ck_assert_str_eq(cb_bench_copy_engine("host", "host", CB_BENCH_COPY_PEER, 4), "memcpy");
  ck_assert_str_eq(cb_bench_copy_engine("hip", "gfx90a", CB_BENCH_COPY_KERNEL, 4), "kernel");
  ck_assert_str_eq(cb_bench_copy_engine("hip", NULL, CB_BENCH_COPY_PEER, 4), "");
  clear_env();
}
END_TEST
#else
START_TEST(test_rocm_same_device_copies_are_blit_kernels) { fprintf(stderr, "skipped: no bench\n"); }
END_TEST
START_TEST(test_rocm_peer_copies_use_sdma_only_above_roc_p2p_sdma_size) { fprintf(stderr, "skipped: no bench\n"); }
END_TEST
START_TEST(test_other_platforms_and_kernels) { fprintf(stderr, "skipped: no bench\n"); }
END_TEST
#endif

int main(void) {
  Suite *s = suite_create("bench_labels");
  TCase *tc = tcase_create("engine");
  tcase_add_test(tc, test_rocm_same_device_copies_are_blit_kernels);
  tcase_add_test(tc, test_rocm_peer_copies_use_sdma_only_above_roc_p2p_sdma_size);
  tcase_add_test(tc, test_other_platforms_and_kernels);
  suite_add_tcase(s, tc);
  return cb_test_run(s);
}
