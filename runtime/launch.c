/* runtime/launch.c: kernel launches: validation against the kernel and the
 * device, the input check (a kernel with a tainted input is not run), the
 * write-set claim and its settling, peer bindings. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/internal.h"
#include "runtime/pattern.h"

#define CB_MAX_ARGS 256

/* A tensor argument: its footprint (the read or write set) and the
 * descriptor the kernel gets. */
typedef struct tensor_arg {
  cb_pattern pat;
  cubert_tensor desc;
} tensor_arg;

typedef struct resolved {
  cb_alloc *alloc;
  uint64_t start, end;
  bool peer;     /* memory of another device, bound through its cell */
  tensor_arg *t; /* tensors: launch_args' slot */
} resolved;

static cubert_status check_config(cb_errb *eb, const cb_device *dev, const cubert_kernel *k,
                                  const cubert_launch_config *cfg) {
  const cubert_device_info *in = &dev->info;
  static const char axis[] = "xyz";
  uint64_t threads = 1;
  for (int i = 0; i < 3; i++) {
    if (cfg->grid[i] == 0 || cfg->block[i] == 0)
      return cb_errb_set(eb, CUBERT_ERR_LAUNCH_CONFIG, "launch of `%s`: %s dimension %c is 0 (each must be at least 1)",
                     k->name, cfg->grid[i] == 0 ? "grid" : "block", axis[i]);
    if (cfg->grid[i] > in->max_grid[i])
      return cb_errb_set(eb, CUBERT_ERR_LAUNCH_CONFIG, "launch of `%s`: grid %c is %u, %s allows %u", k->name,
                     axis[i], cfg->grid[i], in->name, in->max_grid[i]);
    if (cfg->block[i] > in->max_block[i])
      return cb_errb_set(eb, CUBERT_ERR_LAUNCH_CONFIG, "launch of `%s`: block %c is %u, %s allows %u", k->name,
                     axis[i], cfg->block[i], in->name, in->max_block[i]);
    /* ROCm counts threads per dimension in 32 bits (hipModuleLaunchKernel
     * refuses more); refused on every backend so a program that runs here
     * runs there. */
    uint64_t span = (uint64_t)cfg->grid[i] * cfg->block[i];
    if (span > UINT32_MAX)
      return cb_errb_set(eb, CUBERT_ERR_LAUNCH_CONFIG,
                     "launch of `%s`: grid %c * block %c = %u * %u = %llu threads in dimension %c, "
                     "at most 4294967295 (UINT32_MAX: ROCm's limit)",
                     k->name, axis[i], axis[i], cfg->grid[i], cfg->block[i], (unsigned long long)span,
                     axis[i]);
    threads *= cfg->block[i];
  }
  if (threads > in->max_threads_per_block)
    return cb_errb_set(eb, CUBERT_ERR_LAUNCH_CONFIG, "launch of `%s`: %llu threads per block, %s allows %u",
                   k->name, (unsigned long long)threads, in->name, in->max_threads_per_block);
  if (cfg->shared_memory > in->max_shared_memory)
    return cb_errb_set(eb, CUBERT_ERR_LAUNCH_CONFIG, "launch of `%s`: %u bytes of shared memory, %s allows %u",
                   k->name, cfg->shared_memory, in->name, in->max_shared_memory);
  return CUBERT_OK;
}

static const char *kind_name(cubert_param_kind k) {
  switch (k) {
    case CUBERT_PARAM_BUFFER:
      return "a buffer";
    case CUBERT_PARAM_PEER_BUFFER:
      return "a peer buffer";
    case CUBERT_PARAM_SCALAR:
      return "a scalar";
    case CUBERT_PARAM_TENSOR:
      return "a tensor";
  }
  return "an unknown kind";
}

/* A tensor argument's footprint and descriptor, its view checked against
 * the handle (the error names the argument and the dimension). */
static cubert_status resolve_tensor(cb_errb *eb, const cubert_kernel *k, uint32_t i, const cubert_arg *a, tensor_arg *t) {
  const cubert_param *p = &k->params[i];
  const cubert_view *v = a->view;
  if (!v)
    return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "argument %u (`%s`) of `%s`: tensor view is NULL", i, p->name,
                   k->name);
  const cubert_handle *h = a->handle;
  char why[256];
  bool empty = false;
  cubert_status st = cb_pattern_from_view(v, h->start, h->end, &t->pat, &empty, why, sizeof why);
  if (st)
    return cb_errb_set(eb, st, "argument %u (`%s`) of `%s`: tensor view of memory %llu (bytes %llu..%llu): %s", i, p->name,
                   k->name, (unsigned long long)h->alloc->id, (unsigned long long)h->start,
                   (unsigned long long)h->end, why);
  if (empty) {
    memset(&t->pat, 0, sizeof t->pat);
    t->pat.run = 1;
  }
  memset(&t->desc, 0, sizeof t->desc);
  t->desc.address = h->alloc->block.address + h->start + v->offset * v->elem_size;
  t->desc.rank = v->ndims;
  t->desc.elem_size = v->elem_size;
  for (uint32_t d = 0; d < v->ndims; d++) {
    t->desc.shape[d] = v->shape[d];
    t->desc.strides[d] = v->strides[d];
  }
  return CUBERT_OK;
}

/* Checks each argument against its parameter and the device; no lock.
 * Tensors take the slots of `tensors` in order. */
static cubert_status check_args(cb_errb *eb, const cb_device *dev, const cubert_kernel *k, const cubert_arg *args,
                                uint32_t nargs, resolved *res, tensor_arg *tensors) {
  if (nargs != k->nparams)
    return cb_errb_set(eb, CUBERT_ERR_LAUNCH_CONFIG, "kernel `%s` takes %u argument%s, the launch gives %u", k->name,
                   k->nparams, k->nparams == 1 ? "" : "s", nargs);
  for (uint32_t i = 0; i < nargs; i++) {
    const cubert_param *p = &k->params[i];
    const cubert_arg *a = &args[i];
    if (a->kind != p->kind)
      return cb_errb_set(eb, CUBERT_ERR_LAUNCH_CONFIG, "argument %u (`%s`) of `%s` must be %s, the launch gives %s", i,
                     p->name, k->name, kind_name(p->kind), kind_name(a->kind));
    if (p->kind == CUBERT_PARAM_SCALAR) {
      if (!a->scalar)
        return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "argument %u (`%s`) of `%s`: scalar value is NULL", i,
                       p->name, k->name);
      if (a->scalar_size != p->size)
        return cb_errb_set(eb, CUBERT_ERR_LAUNCH_CONFIG, "argument %u (`%s`) of `%s`: scalar of %u bytes, the kernel takes %u",
                       i, p->name, k->name, a->scalar_size, p->size);
      continue;
    }
    if (!a->handle)
      return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "argument %u (`%s`) of `%s`: handle is NULL", i, p->name,
                     k->name);
    cb_alloc *al = a->handle->alloc;
    res[i] = (resolved){al, a->handle->start, a->handle->end, false, NULL};
    if (p->kind == CUBERT_PARAM_TENSOR) {
      res[i].t = tensors++;
      cubert_status st = resolve_tensor(eb, k, i, a, res[i].t);
      if (st) return st;
    }
    if (al->dev == dev) continue; /* a peer parameter may bind local memory too (cubert.h) */
    char what[160];
    snprintf(what, sizeof what, "argument %u (`%s`) of `%s`", i, p->name, k->name);
    cubert_status st = cb_check_runtime(eb, "cubert_launch", what, dev, al);
    if (st) return st;
    if (p->kind == CUBERT_PARAM_BUFFER || p->kind == CUBERT_PARAM_TENSOR)
      return cb_errb_set(eb, CUBERT_ERR_WRONG_DEVICE,
                     "argument %u (`%s`) of `%s`: memory %llu belongs to device %d (%s), the launch is on "
                     "device %d (%s); bind memory of another device through a peer-buffer parameter",
                     i, p->name, k->name, (unsigned long long)al->id, al->dev->index, al->dev->info.name,
                     dev->index, dev->info.name);
    if (al->dev->backend != dev->backend)
      return cb_errb_set(eb, CUBERT_ERR_PEER_ACCESS, "argument %u (`%s`) of `%s`: %s and %s belong to different backends",
                     i, p->name, k->name, al->dev->info.name, dev->info.name);
    cb_shared *sh = atomic_load(&al->shared);
    if (!sh)
      return cb_errb_set(eb, CUBERT_ERR_NOT_SHARED,
                     "argument %u (`%s`) of `%s`: memory %llu of device %d was never shared "
                     "(cubert_handle_share)",
                     i, p->name, k->name, (unsigned long long)al->id, al->dev->index);
    if (sh->alloc != al || sh->memory_id != al->id)
      return cb_errb_set(eb, CUBERT_ERR_NOT_SHARED,
                     "argument %u (`%s`) of `%s`: the shared memory (%llu) is not the memory the binding "
                     "names (%llu)",
                     i, p->name, k->name, (unsigned long long)sh->memory_id, (unsigned long long)al->id);
    res[i].peer = true;
  }
  return CUBERT_OK;
}

/* A failure of the launch itself: taints the write set, recorded as error. */
static cubert_status launch_failed(cb_errb *eb, cb_device *dev, cb_work *w, cb_stream *s, const cubert_kernel *k,
                                   cubert_status st, const cubert_berr *err) {
  cubert_failure *f = cb_device_failure(dev, st, err, s, "launch", k->name, w->work);
  cb_taint_settle(dev, w, f);
  /* a launch that failed may still have written part of its outputs (a
   * fault, an injected scribble): later writers on other streams must not
   * race those bytes, so order after it like after any writer */
  cb_work_mark_uses(dev, w);
  cb_errb_init(eb, st);
  cb_str_printf(&eb->msg, "launch of `%s` on device %d (%s) failed: ", k->name, dev->index, dev->info.name);
  if (f) {
    cb_failure_describe(f, &eb->msg);
    cb_work_report(w, f, eb);
    cubert_failure_release(f);
  }
  return st;
}

/* The arguments of one launch, resolved: the memory each binds (res), the
 * tensors' footprints and descriptors, and what the backend is handed
 * (bargs); on the stack for up to 16 arguments and 2 tensors. */
typedef struct launch_args {
  resolved *res;
  cubert_backend_arg *bargs;
  tensor_arg *tensors;
  resolved res_stack[16];
  cubert_backend_arg bargs_stack[16];
  tensor_arg tensors_stack[2];
} launch_args;

static cubert_status launch_args_init(cb_errb *eb, launch_args *la, const cubert_kernel *k, uint32_t nargs) {
  uint32_t nt = 0;
  for (uint32_t i = 0; i < nargs && i < k->nparams; i++) nt += k->params[i].kind == CUBERT_PARAM_TENSOR;
  la->res = nargs <= 16 ? la->res_stack : cb_calloc(nargs, sizeof *la->res);
  la->bargs = nargs <= 16 ? la->bargs_stack : cb_calloc(nargs, sizeof *la->bargs);
  la->tensors = nt <= 2 ? la->tensors_stack : cb_calloc(nt, sizeof *la->tensors);
  if (!la->res || !la->bargs || !la->tensors) return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  memset(la->res, 0, nargs * sizeof *la->res);
  return CUBERT_OK;
}

static void launch_args_free(launch_args *la) {
  if (la->res != la->res_stack) cb_free(la->res);
  if (la->bargs != la->bargs_stack) cb_free(la->bargs);
  if (la->tensors != la->tensors_stack) cb_free(la->tensors);
}

static cubert_status check_call(cb_errb *eb, const cubert_client *c, const cubert_kernel *k,
                                const cubert_launch_config *cfg, const cubert_arg *args, uint32_t nargs) {
  if (!c) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "cubert_launch: client is NULL");
  if (!k) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "cubert_launch: kernel is NULL");
  if (!cfg) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "cubert_launch: config is NULL");
  if (nargs && !args) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "cubert_launch: args is NULL");
  if (nargs > CB_MAX_ARGS)
    return cb_errb_set(eb, CUBERT_ERR_LAUNCH_CONFIG, "cubert_launch: %u arguments, at most %d", nargs, CB_MAX_ARGS);
  return CUBERT_OK;
}

/* Each peer binding needs peer access enabled for its pair. Under the
 * device lock. */
static cubert_status check_peer_access(cb_errb *eb, const cb_device *dev, const cubert_kernel *k, const resolved *res,
                                       uint32_t nargs) {
  for (uint32_t i = 0; i < nargs; i++) {
    if (!res[i].peer) continue;
    int owner = res[i].alloc->dev->index;
    if (dev->peer_state[owner] != 1)
      return cb_errb_set(eb, CUBERT_ERR_PEER_ACCESS,
                     "argument %u (`%s`) of `%s`: device %d (%s) may not access device %d (%s): %s", i,
                     k->params[i].name, k->name, dev->index, dev->info.name, owner,
                     res[i].alloc->dev->info.name,
                     dev->peer_state[owner] == 2 ? dev->peer_message[owner]
                                                  : "peer access was never enabled for this pair");
  }
  return CUBERT_OK;
}

/* The launch's work record, its buffers bound; NULL for want of memory. */
static cb_work *begin_work(cb_device *dev, cb_stream *s, const cubert_kernel *k, const resolved *res,
                           uint32_t nargs) {
  uint32_t nb = 0;
  for (uint32_t i = 0; i < nargs; i++) nb += res[i].alloc != NULL;
  cb_work *w = cb_work_begin(dev, s, "launch", (cubert_kernel *)k, nb);
  if (!w) return NULL;
  for (uint32_t i = 0, j = 0; i < nargs; i++) {
    if (!res[i].alloc) continue;
    /* a tensor binds its footprint; wanting memory for that, the handle's
     * view around it (more taint on failure, never less) */
    if (!res[i].t || !cb_work_bind_pattern(w, j, res[i].alloc, &res[i].t->pat, k->params[i].access,
                                           k->params[i].name))
      cb_work_bind(w, j, res[i].alloc, res[i].start, res[i].end, k->params[i].access, k->params[i].name);
    j++;
  }
  return w;
}

/* Inputs: a kernel with a tainted input is not run; its outputs get a child
 * failure (runtime/taint.c) and the result is CUBERT_ERR_TAINTED naming the
 * input. CUBERT_OK: no input is tainted, the launch goes on. */
static cubert_status skip_if_tainted(cb_errb *eb, cb_device *dev, cb_work *w, const cubert_kernel *k, const resolved *res,
                                     uint32_t nargs) {
  /* A clean launch: every input is local, unshared memory with an empty
   * ledger (read under the device lock that guards it): one load each, no
   * error builder. */
  bool clean = true;
  for (uint32_t i = 0; i < nargs && clean; i++)
    if (res[i].alloc && (k->params[i].access & CUBERT_ACCESS_READ))
      clean = !res[i].peer && !atomic_load_explicit(&res[i].alloc->shared, memory_order_relaxed) &&
              res[i].alloc->ledger.n == 0;
  if (clean) return CUBERT_OK;
  cb_errb in;
  cb_errb_init(&in, CUBERT_ERR_TAINTED);
  const cubert_failure *first = NULL;
  const char *first_input = NULL;
  for (uint32_t i = 0, j = 0; i < nargs; i++) {
    if (!res[i].alloc) continue;
    const cb_wbind *b = &cb_work_binds(w)[j++]; /* what begin_work bound: a tensor's footprint */
    if (!(k->params[i].access & CUBERT_ACCESS_READ)) continue;
    const cubert_failure *f = cb_taint_find_bind(b, res[i].peer, &in);
    if (f && !first) {
      first = f;
      first_input = k->params[i].name;
    }
  }
#ifdef CUBERT_BREAK_TRANSITIVE
  first = NULL; /* test build: run on tainted input; the checker must catch it */
#endif
  if (!first) {
    cb_errb_discard(&in);
    return CUBERT_OK;
  }
  cubert_failure *child = cb_taint_skip(dev, w, first, k->name, first_input, "launch");
  cb_str_printf(&in.msg, "`%s` was not run on device %d: input `%s` carries ", k->name, dev->index,
                first_input);
  cb_failure_describe(first, &in.msg);
  if (in.n > 1) cb_str_printf(&in.msg, " (and %zu more tainted range%s)", in.n - 1, in.n == 2 ? "" : "s");
  if (child) {
    cb_str_printf(&in.msg, "; its outputs now carry ");
    cb_failure_describe(child, &in.msg);
    cubert_failure_release(child);
  }
  *eb = in;
  return in.status;
}

/* Order first: a failed launch still counts as its outputs' last writer
 * (launch_failed), which is only true once this stream waits for the
 * writers and readers before it. */
static cubert_status order_accesses(cb_device *dev, cb_stream *s, cb_work *w, const cubert_kernel *k,
                                    const resolved *res, uint32_t nargs) {
  for (uint32_t i = 0; i < nargs; i++) {
    cb_errb order;
    if (res[i].alloc && !res[i].peer &&
        cb_order_access(dev, s, res[i].alloc, (k->params[i].access & CUBERT_ACCESS_WRITE) != 0, &order))
      return cb_work_fail_ordering(dev, w, s, &order, "launch", k->name);
  }
  return CUBERT_OK;
}

/* What the backend is handed: scalars by value, buffers by address,
 * tensors as their descriptor (by value) with the address of element 0. */
static void backend_args(const cubert_kernel *k, const cubert_arg *args, const resolved *res, uint32_t nargs,
                         cubert_backend_arg *bargs) {
  for (uint32_t i = 0; i < nargs; i++) {
    cubert_backend_arg *b = &bargs[i];
    memset(b, 0, sizeof *b);
    b->kind = k->params[i].kind;
    b->access = k->params[i].access;
    if (k->params[i].kind == CUBERT_PARAM_SCALAR) {
      b->scalar = args[i].scalar;
      b->scalar_size = args[i].scalar_size;
    } else if (k->params[i].kind == CUBERT_PARAM_TENSOR) {
      b->address = res[i].t->desc.address;
      b->scalar = &res[i].t->desc;
      b->scalar_size = sizeof res[i].t->desc;
    } else {
      cb_shared *sh = res[i].peer ? atomic_load(&res[i].alloc->shared) : NULL;
      b->address = (sh ? sh->address : res[i].alloc->block.address) + res[i].start;
      b->size = res[i].end - res[i].start;
      /* A peer buffer names its allocation's owner (backend.h), so no layer
       * below needs a registry of addresses to tell. */
      if (k->params[i].kind == CUBERT_PARAM_PEER_BUFFER) b->owner = res[i].alloc->dev->bdev;
    }
  }
}

/* The launch under the device lock: the stream, the work record, the input
 * check, ordering, the module, the backend's launch, the write set settled. */
static cubert_status launch_locked(cb_errb *eb, cubert_client *c, const cubert_kernel *k, const cubert_launch_config *cfg,
                                   const cubert_arg *args, uint32_t nargs, launch_args *la) {
  cb_device *dev = c->dev;
  cb_stream *s;
  cubert_status st;
  if ((st = cb_client_stream(c, &s)) || (st = check_peer_access(eb, dev, k, la->res, nargs))) return st;
  cb_work *w = begin_work(dev, s, k, la->res, nargs);
  if (!w) return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  if ((st = skip_if_tainted(eb, dev, w, k, la->res, nargs)) || (st = order_accesses(dev, s, w, k, la->res, nargs)))
    return st;
  cubert_berr err = {0};
  void *module = NULL;
  if ((st = cb_module_get(dev, k, &module, &err))) return launch_failed(eb, dev, w, s, k, st, &err);
  backend_args(k, args, la->res, nargs, la->bargs);
  st = dev->ops->launch(dev->bdev, s->bs, w->work, module, cfg, la->bargs, nargs, &err);
  if (st) return launch_failed(eb, dev, w, s, k, st, &err);
  cb_taint_settle(dev, w, NULL);
  cb_work_mark_uses(dev, w);
  dev->launches++;
  return CUBERT_OK;
}

cubert_status cubert_launch(cubert_client *c, const cubert_kernel *k, const cubert_launch_config *cfg,
                            const cubert_arg *args, uint32_t nargs) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = check_call(&eb, c, k, cfg, args, nargs);
  if (!st) {
    launch_args la;
    if (!(st = launch_args_init(&eb, &la, k, nargs)) && !(st = check_config(&eb, c->dev, k, cfg)) &&
        !(st = check_args(&eb, c->dev, k, args, nargs, la.res, la.tensors))) {
      /* the slow part of a first launch (a compile) without the device lock:
       * launches of other kernels go on meanwhile (runtime/module.c) */
      if (!atomic_load(&c->dev->gone)) cb_module_prepare(c->dev, k);
      if (!(st = cb_device_enter(c->dev))) {
        st = launch_locked(&eb, c, k, cfg, args, nargs, &la);
        cb_device_leave(c->dev);
      }
    }
    launch_args_free(&la);
  }
  return cb_errb_return(&eb, st);
}
