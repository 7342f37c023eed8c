/* tests/test_failure_record.c: a failure as bytes (cubert_failure_export /
 * cubert_failure_import), where it came from (cubert_failure_remote,
 * cubert_set_rank), and tainting a view with a given failure
 * (cubert_handle_taint). A record crosses a real process boundary too: a
 * forked child exports, the parent imports from a pipe. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cubert/cubert.h"
#include "tests/testutil.h"

static const char broken_src[] = "extern \"C\" __global__ void t_broken( { this is not code";
static const cubert_param out_param[] = {{"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0}};
static const cubert_param copy_params[] = {{"in", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0},
                                           {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0}};
static const cubert_launch_config one = {{1, 1, 1}, {1, 1, 1}, 0};

static cubert_status copy_fn(const cubert_host_launch *l, char *msg, size_t cap) {
  (void)msg;
  (void)cap;
  memcpy(l->args[1], l->args[0], l->sizes[0] < l->sizes[1] ? l->sizes[0] : l->sizes[1]);
  return CUBERT_OK;
}

static cubert_kernel *kernel(const char *name, const cubert_param *p, uint32_t n, cubert_host_fn fn,
                             const char *src) {
  cubert_kernel_desc d = {0};
  d.name = name;
  d.params = p;
  d.nparams = n;
  d.host_fn = fn;
  d.source = src;
  cubert_kernel *k = NULL;
  cb_test_ok(cubert_kernel_create(&d, &k));
  return k;
}

/* Makes a root failure (a launch whose code cannot load taints `out`) and
 * returns it (a new reference) from a read of `out`. */
static const cubert_failure *root_failure(cubert_client *c, cubert_handle *out, const char *name) {
  cubert_kernel *k = kernel(name, out_param, 1, NULL, broken_src);
  cubert_arg a[1] = {cubert_arg_buffer(out)};
  ck_assert_int_ne(cubert_launch(c, k, &one, a, 1), CUBERT_OK);
  cubert_kernel_release(k);
  const cubert_failure *f = NULL;
  cb_test_ok(cubert_handle_tainted_range(c, out, 0, NULL, NULL, &f));
  ck_assert_ptr_nonnull(f);
  return f;
}

/* A child of `in`'s failure: a copy kernel `name` reads `in` into `out`. */
static const cubert_failure *child_failure(cubert_client *c, cubert_handle *in, cubert_handle *out,
                                           const char *name) {
  cubert_kernel *k = kernel(name, copy_params, 2, copy_fn, NULL);
  cubert_arg a[2] = {cubert_arg_buffer(in), cubert_arg_buffer(out)};
  cb_test_status(cubert_launch(c, k, &one, a, 2), CUBERT_ERR_TAINTED);
  cubert_kernel_release(k);
  const cubert_failure *f = NULL;
  cb_test_ok(cubert_handle_tainted_range(c, out, 0, NULL, NULL, &f));
  ck_assert_ptr_nonnull(f);
  return f;
}

static bool host_env(cb_test_env *env) { return cb_test_open(0, 1, env); }

/* A record of a root failure of kernel `name` made in a runtime of its own
 * (host backend); false, after "skipped: ...", when there is none. */
static bool record_of_failure(const char *name, cubert_failure_record *rec) {
  cb_test_env env;
  if (!host_env(&env)) return false;
  cubert_handle *a;
  cb_test_ok(cubert_handle_empty(env.clients[0], 64, &a));
  const cubert_failure *f = root_failure(env.clients[0], a, name);
  cb_test_ok(cubert_failure_export(f, rec));
  cubert_failure_release(f);
  cubert_handle_release(a);
  cb_test_close(&env);
  return true;
}

START_TEST(test_record_round_trips_cause_origin_root_and_chain) {
  cb_test_env env;
  if (!host_env(&env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *a, *b, *d;
  cb_test_ok(cubert_handle_empty(c, 64, &a));
  cb_test_ok(cubert_handle_empty(c, 64, &b));
  cb_test_ok(cubert_handle_empty(c, 64, &d));
  const cubert_failure *root = root_failure(c, a, "k_root");
  const cubert_failure *mid = child_failure(c, a, b, "k_mid");
  const cubert_failure *f = child_failure(c, b, d, "k_leaf");
  cubert_set_rank(3);
  cubert_failure_record rec;
  cb_test_ok(cubert_failure_export(f, &rec));
  cubert_set_rank(-1);
  const cubert_failure *g = NULL;
  cb_test_ok(cubert_failure_import(&rec, &g));
  ck_assert_ptr_nonnull(g);
  ck_assert_ptr_ne(g, f);
  ck_assert_uint_ne(cubert_failure_id(g), cubert_failure_id(f)); /* a local id of its own */
  ck_assert_int_eq(cubert_failure_status(g), cubert_failure_status(f));
  ck_assert_str_eq(cubert_failure_message(g), cubert_failure_message(root));
  ck_assert_uint_eq(cubert_failure_parent_id(g), cubert_failure_id(mid));
  cubert_origin o, fo;
  cubert_failure_origin(g, &o);
  cubert_failure_origin(f, &fo);
  ck_assert_str_eq(o.operation, fo.operation);
  ck_assert_str_eq(o.kernel, "k_leaf");
  ck_assert_int_eq(o.device, fo.device);
  ck_assert_uint_eq(o.sequence, fo.sequence);
  cubert_remote_origin r;
  cubert_failure_remote(g, &r);
  ck_assert(r.remote);
  ck_assert_int_eq(r.rank, 3);
  ck_assert_int_eq(r.pid, (int64_t)getpid());
  ck_assert_uint_eq(r.id, cubert_failure_id(f));
  ck_assert_str_eq(r.device_name, "host:0");
  char host[256];
  ck_assert_int_eq(gethostname(host, sizeof host), 0);
  ck_assert_str_eq(r.host, host);
  /* the root: imported too, with the root's own id, cause and origin */
  const cubert_failure *groot = cubert_failure_root(g);
  ck_assert_ptr_ne(groot, g);
  cubert_failure_remote(groot, &r);
  ck_assert(r.remote);
  ck_assert_uint_eq(r.id, cubert_failure_id(root));
  cubert_failure_origin(groot, &o);
  ck_assert_str_eq(o.kernel, "k_root");
  ck_assert_str_eq(o.operation, "launch");
  /* the chain: both links, oldest first */
  uint64_t dropped = 99;
  ck_assert_uint_eq(cubert_failure_skip_count(g, &dropped), 2);
  ck_assert_uint_eq(dropped, 0);
  cubert_skip s;
  ck_assert(cubert_failure_skip(g, 0, &s));
  ck_assert_str_eq(s.kernel, "k_mid");
  ck_assert(cubert_failure_skip(g, 1, &s));
  ck_assert_str_eq(s.kernel, "k_leaf");
  /* a local failure says it is local */
  cubert_failure_remote(f, &r);
  ck_assert(!r.remote);
  ck_assert_int_eq(r.rank, -1);
  ck_assert_str_eq(r.host, "");
  /* the same record again: another failure, the same remote id */
  const cubert_failure *g2 = NULL;
  cb_test_ok(cubert_failure_import(&rec, &g2));
  ck_assert_uint_ne(cubert_failure_id(g2), cubert_failure_id(g));
  cubert_remote_origin r1, r2;
  cubert_failure_remote(g, &r1);
  cubert_failure_remote(g2, &r2);
  ck_assert_uint_eq(r1.id, r2.id);
  /* passed on again, an imported failure keeps the origin it came with */
  cubert_failure_record again;
  cb_test_ok(cubert_failure_export(g, &again));
  const cubert_failure *g3 = NULL;
  cb_test_ok(cubert_failure_import(&again, &g3));
  cubert_failure_remote(g3, &r2);
  ck_assert_int_eq(r2.rank, 3);
  ck_assert_uint_eq(r2.id, cubert_failure_id(f));
  cubert_failure_release(g3);
  cubert_failure_release(g2);
  cubert_failure_release(g);
  cubert_failure_release(f);
  cubert_failure_release(mid);
  cubert_failure_release(root);
  cubert_handle_release(a);
  cubert_handle_release(b);
  cubert_handle_release(d);
  cb_test_close(&env);
}
END_TEST

/* A record made from a failure whose strings are all over their bounds and
 * whose chain is full: it fits, cuts end in "...", the newest links are
 * kept, and the rest count as dropped. */
START_TEST(test_record_cuts_long_strings_and_keeps_the_newest_links) {
  cb_test_env env;
  if (!host_env(&env)) return;
  cubert_client *c = env.clients[0];
  char name[200];
  memset(name, 'k', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  cubert_handle *h[12];
  for (int i = 0; i < 12; i++) cb_test_ok(cubert_handle_empty(c, 16, &h[i]));
  const cubert_failure *f = root_failure(c, h[0], name);
  for (int i = 1; i < 12; i++) {
    char kname[220];
    snprintf(kname, sizeof kname, "%s_%02d", name, i);
    cubert_failure_release(f);
    f = child_failure(c, h[i - 1], h[i], kname);
  }
  uint64_t dropped = 0;
  size_t nlocal = cubert_failure_skip_count(f, &dropped);
  ck_assert_uint_eq(nlocal + dropped, 11);
  cubert_failure_record rec;
  cb_test_ok(cubert_failure_export(f, &rec));
  const cubert_failure *g = NULL;
  cb_test_ok(cubert_failure_import(&rec, &g));
  uint64_t gdropped = 0;
  size_t n = cubert_failure_skip_count(g, &gdropped);
  ck_assert_uint_ge(n, 1);
  ck_assert_uint_eq(n + gdropped, 11); /* every link kept or counted */
  cubert_skip s;
  ck_assert(cubert_failure_skip(g, n - 1, &s));
  ck_assert_uint_le(strlen(s.kernel), 31);
  ck_assert_str_eq(s.kernel + strlen(s.kernel) - 3, "...");
  cubert_origin o;
  cubert_failure_origin(cubert_failure_root(g), &o);
  ck_assert_uint_eq(strlen(o.kernel), 63);
  ck_assert(strncmp(o.kernel, name, 60) == 0);
  ck_assert_str_eq(o.kernel + 60, "...");
  cubert_failure_release(g);
  cubert_failure_release(f);
  for (int i = 0; i < 12; i++) cubert_handle_release(h[i]);
  cb_test_close(&env);
}
END_TEST

/* The root cause's message crosses to the root's bound (255 bytes) also
 * when the exported failure is its own root (a transport's failure, a
 * failed write): it used to be cut to a child's bound (127), though the
 * record promises the root's message 255 (cubert.h). A child's root keeps
 * 255 as before. */
START_TEST(test_a_root_failure_keeps_the_root_message_bound) {
  cb_test_env env;
  if (!host_env(&env)) return;
  cubert_client *c = env.clients[0];
  char msg[400];
  memset(msg, 'm', sizeof msg - 1);
  msg[sizeof msg - 1] = '\0';
  const cubert_failure *f = NULL, *g = NULL;
  cb_test_ok(cubert_failure_create(c, CUBERT_ERR_COPY, msg, &f));
  cubert_failure_record rec;
  cb_test_ok(cubert_failure_export(f, &rec));
  cb_test_ok(cubert_failure_import(&rec, &g));
  ck_assert_uint_eq(strlen(cubert_failure_message(g)), 255);
  ck_assert_str_eq(cubert_failure_message(g) + 252, "...");
  ck_assert_uint_eq(strlen(cubert_failure_message(cubert_failure_root(g))), 255);
  cubert_failure_release(g);
  /* a child: its root's message 255 */
  cubert_handle *a = NULL, *b = NULL;
  cb_test_ok(cubert_handle_empty(c, 16, &a));
  cb_test_ok(cubert_handle_empty(c, 16, &b));
  cb_test_ok(cubert_handle_taint(c, a, f));
  const cubert_failure *child = child_failure(c, a, b, "k_child");
  cb_test_ok(cubert_failure_export(child, &rec));
  cb_test_ok(cubert_failure_import(&rec, &g));
  ck_assert_ptr_ne(cubert_failure_root(g), g);
  ck_assert_uint_eq(strlen(cubert_failure_message(cubert_failure_root(g))), 255);
  cubert_failure_release(g);
  cubert_failure_release(child);
  cubert_failure_release(f);
  cubert_handle_release(a);
  cubert_handle_release(b);
  cb_test_close(&env);
}
END_TEST

/* Every damaged record is refused with a message naming what was wrong, and
 * the output is left as it was. */
START_TEST(test_corrupt_truncated_and_unknown_records_are_refused) {
  cubert_failure_record rec;
  if (!record_of_failure("k_bad", &rec)) return;
  ck_assert_uint_gt(rec.bytes[8] | (size_t)rec.bytes[9] << 8, 100); /* "cut short" cuts bytes in use */
  const cubert_failure *sentinel = (const cubert_failure *)&rec, *out = sentinel;
  struct {
    const char *what;
    size_t at;
    int value; /* -1: cut the record at `at` (zeros after) */
    const char *says;
  } cases[] = {
      {"magic", 0, 'X', "not a failure record"},
      {"version", 4, 2, "version 2 is unknown"},
      {"flipped byte", 40, -2, "corrupt or truncated"},
      {"cut short", 100, -1, "corrupt or truncated"},
      {"length", 8, 0xff, "uses"},
      {"byte after the bytes in use", 1000, 1, "after the"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cubert_failure_record bad = rec;
    if (cases[i].value == -1)
      memset(bad.bytes + cases[i].at, 0, sizeof bad.bytes - cases[i].at);
    else if (cases[i].value == -2)
      bad.bytes[cases[i].at] ^= 0x20;
    else
      bad.bytes[cases[i].at] = (unsigned char)cases[i].value;
    if (cases[i].at == 8) bad.bytes[9] = 0x7f; /* a length over the record */
    cb_test_status(cubert_failure_import(&bad, &out), CUBERT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_eq(out, sentinel);
    ck_assert_msg(strstr(cubert_last_error_message(), cases[i].says), "%s: %s", cases[i].what,
                  cubert_last_error_message());
  }
  /* all zeros, and NULL arguments */
  cubert_failure_record zero;
  memset(&zero, 0, sizeof zero);
  cb_test_status(cubert_failure_import(&zero, &out), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_failure_import(NULL, &out), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_failure_import(&rec, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_failure_export(NULL, &rec), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_ok(cubert_failure_import(&rec, &out));
  cb_test_status(cubert_failure_export(out, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  cubert_failure_release(out);
}
END_TEST

/* A record with a valid checksum but a field out of range (as another
 * program could write): refused, naming the field. */
START_TEST(test_well_summed_record_with_a_bad_field_is_refused) {
  cubert_failure_record rec;
  if (!record_of_failure("k_field", &rec)) return;
  /* the host name's length (bytes 24..26) made longer than the record */
  rec.bytes[24] = 0xff;
  rec.bytes[25] = 0x00;
  /* re-sum it as a writer would: FNV-1a 64 of bytes 0..16 then 24..used */
  size_t used = rec.bytes[8] | (size_t)rec.bytes[9] << 8;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < used; i++) {
    if (i >= 16 && i < 24) continue;
    h = (h ^ rec.bytes[i]) * 0x100000001b3ull;
  }
  for (int i = 0; i < 8; i++) rec.bytes[16 + i] = (unsigned char)(h >> (8 * i));
  const cubert_failure *out = NULL;
  cb_test_status(cubert_failure_import(&rec, &out), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(out);
  ck_assert_msg(strstr(cubert_last_error_message(), "the host name"), "%s", cubert_last_error_message());
}
END_TEST

/* cubert_handle_taint: reads of exactly the view's bytes are refused with the
 * given failure, the message names the other process, and a write repairs. */
START_TEST(test_taint_with_an_imported_failure_refuses_reads_until_written) {
  cb_test_env env;
  if (!cb_test_open(_i, 1, &env)) return;
  cubert_client *c = env.clients[0];
  cubert_handle *src, *dst, *slice;
  cb_test_ok(cubert_handle_empty(c, 64, &src));
  const cubert_failure *f = root_failure(c, src, "k_remote");
  cubert_set_rank(7);
  cubert_failure_record rec;
  cb_test_ok(cubert_failure_export(f, &rec));
  cubert_set_rank(-1);
  const cubert_failure *g = NULL;
  cb_test_ok(cubert_failure_import(&rec, &g));
  uint8_t buf[256];
  memset(buf, 5, sizeof buf);
  cb_test_ok(cubert_handle_create(c, buf, 256, &dst));
  cb_test_ok(cubert_handle_slice(dst, 64, 128, &slice)); /* bytes 64..128 */
  cb_test_ok(cubert_handle_taint(c, slice, g));
  cb_test_status(cubert_handle_read(c, dst, buf, 256), CUBERT_ERR_TAINTED);
  cubert_error *e = cubert_last_error();
  ck_assert_uint_eq(cubert_error_failure_count(e), 1);
  uint64_t s = 0, t = 0;
  ck_assert_ptr_eq(cubert_error_failure(e, 0, &s, &t), g);
  ck_assert_uint_eq(s, 64);
  ck_assert_uint_eq(t, 128);
  char want[128];
  snprintf(want, sizeof want, "failure #%llu from rank 7 (pid %lld on ",
           (unsigned long long)cubert_failure_id(f), (long long)getpid());
  ck_assert_msg(strstr(cubert_error_message(e), want), "%s", cubert_error_message(e));
  ck_assert_msg(strstr(cubert_error_message(e), "launch of `k_remote`"), "%s", cubert_error_message(e));
  cubert_error_release(e);
  /* the bytes outside the slice are good */
  cubert_handle *head;
  cb_test_ok(cubert_handle_slice(dst, 0, 192, &head));
  cb_test_ok(cubert_handle_read(c, head, buf, 64));
  ck_assert_int_eq(buf[0], 5);
  /* a successful write repairs */
  memset(buf, 9, 64);
  cb_test_ok(cubert_handle_write(c, slice, buf, 64));
  cb_test_ok(cubert_handle_read(c, dst, buf, 256));
  ck_assert_int_eq(buf[100], 9);
  /* refused calls taint nothing */
  cb_test_status(cubert_handle_taint(NULL, slice, g), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_handle_taint(c, NULL, g), CUBERT_ERR_INVALID_ARGUMENT);
  cb_test_status(cubert_handle_taint(c, slice, NULL), CUBERT_ERR_INVALID_ARGUMENT);
  if (env.nclients > 1) {
    cb_test_status(cubert_handle_taint(env.clients[1], slice, g), CUBERT_ERR_WRONG_DEVICE);
  }
  cb_test_ok(cubert_handle_check(c, dst));
  cubert_handle_release(head);
  cubert_handle_release(slice);
  cubert_handle_release(dst);
  cubert_handle_release(src);
  cubert_failure_release(g);
  cubert_failure_release(f);
  cb_test_close(&env);
}
END_TEST

/* A record made in another process (a forked child, its own runtime)
 * imports here and names that process. */
START_TEST(test_record_from_another_process_names_it) {
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  pid_t child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) {
    close(fds[0]);
    cubert_set_rank(11);
    cubert_failure_record rec;
    bool ok = record_of_failure("k_child", &rec) && write(fds[1], &rec, sizeof rec) == (ssize_t)sizeof rec;
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  cubert_failure_record rec;
  size_t got = 0;
  while (got < sizeof rec) {
    ssize_t n = read(fds[0], rec.bytes + got, sizeof rec - got);
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fds[0]);
  int status = 0;
  ck_assert_int_eq(waitpid(child, &status, 0), child);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ck_assert_uint_eq(got, sizeof rec);
  const cubert_failure *g = NULL;
  cb_test_ok(cubert_failure_import(&rec, &g));
  cubert_remote_origin r;
  cubert_failure_remote(g, &r);
  ck_assert(r.remote);
  ck_assert_int_eq(r.pid, (int64_t)child);
  ck_assert_int_eq(r.rank, 11);
  ck_assert_int_eq(r.device, 0);
  cubert_origin o;
  cubert_failure_origin(g, &o);
  ck_assert_str_eq(o.kernel, "k_child");
  cubert_failure_release(g);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("failure_record");
  TCase *tc = tcase_create("record");
  tcase_add_test(tc, test_record_round_trips_cause_origin_root_and_chain);
  tcase_add_test(tc, test_record_cuts_long_strings_and_keeps_the_newest_links);
  tcase_add_test(tc, test_a_root_failure_keeps_the_root_message_bound);
  tcase_add_test(tc, test_corrupt_truncated_and_unknown_records_are_refused);
  tcase_add_test(tc, test_well_summed_record_with_a_bad_field_is_refused);
  tcase_add_test(tc, test_record_from_another_process_names_it);
  suite_add_tcase(s, tc);
  TCase *tt = tcase_create("taint");
  cb_test_add_backend_loop(tt, test_taint_with_an_imported_failure_refuses_reads_until_written);
  suite_add_tcase(s, tt);
  return s;
}

int main(void) { return cb_test_run(suite()); }
