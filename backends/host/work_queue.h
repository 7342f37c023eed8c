/* backends/host/work_queue.h: a FIFO of work items and the one worker thread
 * that runs them in order (internal to the host backend; knows nothing of
 * devices, so any in-order executor can use it).
 *
 * Positions: the n-th item pushed has position n (1, 2, 3...). An item is
 * "completed" once its run() returned; completions happen in push order, so
 * one counter says how far the queue got, and waiting for a position waits for
 * every item before it too.
 *
 * Thread start: a queue started with cb_work_queue_start_with() calls
 * on_start(ctx, index) first thing on its worker thread, before any item
 * runs (the host backend binds the thread near its device that way).
 *
 * Threading: push, push_if_idle, wait, end, completed and last_tag may be called from any
 * thread, concurrently. start/stop/destroy are called once each, by the owner.
 * Ownership: the queue owns nothing but its thread. An item is borrowed from
 * push until its release() is called (after run, on the worker); an item
 * with release == NULL stays the pusher's, who must keep it alive until its
 * position completed (cb_work_queue_wait). */
#ifndef CUBERT_BACKENDS_HOST_WORK_QUEUE_H
#define CUBERT_BACKENDS_HOST_WORK_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct cb_work cb_work;

struct cb_work {
  cb_work *next;                   /* the queue's link */
  void (*run)(cb_work *work);      /* runs on the worker thread */
  void (*release)(cb_work *work);  /* after run, on the worker; NULL: the pusher owns it */
  uint64_t tag;                    /* nonzero: becomes last_tag once run */
};

typedef struct cb_work_queue {
  pthread_mutex_t lock;
  pthread_cond_t wake;             /* the worker: an item arrived, or stop */
  pthread_cond_t done;             /* waiters: `completed` moved */
  cb_work *head, *tail;
  uint64_t submitted;              /* position of the last item pushed */
  uint64_t completed;              /* position of the last item run */
  _Atomic uint64_t last_tag;       /* tag of the last tagged item run; cheap to read */
  bool stopping;
  bool started;
  pthread_t thread;
  void (*on_start)(void *ctx, int index); /* NULL: none */
  void *on_start_ctx;
  int on_start_index;
} cb_work_queue;

/* Initialises the queue and starts its worker; returns 0 or an errno value
 * (then nothing needs destroying). */
int cb_work_queue_start(cb_work_queue *queue);

/* The same, with `on_start(ctx, index)` called on the worker thread before
 * it runs any item (on_start NULL: like cb_work_queue_start). */
int cb_work_queue_start_with(cb_work_queue *queue, void (*on_start)(void *ctx, int index), void *ctx,
                             int index);

/* Appends `work` and returns its position; 0 when the queue is stopping
 * (the item was not taken). */
uint64_t cb_work_queue_push(cb_work_queue *queue, cb_work *work);

/* Appends `work` only when every item pushed before it has run (nothing is
 * pending or running), and returns its position: waiting for it then waits
 * for this item alone. 0 when the item was not taken: *busy says whether
 * the queue had work (true) or is stopping (false). */
uint64_t cb_work_queue_push_if_idle(cb_work_queue *queue, cb_work *work, bool *busy);

/* Blocks until every item up to `position` has run. */
void cb_work_queue_wait(cb_work_queue *queue, uint64_t position);

/* Position of the last item pushed (the queue's current end). */
uint64_t cb_work_queue_end(cb_work_queue *queue);

/* Position of the last item run. */
uint64_t cb_work_queue_completed(cb_work_queue *queue);

/* Tag of the last tagged item run; 0 before any. Lock-free. */
uint64_t cb_work_queue_last_tag(const cb_work_queue *queue);

/* Refuses further pushes, runs what was pushed, joins the worker. Waiting
 * stays valid afterwards (it returns at once) until destroy. */
void cb_work_queue_stop(cb_work_queue *queue);

/* Frees the queue's locks; no thread may use the queue any more. */
void cb_work_queue_destroy(cb_work_queue *queue);

#endif
