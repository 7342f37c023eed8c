/* tools/faultinj/model.h: the checker's host-side model of device memory
 * (internal, never installed).
 *
 * The model follows docs/failures.md, not the runtime's code: for every
 * allocation a program made it keeps the bytes each one must hold (or
 * "unknown": never written, or garbage), and for every byte the set of root
 * causes it may carry (empty: clean). A cause is an injected fault ("injected
 * fault #N" in the failure's root message) or a deliberately failing step
 * ("deliberate failure (tag V)", the checker's own failing host kernel).
 * Each byte holds a bit mask over the program's causes: a skipped kernel's
 * outputs carry the root of its tainted inputs, and where the docs leave the
 * choice open (several tainted inputs, several failures found at one fence)
 * every candidate root is in the mask.
 *
 * The model also keeps what rule 8 needs: per device the work enqueued since
 * its last full sync (each a list of ranges read and written, and whether it
 * was settled as failed), and the asynchronous failures not found yet. A sync
 * of the device applies them as the docs say: the failed work's write set is
 * tainted, work after it that read bad bytes passes the failure on, later
 * writes keep their own verdict.
 *
 * The step functions (cb_fim_launch, cb_fim_copy, ...) take what the
 * injection log says happened inside the call (cb_fim_hits) and return the
 * outcome the docs predict: the status the call must return and the root
 * causes its error may name. They update the model as a side effect. Nothing
 * here calls the runtime: tests drive the model with hand-built calls.
 *
 * Ownership: a cb_fim is owned by its creator (cb_fim_init / cb_fim_free).
 * Not thread-safe: one program, one thread. */
#ifndef CUBERT_FAULTINJ_MODEL_H
#define CUBERT_FAULTINJ_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubert/cubert.h"
#include "cubert/faultinj.h"

#define CB_FIM_MAX_DEVICES 16
/* Causes one program can tell apart; the last bit stands for "any later
 * cause" when a program has more (docs/faultinj.md says so). */
#define CB_FIM_MAX_CAUSES 64

typedef uint64_t cb_fim_mask;

typedef enum cb_fim_cause_kind {
  CB_FIM_CAUSE_INJECTION = 0, /* "injected fault #id" */
  CB_FIM_CAUSE_TAG = 1        /* "deliberate failure (tag id)" */
} cb_fim_cause_kind;

typedef struct cb_fim_cause {
  cb_fim_cause_kind kind;
  uint64_t id;
  char text[200]; /* for reports: the log message, or the step */
} cb_fim_cause;

/* One range a piece of work touched. */
typedef struct cb_fim_range {
  int alloc;
  uint64_t start, end; /* allocation bytes */
  uint8_t access;      /* cubert_access */
} cb_fim_range;

/* Ranges per work record: a strided step records one per piece of its
 * footprint (CB_FIM_MAX_PIECES per side). */
#define CB_FIM_MAX_PIECES 16
#define CB_FIM_RANGES (2 * CB_FIM_MAX_PIECES)

/* Work enqueued on a device since its last full sync. */
typedef struct cb_fim_record {
  int step;
  int stream;  /* the stream it was enqueued on (cb_fim.stream then) */
  bool failed; /* settled as failed when enqueued, or found failed since */
  uint32_t n;
  cb_fim_range r[CB_FIM_RANGES];
} cb_fim_record;

/* An asynchronous failure the runtime has not found yet. */
typedef struct cb_fim_pending {
  size_t record;        /* index into the device's records */
  int cause;
  cubert_status status; /* what the sync that finds it returns */
  bool lost;            /* sticky (async-device-lost): the sync marks the device lost */
  bool reported;        /* a sync of its stream reported it already */
} cb_fim_pending;

typedef struct cb_fim_device {
  int lost_cause;        /* -1: not lost */
  uint8_t peer[CB_FIM_MAX_DEVICES]; /* access from this device to owner j: 0 never asked, 1 on, 2 refused */
  cb_fim_record *records;
  size_t nrecords, caprecords;
  cb_fim_pending *pending;
  size_t npending, cappending;
  uint32_t bound_by;     /* devices whose work bound this device's memory */
} cb_fim_device;

typedef struct cb_fim_alloc {
  bool live;
  int device;
  uint64_t size;
  bool shared;
  uint8_t *bytes;
  uint8_t *known;        /* 1: bytes[i] is what the memory must hold */
  cb_fim_mask *taint;    /* candidate root causes; 0: clean */
} cb_fim_alloc;

typedef struct cb_fim {
  int ndevices;
  cb_fim_device dev[CB_FIM_MAX_DEVICES];
  cb_fim_alloc *allocs;
  int nallocs, capallocs;
  cb_fim_cause causes[CB_FIM_MAX_CAUSES];
  int ncauses;
  int stream;  /* the stream the calls modelled now are made on (1 when never set) */
} cb_fim;

/* A view: bytes [start, end) of an allocation. */
typedef struct cb_fim_view {
  int alloc;
  uint64_t start, end;
} cb_fim_view;

/* One injection inside the call being modelled, from the log. */
typedef struct cb_fim_hit {
  cubert_fault_kind fault;
  char operation[24];    /* "launch", "compile", "alloc", "write", ... */
  cubert_status status;  /* what the call returned (or the sync will) */
  int device;
  int cause;             /* index into causes */
} cb_fim_hit;

typedef struct cb_fim_hits {
  const cb_fim_hit *v;
  size_t n;
} cb_fim_hits;

/* What the docs say a call must do. */
typedef struct cb_fim_outcome {
  cubert_status status;
  uint64_t also;       /* other statuses the docs allow (bit s: status s): a sync that
                          finds several failures may return any of theirs */
  cb_fim_mask roots;   /* the causes the error's failures may have as root; 0: any */
  bool pending;        /* an asynchronous failure now waits for a sync */
  int alloc;           /* alloc / create: the new allocation, -1 when none */
} cb_fim_outcome;

void cb_fim_init(cb_fim *m, int ndevices);
void cb_fim_free(cb_fim *m);

/* The index of a cause, added when new; the overflow bit's index when the
 * table is full. */
int cb_fim_cause_add(cb_fim *m, cb_fim_cause_kind kind, uint64_t id, const char *text);
/* The index of a known cause, -1 when unknown. */
int cb_fim_cause_find(const cb_fim *m, cb_fim_cause_kind kind, uint64_t id);
/* The cause a failure root's message names ("injected fault #N", "deliberate
 * failure (tag V)"), as an index; -1 when it names none the model knows. */
int cb_fim_cause_of_message(const cb_fim *m, const char *message);
static inline cb_fim_mask cb_fim_bit(int cause) {
  return cause < 0 ? 0 : (cb_fim_mask)1 << (cause < CB_FIM_MAX_CAUSES ? cause : CB_FIM_MAX_CAUSES - 1);
}
/* "#3 (injected fault #3 ...)", or a list: "#3 or #5". */
void cb_fim_mask_describe(const cb_fim *m, cb_fim_mask mask, char *buf, size_t capacity);

/* Union of the causes over a view's bytes. */
cb_fim_mask cb_fim_taint_of(const cb_fim *m, cb_fim_view v);
/* Whether every byte of the view is known. */
bool cb_fim_known(const cb_fim *m, cb_fim_view v);
/* Sets the view's taint (unknown bytes), or clears it. */
void cb_fim_taint(cb_fim *m, cb_fim_view v, cb_fim_mask mask);
void cb_fim_set_bytes(cb_fim *m, cb_fim_view v, const void *data);
void cb_fim_forget(cb_fim *m, cb_fim_view v); /* bytes unknown, taint unchanged */

bool cb_fim_any_pending(const cb_fim *m);

/* ---------------------------------------------------------------- steps
 * Each models one public call on device `device` (runtime-wide index) and
 * returns its outcome. `step` tags the work record. */

/* cubert_handle_empty, or cubert_handle_create with `data` (NULL: empty). */
cb_fim_outcome cb_fim_alloc_step(cb_fim *m, int step, int device, uint64_t size, const void *data,
                                 cb_fim_hits hits);
/* The last handle of the allocation went away. */
void cb_fim_release(cb_fim *m, int alloc);
/* cubert_handle_write (data) or cubert_handle_fill (a 4-byte pattern). */
cb_fim_outcome cb_fim_write(cb_fim *m, int step, int device, cb_fim_view v, const void *data,
                            cb_fim_hits hits);
/* cubert_handle_copy (same device) or cubert_handle_copy_peer: executed by
 * `device`, the destination's. */
cb_fim_outcome cb_fim_copy(cb_fim *m, int step, int device, cb_fim_view src, cb_fim_view dst,
                           cb_fim_hits hits);

/* Strided footprints (cubert/strided.h): the model holds a footprint as
 * its contiguous pieces (allocation bytes, in element order, at most
 * CB_FIM_MAX_PIECES), so a strided write taints or repairs exactly those
 * bytes. cubert_handle_write_strided: `packed` holds the pieces' bytes one
 * after another. */
cb_fim_outcome cb_fim_write_pieces(cb_fim *m, int step, int device, const cb_fim_view *pieces, size_t n,
                                   const void *packed, cb_fim_hits hits);
/* cubert_handle_copy_strided(_peer): piece i of `src` to piece i of `dst`
 * (same lengths), executed by `device`, the destination's. */
cb_fim_outcome cb_fim_copy_pieces(cb_fim *m, int step, int device, const cb_fim_view *src, const cb_fim_view *dst,
                                  size_t n, cb_fim_hits hits);

typedef enum cb_fim_kernel {
  CB_FIM_FILL_U32 = 0,     /* out = value */
  CB_FIM_COPY_U32,         /* out = in */
  CB_FIM_CHECKSUM_U32,     /* acc += sum(x[i] ^ i * 2654435761) */
  CB_FIM_COPY_PEER_READ,   /* out = in, in a peer buffer */
  CB_FIM_COPY_PEER_WRITE,  /* out = in, out a peer buffer */
  CB_FIM_FAIL_U32,         /* out = value, then the host function fails (tag = value) */
  CB_FIM_SLEEP_U32,        /* out = value after `value` ms (host only: a step that outlives the watchdog) */
  CB_FIM_KERNEL_COUNT
} cb_fim_kernel;

/* A launch: `args` are the kernel's buffer parameters in order (fill: out;
 * copy: in, out; checksum: x, acc; fail: out). `tag_cause` is the cause of a
 * deliberately failing kernel (-1 otherwise). */
cb_fim_outcome cb_fim_launch(cb_fim *m, int step, int device, cb_fim_kernel kernel,
                             const cb_fim_view *args, uint32_t value, int tag_cause, cb_fim_hits hits);
/* cubert_handle_share on the owner. */
cb_fim_outcome cb_fim_share(cb_fim *m, int owner, cb_fim_view v, cb_fim_hits hits);
/* cubert_sync_device: finds the device's asynchronous failures and reports
 * those no stream sync reported yet. */
cb_fim_outcome cb_fim_sync(cb_fim *m, int device, cb_fim_hits hits);
/* cubert_sync_stream: reports the asynchronous failures of work enqueued on
 * `stream` (rule 8: once per stream), and only those; a failure of another
 * stream is found (tainting) at a time the threads decide, so the model
 * applies every failure at the next device sync, as before. A sticky one
 * on any stream may be found now: DEVICE_LOST is allowed too. */
cb_fim_outcome cb_fim_sync_stream(cb_fim *m, int device, int stream, cb_fim_hits hits);

/* Kernel names as the runtime knows them ("cubert_fill_u32"), and as
 * scenarios write them ("fill_u32"). */
const char *cb_fim_kernel_runtime_name(cb_fim_kernel k);
const char *cb_fim_kernel_name(cb_fim_kernel k);
/* Buffer parameters: count, names, access, whether a peer buffer. */
uint32_t cb_fim_kernel_buffers(cb_fim_kernel k);
const char *cb_fim_kernel_param(cb_fim_kernel k, uint32_t i);
cubert_access cb_fim_kernel_access(cb_fim_kernel k, uint32_t i);
bool cb_fim_kernel_peer(cb_fim_kernel k, uint32_t i);

#endif
