/* tests/test_contract.c: promises of the public headers and docs checked
 * from outside, through the public API only (cubert.h, strided.h,
 * faultinj.h), where an outside probe found the code breaking them. Each
 * test is named after the promise it holds the code to.
 *
 * Host backend only: memory shared between processes imports in the process
 * that exported it only there (cubert.h, cubert_handle_import), and the
 * allocator hooks fail allocations the same way on every backend. */
#include <check.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/cubert.h"
#include "cubert/faultinj.h"
#include "cubert/kernels.h"
#include "tests/testutil.h"

#define BYTES 4096

/* A host runtime of two devices with a client on each, no fault rules. */
typedef struct pair {
  cubert_runtime *rt;
  cubert_client *c[2];
} pair;

static void pair_open(pair *p) {
  memset(p, 0, sizeof *p);
  cubert_runtime_options o;
  cb_test_options("host", &o);
  o.host_devices = 2;
  cb_test_ok(cubert_runtime_create(&o, &p->rt));
  for (int d = 0; d < 2; d++) cb_test_ok(cubert_client_create(p->rt, d, &p->c[d]));
}

static void pair_close(pair *p) {
  for (int d = 0; d < 2; d++) cubert_client_destroy(p->c[d]);
  cubert_runtime_destroy(p->rt);
}

/* BYTES of shareable memory written on device 0 (*owner), exported and
 * imported on device 1 of the same process (*imported). */
static void shared_pair(pair *p, cubert_handle **owner, cubert_handle **imported) {
  static uint8_t zero[BYTES];
  cubert_export_desc d;
  cb_test_ok(cubert_handle_empty_with(p->c[0], BYTES, CUBERT_MEMORY_SHAREABLE, owner));
  cb_test_ok(cubert_handle_write(p->c[0], *owner, zero, BYTES));
  cb_test_ok(cubert_handle_export(p->c[0], *owner, &d));
  cb_test_ok(cubert_handle_import(p->c[1], &d, imported));
}

/* shared_pair with every byte tainted by a failure saying `why`, made and
 * put there by device `by`'s client through its own handle. */
static void tainted_pair(pair *p, int by, const char *why, cubert_handle **owner, cubert_handle **imported) {
  pair_open(p);
  shared_pair(p, owner, imported);
  const cubert_failure *f = NULL;
  cb_test_ok(cubert_failure_create(p->c[by], CUBERT_ERR_COPY, why, &f));
  cb_test_ok(cubert_handle_taint(p->c[by], by ? *imported : *owner, f));
  cubert_failure_release(f);
}

/* cubert_handle_check of bytes [start, end) of `h`. */
static cubert_status check_bytes(cubert_client *c, const cubert_handle *h, uint64_t start, uint64_t end) {
  cubert_handle *s = NULL;
  cb_test_ok(cubert_handle_slice(h, start, cubert_handle_size_in_use(h) - end, &s));
  cubert_status st = cubert_handle_check(c, s);
  cubert_handle_release(s);
  return st;
}

/* ------------------------------------------------------------ runtime options */

/* cubert.h: struct_size is sizeof(cubert_runtime_options), set by _init;
 * no call crashes on a caller's mistake. A size that did not come from any
 * version of the struct was accepted whenever it was not too large, and
 * the options were copied up to it: a size ending inside a pointer left
 * half of it in the options, and the runtime crashed reading it. Every
 * size is now either one the struct has had, or refused. */
START_TEST(test_runtime_options_of_a_size_no_version_had_are_refused) {
  for (uint32_t size = 0; size <= sizeof(cubert_runtime_options) + 16; size++) {
    cubert_runtime_options o;
    cb_test_options("host", &o);
    o.host_devices = 1;
    o.struct_size = size;
    cubert_runtime *rt = NULL;
    cubert_status st = cubert_runtime_create(&o, &rt);
    /* the sizes the struct has had: it ended where a field now begins */
    bool known = size == offsetof(cubert_runtime_options, host_devices) ||
                 size == offsetof(cubert_runtime_options, host_memory) ||
                 size == offsetof(cubert_runtime_options, host_peer_deny) ||
                 size == offsetof(cubert_runtime_options, faults) ||
                 size == offsetof(cubert_runtime_options, no_faultinj) || size == sizeof o;
    ck_assert_msg((st == CUBERT_OK) == known, "size %u (%s): %s", size,
                  known ? "a size the struct has had" : "no version's size", cubert_status_name(st));
    if (st == CUBERT_OK) {
      cubert_runtime_destroy(rt);
      continue;
    }
    ck_assert_msg(st == CUBERT_ERR_INVALID_ARGUMENT, "size %u: %s", size, cubert_status_name(st));
    ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "struct_size"));
    ck_assert_ptr_null(rt);
  }
}
END_TEST

/* ------------------------------------------------------------ memory shared between processes */

/* docs/processes.md: a cell holds at most 32 ranges; past that neighbouring
 * ranges are joined, and bytes are never left untainted. Repairs that cut
 * holes inside tainted ranges add ranges too: they grew the table past its
 * room and wrote beyond it (a crash, or another process's cell corrupted). */
START_TEST(test_repairs_cutting_holes_in_shared_taint_keep_the_cell_bounded) {
  pair p;
  cubert_handle *owner = NULL, *imported = NULL;
  tainted_pair(&p, 0, "lost in transit", &owner, &imported);
  /* 60 writes of 8 bytes, every 32 bytes: each cuts a hole in the taint */
  uint8_t eight[8] = {0};
  for (uint64_t k = 1; k <= 60; k++) {
    cubert_handle *s = NULL;
    cb_test_ok(cubert_handle_slice(owner, 32 * k, BYTES - 32 * k - 8, &s));
    cb_test_ok(cubert_handle_write(p.c[0], s, eight, sizeof eight));
    cubert_handle_release(s);
  }
  /* what no write touched is still tainted, seen from either process */
  ck_assert_int_eq(check_bytes(p.c[1], imported, 0, 32), CUBERT_ERR_TAINTED);
  for (uint64_t k = 1; k <= 60; k++) {
    ck_assert_int_eq(check_bytes(p.c[1], imported, 32 * k + 8, 32 * k + 32), CUBERT_ERR_TAINTED);
    ck_assert_int_eq(check_bytes(p.c[0], owner, 32 * k + 8, 32 * k + 32), CUBERT_ERR_TAINTED);
  }
  /* and a whole write still repairs everything */
  static uint8_t zero[BYTES];
  cb_test_ok(cubert_handle_write(p.c[1], imported, zero, BYTES));
  cb_test_ok(cubert_handle_check(p.c[0], owner));
  cubert_handle_release(imported);
  cubert_handle_release(owner);
  pair_close(&p);
}
END_TEST

/* docs/processes.md: every read, copy or launch of the bytes in either
 * process consults the cell first. A launch whose inputs had empty local
 * ledgers took them as clean: a kernel read bytes another process had
 * tainted, and its outputs were good. */
START_TEST(test_a_kernel_reading_memory_shared_between_processes_checks_the_cell) {
  pair p;
  pair_open(&p);
  cubert_handle *owner = NULL, *imported = NULL, *out0 = NULL, *out1 = NULL;
  shared_pair(&p, &owner, &imported);
  cb_test_ok(cubert_handle_empty(p.c[0], BYTES, &out0));
  cb_test_ok(cubert_handle_empty(p.c[1], BYTES, &out1));
  cubert_kernel *copy = NULL;
  cb_test_ok(cubert_builtin_kernel(CUBERT_BUILTIN_COPY_U32, &copy));
  uint64_t n = BYTES / 4;
  cubert_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  const cubert_failure *f = NULL;
  uint8_t buf[BYTES];
  /* tainted by the importer, read by a kernel of the exporter */
  cb_test_ok(cubert_failure_create(p.c[1], CUBERT_ERR_COPY, "lost by the importer", &f));
  cb_test_ok(cubert_handle_taint(p.c[1], imported, f));
  cubert_failure_release(f);
  cubert_arg a0[3] = {cubert_arg_buffer(owner), cubert_arg_buffer(out0), cubert_arg_scalar(&n, sizeof n)};
  cb_test_status(cubert_launch(p.c[0], copy, &cfg, a0, 3), CUBERT_ERR_TAINTED);
  cb_test_status(cubert_handle_read(p.c[0], out0, buf, BYTES), CUBERT_ERR_TAINTED);
  /* repaired by the importer, tainted by the exporter, read by a kernel of the importer */
  cb_test_ok(cubert_handle_write(p.c[1], imported, buf, BYTES));
  cb_test_ok(cubert_failure_create(p.c[0], CUBERT_ERR_COPY, "lost by the exporter", &f));
  cb_test_ok(cubert_handle_taint(p.c[0], owner, f));
  cubert_failure_release(f);
  cubert_arg a1[3] = {cubert_arg_buffer(imported), cubert_arg_buffer(out1), cubert_arg_scalar(&n, sizeof n)};
  cb_test_status(cubert_launch(p.c[1], copy, &cfg, a1, 3), CUBERT_ERR_TAINTED);
  cb_test_status(cubert_handle_read(p.c[1], out1, buf, BYTES), CUBERT_ERR_TAINTED);
  cubert_kernel_release(copy);
  cubert_handle_release(out1);
  cubert_handle_release(out0);
  cubert_handle_release(imported);
  cubert_handle_release(owner);
  pair_close(&p);
}
END_TEST

/* Columns 0 and 1 of the 8 rows of a 16-column u32 matrix: bytes 0..8,
 * 64..72, ..., 448..456; between them, the gaps. */
static const cubert_view two_columns = {.ndims = 2, .elem_size = 4, .offset = 0, .shape = {8, 2}, .strides = {16, 1}};

/* strided.h: a strided read is refused where its footprint meets tainted
 * bytes; docs/processes.md: every read consults the cell. Strided reads,
 * checks and copies of memory shared between processes looked at the local
 * ledger only, and passed bytes the other process had tainted. */
START_TEST(test_strided_reads_of_memory_shared_between_processes_consult_the_cell) {
  pair p;
  cubert_handle *owner = NULL, *imported = NULL, *dst = NULL;
  tainted_pair(&p, 1, "lost by the importer", &owner, &imported);
  cb_test_ok(cubert_handle_empty(p.c[0], BYTES, &dst));
  uint8_t packed[64];
  cb_test_status(cubert_handle_check_strided(p.c[0], owner, &two_columns), CUBERT_ERR_TAINTED);
  cb_test_status(cubert_handle_read_strided(p.c[0], owner, &two_columns, packed, sizeof packed),
                 CUBERT_ERR_TAINTED);
  /* the error names the footprint's pieces, with the importer's failure */
  cubert_error *e = cubert_last_error();
  ck_assert_uint_eq(cubert_error_failure_count(e), 8);
  uint64_t s = 0, end = 0;
  const cubert_failure *got = cubert_error_failure(e, 1, &s, &end);
  ck_assert_uint_eq(s, 64);
  ck_assert_uint_eq(end, 72);
  ck_assert_ptr_nonnull(strstr(cubert_failure_message(got), "lost by the importer"));
  cubert_error_release(e);
  cb_test_status(cubert_handle_copy_strided(p.c[0], owner, &two_columns, dst, &two_columns), CUBERT_ERR_TAINTED);
  /* a tensor input too */
  cubert_kernel *copy = NULL;
  cb_test_ok(cubert_builtin_kernel(CUBERT_BUILTIN_COPY_STRIDED, &copy));
  cubert_view out = two_columns;
  out.offset = 8; /* columns 8 and 9 of dst */
  cubert_arg args[2] = {cubert_arg_tensor(owner, &two_columns), cubert_arg_tensor(dst, &out)};
  cubert_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  cb_test_status(cubert_launch(p.c[0], copy, &cfg, args, 2), CUBERT_ERR_TAINTED);
  cubert_kernel_release(copy);
  cubert_handle_release(dst);
  cubert_handle_release(imported);
  cubert_handle_release(owner);
  pair_close(&p);
}
END_TEST

/* strided.h: a strided write that succeeds releases exactly the
 * footprint. On memory shared between processes it cleared the whole range
 * around the footprint in the cell: the gaps between its elements, never
 * written, read as good in both processes. */
START_TEST(test_a_strided_repair_of_shared_memory_leaves_its_gaps_tainted) {
  pair p;
  cubert_handle *owner = NULL, *imported = NULL;
  tainted_pair(&p, 0, "lost in transit", &owner, &imported);
  uint8_t packed[64] = {0};
  cb_test_ok(cubert_handle_write_strided(p.c[0], owner, &two_columns, packed, sizeof packed));
  /* the footprint is repaired, seen from either process */
  cb_test_ok(cubert_handle_check_strided(p.c[0], owner, &two_columns));
  cb_test_ok(cubert_handle_check_strided(p.c[1], imported, &two_columns));
  cb_test_ok(check_bytes(p.c[1], imported, 64, 72));
  /* the gaps are not */
  for (uint64_t row = 0; row < 8; row++) {
    ck_assert_int_eq(check_bytes(p.c[0], owner, 64 * row + 8, 64 * row + 64), CUBERT_ERR_TAINTED);
    ck_assert_int_eq(check_bytes(p.c[1], imported, 64 * row + 8, 64 * row + 64), CUBERT_ERR_TAINTED);
  }
  /* a strided write that fails taints its footprint, not its gaps */
  static uint8_t zero[BYTES];
  cb_test_ok(cubert_handle_write(p.c[0], owner, zero, BYTES));
  cubert_faultinj_diag diag;
  cb_test_ok(cubert_faultinj_add(p.rt, "write times=1 fault=fail", "test", NULL, &diag));
  ck_assert_int_ne(cubert_handle_write_strided(p.c[1], imported, &two_columns, packed, sizeof packed), CUBERT_OK);
  cb_test_status(check_bytes(p.c[0], owner, 64, 72), CUBERT_ERR_TAINTED);
  cb_test_ok(check_bytes(p.c[0], owner, 72, 128));
  cubert_handle_release(imported);
  cubert_handle_release(owner);
  pair_close(&p);
}
END_TEST

/* cubert.h, cubert_handle_export: the first export moves the taint the
 * allocation already has into the cell. A strided claim (a failed strided
 * write) was left behind: after the export neither process saw it. */
START_TEST(test_strided_taint_moves_into_the_cell_at_the_first_export) {
  pair p;
  pair_open(&p);
  static uint8_t zero[BYTES];
  cubert_handle *owner = NULL, *imported = NULL;
  cb_test_ok(cubert_handle_empty_with(p.c[0], BYTES, CUBERT_MEMORY_SHAREABLE, &owner));
  cb_test_ok(cubert_handle_write(p.c[0], owner, zero, BYTES));
  cubert_faultinj_diag diag;
  cb_test_ok(cubert_faultinj_add(p.rt, "write times=1 fault=fail", "test", NULL, &diag));
  uint8_t packed[64] = {0};
  ck_assert_int_ne(cubert_handle_write_strided(p.c[0], owner, &two_columns, packed, sizeof packed), CUBERT_OK);
  cb_test_status(cubert_handle_check(p.c[0], owner), CUBERT_ERR_TAINTED);
  cubert_export_desc d;
  cb_test_ok(cubert_handle_export(p.c[0], owner, &d));
  cb_test_ok(cubert_handle_import(p.c[1], &d, &imported));
  cb_test_status(cubert_handle_check(p.c[0], owner), CUBERT_ERR_TAINTED);
  cb_test_status(cubert_handle_check(p.c[1], imported), CUBERT_ERR_TAINTED);
  cb_test_status(check_bytes(p.c[1], imported, 64, 72), CUBERT_ERR_TAINTED);
  cb_test_status(cubert_handle_check_strided(p.c[1], imported, &two_columns), CUBERT_ERR_TAINTED);
  cb_test_ok(check_bytes(p.c[1], imported, 8, 64)); /* the gaps stay good */
  cubert_handle_release(imported);
  cubert_handle_release(owner);
  pair_close(&p);
}
END_TEST

/* ------------------------------------------------------------ external access */

/* cubert.h: the begin "waits for the work queued on the client's stream"
 * and "a refused begin changes nothing". When the wait itself fails, the
 * stream's writers may not have run: the begin granted access anyway (the
 * wait's status was dropped) and set the address. */
START_TEST(test_an_external_begin_whose_wait_fails_is_refused_and_changes_nothing) {
  pair p;
  pair_open(&p);
  cubert_handle *view = NULL;
  cb_test_ok(cubert_handle_empty(p.c[0], BYTES, &view));
  cubert_faultinj_diag diag;
  cb_test_ok(cubert_faultinj_add(p.rt, "sync times=1 fault=fail", "test", NULL, &diag));
  for (int write = 0; write < 2; write++) {
    cubert_external *x = NULL;
    void *address = NULL;
    cubert_status st = cubert_handle_external_begin(p.c[0], view, write ? CUBERT_ACCESS_WRITE : CUBERT_ACCESS_READ,
                                                    &x, &address);
    if (write == 0) {
      ck_assert_msg(st != CUBERT_OK, "a begin whose wait failed was granted");
      ck_assert_ptr_null(x);
      ck_assert_ptr_null(address);
      ck_assert_msg(strstr(cubert_last_error_message(), "synchronising") != NULL, "the refusal says: %s",
                    cubert_last_error_message());
      /* nothing changed: the bytes carry no failure */
      cb_test_ok(cubert_handle_check(p.c[0], view));
    } else { /* the rule fired once: the next begin waits and is granted */
      cb_test_ok(st);
      ck_assert_ptr_nonnull(address);
      cb_test_ok(cubert_handle_external_end(x, NULL));
    }
  }
  cubert_handle_release(view);
  pair_close(&p);
}
END_TEST

/* cubert_handle_external_begin waits for the client's stream, and
 * failures it finds taint their bytes "as at any sync"; docs/failures.md
 * rule 8: every sync that waits for failed work returns the failure, once
 * per stream; cubert.h: a failed call records the last error (a successful
 * one leaves it). The begin waited with cubert_sync itself: it took the
 * failure's one report from the program's next sync (which returned OK)
 * and put it in the thread's last error while succeeding. */
START_TEST(test_an_external_begin_leaves_the_report_of_failed_work_to_the_next_sync) {
  pair p;
  pair_open(&p);
  cubert_handle *out = NULL, *view = NULL;
  cb_test_ok(cubert_handle_empty(p.c[0], BYTES, &out));
  cb_test_ok(cubert_handle_empty(p.c[0], BYTES, &view));
  cubert_faultinj_diag diag;
  cb_test_ok(cubert_faultinj_add(p.rt, "launch times=1 fault=async", "test", NULL, &diag));
  cubert_kernel *fill = NULL;
  cb_test_ok(cubert_builtin_kernel(CUBERT_BUILTIN_FILL_U32, &fill));
  uint64_t n = BYTES / 4;
  uint32_t value = 1;
  cubert_arg args[3] = {cubert_arg_buffer(out), cubert_arg_scalar(&n, sizeof n), cubert_arg_scalar(&value, sizeof value)};
  cubert_launch_config cfg = {{1, 1, 1}, {64, 1, 1}, 0};
  cb_test_ok(cubert_launch(p.c[0], fill, &cfg, args, 3)); /* fails when it runs */
  cubert_error_record(CUBERT_ERR_BUSY, "the program's own last error");
  cubert_external *x = NULL;
  void *address = NULL;
  cb_test_ok(cubert_handle_external_begin(p.c[0], view, CUBERT_ACCESS_READ, &x, &address));
  ck_assert_str_eq(cubert_last_error_message(), "the program's own last error");
  cb_test_ok(cubert_handle_external_end(x, NULL));
  /* the wait tainted what the launch should have written... */
  cb_test_status(cubert_handle_check(p.c[0], out), CUBERT_ERR_TAINTED);
  /* ...and the program's sync still hears of it, once */
  cb_test_status(cubert_sync(p.c[0]), CUBERT_ERR_LAUNCH);
  cb_test_ok(cubert_sync(p.c[0]));
  cubert_kernel_release(fill);
  cubert_handle_release(view);
  cubert_handle_release(out);
  pair_close(&p);
}
END_TEST

/* ------------------------------------------------------------ strided views */

/* strided.h, cubert_view_check: the header refused only views with two
 * elements sharing bytes, but the check (by design: a footprint is kept as
 * sorted runs) refuses every view whose dimensions do not nest, and its
 * message said the elements "would share bytes" for views whose elements
 * share none. The header now says what is refused; the message no longer
 * claims sharing that is not there. */
START_TEST(test_a_view_whose_dimensions_interleave_is_refused_as_such) {
  pair p;
  pair_open(&p);
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty(p.c[0], BYTES, &h));
  /* elements 0 2 4, 3 5 7, 6 8 10: no byte shared, the rows interleave */
  cubert_view interleaved = {.ndims = 2, .elem_size = 1, .offset = 0, .shape = {3, 3}, .strides = {3, 2}};
  cb_test_status(cubert_view_check(h, &interleaved), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "dimension 0"));
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "interleave"));
  /* nested dimensions in either order are fine */
  cubert_view column_major = {.ndims = 2, .elem_size = 4, .offset = 0, .shape = {4, 4}, .strides = {1, 4}};
  cb_test_ok(cubert_view_check(h, &column_major));
  cubert_handle_release(h);
  pair_close(&p);
}
END_TEST

/* ------------------------------------------------------------ out of host memory */

/* Allocations through these hooks fail from the fail_at-th on (1-based
 * since the count was last reset); 0: none fails. */
static atomic_long alloc_calls, fail_at, live;
static atomic_bool fail_once; /* only the fail_at-th fails */

static bool allowed(void) {
  long n = atomic_fetch_add(&alloc_calls, 1) + 1;
  long f = atomic_load(&fail_at);
  return f == 0 || n < f || (atomic_load(&fail_once) && n > f);
}
/* `live` counts the blocks given out and not yet freed. */
static void *counted(void *p) {
  if (p) atomic_fetch_add(&live, 1);
  return p;
}
static void *a_malloc(size_t size) { return counted(allowed() ? malloc(size) : NULL); }
static void *a_calloc(size_t count, size_t size) { return counted(allowed() ? calloc(count, size) : NULL); }
static void *a_realloc(void *ptr, size_t size) {
  if (!ptr) return a_malloc(size);
  return allowed() ? realloc(ptr, size) : NULL;
}
static void a_free(void *ptr) {
  atomic_fetch_sub(&live, 1);
  free(ptr);
}
static const cubert_allocator failing = {a_malloc, a_calloc, a_realloc, a_free};

/* cubert.h, cubert_set_allocator: a taint with no memory for its range
 * taints the whole allocation. Strided reads and checks did not see such a
 * taint (the whole-allocation range ends at UINT64_MAX, and the footprint
 * lookup wrapped around there): they handed out tainted bytes as good. */
START_TEST(test_a_taint_short_of_memory_refuses_strided_reads) {
  cb_test_ok(cubert_set_allocator(&failing)); /* first call of the process (fork mode) */
  /* the k-th allocation of the taint fails, for each k the taint makes */
  for (long k = 1; k <= 8; k++) {
    pair p;
    pair_open(&p);
    static uint8_t data[BYTES];
    uint8_t packed[64];
    cubert_handle *h = NULL, *inside = NULL;
    const cubert_failure *f = NULL;
    cb_test_ok(cubert_handle_create(p.c[0], data, BYTES, &h));
    cb_test_ok(cubert_handle_slice(h, 64, 64, &inside));
    cb_test_ok(cubert_failure_create(p.c[0], CUBERT_ERR_COPY, "lost in transit", &f));
    atomic_store(&alloc_calls, 0);
    atomic_store(&fail_at, k);
    cubert_status st = cubert_handle_taint(p.c[0], inside, f);
    atomic_store(&fail_at, 0);
    if (st == CUBERT_OK) {
      /* columns 0 and 1 of rows 0..7 of a 16-column u32 matrix: bytes 0..8 (good), 64..72 ... */
      cubert_view v = {.ndims = 2, .elem_size = 4, .offset = 0, .shape = {8, 2}, .strides = {16, 1}};
      ck_assert_int_eq(cubert_handle_read(p.c[0], inside, data, BYTES - 128), CUBERT_ERR_TAINTED);
      ck_assert_msg(cubert_handle_check_strided(p.c[0], h, &v) == CUBERT_ERR_TAINTED,
                    "k=%ld: a strided check of tainted bytes passed", k);
      ck_assert_msg(cubert_handle_read_strided(p.c[0], h, &v, packed, sizeof packed) == CUBERT_ERR_TAINTED,
                    "k=%ld: a strided read of tainted bytes succeeded", k);
    } else {
      ck_assert_int_eq(st, CUBERT_ERR_OUT_OF_MEMORY);
    }
    cubert_failure_release(f);
    cubert_handle_release(inside);
    cubert_handle_release(h);
    pair_close(&p);
  }
}
END_TEST

/* docs/processes.md: every read of memory shared between processes
 * consults the cell, and bytes are never passed as good while tainted.
 * Short of host memory to read a failure record out of the cell, the
 * tainted range it covered was skipped: a check or read of those bytes
 * succeeded. */
START_TEST(test_shared_taint_short_of_memory_to_read_its_record_still_refuses) {
  cb_test_ok(cubert_set_allocator(&failing)); /* first call of the process (fork mode) */
  atomic_store(&fail_once, true);
  /* only the k-th allocation of the check fails, for each k it makes */
  for (long k = 1; k <= 16; k++) {
    pair p;
    cubert_handle *owner = NULL, *imported = NULL;
    tainted_pair(&p, 0, "lost in transit", &owner, &imported);
    atomic_store(&alloc_calls, 0);
    atomic_store(&fail_at, k);
    cubert_status st = cubert_handle_check(p.c[1], imported);
    atomic_store(&fail_at, 0);
    ck_assert_msg(st != CUBERT_OK, "k=%ld: a check of tainted shared bytes passed", k);
    cubert_handle_release(imported);
    cubert_handle_release(owner);
    pair_close(&p);
  }
  atomic_store(&fail_once, false);
}
END_TEST

/* cubert.h: out of host memory, a call fails with CUBERT_ERR_OUT_OF_MEMORY
 * and changes nothing; cubert_handle_external_begin: a write's bytes carry
 * a failure "being written by an external transfer that has not ended".
 * Short of memory, the begin's reference to the view was not checked (the
 * begin succeeded with no view, and its end dereferenced NULL), and a
 * pending failure that could not be recorded was handed on as the static
 * "out of host memory recording a failure" (a failed write, to a reader).
 * cubert_failure_create handed that static failure out as the caller's. */
START_TEST(test_external_access_and_failures_short_of_memory_are_refused) {
  cb_test_ok(cubert_set_allocator(&failing)); /* first call of the process (fork mode) */
  static uint8_t data[BYTES];
  for (int write = 0; write < 2; write++) {
    bool reached_end = false;
    for (long k = 1; !reached_end; k++) {
      pair p;
      pair_open(&p);
      cubert_handle *h = NULL;
      cb_test_ok(cubert_handle_create(p.c[0], data, BYTES, &h));
      cubert_external *x = NULL;
      void *address = NULL;
      atomic_store(&alloc_calls, 0);
      atomic_store(&fail_at, k);
      cubert_status st = cubert_handle_external_begin(p.c[0], h, write ? CUBERT_ACCESS_WRITE : CUBERT_ACCESS_READ,
                                                      &x, &address);
      reached_end = atomic_load(&alloc_calls) < k; /* no allocation failed: every k was tried */
      atomic_store(&fail_at, 0);
      if (st == CUBERT_OK) {
        ck_assert_ptr_nonnull(x);
        if (write) {
          cb_test_status(cubert_handle_check(p.c[0], h), CUBERT_ERR_TAINTED);
          ck_assert_msg(strstr(cubert_last_error_message(), "external transfer that has not ended"),
                        "k=%ld: the bytes being written say \"%s\"", k, cubert_last_error_message());
        }
        cb_test_ok(cubert_handle_external_end(x, NULL));
      } else {
        ck_assert_msg(st == CUBERT_ERR_OUT_OF_MEMORY, "k=%ld: begin returned %s", k, cubert_status_name(st));
        ck_assert_ptr_null(x);
        cb_test_ok(cubert_handle_check(p.c[0], h)); /* a refused begin changes nothing */
      }
      cubert_handle_release(h);
      pair_close(&p);
    }
  }
  /* a failure of the caller's making is that failure, or none */
  pair p;
  pair_open(&p);
  for (long k = 1; k <= 4; k++) {
    const cubert_failure *f = NULL;
    atomic_store(&alloc_calls, 0);
    atomic_store(&fail_at, k);
    cubert_status st = cubert_failure_create(p.c[0], CUBERT_ERR_COPY, "lost in transit", &f);
    atomic_store(&fail_at, 0);
    if (st == CUBERT_OK) {
      ck_assert_int_eq(cubert_failure_status(f), CUBERT_ERR_COPY);
      ck_assert_str_eq(cubert_failure_message(f), "lost in transit");
    } else {
      ck_assert_int_eq(st, CUBERT_ERR_OUT_OF_MEMORY);
      ck_assert_ptr_null(f);
    }
    cubert_failure_release(f);
  }
  pair_close(&p);
}
END_TEST

/* cubert.h: out of host memory, a call leaks nothing. Tearing a runtime
 * down allocated an array to drop its devices' work records: short of
 * memory for it, the records and every reference they held (allocation
 * records, streams' failures) leaked. */
START_TEST(test_a_runtime_torn_down_short_of_memory_leaks_nothing) {
  cb_test_ok(cubert_set_allocator(&failing)); /* first call of the process (fork mode) */
  static uint8_t data[BYTES];
  bool reached_end = false;
  for (long k = 1; !reached_end; k++) {
    long before = atomic_load(&live);
    pair p;
    pair_open(&p);
    cubert_handle *h = NULL;
    uint32_t word = 7;
    cb_test_ok(cubert_handle_create(p.c[0], data, BYTES, &h));
    cb_test_ok(cubert_handle_fill(p.c[0], h, &word, sizeof word)); /* work in flight at the teardown */
    cubert_handle_release(h);
    cubert_client_destroy(p.c[0]);
    cubert_client_destroy(p.c[1]);
    atomic_store(&alloc_calls, 0);
    atomic_store(&fail_at, k);
    cubert_runtime_destroy(p.rt);
    reached_end = atomic_load(&alloc_calls) < k;
    atomic_store(&fail_at, 0);
    ck_assert_msg(atomic_load(&live) == before, "k=%ld: %ld blocks leaked", k, atomic_load(&live) - before);
  }
}
END_TEST

/* One step of the program below: a status other than `expected` ends it,
 * and an out-of-memory refusal must say so (cubert.h, cubert_set_allocator:
 * a message that says out of host memory and what was being allocated;
 * no last error at all when recording it was the allocation that failed). */
#define STEP(call, expected)                                                                       \
  do {                                                                                             \
    cubert_status st_ = (call);                                                                    \
    if (st_ == (expected)) break;                                                                  \
    ck_assert_msg(st_ == CUBERT_ERR_OUT_OF_MEMORY, "k=%ld: %s returned %s: %s", k, #call,            \
                  cubert_status_name(st_), cubert_last_error_message());                           \
    cubert_error *e_ = cubert_last_error();                                                        \
    ck_assert_msg(!e_ || strstr(cubert_error_message(e_), "host memory"),                           \
                  "k=%ld: %s is out of host memory and says \"%s\"", k, #call, cubert_error_message(e_)); \
    cubert_error_release(e_);                                                                      \
    goto teardown;                                                                                 \
  } while (0)

/* Each allocation of a small program in turn fails; every refusal says it
 * was out of host memory. The host backend said "no memory for ...", the
 * fault layer "out of memory ...", the pools "creating the memory pools of
 * host" and a stream's record "no detail": none said it was host memory,
 * and the pools' did not say memory ran out at all. */
START_TEST(test_every_refusal_short_of_host_memory_says_so) {
  cb_test_ok(cubert_set_allocator(&failing)); /* first call of the process (fork mode) */
  atomic_store(&fail_once, true);
  static uint8_t data[BYTES];
  bool reached_end = false;
  for (long k = 1; !reached_end; k++) {
    cubert_runtime *rt = NULL;
    cubert_client *c = NULL;
    cubert_handle *h = NULL;
    cubert_timer *t = NULL;
    cubert_host_buffer *hb = NULL;
    cubert_stream stream = 0;
    uint32_t word = 7;
    cubert_runtime_options o;
    cb_test_options("host", &o);
    o.host_devices = 2;
    atomic_store(&alloc_calls, 0);
    atomic_store(&fail_at, k);
    STEP(cubert_runtime_create(&o, &rt), CUBERT_OK);
    STEP(cubert_client_create(rt, 1, &c), CUBERT_OK);
    STEP(cubert_stream_create(c, &stream), CUBERT_OK);
    STEP(cubert_timer_record(c, &t), CUBERT_OK);
    STEP(cubert_handle_create(c, data, BYTES, &h), CUBERT_OK);
    STEP(cubert_handle_fill(c, h, &word, sizeof word), CUBERT_OK);
    STEP(cubert_host_buffer_alloc(c, BYTES, &hb), CUBERT_OK);
    STEP(cubert_handle_read_host(c, h, hb, 0, BYTES), CUBERT_OK);
    STEP(cubert_sync(c), CUBERT_OK);
  teardown:
    reached_end = atomic_load(&alloc_calls) < k;
    atomic_store(&fail_at, 0);
    cubert_host_buffer_release(hb);
    cubert_handle_release(h);
    cubert_timer_release(t);
    cubert_client_destroy(c);
    cubert_runtime_destroy(rt);
  }
  atomic_store(&fail_once, false);
}
END_TEST

/* ------------------------------------------------------------ suite */

static Suite *contract_suite(void) {
  Suite *s = suite_create("contract");
  TCase *options = tcase_create("options");
  tcase_add_test(options, test_runtime_options_of_a_size_no_version_had_are_refused);
  suite_add_tcase(s, options);
  TCase *shared = tcase_create("shared");
  tcase_add_test(shared, test_repairs_cutting_holes_in_shared_taint_keep_the_cell_bounded);
  tcase_add_test(shared, test_a_kernel_reading_memory_shared_between_processes_checks_the_cell);
  tcase_add_test(shared, test_strided_reads_of_memory_shared_between_processes_consult_the_cell);
  tcase_add_test(shared, test_a_strided_repair_of_shared_memory_leaves_its_gaps_tainted);
  tcase_add_test(shared, test_strided_taint_moves_into_the_cell_at_the_first_export);
  suite_add_tcase(s, shared);
  TCase *external = tcase_create("external");
  tcase_add_test(external, test_an_external_begin_whose_wait_fails_is_refused_and_changes_nothing);
  tcase_add_test(external, test_an_external_begin_leaves_the_report_of_failed_work_to_the_next_sync);
  suite_add_tcase(s, external);
  TCase *views = tcase_create("views");
  tcase_add_test(views, test_a_view_whose_dimensions_interleave_is_refused_as_such);
  suite_add_tcase(s, views);
  TCase *memory = tcase_create("memory");
  tcase_add_test(memory, test_a_taint_short_of_memory_refuses_strided_reads);
  tcase_add_test(memory, test_shared_taint_short_of_memory_to_read_its_record_still_refuses);
  tcase_add_test(memory, test_external_access_and_failures_short_of_memory_are_refused);
  tcase_add_test(memory, test_a_runtime_torn_down_short_of_memory_leaks_nothing);
  tcase_add_test(memory, test_every_refusal_short_of_host_memory_says_so);
  suite_add_tcase(s, memory);
  return s;
}

int main(void) { return cb_test_run(contract_suite()); }
