/* tests/test_faultinj_rules.c: the fault rule language and the injector's
 * decisions, without any backend: every trigger and filter fires on exactly
 * the calls it names, errors point at the line and column, a seed replays the
 * same decisions and another seed does not, and the log, counters, summary
 * and CUBERT_FAULTS configuration behave as cubert/faultinj.h says. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cubert/faultinj.h"
#include "faultinj/injector.h"
#include "faultinj/rules.h"
#include "runtime/internal.h"
#include "tests/testutil.h"

/* ------------------------------------------------------------ helpers */

/* Each test gets a fresh runtime: its fault state is the one under test. */
static cubert_runtime *rt;
static cb_fi_state *fi;

static void teardown(void) {
  cubert_runtime_destroy(rt);
  rt = NULL;
  fi = NULL;
}

static void setup(void) {
  teardown();
  cubert_runtime_options o;
  cb_test_options("host", &o);
  o.host_devices = 1;
  ck_assert_msg(cubert_runtime_create(&o, &rt) == CUBERT_OK, "%s", cubert_last_error_message());
  fi = rt->faultinj;
  ck_assert_ptr_nonnull(fi);
}

static uint32_t add(const char *text) {
  cubert_faultinj_diag diag;
  uint32_t first = 0;
  cubert_status st = cubert_faultinj_add(rt, text, "test", &first, &diag);
  ck_assert_msg(st == CUBERT_OK, "rules `%s` refused: %s", text, diag.message);
  return first;
}

static cb_fi_call call_of(uint32_t op, int device, uint64_t stream, const char *kernel) {
  cb_fi_call c = {op, op, device, stream, 0, kernel, NULL, 0, 0};
  return c;
}

/* Runs `n` copies of `call`, returns which ones (1-based) were injected as
 * "3,6,9". */
static const char *fired(cb_fi_call call, int n) {
  static char out[4096];
  out[0] = '\0';
  size_t len = 0;
  for (int i = 1; i <= n; i++) {
    call.work = (uint64_t)i;
    cb_fi_hit hit;
    if (cb_fi_decide(fi, &call, &hit))
      len += (size_t)snprintf(out + len, sizeof out - len, "%s%d", len ? "," : "", i);
  }
  return out;
}

static bool selects(const char *rule, cb_fi_call call) {
  setup();
  add(rule);
  cb_fi_hit hit;
  return cb_fi_decide(fi, &call, &hit);
}

/* ------------------------------------------------------------ triggers */

START_TEST(test_trigger_nth_fires_once_on_the_nth_call) {
  add("launch nth=3");
  ck_assert_str_eq(fired(call_of(CB_FI_OP_LAUNCH, 0, 1, "k"), 10), "3");
}
END_TEST

START_TEST(test_trigger_every_fires_on_multiples) {
  add("launch every=4");
  ck_assert_str_eq(fired(call_of(CB_FI_OP_LAUNCH, 0, 1, "k"), 13), "4,8,12");
}
END_TEST

START_TEST(test_trigger_first_fires_on_the_first_n) {
  add("copy first=2");
  ck_assert_str_eq(fired(call_of(CB_FI_OP_COPY, 0, 1, NULL), 6), "1,2");
}
END_TEST

START_TEST(test_trigger_after_fires_after_n) {
  add("write after=7");
  ck_assert_str_eq(fired(call_of(CB_FI_OP_WRITE, 0, 1, NULL), 10), "8,9,10");
}
END_TEST

START_TEST(test_trigger_none_fires_always_and_times_caps) {
  add("fill");
  ck_assert_str_eq(fired(call_of(CB_FI_OP_FILL, 0, 1, NULL), 3), "1,2,3");
  setup();
  add("fill times=2");
  ck_assert_str_eq(fired(call_of(CB_FI_OP_FILL, 0, 1, NULL), 5), "1,2");
}
END_TEST

START_TEST(test_triggers_combine_as_and) {
  add("launch after=2 every=3 times=2");
  ck_assert_str_eq(fired(call_of(CB_FI_OP_LAUNCH, 0, 1, "k"), 20), "3,6");
  setup();
  add("launch first=10 every=5");
  ck_assert_str_eq(fired(call_of(CB_FI_OP_LAUNCH, 0, 1, "k"), 20), "5,10");
}
END_TEST

START_TEST(test_trigger_counts_only_matching_calls) {
  add("launch kernel=k1 nth=2");
  cb_fi_call k1 = call_of(CB_FI_OP_LAUNCH, 0, 1, "k1"), k2 = call_of(CB_FI_OP_LAUNCH, 0, 1, "k2");
  cb_fi_hit hit;
  ck_assert(!cb_fi_decide(fi, &k1, &hit));
  ck_assert(!cb_fi_decide(fi, &k2, &hit));
  ck_assert(!cb_fi_decide(fi, &k2, &hit));
  ck_assert(cb_fi_decide(fi, &k1, &hit)); /* the second k1, not the fourth launch */
  ck_assert_uint_eq(hit.match, 2);
}
END_TEST

static char *prob_sequence(const char *rules, bool set_seed, uint64_t seed, int n) {
  setup();
  if (set_seed) cubert_faultinj_set_seed(rt, seed);
  add(rules);
  return strdup(fired(call_of(CB_FI_OP_LAUNCH, 0, 1, "k"), n));
}

START_TEST(test_prob_same_seed_replays_other_seed_differs) {
  char *a = prob_sequence("launch prob=0.3", true, 42, 300);
  char *b = prob_sequence("launch prob=0.3", true, 42, 300);
  char *c = prob_sequence("launch prob=0.3", true, 43, 300);
  char *d = prob_sequence("seed=42; launch prob=0.3", false, 0, 300);
  ck_assert_str_eq(a, b);
  ck_assert_str_ne(a, c);
  ck_assert_str_eq(a, d); /* a seed statement is the same as set_seed */
  /* About 90 of 300: a broken draw (always, never) is far outside. */
  int hits = 1;
  for (const char *p = a; *p; p++) hits += *p == ',';
  ck_assert_int_gt(hits, 50);
  ck_assert_int_lt(hits, 130);
  free(a), free(b), free(c), free(d);
}
END_TEST

START_TEST(test_prob_rule_seed_ignores_process_seed) {
  char *a = prob_sequence("launch prob=0.5 seed=7", true, 1, 200);
  char *b = prob_sequence("launch prob=0.5 seed=7", true, 999, 200);
  char *c = prob_sequence("launch prob=0.5 seed=8", true, 1, 200);
  ck_assert_str_eq(a, b);
  ck_assert_str_ne(a, c);
  free(a), free(b), free(c);
}
END_TEST

START_TEST(test_prob_edges_and_reseed_restarts) {
  char *none = prob_sequence("launch prob=0", true, 5, 50);
  ck_assert_str_eq(none, "");
  free(none);
  char *all = prob_sequence("launch prob=1", true, 5, 5);
  ck_assert_str_eq(all, "1,2,3,4,5");
  free(all);
  /* set_seed after the rule: its stream restarts from the new seed. */
  char *fresh = prob_sequence("launch prob=0.4", true, 77, 100);
  setup();
  add("launch prob=0.4");
  (void)fired(call_of(CB_FI_OP_LAUNCH, 0, 1, "k"), 37);
  cubert_faultinj_set_seed(rt, 77);
  char *again = strdup(fired(call_of(CB_FI_OP_LAUNCH, 0, 1, "k"), 100));
  ck_assert_str_eq(fresh, again);
  free(fresh), free(again);
}
END_TEST

START_TEST(test_prob_streams_are_per_rule) {
  /* Rule 1's draws do not shift when rule 2 also matches and draws. */
  char *alone = prob_sequence("launch prob=0.3", true, 9, 200);
  char *with = prob_sequence("launch prob=0.3; launch prob=0.6 fault=scribble", true, 9, 200);
  setup();
  cubert_faultinj_set_seed(rt, 9);
  add("launch prob=0.3; launch prob=0.6 fault=scribble");
  char rule1[4096] = "";
  size_t len = 0;
  cb_fi_call c = call_of(CB_FI_OP_LAUNCH, 0, 1, "k");
  for (int i = 1; i <= 200; i++) {
    cb_fi_hit hit;
    if (cb_fi_decide(fi, &c, &hit) && hit.rule == 1)
      len += (size_t)snprintf(rule1 + len, sizeof rule1 - len, "%s%d", len ? "," : "", i);
  }
  ck_assert_str_eq(alone, rule1);
  ck_assert_str_ne(alone, with); /* rule 2 fired on calls rule 1 left alone */
  free(alone), free(with);
}
END_TEST

/* ------------------------------------------------------------ filters */

START_TEST(test_filter_operations) {
  ck_assert(selects("launch|copy", call_of(CB_FI_OP_LAUNCH, 0, 1, "k")));
  ck_assert(selects("launch|copy", call_of(CB_FI_OP_COPY, 0, 1, NULL)));
  ck_assert(!selects("launch|copy", call_of(CB_FI_OP_WRITE, 0, 1, NULL)));
  ck_assert(selects("launch,copy", call_of(CB_FI_OP_COPY, 0, 1, NULL)));
  ck_assert(selects("work", call_of(CB_FI_OP_FILL, 0, 1, NULL)));
  ck_assert(selects("work", call_of(CB_FI_OP_COPY_PEER, 0, 1, NULL)));
  ck_assert(!selects("work", call_of(CB_FI_OP_READ, 0, 1, NULL)));
  ck_assert(!selects("work", call_of(CB_FI_OP_ALLOC, 0, 0, NULL)));
  ck_assert(selects("*", call_of(CB_FI_OP_LINK_INFO, 0, 0, NULL)));
  ck_assert(selects("any", call_of(CB_FI_OP_STREAM_WAIT, 0, 1, NULL)));
  ck_assert(selects("copy-peer", call_of(CB_FI_OP_COPY_PEER, 0, 1, NULL))); /* - and _ alike */
  ck_assert(selects("ALLOC", call_of(CB_FI_OP_ALLOC, 0, 0, NULL)));

  /* peer_write: copy_peer, and launches that write a peer buffer. */
  cb_fi_call plain = call_of(CB_FI_OP_LAUNCH, 0, 1, "k");
  cb_fi_call peer = plain;
  peer.ops |= CB_FI_OP_PEER_WRITE;
  cb_fi_call cp = call_of(CB_FI_OP_COPY_PEER, 0, 1, NULL);
  cp.ops |= CB_FI_OP_PEER_WRITE;
  ck_assert(!selects("peer_write", plain));
  ck_assert(selects("peer_write", peer));
  ck_assert(selects("peer_write", cp));
  ck_assert(selects("launch", peer));
}
END_TEST

START_TEST(test_filter_kernel_exact_prefix_list_quoted) {
  ck_assert(selects("launch kernel=k1", call_of(CB_FI_OP_LAUNCH, 0, 1, "k1")));
  ck_assert(!selects("launch kernel=k1", call_of(CB_FI_OP_LAUNCH, 0, 1, "k10")));
  ck_assert(selects("launch kernel=k1*", call_of(CB_FI_OP_LAUNCH, 0, 1, "k10")));
  ck_assert(selects("launch kernel=k1*", call_of(CB_FI_OP_LAUNCH, 0, 1, "k1")));
  ck_assert(!selects("launch kernel=k1*", call_of(CB_FI_OP_LAUNCH, 0, 1, "xk1")));
  ck_assert(selects("launch kernel=a,b", call_of(CB_FI_OP_LAUNCH, 0, 1, "b")));
  ck_assert(!selects("launch kernel=a,b", call_of(CB_FI_OP_LAUNCH, 0, 1, "c")));
  ck_assert(selects("launch kernel=\"a,b c\"", call_of(CB_FI_OP_LAUNCH, 0, 1, "a,b c")));
  ck_assert(!selects("launch kernel=\"a,b\"", call_of(CB_FI_OP_LAUNCH, 0, 1, "a")));
  ck_assert(selects("compile kernel=sum*", call_of(CB_FI_OP_COMPILE, 0, 0, "sum_f32")));
  ck_assert(!selects("launch|copy kernel=k", call_of(CB_FI_OP_COPY, 0, 1, NULL)));
}
END_TEST

START_TEST(test_filter_device_stream_peer) {
  ck_assert(selects("launch device=1,3-4", call_of(CB_FI_OP_LAUNCH, 3, 1, "k")));
  ck_assert(selects("launch device=1,3-4", call_of(CB_FI_OP_LAUNCH, 1, 1, "k")));
  ck_assert(!selects("launch device=1,3-4", call_of(CB_FI_OP_LAUNCH, 2, 1, "k")));
  ck_assert(!selects("launch device=1,3-4", call_of(CB_FI_OP_LAUNCH, 5, 1, "k")));
  ck_assert(selects("write stream=2", call_of(CB_FI_OP_WRITE, 0, 2, NULL)));
  ck_assert(!selects("write stream=2", call_of(CB_FI_OP_WRITE, 0, 1, NULL)));
  ck_assert(!selects("sync stream=1", call_of(CB_FI_OP_SYNC, 0, 0, NULL))); /* whole-device sync: no stream */

  int peers[] = {4, 2};
  cb_fi_call cp = call_of(CB_FI_OP_COPY_PEER, 0, 1, NULL);
  cp.peers = peers;
  cp.npeers = 2;
  ck_assert(selects("copy_peer peer=2", cp));
  ck_assert(!selects("copy_peer peer=3", cp));
  ck_assert(!selects("copy_peer peer=0", call_of(CB_FI_OP_COPY_PEER, 0, 1, NULL)));
}
END_TEST

/* rank= selects the process: the rank cubert_set_rank() gave it, 0 when
 * none was given. */
START_TEST(test_filter_rank) {
  cb_fi_call c = call_of(CB_FI_OP_WRITE, 0, 1, NULL);
  c.rank = 3;
  ck_assert(selects("write rank=1,3-4", c));
  ck_assert(!selects("write rank=0-2", c));
  c.rank = 0;
  ck_assert(selects("write rank=0", c));
  ck_assert(!selects("write rank=1", c));
  /* through a backend: the decorator asks the process's rank at each call */
  setup();
  add("write rank=2 fault=fail");
  cubert_client *cl = NULL;
  cubert_handle *h = NULL;
  unsigned char b[16] = {1};
  ck_assert_int_eq(cubert_client_create(rt, 0, &cl), CUBERT_OK);
  ck_assert_int_eq(cubert_handle_empty(cl, sizeof b, &h), CUBERT_OK);
  ck_assert_int_eq(cubert_handle_write(cl, h, b, sizeof b), CUBERT_OK); /* no rank: 0 */
  cubert_set_rank(1);
  ck_assert_int_eq(cubert_handle_write(cl, h, b, sizeof b), CUBERT_OK);
  cubert_set_rank(2);
  ck_assert_int_ne(cubert_handle_write(cl, h, b, sizeof b), CUBERT_OK);
  ck_assert_uint_eq(cubert_faultinj_injected(rt), 1);
  cubert_set_rank(-1);
  cubert_faultinj_clear(rt);
  add("write rank=0 fault=fail");
  ck_assert_int_ne(cubert_handle_write(cl, h, b, sizeof b), CUBERT_OK); /* none counts as rank 0 */
  cubert_handle_release(h);
  cubert_client_destroy(cl);
}
END_TEST

/* send and recv rules are the MPI component's: the runtime's parser skips
 * them (whatever they hold) and counts them; mixed with its own operations
 * they are an error that says whose they are. */
START_TEST(test_mpi_rules_are_skipped) {
  cb_fi_parsed p;
  cubert_faultinj_diag diag;
  const char *text = "send rank=1 peer=0 fault=scribble:0.5; launch nth=2\nrecv|send fault=fail # mpi\n"
                     "RECV whatever=the mpi grammar says; write rank=0-1 fault=fail";
  ck_assert_int_eq(cb_fi_parse(text, strlen(text), "t", &p, &diag), CUBERT_OK);
  ck_assert_uint_eq(p.count, 2);
  ck_assert_uint_eq(p.mpi_rules, 3);
  ck_assert_uint_eq(p.rules[0].ops, CB_FI_OP_LAUNCH);
  ck_assert_uint_eq(p.rules[1].nranks, 1);
  ck_assert(p.rules[1].ranks[0].lo == 0 && p.rules[1].ranks[0].hi == 1);
  cb_fi_parsed_free(&p);
  const char *mixed = "launch|send fault=fail";
  ck_assert_int_eq(cb_fi_parse(mixed, strlen(mixed), "t", &p, &diag), CUBERT_ERR_PARSE);
  ck_assert_msg(strstr(diag.message, "MPI component") != NULL, "%s", diag.message);
  ck_assert_int_eq(diag.column, 8);
  const char *badrank = "write rank=x";
  ck_assert_int_eq(cb_fi_parse(badrank, strlen(badrank), "t", &p, &diag), CUBERT_ERR_PARSE);
  /* a runtime configured with them adds only its own */
  setup();
  ck_assert_int_eq(cubert_faultinj_configure(rt, "send fault=fail; recv fault=partial:0.5", &diag), CUBERT_OK);
  cubert_faultinj_stats s;
  cubert_faultinj_get_stats(rt, &s);
  ck_assert_uint_eq(s.rules, 0);
}
END_TEST

static const char *classify(void *ctx, int a, int b) {
  (*(int *)ctx)++;
  if ((a == 0 && b == 1) || (a == 1 && b == 0)) return "XGMI";
  if (a == 0 && b == 2) return "pix"; /* any case */
  return NULL;
}

START_TEST(test_filter_pair_class_through_the_classifier) {
  int p1 = 1, p2 = 2, p3 = 3;
  cb_fi_call c1 = call_of(CB_FI_OP_COPY_PEER, 0, 1, NULL), c2 = c1, c3 = c1;
  c1.peers = &p1, c1.npeers = 1;
  c2.peers = &p2, c2.npeers = 1;
  c3.peers = &p3, c3.npeers = 1;
  /* No classifier: a pair filter never matches. */
  ck_assert(!selects("copy_peer pair=XGMI", c1));
  int calls = 0;
  setup();
  cubert_faultinj_set_pair_classifier(rt, classify, &calls);
  add("copy_peer pair=xgmi");
  cb_fi_hit hit;
  ck_assert(cb_fi_decide(fi, &c1, &hit));
  ck_assert(!cb_fi_decide(fi, &c2, &hit));
  ck_assert(!cb_fi_decide(fi, &c3, &hit)); /* unknown class */
  ck_assert_int_eq(calls, 3);
  cubert_faultinj_clear(rt);
  add("copy_peer pair=PIX,SYS");
  ck_assert(cb_fi_decide(fi, &c2, &hit));
  ck_assert(!cb_fi_decide(fi, &c1, &hit));
  cubert_faultinj_set_pair_classifier(rt, NULL, NULL);
}
END_TEST

/* ------------------------------------------------------------ errors */

typedef struct bad_case {
  const char *text;
  int line, column;
  const char *says;
} bad_case;

static const bad_case bad[] = {
    {"launch nht=3", 1, 8, "unknown field `nht`"},
    {"lunch nth=3", 1, 1, "unknown operation `lunch`"},
    {"launch nth=0", 1, 12, "at least 1"},
    {"launch\ncopy every=x", 2, 12, "expected a number"},
    {"# comment\n\nalloc fault=partial", 3, 7, "does not apply to alloc"},
    {"copy kernel=k1", 1, 6, "kernel= needs"},
    {"launch prob=1.5", 1, 13, "outside"},
    {"launch prob=abc", 1, 13, "not a number"},
    {"launch nth=3 nth=4", 1, 14, "given twice"},
    {"launch fault=scribble:0", 1, 23, "above 0"},
    {"copy fault=partial:2", 1, 20, "outside"},
    {"launch fault=oom", 1, 8, "does not apply to launch"},
    {"launch fault=fail:0.5", 1, 19, "takes no fraction"},
    {"launch fault=explode", 1, 14, "unknown fault"},
    {"launch pair=FOO", 1, 13, "unknown class `FOO`"},
    {"launch kernel=\"abc", 1, 15, "unterminated"},
    {"launch nth=3 foo", 1, 14, "unknown field `foo`"},
    {"launch nth 3", 1, 12, "expected `=`"},
    {"launch copy", 1, 8, "joined with `|`"},
    {"alloc fault=oom status=ERR_LAUNCH", 1, 17, "cannot change"},
    {"launch status=OK", 1, 15, "not an error status"},
    {"launch device=3-1", 1, 15, "runs backwards"},
    {"launch device=1,,2", 1, 17, "empty item"},
    {"launch stream=0", 1, 15, "outside"},
    {"seed=abc", 1, 6, "expected a number"},
    {"launch kernel=a*b", 1, 16, "may only end"},
    {"launch seed=3", 1, 8, "without prob="},
    {"alloc stream=1", 1, 7, "stream= needs"},
    {"alloc pair=XGMI", 1, 7, "pair= needs"},
    {"launch nth=99999999999999999999", 1, 12, "too large"},
    {"launch | ", 1, 10, "expected an operation after `|`"},
    {"launch nth=\x01", 1, 12, "byte 0x01"},
    {"  launch nth=1 ; copy nht=1", 1, 23, "unknown field"},
    {"launch device=1,2,3,4,5,6,7,8,9", 1, 31, "at most 8"},
};

START_TEST(test_errors_name_source_line_and_column) {
  const bad_case *b = &bad[_i];
  cb_fi_parsed p;
  cubert_faultinj_diag diag;
  cubert_status st = cb_fi_parse(b->text, strlen(b->text), "CUBERT_FAULTS", &p, &diag);
  ck_assert_msg(st == CUBERT_ERR_PARSE, "`%s` parsed", b->text);
  ck_assert_msg(diag.line == b->line && diag.column == b->column, "`%s`: %s (wanted %d:%d)", b->text,
                diag.message, b->line, b->column);
  ck_assert_msg(strstr(diag.message, b->says), "`%s`: %s (wanted \"%s\")", b->text, diag.message, b->says);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "CUBERT_FAULTS:%d:%d: ", b->line, b->column);
  ck_assert_msg(strncmp(diag.message, prefix, strlen(prefix)) == 0, "%s", diag.message);
  ck_assert_str_eq(diag.source, "CUBERT_FAULTS");
  ck_assert(p.rules == NULL && p.count == 0);
}
END_TEST

START_TEST(test_error_adds_nothing) {
  cubert_faultinj_diag diag;
  ck_assert_int_eq(cubert_faultinj_add(rt, "launch nth=1\ncopy bogus=1", NULL, NULL, &diag), CUBERT_ERR_PARSE);
  ck_assert_str_eq(diag.source, "api");
  ck_assert_int_eq(diag.line, 2);
  cubert_faultinj_stats s;
  cubert_faultinj_get_stats(rt, &s);
  ck_assert_uint_eq(s.rules, 0);
  ck_assert_int_eq(cubert_faultinj_add(rt, NULL, NULL, NULL, &diag), CUBERT_ERR_INVALID_ARGUMENT);
}
END_TEST

static char *temp_file(const char *text) {
  char *path = strdup("/tmp/cubert_faultinj_XXXXXX");
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  return path;
}

START_TEST(test_file_errors_name_the_file) {
  char *path = temp_file("# a scenario\nseed=3\n\nlaunch kernel=k nth=2 fault=wrong\n");
  cubert_faultinj_diag diag;
  ck_assert_int_eq(cubert_faultinj_load(rt, path, NULL, &diag), CUBERT_ERR_PARSE);
  ck_assert_str_eq(diag.source, path);
  ck_assert_int_eq(diag.line, 4);
  ck_assert_int_eq(diag.column, 29);
  char prefix[128];
  snprintf(prefix, sizeof prefix, "%s:4:29: ", path);
  ck_assert_msg(strncmp(diag.message, prefix, strlen(prefix)) == 0, "%s", diag.message);
  unlink(path);
  free(path);

  ck_assert_int_eq(cubert_faultinj_load(rt, "/nonexistent/rules", NULL, &diag), CUBERT_ERR_IO);
  ck_assert_int_eq(diag.line, 0);
  ck_assert_ptr_nonnull(strstr(diag.message, "/nonexistent/rules"));

  path = temp_file("seed=11\nlaunch prob=0.5   # half of them\r\ncopy_peer every=2 fault=partial:0.25\n");
  uint32_t first = 0;
  ck_assert_int_eq(cubert_faultinj_load(rt, path, &first, &diag), CUBERT_OK);
  ck_assert_uint_eq(first, 1);
  ck_assert_uint_eq(cubert_faultinj_seed(rt), 11);
  cubert_faultinj_stats s;
  cubert_faultinj_get_stats(rt, &s);
  ck_assert_uint_eq(s.rules, 2);
  unlink(path);
  free(path);
}
END_TEST

/* ------------------------------------------------------------ syntax */

START_TEST(test_parse_fields_and_defaults) {
  cb_fi_parsed p;
  cubert_faultinj_diag diag;
  const char *text = "launch kernel=k1 nth=3 fault=fail-before-write; copy every=10 fault=partial:0.5 device=1;"
                     " alloc prob=0.01 seed=7 fault=oom\n"
                     "peer_write peer = 2-3 pair=XGMI,NVLINK stream=1,4 first=2 after=1 times=1 "
                     "fault=async-scribble:0.125 status=cubert_err_backend";
  ck_assert_int_eq(cb_fi_parse(text, strlen(text), "t", &p, &diag), CUBERT_OK);
  ck_assert_uint_eq(p.count, 4);
  const cb_fi_rule *r = p.rules;
  ck_assert_uint_eq(r[0].ops, CB_FI_OP_LAUNCH);
  ck_assert_str_eq(r[0].kernels[0], "k1");
  ck_assert_uint_eq(r[0].nth, 3);
  ck_assert_int_eq(r[0].fault, CUBERT_FAULT_FAIL);
  ck_assert_int_eq(r[1].fault, CUBERT_FAULT_PARTIAL);
  ck_assert(r[1].fraction == 0.5);
  ck_assert_uint_eq(r[1].every, 10);
  ck_assert(r[1].ndevices == 1 && r[1].devices[0].lo == 1 && r[1].devices[0].hi == 1);
  ck_assert(r[2].has_prob && r[2].prob > 0.00999 && r[2].prob < 0.01001);
  ck_assert(r[2].has_seed && r[2].seed == 7);
  ck_assert_int_eq(r[2].fault, CUBERT_FAULT_OOM);
  ck_assert_uint_eq(r[3].ops, CB_FI_OP_PEER_WRITE);
  ck_assert(r[3].npeers == 1 && r[3].peers[0].lo == 2 && r[3].peers[0].hi == 3);
  ck_assert(r[3].npairs == 2 && !strcmp(r[3].pairs[1], "NVLINK"));
  ck_assert(r[3].nstreams == 2 && r[3].streams[1].lo == 4);
  ck_assert(r[3].first == 2 && r[3].has_after && r[3].after == 1 && r[3].times == 1);
  ck_assert(r[3].fault == CUBERT_FAULT_ASYNC_SCRIBBLE && r[3].fraction == 0.125);
  ck_assert_int_eq(r[3].status, CUBERT_ERR_BACKEND);
  cb_fi_parsed_free(&p);

  /* Empty text, blank lines, comments only: no rule, no error. */
  ck_assert_int_eq(cb_fi_parse(" ;; \n# x\n\t\n", 11, "t", &p, &diag), CUBERT_OK);
  ck_assert_uint_eq(p.count, 0);
  ck_assert_int_eq(cb_fi_parse("", 0, "t", &p, &diag), CUBERT_OK);
  ck_assert_uint_eq(p.count, 0);
  /* The number's own syntax, not the locale's: exponents and bare fractions. */
  ck_assert_int_eq(cb_fi_parse("launch prob=5e-2", 16, "t", &p, &diag), CUBERT_OK);
  ck_assert(p.rules[0].prob > 0.0499 && p.rules[0].prob < 0.0501);
  cb_fi_parsed_free(&p);
  ck_assert_int_eq(cb_fi_parse("launch prob=.25", 15, "t", &p, &diag), CUBERT_OK);
  ck_assert(p.rules[0].prob == 0.25);
  cb_fi_parsed_free(&p);
}
END_TEST

START_TEST(test_canonical_text_round_trips) {
  static const char *const texts[] = {
      "launch kernel=k1 nth=3 fault=fail-before-write",
      "copy every=10 fault=partial:0.5 device=1",
      "alloc prob=0.01 seed=7 fault=oom",
      ("launch|copy_peer kernel=\"we,ird \\\"name\\\"\" device=0-3,7 peer=1 pair=pix stream=2 first=4 after=1 "
       "prob=1e-3 times=9 fault=scribble:0.75 status=ERR_IO"),
      "* fault=device-lost after=100",
      "write|fill rank=1,3-5 nth=2 fault=fail",
      "work fault=async",
      "compile kernel=a*,b fault=compile-error",
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    cb_fi_parsed p, q;
    cubert_faultinj_diag diag;
    ck_assert_msg(cb_fi_parse(texts[i], strlen(texts[i]), "t", &p, &diag) == CUBERT_OK, "%s", diag.message);
    char one[2048], two[2048];
    cb_fi_rule_format(&p.rules[0], one, sizeof one);
    ck_assert_msg(cb_fi_parse(one, strlen(one), "t", &q, &diag) == CUBERT_OK, "%s: %s", one, diag.message);
    cb_fi_rule_format(&q.rules[0], two, sizeof two);
    ck_assert_str_eq(one, two);
    ck_assert(memcmp(p.rules[0].kernels, q.rules[0].kernels, sizeof p.rules[0].kernels) == 0);
    ck_assert_uint_eq(p.rules[0].ops, q.rules[0].ops);
    cb_fi_parsed_free(&p);
    cb_fi_parsed_free(&q);
  }
  uint32_t id = add("copy every=10 fault=partial:0.5 device=1");
  char text[256];
  uint64_t matched = 1, injected = 1;
  ck_assert_int_eq(cubert_faultinj_rule_describe(rt, id, text, sizeof text, &matched, &injected), CUBERT_OK);
  ck_assert_str_eq(text, "copy device=1 every=10 fault=partial:0.5");
  ck_assert_uint_eq(matched, 0);
  ck_assert_uint_eq(injected, 0);
  ck_assert_int_eq(cubert_faultinj_rule_describe(rt, id + 1, text, sizeof text, NULL, NULL), CUBERT_ERR_INVALID_ARGUMENT);
}
END_TEST

/* ------------------------------------------------------------ rule set, log, counters */

START_TEST(test_first_rule_wins_others_still_count) {
  uint32_t a = add("launch every=2 fault=scribble");
  uint32_t b = add("launch nth=2 fault=device-lost");
  ck_assert_uint_eq(b, a + 1);
  cb_fi_call c = call_of(CB_FI_OP_LAUNCH, 0, 1, "k");
  cb_fi_hit hit;
  ck_assert(!cb_fi_decide(fi, &c, &hit));
  ck_assert(cb_fi_decide(fi, &c, &hit));
  ck_assert_uint_eq(hit.rule, a);
  ck_assert_int_eq(hit.fault, CUBERT_FAULT_SCRIBBLE);
  ck_assert_int_eq(hit.status, CUBERT_ERR_LAUNCH);
  uint64_t matched, injected;
  cubert_faultinj_rule_describe(rt, b, NULL, 0, &matched, &injected);
  ck_assert_uint_eq(matched, 2);
  ck_assert_uint_eq(injected, 0);
}
END_TEST

START_TEST(test_log_ids_records_and_summary) {
  char line[512];
  cubert_faultinj_summary(rt, line, sizeof line);
  ck_assert_str_eq(line, "fault injection: no faults were injected (no rules set)");
  add("compile kernel=nope");
  ck_assert_str_eq(fired(call_of(CB_FI_OP_COMPILE, 0, 0, "k"), 4), "");
  /* The rule names a kernel no call had: the summary says it selects nothing. */
  cubert_faultinj_summary(rt, line, sizeof line);
  ck_assert_str_eq(line, "fault injection: no faults were injected (1 rule set; 0 of 4 calls matched); WARNING: "
                         "rule 1 selects nothing through kernel=nope: no kernel launched or compiled in this "
                         "runtime has that name");
  ck_assert_uint_eq(cubert_faultinj_injected(rt), 0);
  cubert_faultinj_stats fst;
  ck_assert_int_eq(cubert_faultinj_get_stats(rt, &fst), CUBERT_OK);
  ck_assert_uint_eq(fst.idle_kernel_rules, 1);
  /* Once a kernel of that name is seen the warning goes, matched or not. */
  ck_assert_str_eq(fired(call_of(CB_FI_OP_LAUNCH, 0, 1, "nope"), 1), "");
  cubert_faultinj_summary(rt, line, sizeof line);
  ck_assert_str_eq(line, "fault injection: no faults were injected (1 rule set; 0 of 5 calls matched)");

  setup();
  cubert_faultinj_set_seed(rt, 5);
  add("launch kernel=k* every=2 fault=scribble:0.25; sync status=ERR_TIMEOUT");
  int peer = 3;
  cb_fi_call l = {CB_FI_OP_LAUNCH, CB_FI_OP_LAUNCH | CB_FI_OP_PEER_WRITE, 2, 4, 0, "k7", &peer, 1, 0};
  cb_fi_hit hit;
  for (uint64_t w = 1; w <= 4; w++) {
    l.work = w;
    (void)cb_fi_decide(fi, &l, &hit);
  }
  cb_fi_call s = call_of(CB_FI_OP_SYNC, 1, 0, NULL);
  ck_assert(cb_fi_decide(fi, &s, &hit));
  ck_assert_uint_eq(hit.id, 3);
  ck_assert_int_eq(hit.status, CUBERT_ERR_TIMEOUT);
  cb_fi_note(fi, hit.id, "injected fault #3 (rule 2): sync on device 1 failed");
  ck_assert_uint_eq(cubert_faultinj_injected(rt), 3);

  cubert_fault_record rec[8];
  ck_assert_uint_eq(cubert_faultinj_log(rt, 0, rec, 8), 3);
  ck_assert_uint_eq(rec[0].id, 1);
  ck_assert_uint_eq(rec[0].rule, 1);
  ck_assert_str_eq(rec[0].operation, "launch");
  ck_assert_int_eq(rec[0].device, 2);
  ck_assert_int_eq(rec[0].peer, 3);
  ck_assert_uint_eq(rec[0].stream, 4);
  ck_assert_uint_eq(rec[0].work, 2);
  ck_assert_uint_eq(rec[0].match, 2);
  ck_assert_str_eq(rec[0].kernel, "k7");
  ck_assert_int_eq(rec[0].fault, CUBERT_FAULT_SCRIBBLE);
  ck_assert_int_eq(rec[0].status, CUBERT_ERR_LAUNCH);
  ck_assert_ptr_nonnull(strstr(rec[0].message, "injected fault #1 (rule 1)"));
  ck_assert_uint_eq(rec[1].id, 2);
  ck_assert_uint_eq(rec[1].work, 4);
  ck_assert_str_eq(rec[2].operation, "sync");
  ck_assert_int_eq(rec[2].peer, -1);
  ck_assert_str_eq(rec[2].kernel, "");
  ck_assert_str_eq(rec[2].message, "injected fault #3 (rule 2): sync on device 1 failed");
  ck_assert_uint_eq(cubert_faultinj_log(rt, 3, rec, 8), 1);
  ck_assert_uint_eq(cubert_faultinj_log(rt, 1, rec, 2), 2);
  cubert_fault_record one;
  ck_assert(cubert_faultinj_record(rt, 2, &one) && one.id == 2);
  ck_assert(!cubert_faultinj_record(rt, 4, &one));
  ck_assert(!cubert_faultinj_record(rt, 0, &one));

  cubert_faultinj_summary(rt, line, sizeof line);
  ck_assert_str_eq(line, "fault injection: 3 faults injected, #1-#3 (seed 5; 2 rules set; 5 of 5 calls matched)");
  cubert_faultinj_stats st;
  cubert_faultinj_get_stats(rt, &st);
  ck_assert(st.injected == 3 && st.calls == 5 && st.matched == 5 && st.rules == 2 && st.seed == 5);

  /* Clearing keeps the log; resetting starts the ids again at 1. */
  cubert_faultinj_clear(rt);
  ck_assert_uint_eq(cubert_faultinj_injected(rt), 3);
  ck_assert(!cb_fi_armed(cb_fi_armed_flag(fi)));
  cubert_faultinj_reset(rt);
  ck_assert_uint_eq(cubert_faultinj_injected(rt), 0);
  ck_assert_uint_eq(cubert_faultinj_log(rt, 0, rec, 8), 0);
  ck_assert_uint_eq(add("sync"), 1);
  ck_assert(cb_fi_decide(fi, &s, &hit));
  ck_assert_uint_eq(hit.id, 1);
}
END_TEST

START_TEST(test_log_keeps_the_newest) {
  add("alloc");
  cb_fi_call c = call_of(CB_FI_OP_ALLOC, 0, 0, NULL);
  cb_fi_hit hit;
  for (int i = 0; i < CUBERT_FAULTINJ_LOG_CAPACITY + 5; i++) ck_assert(cb_fi_decide(fi, &c, &hit));
  cubert_faultinj_stats s;
  cubert_faultinj_get_stats(rt, &s);
  ck_assert_uint_eq(s.log_dropped, 5);
  ck_assert_uint_eq(s.injected, CUBERT_FAULTINJ_LOG_CAPACITY + 5);
  cubert_fault_record r;
  ck_assert(!cubert_faultinj_record(rt, 5, &r));
  ck_assert(cubert_faultinj_record(rt, 6, &r) && r.id == 6);
  ck_assert(cubert_faultinj_record(rt, CUBERT_FAULTINJ_LOG_CAPACITY + 5, &r));
  ck_assert_uint_eq(cubert_faultinj_log(rt, 0, &r, 1), 1);
  ck_assert_uint_eq(r.id, 6);
}
END_TEST

START_TEST(test_remove_clear_and_armed_flag) {
  ck_assert(!cb_fi_armed(cb_fi_armed_flag(fi)));
  uint32_t a = add("launch; copy");
  ck_assert(cb_fi_armed(cb_fi_armed_flag(fi)));
  ck_assert_int_eq(cubert_faultinj_remove(rt, a), CUBERT_OK);
  ck_assert_int_eq(cubert_faultinj_remove(rt, a), CUBERT_ERR_INVALID_ARGUMENT);
  cb_fi_hit hit;
  cb_fi_call l = call_of(CB_FI_OP_LAUNCH, 0, 1, "k"), c = call_of(CB_FI_OP_COPY, 0, 1, NULL);
  ck_assert(!cb_fi_decide(fi, &l, &hit));
  ck_assert(cb_fi_decide(fi, &c, &hit));
  ck_assert(cb_fi_armed(cb_fi_armed_flag(fi)));
  cubert_faultinj_clear(rt);
  ck_assert(!cb_fi_armed(cb_fi_armed_flag(fi)));
  /* A lost device keeps the layer armed after the rules are gone. */
  cb_fi_lost_add(fi, 1);
  ck_assert(cb_fi_armed(cb_fi_armed_flag(fi)));
  cb_fi_lost_add(fi, -1);
  ck_assert(!cb_fi_armed(cb_fi_armed_flag(fi)));
}
END_TEST

START_TEST(test_kernel_names_that_select_nothing_are_named) {
  /* The built-ins are cubert_fill_u32, ...: a name without the prefix is a
   * rule that selects nothing, and the summary says what was meant. */
  add("launch kernel=fill_u32 nth=1; launch kernel=sum* nth=1; launch kernel=mine,cubert_copy_u32");
  ck_assert_str_eq(fired(call_of(CB_FI_OP_LAUNCH, 0, 1, "mine"), 1), "1");
  char line[1024];
  size_t want = cubert_faultinj_summary(rt, line, sizeof line);
  ck_assert_uint_eq(want, strlen(line));
  ck_assert_msg(strstr(line, "rule 1 selects nothing through kernel=fill_u32: no kernel launched or compiled in "
                             "this runtime has that name (the built-in is named `cubert_fill_u32`)"), "%s", line);
  ck_assert_msg(strstr(line, "rule 2 selects nothing through kernel=sum*: no kernel launched or compiled in this "
                             "runtime has that name (the built-in is named `cubert_sum_f32`)"), "%s", line);
  ck_assert_msg(strstr(line, "rule 3 selects nothing through kernel=cubert_copy_u32"), "%s", line);
  ck_assert_msg(!strstr(line, "kernel=mine"), "%s", line);
  cubert_faultinj_stats st;
  ck_assert_int_eq(cubert_faultinj_get_stats(rt, &st), CUBERT_OK);
  ck_assert_uint_eq(st.idle_kernel_rules, 3);
  /* Truncated, it still reports the whole length, as snprintf. */
  char small[16];
  ck_assert_uint_eq(cubert_faultinj_summary(rt, small, sizeof small), want);
  ck_assert_uint_eq(strlen(small), sizeof small - 1);
}
END_TEST

START_TEST(test_configure_from_environment) {
  cubert_faultinj_diag diag;
  uint32_t api = add("alloc nth=100");
  setenv("CUBERT_FAULTS", "launch nth=2", 1);
  ck_assert_int_eq(cubert_faultinj_configure(rt, NULL, &diag), CUBERT_OK);
  cubert_faultinj_stats s;
  cubert_faultinj_get_stats(rt, &s);
  ck_assert_uint_eq(s.rules, 2);
  /* The same text again (on this runtime) keeps the rule and its count. */
  cb_fi_call l = call_of(CB_FI_OP_LAUNCH, 0, 1, "k");
  cb_fi_hit hit;
  ck_assert(!cb_fi_decide(fi, &l, &hit));
  ck_assert_int_eq(cubert_faultinj_configure(rt, NULL, &diag), CUBERT_OK);
  ck_assert(cb_fi_decide(fi, &l, &hit));
  ck_assert_uint_eq(hit.rule, api + 1);
  /* Other text replaces the configured rules and leaves API rules alone. */
  setenv("CUBERT_FAULTS", "copy; write", 1);
  ck_assert_int_eq(cubert_faultinj_configure(rt, NULL, &diag), CUBERT_OK);
  cubert_faultinj_get_stats(rt, &s);
  ck_assert_uint_eq(s.rules, 3);
  ck_assert_int_eq(cubert_faultinj_rule_describe(rt, api, NULL, 0, NULL, NULL), CUBERT_OK);
  ck_assert_int_eq(cubert_faultinj_rule_describe(rt, api + 1, NULL, 0, NULL, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  /* Errors name the variable; the rules in place stay. */
  setenv("CUBERT_FAULTS", "copy every=0", 1);
  ck_assert_int_eq(cubert_faultinj_configure(rt, NULL, &diag), CUBERT_ERR_PARSE);
  ck_assert_str_eq(diag.source, "CUBERT_FAULTS");
  ck_assert(strncmp(diag.message, "CUBERT_FAULTS:1:12: ", 20) == 0);
  cubert_faultinj_get_stats(rt, &s);
  ck_assert_uint_eq(s.rules, 3);
  /* An option text wins over the variable; '@' names a file. */
  char *path = temp_file("launch kernel=k nth=1\n");
  char opt[256];
  snprintf(opt, sizeof opt, "@%s", path);
  ck_assert_int_eq(cubert_faultinj_configure(rt, opt, &diag), CUBERT_OK);
  cubert_faultinj_get_stats(rt, &s);
  ck_assert_uint_eq(s.rules, 2);
  ck_assert(cb_fi_decide(fi, &l, &hit));
  unlink(path);
  free(path);
  ck_assert_int_eq(cubert_faultinj_configure(rt, "launch nth=", &diag), CUBERT_ERR_PARSE);
  ck_assert_str_eq(diag.source, "faults option");
  /* Nothing configured: the configured rules go, API rules stay. */
  unsetenv("CUBERT_FAULTS");
  ck_assert_int_eq(cubert_faultinj_configure(rt, NULL, &diag), CUBERT_OK);
  cubert_faultinj_get_stats(rt, &s);
  ck_assert_uint_eq(s.rules, 1);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("faultinj_rules");
  TCase *t = tcase_create("rules");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, test_trigger_nth_fires_once_on_the_nth_call);
  tcase_add_test(t, test_trigger_every_fires_on_multiples);
  tcase_add_test(t, test_trigger_first_fires_on_the_first_n);
  tcase_add_test(t, test_trigger_after_fires_after_n);
  tcase_add_test(t, test_trigger_none_fires_always_and_times_caps);
  tcase_add_test(t, test_triggers_combine_as_and);
  tcase_add_test(t, test_trigger_counts_only_matching_calls);
  tcase_add_test(t, test_prob_same_seed_replays_other_seed_differs);
  tcase_add_test(t, test_prob_rule_seed_ignores_process_seed);
  tcase_add_test(t, test_prob_edges_and_reseed_restarts);
  tcase_add_test(t, test_prob_streams_are_per_rule);
  tcase_add_test(t, test_filter_operations);
  tcase_add_test(t, test_filter_kernel_exact_prefix_list_quoted);
  tcase_add_test(t, test_filter_device_stream_peer);
  tcase_add_test(t, test_filter_pair_class_through_the_classifier);
  tcase_add_test(t, test_filter_rank);
  tcase_add_test(t, test_mpi_rules_are_skipped);
  tcase_add_loop_test(t, test_errors_name_source_line_and_column, 0, (int)(sizeof bad / sizeof bad[0]));
  tcase_add_test(t, test_error_adds_nothing);
  tcase_add_test(t, test_file_errors_name_the_file);
  tcase_add_test(t, test_parse_fields_and_defaults);
  tcase_add_test(t, test_canonical_text_round_trips);
  tcase_add_test(t, test_first_rule_wins_others_still_count);
  tcase_add_test(t, test_log_ids_records_and_summary);
  tcase_add_test(t, test_log_keeps_the_newest);
  tcase_add_test(t, test_remove_clear_and_armed_flag);
  tcase_add_test(t, test_kernel_names_that_select_nothing_are_named);
  tcase_add_test(t, test_configure_from_environment);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
