/* mpi/stage.c: the per-client pools of pinned staging buffers (mpi/stage.h). */
#include "mpi/stage.h"

#include <pthread.h>
#include <stdlib.h>

#include "mpi/alloc.h"
#include "mpi/profile.h"

/* Kept per client: up to STAGE_KEEP buffers, STAGE_KEEP_BYTES in all, so a
 * window of as many sends in flight as osu_bw posts (64) reuses its
 * buffers instead of pinning and releasing one per send. */
#define STAGE_KEEP 64
#define STAGE_KEEP_BYTES (256ull << 20)

typedef struct pool {
  cubert_client *client;
  stage_buf kept[STAGE_KEEP];
  struct pool *next;
} pool;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pool *pools;
static void (*drain_fn)(cubert_client *);

void stage_init(void (*drain)(cubert_client *)) {
  pthread_mutex_lock(&lock);
  drain_fn = drain;
  pthread_mutex_unlock(&lock);
}

static void release_all(pool *p) {
  for (int i = 0; i < STAGE_KEEP; i++) cubert_host_buffer_release(p->kept[i].hb);
  mb_free(p);
}

/* Unlinks the client's pool; NULL when it has none. Caller holds lock. */
static pool *unlink_pool(cubert_client *c) {
  for (pool **pp = &pools; *pp; pp = &(*pp)->next)
    if ((*pp)->client == c) {
      pool *p = *pp;
      *pp = p->next;
      return p;
    }
  return NULL;
}

/* The client is being destroyed: its sends finish, its buffers go. */
static void on_destroy(cubert_client *c, void *arg) {
  (void)arg;
  pthread_mutex_lock(&lock);
  void (*drain)(cubert_client *) = drain_fn;
  pthread_mutex_unlock(&lock);
  if (drain) drain(c); /* gives their buffers back to the pool first */
  pthread_mutex_lock(&lock);
  pool *p = unlink_pool(c);
  pthread_mutex_unlock(&lock);
  if (p) release_all(p);
}

/* The client's pool, made (with its hook) at first use; NULL, with the
 * thread's last error, when it cannot be. Caller holds lock; it is dropped
 * and taken again while a pool is made. */
static pool *pool_of(cubert_client *c) {
  pool *p = pools;
  while (p && p->client != c) p = p->next;
  if (p) return p;
  pthread_mutex_unlock(&lock);
  pool *np = mb_calloc(1, sizeof *np);
  if (!np) cubert_error_record(CUBERT_ERR_OUT_OF_MEMORY, "out of memory for a staging pool");
  bool hooked = np && cubert_client_on_destroy(c, on_destroy, NULL) == CUBERT_OK;
  pthread_mutex_lock(&lock);
  if (!hooked) {
    mb_free(np);
    return NULL;
  }
  np->client = c;
  for (p = pools; p && p->client != c;) p = p->next;
  if (p) { /* another thread made it meanwhile */
    cubert_client_hook_remove(c, on_destroy, NULL);
    mb_free(np);
    return p;
  }
  np->next = pools;
  pools = np;
  return np;
}

bool stage_watch(cubert_client *c) {
  pthread_mutex_lock(&lock);
  bool ok = pool_of(c) != NULL;
  pthread_mutex_unlock(&lock);
  return ok;
}

bool stage_take(cubert_client *c, size_t size, stage_buf *out) {
  *out = (stage_buf){c, NULL, NULL, 0};
  if (!size) size = 1;
  pthread_mutex_lock(&lock);
  pool *p = pool_of(c);
  if (p) {
    int best = -1;
    for (int i = 0; i < STAGE_KEEP; i++)
      if (p->kept[i].hb && p->kept[i].cap >= size && (best < 0 || p->kept[i].cap < p->kept[best].cap)) best = i;
    if (best >= 0) {
      *out = p->kept[best];
      p->kept[best] = (stage_buf){0};
    }
  }
  pthread_mutex_unlock(&lock);
  if (!p) return false;
  if (out->hb) return true;
  cubert_host_buffer *hb = NULL;
  if (cubert_host_buffer_alloc(c, size, &hb) != CUBERT_OK) return false;
  prof_event_add(PROF_EV_PIN_ALLOC);
  *out = (stage_buf){c, hb, cubert_host_buffer_data(hb), size};
  return true;
}

void stage_give(stage_buf *b) {
  if (!b->hb) return;
  cubert_host_buffer *drop = b->hb;
  pthread_mutex_lock(&lock);
  pool *p = pools;
  while (p && p->client != b->client) p = p->next;
  if (p) {
    int slot = -1;
    uint64_t kept = 0;
    for (int i = 0; i < STAGE_KEEP; i++) kept += p->kept[i].hb ? p->kept[i].cap : 0;
    for (int i = 0; i < STAGE_KEEP && slot < 0; i++)
      if (!p->kept[i].hb && kept + b->cap <= STAGE_KEEP_BYTES) slot = i;
    for (int i = 0; i < STAGE_KEEP && slot < 0; i++)
      if (p->kept[i].hb && p->kept[i].cap < b->cap && kept - p->kept[i].cap + b->cap <= STAGE_KEEP_BYTES) slot = i;
    if (slot >= 0) {
      drop = p->kept[slot].hb;
      p->kept[slot] = *b;
    }
  }
  pthread_mutex_unlock(&lock);
  if (drop) prof_event_add(PROF_EV_PIN_FREE);
  cubert_host_buffer_release(drop);
  *b = (stage_buf){0};
}

void stage_drop_all(void) {
  pthread_mutex_lock(&lock);
  pool *all = pools;
  pools = NULL;
  pthread_mutex_unlock(&lock);
  while (all) {
    pool *next = all->next;
    cubert_client_hook_remove(all->client, on_destroy, NULL);
    release_all(all);
    all = next;
  }
}
