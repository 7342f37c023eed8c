/* tests/mpi/test_mpi_init_env.c: cubert_mpi_init reads this rank's
 * environment ($CUBERT_MPI_GPU_AWARE, $CUBERT_MPI_IPC, $CUBERT_MPI_CHUNK,
 * the send/recv rules of $CUBERT_FAULTS and $CUBERT_MPI_FAULTS). A value
 * that does not parse on one rank fails every rank alike with
 * CUBERT_ERR_PARSE (cubert/mpi.h): the rank that has it names the
 * variable, the others name that rank and what it said; none is left
 * waiting in a collective call. Rules with no host memory to copy them
 * into fail every rank with CUBERT_ERR_OUT_OF_MEMORY. Two ranks; a rank
 * left waiting is ended by the timeout (ctest). Found from outside (the
 * 'outside2' review): a bad $CUBERT_MPI_GPU_AWARE or rule on one rank left
 * the other in MPI_Comm_dup, $CUBERT_MPI_IPC was
 * CUBERT_ERR_INVALID_ARGUMENT and a bad $CUBERT_MPI_CHUNK was taken
 * silently as the default. */
#include <check.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/mpi.h"
#include "mpi/inject.h"
#include "tests/testutil.h"

static int rank;

static void *no_memory(size_t size) {
  (void)size;
  return NULL;
}

/* cubert_mpi_init on a new communicator with `var`=`value` on rank 1 only
 * (NULL: unset); returns this rank's status and, in *other, the other's. */
static cubert_status init_with(const char *var, const char *value, bool starve, cubert_status *other,
                               char *msg, size_t cap) {
  MPI_Comm comm;
  ck_assert_int_eq(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  if (rank == 1 && value) setenv(var, value, 1);
  if (rank == 1 && starve) mpi_inject_set_alloc(no_memory);
  cubert_status st = cubert_mpi_init(comm);
  if (rank == 1 && starve) mpi_inject_set_alloc(NULL);
  if (rank == 1) unsetenv(var);
  snprintf(msg, cap, "%s", st == CUBERT_OK ? "" : cubert_last_error_message());
  int mine = (int)st, all[2] = {0, 0};
  MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, comm);
  *other = (cubert_status)all[1 - rank];
  if (st == CUBERT_OK) ck_assert_int_eq(cubert_mpi_finalize(comm), CUBERT_OK);
  MPI_Comm_free(&comm);
  cubert_mpi_faults(NULL);
  return st;
}

static void bad_on_one_rank(const char *var, const char *value) {
  char msg[512];
  cubert_status other;
  cubert_status st = init_with(var, value, false, &other, msg, sizeof msg);
  ck_assert_msg(st == CUBERT_ERR_PARSE, "rank %d, %s=%s on rank 1: %s: %s", rank, var, value,
                cubert_status_name(st), msg);
  ck_assert_int_eq(other, CUBERT_ERR_PARSE);
  ck_assert_msg(strstr(msg, var) != NULL, "rank %d, %s=%s: the message does not name it: %s", rank, var, value, msg);
  if (rank == 0) ck_assert_msg(strstr(msg, "rank 1") != NULL, "rank 0: the message does not name rank 1: %s", msg);
}

START_TEST(test_a_value_that_does_not_parse_on_one_rank_fails_every_rank) {
  bad_on_one_rank("CUBERT_MPI_GPU_AWARE", "sometimes");
  bad_on_one_rank("CUBERT_MPI_IPC", "maybe");
  bad_on_one_rank("CUBERT_MPI_CHUNK", "lots");
  bad_on_one_rank("CUBERT_MPI_CHUNK", "63");
  bad_on_one_rank("CUBERT_MPI_CHUNK", "2G");
  bad_on_one_rank("CUBERT_MPI_CHUNK", "-1");
  bad_on_one_rank("CUBERT_MPI_CHUNK", "1x");
  bad_on_one_rank("CUBERT_MPI_FAULTS", "send fault=never");
}
END_TEST

START_TEST(test_chunk_sizes_the_docs_name_are_taken) {
  const char *good[] = {"64", "65536", "64k", "1M", "1024M"};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    char msg[512];
    cubert_status other;
    cubert_status st = init_with("CUBERT_MPI_CHUNK", good[i], false, &other, msg, sizeof msg);
    ck_assert_msg(st == CUBERT_OK && other == CUBERT_OK, "CUBERT_MPI_CHUNK=%s: %s: %s", good[i],
                  cubert_status_name(st), msg);
  }
}
END_TEST

START_TEST(test_rules_out_of_memory_on_one_rank_fail_every_rank) {
  char msg[512];
  cubert_status other;
  cubert_status st = init_with("CUBERT_MPI_FAULTS", "send nth=1 fault=fail", true, &other, msg, sizeof msg);
  ck_assert_msg(st == CUBERT_ERR_OUT_OF_MEMORY && other == CUBERT_ERR_OUT_OF_MEMORY, "rank %d: %s, the other %s: %s",
                rank, cubert_status_name(st), cubert_status_name(other), msg);
  if (rank == 1) ck_assert_msg(strstr(msg, "out of host memory") != NULL, "%s", msg);
}
END_TEST

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  setenv("CK_FORK", "no", 1);
  int rc = 0;
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "test_mpi_init_env wants 2 ranks, got %d\n", size);
    MPI_Finalize();
    return 1;
  }
  unsetenv("CUBERT_MPI_GPU_AWARE");
  unsetenv("CUBERT_MPI_IPC");
  unsetenv("CUBERT_MPI_CHUNK");
  unsetenv("CUBERT_MPI_FAULTS");
  unsetenv("CUBERT_FAULTS");
  Suite *s = suite_create("mpi_init_env");
  TCase *tc = tcase_create("env");
  tcase_set_timeout(tc, 50);
  tcase_add_test(tc, test_a_value_that_does_not_parse_on_one_rank_fails_every_rank);
  tcase_add_test(tc, test_chunk_sizes_the_docs_name_are_taken);
  tcase_add_test(tc, test_rules_out_of_memory_on_one_rank_fail_every_rank);
  suite_add_tcase(s, tc);
  rc = cb_test_run(s);
  if (rc != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Finalize();
  return rc;
}
