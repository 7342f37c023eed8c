/* runtime/runtime.c: the runtime (backends and their devices), clients,
 * kernels and the per-device module cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/shm.h"
#include "runtime/fault_state.h"
#include "runtime/internal.h"
#include "runtime/parts.h"

void cb_device_free(cb_device *dev);


void cubert_runtime_options_init(cubert_runtime_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
}

/* Whether the parts hold a built backend called `name`. */
static bool backend_built(const cb_runtime_parts *parts, const char *name) {
  for (int k = 0; k < parts->nbackends; k++) {
    const cubert_backend_ops *ops = parts->backends[k]();
    if (ops && !strcmp(ops->name, name)) return true;
  }
  return false;
}

/* `source` names where the list came from (an option or a variable). */
static cubert_status check_backend_list(cb_errb *eb, const cb_runtime_parts *parts, const char *source,
                                        const char *list) {
  /* every name is checked, an empty one too: "" or "host," names no backend */
  for (const char *p = list; p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (!((len == 4 && !strncmp(p, "host", 4)) || (len == 3 && !strncmp(p, "hip", 3))))
      return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT,
                         "%s: unknown backend '%.*s' in the backend list '%s' (known: host, hip)", source,
                         (int)len, p, list);
    if (len == 3 && !backend_built(parts, "hip"))
      return cb_errb_set(eb, CUBERT_ERR_UNSUPPORTED,
                         "%s: backend 'hip' was asked for but cubert was built without HIP", source);
    p = e ? e + 1 : NULL;
  }
  return CUBERT_OK;
}


/* The backends to open, in order: the list's order when there is a list
 * (each once), else the parts' order (GPU backends first, runtime/parts.h).
 * Returns how many. */
static int backend_order(const cb_runtime_parts *parts, const char *list,
                         const cubert_backend_ops *order[CB_RUNTIME_MAX_BACKENDS]) {
  int n = 0;
  if (!list) {
    for (int k = 0; k < parts->nbackends && n < CB_RUNTIME_MAX_BACKENDS; k++)
      if (parts->backends[k]()) order[n++] = parts->backends[k]();
    return n;
  }
  for (const char *p = list; *p && n < CB_RUNTIME_MAX_BACKENDS;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    for (int k = 0; k < parts->nbackends; k++) {
      const cubert_backend_ops *ops = parts->backends[k]();
      if (!ops || strlen(ops->name) != len || strncmp(ops->name, p, len)) continue;
      bool seen = false;
      for (int j = 0; j < n; j++) seen |= order[j] == ops;
      if (!seen) order[n++] = ops;
    }
    if (!e) break;
    p = e + 1;
  }
  return n;
}

/* Keeps what a backend said about itself: why it has no device (the
 * backend's words from open), or, for the host backend opened because no
 * GPU backend found a device, that and their reasons. With $CUBERT_LOG set
 * (to anything but "" or "0"), says on stderr what was opened. */
static cubert_status note_backend(cb_errb *eb, cubert_runtime *rt, cb_backend *be, int count, bool fallback,
                                  const char *said) {
  cb_str n = {0};
  if (fallback) {
    cb_str_printf(&n, "simulated devices, opened because no GPU backend found a device (");
    for (int b = 0; b < rt->nbackends; b++)
      if (&rt->backends[b] != be)
        cb_str_printf(&n, "%s%s: %d", b ? ", " : "", rt->backends[b].inner->name, rt->backends[b].device_count);
    cb_str_printf(&n, "%s; CUBERT_BACKENDS=hip asks for GPUs only", rt->nbackends > 1 ? ")" : "none built)");
  } else if (count <= 0) {
    cb_str_printf(&n, "%s", said && said[0] ? said : "the backend found no device");
  }
  be->note = n.p ? cb_str_take(&n) : cb_strdup("");
  if (!be->note) return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory opening the backends");
  const char *log = cb_env("CUBERT_LOG");
  if (log && log[0] && strcmp(log, "0") != 0)
    fprintf(stderr, "cubert: backend %s: %d device%s%s%s\n", be->inner->name, count, count == 1 ? "" : "s",
            be->note[0] ? ": " : "", be->note);
  return CUBERT_OK;
}

const char *cubert_runtime_backend_note(const cubert_runtime *rt, int i) {
  if (!rt || i < 0 || i >= rt->nbackends) return NULL;
  return rt->backends[i].note ? rt->backends[i].note : "";
}

static const char *pair_class(void *ctx, int a, int b) {
  const cubert_runtime *rt = ctx;
  return rt->parts->topology_pair_name(rt->topology, a, b);
}

/* Hands the placement the bus ids of the devices it may place. */
static void start_placement(cubert_runtime *rt) {
  if (!rt->placement) return;
  /* An XML file standing for this machine is not this machine. */
  const char *xml = cb_env("CUBERT_TOPOLOGY");
  const char **ids = NULL;
  if (rt->ndevices > 0 && !xml && (ids = cb_calloc((size_t)rt->ndevices, sizeof *ids))) {
    for (int i = 0; i < rt->ndevices; i++) {
      const cb_device *dev = rt->devices[i];
      /* made-up bus ids (a simulated node's) are not this machine's */
      bool made_up = rt->settings && dev->info.backend &&
                     rt->parts->settings_bus_ids_made_up(rt->settings, dev->info.backend);
      ids[i] = made_up ? NULL : dev->info.pci_bus_id;
    }
  }
  rt->parts->placement_start(rt->placement, ids, ids ? rt->ndevices : 0);
  cb_free(ids);
}

static cubert_status open_device(cb_errb *eb, cubert_runtime *rt, int b, int i, cb_device **out) {
  cb_backend *be = &rt->backends[b];
  cb_device *dev = cb_calloc(1, sizeof *dev);
  if (!dev) return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory opening a device");
  cubert_berr err = {0};
  cubert_status st = be->ops->device_open(be->state, i, &dev->bdev, &dev->info, &err);
  if (st) {
    cb_free(dev);
    return cb_errb_backend(eb, st, &err, "opening device", be->inner->name);
  }
  dev->rt = rt;
  dev->backend = b;
  dev->ops = be->ops;
  dev->index = be->first_device + i;
  dev->info.device = dev->index;
  dev->info.backend = be->inner->name;
  dev->info.backend_index = i;
  pthread_mutex_init(&dev->lock, NULL);
  atomic_init(&dev->grave, NULL);
  atomic_init(&dev->lost, NULL);
  atomic_init(&dev->refs, 1);
  atomic_init(&dev->gone, false);
  dev->reap_at = CB_RUNTIME_REAP_INTERVAL;
  cb_module_open(dev);
  st = cb_pool_create(be->ops, dev->bdev, dev->info.total_memory, &dev->pool);
  if (st) {
    cb_module_close(dev);
    dev->ops->device_close(dev->bdev);
    pthread_mutex_destroy(&dev->lock);
    cb_free(dev);
    return cb_errb_set(eb, st, "creating the memory pools of %s: %s", be->inner->name,
                       st == CUBERT_ERR_OUT_OF_MEMORY ? "out of host memory" : cubert_status_string(st));
  }
  *out = dev;
  return CUBERT_OK;
}

/* Whether `size` is what sizeof gave for a version of the options: the
 * struct so far, ending where a field begins (or at its end). Any other
 * size would copy part of a field: half a pointer, dereferenced later. */
static bool options_size_known(uint32_t size) {
  static const size_t ends[] = {offsetof(cubert_runtime_options, host_devices),
                                offsetof(cubert_runtime_options, host_memory),
                                offsetof(cubert_runtime_options, host_peer_deny),
                                offsetof(cubert_runtime_options, faults),
                                offsetof(cubert_runtime_options, no_faultinj), sizeof(cubert_runtime_options)};
  for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
    if (size == ends[i]) return true;
  return false;
}

/* The caller's options over the defaults; refused when struct_size does
 * not come from cubert_runtime_options_init (of this or an earlier version). */
static cubert_status read_options(cb_errb *eb, const cubert_runtime_options *options, cubert_runtime_options *o) {
  cubert_runtime_options_init(o);
  if (!options) return CUBERT_OK;
  if (!options_size_known(options->struct_size))
    return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT,
                       "cubert_runtime_options.struct_size is %u; call cubert_runtime_options_init",
                       options->struct_size);
  memcpy(o, options, options->struct_size);
  return CUBERT_OK;
}

/* The backends' own settings (the host backend's: lib/settings.c), read
 * and refused here, before anything is opened; NULL when the parts have
 * none. */
static cubert_status read_settings(cb_errb *eb, const cb_runtime_parts *parts, const cubert_runtime_options *o,
                                   struct cb_backend_settings **settings) {
  *settings = NULL;
  if (!parts->settings_new) return CUBERT_OK;
  cb_str why = {0};
  cubert_status st = parts->settings_new(o, settings, &why);
  if (st) cb_errb_set(eb, st, "%s", why.p ? why.p : "");
  cb_str_free(&why);
  return st;
}

/* Fault injection is the runtime's own: its rules, log and classifier. */
static cubert_status open_fault_layer(cb_errb *eb, cubert_runtime *rt, const char *rules) {
  cubert_faultinj_diag diag = {0};
  if (!(rt->faultinj = rt->parts->faults_new()))
    return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory creating the runtime's fault layer");
  cubert_status st = rt->parts->faults_configure(rt->faultinj, rules, &diag);
  if (st) cb_errb_set(eb, st, "fault rules: %s", diag.message);
  return st;
}

/* Opens backend `ops` (through the fault layer when `faults`) as the
 * runtime's next backend, then its devices. `fallback`: the host backend
 * standing in for GPUs none of which was found. */
static cubert_status open_backend(cb_errb *eb, cubert_runtime *rt, const cubert_backend_ops *ops, bool faults,
                                  bool fallback) {
  const cb_runtime_parts *parts = rt->parts;
  if (ops->abi != CUBERT_BACKEND_ABI)
    return cb_errb_set(eb, CUBERT_ERR_UNSUPPORTED, "backend %s has ABI %u, the runtime wants %u", ops->name,
                       ops->abi, CUBERT_BACKEND_ABI);
  cb_backend *be = &rt->backends[rt->nbackends];
  be->inner = ops;
  be->ops = faults ? parts->faults_ops() : ops;
  be->first_device = rt->ndevices;
  cubert_backend_config cfg = {0};
  if (rt->placement) {
    cfg.place_thread = parts->place_thread;
    cfg.place_alloc = parts->place_alloc;
    cfg.place_free = parts->place_free;
    cfg.place_ctx = parts->placement_ctx(rt->placement, rt->nbackends, rt->ndevices);
  }
  cfg.options = rt->settings ? parts->settings_for(rt->settings, ops->name) : NULL;
  cubert_berr err = {0};
  int count = 0;
  cubert_status st = faults ? parts->faults_open(ops, rt->faultinj, rt->ndevices, &cfg, &be->state, &count, &err)
                            : ops->open(&cfg, &be->state, &count, &err);
  if (st) {
    cb_errb_backend(eb, st, &err, "opening the backend", ops->name);
    if (rt->settings) parts->settings_explain(rt->settings, ops->name, err.message, &eb->msg);
    return st;
  }
  rt->nbackends++;
  if ((st = note_backend(eb, rt, be, count, fallback, err.message))) return st;
  if (count <= 0) return CUBERT_OK;
  cb_device **v = cb_realloc(rt->devices, (rt->ndevices + count) * sizeof *v);
  if (!v) return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory opening devices");
  rt->devices = v;
  for (int i = 0; i < count; i++) {
    cb_device *dev = NULL;
    if ((st = open_device(eb, rt, rt->nbackends - 1, i, &dev))) return st;
    rt->devices[rt->ndevices++] = dev;
  }
  be->device_count = count;
  return CUBERT_OK;
}

/* The order of the backends: the list's, when one is given; else GPU
 * backends first, and the host backend (the simulator) only when none of
 * them found a device. */
static cubert_status open_backends(cb_errb *eb, cubert_runtime *rt, const char *list, bool faults) {
  const cubert_backend_ops *order[CB_RUNTIME_MAX_BACKENDS];
  int norder = backend_order(rt->parts, list, order);
  for (int k = 0; k < norder; k++) {
    bool fallback = !list && !strcmp(order[k]->name, "host");
    if (fallback && rt->ndevices > 0) continue; /* a GPU was found: no simulator */
    cubert_status st = open_backend(eb, rt, order[k], faults, fallback);
    if (st) return st;
  }
  return CUBERT_OK;
}

/* Each device's peer-access state and messages, one entry per device. */
static cubert_status make_peer_tables(cb_errb *eb, cubert_runtime *rt) {
  for (int i = 0; i < rt->ndevices; i++) {
    cb_device *dev = rt->devices[i];
    dev->peer_state = cb_calloc((size_t)rt->ndevices, 1);
    dev->peer_message = cb_calloc((size_t)rt->ndevices, sizeof *dev->peer_message);
    if (!dev->peer_state || !dev->peer_message)
      return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory opening devices");
  }
  return CUBERT_OK;
}

/* Fault rules filtered by pair class need each pair's class. The topology
 * is made here, not on first use: the fault layer asks while a device lock
 * is held, and making a topology asks the devices. Without one, such rules
 * match no pair (not an error). */
static void classify_pairs(cubert_runtime *rt, const char *rules) {
  const cb_runtime_parts *parts = rt->parts;
  if (rules && strstr(rules, "pair=") && rt->ndevices && parts->topology_create &&
      parts->topology_create(rt, NULL, &rt->topology) == CUBERT_OK)
    parts->faults_set_pair_classifier(rt->faultinj, pair_class, rt);
}

/* cb_runtime_create's work, step by step: a refusal fills `eb`; a failure
 * once the runtime exists destroys what was built of it
 * (cubert_runtime_destroy takes any prefix of it). */
static cubert_status create(cb_errb *eb, const cb_runtime_parts *parts, const cubert_runtime_options *options,
                            cubert_runtime **out) {
  if (!out) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "cubert_runtime_create: runtime is NULL");
  cubert_runtime_options o;
  cubert_status st = read_options(eb, options, &o);
  if (st) return st;
  /* shared segments of this user's processes of the node that ended without
   * removing them (a SIGKILL): docs/processes.md */
  (void)cb_shm_sweep();
  const char *list = o.backends ? o.backends : cb_env("CUBERT_BACKENDS");
  st = check_backend_list(eb, parts, o.backends ? "cubert_runtime_options.backends" : "CUBERT_BACKENDS", list);
  struct cb_backend_settings *settings = NULL;
  if (st || (st = read_settings(eb, parts, &o, &settings))) return st;

  cubert_runtime *rt = cb_calloc(1, sizeof *rt);
  if (!rt) {
    if (settings) parts->settings_free(settings);
    return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory creating the runtime");
  }
  rt->parts = parts;
  rt->settings = settings;
  pthread_mutex_init(&rt->clients_lock, NULL);
  rt->placement = parts->placement_new ? parts->placement_new() : NULL; /* NULL: no placement, not an error */
  bool faults = !o.no_faultinj && parts->faults_open;
  if ((faults && (st = open_fault_layer(eb, rt, o.faults))) || (st = open_backends(eb, rt, list, faults)) ||
      (st = make_peer_tables(eb, rt))) {
    cubert_runtime_destroy(rt); /* records no error: cb_runtime_create records eb's */
    return st;
  }
  if (faults) classify_pairs(rt, o.faults ? o.faults : cb_env("CUBERT_FAULTS"));
  /* Placement: cheap here (bus ids only); the topology is made by the first
   * thread that asks, and only when a device is on this machine. */
  start_placement(rt);
  rt->created = true;
  *out = rt;
  return CUBERT_OK;
}

cubert_status cb_runtime_create(const cb_runtime_parts *parts, const cubert_runtime_options *options,
                                cubert_runtime **out) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = create(&eb, parts, options, out);
  return cb_errb_return(&eb, st);
}

struct cb_fi_state *cb_runtime_fault_state(const cubert_runtime *rt) { return rt->faultinj; }

void cubert_runtime_destroy(cubert_runtime *rt) {
  if (!rt) return;
  /* the hooks of clients still alive (a mistake of the caller's) run
   * while every device and its memory are still there */
  cb_runtime_end_clients(rt);
  if (rt->faultinj) rt->parts->faults_set_pair_classifier(rt->faultinj, NULL, NULL);
  if (rt->topology) rt->parts->topology_destroy(rt->topology);
  for (int i = 0; i < rt->ndevices; i++) cb_device_destroy(rt->devices[i]);
  for (int i = 0; i < rt->ndevices; i++) cb_device_free(rt->devices[i]);
  cb_free(rt->devices);
  for (int b = 0; b < rt->nbackends; b++) {
    rt->backends[b].ops->close(rt->backends[b].state);
    cb_free(rt->backends[b].note);
  }
  if (rt->placement) rt->parts->placement_destroy(rt->placement); /* after close: no backend thread is left */
  if (rt->faultinj) {
    /* The run ends: rules from $CUBERT_FAULTS that selected nothing because
     * no kernel had their kernel= name are said here, the only place an
     * unmodified program's user sees (docs/faultinj.md). */
    char idle[1024];
    if (rt->created && rt->parts->faults_unmatched(rt->faultinj, true, idle, sizeof idle))
      fprintf(stderr, "cubert: fault injection: CUBERT_FAULTS %s\n", idle);
    rt->parts->faults_free(rt->faultinj);
  }
  if (rt->settings) rt->parts->settings_free(rt->settings);
  pthread_mutex_destroy(&rt->clients_lock);
  cb_free(rt);
}

int cubert_runtime_device_count(const cubert_runtime *rt) { return rt ? rt->ndevices : 0; }
int cubert_runtime_backend_count(const cubert_runtime *rt) { return rt ? rt->nbackends : 0; }
const char *cubert_runtime_backend_name(const cubert_runtime *rt, int i) {
  if (!rt || i < 0 || i >= rt->nbackends) return NULL;
  return rt->backends[i].inner->name;
}

static cubert_status get_device(cb_errb *eb, cubert_runtime *rt, int device, cb_device **out) {
  if (!rt) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "runtime is NULL");
  if (device < 0 || device >= rt->ndevices)
    return cb_errb_set(eb, CUBERT_ERR_NO_DEVICE, "device %d does not exist (the runtime has %d)", device,
                       rt->ndevices);
  *out = rt->devices[device];
  return CUBERT_OK;
}

cubert_status cubert_runtime_device_info(cubert_runtime *rt, int device, cubert_device_info *info) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cb_device *dev = NULL;
  cubert_status st = get_device(&eb, rt, device, &dev);
  if (st) return cb_errb_return(&eb, st);
  if (!info) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_runtime_device_info: info is NULL");
  *info = dev->info;
  info->lost = atomic_load(&dev->lost) != NULL;
  return CUBERT_OK;
}

cubert_status cubert_runtime_device_link(cubert_runtime *rt, int a, int b, cubert_device_link *link) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cb_device *da = NULL, *db = NULL;
  cubert_status st = get_device(&eb, rt, a, &da);
  if (st || (st = get_device(&eb, rt, b, &db))) return cb_errb_return(&eb, st);
  if (!link) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_runtime_device_link: link is NULL");
  if (da->backend != db->backend)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "devices %d (%s) and %d (%s) belong to different backends",
                   a, da->info.backend, b, db->info.backend);
  cubert_backend_link l = {0};
  cubert_berr err = {0};
  pthread_mutex_lock(&da->lock);
  st = da->ops->link_info(da->bdev, db->bdev, &l, &err);
  pthread_mutex_unlock(&da->lock);
  if (st) return cb_fail_backend(st, &err, "asking for the link", da->info.name);
  link->type = l.type;
  link->hops = l.hops;
  link->links = l.links;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ clients */

cubert_status cubert_client_create(cubert_runtime *rt, int device, cubert_client **out) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cb_device *dev = NULL;
  cubert_status st = get_device(&eb, rt, device, &dev);
  if (st) return cb_errb_return(&eb, st);
  if (!out) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_client_create: client is NULL");
  cubert_client *c = cb_calloc(1, sizeof *c);
  if (!c) return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory creating a client");
  c->rt = rt;
  c->dev = dev;
  pthread_mutex_init(&c->hook_lock, NULL);
  cb_client_link(c);
  *out = c;
  return CUBERT_OK;
}

void cubert_client_destroy(cubert_client *c) {
  if (!c) return;
  cb_client_end(c);
  pthread_mutex_destroy(&c->hook_lock);
  cb_free(c);
}

int cubert_client_device(const cubert_client *c) { return c ? c->dev->index : -1; }

/* ------------------------------------------------------------ kernels */

static _Atomic uint64_t next_kernel_id = 1;


void cubert_kernel_retain(cubert_kernel *k) {
  if (k) atomic_fetch_add(&k->refs, 1);
}

void cubert_kernel_release(cubert_kernel *k) {
  if (!k || atomic_fetch_sub(&k->refs, 1) != 1) return;
  cb_module_forget(k); /* its modules go with it (runtime/module.c) */
  for (uint32_t i = 0; i < k->nparams; i++) cb_free((char *)k->params[i].name);
  cb_free(k->params);
  for (uint32_t i = 0; i < k->nobjects; i++) {
    cb_free((char *)k->objects[i].arch);
    cb_free((void *)k->objects[i].data);
  }
  cb_free(k->objects);
  cb_free(k->name);
  cb_free(k->entry);
  cb_free(k->source);
  cb_free(k->options);
  cb_free(k);
}

const char *cubert_kernel_name(const cubert_kernel *k) { return k ? k->name : ""; }

cubert_status cubert_kernel_create(const cubert_kernel_desc *d, cubert_kernel **out) {
  if (!d || !out)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_kernel_create: %s is NULL", d ? "kernel" : "desc");
  if (!d->name || !*d->name) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "kernel descriptor without a name");
  if (d->nparams && !d->params)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "kernel `%s`: nparams is %u but params is NULL", d->name, d->nparams);
  if (d->nobjects && !d->objects)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "kernel `%s`: nobjects is %u but objects is NULL", d->name, d->nobjects);
  if (!d->source && !d->nobjects && !d->host_fn)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "kernel `%s` has no source, code object or host function", d->name);
  for (uint32_t i = 0; i < d->nparams; i++) {
    const cubert_param *p = &d->params[i];
    if (p->kind == CUBERT_PARAM_SCALAR) {
      if (p->size == 0 || p->size > 64)
        return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "kernel `%s` parameter %u: scalar size %u (1 to 64)",
                       d->name, i, p->size);
    } else if (p->kind == CUBERT_PARAM_BUFFER || p->kind == CUBERT_PARAM_PEER_BUFFER ||
               p->kind == CUBERT_PARAM_TENSOR) {
      if (p->access < CUBERT_ACCESS_READ || p->access > CUBERT_ACCESS_READ_WRITE)
        return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "kernel `%s` parameter %u: access %d is not read, write or read-write",
                       d->name, i, (int)p->access);
    } else {
      return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "kernel `%s` parameter %u: unknown kind %d", d->name, i, (int)p->kind);
    }
  }
  for (uint32_t i = 0; i < d->nobjects; i++)
    if (!d->objects[i].arch || !d->objects[i].data || !d->objects[i].size)
      return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "kernel `%s` code object %u lacks an arch or bytes", d->name, i);
  cubert_kernel *k = cb_calloc(1, sizeof *k);
  if (!k) return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory creating a kernel");
  atomic_init(&k->refs, 1);
  atomic_init(&k->cached, false);
  k->id = atomic_fetch_add(&next_kernel_id, 1);
  k->name = cb_strdup(d->name);
  k->entry = cb_strdup(d->entry ? d->entry : d->name);
  k->source = cb_strdup_or_null(d->source);
  k->options = cb_strdup_or_null(d->compile_options);
  k->host_fn = d->host_fn;
  k->source_hash = d->source ? cubert_hash64(d->source, strlen(d->source)) : 0;
  k->params = d->nparams ? cb_calloc(d->nparams, sizeof *k->params) : NULL;
  k->objects = d->nobjects ? cb_calloc(d->nobjects, sizeof *k->objects) : NULL;
  bool ok = k->name && k->entry && (!d->source || k->source) && (!d->compile_options || k->options) &&
            (!d->nparams || k->params) && (!d->nobjects || k->objects);
  /* counts only over what exists, so that the release below frees a prefix */
  for (uint32_t i = 0; ok && i < d->nparams; i++) {
    k->params[i] = d->params[i];
    char buf[24];
    snprintf(buf, sizeof buf, "#%u", i);
    k->params[i].name = cb_strdup(d->params[i].name ? d->params[i].name : buf);
    k->nparams = i + 1;
    ok = k->params[i].name != NULL;
    if (k->params[i].kind != CUBERT_PARAM_SCALAR && (k->params[i].access & CUBERT_ACCESS_WRITE))
      k->has_write = true;
    k->ntensors += k->params[i].kind == CUBERT_PARAM_TENSOR;
  }
  for (uint32_t i = 0; ok && i < d->nobjects; i++) {
    void *bytes = cb_malloc(d->objects[i].size);
    char *arch = bytes ? cb_strdup(d->objects[i].arch) : NULL;
    if (!arch) {
      cb_free(bytes);
      ok = false;
      break;
    }
    memcpy(bytes, d->objects[i].data, d->objects[i].size);
    k->objects[i] = (cubert_code_object){arch, bytes, d->objects[i].size};
    k->nobjects = i + 1;
  }
  if (!ok) {
    cubert_kernel_release(k);
    return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory creating kernel `%s`", d->name);
  }
  k->image = k->nparams <= CB_KERNEL_IMAGE_ARGS &&
             cubert_backend_image_layout(k->params, k->nparams, k->image_off, &k->layout.size);
  k->layout.nargs = k->nparams;
  k->layout.offset = k->image_off;
  k->layout.params = k->params;
  *out = k;
  return CUBERT_OK;
}
