/* tests/test_copier.c: base/copier.h, the copy pool of the HIP backend's
 * staging pipeline (backends/hip/hip_pipe.c), which no device runs here:
 * every copy exact whatever the pool's size, the split and the alignment,
 * nothing written outside it, copies back to back with the threads
 * spinning and with them asleep between copies (the paths of the
 * lock-free hand-over: the TSan run of the suite checks them), placement
 * called once per thread, and a pool refused when out of memory. */
#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/copier.h"

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((i * 2654435761u) >> 13 ^ seed);
}

/* One copy of `n` bytes at offsets so/d_o, checked byte for byte, with
 * guard bytes around the destination. */
static void check_copy(cb_copier *c, size_t n, size_t so, size_t d_o, bool stream, unsigned seed) {
  enum { PAD = 4096 };
  unsigned char *src = malloc(n + so + 1), *dst = malloc(n + d_o + 2 * PAD);
  ck_assert_ptr_nonnull(src);
  ck_assert_ptr_nonnull(dst);
  fill(src, n + so + 1, seed);
  memset(dst, 0xEE, n + d_o + 2 * PAD);
  cb_copier_copy(c, dst + PAD + d_o, src + so, n, stream);
  ck_assert_msg(memcmp(dst + PAD + d_o, src + so, n) == 0, "%d threads, %zu bytes at +%zu/+%zu: bytes differ",
                cb_copier_threads(c), n, so, d_o);
  size_t bad = SIZE_MAX;
  for (size_t i = 0; i < n + d_o + 2 * PAD && bad == SIZE_MAX; i++)
    if ((i < PAD + d_o || i >= PAD + d_o + n) && dst[i] != 0xEE) bad = i;
  ck_assert_msg(bad == SIZE_MAX, "%zu bytes: byte %zu outside the copy was written", n, bad);
  ck_assert_int_le(cb_copier_joined(c), cb_copier_threads(c));
  free(dst);
  free(src);
}

/* Sizes below the split, at it and well above, odd ones (a last piece
 * shorter than the others), at odd alignments; pools of 0 to 7 threads,
 * spinning or not, plain and streaming stores. */
START_TEST(copies_are_exact_for_every_pool_size_and_split) {
  static const size_t sizes[] = {0, 1, 4095, (256 << 10) - 1, 256 << 10, (256 << 10) + 1, (1 << 20) + 13,
                                 (3 << 20) + 4097};
  static const int threads[] = {0, 1, 3, 7};
  for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
    for (int spin = 0; spin < 2; spin++) {
      cb_copier *c = cb_copier_new(threads[t], spin ? 50000 : 0, NULL, NULL, 0);
      ck_assert_ptr_nonnull(c);
      ck_assert_int_eq(cb_copier_threads(c), threads[t]);
      for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (int stream = 0; stream < 2; stream++)
          check_copy(c, sizes[k], k % 7, (k * 5) % 16, stream, (unsigned)(k + t));
      cb_copier_free(c);
    }
}
END_TEST

/* Many copies back to back into the same destination from changing
 * sources (the pipeline's chunks): a thread still on the last copy, or one
 * that took a piece of it late, would leave an old byte behind. */
START_TEST(copies_back_to_back_never_mix_generations) {
  enum { N = 600 << 10, ROUNDS = 300 };
  unsigned char *src[2] = {malloc(N), malloc(N)}, *dst = malloc(N);
  ck_assert_ptr_nonnull(src[0]);
  ck_assert_ptr_nonnull(src[1]);
  ck_assert_ptr_nonnull(dst);
  fill(src[0], N, 1);
  fill(src[1], N, 2);
  for (int spin = 0; spin < 2; spin++) {
    cb_copier *c = cb_copier_new(4, spin ? 100000 : 0, NULL, NULL, 0);
    ck_assert_ptr_nonnull(c);
    int joined = 0;
    /* ROUNDS copies, then more until a pool thread took part in one: the
     * threads do take part, but on two loaded cores the caller can finish
     * every piece of 300 copies before any of them runs (ctest -j4 with
     * other builds; pinned to one core beside 6 busy processes, 6 runs of
     * 40 saw no thread join). 30 s is the bound. */
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    now = t0;
    for (int r = 0; r < ROUNDS || (joined == 0 && now.tv_sec - t0.tv_sec < 30); r++) {
      const unsigned char *s = src[r & 1];
      cb_copier_copy(c, dst, s, N - (size_t)(r % 3) * 4096, r % 5 == 0);
      ck_assert_msg(memcmp(dst, s, N - (size_t)(r % 3) * 4096) == 0, "round %d (spin %d): bytes of another copy", r,
                    spin);
      joined += cb_copier_joined(c);
      if (r >= ROUNDS) clock_gettime(CLOCK_MONOTONIC, &now);
    }
    ck_assert_msg(joined > 0, "no pool thread took part in any copy for 30 s (spin %d)", spin);
    cb_copier_free(c);
  }
  free(dst);
  free(src[0]);
  free(src[1]);
}
END_TEST

static atomic_int placed;
static atomic_int placed_bad;

static void place(void *ctx, int index) {
  if (ctx != &placed || index != 3) atomic_fetch_add(&placed_bad, 1);
  atomic_fetch_add(&placed, 1);
}

START_TEST(each_thread_is_placed_once_and_a_null_pool_copies) {
  atomic_store(&placed, 0);
  atomic_store(&placed_bad, 0);
  cb_copier *c = cb_copier_new(5, 0, place, &placed, 3);
  ck_assert_ptr_nonnull(c);
  check_copy(c, 2 << 20, 0, 0, false, 9); /* every thread has started by the end of a copy it may join */
  cb_copier_free(c);                     /* joins: every thread ran its placement */
  ck_assert_int_eq(atomic_load(&placed), 5);
  ck_assert_int_eq(atomic_load(&placed_bad), 0);
  /* NULL: the caller copies alone; freeing NULL is allowed */
  check_copy(NULL, 1 << 20, 3, 5, true, 4);
  ck_assert_int_eq(cb_copier_threads(NULL), 0);
  ck_assert_int_eq(cb_copier_joined(NULL), 0);
  cb_copier_free(NULL);
}
END_TEST

static void *no_malloc(size_t n) {
  (void)n;
  return NULL;
}
static void *no_calloc(size_t n, size_t m) {
  (void)n;
  (void)m;
  return NULL;
}
static void *no_realloc(void *p, size_t n) {
  (void)p;
  (void)n;
  return NULL;
}

START_TEST(a_pool_is_refused_when_out_of_memory) {
  cubert_allocator none = {no_malloc, no_calloc, no_realloc, free};
  cb_allocator_set(&none);
  cb_copier *c = cb_copier_new(4, 0, NULL, NULL, 0);
  cb_allocator_set(NULL);
  ck_assert_ptr_null(c);
}
END_TEST

static Suite *copier_suite(void) {
  Suite *s = suite_create("copier");
  TCase *t = tcase_create("copier");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, copies_are_exact_for_every_pool_size_and_split);
  tcase_add_test(t, copies_back_to_back_never_mix_generations);
  tcase_add_test(t, each_thread_is_placed_once_and_a_null_pool_copies);
  tcase_add_test(t, a_pool_is_refused_when_out_of_memory);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(copier_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
