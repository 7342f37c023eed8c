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
  if (!f) return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "cubert_failure_create: out of memory");
  *failure = f;
  return CUBERT_OK;
}

cubert_status cubert_error_record(cubert_status status, const char *message) {
  return cb_fail(status, "%s", message ? message : cubert_status_string(status));
}

/* ------------------------------------------------------------ client hooks */

struct cb_client_hook {
  cubert_client_hook fn;
  void *arg;
  struct cb_client_hook *next;
};

cubert_status cubert_client_on_destroy(cubert_client *c, cubert_client_hook fn, void *arg) {
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_client_on_destroy: client is NULL");
  if (!fn) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_client_on_destroy: fn is NULL");
  struct cb_client_hook *h = cb_calloc(1, sizeof *h);
  if (!h) return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "cubert_client_on_destroy: out of host memory");
  h->fn = fn;
  h->arg = arg;
  pthread_mutex_lock(&c->hook_lock);
  h->next = c->hooks;
  c->hooks = h;
  pthread_mutex_unlock(&c->hook_lock);
  return CUBERT_OK;
}

cubert_status cubert_client_hook_remove(cubert_client *c, cubert_client_hook fn, void *arg) {
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_client_hook_remove: client is NULL");
  struct cb_client_hook *gone = NULL;
  pthread_mutex_lock(&c->hook_lock);
  for (struct cb_client_hook **p = &c->hooks; *p; p = &(*p)->next)
    if ((*p)->fn == fn && (*p)->arg == arg) {
      gone = *p;
      *p = gone->next;
      break;
    }
  pthread_mutex_unlock(&c->hook_lock);
  if (!gone) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_client_hook_remove: no such hook on the client");
  cb_free(gone);
  return CUBERT_OK;
}

void cb_client_run_hooks(cubert_client *c) {
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
