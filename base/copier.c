/* base/copier.c: the copy pool of base/copier.h.
 *
 * A copy is one generation. The pool's state word holds the generation and
 * whether it is open: the caller writes the copy's fields, opens the
 * generation, takes pieces itself, closes it and waits until no thread is
 * registered. A thread registers (busy + 1) before it looks at the state,
 * and uses the fields only if it then finds an open generation it has not
 * worked on; the caller writes new fields only after it closed the last
 * generation and saw no thread registered. With sequentially consistent
 * atomics either the thread's registration comes before the caller's look
 * at `busy` (the caller waits for it) or the caller's close comes before the
 * thread's look at the state (the thread leaves without touching the
 * fields). So no lock is taken on the way in or out of a copy: the pool
 * used to register and leave under one mutex, twice per thread per copy,
 * and with a dozen threads its 2 MiB copies moved 19-20 GB/s on the H200
 * machine where its 8 MiB ones moved 37-63 (docs/bench.md "Where a
 * pipelined write's time goes"). The mutex stays for sleeping only. */
#include "base/copier.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/copy.h"

#define COPY_SPLIT_MIN ((size_t)256 << 10) /* below this the caller copies alone */
#define COPY_PIECE_MIN ((size_t)64 << 10)  /* pieces no finer than this */

struct cb_copier {
  pthread_t *threads;
  int n; /* threads running */
  pthread_mutex_t lock;   /* for sleeping only */
  pthread_cond_t go;      /* a generation opened, or stop */
  pthread_cond_t done;    /* busy dropped to 0 */
  _Atomic uint64_t state; /* generation << 1 | open */
  atomic_int busy;        /* threads registered (they may be reading the fields) */
  atomic_bool stop;
  atomic_int joined; /* threads that worked on the current generation */
  uint64_t spin_ns;
  cb_copier_place place;
  void *place_ctx;
  int place_index;
  /* the open generation's copy: written only while closed and busy == 0 */
  char *dst;
  const char *src;
  size_t size, piece, pieces;
  bool stream;
  atomic_size_t next; /* the next piece to take */
};

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static void copy_bytes(void *dst, const void *src, size_t n, bool stream) {
  if (stream)
    cb_copy_stream(dst, src, n);
  else
    memcpy(dst, src, n);
}

/* Takes pieces of the open generation until none is left. */
static void copy_pieces(cb_copier *c) {
  for (;;) {
    size_t i = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed);
    if (i >= c->pieces) return;
    size_t from = i * c->piece;
    copy_bytes(c->dst + from, c->src + from, c->size - from < c->piece ? c->size - from : c->piece, c->stream);
  }
}

/* A generation this thread has not worked on is open, or the pool stops. */
static bool ready(cb_copier *c, uint64_t seen) {
  uint64_t s = atomic_load(&c->state);
  return atomic_load(&c->stop) || ((s & 1) && (s >> 1) != seen);
}

/* Leaves the registration; the last one out wakes a caller waiting. */
static void unregister(cb_copier *c) {
  if (atomic_fetch_sub(&c->busy, 1) == 1) {
    pthread_mutex_lock(&c->lock);
    pthread_cond_broadcast(&c->done);
    pthread_mutex_unlock(&c->lock);
  }
}

static void *worker(void *p) {
  cb_copier *c = p;
  if (c->place) c->place(c->place_ctx, c->place_index);
  uint64_t seen = 0; /* generation 0 is never opened */
  for (;;) {
    /* spin a while (the next copy of a transfer comes soon), then sleep */
    uint64_t end = c->spin_ns ? now_ns() + c->spin_ns : 0;
    for (unsigned i = 1; end && !ready(c, seen); i++) {
      cpu_relax();
      if (i % 64 == 0 && now_ns() >= end) break;
    }
    if (!ready(c, seen)) {
      pthread_mutex_lock(&c->lock);
      while (!ready(c, seen)) pthread_cond_wait(&c->go, &c->lock);
      pthread_mutex_unlock(&c->lock);
    }
    if (atomic_load(&c->stop)) return NULL;
    atomic_fetch_add(&c->busy, 1);
    uint64_t s = atomic_load(&c->state);
    if ((s & 1) && (s >> 1) != seen) {
      seen = s >> 1;
      atomic_fetch_add_explicit(&c->joined, 1, memory_order_relaxed);
      copy_pieces(c);
    }
    unregister(c);
  }
}

cb_copier *cb_copier_new(int threads, uint64_t spin_ns, cb_copier_place place, void *place_ctx, int place_index) {
  cb_copier *c = cb_calloc(1, sizeof *c);
  if (!c) return NULL;
  atomic_init(&c->state, 0);
  atomic_init(&c->busy, 0);
  atomic_init(&c->stop, false);
  atomic_init(&c->joined, 0);
  atomic_init(&c->next, 0);
  c->spin_ns = spin_ns;
  c->place = place;
  c->place_ctx = place_ctx;
  c->place_index = place_index;
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->go, NULL);
  pthread_cond_init(&c->done, NULL);
  c->threads = threads > 0 ? cb_calloc((size_t)threads, sizeof *c->threads) : NULL;
  for (int i = 0; c->threads && i < threads; i++) {
    if (pthread_create(&c->threads[i], NULL, worker, c) != 0) break;
    c->n++;
  }
  return c;
}

void cb_copier_free(cb_copier *c) {
  if (!c) return;
  pthread_mutex_lock(&c->lock);
  atomic_store(&c->stop, true);
  pthread_cond_broadcast(&c->go);
  pthread_mutex_unlock(&c->lock);
  for (int i = 0; i < c->n; i++) pthread_join(c->threads[i], NULL);
  cb_free(c->threads);
  pthread_cond_destroy(&c->go);
  pthread_cond_destroy(&c->done);
  pthread_mutex_destroy(&c->lock);
  cb_free(c);
}

int cb_copier_threads(const cb_copier *c) { return c ? c->n : 0; }

int cb_copier_joined(const cb_copier *c) { return c ? atomic_load_explicit(&c->joined, memory_order_relaxed) : 0; }

void cb_copier_copy(cb_copier *c, void *dst, const void *src, size_t size, bool stream) {
  if (!c || c->n == 0 || size < COPY_SPLIT_MIN) {
    if (c) atomic_store_explicit(&c->joined, 0, memory_order_relaxed);
    copy_bytes(dst, src, size, stream);
    return;
  }
  /* about four pieces a thread, whole pages (no two threads share a line) */
  size_t piece = size / ((size_t)(c->n + 1) * 4);
  if (piece < COPY_PIECE_MIN) piece = COPY_PIECE_MIN;
  piece = (piece + 4095) & ~(size_t)4095;
  /* closed, and no thread registered since the last copy's wait: the
   * fields are the caller's */
  c->dst = dst;
  c->src = src;
  c->size = size;
  c->piece = piece;
  c->pieces = (size + piece - 1) / piece;
  c->stream = stream;
  atomic_store_explicit(&c->next, 0, memory_order_relaxed);
  atomic_store_explicit(&c->joined, 0, memory_order_relaxed);
  uint64_t gen = (atomic_load(&c->state) >> 1) + 1;
  atomic_store(&c->state, gen << 1 | 1); /* open: publishes the fields */
  pthread_mutex_lock(&c->lock);          /* for threads asleep */
  pthread_cond_broadcast(&c->go);
  pthread_mutex_unlock(&c->lock);
  copy_pieces(c);
  /* every piece is taken; close, so no thread starts on this generation,
   * and wait for those registered (their pieces are done when they leave) */
  atomic_store(&c->state, gen << 1);
  uint64_t end = c->spin_ns ? now_ns() + c->spin_ns : 0;
  for (unsigned i = 1; end && atomic_load(&c->busy) != 0; i++) {
    cpu_relax();
    if (i % 64 == 0 && now_ns() >= end) break;
  }
  if (atomic_load(&c->busy) == 0) return;
  pthread_mutex_lock(&c->lock);
  while (atomic_load(&c->busy) != 0) pthread_cond_wait(&c->done, &c->lock);
  pthread_mutex_unlock(&c->lock);
}
