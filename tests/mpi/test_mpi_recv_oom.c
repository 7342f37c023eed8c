/* tests/mpi/test_mpi_recv_oom.c: a receive that runs out of host memory
 * never hands out a byte it did not get good (cubert/mpi.h: "Nothing stale
 * is ever readable as good on the receiver").
 *
 * Two ranks (more are idle). Rank 0 sends views of 3 chunks of 64 KiB (a
 * range of them tainted on the sender, or not); rank 1 receives each, with
 * an injected receive scribble (every chunk arrives damaged: the receiver
 * must make a failure for each) or without, and with cubert's allocator
 * (cubert_set_allocator, and libcubert_mpi's mpi_alloc_set,
 * installed before any other cubert call) failing the Nth allocation of the
 * receive, for N = 1, 2, ... until a receive no longer reaches its Nth. After
 * each, with allocations working again: every byte of the view is either
 * tainted or equal to what was sent (or, for a call refused before it
 * landed anything, all of it unchanged). ctest runs it through MPI's
 * messages (test_mpi_recv_oom), through shared memory (_shared) and in the
 * direct form (_direct). */
#include <check.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cubert/mpi.h"
#include "mpi/alloc.h"
#include "mpi/seam.h"
#include "tests/testutil.h"

#define C 65536u
#define SIZE (3u * C)
#define MAX_N 2000

static int rank;
static atomic_long calls, fail_at;
static atomic_bool failed, fail_rest; /* fail_rest: every allocation from the Nth on fails */

static bool take_turn(void) {
  long n = atomic_fetch_add(&calls, 1) + 1, at = atomic_load(&fail_at);
  if (at && (n == at || (n > at && atomic_load(&fail_rest)))) {
    atomic_store(&failed, true);
    return false;
  }
  return true;
}
static void *t_malloc(size_t size) { return take_turn() ? malloc(size) : NULL; }
static void *t_calloc(size_t count, size_t size) { return take_turn() ? calloc(count, size) : NULL; }
static void *t_realloc(void *ptr, size_t size) {
  if (!ptr) return t_malloc(size);
  return take_turn() ? realloc(ptr, size) : NULL;
}
static void t_free(void *ptr) { free(ptr); }
static const cubert_allocator counting = {t_malloc, t_calloc, t_realloc, t_free};

/* The view, 256 bytes at a time: tainted (a read is refused), what was
 * sent, what it held before (OLD), or other bytes. */
#define OLD 0xee
typedef struct blocks {
  int tainted, sent, old, other;
  uint64_t first_other;
} blocks;

static blocks classify(cubert_client *c, cubert_handle *h, uint64_t seed) {
  unsigned char *want = cb_test_pattern(malloc(SIZE), SIZE, seed);
  blocks k = {0, 0, 0, 0, SIZE};
  for (uint64_t a = 0; a < SIZE; a += 256) {
    cubert_handle *part = NULL;
    ck_assert_int_eq(cubert_handle_slice(h, a, SIZE - a - 256, &part), CUBERT_OK);
    unsigned char buf[256], old[256];
    memset(old, OLD, sizeof old);
    if (cubert_handle_read(c, part, buf, 256) != CUBERT_OK) k.tainted++;
    else if (!memcmp(buf, want + a, 256)) k.sent++;
    else if (!memcmp(buf, old, 256)) k.old++;
    else if (k.other++ == 0) k.first_other = a;
    cubert_handle_release(part);
  }
  free(want);
  return k;
}

/* Variant v of an exchange: 0, a range tainted on the sender and a
 * receive scribble; 1, a clean view (the direct form where forced) and the
 * scribble; 2, the tainted range and no scribble (the good chunks land). */
static bool v_tainted(int v) { return v != 1; }
static bool v_scribbled(int v) { return v != 2; }

START_TEST(test_receive_out_of_memory_hands_out_nothing_stale) {
  cb_test_env env;
  cubert_runtime_options o;
  cb_test_options("host", &o);
  o.host_devices = 1;
  ck_assert(cb_test_open_with(0, &o, 1, &env));
  cubert_client *c = env.clients[0];
  int more = 1;
  long reached = 0;
  for (long n = 1; n <= MAX_N && more; n++) {
    /* a communicator per N: a receiver that could not map the sender's
     * shared memory sends it to MPI's messages for good (on that
     * communicator) */
    MPI_Comm comm;
    ck_assert_int_eq(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
    ck_assert_int_eq(cubert_mpi_init(comm), CUBERT_OK);
    int reached_n = 0;
    for (int v = 0; v < 3; v++) {
      uint64_t seed = 500 + 3 * (uint64_t)n + (uint64_t)v;
      if (rank == 0) {
        unsigned char *buf = cb_test_pattern(malloc(SIZE), SIZE, seed);
        cubert_handle *h = NULL, *part = NULL;
        ck_assert_int_eq(cubert_handle_create(c, buf, SIZE, &h), CUBERT_OK);
        free(buf);
        if (v_tainted(v)) {
          const cubert_failure *f = NULL;
          ck_assert_int_eq(cubert_failure_create(c, CUBERT_ERR_LAUNCH, "k failed", &f), CUBERT_OK);
          ck_assert_int_eq(cubert_handle_slice(h, C + 10, SIZE - C - 20, &part), CUBERT_OK);
          ck_assert_int_eq(cubert_handle_taint(c, part, f), CUBERT_OK);
          cubert_failure_release(f);
          cubert_handle_release(part);
        }
        cubert_mpi_send(c, h, 1, 5, comm, NULL);
        cubert_handle_release(h);
      } else if (rank == 1) {
        cubert_handle *h = NULL;
        ck_assert_int_eq(cubert_handle_empty(c, SIZE, &h), CUBERT_OK);
        unsigned char fill = OLD;
        ck_assert_int_eq(cubert_handle_fill(c, h, &fill, 1), CUBERT_OK);
        ck_assert_int_eq(cubert_mpi_faults(v_scribbled(v) ? "recv fault=scribble:0.01" : NULL), CUBERT_OK);
        atomic_store(&calls, 0);
        atomic_store(&failed, false);
        atomic_store(&fail_at, n);
        cubert_status st = cubert_mpi_recv(c, h, 0, 5, comm, NULL);
        atomic_store(&fail_at, 0);
        char msg[200];
        snprintf(msg, sizeof msg, "%s", cubert_last_error_message());
        ck_assert_int_eq(cubert_mpi_faults(NULL), CUBERT_OK);
        ck_assert_int_ne(st, CUBERT_OK); /* damaged or tainted bytes in every variant */
        cubert_sync(c);
        /* every block tainted or as sent; or, the call refused before it
         * landed anything, the view unchanged */
        blocks k = classify(c, h, seed);
        ck_assert_msg(k.other == 0 && (k.old == 0 || k.old == (int)(SIZE / 256)),
                      "variant %d, allocation %ld of the receive failed (status %s: %s): of %u blocks of 256 "
                      "bytes, %d tainted, %d as sent, %d as before, %d read good with other bytes (the first at "
                      "%llu)",
                      v, n, cubert_status_name(st), msg, SIZE / 256, k.tainted, k.sent, k.old, k.other,
                      (unsigned long long)k.first_other);
        ck_assert_msg(k.old == 0 || k.old == (int)(SIZE / 256), "variant %d, allocation %ld: %d blocks as before",
                      v, n, k.old);
        ck_assert_msg(k.old == 0 || k.sent == 0, "variant %d, allocation %ld: old and new bytes mixed", v, n);
        if (k.old == (int)(SIZE / 256) && !strstr(msg, "received and dropped")) {
          /* refused before it matched the message (no memory for the
           * request): the message waits for a receive that can take it */
          ck_assert_int_eq(st, CUBERT_ERR_OUT_OF_MEMORY);
          cubert_mpi_recv(c, h, 0, 5, comm, NULL);
        }
        cubert_handle_release(h);
        if (atomic_load(&failed)) reached_n = 1;
      }
    }
    if (rank == 1) {
      more = reached_n;
      if (more) reached = n;
      MPI_Send(&more, 1, MPI_INT, 0, 6, MPI_COMM_WORLD);
    } else if (rank == 0) {
      MPI_Recv(&more, 1, MPI_INT, 1, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    ck_assert_int_eq(cubert_mpi_finalize(comm), CUBERT_OK);
    MPI_Comm_free(&comm);
  }
  if (rank == 1) {
    ck_assert_int_gt(reached, 10); /* the receive allocates; the loop went through them */
    fprintf(stderr, "rank 1: failed each of the receive's first %ld allocations (%llu transfers through shared memory)\n",
            reached, (unsigned long long)cubert_mpi_shared_transfers());
  }
  cb_test_close(&env);
}
END_TEST

/* Every allocation of the receive from the Nth on fails, so that a
 * receive that drops the exchange has no buffer to drop it through either:
 * drain() takes each message through the request's own header buffer,
 * chunks longer than it truncated (MPI_ERR_TRUNCATE, the message still
 * taken), and the failure record after each chunk the sender flagged
 * unread (its send fault partial: chunks 1 and 2). Variant 1 sends a clean
 * view (direct, or through shared memory, where ctest forces them). After
 * each receive: the view is unchanged or every block tainted or as sent,
 * and no message of the exchange is left on cubert's communicator. */
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

START_TEST(test_receive_without_memory_from_n_on_takes_the_whole_exchange) {
  cb_test_env env;
  cubert_runtime_options o;
  cb_test_options("host", &o);
  o.host_devices = 1;
  ck_assert(cb_test_open_with(0, &o, 1, &env));
  cubert_client *c = env.clients[0];
  int more = 1;
  long reached = 0, dropped = 0;
  for (long n = 1; n <= MAX_N && more; n++) {
    MPI_Comm comm;
    ck_assert_int_eq(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
    ck_assert_int_eq(cubert_mpi_init(comm), CUBERT_OK);
    MPI_Comm payload = mpi_payload_comm(comm);
    int reached_n = 0;
    for (int v = 0; v < 2; v++) {
      uint64_t seed = 7000 + 2 * (uint64_t)n + (uint64_t)v;
      if (rank == 0) {
        unsigned char *buf = cb_test_pattern(malloc(SIZE), SIZE, seed);
        cubert_handle *h = NULL, *part = NULL;
        ck_assert_int_eq(cubert_handle_create(c, buf, SIZE, &h), CUBERT_OK);
        free(buf);
        if (v == 0) {
          const cubert_failure *f = NULL;
          ck_assert_int_eq(cubert_failure_create(c, CUBERT_ERR_LAUNCH, "k failed", &f), CUBERT_OK);
          ck_assert_int_eq(cubert_handle_slice(h, 10, SIZE - 20, &part), CUBERT_OK);
          ck_assert_int_eq(cubert_handle_taint(c, part, f), CUBERT_OK);
          cubert_failure_release(f);
          cubert_handle_release(part);
        }
        ck_assert_int_eq(cubert_mpi_faults(v == 0 ? "send fault=partial:0.34" : NULL), CUBERT_OK);
        cubert_mpi_send(c, h, 1, 5, comm, NULL);
        ck_assert_int_eq(cubert_mpi_faults(NULL), CUBERT_OK);
        cubert_handle_release(h);
        int sent = 1, checked = 0;
        MPI_Send(&sent, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
        MPI_Recv(&checked, 1, MPI_INT, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        cubert_handle *h = NULL;
        ck_assert_int_eq(cubert_handle_empty(c, SIZE, &h), CUBERT_OK);
        unsigned char fill = OLD;
        ck_assert_int_eq(cubert_handle_fill(c, h, &fill, 1), CUBERT_OK);
        atomic_store(&calls, 0);
        atomic_store(&failed, false);
        atomic_store(&fail_rest, true);
        atomic_store(&fail_at, n);
        cubert_status st = cubert_mpi_recv(c, h, 0, 5, comm, NULL);
        atomic_store(&fail_at, 0);
        atomic_store(&fail_rest, false);
        char msg[300];
        snprintf(msg, sizeof msg, "%s", cubert_last_error_message());
        if (v == 0) ck_assert_int_ne(st, CUBERT_OK); /* tainted and unread bytes */
        cubert_sync(c);
        blocks k = classify(c, h, seed);
        bool unchanged = k.old == (int)(SIZE / 256);
        ck_assert_msg(k.other == 0 && (k.old == 0 || unchanged),
                      "variant %d, allocations from %ld on failed (status %s: %s): %d tainted, %d as sent, %d as "
                      "before, %d other",
                      v, n, cubert_status_name(st), msg, k.tainted, k.sent, k.old, k.other);
        int sent = 0, checked = 1;
        MPI_Recv(&sent, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        /* the header still waiting: refused before it matched it (no memory
         * for the request), so a receive that can take it takes it (the
         * call's message may be lost: recording it needs memory too) */
        /* (the sender's messages were posted before its `sent` above: 30 ms
         * of probing finds one still there; 0.1 s made the three variants of
         * this test 20-26 s each in CI's mpi stage) */
        int waiting = 0, left = 0, lc = 0;
        for (double t0 = now(); !waiting && now() - t0 < 0.03;) MPI_Iprobe(0, 5, comm, &waiting, MPI_STATUS_IGNORE);
        if (waiting) {
          ck_assert_msg(unchanged, "variant %d, allocations from %ld on failed: the header was not taken, yet the "
                        "view changed", v, n);
          cubert_mpi_recv(c, h, 0, 5, comm, NULL);
        } else if (unchanged) {
          dropped++; /* the exchange was received and dropped */
        }
        MPI_Status ps;
        for (double t0 = now(); !left && now() - t0 < 0.03;) MPI_Iprobe(0, MPI_ANY_TAG, payload, &left, &ps);
        if (left) MPI_Get_count(&ps, MPI_BYTE, &lc);
        ck_assert_msg(!left, "variant %d, allocations from %ld on failed (status %s: %s): a message of %d bytes, tag "
                      "%d, was left unreceived",
                      v, n, cubert_status_name(st), msg, lc, left ? ps.MPI_TAG : 0);
        MPI_Send(&checked, 1, MPI_INT, 0, 8, MPI_COMM_WORLD);
        cubert_handle_release(h);
        if (atomic_load(&failed)) reached_n = 1;
      }
    }
    if (rank == 1) {
      more = reached_n;
      if (more) reached = n;
      MPI_Send(&more, 1, MPI_INT, 0, 6, MPI_COMM_WORLD);
    } else if (rank == 0) {
      MPI_Recv(&more, 1, MPI_INT, 1, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    ck_assert_int_eq(cubert_mpi_finalize(comm), CUBERT_OK);
    MPI_Comm_free(&comm);
  }
  if (rank == 1) {
    ck_assert_int_gt(reached, 3);
    ck_assert_int_gt(dropped, 0); /* some receive dropped the exchange with no buffer to drop it through */
    fprintf(stderr, "rank 1: allocations failing from each of the first %ld on; %ld receives dropped the exchange\n",
            reached, dropped);
  }
  cb_test_close(&env);
}
END_TEST

int main(int argc, char **argv) {
  if (cubert_set_allocator(&counting) != CUBERT_OK) return 1;
  mpi_alloc_set(&counting); /* libcubert_mpi's own allocations too (mpi/alloc.h) */
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  setenv("CK_FORK", "no", 1);
  setenv("CUBERT_MPI_CHUNK", "65536", 1);
  if (cubert_mpi_init(MPI_COMM_WORLD) != CUBERT_OK) {
    fprintf(stderr, "cubert_mpi_init: %s\n", cubert_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int rc = 0;
  if (rank < 2) {
    Suite *s = suite_create("mpi_recv_oom");
    TCase *tc = tcase_create("oom");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_receive_out_of_memory_hands_out_nothing_stale);
    tcase_add_test(tc, test_receive_without_memory_from_n_on_takes_the_whole_exchange);
    suite_add_tcase(s, tc);
    rc = cb_test_run(s);
    if (rc != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  }
  cubert_mpi_finalize(MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
