/* tests/test_pool.c: the per-device memory manager (runtime/pool.c) over a
 * fake backend whose pages are host memory.
 *
 * The fake counts driver calls, has a settable memory limit, can fail its
 * nth allocation with any status, and can hand out addresses that are not
 * 256-aligned, so every rule of pool.h is checked without a GPU. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/pool.h"

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

/* A check for hot loops: ck_assert records every passing check through a
 * pipe, which would dominate the run time of the stress test. */
#define EXPECT(cond, ...)                                     \
  do {                                                        \
    if (!(cond)) {                                            \
      char why_[1024];                                        \
      snprintf(why_, sizeof why_, __VA_ARGS__);               \
      ck_abort_msg("expected %s: %s", #cond, why_);           \
    }                                                         \
  } while (0)

/* ------------------------------------------------------------ fake backend */

#define MAX_REGIONS 4096

typedef struct fake {
  uint64_t limit;          /* bytes; 0: unlimited */
  uint64_t used;
  uint64_t calls;          /* mem_alloc calls, failed ones included */
  uint64_t allocs;         /* successful mem_alloc calls */
  uint64_t frees;
  uint64_t fail_nth;       /* fail this mem_alloc call (1-based); 0: none */
  cubert_status fail_status;
  bool fail_sticky;
  uint64_t misalign;       /* added to every address handed out */
  uint64_t live;
  struct { uint64_t address, size; } regions[MAX_REGIONS];
} fake;

static fake F;

static cubert_status fake_alloc(void *device, uint64_t size, cubert_backend_mem *mem,
                                cubert_berr *err) {
  fake *f = device;
  f->calls++;
  if (f->fail_nth && f->calls == f->fail_nth) {
    err->sticky = f->fail_sticky;
    snprintf(err->message, sizeof err->message, "fake: injected failure of call %" PRIu64,
             f->calls);
    return f->fail_status;
  }
  if (f->limit && f->used + size > f->limit) {
    err->sticky = false;
    snprintf(err->message, sizeof err->message, "fake: only %" PRIu64 " bytes left",
             f->limit - f->used);
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  /* exact bounds, so ASan catches a block reaching past its page */
  uint64_t bytes = (size + f->misalign + 255) & ~UINT64_C(255);
  unsigned char *raw = aligned_alloc(256, bytes);
  if (!raw || f->live == MAX_REGIONS) {
    free(raw);
    snprintf(err->message, sizeof err->message, "fake: host out of memory");
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  mem->address = (uint64_t)(uintptr_t)(raw + f->misalign);
  mem->size = size;
  mem->cookie = raw;
  f->regions[f->live].address = mem->address;
  f->regions[f->live].size = size;
  f->live++;
  f->used += size;
  f->allocs++;
  return CUBERT_OK;
}

static void fake_free(void *device, cubert_backend_mem *mem) {
  fake *f = device;
  for (uint64_t i = 0; i < f->live; i++) {
    if (f->regions[i].address == mem->address) {
      EXPECT(f->regions[i].size == mem->size, "%" PRIu64, mem->size);
      f->regions[i] = f->regions[--f->live];
      f->used -= mem->size;
      f->frees++;
      free(mem->cookie);
      return;
    }
  }
  ck_abort_msg("mem_free of an address the fake never handed out");
}

/* Whether [address, address + size) lies inside one live driver allocation. */
static bool fake_holds(uint64_t address, uint64_t size) {
  for (uint64_t i = 0; i < F.live; i++)
    if (address >= F.regions[i].address &&
        address + size <= F.regions[i].address + F.regions[i].size)
      return true;
  return false;
}

/* Every other slot: "not supported", as backend.h asks. */
static cubert_status unsup_open(const cubert_backend_config *c, void **b, int *n, cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static void unsup_close(void *b) {}
static cubert_status unsup_device_open(void *b, int i, void **d, cubert_device_info *info,
                                       cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static void unsup_device_close(void *d) {}
static cubert_status unsup_stream_create(void *d, void **s, cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static void unsup_stream_destroy(void *d, void *s) {}
static cubert_status unsup_event_record(void *d, void *s, void **ev, cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static cubert_status unsup_stream_wait(void *d, void *s, void *ev, cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static void unsup_event_destroy(void *d, void *ev) {}
static cubert_status unsup_write(void *d, void *s, uint64_t w, uint64_t dst, const void *src,
                                 uint64_t n, cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static cubert_status unsup_read(void *d, void *s, uint64_t w, void *dst, uint64_t src, uint64_t n,
                                cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static cubert_status unsup_fill(void *d, void *s, uint64_t w, uint64_t dst, const void *p,
                                uint32_t ps, uint64_t n, cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static cubert_status unsup_copy(void *d, void *s, uint64_t w, uint64_t dst, uint64_t src,
                                uint64_t n, cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static cubert_status unsup_copy_peer(void *d, void *s, uint64_t w, uint64_t dst, void *sd,
                                     uint64_t src, uint64_t n, cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static cubert_status unsup_copy_strided(void *d, void *s, uint64_t w, cubert_backend_direction dir, uint64_t dst,
                                        void *sd, uint64_t src, const cubert_backend_strided *l, cubert_berr *e) {
  (void)d, (void)s, (void)w, (void)dir, (void)dst, (void)sd, (void)src, (void)l;
  return cubert_berr_set(e, CUBERT_ERR_UNSUPPORTED, "no strided copies here");
}
static cubert_status unsup_module_load(void *d, const cubert_backend_kernel *k, void **m,
                                       cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static void unsup_module_unload(void *d, void *m) {}
static cubert_status unsup_launch(void *d, void *s, uint64_t w, void *m,
                                  const cubert_launch_config *c, const cubert_backend_arg *a,
                                  uint32_t n, cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static cubert_status unsup_sync(void *d, void *s, cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static uint64_t unsup_progress(void *d, void *s) { return 0; }
static size_t unsup_drain(void *d, cubert_async_failure *o, size_t c) { return 0; }
static cubert_status unsup_peer_can(void *d, void *p, bool *can, cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static cubert_status unsup_peer_enable(void *d, void *p, cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}
static cubert_status unsup_link(void *d, void *p, cubert_backend_link *l, cubert_berr *e) {
  return CUBERT_ERR_UNSUPPORTED;
}

static const cubert_backend_ops fake_ops = {
  .abi = CUBERT_BACKEND_ABI,
  .name = "fake",
  .open = unsup_open,
  .close = unsup_close,
  .device_open = unsup_device_open,
  .device_close = unsup_device_close,
  .mem_alloc = fake_alloc,
  .mem_free = fake_free,
  .stream_create = unsup_stream_create,
  .stream_destroy = unsup_stream_destroy,
  .event_record = unsup_event_record,
  .stream_wait = unsup_stream_wait,
  .event_destroy = unsup_event_destroy,
  .write = unsup_write,
  .read = unsup_read,
  .fill = unsup_fill,
  .copy = unsup_copy,
  .copy_peer = unsup_copy_peer,
    .copy_strided = unsup_copy_strided,
  .module_load = unsup_module_load,
  .module_unload = unsup_module_unload,
  .launch = unsup_launch,
  .sync = unsup_sync,
  .progress = unsup_progress,
  .drain_failures = unsup_drain,
  .peer_can_access = unsup_peer_can,
  .peer_enable = unsup_peer_enable,
  .link_info = unsup_link,
};

/* ------------------------------------------------------------ helpers */

enum { SMALL, MEDIUM, EXCL };

static void setup(void) { memset(&F, 0, sizeof F); }

static cb_pool *new_pool(uint64_t device_memory) {
  cb_pool *pool = NULL;
  ck_assert_int_eq(cb_pool_create(&fake_ops, &F, device_memory, &pool), CUBERT_OK);
  ck_assert_ptr_nonnull(pool);
  return pool;
}

static cb_block take(cb_pool *pool, uint64_t size) {
  cb_block b;
  cubert_berr err = {0};
  cubert_status st = cb_pool_alloc(pool, size, &b, &err);
  EXPECT(st == CUBERT_OK, "alloc %" PRIu64 ": status %d (%s)", size, (int)st, err.message);
  EXPECT(b.address % 256 == 0, "%" PRIx64, b.address);
  EXPECT(b.size >= size, "%" PRIu64 " < %" PRIu64, b.size, size);
  EXPECT(fake_holds(b.address, b.size), "%" PRIx64 "+%" PRIu64, b.address, b.size);
  return b;
}

/* Checks the pool's bookkeeping, destroys it, and checks every page went
 * back to the driver. */
static void done(cb_pool *pool) {
  char why[256];
  ck_assert_msg(cb_pool_verify(pool, why, sizeof why), "%s", why);
  cb_pool_destroy(pool);
  ck_assert_uint_eq(F.live, 0);
  ck_assert_uint_eq(F.used, 0);
}

static void usage(cb_pool *pool, cubert_pool_usage u[3]) {
  ck_assert_uint_eq(cb_pool_usage(pool, u, 3), 3);
}

static uint64_t rng_state;
static uint64_t rng(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}

/* ------------------------------------------------------------ tests */

START_TEST(small_allocations_take_few_driver_calls) {
  cb_pool *pool = new_pool(16 * GiB);
  static cb_block b[1000];
  for (int i = 0; i < 1000; i++) b[i] = take(pool, 200);
  ck_assert_uint_eq(F.allocs, 1);  /* 1000 x 256 B in one 2 MiB page */
  ck_assert_uint_eq(b[999].address - b[0].address, 999 * 256);  /* first fit, packed */
  for (int i = 0; i < 1000; i++) b[i] = take(pool, 4096);
  ck_assert_uint_eq(F.allocs, 1 + 2);  /* 512 a page, the first page full too */
  /* first fit across pages: a hole in a full page is found again */
  cb_block hole = b[100];
  cb_pool_free(pool, &b[100]);
  b[100] = take(pool, 4096);
  ck_assert_uint_eq(b[100].address, hole.address);
  ck_assert_uint_eq(F.allocs, 3);
  for (int i = 0; i < 400; i++) b[i] = take(pool, 64 * KiB);
  ck_assert_uint_eq(F.allocs, 3 + 1);  /* 25 MiB in one 32 MiB page */
  done(pool);
}
END_TEST

/* Random allocations and frees against a shadow model: blocks 256-aligned,
 * inside driver memory, never overlapping, sized as asked; usage matches. */
START_TEST(random_stress_keeps_blocks_disjoint_and_accounted) {
  enum { OPS = 20000, LIVE = 400 };
  F.misalign = _i ? 64 : 0;
  F.limit = 4 * GiB;
  rng_state = 0x9e3779b97f4a7c15u + (uint64_t)_i;
  cb_pool *pool = new_pool(4 * GiB);
  static cb_block live[LIVE];
  static unsigned char tag[LIVE];
  int n = 0;
  uint64_t shadow[3] = {0};
  for (int op = 0; op < OPS; op++) {
    if (n == 0 || (n < LIVE && rng() % 100 < 55)) {
      uint64_t r = rng() % 100, size;
      if (r < 50)
        size = 1 + rng() % (4 * KiB);
      else if (r < 88)
        size = 4 * KiB + 1 + rng() % (MiB - 4 * KiB);
      else
        size = MiB + 1 + rng() % (8 * MiB);
      cb_block b = take(pool, size);
      uint64_t unit = b.pool == MEDIUM ? KiB : 256;  /* the pool's unit */
      uint64_t rounded = (size + unit - 1) / unit * unit;
      if (b.pool == EXCL) {
        EXPECT(b.size - rounded <= b.size / 8 + 256, "%" PRIu64 " for %" PRIu64, b.size, size);
        EXPECT(size > MiB, "%" PRIu64, size);
      } else {
        EXPECT(b.size == rounded, "%" PRIu64 " for %" PRIu64, b.size, size);
        EXPECT(size <= (b.pool == SMALL ? 4 * KiB : MiB), "%" PRIu64 " in %u", size, b.pool);
      }
      for (int j = 0; j < n; j++)
        EXPECT(b.address + b.size <= live[j].address ||
                          live[j].address + live[j].size <= b.address,
                      "block %" PRIx64 "+%" PRIu64 " overlaps %" PRIx64 "+%" PRIu64, b.address,
                      b.size, live[j].address, live[j].size);
      /* real bytes at both ends: ASan and the tags check the page bounds */
      unsigned char t = (unsigned char)(op * 7 + 1);
      ((unsigned char *)(uintptr_t)b.address)[0] = t;
      ((unsigned char *)(uintptr_t)b.address)[b.size - 1] = t;
      live[n] = b;
      tag[n] = t;
      shadow[b.pool] += b.size;
      n++;
    } else {
      int j = (int)(rng() % (uint64_t)n);
      EXPECT(((unsigned char *)(uintptr_t)live[j].address)[0] == tag[j], "head tag");
      EXPECT(((unsigned char *)(uintptr_t)live[j].address)[live[j].size - 1] == tag[j], "tail tag");
      shadow[live[j].pool] -= live[j].size;
      cb_pool_free(pool, &live[j]);
      live[j] = live[n - 1];
      tag[j] = tag[n - 1];
      n--;
    }
    if (rng() % 1000 == 0) cb_pool_cleanup(pool);
    if (op % 97 == 0) {
      char why[256];
      EXPECT(cb_pool_verify(pool, why, sizeof why), "op %d: %s", op, why);
    }
    cubert_pool_usage u[3];
    EXPECT(cb_pool_usage(pool, u, 3) == 3, "pool count");
    uint64_t reserved = 0;
    for (int p = 0; p < 3; p++) {
      EXPECT(u[p].in_use == shadow[p], "pool %d: %" PRIu64 " vs %" PRIu64, p, u[p].in_use,
             shadow[p]);
      EXPECT(u[p].in_use <= u[p].reserved, "pool %d", p);
      EXPECT(u[p].high_water >= u[p].in_use, "pool %d", p);
      reserved += u[p].reserved;
    }
    EXPECT(reserved == F.used, "%" PRIu64 " vs %" PRIu64, reserved, F.used);
    EXPECT(u[0].pages + u[1].pages + u[2].pages == F.live, "page count");
  }
  ck_assert_uint_gt(F.frees, 0);  /* idle pages did go back along the way */
  for (int j = 0; j < n; j++) cb_pool_free(pool, &live[j]);
  cb_pool_cleanup(pool);
  ck_assert_uint_eq(F.live, 0);  /* cleanup, not destroy, gave every page back */
  done(pool);
}
END_TEST

/* Fills one page with blocks of `size`, frees three neighbours at `first` in
 * the order `order`, and asks for their total. */
static void coalesce_case(uint64_t size, uint64_t page_size, int first, const int order[3]) {
  setup();
  cb_pool *pool = new_pool(16 * GiB);
  int count = (int)(page_size / size);
  cb_block *b = calloc((size_t)count, sizeof *b);
  ck_assert_ptr_nonnull(b);
  for (int i = 0; i < count; i++) b[i] = take(pool, size);
  ck_assert_uint_eq(F.allocs, 1);
  for (int i = 0; i < 3; i++) cb_pool_free(pool, &b[first + order[i]]);
  cb_block big = take(pool, 3 * size);
  ck_assert_uint_eq(F.allocs, 1);  /* same page: the three coalesced */
  ck_assert_uint_eq(big.address, b[first].address);
  ck_assert_ptr_eq(big.page, b[first].page);
  free(b);
  done(pool);
}

START_TEST(freed_neighbours_coalesce_in_any_order) {
  static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                   {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (int o = 0; o < 6; o++) {
    /* middle of the page, its start and its end; both sliced pools */
    coalesce_case(256 * KiB, 32 * MiB, 40, orders[o]);
    coalesce_case(256 * KiB, 32 * MiB, 0, orders[o]);
    coalesce_case(256 * KiB, 32 * MiB, 125, orders[o]);
    coalesce_case(1 * KiB, 2 * MiB, 999, orders[o]);
    coalesce_case(1 * KiB, 2 * MiB, 2045, orders[o]);
  }
}
END_TEST

START_TEST(first_fit_takes_the_lowest_hole_that_fits) {
  cb_pool *pool = new_pool(16 * GiB);
  cb_block b[10];
  for (int i = 0; i < 10; i++) b[i] = take(pool, 256);
  cb_pool_free(pool, &b[2]);
  cb_pool_free(pool, &b[5]);
  cb_pool_free(pool, &b[6]);
  cb_block x = take(pool, 512);  /* the hole at 2 is too small */
  ck_assert_uint_eq(x.address, b[5].address);
  cb_block y = take(pool, 256);  /* ... but not forgotten */
  ck_assert_uint_eq(y.address, b[2].address);
  cb_block z = take(pool, 256);
  ck_assert_uint_eq(z.address, b[9].address + 256);
  done(pool);
}
END_TEST

START_TEST(a_page_too_fragmented_once_is_tried_again_after_a_free) {
  cb_pool *pool = new_pool(16 * GiB);
  static cb_block b[2048];
  for (int i = 0; i < 2048; i++) b[i] = take(pool, KiB);  /* page 1 full */
  cb_block extra = take(pool, KiB);
  ck_assert_uint_eq(F.allocs, 2);
  ck_assert_ptr_ne(extra.page, b[0].page);
  cb_pool_free(pool, &b[10]);
  cb_pool_free(pool, &b[12]);
  cb_block two = take(pool, 2 * KiB);  /* two 1 KiB holes: page 2 */
  ck_assert_ptr_eq(two.page, extra.page);
  cb_block one = take(pool, KiB);  /* page 1 was full, and is first again */
  ck_assert_uint_eq(one.address, b[10].address);
  cb_pool_free(pool, &one);
  cb_pool_free(pool, &b[11]);
  cb_block three = take(pool, 3 * KiB);  /* now there is room again */
  ck_assert_uint_eq(three.address, b[10].address);
  ck_assert_uint_eq(F.allocs, 2);
  done(pool);
}
END_TEST

START_TEST(exclusive_pages_are_reused_when_they_fit) {
  cb_pool *pool = new_pool(16 * GiB);
  cb_block a = take(pool, 8 * MiB);
  ck_assert_uint_eq(a.pool, EXCL);
  ck_assert_uint_eq(F.allocs, 1);
  cb_pool_free(pool, &a);

  cb_block b = take(pool, 7 * MiB + 1);  /* wastes < 1/8: reused */
  ck_assert_uint_eq(F.allocs, 1);
  ck_assert_uint_eq(b.address, a.address);
  ck_assert_uint_eq(b.size, 8 * MiB);

  cb_block c = take(pool, 8 * MiB);  /* the page is out: a new one */
  ck_assert_uint_eq(F.allocs, 2);
  cb_pool_free(pool, &b);
  cb_pool_free(pool, &c);

  cb_block d = take(pool, 4 * MiB);  /* would waste half a page: a new one */
  ck_assert_uint_eq(F.allocs, 3);
  ck_assert_uint_eq(d.size, 4 * MiB);
  cb_block e = take(pool, 9 * MiB);  /* fits in no idle page */
  ck_assert_uint_eq(F.allocs, 4);
  cb_pool_free(pool, &d);
  cb_pool_free(pool, &e);

  /* the smallest page that fits is the one taken */
  cb_block f = take(pool, 8 * MiB + 512 * KiB);
  ck_assert_uint_eq(F.allocs, 4);
  ck_assert_uint_eq(f.address, e.address);
  cb_block g = take(pool, 7 * MiB + 512 * KiB);
  ck_assert_uint_eq(F.allocs, 4);
  ck_assert(g.address == a.address || g.address == c.address);
  ck_assert_uint_eq(g.size, 8 * MiB);

  cubert_pool_usage u[3];
  usage(pool, u);
  ck_assert_uint_eq(u[EXCL].pages, 4);
  ck_assert_uint_eq(u[EXCL].reserved, 8 * MiB + 8 * MiB + 4 * MiB + 9 * MiB);
  ck_assert_uint_eq(u[EXCL].in_use, 9 * MiB + 8 * MiB);
  ck_assert_uint_eq(u[EXCL].page_size, 0);
  done(pool);
  ck_assert_uint_eq(F.frees, 4);
}
END_TEST

START_TEST(idle_pages_go_back_after_two_checks) {
  cb_pool *pool = new_pool(16 * GiB);
  uint64_t count = 0;  /* allocations since the pool was made */
  cb_block big = take(pool, 8 * MiB);
  cb_block mid = take(pool, 64 * KiB);
  cb_block keep = take(pool, 256);  /* keeps the small page busy */
  count = 3;
  cb_pool_free(pool, &big);
  cb_pool_free(pool, &mid);
  ck_assert_uint_eq(F.allocs, 3);

  /* allocations in the small page only; the check runs on every
   * CB_POOL_IDLE_INTERVAL-th allocation */
  while (count < 2 * CB_POOL_IDLE_INTERVAL - 1) {
    cb_block t = take(pool, 512);
    cb_pool_free(pool, &t);
    count++;
  }
  ck_assert_uint_eq(F.frees, 0);  /* idle at one check only */
  cb_block t = take(pool, 512);
  cb_pool_free(pool, &t);
  count++;
  ck_assert_uint_eq(F.frees, 2);  /* idle at two: the 8 MiB and the 32 MiB pages */
  cubert_pool_usage u[3];
  usage(pool, u);
  ck_assert_uint_eq(u[SMALL].pages, 1);
  ck_assert_uint_eq(u[MEDIUM].pages, 0);
  ck_assert_uint_eq(u[EXCL].pages, 0);
  ck_assert_uint_eq(u[EXCL].reserved, 0);

  /* a page used between two checks is not idle across them */
  big = take(pool, 8 * MiB);
  count++;
  cb_pool_free(pool, &big);
  while (count < 3 * CB_POOL_IDLE_INTERVAL + 10) {  /* past check 3: marked */
    cb_block s = take(pool, 512);
    cb_pool_free(pool, &s);
    count++;
  }
  big = take(pool, 8 * MiB);  /* reused, and so not idle any more */
  count++;
  ck_assert_uint_eq(F.allocs, 4);
  cb_pool_free(pool, &big);
  while (count < 4 * CB_POOL_IDLE_INTERVAL) {  /* through check 4 */
    cb_block s = take(pool, 512);
    cb_pool_free(pool, &s);
    count++;
  }
  ck_assert_uint_eq(F.frees, 2);
  while (count < 5 * CB_POOL_IDLE_INTERVAL) {  /* through check 5 */
    cb_block s = take(pool, 512);
    cb_pool_free(pool, &s);
    count++;
  }
  ck_assert_uint_eq(F.frees, 3);

  /* the busy page stays; explicit cleanup returns it once idle */
  cb_pool_cleanup(pool);
  ck_assert_uint_eq(F.frees, 3);
  cb_pool_free(pool, &keep);
  cb_pool_cleanup(pool);
  ck_assert_uint_eq(F.frees, 4);
  ck_assert_uint_eq(F.live, 0);
  usage(pool, u);
  for (int p = 0; p < 3; p++) ck_assert_uint_eq(u[p].pages, 0);
  done(pool);
}
END_TEST

START_TEST(cleanup_returns_every_idle_page_now) {
  cb_pool *pool = new_pool(16 * GiB);
  cb_block a = take(pool, 100);
  cb_block b = take(pool, 100 * KiB);
  cb_block c = take(pool, 3 * MiB);
  cb_block d = take(pool, 5 * MiB);
  cb_pool_free(pool, &a);
  cb_pool_free(pool, &c);
  cb_pool_cleanup(pool);
  ck_assert_uint_eq(F.frees, 2);
  ck_assert(fake_holds(b.address, b.size));
  ck_assert(fake_holds(d.address, d.size));
  cubert_pool_usage u[3];
  usage(pool, u);
  ck_assert_uint_eq(u[SMALL].pages, 0);
  ck_assert_uint_eq(u[MEDIUM].pages, 1);
  ck_assert_uint_eq(u[EXCL].pages, 1);
  ck_assert_uint_eq(u[EXCL].reserved, 5 * MiB);
  done(pool);
}
END_TEST

START_TEST(out_of_memory_cleans_up_retries_then_names_the_size) {
  F.limit = 64 * MiB;
  cb_pool *pool = new_pool(0);  /* size unknown: only the driver says no */
  cubert_berr err = {0};
  cb_block b;

  /* an idle page is given back, then the retry succeeds */
  cb_block a = take(pool, 40 * MiB);
  cb_pool_free(pool, &a);
  cb_block big = take(pool, 48 * MiB);
  ck_assert_uint_eq(F.calls, 3);
  ck_assert_uint_eq(F.frees, 1);

  /* nothing idle: one try, one retry, then an error naming the size */
  uint64_t calls = F.calls;
  ck_assert_int_eq(cb_pool_alloc(pool, GiB, &b, &err), CUBERT_ERR_OUT_OF_MEMORY);
  ck_assert_uint_eq(F.calls, calls + 2);
  ck_assert_msg(strstr(err.message, "out of memory allocating 1073741824 bytes"), "%s",
                err.message);
  ck_assert_msg(strstr(err.message, "fake: only"), "driver's reason kept: %s", err.message);
  ck_assert(!err.sticky);

  /* a small size fails the same way when its page does not fit */
  calls = F.calls;
  ck_assert_int_eq(cb_pool_alloc(pool, 300 * KiB, &b, &err), CUBERT_ERR_OUT_OF_MEMORY);
  ck_assert_uint_eq(F.calls, calls + 2);
  ck_assert_msg(strstr(err.message, "307200 bytes"), "%s", err.message);

  /* ... and the pool still works */
  cb_block s = take(pool, 1000);
  cubert_pool_usage u[3];
  usage(pool, u);
  ck_assert_uint_eq(u[SMALL].in_use, 1024);
  ck_assert_uint_eq(u[EXCL].in_use, 48 * MiB);
  ck_assert_uint_eq(u[EXCL].reserved + u[SMALL].reserved + u[MEDIUM].reserved, F.used);

  /* an out of memory from the first try only: exactly one retry */
  cb_pool_free(pool, &big);
  cb_pool_cleanup(pool);
  calls = F.calls;
  F.fail_nth = calls + 1;
  F.fail_status = CUBERT_ERR_OUT_OF_MEMORY;
  cb_block c = take(pool, 20 * MiB);
  ck_assert_uint_eq(F.calls, calls + 2);

  /* other failures pass through unchanged and without a retry */
  calls = F.calls;
  F.fail_nth = calls + 1;
  F.fail_status = CUBERT_ERR_BACKEND;
  F.fail_sticky = true;
  memset(&err, 0, sizeof err);
  ck_assert_int_eq(cb_pool_alloc(pool, 20 * MiB, &b, &err), CUBERT_ERR_BACKEND);
  ck_assert_uint_eq(F.calls, calls + 1);
  char expect[64];
  snprintf(expect, sizeof expect, "fake: injected failure of call %" PRIu64, calls + 1);
  ck_assert_str_eq(err.message, expect);
  ck_assert(err.sticky);
  F.fail_nth = F.calls + 1;
  F.fail_status = CUBERT_ERR_DEVICE_LOST;
  ck_assert_int_eq(cb_pool_alloc(pool, 2 * MiB, &b, &err), CUBERT_ERR_DEVICE_LOST);
  ck_assert_uint_eq(F.calls, calls + 2);

  cb_pool_free(pool, &c);
  cb_pool_free(pool, &s);
  done(pool);
}
END_TEST

START_TEST(size_above_the_device_fails_without_a_driver_call) {
  cb_pool *pool = new_pool(4 * GiB);
  cubert_berr err = {0};
  cb_block b;
  ck_assert_int_eq(cb_pool_alloc(pool, 5 * GiB, &b, &err), CUBERT_ERR_OUT_OF_MEMORY);
  ck_assert_msg(strstr(err.message, "5368709120 bytes"), "%s", err.message);
  ck_assert_int_eq(cb_pool_alloc(pool, UINT64_MAX, &b, NULL), CUBERT_ERR_OUT_OF_MEMORY);
  ck_assert_int_eq(cb_pool_alloc(pool, 0, &b, &err), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_uint_eq(F.calls, 0);
  done(pool);
}
END_TEST

START_TEST(usage_report_is_exact) {
  cb_pool *pool = new_pool(16 * GiB);
  cubert_pool_usage u[3];
  usage(pool, u);
  ck_assert_str_eq(u[SMALL].name, "sliced-4K");
  ck_assert_str_eq(u[MEDIUM].name, "sliced-1M");
  ck_assert_str_eq(u[EXCL].name, "exclusive");
  ck_assert_uint_eq(u[SMALL].page_size, 2 * MiB);
  ck_assert_uint_eq(u[MEDIUM].page_size, 32 * MiB);
  ck_assert_uint_eq(u[EXCL].page_size, 0);
  for (int p = 0; p < 3; p++)
    ck_assert(u[p].pages == 0 && u[p].reserved == 0 && u[p].in_use == 0 && u[p].high_water == 0);

  cb_block a = take(pool, 100);
  cb_block b = take(pool, 4096);
  cb_block c = take(pool, 5000);
  cb_block d = take(pool, MiB);
  cb_block e = take(pool, 3 * MiB + 1);
  ck_assert(a.pool == SMALL && b.pool == SMALL && c.pool == MEDIUM && d.pool == MEDIUM &&
            e.pool == EXCL);
  usage(pool, u);
  ck_assert_uint_eq(u[SMALL].pages, 1);
  ck_assert_uint_eq(u[SMALL].reserved, 2 * MiB);
  ck_assert_uint_eq(u[SMALL].in_use, 256 + 4096);
  ck_assert_uint_eq(u[MEDIUM].pages, 1);
  ck_assert_uint_eq(u[MEDIUM].reserved, 32 * MiB);
  ck_assert_uint_eq(u[MEDIUM].in_use, 5120 + MiB);
  ck_assert_uint_eq(u[EXCL].pages, 1);
  ck_assert_uint_eq(u[EXCL].reserved, 3 * MiB + 256);
  ck_assert_uint_eq(u[EXCL].in_use, 3 * MiB + 256);

  cb_pool_free(pool, &d);
  cb_pool_free(pool, &a);
  cb_pool_free(pool, &e);
  usage(pool, u);
  ck_assert_uint_eq(u[SMALL].in_use, 4096);
  ck_assert_uint_eq(u[SMALL].high_water, 256 + 4096);
  ck_assert_uint_eq(u[MEDIUM].in_use, 5120);
  ck_assert_uint_eq(u[MEDIUM].high_water, 5120 + MiB);
  ck_assert_uint_eq(u[EXCL].in_use, 0);
  ck_assert_uint_eq(u[EXCL].high_water, 3 * MiB + 256);
  ck_assert_uint_eq(u[EXCL].reserved, 3 * MiB + 256);  /* kept for reuse */

  /* a short array gets what fits; the count is still all pools */
  cubert_pool_usage one[2];
  memset(one, 0x5a, sizeof one);
  ck_assert_uint_eq(cb_pool_usage(pool, one, 1), 3);
  ck_assert_str_eq(one[0].name, "sliced-4K");
  ck_assert_uint_eq(one[1].pages, 0x5a5a5a5a5a5a5a5au);
  ck_assert_uint_eq(cb_pool_usage(pool, NULL, 0), 3);

  cb_pool_free(pool, &b);
  cb_pool_free(pool, &c);
  done(pool);
}
END_TEST

START_TEST(tiny_device_works) {
  F.limit = MiB;
  cb_pool *pool = new_pool(MiB);
  cubert_pool_usage u[3];
  usage(pool, u);
  ck_assert_uint_eq(u[SMALL].page_size, 128 * KiB);  /* an eighth of the device */
  ck_assert_uint_eq(u[MEDIUM].page_size, 128 * KiB);

  cb_block small[64];
  for (int i = 0; i < 64; i++) small[i] = take(pool, 1000);
  cb_block m = take(pool, 16 * KiB);
  cb_block x = take(pool, 256 * KiB);  /* above a quarter page: exclusive */
  ck_assert_uint_eq(small[0].pool, SMALL);
  ck_assert_uint_eq(m.pool, MEDIUM);
  ck_assert_uint_eq(x.pool, EXCL);
  ck_assert_uint_eq(F.allocs, 3);
  ck_assert_uint_le(F.used, MiB);

  /* the whole device, once the idle pages went back */
  for (int i = 0; i < 64; i++) cb_pool_free(pool, &small[i]);
  cb_pool_free(pool, &m);
  cb_pool_free(pool, &x);
  cb_block all = take(pool, MiB);
  ck_assert_uint_eq(F.used, MiB);
  ck_assert_uint_eq(F.live, 1);

  cubert_berr err = {0};
  cb_block b;
  ck_assert_int_eq(cb_pool_alloc(pool, 256, &b, &err), CUBERT_ERR_OUT_OF_MEMORY);
  ck_assert_msg(strstr(err.message, "allocating 256 bytes"), "%s", err.message);
  cb_pool_free(pool, &all);
  cb_block s = take(pool, 256);  /* the full page went back on the retry */
  ck_assert_uint_eq(F.live, 1);
  ck_assert_uint_eq(F.used, 128 * KiB);
  cb_pool_free(pool, &s);
  done(pool);
}
END_TEST

START_TEST(very_small_device_uses_exclusive_pages_only) {
  F.limit = 256 * KiB;
  cb_pool *pool = new_pool(256 * KiB);
  cubert_pool_usage u[3];
  usage(pool, u);
  ck_assert_uint_eq(u[SMALL].page_size, 0);
  ck_assert_uint_eq(u[MEDIUM].page_size, 0);
  cb_block a = take(pool, 100);
  cb_block b = take(pool, 100 * KiB);
  ck_assert(a.pool == EXCL && b.pool == EXCL);
  done(pool);
}
END_TEST

START_TEST(unaligned_driver_addresses_still_give_aligned_blocks) {
  F.misalign = 64;
  cb_pool *pool = new_pool(16 * GiB);
  cb_block a = take(pool, 256);
  cb_block b = take(pool, 256);
  ck_assert_uint_eq(b.address - a.address, 256);
  cb_block c = take(pool, MiB);
  ck_assert_uint_eq(F.calls, 2);
  cb_block d = take(pool, 8 * MiB);  /* asked again with room to align */
  ck_assert_uint_eq(F.calls, 4);
  ck_assert_uint_eq(F.frees, 1);
  ck_assert_uint_ge(d.size, 8 * MiB);
  cubert_pool_usage u[3];
  usage(pool, u);
  ck_assert_uint_eq(u[EXCL].reserved, 8 * MiB + 256);
  ck_assert_uint_eq(u[0].reserved + u[1].reserved + u[2].reserved, F.used);
  cb_pool_free(pool, &a);
  cb_pool_free(pool, &b);
  cb_pool_free(pool, &c);
  cb_pool_free(pool, &d);
  done(pool);
}
END_TEST

START_TEST(bad_frees_are_ignored) {
  cb_pool *pool = new_pool(16 * GiB);
  cb_block a = take(pool, 256);
  cb_block b = take(pool, 1024);
  cb_block x = take(pool, 2 * MiB);
  cb_pool_free(pool, &a);
  cb_pool_free(pool, &a);  /* twice */
  cb_block wrong = b;
  wrong.size = 512;        /* not the block's size */
  cb_pool_free(pool, &wrong);
  wrong = b;
  wrong.address += 256;    /* not the block's start */
  cb_pool_free(pool, &wrong);
  wrong.size -= 256;       /* nor with the block's end */
  cb_pool_free(pool, &wrong);
  cb_pool_free(pool, NULL);
  cubert_pool_usage u[3];
  usage(pool, u);
  ck_assert_uint_eq(u[SMALL].in_use, 1024);
  cb_block c = take(pool, 1024);  /* a's hole is too small: after b, not over it */
  ck_assert(c.address + c.size <= b.address || b.address + b.size <= c.address);

  wrong = x;
  wrong.size = MiB;        /* an exclusive block is its whole page */
  cb_pool_free(pool, &wrong);
  usage(pool, u);
  ck_assert_uint_eq(u[EXCL].in_use, 2 * MiB);
  cb_pool_free(pool, &x);
  cb_pool_free(pool, &x);
  cb_block y = take(pool, 2 * MiB);  /* the page, once */
  cb_block z = take(pool, 2 * MiB);
  ck_assert_uint_ne(y.address, z.address);
  usage(pool, u);
  ck_assert_uint_eq(u[EXCL].in_use, 4 * MiB);
  done(pool);
}
END_TEST

START_TEST(destroy_frees_every_page) {
  cb_pool *pool = new_pool(16 * GiB);
  for (int i = 0; i < 300; i++) (void)take(pool, 1 + (uint64_t)i * 10007 % (3 * MiB));
  ck_assert_uint_gt(F.live, 3);
  done(pool);
  ck_assert_uint_eq(F.frees, F.allocs);
  cb_pool_destroy(NULL);
}
END_TEST

static Suite *pool_suite(void) {
  Suite *s = suite_create("pool");
  TCase *t = tcase_create("pool");
  tcase_add_checked_fixture(t, setup, NULL);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, small_allocations_take_few_driver_calls);
  tcase_add_loop_test(t, random_stress_keeps_blocks_disjoint_and_accounted, 0, 2);
  tcase_add_test(t, freed_neighbours_coalesce_in_any_order);
  tcase_add_test(t, first_fit_takes_the_lowest_hole_that_fits);
  tcase_add_test(t, a_page_too_fragmented_once_is_tried_again_after_a_free);
  tcase_add_test(t, exclusive_pages_are_reused_when_they_fit);
  tcase_add_test(t, idle_pages_go_back_after_two_checks);
  tcase_add_test(t, cleanup_returns_every_idle_page_now);
  tcase_add_test(t, out_of_memory_cleans_up_retries_then_names_the_size);
  tcase_add_test(t, size_above_the_device_fails_without_a_driver_call);
  tcase_add_test(t, usage_report_is_exact);
  tcase_add_test(t, tiny_device_works);
  tcase_add_test(t, very_small_device_uses_exclusive_pages_only);
  tcase_add_test(t, unaligned_driver_addresses_still_give_aligned_blocks);
  tcase_add_test(t, bad_frees_are_ignored);
  tcase_add_test(t, destroy_frees_every_page);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(pool_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
