/* tools/faultinj/checker.h: programs, and the checker that runs them against the
 * model (internal, never installed; the `cubert faultinj` tool and the tests
 * use it).
 *
 * A program is a list of steps over named views (buffers and slices of
 * them) on devices named by role (A, B, C...): allocate, write, fill, copy,
 * launch a built-in kernel, share, slice, release, sync, add fault rules,
 * and check expectations. Scenario files (tools/faultinj/scenario.h) and campaigns
 * (tools/faultinj/campaign.h) both produce programs; cb_fi_program_format() prints
 * one back in scenario syntax, so a campaign's shortest failing program can
 * be saved and rerun as a file.
 *
 * cb_fi_run() runs a program on a fresh runtime (one per run, so a run
 * replays exactly and a lost device stays in its run): after every step it
 * takes the injections the fault layer logged during the step, asks the
 * model (tools/faultinj/model.h) what the docs say the call must have done, and
 * compares: the status, then every live allocation read through the public
 * API (cubert_handle_read on the owner, cubert_handle_check from a peer for
 * shared memory). Differences are violations:
 *
 *   STALE READ    a read or a kernel/copy got bytes the model says are tainted,
 *                 or bytes that differ from the model
 *   FALSE TAINT   good bytes refused
 *   WRONG CAUSE   refused with a root cause other than the model's
 *   WRONG STATUS  a call returned another status than the docs say, for no
 *                 reason the kinds above name (a sync that missed a failure)
 *   LEAK          memory in use after every handle was released (synced and
 *                 cleaned up first)
 *   HANG          a step did not finish within the timeout
 *   EXPECTATION   an `expect` of a scenario did not hold
 *
 * Each names the step, its source line, the seed and the program.
 *
 * What keeps runs deterministic (so the model can say exactly what must
 * happen): steps run on one thread, on streams made before any rule; before
 * a step that touches memory of another device every device involved is
 * synchronised, and after it the device that ran it (nothing orders
 * cross-device accesses, docs/failures.md). Streams of one device get no
 * sync the program did not ask for: the runtime orders a write after the
 * last writer (a failed one too) and every reader on other streams, and a
 * read after the last writer, and the checker holds it to that. A refusal
 * is checked whatever it carries: each range it names must lie inside the
 * bytes read and name some, and a view the model says is good must not be
 * refused at all. The checker does not read memory while an asynchronous failure
 * waits to be found (a read would find it at a time the threads decide);
 * it checks again after the sync that finds it.
 *
 * Threads: cb_fi_run() runs the steps on a thread of its own and watches it:
 * a step that takes longer than the timeout is a HANG; the run returns at
 * once (the stuck thread and its runtime are abandoned, never freed). Fault
 * rules are process-wide: one run at a time per process.
 *
 * Ownership: programs own their steps and strings (cb_fi_program_free);
 * results own their violations and log copy (cb_fi_result_free). */
#ifndef CUBERT_FAULTINJ_CHECKER_H
#define CUBERT_FAULTINJ_CHECKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cubert/cubert.h"
#include "cubert/faultinj.h"
#include "tools/faultinj/model.h"

/* ---------------------------------------------------------------- programs */

typedef enum cb_fi_step_kind {
  CB_FI_ALLOC = 0,     /* alloc V on D size N                       cubert_handle_empty */
  CB_FI_CREATE,        /* create V on D size N (u32 X | pattern S)  cubert_handle_create */
  CB_FI_SLICE,         /* slice V of P at OFF size N                cubert_handle_slice */
  CB_FI_WRITE,         /* write V (u32 X | pattern S)               cubert_handle_write */
  CB_FI_FILL,          /* fill V u32 X                              cubert_handle_fill */
  CB_FI_COPY,          /* copy S to D            cubert_handle_copy / cubert_handle_copy_peer */
  CB_FI_LAUNCH,        /* launch K on D param=V ... [value=X]       cubert_launch */
  CB_FI_SHARE,         /* share V                                   cubert_handle_share */
  CB_FI_RELEASE,       /* release V                                 cubert_handle_release */
  CB_FI_SYNC,          /* sync D | sync all                         cubert_sync_device */
  CB_FI_FAULT,         /* fault RULES                               cubert_faultinj_add */
  CB_FI_CLEAR_FAULTS,  /* clear-faults                              cubert_faultinj_clear */
  CB_FI_EXPECT,        /* expect ...                                checked, not run */
  /* strided steps: SHAPE is `rows R width W pitch P at OFF`, a 2-D view of
   * 4-byte elements (cubert_view {2, 4, OFF, {R, W}, {P, 1}}), R <= 16 */
  CB_FI_SWRITE,        /* swrite V SHAPE (u32 X | pattern S)        cubert_handle_write_strided */
  CB_FI_SCHECK,        /* scheck V SHAPE: read back, against the model  cubert_handle_read_strided */
  CB_FI_SCOPY,         /* scopy S to D SHAPE   cubert_handle_copy_strided / cubert_handle_copy_strided_peer */
  CB_FI_STEP_KIND_COUNT
} cb_fi_step_kind;

typedef enum cb_fi_expect_kind {
  CB_FI_EXPECT_STATUS = 0, /* expect status NAME: the previous step returned NAME */
  CB_FI_EXPECT_CLEAN,      /* expect V clean */
  CB_FI_EXPECT_TAINTED,    /* expect V tainted [by #N | by tag N] [bytes S..E] */
  CB_FI_EXPECT_U32,        /* expect V u32 X: every 32-bit word is X */
  CB_FI_EXPECT_U64,        /* expect V u64 X */
  CB_FI_EXPECT_CHAIN,      /* expect V chain N: the failure passed through N skipped steps */
  CB_FI_EXPECT_LOST,       /* expect lost D */
  CB_FI_EXPECT_INJECTED,   /* expect injected N: faults injected so far */
  CB_FI_EXPECT_VIEW_LOST   /* expect V lost: reading it fails with DEVICE_LOST */
} cb_fi_expect_kind;

typedef struct cb_fi_step {
  cb_fi_step_kind kind;
  int line;              /* 1-based line in its file; 0 when generated */
  int device;            /* role (0 = A); -1: every device (sync all) */
  int stream;            /* 1.. */
  int view;              /* the view made or used; copy: the source; slice: the new view */
  int view2;             /* copy: the destination; slice: the parent */
  int args[2];           /* launch: views of the kernel's buffer parameters */
  cb_fim_kernel kernel;
  uint64_t size, offset;  /* strided steps: offset in elements */
  uint32_t rows, width, pitch; /* strided steps: the SHAPE */
  uint32_t value;        /* u32 value, fill pattern, launch value=, fail tag */
  bool pattern;          /* data is a pseudo-random pattern of `seed` (else `value` repeated) */
  uint64_t seed;
  /* a fault for this step only (`! KIND[:F]` after a step) */
  bool has_fault;
  cubert_fault_kind fault;
  double fraction;       /* 0: the layer's default */
  char *text;            /* CB_FI_FAULT: the rule text as written */
  int text_column;       /* where the text starts on its line */
  /* CB_FI_EXPECT */
  cb_fi_expect_kind expect;
  cubert_status status;
  uint64_t number;       /* u32/u64 value, chain length, injections, cause id */
  bool has_cause;
  cb_fim_cause_kind cause_kind;
  bool has_range;
  uint64_t range_start, range_end; /* relative to the view */
} cb_fi_step;

typedef struct cb_fi_program {
  char *name;
  char *title;           /* "" when none */
  char *rules;           /* the rules of docs/failures.md it proves, as written: "5, 7" */
  char *source;          /* file path, "<suite>/owner_to_peer.fi", or "campaign" */
  int line;              /* where `scenario` is */
  int devices;           /* roles used (A, B...) */
  bool fixed;            /* roles are devices 0, 1, 2...; else one run per pair class */
  bool host_only;        /* uses a host-only kernel (fail_u32) */
  int streams;           /* per device */
  uint32_t timeout_ms;   /* per step; 0: the run's */
  uint64_t seed;         /* campaign program seed; 0 for scenarios */
  char **views;          /* view names by slot */
  int nviews;
  cb_fi_step *steps;
  size_t nsteps, capsteps;
} cb_fi_program;

void cb_fi_program_init(cb_fi_program *p, const char *name, const char *source);
void cb_fi_program_free(cb_fi_program *p);
/* A deep copy (steps, strings, views). */
bool cb_fi_program_copy(const cb_fi_program *p, cb_fi_program *out);
/* A new step at the end (zeroed: stream 1, views -1); NULL on no memory. */
cb_fi_step *cb_fi_program_add(cb_fi_program *p, cb_fi_step_kind kind);
/* The slot of view `name`, added when new; -1 on no memory. */
int cb_fi_program_view(cb_fi_program *p, const char *name);
/* The program in scenario syntax (tools/faultinj/scenario.h); malloc'd, the
 * caller frees it. NULL on no memory. */
char *cb_fi_program_format(const cb_fi_program *p);
/* One step in scenario syntax, into buf. */
void cb_fi_step_format(const cb_fi_program *p, const cb_fi_step *s, char *buf, size_t capacity);
/* "launch", "copy", ... for the injection kind of a `!` fault on this step:
 * the rule operation it becomes; NULL when the step takes none. */
const char *cb_fi_step_fault_op(const cb_fi_program *p, const cb_fi_step *s, cubert_fault_kind fault);

/* ---------------------------------------------------------------- runs */

typedef enum cb_fi_violation_kind {
  CB_FI_STALE_READ = 0,
  CB_FI_FALSE_TAINT,
  CB_FI_WRONG_CAUSE,
  CB_FI_WRONG_STATUS,
  CB_FI_LEAK,
  CB_FI_HANG,
  CB_FI_EXPECTATION,
  CB_FI_VIOLATION_KIND_COUNT
} cb_fi_violation_kind;

/* "STALE READ", "FALSE TAINT", ... static. */
const char *cb_fi_violation_name(cb_fi_violation_kind kind);

typedef struct cb_fi_violation {
  cb_fi_violation_kind kind;
  int step;              /* 1-based index into the program's steps; 0: after the last */
  int line;              /* the step's source line, 0 when none */
  char *message;         /* the whole report, one paragraph */
} cb_fi_violation;

typedef struct cb_fi_run_config {
  const char *backend;   /* "host" (default) or "hip" */
  int host_devices;      /* host devices to make; 0: the node's, else 4 */
  uint64_t host_memory;  /* 0: 256 MiB */
  const int *device_map; /* role -> runtime device; NULL: 0, 1, 2... */
  const char *label;     /* where it ran, for reports: "pair XGMI 0-1 (host)" */
  uint32_t timeout_ms;   /* per step; 0: 10 s */
  FILE *trace;           /* when set, every step, injection and check */
  bool no_checks;        /* only the status checks and the end (faster) */
  size_t max_violations; /* stop the run after this many; 0: 20 */
  bool test_keep_handle; /* tests only: keep one handle of the first allocation
                            through the leak check (it must report a LEAK) */
} cb_fi_run_config;

typedef struct cb_fi_result {
  bool skipped;          /* could not run here (why in `skip_reason`) */
  char skip_reason[256];
  bool hang;
  bool setup_failed;     /* the runtime or its streams could not be made */
  char setup_error[512];
  size_t steps_run;
  size_t syncs_added;    /* syncs the checker put in (cross-device, streams) */
  size_t reads;          /* checks made through the API */
  uint64_t injected;
  uint64_t by_kind[CUBERT_FAULT_KIND_COUNT_];
  bool device_lost;
  bool leak_checked;     /* false when a lost device made it impossible */
  double seconds;
  cb_fi_violation *violations;
  size_t nviolations;
  size_t by_violation[CB_FI_VIOLATION_KIND_COUNT];
  cubert_fault_record *log; /* every injection of the run, in order */
  size_t nlog;
} cb_fi_result;

/* Runs `p` as described above. CUBERT_OK when it ran (violations or not:
 * see result->nviolations); CUBERT_ERR_TIMEOUT after a HANG; other errors
 * when the run could not start (result->setup_error says why). */
cubert_status cb_fi_run(const cb_fi_program *p, const cb_fi_run_config *config, cb_fi_result *result);
void cb_fi_result_free(cb_fi_result *r);

/* Whether this library was built with CUBERT_BREAK_RULE=ON (transitive
 * taint switched off: the checker must report stale reads). */
bool cb_fi_break_rule_built(void);

/* ---------------------------------------------------------------- checks
 * The comparison of one observation with the model, exposed so that tests
 * can feed it made-up observations and see the checker bite. */

typedef struct cb_fi_obs_entry {
  const char *root_message;  /* the root failure's message */
  uint64_t start, end;       /* allocation bytes it taints */
} cb_fi_obs_entry;

typedef struct cb_fi_observation {
  cubert_status status;      /* what the read or check returned */
  const uint8_t *bytes;      /* CUBERT_OK of a read: the view's bytes; NULL for a check */
  const cb_fi_obs_entry *entries; /* refusals: the error's failures */
  size_t nentries;
} cb_fi_observation;

typedef struct cb_fi_checker {
  cb_fim *model;
  const cb_fi_program *program;
  const cb_fi_run_config *config;
  cb_fi_result *result;
  int step;                  /* 1-based; 0 after the last */
  int line;
  /* Model-clean ranges of the last observation that the read could not
   * show (it was refused for other bytes): the runner reads them again
   * through slices. */
  uint64_t clean_start[16], clean_end[16];
  size_t nclean;
} cb_fi_checker;

/* Compares one read (or peer check) of view `v` with the model; records
 * violations in checker->result. `what` names the read in reports ("read of
 * `x` on device 0"). Returns the number of violations found. */
size_t cb_fi_check_observation(cb_fi_checker *c, cb_fim_view v, const cb_fi_observation *obs,
                               const char *what);
/* Records a violation (printf-style message) against the current step. */
void cb_fi_violation_add(cb_fi_checker *c, cb_fi_violation_kind kind, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
