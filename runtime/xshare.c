/* runtime/xshare.c: memory shared between processes of a node
 * (cubert_handle_export, cubert_handle_import; docs/processes.md).
 *
 * The exporter's first export of an allocation makes a segment of its own
 * (base/shm.h: mode 0600, a random name) holding the allocation's failure
 * cell (runtime/xcell.h), a random secret, the exporter's pid and the pids
 * of the importers. From then on, in every process that maps it, the cell is
 * the truth about the allocation's taint: a write settles into it
 * (cb_xshare_settle), a read, copy or launch consults it (cb_xshare_report).
 * A process that died is noticed there: the lock's owner died (EOWNERDEAD),
 * the exporter freed the memory (the segment's `dead`) or ended, an
 * importer ended without letting go; the whole allocation is then tainted
 * with a failure naming that process, once, and a successful write repairs.
 * A verdict the cell cannot take (its lock fails) is never dropped: it waits
 * in the allocation's `pending` ledger, and every other process refuses the
 * bytes it looks up, until this process's next lock puts it in (flush).
 * The exporter removes the segment's name when the allocation is freed (or
 * its runtime destroyed); the backend does the same for the memory's own
 * segment. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/shm.h"
#include "runtime/internal.h"
#include "runtime/xcell.h"

#define DESC_MAGIC 0x44584243u /* "CBXD" */
#define DESC_VERSION 1u
#define SEG_MAGIC 0x47535843u /* "CXSG" */
#define SEG_VERSION 2u
#define IMPORTERS 16

/* The descriptor's bytes (native layout: it never leaves the node). */
typedef struct xdesc {
  uint32_t magic, version;
  uint64_t checksum; /* FNV-1a 64 of all CUBERT_EXPORT_DESC_SIZE bytes, this field 0 */
  char host[64];
  char boot[40]; /* /proc/sys/kernel/random/boot_id */
  int64_t pid;
  uint32_t uid;
  uint32_t flags;
  char backend[16];
  uint64_t offset, size, alloc_size;
  uint64_t memory; /* the exporter's memory id, for messages */
  unsigned char secret[16];
  char cell[CB_SHM_NAME];
  unsigned char ipc[CUBERT_BACKEND_IPC_SIZE];
} xdesc;
_Static_assert(sizeof(xdesc) <= CUBERT_EXPORT_DESC_SIZE, "descriptor layout too big");

/* The segment every process maps. */
typedef struct xseg {
  uint32_t magic, version;
  unsigned char secret[16];
  int64_t owner;
  uint64_t size;
  _Atomic uint32_t dead;        /* the exporter freed the memory */
  int64_t importers[IMPORTERS]; /* under the cell's lock; 0: free */
  /* [0] the exporter, [1 + i] importers[i]: that process holds verdicts it
   * could not settle into the cell (its lock failed); set without the lock */
  _Atomic uint32_t unsettled[1 + IMPORTERS];
  cb_xcell cell;
} xseg;

typedef struct cb_xshare {
  xseg *seg;
  char name[CB_SHM_NAME];
  bool owner;
  bool mourned; /* this process already put the exporter's end into the cell */
  int slot;     /* its entry in seg->unsettled */
  /* the verdicts of writes whose settle could not lock the cell, in their
   * order: failures only, a later repair cuts them out (a repair is never
   * replayed: it could clear what another process set since). Under the
   * allocation's ledger lock (cb_alloc_ledger_lock). */
  cb_ledger pending;
} cb_xshare;

/* ------------------------------------------------------------ helpers */

static void host_id(char host[64], char boot[40]) {
  memset(host, 0, 64);
  memset(boot, 0, 40);
  if (gethostname(host, 63) != 0) strcpy(host, "?");
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, 40, f)) boot[0] = '\0';
    fclose(f);
  }
  boot[strcspn(boot, "\n")] = '\0';
}

static uint64_t desc_sum(const cubert_export_desc *d) {
  cubert_export_desc c = *d;
  memset(c.bytes + offsetof(xdesc, checksum), 0, sizeof(uint64_t));
  return cb_fnv1a64(c.bytes, sizeof c.bytes);
}

/* Alive, and not a zombie waiting for its parent. */
static bool alive(int64_t pid) {
  if (pid <= 0) return false;
  if (kill((pid_t)pid, 0) != 0 && errno != EPERM) return false;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
  FILE *f = fopen(path, "r");
  if (!f) return true;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

/* The record of `f` for the cell. The export cannot fail for a failure
 * that exists; were it to, the record still taints: the static unrecorded
 * failure's, or, that failing too, zeros, which report() reads as a record
 * it cannot read (tainted all the same). */
static void record_of(const cubert_failure *f, cubert_failure_record *rec) {
  memset(rec, 0, sizeof *rec);
  if (cubert_failure_export(f, rec) != CUBERT_OK) (void)cubert_failure_export(cb_failure_unrecorded(), rec);
}

/* Under the cell's lock: all `size` bytes of `cell` now carry a failure
 * saying `message`, found on `dev` (a process was lost). */
static void taint_cell(cb_xcell *cell, uint64_t size, const cb_device *dev, cubert_status status,
                       const char *message) {
  cubert_failure *f = cb_failure_new(status, message, dev->index, dev->info.name, 0, "share", NULL, 0);
  cubert_failure_record rec;
  record_of(f, &rec);
  cb_xcell_set(cell, 0, size, &rec);
  cubert_failure_release(f);
}

/* Under the cell's lock: the whole allocation now carries a failure saying
 * `message` (a process was lost). */
static void taint_all(cb_alloc *a, cubert_status status, const char *message) {
  taint_cell(&a->xshare->seg->cell, a->size, a->dev, status, message);
}

/* Under the cell's lock: importer slot `i` is free again; what that process
 * had not settled goes with it (the whole allocation was tainted naming it). */
static void forget(xseg *seg, int i) {
  seg->importers[i] = 0;
  atomic_store(&seg->unsettled[1 + i], 0);
}

/* Under the cell's lock: notices processes that were lost (see the top). */
static void mourn(cb_alloc *a, int64_t died) {
  cb_xshare *x = a->xshare;
  xseg *seg = x->seg;
  char msg[256];
  if (died) {
    snprintf(msg, sizeof msg,
             "process %lld died while it updated the failure cell of memory shared between processes "
             "(memory %llu here): its last update of these bytes was lost",
             (long long)died, (unsigned long long)a->id);
    taint_all(a, CUBERT_ERR_DEVICE_LOST, msg);
  }
  /* once the exporter's end is told, the importers still are: one that
   * ends later, its mark with it, is named and forgotten as before (a mark
   * left behind would refuse every lookup, repairs or not, for good) */
  if (!x->owner) {
    if (died && died == seg->owner) x->mourned = true; /* named above */
    if (x->mourned) {
      atomic_store(&seg->unsettled[0], 0); /* the exporter's: told as its end */
    } else if (atomic_load(&seg->dead)) {
      snprintf(msg, sizeof msg, "process %lld freed the memory it exported (memory %llu here)",
               (long long)seg->owner, (unsigned long long)a->id);
      taint_all(a, CUBERT_ERR_EXPIRED, msg);
      x->mourned = true;
      atomic_store(&seg->unsettled[0], 0);
    } else if (!alive(seg->owner)) {
      snprintf(msg, sizeof msg, "process %lld, which exported this memory (memory %llu here), has ended",
               (long long)seg->owner, (unsigned long long)a->id);
      taint_all(a, CUBERT_ERR_DEVICE_LOST, msg);
      x->mourned = true;
      atomic_store(&seg->unsettled[0], 0);
    }
  }
  /* every survivor, an importer too, notices a lost importer: the first one
   * to look taints the cell (shared, so all see it) and forgets the pid */
  for (int i = 0; i < IMPORTERS; i++) {
    if (seg->importers[i] && seg->importers[i] == died) forget(seg, i); /* named above */
    if (!seg->importers[i] || alive(seg->importers[i])) continue;
    snprintf(msg, sizeof msg,
             "process %lld, which imported this memory (memory %llu), ended without letting it go",
             (long long)seg->importers[i], (unsigned long long)a->id);
    taint_all(a, CUBERT_ERR_DEVICE_LOST, msg);
    forget(seg, i);
  }
}

static void move_range(void *cell, uint64_t start, uint64_t end, cubert_failure *f) {
  cubert_failure_record rec;
  record_of(f, &rec);
  cb_xcell_set(cell, start, end, &rec);
}

static void move_claim(void *cell, const cb_pattern *p, cubert_failure *f) {
  cubert_failure_record rec;
  record_of(f, &rec);
  cb_xcell_set_pattern(cell, p, &rec);
}

/* Under the cell's lock: the verdicts this process kept while the lock
 * failed go in, in their order (pending holds the outcome of that order). */
static void flush(cb_alloc *a) {
  cb_xshare *x = a->xshare;
  if (!atomic_load(&x->seg->unsettled[x->slot])) return; /* the usual case: none */
  cb_alloc_ledger_lock(a);
  cb_ledger_each(&x->pending, move_range, move_claim, &x->seg->cell);
  cb_ledger_free(&x->pending);
  atomic_store(&x->seg->unsettled[x->slot], 0);
  cb_alloc_ledger_unlock(a);
}

/* Every lock of the cell of `a`: what this process could not settle before
 * goes in first, then the processes lost since are noticed, before anything
 * reads or writes the cell. Nonzero when the lock fails. */
static cubert_status lock_cell(cb_alloc *a) {
  xseg *seg = a->xshare->seg;
  int64_t died = 0;
  if (cb_xcell_lock(&seg->cell, &died)) return CUBERT_ERR_BACKEND;
  flush(a);
  mourn(a, died);
  return CUBERT_OK;
}

/* A verdict whose settle could not lock the cell: kept until the next lock
 * that works (flush). A repair only cuts what this process kept: the cell
 * keeps what it holds, too much taint until a write reaches it, never too
 * little. Meanwhile every other process refuses what it looks up. */
static void keep(cb_alloc *a, uint64_t start, uint64_t end, const cb_pattern *p, const cubert_failure *f) {
  cb_xshare *x = a->xshare;
  cubert_failure *g = (cubert_failure *)f; /* the ledger retains it */
  cb_alloc_ledger_lock(a);
  if (p && f)
    cb_ledger_set_pattern(&x->pending, p, g);
  else if (p)
    cb_ledger_clear_pattern(&x->pending, p);
  else if (f)
    cb_ledger_set(&x->pending, start, end, g);
  else
    cb_ledger_clear(&x->pending, start, end);
  atomic_store(&x->seg->unsettled[x->slot], x->pending.n != 0);
  cb_alloc_ledger_unlock(a);
}

/* Under the cell's lock: the pid of another process that holds verdicts it
 * could not settle, 0 when none does. */
static int64_t unsettled_elsewhere(const cb_xshare *x) {
  for (int i = 0; i <= IMPORTERS; i++)
    if (i != x->slot && atomic_load(&x->seg->unsettled[i])) {
      int64_t pid = i ? x->seg->importers[i - 1] : x->seg->owner;
      return pid ? pid : -1;
    }
  return 0;
}

/* ------------------------------------------------------------ taint */

/* The pieces of a strided footprint inside one tainted range of the cell. */
typedef struct piece_ctx {
  cb_errb *report;
  const cubert_failure *f;
} piece_ctx;

static void add_piece(void *ctx, uint64_t s, uint64_t e) {
  piece_ctx *x = ctx;
  cb_errb_add(x->report, x->f, s, e);
}

/* The failures of [start, end) in the cell, or of the footprint of `p`
 * (when not NULL) inside those bounds. */
static void report(cb_alloc *a, uint64_t start, uint64_t end, const cb_pattern *p, cb_errb *report) {
  cb_xcell *cell = &a->xshare->seg->cell;
  bool locked = !lock_cell(a);
  int64_t other = locked ? unsettled_elsewhere(a->xshare) : 0;
  if (!locked || other) {
    /* nothing in the cell can be trusted: the whole range is refused */
    char msg[256];
    if (!locked)
      snprintf(msg, sizeof msg, "the failure cell of memory shared between processes cannot be locked");
    else
      snprintf(msg, sizeof msg,
               "process %lld could not settle the outcome of a write into the failure cell of memory shared "
               "between processes (memory %llu here): its lock failed there",
               (long long)other, (unsigned long long)a->id);
    cubert_failure *f = cb_failure_new(CUBERT_ERR_BACKEND, msg, a->dev->index, a->dev->info.name, 0, "share", NULL, 0);
    cb_errb_add(report, f, start, end);
    cubert_failure_release(f);
    if (locked) cb_xcell_unlock(cell);
    return;
  }
  uint64_t from = start, rs, re;
  const cubert_failure_record *rec;
  pid_t self = getpid();
  while (from < end && cb_xcell_first(cell, from, end, &rs, &re, &rec)) {
    const cubert_failure *f = NULL;
    cubert_status ist = cubert_failure_import(rec, &f);
    if (ist != CUBERT_OK) {
      /* a record this process cannot read (short of host memory, or
       * corrupt): the bytes are tainted all the same, never passed as good */
      char msg[160];
      snprintf(msg, sizeof msg, "the failure cell of memory shared between processes holds a record this process "
                                "cannot read (%s)", cubert_status_string(ist));
      f = cb_failure_new(ist == CUBERT_ERR_OUT_OF_MEMORY ? ist : CUBERT_ERR_BACKEND, msg, a->dev->index,
                         a->dev->info.name, 0, "share", NULL, 0);
    }
    cubert_remote_origin o;
    cubert_failure_remote(f, &o);
    const cubert_failure *local = NULL;
    if (o.pid == self) { /* this process's own failure: the one in its ledger, with its chain */
      cb_ledger *l = cb_alloc_ledger_lock(a);
      local = l->n ? cb_ledger_first(l, rs, re) : NULL;
      if (local) cubert_failure_retain(local);
      cb_alloc_ledger_unlock(a);
    }
    piece_ctx x = {report, local ? local : f};
    if (p)
      cb_pattern_meet_range(p, rs, re, add_piece, &x);
    else
      cb_errb_add(report, x.f, rs, re);
    cubert_failure_release(local);
    cubert_failure_release(f);
    from = re;
  }
  cb_xcell_unlock(cell);
}

void cb_xshare_report(cb_alloc *a, uint64_t start, uint64_t end, cb_errb *r) { report(a, start, end, NULL, r); }

void cb_xshare_report_pattern(cb_alloc *a, const cb_pattern *p, cb_errb *r) {
  if (p->lo < p->hi) report(a, cb_pattern_start(p), cb_pattern_end(p), p, r);
}

void cb_xshare_settle(cb_alloc *a, uint64_t start, uint64_t end, const cb_pattern *p, const cubert_failure *f) {
  cb_xcell *cell = &a->xshare->seg->cell;
  if (lock_cell(a)) {
    keep(a, start, end, p, f);
    return;
  }
  cubert_failure_record rec;
  if (f) record_of(f, &rec);
  if (p && f)
    cb_xcell_set_pattern(cell, p, &rec);
  else if (p)
    cb_xcell_clear_pattern(cell, p);
  else if (f)
    cb_xcell_set(cell, start, end, &rec);
  else
    cb_xcell_clear(cell, start, end);
  cb_xcell_unlock(cell);
}

/* An importer lets go: out of the segment's importers, unmapped. `a`: its
 * allocation, whose unsettled verdicts go in first (lock_cell); NULL while
 * importing (nothing settled yet). When the lock fails, its slot stays
 * taken: the survivors taint the whole allocation once this process ends. */
static void leave(cb_xshare *x, cb_alloc *a) {
  if (a ? !lock_cell(a) : !cb_xcell_lock(&x->seg->cell, NULL)) {
    forget(x->seg, x->slot - 1);
    cb_xcell_unlock(&x->seg->cell);
  }
  cb_ledger_free(&x->pending);
  munmap(x->seg, sizeof(xseg));
  cb_free(x);
}

void cb_xshare_release(cb_alloc *a) {
  cb_xshare *x = a->xshare;
  if (!x->owner) {
    leave(x, a);
    a->xshare = NULL;
    return;
  }
  a->xshare = NULL;
  atomic_store(&x->seg->dead, 1); /* its unsettled verdicts: the importers taint all */
  shm_unlink(x->name);
  munmap(x->seg, sizeof(xseg));
  cb_ledger_free(&x->pending);
  cb_free(x);
}

/* ------------------------------------------------------------ export */

/* The exporter's segment for `a`, made on its first export (caller holds
 * the device lock); the taint `a` has moves into its cell. */
static cubert_status share_begin(cb_errb *eb, cb_alloc *a) {
  cb_xshare *x = cb_calloc(1, sizeof *x);
  if (!x) return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  char why[256];
  void *map = NULL;
  if (cb_shm_create(sizeof(xseg), x->name, &map, why, sizeof why)) {
    cb_free(x);
    return cb_errb_set(eb, CUBERT_ERR_BACKEND, "cubert_handle_export: memory %llu: %s", (unsigned long long)a->id,
                       why);
  }
  xseg *seg = map;
  cubert_status st = cb_xcell_init(&seg->cell, a->size, why, sizeof why);
  if (!st && getrandom(seg->secret, sizeof seg->secret, 0) != (ssize_t)sizeof seg->secret) {
    snprintf(why, sizeof why, "getrandom: %s", strerror(errno));
    st = CUBERT_ERR_BACKEND;
  }
  if (st) {
    munmap(map, sizeof(xseg));
    shm_unlink(x->name);
    cb_free(x);
    return cb_errb_set(eb, st, "cubert_handle_export: memory %llu: %s", (unsigned long long)a->id, why);
  }
  seg->owner = (int64_t)getpid();
  seg->size = a->size;
  seg->version = SEG_VERSION;
  seg->magic = SEG_MAGIC;
  x->seg = seg;
  x->owner = true;
  /* the taint it has so far, ranges and strided claims, into the cell */
  cb_ledger *l = cb_alloc_ledger_lock(a);
  cb_ledger_each(l, move_range, move_claim, &seg->cell);
  cb_alloc_ledger_unlock(a);
  a->xshare = x;
  return CUBERT_OK;
}

cubert_status cubert_handle_export(cubert_client *c, const cubert_handle *h, cubert_export_desc *desc) {
#define fn "cubert_handle_export"
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, fn ": client is NULL");
  if (!h) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, fn ": view is NULL");
  if (!desc) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, fn ": descriptor is NULL");
  cb_alloc *a = h->alloc;
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = cb_check_runtime(&eb, fn, "the view", c->dev, a);
  if (st) return cb_errb_return(&eb, st);
  cb_device *dev = c->dev;
  if (a->dev != dev)
    return cb_fail(CUBERT_ERR_WRONG_DEVICE, fn ": the view (memory %llu) belongs to device %d, the client to device %d",
                   (unsigned long long)a->id, a->dev->index, dev->index);
  if (h->start >= h->end)
    return cb_fail(CUBERT_ERR_OUT_OF_RANGE, fn ": the view (bytes %llu..%llu of memory %llu) is empty: a descriptor names at least one byte",
                   (unsigned long long)h->start, (unsigned long long)h->end, (unsigned long long)a->id);
  if (h->end > a->size)
    return cb_fail(CUBERT_ERR_OUT_OF_RANGE, fn ": the view's bytes %llu..%llu lie outside memory %llu (%llu bytes)",
                   (unsigned long long)h->start, (unsigned long long)h->end, (unsigned long long)a->id,
                   (unsigned long long)a->size);
  if (a->block.pool == CB_BLOCK_IMPORTED)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT,
                   fn ": memory %llu was imported from another process: hand on the descriptor it came with",
                   (unsigned long long)a->id);
  if (a->block.pool != CB_BLOCK_SHAREABLE)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT,
                   fn ": memory %llu was not allocated shareable: allocate it with cubert_handle_empty_with(client, "
                   "size, CUBERT_MEMORY_SHAREABLE, &handle) to export it",
                   (unsigned long long)a->id);
  if ((st = cb_device_enter(dev))) return st;
  xdesc d;
  memset(&d, 0, sizeof d);
  cubert_backend_mem mem;
  cb_block_mem(&a->block, &mem);
  cubert_berr err = {0};
  /* the driver's description first: a refusal there leaves no cell made */
  if ((st = dev->ops->mem_export(dev->bdev, &mem, d.ipc, &err))) {
    cb_device_leave(dev);
    return cb_fail_backend(st, &err, "exporting memory", dev->info.name);
  }
  if (!a->xshare && (st = share_begin(&eb, a))) {
    cb_device_leave(dev);
    return cb_errb_return(&eb, st);
  }
  d.magic = DESC_MAGIC;
  d.version = DESC_VERSION;
  host_id(d.host, d.boot);
  d.pid = (int64_t)getpid();
  d.uid = (uint32_t)geteuid();
  snprintf(d.backend, sizeof d.backend, "%s", dev->info.backend);
  d.offset = h->start;
  d.size = h->end - h->start;
  d.alloc_size = a->size;
  d.memory = a->id;
  memcpy(d.secret, a->xshare->seg->secret, sizeof d.secret);
  memcpy(d.cell, a->xshare->name, sizeof d.cell);
  cb_device_leave(dev);
  memset(desc, 0, sizeof *desc);
  memcpy(desc->bytes, &d, sizeof d);
  uint64_t sum = desc_sum(desc);
  memcpy(desc->bytes + offsetof(xdesc, checksum), &sum, sizeof sum);
  return CUBERT_OK;
#undef fn
}

/* ------------------------------------------------------------ import */

/* A refusal of cubert_handle_import, into `eb`. */
#define REFUSE(eb, ...) cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "cubert_handle_import: " __VA_ARGS__)

/* The descriptor's own checks: nothing opened yet. */
static cubert_status check_desc(cb_errb *eb, const cubert_export_desc *desc, const cb_device *dev, xdesc *d) {
  memcpy(d, desc->bytes, sizeof *d);
  if (d->magic != DESC_MAGIC) return REFUSE(eb, "not a descriptor made by cubert_handle_export");
  if (d->version != DESC_VERSION)
    return REFUSE(eb, "descriptor version %u is unknown to this cubert (it reads version %u)", d->version, DESC_VERSION);
  uint64_t sum;
  memcpy(&sum, desc->bytes + offsetof(xdesc, checksum), sizeof sum);
  if (sum != desc_sum(desc))
    return REFUSE(eb, "the descriptor is corrupt or truncated (its checksum does not match its bytes)");
  d->host[sizeof d->host - 1] = d->boot[sizeof d->boot - 1] = d->backend[sizeof d->backend - 1] = '\0';
  d->cell[sizeof d->cell - 1] = '\0';
  char host[64], boot[40];
  host_id(host, boot);
  if (strcmp(host, d->host) != 0 || strcmp(boot, d->boot) != 0)
    return REFUSE(eb, "the descriptor comes from host %s (boot %s), this is host %s (boot %s): memory is shared only "
                  "between processes of one node",
                  d->host, d->boot, host, boot);
  if (d->uid != (uint32_t)geteuid())
    return REFUSE(eb, "the descriptor was made by user %u, this process runs as user %u: memory is shared only between "
                  "processes of one user",
                  d->uid, (unsigned)geteuid());
  if (strcmp(d->backend, dev->info.backend) != 0)
    return REFUSE(eb, "the descriptor is of %s memory; device %d (%s) is a %s device", d->backend, dev->index,
                  dev->info.name, dev->info.backend);
  if (!d->size || d->offset > d->alloc_size || d->size > d->alloc_size - d->offset)
    return REFUSE(eb, "the descriptor's bytes %llu..+%llu do not fit its memory of %llu bytes",
                  (unsigned long long)d->offset, (unsigned long long)d->size, (unsigned long long)d->alloc_size);
  if (!cb_shm_name_ok(d->cell)) return REFUSE(eb, "the descriptor names no cubert segment");
  return CUBERT_OK;
}

/* Opens the exporter's segment and enters this process in it (on `dev`,
 * which names a failure it sets). */
static cubert_status join(cb_errb *eb, const xdesc *d, const cb_device *dev, cb_xshare **out) {
  char why[256];
  void *map = NULL;
  if (cb_shm_open(d->cell, sizeof(xseg), &map, why, sizeof why))
    return REFUSE(eb, "memory %llu of process %lld is no longer exported (stale descriptor): %s",
                  (unsigned long long)d->memory, (long long)d->pid, why);
  xseg *seg = map;
  cubert_status st = CUBERT_OK;
  if (seg->magic != SEG_MAGIC || seg->version != SEG_VERSION || !cb_xcell_valid(&seg->cell) ||
      memcmp(seg->secret, d->secret, sizeof d->secret) != 0 || seg->owner != d->pid)
    st = REFUSE(eb, "the segment %s does not match the descriptor (not the memory it described)", d->cell);
  else if (atomic_load(&seg->dead))
    st = REFUSE(eb, "process %lld freed memory %llu since it exported it (stale descriptor)", (long long)d->pid,
                (unsigned long long)d->memory);
  else if (!alive(d->pid))
    st = REFUSE(eb, "process %lld, which exported memory %llu, has ended", (long long)d->pid,
                (unsigned long long)d->memory);
  else if (cb_xcell_lock(&seg->cell, NULL))
    st = REFUSE(eb, "the failure cell of memory %llu cannot be locked", (unsigned long long)d->memory);
  if (st) {
    munmap(map, sizeof(xseg));
    return st;
  }
  /* a free slot first: a dead importer's slot keeps its pid until a
   * survivor's next use names it (mourn); only when none is free is a dead
   * one's taken, and its death then goes untold, unless it held verdicts it
   * could not settle (its mark): those are lost with it, so its death is
   * told here, as mourn would, before the mark goes */
  int slot = -1;
  for (int i = 0; i < IMPORTERS && slot < 0; i++)
    if (!seg->importers[i]) slot = i;
  for (int i = 0; i < IMPORTERS && slot < 0; i++)
    if (!alive(seg->importers[i])) slot = i;
  if (slot >= 0) {
    if (seg->importers[slot] && atomic_load(&seg->unsettled[1 + slot])) {
      char msg[256];
      snprintf(msg, sizeof msg,
               "process %lld, which imported this memory (memory %llu of process %lld), ended without letting it "
               "go",
               (long long)seg->importers[slot], (unsigned long long)d->memory, (long long)d->pid);
      taint_cell(&seg->cell, seg->size, dev, CUBERT_ERR_DEVICE_LOST, msg);
    }
    seg->importers[slot] = (int64_t)getpid();
    atomic_store(&seg->unsettled[1 + slot], 0);
  }
  cb_xcell_unlock(&seg->cell);
  cb_xshare *x = slot >= 0 ? cb_calloc(1, sizeof *x) : NULL;
  if (!x) {
    if (slot >= 0 && !cb_xcell_lock(&seg->cell, NULL)) { /* failing, the slot waits for this process's end */
      seg->importers[slot] = 0;
      cb_xcell_unlock(&seg->cell);
    }
    munmap(map, sizeof(xseg));
    return slot < 0 ? cb_errb_set(eb, CUBERT_ERR_BUSY, "cubert_handle_import: memory %llu has %d importers already",
                                  (unsigned long long)d->memory, IMPORTERS)
                    : cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  x->seg = seg;
  x->slot = 1 + slot;
  memcpy(x->name, d->cell, sizeof x->name);
  *out = x;
  return CUBERT_OK;
}

cubert_status cubert_handle_import(cubert_client *c, const cubert_export_desc *desc, cubert_handle **out) {
#define fn "cubert_handle_import"
  if (!c) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, fn ": client is NULL");
  if (!desc) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, fn ": descriptor is NULL");
  if (!out) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, fn ": handle is NULL");
#undef fn
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cb_device *dev = c->dev;
  xdesc d;
  cubert_status st = check_desc(&eb, desc, dev, &d);
  cb_xshare *x = NULL;
  if (st || (st = join(&eb, &d, dev, &x))) return cb_errb_return(&eb, st);
  cubert_backend_mem mem;
  memset(&mem, 0, sizeof mem);
  cubert_berr err = {0};
  if ((st = cb_device_enter(dev))) {
    leave(x, NULL);
    return st;
  }
  st = dev->ops->mem_import(dev->bdev, d.ipc, d.alloc_size, &mem, &err);
  cb_device_leave(dev);
  if (st) {
    leave(x, NULL);
    return cb_fail_backend(st, &err, "importing memory of another process", dev->info.name);
  }
  cb_block block = {mem.address, d.alloc_size, mem.cookie, CB_BLOCK_IMPORTED};
  cb_alloc *a = NULL;
  cubert_handle *h = NULL;
  if ((st = cb_handle_adopt(&eb, c, d.alloc_size, &block, d.offset, d.offset + d.size, &a, &h))) {
    leave(x, NULL);
    return cb_errb_return(&eb, st);
  }
  a->xshare = x; /* nobody else knows `a` yet */
  *out = h;
  return CUBERT_OK;
}

cb_xcell *cb_xshare_cell(const cubert_handle *h) {
  return h && h->alloc->xshare ? &h->alloc->xshare->seg->cell : NULL;
}
