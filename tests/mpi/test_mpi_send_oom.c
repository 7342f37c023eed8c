/* tests/mpi/test_mpi_send_oom.c: a rank that runs out of host memory
 * leaves no other rank waiting, and hands it nothing stale (docs/cluster.md,
 * "A sender that runs out of host memory"; "Both sides always complete the
 * exchange").
 *
 * Two ranks (more are idle); the host allocations of rank 0's call, both
 * cubert's (cubert_set_allocator) and libcubert_mpi's (mpi_alloc_set), fail
 * at the Nth, for N = 1, 2, ... until the call no longer reaches its Nth:
 * - send: rank 0 sends a view of 3 chunks of 64 KiB with a tainted range;
 *   rank 1 receives it and must get every block tainted or as sent (a
 *   sender that could not stage used to send nothing: the receiver waited
 *   for ever, and ctest's timeout ends the test);
 * - init: rank 1's allocations of cubert_mpi_init on a new communicator;
 *   both ranks must return (its calls are collective) with one status;
 *   again with fault rules in the environment, whose reading allocates
 *   first;
 * - and a rule or setting that does not parse on rank 1 only: both ranks
 *   fail with CUBERT_ERR_PARSE.
 * ctest runs it through MPI's messages and through shared memory (_shared). */
#include <check.h>
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cubert/mpi.h"
#include "mpi/alloc.h"
#include "tests/testutil.h"

#define C 65536u
#define SIZE (3u * C)
#define MAX_N 2000

static int rank;
static atomic_long calls, fail_at;
static atomic_bool failed;

static bool take_turn(void) {
  long n = atomic_fetch_add(&calls, 1) + 1;
  if (n == atomic_load(&fail_at)) {
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

static void arm(long n) {
  atomic_store(&calls, 0);
  atomic_store(&failed, false);
  atomic_store(&fail_at, n);
}

START_TEST(test_send_out_of_memory_leaves_no_receiver_waiting) {
  cb_test_env env;
  cubert_runtime_options o;
  cb_test_options("host", &o);
  o.host_devices = 1;
  ck_assert(cb_test_open_with(0, &o, 1, &env));
  cubert_client *c = env.clients[0];
  int more = 1;
  long reached = 0, refused = 0;
  for (long n = 1; n <= MAX_N && more; n++) {
    uint64_t seed = 900 + (uint64_t)n;
    if (rank == 0) {
      unsigned char *buf = cb_test_pattern(malloc(SIZE), SIZE, seed);
      cubert_handle *h = NULL, *part = NULL;
      ck_assert_int_eq(cubert_handle_create(c, buf, SIZE, &h), CUBERT_OK);
      free(buf);
      const cubert_failure *f = NULL;
      ck_assert_int_eq(cubert_failure_create(c, CUBERT_ERR_LAUNCH, "k failed", &f), CUBERT_OK);
      ck_assert_int_eq(cubert_handle_slice(h, C + 10, SIZE - C - 20, &part), CUBERT_OK);
      ck_assert_int_eq(cubert_handle_taint(c, part, f), CUBERT_OK);
      cubert_failure_release(f);
      cubert_handle_release(part);
      arm(n);
      cubert_status st = cubert_mpi_send(c, h, 1, 5, MPI_COMM_WORLD, NULL);
      atomic_store(&fail_at, 0);
      if (st == CUBERT_ERR_OUT_OF_MEMORY) refused++;
      cubert_handle_release(h);
      more = atomic_load(&failed);
      if (more) reached = n;
      MPI_Send(&more, 1, MPI_INT, 1, 6, MPI_COMM_WORLD);
    } else if (rank == 1) {
      cubert_handle *h = NULL;
      ck_assert_int_eq(cubert_handle_empty(c, SIZE, &h), CUBERT_OK);
      unsigned char fill = 0xee;
      ck_assert_int_eq(cubert_handle_fill(c, h, &fill, 1), CUBERT_OK);
      cubert_status st = cubert_mpi_recv(c, h, 0, 5, MPI_COMM_WORLD, NULL);
      ck_assert_int_ne(st, CUBERT_OK); /* the tainted range at least */
      cubert_sync(c);
      unsigned char *want = cb_test_pattern(malloc(SIZE), SIZE, seed);
      int tainted = 0, sent = 0, other = 0;
      for (uint64_t a = 0; a < SIZE; a += 256) {
        cubert_handle *part = NULL;
        ck_assert_int_eq(cubert_handle_slice(h, a, SIZE - a - 256, &part), CUBERT_OK);
        unsigned char b[256];
        if (cubert_handle_read(c, part, b, 256) != CUBERT_OK) tainted++;
        else if (!memcmp(b, want + a, 256)) sent++;
        else other++;
        cubert_handle_release(part);
      }
      free(want);
      ck_assert_msg(other == 0, "allocation %ld of the send failed: %d blocks tainted, %d as sent, %d other", n,
                    tainted, sent, other);
      cubert_handle_release(h);
      MPI_Recv(&more, 1, MPI_INT, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }
  if (rank == 0) {
    ck_assert_int_gt(reached, 5);
    ck_assert_int_gt(refused, 0); /* some failed allocation made the send fail */
    fprintf(stderr, "rank 0: failed each of the send's first %ld allocations (%ld sends out of memory)\n", reached,
            refused);
  }
  cb_test_close(&env);
}
END_TEST

START_TEST(test_init_out_of_memory_on_one_rank_fails_on_all) {
  int more = 1;
  long reached = 0;
  for (long n = 1; n <= MAX_N && more; n++) {
    MPI_Comm comm;
    ck_assert_int_eq(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &comm), MPI_SUCCESS);
    if (rank == 1) arm(n);
    int st = (int)cubert_mpi_init(comm), all[2] = {0, 0};
    atomic_store(&fail_at, 0);
    MPI_Allgather(&st, 1, MPI_INT, all, 1, MPI_INT, comm);
    ck_assert_msg(all[0] == all[1], "allocation %ld of rank 1's cubert_mpi_init failed: rank 0 %s, rank 1 %s", n,
                  cubert_status_name(all[0]), cubert_status_name(all[1]));
    if (rank == 1) more = atomic_load(&failed);
    MPI_Bcast(&more, 1, MPI_INT, 1, comm);
    if (more) reached = n;
    if (st == CUBERT_OK) ck_assert_int_eq(cubert_mpi_finalize(comm), CUBERT_OK);
    MPI_Comm_free(&comm);
  }
  ck_assert_int_gt(reached, 2);
}
END_TEST

/* cubert_mpi_init with fault rules in the environment (a rule file and
 * $CUBERT_MPI_FAULTS, rules that never fire): rank 1's allocations fail one
 * at a time, those that read the rules first (mpi_inject_env used to
 * return before the collective calls: rank 0 then waited in MPI_Comm_dup
 * for ever); both ranks return with one status, and rank 0's message names
 * rank 1. */
START_TEST(test_init_out_of_memory_reading_fault_rules_fails_on_all) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/cubert_send_oom_rules.%d", (int)getpid());
  FILE *f = fopen(path, "w");
  ck_assert(f != NULL);
  fputs("recv rank=99 fault=fail\n", f);
  fclose(f);
  char faults[80];
  snprintf(faults, sizeof faults, "@%s", path);
  setenv("CUBERT_FAULTS", faults, 1);
  setenv("CUBERT_MPI_FAULTS", "send rank=99 fault=fail", 1);
  int more = 1;
  long reached = 0, in_rules = 0;
  for (long n = 1; n <= MAX_N && more; n++) {
    MPI_Comm comm;
    ck_assert_int_eq(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &comm), MPI_SUCCESS);
    if (rank == 1) arm(n);
    int st = (int)cubert_mpi_init(comm), all[2] = {0, 0};
    atomic_store(&fail_at, 0);
    char msg[400];
    snprintf(msg, sizeof msg, "%s", st == CUBERT_OK ? "" : cubert_last_error_message());
    MPI_Allgather(&st, 1, MPI_INT, all, 1, MPI_INT, comm);
    ck_assert_msg(all[0] == all[1], "allocation %ld of rank 1's cubert_mpi_init failed: rank 0 %s, rank 1 %s", n,
                  cubert_status_name(all[0]), cubert_status_name(all[1]));
    if (st != CUBERT_OK) {
      ck_assert_int_eq(st, CUBERT_ERR_OUT_OF_MEMORY);
      ck_assert_msg(strstr(msg, "out of host memory") != NULL, "allocation %ld: %s", n, msg);
      if (rank == 0 && strstr(msg, "rules")) in_rules++;
      if (rank == 0 && strstr(msg, "rank 1 of the communicator"))
        ck_assert_msg(strstr(msg, "rank 1 of the communicator failed it") != NULL, "%s", msg);
    }
    if (rank == 1) more = atomic_load(&failed);
    MPI_Bcast(&more, 1, MPI_INT, 1, comm);
    if (more) reached = n;
    if (st == CUBERT_OK) ck_assert_int_eq(cubert_mpi_finalize(comm), CUBERT_OK);
    MPI_Comm_free(&comm);
  }
  unsetenv("CUBERT_FAULTS");
  setenv("CUBERT_MPI_FAULTS", "", 1);
  ck_assert_int_eq(cubert_mpi_faults(NULL), CUBERT_OK);
  remove(path);
  ck_assert_int_gt(reached, 3);
  if (rank == 0) ck_assert_int_ge(in_rules, 2); /* the rule file's memory, its copy (and the variable's) */
}
END_TEST

/* A rule or a setting that does not parse on one rank only: cubert_mpi_init
 * fails with CUBERT_ERR_PARSE on both (it used to return on that rank
 * before the collective calls, leaving the other waiting in MPI_Comm_dup),
 * and the other rank's message names the rank and what it said. */
START_TEST(test_init_parse_error_on_one_rank_fails_on_all) {
  static const char *const vars[][2] = {{"CUBERT_MPI_FAULTS", "send fault=melt"},
                                        {"CUBERT_MPI_GPU_AWARE", "sometimes"}};
  for (int v = 0; v < 2; v++) {
    MPI_Comm comm;
    ck_assert_int_eq(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &comm), MPI_SUCCESS);
    const char *old = getenv(vars[v][0]);
    char keep[64] = "";
    if (old) snprintf(keep, sizeof keep, "%s", old);
    if (rank == 1) setenv(vars[v][0], vars[v][1], 1);
    int st = (int)cubert_mpi_init(comm), all[2] = {0, 0};
    char msg[400];
    snprintf(msg, sizeof msg, "%s", st == CUBERT_OK ? "" : cubert_last_error_message());
    if (rank == 1) {
      if (old) setenv(vars[v][0], keep, 1);
      else unsetenv(vars[v][0]);
    }
    MPI_Allgather(&st, 1, MPI_INT, all, 1, MPI_INT, comm);
    if (st == CUBERT_OK) cubert_mpi_finalize(comm);
    MPI_Comm_free(&comm);
    ck_assert_msg(all[0] == CUBERT_ERR_PARSE && all[1] == CUBERT_ERR_PARSE, "%s=%s on rank 1: rank 0 %s, rank 1 %s",
                  vars[v][0], vars[v][1], cubert_status_name(all[0]), cubert_status_name(all[1]));
    if (rank == 0)
      ck_assert_msg(strstr(msg, "rank 1 of the communicator failed it") && strstr(msg, vars[v][0]), "%s", msg);
    else
      ck_assert_msg(strstr(msg, vars[v][0]) && !strstr(msg, "of the communicator failed it"), "%s", msg);
  }
}
END_TEST

int main(int argc, char **argv) {
  if (cubert_set_allocator(&counting) != CUBERT_OK) return 1;
  mpi_alloc_set(&counting);
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
    Suite *s = suite_create("mpi_send_oom");
    TCase *tc = tcase_create("oom");
    tcase_set_timeout(tc, 50);
    tcase_add_test(tc, test_send_out_of_memory_leaves_no_receiver_waiting);
    tcase_add_test(tc, test_init_out_of_memory_on_one_rank_fails_on_all);
    tcase_add_test(tc, test_init_out_of_memory_reading_fault_rules_fails_on_all);
    tcase_add_test(tc, test_init_parse_error_on_one_rank_fails_on_all);
    suite_add_tcase(s, tc);
    rc = cb_test_run(s);
    if (rc != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  }
  cubert_mpi_finalize(MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
