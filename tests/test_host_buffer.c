/* tests/test_host_buffer.c: host buffers (cubert_host_buffer): pinned
 * memory that writes and reads move through asynchronously, and their
 * ledger (a failed read taints the host bytes, a read of tainted device
 * bytes taints them, a write from tainted host bytes is refused, a later
 * read repairs). Every test runs on each backend; HIP prints "skipped: no
 * device" here. */
#include <stdlib.h>
#include <string.h>

#include "cubert/faultinj.h"
#include "tests/testutil.h"

#define N 4096u

static void add_rule(cubert_runtime *rt, const char *rule) {
  cubert_faultinj_diag diag;
  memset(&diag, 0, sizeof diag);
  ck_assert_msg(cubert_faultinj_add(rt, rule, "test", NULL, &diag) == CUBERT_OK, "rule %s: %s", rule,
                cubert_last_error_message());
}

static bool open_env(int i, cb_test_env *env) { return cb_test_open(i, 1, env); }

START_TEST(test_write_and_read_through_a_host_buffer_round_trip) {
  cb_test_env env;
  if (!open_env(_i, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_host_buffer *hb;
  cb_test_ok(cubert_host_buffer_alloc(c, 2 * N, &hb));
  ck_assert_uint_eq(cubert_host_buffer_size(hb), 2 * N);
  unsigned char *p = cubert_host_buffer_data(hb);
  ck_assert_ptr_nonnull(p);
  cb_test_pattern(p, N, 11);
  memset(p + N, 0, N);
  cubert_handle *h;
  cb_test_ok(cubert_handle_empty(c, N, &h));
  cb_test_ok(cubert_handle_write_host(c, h, hb, 0, N));
  cb_test_ok(cubert_handle_read_host(c, h, hb, N, N));
  cb_test_ok(cubert_sync(c));
  cb_test_ok(cubert_host_buffer_check(hb, 0, 2 * N));
  ck_assert_uint_eq(cb_test_pattern_mismatch(p + N, N, 11), N);
  /* the device bytes are what a plain read sees too */
  unsigned char *back = malloc(N);
  cb_test_ok(cubert_handle_read(c, h, back, N));
  ck_assert_uint_eq(cb_test_pattern_mismatch(back, N, 11), N);
  free(back);
  cubert_handle_release(h);
  cubert_host_buffer_release(hb);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_registered_memory_round_trips_and_stays_the_callers) {
  cb_test_env env;
  if (!open_env(_i, &env)) return;
  cubert_client *c = env.clients[0];
  unsigned char *mine = aligned_alloc(4096, 2 * N);
  cb_test_pattern(mine, N, 5);
  memset(mine + N, 0, N);
  cubert_host_buffer *hb;
  cb_test_ok(cubert_host_buffer_register(c, mine, 2 * N, &hb));
  ck_assert_ptr_eq(cubert_host_buffer_data(hb), mine);
  cubert_handle *h, *s;
  cb_test_ok(cubert_handle_empty(c, 2 * N, &h));
  cb_test_ok(cubert_handle_slice(h, N, 0, &s));
  /* slices: the view's bytes only */
  cb_test_ok(cubert_handle_write_host(c, s, hb, 0, N));
  cb_test_ok(cubert_handle_read_host(c, s, hb, N, N));
  cb_test_ok(cubert_sync(c));
  ck_assert_uint_eq(cb_test_pattern_mismatch(mine + N, N, 5), N);
  cubert_handle_release(s);
  cubert_handle_release(h);
  cubert_host_buffer_release(hb);
  mine[0] ^= 1; /* still the caller's memory after release */
  free(mine);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_failed_read_taints_host_bytes_until_a_later_read_repairs) {
  cb_test_env env;
  if (!open_env(_i, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_host_buffer *hb;
  cb_test_ok(cubert_host_buffer_alloc(c, 2 * N, &hb));
  cubert_handle *h, *other;
  unsigned char *src = cb_test_pattern(malloc(N), N, 3);
  cb_test_ok(cubert_handle_create(c, src, N, &h));
  cb_test_ok(cubert_handle_empty(c, N, &other));
  add_rule(env.runtime, "read nth=1 fault=fail");
  cubert_status st = cubert_handle_read_host(c, h, hb, N, N);
  ck_assert_int_ne(st, CUBERT_OK);
  cb_test_ok(cubert_sync(c));
  /* the bytes it should have written carry its failure, the others none */
  cb_test_ok(cubert_host_buffer_check(hb, 0, N));
  cb_test_status(cubert_host_buffer_check(hb, N, N), CUBERT_ERR_TAINTED);
  cubert_error *e = cubert_last_error();
  ck_assert_uint_eq(cubert_error_failure_count(e), 1);
  uint64_t rs = 0, re = 0;
  const cubert_failure *f = cubert_error_failure(e, 0, &rs, &re);
  ck_assert_uint_eq(rs, N);
  ck_assert_uint_eq(re, 2 * N);
  ck_assert_int_eq(cubert_failure_status(f), st);
  ck_assert_ptr_nonnull(strstr(cubert_error_message(e), "host buffer"));
  uint64_t root = cubert_failure_id(cubert_failure_root(f));
  cubert_error_release(e);
  /* a write from the tainted bytes is refused; its destination carries a child */
  cb_test_status(cubert_handle_write_host(c, other, hb, N, N), CUBERT_ERR_TAINTED);
  cb_test_status(cubert_handle_check(c, other), CUBERT_ERR_TAINTED);
  e = cubert_last_error();
  ck_assert_uint_eq(cubert_failure_id(cubert_failure_root(cubert_error_failure(e, 0, NULL, NULL))), root);
  cubert_error_release(e);
  /* a later successful read repairs */
  cb_test_ok(cubert_handle_read_host(c, h, hb, N, N));
  cb_test_ok(cubert_sync(c));
  cb_test_ok(cubert_host_buffer_check(hb, 0, 2 * N));
  ck_assert_uint_eq(cb_test_pattern_mismatch((unsigned char *)cubert_host_buffer_data(hb) + N, N, 3), N);
  free(src);
  cubert_handle_release(other);
  cubert_handle_release(h);
  cubert_host_buffer_release(hb);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_read_of_tainted_device_bytes_taints_the_host_range) {
  cb_test_env env;
  if (!open_env(_i, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_host_buffer *hb;
  cb_test_ok(cubert_host_buffer_alloc(c, N, &hb));
  memset(cubert_host_buffer_data(hb), 7, N);
  cubert_handle *h;
  cb_test_ok(cubert_handle_empty(c, N, &h));
  add_rule(env.runtime, "write nth=1 fault=fail");
  ck_assert_int_ne(cubert_handle_write_host(c, h, hb, 0, N), CUBERT_OK); /* h tainted */
  cb_test_status(cubert_handle_check(c, h), CUBERT_ERR_TAINTED);
  cb_test_status(cubert_handle_read_host(c, h, hb, 0, N), CUBERT_ERR_TAINTED);
  cb_test_status(cubert_host_buffer_check(hb, 0, N), CUBERT_ERR_TAINTED);
  cb_test_status(cubert_host_buffer_check(hb, N / 2, 1), CUBERT_ERR_TAINTED);
  /* the caller's own bytes: good again */
  cb_test_ok(cubert_host_buffer_mark_written(hb, 0, N / 2));
  cb_test_ok(cubert_host_buffer_check(hb, 0, N / 2));
  cb_test_status(cubert_host_buffer_check(hb, 0, N), CUBERT_ERR_TAINTED);
  cb_test_ok(cubert_host_buffer_check(hb, 0, 0)); /* no byte, no failure */
  cubert_handle_release(h);
  cubert_host_buffer_release(hb);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_read_that_fails_at_a_fence_taints_host_bytes_at_sync) {
  cb_test_env env;
  if (!open_env(_i, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_host_buffer *hb;
  cb_test_ok(cubert_host_buffer_alloc(c, N, &hb));
  cubert_handle *h, *later;
  cb_test_ok(cubert_handle_empty(c, N, &h));
  cb_test_ok(cubert_handle_empty(c, N, &later));
  cb_test_ok(cubert_handle_fill(c, h, &(uint32_t){9}, 4));
  add_rule(env.runtime, "read nth=1 fault=async");
  cb_test_ok(cubert_handle_read_host(c, h, hb, 0, N)); /* queued: fails when it runs */
  cb_test_ok(cubert_handle_write_host(c, later, hb, 0, N)); /* read the garbage after it */
  ck_assert_int_ne(cubert_sync(c), CUBERT_OK);
  cb_test_status(cubert_host_buffer_check(hb, 0, N), CUBERT_ERR_TAINTED);
  /* replayed: the write that read those bytes passed the failure on */
  cb_test_status(cubert_handle_check(c, later), CUBERT_ERR_TAINTED);
  cubert_handle_release(later);
  cubert_handle_release(h);
  cubert_host_buffer_release(hb);
  cb_test_close(&env);
}
END_TEST

/* A read from a device that is lost fails, and the host bytes it should
 * have written carry the loss (cubert.h: "a transfer that fails (now or at
 * a fence) taints the range with its failure"), whether the loss happens
 * in that read or came before it: the buffer's check never calls bytes good
 * that the device did not deliver. */
START_TEST(test_read_from_a_lost_device_taints_the_host_range) {
  cb_test_env env;
  if (!open_env(_i, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_host_buffer *hb;
  cb_test_ok(cubert_host_buffer_alloc(c, 2 * N, &hb));
  cubert_handle *h;
  cb_test_ok(cubert_handle_empty(c, N, &h));
  cb_test_ok(cubert_handle_fill(c, h, &(uint32_t){5}, 4));
  cb_test_ok(cubert_sync(c));
  add_rule(env.runtime, "read nth=1 fault=device-lost");
  cb_test_status(cubert_handle_read_host(c, h, hb, 0, N), CUBERT_ERR_DEVICE_LOST);
  cb_test_status(cubert_host_buffer_check(hb, 0, N), CUBERT_ERR_TAINTED);
  cb_test_status(cubert_handle_read_host(c, h, hb, N, N), CUBERT_ERR_DEVICE_LOST);
  cb_test_status(cubert_host_buffer_check(hb, N, N), CUBERT_ERR_TAINTED);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "lost"));
  cubert_handle_release(h);
  cubert_host_buffer_release(hb);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_refused_transfers_change_nothing) {
  cb_test_env env;
  if (!open_env(_i, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_host_buffer *hb;
  cb_test_status(cubert_host_buffer_alloc(c, 0, &hb), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_host_buffer_alloc(NULL, N, &hb), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_host_buffer_register(c, NULL, N, &hb), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_ok(cubert_host_buffer_alloc(c, N, &hb));
  cubert_handle *h;
  cb_test_ok(cubert_handle_empty(c, N, &h));
  cb_test_status(cubert_handle_read_host(c, h, hb, 1, N), CUBERT_ERR_OUT_OF_RANGE);
  cb_test_status(cubert_handle_read_host(c, h, hb, 0, N - 1), CUBERT_ERR_OUT_OF_RANGE);
  cb_test_status(cubert_handle_write_host(c, h, NULL, 0, N), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_host_buffer_check(hb, N, 1), CUBERT_ERR_OUT_OF_RANGE);
  cb_test_status(cubert_host_buffer_check(hb, UINT64_MAX, 2), CUBERT_ERR_OUT_OF_RANGE);
  cb_test_ok(cubert_host_buffer_check(hb, 0, N));
  cb_test_ok(cubert_handle_check(c, h));
  ck_assert_ptr_null(cubert_host_buffer_data(NULL));
  cubert_host_buffer_release(NULL);
  cubert_handle_release(h);
  cubert_host_buffer_release(hb);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_release_waits_for_queued_transfers) {
  cb_test_env env;
  if (!open_env(_i, &env)) return;
  cubert_client *c = env.clients[0];
  enum { BIG = 8u << 20 };
  cubert_handle *h;
  cb_test_ok(cubert_handle_empty(c, BIG, &h));
  for (int round = 0; round < 4; round++) {
    cubert_host_buffer *hb;
    cb_test_ok(cubert_host_buffer_alloc(c, BIG, &hb));
    memset(cubert_host_buffer_data(hb), round, BIG);
    cb_test_ok(cubert_handle_write_host(c, h, hb, 0, BIG));
    cb_test_ok(cubert_handle_read_host(c, h, hb, 0, BIG));
    cubert_host_buffer_release(hb); /* no sync: release waits (ASan sees a use after free otherwise) */
  }
  cb_test_ok(cubert_sync(c));
  unsigned char b = 0;
  cubert_handle *first;
  cb_test_ok(cubert_handle_slice(h, 0, BIG - 1, &first));
  cb_test_ok(cubert_handle_read(c, first, &b, 1));
  ck_assert_uint_eq(b, 3);
  cubert_handle_release(first);
  cubert_handle_release(h);
  cb_test_close(&env);
}
END_TEST

START_TEST(test_a_host_buffer_serves_every_device) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  cubert_host_buffer *hb;
  cb_test_ok(cubert_host_buffer_alloc(env.clients[0], 2 * N, &hb));
  cb_test_pattern(cubert_host_buffer_data(hb), N, 21);
  cubert_handle *h1;
  cb_test_ok(cubert_handle_empty(env.clients[1], N, &h1));
  cb_test_ok(cubert_handle_write_host(env.clients[1], h1, hb, 0, N));
  cb_test_ok(cubert_handle_read_host(env.clients[1], h1, hb, N, N));
  cb_test_ok(cubert_sync(env.clients[1]));
  ck_assert_uint_eq(cb_test_pattern_mismatch((unsigned char *)cubert_host_buffer_data(hb) + N, N, 21), N);
  cubert_handle_release(h1);
  cubert_host_buffer_release(hb);
  cb_test_close(&env);
}
END_TEST

/* Large pageable transfers: on HIP they go through the pinned pipeline
 * (hip_pipe.c: several chunks, the last one short, the chunks reused); the
 * bytes must come back exactly, and the caller's buffer is free on return. */
static void pageable_round_trips(int backend) {
  cb_test_env env;
  if (!open_env(backend, &env)) return;
  cubert_client *c = env.clients[0];
  size_t big = (37u << 20) + 12345u;
  unsigned char *src = cb_test_pattern(malloc(big), big, 77);
  unsigned char *back = malloc(big);
  cubert_handle *h;
  cb_test_ok(cubert_handle_create(c, src, big, &h));
  memset(src, 0, big); /* consumed when the call returned */
  cb_test_ok(cubert_handle_read(c, h, back, big));
  ck_assert_uint_eq(cb_test_pattern_mismatch(back, big, 77), big);
  /* again into the same handle, so the chunks are reused */
  cb_test_pattern(src, big, 78);
  cb_test_ok(cubert_handle_write(c, h, src, big));
  cb_test_ok(cubert_handle_read(c, h, back, big));
  ck_assert_uint_eq(cb_test_pattern_mismatch(back, big, 78), big);
  free(back);
  free(src);
  cubert_handle_release(h);
  cb_test_close(&env);
}

START_TEST(test_large_pageable_write_and_read_round_trip) { pageable_round_trips(_i); }
END_TEST

/* The pipeline's host-side copies use streaming stores from the first
 * 16-byte boundary of the destination (base/copy.c cb_copy_stream, used by hip_pipe.c): caller
 * buffers at every offset from such a boundary, an odd size, and the bytes
 * just before and after the caller's range untouched; then the same with
 * plain memcpy ($CUBERT_HIP_COPY_STREAM=0). */
static void misaligned_round_trips(int backend) {
  cb_test_env env;
  if (!open_env(backend, &env)) return;
  cubert_client *c = env.clients[0];
  size_t big = (19u << 20) + 4099u;
  unsigned char *src = malloc(big + 64), *back = malloc(big + 64);
  cubert_handle *h;
  cb_test_ok(cubert_handle_empty(c, big, &h));
  for (size_t off = 0; off < 16; off += 5) { /* 0, 5, 10, 15 */
    cb_test_pattern(src + off, big, (unsigned)(30 + off));
    cb_test_ok(cubert_handle_write(c, h, src + off, big));
    memset(back, 0xA5, big + 64);
    cb_test_ok(cubert_handle_read(c, h, back + (15 - off), big));
    ck_assert_uint_eq(cb_test_pattern_mismatch(back + (15 - off), big, (unsigned)(30 + off)), big);
    for (size_t i = 0; i < 15 - off; i++) ck_assert_uint_eq(back[i], 0xA5);
    for (size_t i = 15 - off + big; i < big + 64; i++) ck_assert_uint_eq(back[i], 0xA5);
  }
  cubert_handle_release(h);
  free(back);
  free(src);
  cb_test_close(&env);
}

START_TEST(test_pageable_transfers_at_every_alignment_round_trip) { misaligned_round_trips(_i); }
END_TEST

START_TEST(test_pageable_transfers_with_plain_copies_round_trip) {
  setenv("CUBERT_HIP_COPY_STREAM", "0", 1);
  misaligned_round_trips(_i);
  unsetenv("CUBERT_HIP_COPY_STREAM");
}
END_TEST

/* The same through 2 chunks of 1 MiB and 3 copy threads: 38 pieces per
 * transfer, each chunk reused many times within one call (HIP reads the
 * settings when a runtime opens the device; the host backend ignores them).
 * The copy threads sleep at once between chunks here (no spin), so the
 * hand-off through the condition variables is the one tested; the test
 * above runs with the default spin. */
START_TEST(test_pageable_transfers_reuse_small_chunks) {
  setenv("CUBERT_HIP_STAGING_CHUNK", "1M", 1);
  setenv("CUBERT_HIP_STAGING_CHUNKS", "2", 1);
  setenv("CUBERT_HIP_COPY_THREADS", "3", 1);
  setenv("CUBERT_HIP_COPY_SPIN_US", "0", 1);
  pageable_round_trips(_i);
  unsetenv("CUBERT_HIP_STAGING_CHUNK");
  unsetenv("CUBERT_HIP_STAGING_CHUNKS");
  unsetenv("CUBERT_HIP_COPY_THREADS");
  unsetenv("CUBERT_HIP_COPY_SPIN_US");
}
END_TEST

/* A peer copy between devices that never enabled peer access: on HIP it is
 * staged through the destination's pinned pipeline (both halves queued). */
START_TEST(test_peer_copy_without_peer_access_round_trips) {
  cb_test_env env;
  if (!cb_test_open(_i, 2, &env)) return;
  size_t big = (21u << 20) + 4100u;
  unsigned char *src = cb_test_pattern(malloc(big), big, 91);
  unsigned char *back = malloc(big);
  cubert_handle *a, *b;
  cb_test_ok(cubert_handle_create(env.clients[0], src, big, &a));
  cb_test_ok(cubert_handle_empty(env.clients[1], big, &b));
  for (int round = 0; round < 2; round++) {
    cb_test_ok(cubert_handle_copy_peer(env.clients[0], a, env.clients[1], b));
    cb_test_ok(cubert_handle_read(env.clients[1], b, back, big));
    ck_assert_uint_eq(cb_test_pattern_mismatch(back, big, 91), big);
    memset(back, 0, big);
  }
  free(back);
  free(src);
  cubert_handle_release(b);
  cubert_handle_release(a);
  cb_test_close(&env);
}
END_TEST

int main(void) {
  Suite *s = suite_create("host_buffer");
  TCase *tc = tcase_create("host_buffer");
  cb_test_add_backend_loop(tc, test_write_and_read_through_a_host_buffer_round_trip);
  cb_test_add_backend_loop(tc, test_registered_memory_round_trips_and_stays_the_callers);
  cb_test_add_backend_loop(tc, test_failed_read_taints_host_bytes_until_a_later_read_repairs);
  cb_test_add_backend_loop(tc, test_read_of_tainted_device_bytes_taints_the_host_range);
  cb_test_add_backend_loop(tc, test_read_that_fails_at_a_fence_taints_host_bytes_at_sync);
  cb_test_add_backend_loop(tc, test_read_from_a_lost_device_taints_the_host_range);
  cb_test_add_backend_loop(tc, test_refused_transfers_change_nothing);
  cb_test_add_backend_loop(tc, test_release_waits_for_queued_transfers);
  cb_test_add_backend_loop(tc, test_a_host_buffer_serves_every_device);
  cb_test_add_backend_loop(tc, test_large_pageable_write_and_read_round_trip);
  cb_test_add_backend_loop(tc, test_pageable_transfers_reuse_small_chunks);
  cb_test_add_backend_loop(tc, test_pageable_transfers_at_every_alignment_round_trip);
  cb_test_add_backend_loop(tc, test_pageable_transfers_with_plain_copies_round_trip);
  cb_test_add_backend_loop(tc, test_peer_copy_without_peer_access_round_trips);
  suite_add_tcase(s, tc);
  return cb_test_run(s);
}
