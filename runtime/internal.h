/* runtime/internal.h: the runtime's private objects (never installed).
 *
 * Locking, from outside in: a device's `lock`, then a shared allocation's
 * cell `lock`. No code holding a cell lock takes a device lock, and no code holding one device's
 * lock takes another device's lock, so there is no cycle.
 *
 * Lifetimes: a cb_alloc lives while handles or bindings name it (one atomic
 * word counts both); at zero it goes to its device's graveyard and is freed
 * under that device's lock, or, when a handle release dropped the last
 * reference to clean pooled memory, waits whole in that thread's cache
 * (tcache.c) for the thread's next allocation of its size. Pending work
 * records hold bindings, so memory used by enqueued work is never reused
 * before the work completed. */
#ifndef CUBERT_RUNTIME_INTERNAL_H
#define CUBERT_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/env.h"
#include "base/str.h"
#include "backends/backend.h"
#include "cubert/cubert.h"
#include "runtime/fail.h"
#include "runtime/kcheck.h"
#include "runtime/limits.h"
#include "runtime/pattern.h"
#include "runtime/pool.h"


/* ------------------------------------------------------------ failures */

#define CB_SKIPS_KEPT 8

struct cubert_failure {
  atomic_uint refs;
  uint64_t id;
  uint64_t parent_id;
  cubert_status status; /* the root's */
  char *message;        /* this failure's own description */
  int device;
  char *device_name;     /* the device's name when the failure was made */
  cubert_stream stream;
  const char *operation; /* static */
  char *kernel;
  uint64_t sequence;
  struct cubert_failure *root; /* NULL when this is a root; else a reference */
  cubert_skip skips[CB_SKIPS_KEPT];
  size_t nskips;
  uint64_t dropped;
  /* an imported failure (runtime/record.c): made in another process; device,
   * stream, sequence and parent_id are that process's, `operation` points at
   * owned_operation */
  char *owned_operation;
  bool remote;
  char *remote_host;
  int64_t remote_pid;
  int remote_rank;
  uint64_t remote_id;
};

/* A new failure (a reference the caller owns). Never NULL: when its record
 * cannot be allocated, a static failure stands for it (status
 * CUBERT_ERR_OUT_OF_MEMORY, "out of host memory recording a failure ...";
 * retain and release leave it alone), so that what it taints stays tainted.
 * The same for cb_failure_child(). */
cubert_failure *cb_failure_new(cubert_status status, const char *message, int device,
                               const char *device_name, cubert_stream stream, const char *operation, const char *kernel,
                               uint64_t sequence);
/* False for that static failure: a call whose own result is the failure
 * (cubert_failure_create, an external write's pending failure) refuses
 * with CUBERT_ERR_OUT_OF_MEMORY instead of handing it out. */
bool cb_failure_recorded(const cubert_failure *f);
/* That static failure (never freed; retain and release leave it alone). */
const cubert_failure *cb_failure_unrecorded(void);
/* A failure passed on from `parent`: `kernel` (or operation) did not run on
 * good input `input`. */
cubert_failure *cb_failure_child(const cubert_failure *parent, const char *kernel,
                                 const char *input, int device, const char *device_name,
                                 cubert_stream stream,
                                 const char *operation, uint64_t sequence);
/* "failure #7 (launch of `k1` on device 0 stream 1, work 3: message)" plus
 * the chain. */
void cb_failure_describe(const cubert_failure *f, cb_str *out);
/* Ids handed out so far (for tests and reports). */
uint64_t cb_failure_last_id(void);
/* A new failure with the next id, all else zero (record.c builds imported
 * failures with it); NULL when out of memory. */
cubert_failure *cb_failure_alloc(void);
/* cb_failure_rank(): runtime/fault_state.h. */

/* ------------------------------------------------------------ errors */

/* The error value (cb_errb: cb_errb_init, _set, _finish, _discard,
 * _return) and cb_fail are in runtime/fail.h, shared with the layers above;
 * internal functions fill a cb_errb the caller owns (cb_errb_set,
 * cb_taint_refusal, cb_order_access) and never read the thread's last
 * error. tests/no_last_error_reads.cmake keeps it so. */

struct cubert_error {
  atomic_uint refs;
  cubert_status status;
  char *message;
  cb_err_entry *entries;
  size_t nentries;
};

/* Adds failure `f` over [start, end) to `b` (a reference taken). */
void cb_errb_add(cb_errb *b, const cubert_failure *f, uint64_t start, uint64_t end);
/* cb_fail: runtime/fail.h. */
/* The same as a value (cb_errb_set). */
cubert_status cb_errb_backend(cb_errb *b, cubert_status status, const cubert_berr *err, const char *what,
                              const char *device_name);
/* A backend error: status plus "<what> on <device>: <backend message>". */
cubert_status cb_fail_backend(cubert_status status, const cubert_berr *err, const char *what,
                              const char *device_name);

/* ------------------------------------------------------------ ledger */

/* One tainted range: a node of the ledger's tree (a treap keyed by start). */
typedef struct cb_taint cb_taint;
struct cb_taint {
  uint64_t start, end;
  cubert_failure *failure; /* a reference */
  cb_taint *left, *right;
  uint64_t prio; /* heap order: a parent's prio is >= its children's */
};

/* One strided claim: the runs of a pattern (runtime/pattern.h) carrying
 * one failure, a node of the ledger's second treap, keyed by the claim's
 * first byte and augmented with the largest end below it (an interval
 * tree: claims whose bounds interleave are found in O(log n + k)). */
typedef struct cb_sclaim cb_sclaim;
struct cb_sclaim {
  cb_pattern p;
  uint64_t start, end; /* bounds of the runs [p.lo, p.hi) */
  uint64_t maxend;     /* the largest end in this subtree */
  cubert_failure *failure;
  cb_sclaim *left, *right;
  uint64_t prio;
};

/* Tainted bytes of one allocation: contiguous ranges (sorted, disjoint, in
 * a balanced tree) and strided claims (a second tree, by bounds), no byte
 * in two entries. set, clear and lookups cost O(log n) plus the entries
 * they touch. All zero is an empty ledger; the struct may be copied to
 * move it.
 *
 * Out of host memory: a set that cannot allocate its nodes taints the whole
 * allocation instead (`all`, inside the struct: no allocation), and it
 * stays tainted until freed: too much taint, never too little. */
typedef struct cb_ledger {
  cb_taint *root;
  size_t n;      /* entries held, both kinds; 0 means clean, which callers test first */
  uint64_t seed; /* for node priorities */
  cb_taint all;  /* all.failure set: every byte carries it (root is NULL) */
  cb_sclaim *sroot;
  size_t ns; /* strided claims held (counted in n too) */
} cb_ledger;

/* Sets [start, end) to `f` (set, never add: whatever was there is replaced). */
void cb_ledger_set(cb_ledger *l, uint64_t start, uint64_t end, cubert_failure *f);
/* Releases [start, end): the bytes were written. */
void cb_ledger_clear(cb_ledger *l, uint64_t start, uint64_t end);
/* The same for the footprint of a pattern: one strided claim, whatever its
 * number of runs; the bytes between its runs keep what they carried. */
void cb_ledger_set_pattern(cb_ledger *l, const cb_pattern *p, cubert_failure *f);
void cb_ledger_clear_pattern(cb_ledger *l, const cb_pattern *p);
/* Adds every tainted piece of the footprint of `p` to the error, in
 * address order; returns how many. */
size_t cb_ledger_report_pattern(const cb_ledger *l, const cb_pattern *p, cb_errb *b);
/* The first tainted piece of [from, end), in address order, across both
 * kinds of entries: true and its bounds and failure (borrowed), or false. */
bool cb_ledger_first_piece(const cb_ledger *l, uint64_t from, uint64_t end, uint64_t *s, uint64_t *e,
                           cubert_failure **f);
/* The first range ending after `start` (the lowest that can overlap a read
 * from `start`), or NULL. */
const cb_taint *cb_ledger_lower(const cb_ledger *l, uint64_t start);
/* The range after `t` in order, or NULL. */
const cb_taint *cb_ledger_next(const cb_ledger *l, const cb_taint *t);
/* The failure of the first piece overlapping [start, end), or NULL. */
cubert_failure *cb_ledger_first(const cb_ledger *l, uint64_t start, uint64_t end);
/* Adds every overlapping range, clipped to [start, end), to the error;
 * returns how many. */
size_t cb_ledger_report(const cb_ledger *l, uint64_t start, uint64_t end, cb_errb *b);
/* Calls `range` for every contiguous entry and `claim` for every strided
 * one (failures borrowed); the ledger must not change meanwhile. */
void cb_ledger_each(const cb_ledger *l, void (*range)(void *ctx, uint64_t s, uint64_t e, cubert_failure *f),
                    void (*claim)(void *ctx, const cb_pattern *p, cubert_failure *f), void *ctx);
void cb_ledger_free(cb_ledger *l);

/* ------------------------------------------------------------ objects */

typedef struct cb_device cb_device;
typedef struct cb_alloc cb_alloc;

#define CB_HANDLE_ONE ((uint64_t)1 << 32)
#define CB_BINDING_ONE ((uint64_t)1)

/* Memory shared with peers: its taint cell. It holds the allocation's ledger
 * (range-exact) under its own lock, so a peer's launch never takes the
 * owner's device lock. */
typedef struct cb_shared {
  pthread_mutex_t lock;
  cb_ledger ledger;
  uint64_t address; /* device address of the allocation's first byte */
  cb_alloc *alloc;  /* the memory it names */
  uint64_t memory_id;
} cb_shared;

struct cb_alloc {
  /* First, together: what a launch reads or writes of each memory it binds
   * (runtime/launch.c), two cache lines with block.address and ledger.n */
  cb_device *dev;
  cb_shared *_Atomic shared;
  struct cb_xshare *xshare; /* exported or imported (xshare.c): set once,
                               under the device lock, before it is shared */
  /* bindings of pending work records of its own device (work.c), under
   * that device's lock: together they hold one CB_BINDING_ONE reference,
   * taken by the first and dropped by the last, so binding memory again
   * and again costs no atomic operation each time */
  uint64_t local_binds;
  uint32_t last_writer; /* stream id that last wrote it */
  uint32_t nreaders;
  uint64_t last_write;  /* its work number */
  /* streams that read it (a kernel or copy) since the last write, with the
   * work number of their last read: a write waits for every one of them */
  struct cb_reader {
    uint32_t stream;
    uint64_t work;
  } *readers;
  uint32_t capreaders;
  bool host;   /* the ledger of a host buffer (host_buffer.c), not device
                  memory: `dev` is the device it was placed near, `shared`
                  its own cell; never in a slot, never ordered by streams */
  bool orphan; /* its runtime was destroyed first: the device memory went
                  with it, the record lives on for its references */
  cb_block block;
  cb_ledger ledger;    /* when not shared; under the device lock */
  uint64_t id;    /* memory id, never reused */
  uint32_t slot;
  _Atomic uint32_t gen; /* atomic: a thread cache revives a record without the device lock (tcache.c) */
  _Atomic uint64_t refs; /* handles << 32 | bindings */
  uint64_t size;
  cb_alloc *next_grave;
};

struct cubert_handle {
  cb_alloc *alloc;
  uint64_t start, end; /* the view, in allocation bytes */
  cubert_stream stream;
};

struct cubert_binding {
  cb_alloc *alloc;
  uint64_t start, end;
  cubert_stream stream;
};

struct cubert_weak {
  cb_device *dev;
  uint32_t slot, gen;
  uint64_t memory_id;
  uint64_t start, end;
  cubert_stream stream;
};

struct cubert_kernel {
  atomic_uint refs;
  uint64_t id;
  char *name, *entry, *source, *options;
  cubert_param *params;
  uint32_t nparams;
  cubert_code_object *objects;
  uint32_t nobjects;
  cubert_host_fn host_fn;
  uint64_t source_hash;
  bool has_write; /* some parameter writes */
  uint32_t ntensors; /* tensor parameters (a launch's slots for them) */
  atomic_bool cached; /* some device's module cache has had it (module.c) */
  /* The image layout of its parameters (backend.h,
   * cubert_backend_image_layout), computed at create for up to
   * CB_KERNEL_IMAGE_ARGS of them: `image` says it has one, and then a
   * launch whose backend takes images (launch_image) writes argument i at
   * image_off[i] of an image of layout.size bytes (launch.c). */
  bool image;
  cubert_backend_layout layout; /* of the image: its offsets image_off, its params params */
  uint32_t image_off[16];
  /* Its own launch check (runtime/kcheck.h; the built-ins'), NULL for
   * the rest: a launch of a kernel with one goes through cb_kernel_check
   * first (launch.c). */
  cb_kernel_check_fn check;
};
#define CB_KERNEL_IMAGE_ARGS 16

typedef struct cb_stream {
  uint32_t id;
  void *bs;             /* backend stream */
  uint64_t last_work;   /* newest work enqueued */
  uint64_t progress;    /* the backend's progress when last asked (cb_device_reap_floor) */
  void *event;          /* newest event recorded on it */
  uint64_t event_work;  /* last_work when it was recorded */
  uint64_t *waited;     /* per stream id: work of that stream already waited for */
  uint32_t nwaited;
  /* Failures found asynchronously on this stream, not yet reported by a sync. */
  cubert_failure **unreported;
  uint32_t nunreported, capunreported;
  /* One such failure found no room in `unreported` (out of host memory):
   * the next sync reports the static "out of host memory recording a
   * failure" failure for it, never success. */
  bool unreported_lost;
} cb_stream;

/* One range a piece of work touched. Holds a binding on the allocation. */
typedef struct cb_wbind {
  cb_alloc *alloc;
  uint64_t start, end; /* a strided binding: the bounds of its footprint */
  uint8_t access; /* cubert_access */
  const char *name;
  cb_pattern *pat; /* a strided binding's footprint (owned by the record), else NULL */
} cb_wbind;

#define CB_WBIND_INLINE 16 /* a launch's bindings without a heap allocation */
_Static_assert(CB_KERNEL_IMAGE_ARGS == CB_WBIND_INLINE, "the one-pass launch's arguments have image offsets");

/* Work enqueued and not yet known complete: what an asynchronous failure is
 * attributed to, and what keeps the memory it uses alive. */
typedef struct cb_work {
  cb_device *dev; /* whose lock guards the record */
  uint64_t work;
  uint32_t stream;
  bool failed; /* settled as failed at enqueue (or skipped) */
  bool plain;  /* every binding is memory of this device, not a host
                  buffer's, without a pattern (launch.c's one pass sets it):
                  releasing a binding is then one decrement (work.c) */
  bool kpin;   /* `kernel` is the device's kpin, counted in kpin_n rather
                  than referenced by this record */
  const char *operation;
  cubert_kernel *kernel; /* a reference (or counted in the device's kpin_n), or NULL */
  uint32_t nb;
  cb_wbind *heap; /* when nb > CB_WBIND_INLINE */
  cb_wbind inl[CB_WBIND_INLINE];
} cb_work;

/* Records move when the pending array grows: never keep a pointer into
 * `inl`, ask for the binds each time. */
static inline cb_wbind *cb_work_binds(cb_work *w) {
  return w->nb > CB_WBIND_INLINE ? w->heap : w->inl;
}

struct cubert_timer {
  cb_device *dev; /* a reference */
  void *t;        /* NULL once its runtime was destroyed */
  struct cubert_timer *next, **prev; /* the device's live timers */
};

/* An entry of a device's module cache (runtime/module.c). */
typedef struct cb_module {
  uint64_t id;   /* the kernel's */
  int state;     /* module.c: empty, preparing, prepared, loaded */
  void *module;  /* the backend's, once loaded */
} cb_module;

#define CB_THREAD_STREAMS 8

struct cb_device {
  /* The runtime's reference, plus one per allocation record, weak binding
   * and timer: when the runtime is destroyed before them, the device's
   * resources go but this record (index, info, lock) stays until the last
   * of them is released, so releasing them stays safe. */
  atomic_uint refs;
  atomic_bool gone; /* its runtime was destroyed */
  cubert_runtime *rt;
  int index;
  int backend;          /* index into rt->backends */
  const cubert_backend_ops *ops;
  void *bdev;
  cubert_device_info info;
  pthread_mutex_t lock;
  cubert_failure *_Atomic lost;
  cb_pool *pool;
  /* allocation slots */
  cb_alloc **slots;
  uint32_t nslots, capslots;
  uint32_t *free_slots;
  uint32_t nfree;
  /* allocations whose last reference went, waiting for the lock: a
   * lock-free stack */
  cb_alloc *_Atomic grave;
  /* freed records kept for the next allocation (cb_alloc_record), linked by
   * next_grave; under `lock`. Each keeps the device reference it had, so
   * reusing one takes none (no atomic operation) */
  cb_alloc *spare;
  uint32_t nspare;
  /* the generation the last allocation got: each gets a new one, so a weak
   * binding never upgrades to a later tenant of its slot */
  _Atomic uint32_t next_gen;
  /* every thread's cache of released allocations of this device
   * (runtime/tcache.c), linked by next_of_dev; the list under `lock` */
  struct cb_tcache *tcaches;
  /* streams, by id - 1 */
  cb_stream **streams;
  uint32_t nstreams, capstreams;
  uint32_t thread_streams[CB_THREAD_STREAMS];
  uint64_t next_work;
  /* The kernel that pending work records of this device pin together
   * (work.c): kpin_n records hold one reference between them, taken by the
   * first and dropped by the last, so launching the same kernel again and
   * again costs no atomic operation each time (as local_binds does for
   * memory). Under `lock`. */
  cubert_kernel *kpin;
  uint64_t kpin_n;
  cb_work *pending;
  size_t npending, cappending;
  size_t reap_at; /* reap when npending reaches it (hysteresis: not every call) */
  /* the module cache: a hash table by kernel id, under module_lock (a
   * leaf lock; runtime/module.c) */
  pthread_mutex_t module_lock;
  /* The kernel whose module cb_module_get last handed out (its id; 0: none)
   * and that module: launching the same kernel again takes neither the
   * module lock nor the hash (runtime/module.c). Written under `lock`. */
  _Atomic uint64_t module_hint;
  void *module_hint_module;
  pthread_cond_t module_cond;   /* a prepare finished */
  cb_module *modules;
  size_t nmodules, capmodules;
  struct cb_device *module_next; /* the registry of devices with a cache */
  /* peer access from this device to device i: 0 unknown, 1 on, 2 refused */
  uint8_t *peer_state;
  char **peer_message;
  uint64_t launches;
  struct cubert_timer *timers; /* live timers, under `lock` */
};

typedef struct cb_backend {
  const cubert_backend_ops *ops;   /* what the runtime calls (maybe the fault layer) */
  const cubert_backend_ops *inner; /* the backend itself */
  void *state;
  int first_device;
  int device_count;
  char *note; /* why it has no device, or why it was opened; "" none */
} cb_backend;

struct cubert_topology;

struct cb_fi_state;
struct cb_runtime_parts;
struct cb_backend_settings;

struct cubert_runtime {
  const struct cb_runtime_parts *parts; /* runtime/parts.h: backends, fault layer, topology */
  struct cubert_topology *topology; /* for fault rules filtered by pair class */
  struct cb_fi_state *faultinj;     /* this runtime's fault rules and log; NULL: no_faultinj */
  bool created;                     /* cubert_runtime_create finished (destroy reports idle rules) */
  struct cb_placement *placement;   /* placement.h: binds backend threads near their device */
  cb_backend backends[4];
  int nbackends;
  cb_device **devices;
  int ndevices;
  struct cb_backend_settings *settings; /* the backends' own (parts->settings_new), or NULL */
  /* the clients not yet destroyed, newest first: cubert_runtime_destroy
   * runs the hooks of those still alive (runtime/component.c) */
  pthread_mutex_t clients_lock;
  struct cubert_client *clients;
};

struct cb_client_hook;
struct cubert_client {
  cubert_runtime *rt;
  cb_device *dev;
  _Atomic uint32_t pinned_stream; /* 0: the thread's */
  pthread_mutex_t hook_lock;      /* guards hooks and orphan */
  struct cb_client_hook *hooks;   /* cubert_client_on_destroy, newest first */
  bool orphan;                    /* its runtime was destroyed first: only cubert_client_destroy is left */
  struct cubert_client *prev, *next; /* in rt->clients, under rt->clients_lock; unlinked: prev == next == NULL */
  bool linked;
};
/* runtime/component.c: links a new client into its runtime's list; runs
 * and frees the client's teardown hooks and unlinks it (its destroy); runs
 * the hooks of every client still alive and leaves them orphans (the
 * runtime's destroy, before anything of it goes). */
void cb_client_link(cubert_client *c);
void cb_client_end(cubert_client *c);
void cb_runtime_end_clients(cubert_runtime *rt);

/* ------------------------------------------------------------ helpers */

/* Allocation references. */
void cb_alloc_ref(cb_alloc *a, uint64_t what);
/* Drops a reference. `held` is the device whose lock the caller holds, or
 * NULL: memory of another device is left in its graveyard for its next
 * locked call rather than taking a second device lock. */
void cb_alloc_unref(cb_alloc *a, uint64_t what, cb_device *held);
/* A zeroed allocation record of `dev` (a->dev set) holding a device
 * reference: a spare one of the device's (which kept its reference), else a
 * new one (NULL: out of host memory). Caller holds dev->lock. */
#define CB_SPARE_ALLOCS 64
cb_alloc *cb_alloc_record(cb_device *dev);
/* Frees allocations in the graveyard; caller holds dev->lock. */
void cb_device_collect(cb_device *dev);
/* Frees one allocation whose last reference went (its block back to the
 * pool, its slot free, the record kept spare); caller holds dev->lock. */
void cb_alloc_free(cb_alloc *a);
/* What cb_alloc_unref does once the last reference went. */
void cb_alloc_last_ref(cb_alloc *a, cb_device *held);
/* Makes `a` a new tenant of its slot: a memory id no allocation had and a
 * generation no tenant of the device had (cb_alloc_adopt, cb_tcache_reuse).
 * Call it before a->refs is stored. The order matters: cb_tcache_reuse
 * revives a record without the device lock, so cubert_weak_upgrade takes a
 * reference from a non-zero count first and compares the generation after;
 * a count stored before the generation would let a weak binding to the
 * slot's previous tenant upgrade to the new one. */
void cb_alloc_new_tenant(cb_device *dev, cb_alloc *a);

/* runtime/tcache.c: per-thread caches of released allocations, the pool's
 * fast path. cubert_handle_release of the last reference to a clean pooled
 * allocation parks the handle with its record and block in the releasing
 * thread's cache for that device (no lock: one atomic store);
 * cubert_handle_empty of the same block size on that thread takes it back
 * (one atomic exchange) with a new memory id and generation. Anyone holding
 * the device lock may empty every thread's cache of the device: out of
 * memory, cubert_memory_usage/cleanup, teardown. A thread's caches go at
 * its exit. */
/* A parked handle of `size` bytes made new for client `c`, or NULL (no
 * cache, no block of that size, no stream known yet): take the slow path. */
cubert_handle *cb_tcache_reuse(cubert_client *c, uint64_t size);
/* Parks `h`, whose last reference just went; false: not parked (not a
 * clean pooled allocation, no cache, the cache full), free it as before. */
bool cb_tcache_park(cubert_handle *h);
/* This thread's cache for `dev`, made if missing (no host memory: none),
 * remembering `stream` (0: the client's pinned one; keep the old) as the
 * thread's stream on it. Caller holds dev->lock. */
void cb_tcache_attach(cb_device *dev, uint32_t stream);
/* Empties every thread's cache of `dev`, freeing what was parked; returns
 * how many were. Caller holds dev->lock. */
uint32_t cb_tcache_drain(cb_device *dev);
/* Drops this thread's cache of `dev` (its runtime is being destroyed);
 * caller does not hold dev->lock. */
void cb_tcache_forget(cb_device *dev);

/* runtime/dedicated.c: where an allocation's block comes from. Flags 0:
 * the pools (cb_pool_alloc); CUBERT_MEMORY_FINE_GRAINED: a driver
 * allocation of its own (mem_alloc with CUBERT_BACKEND_MEM_FINE_GRAINED),
 * marked with pool CB_BLOCK_DEDICATED and its cookie in `page`.
 * cb_block_free gives either back. Caller holds dev->lock. */
#define CB_MEMORY_FLAGS (CUBERT_MEMORY_FINE_GRAINED | CUBERT_MEMORY_SHAREABLE)
#define CB_BLOCK_DEDICATED UINT32_MAX
/* CUBERT_MEMORY_SHAREABLE: a driver allocation of its own that other
 * processes may map; imported from another process (runtime/xshare.c) */
#define CB_BLOCK_SHAREABLE (UINT32_MAX - 1)
#define CB_BLOCK_IMPORTED (UINT32_MAX - 2)
/* a block of its own (not the pools') */
#define CB_BLOCK_OWN(b) ((b)->pool >= CB_BLOCK_IMPORTED)
/* The backend's description of a block of its own (for mem_free,
 * mem_export). */
void cb_block_mem(const cb_block *block, cubert_backend_mem *mem);
cubert_status cb_block_alloc(cb_device *dev, uint64_t size, uint32_t flags, cb_block *block,
                             cubert_berr *err);
void cb_block_free(cb_device *dev, const cb_block *block);
/* runtime/memory.c: an allocation record for `block` (consumed: freed on
 * failure, the error in `eb`); caller holds dev->lock. cb_handle_adopt: the
 * same, entered through `c`, with a handle of view [start, end) (a lost
 * device's error is recorded by cb_device_enter, not put in `eb`). */
cubert_status cb_alloc_adopt(cb_errb *eb, cb_device *dev, uint64_t size, const cb_block *block, cb_alloc **out);
cubert_status cb_handle_adopt(cb_errb *eb, cubert_client *c, uint64_t size, const cb_block *block, uint64_t start,
                              uint64_t end, cb_alloc **alloc, cubert_handle **out);

/* runtime/xshare.c: memory shared with other processes (docs/processes.md).
 * An exported or imported allocation has `xshare`: the failure cell both
 * processes map is the truth about its taint. cb_xshare_report adds the
 * failures of [start, end) to `report` (and taints the whole allocation,
 * once, when the other process died or freed it), cb_xshare_report_pattern
 * those of a strided footprint; cb_xshare_settle sets or clears [start, end),
 * or the footprint `p` when not NULL, after a write (kept on the allocation
 * while the cell's lock fails, put in at the next lock that works);
 * cb_xshare_release lets go (alloc_free, first; device teardown). */
void cb_xshare_report(cb_alloc *a, uint64_t start, uint64_t end, cb_errb *report);
void cb_xshare_report_pattern(cb_alloc *a, const cb_pattern *p, cb_errb *report);
void cb_xshare_settle(cb_alloc *a, uint64_t start, uint64_t end, const cb_pattern *p, const cubert_failure *f);
void cb_xshare_release(cb_alloc *a);
/* For tests: the cell of an exported or imported handle's memory, NULL for
 * other memory (a struct cb_xcell, runtime/xcell.h). */
struct cb_xcell *cb_xshare_cell(const cubert_handle *h);

/* The ledger of an allocation, locked for use; caller holds dev->lock if it
 * is the owner. Pair with cb_alloc_ledger_unlock. */
cb_ledger *cb_alloc_ledger_lock(cb_alloc *a);
void cb_alloc_ledger_unlock(cb_alloc *a);

/* runtime/host_buffer.c: frees a host buffer whose last reference went
 * (`a` is its ledger's record). */
void cb_host_buffer_free(cb_alloc *a);

/* runtime/memory.c, for the other entry points that move bytes
 * (host_buffer.c, strided.c): cb_write_failed, cb_skip_copy and
 * cb_check_own, declared below. */
/* Waits for every stream of `dev` and drops every work record up to the
 * newest; caller holds dev->lock. */
void cb_device_reap_all(cb_device *dev);

/* Device lock helpers; cb_device_enter fails with DEVICE_LOST (recorded)
 * when the device is lost, leaving it unlocked. Inline: every locked call
 * (each launch) takes the lock here; what is not the usual case (a lost
 * device, allocations in the graveyard, records to reap) is
 * cb_device_entered's, out of line, in the same order. */
cubert_status cb_device_entered(cb_device *dev);
static inline cubert_status cb_device_enter(cb_device *dev) {
  pthread_mutex_lock(&dev->lock);
  if (!atomic_load(&dev->lost) && !atomic_load_explicit(&dev->grave, memory_order_relaxed) &&
      dev->npending < dev->reap_at && dev->npending < (1u << 16))
    return CUBERT_OK;
  return cb_device_entered(dev);
}
static inline void cb_device_leave(cb_device *dev) { pthread_mutex_unlock(&dev->lock); }
cubert_status cb_device_lost_error(cb_device *dev);

/* runtime/sync.c: waits for the client's stream and settles what the wait
 * finds (taint, replay) as cubert_sync does, but reports nothing: the
 * failures found stay for the caller's next sync, and no last error is
 * recorded (for entry points that wait on their way, such as
 * cubert_handle_external_begin). CUBERT_OK, or why the wait failed (in
 * `eb`); CUBERT_OK as well for a lost device, which the caller's next
 * cb_device_enter refuses. */
cubert_status cb_client_wait(cb_errb *eb, cubert_client *c);

/* The stream the client uses on this thread (created on first use). */
cubert_status cb_client_stream(cubert_client *c, cb_stream **out);
/* This thread's slot in each device's thread_streams (runtime/stream.c;
 * -1: none yet). Initial-exec: read with one load from the thread pointer,
 * not a call to __tls_get_addr each launch (the library's thread-locals
 * are 24 bytes of static TLS). */
#if defined(__GNUC__)
#define CB_TLS_IE __attribute__((tls_model("initial-exec")))
#else
#define CB_TLS_IE
#endif
extern _Thread_local int cb_thread_slot CB_TLS_IE;
/* That stream when it exists already, else NULL (nothing is created).
 * Inline: each launch asks. */
static inline cb_stream *cb_client_stream_made(const cubert_client *c) {
  const cb_device *dev = c->dev;
  uint32_t id = atomic_load(&c->pinned_stream);
  int slot = cb_thread_slot;
  if (!id && slot >= 0) id = dev->thread_streams[slot];
  return id ? dev->streams[id - 1] : NULL;
}
/* Makes `s` wait for the last write of `a` when another stream made it,
 * and, when `write`, for its last read on another stream too (a write must
 * not land under a reader). On failure `err` holds the error (not
 * recorded). */
cubert_status cb_order_access(cb_device *dev, cb_stream *s, cb_alloc *a, bool write, cb_errb *err);

/* Work records. */
cb_work *cb_work_begin(cb_device *dev, cb_stream *s, const char *operation, cubert_kernel *k,
                       uint32_t nbinds);
/* The record's hold on its kernel: counted in the device's kpin_n when it
 * is the pinned kernel (or none is pinned: then it becomes it, one
 * reference), else a reference of its own (work.c drops it). */
static inline void cb_work_pin_kernel(cb_device *dev, cb_work *w, cubert_kernel *k) {
  if (k == dev->kpin) {
    dev->kpin_n++;
    w->kpin = true;
    return;
  }
  cubert_kernel_retain(k);
  if (dev->kpin_n == 0) {
    dev->kpin = k;
    dev->kpin_n = 1;
    w->kpin = true;
  }
}
/* The header of new record `w` (the device's newest) of work `operation`
 * of `k` (may be NULL) on `s` (may be NULL), nbinds bindings (in `heap`
 * when more than CB_WBIND_INLINE): each field stored once, no memset. */
static inline void cb_work_init(cb_work *w, cb_device *dev, cb_stream *s, const char *operation, cubert_kernel *k,
                                uint32_t nbinds, cb_wbind *heap) {
  /* every field of the header, the padding aside: a new field must be
   * stored here */
  _Static_assert(offsetof(cb_work, inl) == 56, "cb_work_init stores each field of the record's header");
  w->dev = dev;
  w->work = ++dev->next_work;
  w->stream = s ? s->id : 0;
  w->failed = false;
  w->plain = false;
  w->kpin = false;
  w->operation = operation;
  w->kernel = k;
  w->nb = nbinds;
  w->heap = heap;
  if (k) cb_work_pin_kernel(dev, w, k);
  if (s) s->last_work = w->work;
}
/* cb_work_begin inline, for a record with no bindings yet (its inline
 * slots: the caller binds and sets nb), `s` and `k` not NULL: a launch's
 * (launch.c's one pass). */
static inline cb_work *cb_work_begin_inline(cb_device *dev, cb_stream *s, const char *operation, cubert_kernel *k) {
  if (dev->npending == dev->cappending) return cb_work_begin(dev, s, operation, k, 0);
  cb_work *w = &dev->pending[dev->npending++];
  cb_work_init(w, dev, s, operation, k, 0, NULL);
  return w;
}
/* Memory of the record's own device (not a host buffer's ledger) is counted
 * in a->local_binds under the device lock the caller holds; the count's one
 * reference keeps it alive. */
static inline bool cb_work_bind_local(const cb_work *w, const cb_alloc *a) { return a->dev == w->dev && !a->host; }
/* Binding `i` of `w`: [start, end) of `a`. Inline: a launch binds each of
 * its buffers here (issue 15: the per-binding cost). */
static inline void cb_work_bind_known(cb_wbind *slot, cb_alloc *a, bool local, uint64_t start, uint64_t end,
                                      cubert_access access, const char *name) {
  /* `local`: cb_work_bind_local(w, a), which a caller may know already */
  if (!local || a->local_binds++ == 0) cb_alloc_ref(a, CB_BINDING_ONE);
  /* field by field: as one compound literal it costs more */
  slot->alloc = a;
  slot->start = start;
  slot->end = end;
  slot->access = (uint8_t)access;
  slot->name = name;
  slot->pat = NULL;
}
static inline void cb_work_bind_at(const cb_work *w, cb_wbind *slot, cb_alloc *a, uint64_t start, uint64_t end,
                                   cubert_access access, const char *name) {
  cb_work_bind_known(slot, a, cb_work_bind_local(w, a), start, end, access, name);
}
static inline void cb_work_bind(cb_work *w, uint32_t i, cb_alloc *a, uint64_t start, uint64_t end,
                                cubert_access access, const char *name) {
  cb_work_bind_at(w, &cb_work_binds(w)[i], a, start, end, access, name);
}
/* Undoes cb_work_begin of `w`, the device's newest record, whose first
 * w->nb bindings are bound: the bindings and the record go and its work
 * number is given back, `last_work` is `s`'s again (its value before
 * cb_work_begin). For work found, before anything was enqueued, to need
 * another way of enqueueing it (launch.c's one-pass launch). */
void cb_work_abandon(cb_device *dev, cb_stream *s, cb_work *w, uint64_t last_work);
/* A strided binding: the footprint `p` (copied; an empty one binds
 * nothing). False when out of memory (the binding is then left empty). */
bool cb_work_bind_pattern(cb_work *w, uint32_t i, cb_alloc *a, const cb_pattern *p, cubert_access access,
                          const char *name);
/* ------------------------------------------------------------ taint (taint.c) */

/* Adds every tainted range of [start, end) of `a` to `report` (a peer
 * binding of a lost owner: the whole range, with the loss); returns the
 * first failure found (borrowed from the report) or NULL. Takes the cell
 * lock of shared memory; otherwise the caller holds the owner's lock. */
const cubert_failure *cb_taint_find(cb_alloc *a, uint64_t start, uint64_t end, bool peer,
                                    cb_errb *report);
/* Whether a read (`what`: "read", "check", "copy source") of [start, end)
 * of `a` must be refused; when it must, `report` is the refusal
 * (CUBERT_ERR_TAINTED, every range, the message), else it is left empty. */
bool cb_taint_refusal(const char *what, cb_alloc *a, uint64_t start, uint64_t end, cb_errb *report);
/* The same for the footprint of `p`: refused only where it meets taint. */
bool cb_taint_refusal_pattern(const char *what, cb_alloc *a, const cb_pattern *p, cb_errb *report);
/* cb_taint_find for a binding, strided or not. */
const cubert_failure *cb_taint_find_bind(const cb_wbind *b, bool peer, cb_errb *report);
/* Skips work `w` because input `input` carries `in`: its write set carries a
 * child failure (`name` was not run). Returns the child (a new reference,
 * NULL when out of memory). */
cubert_failure *cb_taint_skip(cb_device *dev, cb_work *w, const cubert_failure *in, const char *name,
                              const char *input, const char *operation);
/* Settles the write set of `w`: releases it (f NULL), or taints it with `f`. */
void cb_taint_settle(cb_device *dev, cb_work *w, cubert_failure *f);
/* Whether releasing binding `b` (a write) changes anything: its memory is
 * shared (cells, other processes) or its ledger holds a range. Under the
 * device lock. */
static inline bool cb_taint_settle_needed(const cb_wbind *b) {
  return atomic_load_explicit(&b->alloc->shared, memory_order_relaxed) || b->alloc->xshare || b->alloc->ledger.n;
}
/* cb_taint_settle for one write binding. */
void cb_taint_settle_bind(cb_wbind *b, cubert_failure *f);
/* Adds `f` to `b` once per range of the write set of `w` (which `f` now
 * taints), in binding order; once with range 0..0 when it writes nothing. A
 * strided binding adds its first CB_REPORT_RUNS runs, and the message says
 * how many it taints. */
#define CB_REPORT_RUNS 64
void cb_work_report(cb_work *w, const cubert_failure *f, cb_errb *b);
/* Marks uses: last writer and last reader stream/work of each allocation. */
void cb_work_mark_uses(cb_device *dev, cb_work *w);
/* Stream `stream` as a reader of `a` since its last write, with work
 * `work` (when the list cannot grow, nothing: sync before rewriting). */
void cb_reader_add(cb_alloc *a, uint32_t stream, uint64_t work);
/* One use of memory of the device whose lock the caller holds (not a host
 * buffer's): a write makes work `work` of `stream` its last writer, a read
 * the stream's last read of it. cb_work_mark_uses does it for each binding
 * of that device; a launch whose bindings all are calls it directly. */
static inline void cb_mark_local(cb_alloc *a, uint8_t access, uint32_t stream, uint64_t work) {
  if (access & CUBERT_ACCESS_WRITE) {
    a->last_writer = stream;
    a->last_write = work;
    return;
  }
  /* the stream's entry, or a new one: one test an entry, none after */
  struct cb_reader *r = a->readers;
  for (uint32_t j = 0, n = a->nreaders; j < n; j++)
    if (r[j].stream == stream) {
      r[j].work = work;
      return;
    }
  cb_reader_add(a, stream, work);
}
/* Work that was handed to the backend: cb_taint_settle(dev, w, NULL) then
 * cb_work_mark_uses(dev, w), in one pass over the bindings. */
void cb_work_succeeded(cb_device *dev, cb_work *w);
/* Drains asynchronous failures and frees records of completed work. With
 * `all`, waits for nothing but drops every record up to progress. */
void cb_device_reap(cb_device *dev);
/* The same with `floor[i]` (may be NULL): work of stream i up to it is
 * known complete (a sync waited for it), whatever progress says. */
void cb_device_reap_floor(cb_device *dev, const uint64_t *floor, uint32_t nfloor);
/* Frees the records of work that `progress` (per stream) says completed;
 * NULL: every stream's work completed (teardown, after a sync). */
void cb_work_drop_completed(cb_device *dev, const uint64_t *progress);
/* Handles a backend failure at enqueue: makes the failure, marks the device
 * lost when sticky. Returns a new reference. */
cubert_failure *cb_device_failure(cb_device *dev, cubert_status status, const cubert_berr *err,
                                  cb_stream *s, const char *operation, const char *kernel,
                                  uint64_t work);
void cb_device_mark_lost(cb_device *dev, cubert_failure *f);
/* Ordering after another stream failed (cb_order_access filled `err`): the
 * work was not enqueued, so its write set carries a failure made from that
 * error (rule 1). Returns the error, recorded: for public entry points. */
cubert_status cb_work_fail_ordering(cb_device *dev, cb_work *w, cb_stream *s, cb_errb *err,
                                    const char *operation, const char *kernel);

/* memory.c, shared with strided.c and host_buffer.c. cb_check_own: WRONG_DEVICE
 * (in `eb`) unless `h` is memory of the client's device of its runtime
 * (cb_check_runtime's errors first).
 * cb_write_failed: settles write work that failed at enqueue (its write set
 * carries the failure) and records the error. cb_skip_copy: copy work whose
 * source is tainted (`report`, a refusal) is not done; its destination
 * carries a child failure; returns the refusal, recorded. */
cubert_status cb_check_own(cb_errb *eb, const char *fn, cubert_client *c, const cubert_handle *h, const char *what);
cubert_status cb_write_failed(cb_device *dev, cb_work *w, cb_stream *s, cubert_status st,
                              const cubert_berr *err, const char *op);
cubert_status cb_skip_copy(cb_device *dev, cb_work *w, const char *op, cb_errb *report);
/* The end of a host read (`op`) of [start, end) of `a`, or of its footprint
 * `p`, that waited without the lock and returned `st`: a failure of the
 * read itself, else the failures found at the fence and the verdict again.
 * Takes dev->lock, drops the caller's binding on `a`; records the error. */
cubert_status cb_read_finish(cb_device *dev, cb_stream *s, uint64_t work, cubert_status st, const cubert_berr *err,
                             cb_alloc *a, uint64_t start, uint64_t end, const cb_pattern *p, const char *op);
/* Binds the source (read) and destination (write) of a copy to slots 0
 * and 1 of `w`: their footprints `sp` and `dp`, or their views where a
 * footprint is NULL (or cannot be stored: out of memory). */
void cb_work_bind_copy(cb_work *w, const cubert_handle *src, const cb_pattern *sp, const cubert_handle *dst,
                       const cb_pattern *dp);
/* The start of a peer copy `op` from `src` to `dst` on the device of `dc`
 * (footprints `sp` and `dp`, or NULL for the views): 1. on the source's
 * device, its verdict and its last writer waited for; 2. the destination
 * device entered, its stream (*s) and a work record (*w) binding both;
 * 3. a tainted source skips the work (cb_skip_copy), a destination that
 * cannot be ordered fails it (cb_work_fail_ordering), both recorded.
 * CUBERT_OK: the caller enqueues the copy, settles it and leaves the
 * destination device. Otherwise the copy is over and no device is held;
 * the error is in `eb` when this function made it, else recorded. */
cubert_status cb_peer_copy_begin(cb_errb *eb, cubert_client *dc, const cubert_handle *src, const cb_pattern *sp,
                                 const cubert_handle *dst, const cb_pattern *dp, const char *op, cb_stream **s,
                                 cb_work **w);

/* Module of `k` on `dev` (loaded on first use). */
/* runtime/module.c: the module cache. open/close with the device (close
 * unloads every module); prepare before the device lock (the backend's
 * compile, once per kernel at a time); get under it (module_load on a
 * miss); forget when a kernel's last reference goes (its modules are
 * unloaded on every device). */
void cb_module_open(cb_device *dev);
void cb_module_close(cb_device *dev);
void cb_module_prepare_slow(cb_device *dev, const cubert_kernel *k);
/* Prepare: nothing to do when the kernel of the device's last launch is
 * this one (the hint is only ever a kernel whose module is loaded: a launch
 * holds its kernel, so the module cannot be forgotten). Tested inline: it
 * is every repeated launch's case. */
static inline void cb_module_prepare(cb_device *dev, const cubert_kernel *k) {
  if (atomic_load_explicit(&dev->module_hint, memory_order_relaxed) != k->id) cb_module_prepare_slow(dev, k);
}
/* Get: the device's hint tested inline (a repeated launch's case: no
 * lock, no hash), else cb_module_load. */
cubert_status cb_module_load(cb_device *dev, const cubert_kernel *k, void **module, cubert_berr *err);
static inline cubert_status cb_module_get(cb_device *dev, const cubert_kernel *k, void **module, cubert_berr *err) {
  if (atomic_load_explicit(&dev->module_hint, memory_order_relaxed) == k->id) {
    *module = dev->module_hint_module; /* the same kernel as the last launch */
    return CUBERT_OK;
  }
  return cb_module_load(dev, k, module, err);
}
void cb_module_forget(const cubert_kernel *k);

/* Free everything of a device; the runtime calls it at destroy. */
void cb_device_destroy(cb_device *dev);
/* Frees the device's resources, orphans allocation records that are still
 * referenced, marks it gone and drops the runtime's reference. */
void cb_device_free(cb_device *dev);
/* Device record references (see cb_device.refs). */
void cb_device_ref(cb_device *dev);
void cb_device_unref(cb_device *dev);
/* CUBERT_OK when memory `a` may be used with a client of `dev` (the same
 * runtime, which is still alive); else WRONG_DEVICE (another runtime) or
 * EXPIRED (its runtime was destroyed), in `eb`, naming `fn` and `what`. */
cubert_status cb_check_runtime(cb_errb *eb, const char *fn, const char *what, const cb_device *dev,
                               const cb_alloc *a);

#endif
