/* tests/test_faultinj_checker.c: the checker's model of docs/failures.md on
 * hand-built calls with known outcomes, the checker biting on made-up
 * observations (a planted stale read, false taint, wrong cause), the
 * scenario parser's errors, the program format, the HANG watchdog, the leak
 * check and the shrinking of a failing program. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/faultinj/campaign.h"
#include "tools/faultinj/checker.h"
#include "tools/faultinj/model.h"
#include "tools/faultinj/scenario.h"
#include "tests/testutil.h"

/* ------------------------------------------------------------ helpers */

static cb_fim_hit hit(cb_fim *m, uint64_t id, cubert_fault_kind fault, const char *op, cubert_status status, int device) {
  char text[64];
  snprintf(text, sizeof text, "injected fault #%llu (test)", (unsigned long long)id);
  cb_fim_hit h = {fault, "", status, device, cb_fim_cause_add(m, CB_FIM_CAUSE_INJECTION, id, text)};
  snprintf(h.operation, sizeof h.operation, "%s", op);
  return h;
}

static const cb_fim_hits none = {NULL, 0};

static cb_fim_hits one(const cb_fim_hit *h) {
  cb_fim_hits x = {h, 1};
  return x;
}

static int alloc_u32(cb_fim *m, int device, uint64_t size, uint32_t value) {
  uint8_t *d = malloc(size);
  for (uint64_t i = 0; i < size; i++) d[i] = (uint8_t)(value >> (8 * (i % 4)));
  cb_fim_outcome o = cb_fim_alloc_step(m, 0, device, size, d, none);
  free(d);
  ck_assert_int_eq(o.status, CUBERT_OK);
  return o.alloc;
}

static cb_fim_view view(int a, uint64_t s, uint64_t e) {
  cb_fim_view v = {a, s, e};
  return v;
}

static uint32_t u32_at(const cb_fim *m, int a, uint64_t off) {
  const uint8_t *b = m->allocs[a].bytes + off;
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* ------------------------------------------------------------ the model */

START_TEST(test_model_failed_launch_taints_whole_write_set) {
  cb_fim m;
  cb_fim_init(&m, 2);
  int x = alloc_u32(&m, 0, 256, 7);
  cb_fim_hit h = hit(&m, 1, CUBERT_FAULT_SCRIBBLE, "launch", CUBERT_ERR_LAUNCH, 0);
  cb_fim_view out = view(x, 0, 256);
  cb_fim_outcome o = cb_fim_launch(&m, 1, 0, CB_FIM_FILL_U32, &out, 5, -1, one(&h));
  ck_assert_int_eq(o.status, CUBERT_ERR_LAUNCH);
  ck_assert_uint_eq(cb_fim_taint_of(&m, out), cb_fim_bit(h.cause));
  ck_assert(!cb_fim_known(&m, view(x, 0, 4)));
  /* without a fault it runs: bytes known, taint released */
  o = cb_fim_launch(&m, 2, 0, CB_FIM_FILL_U32, &out, 9, -1, none);
  ck_assert_int_eq(o.status, CUBERT_OK);
  ck_assert_uint_eq(cb_fim_taint_of(&m, out), 0);
  ck_assert_uint_eq(u32_at(&m, x, 252), 9);
  cb_fim_free(&m);
}
END_TEST

START_TEST(test_model_skipped_kernel_passes_the_root_on) {
  cb_fim m;
  cb_fim_init(&m, 2);
  int x = alloc_u32(&m, 0, 256, 7), y = alloc_u32(&m, 0, 256, 1), z = alloc_u32(&m, 0, 256, 2);
  cb_fim_hit h = hit(&m, 1, CUBERT_FAULT_FAIL, "launch", CUBERT_ERR_LAUNCH, 0);
  cb_fim_view vx = view(x, 0, 256);
  cb_fim_launch(&m, 1, 0, CB_FIM_FILL_U32, &vx, 5, -1, one(&h));
  cb_fim_view args[2] = {vx, view(y, 0, 256)};
  cb_fim_outcome o = cb_fim_launch(&m, 2, 0, CB_FIM_COPY_U32, args, 0, -1, none);
  ck_assert_int_eq(o.status, CUBERT_ERR_TAINTED);
  ck_assert_uint_eq(o.roots, cb_fim_bit(h.cause));
  ck_assert_uint_eq(cb_fim_taint_of(&m, args[1]), cb_fim_bit(h.cause));
  /* and a copy from y: the same root, two links down */
  o = cb_fim_copy(&m, 3, 0, view(y, 0, 256), view(z, 0, 256), none);
  ck_assert_int_eq(o.status, CUBERT_ERR_TAINTED);
  ck_assert_uint_eq(cb_fim_taint_of(&m, view(z, 0, 256)), cb_fim_bit(h.cause));
  cb_fim_free(&m);
}
END_TEST

START_TEST(test_model_partial_overwrite_and_set_not_add) {
  cb_fim m;
  cb_fim_init(&m, 1);
  int x = alloc_u32(&m, 0, 256, 7);
  cb_fim_view all = view(x, 0, 256), head = view(x, 0, 128), tail = view(x, 128, 256);
  cb_fim_hit h1 = hit(&m, 1, CUBERT_FAULT_FAIL, "launch", CUBERT_ERR_LAUNCH, 0);
  cb_fim_launch(&m, 1, 0, CB_FIM_FILL_U32, &all, 1, -1, one(&h1));
  cb_fim_launch(&m, 2, 0, CB_FIM_FILL_U32, &head, 4, -1, none);
  ck_assert_uint_eq(cb_fim_taint_of(&m, head), 0);
  ck_assert_uint_eq(cb_fim_taint_of(&m, tail), cb_fim_bit(h1.cause));
  /* the same failure again on the whole view: set, never add */
  cb_fim_hit h2 = hit(&m, 2, CUBERT_FAULT_FAIL, "launch", CUBERT_ERR_LAUNCH, 0);
  cb_fim_launch(&m, 3, 0, CB_FIM_FILL_U32, &all, 1, -1, one(&h2));
  ck_assert_uint_eq(cb_fim_taint_of(&m, all), cb_fim_bit(h2.cause));
  cb_fim_free(&m);
}
END_TEST

START_TEST(test_model_owner_to_peer_and_peer_to_owner) {
  cb_fim m;
  cb_fim_init(&m, 2);
  int x = alloc_u32(&m, 0, 256, 7), y = alloc_u32(&m, 1, 256, 9);
  cb_fim_view vx = view(x, 0, 256), vy = view(y, 0, 256);
  /* a peer buffer that was never shared is refused before anything */
  cb_fim_view pr[2] = {vx, vy};
  ck_assert_int_eq(cb_fim_launch(&m, 1, 1, CB_FIM_COPY_PEER_READ, pr, 0, -1, none).status, CUBERT_ERR_NOT_SHARED);
  ck_assert_int_eq(cb_fim_share(&m, 0, vx, none).status, CUBERT_OK);
  cb_fim_hit h = hit(&m, 1, CUBERT_FAULT_FAIL, "launch", CUBERT_ERR_LAUNCH, 0);
  cb_fim_launch(&m, 2, 0, CB_FIM_FILL_U32, &vx, 5, -1, one(&h));
  ck_assert_int_eq(cb_fim_launch(&m, 3, 1, CB_FIM_COPY_PEER_READ, pr, 0, -1, none).status, CUBERT_ERR_TAINTED);
  ck_assert_uint_eq(cb_fim_taint_of(&m, vy), cb_fim_bit(h.cause));
  /* peer to owner: B fails to write x; then repairs it */
  cb_fim_view pw[2] = {vy, vx};
  cb_fim_launch(&m, 4, 0, CB_FIM_FILL_U32, &vx, 5, -1, none);
  cb_fim_launch(&m, 5, 1, CB_FIM_FILL_U32, &vy, 3, -1, none);
  cb_fim_hit h2 = hit(&m, 2, CUBERT_FAULT_FAIL, "launch", CUBERT_ERR_LAUNCH, 1);
  ck_assert_int_eq(cb_fim_launch(&m, 6, 1, CB_FIM_COPY_PEER_WRITE, pw, 0, -1, one(&h2)).status, CUBERT_ERR_LAUNCH);
  ck_assert_uint_eq(cb_fim_taint_of(&m, vx), cb_fim_bit(h2.cause));
  ck_assert_int_eq(cb_fim_launch(&m, 7, 1, CB_FIM_COPY_PEER_WRITE, pw, 0, -1, none).status, CUBERT_OK);
  ck_assert_uint_eq(cb_fim_taint_of(&m, vx), 0);
  ck_assert_uint_eq(u32_at(&m, x, 0), 3);
  cb_fim_free(&m);
}
END_TEST

START_TEST(test_model_async_failure_replays_in_order) {
  cb_fim m;
  cb_fim_init(&m, 1);
  int x = alloc_u32(&m, 0, 256, 7), y = alloc_u32(&m, 0, 256, 1), z = alloc_u32(&m, 0, 256, 2);
  cb_fim_view vx = view(x, 0, 256), vy = view(y, 0, 256), y1 = view(y, 128, 256), vz = view(z, 0, 256);
  cb_fim_hit h = hit(&m, 1, CUBERT_FAULT_ASYNC, "launch", CUBERT_ERR_LAUNCH, 0);
  cb_fim_outcome o = cb_fim_launch(&m, 1, 0, CB_FIM_FILL_U32, &vx, 5, -1, one(&h));
  ck_assert_int_eq(o.status, CUBERT_OK);
  ck_assert(o.pending && cb_fim_any_pending(&m));
  cb_fim_view args[2] = {vx, vy};
  /* not found yet: the copy runs */
  ck_assert_int_eq(cb_fim_launch(&m, 2, 0, CB_FIM_COPY_U32, args, 0, -1, none).status, CUBERT_OK);
  cb_fim_launch(&m, 3, 0, CB_FIM_FILL_U32, &y1, 6, -1, none);
  cb_fim_launch(&m, 4, 0, CB_FIM_FILL_U32, &vz, 8, -1, none);
  ck_assert_uint_eq(cb_fim_taint_of(&m, vy), 0); /* nothing visible before the fence */
  o = cb_fim_sync(&m, 0, none);
  ck_assert_int_eq(o.status, CUBERT_ERR_LAUNCH);
  ck_assert(!cb_fim_any_pending(&m));
  ck_assert_uint_eq(cb_fim_taint_of(&m, vx), cb_fim_bit(h.cause));
  ck_assert_uint_eq(cb_fim_taint_of(&m, view(y, 0, 128)), cb_fim_bit(h.cause));
  ck_assert_uint_eq(cb_fim_taint_of(&m, y1), 0); /* a later write keeps its verdict */
  ck_assert_uint_eq(u32_at(&m, y, 128), 6);
  ck_assert_uint_eq(cb_fim_taint_of(&m, vz), 0);
  ck_assert_int_eq(cb_fim_sync(&m, 0, none).status, CUBERT_OK); /* found once */
  cb_fim_free(&m);
}
END_TEST

/* Rule 8, once per stream: a stream's sync reports its own work's failures
 * only; the device's sync reports what is left and applies them all. A
 * sticky one may surface at any stream's sync. */
START_TEST(test_model_stream_sync_reports_its_own_streams_failures) {
  cb_fim m;
  cb_fim_init(&m, 1);
  int x = alloc_u32(&m, 0, 256, 7), y = alloc_u32(&m, 0, 256, 1);
  cb_fim_view vx = view(x, 0, 256), vy = view(y, 0, 256);
  m.stream = 2;
  cb_fim_hit h = hit(&m, 1, CUBERT_FAULT_ASYNC, "launch", CUBERT_ERR_LAUNCH, 0);
  ck_assert(cb_fim_launch(&m, 1, 0, CB_FIM_FILL_U32, &vx, 5, -1, one(&h)).pending);
  m.stream = 1;
  cb_fim_launch(&m, 2, 0, CB_FIM_FILL_U32, &vy, 6, -1, none);
  cb_fim_outcome o = cb_fim_sync_stream(&m, 0, 1, none);
  ck_assert_int_eq(o.status, CUBERT_OK);
  ck_assert_uint_eq(o.also, 0);
  o = cb_fim_sync_stream(&m, 0, 2, none);
  ck_assert_int_eq(o.status, CUBERT_ERR_LAUNCH);
  ck_assert_uint_eq(o.roots, cb_fim_bit(h.cause));
  ck_assert_int_eq(cb_fim_sync_stream(&m, 0, 2, none).status, CUBERT_OK); /* reported once */
  ck_assert(cb_fim_any_pending(&m)); /* applied at the device's sync */
  o = cb_fim_sync(&m, 0, none);
  ck_assert_int_eq(o.status, CUBERT_OK); /* nothing left to report */
  ck_assert_uint_eq(cb_fim_taint_of(&m, vx), cb_fim_bit(h.cause));
  ck_assert_uint_eq(cb_fim_taint_of(&m, vy), 0);
  /* a sticky one on stream 2 may surface at stream 1's sync */
  m.stream = 2;
  cb_fim_hit l = hit(&m, 2, CUBERT_FAULT_ASYNC_DEVICE_LOST, "launch", CUBERT_ERR_DEVICE_LOST, 0);
  cb_fim_launch(&m, 3, 0, CB_FIM_FILL_U32, &vy, 8, -1, one(&l));
  o = cb_fim_sync_stream(&m, 0, 1, none);
  ck_assert_int_eq(o.status, CUBERT_OK);
  ck_assert(o.also & ((uint64_t)1 << CUBERT_ERR_DEVICE_LOST));
  ck_assert_int_eq(cb_fim_sync(&m, 0, none).status, CUBERT_ERR_DEVICE_LOST);
  ck_assert_int_eq(m.dev[0].lost_cause, l.cause);
  cb_fim_free(&m);
}
END_TEST

START_TEST(test_model_device_lost) {
  cb_fim m;
  cb_fim_init(&m, 2);
  int x = alloc_u32(&m, 0, 64, 7), y = alloc_u32(&m, 1, 64, 9);
  cb_fim_view vx = view(x, 0, 64), vy = view(y, 0, 64);
  cb_fim_share(&m, 0, vx, none);
  cb_fim_hit h = hit(&m, 1, CUBERT_FAULT_DEVICE_LOST, "launch", CUBERT_ERR_DEVICE_LOST, 0);
  ck_assert_int_eq(cb_fim_launch(&m, 1, 0, CB_FIM_FILL_U32, &vx, 1, -1, one(&h)).status, CUBERT_ERR_DEVICE_LOST);
  ck_assert_int_eq(m.dev[0].lost_cause, h.cause);
  /* every later call on it fails; a peer reading its memory is not run */
  ck_assert_int_eq(cb_fim_write(&m, 2, 0, vx, "0123456789012345678901234567890123456789012345678901234567890123", none).status,
                   CUBERT_ERR_DEVICE_LOST);
  cb_fim_view pr[2] = {vx, vy};
  ck_assert_int_eq(cb_fim_launch(&m, 3, 1, CB_FIM_COPY_PEER_READ, pr, 0, -1, none).status, CUBERT_ERR_TAINTED);
  ck_assert_uint_eq(cb_fim_taint_of(&m, vy), cb_fim_bit(h.cause));
  ck_assert_int_eq(cb_fim_copy(&m, 4, 1, vx, vy, none).status, CUBERT_ERR_DEVICE_LOST);
  ck_assert_int_eq(cb_fim_sync(&m, 1, none).status, CUBERT_OK);
  cb_fim_free(&m);
}
END_TEST

START_TEST(test_model_checksum_matches_the_kernel) {
  cb_fim m;
  cb_fim_init(&m, 1);
  int x = alloc_u32(&m, 0, 16, 0), acc = alloc_u32(&m, 0, 8, 0);
  uint32_t words[4] = {1, 2, 3, 0xffffffffu};
  cb_fim_write(&m, 1, 0, view(x, 0, 16), words, none);
  cb_fim_view args[2] = {view(x, 0, 16), view(acc, 0, 8)};
  cb_fim_launch(&m, 2, 0, CB_FIM_CHECKSUM_U32, args, 0, -1, none);
  uint64_t want = 0;
  for (uint64_t i = 0; i < 4; i++) want += (uint64_t)words[i] ^ (i * 2654435761ull);
  uint64_t got = 0;
  for (int i = 0; i < 8; i++) got |= (uint64_t)m.allocs[acc].bytes[i] << (8 * i);
  ck_assert_uint_eq(got, want);
  cb_fim_free(&m);
}
END_TEST

START_TEST(test_model_strided_pieces_taint_and_repair_exactly) {
  cb_fim m;
  cb_fim_init(&m, 2);
  int x = alloc_u32(&m, 0, 256, 7), y = alloc_u32(&m, 1, 256, 1);
  /* columns 2..4 of 4 rows of 16 u32 (64 bytes a row) */
  cb_fim_view col[4], cy[4];
  for (int i = 0; i < 4; i++) {
    col[i] = view(x, (uint64_t)i * 64 + 8, (uint64_t)i * 64 + 16);
    cy[i] = view(y, (uint64_t)i * 64 + 8, (uint64_t)i * 64 + 16);
  }
  cb_fim_hit h = hit(&m, 1, CUBERT_FAULT_PARTIAL, "write", CUBERT_ERR_COPY, 0);
  cb_fim_outcome o = cb_fim_write_pieces(&m, 1, 0, col, 4, NULL, one(&h));
  ck_assert_int_eq(o.status, CUBERT_ERR_COPY);
  for (int i = 0; i < 4; i++) ck_assert_uint_eq(cb_fim_taint_of(&m, col[i]), cb_fim_bit(h.cause));
  /* the bytes between the pieces keep their value and stay clean */
  ck_assert_uint_eq(cb_fim_taint_of(&m, view(x, 16, 72)), 0);
  ck_assert_uint_eq(u32_at(&m, x, 16), 7);
  ck_assert_uint_eq(u32_at(&m, x, 68), 7);
  /* a peer copy from the tainted columns: refused, exactly the destination pieces carry it */
  o = cb_fim_copy_pieces(&m, 2, 1, col, cy, 4, none);
  ck_assert_int_eq(o.status, CUBERT_ERR_TAINTED);
  ck_assert_uint_eq(cb_fim_taint_of(&m, cy[3]), cb_fim_bit(h.cause));
  ck_assert_uint_eq(cb_fim_taint_of(&m, view(y, 16, 72)), 0);
  /* a contiguous write over the first two rows repairs their pieces only */
  uint8_t data[128];
  memset(data, 3, sizeof data);
  ck_assert_int_eq(cb_fim_write(&m, 3, 0, view(x, 0, 128), data, none).status, CUBERT_OK);
  ck_assert_uint_eq(cb_fim_taint_of(&m, col[1]), 0);
  ck_assert_uint_eq(cb_fim_taint_of(&m, col[2]), cb_fim_bit(h.cause));
  /* a strided write repairs its pieces, packed data in order */
  uint8_t packed[32];
  for (int i = 0; i < 32; i++) packed[i] = (uint8_t)i;
  ck_assert_int_eq(cb_fim_write_pieces(&m, 4, 0, col, 4, packed, none).status, CUBERT_OK);
  ck_assert_uint_eq(cb_fim_taint_of(&m, col[3]), 0);
  ck_assert_uint_eq(m.allocs[x].bytes[3 * 64 + 8], 24);
  ck_assert_uint_eq(u32_at(&m, x, 3 * 64 + 16), 7);
  cb_fim_free(&m);
}
END_TEST

START_TEST(test_model_cause_of_message) {
  cb_fim m;
  cb_fim_init(&m, 1);
  int a = cb_fim_cause_add(&m, CB_FIM_CAUSE_INJECTION, 12, "x");
  int b = cb_fim_cause_add(&m, CB_FIM_CAUSE_TAG, 77, "y");
  ck_assert_int_eq(cb_fim_cause_of_message(&m, "found at a fence: injected fault #12 (rule 3): copy ..."), a);
  ck_assert_int_eq(cb_fim_cause_of_message(&m, "peer device 1 is lost: injected fault #12 (rule 1): ..."), a);
  ck_assert_int_eq(cb_fim_cause_of_message(&m, "host:0: kernel `k` failed: deliberate failure (tag 77)"), b);
  ck_assert_int_eq(cb_fim_cause_of_message(&m, "injected fault #13 (rule 3)"), -1);
  ck_assert_int_eq(cb_fim_cause_of_message(&m, "no cause here"), -1);
  cb_fim_free(&m);
}
END_TEST

/* ------------------------------------------------------------ the checker bites */

typedef struct fake {
  cb_fim m;
  cb_fi_result res;
  cb_fi_checker c;
  cb_fi_program p;
  int x;
  int cause1, cause2;
} fake;

/* x: 256 bytes of 7; bytes 0..128 tainted by injection #1. */
static void fake_init(fake *f) {
  memset(f, 0, sizeof *f);
  cb_fim_init(&f->m, 1);
  f->x = alloc_u32(&f->m, 0, 256, 7);
  cb_fim_hit h = hit(&f->m, 1, CUBERT_FAULT_FAIL, "launch", CUBERT_ERR_LAUNCH, 0);
  f->cause1 = h.cause;
  f->cause2 = cb_fim_cause_add(&f->m, CB_FIM_CAUSE_INJECTION, 2, "injected fault #2");
  cb_fim_view head = view(f->x, 0, 128);
  cb_fim_launch(&f->m, 1, 0, CB_FIM_FILL_U32, &head, 5, -1, one(&h));
  cb_fi_program_init(&f->p, "planted", "test");
  f->c = (cb_fi_checker){&f->m, &f->p, NULL, &f->res, 0, 0, {0}, {0}, 0};
}

static void fake_free(fake *f) {
  cb_fi_result_free(&f->res);
  cb_fi_program_free(&f->p);
  cb_fim_free(&f->m);
}

START_TEST(test_checker_flags_a_planted_stale_read) {
  fake f;
  fake_init(&f);
  uint8_t bytes[256];
  memset(bytes, 0, sizeof bytes);
  cb_fi_observation o = {CUBERT_OK, bytes, NULL, 0};
  ck_assert_uint_eq(cb_fi_check_observation(&f.c, view(f.x, 0, 256), &o, "read of x"), 1);
  ck_assert_int_eq(f.res.violations[0].kind, CB_FI_STALE_READ);
  ck_assert_ptr_nonnull(strstr(f.res.violations[0].message, "injected fault #1"));
  /* the clean half read alone: right bytes pass, a wrong byte is stale */
  for (int i = 0; i < 128; i++) bytes[128 + i] = (uint8_t)(7u >> (8 * (i % 4)));
  o.bytes = bytes + 128;
  ck_assert_uint_eq(cb_fi_check_observation(&f.c, view(f.x, 128, 256), &o, "read of x's tail"), 0);
  bytes[200] ^= 1;
  ck_assert_uint_eq(cb_fi_check_observation(&f.c, view(f.x, 128, 256), &o, "read of x's tail"), 1);
  ck_assert_int_eq(f.res.violations[1].kind, CB_FI_STALE_READ);
  ck_assert_uint_eq(f.res.by_violation[CB_FI_STALE_READ], 2);
  fake_free(&f);
}
END_TEST

START_TEST(test_checker_flags_a_planted_false_taint) {
  fake f;
  fake_init(&f);
  /* refused for the whole view: bytes 128..256 are good */
  cb_fi_obs_entry e = {"injected fault #1 (rule 1): ...", 0, 256};
  cb_fi_observation o = {CUBERT_ERR_TAINTED, NULL, &e, 1};
  ck_assert_uint_eq(cb_fi_check_observation(&f.c, view(f.x, 0, 256), &o, "read of x"), 1);
  ck_assert_int_eq(f.res.violations[0].kind, CB_FI_FALSE_TAINT);
  ck_assert_ptr_nonnull(strstr(f.res.violations[0].message, "128..256"));
  fake_free(&f);
}
END_TEST

START_TEST(test_checker_flags_a_wrong_cause_and_a_missing_range) {
  fake f;
  fake_init(&f);
  cb_fi_obs_entry e = {"found at a fence: injected fault #2 (rule 2)", 0, 128};
  cb_fi_observation o = {CUBERT_ERR_TAINTED, NULL, &e, 1};
  ck_assert_uint_eq(cb_fi_check_observation(&f.c, view(f.x, 0, 256), &o, "read of x"), 1);
  ck_assert_int_eq(f.res.violations[0].kind, CB_FI_WRONG_CAUSE);
  /* the right cause, but only half the tainted bytes named: the rest would
   * be handed out alone */
  cb_fi_obs_entry e2 = {"injected fault #1 (rule 1)", 0, 64};
  cb_fi_observation o2 = {CUBERT_ERR_TAINTED, NULL, &e2, 1};
  ck_assert_uint_eq(cb_fi_check_observation(&f.c, view(f.x, 0, 256), &o2, "read of x"), 1);
  ck_assert_int_eq(f.res.violations[1].kind, CB_FI_STALE_READ);
  /* exactly right: nothing, and the clean range is left for a read alone */
  cb_fi_obs_entry e3 = {"injected fault #1 (rule 1)", 0, 128};
  cb_fi_observation o3 = {CUBERT_ERR_TAINTED, NULL, &e3, 1};
  ck_assert_uint_eq(cb_fi_check_observation(&f.c, view(f.x, 0, 256), &o3, "read of x"), 0);
  ck_assert_uint_eq(f.c.nclean, 1);
  ck_assert_uint_eq(f.c.clean_start[0], 128);
  ck_assert_uint_eq(f.c.clean_end[0], 256);
  fake_free(&f);
}
END_TEST

/* A refusal the model does not justify is flagged whatever entries it
 * carries: an empty range (a repair that left [end,end) behind), a range
 * outside the bytes read, or a good view refused with the right cause. */
START_TEST(test_checker_flags_refusals_naming_no_bytes_or_bytes_not_read) {
  fake f;
  fake_init(&f);
  /* the clean tail, refused naming an empty range at its start */
  cb_fi_obs_entry e = {"injected fault #1 (rule 1)", 128, 128};
  cb_fi_observation o = {CUBERT_ERR_TAINTED, NULL, &e, 1};
  ck_assert_uint_eq(cb_fi_check_observation(&f.c, view(f.x, 128, 256), &o, "read of x's tail"), 1);
  ck_assert_int_eq(f.res.violations[0].kind, CB_FI_FALSE_TAINT);
  ck_assert_ptr_nonnull(strstr(f.res.violations[0].message, "no bytes at all"));
  /* the whole view, tainted head named right, plus an empty range */
  cb_fi_obs_entry two[2] = {{"injected fault #1 (rule 1)", 0, 128}, {"injected fault #1 (rule 1)", 200, 200}};
  cb_fi_observation o2 = {CUBERT_ERR_TAINTED, NULL, two, 2};
  ck_assert_uint_eq(cb_fi_check_observation(&f.c, view(f.x, 0, 256), &o2, "read of x"), 1);
  ck_assert_int_eq(f.res.violations[1].kind, CB_FI_FALSE_TAINT);
  /* a range reaching past the bytes read */
  cb_fi_obs_entry wide = {"injected fault #1 (rule 1)", 0, 200};
  cb_fi_observation o3 = {CUBERT_ERR_TAINTED, NULL, &wide, 1};
  ck_assert_uint_eq(cb_fi_check_observation(&f.c, view(f.x, 0, 128), &o3, "read of x's head"), 1);
  ck_assert_ptr_nonnull(strstr(f.res.violations[2].message, "outside what was read"));
  /* a good view refused naming no failure */
  cb_fi_observation o4 = {CUBERT_ERR_TAINTED, NULL, NULL, 0};
  ck_assert_uint_eq(cb_fi_check_observation(&f.c, view(f.x, 128, 256), &o4, "read of x's tail"), 1);
  ck_assert_int_eq(f.res.violations[3].kind, CB_FI_FALSE_TAINT);
  fake_free(&f);
}
END_TEST

START_TEST(test_checker_flags_reads_of_a_lost_device) {
  fake f;
  fake_init(&f);
  cb_fim_hit h = hit(&f.m, 3, CUBERT_FAULT_DEVICE_LOST, "sync", CUBERT_ERR_DEVICE_LOST, 0);
  cb_fim_sync(&f.m, 0, one(&h));
  uint8_t bytes[256] = {0};
  cb_fi_observation o = {CUBERT_OK, bytes, NULL, 0};
  ck_assert_uint_eq(cb_fi_check_observation(&f.c, view(f.x, 128, 256), &o, "read"), 1);
  ck_assert_int_eq(f.res.violations[0].kind, CB_FI_STALE_READ);
  cb_fi_obs_entry e = {"injected fault #3 (rule 1): device 0 lost during sync", 0, 0};
  cb_fi_observation lost = {CUBERT_ERR_DEVICE_LOST, NULL, &e, 1};
  ck_assert_uint_eq(cb_fi_check_observation(&f.c, view(f.x, 128, 256), &lost, "read"), 0);
  fake_free(&f);
}
END_TEST

/* ------------------------------------------------------------ parser and format */

static void parse_error(const char *text, const char *want) {
  cb_fi_suite s = {0};
  char err[512];
  ck_assert_int_eq(cb_fi_scenario_parse(text, "t.fi", &s, err, sizeof err), CUBERT_ERR_PARSE);
  ck_assert_msg(strstr(err, want) != NULL, "error `%s` does not contain `%s`", err, want);
  ck_assert_uint_eq(s.n, 0);
  cb_fi_suite_free(&s);
}

START_TEST(test_parse_errors_name_file_line_and_column) {
  parse_error("scenario a\n  devices 1\n  create x on B size 64 u32 1\nend\n", "t.fi:3:15:");
  parse_error("scenario a\n  devices 1\n  fill y u32 1\nend\n", "t.fi:3:8: no view `y`");
  parse_error("scenario a\n  devices 2\n  create x on A size 64 u32 1\n  create y on B size 32 u32 1\n  copy x to y\nend\n",
              "t.fi:5:13:");
  parse_error("scenario a\n  devices 1\n  create x on A size 64 u32 1\n  launch fill_u32 on A out=x value=1 ! partial\nend\n",
              "t.fi:4:40: a `partial` fault cannot act on this step");
  parse_error("scenario a\n  devices 1\n  fault launch nht=3\nend\n", "t.fi:3:16: fault rules:");
  parse_error("scenario a\n  devices 2\n  create x on A size 64 u32 1\n  create y on B size 64 u32 1\n"
              "  launch copy_peer_read on B in=x out=y\nend\n",
              "never shared");
  parse_error("scenario a\n  devices 1\n  create x on A size 64 u32 1\n", "t.fi:4:1: scenario `a` (line 1) has no `end`");
  parse_error("scenario a\n  devices 1\n  create x on A size 64 u32 1\n  launch fail_u32 on A out=x value=1\nend\n",
              "backend host");
}
END_TEST

START_TEST(test_programs_format_back_to_what_they_parse_from) {
  cb_fi_suite s = {0};
  char err[512];
  ck_assert_int_eq(cb_fi_scenario_builtin(&s, err, sizeof err), CUBERT_OK);
  ck_assert_uint_ge(s.n, 18);
  for (size_t i = 0; i < s.n; i++) {
    char *a = cb_fi_program_format(&s.v[i]);
    ck_assert_ptr_nonnull(a);
    cb_fi_suite again = {0};
    ck_assert_msg(cb_fi_scenario_parse(a, "formatted", &again, err, sizeof err) == CUBERT_OK, "%s:\n%s", err, a);
    ck_assert_uint_eq(again.n, 1);
    char *b = cb_fi_program_format(&again.v[0]);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    cb_fi_suite_free(&again);
  }
  cb_fi_suite_free(&s);
}
END_TEST

/* ------------------------------------------------------------ runs */

static cb_fi_program parse_one(const char *text) {
  cb_fi_suite s = {0};
  char err[512];
  ck_assert_msg(cb_fi_scenario_parse(text, "test", &s, err, sizeof err) == CUBERT_OK, "%s", err);
  ck_assert_uint_eq(s.n, 1);
  cb_fi_program p = s.v[0];
  free(s.v);
  return p;
}

START_TEST(test_a_step_that_never_ends_is_a_hang) {
  setenv("CUBERT_FAULTS", "", 1);
  cb_fi_program p = parse_one("scenario slow\n  devices 1\n  backend host\n  timeout 300\n"
                              "  create x on A size 64 u32 1\n  launch sleep_u32 on A out=x value=1500\nend\n");
  cb_fi_run_config rc = {0};
  cb_fi_result r;
  ck_assert_int_eq(cb_fi_run(&p, &rc, &r), CUBERT_ERR_TIMEOUT);
  ck_assert(r.hang);
  ck_assert_uint_eq(r.by_violation[CB_FI_HANG], 1);
  ck_assert_ptr_nonnull(strstr(r.violations[0].message, "did not finish within 300 ms"));
  ck_assert_int_eq(r.violations[0].step, 2);
  cb_fi_result_free(&r);
  cb_fi_program_free(&p);
  /* the abandoned run finishes and frees itself */
  struct timespec ts = {2, 0};
  nanosleep(&ts, NULL);
}
END_TEST

START_TEST(test_a_handle_kept_past_the_end_is_a_leak) {
  cb_fi_program p = parse_one("scenario keep\n  devices 1\n  create x on A size 4096 u32 1\n  fill x u32 2\nend\n");
  cb_fi_run_config rc = {0};
  cb_fi_result r;
  ck_assert_int_eq(cb_fi_run(&p, &rc, &r), CUBERT_OK);
  ck_assert_uint_eq(r.nviolations, 0);
  cb_fi_result_free(&r);
  rc.test_keep_handle = true;
  ck_assert_int_eq(cb_fi_run(&p, &rc, &r), CUBERT_OK);
  ck_assert_uint_eq(r.by_violation[CB_FI_LEAK], 1);
  ck_assert_ptr_nonnull(strstr(r.violations[0].message, "bytes in use"));
  cb_fi_result_free(&r);
  cb_fi_program_free(&p);
}
END_TEST

START_TEST(test_a_failing_program_shrinks_to_its_cause) {
  /* a wrong expectation at the end, with noise around the step it needs */
  cb_fi_program p = parse_one(
      "scenario noisy\n  devices 2\n"
      "  create a on A size 256 u32 1\n  create b on B size 256 u32 2\n  create x on A size 256 u32 3\n"
      "  fill a u32 4\n  launch fill_u32 on B out=b value=5\n  share a\n  launch copy_peer_read on B in=a out=b\n"
      "  launch fill_u32 on A out=x value=6 ! fail\n"
      "  fill b u32 7\n  slice a1 of a at 0 size 128\n  fill a1 u32 8\n  sync all\n"
      "  expect x clean\nend\n");
  cb_fi_run_config rc = {0};
  cb_fi_result r;
  ck_assert_int_eq(cb_fi_run(&p, &rc, &r), CUBERT_OK);
  ck_assert_uint_ge(r.by_violation[CB_FI_EXPECTATION], 1);
  cb_fi_result_free(&r);
  cb_fi_program best;
  size_t runs = 0;
  ck_assert(cb_fi_minimize(&p, &rc, CB_FI_EXPECTATION, 200, &best, &runs));
  char *text = cb_fi_program_format(&best);
  ck_assert_msg(best.nsteps == 3, "shrunk to %zu steps in %zu runs:\n%s", best.nsteps, runs, text);
  ck_assert_ptr_nonnull(strstr(text, "create x on A size 256"));
  ck_assert_ptr_nonnull(strstr(text, "launch fill_u32 on A out=x value=6 ! fail"));
  ck_assert_ptr_nonnull(strstr(text, "expect x clean"));
  free(text);
  cb_fi_program_free(&best);
  cb_fi_program_free(&p);
}
END_TEST

START_TEST(test_campaign_programs_come_from_their_seed) {
  cb_fi_gen_config g;
  cb_fi_gen_config_init(&g);
  cb_fi_program a, b, c;
  ck_assert(cb_fi_campaign_program(42, &g, &a));
  ck_assert(cb_fi_campaign_program(42, &g, &b));
  ck_assert(cb_fi_campaign_program(43, &g, &c));
  char *ta = cb_fi_program_format(&a), *tb = cb_fi_program_format(&b), *tc = cb_fi_program_format(&c);
  ck_assert_str_eq(ta, tb);
  ck_assert_str_ne(ta, tc);
  ck_assert_ptr_nonnull(strstr(ta, " ! ")); /* some steps carry faults */
  /* and they parse as scenario files */
  cb_fi_suite s = {0};
  char err[512];
  ck_assert_msg(cb_fi_scenario_parse(ta, "gen", &s, err, sizeof err) == CUBERT_OK, "%s\n%s", err, ta);
  cb_fi_suite_free(&s);
  free(ta);
  free(tb);
  free(tc);
  cb_fi_program_free(&a);
  cb_fi_program_free(&b);
  cb_fi_program_free(&c);
}
END_TEST

int main(void) {
  Suite *s = suite_create("faultinj_checker");
  TCase *model = tcase_create("model");
  tcase_add_test(model, test_model_failed_launch_taints_whole_write_set);
  tcase_add_test(model, test_model_skipped_kernel_passes_the_root_on);
  tcase_add_test(model, test_model_partial_overwrite_and_set_not_add);
  tcase_add_test(model, test_model_owner_to_peer_and_peer_to_owner);
  tcase_add_test(model, test_model_async_failure_replays_in_order);
  tcase_add_test(model, test_model_stream_sync_reports_its_own_streams_failures);
  tcase_add_test(model, test_model_device_lost);
  tcase_add_test(model, test_model_checksum_matches_the_kernel);
  tcase_add_test(model, test_model_strided_pieces_taint_and_repair_exactly);
  tcase_add_test(model, test_model_cause_of_message);
  suite_add_tcase(s, model);
  TCase *bites = tcase_create("bites");
  tcase_add_test(bites, test_checker_flags_a_planted_stale_read);
  tcase_add_test(bites, test_checker_flags_a_planted_false_taint);
  tcase_add_test(bites, test_checker_flags_a_wrong_cause_and_a_missing_range);
  tcase_add_test(bites, test_checker_flags_refusals_naming_no_bytes_or_bytes_not_read);
  tcase_add_test(bites, test_checker_flags_reads_of_a_lost_device);
  suite_add_tcase(s, bites);
  TCase *text = tcase_create("text");
  tcase_add_test(text, test_parse_errors_name_file_line_and_column);
  tcase_add_test(text, test_programs_format_back_to_what_they_parse_from);
  tcase_add_test(text, test_campaign_programs_come_from_their_seed);
  suite_add_tcase(s, text);
  TCase *runs = tcase_create("runs");
  tcase_add_test(runs, test_a_step_that_never_ends_is_a_hang);
  tcase_add_test(runs, test_a_handle_kept_past_the_end_is_a_leak);
  tcase_add_test(runs, test_a_failing_program_shrinks_to_its_cause);
  suite_add_tcase(s, runs);
  return cb_test_run(s);
}
