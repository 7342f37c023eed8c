/* runtime/external.c: external access (cubert_handle_external_begin/end),
 * the device address of a view for a transport that moves the bytes itself
 * (GPU-aware MPI), under an access that keeps the ledger exact: a read is
 * refused over tainted bytes, and bytes being written externally carry a
 * failure until the writer says how it went. */
#include <stdio.h>

#include "base/alloc.h"
#include "runtime/internal.h"

struct cubert_external {
  cubert_client *client;
  cubert_handle *view; /* a clone: the memory stays allocated */
  cubert_access access;
};

/* Bytes [start, end) of `a` carry f (NULL: they were written good), in the
 * ledger and, for memory shared between processes, in its shared cell.
 * Caller holds the device's lock. */
static void settle(cb_alloc *a, uint64_t start, uint64_t end, cubert_failure *f) {
  cb_ledger *l = cb_alloc_ledger_lock(a);
  if (f) cb_ledger_set(l, start, end, f);
  else cb_ledger_clear(l, start, end);
  cb_alloc_ledger_unlock(a);
  if (a->xshare) cb_xshare_settle(a, start, end, NULL, f);
}

#define NULL_ARG(fn, what) cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, what)

cubert_status cubert_handle_external_begin(cubert_client *c, cubert_handle *h, cubert_access access,
                                           cubert_external **out, void **address) {
  const char *fn = "cubert_handle_external_begin";
  if (!c) return NULL_ARG(fn, "client");
  if (!h) return NULL_ARG(fn, "view");
  if (!out) return NULL_ARG(fn, "external");
  if (!address) return NULL_ARG(fn, "address");
  if (access != CUBERT_ACCESS_READ && access != CUBERT_ACCESS_WRITE)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "%s: access %d is neither CUBERT_ACCESS_READ nor CUBERT_ACCESS_WRITE",
                   fn, (int)access);
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = cb_check_own(&eb, fn, c, h, "the view");
  if (st) return cb_errb_return(&eb, st);
  cb_errb_discard(&eb);
  cubert_external *x = cb_calloc(1, sizeof *x);
  if (!x) return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  /* the reference that keeps the memory allocated until the end, taken
   * before anything changes: out of memory for it refuses the begin */
  x->view = cubert_handle_clone(h);
  if (!x->view) {
    cb_free(x);
    return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "%s: out of host memory for a reference to the view", fn);
  }
  cubert_failure *pending = NULL;
  if (access == CUBERT_ACCESS_WRITE) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "bytes %llu..%llu of memory %llu are being written by an external transfer that has not ended "
             "(cubert_handle_external_begin)",
             (unsigned long long)h->start, (unsigned long long)h->end, (unsigned long long)h->alloc->id);
    pending = cb_failure_new(CUBERT_ERR_BACKEND, msg, c->dev->index, c->dev->info.name, 0, "external-write", "", 0);
    if (!cb_failure_recorded(pending)) { /* the static stand-in would name no external write */
      cubert_handle_release(x->view);
      cb_free(x);
      return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    }
  }
  /* the bytes are final once the stream's work is done; failures that wait
   * finds taint their bytes, which the ledger check below then sees. Not
   * cubert_sync: its report belongs to the caller's next sync, and a call
   * that succeeds records no error. */
  cb_errb wait;
  cb_errb_init(&wait, CUBERT_OK);
  if ((st = cb_client_wait(&wait, c))) {
    /* the wait itself failed (a lost device is refused below): whether the
     * stream's writers ran is unknown, so no access is granted (a refused
     * begin changes nothing, cubert.h) */
    cubert_failure_release(pending);
    cubert_handle_release(x->view);
    cb_free(x);
    return cb_errb_return(&wait, st);
  }
  cb_errb_discard(&wait);
  cb_device *dev = c->dev;
  if ((st = cb_device_enter(dev))) {
    cubert_failure_release(pending);
    cubert_handle_release(x->view);
    cb_free(x);
    return st;
  }
  cb_alloc *a = h->alloc;
  cb_errb report;
  if (access == CUBERT_ACCESS_READ && cb_taint_refusal("external read", a, h->start, h->end, &report)) {
    cb_device_leave(dev);
    cubert_handle_release(x->view);
    cb_free(x);
    return cb_errb_finish(&report);
  }
  if (pending) {
    settle(a, h->start, h->end, pending);
    cubert_failure_release(pending); /* the ledger holds its own */
  }
  cb_device_leave(dev);
  x->client = c;
  x->access = access;
  *address = (void *)(uintptr_t)(a->block.address + h->start);
  *out = x;
  return CUBERT_OK;
}

cubert_status cubert_handle_external_end(cubert_external *x, const cubert_failure *failure) {
  if (!x) return NULL_ARG("cubert_handle_external_end", "external");
  cubert_status st = CUBERT_OK;
  if (x->access == CUBERT_ACCESS_WRITE) {
    cubert_handle *h = x->view;
    cb_alloc *a = h->alloc;
    cb_device *dev = a->dev;
    if (cb_device_enter(dev) == CUBERT_OK) {
      settle(a, h->start, h->end, (cubert_failure *)failure);
      cb_device_leave(dev);
    } else {
      /* lost: every use of the bytes fails anyway; they keep the pending failure */
      st = cb_fail(CUBERT_ERR_DEVICE_LOST,
                   "cubert_handle_external_end: device %d is lost; the bytes keep the failure of the unfinished "
                   "external write",
                   dev->index);
    }
  }
  cubert_handle_release(x->view);
  cb_free(x);
  return st;
}
