/* runtime/component.c: what components built on cubert's public API (the
 * MPI component, libcubert_mpi) need from the core to behave like the rest
 * of cubert: failures of their own making, the thread's last error for
 * their own entry points, and hooks on a client's end to release what they
 * keep of it. */
#include "base/alloc.h"
#include "runtime/internal.h"

cubert_status cubert_failure_create(cubert_client *client, cubert_status status, const char *message,
                                    const cubert_failure **failure) {
  if (!client) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_failure_create: client is NULL");
  if (!failure) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_failure_create: failure is NULL");
  if (status == CUBERT_OK || (unsigned)status >= CUBERT_STATUS_COUNT_)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT,
                   "cubert_failure_create: status %d is not an error status", (int)status);
  cubert_failure *f = cb_failure_new(status, message, client->dev->index, client->dev->info.name, 0, "transport", "", 0);
  if (!cb_failure_recorded(f)) /* the static stand-in: not the failure asked for */
    return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "cubert_failure_create: out of host memory for the failure");
  *failure = f;
  return CUBERT_OK;
}

cubert_status cubert_error_record(cubert_status status, const char *message) {
  return cb_fail(status, "%s", message ? message : cubert_status_string(status));
}

/* ------------------------------------------------------------ client hooks */

/* The rules (cubert.h, "Teardown hooks"): a client's registrations form a
 * list, newest first, under the client's hook_lock. Teardown takes the
 * first registration off the list and runs it with the lock dropped, until
 * the list is empty: so a hook may register another (it runs next) or
 * remove one not yet run, and a running hook is no longer on the list. */

struct cb_client_hook {
  cubert_client_hook fn;
  void *arg;
  struct cb_client_hook *next;
};

#define CB_CLIENT_EXPIRED "%s: the client belongs to a runtime that was destroyed"

cubert_status cubert_client_on_destroy(cubert_client *c, cubert_client_hook fn, void *arg) {
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_client_on_destroy: client is NULL");
  if (!fn) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_client_on_destroy: fn is NULL");
  struct cb_client_hook *h = cb_calloc(1, sizeof *h);
  if (!h) return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "cubert_client_on_destroy: out of host memory");
  h->fn = fn;
  h->arg = arg;
  pthread_mutex_lock(&c->hook_lock);
  bool orphan = c->orphan;
  if (!orphan) {
    h->next = c->hooks;
    c->hooks = h;
  }
  pthread_mutex_unlock(&c->hook_lock);
  if (orphan) {
    cb_free(h);
    return cb_fail(CUBERT_ERR_EXPIRED, CB_CLIENT_EXPIRED, "cubert_client_on_destroy");
  }
  return CUBERT_OK;
}

cubert_status cubert_client_hook_remove(cubert_client *c, cubert_client_hook fn, void *arg) {
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_client_hook_remove: client is NULL");
  struct cb_client_hook *gone = NULL;
  pthread_mutex_lock(&c->hook_lock);
  bool orphan = c->orphan;
  for (struct cb_client_hook **p = &c->hooks; *p; p = &(*p)->next)
    if ((*p)->fn == fn && (*p)->arg == arg) {
      gone = *p;
      *p = gone->next;
      break;
    }
  pthread_mutex_unlock(&c->hook_lock);
  if (orphan) return cb_fail(CUBERT_ERR_EXPIRED, CB_CLIENT_EXPIRED, "cubert_client_hook_remove");
  if (!gone) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_client_hook_remove: no such hook on the client");
  cb_free(gone);
  return CUBERT_OK;
}

static void run_hooks(cubert_client *c) {
  for (;;) {
    pthread_mutex_lock(&c->hook_lock);
    struct cb_client_hook *h = c->hooks;
    if (h) c->hooks = h->next;
    pthread_mutex_unlock(&c->hook_lock);
    if (!h) return;
    h->fn(c, h->arg);
    cb_free(h);
  }
}

void cb_client_link(cubert_client *c) {
  cubert_runtime *rt = c->rt;
  pthread_mutex_lock(&rt->clients_lock);
  c->prev = NULL;
  c->next = rt->clients;
  if (rt->clients) rt->clients->prev = c;
  rt->clients = c;
  c->linked = true;
  pthread_mutex_unlock(&rt->clients_lock);
}

/* Takes c out of its runtime's list. Caller holds rt->clients_lock. */
static void unlink_client(cubert_runtime *rt, cubert_client *c) {
  if (c->prev) c->prev->next = c->next;
  else rt->clients = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = NULL;
  c->linked = false;
}

void cb_client_end(cubert_client *c) {
  run_hooks(c);
  pthread_mutex_lock(&c->hook_lock);
  bool orphan = c->orphan;
  pthread_mutex_unlock(&c->hook_lock);
  if (orphan) return; /* its runtime is gone, and took it off its list */
  cubert_runtime *rt = c->rt;
  pthread_mutex_lock(&rt->clients_lock);
  if (c->linked) unlink_client(rt, c);
  pthread_mutex_unlock(&rt->clients_lock);
}

void cb_runtime_end_clients(cubert_runtime *rt) {
  for (;;) {
    pthread_mutex_lock(&rt->clients_lock);
    cubert_client *c = rt->clients;
    if (c) unlink_client(rt, c);
    pthread_mutex_unlock(&rt->clients_lock);
    if (!c) return;
    run_hooks(c); /* a hook may make another client: it is taken next */
    pthread_mutex_lock(&c->hook_lock);
    c->orphan = true;
    pthread_mutex_unlock(&c->hook_lock);
    run_hooks(c); /* any registered after the first pass emptied the list */
  }
}
