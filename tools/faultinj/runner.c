/* tools/faultinj/runner.c: one run of a program (cb_fi_run): setup of a
 * runtime of its own, the steps on a thread under a watchdog, the end
 * checks (leaks, every allocation against the model) and the teardown. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tools/faultinj/checker_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/str.h"

#define DEFAULT_TIMEOUT_MS 10000u
#define DEFAULT_MAX_VIOLATIONS 20u

/* ---- setup and the end */

static uint64_t in_use(cubert_client *c) {
  cubert_pool_usage pools[16];
  size_t n = 0;
  if (cubert_memory_usage(c, pools, 16, &n) != CUBERT_OK) return 0;
  uint64_t sum = 0;
  for (size_t i = 0; i < n && i < 16; i++) sum += pools[i].in_use;
  return sum;
}

static cubert_status setup(run *r) {
  const cb_fi_program *p = r->p;
  cubert_runtime_options o;
  cubert_runtime_options_init(&o);
  o.backends = r->cfg.backend ? r->cfg.backend : "host";
  o.host_devices = r->cfg.host_devices;
  if (!o.host_devices && !getenv("CUBERT_HOST_NODE")) o.host_devices = 4;
  o.host_memory = r->cfg.host_memory ? r->cfg.host_memory : (256ull << 20);
  o.faults = ""; /* the program's rules only, never $CUBERT_FAULTS */
  cubert_status st = cubert_runtime_create(&o, &r->rt);
  if (st != CUBERT_OK) {
    r->res.setup_failed = true;
    snprintf(r->res.setup_error, sizeof r->res.setup_error, "creating the runtime: %s: %s",
             cubert_status_name(st), cubert_last_error_message());
    return st;
  }
  r->ndev = cubert_runtime_device_count(r->rt);
  if (r->ndev > CB_FIM_MAX_DEVICES) r->ndev = CB_FIM_MAX_DEVICES;
  r->nroles = p->devices < MAX_ROLES ? p->devices : MAX_ROLES;
  for (int k = 0; k < r->nroles; k++) {
    r->map[k] = r->cfg.device_map ? r->cfg.device_map[k] : k;
    if (r->map[k] < 0 || r->map[k] >= r->ndev) {
      r->res.skipped = true;
      snprintf(r->res.skip_reason, sizeof r->res.skip_reason, "needs %d devices, %s has %d", p->devices, o.backends,
               r->ndev);
      return CUBERT_ERR_NO_DEVICE;
    }
  }
  cb_fim_init(&r->model, r->ndev);
  for (int k = 0; k < r->nroles; k++) {
    int d = r->map[k];
    if (r->clients[d]) continue;
    if ((st = cubert_client_create(r->rt, d, &r->clients[d])) != CUBERT_OK) goto failed;
    for (int i = 1; i <= (p->streams > 0 ? p->streams : 1); i++) {
      cubert_stream sid = 0;
      if ((st = cubert_stream_create(r->clients[d], &sid)) != CUBERT_OK) goto failed;
      if (sid != (cubert_stream)i) {
        st = CUBERT_ERR_INTERNAL;
        snprintf(r->res.setup_error, sizeof r->res.setup_error, "device %d: stream %d was numbered %llu", d, i,
                 (unsigned long long)sid);
        r->res.setup_failed = true;
        return st;
      }
    }
    r->baseline[d] = in_use(r->clients[d]);
  }
  r->views = calloc((size_t)p->nviews + 1, sizeof *r->views);
  if (!r->views) {
    st = CUBERT_ERR_OUT_OF_MEMORY;
    goto failed;
  }
  r->next_log = 1;
  return CUBERT_OK;
failed:
  r->res.setup_failed = true;
  snprintf(r->res.setup_error, sizeof r->res.setup_error, "setting up devices: %s: %s", cubert_status_name(st),
           cubert_last_error_message());
  return st;
}

static void finish(run *r) {
  r->chk.step = 0;
  r->chk.line = 0;
  /* every device done: failures found, then one last look at everything */
  for (int k = 0; k < r->nroles; k++) {
    int d = r->map[k];
    if (r->model.dev[d].lost_cause < 0) cb_fir_do_sync(r, d, "the program ends");
  }
  cb_fir_check_all(r);
  cubert_handle *kept = NULL;
  if (r->cfg.test_keep_handle && r->allocs && r->model.nallocs && r->allocs[0].full)
    kept = cubert_handle_clone(r->allocs[0].full);
  for (int s = 0; s < r->p->nviews; s++) cb_fir_view_release(r, s);
  for (int a = 0; a < r->model.nallocs; a++)
    if (r->allocs && r->allocs[a].full) {
      cubert_handle_release(r->allocs[a].full);
      r->allocs[a].full = NULL;
    }
  cubert_faultinj_clear(r->rt);
  /* leaks: everything released, synced and cleaned up must be back to the
   * baseline; a lost device keeps its records (no call reaches it), and so
   * does memory its work bound */
  uint32_t lost = 0;
  for (int d = 0; d < r->ndev; d++)
    if (r->model.dev[d].lost_cause >= 0) lost |= 1u << d;
  for (int k = 0; k < r->nroles; k++) {
    int d = r->map[k];
    if (!(lost & (1u << d))) (void)cubert_sync_device(r->clients[d]);
  }
  r->res.leak_checked = true;
  for (int k = 0; k < r->nroles; k++) {
    int d = r->map[k];
    if ((lost & (1u << d)) || (r->model.dev[d].bound_by & lost)) {
      r->res.leak_checked = false;
      continue;
    }
    (void)cubert_memory_cleanup(r->clients[d]);
  }
  for (int k = 0; k < r->nroles; k++) {
    int d = r->map[k];
    if ((lost & (1u << d)) || (r->model.dev[d].bound_by & lost)) continue;
    uint64_t now = in_use(r->clients[d]);
    if (now != r->baseline[d])
      cb_fi_violation_add(&r->chk, CB_FI_LEAK,
                          "device %d has %" PRIu64 " bytes in use after every handle was released, the device "
                          "synced and its pools cleaned up (%" PRIu64 " before the program)",
                          d, now, r->baseline[d]);
  }
  /* every allocation gone: no weak binding upgrades any more */
  for (int a = 0; a < r->model.nallocs && r->allocs; a++) {
    run_alloc *ra = &r->allocs[a];
    int d = r->model.allocs[a].device;
    if (!ra->weak || (kept && a == 0) || (lost & (1u << d)) || (r->model.dev[d].bound_by & lost)) continue;
    cubert_binding *bd = NULL;
    cubert_status st = cubert_weak_upgrade(ra->weak, &bd);
    if (st != CUBERT_ERR_EXPIRED) {
      char name[96];
      snprintf(name, sizeof name, "allocation %d (device %d)", a, d);
      cb_fi_violation_add(&r->chk, CB_FI_WRONG_STATUS,
                          "the weak binding of %s upgraded to %s after every handle was released and the device "
                          "synced, not EXPIRED",
                          name, cubert_status_name(st));
    }
    cubert_binding_release(bd);
  }
  cubert_handle_release(kept);
}

static void teardown(run *r) {
  if (r->views)
    for (int s = 0; s < r->p->nviews; s++) cubert_handle_release(r->views[s].h);
  if (r->allocs)
    for (int a = 0; a < r->capallocs; a++) {
      cubert_handle_release(r->allocs[a].full);
      cubert_weak_release(r->allocs[a].weak);
    }
  for (int d = 0; d < CB_FIM_MAX_DEVICES; d++) cubert_client_destroy(r->clients[d]);
  if (r->rt) cubert_runtime_destroy(r->rt);
  for (int k = 0; k < CB_FIM_KERNEL_COUNT; k++) cubert_kernel_release(r->kernels[k]);
  cb_fim_free(&r->model);
  free(r->views);
  free(r->allocs);
  free(r->buf);
  r->views = NULL;
  r->allocs = NULL;
  r->buf = NULL;
  r->rt = NULL;
  memset(r->clients, 0, sizeof r->clients);
  memset(r->kernels, 0, sizeof r->kernels);
}

static double since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static void run_body(run *r) {
  r->chk = (cb_fi_checker){&r->model, r->p, &r->cfg, &r->res, 0, 0, {0}, {0}, 0};
  r->status = setup(r);
  if (r->status == CUBERT_OK) {
    size_t maxv = r->cfg.max_violations ? r->cfg.max_violations : DEFAULT_MAX_VIOLATIONS;
    for (size_t i = 0; i < r->p->nsteps && r->res.nviolations < maxv; i++) {
      const cb_fi_step *s = &r->p->steps[i];
      r->chk.step = (int)i + 1;
      r->chk.line = s->line;
      atomic_store(&r->current_step, (int)i + 1);
      atomic_store(&r->current_line, s->line);
      cb_fir_tick(r);
      if (r->cfg.trace) {
        char st[256];
        cb_fi_step_format(r->p, s, st, sizeof st);
        cb_fir_trace(r, "step %zu%s%.0d: %s\n", i + 1, s->line ? " line " : "", s->line, st);
      }
      cb_fir_exec_step(r, s);
      r->res.steps_run++;
      if (s->kind != CB_FI_EXPECT && s->kind != CB_FI_FAULT && s->kind != CB_FI_CLEAR_FAULTS &&
          s->kind != CB_FI_SLICE && s->kind != CB_FI_RELEASE)
        cb_fir_check_all(r);
      cb_fir_tick(r);
    }
    atomic_store(&r->current_step, 0);
    atomic_store(&r->current_line, 0);
    cb_fir_tick(r);
    finish(r);
  }
  teardown(r);
  r->res.seconds = since(&r->t0);
}

static void *run_thread(void *arg) {
  run *r = arg;
  run_body(r);
  pthread_mutex_lock(&r->lock);
  r->finished = true;
  bool abandoned = r->abandoned;
  pthread_cond_broadcast(&r->cond);
  pthread_mutex_unlock(&r->lock);
  if (abandoned) { /* the caller gave up on it: nobody else will free it */
    cb_fi_result_free(&r->res);
    cb_fi_program_free(&r->prog);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    free(r);
  }
  return NULL;
}

void cb_fi_result_free(cb_fi_result *res) {
  if (!res) return;
  for (size_t i = 0; i < res->nviolations; i++) free(res->violations[i].message);
  free(res->violations);
  free(res->log);
  memset(res, 0, sizeof *res);
}

cubert_status cb_fi_run(const cb_fi_program *p, const cb_fi_run_config *config, cb_fi_result *result) {
  memset(result, 0, sizeof *result);
  run *r = calloc(1, sizeof *r);
  if (!r) return CUBERT_ERR_OUT_OF_MEMORY;
  if (!cb_fi_program_copy(p, &r->prog)) {
    free(r);
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  r->p = &r->prog;
  if (config) r->cfg = *config;
  if (r->cfg.label) {
    snprintf(r->label, sizeof r->label, "%s", r->cfg.label);
    r->cfg.label = r->label;
  }
  if (r->cfg.device_map) {
    for (int k = 0; k < MAX_ROLES && k < p->devices; k++) r->role_map[k] = r->cfg.device_map[k];
    r->cfg.device_map = r->role_map;
  }
  clock_gettime(CLOCK_MONOTONIC, &r->t0);
  pthread_mutex_init(&r->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&r->cond, &ca);
  pthread_condattr_destroy(&ca);
  uint32_t timeout = p->timeout_ms ? p->timeout_ms : r->cfg.timeout_ms ? r->cfg.timeout_ms : DEFAULT_TIMEOUT_MS;
  pthread_t th;
  if (pthread_create(&th, NULL, run_thread, r) != 0) {
    cb_fi_program_free(&r->prog);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    free(r);
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  /* the watchdog: progress must move within `timeout` */
  pthread_mutex_lock(&r->lock);
  uint64_t seen = atomic_load(&r->progress);
  struct timespec last;
  clock_gettime(CLOCK_MONOTONIC, &last);
  bool hang = false;
  while (!r->finished) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += 50 * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&r->cond, &r->lock, &until);
    if (r->finished) break;
    uint64_t now = atomic_load(&r->progress);
    if (now != seen) {
      seen = now;
      clock_gettime(CLOCK_MONOTONIC, &last);
    } else if (since(&last) * 1000.0 >= timeout) {
      hang = true;
      r->abandoned = true; /* from here the runner owns `r` and frees it */
      break;
    }
  }
  /* what the report needs, read while the runner cannot free `r` */
  int hung_step = atomic_load(&r->current_step), hung_line = atomic_load(&r->current_line);
  double seconds = since(&r->t0);
  pthread_mutex_unlock(&r->lock);
  if (!hang) {
    pthread_join(th, NULL);
    *result = r->res;
    cubert_status st = r->status;
    cb_fi_program_free(&r->prog);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    free(r);
    if (st == CUBERT_ERR_NO_DEVICE && result->skipped) return CUBERT_OK;
    return st;
  }
  pthread_detach(th);
  result->hang = true;
  result->seconds = seconds;
  cb_fi_checker c = {NULL, p, config, result, hung_step, hung_line, {0}, {0}, 0};
  cb_fi_violation_add(&c, CB_FI_HANG,
                      "the step did not finish within %" PRIu32 " ms; the run was abandoned (its thread and runtime "
                      "are left as they are)",
                      timeout);
  return CUBERT_ERR_TIMEOUT;
}

