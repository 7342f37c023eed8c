/* backends/hip/hip_backend.c: the HIP backend's ops table: devices, memory,
 * modules, launches, peers. Streams, progress and transfers are in
 * hip_stream.c, compiling and the disk cache in hip_compile.c, error
 * conversion in hip_error.c; hip_internal.h has the objects and locks.
 *
 * Devices: open() counts them with hipGetDeviceCount (HIP applies
 * HIP_VISIBLE_DEVICES on AMD, CUDA applies CUDA_VISIBLE_DEVICES on NVIDIA);
 * no device, no driver or a driver too old is zero devices, not an error.
 * device_open() makes the primary context exist (hipSetDevice, hipFree(0):
 * the CUDA 11 runtime creates it lazily, and the module API needs it), and
 * on NVIDIA retains it so each call can make it current on its thread.
 *
 * Modules: a prebuilt code object for the device's target is loaded as is
 * (a target "gfx90a" matches a device "gfx90a:sramecc+:xnack-"); otherwise
 * the source is compiled (hip_compile.c) once per target and kept in memory
 * for the other devices of that target, and on disk across processes. A
 * cached object the driver refuses is rebuilt once.
 *
 * Peers: a device always reaches its own memory (peer calls on one device
 * succeed without asking HIP); other pairs are asked of HIP and enabled once
 * per pair (enabling twice is success). link_info: hipExtGetLinkTypeAndHopCount
 * on AMD; on NVIDIA HIP has no such call, so CUBERT_ERR_UNSUPPORTED. */
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "backends/hip/hip_compile.h"
#include "backends/hip/hip_internal.h"
#include "backends/hip/hip_testing.h"

#define MAX_SCALAR 64u
#define STACK_ARGS 16u
#define PACKED_MAX 512u /* bytes of arguments a launch packs on the stack */

/* ------------------------------------------------------------ helpers */

static cubert_status enter_live(cb_hip_device *dev, cubert_berr *err) {
  cubert_status st = cb_hip_check_lost(dev, err);
  return st ? st : cb_hip_enter(dev, err);
}

/* "gfx90a:sramecc+:xnack-" -> length of "gfx90a". */
static size_t base_len(const char *arch) {
  const char *colon = strchr(arch, ':');
  return colon ? (size_t)(colon - arch) : strlen(arch);
}

static bool arch_matches(const char *object_arch, const char *device_arch) {
  if (!object_arch) return false;
  if (strcmp(object_arch, device_arch) == 0) return true;
  /* an object built for the bare target runs on any feature setting */
  return strchr(object_arch, ':') == NULL && base_len(device_arch) == strlen(object_arch) &&
         strncmp(object_arch, device_arch, strlen(object_arch)) == 0;
}

/* ------------------------------------------------------------ backend */

/* Appends "; <path>: <what>" for a device file a HIP process must open. */
static void device_file_note(char *buf, size_t cap, const char *path) {
  size_t n = strlen(buf);
  struct stat st;
  if (stat(path, &st) != 0) {
    cb_hip_format(buf + n, cap - n, "; %s: %s", path, strerror(errno));
    return;
  }
  if (access(path, R_OK | W_OK) != 0) {
    struct group *g = getgrgid(st.st_gid);
    cb_hip_format(buf + n, cap - n, "; %s: %s (mode %03o, group %s: is this user in it?)", path,
                  strerror(errno), (unsigned)(st.st_mode & 0777), g ? g->gr_name : "?");
    return;
  }
  cb_hip_format(buf + n, cap - n, "; %s: can be opened", path);
}

/* Why hipGetDeviceCount found no device, in words a user can act on: HIP's
 * own answer, the device files it needs and whether this user may open
 * them, and the visibility variables that narrow the devices (set, even
 * empty, hides every device). Goes in err->message of a successful open
 * with zero devices (backends/backend.h). */
static void no_device_reason(hipError_t e, char *buf, size_t cap) {
  char desc[200];
  cb_hip_describe(e, desc, sizeof desc);
  cb_hip_format(buf, cap, "hipGetDeviceCount found no device: %s", e == hipSuccess ? "0 devices" : desc);
#if CB_HIP_NVIDIA
  device_file_note(buf, cap, "/dev/nvidiactl");
  device_file_note(buf, cap, "/dev/nvidia0");
  static const char *const vars[] = {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"};
#else
  device_file_note(buf, cap, "/dev/kfd");
  device_file_note(buf, cap, "/dev/dri/renderD128");
  static const char *const vars[] = {"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"};
#endif
  bool any = false;
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (!v) continue;
    size_t n = strlen(buf);
    cb_hip_format(buf + n, cap - n, "; %s=\"%s\"%s", vars[i], v, *v ? "" : " (set, empty)");
    any = true;
  }
  for (size_t i = 0; !any && i < sizeof vars / sizeof vars[0]; i++) {
    size_t n = strlen(buf);
    cb_hip_format(buf + n, cap - n, "%s%s%s", i ? ", " : "; none of ", vars[i],
                  i + 1 == sizeof vars / sizeof vars[0] ? " is set" : "");
  }
}

static cubert_status hip_open(const cubert_backend_config *config, void **backend,
                              int *device_count, cubert_berr *err) {
  cubert_status bad = cb_hip_pipe_check_env(err); /* before any HIP call: a typo refuses the runtime */
  if (bad) return bad;
  int count = 0;
  hipError_t e = hipGetDeviceCount(&count);
  bool none = e == hipErrorNoDevice || e == hipErrorInsufficientDriver;
#if CB_HIP_NVIDIA
  if (e == hipErrorUnknown) {
    /* HIP folds "the driver is only a stub" (a machine or container
     * without the NVIDIA driver) into hipErrorUnknown */
    cudaError_t c = cudaPeekAtLastError();
    none = c == cudaErrorStubLibrary || c == cudaErrorNoDevice || c == cudaErrorInsufficientDriver;
  }
#endif
  if (none || (e == hipSuccess && count <= 0)) {
    count = 0;
    if (err) no_device_reason(e, err->message, sizeof err->message);
#if CB_HIP_NVIDIA
    (void)cudaGetLastError(); /* said above; nothing to report later */
#endif
  } else if (e != hipSuccess) {
    char desc[200];
    cb_hip_describe(e, desc, sizeof desc);
    return cubert_berr_set(err, CUBERT_ERR_BACKEND, "hipGetDeviceCount: %s", desc);
  }
  if (count < 0) count = 0;
  cb_hip_backend *b = cb_calloc(1, sizeof *b);
  if (!b) return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory opening HIP");
  b->device_count = count;
  /* the runtime's placement, for host memory near a device (both or none) */
  if (config) {
    b->place_thread = config->place_thread;
    b->place_ctx = config->place_ctx;
  }
  if (config && config->place_alloc && config->place_free) {
    b->place_alloc = config->place_alloc;
    b->place_free = config->place_free;
    b->place_ctx = config->place_ctx;
  }
  pthread_mutex_init(&b->compile_lock, NULL);
  *backend = b;
  *device_count = count;
  return CUBERT_OK;
}

static void hip_close(void *backend) {
  cb_hip_backend *b = backend;
  if (!b) return;
  for (cb_hip_code *c = b->codes, *next; c; c = next) {
    next = c->next;
    cb_free(c->key_text);
    cb_free(c->data);
    cb_free(c);
  }
  pthread_mutex_destroy(&b->compile_lock);
  cb_free(b);
}

/* ------------------------------------------------------------ devices */

static void device_free(cb_hip_device *dev) {
  pthread_mutex_destroy(&dev->streams_lock);
  pthread_mutex_destroy(&dev->fail_lock);
  pthread_mutex_destroy(&dev->staging_lock);
  pthread_mutex_destroy(&dev->peer_lock);
  pthread_mutex_destroy(&dev->fill_lock);
  pthread_mutex_destroy(&dev->pipe_lock);
  cb_free(dev->failures);
  cb_free(dev->peer_enabled);
  cb_free(dev);
}

static cubert_status hip_device_open(void *backend, int index, void **device,
                                     cubert_device_info *info, cubert_berr *err) {
  cb_hip_backend *b = backend;
  if (index < 0 || index >= b->device_count)
    return cubert_berr_set(err, CUBERT_ERR_NO_DEVICE, "hip device %d does not exist (%d devices)",
                           index, b->device_count);
  cb_hip_device *dev = cb_calloc(1, sizeof *dev);
  bool *peers = cb_calloc((size_t)b->device_count, sizeof *peers);
  if (!dev || !peers) {
    cb_free(dev);
    cb_free(peers);
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory opening hip device %d", index);
  }
  dev->backend = b;
  dev->index = index;
  dev->peer_enabled = peers;
  atomic_init(&dev->lost, false);
  pthread_mutex_init(&dev->streams_lock, NULL);
  pthread_mutex_init(&dev->fail_lock, NULL);
  pthread_mutex_init(&dev->staging_lock, NULL);
  pthread_mutex_init(&dev->peer_lock, NULL);
  pthread_mutex_init(&dev->fill_lock, NULL);
  pthread_mutex_init(&dev->pipe_lock, NULL);
  cb_hip_format(dev->label, sizeof dev->label, "hip device %d", index);

  hipError_t e = hipSetDevice(index);
  const char *what = "hipSetDevice";
  if (e == hipSuccess) {
    what = "hipFree(0), creating the primary context";
    e = hipFree(NULL);
  }
#if CB_HIP_NVIDIA
  hipDevice_t hd = 0;
  if (e == hipSuccess) {
    what = "hipDeviceGet";
    e = hipDeviceGet(&hd, index);
  }
  if (e == hipSuccess) {
    what = "hipDevicePrimaryCtxRetain";
    e = hipDevicePrimaryCtxRetain(&dev->context, hd);
  }
#endif
  hipDeviceProp_t p;
  memset(&p, 0, sizeof p);
  if (e == hipSuccess) {
    what = "hipGetDeviceProperties";
    e = hipGetDeviceProperties(&p, index);
  }
  char bus[64] = "";
  if (e == hipSuccess) {
    what = "hipDeviceGetPCIBusId";
    e = hipDeviceGetPCIBusId(bus, (int)sizeof bus, index);
  }
  if (e != hipSuccess) {
    cubert_status st = cb_hip_fail(NULL, err, e, CUBERT_ERR_BACKEND, "opening hip device %d: %s", index, what);
#if CB_HIP_NVIDIA
    if (dev->context) hipDevicePrimaryCtxRelease(hd);
#endif
    device_free(dev);
    return st;
  }
  for (char *c = bus; *c; c++) *c = (char)tolower((unsigned char)*c);

  cb_hip_format(dev->name, sizeof dev->name, "%s", p.name[0] ? p.name : "HIP device");
#if CB_HIP_NVIDIA
  cb_hip_format(dev->arch, sizeof dev->arch, "sm_%d%d", p.major, p.minor);
#else
  /* (gcnArch, the number, is gone from ROCm 6: the name is what counts) */
  cb_hip_format(dev->arch, sizeof dev->arch, "%s", p.gcnArchName[0] ? p.gcnArchName : "gfx-unknown");
#endif
  cb_hip_format(dev->label, sizeof dev->label, "hip device %d (%s, %s, %s)", index, dev->name, dev->arch,
           bus[0] ? bus : "no bus id");

  memset(info, 0, sizeof *info);
  cb_hip_format(info->name, sizeof info->name, "%s", dev->name);
  cb_hip_format(info->arch, sizeof info->arch, "%s", dev->arch);
  cb_hip_format(info->pci_bus_id, sizeof info->pci_bus_id, "%s", bus);
  info->total_memory = p.totalGlobalMem;
  info->max_threads_per_block = p.maxThreadsPerBlock > 0 ? (uint32_t)p.maxThreadsPerBlock : 0;
  for (int i = 0; i < 3; i++) {
    info->max_block[i] = p.maxThreadsDim[i] > 0 ? (uint32_t)p.maxThreadsDim[i] : 0;
    info->max_grid[i] = p.maxGridSize[i] > 0 ? (uint32_t)p.maxGridSize[i] : 0;
  }
  info->max_shared_memory = p.sharedMemPerBlock > UINT32_MAX ? UINT32_MAX : (uint32_t)p.sharedMemPerBlock;
  info->warp_size = p.warpSize > 0 ? (uint32_t)p.warpSize : 0;
  info->multiprocessors = p.multiProcessorCount > 0 ? (uint32_t)p.multiProcessorCount : 0;
  *device = dev;
  return CUBERT_OK;
}

static void hip_module_unload(void *device, void *module);

static void hip_device_close(void *device) {
  cb_hip_device *dev = device;
  if (!dev) return;
  (void)cb_hip_enter(dev, NULL);
  cb_hip_stream_teardown(dev);
  cb_hip_pipe_teardown(dev);
  if (dev->fill) hip_module_unload(dev, dev->fill);
#if CB_HIP_NVIDIA
  hipDevice_t hd = 0;
  if (dev->context && hipDeviceGet(&hd, dev->index) == hipSuccess) hipDevicePrimaryCtxRelease(hd);
#endif
  device_free(dev);
}

/* ------------------------------------------------------------ memory */

static cubert_status hip_mem_alloc(void *device, uint64_t size, cubert_backend_mem *mem,
                                   cubert_berr *err) {
  cb_hip_device *dev = device;
  cubert_status st = enter_live(dev, err);
  if (st) return st;
  if (size > SIZE_MAX)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "%" PRIu64 " bytes do not fit size_t", size);
  void *p = NULL;
#if CB_HIP_NVIDIA
  /* CUDA device memory already honours system-scope atomics between peers */
  hipError_t e = hipMalloc(&p, (size_t)size);
  const char *how = "hipMalloc";
#else
  /* AMD keeps plain device memory coherent only at synchronisation points;
   * fine-grained memory is coherent while kernels run (ROCm/clr
   * hipamd/src/hip_memory.cpp, hipExtMallocWithFlags) */
  bool fine = mem->flags & CUBERT_BACKEND_MEM_FINE_GRAINED;
  hipError_t e = fine ? hipExtMallocWithFlags(&p, (size_t)size, hipDeviceMallocFinegrained)
                      : hipMalloc(&p, (size_t)size);
  const char *how = fine ? "hipExtMallocWithFlags(hipDeviceMallocFinegrained)" : "hipMalloc";
#endif
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_BACKEND, "%s of %" PRIu64 " bytes on %s", how, size,
                       dev->label);
  mem->address = (uint64_t)(uintptr_t)p;
  mem->size = size;
  mem->cookie = NULL;
  return CUBERT_OK;
}

static void hip_mem_free(void *device, cubert_backend_mem *mem) {
  cb_hip_device *dev = device;
  if (!mem || !mem->address) return;
  (void)cb_hip_enter(dev, NULL);
  if (mem->flags & CUBERT_BACKEND_MEM_IMPORTED)
    (void)hipIpcCloseMemHandle(CB_HIP_PTR(mem->address));
  else
    (void)hipFree(CB_HIP_PTR(mem->address));
  mem->address = 0;
}

/* Memory of another process: a hipIpcMemHandle_t of a whole hipMalloc
 * (CUBERT_MEMORY_SHAREABLE memory is never a pool's sub-allocation, so the
 * handle opens to exactly its bytes; the runtime's descriptor carries the
 * view's offset and size). */
_Static_assert(sizeof(hipIpcMemHandle_t) <= CUBERT_BACKEND_IPC_SIZE, "hipIpcMemHandle_t does not fit");

static cubert_status hip_mem_export(void *device, const cubert_backend_mem *mem,
                                    unsigned char ipc[CUBERT_BACKEND_IPC_SIZE], cubert_berr *err) {
  cb_hip_device *dev = device;
  cubert_status st = enter_live(dev, err);
  if (st) return st;
  hipIpcMemHandle_t h;
  hipError_t e = hipIpcGetMemHandle(&h, CB_HIP_PTR(mem->address));
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_BACKEND, "hipIpcGetMemHandle of %" PRIu64 " bytes on %s", mem->size,
                       dev->label);
  memset(ipc, 0, CUBERT_BACKEND_IPC_SIZE);
  memcpy(ipc, &h, sizeof h);
  return CUBERT_OK;
}

static cubert_status hip_mem_import(void *device, const unsigned char ipc[CUBERT_BACKEND_IPC_SIZE], uint64_t size,
                                    cubert_backend_mem *mem, cubert_berr *err) {
  cb_hip_device *dev = device;
  cubert_status st = enter_live(dev, err);
  if (st) return st;
  hipIpcMemHandle_t h;
  memcpy(&h, ipc, sizeof h);
  void *p = NULL;
  hipError_t e = hipIpcOpenMemHandle(&p, h, hipIpcMemLazyEnablePeerAccess);
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_BACKEND,
                       "hipIpcOpenMemHandle of %" PRIu64 " bytes on %s (the handle must come from another "
                       "process: CUDA refuses one of this very process)",
                       size, dev->label);
  mem->address = (uint64_t)(uintptr_t)p;
  mem->size = size;
  mem->cookie = NULL;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ modules */

/* Loads a copy of `image` (the module keeps it: not every HIP release
 * promises to be done with the image when hipModuleLoadData returns) and
 * finds `entry` in it. */
static cubert_status load_image(cb_hip_device *dev, const void *image, size_t size,
                                const char *kname, const char *entry, uint32_t nparams,
                                cb_hip_module **out, cubert_berr *err) {
  cb_hip_module *m = cb_calloc(1, sizeof *m);
  void *copy = cb_malloc(size);
  if (!m || !copy) {
    cb_free(m);
    cb_free(copy);
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory loading `%s`", kname);
  }
  memcpy(copy, image, size);
  m->image = copy;
  hipError_t e = hipModuleLoadData(&m->module, copy);
  if (e != hipSuccess) {
    cb_free(copy);
    cb_free(m);
    return cb_hip_fail(dev, err, e, CUBERT_ERR_COMPILE, "loading the code of kernel `%s` on %s", kname,
                       dev->label);
  }
  e = hipModuleGetFunction(&m->function, m->module, entry);
  if (e != hipSuccess) {
    (void)hipModuleUnload(m->module);
    cb_free(m->image);
    cb_free(m);
    cubert_status st = cb_hip_fail(dev, err, e, CUBERT_ERR_COMPILE,
                                   "kernel `%s`: no entry `%s` in its code for %s", kname, entry,
                                   dev->arch);
    return st == CUBERT_ERR_DEVICE_LOST ? st : CUBERT_ERR_COMPILE;
  }
  m->nparams = nparams;
  cb_hip_format(m->name, sizeof m->name, "%s", kname);
  *out = m;
  return CUBERT_OK;
}

/* The backend's code for `key` (hash h), NULL when none. Under compile_lock. */
static cb_hip_code *code_find(cb_hip_backend *b, uint64_t h, const char *key) {
  for (cb_hip_code *c = b->codes; c; c = c->next)
    if (c->key == h && strcmp(c->key_text, key) == 0) return c;
  return NULL;
}

/* Code for `k` on the device's target: from the backend's memory, else
 * compiled (through the disk cache). Called with the backend's compile lock
 * held and returns with it held, but drops it while compiling, so a compile
 * holds up no module_load of code already there (module_prepare compiles
 * without the device lock; module_load then finds the code). Entries are
 * never freed before the backend closes; a rebuild replaces an entry's code
 * under the lock. */
static cubert_status code_for(cb_hip_device *dev, const cubert_backend_kernel *k, unsigned flags,
                              const cb_hip_code **out, bool *from_disk, cubert_berr *err) {
  cb_hip_backend *b = dev->backend;
  const char *entry = k->entry ? k->entry : k->name;
  size_t cap = 256 + strlen(entry) + (k->options ? strlen(k->options) : 0);
  char *key = cb_malloc(cap);
  if (!key) return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  size_t srclen = strlen(k->source);
  uint64_t srchash = k->source_hash ? k->source_hash : cubert_hash64(k->source, srclen);
  snprintf(key, cap, "%s\n%s\n%016" PRIx64 ":%zu\n%s", dev->arch, entry, srchash, srclen,
           k->options ? k->options : "");
  uint64_t h = cubert_hash64(key, strlen(key));
  cb_hip_code *c = code_find(b, h, key);
  if (c && !(flags & CB_HIP_COMPILE_REBUILD)) {
    cb_free(key);
    *out = c;
    *from_disk = false;
    return CUBERT_OK;
  }
  void *data = NULL;
  size_t size = 0;
  pthread_mutex_unlock(&b->compile_lock);
  cubert_status st = cb_hip_compile(dev->arch, k, flags, &data, &size, from_disk, err);
  pthread_mutex_lock(&b->compile_lock);
  if (st != CUBERT_OK) {
    cb_free(key);
    return st;
  }
  c = code_find(b, h, key); /* another thread may have put it there meanwhile */
  if (c && !(flags & CB_HIP_COMPILE_REBUILD)) {
    cb_free(data); /* theirs is the same code */
    cb_free(key);
    *out = c;
    return CUBERT_OK;
  }
  if (c) { /* a rebuild replaces the entry's code */
    cb_free(c->data);
    cb_free(key);
  } else {
    c = cb_calloc(1, sizeof *c);
    if (!c) {
      cb_free(key);
      cb_free(data);
      return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    c->key = h;
    c->key_text = key;
    c->next = b->codes;
    b->codes = c;
  }
  c->data = data;
  c->size = size;
  *out = c;
  return CUBERT_OK;
}

/* Whether one of the kernel's code objects is for the device's target. */
static bool has_object_for(const cb_hip_device *dev, const cubert_backend_kernel *k) {
  for (uint32_t i = 0; i < k->nobjects; i++)
    if (arch_matches(k->objects[i].arch, dev->arch) && k->objects[i].data && k->objects[i].size) return true;
  return false;
}

/* The hiprtc compile of a kernel with no code object for the target, into
 * the backend's code cache, without the device lock (backend.h); a failure
 * is left for module_load to find and report. */
static void hip_module_prepare(void *device, const cubert_backend_kernel *k) {
  cb_hip_device *dev = device;
  if (!k || !k->name || !k->source || has_object_for(dev, k) || atomic_load(&dev->lost)) return;
  cb_hip_backend *b = dev->backend;
  const cb_hip_code *code = NULL;
  bool from_disk = false;
  cubert_berr ignored = {0};
  pthread_mutex_lock(&b->compile_lock);
  (void)code_for(dev, k, 0, &code, &from_disk, &ignored);
  pthread_mutex_unlock(&b->compile_lock);
}

static cubert_status hip_module_load(void *device, const cubert_backend_kernel *k, void **module,
                                     cubert_berr *err) {
  cb_hip_device *dev = device;
  cubert_status st = enter_live(dev, err);
  if (st) return st;
  if (!k || !k->name)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "module_load on %s: no kernel", dev->label);
  const char *entry = k->entry ? k->entry : k->name;
  cb_hip_module *m = NULL;
  for (uint32_t i = 0; i < k->nobjects; i++) {
    const cubert_code_object *o = &k->objects[i];
    if (!arch_matches(o->arch, dev->arch) || !o->data || !o->size) continue;
    st = load_image(dev, o->data, o->size, k->name, entry, k->nparams, &m, err);
    if (st == CUBERT_OK) *module = m;
    /* an object the driver refuses: the source, when there is one, may do */
    if (st != CUBERT_ERR_COMPILE || !k->source) return st;
    break;
  }
  if (!k->source)
    return cubert_berr_set(err, CUBERT_ERR_COMPILE,
                           "kernel `%s` has no code object for %s and no source to compile", k->name,
                           dev->arch);
  cb_hip_backend *b = dev->backend;
  pthread_mutex_lock(&b->compile_lock);
  const cb_hip_code *code = NULL;
  bool from_disk = false;
  st = code_for(dev, k, 0, &code, &from_disk, err);
  if (st == CUBERT_OK) {
    st = load_image(dev, code->data, code->size, k->name, entry, k->nparams, &m, err);
    if (st == CUBERT_ERR_COMPILE && from_disk && !atomic_load(&dev->lost)) {
      /* a cached object the driver refuses: build it afresh, once */
      st = code_for(dev, k, CB_HIP_COMPILE_REBUILD, &code, &from_disk, err);
      if (st == CUBERT_OK) st = load_image(dev, code->data, code->size, k->name, entry, k->nparams, &m, err);
    }
  }
  pthread_mutex_unlock(&b->compile_lock);
  if (st == CUBERT_OK) *module = m;
  return st;
}

static void hip_module_unload(void *device, void *module) {
  cb_hip_module *m = module;
  if (!m) return;
  (void)cb_hip_enter(device, NULL);
  (void)hipModuleUnload(m->module);
  cb_free(m->image);
  cb_free(m);
}

/* ------------------------------------------------------------ launch */

cubert_status cb_hip_launch_raw(cb_hip_device *dev, cb_hip_stream *s, cb_hip_module *m,
                                const uint32_t grid[3], const uint32_t block[3], uint32_t shared,
                                void **params, void **extra, cubert_berr *err) {
  hipError_t e = hipModuleLaunchKernel(m->function, grid[0], grid[1], grid[2], block[0], block[1],
                                       block[2], shared, s->stream, params, extra);
  if (e != hipSuccess)
    return cb_hip_fail_launch(dev, err, e,
                       "launching `%s` on %s (grid %" PRIu32 "x%" PRIu32 "x%" PRIu32 ", block %" PRIu32
                       "x%" PRIu32 "x%" PRIu32 ", %" PRIu32 " bytes shared)",
                       m->name, dev->label, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                       shared);
  return CUBERT_OK;
}

/* The arguments packed into one buffer, as hipModuleLaunchKernel's `extra`
 * (HIP_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END) takes them: the driver
 * then copies one buffer where the array of pointers costs it a step per
 * argument (issue 15: on the H200 raw launches took 98 ns less at 16
 * pointers, 36 at 4).
 *
 * The buffer must hold each argument at the offset the kernel's image
 * gives it. CUDA (cuLaunchKernel) leaves the layout to the caller: each
 * parameter at its type's alignment, the size without tail padding.
 * ROCm's clr (hipamd/src/hip_module.cpp, ihipLaunchKernelCommand, read
 * with the code search in December 2026) takes `extra` only as exactly
 * {BUFFER_POINTER, p, BUFFER_SIZE, &size, END} and reads parameter i from
 * p + desc.offset_, the offset in the code object's kernarg metadata,
 * which the compiler lays out as C does (rocclr/platform/kernel.cpp
 * captureAndSet; newer ones zero what lies beyond `size`). So both want
 * the C layout of the parameter list.
 *
 * The backend knows each argument's size, not its type: buffers (and peer
 * buffers) are 8-byte pointers, but a 4-byte scalar may be an int (aligned
 * to 4) or four chars (aligned to 1), an 8-byte one a double or a float2.
 * C's alignment of a type divides its size (an array's elements are all
 * aligned), so it is a power of two no larger than the largest power of
 * two dividing the size. When the running offset is already a multiple of
 * that, every type of that size starts right there: no padding, whatever
 * the types. A launch packs only when that holds at every argument: the
 * layout is then provably the one the kernel expects, and the size is the
 * sum of the sizes (no tail padding). Any other launch (tensors, a scalar
 * needing padding, more than PACKED_MAX bytes) passes pointers, as before.
 * (A type whose alignment exceeds its size, GNU's aligned attribute on a
 * scalar typedef, breaks C's arrays as well; a kernel taking one by value
 * is not supported by this rule.)
 *
 * The runtime applies the same rule to a kernel's parameter list once, at
 * create (backend.h, cubert_backend_image_layout), and hands its usual
 * launch over already packed (hip_launch_image); this packs the launches
 * that come as records (through the fault layer's rules, or of kernels the
 * one-pass launch does not take). The two agree byte for byte
 * (test_hip_backend, test_image_layout_is_the_packed_layout). */
bool cb_hip_pack_args(const cubert_backend_arg *args, uint32_t nargs, void *buf, size_t capacity, size_t *size) {
  unsigned char *out = buf;
  size_t off = 0;
  for (uint32_t i = 0; i < nargs; i++) {
    const cubert_backend_arg *a = &args[i];
    if (a->kind == CUBERT_PARAM_BUFFER || a->kind == CUBERT_PARAM_PEER_BUFFER) {
      /* the usual argument: one 8-byte store of a known size (a copy of a
       * size known only at run time is a call to memcpy, about 25
       * instructions an argument: issue 15) */
      void *pointer = CB_HIP_PTR(a->address);
      if ((off & (sizeof pointer - 1)) || sizeof pointer > capacity - off) return false;
      memcpy(out + off, &pointer, sizeof pointer);
      off += sizeof pointer;
      continue;
    }
    if (a->kind != CUBERT_PARAM_SCALAR || !a->scalar || !a->scalar_size || a->scalar_size > MAX_SCALAR)
      return false; /* a tensor, or a scalar the pointer path refuses by name */
    size_t n = a->scalar_size;
    size_t align = n & (~n + 1); /* the largest power of two dividing n */
    if ((off & (align - 1)) || n > capacity - off) return false;
    if (n == 4)
      memcpy(out + off, a->scalar, 4); /* the common sizes, a store each */
    else if (n == 8)
      memcpy(out + off, a->scalar, 8);
    else
      memcpy(out + off, a->scalar, n);
    off += n;
  }
  *size = off;
  return true;
}

/* One argument's value as the kernel receives it. */
typedef union arg_slot {
  void *pointer;
  unsigned char bytes[MAX_SCALAR];
  cubert_tensor tensor; /* a tensor's descriptor, by value */
  long double align_;
} arg_slot;

static cubert_status hip_launch(void *device, void *stream, uint64_t work, void *module,
                                const cubert_launch_config *config, const cubert_backend_arg *args,
                                uint32_t nargs, cubert_berr *err) {
  cb_hip_device *dev = device;
  cb_hip_stream *s = stream;
  cb_hip_module *m = module;
  cubert_status st;
  if (!s || !m || !config || (nargs && !args))
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "launch on %s: missing stream, module, "
                           "configuration or arguments", dev->label);
  if ((st = enter_live(dev, err)) != CUBERT_OK) return st;
  if (m->nparams != UINT32_MAX && nargs != m->nparams) {
    st = cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "`%s` takes %" PRIu32 " arguments, %" PRIu32 " given",
                         m->name, m->nparams, nargs);
    cb_hip_mark_work(s, work, "launch");
    return st;
  }
  /* the usual launch: buffers and scalars packed (cb_hip_pack_args) */
  _Alignas(16) unsigned char packed[PACKED_MAX];
  size_t packed_size = 0;
  if (cb_hip_pack_args(args, nargs, packed, sizeof packed, &packed_size)) {
    void *extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, packed, HIP_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                     HIP_LAUNCH_PARAM_END};
    st = cb_hip_launch_raw(dev, s, m, config->grid, config->block, config->shared_memory, NULL,
                           nargs ? extra : NULL, err);
    cb_hip_mark_work(s, work, "launch");
    return st;
  }
  arg_slot stack_slots[STACK_ARGS];
  void *stack_params[STACK_ARGS];
  arg_slot *slots = stack_slots;
  void **params = stack_params;
  if (nargs > STACK_ARGS) {
    slots = cb_malloc(nargs * sizeof *slots);
    params = cb_malloc(nargs * sizeof *params);
    if (!slots || !params) {
      cb_free(slots);
      cb_free(params);
      cb_hip_mark_work(s, work, "launch");
      return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory for %" PRIu32 " arguments", nargs);
    }
  }
  for (uint32_t i = 0; i < nargs; i++) {
    const cubert_backend_arg *a = &args[i];
    if (a->kind == CUBERT_PARAM_SCALAR) {
      if (!a->scalar || a->scalar_size == 0 || a->scalar_size > MAX_SCALAR) {
        st = cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                             "`%s` argument %" PRIu32 ": a scalar of %" PRIu32 " bytes (1 to %u)",
                             m->name, i, a->scalar_size, MAX_SCALAR);
        goto out;
      }
      memcpy(slots[i].bytes, a->scalar, a->scalar_size);
    } else if (a->kind == CUBERT_PARAM_TENSOR) {
      if (!a->scalar || a->scalar_size != sizeof(cubert_tensor)) {
        st = cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                             "`%s` argument %" PRIu32 ": a tensor without its %zu-byte descriptor", m->name, i,
                             sizeof(cubert_tensor));
        goto out;
      }
      memcpy(&slots[i].tensor, a->scalar, sizeof(cubert_tensor));
    } else {
      slots[i].pointer = CB_HIP_PTR(a->address); /* buffers and peer buffers alike */
    }
    params[i] = &slots[i];
  }
  st = cb_hip_launch_raw(dev, s, m, config->grid, config->block, config->shared_memory,
                         nargs ? params : NULL, NULL, err);
out:
  cb_hip_mark_work(s, work, "launch");
  if (slots != stack_slots) cb_free(slots);
  if (params != stack_params) cb_free(params);
  return st;
}

/* A launch whose arguments the runtime packed (backend.h,
 * cubert_backend_image: the layout cb_hip_pack_args would have made, by
 * the same rule, computed once per kernel): the image goes to the driver
 * as it is, through `extra`; nothing per argument here. */
static cubert_status hip_launch_image(void *device, void *stream, uint64_t work, void *module,
                                      const cubert_launch_config *config, const cubert_backend_image *image,
                                      cubert_berr *err) {
  cb_hip_device *dev = device;
  cb_hip_stream *s = stream;
  cb_hip_module *m = module;
  cubert_status st;
  const cubert_backend_layout *l = image ? image->layout : NULL;
  if (!s || !m || !config || !l || (l->nargs && !image->data))
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "launch on %s: missing stream, module, "
                           "configuration or arguments", dev->label);
  if ((st = enter_live(dev, err)) != CUBERT_OK) return st;
  uint32_t nargs = l->nargs;
  if (m->nparams != UINT32_MAX && nargs != m->nparams) {
    st = cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "`%s` takes %" PRIu32 " arguments, %" PRIu32 " given",
                         m->name, m->nparams, nargs);
    cb_hip_mark_work(s, work, "launch");
    return st;
  }
  size_t size = l->size;
  void *extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, (void *)(uintptr_t)image->data, HIP_LAUNCH_PARAM_BUFFER_SIZE,
                   &size, HIP_LAUNCH_PARAM_END};
  st = cb_hip_launch_raw(dev, s, m, config->grid, config->block, config->shared_memory, NULL, nargs ? extra : NULL,
                         err);
  cb_hip_mark_work(s, work, "launch");
  return st;
}

/* The fill kernel (8-byte patterns, and 2/4-byte ones at unaligned
 * addresses): 8-byte stores when it can, bytes otherwise. */
static const char fill_source[] =
    "extern \"C\" __global__ void cubert_hip_fill(unsigned char *dst, unsigned long long pattern,\n"
    "                                           unsigned int psize, unsigned long long size)\n"
    "{\n"
    "  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  if (psize == 8 && ((unsigned long long)dst & 7ull) == 0) {\n"
    "    unsigned long long *d = (unsigned long long *)dst;\n"
    "    for (unsigned long long n = size / 8; i < n; i += stride)\n"
    "      d[i] = pattern;\n"
    "  } else {\n"
    "    for (; i < size; i += stride)\n"
    "      dst[i] = (unsigned char)(pattern >> (8u * (unsigned int)(i % psize)));\n"
    "  }\n"
    "}\n";

cubert_status cb_hip_fill_module(cb_hip_device *dev, cb_hip_module **module, cubert_berr *err) {
  pthread_mutex_lock(&dev->fill_lock);
  cubert_status st = CUBERT_OK;
  if (!dev->fill) {
    cubert_backend_kernel k;
    memset(&k, 0, sizeof k);
    k.name = "cubert_hip_fill";
    k.entry = "cubert_hip_fill";
    k.source = fill_source;
    k.source_hash = cubert_hash64(fill_source, strlen(fill_source));
    k.nparams = 4;
    void *m = NULL;
    st = hip_module_load(dev, &k, &m, err);
    if (st == CUBERT_OK) dev->fill = m;
  }
  *module = dev->fill;
  pthread_mutex_unlock(&dev->fill_lock);
  return st;
}

/* ------------------------------------------------------------ fill
 *
 * Here, not in hip_stream.c: 8-byte and unaligned patterns run the built-in
 * fill kernel, and modules are this file's (hip_stream.c calls no function
 * of this file). */

cubert_status cb_hip_fill(void *device, void *stream, uint64_t work, uint64_t dst,
                          const void *pattern, uint32_t pattern_size, uint64_t size,
                          cubert_berr *err) {
  cb_hip_device *dev = device;
  cb_hip_stream *s = stream;
  cubert_status st = cb_hip_work_begin(dev, s, "fill", err);
  if (st) return st;
  if (!pattern || (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8) ||
      size % pattern_size)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "fill on %s: pattern of %" PRIu32 " bytes over %" PRIu64 " bytes",
                           dev->label, pattern_size, size);
  hipError_t e = hipSuccess;
  const char *how = "hipMemsetD8Async";
  bool aligned = dst % pattern_size == 0;
  if (size == 0) {
    /* nothing to write */
  } else if (pattern_size == 1) {
    e = hipMemsetD8Async(CB_HIP_DPTR(dst), *(const unsigned char *)pattern, (size_t)size, s->stream);
  } else if (pattern_size == 2 && aligned) {
    unsigned short v;
    memcpy(&v, pattern, 2);
    how = "hipMemsetD16Async";
    e = hipMemsetD16Async(CB_HIP_DPTR(dst), v, (size_t)(size / 2), s->stream);
  } else if (pattern_size == 4 && aligned) {
    uint32_t v;
    memcpy(&v, pattern, 4);
    how = "hipMemsetD32Async";
    e = hipMemsetD32Async(CB_HIP_DPTR(dst), (int)v, (size_t)(size / 4), s->stream);
  } else {
    /* 8-byte patterns, and unaligned 2/4-byte ones: the built-in kernel. */
    cb_hip_module *m = NULL;
    if ((st = cb_hip_fill_module(dev, &m, err)) != CUBERT_OK) {
      cb_hip_mark_work(s, work, "fill");
      return st;
    }
    void *ptr = CB_HIP_PTR(dst);
    unsigned long long pat = 0, n = size;
    unsigned int psize = pattern_size;
    memcpy(&pat, pattern, pattern_size);
    void *params[] = {&ptr, &pat, &psize, &n};
    uint64_t items = aligned && pattern_size == 8 ? size / 8 : size;
    uint64_t blocks = (items + 255) / 256;
    uint32_t grid[3] = {(uint32_t)(blocks < 4096 ? (blocks ? blocks : 1) : 4096), 1, 1};
    uint32_t block[3] = {256, 1, 1};
    st = cb_hip_launch_raw(dev, s, m, grid, block, 0, params, NULL, err);
    cb_hip_mark_work(s, work, "fill");
    return st;
  }
  cb_hip_mark_work(s, work, "fill");
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_COPY, "fill of %" PRIu64 " bytes at 0x%" PRIx64 " on %s (%s)",
                       size, dst, dev->label, how);
  return CUBERT_OK;
}

/* ------------------------------------------------------------ peers */

static cubert_status hip_peer_can_access(void *device, void *peer, bool *can, cubert_berr *err) {
  cb_hip_device *dev = device, *other = peer;
  cubert_status st = enter_live(dev, err);
  if (st) return st;
  if (!other) return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "peer_can_access: no peer");
  if (other->index == dev->index) {
    *can = true;
    return CUBERT_OK;
  }
  int c = 0;
  hipError_t e = hipDeviceCanAccessPeer(&c, dev->index, other->index);
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_PEER_ACCESS, "asking whether %s can access %s",
                       dev->label, other->label);
  *can = c != 0;
  return CUBERT_OK;
}

static cubert_status hip_peer_enable(void *device, void *peer, cubert_berr *err) {
  cb_hip_device *dev = device, *other = peer;
  cubert_status st = enter_live(dev, err);
  if (st) return st;
  if (!other) return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "peer_enable: no peer");
  if (other->index == dev->index) return CUBERT_OK;
  if (other->index < 0 || other->index >= dev->backend->device_count)
    return cubert_berr_set(err, CUBERT_ERR_NO_DEVICE, "peer_enable: %s is not a device of this backend",
                           other->label);
  pthread_mutex_lock(&dev->peer_lock);
  if (!dev->peer_enabled[other->index]) {
    hipError_t e = hipDeviceEnablePeerAccess(other->index, 0);
    if (e == hipSuccess || e == hipErrorPeerAccessAlreadyEnabled) {
      dev->peer_enabled[other->index] = true;
    } else {
      st = cb_hip_fail(dev, err, e, CUBERT_ERR_PEER_ACCESS, "%s cannot enable access to memory of %s",
                       dev->label, other->label);
      if (st != CUBERT_ERR_DEVICE_LOST) st = CUBERT_ERR_PEER_ACCESS;
    }
  }
  pthread_mutex_unlock(&dev->peer_lock);
  return st;
}

static cubert_status hip_link_info(void *device, void *peer, cubert_backend_link *link,
                                   cubert_berr *err) {
  cb_hip_device *dev = device, *other = peer;
  cubert_status st = enter_live(dev, err);
  if (st) return st;
  if (!other || !link) return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "link_info: no peer");
#if CB_HIP_NVIDIA
  /* HIP on NVIDIA has no call for the link type: NVLink is known to NVML */
  return cb_hip_nvml_link(dev, other, link, err);
#else
  if (other->index == dev->index) {
    memset(link, 0, sizeof *link);
    return CUBERT_OK;
  }
  uint32_t type = 0, hops = 0;
  hipError_t e = hipExtGetLinkTypeAndHopCount(dev->index, other->index, &type, &hops);
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_UNSUPPORTED, "hipExtGetLinkTypeAndHopCount(%s, %s)",
                       dev->label, other->label);
  /* HSA's link types: 2 PCIe, 4 xGMI (0 HyperTransport, 1 QPI, 3 InfiniBand) */
  link->type = type == 4 ? CUBERT_LINK_TYPE_XGMI : type == 2 ? CUBERT_LINK_TYPE_PCIE : CUBERT_LINK_TYPE_UNKNOWN;
  link->hops = (int)hops;
  link->links = 0; /* HIP does not say: the topology takes KFD's count (topology.c) */
  return CUBERT_OK;
#endif
}

/* ------------------------------------------------------------ the table */

static const cubert_backend_ops hip_ops = {
    .abi = CUBERT_BACKEND_ABI,
    .name = "hip",
    .open = hip_open,
    .close = hip_close,
    .device_open = hip_device_open,
    .device_close = hip_device_close,
    .mem_alloc = hip_mem_alloc,
    .mem_free = hip_mem_free,
    .mem_export = hip_mem_export,
    .mem_import = hip_mem_import,
    .stream_create = cb_hip_stream_create,
    .stream_destroy = cb_hip_stream_destroy,
    .event_record = cb_hip_event_record,
    .stream_wait = cb_hip_stream_wait,
    .event_destroy = cb_hip_event_destroy,
    .timer_record = cb_hip_timer_record,
    .timer_elapsed = cb_hip_timer_elapsed,
    .timer_destroy = cb_hip_event_destroy,
    .host_alloc = cb_hip_host_alloc,
    .host_register = cb_hip_host_register,
    .host_free = cb_hip_host_free,
    .write_host = cb_hip_write_host,
    .read_host = cb_hip_read_host,
    .write = cb_hip_write,
    .read = cb_hip_read,
    .fill = cb_hip_fill,
    .copy = cb_hip_copy,
    .copy_peer = cb_hip_copy_peer,
    .copy_strided = cb_hip_copy_strided,
    .module_load = hip_module_load,
    .module_unload = hip_module_unload,
    .module_prepare = hip_module_prepare,
    .launch = hip_launch,
    .launch_image = hip_launch_image,
    .sync = cb_hip_sync,
    .progress = cb_hip_progress,
    .drain_failures = cb_hip_drain_failures,
    .peer_can_access = hip_peer_can_access,
    .peer_enable = hip_peer_enable,
    .link_info = hip_link_info,
};

const cubert_backend_ops *cubert_backend_hip(void) { return &hip_ops; }
