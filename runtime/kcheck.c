/* runtime/kcheck.c: a kernel's own launch check (runtime/kcheck.h): the
 * launch described as its host function would see it, the check run on
 * it, write-only buffers narrowed to what the kernel writes. */
#include <stdint.h>
#include <string.h>

#include "runtime/internal.h"

void cb_kernel_set_check(cubert_kernel *k, cb_kernel_check_fn check) {
  if (k) k->check = check;
}

static bool elem_size_ok(uint32_t e) { return e == 1 || e == 2 || e == 4 || e == 8 || e == 16; }

cubert_status cb_kernel_check(cb_errb *eb, const cubert_kernel *k, const cubert_launch_config *cfg,
                              const cubert_arg *args, uint32_t nargs, cubert_arg *narrowed,
                              cubert_handle *handles, const cubert_arg **use) {
  *use = args;
  if (!k->check || nargs != k->nparams || nargs > CB_KCHECK_MAX_ARGS || (nargs && !args)) return CUBERT_OK;
  void *ptrs[CB_KCHECK_MAX_ARGS];
  uint64_t sizes[CB_KCHECK_MAX_ARGS], written[CB_KCHECK_MAX_ARGS];
  cubert_tensor tensors[CB_KCHECK_MAX_ARGS];
  for (uint32_t i = 0; i < nargs; i++) {
    const cubert_param *p = &k->params[i];
    const cubert_arg *a = &args[i];
    if (a->kind != p->kind) return CUBERT_OK;
    if (p->kind == CUBERT_PARAM_SCALAR) {
      if (!a->scalar || a->scalar_size != p->size) return CUBERT_OK;
      ptrs[i] = (void *)a->scalar;
      sizes[i] = a->scalar_size;
      continue;
    }
    const cubert_handle *h = a->handle;
    if (!h) return CUBERT_OK;
    uint64_t address = h->alloc->block.address + h->start;
    if (p->kind == CUBERT_PARAM_TENSOR) {
      const cubert_view *v = a->view;
      if (!v || v->ndims == 0 || v->ndims > CUBERT_VIEW_MAX_DIMS || !elem_size_ok(v->elem_size)) return CUBERT_OK;
      cubert_tensor *t = &tensors[i];
      memset(t, 0, sizeof *t);
      t->address = address + v->offset * v->elem_size;
      t->rank = v->ndims;
      t->elem_size = v->elem_size;
      for (uint32_t d = 0; d < v->ndims; d++) {
        t->shape[d] = v->shape[d];
        t->strides[d] = v->strides[d];
      }
      ptrs[i] = t;
      sizes[i] = sizeof *t;
    } else {
      ptrs[i] = (void *)(uintptr_t)address;
      sizes[i] = h->end - h->start;
    }
  }
  for (uint32_t i = 0; i < nargs; i++) written[i] = sizes[i];
  cubert_host_launch l = {.shared_memory = cfg->shared_memory, .nargs = nargs, .args = ptrs, .sizes = sizes};
  memcpy(l.grid, cfg->grid, sizeof l.grid);
  memcpy(l.block, cfg->block, sizeof l.block);
  char msg[256];
  msg[0] = '\0';
  cubert_status st = k->check(&l, written, msg, sizeof msg);
  if (st != CUBERT_OK) {
    if ((int)st < 0 || st >= CUBERT_STATUS_COUNT_) st = CUBERT_ERR_INVALID_ARGUMENT;
    msg[sizeof msg - 1] = '\0';
    /* the check names the kernel first (a peer copy's, the copy it shares) */
    size_t len = strlen(k->name);
    const char *why = msg;
    if (!strncmp(why, k->name, len) && !strncmp(why + len, ": ", 2)) why += len + 2;
    return cb_errb_set(eb, st, "launch of `%s` refused: %s", k->name, why[0] ? why : "its check failed");
  }
  bool narrow = false;
  for (uint32_t i = 0; i < nargs; i++) {
    const cubert_param *p = &k->params[i];
    bool buffer = p->kind == CUBERT_PARAM_BUFFER || p->kind == CUBERT_PARAM_PEER_BUFFER;
    narrowed[i] = args[i];
    if (!buffer || p->access != CUBERT_ACCESS_WRITE || written[i] >= sizes[i]) continue;
    handles[i] = *args[i].handle;
    handles[i].end = handles[i].start + written[i];
    narrowed[i].handle = &handles[i];
    narrow = true;
  }
  if (narrow) *use = narrowed;
  return CUBERT_OK;
}
