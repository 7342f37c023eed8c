/* tests/test_launch.c: kernel launches: the built-in kernels against host
 * computations, what a custom host kernel sees, every refused launch
 * (arguments against the kernel, shape against the device), kernel
 * descriptor validation, and kernels that fail when they run.
 *
 * Built-in kernel tests loop over every backend. Tests with custom kernels
 * carry only host functions, so they run on the host backend and print
 * "skipped" on the others. Limits come from the device's info, never from
 * constants, so the refusal tests hold on a GPU too. */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/cubert.h"
#include "tests/testutil.h"

#define expect_message(needle)                                                        \
  ck_assert_msg(strstr(cubert_last_error_message(), (needle)) != NULL,                \
                "last error message \"%s\" does not mention \"%s\"",                   \
                cubert_last_error_message(), (needle))

static bool host_only(cb_test_env *env) {
  if (strcmp(env->backend, "host") == 0) return true;
  cb_test_skip("no device (%s: the test's kernels are host functions) in %s", env->backend, tcase_name());
  cb_test_close(env);
  return false;
}

static cubert_kernel *builtin(cubert_builtin which) {
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_builtin_kernel(which, &k));
  ck_assert_ptr_nonnull(k);
  ck_assert_str_eq(cubert_kernel_name(k), cubert_builtin_desc(which)->name);
  return k;
}

static cubert_handle *from(cubert_client *c, const void *data, uint64_t size) {
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_create(c, data, size, &h));
  return h;
}

static void read_all(cubert_client *c, const cubert_handle *h, void *dst) {
  cb_test_ok(cubert_handle_read(c, h, dst, cubert_handle_size_in_use(h)));
}

static cubert_launch_config shape(uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by,
                                  uint32_t bz, uint32_t shared) {
  cubert_launch_config cfg = {{gx, gy, gz}, {bx, by, bz}, shared};
  return cfg;
}

/* Shapes every element-wise built-in must give the same result under. */
static const uint32_t shapes[][6] = {
    {1, 1, 1, 1, 1, 1}, {7, 1, 1, 64, 1, 1}, {2, 3, 2, 4, 4, 2}, {1000, 1, 1, 256, 1, 1}, {3, 1, 1, 5, 3, 1}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* ------------------------------------------------------------ built-ins */

START_TEST(test_builtin_fill_u32_writes_the_value_n_times) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_kernel *k = builtin(CUBERT_BUILTIN_FILL_U32);
  enum { N = 10000, TAIL = 16 };
  static uint32_t model[N + TAIL], got[N + TAIL];
  cb_test_pattern(model, sizeof model, 1);
  cubert_handle *h = from(c, model, sizeof model);
  for (size_t s = 0; s < NSHAPES; s++) {
    uint64_t n = N - s * 7; /* not a multiple of any shape */
    uint32_t value = 0xC0FFEE00u + (uint32_t)s;
    cubert_arg args[3] = {cubert_arg_buffer(h), cubert_arg_scalar(&n, 8), cubert_arg_scalar(&value, 4)};
    cubert_launch_config cfg = shape(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4],
                                     shapes[s][5], 0);
    cb_test_ok(cubert_launch(c, k, &cfg, args, 3));
    for (uint64_t i = 0; i < n; i++) model[i] = value;
    read_all(c, h, got);
    /* words past n keep what earlier launches (or the creation) left */
    for (uint64_t i = 0; i < N + TAIL; i++)
      ck_assert_msg(got[i] == model[i], "shape %zu (n = %" PRIu64 "): word %" PRIu64 " is 0x%08x, expected 0x%08x",
                    s, n, i, got[i], model[i]);
  }
  cubert_handle_release(h);
  cubert_kernel_release(k);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_builtin_copy_u32_copies_n_words) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_kernel *k = builtin(CUBERT_BUILTIN_COPY_U32);
  enum { N = 5000 };
  static uint32_t in[N + 8], out[N + 8], got[N + 8];
  cb_test_pattern(in, sizeof in, 2);
  cb_test_pattern(out, sizeof out, 3);
  cubert_handle *hi = from(c, in, sizeof in), *ho = from(c, out, sizeof out);
  for (size_t s = 0; s < NSHAPES; s++) {
    uint64_t n = N - s;
    cubert_arg args[3] = {cubert_arg_buffer(hi), cubert_arg_buffer(ho), cubert_arg_scalar(&n, 8)};
    cubert_launch_config cfg = shape(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4],
                                     shapes[s][5], 0);
    cb_test_ok(cubert_launch(c, k, &cfg, args, 3));
    read_all(c, ho, got);
    ck_assert_mem_eq(got, in, n * 4);
    ck_assert_mem_eq(got + N, out + N, 8 * 4); /* never reached by any n */
  }
  /* from a slice: the kernel sees the slice's first word as in[0] */
  cubert_handle *part = NULL;
  cb_test_ok(cubert_handle_slice(hi, 4 * 100, 4 * 8, &part));
  uint64_t n = N - 100;
  cubert_arg args[3] = {cubert_arg_buffer(part), cubert_arg_buffer(ho), cubert_arg_scalar(&n, 8)};
  cubert_launch_config cfg = shape(8, 1, 1, 128, 1, 1, 0);
  cb_test_ok(cubert_launch(c, k, &cfg, args, 3));
  read_all(c, ho, got);
  ck_assert_mem_eq(got, in + 100, n * 4);
  cubert_handle_release(part);
  cubert_handle_release(hi);
  cubert_handle_release(ho);
  cubert_kernel_release(k);
  cb_test_close(&env);
}
END_TEST

/* The copy's 16-byte path and its word-by-word heads and tails: every pair
 * of word offsets of `in` and `out` modulo 16 bytes (the same offset: the
 * wide path; different ones: word by word), lengths around the chunk size,
 * the shapes above and the configuration cubert_builtin_config() gives.
 * Exactly n words land, from in[0], and the words around them keep theirs. */
START_TEST(test_builtin_copy_u32_is_exact_at_every_alignment) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_kernel *k = builtin(CUBERT_BUILTIN_COPY_U32);
  cubert_device_info info;
  cb_test_ok(cubert_runtime_device_info(env.runtime, 0, &info));
  enum { W = 4200 };
  static uint32_t in[W], out[W], got[W], model[W];
  cb_test_pattern(in, sizeof in, 11);
  cb_test_pattern(out, sizeof out, 12);
  cubert_handle *hi = from(c, in, sizeof in), *ho = from(c, out, sizeof out);
  static const uint64_t lengths[] = {0, 1, 3, 4, 7, 17, 1025, 4099};
  int runs = 0;
  for (uint64_t oi = 0; oi < 4; oi++)
    for (uint64_t oo = 0; oo < 4; oo++)
      for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++, runs++) {
        uint64_t n = lengths[li];
        cubert_handle *si = NULL, *so = NULL;
        /* `out` starts one word later than its offset so a word before it is watched */
        cb_test_ok(cubert_handle_slice(hi, 4 * oi, 4 * (W - oi - n), &si));
        cb_test_ok(cubert_handle_slice(ho, 4 * (4 + oo), 4 * (W - 4 - oo - n), &so));
        cubert_launch_config cfg;
        if (runs % (int)(NSHAPES + 1) == (int)NSHAPES)
          cb_test_ok(cubert_builtin_config(CUBERT_BUILTIN_COPY_U32, &info, n, &cfg));
        else {
          const uint32_t *sh = shapes[runs % (int)(NSHAPES + 1)];
          cfg = shape(sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], 0);
        }
        cubert_arg args[3] = {cubert_arg_buffer(si), cubert_arg_buffer(so), cubert_arg_scalar(&n, 8)};
        cb_test_ok(cubert_launch(c, k, &cfg, args, 3));
        read_all(c, ho, got);
        memcpy(model, out, sizeof model);
        memcpy(model + 4 + oo, in + oi, n * 4);
        for (uint64_t w = 0; w < W; w++)
          ck_assert_msg(got[w] == model[w],
                        "in at word %" PRIu64 ", out at word %" PRIu64 ", n = %" PRIu64
                        ": word %" PRIu64 " is 0x%08x, expected 0x%08x",
                        oi, 4 + oo, n, w, got[w], model[w]);
        memcpy(out, got, sizeof out);
        cubert_handle_release(si);
        cubert_handle_release(so);
      }
  cubert_handle_release(hi);
  cubert_handle_release(ho);
  cubert_kernel_release(k);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_builtin_config_sizes_the_grid_from_the_compute_units) {
  cubert_device_info info;
  memset(&info, 0, sizeof info);
  info.multiprocessors = 132;
  cubert_launch_config cfg;
  cb_test_ok(cubert_builtin_config(CUBERT_BUILTIN_COPY_U32, &info, UINT64_C(1) << 28, &cfg));
  ck_assert_uint_eq(cfg.grid[0], 132 * CUBERT_BUILTIN_BLOCKS_PER_CU);
  ck_assert_uint_eq(cfg.block[0], CUBERT_BUILTIN_BLOCK);
  ck_assert_uint_eq(cfg.grid[1] * cfg.grid[2] * cfg.block[1] * cfg.block[2], 1);
  /* a small copy: 4 words per thread */
  cb_test_ok(cubert_builtin_config(CUBERT_BUILTIN_COPY_PEER_READ, &info, 4 * 256 * 3 + 1, &cfg));
  ck_assert_uint_eq(cfg.grid[0], 4);
  cb_test_ok(cubert_builtin_config(CUBERT_BUILTIN_FILL_U32, &info, 256 * 3 + 1, &cfg));
  ck_assert_uint_eq(cfg.grid[0], 4);
  cb_test_ok(cubert_builtin_config(CUBERT_BUILTIN_SUM_F32, &info, 0, &cfg));
  ck_assert_uint_eq(cfg.grid[0], 1);
  ck_assert_uint_eq(cfg.shared_memory, CUBERT_BUILTIN_BLOCK * 4);
  info.multiprocessors = 0; /* unknown: one compute unit */
  cb_test_ok(cubert_builtin_config(CUBERT_BUILTIN_CHECKSUM_U32, &info, UINT64_C(1) << 30, &cfg));
  ck_assert_uint_eq(cfg.grid[0], CUBERT_BUILTIN_BLOCKS_PER_CU);
  cubert_launch_config untouched = cfg;
  ck_assert_int_eq(cubert_builtin_config(CUBERT_BUILTIN_COUNT, &info, 1, &cfg), CUBERT_ERR_INVALID_ARGUMENT);
  expect_message("no built-in kernel");
  ck_assert_int_eq(cubert_builtin_config(CUBERT_BUILTIN_COPY_U32, NULL, 1, &cfg), CUBERT_ERR_INVALID_ARGUMENT);
  expect_message("info is NULL");
  ck_assert_int_eq(cubert_builtin_config(CUBERT_BUILTIN_COPY_U32, &info, 1, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_mem_eq(&cfg, &untouched, sizeof cfg);
}
END_TEST

START_TEST(test_builtin_scale_add_f32_matches_the_host) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_kernel *k = builtin(CUBERT_BUILTIN_SCALE_ADD_F32);
  enum { N = 4099 };
  static float x[N], y[N], got[N], want[N];
  /* exact values first: a*x + y needs no rounding, so any evaluation agrees */
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i - 2000);
    y[i] = (float)(3 * i + 1);
  }
  float a = -0.75f;
  cubert_handle *hx = from(c, x, sizeof x), *hy = from(c, y, sizeof y);
  uint64_t n = N;
  cubert_arg args[4] = {cubert_arg_buffer(hx), cubert_arg_buffer(hy), cubert_arg_scalar(&a, 4),
                        cubert_arg_scalar(&n, 8)};
  cubert_launch_config cfg = shape(5, 1, 1, 128, 1, 1, 0);
  cb_test_ok(cubert_launch(c, k, &cfg, args, 4));
  read_all(c, hy, got);
  for (int i = 0; i < N; i++) {
    double exact = -0.75 * (double)(i - 2000) + (double)(3 * i + 1);
    ck_assert_msg(got[i] == (float)exact, "y[%d] = %.9g, expected %.9g", i, got[i], exact);
  }
  /* y is read-write: a second launch adds a*x again */
  cb_test_ok(cubert_launch(c, k, &cfg, args, 4));
  read_all(c, hy, got);
  for (int i = 0; i < N; i++) {
    double exact = -1.5 * (double)(i - 2000) + (double)(3 * i + 1);
    ck_assert_msg(got[i] == (float)exact, "second pass: y[%d] = %.9g, expected %.9g", i, got[i], exact);
  }
  /* arbitrary values: bit for bit fmaf (kernels.h) */
  uint32_t bits[N];
  cb_test_pattern(bits, sizeof bits, 4);
  for (int i = 0; i < N; i++) {
    x[i] = (float)((int32_t)bits[i] % 100000) / 977.0f;
    y[i] = (float)((int32_t)(bits[i] >> 7) % 100000) / 1013.0f;
    want[i] = fmaf(1.3f, x[i], y[i]);
  }
  a = 1.3f;
  cb_test_ok(cubert_handle_write(c, hx, x, sizeof x));
  cb_test_ok(cubert_handle_write(c, hy, y, sizeof y));
  cb_test_ok(cubert_launch(c, k, &cfg, args, 4));
  read_all(c, hy, got);
  for (int i = 0; i < N; i++)
    ck_assert_msg(memcmp(&got[i], &want[i], 4) == 0, "y[%d] = %a, fmaf gives %a", i, got[i], want[i]);
  cubert_handle_release(hx);
  cubert_handle_release(hy);
  cubert_kernel_release(k);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_builtin_sum_f32_gives_one_partial_per_block) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_kernel *k = builtin(CUBERT_BUILTIN_SUM_F32);
  enum { N = 10007 };
  static float x[N];
  uint8_t r[N];
  cb_test_pattern(r, N, 5);
  /* small integers: every partial sum is exact, whatever the order */
  for (int i = 0; i < N; i++) x[i] = (float)(r[i] % 16);
  cubert_handle *hx = from(c, x, sizeof x);
  static const uint32_t cases[][2] = {{1, 1}, {1, 64}, {8, 64}, {13, 32}, {4, 256}};
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    uint32_t grid = cases[t][0], block = cases[t][1];
    uint64_t n = N - t;
    cubert_handle *hp = NULL;
    cb_test_ok(cubert_handle_empty(c, grid * 4, &hp));
    cubert_arg args[3] = {cubert_arg_buffer(hx), cubert_arg_buffer(hp), cubert_arg_scalar(&n, 8)};
    cubert_launch_config cfg = shape(grid, 1, 1, block, 1, 1, block * 4);
    cb_test_ok(cubert_launch(c, k, &cfg, args, 3));
    float partial[256];
    read_all(c, hp, partial);
    /* element i belongs to block (i mod grid*block) / block */
    double want[256] = {0}, total = 0;
    for (uint64_t i = 0; i < n; i++) {
      want[(i % ((uint64_t)grid * block)) / block] += x[i];
      total += x[i];
    }
    double sum = 0;
    for (uint32_t b = 0; b < grid; b++) {
      ck_assert_msg(partial[b] == (float)want[b], "grid %u block %u: partial[%u] = %.9g, expected %.9g", grid,
                    block, b, partial[b], want[b]);
      sum += partial[b];
    }
    ck_assert(sum == total);
    cubert_handle_release(hp);
  }
  cubert_handle_release(hx);
  cubert_kernel_release(k);
  cb_test_close(&env);
}
END_TEST

static uint64_t checksum(const uint32_t *x, uint64_t n) {
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n; i++) sum += (uint64_t)x[i] ^ (i * UINT64_C(2654435761));
  return sum;
}

START_TEST(test_builtin_checksum_u32_accumulates) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_kernel *k = builtin(CUBERT_BUILTIN_CHECKSUM_U32);
  enum { N = 20011 };
  static uint32_t x[N];
  cb_test_pattern(x, sizeof x, 6);
  cubert_handle *hx = from(c, x, sizeof x);
  for (size_t s = 0; s < NSHAPES; s++) {
    uint64_t n = N - 3 * s;
    uint64_t acc = 0x123456789ull + s;
    cubert_handle *ha = from(c, &acc, 8);
    cubert_arg args[3] = {cubert_arg_buffer(hx), cubert_arg_buffer(ha), cubert_arg_scalar(&n, 8)};
    cubert_launch_config cfg = shape(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4],
                                     shapes[s][5], 0);
    cb_test_ok(cubert_launch(c, k, &cfg, args, 3));
    uint64_t got = 0;
    read_all(c, ha, &got);
    uint64_t want = acc + checksum(x, n);
    ck_assert_msg(got == want, "shape %zu: %" PRIu64 ", expected %" PRIu64, s, got, want);
    cb_test_ok(cubert_launch(c, k, &cfg, args, 3));
    read_all(c, ha, &got);
    ck_assert_msg(got == want + checksum(x, n), "shape %zu, second launch: %" PRIu64, s, got);
    cubert_handle_release(ha);
  }
  cubert_handle_release(hx);
  cubert_kernel_release(k);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_builtin_kernels_are_described) {
  for (int b = 0; b < CUBERT_BUILTIN_COUNT; b++) {
    const cubert_kernel_desc *d = cubert_builtin_desc((cubert_builtin)b);
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(d->name);
    ck_assert_ptr_nonnull(d->source);
    ck_assert_ptr_nonnull(d->host_fn);
    ck_assert_uint_ge(d->nparams, 2); /* the tensor built-ins take two */
    cubert_kernel *k = NULL;
    cb_test_ok(cubert_builtin_kernel((cubert_builtin)b, &k));
    ck_assert_str_eq(cubert_kernel_name(k), d->name);
    cubert_kernel_release(k);
    for (int e = 0; e < b; e++) ck_assert_str_ne(d->name, cubert_builtin_desc((cubert_builtin)e)->name);
  }
  ck_assert_ptr_null(cubert_builtin_desc(CUBERT_BUILTIN_COUNT));
  ck_assert_ptr_null(cubert_builtin_desc((cubert_builtin)-1));
  cubert_kernel *k = NULL;
  ck_assert_int_eq(cubert_builtin_kernel(CUBERT_BUILTIN_COUNT, &k), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(k);
}
END_TEST

/* ------------------------------------------------------------ custom host kernels */

/* What the probe kernel saw, filled on the stream's worker and read after a
 * sync (the sync orders the two). */
typedef struct probe_record {
  uint32_t grid[3], block[3], shared_memory, nargs;
  uint64_t sizes[8];
  uint8_t s8[8], s3[3], s64[64];
  uint8_t in_head[16];
  int runs;
} probe_record;

static probe_record probe_seen;

/* in: read, out: write, s8, s3, s64: scalars. out[k] = in[k] ^ 0x5A. */
static cubert_status probe_host(const cubert_host_launch *l, char *message, size_t capacity) {
  probe_record *r = &probe_seen;
  memcpy(r->grid, l->grid, sizeof r->grid);
  memcpy(r->block, l->block, sizeof r->block);
  r->shared_memory = l->shared_memory;
  r->nargs = l->nargs;
  for (uint32_t i = 0; i < l->nargs && i < 8; i++) r->sizes[i] = l->sizes[i];
  r->runs++;
  if (l->nargs != 5) {
    snprintf(message, capacity, "probe: %u arguments", l->nargs);
    return CUBERT_ERR_INVALID_ARGUMENT;
  }
  memcpy(r->s8, l->args[2], 8);
  memcpy(r->s3, l->args[3], 3);
  memcpy(r->s64, l->args[4], 64);
  const uint8_t *in = l->args[0];
  uint8_t *out = l->args[1];
  memcpy(r->in_head, in, l->sizes[0] < 16 ? l->sizes[0] : 16);
  uint64_t n = l->sizes[0] < l->sizes[1] ? l->sizes[0] : l->sizes[1];
  for (uint64_t k = 0; k < n; k++) out[k] = in[k] ^ 0x5A;
  return CUBERT_OK;
}

static const cubert_param probe_params[] = {{"in", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0},
                                            {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0},
                                            {"s8", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 8},
                                            {"s3", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 3},
                                            {"s64", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 64}};

START_TEST(test_custom_host_kernel_sees_shape_arguments_and_sizes) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) return;
  cubert_client *c = env.clients[0];
  cubert_kernel_desc d = {.name = "probe", .params = probe_params, .nparams = 5, .host_fn = probe_host};
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_kernel_create(&d, &k));
  ck_assert_str_eq(cubert_kernel_name(k), "probe");
  uint8_t data[512];
  cb_test_pattern(data, sizeof data, 7);
  cubert_handle *whole = from(c, data, sizeof data), *in = NULL, *out = NULL;
  cb_test_ok(cubert_handle_slice(whole, 32, 64, &in)); /* 416 bytes from byte 32 */
  cb_test_ok(cubert_handle_empty(c, 416, &out));
  uint64_t s8 = 0x1122334455667788ull;
  uint8_t s3[3] = {9, 8, 7}, s64[64];
  cb_test_pattern(s64, sizeof s64, 8);
  cubert_arg args[5] = {cubert_arg_buffer(in), cubert_arg_buffer(out), cubert_arg_scalar(&s8, 8),
                        cubert_arg_scalar(s3, 3), cubert_arg_scalar(s64, 64)};
  cubert_launch_config cfg = shape(3, 2, 1, 8, 4, 2, 1000);
  memset(&probe_seen, 0, sizeof probe_seen);
  cb_test_ok(cubert_launch(c, k, &cfg, args, 5));
  /* the scalars were copied at launch: changing them now changes nothing */
  s8 = 0;
  memset(s64, 0, sizeof s64);
  cb_test_ok(cubert_sync(c));
  probe_record r = probe_seen;
  ck_assert_int_eq(r.runs, 1);
  ck_assert_uint_eq(r.grid[0], 3);
  ck_assert_uint_eq(r.grid[1], 2);
  ck_assert_uint_eq(r.grid[2], 1);
  ck_assert_uint_eq(r.block[0], 8);
  ck_assert_uint_eq(r.block[1], 4);
  ck_assert_uint_eq(r.block[2], 2);
  ck_assert_uint_eq(r.shared_memory, 1000);
  ck_assert_uint_eq(r.nargs, 5);
  ck_assert_uint_eq(r.sizes[0], 416);
  ck_assert_uint_eq(r.sizes[1], 416);
  ck_assert_uint_eq(r.sizes[2], 8);
  ck_assert_uint_eq(r.sizes[3], 3);
  ck_assert_uint_eq(r.sizes[4], 64);
  uint64_t seen8;
  memcpy(&seen8, r.s8, 8);
  ck_assert_uint_eq(seen8, 0x1122334455667788ull);
  ck_assert_mem_eq(r.s3, s3, 3);
  uint8_t want64[64];
  ck_assert_mem_eq(r.s64, cb_test_pattern(want64, 64, 8), 64);
  ck_assert_mem_eq(r.in_head, data + 32, 16);
  uint8_t got[416];
  read_all(c, out, got);
  for (int k2 = 0; k2 < 416; k2++) ck_assert_uint_eq(got[k2], data[32 + k2] ^ 0x5A);
  cubert_handle_release(in);
  cubert_handle_release(out);
  cubert_handle_release(whole);
  cubert_kernel_release(k);
  cb_test_close(&env);
}
END_TEST

static atomic_int noarg_runs;

static cubert_status noarg_host(const cubert_host_launch *l, char *message, size_t capacity) {
  (void)message;
  (void)capacity;
  if (l->nargs == 0) atomic_fetch_add(&noarg_runs, 1);
  return CUBERT_OK;
}

START_TEST(test_kernel_without_parameters_launches_with_no_arguments) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) return;
  cubert_kernel_desc d = {.name = "noarg", .host_fn = noarg_host};
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_kernel_create(&d, &k));
  cubert_launch_config cfg = shape(1, 1, 1, 1, 1, 1, 0);
  atomic_store(&noarg_runs, 0);
  cb_test_ok(cubert_launch(env.clients[0], k, &cfg, NULL, 0));
  cb_test_ok(cubert_launch(env.clients[0], k, &cfg, NULL, 0));
  cb_test_ok(cubert_sync(env.clients[0]));
  ck_assert_int_eq(atomic_load(&noarg_runs), 2);
  cubert_kernel_release(k);
  cb_test_close(&env);
}
END_TEST

/* The module cache (a hash table by kernel id) keeps each kernel's module
 * apart: many kernels, each launched twice, interleaved, each run as
 * itself, and a kernel released early leaves the others working. */
static atomic_int cache_runs[40];

static cubert_status cache_host(const cubert_host_launch *l, char *message, size_t capacity) {
  (void)message;
  (void)capacity;
  uint32_t which = *(const uint32_t *)l->args[0];
  if (which < 40) atomic_fetch_add(&cache_runs[which], 1);
  return CUBERT_OK;
}

START_TEST(test_many_kernels_each_keep_their_own_module) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) return;
  static const cubert_param p[] = {{"which", CUBERT_PARAM_SCALAR, 0, 4}};
  cubert_kernel *k[40];
  char names[40][16];
  for (uint32_t i = 0; i < 40; i++) {
    snprintf(names[i], sizeof names[i], "cache_%u", i);
    cubert_kernel_desc d = {.name = names[i], .params = p, .nparams = 1, .host_fn = cache_host};
    cb_test_ok(cubert_kernel_create(&d, &k[i]));
    atomic_store(&cache_runs[i], 0);
  }
  cubert_launch_config cfg = shape(1, 1, 1, 1, 1, 1, 0);
  for (int round = 0; round < 2; round++)
    for (uint32_t i = 0; i < 40; i++) {
      uint32_t which = (i * 7 + (uint32_t)round) % 40;
      cubert_arg a = cubert_arg_scalar(&which, 4);
      cb_test_ok(cubert_launch(env.clients[0], k[which], &cfg, &a, 1));
    }
  cubert_kernel_release(k[3]); /* the cache keeps what it needs of it */
  uint32_t three = 3;
  cubert_arg a3 = cubert_arg_scalar(&three, 4);
  cb_test_ok(cubert_launch(env.clients[0], k[5], &cfg, &a3, 1)); /* k[5]'s module, told 3 */
  cb_test_ok(cubert_sync(env.clients[0]));
  for (uint32_t i = 0; i < 40; i++) ck_assert_int_eq(atomic_load(&cache_runs[i]), i == 3 ? 3 : 2);
  for (uint32_t i = 0; i < 40; i++)
    if (i != 3) cubert_kernel_release(k[i]);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ refused launches */

/* A FILL_U32 launch over `out` that each refusal test breaks one way. */
typedef struct fill_setup {
  cb_test_env env;
  cubert_client *c;
  cubert_kernel *k;
  cubert_handle *out, *other;
  uint64_t n;
  uint32_t value;
  cubert_arg args[4];
  cubert_launch_config cfg;
  cubert_device_info info;
  uint8_t init[1024];
} fill_setup;

static bool fill_open(int i, fill_setup *f) {
  memset(f, 0, sizeof *f);
  if (!cb_test_open(i, 1, &f->env)) return false;
  f->c = f->env.clients[0];
  cb_test_ok(cubert_runtime_device_info(f->env.runtime, 0, &f->info));
  f->k = builtin(CUBERT_BUILTIN_FILL_U32);
  cb_test_pattern(f->init, sizeof f->init, 9);
  f->out = from(f->c, f->init, sizeof f->init);
  f->other = from(f->c, f->init, 8);
  f->n = sizeof f->init / 4;
  f->value = 0x0F0F0F0F;
  f->args[0] = cubert_arg_buffer(f->out);
  f->args[1] = cubert_arg_scalar(&f->n, 8);
  f->args[2] = cubert_arg_scalar(&f->value, 4);
  f->args[3] = cubert_arg_scalar(&f->value, 4);
  f->cfg = shape(2, 1, 1, 64, 1, 1, 0);
  return true;
}

/* The refused launch touched nothing: `out` holds its bytes, untainted, and
 * the unbroken launch still works. */
static void fill_close(fill_setup *f) {
  cb_test_ok(cubert_sync(f->c));
  cb_test_ok(cubert_handle_check(f->c, f->out));
  uint8_t got[1024];
  read_all(f->c, f->out, got);
  ck_assert_mem_eq(got, f->init, sizeof got);
  cubert_arg good[3] = {cubert_arg_buffer(f->out), cubert_arg_scalar(&f->n, 8), cubert_arg_scalar(&f->value, 4)};
  cubert_launch_config cfg = shape(2, 1, 1, 64, 1, 1, 0);
  cb_test_ok(cubert_launch(f->c, f->k, &cfg, good, 3));
  uint32_t words[256];
  read_all(f->c, f->out, words);
  for (int i = 0; i < 256; i++) ck_assert_uint_eq(words[i], f->value);
  cubert_handle_release(f->other);
  cubert_handle_release(f->out);
  cubert_kernel_release(f->k);
  cb_test_close(&f->env);
}

/* `call` must fail with `status` and a message naming `needle`. */
#define expect_refused(call, status, needle) \
  do {                                       \
    cb_test_status((call), (status));        \
    expect_message(needle);                  \
  } while (0)

START_TEST(test_launch_with_the_wrong_argument_count_is_refused) {
  fill_setup f;
  if (!fill_open(_i, &f)) return;
  expect_refused(cubert_launch(f.c, f.k, &f.cfg, f.args, 2), CUBERT_ERR_LAUNCH_CONFIG, "takes 3 arguments");
  expect_message("gives 2");
  expect_message("cubert_fill_u32");
  expect_refused(cubert_launch(f.c, f.k, &f.cfg, f.args, 4), CUBERT_ERR_LAUNCH_CONFIG, "gives 4");
  expect_refused(cubert_launch(f.c, f.k, &f.cfg, NULL, 0), CUBERT_ERR_LAUNCH_CONFIG, "gives 0");
  expect_refused(cubert_launch(f.c, f.k, &f.cfg, f.args, 100000), CUBERT_ERR_LAUNCH_CONFIG, "100000");
  fill_close(&f);
}
END_TEST

START_TEST(test_launch_with_the_wrong_argument_kind_is_refused) {
  fill_setup f;
  if (!fill_open(_i, &f)) return;
  cubert_arg args[3];
  memcpy(args, f.args, sizeof args);
  args[0] = cubert_arg_scalar(&f.n, 8); /* scalar for a buffer */
  expect_refused(cubert_launch(f.c, f.k, &f.cfg, args, 3), CUBERT_ERR_LAUNCH_CONFIG, "must be a buffer");
  expect_message("`out`");
  expect_message("a scalar");
  args[0] = cubert_arg_peer(f.out); /* peer buffer for a buffer */
  expect_refused(cubert_launch(f.c, f.k, &f.cfg, args, 3), CUBERT_ERR_LAUNCH_CONFIG, "a peer buffer");
  memcpy(args, f.args, sizeof args);
  args[1] = cubert_arg_buffer(f.other); /* buffer for a scalar */
  expect_refused(cubert_launch(f.c, f.k, &f.cfg, args, 3), CUBERT_ERR_LAUNCH_CONFIG, "must be a scalar");
  expect_message("`n`");
  args[1].kind = (cubert_param_kind)9; /* no kind at all */
  cubert_status st = cubert_launch(f.c, f.k, &f.cfg, args, 3);
  ck_assert_msg(st == CUBERT_ERR_LAUNCH_CONFIG || st == CUBERT_ERR_INVALID_ARGUMENT, "kind 9 gave %s",
                cubert_status_name(st));
  expect_message("`n`");
  fill_close(&f);
}
END_TEST

START_TEST(test_launch_with_a_scalar_of_the_wrong_size_is_refused) {
  fill_setup f;
  if (!fill_open(_i, &f)) return;
  cubert_arg args[3];
  memcpy(args, f.args, sizeof args);
  uint32_t n32 = (uint32_t)f.n;
  args[1] = cubert_arg_scalar(&n32, 4);
  expect_refused(cubert_launch(f.c, f.k, &f.cfg, args, 3), CUBERT_ERR_LAUNCH_CONFIG, "`n`");
  expect_message("4 bytes");
  expect_message("takes 8");
  memcpy(args, f.args, sizeof args);
  args[2] = cubert_arg_scalar(&f.n, 8);
  expect_refused(cubert_launch(f.c, f.k, &f.cfg, args, 3), CUBERT_ERR_LAUNCH_CONFIG, "`value`");
  args[2] = cubert_arg_scalar(&f.value, 0);
  expect_refused(cubert_launch(f.c, f.k, &f.cfg, args, 3), CUBERT_ERR_LAUNCH_CONFIG, "`value`");
  fill_close(&f);
}
END_TEST

START_TEST(test_launch_with_a_null_scalar_is_refused) {
  fill_setup f;
  if (!fill_open(_i, &f)) return;
  cubert_arg args[3];
  memcpy(args, f.args, sizeof args);
  args[2] = cubert_arg_scalar(NULL, 4);
  expect_refused(cubert_launch(f.c, f.k, &f.cfg, args, 3), CUBERT_ERR_INVALID_ARGUMENT, "`value`");
  expect_message("NULL");
  fill_close(&f);
}
END_TEST

START_TEST(test_launch_with_a_null_handle_is_refused) {
  fill_setup f;
  if (!fill_open(_i, &f)) return;
  cubert_arg args[3];
  memcpy(args, f.args, sizeof args);
  args[0] = cubert_arg_buffer(NULL);
  expect_refused(cubert_launch(f.c, f.k, &f.cfg, args, 3), CUBERT_ERR_INVALID_ARGUMENT, "`out`");
  expect_message("NULL");
  fill_close(&f);
}
END_TEST

START_TEST(test_launch_with_a_zero_grid_or_block_is_refused) {
  fill_setup f;
  if (!fill_open(_i, &f)) return;
  static const char axis[] = "xyz";
  for (int d = 0; d < 3; d++) {
    char what[16];
    cubert_launch_config cfg = shape(2, 1, 1, 64, 1, 1, 0);
    cfg.grid[d] = 0;
    snprintf(what, sizeof what, "dimension %c", axis[d]);
    expect_refused(cubert_launch(f.c, f.k, &cfg, f.args, 3), CUBERT_ERR_LAUNCH_CONFIG, "grid");
    expect_message(what);
    cfg = shape(2, 1, 1, 64, 1, 1, 0);
    cfg.block[d] = 0;
    expect_refused(cubert_launch(f.c, f.k, &cfg, f.args, 3), CUBERT_ERR_LAUNCH_CONFIG, "block");
    expect_message(what);
  }
  fill_close(&f);
}
END_TEST

START_TEST(test_launch_over_max_threads_per_block_is_refused) {
  fill_setup f;
  if (!fill_open(_i, &f)) return;
  char limit[32];
  /* each axis within its own limit, the product over the device's */
  cubert_launch_config cfg = shape(1, 1, 1, f.info.max_block[0], 2, 1, 0);
  ck_assert_uint_le(2, f.info.max_block[1]);
  if ((uint64_t)f.info.max_block[0] * 2 > f.info.max_threads_per_block) {
    snprintf(limit, sizeof limit, "%u", f.info.max_threads_per_block);
    expect_refused(cubert_launch(f.c, f.k, &cfg, f.args, 3), CUBERT_ERR_LAUNCH_CONFIG, "threads per block");
    expect_message(limit);
  }
  /* one axis over its limit */
  cfg = shape(1, 1, 1, f.info.max_block[0] + 1, 1, 1, 0);
  snprintf(limit, sizeof limit, "%u", f.info.max_block[0]);
  expect_refused(cubert_launch(f.c, f.k, &cfg, f.args, 3), CUBERT_ERR_LAUNCH_CONFIG, "block x");
  expect_message(limit);
  cfg = shape(1, 1, 1, 1, 1, f.info.max_block[2] + 1, 0);
  snprintf(limit, sizeof limit, "%u", f.info.max_block[2]);
  expect_refused(cubert_launch(f.c, f.k, &cfg, f.args, 3), CUBERT_ERR_LAUNCH_CONFIG, "block z");
  expect_message(limit);
  /* exactly the limit is fine */
  cfg = shape(1, 1, 1, f.info.max_threads_per_block, 1, 1, 0);
  if (cfg.block[0] <= f.info.max_block[0]) {
    cb_test_ok(cubert_launch(f.c, f.k, &cfg, f.args, 3));
    cb_test_ok(cubert_handle_write(f.c, f.out, f.init, sizeof f.init)); /* back to the start */
  }
  fill_close(&f);
}
END_TEST

START_TEST(test_launch_over_the_grid_limits_is_refused) {
  fill_setup f;
  if (!fill_open(_i, &f)) return;
  static const char *const names[] = {"grid x", "grid y", "grid z"};
  for (int d = 0; d < 3; d++) {
    if (f.info.max_grid[d] == UINT32_MAX) continue; /* nothing above it to ask for */
    cubert_launch_config cfg = shape(1, 1, 1, 64, 1, 1, 0);
    cfg.grid[d] = f.info.max_grid[d] + 1;
    char limit[32];
    snprintf(limit, sizeof limit, "%u", f.info.max_grid[d]);
    expect_refused(cubert_launch(f.c, f.k, &cfg, f.args, 3), CUBERT_ERR_LAUNCH_CONFIG, names[d]);
    expect_message(limit);
  }
  fill_close(&f);
}
END_TEST

/* ROCm refuses grid * block over 2^32 - 1 threads in one dimension
 * (ROCm/clr hipamd/src/hip_module.cpp, hipModuleLaunchKernel:
 * hipErrorInvalidConfiguration); cubert refuses it before anything runs, on
 * every backend, naming the dimension. */
START_TEST(test_launch_over_2_to_the_32_threads_in_a_dimension_is_refused) {
  fill_setup f;
  if (!fill_open(_i, &f)) return;
  static const char *const names[] = {"x", "y", "z"};
  for (int d = 0; d < 3; d++) {
    uint32_t block = f.info.max_block[d];
    if (block < 2) continue;
    uint64_t grid = (UINT64_C(0xffffffff) / block) + 1; /* grid * block > UINT32_MAX */
    if (grid > f.info.max_grid[d]) continue; /* the grid limit refuses it first */
    cubert_launch_config cfg = shape(1, 1, 1, 1, 1, 1, 0);
    cfg.grid[d] = (uint32_t)grid;
    cfg.block[d] = block;
    expect_refused(cubert_launch(f.c, f.k, &cfg, f.args, 3), CUBERT_ERR_LAUNCH_CONFIG, "threads in dimension");
    char what[32];
    snprintf(what, sizeof what, "dimension %s", names[d]);
    expect_message(what);
    expect_message("4294967295");
  }
  fill_close(&f);
}
END_TEST

START_TEST(test_launch_over_the_shared_memory_limit_is_refused) {
  fill_setup f;
  if (!fill_open(_i, &f)) return;
  cubert_launch_config cfg = shape(1, 1, 1, 64, 1, 1, f.info.max_shared_memory + 1);
  char limit[32];
  snprintf(limit, sizeof limit, "%u", f.info.max_shared_memory);
  expect_refused(cubert_launch(f.c, f.k, &cfg, f.args, 3), CUBERT_ERR_LAUNCH_CONFIG, "shared memory");
  expect_message(limit);
  cfg.shared_memory = UINT32_MAX;
  expect_refused(cubert_launch(f.c, f.k, &cfg, f.args, 3), CUBERT_ERR_LAUNCH_CONFIG, "shared memory");
  fill_close(&f);
}
END_TEST

/* ------------------------------------------------------------ kernel descriptors */

static cubert_status never_called(const cubert_host_launch *l, char *message, size_t capacity) {
  (void)l;
  snprintf(message, capacity, "never_called was called");
  return CUBERT_ERR_INTERNAL;
}

/* `desc` must be refused with INVALID_ARGUMENT and a message naming `needle`. */
static void expect_desc_refused(const cubert_kernel_desc *desc, const char *needle) {
  cubert_kernel *k = (cubert_kernel *)desc; /* sentinel */
  cb_test_status(cubert_kernel_create(desc, &k), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_eq(k, (cubert_kernel *)desc);
  expect_message(needle);
}

START_TEST(test_kernel_create_validates_the_descriptor) {
  cubert_param params[2] = {{"buf", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0},
                            {"val", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 4}};
  cubert_kernel_desc d = {.name = "k", .params = params, .nparams = 2, .host_fn = never_called};
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_kernel_create(&d, &k));
  cubert_kernel_release(k);

  cubert_kernel_desc bad = d;
  bad.name = NULL;
  expect_desc_refused(&bad, "name");
  bad.name = "";
  expect_desc_refused(&bad, "name");

  bad = d;
  bad.host_fn = NULL; /* no source, no object, no host function */
  expect_desc_refused(&bad, "`k`");
  expect_message("source");

  bad = d;
  bad.params = NULL;
  expect_desc_refused(&bad, "params");

  bad = d;
  bad.nobjects = 1;
  expect_desc_refused(&bad, "objects");
  cubert_code_object empty = {"gfx90a", "x", 0};
  bad.objects = &empty;
  expect_desc_refused(&bad, "code object 0");
  cubert_code_object noarch = {NULL, "x", 1};
  bad.objects = &noarch;
  expect_desc_refused(&bad, "code object 0");

  static const uint32_t bad_sizes[] = {0, 65, 1000};
  for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
    cubert_param p[2] = {params[0], params[1]};
    p[1].size = bad_sizes[i];
    bad = d;
    bad.params = p;
    char num[16];
    snprintf(num, sizeof num, "%u", bad_sizes[i]);
    expect_desc_refused(&bad, "parameter 1");
    expect_message(num);
  }
  static const int bad_access[] = {0, 4, -1, 7};
  for (size_t i = 0; i < sizeof bad_access / sizeof bad_access[0]; i++) {
    cubert_param p[2] = {params[0], params[1]};
    p[0].access = (cubert_access)bad_access[i];
    bad = d;
    bad.params = p;
    expect_desc_refused(&bad, "parameter 0");
    expect_message("access");
    p[0].kind = CUBERT_PARAM_PEER_BUFFER;
    expect_desc_refused(&bad, "parameter 0");
  }
  cubert_param unknown[1] = {{"u", (cubert_param_kind)5, CUBERT_ACCESS_READ, 4}};
  bad = d;
  bad.params = unknown;
  bad.nparams = 1;
  expect_desc_refused(&bad, "kind");

  /* each form of code is enough on its own */
  cubert_kernel_desc src = {.name = "s", .source = "extern \"C\" __global__ void s() {}"};
  cb_test_ok(cubert_kernel_create(&src, &k));
  cubert_kernel_release(k);
  static const uint8_t blob[4] = {1, 2, 3, 4};
  cubert_code_object obj = {"gfx90a", blob, sizeof blob};
  cubert_kernel_desc o = {.name = "o", .objects = &obj, .nobjects = 1};
  cb_test_ok(cubert_kernel_create(&o, &k));
  cubert_kernel_retain(k);
  cubert_kernel_release(k);
  ck_assert_str_eq(cubert_kernel_name(k), "o");
  cubert_kernel_release(k);
}
END_TEST

START_TEST(test_kernel_create_copies_the_descriptor) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) return;
  char name[16] = "probe";
  cubert_param params[5];
  memcpy(params, probe_params, sizeof params);
  cubert_kernel_desc d = {.name = name, .params = params, .nparams = 5, .host_fn = probe_host};
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_kernel_create(&d, &k));
  /* the caller's descriptor changes; the kernel does not */
  strcpy(name, "garbage");
  memset(params, 0, sizeof params);
  ck_assert_str_eq(cubert_kernel_name(k), "probe");
  cubert_client *c = env.clients[0];
  uint8_t data[64];
  cb_test_pattern(data, sizeof data, 10);
  cubert_handle *in = from(c, data, sizeof data), *out = NULL;
  cb_test_ok(cubert_handle_empty(c, sizeof data, &out));
  uint64_t s8 = 1;
  uint8_t s3[3] = {0}, s64[64] = {0};
  cubert_arg args[5] = {cubert_arg_buffer(in), cubert_arg_buffer(out), cubert_arg_scalar(&s8, 8),
                        cubert_arg_scalar(s3, 3), cubert_arg_scalar(s64, 64)};
  cubert_launch_config cfg = shape(1, 1, 1, 1, 1, 1, 0);
  cb_test_ok(cubert_launch(c, k, &cfg, args, 5));
  uint8_t got[64];
  read_all(c, out, got);
  for (int i = 0; i < 64; i++) ck_assert_uint_eq(got[i], data[i] ^ 0x5A);
  cubert_handle_release(in);
  cubert_handle_release(out);
  cubert_kernel_release(k);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ kernels that fail */

START_TEST(test_kernel_without_a_host_function_fails_on_the_host_backend) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) return;
  cubert_client *c = env.clients[0];
  static const cubert_param params[] = {{"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0}};
  cubert_kernel_desc d = {.name = "gpu_only",
                          .params = params,
                          .nparams = 1,
                          .source = "extern \"C\" __global__ void gpu_only(unsigned *out) { *out = 1; }"};
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_kernel_create(&d, &k));
  uint32_t init[16] = {5};
  cubert_handle *out = from(c, init, sizeof init);
  cubert_arg args[1] = {cubert_arg_buffer(out)};
  cubert_launch_config cfg = shape(1, 1, 1, 1, 1, 1, 0);
  cubert_status st = cubert_launch(c, k, &cfg, args, 1);
  ck_assert_msg(st != CUBERT_OK, "a kernel with no host function launched on the host backend");
  expect_message("gpu_only");
  expect_message("host function");
  /* its output was never written: reading it names the cause */
  uint32_t got[16];
  cb_test_status(cubert_handle_read(c, out, got, sizeof got), CUBERT_ERR_TAINTED);
  expect_message("gpu_only");
  expect_message("host function");
  /* a write makes the bytes good again */
  cb_test_ok(cubert_handle_write(c, out, init, sizeof init));
  read_all(c, out, got);
  ck_assert_mem_eq(got, init, sizeof init);
  /* the next launch fails the same way, not worse */
  st = cubert_launch(c, k, &cfg, args, 1);
  ck_assert_int_ne(st, CUBERT_OK);
  expect_message("host function");
  cubert_handle_release(out);
  cubert_kernel_release(k);
  cb_test_close(&env);
}
END_TEST

static cubert_status refusing_host(const cubert_host_launch *l, char *message, size_t capacity) {
  uint8_t *out = l->args[0];
  out[0] = 0xEE; /* half-written garbage: must never be handed out */
  snprintf(message, capacity, "refusing_host says no");
  return CUBERT_ERR_LAUNCH;
}

START_TEST(test_host_kernel_failure_is_reported_at_sync) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  if (!host_only(&env)) return;
  cubert_client *c = env.clients[0];
  static const cubert_param params[] = {{"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0}};
  cubert_kernel_desc d = {.name = "refusing", .params = params, .nparams = 1, .host_fn = refusing_host};
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_kernel_create(&d, &k));
  uint8_t init[64] = {1};
  cubert_handle *out = from(c, init, sizeof init);
  cubert_arg args[1] = {cubert_arg_buffer(out)};
  cubert_launch_config cfg = shape(1, 1, 1, 1, 1, 1, 0);
  cb_test_ok(cubert_launch(c, k, &cfg, args, 1)); /* enqueued fine; fails when it runs */
  cb_test_status(cubert_sync(c), CUBERT_ERR_LAUNCH);
  expect_message("refusing_host says no");
  cubert_error *e = cubert_last_error();
  ck_assert_uint_ge(cubert_error_failure_count(e), 1);
  const cubert_failure *f = cubert_error_failure(e, 0, NULL, NULL);
  ck_assert_int_eq(cubert_failure_status(f), CUBERT_ERR_LAUNCH);
  cubert_origin o;
  cubert_failure_origin(f, &o);
  ck_assert_str_eq(o.kernel, "refusing");
  ck_assert_int_eq(o.device, 0);
  cubert_error_release(e);
  cb_test_ok(cubert_sync(c)); /* reported once */
  uint8_t got[64];
  cb_test_status(cubert_handle_read(c, out, got, sizeof got), CUBERT_ERR_TAINTED);
  expect_message("refusing_host says no");
  cubert_handle_release(out);
  cubert_kernel_release(k);
  cb_test_close(&env);
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
  Suite *s = suite_create("launch");
  LOOP(s, test_builtin_fill_u32_writes_the_value_n_times);
  LOOP(s, test_builtin_copy_u32_copies_n_words);
  LOOP(s, test_builtin_copy_u32_is_exact_at_every_alignment);
  ONCE(s, test_builtin_config_sizes_the_grid_from_the_compute_units);
  LOOP(s, test_builtin_scale_add_f32_matches_the_host);
  LOOP(s, test_builtin_sum_f32_gives_one_partial_per_block);
  LOOP(s, test_builtin_checksum_u32_accumulates);
  ONCE(s, test_builtin_kernels_are_described);
  LOOP(s, test_custom_host_kernel_sees_shape_arguments_and_sizes);
  LOOP(s, test_kernel_without_parameters_launches_with_no_arguments);
  LOOP(s, test_many_kernels_each_keep_their_own_module);
  LOOP(s, test_launch_with_the_wrong_argument_count_is_refused);
  LOOP(s, test_launch_with_the_wrong_argument_kind_is_refused);
  LOOP(s, test_launch_with_a_scalar_of_the_wrong_size_is_refused);
  LOOP(s, test_launch_with_a_null_scalar_is_refused);
  LOOP(s, test_launch_with_a_null_handle_is_refused);
  LOOP(s, test_launch_with_a_zero_grid_or_block_is_refused);
  LOOP(s, test_launch_over_max_threads_per_block_is_refused);
  LOOP(s, test_launch_over_the_grid_limits_is_refused);
  LOOP(s, test_launch_over_2_to_the_32_threads_in_a_dimension_is_refused);
  LOOP(s, test_launch_over_the_shared_memory_limit_is_refused);
  ONCE(s, test_kernel_create_validates_the_descriptor);
  LOOP(s, test_kernel_create_copies_the_descriptor);
  LOOP(s, test_kernel_without_a_host_function_fails_on_the_host_backend);
  LOOP(s, test_host_kernel_failure_is_reported_at_sync);
  return cb_test_run(s);
}
