/* tests/mpi/test_mpi_recv_broken.c: a staged receive whose transfer breaks
 * part way (a chunk shorter than announced: a longer one is received
 * truncated, erroneous MPI, which Open MPI 4.1 copies past the buffer:
 * docs/cluster.md) takes every message of the exchange still to come,
 * so that the sender's sends complete and nothing is left for a later
 * receive to match; the view's bytes from the break on are tainted, those
 * of a chunk the sender flagged unread with the sender's failure (the
 * original cause), the rest with the break's, and the call reports the
 * break once (docs/cluster.md, "Both sides always complete the exchange").
 *
 * Two ranks (more are idle). Rank 0 is a hand-made sender: it writes the
 * wire of mpi/wire.h itself on cubert's duplicate of the communicator
 * (mpi_payload_comm, mpi/seam.h), so that one chunk can be broken. The
 * rest of the exchange goes at once (the receives the receiver still has
 * posted complete) or after a pause (they are cancelled, and the messages
 * taken after). Rank 0 then waits, for 10 s at most, for its sends to
 * complete; rank 1 checks that no message of the exchange is left. */
#include <check.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cubert/mpi.h"
#include "mpi/seam.h"
#include "mpi/wire.h"
#include "tests/testutil.h"

#define C 65536u
#define NCH 6u
#define SIZE (NCH * C)
#define TAG 7

static int rank;

typedef struct scenario {
  const char *name;
  unsigned broken;      /* the chunk of the wrong size */
  long delta;           /* its message's bytes minus what the header announces (never more) */
  bool broken_unread;   /* it is flagged unread, a record follows */
  unsigned unread;      /* a later chunk flagged unread (0: none) */
  bool late;            /* the chunks after the broken one come after a pause */
} scenario;

static const scenario scenarios[] = {
    {"chunk 1 short, the rest at once", 1, -(long)(C - 100), false, 4, false},
    {"chunk 1 short, the rest late (its posted receive is cancelled)", 1, -(long)(C - 100), false, 4, true},
    {"chunk 0 short and flagged unread, the rest late (two receives cancelled)", 0, -(long)(C - 64), true, 3, true},
    {"chunk 2 an empty message (no flags), the rest at once", 2, -(long)(C + WIRE_CHUNK_PREFIX), false, 5, false},
    {"chunk 3 short, the rest late", 3, -1, false, 0, true},
};
#define NSCEN (sizeof scenarios / sizeof scenarios[0])

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Rank 0: the hand-made transfer of scenario i; true when every send
 * completed within 10 s. */
static bool send_broken(cubert_client *c, const scenario *sc, int ptag, uint64_t seed) {
  MPI_Comm payload = mpi_payload_comm(MPI_COMM_WORLD);
  ck_assert(payload != MPI_COMM_NULL);
  unsigned char *data = cb_test_pattern(malloc(SIZE), SIZE, seed);
  unsigned char header[WIRE_HEADER_SIZE];
  wire_header h = {SIZE, 0, C, NCH, ptag, 0};
  wire_header_encode(&h, header);
  size_t cap = WIRE_CHUNK_PREFIX + C;
  unsigned char *msgs = calloc(NCH, cap);
  cubert_failure_record *recs = calloc(NCH, sizeof *recs);
  MPI_Request rq[1 + 2 * NCH];
  int n = 0;
  MPI_Isend(header, WIRE_HEADER_SIZE, MPI_BYTE, 1, TAG, MPI_COMM_WORLD, &rq[n++]);
  for (unsigned k = 0; k < NCH; k++) {
    if (sc->late && k == sc->broken + 1) {
      /* the receiver meets the broken chunk and cancels what it posted */
      struct timespec pause = {0, 300 * 1000 * 1000};
      nanosleep(&pause, NULL);
    }
    unsigned char *m = msgs + k * cap;
    long total = WIRE_CHUNK_PREFIX + C; /* the message: prefix and bytes */
    if (k == sc->broken) total += sc->delta;
    size_t len = total > WIRE_CHUNK_PREFIX ? (size_t)(total - WIRE_CHUNK_PREFIX) : 0;
    bool unread = (k == sc->broken && sc->broken_unread) || (sc->unread && k == sc->unread);
    memcpy(m + WIRE_CHUNK_PREFIX, data + (size_t)k * C, len < C ? len : C);
    wire_put64(m, wire_checksum(m + WIRE_CHUNK_PREFIX, len));
    wire_put64(m + 8, unread ? WIRE_CHUNK_UNREAD : 0);
    MPI_Isend(m, (int)total, MPI_BYTE, 1, ptag, payload, &rq[n++]);
    if (unread) {
      char why[80];
      snprintf(why, sizeof why, "chunk %u unread on the sender", k);
      const cubert_failure *f = NULL;
      ck_assert_int_eq(cubert_failure_create(c, CUBERT_ERR_LAUNCH, why, &f), CUBERT_OK);
      ck_assert_int_eq(cubert_failure_export(f, &recs[k]), CUBERT_OK);
      cubert_failure_release(f);
      MPI_Isend(&recs[k], CUBERT_FAILURE_RECORD_SIZE, MPI_BYTE, 1, ptag + 1, payload, &rq[n++]);
    }
  }
  int done = 0;
  for (double t0 = now(); !done && now() - t0 < 10.0;) MPI_Testall(n, rq, &done, MPI_STATUSES_IGNORE);
  if (!done)
    for (int i = 0; i < n; i++)
      if (rq[i] != MPI_REQUEST_NULL) MPI_Request_free(&rq[i]); /* the job is aborted after the failure */
  free(data);
  if (done) {
    free(msgs);
    free(recs);
  }
  return done;
}

START_TEST(test_broken_chunk_leaves_no_message_behind) {
  cb_test_env env;
  cubert_runtime_options o;
  cb_test_options("host", &o);
  o.host_devices = 1;
  ck_assert(cb_test_open_with(0, &o, 1, &env));
  cubert_client *c = env.clients[0];
  for (unsigned i = 0; i < NSCEN; i++) {
    const scenario *sc = &scenarios[i];
    int ptag = 1000 + 2 * (int)i;
    uint64_t seed = 70 + i;
    if (rank == 0) {
      int done = send_broken(c, sc, ptag, seed);
      MPI_Send(&done, 1, MPI_INT, 1, 8, MPI_COMM_WORLD);
      int checked = 0; /* the next exchange only once rank 1 has probed for this one's messages */
      MPI_Recv(&checked, 1, MPI_INT, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      ck_assert_msg(done, "%s: the sender's sends did not complete in 10 s (a message of the exchange was left "
                    "unreceived)", sc->name);
      continue;
    }
    if (rank != 1) continue;
    cubert_handle *h = NULL;
    ck_assert_int_eq(cubert_handle_empty(c, SIZE, &h), CUBERT_OK);
    unsigned char fill = 0xee;
    ck_assert_int_eq(cubert_handle_fill(c, h, &fill, 1), CUBERT_OK);
    cubert_status st = cubert_mpi_recv(c, h, 0, TAG, MPI_COMM_WORLD, NULL);
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", cubert_last_error_message());
    int done = 0;
    MPI_Recv(&done, 1, MPI_INT, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* nothing of the exchange is left for a later receive */
    MPI_Comm payload = mpi_payload_comm(MPI_COMM_WORLD);
    int left = 0;
    MPI_Status ps;
    for (double t0 = now(); !left && now() - t0 < 0.2;) MPI_Iprobe(0, MPI_ANY_TAG, payload, &left, &ps);
    int checked = 1;
    MPI_Send(&checked, 1, MPI_INT, 0, 9, MPI_COMM_WORLD);
    int lc = 0;
    if (left) MPI_Get_count(&ps, MPI_BYTE, &lc);
    ck_assert_msg(!left, "%s: a message of %d bytes with tag %d was left unreceived", sc->name, lc,
                  left ? ps.MPI_TAG : 0);
    ck_assert_msg(done, "%s: the sender's sends did not complete", sc->name);
    ck_assert_int_eq(st, CUBERT_ERR_BACKEND);
    char broke[64];
    snprintf(broke, sizeof broke, "broke at byte %u", sc->broken * C);
    const char *at = strstr(msg, broke);
    ck_assert_msg(at != NULL, "%s: %s", sc->name, msg);
    ck_assert_msg(strstr(at + 1, "broke at") == NULL, "%s: the break is reported more than once: %s", sc->name, msg);
    cubert_sync(c);
    /* chunks before the break landed; every byte from it on is tainted:
     * an unread chunk with the sender's failure, the rest with the break's */
    unsigned char *want = cb_test_pattern(malloc(SIZE), SIZE, seed), *got = malloc(C);
    for (unsigned k = 0; k < NCH; k++) {
      cubert_handle *part = NULL;
      ck_assert_int_eq(cubert_handle_slice(h, (uint64_t)k * C, SIZE - (uint64_t)(k + 1) * C, &part), CUBERT_OK);
      cubert_status rs = cubert_handle_read(c, part, got, C);
      if (k < sc->broken) {
        ck_assert_msg(rs == CUBERT_OK && !memcmp(got, want + (size_t)k * C, C), "%s: chunk %u did not land",
                      sc->name, k);
      } else {
        ck_assert_msg(rs == CUBERT_ERR_TAINTED, "%s: chunk %u after the break reads %s", sc->name, k,
                      cubert_status_name(rs));
        bool unread = (k == sc->broken && sc->broken_unread) || (sc->unread && k == sc->unread);
        uint64_t base = cubert_handle_offset_start(part);
        for (uint64_t from = base; from < base + C;) {
          uint64_t s = 0, e = 0;
          const cubert_failure *f = NULL;
          ck_assert_int_eq(cubert_handle_tainted_range(c, part, from, &s, &e, &f), CUBERT_OK);
          ck_assert_msg(f != NULL, "%s: chunk %u has an untainted stretch at %llu", sc->name, k,
                        (unsigned long long)from);
          const char *fm = cubert_failure_message(f);
          char mine[64];
          snprintf(mine, sizeof mine, "chunk %u unread on the sender", k);
          ck_assert_msg(unread ? strstr(fm, mine) != NULL : strstr(fm, broke) != NULL,
                        "%s: chunk %u bytes %llu..%llu carry \"%s\"", sc->name, k, (unsigned long long)(s - base),
                        (unsigned long long)(e - base), fm);
          cubert_failure_release(f);
          from = e;
        }
      }
      cubert_handle_release(part);
    }
    free(want);
    free(got);
    cubert_handle_release(h);
  }
  cb_test_close(&env);
}
END_TEST

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  setenv("CK_FORK", "no", 1);
  if (cubert_mpi_init(MPI_COMM_WORLD) != CUBERT_OK) {
    fprintf(stderr, "cubert_mpi_init: %s\n", cubert_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm_set_errhandler(mpi_payload_comm(MPI_COMM_WORLD), MPI_ERRORS_RETURN);
  int rc = 0;
  if (rank < 2) {
    Suite *s = suite_create("mpi_recv_broken");
    TCase *tc = tcase_create("broken");
    tcase_set_timeout(tc, 100);
    tcase_add_test(tc, test_broken_chunk_leaves_no_message_behind);
    suite_add_tcase(s, tc);
    rc = cb_test_run(s);
    if (rc != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  }
  cubert_mpi_finalize(MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
