/* tests/test_base.c: base/ (the layer under everything): the size parser,
 * the growable array, FNV-1a, the string builder and copies, the error
 * builder, the allocator hooks and the streaming-store copy. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/array.h"
#include "base/copy.h"
#include "base/env.h"
#include "base/hash.h"
#include "base/msg.h"
#include "base/str.h"
#include "backends/backend.h"

START_TEST(sizes_take_every_spelling_of_a_binary_unit) {
  static const struct {
    const char *text;
    uint64_t bytes;
  } ok[] = {
      {"0", 0},          {"4096", 4096},        {"4096B", 4096},
      {"4K", 4096},      {"4k", 4096},          {"4KiB", 4096},
      {"4KB", 4096},     {"4kib", 4096},        {"64M", 64ull << 20},
      {"64MiB", 64ull << 20}, {"2G", 2ull << 30}, {"1T", 1ull << 40},
      {"8000000000000000000", 8000000000000000000ull},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    uint64_t got = 12345;
    ck_assert_msg(cb_parse_size(ok[i].text, &got), "'%s' refused", ok[i].text);
    ck_assert_msg(got == ok[i].bytes, "'%s' gave %llu", ok[i].text, (unsigned long long)got);
  }
}
END_TEST

START_TEST(sizes_refuse_anything_else_and_leave_the_output_alone) {
  static const char *const bad[] = {"",    "lots", "12Q", "-5",   "+5",  " 5",  "5 ",
                                    "1.5G", "M",   "KiB", "4KK", "4Bi", "4iB", "99999999999999999999999",
                                    "9000001T", "10000000000000000000"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t got = 12345;
    ck_assert_msg(!cb_parse_size(bad[i], &got), "'%s' taken as %llu", bad[i], (unsigned long long)got);
    ck_assert_uint_eq(got, 12345);
  }
  uint64_t got = 1;
  ck_assert(!cb_parse_size(NULL, &got));
}
END_TEST

START_TEST(array_grows_by_doubling_and_keeps_its_contents) {
  int *v = NULL;
  size_t n = 0, cap = 0;
  for (int i = 0; i < 1000; i++) {
    if (n == cap) {
      size_t ncap = 0;
      int *g = cb_array_grow(v, cap, n + 1, sizeof *g, &ncap);
      ck_assert_ptr_nonnull(g);
      ck_assert_uint_ge(ncap, n + 1);
      ck_assert(cap == 0 ? ncap == CB_ARRAY_MIN_CAP : ncap == 2 * cap);
      v = g;
      cap = ncap;
    }
    v[n++] = i;
  }
  for (int i = 0; i < 1000; i++) ck_assert_int_eq(v[i], i);
  /* room already: the same array */
  size_t same = 0;
  ck_assert_ptr_eq(cb_array_grow(v, cap, n, sizeof *v, &same), v);
  ck_assert_uint_eq(same, cap);
  cb_free(v);
}
END_TEST

START_TEST(array_refuses_an_overflowing_size_and_keeps_the_old_one) {
  char *v = cb_array_grow(NULL, 0, 4, 1, &(size_t){0});
  ck_assert_ptr_nonnull(v);
  memcpy(v, "abc", 4);
  size_t ncap = 77;
  ck_assert_ptr_null(cb_array_grow(v, 8, SIZE_MAX / 2 + 2, 4, &ncap));
  ck_assert_uint_eq(ncap, 77);
  ck_assert_str_eq(v, "abc");
  cb_free(v);
}
END_TEST

START_TEST(fnv1a_matches_the_published_values) {
  /* FNV-1a 64 test vectors (Fowler, Noll, Vo). */
  ck_assert_uint_eq(cb_fnv1a64_str(""), 0xcbf29ce484222325ull);
  ck_assert_uint_eq(cb_fnv1a64_str("a"), 0xaf63dc4c8601ec8cull);
  ck_assert_uint_eq(cb_fnv1a64_str("foobar"), 0x85944171f73967e8ull);
  ck_assert_uint_eq(cb_fnv1a64("foobar", 6), 0x85944171f73967e8ull);
  ck_assert_uint_eq(cubert_hash64("foobar", 6), 0x85944171f73967e8ull);
  ck_assert_uint_eq(cubert_hash64(NULL, 3), 0);
  uint64_t h = cb_fnv1a64_more(CB_FNV1A64_SEED, "foo", 3);
  ck_assert_uint_eq(cb_fnv1a64_more(h, "bar", 3), 0x85944171f73967e8ull);
}
END_TEST

START_TEST(strings_build_and_copy) {
  cb_str s = {0};
  cb_str_printf(&s, "%s-%d", "x", 1);
  for (int i = 0; i < 100; i++) cb_str_printf(&s, "%c", 'a' + i % 26);
  char *t = cb_str_take(&s);
  ck_assert_uint_eq(strlen(t), 3 + 100);
  ck_assert(strncmp(t, "x-1abc", 6) == 0);
  ck_assert_ptr_null(s.p);
  cb_free(t);
  t = cb_str_take(&s); /* empty builder: "" */
  ck_assert_str_eq(t, "");
  cb_free(t);
  char *a = cb_strdup(NULL), *b = cb_strdup("hi"), *c = cb_strdup_or_null(NULL), *d = cb_strdup_or_null("yo");
  ck_assert_str_eq(a, "");
  ck_assert_str_eq(b, "hi");
  ck_assert_ptr_null(c);
  ck_assert_str_eq(d, "yo");
  cb_free(a);
  cb_free(b);
  cb_free(d);
}
END_TEST

START_TEST(error_builder_formats_and_returns_the_status) {
  char msg[8];
  ck_assert_int_eq(cb_msgf(msg, sizeof msg, CUBERT_ERR_PARSE, "bad %s", "thing here"), CUBERT_ERR_PARSE);
  ck_assert_str_eq(msg, "bad thi"); /* cut to fit */
  ck_assert_int_eq(cb_msgf(NULL, 0, CUBERT_ERR_BACKEND, "ignored"), CUBERT_ERR_BACKEND);
  cubert_berr err = {0};
  ck_assert_int_eq(cubert_berr_set(&err, CUBERT_ERR_LAUNCH, "k %d", 7), CUBERT_ERR_LAUNCH);
  ck_assert_str_eq(err.message, "k 7");
}
END_TEST

static int counted;
static void *count_malloc(size_t n) { counted++; return malloc(n); }
static void *count_calloc(size_t c, size_t n) { counted++; return calloc(c, n); }
static void *count_realloc(void *p, size_t n) { counted++; return realloc(p, n); }
static void *fail_realloc(void *p, size_t n) { (void)p; (void)n; return NULL; }

START_TEST(base_allocates_through_the_hooks) {
  cubert_allocator a = {count_malloc, count_calloc, count_realloc, free};
  cb_allocator_set(&a);
  counted = 0;
  char *s = cb_strdup("hooked");
  size_t ncap;
  int *v = cb_array_grow(NULL, 0, 3, sizeof *v, &ncap);
  ck_assert_int_eq(counted, 2);
  cb_free(s);
  cb_free(v);
  /* a failing allocator: the array is refused, the builder keeps what it had */
  cubert_allocator failing = {count_malloc, count_calloc, fail_realloc, free};
  cb_allocator_set(&failing);
  ck_assert_ptr_null(cb_array_grow(NULL, 0, 3, sizeof *v, &ncap));
  cb_str b = {0};
  cb_str_printf(&b, "lost");
  ck_assert_ptr_null(b.p);
  cb_allocator_set(NULL); /* back to the C library's */
  counted = 0;
  s = cb_strdup("plain");
  ck_assert_int_eq(counted, 0);
  cb_free(s);
}
END_TEST

/* cb_copy_stream copies exactly what memcpy would, whatever the alignment
 * of either side and the size (the head before the first 16-byte boundary,
 * the 64-byte body, the tail), and writes nothing outside [dst, dst+n). */
START_TEST(stream_copy_is_exact_at_every_alignment_and_size) {
  enum { MAX = 4096 + 200, PAD = 64 };
  unsigned char *src = malloc(MAX + PAD), *dst = malloc(MAX + 2 * PAD);
  ck_assert_ptr_nonnull(src);
  ck_assert_ptr_nonnull(dst);
  for (size_t i = 0; i < MAX + PAD; i++) src[i] = (unsigned char)(i * 131u + 7u);
  static const size_t sizes[] = {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000, 4096, 4096 + 131};
  for (size_t so = 0; so < 16; so += 3)
    for (size_t d_o = 0; d_o < 16; d_o++)
      for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        memset(dst, 0xEE, MAX + 2 * PAD);
        cb_copy_stream(dst + PAD + d_o, src + so, n);
        ck_assert_msg(memcmp(dst + PAD + d_o, src + so, n) == 0, "src +%zu dst +%zu size %zu: bytes differ", so, d_o, n);
        /* the bytes around: one check for all of them (an assertion per
         * byte made this test 40 s long under the sanitizers) */
        size_t bad = SIZE_MAX;
        for (size_t i = 0; i < MAX + 2 * PAD && bad == SIZE_MAX; i++)
          if ((i < PAD + d_o || i >= PAD + d_o + n) && dst[i] != 0xEE) bad = i;
        ck_assert_msg(bad == SIZE_MAX, "src +%zu dst +%zu size %zu: byte %zu outside the copy was written", so, d_o,
                      n, bad);
      }
  free(dst);
  free(src);
}
END_TEST

static Suite *base_suite(void) {
  Suite *s = suite_create("base");
  TCase *t = tcase_create("base");
  tcase_add_test(t, sizes_take_every_spelling_of_a_binary_unit);
  tcase_add_test(t, sizes_refuse_anything_else_and_leave_the_output_alone);
  tcase_add_test(t, array_grows_by_doubling_and_keeps_its_contents);
  tcase_add_test(t, array_refuses_an_overflowing_size_and_keeps_the_old_one);
  tcase_add_test(t, fnv1a_matches_the_published_values);
  tcase_add_test(t, strings_build_and_copy);
  tcase_add_test(t, error_builder_formats_and_returns_the_status);
  tcase_add_test(t, base_allocates_through_the_hooks);
  tcase_add_test(t, stream_copy_is_exact_at_every_alignment_and_size);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(base_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
