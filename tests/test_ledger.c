/* tests/test_ledger.c: the taint ledger (runtime/ledger.c) against a model.
 *
 * White-box: drives cb_ledger_set/clear directly with random ranges and
 * compares, after every step, the ledger with a byte-per-byte model of
 * which failure taints each byte (set, not add; clips exact; partial
 * repair). Also checks that the tree stays shallow when ranges arrive in
 * the order that degrades a plain search tree (each one at the front), and
 * that every failure reference is given back. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/internal.h"
#include "tests/testutil.h"

#define SPACE 2048u
#define NFAIL 6

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static cubert_failure *fails[NFAIL];
static cubert_failure *model[SPACE];

static void make_failures(void) {
  for (int i = 0; i < NFAIL; i++) {
    fails[i] = cb_failure_new(CUBERT_ERR_LAUNCH, "test", 0, "host:0", 0, "launch", "k", (uint64_t)i);
    ck_assert_ptr_nonnull(fails[i]);
  }
}

static void drop_failures(void) {
  for (int i = 0; i < NFAIL; i++) {
    ck_assert_uint_eq(atomic_load(&fails[i]->refs), 1); /* the ledger gave all back */
    cubert_failure_release(fails[i]);
  }
}

static size_t depth(const cb_taint *t) {
  if (!t) return 0;
  size_t a = depth(t->left), b = depth(t->right);
  return 1 + (a > b ? a : b);
}

/* The ledger equals the model: ranges sorted, disjoint, non-empty, n right,
 * each byte tainted by the model's failure. */
static void check_model(const cb_ledger *l) {
  cubert_failure *seen[SPACE] = {0};
  size_t n = 0;
  uint64_t prev_end = 0;
  for (const cb_taint *t = cb_ledger_lower(l, 0); t; t = cb_ledger_next(l, t)) {
    ck_assert_uint_lt(t->start, t->end);
    ck_assert_uint_le(prev_end, t->start);
    ck_assert_uint_le(t->end, SPACE);
    for (uint64_t b = t->start; b < t->end; b++) seen[b] = t->failure;
    prev_end = t->end;
    n++;
  }
  ck_assert_uint_eq(n, l->n);
  /* one assertion per check, not per byte: in Check's fork mode every
   * assertion writes to a pipe, and per-byte ones made this test take
   * minutes under ASan (3.6 million writes) */
  unsigned bad = 0;
  while (bad < SPACE && seen[bad] == model[bad]) bad++;
  ck_assert_msg(bad == SPACE, "byte %u: ledger %p, model %p", bad, bad < SPACE ? (void *)seen[bad] : NULL,
                bad < SPACE ? (void *)model[bad] : NULL);
}

/* The failure of the first range overlapping [s, e), through the walk
 * reads use (cb_ledger_report); NULL when the window is clean. */
static cubert_failure *first_in(const cb_ledger *l, uint64_t s, uint64_t e) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_ERR_TAINTED);
  cb_ledger_report(l, s, e, &eb);
  cubert_failure *f = eb.n ? eb.entries[0].failure : NULL;
  cb_errb_discard(&eb); /* the ledger still holds f */
  return f;
}

/* The first failure and report() over a random window match the model. */
static void check_window(const cb_ledger *l) {
  uint64_t s = next_rand() % SPACE, e = s + next_rand() % (SPACE - s + 1);
  cubert_failure *want = NULL;
  for (uint64_t b = s; b < e && !want; b++) want = model[b];
  ck_assert_ptr_eq(first_in(l, s, e), want);
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_ERR_TAINTED);
  size_t found = cb_ledger_report(l, s, e, &eb);
  ck_assert_uint_eq(found, eb.n);
  uint64_t covered = 0;
  for (size_t i = 0; i < eb.n; i++) {
    ck_assert_uint_le(s, eb.entries[i].start);
    ck_assert_uint_le(eb.entries[i].end, e);
    ck_assert_uint_lt(eb.entries[i].start, eb.entries[i].end);
    uint64_t b = eb.entries[i].start;
    while (b < eb.entries[i].end && model[b] == eb.entries[i].failure) b++;
    ck_assert_msg(b == eb.entries[i].end, "byte %llu of a reported range is not the model's failure",
                  (unsigned long long)b);
    covered += eb.entries[i].end - eb.entries[i].start;
  }
  uint64_t tainted = 0;
  for (uint64_t b = s; b < e; b++) tainted += model[b] != NULL;
  ck_assert_uint_eq(covered, tainted);
  cb_errb_discard(&eb);
}

START_TEST(test_ledger_matches_a_byte_model) {
  make_failures();
  memset(model, 0, sizeof model);
  cb_ledger l;
  memset(&l, 0, sizeof l);
  for (int step = 0; step < 1500; step++) {
    uint64_t s = next_rand() % SPACE;
    uint64_t len = next_rand() % 4 == 0 ? next_rand() % SPACE : 1 + next_rand() % 64;
    uint64_t e = s + len > SPACE ? SPACE : s + len;
    if (next_rand() % 3 == 0) {
      cb_ledger_clear(&l, s, e);
      for (uint64_t b = s; b < e; b++) model[b] = NULL;
    } else {
      cubert_failure *f = fails[next_rand() % NFAIL];
      cb_ledger_set(&l, s, e, f);
      for (uint64_t b = s; b < e; b++) model[b] = f;
    }
    check_model(&l);
    check_window(&l);
  }
  cb_ledger_free(&l);
  ck_assert_uint_eq(l.n, 0);
  ck_assert_ptr_null(l.root);
  drop_failures();
}
END_TEST

/* Ranges that each arrive at the front (the order that made the old array
 * shift everything, and that degrades an unbalanced tree to a list) keep
 * the tree logarithmic; repairs at the front too. */
START_TEST(test_ledger_stays_shallow_when_ranges_arrive_at_the_front) {
  make_failures();
  cb_ledger l;
  memset(&l, 0, sizeof l);
  const uint64_t n = 100000;
  for (uint64_t i = n; i-- > 0;) cb_ledger_set(&l, i * 128, i * 128 + 64, fails[i % NFAIL]);
  ck_assert_uint_eq(l.n, n);
  size_t d = depth(l.root);
  ck_assert_msg(d <= 60, "depth %zu for %llu ranges", d, (unsigned long long)n); /* ~2.5 log2 n */
  /* a partial repair in the middle of a range splits it; a repair across
   * many removes them */
  cb_ledger_clear(&l, 16, 32);
  ck_assert_uint_eq(l.n, n + 1);
  ck_assert_ptr_eq(first_in(&l, 16, 32), NULL);
  ck_assert_ptr_eq(first_in(&l, 0, 16), fails[0]);
  ck_assert_ptr_eq(first_in(&l, 32, 33), fails[0]);
  cb_ledger_clear(&l, 0, 128 * 1000);
  ck_assert_uint_eq(l.n, n - 1000);
  ck_assert_uint_eq(cb_ledger_lower(&l, 0)->start, 128 * 1000);
  cb_ledger_free(&l);
  drop_failures();
}
END_TEST

static void *no_malloc(size_t size) {
  (void)size;
  return NULL;
}

/* A set that cannot allocate its nodes taints the whole allocation with its
 * failure, and nothing clears that: too much taint, never too little. */
START_TEST(test_ledger_out_of_memory_taints_everything_and_keeps_it) {
  make_failures();
  cb_ledger l = {0};
  cb_ledger_set(&l, 64, 128, fails[0]);
  cb_allocator_set(&(cubert_allocator){no_malloc, calloc, realloc, free});
  cb_ledger_set(&l, 256, 320, fails[1]);
  cb_allocator_set(NULL);
  ck_assert_uint_eq(l.n, 1);
  ck_assert_ptr_eq(first_in(&l, 0, 1), fails[1]);          /* bytes never written to: tainted too */
  ck_assert_ptr_eq(first_in(&l, 64, 65), fails[1]);
  const cb_taint *t = cb_ledger_lower(&l, 1000);
  ck_assert_ptr_nonnull(t);
  ck_assert_ptr_null(cb_ledger_next(&l, t));
  cb_ledger_clear(&l, 0, UINT64_MAX); /* a write cannot repair what the ledger lost */
  cb_ledger_set(&l, 0, 8, fails[2]);
  ck_assert_ptr_eq(first_in(&l, 0, 8), fails[1]);
  cb_ledger_free(&l);
  drop_failures();
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ledger");
  TCase *tc = tcase_create("ledger");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_ledger_matches_a_byte_model);
  tcase_add_test(tc, test_ledger_stays_shallow_when_ranges_arrive_at_the_front);
  tcase_add_test(tc, test_ledger_out_of_memory_taints_everything_and_keeps_it);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return cb_test_run(suite()); }
