/* runtime/module.c: each device's module cache, and compiles outside the
 * device lock.
 *
 * The cache is an open-addressing hash table by kernel id (ids are never
 * reused), linear probing, at most half full, deletion by backward shift.
 * An entry is PREPARING (a thread is warming the backend's compile for it,
 * without the device lock), PREPARED (done; not loaded yet) or LOADED (the
 * backend's module). The cache holds no reference to the kernel: when a
 * kernel's last reference goes (cubert_kernel_release), its module is
 * unloaded on every device that has it (cb_module_forget), so a program
 * that makes and drops kernels does not keep their modules until its
 * devices go.
 *
 * The path of a launch (runtime/launch.c): cb_module_prepare before the
 * device lock, then cb_module_get under it. prepare calls the backend's
 * optional module_prepare (HIP: the hiprtc compile into its code cache;
 * it changes nothing a later call sees but the time module_load takes) at
 * most once per (device, kernel) at a time: a second thread launching the
 * same kernel waits for the first one's prepare, without the device lock,
 * and then finds the kernel prepared. module_load itself, where a failure
 * (an injected one too) is decided, stays under the device lock at the
 * same point of the launch as before, so what a launch reports is
 * unchanged; it is fast once the code is prepared.
 *
 * Locks: dev->module_lock guards the table and is a leaf (only the
 * backend's module_unload runs under it). The registry of devices with a
 * cache (for cb_module_forget) has its own lock, taken before any
 * module_lock; cb_module_forget may run under some device's lock (a
 * kernel's last reference may go when a work record is reaped), so the
 * order is device lock -> registry lock -> module_lock. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/internal.h"

enum { CB_MODULE_EMPTY, CB_MODULE_PREPARING, CB_MODULE_PREPARED, CB_MODULE_LOADED };

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static cb_device *registry; /* devices with a module cache, through module_next */

static size_t home(uint64_t id, size_t cap) { return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1); }

/* The slot of `id`, or the empty slot where it would go. Under module_lock,
 * capmodules > 0. */
static size_t slot_of(const cb_device *dev, uint64_t id) {
  size_t cap = dev->capmodules, i = home(id, cap);
  while (dev->modules[i].state != CB_MODULE_EMPTY && dev->modules[i].id != id) i = (i + 1) & (cap - 1);
  return i;
}

static cb_module *find(cb_device *dev, uint64_t id) {
  if (!dev->capmodules) return NULL;
  cb_module *e = &dev->modules[slot_of(dev, id)];
  return e->state == CB_MODULE_EMPTY ? NULL : e;
}

/* Room for one more entry. Under module_lock. */
static bool reserve(cb_device *dev) {
  if ((dev->nmodules + 1) * 2 <= dev->capmodules) return true;
  size_t cap = dev->capmodules ? dev->capmodules * 2 : 16;
  cb_module *v = cb_calloc(cap, sizeof *v);
  if (!v) return false;
  cb_module *old = dev->modules;
  size_t oldcap = dev->capmodules;
  dev->modules = v;
  dev->capmodules = cap;
  for (size_t i = 0; i < oldcap; i++)
    if (old[i].state != CB_MODULE_EMPTY) v[slot_of(dev, old[i].id)] = old[i];
  cb_free(old);
  return true;
}

/* The entry of `id`, made (state EMPTY -> `state`) when missing; NULL for
 * want of memory. Under module_lock. */
static cb_module *insert(cb_device *dev, uint64_t id, int state) {
  cb_module *e = find(dev, id);
  if (e) return e;
  if (!reserve(dev)) return NULL;
  e = &dev->modules[slot_of(dev, id)];
  *e = (cb_module){id, state, NULL};
  dev->nmodules++;
  return e;
}

/* Removes the entry at slot i, shifting the entries of its probe run back.
 * Under module_lock. */
static void remove_at(cb_device *dev, size_t i) {
  size_t cap = dev->capmodules;
  dev->modules[i] = (cb_module){0};
  dev->nmodules--;
  for (size_t j = (i + 1) & (cap - 1); dev->modules[j].state != CB_MODULE_EMPTY; j = (j + 1) & (cap - 1)) {
    size_t h = home(dev->modules[j].id, cap);
    /* j's entry may move to i when its home is not inside (i, j] */
    bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
    if (stays) continue;
    dev->modules[i] = dev->modules[j];
    dev->modules[j] = (cb_module){0};
    i = j;
  }
}

static cubert_backend_kernel backend_kernel(const cubert_kernel *k) {
  cubert_backend_kernel bk = {k->name,     k->entry,   k->source, k->options, k->objects,
                              k->nobjects, k->host_fn, k->params, k->nparams, k->source_hash};
  return bk;
}

void cb_module_open(cb_device *dev) {
  pthread_mutex_init(&dev->module_lock, NULL);
  pthread_cond_init(&dev->module_cond, NULL);
  pthread_mutex_lock(&registry_lock);
  dev->module_next = registry;
  registry = dev;
  pthread_mutex_unlock(&registry_lock);
}

void cb_module_close(cb_device *dev) {
  pthread_mutex_lock(&registry_lock);
  for (cb_device **p = &registry; *p; p = &(*p)->module_next)
    if (*p == dev) {
      *p = dev->module_next;
      break;
    }
  pthread_mutex_unlock(&registry_lock);
  pthread_mutex_lock(&dev->module_lock);
  for (size_t i = 0; i < dev->capmodules; i++)
    if (dev->modules[i].state == CB_MODULE_LOADED) dev->ops->module_unload(dev->bdev, dev->modules[i].module);
  cb_free(dev->modules);
  dev->modules = NULL;
  dev->nmodules = dev->capmodules = 0;
  pthread_mutex_unlock(&dev->module_lock);
  pthread_cond_destroy(&dev->module_cond);
  pthread_mutex_destroy(&dev->module_lock);
}

/* cb_module_prepare's call when the hint is another kernel (internal.h). */
void cb_module_prepare_slow(cb_device *dev, const cubert_kernel *k) {
  if (!dev->ops->module_prepare) return;
  pthread_mutex_lock(&dev->module_lock);
  cb_module *e;
  while ((e = find(dev, k->id)) && e->state == CB_MODULE_PREPARING)
    pthread_cond_wait(&dev->module_cond, &dev->module_lock);
  if (e || !(e = insert(dev, k->id, CB_MODULE_PREPARING))) {
    /* prepared or loaded already; or no memory: module_load compiles */
    pthread_mutex_unlock(&dev->module_lock);
    return;
  }
  pthread_mutex_unlock(&dev->module_lock);
  cubert_backend_kernel bk = backend_kernel(k);
  dev->ops->module_prepare(dev->bdev, &bk);
  pthread_mutex_lock(&dev->module_lock);
  e = find(dev, k->id); /* the table may have grown meanwhile */
  if (e && e->state == CB_MODULE_PREPARING) e->state = CB_MODULE_PREPARED;
  atomic_store(&((cubert_kernel *)k)->cached, true);
  pthread_cond_broadcast(&dev->module_cond);
  pthread_mutex_unlock(&dev->module_lock);
}

/* Remembers `k`'s module as the device's hint. Under the device lock. */
static void hint(cb_device *dev, const cubert_kernel *k, void *module) {
  dev->module_hint_module = module;
  atomic_store_explicit(&dev->module_hint, k->id, memory_order_relaxed);
}

/* cb_module_get (internal.h) when the device's hint is another kernel. */
cubert_status cb_module_load(cb_device *dev, const cubert_kernel *k, void **module, cubert_berr *err) {
  pthread_mutex_lock(&dev->module_lock);
  cb_module *e = find(dev, k->id);
  if (e && e->state == CB_MODULE_LOADED) {
    *module = e->module;
    pthread_mutex_unlock(&dev->module_lock);
    hint(dev, k, *module);
    return CUBERT_OK;
  }
  bool room = reserve(dev);
  pthread_mutex_unlock(&dev->module_lock);
  if (!room) return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory caching a module");
  /* Under the device lock, not the module lock: loads of one device are
   * serialised by the device lock, and unloads (cb_module_forget) need
   * only the module lock. */
  cubert_backend_kernel bk = backend_kernel(k);
  void *m = NULL;
  cubert_status st = dev->ops->module_load(dev->bdev, &bk, &m, err);
  if (st) return st;
  pthread_mutex_lock(&dev->module_lock);
  atomic_store(&((cubert_kernel *)k)->cached, true);
  e = insert(dev, k->id, CB_MODULE_LOADED); /* room was reserved: never NULL */
  if (e) {
    e->state = CB_MODULE_LOADED;
    e->module = m;
  }
  pthread_mutex_unlock(&dev->module_lock);
  if (!e) {
    dev->ops->module_unload(dev->bdev, m);
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory caching a module");
  }
  *module = m;
  hint(dev, k, m);
  return CUBERT_OK;
}

void cb_module_forget(const cubert_kernel *k) {
  if (!atomic_load(&((cubert_kernel *)k)->cached)) return; /* never prepared or loaded anywhere */
  pthread_mutex_lock(&registry_lock);
  for (cb_device *dev = registry; dev; dev = dev->module_next) {
    pthread_mutex_lock(&dev->module_lock);
    if (dev->capmodules) {
      size_t i = slot_of(dev, k->id);
      cb_module e = dev->modules[i];
      if (e.state != CB_MODULE_EMPTY) {
        remove_at(dev, i);
        if (e.state == CB_MODULE_LOADED) dev->ops->module_unload(dev->bdev, e.module);
      }
    }
    pthread_mutex_unlock(&dev->module_lock);
  }
  pthread_mutex_unlock(&registry_lock);
}
