/* tests/test_xcell.c: the failure cell that processes map (runtime/xcell.h):
 * set/clear range-exact, a bounded table that never drops taint, taint
 * both ways between real processes, and a process killed in the middle of
 * an update while holding the lock (the survivor neither hangs nor reads a
 * torn table, and learns which process died). */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/xcell.h"
#include "tests/testutil.h"

static cb_xcell *shared_cell(uint64_t size) {
  void *m = mmap(NULL, sizeof(cb_xcell), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(m, MAP_FAILED);
  char msg[256] = "";
  ck_assert_msg(cb_xcell_init(m, size, msg, sizeof msg) == CUBERT_OK, "%s", msg);
  ck_assert(cb_xcell_valid(m));
  return m;
}

static void unmap(cb_xcell *c) { munmap(c, sizeof *c); }

/* A record whose first byte says which it is (the cell treats records as
 * opaque bytes). */
static cubert_failure_record rec_of(unsigned char tag) {
  cubert_failure_record r;
  memset(&r, 0, sizeof r);
  r.bytes[0] = tag;
  return r;
}

/* The tag taint byte `b` carries, 0 for none. */
static unsigned char tag_at(cb_xcell *c, uint64_t b) {
  const cubert_failure_record *r = NULL;
  uint64_t s, e;
  if (!cb_xcell_first(c, b, b + 1, &s, &e, &r)) return 0;
  ck_assert_uint_eq(s, b);
  ck_assert_uint_eq(e, b + 1);
  return r->bytes[0];
}

START_TEST(test_cell_sets_and_clears_exact_ranges) {
  cb_xcell *c = shared_cell(1000);
  cubert_failure_record a = rec_of(1), b = rec_of(2);
  ck_assert_int_eq(cb_xcell_lock(c, NULL), CUBERT_OK);
  cb_xcell_set(c, 100, 500, &a);
  cb_xcell_set(c, 200, 300, &b); /* set, never add: splits a */
  cb_xcell_clear(c, 400, 450);   /* a repair in the middle */
  cb_xcell_set(c, 900, 2000, &b); /* clipped to the allocation */
  ck_assert_int_eq(tag_at(c, 99), 0);
  ck_assert_int_eq(tag_at(c, 100), 1);
  ck_assert_int_eq(tag_at(c, 199), 1);
  ck_assert_int_eq(tag_at(c, 200), 2);
  ck_assert_int_eq(tag_at(c, 299), 2);
  ck_assert_int_eq(tag_at(c, 300), 1);
  ck_assert_int_eq(tag_at(c, 399), 1);
  ck_assert_int_eq(tag_at(c, 400), 0);
  ck_assert_int_eq(tag_at(c, 449), 0);
  ck_assert_int_eq(tag_at(c, 450), 1);
  ck_assert_int_eq(tag_at(c, 499), 1);
  ck_assert_int_eq(tag_at(c, 500), 0);
  ck_assert_int_eq(tag_at(c, 999), 2);
  uint64_t s, e;
  ck_assert(!cb_xcell_first(c, 1000, 5000, &s, &e, NULL));
  /* a range over everything replaces everything */
  cb_xcell_set(c, 0, 1000, &a);
  for (uint64_t x = 0; x < 1000; x += 37) ck_assert_int_eq(tag_at(c, x), 1);
  cb_xcell_clear(c, 0, 1000);
  ck_assert(!cb_xcell_first(c, 0, 1000, NULL, NULL, NULL));
  cb_xcell_unlock(c);
  unmap(c);
}
END_TEST

/* More ranges than the table holds: every byte that was set stays tainted. */
START_TEST(test_full_cell_joins_ranges_and_drops_no_taint) {
  cb_xcell *c = shared_cell(1 << 20);
  ck_assert_int_eq(cb_xcell_lock(c, NULL), CUBERT_OK);
  for (int i = 0; i < 3 * CB_XCELL_RANGES; i++) {
    cubert_failure_record r = rec_of((unsigned char)(i + 1));
    cb_xcell_set(c, (uint64_t)i * 1000 + (uint64_t)(i % 7) * 10, (uint64_t)i * 1000 + 100, &r);
  }
  ck_assert_uint_le(c->tables[atomic_load(&c->current)].n, CB_XCELL_RANGES);
  for (int i = 0; i < 3 * CB_XCELL_RANGES; i++)
    for (uint64_t x = (uint64_t)i * 1000 + (uint64_t)(i % 7) * 10; x < (uint64_t)i * 1000 + 100; x += 9)
      ck_assert_msg(tag_at(c, x) != 0, "byte %llu lost its taint", (unsigned long long)x);
  /* the newest range keeps its own record */
  ck_assert_int_eq(tag_at(c, (uint64_t)(3 * CB_XCELL_RANGES - 1) * 1000 + 99), 3 * CB_XCELL_RANGES);
  cb_xcell_unlock(c);
  unmap(c);
}
END_TEST

/* Runs `fn(cell)` in a forked child; returns its wait status. */
static int in_child(cb_xcell *c, void (*fn)(cb_xcell *)) {
  pid_t p = fork();
  ck_assert_int_ge(p, 0);
  if (p == 0) {
    fn(c);
    _exit(0);
  }
  int st = 0;
  ck_assert_int_eq(waitpid(p, &st, 0), p);
  return st;
}

static void child_taints(cb_xcell *c) {
  cubert_failure_record r = rec_of(7);
  if (cb_xcell_lock(c, NULL) != CUBERT_OK) _exit(2);
  cb_xcell_set(c, 64, 128, &r);
  cb_xcell_unlock(c);
}

static void child_checks_repair(cb_xcell *c) {
  if (cb_xcell_lock(c, NULL) != CUBERT_OK) _exit(2);
  bool tainted = cb_xcell_first(c, 0, 200, NULL, NULL, NULL);
  bool other = cb_xcell_first(c, 200, 210, NULL, NULL, NULL);
  cb_xcell_unlock(c);
  _exit(!tainted && other ? 0 : 3); /* parent repaired 64..128 and tainted 200..210 */
}

START_TEST(test_taint_and_repair_cross_processes_both_ways) {
  cb_xcell *c = shared_cell(256);
  int st = in_child(c, child_taints);
  ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  ck_assert_int_eq(cb_xcell_lock(c, NULL), CUBERT_OK);
  ck_assert_int_eq(tag_at(c, 64), 7); /* the child's failure, read here */
  ck_assert_int_eq(tag_at(c, 127), 7);
  ck_assert_int_eq(tag_at(c, 128), 0);
  cb_xcell_clear(c, 64, 128); /* a write here repairs */
  cubert_failure_record r = rec_of(9);
  cb_xcell_set(c, 200, 210, &r);
  cb_xcell_unlock(c);
  st = in_child(c, child_checks_repair);
  ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  unmap(c);
}
END_TEST

/* The child takes the lock, writes garbage over the spare table as an
 * update would half way, and is killed. */
static void child_dies_mid_update(cb_xcell *c) {
  if (cb_xcell_lock(c, NULL) != CUBERT_OK) _exit(2);
  cb_xcell_table *spare = &c->tables[1 - atomic_load(&c->current)];
  memset(spare, 0xA5, sizeof *spare / 2);
  kill(getpid(), SIGKILL);
  _exit(4); /* not reached */
}

START_TEST(test_process_killed_mid_update_leaves_a_whole_cell_and_its_pid) {
  cb_xcell *c = shared_cell(4096);
  cubert_failure_record r = rec_of(5);
  ck_assert_int_eq(cb_xcell_lock(c, NULL), CUBERT_OK);
  cb_xcell_set(c, 0, 16, &r);
  cb_xcell_unlock(c);
  pid_t p = fork();
  ck_assert_int_ge(p, 0);
  if (p == 0) child_dies_mid_update(c);
  int st = 0;
  ck_assert_int_eq(waitpid(p, &st, 0), p);
  ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  int64_t died = 0;
  ck_assert_int_eq(cb_xcell_lock(c, &died), CUBERT_OK); /* no hang */
  ck_assert_int_eq(died, (int64_t)p);
  ck_assert_int_eq(c->lost_pid, (int64_t)p);
  ck_assert(cb_xcell_valid(c));
  ck_assert_int_eq(tag_at(c, 0), 5); /* the table in force is the one before */
  ck_assert_int_eq(tag_at(c, 15), 5);
  ck_assert_int_eq(tag_at(c, 16), 0);
  cubert_failure_record q = rec_of(6);
  cb_xcell_set(c, 8, 32, &q); /* and updates go on */
  ck_assert_int_eq(tag_at(c, 7), 5);
  ck_assert_int_eq(tag_at(c, 8), 6);
  ck_assert_int_eq(tag_at(c, 31), 6);
  cb_xcell_unlock(c);
  /* the next locker sees no new death */
  ck_assert_int_eq(cb_xcell_lock(c, &died), CUBERT_OK);
  ck_assert_int_eq(died, 0);
  cb_xcell_unlock(c);
  unmap(c);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("xcell");
  TCase *tc = tcase_create("cell");
  tcase_add_test(tc, test_cell_sets_and_clears_exact_ranges);
  tcase_add_test(tc, test_full_cell_joins_ranges_and_drops_no_taint);
  tcase_add_test(tc, test_taint_and_repair_cross_processes_both_ways);
  tcase_add_test(tc, test_process_killed_mid_update_leaves_a_whole_cell_and_its_pid);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return cb_test_run(suite()); }
