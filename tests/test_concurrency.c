/* tests/test_concurrency.c: many threads at once: launches, fills, copies
 * and reads on several streams and devices, handles cloned, sliced, bound
 * and released from many threads, allocation from many threads, peer copies
 * in opposite directions, pooled sizes allocated and freed from many threads
 * with many live at once (no two live blocks overlap, nothing is lost), a
 * writer thread handing memory to a reader
 * thread, and one client pinned and unpinned while other threads use it.
 * Every result is checked; a deadlock shows as the test's timeout. CI runs
 * this suite under TSan and ASan+UBSan.
 *
 * Worker threads never call ck_assert (Check's failure path is not meant for
 * other threads): each records its first failure in its own slot and stops,
 * and the test thread asserts after joining. */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/cubert.h"
#include "runtime/internal.h" /* the pool hammer checks block addresses */
#include "runtime/pool.h"
#include "tests/testutil.h"

#define THREADS 8

/* One worker's outcome. */
typedef struct worker {
  pthread_t thread;
  int index;
  cb_test_env *env;
  void *shared;       /* what the test hands every worker */
  char failure[512];  /* first failure; "" when it passed */
  uint64_t done;      /* iterations completed */
} worker;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static bool record_failure(worker *w, const char *fmt, ...) {
  if (w->failure[0]) return false;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->failure, sizeof w->failure, fmt, ap);
  va_end(ap);
  return false;
}

/* Records a failed call with the thread's last error; returns false. */
#define CALL(w, call)                                                                         \
  do {                                                                                        \
    cubert_status st_ = (call);                                                               \
    if (st_ != CUBERT_OK)                                                                     \
      return record_failure((w), "thread %d, iteration %" PRIu64 ": %s returned %s: %s", (w)->index,   \
                  (w)->done, #call, cubert_status_name(st_), cubert_last_error_message());   \
  } while (0)

static void run_workers(cb_test_env *env, worker *ws, int n, void *shared, void *(*fn)(void *)) {
  for (int t = 0; t < n; t++) {
    memset(&ws[t], 0, sizeof ws[t]);
    ws[t].index = t;
    ws[t].env = env;
    ws[t].shared = shared;
    ck_assert_int_eq(pthread_create(&ws[t].thread, NULL, fn, &ws[t]), 0);
  }
  for (int t = 0; t < n; t++) ck_assert_int_eq(pthread_join(ws[t].thread, NULL), 0);
  for (int t = 0; t < n; t++) ck_assert_msg(ws[t].failure[0] == '\0', "%s", ws[t].failure);
}

/* ------------------------------------------------------------ launches */

#define LAUNCHES 200
#define WORDS 1024

static bool check_words(worker *w, cubert_client *c, const cubert_handle *h, uint32_t value,
                        const char *what) {
  uint32_t got[WORDS];
  CALL(w, cubert_handle_read(c, h, got, sizeof got));
  for (int i = 0; i < WORDS; i++)
    if (got[i] != value)
      return record_failure(w, "thread %d, iteration %" PRIu64 ": %s word %d is 0x%08x, expected 0x%08x", w->index,
                  w->done, what, i, got[i], value);
  return true;
}

static bool launch_loop(worker *w) {
  cb_test_env *env = w->env;
  int d = w->index % env->nclients;
  /* even threads share the test's client (each gets its thread's stream);
   * odd threads have a client of their own, pinned to a new stream */
  cubert_client *own = NULL, *c = env->clients[d];
  if (w->index % 2) {
    CALL(w, cubert_client_create(env->runtime, d, &own));
    cubert_stream s;
    CALL(w, cubert_stream_create(own, &s));
    CALL(w, cubert_client_use_stream(own, s));
    c = own;
  }
  cubert_kernel *fill = NULL, *copy = NULL;
  CALL(w, cubert_builtin_kernel(CUBERT_BUILTIN_FILL_U32, &fill));
  CALL(w, cubert_builtin_kernel(CUBERT_BUILTIN_COPY_U32, &copy));
  cubert_handle *a = NULL, *b = NULL;
  CALL(w, cubert_handle_empty(c, WORDS * 4, &a));
  CALL(w, cubert_handle_empty(c, WORDS * 4, &b));
  uint64_t n = WORDS;
  cubert_launch_config cfg = {{4, 1, 1}, {64, 1, 1}, 0};
  bool ok = true;
  for (uint64_t i = 0; i < LAUNCHES && ok; i++, w->done++) {
    uint32_t value = (uint32_t)w->index << 24 | (uint32_t)i;
    if (i % 4 == 3) {
      ok = cubert_handle_fill(c, a, &value, 4) == CUBERT_OK ||
           record_failure(w, "thread %d: fill: %s", w->index, cubert_last_error_message());
    } else {
      cubert_arg fargs[3] = {cubert_arg_buffer(a), cubert_arg_scalar(&n, 8), cubert_arg_scalar(&value, 4)};
      ok = cubert_launch(c, fill, &cfg, fargs, 3) == CUBERT_OK ||
           record_failure(w, "thread %d: fill launch: %s", w->index, cubert_last_error_message());
    }
    if (!ok) break;
    if (i % 2) {
      cubert_arg cargs[3] = {cubert_arg_buffer(a), cubert_arg_buffer(b), cubert_arg_scalar(&n, 8)};
      ok = cubert_launch(c, copy, &cfg, cargs, 3) == CUBERT_OK ||
           record_failure(w, "thread %d: copy launch: %s", w->index, cubert_last_error_message());
    } else {
      ok = cubert_handle_copy(c, a, b) == CUBERT_OK ||
           record_failure(w, "thread %d: copy: %s", w->index, cubert_last_error_message());
    }
    if (ok && i % 10 == 0) ok = check_words(w, c, b, value, "b");
  }
  if (ok) ok = check_words(w, c, a, (uint32_t)w->index << 24 | (LAUNCHES - 1), "a at the end");
  if (ok && cubert_sync(c) != CUBERT_OK) ok = record_failure(w, "thread %d: sync: %s", w->index, cubert_last_error_message());
  cubert_handle_release(a);
  cubert_handle_release(b);
  cubert_kernel_release(fill);
  cubert_kernel_release(copy);
  cubert_client_destroy(own);
  return ok;
}

static void *launch_thread(void *arg) {
  launch_loop(arg);
  return NULL;
}

START_TEST(test_threads_launch_on_many_streams_and_devices) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  worker ws[THREADS];
  run_workers(&env, ws, THREADS, NULL, launch_thread);
  for (int t = 0; t < THREADS; t++) ck_assert_uint_eq(ws[t].done, LAUNCHES);
  for (int d = 0; d < env.nclients; d++) cb_test_ok(cubert_sync_device(env.clients[d]));
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ handles */

#define HANDLE_ROUNDS 2000

static bool handle_loop(worker *w) {
  const cubert_handle *h = w->shared;
  uint64_t id = cubert_handle_memory_id(h), size = cubert_handle_size(h);
  for (uint64_t i = 0; i < HANDLE_ROUNDS; i++, w->done++) {
    cubert_handle *cl = cubert_handle_clone(h);
    if (!cl) return record_failure(w, "thread %d: clone returned NULL", w->index);
    if (cubert_handle_can_mut(cl)) return record_failure(w, "thread %d: a clone can mut", w->index);
    uint64_t off = (i * 7 + (uint64_t)w->index) % (size / 2);
    cubert_handle *s = NULL;
    CALL(w, cubert_handle_slice(cl, off, off, &s));
    if (cubert_handle_memory_id(s) != id || cubert_handle_offset_start(s) != off ||
        cubert_handle_size_in_use(s) != size - 2 * off)
      return record_failure(w, "thread %d: slice (%" PRIu64 ", %" PRIu64 ") is wrong", w->index, off, off);
    cubert_binding *b = NULL;
    CALL(w, cubert_handle_bind(s, &b));
    cubert_claim_key k = cubert_binding_claim_key(b);
    if (k.memory != id || k.start != off || k.end != size - off)
      return record_failure(w, "thread %d: claim key (%" PRIu64 ", %" PRIu64 ", %" PRIu64 ")", w->index, k.memory,
                  k.start, k.end);
    cubert_weak *weak = NULL;
    CALL(w, cubert_binding_downgrade(b, &weak));
    cubert_binding *up = NULL;
    CALL(w, cubert_weak_upgrade(weak, &up));
    if (cubert_binding_claim_key(up).start != off) return record_failure(w, "thread %d: upgraded key differs", w->index);
    /* release in an order that differs by thread */
    if (w->index % 2) {
      cubert_handle_release(cl);
      cubert_binding_release(b);
      cubert_handle_release(s);
      cubert_binding_release(up);
    } else {
      cubert_binding_release(up);
      cubert_handle_release(s);
      cubert_binding_release(b);
      cubert_handle_release(cl);
    }
    cubert_weak_release(weak);
  }
  return true;
}

static void *handle_thread(void *arg) {
  handle_loop(arg);
  return NULL;
}

START_TEST(test_handles_are_cloned_and_released_from_many_threads) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  uint8_t data[4096];
  cb_test_pattern(data, sizeof data, 1);
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_create(c, data, sizeof data, &h));
  cb_test_ok(cubert_sync_device(c));
  cubert_pool_usage before[8];
  size_t count = 0;
  cb_test_ok(cubert_memory_usage(c, before, 8, &count));
  worker ws[THREADS];
  run_workers(&env, ws, THREADS, h, handle_thread);
  for (int t = 0; t < THREADS; t++) ck_assert_uint_eq(ws[t].done, HANDLE_ROUNDS);
  /* every reference the threads took is gone */
  ck_assert(cubert_handle_can_mut(h));
  cubert_pool_usage after[8];
  cb_test_ok(cubert_memory_usage(c, after, 8, &count));
  for (size_t p = 0; p < count && p < 8; p++) ck_assert_uint_eq(after[p].in_use, before[p].in_use);
  uint8_t got[4096];
  cb_test_ok(cubert_handle_read(c, h, got, sizeof got));
  ck_assert_mem_eq(got, data, sizeof data);
  cubert_weak *weak = NULL;
  cb_test_ok(cubert_handle_downgrade(h, &weak));
  cubert_handle_release(h);
  cubert_binding *b = NULL;
  cb_test_status(cubert_weak_upgrade(weak, &b), CUBERT_ERR_EXPIRED);
  cubert_weak_release(weak);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ allocation */

#define ALLOC_ROUNDS 300

static bool alloc_loop(worker *w) {
  cb_test_env *env = w->env;
  cubert_client *c = env->clients[w->index % env->nclients];
  uint8_t *buf = malloc(64 * 1024), *got = malloc(64 * 1024);
  bool ok = buf && got;
  if (!ok) record_failure(w, "thread %d: no host memory", w->index);
  for (uint64_t i = 0; i < ALLOC_ROUNDS && ok; i++, w->done++) {
    uint64_t seed = (uint64_t)w->index * 100000 + i;
    uint64_t size = 1 + (cb_test_pattern_byte(seed, 0) | (uint64_t)cb_test_pattern_byte(seed, 1) << 8);
    cb_test_pattern(buf, size, seed);
    cubert_handle *h = NULL;
    if (cubert_handle_create(c, buf, size, &h) != CUBERT_OK) {
      ok = record_failure(w, "thread %d: create %" PRIu64 " bytes: %s", w->index, size, cubert_last_error_message());
      break;
    }
    if (cubert_handle_read(c, h, got, size) != CUBERT_OK) {
      ok = record_failure(w, "thread %d: read: %s", w->index, cubert_last_error_message());
    } else if (cb_test_pattern_mismatch(got, size, seed) != size) {
      ok = record_failure(w, "thread %d: %" PRIu64 "-byte handle differs at byte %zu", w->index, size,
                cb_test_pattern_mismatch(got, size, seed));
    } else if (size > 2) {
      cubert_handle *s = NULL;
      if (cubert_handle_slice(h, 1, 1, &s) != CUBERT_OK || cubert_handle_read(c, s, got, size - 2) != CUBERT_OK)
        ok = record_failure(w, "thread %d: slice read: %s", w->index, cubert_last_error_message());
      else if (memcmp(got, buf + 1, size - 2) != 0)
        ok = record_failure(w, "thread %d: slice of a %" PRIu64 "-byte handle differs", w->index, size);
      cubert_handle_release(s);
    }
    cubert_handle_release(h);
  }
  free(buf);
  free(got);
  return ok;
}

static void *alloc_thread(void *arg) {
  alloc_loop(arg);
  return NULL;
}

START_TEST(test_threads_allocate_and_free_concurrently) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  worker ws[THREADS];
  run_workers(&env, ws, THREADS, NULL, alloc_thread);
  for (int t = 0; t < THREADS; t++) ck_assert_uint_eq(ws[t].done, ALLOC_ROUNDS);
  /* everything went back to the pools */
  for (int d = 0; d < env.nclients; d++) {
    cubert_client *c = env.clients[d];
    cb_test_ok(cubert_sync_device(c));
    cubert_pool_usage p[8];
    size_t count = 0;
    cb_test_ok(cubert_memory_usage(c, p, 8, &count));
    for (size_t i = 0; i < count && i < 8; i++)
      ck_assert_msg(p[i].in_use == 0, "device %d pool %s: %" PRIu64 " bytes still in use", d, p[i].name,
                    p[i].in_use);
  }
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ pool hammer */

/* Every thread keeps up to HAMMER_LIVE allocations of pooled sizes (256 B to
 * 1 MiB, a few sizes over and over, so freed blocks are handed out again at
 * once) on one device, frees one at random and allocates another; each live
 * block's device range is registered, and no two live ones may overlap. Each
 * allocation is filled with its own value and read back (first and last
 * word) before it is freed. */
#define HAMMER_ROUNDS 600
#define HAMMER_LIVE 24

typedef struct hammer_reg {
  pthread_mutex_t lock;
  struct { uint64_t address, size; int thread; } live[THREADS * HAMMER_LIVE];
  int n;
  char overlap[256];
} hammer_reg;

static void hammer_add(hammer_reg *r, const cubert_handle *h, int thread) {
  uint64_t a = h->alloc->block.address, n = h->alloc->block.size;
  pthread_mutex_lock(&r->lock);
  for (int i = 0; i < r->n; i++)
    if (a < r->live[i].address + r->live[i].size && r->live[i].address < a + n && !r->overlap[0])
      snprintf(r->overlap, sizeof r->overlap,
               "thread %d got 0x%" PRIx64 " (+%" PRIu64 ") overlapping thread %d's 0x%" PRIx64 " (+%" PRIu64 ")",
               thread, a, n, r->live[i].thread, r->live[i].address, r->live[i].size);
  if (r->n == THREADS * HAMMER_LIVE) { /* cannot happen unless a removal was missed */
    if (!r->overlap[0]) snprintf(r->overlap, sizeof r->overlap, "more live blocks than the threads hold");
    pthread_mutex_unlock(&r->lock);
    return;
  }
  r->live[r->n].address = a;
  r->live[r->n].size = n;
  r->live[r->n].thread = thread;
  r->n++;
  pthread_mutex_unlock(&r->lock);
}

static void hammer_remove(hammer_reg *r, const cubert_handle *h) {
  uint64_t a = h->alloc->block.address;
  pthread_mutex_lock(&r->lock);
  for (int i = 0; i < r->n; i++)
    if (r->live[i].address == a) {
      r->live[i] = r->live[--r->n];
      break;
    }
  pthread_mutex_unlock(&r->lock);
}

static bool hammer_check(worker *w, cubert_client *c, const cubert_handle *h, uint32_t value) {
  uint32_t first = 0, last = 0;
  uint64_t size = cubert_handle_size(h);
  cubert_handle *head = NULL, *tail = NULL;
  CALL(w, cubert_handle_slice(h, 0, size - 4, &head));
  cubert_status st = cubert_handle_read(c, head, &first, 4);
  cubert_handle_release(head);
  CALL(w, st);
  CALL(w, cubert_handle_slice(h, size - 4, 0, &tail));
  st = cubert_handle_read(c, tail, &last, 4);
  cubert_handle_release(tail);
  CALL(w, st);
  if (first != value || last != value)
    return record_failure(w, "thread %d: a %" PRIu64 "-byte block holds 0x%08x..0x%08x, its fill was 0x%08x",
                          w->index, size, first, last, value);
  return true;
}

static bool hammer_loop(worker *w) {
  static const uint64_t sizes[] = {256, 256, 512, 4096, 4096, 4100, 65536, 65536, 300000, 1u << 20};
  hammer_reg *r = w->shared;
  cubert_client *c = w->env->clients[0];
  cubert_handle *live[HAMMER_LIVE] = {0};
  uint32_t value[HAMMER_LIVE] = {0};
  uint64_t rng = 0x9E3779B97F4A7C15u * (uint64_t)(w->index + 1);
  bool ok = true;
  for (uint64_t i = 0; i < HAMMER_ROUNDS && ok; i++, w->done++) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    int slot = (int)(rng % HAMMER_LIVE);
    if (live[slot]) {
      ok = hammer_check(w, c, live[slot], value[slot]);
      hammer_remove(r, live[slot]);
      cubert_handle_release(live[slot]);
      live[slot] = NULL;
      if (!ok) break;
    }
    uint64_t size = sizes[(rng >> 20) % (sizeof sizes / sizeof sizes[0])];
    CALL(w, cubert_handle_empty(c, size, &live[slot]));
    hammer_add(r, live[slot], w->index);
    value[slot] = (uint32_t)w->index << 24 | (uint32_t)i;
    CALL(w, cubert_handle_fill(c, live[slot], &value[slot], 4));
  }
  for (int k = 0; k < HAMMER_LIVE; k++) {
    if (!live[k]) continue;
    if (ok) ok = hammer_check(w, c, live[k], value[k]);
    hammer_remove(r, live[k]);
    cubert_handle_release(live[k]);
  }
  return ok;
}

static void *hammer_thread(void *arg) {
  hammer_loop(arg);
  return NULL;
}

START_TEST(test_pooled_sizes_hammered_from_many_threads_never_overlap_or_leak) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  static hammer_reg reg;
  memset(&reg, 0, sizeof reg);
  pthread_mutex_init(&reg.lock, NULL);
  worker ws[THREADS];
  run_workers(&env, ws, THREADS, &reg, hammer_thread);
  ck_assert_msg(reg.overlap[0] == '\0', "%s", reg.overlap);
  ck_assert_int_eq(reg.n, 0);
  for (int t = 0; t < THREADS; t++) ck_assert_uint_eq(ws[t].done, HAMMER_ROUNDS);
  cubert_client *c = env.clients[0];
  cb_test_ok(cubert_sync_device(c));
  cubert_pool_usage p[8];
  size_t count = 0;
  cb_test_ok(cubert_memory_usage(c, p, 8, &count)); /* collects what was freed */
  for (size_t i = 0; i < count && i < 8; i++)
    ck_assert_msg(p[i].in_use == 0, "pool %s: %" PRIu64 " bytes still in use", p[i].name, p[i].in_use);
  char why[256] = "";
  cb_device *dev = env.runtime->devices[0];
  pthread_mutex_lock(&dev->lock);
  bool consistent = cb_pool_verify(dev->pool, why, sizeof why);
  pthread_mutex_unlock(&dev->lock);
  ck_assert_msg(consistent, "the pool's bookkeeping: %s", why);
  pthread_mutex_destroy(&reg.lock);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ peer copies */

#define PEER_ROUNDS 150
#define PEER_BYTES (16 * 1024)

static bool peer_loop(worker *w) {
  cb_test_env *env = w->env;
  /* threads 0, 2: device 0 -> 1; threads 1, 3: device 1 -> 0 */
  int from = w->index % 2, to = 1 - from;
  cubert_client *sc = env->clients[from], *dc = env->clients[to];
  uint8_t *buf = malloc(PEER_BYTES), *got = malloc(PEER_BYTES);
  cubert_handle *src = NULL, *dst = NULL;
  bool ok = buf && got;
  if (!ok) record_failure(w, "thread %d: no host memory", w->index);
  if (ok && (cubert_handle_empty(sc, PEER_BYTES, &src) != CUBERT_OK ||
             cubert_handle_empty(dc, PEER_BYTES, &dst) != CUBERT_OK))
    ok = record_failure(w, "thread %d: empty: %s", w->index, cubert_last_error_message());
  for (uint64_t i = 0; i < PEER_ROUNDS && ok; i++, w->done++) {
    uint64_t seed = (uint64_t)w->index << 32 | i;
    cb_test_pattern(buf, PEER_BYTES, seed);
    if (cubert_handle_write(sc, src, buf, PEER_BYTES) != CUBERT_OK ||
        cubert_handle_copy_peer(sc, src, dc, dst) != CUBERT_OK ||
        cubert_handle_read(dc, dst, got, PEER_BYTES) != CUBERT_OK) {
      ok = record_failure(w, "thread %d (device %d -> %d), round %" PRIu64 ": %s", w->index, from, to, i,
                cubert_last_error_message());
    } else if (cb_test_pattern_mismatch(got, PEER_BYTES, seed) != PEER_BYTES) {
      ok = record_failure(w, "thread %d (device %d -> %d), round %" PRIu64 ": byte %zu differs", w->index, from, to, i,
                cb_test_pattern_mismatch(got, PEER_BYTES, seed));
    }
  }
  cubert_handle_release(src);
  cubert_handle_release(dst);
  free(buf);
  free(got);
  return ok;
}

static void *peer_thread(void *arg) {
  peer_loop(arg);
  return NULL;
}

START_TEST(test_peer_copies_in_opposite_directions_do_not_deadlock) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  worker ws[4];
  run_workers(&env, ws, 4, NULL, peer_thread);
  for (int t = 0; t < 4; t++) ck_assert_uint_eq(ws[t].done, PEER_ROUNDS);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ hand-off */

#define HANDOFF_ROUNDS 60
#define HANDOFF_WORDS (256 * 1024)

/* A writer thread fills a buffer on its stream, then hands it to a reader
 * thread, whose read on another stream must see the writer's last value. */
typedef struct handoff {
  cubert_handle *h;
  pthread_barrier_t written, read;
} handoff;

static void *handoff_writer(void *arg) {
  worker *w = arg;
  handoff *ho = w->shared;
  cubert_client *c = w->env->clients[0];
  cubert_kernel *fill = NULL;
  if (cubert_builtin_kernel(CUBERT_BUILTIN_FILL_U32, &fill) != CUBERT_OK)
    record_failure(w, "writer: %s", cubert_last_error_message());
  uint64_t n = HANDOFF_WORDS;
  cubert_launch_config cfg = {{16, 1, 1}, {256, 1, 1}, 0};
  for (uint32_t i = 0; i < HANDOFF_ROUNDS; i++, w->done++) {
    uint32_t value = 0xA0000000u + i;
    cubert_arg args[3] = {cubert_arg_buffer(ho->h), cubert_arg_scalar(&n, 8), cubert_arg_scalar(&value, 4)};
    if (fill && cubert_launch(c, fill, &cfg, args, 3) != CUBERT_OK)
      record_failure(w, "writer round %u: %s", i, cubert_last_error_message());
    pthread_barrier_wait(&ho->written); /* enqueued, not waited for */
    pthread_barrier_wait(&ho->read);
  }
  cubert_kernel_release(fill);
  return NULL;
}

static void *handoff_reader(void *arg) {
  worker *w = arg;
  handoff *ho = w->shared;
  cubert_client *c = w->env->clients[0];
  uint32_t *got = malloc(HANDOFF_WORDS * 4);
  if (!got) record_failure(w, "reader: no host memory");
  for (uint32_t i = 0; i < HANDOFF_ROUNDS; i++, w->done++) {
    pthread_barrier_wait(&ho->written);
    if (got && cubert_handle_read(c, ho->h, got, HANDOFF_WORDS * 4) != CUBERT_OK)
      record_failure(w, "reader round %u: %s", i, cubert_last_error_message());
    else if (got)
      for (uint32_t k = 0; k < HANDOFF_WORDS; k++)
        if (got[k] != 0xA0000000u + i) {
          record_failure(w, "reader round %u: word %u is 0x%08x", i, k, got[k]);
          break;
        }
    pthread_barrier_wait(&ho->read);
  }
  free(got);
  return NULL;
}

static void *handoff_thread(void *arg) {
  worker *w = arg;
  return w->index == 0 ? handoff_writer(arg) : handoff_reader(arg);
}

START_TEST(test_reader_thread_sees_the_writer_threads_work) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  handoff ho;
  cb_test_ok(cubert_handle_empty(env.clients[0], HANDOFF_WORDS * 4, &ho.h));
  ck_assert_int_eq(pthread_barrier_init(&ho.written, NULL, 2), 0);
  ck_assert_int_eq(pthread_barrier_init(&ho.read, NULL, 2), 0);
  worker ws[2];
  run_workers(&env, ws, 2, &ho, handoff_thread);
  ck_assert_uint_eq(ws[0].done, HANDOFF_ROUNDS);
  ck_assert_uint_eq(ws[1].done, HANDOFF_ROUNDS);
  pthread_barrier_destroy(&ho.written);
  pthread_barrier_destroy(&ho.read);
  cubert_handle_release(ho.h);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ pinning */

#define PIN_ROUNDS 500

/* One client shared by every thread; thread 0 pins and unpins it while the
 * others allocate through it. Each handle lands on the pinned stream or on
 * the allocating thread's own stream, never on anything else. */
typedef struct pin_share {
  cubert_client *c;
  cubert_stream pinned;
} pin_share;

static void *pin_thread(void *arg) {
  worker *w = arg;
  pin_share *ps = w->shared;
  if (w->index == 0) {
    for (uint64_t i = 0; i < PIN_ROUNDS; i++, w->done++)
      if (cubert_client_use_stream(ps->c, i % 2 ? ps->pinned : 0) != CUBERT_OK) {
        record_failure(w, "pinning round %" PRIu64 ": %s", i, cubert_last_error_message());
        break;
      }
    return NULL;
  }
  /* this thread's own stream: ask a client nobody pins */
  cubert_client *mine = NULL;
  if (cubert_client_create(w->env->runtime, 0, &mine) != CUBERT_OK) {
    record_failure(w, "thread %d: client: %s", w->index, cubert_last_error_message());
    return NULL;
  }
  cubert_stream own = cubert_client_stream(mine);
  cubert_client_destroy(mine);
  for (uint64_t i = 0; i < PIN_ROUNDS; i++, w->done++) {
    cubert_handle *h = NULL;
    if (cubert_handle_empty(ps->c, 256, &h) != CUBERT_OK) {
      record_failure(w, "thread %d: empty: %s", w->index, cubert_last_error_message());
      break;
    }
    cubert_stream s = cubert_handle_stream(h);
    cubert_stream now = cubert_client_stream(ps->c);
    cubert_handle_release(h);
    if (s != own && s != ps->pinned) {
      record_failure(w, "thread %d: a handle on stream %" PRIu64 " (own %" PRIu64 ", pinned %" PRIu64 ")",
                     w->index, s, own, ps->pinned);
      break;
    }
    if (now != own && now != ps->pinned) {
      record_failure(w, "thread %d: the client says stream %" PRIu64, w->index, now);
      break;
    }
  }
  return NULL;
}

START_TEST(test_pinning_a_shared_client_while_others_use_it) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  pin_share ps = {env.clients[0], 0};
  cb_test_ok(cubert_stream_create(ps.c, &ps.pinned));
  worker ws[4];
  run_workers(&env, ws, 4, &ps, pin_thread);
  for (int t = 0; t < 4; t++) ck_assert_uint_eq(ws[t].done, PIN_ROUNDS);
  cb_test_ok(cubert_client_use_stream(ps.c, 0));
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ thread caches
 *
 * The pool's fast path (runtime/tcache.c): the last release of a clean
 * pooled allocation parks handle, record and block in the releasing
 * thread's cache; that thread's next allocation of the same block size takes
 * them back without the device lock. */

#define CACHED_SIZE 4096

/* Writes `value` over all of `h` (CACHED_SIZE bytes) and reads it back. */
static bool fill_check(worker *w, cubert_client *c, cubert_handle *h, uint32_t value) {
  uint32_t words[CACHED_SIZE / 4], got[CACHED_SIZE / 4];
  for (int i = 0; i < CACHED_SIZE / 4; i++) words[i] = value + (uint32_t)i;
  CALL(w, cubert_handle_write(c, h, words, sizeof words));
  CALL(w, cubert_handle_read(c, h, got, sizeof got));
  if (memcmp(words, got, sizeof got) != 0) return record_failure(w, "value 0x%08x read back wrong", value);
  return true;
}

typedef struct handoff_cache {
  cubert_handle *from_main; /* allocated on the test thread, released by the worker */
  uint64_t main_id;
} handoff_cache;

static bool cross_release_loop(worker *w) {
  cubert_client *c = w->env->clients[0];
  handoff_cache *hc = w->shared;
  cubert_handle *mine = NULL, *again[2] = {NULL, NULL};
  CALL(w, cubert_handle_empty(c, CACHED_SIZE, &mine)); /* this thread's cache now exists */
  uint64_t mine_id = cubert_handle_memory_id(mine);
  cubert_handle_release(mine);
  cubert_handle_release(hc->from_main); /* the other thread's allocation parks here */
  for (int i = 0; i < 2; i++) {
    CALL(w, cubert_handle_empty(c, CACHED_SIZE, &again[i]));
    uint64_t id = cubert_handle_memory_id(again[i]);
    if (id == mine_id || id == hc->main_id) return record_failure(w, "a reused allocation kept memory id %" PRIu64, id);
    if (cubert_handle_size(again[i]) != CACHED_SIZE || cubert_handle_offset_start(again[i]) != 0)
      return record_failure(w, "a reused allocation has the wrong view");
    if (!fill_check(w, c, again[i], 0x1000u * (uint32_t)(i + 1))) return false;
  }
  if (again[0]->alloc->block.address == again[1]->alloc->block.address)
    return record_failure(w, "two live allocations share a block");
  if (!fill_check(w, c, again[0], 0x1000u)) return false; /* the second did not overwrite the first */
  cubert_handle_release(again[0]);
  cubert_handle_release(again[1]);
  w->done = 1;
  return true; /* the thread exits with both parked: its exit frees them */
}

static void *cross_release_thread(void *arg) {
  cross_release_loop(arg);
  return NULL;
}

static void expect_nothing_in_use(cubert_client *c) {
  cubert_pool_usage p[8];
  size_t count = 0;
  cb_test_ok(cubert_memory_usage(c, p, 8, &count));
  for (size_t i = 0; i < count && i < 8; i++)
    ck_assert_msg(p[i].in_use == 0, "pool %s: %" PRIu64 " bytes still in use", p[i].name, p[i].in_use);
}

START_TEST(test_an_allocation_released_on_another_thread_is_reused_there) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  handoff_cache hc = {NULL, 0};
  cb_test_ok(cubert_handle_empty(c, CACHED_SIZE, &hc.from_main));
  hc.main_id = cubert_handle_memory_id(hc.from_main);
  worker w;
  run_workers(&env, &w, 1, &hc, cross_release_thread);
  ck_assert_uint_eq(w.done, 1);
  expect_nothing_in_use(c);
  cubert_handle *h = NULL; /* and the test thread's own path still works */
  cb_test_ok(cubert_handle_empty(c, CACHED_SIZE, &h));
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_a_weak_binding_does_not_upgrade_to_the_next_tenant_of_a_cached_record) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *h = NULL, *h2 = NULL;
  cubert_weak *w = NULL, *w2 = NULL;
  cubert_binding *b = NULL;
  cb_test_ok(cubert_handle_empty(c, 256, &h)); /* the slow path: this thread's cache is made */
  cubert_handle_release(h);
  cb_test_ok(cubert_handle_empty(c, 256, &h));
  uint64_t id = cubert_handle_memory_id(h);
  cb_alloc *record = h->alloc;
  cubert_handle *old = h;
  cb_test_ok(cubert_handle_downgrade(h, &w));
  cubert_handle_release(h);
  cb_test_ok(cubert_handle_empty(c, 256, &h2));
  /* the fast path served it: the same handle object and record, a new tenant */
  ck_assert_ptr_eq(h2, old);
  ck_assert_ptr_eq(h2->alloc, record);
  ck_assert_uint_ne(cubert_handle_memory_id(h2), id);
  cb_test_status(cubert_weak_upgrade(w, &b), CUBERT_ERR_EXPIRED);
  ck_assert_ptr_null(b);
  ck_assert_msg(strstr(cubert_last_error_message(), "was freed") != NULL, "message: %s",
                cubert_last_error_message());
  cb_test_ok(cubert_handle_downgrade(h2, &w2)); /* the new tenant's own weak binding upgrades */
  cb_test_ok(cubert_weak_upgrade(w2, &b));
  cubert_binding_release(b);
  cubert_handle_release(h2);
  cb_test_status(cubert_weak_upgrade(w2, &b), CUBERT_ERR_EXPIRED); /* parked again: no tenant */
  cubert_weak_release(w);
  cubert_weak_release(w2);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_a_tainted_allocation_is_not_cached_and_taints_nothing_new) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  const cubert_failure *f = NULL;
  cb_test_ok(cubert_failure_create(c, CUBERT_ERR_INVALID_ARGUMENT, "lost in transport", &f));
  for (int round = 0; round < 3; round++) {
    cubert_handle *h = NULL, *h2 = NULL;
    cb_test_ok(cubert_handle_empty(c, 512, &h));
    cb_test_ok(cubert_handle_taint(c, h, f));
    cb_test_status(cubert_handle_check(c, h), CUBERT_ERR_TAINTED);
    cubert_handle_release(h);
    cb_test_ok(cubert_handle_empty(c, 512, &h2));
    cb_test_ok(cubert_handle_check(c, h2)); /* whichever block it got, it is clean */
    cubert_handle_release(h2);
  }
  cubert_failure_release(f);
  cb_test_close(&env);
}
END_TEST

#define OOM_MEMORY (8u << 20)
#define OOM_SIZE (256u << 10) /* the biggest sliced size of an 8 MiB device */
#define OOM_PARKED 8

static bool oom_loop(worker *w) {
  cubert_client *c = w->env->clients[0];
  cubert_handle *h[OOM_PARKED + 1] = {NULL};
  for (int i = 0; i < OOM_PARKED; i++) /* only the blocks parked on the test thread are left */
    CALL(w, cubert_handle_empty(c, OOM_SIZE, &h[i]));
  cubert_status st = cubert_handle_empty(c, OOM_SIZE, &h[OOM_PARKED]);
  if (st != CUBERT_ERR_OUT_OF_MEMORY)
    return record_failure(w, "one more allocation than the device holds returned %s", cubert_status_name(st));
  if (!strstr(cubert_last_error_message(), "262144 bytes"))
    return record_failure(w, "the message does not name the size: %s", cubert_last_error_message());
  for (int i = 0; i < OOM_PARKED; i++) cubert_handle_release(h[i]);
  w->done = 1;
  return true;
}

static void *oom_thread(void *arg) {
  oom_loop(arg);
  return NULL;
}

START_TEST(test_out_of_memory_takes_back_blocks_parked_on_another_thread) {
  if (strcmp(cb_test_backend_name(_i), "host") != 0) {
    cb_test_skip("the host backend's small simulated device fills; a GPU does not");
    return;
  }
  cubert_runtime_options o;
  cb_test_options("host", &o);
  o.host_devices = 1;
  o.host_memory = OOM_MEMORY;
  cb_test_env env;
  if (!cb_test_open_with(_i, &o, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *h[64];
  int n = 0;
  cubert_status st = CUBERT_OK;
  while (n < 64 && (st = cubert_handle_empty(c, OOM_SIZE, &h[n])) == CUBERT_OK) n++;
  ck_assert_int_eq(st, CUBERT_ERR_OUT_OF_MEMORY);
  ck_assert_int_ge(n, OOM_PARKED);
  for (int i = 0; i < OOM_PARKED; i++) cubert_handle_release(h[n - 1 - i]); /* parked here */
  worker w;
  run_workers(&env, &w, 1, NULL, oom_thread);
  ck_assert_uint_eq(w.done, 1);
  for (int i = 0; i < n - OOM_PARKED; i++) cubert_handle_release(h[i]);
  expect_nothing_in_use(c);
  cb_test_close(&env);
}
END_TEST

typedef struct destroy_gate {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int parked;     /* the worker parked its allocations */
  int destroyed;  /* the test thread destroyed the runtime */
} destroy_gate;

static void *park_then_wait_thread(void *arg) {
  worker *w = arg;
  destroy_gate *g = w->shared;
  cubert_client *c = w->env->clients[0];
  cubert_handle *h[3] = {NULL};
  static const uint64_t sizes[3] = {256, CACHED_SIZE, 1u << 20};
  bool ok = true;
  for (int i = 0; i < 3 && ok; i++) ok = cubert_handle_empty(c, sizes[i], &h[i]) == CUBERT_OK;
  if (!ok) record_failure(w, "allocating: %s", cubert_last_error_message());
  for (int i = 0; i < 3; i++) cubert_handle_release(h[i]);
  pthread_mutex_lock(&g->lock);
  g->parked = 1;
  pthread_cond_broadcast(&g->cond);
  while (!g->destroyed) pthread_cond_wait(&g->cond, &g->lock); /* alive, cache full, while it goes */
  pthread_mutex_unlock(&g->lock);
  w->done = 1;
  return NULL; /* its exit drops its (emptied) cache and the last device reference */
}

START_TEST(test_runtime_destroyed_while_threads_hold_cached_blocks) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  destroy_gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
  worker w;
  memset(&w, 0, sizeof w);
  w.env = &env;
  w.shared = &g;
  ck_assert_int_eq(pthread_create(&w.thread, NULL, park_then_wait_thread, &w), 0);
  cubert_handle *kept = NULL, *h = NULL;
  cb_test_ok(cubert_handle_empty(c, 256, &kept)); /* held across the destroy */
  cb_test_ok(cubert_handle_empty(c, 256, &h));
  cubert_handle_release(h); /* parked on this thread */
  pthread_mutex_lock(&g.lock);
  while (!g.parked) pthread_cond_wait(&g.cond, &g.lock);
  pthread_mutex_unlock(&g.lock);
  cb_test_close(&env); /* every cache emptied: ASan finds nothing leaked or freed twice */
  pthread_mutex_lock(&g.lock);
  g.destroyed = 1;
  pthread_cond_broadcast(&g.cond);
  pthread_mutex_unlock(&g.lock);
  ck_assert_int_eq(pthread_join(w.thread, NULL), 0);
  ck_assert_msg(w.failure[0] == '\0', "%s", w.failure);
  ck_assert_uint_eq(cubert_handle_size(kept), 256); /* an orphan: still answers, then goes */
  cubert_handle_release(kept);
  /* a new runtime on the same thread starts with a cache of its own */
  if (!cb_test_open(_i, 1, &env)) return;
  for (int i = 0; i < 3; i++) {
    cb_test_ok(cubert_handle_empty(env.clients[0], 256, &h));
    cubert_handle_release(h);
  }
  expect_nothing_in_use(env.clients[0]);
  cb_test_close(&env);
}
END_TEST

/* ------------------------------------------------------------ main */

static void add_loop(Suite *s, const char *name, const TTest *test) {
  TCase *tc = tcase_create(name);
  tcase_add_loop_test(tc, test, 0, CB_TEST_BACKEND_COUNT);
  suite_add_tcase(s, tc);
}

#define LOOP(s, fn) add_loop((s), #fn, fn)

int main(void) {
  Suite *s = suite_create("concurrency");
  LOOP(s, test_threads_launch_on_many_streams_and_devices);
  LOOP(s, test_handles_are_cloned_and_released_from_many_threads);
  LOOP(s, test_threads_allocate_and_free_concurrently);
  LOOP(s, test_pooled_sizes_hammered_from_many_threads_never_overlap_or_leak);
  LOOP(s, test_peer_copies_in_opposite_directions_do_not_deadlock);
  LOOP(s, test_reader_thread_sees_the_writer_threads_work);
  LOOP(s, test_pinning_a_shared_client_while_others_use_it);
  LOOP(s, test_an_allocation_released_on_another_thread_is_reused_there);
  LOOP(s, test_a_weak_binding_does_not_upgrade_to_the_next_tenant_of_a_cached_record);
  LOOP(s, test_a_tainted_allocation_is_not_cached_and_taints_nothing_new);
  LOOP(s, test_out_of_memory_takes_back_blocks_parked_on_another_thread);
  LOOP(s, test_runtime_destroyed_while_threads_hold_cached_blocks);
  return cb_test_run(s);
}
