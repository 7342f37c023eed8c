/* tests/test_hip_backend.c: the HIP backend's ops table, driven directly
 * (no runtime on top): opening with no device, and with a device (the
 * NVIDIA H200 through HIP's NVIDIA platform, or an AMD GPU) memory, host
 * transfers (direct and staged; a write's source reusable at once, even
 * behind a busy GPU), fills of every pattern size, copies, built-in
 * kernels compiled at run time and launched, events across streams,
 * progress numbers (marks every few items: monotonic, reaching the last work
 * by polling alone and after sync), peers, out of memory, launch and compile errors, and a
 * sticky fault that marks the device lost.
 *
 * Without a device every device test prints "skipped: no device"; built
 * without HIP, "skipped: no HIP backend". Each test opens HIP itself (Check
 * forks a process per test; a GPU context made before a fork is unusable). */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/hip/hip_compile.h"
#include "backends/hip/hip_testing.h"
#include "backends/backend.h"
#include "cubert/cubert.h"
#include "cubert/kernels.h"

typedef struct env {
  const cubert_backend_ops *ops;
  void *backend;
  int count;
  void *dev;
  cubert_device_info info;
  uint64_t work;              /* the last work number handed out */
} env;

static void skip(const char *why) {
  fprintf(stderr, "skipped: %s\n", why);
  fflush(stderr);
}

/* Opens the backend (and device 0 when `device`); false after a skip line. */
static bool env_open(env *e, bool device) {
  memset(e, 0, sizeof *e);
  e->ops = cubert_backend_hip();
  if (!e->ops) {
    skip("no HIP backend");
    return false;
  }
  cubert_backend_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cubert_berr err = {0};
  cubert_status st = e->ops->open(&cfg, &e->backend, &e->count, &err);
  ck_assert_msg(st == CUBERT_OK, "open: %s: %s", cubert_status_name(st), err.message);
  if (!device) return true;
  if (e->count == 0) {
    skip("no device (the HIP backend found none)");
    e->ops->close(e->backend);
    return false;
  }
  st = e->ops->device_open(e->backend, 0, &e->dev, &e->info, &err);
  ck_assert_msg(st == CUBERT_OK, "device_open: %s: %s", cubert_status_name(st), err.message);
  return true;
}

static void env_close(env *e) {
  if (e->dev) e->ops->device_close(e->dev);
  if (e->backend) e->ops->close(e->backend);
}

#define OK(e, call)                                                                       \
  do {                                                                                    \
    cubert_berr err_ = {0};                                                               \
    cubert_status st_ = (call);                                                           \
    ck_assert_msg(st_ == CUBERT_OK, "%s: %s: %s", #call, cubert_status_name(st_), err_.message); \
  } while (0)
/* `call` uses `&err_` as its error out-pointer. */

static void *stream_new(env *e) {
  void *s = NULL;
  OK(e, e->ops->stream_create(e->dev, &s, &err_));
  return s;
}

static cubert_backend_mem alloc(env *e, uint64_t size) {
  cubert_backend_mem m;
  memset(&m, 0, sizeof m);
  OK(e, e->ops->mem_alloc(e->dev, size, &m, &err_));
  ck_assert(m.address != 0);
  ck_assert(m.size == size);
  return m;
}

static void pattern(void *buf, size_t n, uint32_t seed) {
  unsigned char *p = buf;
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (unsigned char)x;
  }
}

static void write_(env *e, void *s, uint64_t dst, const void *src, uint64_t n) {
  OK(e, e->ops->write(e->dev, s, ++e->work, dst, src, n, &err_));
}

static void read_(env *e, void *s, void *dst, uint64_t src, uint64_t n) {
  OK(e, e->ops->read(e->dev, s, ++e->work, dst, src, n, &err_));
}

static cubert_backend_kernel kernel_of(const cubert_kernel_desc *d) {
  cubert_backend_kernel k;
  memset(&k, 0, sizeof k);
  k.name = d->name;
  k.entry = d->entry ? d->entry : d->name;
  k.source = d->source;
  k.options = d->compile_options;
  k.objects = d->objects;
  k.nobjects = d->nobjects;
  k.params = d->params;
  k.nparams = d->nparams;
  k.source_hash = d->source ? cubert_hash64(d->source, strlen(d->source)) : 0;
  return k;
}

static cubert_backend_arg buf_arg(uint64_t address, uint64_t size, cubert_access access) {
  cubert_backend_arg a;
  memset(&a, 0, sizeof a);
  a.kind = CUBERT_PARAM_BUFFER;
  a.access = access;
  a.address = address;
  a.size = size;
  return a;
}

static cubert_backend_arg scalar_arg(const void *v, uint32_t size) {
  cubert_backend_arg a;
  memset(&a, 0, sizeof a);
  a.kind = CUBERT_PARAM_SCALAR;
  a.scalar = v;
  a.scalar_size = size;
  return a;
}

static const cubert_launch_config shape = {{120, 1, 1}, {256, 1, 1}, 0};

/* A private disk cache, so tests do not depend on what earlier runs left. */
static void private_cache(void) {
  static char dir[512];
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/cubert-hip-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  setenv("CUBERT_CACHE_DIR", dir, 1);
}

/* Keeps stream `s` busy for a while (one warp filling 256 MiB), so work
 * enqueued after it waits on the GPU. Returns the module to unload;
 * `big` is the buffer it fills. */
static void *busy_gpu(env *e, void *s, cubert_backend_mem *big) {
  cubert_backend_kernel kf = kernel_of(cubert_builtin_desc(CUBERT_BUILTIN_FILL_U32));
  void *mf = NULL;
  OK(e, e->ops->module_load(e->dev, &kf, &mf, &err_));
  const uint64_t n = 64u << 20;
  *big = alloc(e, n * 4);
  uint32_t v = 7;
  cubert_backend_arg fa[3] = {buf_arg(big->address, n * 4, CUBERT_ACCESS_WRITE), scalar_arg(&n, 8),
                              scalar_arg(&v, 4)};
  const cubert_launch_config one_warp = {{1, 1, 1}, {32, 1, 1}, 0};
  OK(e, e->ops->launch(e->dev, s, ++e->work, mf, &one_warp, fa, 3, &err_));
  return mf;
}

/* ------------------------------------------------------------ no device */

START_TEST(test_open_with_no_device_gives_zero_devices) {
  env e;
  if (!env_open(&e, false)) return;
  const cubert_backend_ops *o = e.ops;
  ck_assert_uint_eq(o->abi, CUBERT_BACKEND_ABI);
  ck_assert_str_eq(o->name, "hip");
  /* every slot is filled: the runtime never checks for NULL */
  ck_assert(o->open && o->close && o->device_open && o->device_close && o->mem_alloc &&
            o->mem_free && o->stream_create && o->stream_destroy && o->event_record &&
            o->stream_wait && o->event_destroy && o->write && o->read && o->fill && o->copy &&
            o->copy_peer && o->module_load && o->module_unload && o->launch && o->sync &&
            o->progress && o->drain_failures && o->peer_can_access && o->peer_enable &&
            o->link_info);
  ck_assert_int_ge(e.count, 0);
  /* a device past the end is refused by name, not opened */
  cubert_berr err = {0};
  void *dev = NULL;
  cubert_device_info info;
  ck_assert_int_eq(o->device_open(e.backend, e.count, &dev, &info, &err), CUBERT_ERR_NO_DEVICE);
  ck_assert_msg(strstr(err.message, "does not exist") != NULL, "message: %s", err.message);
  ck_assert_int_eq(o->device_open(e.backend, -1, &dev, &info, &err), CUBERT_ERR_NO_DEVICE);
  ck_assert_ptr_null(dev);
  if (e.count == 0) skip("no device (open() found zero devices, as it must without a GPU)");
  env_close(&e);
}
END_TEST

/* The runtime's image of a launch (backend.h, cubert_backend_image_layout
 * for the kernel's parameters, the values at its offsets) is byte for byte
 * what cb_hip_pack_args makes of the same arguments, and the two refuse
 * the same lists: launch_image hands the driver what hip_launch would have.
 * The refusals of the parameter list alone: a scalar of 0 or more than 64
 * bytes, a tensor. No device needed. */
START_TEST(test_image_layout_is_the_packed_layout) {
  if (!cubert_backend_hip()) {
    skip("no HIP backend");
    return;
  }
  uint32_t u32 = 0x11223344u;
  uint8_t u8 = 0x55;
  uint16_t u16 = 0x6677;
  uint64_t u64 = 0x8899aabbccddeeffull;
  unsigned char twelve[12], sixteen[16], sixtyfour[64];
  pattern(twelve, sizeof twelve, 1);
  pattern(sixteen, sizeof sixteen, 2);
  pattern(sixtyfour, sizeof sixtyfour, 3);
  cubert_backend_arg ptr = buf_arg(0x3000, 64, CUBERT_ACCESS_READ);
  const struct {
    cubert_backend_arg a[13];
    uint32_t n;
  } lists[] = {
      {{buf_arg(0x1000, 64, CUBERT_ACCESS_READ), scalar_arg(&u32, 4), scalar_arg(&u32, 4), scalar_arg(&u8, 1),
        scalar_arg(&u8, 1), scalar_arg(&u16, 2), scalar_arg(&u32, 4), buf_arg(0x2000, 64, CUBERT_ACCESS_WRITE),
        scalar_arg(&u64, 8), scalar_arg(twelve, 12), scalar_arg(&u32, 4), scalar_arg(&u64, 8),
        scalar_arg(sixteen, 16)},
       13},
      {{ptr, scalar_arg(sixtyfour, 64)}, 2},
      {{scalar_arg(&u8, 1), scalar_arg(&u8, 1), scalar_arg(twelve, 3)}, 3},
      {{ptr, scalar_arg(&u8, 1), ptr}, 3},                       /* the pointer after a byte */
      {{scalar_arg(&u32, 4), scalar_arg(&u64, 8)}, 2},           /* a double or two floats? */
      {{ptr, scalar_arg(&u32, 4), scalar_arg(sixteen, 16)}, 3}, /* aligned to 16 or less? */
      {{scalar_arg(&u8, 1), scalar_arg(sixtyfour, 64)}, 2},
  };
  for (size_t t = 0; t < sizeof lists / sizeof lists[0]; t++) {
    const cubert_backend_arg *a = lists[t].a;
    uint32_t n = lists[t].n;
    cubert_param params[13];
    for (uint32_t i = 0; i < n; i++)
      params[i] = (cubert_param){"p", a[i].kind, a[i].kind == CUBERT_PARAM_SCALAR ? CUBERT_ACCESS_READ : a[i].access,
                                 a[i].scalar_size};
    uint32_t off[13], size = 0;
    _Alignas(16) unsigned char packed[512], image[CUBERT_BACKEND_IMAGE_MAX];
    size_t packed_size = 0;
    bool packs = cb_hip_pack_args(a, n, packed, sizeof packed, &packed_size);
    bool lays = cubert_backend_image_layout(params, n, off, &size);
    ck_assert_msg(packs == lays, "list %zu: packed %d, image layout %d", t, packs, lays);
    if (!lays) continue;
    ck_assert_uint_eq(size, packed_size);
    for (uint32_t i = 0; i < n; i++) {
      if (a[i].kind == CUBERT_PARAM_SCALAR)
        memcpy(image + off[i], a[i].scalar, a[i].scalar_size);
      else
        memcpy(image + off[i], &a[i].address, 8);
    }
    ck_assert_msg(memcmp(image, packed, size) == 0, "list %zu", t);
    /* and back: the records an image stands for (a layer without images) */
    uint64_t sizes[13];
    for (uint32_t i = 0; i < n; i++) sizes[i] = a[i].kind == CUBERT_PARAM_SCALAR ? a[i].scalar_size : a[i].size;
    cubert_backend_layout l = {n, size, off, params};
    cubert_backend_image im = {&l, image, sizes};
    cubert_backend_arg back[13];
    cubert_backend_args_of_image(&im, back);
    for (uint32_t i = 0; i < n; i++) {
      ck_assert_int_eq(back[i].kind, a[i].kind);
      if (a[i].kind == CUBERT_PARAM_SCALAR) {
        ck_assert_uint_eq(back[i].scalar_size, a[i].scalar_size);
        ck_assert(memcmp(back[i].scalar, a[i].scalar, a[i].scalar_size) == 0);
      } else {
        ck_assert_uint_eq(back[i].address, a[i].address);
        ck_assert_uint_eq(back[i].size, a[i].size);
        ck_assert_int_eq(back[i].access, a[i].access);
        ck_assert_ptr_null(back[i].owner);
      }
    }
  }
  uint32_t off[2], size = 0;
  cubert_param zero[2] = {{"p", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0}, {"s", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 0}};
  cubert_param big[2] = {{"p", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0}, {"s", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 65}};
  cubert_param tensor[2] = {{"p", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0}, {"t", CUBERT_PARAM_TENSOR, CUBERT_ACCESS_READ, 0}};
  ck_assert(!cubert_backend_image_layout(zero, 2, off, &size));
  ck_assert(!cubert_backend_image_layout(big, 2, off, &size));
  ck_assert(!cubert_backend_image_layout(tensor, 2, off, &size));
  ck_assert(cubert_backend_image_layout(zero, 0, off, &size) && size == 0);
}
END_TEST

/* The packed form of a launch's arguments (hip_backend.c, cb_hip_pack_args):
 * taken exactly when no argument needs padding, whatever its type's
 * alignment; every other launch passes pointers. No device needed. */
START_TEST(test_pack_args_only_when_the_layout_is_certain) {
  if (!cubert_backend_hip()) {
    skip("no HIP backend");
    return;
  }
  _Alignas(16) unsigned char buf[512];
  size_t size = 0;
  uint32_t u32 = 0x11223344u;
  uint8_t u8 = 0x55;
  uint16_t u16 = 0x6677;
  uint64_t u64 = 0x8899aabbccddeeffull;
  unsigned char twelve[12], sixteen[16], big[65];
  pattern(twelve, sizeof twelve, 1);
  pattern(sixteen, sizeof sixteen, 2);
  pattern(big, sizeof big, 3);

  /* pointers and scalars that need no padding: each at the running offset */
  cubert_backend_arg a[] = {buf_arg(0x1000, 64, CUBERT_ACCESS_READ), scalar_arg(&u32, 4), scalar_arg(&u32, 4),
                            scalar_arg(&u8, 1), scalar_arg(&u8, 1), scalar_arg(&u16, 2), scalar_arg(&u32, 4),
                            buf_arg(0x2000, 64, CUBERT_ACCESS_WRITE), scalar_arg(&u64, 8), scalar_arg(twelve, 12),
                            scalar_arg(&u32, 4), scalar_arg(&u64, 8), scalar_arg(sixteen, 16)};
  a[7].kind = CUBERT_PARAM_PEER_BUFFER; /* a pointer as well */
  static const size_t at[] = {0, 8, 12, 16, 17, 18, 20, 24, 32, 40, 52, 56, 64};
  ck_assert(cb_hip_pack_args(a, 13, buf, sizeof buf, &size));
  ck_assert_uint_eq(size, 80);
  for (size_t i = 0; i < 13; i++) {
    if (a[i].kind != CUBERT_PARAM_SCALAR) {
      uint64_t v = 0;
      memcpy(&v, buf + at[i], 8);
      ck_assert_uint_eq(v, a[i].address);
    } else {
      ck_assert_msg(memcmp(buf + at[i], a[i].scalar, a[i].scalar_size) == 0, "argument %zu", i);
    }
  }
  ck_assert(cb_hip_pack_args(a, 0, buf, sizeof buf, &size) && size == 0);

  /* padding, or a layout the sizes cannot tell: pointers, as before */
  cubert_backend_arg ptr = buf_arg(0x3000, 64, CUBERT_ACCESS_READ);
  cubert_backend_arg b1[] = {ptr, scalar_arg(&u8, 1), ptr};                   /* the pointer after a byte */
  cubert_backend_arg b2[] = {scalar_arg(&u32, 4), scalar_arg(&u64, 8)};      /* a double or two floats? */
  cubert_backend_arg b3[] = {ptr, scalar_arg(&u32, 4), scalar_arg(sixteen, 16)}; /* aligned to 16 or less? */
  cubert_backend_arg b4[] = {ptr, scalar_arg(big, 65)};                      /* refused by name later */
  cubert_backend_arg b5[] = {ptr, scalar_arg(NULL, 4)};
  cubert_backend_arg b6[] = {ptr, ptr};
  b6[1].kind = CUBERT_PARAM_TENSOR;
  ck_assert(!cb_hip_pack_args(b1, 3, buf, sizeof buf, &size));
  ck_assert(!cb_hip_pack_args(b2, 2, buf, sizeof buf, &size));
  ck_assert(!cb_hip_pack_args(b3, 3, buf, sizeof buf, &size));
  ck_assert(!cb_hip_pack_args(b4, 2, buf, sizeof buf, &size));
  ck_assert(!cb_hip_pack_args(b5, 2, buf, sizeof buf, &size));
  ck_assert(!cb_hip_pack_args(b6, 2, buf, sizeof buf, &size));
  /* more bytes than the buffer holds */
  ck_assert(!cb_hip_pack_args(a, 13, buf, 79, &size));
  ck_assert(cb_hip_pack_args(a, 13, buf, 80, &size) && size == 80);
}
END_TEST

/* ------------------------------------------------------------ device */

START_TEST(test_device_info_is_filled) {
  env e;
  if (!env_open(&e, true)) return;
  cubert_device_info *i = &e.info;
  ck_assert_msg(i->name[0] != '\0', "no name");
  bool amd = strncmp(i->arch, "gfx", 3) == 0, nv = strncmp(i->arch, "sm_", 3) == 0;
  ck_assert_msg(amd || nv, "arch `%s`", i->arch);
  unsigned dom, bus, devn, fn;
  ck_assert_msg(sscanf(i->pci_bus_id, "%x:%x:%x.%x", &dom, &bus, &devn, &fn) == 4,
                "pci bus id `%s`", i->pci_bus_id);
  for (const char *c = i->pci_bus_id; *c; c++) ck_assert_msg(!(*c >= 'A' && *c <= 'F'), "bus id not lower case");
  ck_assert(i->total_memory >= (1ull << 30));
  ck_assert(i->max_threads_per_block >= 256 && i->max_threads_per_block <= 4096);
  ck_assert(i->max_block[0] >= 256 && i->max_block[1] >= 1 && i->max_block[2] >= 1);
  ck_assert(i->max_grid[0] >= 65535 && i->max_grid[1] >= 1 && i->max_grid[2] >= 1);
  ck_assert(i->max_shared_memory >= 16384);
  ck_assert(i->warp_size == 32 || i->warp_size == 64);
  ck_assert(i->multiprocessors > 0);
  fprintf(stderr, "device 0: %s, %s, %s, %" PRIu64 " MiB, %u multiprocessors\n", i->name, i->arch,
          i->pci_bus_id, i->total_memory >> 20, i->multiprocessors);
  env_close(&e);
}
END_TEST

START_TEST(test_write_read_round_trip) {
  env e;
  if (!env_open(&e, true)) return;
  void *s = stream_new(&e);
  /* direct copies (pageable, under 64 MiB) of odd sizes, and staged ones
   * (64 MiB and more) across the staging halves (4 MiB) and buffers (8 MiB) */
  const uint64_t sizes[] = {1,          3,           4096,           65537, (4u << 20), (4u << 20) + 1,
                            (9u << 20) + 5, 33u << 20, (64u << 20) + 5};
  for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
    uint64_t n = sizes[t];
    cubert_backend_mem m = alloc(&e, n + 64);
    unsigned char *src = malloc(n), *dst = malloc(n);
    ck_assert(src && dst);
    pattern(src, n, (uint32_t)t + 1);
    write_(&e, s, m.address + 7, src, n);
    /* the caller may reuse src at once: scribble on it before reading back */
    memset(src, 0xee, n);
    memset(dst, 0, n);
    read_(&e, s, dst, m.address + 7, n);
    pattern(src, n, (uint32_t)t + 1);
    ck_assert_msg(memcmp(src, dst, n) == 0, "round trip of %" PRIu64 " bytes differs", n);
    free(src);
    free(dst);
    e.ops->mem_free(e.dev, &m);
  }
  /* a read on another stream sees a write the first stream finished */
  void *s2 = stream_new(&e);
  cubert_backend_mem m = alloc(&e, 1 << 20);
  unsigned char *a = malloc(1 << 20), *b = malloc(1 << 20);
  pattern(a, 1 << 20, 99);
  write_(&e, s, m.address, a, 1 << 20);
  OK(&e, e.ops->sync(e.dev, s, &err_));
  read_(&e, s2, b, m.address, 1 << 20);
  ck_assert(memcmp(a, b, 1 << 20) == 0);
  free(a);
  free(b);
  e.ops->mem_free(e.dev, &m);
  e.ops->stream_destroy(e.dev, s2);
  e.ops->stream_destroy(e.dev, s);
  env_close(&e);
}
END_TEST

/* The end of the write tests: the read covered everything, no failure,
 * then everything freed. */
static void writes_end(env *e, void *s, void *mf, cubert_backend_mem *m, cubert_backend_mem *big) {
  ck_assert_uint_eq(e->ops->progress(e->dev, s), e->work);
  cubert_async_failure f[4];
  ck_assert_uint_eq(e->ops->drain_failures(e->dev, f, 4), 0);
  e->ops->module_unload(e->dev, mf);
  e->ops->mem_free(e->dev, m);
  e->ops->mem_free(e->dev, big);
  e->ops->stream_destroy(e->dev, s);
  env_close(e);
}

/* backend.h: a write's source may be reused as soon as write returns. Many
 * writes from one buffer, each overwritten right after the call, queued
 * behind a busy GPU: a driver that read the source late would copy the
 * scribbles. */
START_TEST(test_write_source_is_reusable_at_once) {
  env e;
  if (!env_open(&e, true)) return;
  private_cache();
  void *s = stream_new(&e);
  cubert_backend_mem big;
  void *mf = busy_gpu(&e, s, &big);
  const size_t piece = 4096, pieces = 512, large = (1u << 20) + 3;
  cubert_backend_mem m = alloc(&e, piece * pieces + large);
  unsigned char *buf = malloc(large), *want = malloc(piece * pieces + large),
                *back = malloc(piece * pieces + large);
  ck_assert(buf && want && back);
  for (size_t i = 0; i < pieces; i++) {
    pattern(buf, piece, (uint32_t)(1000 + i));
    memcpy(want + i * piece, buf, piece);
    write_(&e, s, m.address + i * piece, buf, piece);
    memset(buf, 0xa5, piece); /* reused at once */
  }
  pattern(buf, large, 77); /* and one of odd size */
  memcpy(want + pieces * piece, buf, large);
  write_(&e, s, m.address + pieces * piece, buf, large);
  memset(buf, 0x5a, large);
  read_(&e, s, back, m.address, piece * pieces + large);
  for (size_t i = 0; i <= pieces; i++) {
    size_t n = i < pieces ? piece : large;
    ck_assert_msg(memcmp(want + i * piece, back + i * piece, n) == 0,
                  "write %zu: the device got bytes written to the source after the call", i);
  }
  /* Every size of the direct pageable path (on NVIDIA the driver's
   * hipMemcpyHtoDAsync since 2026-12-02, hip_stream.c copy_pageable): the
   * stack bounce up to 4 KiB, then the caller's heap or stack buffer up to
   * the pipeline's 1 MiB; into `m` again, behind the same busy GPU. */
  static const uint64_t sizes[] = {1, 4, 63, 64, 65, 4095, 4097, 8192, 65536, 65537, (1u << 20) - 1};
  unsigned char stack[65537];
  uint64_t at = 0, words = big.size / 4;
  uint32_t v = 7;
  cubert_backend_arg fa[3] = {buf_arg(big.address, big.size, CUBERT_ACCESS_WRITE), scalar_arg(&words, 8),
                              scalar_arg(&v, 4)};
  const cubert_launch_config one_warp = {{1, 1, 1}, {32, 1, 1}, 0};
  OK(&e, e.ops->launch(e.dev, s, ++e.work, mf, &one_warp, fa, 3, &err_)); /* busy again: the fill of `big` */
  for (int k = 0; k < 2; k++)
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
      unsigned char *src = k ? stack : buf;
      uint64_t n = sizes[t];
      if (k && n > sizeof stack) continue;
      pattern(src, (size_t)n, (uint32_t)(5000 + 100 * k + t));
      memcpy(want + at, src, (size_t)n);
      write_(&e, s, m.address + at, src, n);
      memset(src, 0xa5, (size_t)n); /* reused at once */
      at += n;
    }
  ck_assert(at <= piece * pieces + large);
  read_(&e, s, back, m.address, at);
  at = 0;
  for (int k = 0; k < 2; k++)
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
      uint64_t n = sizes[t];
      if (k && n > sizeof stack) continue;
      ck_assert_msg(memcmp(want + at, back + at, (size_t)n) == 0,
                    "write of %" PRIu64 " bytes from the %s: the device got bytes written to the source after the call",
                    n, k ? "stack" : "heap");
      at += n;
    }
  free(buf);
  free(want);
  free(back);
  writes_end(&e, s, mf, &m, &big);
}
END_TEST

/* backend.h: read returns once the bytes are in `dst`, whatever `dst` is:
 * pageable (the heap, the stack), page-locked (host_alloc) or pinned by
 * registration (host_register), at sizes on both sides of the read's
 * paths (the stack bounce up to 64 bytes, the caller's buffer with a proof
 * of completion above it, the staging pipeline from 1 MiB). Each read is
 * queued behind a busy kernel that writes last what the read takes: a read
 * that returned before its copy ran would leave the zeros. */
START_TEST(test_read_has_landed_for_every_destination_kind) {
  env e;
  if (!env_open(&e, true)) return;
  private_cache();
  void *s = stream_new(&e);
  const uint64_t sizes[] = {1, 4, 64, 65, 4096, 4097, 8192, 65536, 65537, 131072, 1u << 20};
  const size_t most = 1u << 20;
  cubert_backend_host_mem locked = {NULL, most, NULL, false}, reg = {NULL, most, NULL, false};
  OK(&e, e.ops->host_alloc(e.dev, &locked, &err_));
  unsigned char *heap = malloc(most), *registered = malloc(most);
  ck_assert(heap && registered);
  reg.ptr = registered;
  OK(&e, e.ops->host_register(e.dev, &reg, &err_));
  unsigned char stack[4096];
  unsigned char *kinds[4] = {heap, stack, locked.ptr, registered};
  static const char *const names[4] = {"heap", "stack", "host_alloc", "host_register"};
  cubert_backend_mem big;
  void *mf = busy_gpu(&e, s, &big);
  bool first = true;
  for (int k = 0; k < 4; k++) {
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
      uint64_t n = sizes[t];
      if (kinds[k] == stack && n > sizeof stack) continue;
      if (!first) { /* busy again: the fill of `big` once more */
        uint64_t words = big.size / 4;
        uint32_t v = 7;
        cubert_backend_arg fa[3] = {buf_arg(big.address, big.size, CUBERT_ACCESS_WRITE), scalar_arg(&words, 8),
                                    scalar_arg(&v, 4)};
        const cubert_launch_config one_warp = {{1, 1, 1}, {32, 1, 1}, 0};
        OK(&e, e.ops->launch(e.dev, s, ++e.work, mf, &one_warp, fa, 3, &err_));
      }
      first = false;
      memset(kinds[k], 0, (size_t)n);
      uint64_t from = big.size - n; /* the kernel's last bytes */
      read_(&e, s, kinds[k], big.address + from, n);
      for (uint64_t i = 0; i < n; i++) {
        unsigned char want = (unsigned char)(7u >> (8 * ((from + i) % 4)));
        ck_assert_msg(kinds[k][i] == want, "read of %" PRIu64 " bytes into %s memory: byte %" PRIu64
                      " is %u, the kernel wrote %u: the read returned before its copy landed",
                      n, names[k], i, kinds[k][i], want);
      }
      ck_assert_uint_eq(e.ops->progress(e.dev, s), e.work); /* and everything before it ran */
    }
  }
  cubert_async_failure f[4];
  ck_assert_uint_eq(e.ops->drain_failures(e.dev, f, 4), 0);
  e.ops->host_free(e.dev, &reg);
  e.ops->host_free(e.dev, &locked);
  free(registered);
  free(heap);
  e.ops->module_unload(e.dev, mf);
  e.ops->mem_free(e.dev, &big);
  e.ops->stream_destroy(e.dev, s);
  env_close(&e);
}
END_TEST

START_TEST(test_fill_every_pattern_size_aligned_or_not) {
  env e;
  if (!env_open(&e, true)) return;
  private_cache(); /* the 8-byte fill compiles a kernel */
  void *s = stream_new(&e);
  const uint64_t total = 1 << 20;
  cubert_backend_mem m = alloc(&e, total);
  unsigned char *host = malloc(total), *back = malloc(total);
  const unsigned char pat[8] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  const uint32_t psizes[] = {1, 2, 4, 8};
  const uint64_t offsets[] = {0, 1, 2, 4, 8, 3};
  for (size_t p = 0; p < 4; p++) {
    for (size_t o = 0; o < sizeof offsets / sizeof *offsets; o++) {
      uint32_t ps = psizes[p];
      uint64_t off = 4096 + offsets[o];
      uint64_t n = ps * (uint64_t)(100003 + o);
      pattern(host, total, (uint32_t)(p * 16 + o));
      write_(&e, s, m.address, host, total);
      OK(&e, e.ops->fill(e.dev, s, ++e.work, m.address + off, pat, ps, n, &err_));
      read_(&e, s, back, m.address, total);
      for (uint64_t i = 0; i < n; i++)
        host[off + i] = pat[i % ps];
      ck_assert_msg(memcmp(host, back, total) == 0,
                    "fill of %" PRIu32 "-byte pattern at offset %" PRIu64 " wrong (or wrote outside)", ps, off);
    }
  }
  /* zero bytes: nothing written, still a work item */
  OK(&e, e.ops->fill(e.dev, s, ++e.work, m.address, pat, 8, 0, &err_));
  /* a size the pattern does not divide is refused */
  cubert_berr err = {0};
  ck_assert_int_eq(e.ops->fill(e.dev, s, ++e.work, m.address, pat, 4, 6, &err), CUBERT_ERR_INVALID_ARGUMENT);
  OK(&e, e.ops->sync(e.dev, s, &err_));
  free(host);
  free(back);
  e.ops->mem_free(e.dev, &m);
  e.ops->stream_destroy(e.dev, s);
  env_close(&e);
}
END_TEST

START_TEST(test_copy_on_device_and_to_itself_as_peer) {
  env e;
  if (!env_open(&e, true)) return;
  void *s = stream_new(&e);
  const uint64_t n = (3u << 20) + 13;
  cubert_backend_mem a = alloc(&e, n), b = alloc(&e, n), c = alloc(&e, n);
  unsigned char *h = malloc(n), *back = malloc(n);
  pattern(h, n, 7);
  write_(&e, s, a.address, h, n);
  OK(&e, e.ops->copy(e.dev, s, ++e.work, b.address, a.address, n, &err_));
  /* copy_peer from the device to itself is a plain copy */
  OK(&e, e.ops->copy_peer(e.dev, s, ++e.work, c.address, e.dev, b.address, n, &err_));
  read_(&e, s, back, c.address, n);
  ck_assert(memcmp(h, back, n) == 0);
  free(h);
  free(back);
  e.ops->mem_free(e.dev, &a);
  e.ops->mem_free(e.dev, &b);
  e.ops->mem_free(e.dev, &c);
  e.ops->stream_destroy(e.dev, s);
  env_close(&e);
}
END_TEST

START_TEST(test_builtin_fill_and_copy_kernels_run) {
  env e;
  if (!env_open(&e, true)) return;
  private_cache();
  void *s = stream_new(&e);
  cubert_backend_kernel kf = kernel_of(cubert_builtin_desc(CUBERT_BUILTIN_FILL_U32));
  cubert_backend_kernel kc = kernel_of(cubert_builtin_desc(CUBERT_BUILTIN_COPY_U32));
  void *mf = NULL, *mc = NULL, *mf2 = NULL;
  OK(&e, e.ops->module_load(e.dev, &kf, &mf, &err_));
  OK(&e, e.ops->module_load(e.dev, &kc, &mc, &err_));
  OK(&e, e.ops->module_load(e.dev, &kf, &mf2, &err_)); /* served from memory */

  const uint64_t n = (1u << 20) + 7;
  cubert_backend_mem in = alloc(&e, n * 4), out = alloc(&e, n * 4);
  uint32_t value = 0xC0FFEE11u;
  cubert_backend_arg fa[3] = {buf_arg(in.address, n * 4, CUBERT_ACCESS_WRITE), scalar_arg(&n, 8),
                              scalar_arg(&value, 4)};
  OK(&e, e.ops->launch(e.dev, s, ++e.work, mf, &shape, fa, 3, &err_));
  cubert_backend_arg ca[3] = {buf_arg(in.address, n * 4, CUBERT_ACCESS_READ),
                              buf_arg(out.address, n * 4, CUBERT_ACCESS_WRITE), scalar_arg(&n, 8)};
  OK(&e, e.ops->launch(e.dev, s, ++e.work, mc, &shape, ca, 3, &err_));
  uint32_t *back = malloc(n * 4);
  read_(&e, s, back, out.address, n * 4);
  for (uint64_t i = 0; i < n; i++)
    ck_assert_msg(back[i] == value, "out[%" PRIu64 "] = %08x", i, back[i]);

  /* the second module of the same kernel works as well */
  uint32_t v2 = 5;
  fa[2] = scalar_arg(&v2, 4);
  OK(&e, e.ops->launch(e.dev, s, ++e.work, mf2, &shape, fa, 3, &err_));
  read_(&e, s, back, in.address, n * 4);
  ck_assert(back[0] == 5 && back[n - 1] == 5);

  /* a wrong argument count is refused before HIP sees it */
  cubert_berr err = {0};
  ck_assert_int_eq(e.ops->launch(e.dev, s, ++e.work, mf, &shape, fa, 2, &err), CUBERT_ERR_INVALID_ARGUMENT);
  OK(&e, e.ops->sync(e.dev, s, &err_));
  free(back);
  e.ops->module_unload(e.dev, mf);
  e.ops->module_unload(e.dev, mf2);
  e.ops->module_unload(e.dev, mc);
  e.ops->mem_free(e.dev, &in);
  e.ops->mem_free(e.dev, &out);
  e.ops->stream_destroy(e.dev, s);
  env_close(&e);
}
END_TEST

/* A kernel gets every argument right, packed (no padding anywhere) and
 * through pointers (a layout with padding). */
static const char args_source[] =
    "extern \"C\" __global__ void cb_args_packed(unsigned long long *out, unsigned int a, unsigned int b,\n"
    "    double c, unsigned char d, unsigned char e, unsigned short f, float g, const int *p,\n"
    "    unsigned long long h)\n"
    "{\n"
    "  if (blockIdx.x != 0 || threadIdx.x != 0) return;\n"
    "  out[0] = a; out[1] = b; out[2] = (unsigned long long)__double_as_longlong(c); out[3] = d;\n"
    "  out[4] = e; out[5] = f; out[6] = __float_as_uint(g); out[7] = (unsigned long long)p; out[8] = h;\n"
    "}\n"
    "extern \"C\" __global__ void cb_args_padded(unsigned long long *out, unsigned char d,\n"
    "    unsigned long long h, unsigned short f, const int *p)\n"
    "{\n"
    "  if (blockIdx.x != 0 || threadIdx.x != 0) return;\n"
    "  out[0] = d; out[1] = h; out[2] = f; out[3] = (unsigned long long)p;\n"
    "}\n";

START_TEST(test_launch_arguments_packed_and_through_pointers) {
  env e;
  if (!env_open(&e, true)) return;
  private_cache();
  void *s = stream_new(&e);
  static const cubert_param pp[] = {
      {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0}, {"a", CUBERT_PARAM_SCALAR, 0, 4},
      {"b", CUBERT_PARAM_SCALAR, 0, 4},  {"c", CUBERT_PARAM_SCALAR, 0, 8},
      {"d", CUBERT_PARAM_SCALAR, 0, 1},  {"e", CUBERT_PARAM_SCALAR, 0, 1},
      {"f", CUBERT_PARAM_SCALAR, 0, 2},  {"g", CUBERT_PARAM_SCALAR, 0, 4},
      {"p", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0}, {"h", CUBERT_PARAM_SCALAR, 0, 8}};
  static const cubert_param qp[] = {{"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0},
                                    {"d", CUBERT_PARAM_SCALAR, 0, 1},
                                    {"h", CUBERT_PARAM_SCALAR, 0, 8},
                                    {"f", CUBERT_PARAM_SCALAR, 0, 2},
                                    {"p", CUBERT_PARAM_PEER_BUFFER, CUBERT_ACCESS_READ, 0}};
  cubert_kernel_desc pd = {.name = "cb_args_packed", .params = pp, .nparams = 10, .source = args_source};
  cubert_kernel_desc qd = {.name = "cb_args_padded", .params = qp, .nparams = 5, .source = args_source};
  cubert_backend_kernel pk = kernel_of(&pd), qk = kernel_of(&qd);
  void *mp = NULL, *mq = NULL;
  OK(&e, e.ops->module_load(e.dev, &pk, &mp, &err_));
  OK(&e, e.ops->module_load(e.dev, &qk, &mq, &err_));
  cubert_backend_mem out = alloc(&e, 128), in = alloc(&e, 64);
  uint32_t a = 0xA1A2A3A4u, b = 0xB1B2B3B4u;
  double c = -1234.5678;
  uint8_t d = 0xD4, ee = 0xE5;
  uint16_t f = 0xF6F7;
  float g = 3.25f;
  uint64_t h = 0x0123456789ABCDEFull, c_bits, g_bits = 0;
  memcpy(&c_bits, &c, 8);
  memcpy(&g_bits, &g, 4);
  cubert_backend_arg args[10] = {buf_arg(out.address, 128, CUBERT_ACCESS_WRITE), scalar_arg(&a, 4),
                                 scalar_arg(&b, 4), scalar_arg(&c, 8), scalar_arg(&d, 1), scalar_arg(&ee, 1),
                                 scalar_arg(&f, 2), scalar_arg(&g, 4), buf_arg(in.address + 8, 56, CUBERT_ACCESS_READ),
                                 scalar_arg(&h, 8)};
  unsigned char scratch[512];
  size_t size = 0;
  ck_assert(cb_hip_pack_args(args, 10, scratch, sizeof scratch, &size)); /* this launch is the packed one */
  ck_assert_uint_eq(size, 48);
  const cubert_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0};
  OK(&e, e.ops->launch(e.dev, s, ++e.work, mp, &one, args, 10, &err_));
  uint64_t back[16];
  read_(&e, s, back, out.address, sizeof back);
  const uint64_t want[9] = {a, b, c_bits, d, ee, f, g_bits, in.address + 8, h};
  for (int i = 0; i < 9; i++)
    ck_assert_msg(back[i] == want[i], "packed: argument %d: %016" PRIx64 ", want %016" PRIx64, i + 1, back[i], want[i]);

  cubert_backend_arg qargs[5] = {buf_arg(out.address + 64, 64, CUBERT_ACCESS_WRITE), scalar_arg(&d, 1),
                                 scalar_arg(&h, 8), scalar_arg(&f, 2), buf_arg(in.address + 16, 48, CUBERT_ACCESS_READ)};
  qargs[4].kind = CUBERT_PARAM_PEER_BUFFER;
  qargs[4].owner = e.dev; /* local memory through a peer parameter */
  ck_assert(!cb_hip_pack_args(qargs, 5, scratch, sizeof scratch, &size)); /* this one passes pointers */
  OK(&e, e.ops->launch(e.dev, s, ++e.work, mq, &one, qargs, 5, &err_));
  read_(&e, s, back, out.address + 64, 32);
  const uint64_t qwant[4] = {d, h, f, in.address + 16};
  for (int i = 0; i < 4; i++)
    ck_assert_msg(back[i] == qwant[i], "pointers: argument %d: %016" PRIx64 ", want %016" PRIx64, i + 1, back[i],
                  qwant[i]);
  OK(&e, e.ops->sync(e.dev, s, &err_));
  e.ops->module_unload(e.dev, mp);
  e.ops->module_unload(e.dev, mq);
  e.ops->mem_free(e.dev, &out);
  e.ops->mem_free(e.dev, &in);
  e.ops->stream_destroy(e.dev, s);
  env_close(&e);
}
END_TEST

START_TEST(test_prebuilt_code_object_is_loaded) {
  env e;
  if (!env_open(&e, true)) return;
  private_cache();
  void *s = stream_new(&e);
  /* the device's own target, compiled ahead and handed in as an object */
  cubert_backend_kernel src = kernel_of(cubert_builtin_desc(CUBERT_BUILTIN_FILL_U32));
  void *code = NULL;
  size_t size = 0;
  OK(&e, cb_hip_compile(e.info.arch, &src, CB_HIP_COMPILE_NO_CACHE, &code, &size, NULL, &err_));
  cubert_code_object objs[2] = {{"gfx000", "not code", 8}, {e.info.arch, code, size}};
  cubert_backend_kernel k = src;
  k.source = NULL;
  k.source_hash = 0;
  k.objects = objs;
  k.nobjects = 2;
  void *m = NULL;
  OK(&e, e.ops->module_load(e.dev, &k, &m, &err_));
  const uint64_t n = 4096;
  cubert_backend_mem b = alloc(&e, n * 4);
  uint32_t v = 0xabcd1234u;
  cubert_backend_arg fa[3] = {buf_arg(b.address, n * 4, CUBERT_ACCESS_WRITE), scalar_arg(&n, 8), scalar_arg(&v, 4)};
  OK(&e, e.ops->launch(e.dev, s, ++e.work, m, &shape, fa, 3, &err_));
  uint32_t back[4096];
  read_(&e, s, back, b.address, sizeof back);
  for (uint64_t i = 0; i < n; i++) ck_assert_uint_eq(back[i], v);
  e.ops->module_unload(e.dev, m);
  /* only another target's object and no source: refused by name */
  k.nobjects = 1;
  cubert_berr err = {0};
  m = NULL;
  ck_assert_int_eq(e.ops->module_load(e.dev, &k, &m, &err), CUBERT_ERR_COMPILE);
  ck_assert_msg(strstr(err.message, "no code object") != NULL, "message: %s", err.message);
  free(code);
  e.ops->mem_free(e.dev, &b);
  e.ops->stream_destroy(e.dev, s);
  env_close(&e);
}
END_TEST

START_TEST(test_stream_waits_for_event_of_another) {
  env e;
  if (!env_open(&e, true)) return;
  private_cache();
  void *a = stream_new(&e), *b = stream_new(&e);
  cubert_backend_kernel kf = kernel_of(cubert_builtin_desc(CUBERT_BUILTIN_FILL_U32));
  void *mf = NULL;
  OK(&e, e.ops->module_load(e.dev, &kf, &mf, &err_));
  const uint64_t n = 64u << 20; /* 256 MiB: long enough for b to overtake a */
  cubert_backend_mem big = alloc(&e, n * 4), copy = alloc(&e, n * 4);
  uint32_t zero = 0;
  OK(&e, e.ops->fill(e.dev, a, ++e.work, big.address, &zero, 4, n * 4, &err_));
  OK(&e, e.ops->sync(e.dev, a, &err_));
  for (uint32_t round = 1; round <= 3; round++) {
    cubert_backend_arg fa[3] = {buf_arg(big.address, n * 4, CUBERT_ACCESS_WRITE), scalar_arg(&n, 8),
                                scalar_arg(&round, 4)};
    const cubert_launch_config small = {{8, 1, 1}, {64, 1, 1}, 0}; /* slow on purpose */
    OK(&e, e.ops->launch(e.dev, a, ++e.work, mf, &small, fa, 3, &err_));
    void *ev = NULL;
    OK(&e, e.ops->event_record(e.dev, a, &ev, &err_));
    OK(&e, e.ops->stream_wait(e.dev, b, ev, &err_));
    OK(&e, e.ops->copy(e.dev, b, ++e.work, copy.address, big.address, n * 4, &err_));
    uint32_t first = 0, last = 0;
    read_(&e, b, &first, copy.address, 4);
    read_(&e, b, &last, copy.address + (n - 1) * 4, 4);
    ck_assert_msg(first == round && last == round, "round %u: b copied %u..%u before a finished", round, first, last);
    e.ops->event_destroy(e.dev, ev);
  }
  OK(&e, e.ops->sync(e.dev, NULL, &err_));
  ck_assert_uint_eq(e.ops->progress(e.dev, a), e.work - 3);
  e.ops->module_unload(e.dev, mf);
  e.ops->mem_free(e.dev, &big);
  e.ops->mem_free(e.dev, &copy);
  e.ops->stream_destroy(e.dev, a);
  e.ops->stream_destroy(e.dev, b);
  env_close(&e);
}
END_TEST

START_TEST(test_progress_follows_work_numbers) {
  env e;
  if (!env_open(&e, true)) return;
  private_cache();
  void *s = stream_new(&e), *t = stream_new(&e);
  ck_assert_uint_eq(e.ops->progress(e.dev, s), 0);
  cubert_backend_mem m = alloc(&e, 1 << 20);
  /* s starts behind a busy GPU: then 12000 small items, 8000 on s, more
   * than the 256 marks of 32 items a stream keeps pending, so marks merge */
  cubert_backend_mem big;
  void *mf = busy_gpu(&e, s, &big);
  uint32_t v = 1;
  uint64_t last_s = e.work, last_t = 0, seen = 0;
  for (int i = 0; i < 12000; i++) {
    void *on = i % 3 ? s : t;
    OK(&e, e.ops->fill(e.dev, on, ++e.work, m.address + (i % 3 ? 0 : 4096), &v, 4, 4096, &err_));
    if (on == s) last_s = e.work;
    else last_t = e.work;
    uint64_t p = e.ops->progress(e.dev, s);
    ck_assert_msg(p >= seen && p <= last_s, "progress %" PRIu64 " after %" PRIu64 " (last %" PRIu64 ")", p, seen, last_s);
    seen = p;
  }
  /* polling alone reaches the last item: marks are not only made at sync */
  uint64_t p = 0;
  for (long polls = 0; polls < 20000000 && (p = e.ops->progress(e.dev, s)) != last_s; polls++) {
    ck_assert_msg(p >= seen && p <= last_s, "progress %" PRIu64 " after %" PRIu64, p, seen);
    seen = p;
  }
  ck_assert_msg(p == last_s, "polling progress stopped at %" PRIu64 ", the last work is %" PRIu64, p, last_s);
  OK(&e, e.ops->sync(e.dev, s, &err_));
  ck_assert_uint_eq(e.ops->progress(e.dev, s), last_s);
  OK(&e, e.ops->sync(e.dev, NULL, &err_));
  ck_assert_uint_eq(e.ops->progress(e.dev, t), last_t);
  /* one more item, then sync: exact at once */
  OK(&e, e.ops->fill(e.dev, t, ++e.work, m.address, &v, 4, 4, &err_));
  OK(&e, e.ops->sync(e.dev, t, &err_));
  ck_assert_uint_eq(e.ops->progress(e.dev, t), e.work);
  /* a read counts: everything up to it has completed when it returns */
  OK(&e, e.ops->fill(e.dev, t, ++e.work, m.address, &v, 4, 4, &err_));
  uint32_t x = 0;
  read_(&e, t, &x, m.address, 4);
  ck_assert_uint_eq(x, 1);
  ck_assert_uint_eq(e.ops->progress(e.dev, t), e.work);
  /* a zero-byte read waits for the stream's earlier work too */
  OK(&e, e.ops->fill(e.dev, t, ++e.work, m.address, &v, 4, 4, &err_));
  read_(&e, t, &x, m.address, 0);
  ck_assert_uint_eq(e.ops->progress(e.dev, t), e.work);
  cubert_async_failure f[4];
  ck_assert_uint_eq(e.ops->drain_failures(e.dev, f, 4), 0);
  e.ops->module_unload(e.dev, mf);
  e.ops->mem_free(e.dev, &big);
  e.ops->mem_free(e.dev, &m);
  e.ops->stream_destroy(e.dev, s);
  e.ops->stream_destroy(e.dev, t);
  env_close(&e);
}
END_TEST

typedef struct poller {
  env *e;
  void *s;
  volatile int stop;
  int regressions;
  uint64_t polls;
} poller;

static void *poll_progress(void *arg) {
  poller *p = arg;
  uint64_t last = 0;
  while (!p->stop) {
    uint64_t now = p->e->ops->progress(p->e->dev, p->s);
    if (now < last) p->regressions++;
    last = now;
    cubert_async_failure f[2];
    (void)p->e->ops->drain_failures(p->e->dev, f, 2);
    p->polls++;
  }
  return NULL;
}

START_TEST(test_progress_and_reads_from_other_threads) {
  env e;
  if (!env_open(&e, true)) return;
  void *s = stream_new(&e);
  cubert_backend_mem m = alloc(&e, 1 << 16);
  poller p = {&e, s, 0, 0, 0};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, poll_progress, &p), 0);
  unsigned char buf[1 << 16], back[1 << 16];
  for (int i = 0; i < 200; i++) {
    pattern(buf, sizeof buf, (uint32_t)i);
    write_(&e, s, m.address, buf, sizeof buf);
    read_(&e, s, back, m.address, sizeof back);
    ck_assert(memcmp(buf, back, sizeof buf) == 0);
  }
  p.stop = 1;
  pthread_join(th, NULL);
  ck_assert_int_eq(p.regressions, 0);
  ck_assert(p.polls > 0);
  ck_assert_uint_eq(e.ops->progress(e.dev, s), e.work);
  e.ops->mem_free(e.dev, &m);
  e.ops->stream_destroy(e.dev, s);
  env_close(&e);
}
END_TEST

START_TEST(test_peers_and_links) {
  env e;
  if (!env_open(&e, true)) return;
  cubert_berr err = {0};
  bool can = false;
  /* a device always reaches its own memory */
  OK(&e, e.ops->peer_can_access(e.dev, e.dev, &can, &err_));
  ck_assert(can);
  OK(&e, e.ops->peer_enable(e.dev, e.dev, &err_));
  cubert_backend_link link;
  cubert_status st = e.ops->link_info(e.dev, e.dev, &link, &err);
  /* NVIDIA: NVML when the driver ships it, else unsupported; AMD: the driver */
  ck_assert_msg(st == CUBERT_OK || st == CUBERT_ERR_UNSUPPORTED, "link_info: %s", err.message);
  if (st == CUBERT_OK && strcmp(cb_hip_platform(), "nvidia") == 0)
    ck_assert_int_eq(link.links, 0); /* no NVLink from a device to itself */
  if (e.count < 2) {
    skip("no device pair (peer access between two devices needs two GPUs)");
    env_close(&e);
    return;
  }
  void *d1 = NULL;
  cubert_device_info i1;
  OK(&e, e.ops->device_open(e.backend, 1, &d1, &i1, &err_));
  memset(&link, 0, sizeof link);
  st = e.ops->link_info(e.dev, d1, &link, &err);
  ck_assert_msg(st == CUBERT_OK || st == CUBERT_ERR_UNSUPPORTED, "link_info: %s", err.message);
  if (st == CUBERT_OK) {
    ck_assert(link.type == CUBERT_LINK_TYPE_XGMI || link.type == CUBERT_LINK_TYPE_PCIE);
    ck_assert(link.type != CUBERT_LINK_TYPE_XGMI || link.links > 0);
    fprintf(stderr, "link between hip devices 0 and 1: type %d, %d links, %d hops\n", link.type,
            link.links, link.hops);
  }
  for (int dir = 0; dir < 2; dir++) {
    void *from = dir ? d1 : e.dev, *to = dir ? e.dev : d1;
    OK(&e, e.ops->peer_can_access(from, to, &can, &err_));
    if (can) {
      OK(&e, e.ops->peer_enable(from, to, &err_));
      OK(&e, e.ops->peer_enable(from, to, &err_)); /* twice is fine */
    } else {
      ck_assert_int_eq(e.ops->peer_enable(from, to, &err), CUBERT_ERR_PEER_ACCESS);
      ck_assert_msg(strstr(err.message, "hip device 0") && strstr(err.message, "hip device 1"),
                    "the refusal does not name both devices: %s", err.message);
    }
  }
  if (can) { /* a peer copy both ways */
    void *s = stream_new(&e);
    cubert_backend_mem a = alloc(&e, 1 << 20), b;
    memset(&b, 0, sizeof b);
    OK(&e, e.ops->mem_alloc(d1, 1 << 20, &b, &err_));
    unsigned char h[1 << 12], back[1 << 12];
    pattern(h, sizeof h, 3);
    write_(&e, s, a.address, h, sizeof h);
    OK(&e, e.ops->copy_peer(e.dev, s, ++e.work, a.address + 8192, d1, b.address, 0, &err_));
    void *s1 = NULL;
    OK(&e, e.ops->stream_create(d1, &s1, &err_));
    OK(&e, e.ops->sync(e.dev, s, &err_));
    OK(&e, e.ops->copy_peer(d1, s1, 1, b.address, e.dev, a.address, sizeof h, &err_));
    OK(&e, e.ops->read(d1, s1, 2, back, b.address, sizeof back, &err_));
    ck_assert(memcmp(h, back, sizeof h) == 0);
    e.ops->stream_destroy(d1, s1);
    e.ops->mem_free(d1, &b);
    e.ops->mem_free(e.dev, &a);
    e.ops->stream_destroy(e.dev, s);
  }
  e.ops->device_close(d1);
  env_close(&e);
}
END_TEST

START_TEST(test_out_of_memory_is_an_error_value) {
  env e;
  if (!env_open(&e, true)) return;
  cubert_berr err = {0};
  cubert_backend_mem m;
  memset(&m, 0, sizeof m);
  cubert_status st = e.ops->mem_alloc(e.dev, 1ull << 50, &m, &err); /* 1 PiB */
  ck_assert_msg(st == CUBERT_ERR_OUT_OF_MEMORY, "1 PiB gave %s: %s", cubert_status_name(st), err.message);
  ck_assert(!err.sticky);
  ck_assert_msg(strstr(err.message, "1125899906842624") != NULL, "the size is not named: %s", err.message);
  cubert_backend_mem ok = alloc(&e, 4096); /* the device is fine */
  e.ops->mem_free(e.dev, &ok);
  env_close(&e);
}
END_TEST

START_TEST(test_bad_launch_and_bad_source_leave_the_device_usable) {
  env e;
  if (!env_open(&e, true)) return;
  private_cache();
  void *s = stream_new(&e);
  cubert_berr err = {0};
  /* a compile error carries the compiler's log */
  cubert_backend_kernel bad;
  memset(&bad, 0, sizeof bad);
  bad.name = bad.entry = "cubert_test_broken";
  bad.source = "extern \"C\" __global__ void cubert_test_broken(int *x) { x[0] = not_declared_here; }\n";
  bad.source_hash = cubert_hash64(bad.source, strlen(bad.source));
  void *m = NULL;
  ck_assert_int_eq(e.ops->module_load(e.dev, &bad, &m, &err), CUBERT_ERR_COMPILE);
  ck_assert_msg(strstr(err.message, "not_declared_here") != NULL, "no log: %s", err.message);
  /* an entry the code does not have */
  cubert_backend_kernel kf = kernel_of(cubert_builtin_desc(CUBERT_BUILTIN_FILL_U32));
  cubert_backend_kernel wrong = kf;
  wrong.entry = "no_such_entry";
  ck_assert_int_eq(e.ops->module_load(e.dev, &wrong, &m, &err), CUBERT_ERR_COMPILE);
  ck_assert_msg(strstr(err.message, "no_such_entry") != NULL, "message: %s", err.message);
  /* a block larger than the device allows fails at enqueue, not sticky */
  OK(&e, e.ops->module_load(e.dev, &kf, &m, &err_));
  cubert_backend_mem b = alloc(&e, 4096);
  uint64_t n = 1024;
  uint32_t v = 9;
  cubert_backend_arg fa[3] = {buf_arg(b.address, 4096, CUBERT_ACCESS_WRITE), scalar_arg(&n, 8), scalar_arg(&v, 4)};
  const cubert_launch_config huge = {{1, 1, 1}, {e.info.max_threads_per_block * 2, 1, 1}, 0};
  uint64_t w = ++e.work;
  cubert_status st = e.ops->launch(e.dev, s, w, m, &huge, fa, 3, &err);
  ck_assert_msg(st == CUBERT_ERR_LAUNCH_CONFIG || st == CUBERT_ERR_LAUNCH, "oversized block gave %s: %s",
                cubert_status_name(st), err.message);
  ck_assert(!err.sticky);
  ck_assert_msg(strstr(err.message, "cubert_fill_u32") != NULL, "message: %s", err.message);
  OK(&e, e.ops->sync(e.dev, s, &err_));
  ck_assert_uint_eq(e.ops->progress(e.dev, s), w); /* failed work counts as completed */
  OK(&e, e.ops->launch(e.dev, s, ++e.work, m, &shape, fa, 3, &err_));
  uint32_t back = 0;
  read_(&e, s, &back, b.address + 4092, 4);
  ck_assert_uint_eq(back, 9);
  e.ops->module_unload(e.dev, m);
  e.ops->mem_free(e.dev, &b);
  e.ops->stream_destroy(e.dev, s);
  env_close(&e);
}
END_TEST

/* No device needed: the rule itself. clr returns hipErrorLaunchFailure
 * synchronously from hipModuleLaunchKernel for a block over the kernel's
 * __launch_bounds__ (hip_module.cpp, ihipLaunchKernel_validate): that is the
 * launch's configuration, not a lost device. Found by a wait it is sticky. */
START_TEST(test_launch_failure_from_the_launch_call_is_not_sticky) {
  if (!cubert_backend_hip()) {
    skip("no HIP backend");
    return;
  }
  int lf = cb_hip_error_code("hipErrorLaunchFailure");
  ck_assert_int_ge(lf, 1);
  bool sticky = true;
  ck_assert_int_eq(cb_hip_error_classify(lf, true, &sticky), CUBERT_ERR_LAUNCH_CONFIG);
  ck_assert(!sticky);
  ck_assert_int_eq(cb_hip_error_classify(lf, false, &sticky), CUBERT_ERR_DEVICE_LOST);
  ck_assert(sticky);
  /* nothing a launch call returns is sticky, even a fault's code */
  int ia = cb_hip_error_code("hipErrorIllegalAddress");
  ck_assert_int_ge(ia, 1);
  ck_assert_int_ne(cb_hip_error_classify(ia, true, &sticky), CUBERT_ERR_DEVICE_LOST);
  ck_assert(!sticky);
  ck_assert_int_eq(cb_hip_error_classify(ia, false, &sticky), CUBERT_ERR_DEVICE_LOST);
  ck_assert(sticky);
  int ic = cb_hip_error_code("hipErrorInvalidConfiguration");
  ck_assert_int_eq(cb_hip_error_classify(ic, true, &sticky), CUBERT_ERR_LAUNCH_CONFIG);
  ck_assert(!sticky);
  ck_assert_int_eq(cb_hip_error_code("hipErrorNoSuchThing"), -1);
}
END_TEST

/* Last: the fault kills the context for the rest of the process (on AMD,
 * the process itself: the test forks a child to take the fault). */
/* On AMD: the faulting kernel in a child that opens HIP itself (ROCm's
 * KFD state does not survive a fork, so the parent opens nothing). The
 * child exits 77 when there is no device, 0 if ROCm reported the fault
 * instead of ending the process. */
static void fault_in_child(void) {
  env e;
  if (!env_open(&e, true)) _exit(77);
  void *s = stream_new(&e);
  cubert_backend_kernel k;
  memset(&k, 0, sizeof k);
  k.name = k.entry = "cubert_test_fault";
  k.source = "extern \"C\" __global__ void cubert_test_fault(unsigned int *p)\n"
             "{ p[threadIdx.x] = 1u; }\n";
  k.source_hash = cubert_hash64(k.source, strlen(k.source));
  k.nparams = 1;
  void *m = NULL;
  cubert_berr err = {0};
  if (e.ops->module_load(e.dev, &k, &m, &err) != CUBERT_OK) {
    fprintf(stderr, "child: %s\n", err.message);
    _exit(2);
  }
  cubert_backend_arg a = buf_arg(0x1000, 4096, CUBERT_ACCESS_WRITE); /* unmapped */
  const cubert_launch_config one = {{1, 1, 1}, {32, 1, 1}, 0};
  if (e.ops->launch(e.dev, s, 1, m, &one, &a, 1, &err) == CUBERT_OK) (void)e.ops->sync(e.dev, s, &err);
  fprintf(stderr, "child: the fault was reported, not fatal: %s\n", err.message);
  _exit(0);
}

START_TEST(test_fault_is_sticky_attributed_and_marks_the_device_lost) {
  if (!cubert_backend_hip()) {
    skip("no HIP backend");
    return;
  }
  if (strcmp(cb_hip_platform(), "amd") == 0) {
    /* ROCm reports no GPU memory fault to the caller: ROCclr's queue-error
     * callback aborts the process (ROCm/clr rocclr/device/rocm/rocvirtual.cpp,
     * callbackQueue). "Device lost" on AMD is the process's end
     * (docs/failures.md). */
    fflush(NULL);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) fault_in_child();
    int status = 0;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) return; /* the child said why */
    ck_assert_msg(WIFSIGNALED(status), "the faulting child was not ended by a signal (exit status %d)",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    fprintf(stderr, "AMD: the faulting process died of signal %d (%s)\n", WTERMSIG(status),
            strsignal(WTERMSIG(status)));
    return;
  }
  const char *fork_mode = getenv("CK_FORK");
  if (fork_mode && strcmp(fork_mode, "no") == 0) {
    skip("fault test needs Check's fork mode (a fault kills the process's context)");
    return;
  }
  env e;
  if (!env_open(&e, true)) return;
  private_cache();
  void *s = stream_new(&e);
  cubert_backend_kernel k;
  memset(&k, 0, sizeof k);
  k.name = k.entry = "cubert_test_fault";
  k.source = "extern \"C\" __global__ void cubert_test_fault(unsigned int *p)\n"
             "{ p[threadIdx.x] = 1u; }\n";
  k.source_hash = cubert_hash64(k.source, strlen(k.source));
  k.nparams = 1;
  void *m = NULL;
  OK(&e, e.ops->module_load(e.dev, &k, &m, &err_));
  cubert_backend_mem ok = alloc(&e, 4096);
  OK(&e, e.ops->sync(e.dev, s, &err_));
  cubert_backend_arg a = buf_arg(0x1000, 4096, CUBERT_ACCESS_WRITE); /* unmapped */
  const cubert_launch_config one = {{1, 1, 1}, {32, 1, 1}, 0};
  uint64_t w = ++e.work;
  OK(&e, e.ops->launch(e.dev, s, w, m, &one, &a, 1, &err_)); /* fails when it runs */
  cubert_berr err = {0};
  cubert_status st = e.ops->sync(e.dev, s, &err);
  ck_assert_msg(st == CUBERT_ERR_DEVICE_LOST && err.sticky, "sync after a fault gave %s: %s",
                cubert_status_name(st), err.message);
  cubert_async_failure f[4];
  size_t nf = e.ops->drain_failures(e.dev, f, 4);
  ck_assert_uint_ge(nf, 1);
  ck_assert_msg(f[0].sticky && f[0].status == CUBERT_ERR_DEVICE_LOST, "failure: %s", f[0].message);
  ck_assert_msg(f[0].work == w, "the fault was attributed to work %" PRIu64 ", not %" PRIu64 ": %s",
                f[0].work, w, f[0].message);
  fprintf(stderr, "fault reported as: %s\n", f[0].message);
  ck_assert_uint_eq(e.ops->progress(e.dev, s), w);
  /* every later call says the device is lost, with the cause */
  unsigned char byte;
  st = e.ops->read(e.dev, s, ++e.work, &byte, ok.address, 1, &err);
  ck_assert_int_eq(st, CUBERT_ERR_DEVICE_LOST);
  ck_assert(err.sticky);
  cubert_backend_mem more;
  ck_assert_int_eq(e.ops->mem_alloc(e.dev, 4096, &more, &err), CUBERT_ERR_DEVICE_LOST);
  /* and tearing down does not hang or crash */
  e.ops->module_unload(e.dev, m);
  e.ops->mem_free(e.dev, &ok);
  e.ops->stream_destroy(e.dev, s);
  env_close(&e);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("hip_backend");
  TCase *tc = tcase_create("ops");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_open_with_no_device_gives_zero_devices);
  tcase_add_test(tc, test_pack_args_only_when_the_layout_is_certain);
  tcase_add_test(tc, test_image_layout_is_the_packed_layout);
  tcase_add_test(tc, test_device_info_is_filled);
  tcase_add_test(tc, test_write_read_round_trip);
  tcase_add_test(tc, test_write_source_is_reusable_at_once);
  tcase_add_test(tc, test_read_has_landed_for_every_destination_kind);
  tcase_add_test(tc, test_fill_every_pattern_size_aligned_or_not);
  tcase_add_test(tc, test_copy_on_device_and_to_itself_as_peer);
  tcase_add_test(tc, test_builtin_fill_and_copy_kernels_run);
  tcase_add_test(tc, test_launch_arguments_packed_and_through_pointers);
  tcase_add_test(tc, test_prebuilt_code_object_is_loaded);
  tcase_add_test(tc, test_stream_waits_for_event_of_another);
  tcase_add_test(tc, test_progress_follows_work_numbers);
  tcase_add_test(tc, test_progress_and_reads_from_other_threads);
  tcase_add_test(tc, test_peers_and_links);
  tcase_add_test(tc, test_out_of_memory_is_an_error_value);
  tcase_add_test(tc, test_bad_launch_and_bad_source_leave_the_device_usable);
  tcase_add_test(tc, test_launch_failure_from_the_launch_call_is_not_sticky);
  tcase_add_test(tc, test_fault_is_sticky_attributed_and_marks_the_device_lost);
  suite_add_tcase(suite, tc);
  SRunner *sr = srunner_create(suite);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
