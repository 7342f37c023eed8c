/* backends/host/work_queue.c: a FIFO of work items run in order by one
 * worker thread. See work_queue.h. */
#include "backends/host/work_queue.h"

#include <errno.h>
#include <stddef.h>

static void *worker_main(void *arg) {
  cb_work_queue *q = arg;
  if (q->on_start)
    q->on_start(q->on_start_ctx, q->on_start_index);
  pthread_mutex_lock(&q->lock);
  for (;;) {
    while (!q->head && !q->stopping)
      pthread_cond_wait(&q->wake, &q->lock);
    cb_work *w = q->head;
    if (!w)
      break; /* stopping, and everything pushed has run */
    q->head = w->next;
    if (!q->head)
      q->tail = NULL;
    pthread_mutex_unlock(&q->lock);

    w->run(w);
    /* Read everything needed from the item before it may vanish: a pusher
     * owned item can go away as soon as `completed` says it ran. */
    uint64_t tag = w->tag;
    if (w->release)
      w->release(w);
    if (tag)
      atomic_store_explicit(&q->last_tag, tag, memory_order_release);

    pthread_mutex_lock(&q->lock);
    q->completed++;
    pthread_cond_broadcast(&q->done);
  }
  pthread_mutex_unlock(&q->lock);
  return NULL;
}

int cb_work_queue_start(cb_work_queue *q) { return cb_work_queue_start_with(q, NULL, NULL, 0); }

int cb_work_queue_start_with(cb_work_queue *q, void (*on_start)(void *ctx, int index), void *ctx,
                             int index) {
  /* Set before pthread_create, which orders these writes before the
   * worker's first read. */
  q->on_start = on_start;
  q->on_start_ctx = ctx;
  q->on_start_index = index;
  q->head = q->tail = NULL;
  q->submitted = q->completed = 0;
  atomic_init(&q->last_tag, 0);
  q->stopping = false;
  q->started = false;
  int rc = pthread_mutex_init(&q->lock, NULL);
  if (rc)
    return rc;
  if ((rc = pthread_cond_init(&q->wake, NULL)))
    goto fail_wake;
  if ((rc = pthread_cond_init(&q->done, NULL)))
    goto fail_done;
  if ((rc = pthread_create(&q->thread, NULL, worker_main, q)))
    goto fail_thread;
  q->started = true;
  return 0;

fail_thread:
  pthread_cond_destroy(&q->done);
fail_done:
  pthread_cond_destroy(&q->wake);
fail_wake:
  pthread_mutex_destroy(&q->lock);
  return rc;
}

/* Appends under the lock the caller holds, and releases it. */
static uint64_t push_locked(cb_work_queue *q, cb_work *w) {
  if (q->tail)
    q->tail->next = w;
  else
    q->head = w;
  q->tail = w;
  uint64_t position = ++q->submitted;
  pthread_cond_signal(&q->wake);
  pthread_mutex_unlock(&q->lock);
  return position;
}

uint64_t cb_work_queue_push(cb_work_queue *q, cb_work *w) {
  w->next = NULL;
  pthread_mutex_lock(&q->lock);
  if (q->stopping) {
    pthread_mutex_unlock(&q->lock);
    return 0;
  }
  return push_locked(q, w);
}

uint64_t cb_work_queue_push_if_idle(cb_work_queue *q, cb_work *w, bool *busy) {
  w->next = NULL;
  pthread_mutex_lock(&q->lock);
  *busy = !q->stopping && q->completed < q->submitted;
  if (q->stopping || *busy) {
    pthread_mutex_unlock(&q->lock);
    return 0;
  }
  return push_locked(q, w);
}

void cb_work_queue_wait(cb_work_queue *q, uint64_t position) {
  pthread_mutex_lock(&q->lock);
  while (q->completed < position && q->completed < q->submitted)
    pthread_cond_wait(&q->done, &q->lock);
  pthread_mutex_unlock(&q->lock);
}

uint64_t cb_work_queue_end(cb_work_queue *q) {
  pthread_mutex_lock(&q->lock);
  uint64_t end = q->submitted;
  pthread_mutex_unlock(&q->lock);
  return end;
}

uint64_t cb_work_queue_completed(cb_work_queue *q) {
  pthread_mutex_lock(&q->lock);
  uint64_t completed = q->completed;
  pthread_mutex_unlock(&q->lock);
  return completed;
}

uint64_t cb_work_queue_last_tag(const cb_work_queue *q) {
  return atomic_load_explicit(&q->last_tag, memory_order_acquire);
}

void cb_work_queue_stop(cb_work_queue *q) {
  pthread_mutex_lock(&q->lock);
  bool join = q->started && !q->stopping;
  q->stopping = true;
  pthread_cond_signal(&q->wake);
  pthread_mutex_unlock(&q->lock);
  if (join)
    pthread_join(q->thread, NULL);
}

void cb_work_queue_destroy(cb_work_queue *q) {
  pthread_cond_destroy(&q->done);
  pthread_cond_destroy(&q->wake);
  pthread_mutex_destroy(&q->lock);
}
