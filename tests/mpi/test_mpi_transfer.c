/* tests/mpi/test_mpi_transfer.c: taint crosses ranks exactly (cubert/mpi.h).
 *
 * Run under mpirun with an even number of ranks (ctest: 4): rank r pairs
 * with rank r^1, the even rank sends and the odd one receives, and every
 * rank runs every test in the same order (Check in no-fork mode: one
 * process per rank). Host backend, 2 simulated devices per rank (or
 * $CUBERT_MPI_TEST_BACKEND, see open_env). Chunks of
 * 64 KiB (CUBERT_MPI_CHUNK), so that views of a few hundred KiB cross in
 * several chunks and ranges straddle chunk boundaries.
 *
 * All ranks run on one node, so views that are not sent in the eager form
 * cross through shared memory (mpi/ipc.c, at every size: CUBERT_MPI_IPC=on,
 * which the suite sets for itself when it is auto) unless CUBERT_MPI_IPC=off: ctest
 * runs the suite both ways (test_mpi_transfer, test_mpi_transfer_wire), and
 * test_ranks_of_one_node_share_memory asserts which path was taken.
 * The direct form (mpi/direct.h) runs with CUBERT_MPI_GPU_AWARE=force and
 * CUBERT_MPI_IPC=off (test_mpi_transfer_direct). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cubert/faultinj.h"
#include "cubert/mpi.h"
#include "mpi/ipc.h" /* IPC_SLOTS: shared-memory buffers per peer */
#include "tests/testutil.h"

#define N (300u * 1024u + 123u) /* five chunks, the last short */

static int rank, partner;
static bool sender;
static bool shared; /* CUBERT_MPI_IPC is not off: transfers between these ranks go through shared memory */

/* Whether the run hands device memory to MPI (the direct form:
 * CUBERT_MPI_GPU_AWARE=force, ctest's test_mpi_transfer_direct). */
static bool direct_mode(void) {
  const char *v = getenv("CUBERT_MPI_GPU_AWARE");
  return v && strcmp(v, "force") == 0;
}

/* The backend: host (2 simulated devices per rank), or the one
 * $CUBERT_MPI_TEST_BACKEND names ("hip": ci/gpu-mpi.sh, ranks sharing a
 * GPU, each on device 0). Every rank must open it, or the pairs would
 * desynchronise: a rank that cannot fails. */
static void open_env(cb_test_env *env) {
  const char *want = getenv("CUBERT_MPI_TEST_BACKEND");
  int i = 0;
  while (want && *want && cb_test_backend_name(i) && strcmp(cb_test_backend_name(i), want)) i++;
  ck_assert_msg(cb_test_backend_name(i) != NULL, "CUBERT_MPI_TEST_BACKEND=%s: no such backend", want);
  cubert_runtime_options o;
  cb_test_options(cb_test_backend_name(i), &o);
  o.host_devices = 2;
  ck_assert_msg(cb_test_open_with(i, &o, 1, env), "rank %d: backend %s has no device", rank, cb_test_backend_name(i));
}

/* A handle of N pattern bytes (seed) on client 0. */
static cubert_handle *pattern_handle(cb_test_env *env, uint64_t seed, uint64_t size) {
  unsigned char *buf = malloc(size);
  cb_test_pattern(buf, size, seed);
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_create(env->clients[0], buf, size, &h));
  free(buf);
  return h;
}

/* Taints bytes [a, b) of h's view with a failure of this rank's making;
 * returns its id. */
static uint64_t taint(cb_test_env *env, cubert_handle *h, uint64_t a, uint64_t b, const char *why) {
  const cubert_failure *f = NULL;
  cb_test_ok(cubert_failure_create(env->clients[0], CUBERT_ERR_LAUNCH, why, &f));
  cubert_handle *part = NULL;
  cb_test_ok(cubert_handle_slice(h, a, cubert_handle_size_in_use(h) - b, &part));
  cb_test_ok(cubert_handle_taint(env->clients[0], part, f));
  cubert_handle_release(part);
  uint64_t id = cubert_failure_id(f);
  cubert_failure_release(f);
  return id;
}

/* The tainted ranges of h's view (allocation-relative), at most 16. */
typedef struct ranges {
  size_t n;
  uint64_t start[16], end[16];
  cubert_remote_origin origin[16];
  char message[16][160];
} ranges;

static void walk(cb_test_env *env, const cubert_handle *h, ranges *out) {
  memset(out, 0, sizeof *out);
  uint64_t from = cubert_handle_offset_start(h);
  for (;;) {
    const cubert_failure *f = NULL;
    uint64_t s, e;
    cb_test_ok(cubert_handle_tainted_range(env->clients[0], h, from, &s, &e, &f));
    if (!f) break;
    ck_assert_uint_lt(out->n, 16);
    out->start[out->n] = s;
    out->end[out->n] = e;
    cubert_failure_remote(f, &out->origin[out->n]);
    snprintf(out->message[out->n], sizeof out->message[0], "%s", cubert_failure_message(f));
    out->n++;
    cubert_failure_release(f);
    from = e;
  }
}

/* Bytes [a, b) of h's view read good and equal the pattern of `seed`. */
static void expect_good(cb_test_env *env, cubert_handle *h, uint64_t a, uint64_t b, uint64_t seed) {
  uint64_t size = cubert_handle_size_in_use(h);
  cubert_handle *part = NULL;
  cb_test_ok(cubert_handle_slice(h, a, size - b, &part));
  unsigned char *got = malloc(b - a), *want = malloc(size);
  cb_test_ok(cubert_handle_read(env->clients[0], part, got, b - a));
  cb_test_pattern(want, size, seed);
  ck_assert_msg(memcmp(got, want + a, b - a) == 0, "bytes %llu..%llu differ from what was sent",
                (unsigned long long)a, (unsigned long long)b);
  free(got);
  free(want);
  cubert_handle_release(part);
}

static void barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }

/* A failed check leaves this rank's partner waiting in the middle of an
 * exchange. So: a test that did not reach its end marks the run broken,
 * later tests return at once, and main() prints Check's report and aborts
 * the job (MPI_Abort) instead of hanging. */
static bool completed, broken;
static void setup(void) { completed = false; }
static void teardown(void) {
  if (!completed) broken = true;
}
static void done(void) {
  completed = true;
  barrier();
}
#define SKIP_IF_BROKEN() \
  do {                   \
    if (broken) return;  \
  } while (0)

/* ------------------------------------------------------------ tests */

START_TEST(test_clean_view_crosses_good) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  cubert_mpi_info info;
  if (sender) {
    cubert_handle *h = pattern_handle(&env, 11, N);
    cb_test_ok(cubert_mpi_send(env.clients[0], h, partner, 3, MPI_COMM_WORLD, &info));
    ck_assert_uint_eq(info.bytes, N);
    ck_assert_uint_eq(info.chunks, 5);
    ck_assert(info.device_direct == direct_mode());
    cubert_handle_release(h);
  } else {
    cubert_handle *h = NULL;
    cb_test_ok(cubert_handle_empty(env.clients[0], N, &h));
    cb_test_ok(cubert_mpi_recv(env.clients[0], h, partner, 3, MPI_COMM_WORLD, &info));
    ck_assert_int_eq(info.peer, partner);
    ck_assert_uint_eq(info.tainted_bytes, 0);
    ck_assert(info.device_direct == direct_mode());
    expect_good(&env, h, 0, N, 11);
    cubert_handle_release(h);
  }
  cb_test_close(&env);
  done();
}
END_TEST

/* Ranges in several chunks, one across a chunk boundary; the receive lands
 * in a slice 1000 bytes into a larger buffer that held a failure of its own
 * where the sender's bytes are good (the receive repairs it). */
START_TEST(test_partly_tainted_view_crosses_range_exact) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  cubert_mpi_info info;
  uint64_t ids[2] = {0, 0};
  if (sender) {
    cubert_handle *h = pattern_handle(&env, 12, N);
    ids[0] = taint(&env, h, 100, 200, "k1 failed");
    ids[1] = taint(&env, h, 65500, 65600, "k2 failed");
    cb_test_status(cubert_mpi_send(env.clients[0], h, partner, 4, MPI_COMM_WORLD, &info), CUBERT_ERR_TAINTED);
    ck_assert_msg(strstr(cubert_last_error_message(), "200 of") != NULL, "%s", cubert_last_error_message());
    ck_assert_uint_eq(info.tainted_bytes, 200);
    ck_assert_uint_eq(info.tainted_ranges, 2);
    cubert_handle_release(h);
    MPI_Send(ids, 2, MPI_UINT64_T, partner, 99, MPI_COMM_WORLD);
  } else {
    cubert_handle *big = NULL, *h = NULL;
    cb_test_ok(cubert_handle_empty(env.clients[0], N + 3000, &big));
    cb_test_ok(cubert_handle_slice(big, 1000, 2000, &h));
    taint(&env, h, 5000, 6000, "stale local failure");
    cb_test_status(cubert_mpi_recv(env.clients[0], h, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &info),
                   CUBERT_ERR_TAINTED);
    ck_assert_msg(strstr(cubert_last_error_message(), "from rank") != NULL, "%s", cubert_last_error_message());
    ck_assert_int_eq(info.peer, partner);
    ck_assert_int_eq(info.tag, 4);
    MPI_Recv(ids, 2, MPI_UINT64_T, partner, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ranges r;
    walk(&env, h, &r);
    ck_assert_uint_eq(r.n, 2);
    ck_assert_uint_eq(r.start[0], 1100);
    ck_assert_uint_eq(r.end[0], 1200);
    ck_assert_uint_eq(r.start[1], 66500);
    ck_assert_uint_eq(r.end[1], 66600);
    for (int i = 0; i < 2; i++) {
      ck_assert(r.origin[i].remote);
      ck_assert_int_eq(r.origin[i].rank, partner);
      ck_assert_uint_eq(r.origin[i].id, ids[i]);
      ck_assert_msg(strstr(r.message[i], i ? "k2 failed" : "k1 failed") != NULL, "%s", r.message[i]);
    }
    expect_good(&env, h, 0, 100, 12);
    expect_good(&env, h, 200, 65500, 12);
    expect_good(&env, h, 65600, N, 12);
    /* a read over a tainted range is refused with the sender's cause */
    unsigned char *buf = malloc(N);
    cb_test_status(cubert_handle_read(env.clients[0], h, buf, N), CUBERT_ERR_TAINTED);
    ck_assert_msg(strstr(cubert_last_error_message(), "k1 failed") != NULL, "%s", cubert_last_error_message());
    free(buf);
    cubert_handle_release(h);
    cubert_handle_release(big);
  }
  cb_test_close(&env);
  done();
}
END_TEST

/* A whole view tainted by an injected fault of the sender's fault layer:
 * the receiver's read names the sender's injected fault. */
START_TEST(test_fully_tainted_view_carries_senders_cause) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  cubert_mpi_info info;
  if (sender) {
    cubert_handle *h = pattern_handle(&env, 13, 4096);
    cb_test_ok(cubert_faultinj_add(env.runtime, "write nth=1 fault=fail", "test", NULL, NULL));
    unsigned char buf[4096] = {0};
    ck_assert_int_ne(cubert_handle_write(env.clients[0], h, buf, sizeof buf), CUBERT_OK);
    cb_test_status(cubert_mpi_send(env.clients[0], h, partner, 5, MPI_COMM_WORLD, &info), CUBERT_ERR_TAINTED);
    ck_assert_uint_eq(info.tainted_bytes, 4096);
    cubert_handle_release(h);
  } else {
    cubert_handle *h = pattern_handle(&env, 99, 4096);
    cb_test_status(cubert_mpi_recv(env.clients[0], h, partner, 5, MPI_COMM_WORLD, &info), CUBERT_ERR_TAINTED);
    ck_assert_uint_eq(info.tainted_bytes, 4096);
    unsigned char buf[4096];
    cb_test_status(cubert_handle_read(env.clients[0], h, buf, sizeof buf), CUBERT_ERR_TAINTED);
    ck_assert_msg(strstr(cubert_last_error_message(), "injected fault") != NULL, "%s",
                  cubert_last_error_message());
    ranges r;
    walk(&env, h, &r);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_uint_eq(r.end[0] - r.start[0], 4096);
    ck_assert_int_eq(r.origin[0].rank, partner);
    cubert_handle_release(h);
  }
  cb_test_close(&env);
  done();
}
END_TEST

/* Both ranks of a pair send to each other at once (isend/irecv + wait). */
START_TEST(test_nonblocking_both_ways) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  cubert_handle *out = pattern_handle(&env, 20 + (uint64_t)rank, N), *in = NULL;
  cb_test_ok(cubert_handle_empty(env.clients[0], N, &in));
  taint(&env, out, 70000, 70001, "one byte");
  cubert_mpi_request *rs = NULL, *rr = NULL;
  cb_test_ok(cubert_mpi_irecv(env.clients[0], in, partner, 6, MPI_COMM_WORLD, &rr));
  cb_test_ok(cubert_mpi_isend(env.clients[0], out, partner, 6, MPI_COMM_WORLD, &rs));
  cubert_mpi_info si, ri;
  cb_test_status(cubert_mpi_wait(rs, &si), CUBERT_ERR_TAINTED);
  cb_test_status(cubert_mpi_wait(rr, &ri), CUBERT_ERR_TAINTED);
  ck_assert_uint_eq(si.tainted_bytes, 1);
  ck_assert_uint_eq(ri.tainted_bytes, 1);
  ranges r;
  walk(&env, in, &r);
  ck_assert_uint_eq(r.n, 1);
  ck_assert_uint_eq(r.start[0], 70000);
  ck_assert_uint_eq(r.end[0], 70001);
  expect_good(&env, in, 0, 70000, 20 + (uint64_t)partner);
  expect_good(&env, in, 70001, N, 20 + (uint64_t)partner);
  cubert_handle_release(out);
  cubert_handle_release(in);
  cb_test_close(&env);
  done();
}
END_TEST

/* Small views (up to 16 KiB: one message with the header, docs/cluster.md):
 * clean ones cross good in one chunk; a tainted one still crosses range
 * exact; a receive-side scribble is taint, not data; a receive of the
 * wrong size changes nothing and the next exchange still lands. */
START_TEST(test_small_views_cross_in_one_message) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  cubert_mpi_info info;
  const uint64_t sizes[3] = {1, 8, 16384};
  if (sender) {
    for (int i = 0; i < 3; i++) {
      cubert_handle *h = pattern_handle(&env, 60 + (uint64_t)i, sizes[i]);
      cb_test_ok(cubert_mpi_send(env.clients[0], h, partner, 12, MPI_COMM_WORLD, &info));
      ck_assert_uint_eq(info.chunks, 1);
      cubert_handle_release(h);
    }
    cubert_handle *t = pattern_handle(&env, 63, 4096);
    taint(&env, t, 10, 20, "small k failed");
    cb_test_status(cubert_mpi_send(env.clients[0], t, partner, 12, MPI_COMM_WORLD, &info), CUBERT_ERR_TAINTED);
    ck_assert_uint_eq(info.tainted_bytes, 10);
    cubert_handle *s = pattern_handle(&env, 64, 512);
    cb_test_ok(cubert_mpi_send(env.clients[0], s, partner, 12, MPI_COMM_WORLD, NULL)); /* scribbled there */
    cb_test_ok(cubert_mpi_send(env.clients[0], s, partner, 12, MPI_COMM_WORLD, NULL)); /* wrong size there */
    cb_test_ok(cubert_mpi_send(env.clients[0], s, partner, 12, MPI_COMM_WORLD, NULL));
    cubert_handle_release(t);
    cubert_handle_release(s);
  } else {
    for (int i = 0; i < 3; i++) {
      cubert_handle *h = NULL;
      cb_test_ok(cubert_handle_empty(env.clients[0], sizes[i], &h));
      cb_test_ok(cubert_mpi_recv(env.clients[0], h, partner, 12, MPI_COMM_WORLD, &info));
      ck_assert_uint_eq(info.chunks, 1);
      ck_assert_uint_eq(info.tainted_bytes, 0);
      expect_good(&env, h, 0, sizes[i], 60 + (uint64_t)i);
      cubert_handle_release(h);
    }
    cubert_handle *t = NULL;
    cb_test_ok(cubert_handle_empty(env.clients[0], 4096, &t));
    cb_test_status(cubert_mpi_recv(env.clients[0], t, partner, 12, MPI_COMM_WORLD, &info), CUBERT_ERR_TAINTED);
    ranges r;
    walk(&env, t, &r);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_uint_eq(r.start[0], 10);
    ck_assert_uint_eq(r.end[0], 20);
    ck_assert_msg(strstr(r.message[0], "small k failed") != NULL, "%s", r.message[0]);
    expect_good(&env, t, 0, 10, 63);
    expect_good(&env, t, 20, 4096, 63);
    cubert_handle *s = NULL, *wrong = pattern_handle(&env, 65, 511);
    cb_test_ok(cubert_handle_empty(env.clients[0], 512, &s));
    cb_test_ok(cubert_mpi_faults("recv nth=1 fault=scribble:0.01"));
    cubert_status st = cubert_mpi_recv(env.clients[0], s, partner, 12, MPI_COMM_WORLD, &info);
    cb_test_ok(cubert_mpi_faults(NULL));
    ck_assert_int_ne(st, CUBERT_OK);
    ck_assert_uint_eq(info.tainted_bytes, 512);
    walk(&env, s, &r);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_msg(strstr(r.message[0], "checksum") != NULL, "%s", r.message[0]);
    cb_test_status(cubert_mpi_recv(env.clients[0], wrong, partner, 12, MPI_COMM_WORLD, NULL),
                   CUBERT_ERR_OUT_OF_RANGE);
    expect_good(&env, wrong, 0, 511, 65);
    cb_test_ok(cubert_mpi_recv(env.clients[0], s, partner, 12, MPI_COMM_WORLD, &info));
    expect_good(&env, s, 0, 512, 64);
    cubert_handle_release(t);
    cubert_handle_release(s);
    cubert_handle_release(wrong);
  }
  cb_test_close(&env);
  done();
}
END_TEST

/* Injected transport faults: the receiver never reads bad bytes as good. */
static void fault_exchange(const char *rules, bool rules_on_sender, bool sender_fails, uint64_t good_prefix,
                           const char *expect) {
  cb_test_env env;
  open_env(&env);
  if (sender == rules_on_sender) cb_test_ok(cubert_mpi_faults(rules));
  uint64_t before = cubert_mpi_faults_injected();
  cubert_mpi_info info;
  if (sender) {
    cubert_handle *h = pattern_handle(&env, 30, N);
    cubert_status st = cubert_mpi_send(env.clients[0], h, partner, 7, MPI_COMM_WORLD, &info);
    if (sender_fails) ck_assert_int_eq(st, CUBERT_ERR_BACKEND);
    else cb_test_ok(st); /* damage in flight is not the sender's to see */
    ck_assert_uint_eq(cubert_mpi_faults_injected(), before + (rules_on_sender ? 1 : 0));
    cubert_handle_release(h);
  } else {
    cubert_handle *h = NULL;
    cb_test_ok(cubert_handle_empty(env.clients[0], N, &h));
    cubert_status st = cubert_mpi_recv(env.clients[0], h, partner, 7, MPI_COMM_WORLD, &info);
    ck_assert_int_ne(st, CUBERT_OK);
    ck_assert_uint_eq(info.tainted_bytes, N - good_prefix);
    ranges r;
    walk(&env, h, &r);
    ck_assert_uint_ge(r.n, 1);
    ck_assert_uint_eq(r.start[0], good_prefix);
    ck_assert_uint_eq(r.end[r.n - 1], N);
    ck_assert_msg(strstr(r.message[0], expect) != NULL, "%s", r.message[0]);
    if (good_prefix) expect_good(&env, h, 0, good_prefix, 30);
    cubert_handle_release(h);
  }
  cb_test_ok(cubert_mpi_faults(NULL));
  cb_test_close(&env);
  barrier();
}

START_TEST(test_injected_send_failure_taints_receiver) {
  SKIP_IF_BROKEN();
  fault_exchange("send fault=fail", true, true, 0, "injected fault");
  done();
}
END_TEST

START_TEST(test_injected_partial_send_taints_the_rest) {
  SKIP_IF_BROKEN();
  /* 5 chunks, 0.4 of them: the first two cross good */
  fault_exchange("send nth=1 fault=partial:0.4", true, true, 2 * 65536, "stopped part way");
  done();
}
END_TEST

START_TEST(test_injected_scribble_in_flight_is_taint_not_data) {
  SKIP_IF_BROKEN();
  fault_exchange("send fault=scribble:0.01", true, false, 0, "checksum");
  done();
}
END_TEST

START_TEST(test_injected_receive_faults) {
  SKIP_IF_BROKEN();
  fault_exchange("recv fault=fail", false, false, 0, "injected fault");
  fault_exchange("recv fault=partial:0.6", false, false, 3 * 65536, "stopped part way");
  fault_exchange("recv fault=scribble:0.001", false, false, 0, "checksum");
  done();
}
END_TEST

/* A rule selects a rank: only the odd ranks' receives fail. */
START_TEST(test_fault_rule_selects_a_rank) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  cb_test_status(cubert_mpi_faults("recv rank=x fault=fail"), CUBERT_ERR_PARSE);
  cb_test_ok(cubert_mpi_faults("recv rank=1 fault=fail; recv rank=3 fault=fail"));
  uint64_t before = cubert_mpi_faults_injected();
  if (sender) {
    cubert_handle *h = pattern_handle(&env, 40, 1000);
    cb_test_ok(cubert_mpi_send(env.clients[0], h, partner, 8, MPI_COMM_WORLD, NULL));
    ck_assert_uint_eq(cubert_mpi_faults_injected(), before);
    cubert_handle_release(h);
  } else {
    cubert_handle *h = NULL;
    cb_test_ok(cubert_handle_empty(env.clients[0], 1000, &h));
    cb_test_status(cubert_mpi_recv(env.clients[0], h, partner, 8, MPI_COMM_WORLD, NULL), CUBERT_ERR_BACKEND);
    ck_assert_uint_eq(cubert_mpi_faults_injected(), before + 1);
    cubert_handle_release(h);
  }
  cb_test_ok(cubert_mpi_faults(NULL));
  cb_test_close(&env);
  done();
}
END_TEST

/* Faults of the runtime (not MPI's) while chunks stage through pinned host
 * buffers: on the sender a device read that fails at once (chunk 1) and one
 * that fails at the fence with garbage in the staging buffer (chunk 3); on
 * the receiver a write to the device that fails at the fence (chunk 4, its
 * third write: chunks 1 and 3 are not written). Each such chunk arrives
 * tainted, the others good, and both calls say so. */
START_TEST(test_device_faults_while_staging) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  cubert_mpi_info info;
  const uint64_t C = 65536;
  /* a communicator of its own on which ranks of one node do not share
   * memory (mpi/ipc.c): the bytes go staged whatever CUBERT_MPI_IPC says */
  MPI_Comm comm;
  ck_assert_int_eq(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  const char *ipc = getenv("CUBERT_MPI_IPC");
  char *saved = ipc ? strdup(ipc) : NULL;
  setenv("CUBERT_MPI_IPC", "off", 1);
  cubert_status ist = cubert_mpi_init(comm);
  if (saved) setenv("CUBERT_MPI_IPC", saved, 1);
  else unsetenv("CUBERT_MPI_IPC");
  free(saved);
  cb_test_ok(ist);
  if (sender) {
    cubert_handle *h = pattern_handle(&env, 70, N);
    /* direct form: its device copy fails, so the view goes staged */
    if (direct_mode()) cb_test_ok(cubert_faultinj_add(env.runtime, "copy nth=1 fault=fail", "test", NULL, NULL));
    cb_test_ok(cubert_faultinj_add(env.runtime, "read nth=2 fault=fail", "test", NULL, NULL));
    cb_test_ok(cubert_faultinj_add(env.runtime, "read nth=4 fault=async-scribble", "test", NULL, NULL));
    cubert_status st = cubert_mpi_send(env.clients[0], h, partner, 14, comm, &info);
    ck_assert_msg(st != CUBERT_OK && st != CUBERT_ERR_TAINTED, "send: %d %s", st, cubert_last_error_message());
    ck_assert_msg(strstr(cubert_last_error_message(), "65536..131072") != NULL, "%s", cubert_last_error_message());
    ck_assert_uint_eq(info.tainted_bytes, 2 * C);
    ck_assert(!info.device_direct);
    cubert_handle_release(h);
  } else {
    cubert_handle *h = NULL;
    cb_test_ok(cubert_handle_empty(env.clients[0], N, &h));
    cb_test_ok(cubert_faultinj_add(env.runtime, "write nth=3 fault=async", "test", NULL, NULL));
    cubert_status st = cubert_mpi_recv(env.clients[0], h, partner, 14, comm, &info);
    ck_assert_msg(st != CUBERT_OK && st != CUBERT_ERR_TAINTED, "recv: %d %s", st, cubert_last_error_message());
    ck_assert_msg(strstr(cubert_last_error_message(), "262144..") != NULL, "%s", cubert_last_error_message());
    ranges r;
    walk(&env, h, &r);
    ck_assert_uint_eq(r.n, 3);
    ck_assert_uint_eq(r.start[0], C);
    ck_assert_uint_eq(r.end[0], 2 * C);
    ck_assert(r.origin[0].remote);
    ck_assert_int_eq(r.origin[0].rank, partner);
    ck_assert_uint_eq(r.start[1], 3 * C);
    ck_assert_uint_eq(r.end[1], 4 * C);
    ck_assert(r.origin[1].remote);
    ck_assert_uint_eq(r.start[2], 4 * C);
    ck_assert_uint_eq(r.end[2], N);
    ck_assert(!r.origin[2].remote);
    expect_good(&env, h, 0, C, 70);
    expect_good(&env, h, 2 * C, 3 * C, 70);
    cubert_handle_release(h);
  }
  cb_test_ok(cubert_mpi_finalize(comm));
  MPI_Comm_free(&comm);
  cb_test_close(&env);
  done();
}
END_TEST

/* Work of the caller's that failed at a fence before a transfer is the
 * caller's to hear of at its next cubert_sync (docs/failures.md, rule 8:
 * every sync that waits for failed work returns the failure, once per
 * stream): the component's own waits for its staged reads and writes must
 * not take that report. A fill of another handle fails asynchronously on
 * each rank, then a view crosses (through MPI's messages in
 * test_mpi_transfer_wire); the caller's sync must still return the fill's
 * failure, and the transfer's bytes are good. */
START_TEST(test_transfer_leaves_the_callers_sync_report) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  cubert_mpi_info info;
  cubert_handle *other = NULL, *h = NULL;
  cb_test_ok(cubert_handle_empty(env.clients[0], 64, &other));
  cb_test_ok(cubert_faultinj_add(env.runtime, "fill nth=1 fault=async", "test", NULL, NULL));
  uint32_t pat = 0x01020304u;
  cb_test_ok(cubert_handle_fill(env.clients[0], other, &pat, sizeof pat));
  if (sender) {
    h = pattern_handle(&env, 81, N);
    cb_test_ok(cubert_mpi_send(env.clients[0], h, partner, 16, MPI_COMM_WORLD, &info));
  } else {
    cb_test_ok(cubert_handle_empty(env.clients[0], N, &h));
    cb_test_ok(cubert_mpi_recv(env.clients[0], h, partner, 16, MPI_COMM_WORLD, &info));
  }
  cubert_status st = cubert_sync(env.clients[0]);
  ck_assert_msg(st != CUBERT_OK, "rank %d (%s): the sync after the transfer did not report the failed fill", rank,
                sender ? "sender" : "receiver");
  ck_assert_msg(strstr(cubert_last_error_message(), "fill") != NULL, "%s", cubert_last_error_message());
  cb_test_ok(cubert_sync(env.clients[0])); /* reported once */
  if (!sender) expect_good(&env, h, 0, N, 81);
  cubert_handle_release(h);
  cubert_handle_release(other);
  cb_test_close(&env);
  done();
}
END_TEST

/* The receiver's landing of the bytes on its device fails at a fence (its
 * device copy out of shared memory, or its write from host memory): the
 * bytes are tainted by the runtime, and the call says so, on every path
 * that lands through the device (docs/cluster.md: "a write that fails at
 * the fence is found in the view's ledger ... and the call returns its
 * error"; cubert/mpi.h: CUBERT_OK only when every byte arrived good). Not
 * the direct form, where MPI writes the view itself. */
START_TEST(test_landing_that_fails_at_a_fence_is_reported) {
  SKIP_IF_BROKEN();
  if (direct_mode()) {
    done();
    return;
  }
  cb_test_env env;
  open_env(&env);
  cubert_mpi_info info;
  if (sender) {
    cubert_handle *h = pattern_handle(&env, 82, N);
    cb_test_ok(cubert_mpi_send(env.clients[0], h, partner, 17, MPI_COMM_WORLD, &info));
    cubert_handle_release(h);
  } else {
    cubert_handle *h = NULL;
    cb_test_ok(cubert_handle_empty(env.clients[0], N, &h));
    cb_test_ok(cubert_faultinj_add(env.runtime, "copy nth=1 fault=async", "test", NULL, NULL));
    cb_test_ok(cubert_faultinj_add(env.runtime, "write nth=1 fault=async", "test", NULL, NULL));
    cubert_status st = cubert_mpi_recv(env.clients[0], h, partner, 17, MPI_COMM_WORLD, &info);
    ck_assert_msg(st != CUBERT_OK && st != CUBERT_ERR_TAINTED, "recv (%s): %d %s",
                  shared ? "shared memory" : "MPI's messages", st, cubert_last_error_message());
    ck_assert_msg(strstr(cubert_last_error_message(), "to the device failed") != NULL, "%s",
                  cubert_last_error_message());
    ranges r;
    walk(&env, h, &r);
    ck_assert_uint_ge(r.n, 1);
    ck_assert(!r.origin[0].remote);
    cubert_sync(env.clients[0]);
    cubert_handle_release(h);
  }
  cb_test_close(&env);
  done();
}
END_TEST

/* The same for a view in the eager form (one message; docs/cluster.md:
 * "the receiver takes it exactly as a one-chunk transfer"): its write to
 * the device fails at a fence, and the call says so. */
START_TEST(test_small_landing_that_fails_at_a_fence_is_reported) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  cubert_mpi_info info;
  if (sender) {
    cubert_handle *h = pattern_handle(&env, 83, 4096);
    cb_test_ok(cubert_mpi_send(env.clients[0], h, partner, 18, MPI_COMM_WORLD, &info));
    cubert_handle_release(h);
  } else {
    cubert_handle *h = NULL;
    cb_test_ok(cubert_handle_empty(env.clients[0], 4096, &h));
    cb_test_ok(cubert_faultinj_add(env.runtime, "write nth=1 fault=async", "test", NULL, NULL));
    cubert_status st = cubert_mpi_recv(env.clients[0], h, partner, 18, MPI_COMM_WORLD, &info);
    ck_assert_uint_eq(info.chunks, 1);
    ck_assert_msg(st != CUBERT_OK && st != CUBERT_ERR_TAINTED, "recv: %d %s", st, cubert_last_error_message());
    ck_assert_msg(strstr(cubert_last_error_message(), "to the device failed") != NULL, "%s",
                  cubert_last_error_message());
    ranges r;
    walk(&env, h, &r);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_uint_eq(r.end[0] - r.start[0], 4096);
    cubert_sync(env.clients[0]);
    cubert_handle_release(h);
  }
  cb_test_close(&env);
  done();
}
END_TEST

/* Bytes the sender had tainted keep the sender's cause on the receiver
 * even when the chunk they lie in fails in transit as well (here an
 * injected receive fault from chunk 1 on): readers get the original cause
 * (DESIGN.md), and through shared memory the sender already puts the view's
 * own failure last so that it is the one the receiver gets (mpi/ipc.c).
 * The rest of the failed chunks carries the transport's failure. */
static void cause_survives(bool on_send) {
  cb_test_env env;
  open_env(&env);
  const uint64_t C = 65536;
  cubert_mpi_info info;
  if (sender) {
    cubert_handle *h = pattern_handle(&env, 84, N);
    taint(&env, h, C + 100, C + 200, "k9 failed");
    if (on_send) cb_test_ok(cubert_mpi_faults("send fault=partial:0.2"));
    cubert_status st = cubert_mpi_send(env.clients[0], h, partner, 19, MPI_COMM_WORLD, &info);
    cb_test_ok(cubert_mpi_faults(NULL));
    ck_assert_int_ne(st, CUBERT_OK);
    cubert_handle_release(h);
  } else {
    cubert_handle *h = NULL;
    cb_test_ok(cubert_handle_empty(env.clients[0], N, &h));
    if (!on_send) cb_test_ok(cubert_mpi_faults("recv fault=partial:0.2")); /* 1 of 5 chunks lands */
    cubert_status st = cubert_mpi_recv(env.clients[0], h, partner, 19, MPI_COMM_WORLD, &info);
    cb_test_ok(cubert_mpi_faults(NULL));
    ck_assert_int_ne(st, CUBERT_OK);
    ranges r;
    walk(&env, h, &r);
    /* C..N tainted without a gap (one range per failed chunk on the wire) */
    ck_assert_uint_ge(r.n, 3);
    ck_assert_uint_eq(r.start[0], C);
    ck_assert_uint_eq(r.end[r.n - 1], N);
    for (size_t i = 1; i < r.n; i++) ck_assert_uint_eq(r.start[i], r.end[i - 1]);
    ck_assert_msg(r.end[0] == C + 100, "%s fault: bytes %llu..%llu carry %s", on_send ? "send" : "receive",
                  (unsigned long long)r.start[0], (unsigned long long)r.end[0], r.message[0]);
    ck_assert_msg(strstr(r.message[0], "stopped part way") != NULL, "%s", r.message[0]);
    ck_assert_uint_eq(r.start[1], C + 100);
    ck_assert_uint_eq(r.end[1], C + 200);
    ck_assert(r.origin[1].remote);
    ck_assert_msg(strstr(r.message[1], "k9 failed") != NULL, "%s", r.message[1]);
    ck_assert_msg(strstr(r.message[2], "stopped part way") != NULL, "%s", r.message[2]);
    expect_good(&env, h, 0, C, 84);
    cubert_handle_release(h);
  }
  cb_test_close(&env);
  barrier();
}

START_TEST(test_senders_cause_survives_a_failed_chunk) {
  SKIP_IF_BROKEN();
  cause_survives(false);
  cause_survives(true);
  done();
}
END_TEST

/* One CUBERT_FAULTS for every rank carries the send/recv rules too
 * (cubert_mpi_init reads them, skipping the runtime's statements, which may
 * hold quoted `;`), beside CUBERT_MPI_FAULTS: rank 1's receive fails by the
 * first, rank 3's by the second. A bad send rule there fails the init,
 * naming CUBERT_FAULTS. */
START_TEST(test_cubert_faults_carries_mpi_rules) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  MPI_Comm comm;
  ck_assert_int_eq(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  setenv("CUBERT_FAULTS", "launch kernel=\"a;recv\" nth=99 # recv fault=fail\nrecv rank=1 fault=fail; write nth=1000", 1);
  setenv("CUBERT_MPI_FAULTS", "recv rank=3 fault=fail", 1);
  cubert_status st = cubert_mpi_init(comm);
  unsetenv("CUBERT_FAULTS");
  unsetenv("CUBERT_MPI_FAULTS");
  cb_test_ok(st);
  uint64_t before = cubert_mpi_faults_injected();
  cubert_handle *h = NULL;
  if (sender) {
    h = pattern_handle(&env, 41, 1000);
    cb_test_ok(cubert_mpi_send(env.clients[0], h, partner, 9, comm, NULL));
  } else {
    cb_test_ok(cubert_handle_empty(env.clients[0], 1000, &h));
    st = cubert_mpi_recv(env.clients[0], h, partner, 9, comm, NULL);
    if (rank == 1 || rank == 3) cb_test_status(st, CUBERT_ERR_BACKEND);
    else cb_test_ok(st);
  }
  ck_assert_uint_eq(cubert_mpi_faults_injected(), before + (rank == 1 || rank == 3));
  cubert_handle_release(h);
  cb_test_ok(cubert_mpi_faults(NULL));
  cb_test_ok(cubert_mpi_finalize(comm));
  MPI_Comm_free(&comm);
  ck_assert_int_eq(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  setenv("CUBERT_FAULTS", "launch nth=2; send fault=sometimes", 1);
  cb_test_status(cubert_mpi_init(comm), CUBERT_ERR_PARSE);
  unsetenv("CUBERT_FAULTS");
  ck_assert_msg(strstr(cubert_last_error_message(), "CUBERT_FAULTS rule 2") != NULL, "%s", cubert_last_error_message());
  MPI_Comm_free(&comm);
  cb_test_close(&env);
  done();
}
END_TEST

/* The sender destroys its client and runtime while its send still travels
 * (the receiver posts late) and before cubert_mpi_finalize: the client's
 * teardown hook (mpi/stage.h) waits for the messages read from its pinned
 * staging buffers or its shared memory, then releases them, so the bytes
 * arrive good and nothing is used after it was freed (the ASan build runs
 * this too). A second runtime then sends again through a fresh pool; the
 * third round destroys the runtime while its clients are still alive (a
 * mistake the hooks survive: cubert_runtime_destroy runs them first). */
START_TEST(test_client_destroyed_before_finalize) {
  SKIP_IF_BROKEN();
  for (int round = 0; round < 3; round++) {
    cb_test_env env;
    open_env(&env);
    if (sender) {
      cubert_handle *h = pattern_handle(&env, 80 + (uint64_t)round, N);
      cb_test_ok(cubert_mpi_send(env.clients[0], h, partner, 15, MPI_COMM_WORLD, NULL));
      cubert_handle_release(h);
      if (round == 2) {
        cubert_runtime_destroy(env.runtime); /* the clients are still alive */
        env.runtime = NULL;
      }
      cb_test_close(&env); /* the messages may still travel */
    } else {
      usleep(100 * 1000);
      cubert_handle *h = NULL;
      cb_test_ok(cubert_handle_empty(env.clients[0], N, &h));
      cb_test_ok(cubert_mpi_recv(env.clients[0], h, partner, 15, MPI_COMM_WORLD, NULL));
      expect_good(&env, h, 0, N, 80 + (uint64_t)round);
      cubert_handle_release(h);
      cb_test_close(&env);
    }
    barrier();
  }
  done();
}
END_TEST

/* rank= of the runtime's own rules: one rule text given to every rank
 * fails a write on rank 1 only (cubert_mpi_init gave each runtime its
 * rank). */
START_TEST(test_runtime_rule_selects_a_rank) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  cb_test_ok(cubert_faultinj_add(env.runtime, "write rank=1 fault=fail", "test", NULL, NULL));
  unsigned char b[64] = {7};
  cubert_handle *h = NULL;
  cb_test_ok(cubert_handle_empty(env.clients[0], sizeof b, &h));
  cubert_status st = cubert_handle_write(env.clients[0], h, b, sizeof b);
  if (rank == 1) ck_assert_int_ne(st, CUBERT_OK);
  else cb_test_ok(st);
  ck_assert_uint_eq(cubert_faultinj_injected(env.runtime), rank == 1);
  cubert_handle_release(h);
  cb_test_close(&env);
  done();
}
END_TEST

/* Mismatched sizes: the receiver takes the whole exchange, refuses, and its
 * view is unchanged; the sender completes. Then the pair still talks. */
START_TEST(test_size_mismatch_refused_without_hang) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  if (sender) {
    cubert_handle *h = pattern_handle(&env, 50, N);
    cb_test_ok(cubert_mpi_send(env.clients[0], h, partner, 9, MPI_COMM_WORLD, NULL));
    cb_test_ok(cubert_mpi_send(env.clients[0], h, partner, 9, MPI_COMM_WORLD, NULL));
    cubert_handle_release(h);
  } else {
    cubert_handle *small = pattern_handle(&env, 51, N - 1), *h = NULL;
    cb_test_status(cubert_mpi_recv(env.clients[0], small, partner, 9, MPI_COMM_WORLD, NULL),
                   CUBERT_ERR_OUT_OF_RANGE);
    ck_assert_msg(strstr(cubert_last_error_message(), "the view holds") != NULL, "%s", cubert_last_error_message());
    expect_good(&env, small, 0, N - 1, 51);
    cb_test_ok(cubert_handle_empty(env.clients[0], N, &h));
    cb_test_ok(cubert_mpi_recv(env.clients[0], h, partner, 9, MPI_COMM_WORLD, NULL));
    expect_good(&env, h, 0, N, 50);
    cubert_handle_release(small);
    cubert_handle_release(h);
  }
  cb_test_close(&env);
  done();
}
END_TEST

/* A sender whose device is lost can read nothing and pin nothing: the
 * exchange still completes, the receiver's view is tainted whole, and the
 * cause it is told is the loss, not "out of host memory" (found from
 * outside by the 'outside2' review: a staging buffer refused because the
 * device was lost was reported to the receiver as host memory running out). */
START_TEST(test_sender_device_lost_tells_the_loss) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  if (sender) {
    cubert_handle *h = pattern_handle(&env, 80, N);
    cb_test_ok(cubert_faultinj_add(env.runtime, "sync nth=1 fault=device-lost", "test", NULL, NULL));
    cb_test_status(cubert_sync(env.clients[0]), CUBERT_ERR_DEVICE_LOST);
    cb_test_status(cubert_mpi_send(env.clients[0], h, partner, 12, MPI_COMM_WORLD, NULL), CUBERT_ERR_DEVICE_LOST);
    cubert_handle_release(h);
  } else {
    cubert_handle *h = NULL;
    cb_test_ok(cubert_handle_empty(env.clients[0], N, &h));
    cubert_status st = cubert_mpi_recv(env.clients[0], h, partner, 12, MPI_COMM_WORLD, NULL);
    ck_assert_msg(st == CUBERT_ERR_BACKEND || st == CUBERT_ERR_TAINTED, "%s: %s", cubert_status_name(st),
                  cubert_last_error_message());
    ck_assert_msg(strstr(cubert_last_error_message(), "out of host memory") == NULL &&
                      strstr(cubert_last_error_message(), "lost") != NULL,
                  "%s", cubert_last_error_message());
    ranges r;
    walk(&env, h, &r);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_uint_eq(r.start[0], 0);
    ck_assert_uint_eq(r.end[0], N);
    ck_assert(r.origin[0].remote && r.origin[0].rank == partner);
    ck_assert_msg(strstr(r.message[0], "out of host memory") == NULL && strstr(r.message[0], "lost") != NULL, "%s",
                  r.message[0]);
    /* the receiver's own device is not lost */
    cb_test_ok(cubert_sync(env.clients[0]));
    cubert_handle_release(h);
  }
  cb_test_close(&env);
  done();
}
END_TEST

/* A receive into a handle of another client (device 1 with device 0's
 * client): refused with WRONG_DEVICE after taking the exchange; a send of
 * one: the exchange completes and the receiver's bytes carry why. */
START_TEST(test_other_clients_handle) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  int fewest = env.devices;
  MPI_Allreduce(&env.devices, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (fewest < 2) {
    cb_test_skip("no device (test_other_clients_handle needs 2 devices per rank, %s has %d)", env.backend,
                 env.devices);
    cb_test_close(&env);
    done();
    return;
  }
  cubert_handle *other = NULL;
  unsigned char pat[2048];
  cb_test_pattern(pat, sizeof pat, 60);
  cb_test_ok(cubert_handle_create(env.clients[1], pat, sizeof pat, &other));
  if (sender) {
    cb_test_ok(cubert_mpi_send(env.clients[1], other, partner, 10, MPI_COMM_WORLD, NULL));
    cb_test_status(cubert_mpi_send(env.clients[0], other, partner, 10, MPI_COMM_WORLD, NULL),
                   CUBERT_ERR_WRONG_DEVICE);
    /* the refusal is the send's: it names the call and the devices, not a
     * call the component made inside it */
    ck_assert_msg(strstr(cubert_last_error_message(), "cubert_mpi_send") != NULL &&
                      strstr(cubert_last_error_message(), "belongs to device 1") != NULL &&
                      strstr(cubert_last_error_message(), "cubert_handle_") == NULL,
                  "%s", cubert_last_error_message());
  } else {
    cb_test_status(cubert_mpi_recv(env.clients[0], other, partner, 10, MPI_COMM_WORLD, NULL),
                   CUBERT_ERR_WRONG_DEVICE);
    ck_assert_msg(strstr(cubert_last_error_message(), "cubert_mpi_recv") != NULL &&
                      strstr(cubert_last_error_message(), "belongs to device 1") != NULL &&
                      strstr(cubert_last_error_message(), "cubert_handle_") == NULL,
                  "%s", cubert_last_error_message());
    unsigned char got[2048];
    cb_test_ok(cubert_handle_read(env.clients[1], other, got, sizeof got));
    ck_assert(memcmp(got, pat, sizeof got) == 0);
    cubert_handle *h = NULL;
    cb_test_ok(cubert_handle_empty(env.clients[0], sizeof pat, &h));
    cb_test_status(cubert_mpi_recv(env.clients[0], h, partner, 10, MPI_COMM_WORLD, NULL), CUBERT_ERR_TAINTED);
    ranges r;
    walk(&env, h, &r);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_msg(strstr(r.message[0], "could not be sent") != NULL || strstr(r.message[0], "device") != NULL,
                  "%s", r.message[0]);
    cubert_handle_release(h);
  }
  cubert_handle_release(other);
  cb_test_close(&env);
  done();
}
END_TEST

/* Refused before any message: a rank outside the communicator, a bad tag,
 * a communicator never given to cubert_mpi_init, NULLs. A message that is
 * not cubert's: refused, the view tainted, nothing hangs. */
START_TEST(test_bad_arguments_send_nothing) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  cubert_handle *h = pattern_handle(&env, 70, 256);
  cb_test_status(cubert_mpi_send(env.clients[0], h, size, 1, MPI_COMM_WORLD, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(cubert_last_error_message(), "is not in the communicator") != NULL, "%s",
                cubert_last_error_message());
  cb_test_status(cubert_mpi_send(env.clients[0], h, partner, -3, MPI_COMM_WORLD, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_mpi_recv(env.clients[0], h, -7, 1, MPI_COMM_WORLD, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_mpi_send(env.clients[0], h, 0, 1, MPI_COMM_SELF, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(cubert_last_error_message(), "cubert_mpi_init") != NULL, "%s", cubert_last_error_message());
  cb_test_status(cubert_mpi_send(NULL, h, partner, 1, MPI_COMM_WORLD, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_mpi_recv(env.clients[0], NULL, partner, 1, MPI_COMM_WORLD, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_mpi_wait(NULL, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  /* a CUBERT_MPI_IPC that is neither auto, on nor off: refused, on every rank */
  const char *was = getenv("CUBERT_MPI_IPC");
  char *keep = was ? strdup(was) : NULL;
  setenv("CUBERT_MPI_IPC", "maybe", 1);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  cb_test_status(cubert_mpi_init(comm), CUBERT_ERR_PARSE);
  ck_assert_msg(strstr(cubert_last_error_message(), "CUBERT_MPI_IPC=maybe") != NULL, "%s",
                cubert_last_error_message());
  MPI_Comm_free(&comm);
  if (keep) setenv("CUBERT_MPI_IPC", keep, 1);
  else unsetenv("CUBERT_MPI_IPC");
  free(keep);
  if (sender) {
    char junk[10] = "not cubert";
    MPI_Send(junk, sizeof junk, MPI_CHAR, partner, 11, MPI_COMM_WORLD);
  } else {
    cb_test_status(cubert_mpi_recv(env.clients[0], h, partner, 11, MPI_COMM_WORLD, NULL), CUBERT_ERR_BACKEND);
    ck_assert_msg(strstr(cubert_last_error_message(), "not a cubert transfer header") != NULL, "%s",
                  cubert_last_error_message());
    unsigned char buf[256];
    cb_test_status(cubert_handle_read(env.clients[0], h, buf, sizeof buf), CUBERT_ERR_TAINTED);
  }
  cubert_handle_release(h);
  cb_test_close(&env);
  done();
}
END_TEST

/* One blocking transfer of `size` pattern bytes (seed) from the sender to
 * its partner on comm; the receiver checks every byte. */
static void exchange_one(cb_test_env *env, MPI_Comm comm, int tag, uint64_t seed, uint64_t size,
                         cubert_mpi_info *info) {
  cubert_handle *h = NULL;
  if (sender) {
    h = pattern_handle(env, seed, size);
    cb_test_ok(cubert_mpi_send(env->clients[0], h, partner, tag, comm, info));
  } else {
    cb_test_ok(cubert_handle_empty(env->clients[0], size, &h));
    cb_test_ok(cubert_mpi_recv(env->clients[0], h, partner, tag, comm, info));
    expect_good(env, h, 0, size, seed);
  }
  cubert_handle_release(h);
}

/* The path between ranks of one node: through shared memory unless
 * CUBERT_MPI_IPC=off. Buffers are reused, grown (1 MiB, then 4 MiB) and,
 * with IPC_SLOTS sends waiting (as many as osu_bw's window), the next goes
 * through MPI; every byte lands. On communicators of the test's own, whose
 * buffers start empty (the second one's all free when its sends start). */
START_TEST(test_ranks_of_one_node_share_memory) {
  SKIP_IF_BROKEN();
  cb_test_env env;
  open_env(&env);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  cb_test_ok(cubert_mpi_init(comm));
  cubert_mpi_info info;
  const uint64_t sizes[3] = {N, N, 3u << 20};
  uint64_t before = cubert_mpi_shared_transfers();
  for (int i = 0; i < 3; i++) {
    exchange_one(&env, comm, 13, 80 + (uint64_t)i, sizes[i], &info);
    ck_assert_msg(info.shared_memory == shared, "transfer %d: shared_memory %d, expected %d", i,
                  (int)info.shared_memory, (int)shared);
    ck_assert_uint_eq(info.bytes, sizes[i]);
  }
  ck_assert_uint_eq(cubert_mpi_shared_transfers(), before + (shared ? 3 : 0));
  cb_test_ok(cubert_mpi_finalize(comm));
  MPI_Comm_free(&comm);
  /* IPC_SLOTS + 1 sends before the receiver takes any: every buffer, then MPI */
  enum { SENDS = IPC_SLOTS + 1 };
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  cb_test_ok(cubert_mpi_init(comm));
  cubert_handle *v[SENDS] = {NULL};
  cubert_mpi_request *rq[SENDS] = {NULL};
  for (int i = 0; i < SENDS; i++) {
    if (sender) {
      v[i] = pattern_handle(&env, 90 + (uint64_t)i, N);
      cb_test_ok(cubert_mpi_isend(env.clients[0], v[i], partner, 14, comm, &rq[i]));
      cb_test_ok(cubert_mpi_wait(rq[i], &info));
      ck_assert_msg(info.shared_memory == (shared && i < IPC_SLOTS), "send %d: shared_memory %d", i,
                    (int)info.shared_memory);
    }
  }
  barrier();
  for (int i = 0; i < SENDS && !sender; i++) {
    cb_test_ok(cubert_handle_empty(env.clients[0], N, &v[i]));
    cb_test_ok(cubert_mpi_recv(env.clients[0], v[i], partner, 14, comm, &info));
    ck_assert_msg(info.shared_memory == (shared && i < IPC_SLOTS), "receive %d: shared_memory %d", i,
                  (int)info.shared_memory);
    expect_good(&env, v[i], 0, N, 90 + (uint64_t)i);
  }
  for (int i = 0; i < SENDS; i++) cubert_handle_release(v[i]);
  cb_test_ok(cubert_mpi_finalize(comm));
  MPI_Comm_free(&comm);
  /* auto: a view under 512 KiB through MPI's messages, a larger one
   * through shared memory (on, what the rest of the suite runs: both) */
  setenv("CUBERT_MPI_IPC", shared ? "auto" : "off", 1);
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  cb_test_ok(cubert_mpi_init(comm));
  setenv("CUBERT_MPI_IPC", shared ? "on" : "off", 1);
  const uint64_t around[2] = {(512u << 10) - 1, 512u << 10};
  for (int i = 0; i < 2; i++) {
    exchange_one(&env, comm, 15, 70 + (uint64_t)i, around[i], &info);
    ck_assert_msg(info.shared_memory == (shared && i == 1), "auto, %llu bytes: shared_memory %d",
                  (unsigned long long)around[i], (int)info.shared_memory);
  }
  cb_test_close(&env);
  cb_test_ok(cubert_mpi_finalize(comm));
  MPI_Comm_free(&comm);
  done();
}
END_TEST

/* Segments this process made that are still in /dev/shm (cubert.<pid>.*). */
static int leftover_segments(void) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "cubert.%ld.", (long)getpid());
  DIR *d = opendir("/dev/shm");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    if (!strncmp(e->d_name, prefix, strlen(prefix))) {
      fprintf(stderr, "rank %d: /dev/shm/%s left behind\n", rank, e->d_name);
      n++;
    }
  if (d) closedir(d);
  return n;
}

static TCase *add_case(Suite *s, const char *name) {
  TCase *tc = tcase_create(name);
  tcase_set_timeout(tc, 60);
  tcase_add_checked_fixture(tc, setup, teardown);
  suite_add_tcase(s, tc);
  return tc;
}

int main(int argc, char **argv) {
  /* before MPI_Init: refused with a clear error, nothing sent */
  if (cubert_mpi_init(MPI_COMM_WORLD) != CUBERT_ERR_INVALID_ARGUMENT ||
      !strstr(cubert_last_error_message(), "MPI is not initialised")) {
    fprintf(stderr, "cubert_mpi_init before MPI_Init was not refused: %s\n", cubert_last_error_message());
    return 1;
  }
  MPI_Init(&argc, &argv);
  int size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2 || size % 2) {
    if (rank == 0) fprintf(stderr, "test_mpi_transfer needs an even number of ranks (got %d)\n", size);
    MPI_Finalize();
    return 1;
  }
  partner = rank ^ 1;
  sender = rank % 2 == 0;
  const char *ipc = getenv("CUBERT_MPI_IPC");
  shared = !(ipc && (!strcmp(ipc, "off") || !strcmp(ipc, "0")));
  /* auto sends only views of 512 KiB or more through shared memory: the
   * suite's views of a few hundred KiB take it at every size (on) */
  if (shared) setenv("CUBERT_MPI_IPC", "on", 1);
  setenv("CK_FORK", "no", 1);
  setenv("CUBERT_MPI_CHUNK", "65536", 1);
  if (cubert_mpi_init(MPI_COMM_WORLD) != CUBERT_OK || cubert_mpi_init(MPI_COMM_WORLD) != CUBERT_OK) {
    fprintf(stderr, "cubert_mpi_init: %s\n", cubert_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  Suite *s = suite_create("mpi_transfer");
  TCase *tc = add_case(s, "taint");
  tcase_add_test(tc, test_clean_view_crosses_good);
  tcase_add_test(tc, test_partly_tainted_view_crosses_range_exact);
  tcase_add_test(tc, test_fully_tainted_view_carries_senders_cause);
  tcase_add_test(tc, test_nonblocking_both_ways);
  tcase_add_test(tc, test_small_views_cross_in_one_message);
  tcase_add_test(tc, test_ranks_of_one_node_share_memory);
  tc = add_case(s, "faults");
  tcase_add_test(tc, test_injected_send_failure_taints_receiver);
  tcase_add_test(tc, test_injected_partial_send_taints_the_rest);
  tcase_add_test(tc, test_injected_scribble_in_flight_is_taint_not_data);
  tcase_add_test(tc, test_injected_receive_faults);
  tcase_add_test(tc, test_fault_rule_selects_a_rank);
  tcase_add_test(tc, test_device_faults_while_staging);
  tcase_add_test(tc, test_transfer_leaves_the_callers_sync_report);
  tcase_add_test(tc, test_landing_that_fails_at_a_fence_is_reported);
  tcase_add_test(tc, test_small_landing_that_fails_at_a_fence_is_reported);
  tcase_add_test(tc, test_senders_cause_survives_a_failed_chunk);
  tcase_add_test(tc, test_client_destroyed_before_finalize);
  tcase_add_test(tc, test_cubert_faults_carries_mpi_rules);
  tcase_add_test(tc, test_runtime_rule_selects_a_rank);
  tc = add_case(s, "misuse");
  tcase_add_test(tc, test_size_mismatch_refused_without_hang);
  tcase_add_test(tc, test_other_clients_handle);
  tcase_add_test(tc, test_sender_device_lost_tells_the_loss);
  tcase_add_test(tc, test_bad_arguments_send_nothing);

  int rc = cb_test_run(s);
  if (rc != 0) {
    fprintf(stderr, "rank %d: a test failed (above); aborting the job so that no rank waits for it\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int all = 0;
  MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  cubert_mpi_finalize(MPI_COMM_WORLD);
  /* every segment of the transfers is gone, this rank's runtimes and
   * cubert_mpi being finished */
  if (leftover_segments()) all = 1;
  MPI_Finalize();
  return all;
}
