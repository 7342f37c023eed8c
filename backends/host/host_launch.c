/* backends/host/host_launch.c: the host backend's modules (a kernel's host
 * function and parameter list, on the device's list) and launches (checked
 * against the module and the memory, then one work item that calls the host
 * function; a failure it returns is recorded for drain_failures). */
#include <errno.h>
#include <inttypes.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/str.h"
#include "backends/host/host_internal.h"
#include "backends/host/host_testing.h"

/* ------------------------------------------------------------ kernels */

/* ------------------------------------------------------------ testing seams */

static _Atomic(cb_host_prepare_hook) prepare_hook;
static void *_Atomic prepare_ctx;
static atomic_uint_fast64_t prepares, loads;
static atomic_int_fast64_t live_modules;

void cb_host_testing_set_prepare_hook(cb_host_prepare_hook hook, void *ctx) {
  atomic_store(&prepare_ctx, ctx);
  atomic_store(&prepare_hook, hook);
}

uint64_t cb_host_testing_prepares(void) { return atomic_load(&prepares); }
uint64_t cb_host_testing_loads(void) { return atomic_load(&loads); }
int64_t cb_host_testing_live_modules(void) { return atomic_load(&live_modules); }

/* Nothing to compile on the host: counts, and calls a test's hook (a slow
 * compile stand-in). Thread-safe; never under the device lock. */
void cb_host_module_prepare(void *device, const cubert_backend_kernel *kernel) {
  (void)device;
  atomic_fetch_add(&prepares, 1);
  cb_host_prepare_hook hook = atomic_load(&prepare_hook);
  if (hook) hook(kernel && kernel->name ? kernel->name : "", atomic_load(&prepare_ctx));
}

cubert_status cb_host_module_load(void *device, const cubert_backend_kernel *kernel,
                                  void **module, cubert_berr *err) {
  host_device *d = device;
  if (!kernel || !kernel->name)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: module load: no kernel", d->name);
  if (!kernel->host_fn)
    return cubert_berr_set(err, CUBERT_ERR_UNSUPPORTED, "%s: kernel `%s` has no host function",
                           d->name, kernel->name);
  if (kernel->nparams && !kernel->params)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: kernel `%s`: %" PRIu32 " parameters but no list", d->name,
                           kernel->name, kernel->nparams);
  host_module *m = cb_calloc(1, sizeof *m);
  size_t nparams = kernel->nparams;
  if (m) {
    m->name = cb_strdup(kernel->name);
    m->kinds = cb_calloc(nparams + 1, sizeof *m->kinds);
    m->scalar_sizes = cb_calloc(nparams + 1, sizeof *m->scalar_sizes);
  }
  if (!m || !m->name || !m->kinds || !m->scalar_sizes) {
    if (m) {
      cb_free(m->name);
      cb_free(m->kinds);
      cb_free(m->scalar_sizes);
    }
    cb_free(m);
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no host memory to load kernel `%s`",
                           d->name, kernel->name);
  }
  m->fn = kernel->host_fn;
  m->nparams = kernel->nparams;
  for (size_t i = 0; i < nparams; i++) {
    m->kinds[i] = kernel->params[i].kind;
    m->scalar_sizes[i] = kernel->params[i].size;
  }
  pthread_mutex_lock(&d->lock);
  m->next = d->modules;
  if (m->next)
    m->next->prev = m;
  d->modules = m;
  pthread_mutex_unlock(&d->lock);
  atomic_fetch_add(&loads, 1);
  atomic_fetch_add(&live_modules, 1);
  *module = m;
  return CUBERT_OK;
}

void cb_host_module_free(host_module *m) {
  atomic_fetch_sub(&live_modules, 1);
  cb_free(m->name);
  cb_free(m->kinds);
  cb_free(m->scalar_sizes);
  cb_free(m);
}

void cb_host_module_unload(void *device, void *module) {
  host_device *d = device;
  host_module *m = module;
  if (!m)
    return;
  pthread_mutex_lock(&d->lock);
  if (m->prev)
    m->prev->next = m->next;
  else
    d->modules = m->next;
  if (m->next)
    m->next->prev = m->prev;
  pthread_mutex_unlock(&d->lock);
  cb_host_module_free(m);
}

/* A launch and everything it needs, in one block: argument pointers, sizes,
 * scalar copies (64 bytes each, aligned for any scalar type), the name. */
typedef struct launch_item {
  cb_work work;
  host_device *device;
  cubert_host_fn fn;
  const char *name;
  cubert_host_launch launch;
} launch_item;

/* A slot holds a scalar or a tensor descriptor (cubert_tensor, by value). */
#define HOST_SLOT (HOST_MAX_SCALAR > sizeof(cubert_tensor) ? HOST_MAX_SCALAR : sizeof(cubert_tensor))
typedef struct scalar_slot {
  alignas(16) unsigned char bytes[HOST_SLOT];
} scalar_slot;

static void launch_run(cb_work *w) {
  launch_item *it = (launch_item *)w;
  char message[256] = "";
  cubert_status st = it->fn(&it->launch, message, sizeof message);
  if (st == CUBERT_OK)
    return;
  if ((int)st < 0 || st >= CUBERT_STATUS_COUNT_)
    st = CUBERT_ERR_LAUNCH; /* a host function returning garbage still failed */
  message[sizeof message - 1] = '\0';
  char full[400]; /* room for every part; record_failure cuts it to the record's size */
  int len = snprintf(full, sizeof full, "%s: kernel `%s` failed: %s", it->device->name, it->name,
                     message[0] ? message : "(no message)");
  (void)len; /* a long message is cut, never overrun */
  cb_host_record_failure(it->device, w->tag, st, full);
}

static cubert_status check_shape(host_device *d, const char *kernel, const cubert_launch_config *c,
                                 cubert_berr *err) {
  static const uint32_t max_grid[3] = {2147483647u, 65535, 65535};
  static const uint32_t max_block[3] = {1024, 1024, 64};
  for (int k = 0; k < 3; k++) {
    if (c->grid[k] == 0 || c->grid[k] > max_grid[k] || c->block[k] == 0 ||
        c->block[k] > max_block[k])
      return cubert_berr_set(err, CUBERT_ERR_LAUNCH_CONFIG,
                             "%s: kernel `%s`: grid (%" PRIu32 ", %" PRIu32 ", %" PRIu32
                             ") block (%" PRIu32 ", %" PRIu32 ", %" PRIu32 ") outside the limits",
                             d->name, kernel, c->grid[0], c->grid[1], c->grid[2], c->block[0],
                             c->block[1], c->block[2]);
  }
  uint64_t threads = (uint64_t)c->block[0] * c->block[1] * c->block[2];
  if (threads > HOST_MAX_THREADS)
    return cubert_berr_set(err, CUBERT_ERR_LAUNCH_CONFIG,
                           "%s: kernel `%s`: %" PRIu64 " threads per block (at most %u)", d->name,
                           kernel, threads, HOST_MAX_THREADS);
  if (c->shared_memory > HOST_MAX_SHARED)
    return cubert_berr_set(err, CUBERT_ERR_LAUNCH_CONFIG,
                           "%s: kernel `%s`: %" PRIu32 " bytes of shared memory (at most %u)",
                           d->name, kernel, c->shared_memory, HOST_MAX_SHARED);
  return CUBERT_OK;
}

/* Writes i in decimal at p (NUL-terminated); p has room for 11 bytes. */
static void arg_number(char *p, uint32_t i) {
  char digits[10];
  int n = 0;
  do {
    digits[n++] = (char)('0' + i % 10);
    i /= 10;
  } while (i);
  while (n) *p++ = digits[--n];
  *p = 0;
}

cubert_status cb_host_launch(void *device, void *stream, uint64_t work, void *module,
                             const cubert_launch_config *config,
                             const cubert_backend_arg *args, uint32_t nargs, cubert_berr *err) {
  host_device *d = device;
  host_module *m = module;
  cubert_status st = cb_host_check_stream(d, stream, "launch", err);
  if (st != CUBERT_OK)
    return st;
  if (!m || !config)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: launch without %s", d->name,
                           m ? "a configuration" : "a module");
  st = check_shape(d, m->name, config, err);
  if (st != CUBERT_OK)
    return st;
  if (nargs != m->nparams || (nargs && !args))
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "%s: kernel `%s` takes %" PRIu32 " arguments, %" PRIu32 " given", d->name,
                           m->name, m->nparams, nargs);
  bool buffers_local = cb_host_buffers_local(d, args, nargs); /* one lock for all buffers */
  for (uint32_t i = 0; i < nargs; i++) {
    const cubert_backend_arg *a = &args[i];
    char what[24] = "argument ";
    arg_number(what + 9, i); /* not snprintf: this runs for every argument of every launch */
    if (a->kind != m->kinds[i])
      return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                             "%s: kernel `%s`: %s is of kind %d, the kernel wants %d", d->name,
                             m->name, what, (int)a->kind, (int)m->kinds[i]);
    if (a->kind == CUBERT_PARAM_SCALAR) {
      if (!a->scalar || a->scalar_size == 0 || a->scalar_size > HOST_MAX_SCALAR ||
          a->scalar_size != m->scalar_sizes[i])
        return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                               "%s: kernel `%s`: %s is a %" PRIu32 "-byte scalar, the kernel "
                               "wants %" PRIu32 " bytes",
                               d->name, m->name, what, a->scalar ? a->scalar_size : 0,
                               m->scalar_sizes[i]);
    } else if (a->kind == CUBERT_PARAM_TENSOR) {
      if (!a->scalar || a->scalar_size != sizeof(cubert_tensor))
        return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                               "%s: kernel `%s`: %s is a tensor without its %zu-byte descriptor", d->name,
                               m->name, what, sizeof(cubert_tensor));
    } else if (a->kind == CUBERT_PARAM_BUFFER) {
      if (!buffers_local) st = cb_host_check_range(d, "launch", what, a->address, a->size, err);
    } else if (a->kind == CUBERT_PARAM_PEER_BUFFER) {
      st = cb_host_check_peer_range(d, what, a->address, a->size, err);
    } else {
      st = cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: kernel `%s`: %s of unknown kind %d",
                           d->name, m->name, what, (int)a->kind);
    }
    if (st != CUBERT_OK)
      return st;
  }

  /* One block: the item, a slot per scalar or tensor (buffers need none: a
   * 16-buffer launch stays in the allocator's small sizes), the argument
   * pointers, the sizes, the name. */
  size_t n = nargs, nscalars = 0;
  for (size_t i = 0; i < n; i++)
    nscalars += args[i].kind == CUBERT_PARAM_SCALAR || args[i].kind == CUBERT_PARAM_TENSOR;
  size_t namelen = strlen(m->name) + 1;
  size_t off_slots = align_up(sizeof(launch_item), alignof(scalar_slot));
  size_t off_args = off_slots + nscalars * sizeof(scalar_slot);
  size_t off_sizes = off_args + n * sizeof(void *);
  size_t off_name = off_sizes + n * sizeof(uint64_t);
  unsigned char *block = cb_malloc(off_name + namelen);
  if (!block)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no host memory to launch `%s`", d->name,
                           m->name);
  launch_item *it = (launch_item *)block;
  scalar_slot *slots = (scalar_slot *)(block + off_slots);
  void **ptrs = (void **)(block + off_args);
  uint64_t *sizes = (uint64_t *)(block + off_sizes);
  char *name = (char *)(block + off_name);
  memcpy(name, m->name, namelen);
  for (size_t i = 0, j = 0; i < n; i++) {
    if (args[i].kind == CUBERT_PARAM_SCALAR || args[i].kind == CUBERT_PARAM_TENSOR) {
      memcpy(slots[j].bytes, args[i].scalar, args[i].scalar_size);
      ptrs[i] = slots[j++].bytes;
      sizes[i] = args[i].scalar_size;
    } else {
      ptrs[i] = (void *)(uintptr_t)args[i].address;
      sizes[i] = args[i].size;
    }
  }
  it->work.run = launch_run;
  it->work.release = cb_host_free_item;
  it->work.tag = work;
  it->device = d;
  it->fn = m->fn;
  it->name = name;
  memcpy(it->launch.grid, config->grid, sizeof it->launch.grid);
  memcpy(it->launch.block, config->block, sizeof it->launch.block);
  it->launch.shared_memory = config->shared_memory;
  it->launch.nargs = nargs;
  it->launch.args = ptrs;
  it->launch.sizes = sizes;
  return cb_host_enqueue(stream, &it->work, "launch", err);
}

cubert_status cb_host_launch_image(void *device, void *stream, uint64_t work, void *module,
                                   const cubert_launch_config *config, const cubert_backend_image *image,
                                   cubert_berr *err) {
  host_device *d = device;
  const cubert_backend_layout *l = image ? image->layout : NULL;
  if (!l || (l->nargs && (!image->data || !l->offset || !l->params || !image->sizes)))
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s: launch of an image without its parts", d->name);
  cubert_backend_arg stack[16];
  cubert_backend_arg *args = stack;
  uint32_t nargs = l->nargs;
  if (nargs > 16 && !(args = cb_malloc(nargs * sizeof *args)))
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%s: no host memory to launch %" PRIu32 " arguments",
                           d->name, nargs);
  if (nargs) cubert_backend_args_of_image(image, args);
  cubert_status st = cb_host_launch(device, stream, work, module, config, args, nargs, err);
  if (args != stack) cb_free(args);
  return st;
}
