/* tools/faultinj/checker_internal.h: what the files of the checker share
 * (internal to tools/faultinj/; the API is checker.h):
 *
 *   program.c     programs: building, copying, formatting
 *   checker.c     violations and the comparison of an observation with the model
 *   run_calls.c   the runner's calls: injections, statuses, syncs, views, checks
 *   run_steps.c   each step kind run through the public API, expectations
 *   runner.c      a run: setup, the steps under a watchdog, the end checks */
#ifndef CUBERT_TOOLS_FAULTINJ_CHECKER_INTERNAL_H
#define CUBERT_TOOLS_FAULTINJ_CHECKER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "runtime/limits.h"
#include "tools/faultinj/checker.h"

#define MAX_ROLES 8
/* Records a device may hold before the checker syncs it: the runtime reaps
 * (and so finds asynchronous failures) on its own every
 * CB_RUNTIME_REAP_INTERVAL records; the checker syncs a margin before. */
#define RECORDS_BEFORE_SYNC (CB_RUNTIME_REAP_INTERVAL - 56u)
_Static_assert(RECORDS_BEFORE_SYNC > 0 && RECORDS_BEFORE_SYNC < CB_RUNTIME_REAP_INTERVAL,
               "the checker syncs before the runtime reaps on its own");

/* ------------------------------------------------------------ program.c */

/* A growing string for formatting programs and reports. */
typedef struct sbuf {
  char *p;
  size_t n, cap;
  bool failed;
} sbuf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void cb_fi_sb_printf(sbuf *b, const char *fmt, ...);
const char *cb_fi_view_name(const cb_fi_program *p, int v);
void cb_fi_format_fraction(char *buf, size_t cap, double f);

/* ------------------------------------------------------------ the runner */

typedef struct run_view {
  cubert_handle *h;
  int alloc;             /* model allocation */
  uint64_t start, end;   /* allocation bytes */
} run_view;

typedef struct run_alloc {
  cubert_handle *full;   /* the checker's own view of the whole allocation */
  int views;             /* program views on it */
  cubert_weak *weak;     /* a weak binding to it: upgrades while it lives, never after */
} run_alloc;

typedef struct run {
  const cb_fi_program *p; /* = &prog: the run's own copy (a hung run outlives the caller's) */
  cb_fi_program prog;
  cb_fi_run_config cfg;
  char label[256];
  int role_map[MAX_ROLES];
  cb_fi_result res;
  cubert_runtime *rt;
  int ndev;
  cubert_client *clients[CB_FIM_MAX_DEVICES];
  int map[MAX_ROLES];
  int nroles;
  cb_fim model;
  cb_fi_checker chk;
  run_view *views;
  run_alloc *allocs;
  int capallocs;
  uint64_t baseline[CB_FIM_MAX_DEVICES];
  uint64_t next_log;     /* first injection id not seen yet */
  cubert_status last_status;
  cubert_kernel *kernels[CB_FIM_KERNEL_COUNT];
  uint8_t *buf;
  size_t bufcap;
  struct timespec t0;
  /* watchdog */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  atomic_uint_fast64_t progress;
  atomic_int current_step, current_line;
  bool finished, abandoned;
  cubert_status status;
} run;

/* The injections of one call. */
typedef struct hitbuf {
  cb_fim_hit v[16];
  size_t n;
} hitbuf;

/* What a step touches. */
typedef struct touch {
  int alloc;
  bool write;
} touch;

/* run_calls.c */
uint8_t *cb_fir_scratch(run *r, size_t n);
void cb_fir_step_data(const cb_fi_step *s, uint8_t *d, uint64_t n);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void cb_fir_trace(run *r, const char *fmt, ...);
void cb_fir_tick(run *r);
void cb_fir_take_hits(run *r, hitbuf *hb);
cb_fim_hits cb_fir_hits_of(const hitbuf *hb);
void cb_fir_check_status(run *r, const char *what, cb_fim_outcome o, cubert_status st);
void cb_fir_do_sync(run *r, int device, const char *why);
run_view *cb_fir_view_at(run *r, int slot);
cb_fim_view cb_fir_fim_view(const run_view *v);
int cb_fir_device_of(run *r, const run_view *v);
bool cb_fir_allocs_reserve(run *r, int n);
void cb_fir_view_release(run *r, int slot);
void cb_fir_view_set(run *r, int slot, cubert_handle *h, int alloc, uint64_t start, uint64_t end);
void cb_fir_prelude(run *r, int device, const touch *t, size_t n, bool *cross);
bool cb_fir_use_stream(run *r, int device, int stream);
uint32_t cb_fir_step_fault(run *r, const cb_fi_step *s, int device, bool peer_copy);
/* The prelude of a copy from `src` to `dst` (either kind): the devices, the
 * syncs a cross-device step needs, the step's stream on both; false when a
 * stream could not be had (the step is not run). */
bool cb_fir_copy_prelude(run *r, const cb_fi_step *s, const run_view *src, const run_view *dst, int *sd, int *dd,
                         bool *cross);
void cb_fir_step_fault_done(run *r, uint32_t id);
void cb_fir_check_all(run *r);

/* run_steps.c */
void cb_fir_exec_step(run *r, const cb_fi_step *s);
/* swrite, scheck, scopy (run_strided.c). */
void cb_fir_exec_strided(run *r, const cb_fi_step *s);

#endif
