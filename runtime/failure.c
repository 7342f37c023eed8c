/* runtime/failure.c: failures as values, errors as reports, and the
 * thread's last error.
 *
 * A failure is immutable once made. A child failure (work skipped because
 * its input carried a failure) keeps a reference to the root, the id of its
 * parent and a bounded copy of the chain of skips, so a loop that passes a
 * failure on forever holds a bounded amount of memory. Ids come from one
 * 64-bit counter and are never reused. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/array.h"
#include "runtime/internal.h"
#include "runtime/fault_state.h"

static _Atomic uint64_t next_failure_id = 1;

uint64_t cb_failure_last_id(void) { return atomic_load(&next_failure_id) - 1; }

/* What a failure becomes when its record cannot be allocated: one static
 * failure, never freed (retain and release leave it alone), so that the
 * bytes it taints stay tainted and later reads say why. */
static cubert_failure unrecorded = {
    .refs = 1,
    .id = UINT64_MAX,
    .status = CUBERT_ERR_OUT_OF_MEMORY,
    .message = (char *)"out of host memory recording a failure: the work that wrote these bytes "
                       "failed, and what failed is lost",
    .device = -1,
    .operation = "work",
};

bool cb_failure_recorded(const cubert_failure *f) { return f && f != &unrecorded; }
const cubert_failure *cb_failure_unrecorded(void) { return &unrecorded; }

static _Atomic int process_rank = -1;

void cubert_set_rank(int rank) { atomic_store(&process_rank, rank < 0 ? -1 : rank); }
int cb_failure_rank(void) { return atomic_load(&process_rank); }

cubert_failure *cb_failure_alloc(void) {
  cubert_failure *f = cb_calloc(1, sizeof *f);
  if (!f) return NULL;
  atomic_init(&f->refs, 1);
  f->id = atomic_fetch_add(&next_failure_id, 1);
  return f;
}

cubert_failure *cb_failure_new(cubert_status status, const char *message, int device,
                               const char *device_name, cubert_stream stream, const char *operation,
                               const char *kernel, uint64_t sequence) {
  cubert_failure *f = cb_failure_alloc();
  if (!f) return &unrecorded;
  f->status = status;
  f->message = cb_strdup(message ? message : cubert_status_string(status));
  f->device = device;
  f->device_name = cb_strdup(device_name);
  f->stream = stream;
  f->operation = operation ? operation : "work";
  f->kernel = cb_strdup(kernel);
  f->sequence = sequence;
  if (!f->message || !f->kernel || !f->device_name) {
    cubert_failure_release(f);
    return &unrecorded;
  }
  return f;
}

static bool skip_copy(cubert_skip *dst, const cubert_skip *src) {
  dst->kernel = cb_strdup(src->kernel);
  dst->input = cb_strdup(src->input);
  dst->device = src->device;
  dst->sequence = src->sequence;
  return dst->kernel && dst->input;
}

cubert_failure *cb_failure_child(const cubert_failure *parent, const char *kernel,
                                 const char *input, int device, const char *device_name,
                                 cubert_stream stream, const char *operation, uint64_t sequence) {
  const cubert_failure *root = parent->root ? parent->root : parent;
  cubert_failure *f = cb_failure_alloc();
  if (!f) return &unrecorded;
  cubert_failure_retain(root);
  f->root = (cubert_failure *)root;
  f->parent_id = parent->id;
  f->status = root->status;
  f->device = device;
  f->device_name = cb_strdup(device_name);
  f->stream = stream;
  f->operation = operation ? operation : "work";
  f->kernel = cb_strdup(kernel);
  f->sequence = sequence;
  cb_str m = {0};
  cb_str_printf(&m, "skipped `%s`: it needed %s, which carried failure #%llu",
                kernel && *kernel ? kernel : f->operation, input ? input : "an input",
                (unsigned long long)parent->id);
  f->message = cb_str_take(&m);
  /* the chain: the parent's links, then this one; keep the newest */
  size_t keep = parent->nskips;
  uint64_t dropped = parent->dropped;
  size_t from = 0;
  if (keep + 1 > CB_SKIPS_KEPT) {
    from = keep + 1 - CB_SKIPS_KEPT;
    dropped += from;
  }
  bool ok = f->message && f->kernel && f->device_name;
  for (size_t i = from; ok && i < keep; i++) ok = skip_copy(&f->skips[f->nskips++], &parent->skips[i]);
  cubert_skip me = {kernel && *kernel ? kernel : f->operation, input ? input : "an input", device,
                    sequence};
  if (ok) ok = skip_copy(&f->skips[f->nskips++], &me);
  f->dropped = dropped;
  if (!ok) {
    cubert_failure_release(f);
    return &unrecorded;
  }
  return f;
}

void cubert_failure_retain(const cubert_failure *failure) {
  if (failure && failure != &unrecorded) atomic_fetch_add(&((cubert_failure *)failure)->refs, 1);
}

void cubert_failure_release(const cubert_failure *failure) {
  cubert_failure *f = (cubert_failure *)failure;
  if (!f || f == &unrecorded || atomic_fetch_sub(&f->refs, 1) != 1) return;
  cb_free(f->message);
  cb_free(f->kernel);
  cb_free(f->device_name);
  cb_free(f->owned_operation);
  cb_free(f->remote_host);
  for (size_t i = 0; i < f->nskips; i++) {
    cb_free((char *)f->skips[i].kernel);
    cb_free((char *)f->skips[i].input);
  }
  cubert_failure_release(f->root);
  cb_free(f);
}

uint64_t cubert_failure_id(const cubert_failure *f) { return f ? f->id : 0; }
cubert_status cubert_failure_status(const cubert_failure *f) {
  return f ? f->status : CUBERT_ERR_INVALID_ARGUMENT;
}
const char *cubert_failure_message(const cubert_failure *f) {
  if (!f) return "";
  return f->root ? f->root->message : f->message;
}
void cubert_failure_origin(const cubert_failure *f, cubert_origin *o) {
  if (!f || !o) return;
  o->device = f->device;
  o->stream = f->stream;
  o->operation = f->operation;
  o->kernel = f->kernel ? f->kernel : "";
  o->sequence = f->sequence;
}
uint64_t cubert_failure_parent_id(const cubert_failure *f) { return f ? f->parent_id : 0; }
const cubert_failure *cubert_failure_root(const cubert_failure *f) {
  if (!f) return NULL;
  return f->root ? f->root : f;
}
size_t cubert_failure_skip_count(const cubert_failure *f, uint64_t *dropped) {
  if (dropped) *dropped = f ? f->dropped : 0;
  return f ? f->nskips : 0;
}
bool cubert_failure_skip(const cubert_failure *f, size_t i, cubert_skip *skip) {
  if (!f || !skip || i >= f->nskips) return false;
  *skip = f->skips[i];
  return true;
}

/* Where an imported failure came from: "from rank 3 (pid 4711 on node07,
 * device 0 (NVIDIA H200))", or "from process 4711 on node07 (device 0 (...))"
 * when the other process set no rank. */
static void describe_from(const cubert_failure *f, cb_str *out) {
  const char *name = f->device_name ? f->device_name : "";
  if (f->remote_rank >= 0)
    cb_str_printf(out, "from rank %d (pid %lld on %s, device %d (%s))", f->remote_rank,
                  (long long)f->remote_pid, f->remote_host, f->device, name);
  else
    cb_str_printf(out, "from process %lld on %s (device %d (%s))", (long long)f->remote_pid,
                  f->remote_host, f->device, name);
}

/* "failure #12 from rank 3 (pid 4711 on node07, device 0 (NVIDIA H200)):
 * launch of `k` on stream 1, work 3: message; here failure #5" */
static void describe_remote(const cubert_failure *f, cb_str *out) {
  cb_str_printf(out, "failure #%llu ", (unsigned long long)f->remote_id);
  describe_from(f, out);
  cb_str_printf(out, ": %s", f->operation);
  if (f->kernel && *f->kernel) cb_str_printf(out, " of `%s`", f->kernel);
  cb_str_printf(out, " on stream %llu, work %llu: %s; here failure #%llu",
                (unsigned long long)f->stream, (unsigned long long)f->sequence,
                f->root ? cubert_status_string(f->status) : f->message, (unsigned long long)f->id);
}

static void describe_one(const cubert_failure *f, cb_str *out) {
  if (f->remote) {
    describe_remote(f, out);
    return;
  }
  cb_str_printf(out, "failure #%llu (%s", (unsigned long long)f->id, f->operation);
  if (f->kernel && *f->kernel) cb_str_printf(out, " of `%s`", f->kernel);
  cb_str_printf(out, " on device %d stream %llu, work %llu: %s)", f->device,
                (unsigned long long)f->stream, (unsigned long long)f->sequence,
                f->root ? cubert_status_string(f->status) : f->message);
}

void cb_failure_describe(const cubert_failure *f, cb_str *out) {
  if (!f->root) {
    describe_one(f, out);
    return;
  }
  /* the root cause first, then the chain of skipped work */
  if (f->remote) {
    cb_str_printf(out, "failure #%llu ", (unsigned long long)f->remote_id);
    describe_from(f, out);
    cb_str_printf(out, ": %s (here failure #%llu); root cause ", f->message, (unsigned long long)f->id);
  } else {
    cb_str_printf(out, "failure #%llu: %s; root cause ", (unsigned long long)f->id, f->message);
  }
  describe_one(f->root, out);
  if (f->nskips) {
    cb_str_printf(out, "; chain:");
    if (f->dropped)
      cb_str_printf(out, " (%llu earlier links dropped)", (unsigned long long)f->dropped);
    for (size_t i = 0; i < f->nskips; i++)
      cb_str_printf(out, "%s `%s` (device %d, work %llu) needed %s", i ? " ->" : "",
                    f->skips[i].kernel, f->skips[i].device,
                    (unsigned long long)f->skips[i].sequence, f->skips[i].input);
  }
}

/* ------------------------------------------------------------ errors */

/* The thread's last error: a thread-local pointer for speed, plus a
 * pthread key whose destructor releases it when the thread exits. */
static _Thread_local cubert_error *last_error;
static pthread_key_t last_error_key;
static pthread_once_t last_error_once = PTHREAD_ONCE_INIT;

static void last_error_dtor(void *p) { cubert_error_release(p); }
static void last_error_init(void) { pthread_key_create(&last_error_key, last_error_dtor); }

void cb_errb_add(cb_errb *b, const cubert_failure *f, uint64_t start, uint64_t end) {
  if (!f) return;
  if (b->n == b->cap) {
    cb_err_entry *e = cb_array_grow(b->entries, b->cap, b->n + 1, sizeof *e, &b->cap);
    if (!e) {
      b->dropped++; /* counted: a taint lookup must not read an empty report as clean */
      return;
    }
    b->entries = e;
  }
  cubert_failure_retain(f);
  b->entries[b->n++] = (cb_err_entry){(cubert_failure *)f, start, end};
}

static void set_last(cubert_error *e) {
  pthread_once(&last_error_once, last_error_init);
  if (last_error) cubert_error_release(last_error);
  last_error = e;
  pthread_setspecific(last_error_key, e);
}

cubert_status cb_errb_finish(cb_errb *b) {
  cubert_status st = b->status;
  cubert_error *e = cb_calloc(1, sizeof *e);
  if (!e) {
    cb_errb_discard(b);
    set_last(NULL);
    return st;
  }
  atomic_init(&e->refs, 1);
  e->status = st;
  e->message = cb_str_take(&b->msg);
  e->entries = b->entries;
  e->nentries = b->n;
  b->entries = NULL;
  b->n = b->cap = 0;
  set_last(e);
  return st;
}

void cb_errb_discard(cb_errb *b) {
  for (size_t i = 0; i < b->n; i++) cubert_failure_release(b->entries[i].failure);
  cb_free(b->entries);
  cb_str_free(&b->msg);
  memset(b, 0, sizeof *b);
}

cubert_status cb_errb_set(cb_errb *b, cubert_status status, const char *fmt, ...) {
  cb_errb_init(b, status);
  va_list ap;
  va_start(ap, fmt);
  cb_str_vprintf(&b->msg, fmt, ap);
  va_end(ap);
  return status;
}

cubert_status cb_errb_backend(cb_errb *b, cubert_status status, const cubert_berr *err, const char *what,
                              const char *device_name) {
  return cb_errb_set(b, status, "%s on %s failed: %s (%s)", what, device_name,
                     err && err->message[0] ? err->message : "no detail", cubert_status_string(status));
}

cubert_status cb_errb_return_rest(cb_errb *b, cubert_status st) {
  if (st && b->status) return cb_errb_finish(b);
  if (!b->msg.p && !b->entries) return st; /* nothing to free: the usual success */
  cb_errb_discard(b);
  return st;
}

cubert_status cb_fail(cubert_status status, const char *fmt, ...) {
  cb_errb b;
  cb_errb_init(&b, status);
  va_list ap;
  va_start(ap, fmt);
  cb_str_vprintf(&b.msg, fmt, ap);
  va_end(ap);
  return cb_errb_finish(&b);
}

cubert_status cb_fail_backend(cubert_status status, const cubert_berr *err, const char *what,
                              const char *device_name) {
  cb_errb b;
  cb_errb_backend(&b, status, err, what, device_name);
  return cb_errb_finish(&b);
}

cubert_error *cubert_last_error(void) {
  if (last_error) cubert_error_retain(last_error);
  return last_error;
}

const char *cubert_last_error_message(void) {
  return last_error && last_error->message ? last_error->message : "";
}

void cubert_error_retain(cubert_error *e) {
  if (e) atomic_fetch_add(&e->refs, 1);
}

void cubert_error_release(cubert_error *e) {
  if (!e || atomic_fetch_sub(&e->refs, 1) != 1) return;
  for (size_t i = 0; i < e->nentries; i++) cubert_failure_release(e->entries[i].failure);
  cb_free(e->entries);
  cb_free(e->message);
  cb_free(e);
}

cubert_status cubert_error_status(const cubert_error *e) {
  return e ? e->status : CUBERT_OK;
}
const char *cubert_error_message(const cubert_error *e) {
  return e && e->message ? e->message : "";
}
size_t cubert_error_failure_count(const cubert_error *e) { return e ? e->nentries : 0; }
const cubert_failure *cubert_error_failure(const cubert_error *e, size_t i, uint64_t *start,
                                           uint64_t *end) {
  if (!e || i >= e->nentries) return NULL;
  if (start) *start = e->entries[i].start;
  if (end) *end = e->entries[i].end;
  return e->entries[i].failure;
}
