/* tests/test_alloc_fail.c: every host allocation of the library can fail
 * cleanly (issue 12, item 6; docs/architecture.md, "The allocator").
 *
 * A counting allocator (cubert_set_allocator) fails the Nth allocation, for
 * every N from 1 until a run of the program below never reaches its Nth
 * allocation. The program is small but crosses every layer: a runtime on the
 * host backend (topology, backend, fault layer), clients, handles, a write
 * and reads, a built-in kernel's launch, a fault rule, a failed launch that
 * taints, a tainted read and its error, share and a peer copy, teardown.
 *
 * For each N: nothing crashes (ASan in CI watches too); the first call that
 * does not return what it returns without the fault returns
 * CUBERT_ERR_OUT_OF_MEMORY with a message about memory (or CUBERT_ERR_TAINTED
 * / a sync's failure whose root failure is out of memory, when the
 * allocation was the work's own, on a backend thread), or the failure was
 * absorbed and the program ran to its end with the right results; teardown
 * then works; and every block the library took is back (the allocator
 * counts live blocks).
 *
 * Each run is on its own thread, so that the thread's last error is freed
 * when it exits, before the blocks are counted. Host backend only (the
 * runtime's own allocations are the same on every backend). */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/cubert.h"
#include "cubert/faultinj.h"
#include "cubert/kernels.h"
#include "tests/testutil.h"

/* ------------------------------------------------------------ the allocator */

static atomic_long calls;   /* allocations asked for since the run began */
static atomic_long fail_at; /* the one to fail (1-based); 0: none */
static atomic_bool failed;  /* the run reached it */
static atomic_long live;    /* blocks given out and not yet freed */

static bool take_turn(void) {
  long n = atomic_fetch_add(&calls, 1) + 1;
  if (n == atomic_load(&fail_at)) {
    atomic_store(&failed, true);
    return false;
  }
  return true;
}

static void *t_malloc(size_t size) {
  void *p = take_turn() ? malloc(size) : NULL;
  if (p) atomic_fetch_add(&live, 1);
  return p;
}

static void *t_calloc(size_t count, size_t size) {
  void *p = take_turn() ? calloc(count, size) : NULL;
  if (p) atomic_fetch_add(&live, 1);
  return p;
}

static void *t_realloc(void *ptr, size_t size) {
  if (!ptr) return t_malloc(size); /* a new block */
  return take_turn() ? realloc(ptr, size) : NULL;
}

static void t_free(void *ptr) {
  ck_assert_ptr_nonnull(ptr); /* the hooks promise never to pass NULL */
  atomic_fetch_sub(&live, 1);
  free(ptr);
}

static const cubert_allocator counting = {t_malloc, t_calloc, t_realloc, t_free};

/* Runs fn(arg) on a thread of its own (its last error goes with it) with
 * the Nth allocation failing; true when the run reached it. */
static bool run_failing(long n, void *(*fn)(void *), void *arg) {
  atomic_store(&calls, 0);
  atomic_store(&failed, false);
  atomic_store(&fail_at, n);
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, fn, arg), 0);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  atomic_store(&fail_at, 0);
  return atomic_load(&failed);
}

/* ------------------------------------------------------------ the program */

#define WORDS 64

typedef struct run {
  long n;           /* the allocation that fails */
  int deviated;     /* the step that did not return what it should; 0: none */
  cubert_status st; /* what it returned */
  char what[160];   /* its call */
  char message[512];
  bool message_ok;  /* the message says what the failure was about */
} run;

/* The root failure of the thread's last error is out of host memory. */
static bool root_is_oom(void) {
  cubert_error *e = cubert_last_error();
  const cubert_failure *f = cubert_error_failure(e, 0, NULL, NULL);
  bool oom = f && cubert_failure_status(cubert_failure_root(f)) == CUBERT_ERR_OUT_OF_MEMORY;
  cubert_error_release(e);
  return oom;
}

/* Records the first step whose status is not `expected` and leaves the
 * program (to its teardown). */
#define STEP(r, step, call, expected)                                                \
  do {                                                                              \
    cubert_status st_ = (call);                                                     \
    if (st_ != (expected)) {                                                        \
      note((r), (step), #call, st_);                                                \
      goto teardown;                                                                \
    }                                                                               \
  } while (0)

static void note(run *r, int step, const char *what, cubert_status st) {
  r->deviated = step;
  r->st = st;
  snprintf(r->what, sizeof r->what, "%s", what);
  cubert_error *e = cubert_last_error();
  snprintf(r->message, sizeof r->message, "%s", cubert_error_message(e));
  if (st == CUBERT_ERR_OUT_OF_MEMORY)
    /* the error record itself may be the allocation that failed: then there
     * is no last error, and the status alone says it */
    r->message_ok = !e || strstr(r->message, "memory") != NULL;
  else if (st == CUBERT_ERR_TAINTED || st == CUBERT_ERR_LAUNCH || st == CUBERT_ERR_COPY)
    r->message_ok = e && root_is_oom();
  cubert_error_release(e);
}

static cubert_status launch_fill(cubert_client *c, cubert_kernel *k, cubert_handle *out, uint32_t v) {
  uint64_t n = WORDS;
  cubert_arg a[3] = {cubert_arg_buffer(out), cubert_arg_scalar(&n, 8), cubert_arg_scalar(&v, 4)};
  cubert_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  return cubert_launch(c, k, &cfg, a, 3);
}

static bool all_words(const uint32_t *w, uint32_t v) {
  for (int i = 0; i < WORDS; i++)
    if (w[i] != v) return false;
  return true;
}

static void *program(void *arg) {
  run *r = arg;
  cubert_runtime *rt = NULL;
  cubert_client *c0 = NULL, *c1 = NULL;
  cubert_kernel *k = NULL, *own = NULL;
  cubert_handle *x = NULL, *y = NULL, *z = NULL;
  uint32_t in[WORDS], out[WORDS];
  for (int i = 0; i < WORDS; i++) in[i] = 0xC0DE0000u + (uint32_t)i;

  cubert_runtime_options o;
  cb_test_options("host", &o);
  o.host_devices = 2;
  o.host_memory = 1u << 20;
  STEP(r, 1, cubert_runtime_create(&o, &rt), CUBERT_OK);
  STEP(r, 2, cubert_client_create(rt, 0, &c0), CUBERT_OK);
  STEP(r, 3, cubert_client_create(rt, 1, &c1), CUBERT_OK);
  STEP(r, 4, cubert_handle_create(c0, in, sizeof in, &x), CUBERT_OK);
  STEP(r, 5, cubert_handle_empty(c0, sizeof in, &y), CUBERT_OK);
  STEP(r, 6, cubert_handle_write(c0, x, in, sizeof in), CUBERT_OK);
  STEP(r, 7, cubert_handle_read(c0, x, out, sizeof out), CUBERT_OK);
  ck_assert_msg(memcmp(in, out, sizeof in) == 0, "N=%ld: x read back wrong", r->n);
  STEP(r, 8, cubert_builtin_kernel(CUBERT_BUILTIN_FILL_U32, &k), CUBERT_OK);
  cubert_kernel_desc d = *cubert_builtin_desc(CUBERT_BUILTIN_FILL_U32);
  d.name = "t_own_fill"; /* a kernel of the program's own: made and freed in each run */
  STEP(r, 8, cubert_kernel_create(&d, &own), CUBERT_OK);
  STEP(r, 9, launch_fill(c0, own, y, 7), CUBERT_OK);
  STEP(r, 10, cubert_handle_read(c0, y, out, sizeof out), CUBERT_OK);
  ck_assert_msg(all_words(out, 7), "N=%ld: the fill wrote wrong words", r->n);
  cubert_faultinj_diag diag;
  STEP(r, 11, cubert_faultinj_add(rt, "launch times=1 fault=fail", "test", NULL, &diag), CUBERT_OK);
  STEP(r, 12, launch_fill(c0, k, y, 9), CUBERT_ERR_LAUNCH);
  STEP(r, 13, cubert_handle_read(c0, y, out, sizeof out), CUBERT_ERR_TAINTED);
  {
    cubert_error *e = cubert_last_error();
    /* the refusal names the failed launch, or says that its failure could
     * not be recorded (unless recording the error was the allocation that
     * failed: then it is not there at all), or that host memory was too
     * short to list it (the refusal's own entry was the allocation) */
    bool named = !e ||
                 (cubert_error_failure_count(e) == 1 &&
                  (strstr(cubert_error_message(e), "cubert_fill_u32") || root_is_oom())) ||
                 (cubert_error_failure_count(e) == 0 && strstr(cubert_error_message(e), "too short to list"));
    if (!e) ck_assert_msg(atomic_load(&failed), "N=%ld: a tainted read left no error", r->n);
    ck_assert_msg(named, "N=%ld: the tainted read says \"%s\"", r->n, cubert_error_message(e));
    cubert_error_release(e);
  }
  STEP(r, 14, cubert_handle_share(c0, x), CUBERT_OK);
  STEP(r, 15, cubert_handle_empty(c1, sizeof in, &z), CUBERT_OK);
  STEP(r, 16, cubert_handle_copy_peer(c0, x, c1, z), CUBERT_OK);
  STEP(r, 17, cubert_handle_read(c1, z, out, sizeof out), CUBERT_OK);
  ck_assert_msg(memcmp(in, out, sizeof in) == 0, "N=%ld: the peer copy read back wrong", r->n);
  STEP(r, 18, cubert_sync_device(c0), CUBERT_OK);
  STEP(r, 19, cubert_sync_device(c1), CUBERT_OK);

teardown:
  cubert_kernel_release(own);
  cubert_kernel_release(k);
  cubert_handle_release(z);
  cubert_handle_release(y);
  cubert_handle_release(x);
  cubert_client_destroy(c1);
  cubert_client_destroy(c0);
  cubert_runtime_destroy(rt);
  return NULL;
}

/* ------------------------------------------------------------ the test */

START_TEST(test_every_failed_allocation_fails_one_call_cleanly_and_leaks_nothing) {
  ck_assert_int_eq(cubert_set_allocator(&counting), CUBERT_OK);
  /* The built-in kernels are made once per process and kept (kernels.h):
   * made here, they are the blocks every run leaves behind. */
  cubert_kernel *warm = NULL;
  ck_assert_int_eq(cubert_builtin_kernel(CUBERT_BUILTIN_FILL_U32, &warm), CUBERT_OK);
  cubert_kernel_release(warm);
  const long kept = atomic_load(&live);
  ck_assert_int_gt(kept, 0);
  /* $CB_ALLOC_FAIL_N=N runs that N alone and says what happened (to follow
   * one failure in a debugger) */
  const char *only = getenv("CB_ALLOC_FAIL_N");
  long n = only ? atol(only) : 1, deviations = 0, absorbed = 0;
  for (;; n++) {
    run r = {.n = n};
    if (!run_failing(n, program, &r)) {
      ck_assert_msg(r.deviated == 0, "N=%ld (never reached): step %d %s returned %s: %s", n,
                    r.deviated, r.what, cubert_status_name(r.st), r.message);
      ck_assert_int_eq(atomic_load(&live), kept);
      break;
    }
    if (r.deviated) {
      deviations++;
      ck_assert_msg(r.message_ok,
                    "N=%ld: step %d %s returned %s without saying it was out of host memory: \"%s\"",
                    n, r.deviated, r.what, cubert_status_name(r.st), r.message);
    } else {
      absorbed++;
    }
    if (only) {
      printf("N=%ld: step %d %s returned %s: %s; %ld blocks live\n", n, r.deviated, r.what,
             cubert_status_name(r.st), r.message, (long)atomic_load(&live) - kept);
      return;
    }
    ck_assert_msg(atomic_load(&live) == kept, "N=%ld: %ld blocks leaked (step %d %s returned %s: %s)", n,
                  (long)atomic_load(&live) - kept, r.deviated, r.what, cubert_status_name(r.st), r.message);
  }
  ck_assert_int_eq(cubert_set_allocator(NULL), CUBERT_OK);
  printf("%ld allocations failed one at a time: %ld failed a call, %ld were absorbed\n", n - 1,
         deviations, absorbed);
  ck_assert_int_gt(n, 100); /* the program allocates: the hooks are in use */
}
END_TEST

/* ------------------------------------------------------------ a replay short of memory */

/* An asynchronous failure found at a fence is replayed over the work that
 * followed it (runtime/replay.c), and the replay allocates: its sets of bad
 * bytes, their ledgers, the failures it passes on. Here the Nth allocation
 * from the enqueue of the failed fill's readers on fails, for every N until
 * one is never reached: whatever fails, the bytes the failed fill wrote (x's
 * head) and the bytes its readers then wrote (y, contiguous; z, from a
 * strided view of x) must be refused afterwards, never handed out as good; and the
 * sync that found the failure must not report success. */
typedef struct replay_run {
  long n;
  int streams; /* made before the window (the device has one more) */
  cubert_status copy_st, strided_st, sync_st; /* in the window */
  cubert_status x_st, y_st, z_st;             /* reads after it */
  char x_msg[512];
  bool setup_ok;
} replay_run;

static cubert_status read_words(cubert_client *c, cubert_handle *h, uint32_t *out, char *msg, size_t cap) {
  cubert_status st = cubert_handle_read(c, h, out, WORDS * sizeof *out);
  if (msg) snprintf(msg, cap, "%s", st ? cubert_last_error_message() : "");
  return st;
}

static void *replay_program(void *arg) {
  replay_run *r = arg;
  cubert_runtime *rt = NULL;
  cubert_client *c = NULL;
  cubert_kernel *fill = NULL, *copy = NULL;
  cubert_handle *x = NULL, *y = NULL, *z = NULL, *head = NULL;
  uint32_t in[WORDS], out[WORDS];
  for (int i = 0; i < WORDS; i++) in[i] = 0xC0DE0000u + (uint32_t)i;
  cubert_runtime_options o;
  cb_test_options("host", &o);
  o.host_devices = 1;
  o.host_memory = 1u << 20;
  cubert_faultinj_diag diag;
  if (cubert_runtime_create(&o, &rt) || cubert_client_create(rt, 0, &c) ||
      cubert_handle_create(c, in, sizeof in, &x) || cubert_handle_create(c, in, sizeof in, &y) ||
      cubert_handle_create(c, in, sizeof in, &z) || cubert_builtin_kernel(CUBERT_BUILTIN_FILL_U32, &fill) ||
      cubert_builtin_kernel(CUBERT_BUILTIN_COPY_U32, &copy) ||
      cubert_faultinj_add(rt, "launch kernel=cubert_fill_u32 times=1 fault=async", "test", NULL, &diag) ||
      cubert_handle_slice(x, 0, sizeof in - 2 * sizeof *in, &head))
    goto teardown;
  for (int i = 0; i < r->streams; i++) {
    cubert_stream sid;
    if (cubert_stream_create(c, &sid)) goto teardown;
  }
  {
    /* the failed fill writes x's first two words only: the strided view of
     * x below meets them in one piece */
    uint64_t two = 2;
    uint32_t v = 9;
    cubert_arg fa[3] = {cubert_arg_buffer(head), cubert_arg_scalar(&two, 8), cubert_arg_scalar(&v, 4)};
    cubert_launch_config one = {{1, 1, 1}, {64, 1, 1}, 0};
    if (cubert_launch(c, fill, &one, fa, 3) != CUBERT_OK) goto teardown; /* x's head fails when it runs */
  }
  r->setup_ok = true;
  /* the window: the Nth allocation from here on fails */
  atomic_store(&fail_at, atomic_load(&calls) + r->n);
  uint64_t n = WORDS;
  cubert_arg a[3] = {cubert_arg_buffer(x), cubert_arg_buffer(y), cubert_arg_scalar(&n, 8)};
  cubert_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  r->copy_st = cubert_launch(c, copy, &cfg, a, 3); /* reads x: y gets what the failed fill left */
  cubert_view every_other = {1, 4, 0, {WORDS / 2}, {2}}, packed = {1, 4, 0, {WORDS / 2}, {1}};
  r->strided_st = cubert_handle_copy_strided(c, x, &every_other, z, &packed);
  r->sync_st = cubert_sync(c);
  atomic_store(&fail_at, 0);
  r->x_st = read_words(c, x, out, r->x_msg, sizeof r->x_msg);
  r->y_st = read_words(c, y, out, NULL, 0);
  r->z_st = read_words(c, z, out, NULL, 0);
teardown:
  cubert_kernel_release(copy);
  cubert_kernel_release(fill);
  cubert_handle_release(head);
  cubert_handle_release(z);
  cubert_handle_release(y);
  cubert_handle_release(x);
  cubert_client_destroy(c);
  cubert_runtime_destroy(rt);
  return NULL;
}

static void replay_sweep(int streams) {
  ck_assert_int_eq(cubert_set_allocator(&counting), CUBERT_OK);
  long n = 1, deviations = 0;
  for (;; n++) {
    replay_run r = {.n = n, .streams = streams};
    atomic_store(&calls, 0);
    atomic_store(&failed, false);
    atomic_store(&fail_at, 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, replay_program, &r), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_msg(r.setup_ok, "N=%ld: the program's setup failed with no allocation failing", n);
    /* the failed fill's bytes: refused, whatever allocation failed */
    ck_assert_msg(r.x_st == CUBERT_ERR_TAINTED,
                  "N=%ld: x, written by the work that failed asynchronously, read as %s: \"%s\" "
                  "(copy %s, strided copy %s, sync %s)",
                  n, cubert_status_name(r.x_st), r.x_msg, cubert_status_name(r.copy_st),
                  cubert_status_name(r.strided_st), cubert_status_name(r.sync_st));
    /* its readers' bytes, when they were enqueued (else y and z keep `in`) */
    if (r.copy_st == CUBERT_OK)
      ck_assert_msg(r.y_st == CUBERT_ERR_TAINTED, "N=%ld: y, written from the failed x, read as %s", n,
                    cubert_status_name(r.y_st));
    if (r.strided_st == CUBERT_OK)
      ck_assert_msg(r.z_st == CUBERT_ERR_TAINTED, "N=%ld: z, copied from a strided view of the failed x, read as %s",
                    n, cubert_status_name(r.z_st));
    ck_assert_msg(r.sync_st != CUBERT_OK, "N=%ld: the sync that found the failure returned CUBERT_OK", n);
    if (r.copy_st || r.strided_st || r.sync_st != CUBERT_ERR_LAUNCH) deviations++;
    if (!atomic_load(&failed)) break;
  }
  ck_assert_int_eq(cubert_set_allocator(NULL), CUBERT_OK);
  printf("replay (%d more streams): %ld allocations failed one at a time, %ld changed a call's status\n", streams,
         n - 1, deviations);
  ck_assert_int_gt(n, 10); /* the window allocates: the hooks are in use */
}

START_TEST(test_a_replay_short_of_memory_still_taints_what_the_failed_work_and_its_readers_wrote) {
  replay_sweep(0);
}
END_TEST

/* The same on a device of more than 32 streams: reaping then allocates its
 * table of the streams' progress, and without it must still find the
 * failures waiting, or a read that waits passes the failed bytes as good. */
START_TEST(test_a_reap_short_of_memory_on_many_streams_still_finds_the_failure) {
  replay_sweep(32);
}
END_TEST

/* One import of `record` on a thread of its own (its last error goes with
 * the thread): the status, and whether its message spoke of memory. */
typedef struct import_run {
  const cubert_failure_record *record;
  cubert_status st;
  bool says_memory;
} import_run;

static void *import_once(void *arg) {
  import_run *r = arg;
  const cubert_failure *f = NULL;
  r->st = cubert_failure_import(r->record, &f);
  cubert_error *e = cubert_last_error();
  r->says_memory = !e || strstr(cubert_error_message(e), "memory") != NULL; /* no error: recording it failed */
  cubert_error_release(e);
  cubert_failure_release(f);
  return NULL;
}

/* A failure record read while host memory runs out is refused with
 * CUBERT_ERR_OUT_OF_MEMORY, as every call short of memory is (cubert.h),
 * not called malformed; nothing leaks. */
START_TEST(test_a_record_imported_short_of_memory_says_so) {
  ck_assert_int_eq(cubert_set_allocator(&counting), CUBERT_OK);
  cubert_failure_record rec;
  {
    cubert_runtime_options o;
    cb_test_options("host", &o);
    cubert_runtime *rt = NULL;
    cubert_client *c = NULL;
    const cubert_failure *f = NULL;
    ck_assert_int_eq(cubert_runtime_create(&o, &rt), CUBERT_OK);
    ck_assert_int_eq(cubert_client_create(rt, 0, &c), CUBERT_OK);
    ck_assert_int_eq(cubert_failure_create(c, CUBERT_ERR_LAUNCH, "the kernel failed", &f), CUBERT_OK);
    ck_assert_int_eq(cubert_failure_export(f, &rec), CUBERT_OK);
    cubert_failure_release(f);
    cubert_client_destroy(c);
    cubert_runtime_destroy(rt);
  }
  const long kept = atomic_load(&live);
  long n = 1;
  for (;; n++) {
    import_run r = {&rec, CUBERT_OK, false};
    bool reached = run_failing(n, import_once, &r);
    ck_assert_msg(atomic_load(&live) == kept, "N=%ld: %ld blocks leaked", n, (long)atomic_load(&live) - kept);
    if (!reached) {
      ck_assert_int_eq(r.st, CUBERT_OK);
      break;
    }
    ck_assert_msg(r.st == CUBERT_OK || (r.st == CUBERT_ERR_OUT_OF_MEMORY && r.says_memory),
                  "N=%ld: the import returned %s", n, cubert_status_name(r.st));
  }
  ck_assert_int_gt(n, 2); /* the import allocates: the failure and its strings */
  ck_assert_int_eq(cubert_set_allocator(NULL), CUBERT_OK);
}
END_TEST

/* Copies that read a tainted source, each made once on a thread of its own
 * with the Nth allocation failing: a whole copy, a strided copy, a peer
 * copy and a read into a host buffer (every path that skips copy work). */
typedef struct skip_run {
  cubert_client *c, *c1;
  cubert_handle *src, *dst, *peer_dst;
  cubert_host_buffer *hb;
  cubert_status st[4];
} skip_run;

static void *skip_once(void *arg) {
  skip_run *r = arg;
  cubert_view v = {1, 4, 0, {WORDS}, {1}};
  r->st[0] = cubert_handle_copy(r->c, r->src, r->dst);
  r->st[1] = cubert_handle_copy_strided(r->c, r->src, &v, r->dst, &v);
  r->st[2] = cubert_handle_copy_peer(r->c, r->src, r->c1, r->peer_dst);
  r->st[3] = cubert_handle_read_host(r->c, r->src, r->hb, 0, WORDS * 4);
  cubert_sync(r->c);
  return NULL;
}

/* A copy whose source is tainted is refused with CUBERT_ERR_TAINTED and its
 * destination carries a child failure also when the refusal finds the taint
 * with no host memory to list it (its error then has no failure entry): it
 * used to read the missing first entry and crash. Out of memory earlier
 * (the work itself), the copy is refused with CUBERT_ERR_OUT_OF_MEMORY. */
START_TEST(test_a_copy_of_tainted_bytes_short_of_memory_still_refuses_and_taints) {
  ck_assert_int_eq(cubert_set_allocator(&counting), CUBERT_OK);
  cubert_runtime_options o;
  cb_test_options("host", &o);
  o.host_devices = 2;
  cubert_runtime *rt = NULL;
  skip_run r = {0};
  const cubert_failure *f = NULL;
  uint32_t words[WORDS] = {0};
  ck_assert_int_eq(cubert_runtime_create(&o, &rt), CUBERT_OK);
  ck_assert_int_eq(cubert_client_create(rt, 0, &r.c), CUBERT_OK);
  ck_assert_int_eq(cubert_client_create(rt, 1, &r.c1), CUBERT_OK);
  ck_assert_int_eq(cubert_handle_create(r.c, words, sizeof words, &r.src), CUBERT_OK);
  ck_assert_int_eq(cubert_handle_empty(r.c, sizeof words, &r.dst), CUBERT_OK);
  ck_assert_int_eq(cubert_handle_empty(r.c1, sizeof words, &r.peer_dst), CUBERT_OK);
  ck_assert_int_eq(cubert_host_buffer_alloc(r.c, sizeof words, &r.hb), CUBERT_OK);
  ck_assert_int_eq(cubert_failure_create(r.c, CUBERT_ERR_COPY, "the source was lost", &f), CUBERT_OK);
  ck_assert_int_eq(cubert_handle_taint(r.c, r.src, f), CUBERT_OK);
  cubert_failure_release(f);
  long n = 1, refused_tainted = 0;
  for (;; n++) {
    bool reached = run_failing(n, skip_once, &r);
    for (int i = 0; i < 4; i++) {
      ck_assert_msg(r.st[i] == CUBERT_ERR_TAINTED || r.st[i] == CUBERT_ERR_OUT_OF_MEMORY,
                    "N=%ld: copy %d returned %s", n, i, cubert_status_name(r.st[i]));
      if (r.st[i] == CUBERT_ERR_TAINTED) refused_tainted++;
    }
    /* a tainted refusal left its destination tainted */
    if (r.st[0] == CUBERT_ERR_TAINTED || r.st[1] == CUBERT_ERR_TAINTED)
      ck_assert_int_eq(cubert_handle_check(r.c, r.dst), CUBERT_ERR_TAINTED);
    if (r.st[2] == CUBERT_ERR_TAINTED) ck_assert_int_eq(cubert_handle_check(r.c1, r.peer_dst), CUBERT_ERR_TAINTED);
    if (r.st[3] == CUBERT_ERR_TAINTED)
      ck_assert_int_eq(cubert_host_buffer_check(r.hb, 0, sizeof words), CUBERT_ERR_TAINTED);
    /* repair the destinations for the next round */
    ck_assert_int_eq(cubert_handle_write(r.c, r.dst, words, sizeof words), CUBERT_OK);
    ck_assert_int_eq(cubert_handle_write(r.c1, r.peer_dst, words, sizeof words), CUBERT_OK);
    ck_assert_int_eq(cubert_host_buffer_mark_written(r.hb, 0, sizeof words), CUBERT_OK);
    if (!reached) break;
  }
  ck_assert_int_gt(n, 4); /* the copies allocate: the hooks are in use */
  ck_assert_int_gt(refused_tainted, 0);
  cubert_host_buffer_release(r.hb);
  cubert_handle_release(r.peer_dst);
  cubert_handle_release(r.dst);
  cubert_handle_release(r.src);
  cubert_client_destroy(r.c1);
  cubert_client_destroy(r.c);
  cubert_runtime_destroy(rt);
  ck_assert_int_eq(cubert_set_allocator(NULL), CUBERT_OK);
}
END_TEST

START_TEST(test_an_allocator_with_a_missing_function_is_refused_and_changes_nothing) {
  cubert_allocator partial = counting;
  partial.free_fn = NULL;
  ck_assert_int_eq(cubert_set_allocator(&partial), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "cubert_set_allocator"));
  ck_assert_int_eq(cubert_set_allocator(&counting), CUBERT_OK);
  atomic_store(&calls, 0);
  ck_assert_int_eq(cubert_set_allocator(&partial), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_int_gt(atomic_load(&calls), 0); /* the error was recorded through the counting hooks */
  ck_assert_int_eq(cubert_set_allocator(NULL), CUBERT_OK);
}
END_TEST

int main(void) {
  Suite *s = suite_create("alloc_fail");
  TCase *tc = tcase_create("alloc_fail");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_every_failed_allocation_fails_one_call_cleanly_and_leaks_nothing);
  tcase_add_test(tc, test_an_allocator_with_a_missing_function_is_refused_and_changes_nothing);
  tcase_add_test(tc, test_a_record_imported_short_of_memory_says_so);
  tcase_add_test(tc, test_a_copy_of_tainted_bytes_short_of_memory_still_refuses_and_taints);
  tcase_add_test(tc, test_a_replay_short_of_memory_still_taints_what_the_failed_work_and_its_readers_wrote);
  tcase_add_test(tc, test_a_reap_short_of_memory_on_many_streams_still_finds_the_failure);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failures = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
