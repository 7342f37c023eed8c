/* tests/test_builtin_kernels.c: the built-in kernel library's descriptors and
 * host functions, called directly on host arrays and checked against
 * straightforward computations written independently here. */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/cubert.h"
#include "cubert/kernels.h"

/* ------------------------------------------------------------ helpers */

/* A launch over up to 4 arguments; scalars live in `scalar`. */
typedef struct call {
  cubert_host_launch launch;
  void *args[4];
  uint64_t sizes[4];
  unsigned char scalar[4][16];
  char message[256];
} call;

static void call_init(call *c, uint32_t grid, uint32_t block, uint32_t nargs) {
  memset(c, 0, sizeof *c);
  c->launch.grid[0] = grid;
  c->launch.grid[1] = c->launch.grid[2] = 1;
  c->launch.block[0] = block;
  c->launch.block[1] = c->launch.block[2] = 1;
  c->launch.nargs = nargs;
  c->launch.args = c->args;
  c->launch.sizes = c->sizes;
}

static void call_buffer(call *c, uint32_t i, void *p, uint64_t size) {
  c->args[i] = p;
  c->sizes[i] = size;
}

static void call_scalar(call *c, uint32_t i, const void *v, uint32_t size) {
  memcpy(c->scalar[i], v, size);
  c->args[i] = c->scalar[i];
  c->sizes[i] = size;
}

static cubert_status run(cubert_builtin which, call *c) {
  const cubert_kernel_desc *d = cubert_builtin_desc(which);
  ck_assert_ptr_nonnull(d);
  ck_assert_ptr_nonnull(d->host_fn);
  return d->host_fn(&c->launch, c->message, sizeof c->message);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 16);
}

/* ------------------------------------------------------------ descriptors */

START_TEST(descriptors_name_their_entry_and_params) {
  static const struct {
    cubert_builtin which;
    const char *name, *entry;
    uint32_t nparams;
  } want[] = {
      {CUBERT_BUILTIN_FILL_U32, "cubert_fill_u32", "cubert_fill_u32", 3},
      {CUBERT_BUILTIN_COPY_U32, "cubert_copy_u32", "cubert_copy_u32", 3},
      {CUBERT_BUILTIN_SCALE_ADD_F32, "cubert_scale_add_f32", "cubert_scale_add_f32", 4},
      {CUBERT_BUILTIN_SUM_F32, "cubert_sum_f32", "cubert_sum_f32", 3},
      {CUBERT_BUILTIN_CHECKSUM_U32, "cubert_checksum_u32", "cubert_checksum_u32", 3},
      {CUBERT_BUILTIN_COPY_PEER_READ, "cubert_copy_peer_read", "cubert_copy_u32", 3},
      {CUBERT_BUILTIN_COPY_PEER_WRITE, "cubert_copy_peer_write", "cubert_copy_u32", 3},
      {CUBERT_BUILTIN_COPY_STRIDED, "cubert_copy_strided", "cubert_copy_strided", 2},
      {CUBERT_BUILTIN_FILL_STRIDED, "cubert_fill_strided", "cubert_fill_strided", 2},
  };
  ck_assert_int_eq(sizeof want / sizeof want[0], CUBERT_BUILTIN_COUNT);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const cubert_kernel_desc *d = cubert_builtin_desc(want[i].which);
    ck_assert_ptr_nonnull(d);
    ck_assert_str_eq(d->name, want[i].name);
    ck_assert_str_eq(d->entry, want[i].entry);
    ck_assert_uint_eq(d->nparams, want[i].nparams);
    ck_assert_ptr_nonnull(d->host_fn);
    ck_assert_ptr_nonnull(d->source);
    ck_assert_ptr_nonnull(strstr(d->source, "extern \"C\" __global__"));
    ck_assert_ptr_nonnull(strstr(d->source, d->entry));
    ck_assert_ptr_null(strstr(d->source, "#include"));
    for (uint32_t p = 0; p < d->nparams; p++) {
      const cubert_param *q = &d->params[p];
      ck_assert_ptr_nonnull(q->name);
      if (strcmp(q->name, "n") == 0) {
        ck_assert_int_eq(q->kind, CUBERT_PARAM_SCALAR);
        ck_assert_uint_eq(q->size, 8);
      } else if (strcmp(q->name, "value") == 0 || strcmp(q->name, "a") == 0) {
        ck_assert_int_eq(q->kind, CUBERT_PARAM_SCALAR);
        /* the strided fill's value is 16 bytes: any element size */
        ck_assert_uint_eq(q->size, want[i].which == CUBERT_BUILTIN_FILL_STRIDED ? 16 : 4);
      } else {
        ck_assert_int_ne(q->kind, CUBERT_PARAM_SCALAR);
      }
    }
  }
  ck_assert_ptr_null(cubert_builtin_desc(CUBERT_BUILTIN_COUNT));
  ck_assert_ptr_null(cubert_builtin_desc((cubert_builtin)-1));
  ck_assert_ptr_nonnull(strstr(cubert_builtin_desc(CUBERT_BUILTIN_SUM_F32)->source,
                               "extern __shared__ float"));
  ck_assert_ptr_nonnull(strstr(cubert_builtin_desc(CUBERT_BUILTIN_SUM_F32)->source,
                               "__syncthreads()"));
  ck_assert_ptr_nonnull(strstr(cubert_builtin_desc(CUBERT_BUILTIN_CHECKSUM_U32)->source,
                               "atomicAdd"));
}
END_TEST

START_TEST(peer_copies_bind_a_peer_buffer_on_the_right_side) {
  const cubert_kernel_desc *r = cubert_builtin_desc(CUBERT_BUILTIN_COPY_PEER_READ);
  const cubert_kernel_desc *w = cubert_builtin_desc(CUBERT_BUILTIN_COPY_PEER_WRITE);
  ck_assert_int_eq(r->params[0].kind, CUBERT_PARAM_PEER_BUFFER);
  ck_assert_int_eq(r->params[0].access, CUBERT_ACCESS_READ);
  ck_assert_int_eq(r->params[1].kind, CUBERT_PARAM_BUFFER);
  ck_assert_int_eq(w->params[0].kind, CUBERT_PARAM_BUFFER);
  ck_assert_int_eq(w->params[1].kind, CUBERT_PARAM_PEER_BUFFER);
  ck_assert_int_eq(w->params[1].access, CUBERT_ACCESS_WRITE);
  ck_assert_str_eq(r->source, cubert_builtin_desc(CUBERT_BUILTIN_COPY_U32)->source);
}
END_TEST

START_TEST(builtin_kernel_is_created_once) {
  cubert_kernel *a = NULL, *b = NULL;
  ck_assert_int_eq(cubert_builtin_kernel(CUBERT_BUILTIN_SUM_F32, &a), CUBERT_OK);
  ck_assert_int_eq(cubert_builtin_kernel(CUBERT_BUILTIN_SUM_F32, &b), CUBERT_OK);
  ck_assert_ptr_eq(a, b);
  ck_assert_str_eq(cubert_kernel_name(a), "cubert_sum_f32");
  cubert_kernel_release(a);
  cubert_kernel_release(b);
  cubert_kernel *c = (cubert_kernel *)&c;
  ck_assert_int_eq(cubert_builtin_kernel(CUBERT_BUILTIN_COUNT, &c), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_eq(c, (cubert_kernel *)&c); /* untouched on failure */
}
END_TEST

/* ------------------------------------------------------------ fill, copy */

START_TEST(fill_writes_n_values_and_nothing_more) {
  uint32_t out[100];
  for (uint64_t n = 0; n <= 99; n += 11) {
    memset(out, 0xAB, sizeof out);
    uint32_t value = rnd();
    call c;
    call_init(&c, 3, 32, 3);
    call_buffer(&c, 0, out, sizeof out);
    call_scalar(&c, 1, &n, 8);
    call_scalar(&c, 2, &value, 4);
    ck_assert_int_eq(run(CUBERT_BUILTIN_FILL_U32, &c), CUBERT_OK);
    for (uint64_t i = 0; i < 100; i++)
      ck_assert_uint_eq(out[i], i < n ? value : 0xABABABABu);
  }
}
END_TEST

START_TEST(copy_copies_n_values) {
  uint32_t in[257], out[257];
  for (int i = 0; i < 257; i++)
    in[i] = rnd();
  memset(out, 0, sizeof out);
  uint64_t n = 255;
  call c;
  call_init(&c, 1, 1, 3);
  call_buffer(&c, 0, in, sizeof in);
  call_buffer(&c, 1, out, sizeof out);
  call_scalar(&c, 2, &n, 8);
  ck_assert_int_eq(run(CUBERT_BUILTIN_COPY_U32, &c), CUBERT_OK);
  for (int i = 0; i < 257; i++)
    ck_assert_uint_eq(out[i], i < 255 ? in[i] : 0);
  /* The peer variants run the same host function. */
  memset(out, 0, sizeof out);
  ck_assert_int_eq(run(CUBERT_BUILTIN_COPY_PEER_WRITE, &c), CUBERT_OK);
  ck_assert_uint_eq(out[254], in[254]);
  ck_assert_uint_eq(out[255], 0);
}
END_TEST

/* ------------------------------------------------------------ scale-add */

START_TEST(scale_add_is_one_fused_rounding) {
  enum { N = 513 };
  float x[N], y[N], want[N];
  /* Multiples of 2^-8 below 2^7 for x and y, a of 13 bits: a*x needs up to
   * 28 bits (rounding it to float first loses some), a*x + y is exact in
   * double, so rounding the double once is the correctly rounded fused
   * result. */
  for (int i = 0; i < N; i++) {
    x[i] = (float)((int)(rnd() % 65535) - 32767) / 256.0f;
    y[i] = (float)((int)(rnd() % 65535) - 32767) / 256.0f;
  }
  float a = 8191.0f / 256.0f;
  int differs_unfused = 0;
  for (int i = 0; i < N; i++) {
    want[i] = (float)((double)a * (double)x[i] + (double)y[i]);
    volatile float prod = a * x[i];
    if ((float)(prod + y[i]) != want[i])
      differs_unfused++;
  }
  ck_assert_int_gt(differs_unfused, 0); /* the data can tell fused from unfused */
  uint64_t n = N;
  call c;
  call_init(&c, 2, 64, 4);
  c.launch.grid[1] = 3; /* any shape */
  call_buffer(&c, 0, x, sizeof x);
  call_buffer(&c, 1, y, sizeof y);
  call_scalar(&c, 2, &a, 4);
  call_scalar(&c, 3, &n, 8);
  ck_assert_int_eq(run(CUBERT_BUILTIN_SCALE_ADD_F32, &c), CUBERT_OK);
  for (int i = 0; i < N; i++)
    ck_assert_msg(memcmp(&y[i], &want[i], 4) == 0, "y[%d] = %a, want %a", i, (double)y[i],
                  (double)want[i]);
}
END_TEST

/* ------------------------------------------------------------ sum */

/* The device's tree written recursively: halve a power-of-two row by adding
 * its upper half onto its lower half until one value is left. */
static float tree(float *v, uint32_t len) {
  if (len == 1)
    return v[0];
  for (uint32_t t = 0; t < len / 2; t++)
    v[t] = v[t] + v[t + len / 2];
  return tree(v, len / 2);
}

/* Partials the way the kernel assigns work: element i goes to global thread
 * i mod (grid * block), threads add their elements in increasing i. */
static void reference_partials(const float *x, uint64_t n, uint32_t grid, uint32_t block,
                               float *out) {
  uint64_t threads = (uint64_t)grid * block;
  float *acc = calloc(threads, sizeof *acc);
  ck_assert_ptr_nonnull(acc);
  for (uint64_t i = 0; i < n; i++)
    acc[i % threads] += x[i];
  for (uint32_t b = 0; b < grid; b++)
    out[b] = tree(acc + (uint64_t)b * block, block);
  free(acc);
}

static cubert_status run_sum(const float *x, uint64_t n, uint64_t x_bytes, float *partial,
                             uint64_t partial_bytes, uint32_t grid, uint32_t block,
                             uint32_t shared, char *message) {
  call c;
  call_init(&c, grid, block, 3);
  c.launch.shared_memory = shared;
  call_buffer(&c, 0, (void *)x, x_bytes);
  call_buffer(&c, 1, partial, partial_bytes);
  call_scalar(&c, 2, &n, 8);
  cubert_status st = run(CUBERT_BUILTIN_SUM_F32, &c);
  if (message)
    memcpy(message, c.message, sizeof c.message);
  return st;
}

START_TEST(sum_partials_match_the_device_order_bit_for_bit) {
  static const uint32_t shapes[][2] = {{1, 1}, {1, 2}, {3, 4}, {7, 32}, {2, 256}, {64, 1},
                                       {5, 1024}, {13, 8}};
  static const uint64_t sizes[] = {0, 1, 5, 31, 1000, 1023, 4097, 20011};
  enum { MAXN = 20011 };
  float *x = malloc(MAXN * sizeof *x);
  ck_assert_ptr_nonnull(x);
  /* Values of mixed magnitude, so a different order gives different bits. */
  for (int i = 0; i < MAXN; i++)
    x[i] = ((float)rnd() / 4294967296.0f - 0.5f) * (float)(1u << (rnd() % 20));
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    uint32_t grid = shapes[s][0], block = shapes[s][1];
    float got[65], want[65];
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      uint64_t n = sizes[k];
      memset(got, 0xFF, sizeof got);
      ck_assert_int_eq(run_sum(x, n, n * 4, got, grid * 4, grid, block, block * 4, NULL),
                       CUBERT_OK);
      reference_partials(x, n, grid, block, want);
      double total = 0, exact = 0, magnitude = 0;
      for (uint32_t b = 0; b < grid; b++) {
        ck_assert_msg(memcmp(&got[b], &want[b], 4) == 0,
                      "grid %u block %u n %" PRIu64 ": partial[%u] = %a, want %a", grid, block, n,
                      b, (double)got[b], (double)want[b]);
        total += got[b];
      }
      for (uint64_t i = 0; i < n; i++) {
        exact += x[i];
        magnitude += fabs(x[i]);
      }
      ck_assert(fabs(total - exact) <= 1e-5 * magnitude + 1e-30);
      ck_assert_uint_eq(((uint32_t *)got)[grid] , 0xFFFFFFFFu); /* nothing past grid[0] */
    }
  }
  free(x);
}
END_TEST

START_TEST(sum_of_integers_is_exact) {
  enum { N = 3001 };
  float x[N];
  uint64_t want = 0;
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i % 97);
    want += (uint64_t)(i % 97);
  }
  float partial[6];
  ck_assert_int_eq(run_sum(x, N, sizeof x, partial, sizeof partial, 6, 16, 64, NULL), CUBERT_OK);
  double total = 0;
  for (int b = 0; b < 6; b++)
    total += partial[b];
  ck_assert_uint_eq((uint64_t)total, want);
}
END_TEST

START_TEST(sum_refuses_bad_shapes_and_sizes) {
  float x[64] = {0}, partial[4];
  char msg[256];
  /* block not a power of two */
  ck_assert_int_eq(run_sum(x, 64, sizeof x, partial, sizeof partial, 4, 24, 96, msg),
                   CUBERT_ERR_LAUNCH_CONFIG);
  ck_assert_ptr_nonnull(strstr(msg, "power of two"));
  /* too little shared memory */
  ck_assert_int_eq(run_sum(x, 64, sizeof x, partial, sizeof partial, 4, 32, 64, msg),
                   CUBERT_ERR_LAUNCH_CONFIG);
  ck_assert_ptr_nonnull(strstr(msg, "shared memory"));
  /* more partials than the buffer holds */
  ck_assert_int_eq(run_sum(x, 64, sizeof x, partial, sizeof partial, 5, 8, 32, msg),
                   CUBERT_ERR_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(msg, "partial"));
  /* n past x */
  ck_assert_int_eq(run_sum(x, 65, sizeof x, partial, sizeof partial, 4, 8, 32, msg),
                   CUBERT_ERR_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(msg, "`x`"));
  /* n * 4 overflows */
  ck_assert_int_eq(run_sum(x, (UINT64_MAX / 4) + 2, sizeof x, partial, sizeof partial, 4, 8, 32,
                           msg),
                   CUBERT_ERR_OUT_OF_RANGE);
  /* two-dimensional */
  call c;
  uint64_t n = 64;
  call_init(&c, 2, 8, 3);
  c.launch.grid[1] = 2;
  c.launch.shared_memory = 32;
  call_buffer(&c, 0, x, sizeof x);
  call_buffer(&c, 1, partial, sizeof partial);
  call_scalar(&c, 2, &n, 8);
  ck_assert_int_eq(run(CUBERT_BUILTIN_SUM_F32, &c), CUBERT_ERR_LAUNCH_CONFIG);
}
END_TEST

/* ------------------------------------------------------------ checksum */

START_TEST(checksum_matches_a_hand_computed_value) {
  /* 1 ^ 0 + 2 ^ 0x9E3779B1 + 3 ^ 0x13C6EF362, worked out by hand. */
  uint32_t x[3] = {1, 2, 3};
  uint64_t acc = 0, n = 3;
  call c;
  call_init(&c, 2, 2, 3);
  call_buffer(&c, 0, x, sizeof x);
  call_buffer(&c, 1, &acc, sizeof acc);
  call_scalar(&c, 2, &n, 8);
  ck_assert_int_eq(run(CUBERT_BUILTIN_CHECKSUM_U32, &c), CUBERT_OK);
  ck_assert_uint_eq(acc, 1u + 0x9E3779B3ull + 0x13C6EF361ull);
  /* It accumulates: a second launch adds the same again. */
  ck_assert_int_eq(run(CUBERT_BUILTIN_CHECKSUM_U32, &c), CUBERT_OK);
  ck_assert_uint_eq(acc, 2 * (1u + 0x9E3779B3ull + 0x13C6EF361ull));
}
END_TEST

START_TEST(checksum_wraps_modulo_2_64) {
  enum { N = 4099 };
  static uint32_t x[N];
  unsigned __int128 exact = 0;
  uint64_t start = UINT64_MAX - 12345;
  exact = start;
  for (uint64_t i = 0; i < N; i++) {
    x[i] = 0xFFFFFFFFu - (uint32_t)(rnd() & 0xFF);
    /* The term as a 64-bit product (the kernel's i * 2654435761 is 64-bit). */
    unsigned __int128 product = (unsigned __int128)i * 2654435761u;
    exact += (uint64_t)x[i] ^ (uint64_t)product;
  }
  ck_assert(exact >> 64 != 0); /* the sum really wrapped */
  uint64_t acc = start, n = N;
  call c;
  call_init(&c, 4, 64, 3);
  c.launch.block[1] = 2;
  call_buffer(&c, 0, x, sizeof x);
  call_buffer(&c, 1, &acc, sizeof acc);
  call_scalar(&c, 2, &n, 8);
  ck_assert_int_eq(run(CUBERT_BUILTIN_CHECKSUM_U32, &c), CUBERT_OK);
  ck_assert_uint_eq(acc, (uint64_t)exact);
}
END_TEST

/* ------------------------------------------------------------ refusals */

START_TEST(bad_launches_are_refused_with_a_message) {
  uint32_t buf[16] = {0};
  uint64_t n = 16, big = 17;
  uint32_t value = 5;
  call c;

  /* n larger than the buffer */
  call_init(&c, 1, 32, 3);
  call_buffer(&c, 0, buf, sizeof buf);
  call_scalar(&c, 1, &big, 8);
  call_scalar(&c, 2, &value, 4);
  ck_assert_int_eq(run(CUBERT_BUILTIN_FILL_U32, &c), CUBERT_ERR_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(c.message, "cubert_fill_u32"));
  ck_assert_ptr_nonnull(strstr(c.message, "`out`"));
  ck_assert_uint_eq(buf[0], 0); /* nothing written */

  /* the wrong number of arguments */
  call_init(&c, 1, 32, 2);
  call_buffer(&c, 0, buf, sizeof buf);
  call_scalar(&c, 1, &n, 8);
  ck_assert_int_eq(run(CUBERT_BUILTIN_FILL_U32, &c), CUBERT_ERR_INVALID_ARGUMENT);

  /* a 4-byte n */
  call_init(&c, 1, 32, 3);
  call_buffer(&c, 0, buf, sizeof buf);
  call_scalar(&c, 1, &value, 4);
  call_scalar(&c, 2, &value, 4);
  ck_assert_int_eq(run(CUBERT_BUILTIN_FILL_U32, &c), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(c.message, "`n`"));

  /* a misaligned buffer */
  call_init(&c, 1, 32, 3);
  call_buffer(&c, 0, (char *)buf + 2, 8);
  call_buffer(&c, 1, buf + 8, 32);
  call_scalar(&c, 2, &(uint64_t){2}, 8);
  ck_assert_int_eq(run(CUBERT_BUILTIN_COPY_U32, &c), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(c.message, "aligned"));

  /* checksum accumulator too small */
  uint64_t acc = 0;
  call_init(&c, 1, 32, 3);
  call_buffer(&c, 0, buf, sizeof buf);
  call_buffer(&c, 1, &acc, 4);
  call_scalar(&c, 2, &n, 8);
  ck_assert_int_eq(run(CUBERT_BUILTIN_CHECKSUM_U32, &c), CUBERT_ERR_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(c.message, "`acc`"));

  /* scale-add with a double for a */
  double a = 2.0;
  float fx[4] = {0}, fy[4] = {0};
  call_init(&c, 1, 32, 4);
  call_buffer(&c, 0, fx, sizeof fx);
  call_buffer(&c, 1, fy, sizeof fy);
  call_scalar(&c, 2, &a, 8);
  call_scalar(&c, 3, &(uint64_t){4}, 8);
  ck_assert_int_eq(run(CUBERT_BUILTIN_SCALE_ADD_F32, &c), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(c.message, "`a`"));
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("builtin_kernels");
  TCase *t = tcase_create("core");
  tcase_set_timeout(t, 60);
  tcase_add_test(t, descriptors_name_their_entry_and_params);
  tcase_add_test(t, peer_copies_bind_a_peer_buffer_on_the_right_side);
  tcase_add_test(t, builtin_kernel_is_created_once);
  tcase_add_test(t, fill_writes_n_values_and_nothing_more);
  tcase_add_test(t, copy_copies_n_values);
  tcase_add_test(t, scale_add_is_one_fused_rounding);
  tcase_add_test(t, sum_partials_match_the_device_order_bit_for_bit);
  tcase_add_test(t, sum_of_integers_is_exact);
  tcase_add_test(t, sum_refuses_bad_shapes_and_sizes);
  tcase_add_test(t, checksum_matches_a_hand_computed_value);
  tcase_add_test(t, checksum_wraps_modulo_2_64);
  tcase_add_test(t, bad_launches_are_refused_with_a_message);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
