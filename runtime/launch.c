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

/* Out of line: a path the usual launch does not take, or a pass that keeps
 * its registers better as a function of its own (the launch inlines into
 * one large function otherwise). */
#if defined(__GNUC__)
#define CB_NOINLINE __attribute__((noinline))
#define CB_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define CB_NOINLINE
#define CB_ALWAYS_INLINE inline
#endif

/* A tensor argument: its footprint (the read or write set) and the
 * descriptor the kernel gets. */
typedef struct tensor_arg {
  cb_pattern pat;
  cubert_tensor desc;
} tensor_arg;

static cubert_status check_config(cb_errb *eb, const cb_device *dev, const cubert_kernel *k,
                                  const cubert_launch_config *cfg) {
  const cubert_device_info *in = &dev->info;
  /* the usual case, every test at once without a branch each; any
   * failure is named by the tests below */
  const uint32_t *g = cfg->grid, *b = cfg->block;
  /* x - 1 >= max: x is 0 or above max (unsigned) */
  bool bad = (g[0] - 1u >= in->max_grid[0]) | (g[1] - 1u >= in->max_grid[1]) | (g[2] - 1u >= in->max_grid[2]) |
             (b[0] - 1u >= in->max_block[0]) | (b[1] - 1u >= in->max_block[1]) | (b[2] - 1u >= in->max_block[2]) |
             ((uint64_t)g[0] * b[0] > UINT32_MAX) | ((uint64_t)g[1] * b[1] > UINT32_MAX) |
             ((uint64_t)g[2] * b[2] > UINT32_MAX) | (cfg->shared_memory > in->max_shared_memory);
  /* each block dimension is within its maximum here, so the product fits */
  if (!bad && (uint64_t)b[0] * b[1] * b[2] <= in->max_threads_per_block) return CUBERT_OK;
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

/* The arguments of one launch, resolved: the tensors' footprints and
 * descriptors, and what the backend is handed (bargs); on the stack for up
 * to 16 arguments and 2 tensors. The memory an argument binds is read from
 * its handle where it is needed (args[i].handle: the caller's, unchanged
 * for the call), and a binding is a peer one exactly when its allocation
 * belongs to another device (check_args refused every other such binding),
 * so nothing per binding is kept besides bargs. */
typedef struct launch_args {
  cubert_backend_arg *bargs;
  tensor_arg *tensors;
  uint32_t nbound, npeer; /* arguments binding memory; peer ones among them */
  cubert_backend_arg bargs_stack[16];
  tensor_arg tensors_stack[2];
} launch_args;

static cubert_status launch_args_init(cb_errb *eb, launch_args *la, const cubert_kernel *k, uint32_t nargs) {
  uint32_t nt = k->ntensors;
  la->nbound = la->npeer = 0;
  la->bargs = la->bargs_stack;
  la->tensors = la->tensors_stack;
  if (nargs <= 16 && nt <= 2) return CUBERT_OK; /* the usual case: the stack */
  if (nargs > 16) la->bargs = cb_calloc(nargs, sizeof *la->bargs);
  if (nt > 2) la->tensors = cb_calloc(nt, sizeof *la->tensors);
  if (!la->bargs || !la->tensors) return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  return CUBERT_OK;
}

static void launch_args_free(launch_args *la) {
  if (la->bargs != la->bargs_stack) cb_free(la->bargs);
  if (la->tensors != la->tensors_stack) cb_free(la->tensors);
}

/* The allocation argument `a` binds (NULL: a scalar); its kind matched its
 * parameter's (check_args). */
static inline cb_alloc *arg_alloc(const cubert_arg *a) {
  return a->kind == CUBERT_PARAM_SCALAR ? NULL : a->handle->alloc;
}

/* An argument other than a buffer of the launching device: its checks,
 * naming what is wrong, and for a scalar or tensor what the backend is
 * handed (check_args). Out of line, so the loop of the usual case keeps
 * its registers. */
static CB_NOINLINE cubert_status check_arg(cb_errb *eb, const cb_device *dev, const cubert_kernel *k, uint32_t i,
                                           const cubert_arg *a, cubert_backend_arg *bargs, tensor_arg **tensors,
                                           uint32_t *nbound, uint32_t *npeer) {
  const cubert_param *p = &k->params[i];
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
    bargs[i] = (cubert_backend_arg){.kind = p->kind, .access = p->access, .scalar = a->scalar,
                                    .scalar_size = a->scalar_size};
    return CUBERT_OK;
  }
  if (!a->handle)
    return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "argument %u (`%s`) of `%s`: handle is NULL", i, p->name,
                   k->name);
  const cubert_handle *h = a->handle;
  cb_alloc *al = h->alloc;
  (*nbound)++;
  if (p->kind == CUBERT_PARAM_TENSOR) {
    tensor_arg *t = (*tensors)++;
    cubert_status st = resolve_tensor(eb, k, i, a, t);
    if (st) return st;
    bargs[i] = (cubert_backend_arg){.kind = p->kind, .access = p->access, .address = t->desc.address,
                                    .scalar = &t->desc, .scalar_size = sizeof t->desc};
  }
  if (al->dev == dev) return CUBERT_OK; /* a peer parameter may bind local memory too (cubert.h) */
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
  (*npeer)++;
  return CUBERT_OK;
}

/* Checks each argument against its parameter and the device; no lock.
 * Tensors take the slots of `la->tensors` in order; la->nbound and
 * la->npeer count the arguments that bind memory and the peer ones. What
 * the backend is handed (la->bargs): scalars by value and tensors as their
 * descriptor (by value) with the address of element 0, here; buffers by
 * address, in begin_work's pass (a peer binding's, its cell's, in
 * order_and_marshal). The usual argument, a buffer of the launching device,
 * costs two loads and a compare here. */
static cubert_status check_args(cb_errb *eb, const cb_device *dev, const cubert_kernel *k, const cubert_arg *args,
                                uint32_t nargs, launch_args *la) {
  cubert_backend_arg *bargs = la->bargs;
  tensor_arg *tensors = la->tensors;
  const cubert_param *params = k->params;
  uint32_t nbound = 0, npeer = 0;
  if (nargs != k->nparams)
    return cb_errb_set(eb, CUBERT_ERR_LAUNCH_CONFIG, "kernel `%s` takes %u argument%s, the launch gives %u", k->name,
                   k->nparams, k->nparams == 1 ? "" : "s", nargs);
  for (uint32_t i = 0; i < nargs; i++) {
    const cubert_param *p = &params[i];
    const cubert_arg *a = &args[i];
    if (a->kind == CUBERT_PARAM_BUFFER && p->kind == CUBERT_PARAM_BUFFER && a->handle && a->handle->alloc->dev == dev) {
      nbound++;
      continue;
    }
    cubert_status st = check_arg(eb, dev, k, i, a, bargs, &tensors, &nbound, &npeer);
    if (st) return st;
  }
  la->nbound = nbound;
  la->npeer = npeer;
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
static cubert_status check_peer_access(cb_errb *eb, const cb_device *dev, const cubert_kernel *k,
                                       const cubert_arg *args, uint32_t nargs) {
  for (uint32_t i = 0; i < nargs; i++) {
    const cb_alloc *a = arg_alloc(&args[i]);
    if (!a || a->dev == dev) continue;
    int owner = a->dev->index;
    if (dev->peer_state[owner] != 1)
      return cb_errb_set(eb, CUBERT_ERR_PEER_ACCESS,
                     "argument %u (`%s`) of `%s`: device %d (%s) may not access device %d (%s): %s", i,
                     k->params[i].name, k->name, dev->index, dev->info.name, owner, a->dev->info.name,
                     dev->peer_state[owner] == 2 ? dev->peer_message[owner]
                                                  : "peer access was never enabled for this pair");
  }
  return CUBERT_OK;
}

/* Whether a binding of `a` (peer: through its cell) by stream `s` must wait
 * for another stream: the last writer of its memory was another stream, or
 * it writes memory that has readers (cb_order_access decides which). Under
 * the device lock. */
static inline bool must_order(const cb_stream *s, const cb_alloc *a, bool peer, bool write) {
  return !peer && ((a->last_writer && a->last_writer != s->id) || (write && a->nreaders));
}

/* What begin_work found in its pass over the bindings, each a load or two
 * under the device lock that guards them:
 *   clean   every input is local, unshared memory with an empty ledger, so
 *           no input can be tainted (skip_if_tainted has nothing to find);
 *   order   some binding must wait for another stream (must_order), so
 *           order_and_marshal has work;
 *   settle  releasing some write binding changes something
 *           (cb_taint_settle_needed): else a success only marks uses. Under
 *           the device lock, held to the success, nothing else changes a
 *           ledger or shares memory of this device (only a reap replays
 *           failures, and none runs in between); memory of another device
 *           is shared, so always settled. */
typedef struct bind_state {
  bool clean, order, settle;
} bind_state;

/* The launch's work record, its la->nbound buffers bound; NULL for want of
 * memory. In the same pass, each buffer's argument for the backend (by
 * address: an allocation's block never moves; a peer binding's address is
 * its cell's, filled by order_and_marshal). */
static cb_work *begin_work(cb_device *dev, cb_stream *s, const cubert_kernel *k, const cubert_arg *args,
                           uint32_t nargs, launch_args *la, bind_state *bs) {
  cb_work *w = cb_work_begin(dev, s, "launch", (cubert_kernel *)k, la->nbound);
  if (!w) return NULL;
  bool c = true, o = false, settle = false;
  cb_wbind *b = cb_work_binds(w);
  const tensor_arg *t = la->tensors;
  for (uint32_t i = 0; i < nargs; i++) {
    const cubert_arg *ar = &args[i];
    if (ar->kind == CUBERT_PARAM_SCALAR) continue;
    const cubert_param *p = &k->params[i];
    const cubert_handle *h = ar->handle;
    cb_alloc *a = h->alloc;
    /* a tensor binds its footprint; wanting memory for that, the handle's
     * view around it (more taint on failure, never less) */
    uint64_t start = h->start, end = h->end;
    bool peer = a->dev != dev, write = (p->access & CUBERT_ACCESS_WRITE) != 0;
    if (ar->kind != CUBERT_PARAM_TENSOR) {
      cb_work_bind_known(b, a, !peer & !a->host, start, end, p->access, p->name);
      /* field by field: the compound literal's zeroed padding costs more.
       * A peer buffer names its allocation's owner (backend.h), so no layer
       * below needs a registry of addresses to tell. */
      cubert_backend_arg *ba = &la->bargs[i];
      ba->kind = ar->kind;
      ba->access = p->access;
      ba->address = a->block.address + start;
      ba->size = end - start;
      ba->scalar = NULL;
      ba->scalar_size = 0;
      ba->owner = ar->kind == CUBERT_PARAM_PEER_BUFFER ? a->dev->bdev : NULL;
    } else if (!cb_work_bind_pattern(w, (uint32_t)(b - cb_work_binds(w)), a, &(t++)->pat, p->access, p->name)) {
      cb_work_bind_at(w, b, a, start, end, p->access, p->name);
    }
    b++;
    /* unshared memory with an empty ledger: nothing to find, nothing to
     * release. Memory shared with other processes is never plain: its
     * taint lives in the cell they map, not in this ledger. */
    bool plain = !atomic_load_explicit(&a->shared, memory_order_relaxed) & (a->ledger.n == 0) & !a->xshare;
    if (p->access & CUBERT_ACCESS_READ) c &= !peer & plain;
    if (write) settle |= !plain;
    o |= must_order(s, a, peer, write);
  }
  *bs = (bind_state){c, o, settle};
  return w;
}

/* Inputs, for a launch begin_work did not find clean: a kernel with a
 * tainted input is not run; its outputs get a child failure
 * (runtime/taint.c) and the result is CUBERT_ERR_TAINTED naming the input.
 * CUBERT_OK: no input is tainted, the launch goes on. */
static cubert_status skip_if_tainted(cb_errb *eb, cb_device *dev, cb_work *w, const cubert_kernel *k,
                                     const cubert_arg *args, uint32_t nargs) {
  cb_errb in;
  cb_errb_init(&in, CUBERT_ERR_TAINTED);
  const cubert_failure *first = NULL;
  const char *first_input = NULL;
  for (uint32_t i = 0, j = 0; i < nargs; i++) {
    const cb_alloc *a = arg_alloc(&args[i]);
    if (!a) continue;
    const cb_wbind *b = &cb_work_binds(w)[j++]; /* what begin_work bound: a tensor's footprint */
    if (!(k->params[i].access & CUBERT_ACCESS_READ)) continue;
    const cubert_failure *f = cb_taint_find_bind(b, a->dev != dev, &in);
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
 * writers and readers before it. In the same pass, a peer binding's
 * address (its cell's: check_args marshalled the rest). Called only when
 * begin_work found a binding to order or the launch binds peer memory. */
static cubert_status order_and_marshal(cb_device *dev, cb_stream *s, cb_work *w, const cubert_kernel *k,
                                       const cubert_arg *args, uint32_t nargs, cubert_backend_arg *bargs) {
  for (uint32_t i = 0; i < nargs; i++) {
    cb_alloc *a = arg_alloc(&args[i]);
    if (!a) continue;
    bool peer = a->dev != dev, write = (k->params[i].access & CUBERT_ACCESS_WRITE) != 0;
    if (must_order(s, a, peer, write)) {
      cb_errb order;
      if (cb_order_access(dev, s, a, write, &order))
        return cb_work_fail_ordering(dev, w, s, &order, "launch", k->name);
    }
    if (peer) bargs[i].address = atomic_load(&a->shared)->address + args[i].handle->start;
  }
  return CUBERT_OK;
}

/* The launch under the device lock: the stream, the work record, the input
 * check, ordering, the module, the backend's launch, the write set settled. */
static cubert_status launch_locked(cb_errb *eb, cubert_client *c, const cubert_kernel *k, const cubert_launch_config *cfg,
                                   const cubert_arg *args, uint32_t nargs, launch_args *la) {
  cb_device *dev = c->dev;
  cb_stream *s;
  cubert_status st;
  if ((st = cb_client_stream(c, &s)) || (la->npeer && (st = check_peer_access(eb, dev, k, args, nargs))))
    return st;
  bind_state bs;
  cb_work *w = begin_work(dev, s, k, args, nargs, la, &bs);
  if (!w) return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  if ((!bs.clean && (st = skip_if_tainted(eb, dev, w, k, args, nargs))) ||
      ((bs.order || la->npeer) && (st = order_and_marshal(dev, s, w, k, args, nargs, la->bargs))))
    return st;
  cubert_berr err; /* a backend that fails fills it; the message buffer is not cleared for each launch */
  err.sticky = false;
  err.message[0] = '\0';
  void *module = NULL;
  if ((st = cb_module_get(dev, k, &module, &err))) return launch_failed(eb, dev, w, s, k, st, &err);
  st = dev->ops->launch(dev->bdev, s->bs, w->work, module, cfg, la->bargs, nargs, &err);
  if (st) return launch_failed(eb, dev, w, s, k, st, &err);
  if (bs.settle)
    cb_work_succeeded(dev, w);
  else
    cb_work_mark_uses(dev, w); /* a clean write set: releasing it changes nothing */
  dev->launches++;
  return CUBERT_OK;
}

/* The one pass's loop over the arguments (launch_one_pass): each argument
 * checked, bound in the record's slots from `b` on and marshalled for the
 * backend. With `image` (a constant at each call: the loop is made twice)
 * a value goes into the packed image at the kernel's offset for it (img,
 * with its size in sizes), else into a record of bargs. Returns the end of
 * the bindings made, NULL when it gave up at an argument (*end is then
 * that end). Few values live across the loop (pointers rather than
 * counts, the stream's id rather than the stream): the loop keeps them in
 * registers. */
static CB_ALWAYS_INLINE bool one_pass_bind(const cb_device *dev, uint32_t sid, const cubert_kernel *k,
                                           const cubert_arg *args, uint32_t nargs, cb_wbind *b, cb_wbind **end,
                                           bool image, unsigned char *img, uint64_t *sizes,
                                           cubert_backend_arg *bargs) {
  const cubert_param *p = k->params;
  const cubert_arg *ar = args;
  for (uint32_t i = 0; i < nargs; i++, p++, ar++) {
    /* both a buffer (CUBERT_PARAM_BUFFER is 0): one test */
    if ((ar->kind | p->kind) != CUBERT_PARAM_BUFFER) {
      if (ar->kind != CUBERT_PARAM_SCALAR || p->kind != CUBERT_PARAM_SCALAR || !ar->scalar ||
          ar->scalar_size != p->size)
        goto give_up;
      if (image) {
        unsigned char *dst = img + k->image_off[i];
        uint32_t n = ar->scalar_size;
        if (n == 4)
          memcpy(dst, ar->scalar, 4); /* the common sizes, a store each */
        else if (n == 8)
          memcpy(dst, ar->scalar, 8);
        else
          memcpy(dst, ar->scalar, n);
        sizes[i] = n;
      } else {
        bargs[i] = (cubert_backend_arg){.kind = CUBERT_PARAM_SCALAR, .access = p->access, .scalar = ar->scalar,
                                        .scalar_size = ar->scalar_size};
      }
      continue;
    }
    const cubert_handle *h = ar->handle;
    if (!h) goto give_up;
    /* every load first, into locals: the stores below go through pointers
     * the compiler cannot tell apart from these */
    cb_alloc *a = h->alloc;
    cubert_access access = p->access;
    uint64_t start = h->start, size = h->end - start;
    /* must_order for local memory, with the stream's id at hand */
    if (a->dev != dev || a->host || atomic_load_explicit(&a->shared, memory_order_relaxed) || a->xshare ||
        a->ledger.n || (a->last_writer && a->last_writer != sid) || ((access & CUBERT_ACCESS_WRITE) && a->nreaders))
      goto give_up;
    uint64_t address = a->block.address + start;
    if (image) {
      /* the kernel's pointer, 8 bytes at its offset; its bound bytes */
      memcpy(img + k->image_off[i], &address, sizeof address);
      sizes[i] = size;
    } else {
      /* field by field: the compound literal's zeroed padding costs more */
      cubert_backend_arg *ba = &bargs[i];
      ba->kind = CUBERT_PARAM_BUFFER;
      ba->access = access;
      ba->address = address;
      ba->size = size;
      ba->scalar = NULL;
      ba->scalar_size = 0;
      ba->owner = NULL;
    }
    cb_work_bind_known(b++, a, true, start, start + size, access, p->name);
  }
  *end = b;
  return true;
give_up:
  *end = b;
  return false;
}

/* The usual launch in one pass under the device lock: every argument is a
 * well-formed scalar or a buffer of this device's memory that is plain
 * (unshared, not a host buffer's, its ledger empty: nothing to find on
 * input or to release on output) and needs no ordering (its last writer
 * is this stream or none, and a write finds no readers). The pass checks
 * each argument, binds it in the work record and marshals it for the
 * backend at once (one_pass_bind): into one packed image when the kernel
 * has an image layout and the backend takes images (launch_image), else
 * into a record an argument (launch); then the module, the backend's
 * launch, the uses marked, as launch_locked does in that case. At the
 * first argument that is anything else, or when the thread's stream is not
 * made yet or the device cannot be entered, the pass gives up having
 * changed nothing (the record and its bindings undone, cb_work_abandon)
 * and returns false: the general path then checks, names and handles
 * every argument in its order. True: the launch was handled, *out its
 * status. Inline in cubert_launch: the usual launch is one frame (the
 * general path, launch_general, is out of line). */
static CB_ALWAYS_INLINE bool launch_one_pass(cb_errb *eb, cubert_client *c, const cubert_kernel *k,
                                             const cubert_launch_config *cfg, const cubert_arg *args, uint32_t nargs,
                                             cubert_status *out) {
  cb_device *dev = c->dev;
  if (nargs > CB_WBIND_INLINE || nargs != k->nparams || k->ntensors) return false;
  if (cb_device_enter(dev)) return false; /* lost: the general path says so after its checks */
  cb_stream *s = cb_client_stream_made(c);
  uint64_t last_work = s ? s->last_work : 0;
  cb_work *w = s ? cb_work_begin_inline(dev, s, "launch", (cubert_kernel *)k) : NULL;
  if (!w) {
    cb_device_leave(dev);
    return false;
  }
  cb_wbind *b = w->inl, *bend; /* nargs <= CB_WBIND_INLINE: the record's own slots */
  bool image = k->image && dev->ops->launch_image;
  _Alignas(16) unsigned char img[CUBERT_BACKEND_IMAGE_MAX];
  uint64_t sizes[CB_WBIND_INLINE];
  cubert_backend_arg bargs[CB_WBIND_INLINE];
  bool took = image ? one_pass_bind(dev, s->id, k, args, nargs, b, &bend, true, img, sizes, NULL)
                    : one_pass_bind(dev, s->id, k, args, nargs, b, &bend, false, NULL, NULL, bargs);
  uint32_t nb = (uint32_t)(bend - b);
  w->nb = nb;
  if (!took) {
    cb_work_abandon(dev, s, w, last_work);
    cb_device_leave(dev);
    return false;
  }
  w->plain = true; /* each binding passed the tests above: local, no host buffer, no pattern */
  cubert_berr err; /* a backend that fails fills it; the message buffer is not cleared for each launch */
  err.sticky = false;
  err.message[0] = '\0';
  void *module = NULL;
  cubert_status st = cb_module_get(dev, k, &module, &err);
  if (!st) {
    if (image) {
      cubert_backend_image im = {&k->layout, img, sizes};
      st = dev->ops->launch_image(dev->bdev, s->bs, w->work, module, cfg, &im, &err);
    } else {
      st = dev->ops->launch(dev->bdev, s->bs, w->work, module, cfg, bargs, nargs, &err);
    }
  }
  if (st) {
    st = launch_failed(eb, dev, w, s, k, st, &err);
  } else {
    /* plain memory of this device: releasing the write set changes
     * nothing; each binding's use marked as cb_work_mark_uses would */
    uint32_t stream = w->stream;
    uint64_t work = w->work;
    for (uint32_t j = 0; j < nb; j++) cb_mark_local(b[j].alloc, b[j].access, stream, work);
    dev->launches++;
  }
  cb_device_leave(dev);
  *out = st;
  return true;
}

/* Every other launch: the arguments checked without the lock (each
 * refusal names the argument), then launch_locked. */
static CB_NOINLINE cubert_status launch_general(cb_errb *eb, cubert_client *c, const cubert_kernel *k,
                                                const cubert_launch_config *cfg, const cubert_arg *args,
                                                uint32_t nargs) {
  launch_args la;
  cubert_status st;
  if (!(st = launch_args_init(eb, &la, k, nargs)) && !(st = check_args(eb, c->dev, k, args, nargs, &la)) &&
      !(st = cb_device_enter(c->dev))) {
    st = launch_locked(eb, c, k, cfg, args, nargs, &la);
    cb_device_leave(c->dev);
  }
  launch_args_free(&la);
  return st;
}

/* A launch of a kernel with its own check (the built-ins'): the check
 * first (a refusal changes nothing), then the launch with its write-only
 * buffers narrowed to what the kernel writes (runtime/kcheck.h). Out of
 * line: the usual launch pays one test of k->check for it. */
static CB_NOINLINE cubert_status launch_checked(cb_errb *eb, cubert_client *c, const cubert_kernel *k,
                                                const cubert_launch_config *cfg, const cubert_arg *args,
                                                uint32_t nargs) {
  cubert_arg narrowed[CB_KCHECK_MAX_ARGS];
  cubert_handle handles[CB_KCHECK_MAX_ARGS];
  const cubert_arg *use;
  cubert_status st = cb_kernel_check(eb, k, cfg, args, nargs, narrowed, handles, &use);
  if (!st && !launch_one_pass(eb, c, k, cfg, use, nargs, &st)) st = launch_general(eb, c, k, cfg, use, nargs);
  return st;
}

cubert_status cubert_launch(cubert_client *c, const cubert_kernel *k, const cubert_launch_config *cfg,
                            const cubert_arg *args, uint32_t nargs) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = check_call(&eb, c, k, cfg, args, nargs);
  if (!st && !(st = check_config(&eb, c->dev, k, cfg))) {
    /* the slow part of a first launch (a compile) without the device lock:
     * launches of other kernels go on meanwhile. It changes nothing a call
     * sees, only how long the load takes (runtime/module.c), so it comes
     * before the arguments' checks: a launch they refuse may have made it. */
    if (!atomic_load(&c->dev->gone)) cb_module_prepare(c->dev, k);
    if (k->check)
      st = launch_checked(&eb, c, k, cfg, args, nargs);
    else if (!launch_one_pass(&eb, c, k, cfg, args, nargs, &st))
      st = launch_general(&eb, c, k, cfg, args, nargs);
  }
  return cb_errb_return(&eb, st);
}
