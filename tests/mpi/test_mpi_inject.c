/* tests/mpi/test_mpi_inject.c: the MPI component's send and receive fault
 * rules (mpi/inject.h) when host memory runs out.
 *
 * The parser copies the rule text (and reads a rule file into memory)
 * through mpi_inject_set_alloc's allocator; a test allocator fails those
 * allocations. Running out of memory is CUBERT_ERR_OUT_OF_MEMORY with a
 * message that says so, never a parse error, and the rules stay as they
 * were. Run under mpiexec with one rank (cubert_mpi_init needs MPI). */
#include <check.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cubert/mpi.h"
#include "mpi/inject.h"
#include "tests/testutil.h"

static int failed_allocs;
static void *no_memory(size_t size) {
  (void)size;
  failed_allocs++;
  return NULL;
}

/* The rules in force fail the first send to any peer (a send rule was set
 * before): whether one fires now. */
static bool send_rule_fires(void) {
  mpi_hit hit;
  return mpi_inject_decide(true, 0, 1, &hit) && hit.fault == MPI_FAULT_FAIL;
}

START_TEST(test_rules_out_of_memory_is_not_a_parse_error) {
  cb_test_ok(cubert_mpi_faults("send every=1 fault=fail"));
  mpi_inject_set_alloc(no_memory);
  failed_allocs = 0;
  cb_test_status(cubert_mpi_faults("recv nth=1 fault=fail"), CUBERT_ERR_OUT_OF_MEMORY);
  mpi_inject_set_alloc(NULL);
  ck_assert_int_gt(failed_allocs, 0);
  ck_assert_msg(strstr(cubert_last_error_message(), "out of host memory") != NULL, "%s", cubert_last_error_message());
  ck_assert(send_rule_fires()); /* the rules are unchanged */
  /* a rule that does not parse is still a parse error */
  cb_test_status(cubert_mpi_faults("send fault=never"), CUBERT_ERR_PARSE);
  ck_assert(send_rule_fires());
  cb_test_ok(cubert_mpi_faults(NULL));
}
END_TEST

START_TEST(test_rule_file_out_of_memory_is_not_a_parse_error) {
  char path[] = "/tmp/cubert-mpi-rules-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  const char *text = "send nth=1 fault=fail\n";
  ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  char env[64];
  snprintf(env, sizeof env, "@%s", path);
  setenv("CUBERT_FAULTS", env, 1);
  char why[256] = "";
  mpi_inject_set_alloc(no_memory);
  cubert_status st = mpi_inject_env(why, sizeof why);
  mpi_inject_set_alloc(NULL);
  ck_assert_int_eq(st, CUBERT_ERR_OUT_OF_MEMORY);
  ck_assert_msg(strstr(why, "out of host memory") != NULL && strstr(why, path) != NULL, "%s", why);
  /* cubert_mpi_init says the same, with the same status */
  MPI_Comm comm;
  ck_assert_int_eq(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  mpi_inject_set_alloc(no_memory);
  st = cubert_mpi_init(comm);
  mpi_inject_set_alloc(NULL);
  ck_assert_int_eq(st, CUBERT_ERR_OUT_OF_MEMORY);
  ck_assert_msg(strstr(cubert_last_error_message(), "out of host memory") != NULL, "%s", cubert_last_error_message());
  /* with memory, the same file is read */
  cb_test_ok(mpi_inject_env(why, sizeof why));
  ck_assert(send_rule_fires());
  unsetenv("CUBERT_FAULTS");
  unlink(path);
  MPI_Comm_free(&comm);
  cb_test_ok(cubert_mpi_faults(NULL));
}
END_TEST

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  setenv("CK_FORK", "no", 1);
  Suite *s = suite_create("mpi_inject");
  TCase *tc = tcase_create("out_of_memory");
  tcase_add_test(tc, test_rules_out_of_memory_is_not_a_parse_error);
  tcase_add_test(tc, test_rule_file_out_of_memory_is_not_a_parse_error);
  suite_add_tcase(s, tc);
  int rc = cb_test_run(s);
  MPI_Finalize();
  return rc;
}
