/* runtime/pool.c: the memory manager of one device (see pool.h).
 *
 * Three pools, picked by a size ladder (sizes rounded up to 256 bytes):
 *   sliced-4K   <= 4 KiB out of 2 MiB pages: 2 MiB is the GPU's large-page
 *               and allocation granule, so a page holds at least 512 of the
 *               biggest blocks and a few pages serve all the small buffers
 *               (scalars, counters, reductions) of a program.
 *   sliced-1M   <= 1 MiB out of 32 MiB pages: at least 32 of the biggest
 *               blocks a page, so one driver call (~90 us) serves many
 *               allocations, and a half-used page wastes at most 16 MiB.
 *   exclusive   larger sizes: one block a page. A page whose block was freed
 *               is kept and reused by a later size it fits with at most 1/8
 *               of it wasted; above 1 MiB the driver call is small next to
 *               what filling the buffer costs, and the memory returns exactly.
 * Page sizes are capped at an eighth of the device's memory (a power of two,
 * at least 64 KiB, else that sliced pool is off), and a sliced pool takes
 * only sizes up to a quarter of its page: a small simulated device still
 * works, with the rest going to exclusive pages.
 *
 * A sliced page is cut in units (256 B, or 1 KiB in sliced-1M) and keeps two
 * bitmaps, `used` and `start` (the first unit of each block), and over the
 * words of `used` a segment tree holding, per node, the free run at its
 * start, at its end and the longest inside. First fit descends that tree to
 * the lowest run that fits: O(log units) whatever the fragmentation; the root
 * says in O(1) whether a page can serve a size at all, and per pool `hint` is
 * the first page that is not full. Freeing clears bits and refreshes the tree
 * above them, so free neighbours coalesce by construction; `start` lets a
 * free check the block it is given. Work per call: O(log units + units of the
 * block / 64).
 * Idle exclusive pages sit on a list of their own, so reuse looks at those
 * only.
 *
 * Device addresses are only ever computed with, never dereferenced. */
#include "base/alloc.h"
#include "base/array.h"
#include "runtime/pool.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNIT 256u      /* address alignment, and the exclusive pool's rounding */
#define NONE UINT32_MAX
#define MIN_SLICED_PAGE (64u * 1024u)

enum { POOL_SMALL, POOL_MEDIUM, POOL_EXCLUSIVE, POOL_COUNT };
_Static_assert(POOL_EXCLUSIVE == 2, "cb_pool_sliced (pool.h): the sliced pools are 0 and 1");

/* unit_shift: the sliced pool's unit; sliced-1M only gets sizes above 4 KiB
 * (the two sliced pools are on or off together), so 1 KiB units waste at
 * most a fifth of a block and make its bitmaps four times smaller. */
static const struct {
  const char *name;
  uint64_t max_size;
  uint64_t page_size;
  uint32_t unit_shift;
} ladder[POOL_COUNT] = {
  [POOL_SMALL] = {"sliced-4K", 4096, 2u << 20, 8},
  [POOL_MEDIUM] = {"sliced-1M", 1u << 20, 32u << 20, 10},
  [POOL_EXCLUSIVE] = {"exclusive", UINT64_MAX, 0, 8},
};

typedef struct page {
  cubert_backend_mem mem;
  uint64_t bytes;       /* asked of the driver */
  uint64_t base;        /* mem.address rounded up to UNIT */
  uint64_t usable;      /* bytes from base to the end, a multiple of UNIT */
  uint32_t pool;
  uint32_t index;       /* position in its pool's page array */
  uint32_t blocks;      /* blocks out */
  bool idle_seen;       /* idle at the last check, no allocation since */
  struct page *idle_prev, *idle_next;  /* exclusive pages with no block out */
  /* sliced pages only */
  uint32_t shift;       /* a unit is 1 << shift bytes */
  uint32_t units;
  uint32_t free_units;
  uint32_t words;       /* of `used` */
  uint32_t leaves;      /* the tree's: a power of two >= words */
  uint32_t cap;         /* the most units a block of this pool takes (< 2^16) */
  uint64_t *used;       /* bits past `units` stay set */
  uint64_t *start;
  uint64_t *cached;     /* first unit of each block parked in its pool's quick bins */
  uint64_t *tree;       /* node n: children 2n, 2n + 1; word w of `used`: leaves + w */
  uint64_t bits[];
} page;

/* The quick bins of a sliced pool: blocks freed recently, parked with their
 * units still taken, handed out again to the next allocation of exactly
 * their size without touching the bitmaps or the tree (an alloc+free pair
 * of one size is then two array operations). A bin holds blocks of one unit
 * count (`k`; bin k % QBINS); a block that finds its bin full, or taken by
 * another count, or the pool's parked bytes at their cap, is freed the slow
 * way. Any other allocation of the pool empties its bins first
 * (quick_flush), so first fit and coalescing see every free unit as before;
 * what changes is only that a block freed is the next one handed to its
 * exact size (last freed, first out). Parked blocks still count in their
 * page's `blocks`, so no page with one is idle; every idle check empties the
 * bins first too. */
#define QBINS 32u
#define QDEPTH 8u
typedef struct qbin {
  uint32_t k, n;
  struct { page *pg; uint32_t u; } e[QDEPTH];
} qbin;

typedef struct pool_class {
  uint64_t page_size;   /* 0: varied (exclusive) */
  uint64_t max_size;    /* biggest size it takes; 0: off */
  page **pages;
  uint32_t npages;
  uint32_t cap;
  uint32_t hint;        /* every page below is full */
  uint32_t idle;        /* exclusive: pages with no block out... */
  page *idle_head;      /* ...listed here */
  uint64_t reserved;
  uint64_t in_use;
  uint64_t high_water;
  uint64_t parked;      /* bytes in the quick bins (not in use, not free) */
  uint64_t parked_cap;  /* at most this many: an eighth of a page */
  qbin quick[QBINS];
} pool_class;

struct cb_pool {
  const cubert_backend_ops *ops;
  void *device;
  uint64_t device_memory;
  uint64_t allocs;
  pool_class pools[POOL_COUNT];
};

/* ------------------------------------------------------------ bitmaps */

/* Sets or clears bits [from, from + n), n > 0. */
static void set_bits(uint64_t *w, uint32_t from, uint32_t n, bool on) {
  uint32_t i = from >> 6, last = (from + n - 1) >> 6;
  uint64_t head = ~UINT64_C(0) << (from & 63);
  uint64_t tail = ~UINT64_C(0) >> (63 - ((from + n - 1) & 63));
  if (i == last) head &= tail;
  w[i] = on ? w[i] | head : w[i] & ~head;
  if (i == last) return;
  if (last > i + 1) memset(&w[i + 1], on ? 0xff : 0, (size_t)(last - i - 1) * sizeof *w);
  w[last] = on ? w[last] | tail : w[last] & ~tail;
}

/* Whether bits [from, from + n), n > 0, are all set. */
static bool all_set(const uint64_t *w, uint32_t from, uint32_t n) {
  uint32_t i = from >> 6, last = (from + n - 1) >> 6;
  uint64_t head = ~UINT64_C(0) << (from & 63);
  uint64_t tail = ~UINT64_C(0) >> (63 - ((from + n - 1) & 63));
  if (i == last) return (w[i] & (head & tail)) == (head & tail);
  uint64_t a = (w[i] | ~head) & (w[last] | ~tail), b = a;
  uint32_t j = i + 1;
  for (; j + 1 < last; j += 2) {
    a &= w[j];
    b &= w[j + 1];
  }
  if (j < last) a &= w[j];
  return (a & b) == ~UINT64_C(0);
}

static bool bit_set(const uint64_t *w, uint32_t bit) {
  return (w[bit >> 6] >> (bit & 63)) & 1;
}

/* ------------------------------------------------------------ pages */

/* A tree node: the free units at the start of its stretch (head), at its
 * end (tail) and the longest free run inside, each capped at the page's
 * `cap`. Capping loses nothing first fit needs (it never asks for more than
 * cap, and a run straddling two halves is only taken when the left half's
 * longest, so its tail, is below cap), and it keeps the climb after an
 * update short: a long free stretch reads `cap` before and after. */
#define NODE(head, tail, longest) \
  ((uint64_t)(head) | (uint64_t)(tail) << 16 | (uint64_t)(longest) << 32)
#define HEAD(n) ((uint32_t)(n) & 0xffff)
#define TAIL(n) ((uint32_t)((n) >> 16) & 0xffff)
#define LONGEST(n) ((uint32_t)((n) >> 32) & 0xffff)

static inline uint32_t min32(uint32_t a, uint32_t b) { return a < b ? a : b; }

/* The node of one word of `used`. */
static uint64_t word_node(uint64_t used, uint32_t cap) {
  if (used == 0) return NODE(min32(64, cap), min32(64, cap), min32(64, cap));
  uint32_t head = (uint32_t)__builtin_ctzll(used), tail = (uint32_t)__builtin_clzll(used);
  uint32_t longest = head > tail ? head : tail;
  uint64_t x = ~used >> head;  /* interior runs */
  uint32_t pos = head;
  while (x && longest < cap) {
    uint32_t skip = (uint32_t)__builtin_ctzll(x);
    x >>= skip;
    uint32_t len = (uint32_t)__builtin_ctzll(~x);
    pos += skip + len;
    if (pos == 64) break;  /* the tail run, counted */
    if (len > longest) longest = len;
    x >>= len;
  }
  return NODE(min32(head, cap), min32(tail, cap), min32(longest, cap));
}

/* First unit of the lowest run of `k` (<= 64) free units inside `used`. */
static uint32_t word_fit(uint64_t used, uint32_t k) {
  uint64_t x = ~used;
  uint32_t pos = 0;
  while (x) {
    uint32_t skip = (uint32_t)__builtin_ctzll(x);
    x >>= skip;
    pos += skip;
    uint32_t len = x == ~UINT64_C(0) ? 64 : (uint32_t)__builtin_ctzll(~x);
    if (len >= k) return pos;
    pos += len;
    x >>= len;  /* len < 64 here */
  }
  return 64;  /* not reached when the leaf's longest >= k */
}

/* A node from its children, each `half` units long. */
static inline uint64_t join(uint64_t l, uint64_t r, uint32_t half, uint32_t cap) {
  uint32_t head = HEAD(l) == half ? min32(half + HEAD(r), cap) : HEAD(l);
  uint32_t tail = TAIL(r) == half ? min32(half + TAIL(l), cap) : TAIL(r);
  uint32_t longest = LONGEST(l) > LONGEST(r) ? LONGEST(l) : LONGEST(r);
  if (TAIL(l) + HEAD(r) > longest) longest = TAIL(l) + HEAD(r);
  return NODE(head, tail, min32(longest, cap));
}

/* Refreshes the tree over words [first, last] of `used`, whose words
 * strictly between were all set (`on`) or all cleared: the nodes over those
 * alone get a constant, only the two edges of each level need a join, and
 * the climb stops once a single node comes out unchanged. */
static void tree_update(page *pg, uint32_t first, uint32_t last, bool on) {
  uint64_t *t = pg->tree;
  uint32_t lo = pg->leaves + first, hi = pg->leaves + last, len = 64, cap = pg->cap;
  t[lo] = word_node(pg->used[first], cap);
  if (hi != lo) t[hi] = word_node(pg->used[last], cap);
  uint64_t fill = on ? 0 : NODE(min32(len, cap), min32(len, cap), min32(len, cap));
  for (uint32_t n = lo + 1; n < hi; n++) t[n] = fill;
  while (lo > 1) {
    lo >>= 1;
    hi >>= 1;
    uint32_t half = len;
    len <<= 1;
    fill = on ? 0 : NODE(min32(len, cap), min32(len, cap), min32(len, cap));
    for (uint32_t n = lo + 1; n < hi; n++) t[n] = fill;
    uint64_t j = join(t[2 * lo], t[2 * lo + 1], half, cap);
    if (lo == hi && j == t[lo]) return;  /* nothing above changes */
    t[lo] = j;
    if (hi != lo) t[hi] = join(t[2 * hi], t[2 * hi + 1], half, cap);
  }
}

/* First fit of `k` units; false when no run is long enough. */
static bool page_take(page *pg, uint32_t k, uint32_t *at) {
  if (LONGEST(pg->tree[1]) < k) return false;
  uint32_t n = 1, base = 0, half = pg->leaves * 32;  /* node 1 spans leaves * 64 units */
  uint32_t u = NONE;
  for (; n < pg->leaves; half >>= 1) {
    uint64_t l = pg->tree[2 * n], r = pg->tree[2 * n + 1];
    if (LONGEST(l) >= k) {
      n = 2 * n;
    } else if (TAIL(l) + HEAD(r) >= k) {
      u = base + half - TAIL(l);  /* straddles the middle; TAIL(l) < k, so exact */
      break;
    } else {
      n = 2 * n + 1;
      base += half;
    }
  }
  if (u == NONE) u = base + word_fit(pg->used[n - pg->leaves], k);
  set_bits(pg->used, u, k, true);
  tree_update(pg, u >> 6, (u + k - 1) >> 6, true);
  pg->start[u >> 6] |= UINT64_C(1) << (u & 63);
  pg->free_units -= k;
  *at = u;
  return true;
}

static void page_give(page *pg, uint32_t u, uint32_t k) {
  pg->start[u >> 6] &= ~(UINT64_C(1) << (u & 63));
  set_bits(pg->used, u, k, false);
  tree_update(pg, u >> 6, (u + k - 1) >> 6, false);
  pg->free_units += k;
}

static void idle_link(pool_class *c, page *pg) {
  pg->idle_prev = NULL;
  pg->idle_next = c->idle_head;
  if (c->idle_head) c->idle_head->idle_prev = pg;
  c->idle_head = pg;
  c->idle++;
}

static void idle_unlink(pool_class *c, page *pg) {
  if (pg->idle_prev)
    pg->idle_prev->idle_next = pg->idle_next;
  else
    c->idle_head = pg->idle_next;
  if (pg->idle_next) pg->idle_next->idle_prev = pg->idle_prev;
  c->idle--;
}

static void page_release(cb_pool *p, page *pg) {
  pool_class *c = &p->pools[pg->pool];
  c->reserved -= pg->bytes;
  if (pg->pool == POOL_EXCLUSIVE && pg->blocks == 0) idle_unlink(c, pg);
  p->ops->mem_free(p->device, &pg->mem);
  cb_free(pg);
}

/* Releases the pages of `c` with no block out: all of them (`every`), or
 * those idle at the last check too (marking the others); keeps page order. */
static void release_idle(cb_pool *p, pool_class *c, bool every) {
  uint32_t kept = 0;
  for (uint32_t i = 0; i < c->npages; i++) {
    page *pg = c->pages[i];
    if (pg->blocks == 0 && (every || pg->idle_seen)) {
      page_release(p, pg);
      continue;
    }
    pg->idle_seen = pg->blocks == 0;
    pg->index = kept;
    c->pages[kept++] = pg;
  }
  c->npages = kept;
  c->hint = 0;
}

/* Gives every parked block of `c` back to its page. */
static void quick_flush(pool_class *c) {
  for (uint32_t b = 0; b < QBINS && c->parked; b++) {
    qbin *q = &c->quick[b];
    for (uint32_t i = 0; i < q->n; i++) {
      page *pg = q->e[i].pg;
      uint32_t u = q->e[i].u;
      pg->cached[u >> 6] &= ~(UINT64_C(1) << (u & 63));
      page_give(pg, u, q->k);
      pg->blocks--;
      if (pg->index < c->hint) c->hint = pg->index;
      c->parked -= (uint64_t)q->k << pg->shift;
    }
    q->n = 0;
  }
}

static void release_all_idle(cb_pool *p, bool every) {
  for (int i = 0; i < POOL_COUNT; i++) {
    quick_flush(&p->pools[i]);
    release_idle(p, &p->pools[i], every);
  }
}

/* mem_alloc of `bytes` whose usable part, from the first 256-aligned
 * address, holds `need`; asks once more with 256 bytes spare when the
 * driver's address is not aligned enough. */
static cubert_status driver_alloc(cb_pool *p, uint64_t *bytes, uint64_t need,
                                  cubert_backend_mem *mem, cubert_berr *err) {
  for (int attempt = 0;; attempt++) {
    memset(mem, 0, sizeof *mem);
    cubert_status st = p->ops->mem_alloc(p->device, *bytes, mem, err);
    if (st != CUBERT_OK) return st;
    uint64_t pad = (UNIT - (mem->address & (UNIT - 1))) & (UNIT - 1);
    if (attempt > 0 || ((*bytes - pad) & ~(uint64_t)(UNIT - 1)) >= need) return CUBERT_OK;
    p->ops->mem_free(p->device, mem);
    *bytes += UNIT;
  }
}

static uint64_t total_reserved(const cb_pool *p) {
  uint64_t sum = 0;
  for (int i = 0; i < POOL_COUNT; i++) sum += p->pools[i].reserved;
  return sum;
}

static cubert_status fail(cubert_berr *err, cubert_status status, const char *message) {
  err->sticky = false;
  snprintf(err->message, sizeof err->message, "%s", message);
  return status;
}

static cubert_status oom(const cb_pool *p, cubert_berr *err, uint64_t size, const char *why) {
  uint64_t in_use = 0;
  err->sticky = false;
  for (int i = 0; i < POOL_COUNT; i++) in_use += p->pools[i].in_use;
  int len = snprintf(err->message, sizeof err->message,
                     "out of memory allocating %" PRIu64 " bytes on the device (%" PRIu64
                     " bytes reserved by its pools, %" PRIu64 " in use)%s%s",
                     size, total_reserved(p), in_use, why[0] ? ": " : "", why);
  /* a long backend reason is cut: say so rather than end mid-word */
  if (len >= (int)sizeof err->message) memcpy(err->message + sizeof err->message - 4, "...", 4);
  return CUBERT_ERR_OUT_OF_MEMORY;
}

/* A new page for pool `pi` holding at least `need` bytes. Out of memory:
 * every idle page goes back and the driver is asked once more. */
static cubert_status page_new(cb_pool *p, uint32_t pi, uint64_t need, uint64_t asked, page **out,
                              cubert_berr *err) {
  pool_class *c = &p->pools[pi];
  if (c->npages == c->cap) {
    size_t cap;
    page **pages = cb_array_grow(c->pages, c->cap, (size_t)c->npages + 1, sizeof *pages, &cap);
    if (!pages || cap > UINT32_MAX) {
      if (pages) c->pages = pages; /* grown, but its count would not fit: keep the old one */
      return oom(p, err, asked, "no host memory for the pool's page table");
    }
    c->pages = pages;
    c->cap = (uint32_t)cap;
  }

  uint64_t bytes = c->page_size ? c->page_size : need;
  cubert_backend_mem mem;
  cubert_status st = driver_alloc(p, &bytes, need, &mem, err);
  if (st == CUBERT_ERR_OUT_OF_MEMORY) {
    release_all_idle(p, true);
    bytes = c->page_size ? c->page_size : need;
    st = driver_alloc(p, &bytes, need, &mem, err);
    if (st == CUBERT_ERR_OUT_OF_MEMORY) {
      char why[sizeof err->message];
      snprintf(why, sizeof why, "%s", err->message);
      return oom(p, err, asked, why);
    }
  }
  if (st != CUBERT_OK) return st;

  uint32_t shift = ladder[pi].unit_shift;
  uint64_t base = (mem.address + UNIT - 1) & ~(uint64_t)(UNIT - 1);
  uint64_t usable = (bytes - (base - mem.address)) >> shift << shift;
  uint32_t units = 0, words = 0, leaves = 0;
  if (c->page_size) {
    units = (uint32_t)(usable >> shift);
    words = (units + 63) / 64;
    for (leaves = 1; leaves < words; leaves <<= 1) {
    }
  }
  page *pg = cb_calloc(1, sizeof *pg + 3 * (size_t)words * sizeof(uint64_t) +
                           2 * (size_t)leaves * sizeof(uint64_t));
  if (!pg) {
    p->ops->mem_free(p->device, &mem);
    return oom(p, err, asked, "no host memory to track a page");
  }
  pg->mem = mem;
  pg->bytes = bytes;
  pg->base = base;
  pg->usable = usable;
  pg->pool = pi;
  pg->index = c->npages;
  if (c->page_size) {
    pg->shift = shift;
    pg->units = pg->free_units = units;
    pg->words = words;
    pg->leaves = leaves;
    pg->used = pg->bits;
    pg->start = pg->bits + words;
    pg->cap = (uint32_t)(c->max_size >> shift);
    pg->cached = pg->bits + 2 * words;
    pg->tree = pg->bits + 3 * words;
    if (units & 63) pg->used[words - 1] = ~UINT64_C(0) << (units & 63);
    /* leaves past the last word stay 0: nothing free there */
    for (uint32_t w = 0; w < words; w++) pg->tree[leaves + w] = word_node(pg->used[w], pg->cap);
    for (uint32_t lo = leaves >> 1, half = 64; lo; lo >>= 1, half <<= 1)
      for (uint32_t n = lo; n < 2 * lo; n++)
        pg->tree[n] = join(pg->tree[2 * n], pg->tree[2 * n + 1], half, pg->cap);
  } else {
    idle_link(c, pg);  /* no block out yet */
  }
  c->pages[c->npages++] = pg;
  c->reserved += bytes;
  *out = pg;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ the pool */

cubert_status cb_pool_create(const cubert_backend_ops *ops, void *device, uint64_t device_memory,
                             cb_pool **pool) {
  if (!ops || !pool) return CUBERT_ERR_INVALID_ARGUMENT;
  cb_pool *p = cb_calloc(1, sizeof *p);
  if (!p) return CUBERT_ERR_OUT_OF_MEMORY;
  p->ops = ops;
  p->device = device;
  p->device_memory = device_memory;

  uint64_t cap = UINT64_MAX;
  if (device_memory) {
    cap = UINT64_C(1) << 63;
    while (cap > device_memory / 8 && cap) cap >>= 1;
  }
  for (int i = 0; i < POOL_COUNT; i++) {
    pool_class *c = &p->pools[i];
    if (!ladder[i].page_size) {  /* exclusive */
      c->max_size = UINT64_MAX;
      continue;
    }
    c->page_size = ladder[i].page_size < cap ? ladder[i].page_size : cap;
    if (c->page_size < MIN_SLICED_PAGE) {
      c->page_size = 0;  /* too small a device to slice: all exclusive */
      c->max_size = 0;
      continue;
    }
    c->max_size = ladder[i].max_size < c->page_size / 4 ? ladder[i].max_size : c->page_size / 4;
    c->parked_cap = c->page_size / 8;
  }
  *pool = p;
  return CUBERT_OK;
}

void cb_pool_destroy(cb_pool *pool) {
  if (!pool) return;
  for (int i = 0; i < POOL_COUNT; i++) {
    pool_class *c = &pool->pools[i];
    for (uint32_t j = 0; j < c->npages; j++) page_release(pool, c->pages[j]);
    cb_free(c->pages);
  }
  cb_free(pool);
}

static void hand_out(pool_class *c, page *pg, uint32_t pi, uint64_t address, uint64_t size,
                     cb_block *block) {
  pg->blocks++;
  pg->idle_seen = false;
  c->in_use += size;
  if (c->in_use > c->high_water) c->high_water = c->in_use;
  block->address = address;
  block->size = size;
  block->page = pg;
  block->pool = pi;
}

cubert_status cb_pool_alloc(cb_pool *pool, uint64_t size, cb_block *block, cubert_berr *err) {
  cubert_berr local;
  if (!err) err = &local;
  if (!pool || !block || size == 0)
    return fail(err, CUBERT_ERR_INVALID_ARGUMENT,
                "pool allocation needs a pool, a block and a size above 0");
  if (size > UINT64_MAX - (UNIT - 1) || (pool->device_memory && size > pool->device_memory)) {
    char why[96];
    snprintf(why, sizeof why, "the device has %" PRIu64 " bytes in all", pool->device_memory);
    return oom(pool, err, size, pool->device_memory ? why : "");
  }
  uint64_t rounded = (size + UNIT - 1) & ~(uint64_t)(UNIT - 1);

  if (++pool->allocs % CB_POOL_IDLE_INTERVAL == 0) release_all_idle(pool, false);

  uint32_t pi = POOL_SMALL;
  while (pi < POOL_EXCLUSIVE && rounded > pool->pools[pi].max_size) pi++;
  pool_class *c = &pool->pools[pi];
  page *pg = NULL;

  if (pi != POOL_EXCLUSIVE) {
    uint32_t shift = ladder[pi].unit_shift;
    rounded = (rounded + (UINT64_C(1) << shift) - 1) >> shift << shift;
    uint32_t k = (uint32_t)(rounded >> shift), at;
    qbin *q = &c->quick[k % QBINS];
    if (q->n && q->k == k) { /* a parked block of this size: no bitmap, no tree */
      q->n--;
      pg = q->e[q->n].pg;
      at = q->e[q->n].u;
      pg->cached[at >> 6] &= ~(UINT64_C(1) << (at & 63));
      c->parked -= rounded;
      pg->blocks--; /* hand_out counts it again */
      hand_out(c, pg, pi, pg->base + ((uint64_t)at << shift), rounded, block);
      return CUBERT_OK;
    }
    quick_flush(c); /* first fit and coalescing see every free unit */
    while (c->hint < c->npages && c->pages[c->hint]->free_units == 0) c->hint++;
    for (uint32_t i = c->hint; i < c->npages; i++) {
      if (page_take(c->pages[i], k, &at)) {
        pg = c->pages[i];
        break;
      }
    }
    if (!pg) {
      cubert_status st = page_new(pool, pi, rounded, size, &pg, err);
      if (st != CUBERT_OK) return st;
      if (!page_take(pg, k, &at)) return oom(pool, err, size, "the new page is too small");
    }
    hand_out(c, pg, pi, pg->base + ((uint64_t)at << shift), rounded, block);
    return CUBERT_OK;
  }

  /* exclusive: the smallest idle page that fits with at most 1/8 wasted */
  for (page *cand = c->idle_head; cand; cand = cand->idle_next) {
    if (cand->usable < rounded || cand->usable - rounded > cand->usable / 8) continue;
    if (!pg || cand->usable < pg->usable) pg = cand;
  }
  if (!pg) {
    cubert_status st = page_new(pool, pi, rounded, size, &pg, err);
    if (st != CUBERT_OK) return st;
  }
  idle_unlink(c, pg);
  hand_out(c, pg, pi, pg->base, pg->usable, block);
  return CUBERT_OK;
}

uint64_t cb_pool_sliced_size(const cb_pool *pool, uint64_t size) {
  if (size == 0 || size > ladder[POOL_MEDIUM].max_size) return 0;
  uint64_t rounded = (size + UNIT - 1) & ~(uint64_t)(UNIT - 1);
  for (uint32_t pi = POOL_SMALL; pi < POOL_EXCLUSIVE; pi++) {
    if (rounded > pool->pools[pi].max_size) continue;
    uint64_t unit = UINT64_C(1) << ladder[pi].unit_shift;
    return (rounded + unit - 1) & ~(unit - 1);
  }
  return 0;
}

void cb_pool_free(cb_pool *pool, const cb_block *block) {
  if (!pool || !block || block->pool >= POOL_COUNT || !block->page) return;
  pool_class *c = &pool->pools[block->pool];
  page *pg = block->page;
  /* Cheap checks that the block is one the pool handed out and still out;
   * anything else is ignored rather than corrupting the pool. */
  if (pg->pool != block->pool || pg->index >= c->npages || c->pages[pg->index] != pg ||
      pg->blocks == 0 || block->address < pg->base || block->size == 0 ||
      block->address - pg->base > pg->usable ||
      block->size > pg->usable - (block->address - pg->base))
    return;

  if (block->pool == POOL_EXCLUSIVE) {
    if (block->address != pg->base || block->size != pg->usable) return;
    idle_link(c, pg);
  } else {
    uint64_t off = block->address - pg->base;
    if ((off | block->size) & ((UINT64_C(1) << pg->shift) - 1)) return;
    uint32_t u = (uint32_t)(off >> pg->shift), k = (uint32_t)(block->size >> pg->shift);
    if (!bit_set(pg->start, u) || bit_set(pg->cached, u) || !all_set(pg->used, u, k)) return;
    if (u + k < pg->units && !bit_set(pg->start, u + k) && bit_set(pg->used, u + k)) return;
    qbin *q = &c->quick[k % QBINS];
    if ((q->n == 0 || q->k == k) && q->n < QDEPTH && c->parked + block->size <= c->parked_cap) {
      q->k = k; /* parked: the units stay taken, the block stays counted in its page */
      q->e[q->n].pg = pg;
      q->e[q->n].u = u;
      q->n++;
      pg->cached[u >> 6] |= UINT64_C(1) << (u & 63);
      c->parked += block->size;
      c->in_use -= block->size;
      return;
    }
    page_give(pg, u, k);
    if (pg->index < c->hint) c->hint = pg->index;
  }
  pg->blocks--;
  c->in_use -= block->size;
}

void cb_pool_cleanup(cb_pool *pool) {
  if (pool) release_all_idle(pool, true);
}

/* Recomputes what the pool keeps incrementally and compares. */
bool cb_pool_verify(const cb_pool *pool, char *why, size_t len) {
  uint64_t *tree = NULL;
#define BAD(...)                                \
  do {                                          \
    if (why && len) snprintf(why, len, __VA_ARGS__); \
    cb_free(tree);                                 \
    return false;                               \
  } while (0)
  if (!pool) BAD("no pool");
  for (uint32_t pi = 0; pi < POOL_COUNT; pi++) {
    const pool_class *c = &pool->pools[pi];
    const char *name = ladder[pi].name;
    uint64_t reserved = 0, in_use = 0, parked = 0;
    uint32_t idle = 0, listed = 0, parked_starts = 0, binned = 0;
    for (uint32_t b = 0; b < QBINS; b++) {
      const qbin *q = &c->quick[b];
      if (q->n > QDEPTH || (q->n && q->k % QBINS != b)) BAD("%s: quick bin %u misfiled", name, b);
      for (uint32_t j = 0; j < q->n; j++) {
        const page *pg = q->e[j].pg;
        if (pg->pool != pi || pg->index >= c->npages || c->pages[pg->index] != pg ||
            !bit_set(pg->cached, q->e[j].u))
          BAD("%s: quick bin %u holds a block its page does not mark parked", name, b);
        parked += (uint64_t)q->k << pg->shift;
        binned++;
      }
    }
    for (uint32_t i = 0; i < c->npages; i++) {
      const page *pg = c->pages[i];
      if (pg->index != i || pg->pool != pi) BAD("%s: page %u misfiled", name, i);
      reserved += pg->bytes;
      if (pi == POOL_EXCLUSIVE) {
        if (pg->blocks > 1) BAD("exclusive page %u: %u blocks", i, pg->blocks);
        in_use += pg->blocks ? pg->usable : 0;
        idle += pg->blocks == 0;
        continue;
      }
      uint32_t free_units = 0, starts = 0;
      for (uint32_t u = 0; u < pg->units; u++) free_units += !bit_set(pg->used, u);
      for (uint32_t w = 0; w < pg->words; w++) {
        parked_starts += (uint32_t)__builtin_popcountll(pg->cached[w]);
        if (pg->cached[w] & ~pg->start[w]) BAD("%s page %u: a parked block that is no block", name, i);
      }
      for (uint32_t w = 0; w < pg->words; w++)
        starts += (uint32_t)__builtin_popcountll(pg->start[w]);
      if (free_units != pg->free_units)
        BAD("%s page %u: %u units free, %u counted", name, i, free_units, pg->free_units);
      if (starts != pg->blocks)
        BAD("%s page %u: %u blocks, %u counted", name, i, starts, pg->blocks);
      if (i < c->hint && free_units) BAD("%s: page %u below the hint has room", name, i);
      in_use += (uint64_t)(pg->units - free_units) << pg->shift;
      tree = cb_calloc(2 * (size_t)pg->leaves, sizeof *tree);
      if (!tree) BAD("no host memory to verify");
      for (uint32_t w = 0; w < pg->words; w++)
        tree[pg->leaves + w] = word_node(pg->used[w], pg->cap);
      for (uint32_t lo = pg->leaves >> 1, half = 64; lo; lo >>= 1, half <<= 1)
        for (uint32_t n = lo; n < 2 * lo; n++)
          tree[n] = join(tree[2 * n], tree[2 * n + 1], half, pg->cap);
      for (uint32_t n = 1; n < 2 * pg->leaves; n++)
        if (tree[n] != pg->tree[n]) BAD("%s page %u: tree node %u stale", name, i, n);
      cb_free(tree);
      tree = NULL;
    }
    for (const page *pg = c->idle_head; pg; pg = pg->idle_next) {
      if (pg->blocks || pg->pool != pi) BAD("%s: a busy page on the idle list", name);
      listed++;
    }
    if (idle != c->idle || listed != c->idle)
      BAD("%s: %u idle, %u counted, %u listed", name, idle, c->idle, listed);
    if (reserved != c->reserved)
      BAD("%s: reserved %" PRIu64 ", counted %" PRIu64, name, reserved, c->reserved);
    if (parked != c->parked || parked_starts != binned)
      BAD("%s: %" PRIu64 " bytes parked in %u blocks, counted %" PRIu64 " (%u marked)", name, parked,
          binned, c->parked, parked_starts);
    if (in_use != c->in_use + c->parked)
      BAD("%s: in use %" PRIu64 ", counted %" PRIu64 " and %" PRIu64 " parked", name, in_use,
          c->in_use, c->parked);
    if (c->high_water < c->in_use) BAD("%s: high water below in use", name);
  }
  return true;
#undef BAD
}

size_t cb_pool_usage(const cb_pool *pool, cubert_pool_usage *out, size_t capacity) {
  if (!pool) return 0;
  for (size_t i = 0; i < POOL_COUNT && i < capacity && out; i++) {
    const pool_class *c = &pool->pools[i];
    memset(&out[i], 0, sizeof out[i]);
    snprintf(out[i].name, sizeof out[i].name, "%s", ladder[i].name);
    out[i].page_size = c->page_size;
    out[i].pages = c->npages;
    out[i].reserved = c->reserved;
    out[i].in_use = c->in_use;
    out[i].high_water = c->high_water;
  }
  return POOL_COUNT;
}
