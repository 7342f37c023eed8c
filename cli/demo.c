/* cli/demo.c: `cubert demo`: a short tour of the runtime on two simulated
 * host devices. It moves data through built-in kernels, makes a kernel fail
 * after scribbling over its output, and shows what every later reader gets:
 * the tainted bytes refused with the original cause, a kernel skipped on a
 * tainted input, a slice of the same allocation still good, a peer on
 * another device refused the shared bytes, and a repair by a new write.
 * Each step checks what it shows; exit 1 if any step behaved otherwise. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"

#define N 1024u            /* u32 elements per buffer */
#define BYTES (N * 4u)

typedef struct demo {
  cubert_runtime *rt;
  cubert_client *c0, *c1;
  cubert_kernel *copy, *fill, *flaky, *peer_read;
  int failed_steps;
} demo;

static void usage(FILE *out) {
  fputs("usage: cubert demo\n"
        "\n"
        "A short tour of cubert on two simulated host devices: built-in kernels, a\n"
        "kernel that fails after scribbling over its output, and what each later\n"
        "reader gets (tainted bytes refused with the cause, a kernel skipped on a\n"
        "tainted input, a peer refused shared bytes, repair by a new write).\n"
        "Exits 1 when a step does not behave as documented.\n",
        out);
}

static void expect(demo *d, bool ok, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void expect(demo *d, bool ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("    %s ", ok ? "ok:" : "UNEXPECTED:");
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
  if (!ok) d->failed_steps++;
}

/* Prints `text` with every line indented. */
static void indented(const char *indent, const char *text) {
  const char *p = text;
  while (*p != '\0') {
    size_t len = strcspn(p, "\n");
    printf("%s%.*s\n", indent, (int)len, p);
    p += len;
    if (*p == '\n') p++;
  }
}

/* The calling thread's last error, as a reader sees it. */
static void show_last_error(void) {
  cubert_error *e = cubert_last_error();
  if (e == NULL) return;
  printf("      error %s:\n", cubert_status_name(cubert_error_status(e)));
  indented("        | ", cubert_error_message(e));
  size_t n = cubert_error_failure_count(e);
  for (size_t i = 0; i < n; i++) {
    uint64_t start = 0, end = 0;
    const cubert_failure *f = cubert_error_failure(e, i, &start, &end);
    if (f == NULL) continue;
    cubert_origin o;
    cubert_failure_origin(f, &o);
    const cubert_failure *root = cubert_failure_root(f);
    char range[64] = "";
    if (end > start)
      snprintf(range, sizeof range, " on bytes [%" PRIu64 ", %" PRIu64 ")", start, end);
    printf("      failure #%" PRIu64 "%s: %s from %s%s%s%s on device %d, work %" PRIu64
           "; root #%" PRIu64 "\n",
           cubert_failure_id(f), range, cubert_status_name(cubert_failure_status(f)),
           o.operation, o.kernel[0] != '\0' ? " of `" : "", o.kernel,
           o.kernel[0] != '\0' ? "`" : "", o.device, o.sequence, cubert_failure_id(root));
    uint64_t dropped = 0;
    size_t nskips = cubert_failure_skip_count(f, &dropped);
    for (size_t s = 0; s < nskips; s++) {
      cubert_skip skip;
      if (cubert_failure_skip(f, s, &skip))
        printf("        skipped `%s` on device %d (work %" PRIu64 "): its input `%s` carried it\n",
               skip.kernel, skip.device, skip.sequence, skip.input);
    }
    if (dropped != 0) printf("        (%" PRIu64 " older links dropped)\n", dropped);
  }
  cubert_error_release(e);
}

/* The demo's failing kernel: writes garbage over the first half of `out`,
 * then reports an error, as a kernel that dies half way would. */
static cubert_status flaky_host(const cubert_host_launch *launch, char *message,
                                size_t capacity) {
  if (launch->nargs >= 2) {
    uint32_t *out = launch->args[1];
    uint64_t words = launch->sizes[1] / 4;
    for (uint64_t i = 0; i < words / 2; i++) out[i] = 0xdeadbeefu;
  }
  snprintf(message, capacity, "the demo's flaky kernel gave up half way through its output");
  return CUBERT_ERR_LAUNCH;
}

static const cubert_param flaky_params[] = {
    {"in", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0},
    {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0},
    {"n", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 8},
};

static cubert_launch_config shape(void) {
  cubert_launch_config cfg = {{4, 1, 1}, {64, 1, 1}, 0};
  return cfg;
}

/* Launches `k(in, out, n)` on `client`; in may be a peer buffer. */
static cubert_status launch_in_out(cubert_client *client, const cubert_kernel *k,
                                   cubert_arg in, const cubert_handle *out, uint64_t n) {
  cubert_arg args[3] = {in, cubert_arg_buffer(out), cubert_arg_scalar(&n, sizeof n)};
  cubert_launch_config cfg = shape();
  return cubert_launch(client, k, &cfg, args, 3);
}

/* A launch may fail when enqueued or when the device runs it: the demo
 * accepts either and returns the first error (CUBERT_OK if none). */
static cubert_status launch_and_sync(cubert_client *client, const cubert_kernel *k,
                                     cubert_arg in, const cubert_handle *out, uint64_t n,
                                     cubert_status *at_launch) {
  cubert_status st = launch_in_out(client, k, in, out, n);
  *at_launch = st;
  cubert_status sync = cubert_sync(client);
  return st != CUBERT_OK ? st : sync;
}

static bool read_u32(cubert_client *client, const cubert_handle *h, uint32_t *dst,
                     cubert_status *status) {
  *status = cubert_handle_read(client, h, dst, cubert_handle_size_in_use(h));
  return *status == CUBERT_OK;
}

static int setup(demo *d) {
  cubert_runtime_options options;
  cubert_runtime_options_init(&options);
  options.backends = "host";
  options.host_devices = 2;
  options.host_memory = 64ull << 20;
  options.host_peer_deny = "";
  options.faults = "";
  cubert_status st = cubert_runtime_create(&options, &d->rt);
  if (st != CUBERT_OK) return cb_cli_fail("demo", "creating a host runtime", st);
  if ((st = cubert_client_create(d->rt, 0, &d->c0)) != CUBERT_OK ||
      (st = cubert_client_create(d->rt, 1, &d->c1)) != CUBERT_OK)
    return cb_cli_fail("demo", "creating clients on devices 0 and 1", st);
  if ((st = cubert_builtin_kernel(CUBERT_BUILTIN_COPY_U32, &d->copy)) != CUBERT_OK ||
      (st = cubert_builtin_kernel(CUBERT_BUILTIN_FILL_U32, &d->fill)) != CUBERT_OK ||
      (st = cubert_builtin_kernel(CUBERT_BUILTIN_COPY_PEER_READ, &d->peer_read)) != CUBERT_OK)
    return cb_cli_fail("demo", "getting the built-in kernels", st);
  cubert_kernel_desc desc = {0};
  desc.name = "flaky";
  desc.params = flaky_params;
  desc.nparams = 3;
  desc.host_fn = flaky_host;
  if ((st = cubert_kernel_create(&desc, &d->flaky)) != CUBERT_OK)
    return cb_cli_fail("demo", "creating the flaky kernel", st);
  return CB_CLI_OK;
}

static void teardown(demo *d) {
  cubert_kernel *kernels[] = {d->copy, d->fill, d->flaky, d->peer_read};
  for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++)
    if (kernels[k] != NULL) cubert_kernel_release(kernels[k]);
  if (d->c0 != NULL) cubert_client_destroy(d->c0);
  if (d->c1 != NULL) cubert_client_destroy(d->c1);
  if (d->rt != NULL) cubert_runtime_destroy(d->rt);
}

static void print_pools(cubert_client *client, int device) {
  cubert_pool_usage pools[16];
  size_t count = 0;
  if (cubert_memory_usage(client, pools, 16, &count) != CUBERT_OK) return;
  char r[32], u[32], h[32];
  for (size_t p = 0; p < count && p < 16; p++)
    printf("    device %d pool %-12s reserved %9s, in use %9s, high water %9s\n", device,
           pools[p].name, cb_cli_bytes(pools[p].reserved, r, sizeof r),
           cb_cli_bytes(pools[p].in_use, u, sizeof u), cb_cli_bytes(pools[p].high_water, h, sizeof h));
}

static int run_demo(demo *d) {
  cubert_status st, at_launch;
  uint32_t *host = malloc(2 * BYTES), *back = malloc(2 * BYTES);
  cubert_handle *a = NULL, *b = NULL, *c = NULL, *x = NULL, *e = NULL, *lo = NULL, *hi = NULL,
                *y = NULL;
  int rc = CB_CLI_FAILED;
  if (host == NULL || back == NULL) goto out;
  for (uint32_t i = 0; i < 2 * N; i++) host[i] = i * 3u + 1u;

  printf("[1] buffers on device 0: a = %u u32 from the host; b, c, x empty; c shared with "
         "device 1\n", N);
  if ((st = cubert_handle_create(d->c0, host, BYTES, &a)) != CUBERT_OK ||
      (st = cubert_handle_empty(d->c0, BYTES, &b)) != CUBERT_OK ||
      (st = cubert_handle_empty(d->c0, BYTES, &c)) != CUBERT_OK ||
      (st = cubert_handle_empty(d->c0, BYTES, &x)) != CUBERT_OK ||
      (st = cubert_handle_empty(d->c1, BYTES, &y)) != CUBERT_OK) {
    rc = cb_cli_fail("demo", "allocating buffers", st);
    goto out;
  }
  st = cubert_handle_share(d->c0, c);
  expect(d, st == CUBERT_OK, "c shared with peers: %s", cubert_status_name(st));
  if (st != CUBERT_OK) show_last_error();

  printf("[2] launch copy_u32(a -> b), then read b\n");
  st = launch_and_sync(d->c0, d->copy, cubert_arg_buffer(a), b, N, &at_launch);
  expect(d, st == CUBERT_OK, "copy_u32 ran: %s", cubert_status_name(st));
  if (st != CUBERT_OK) show_last_error();
  bool ok = read_u32(d->c0, b, back, &st) && memcmp(back, host, BYTES) == 0;
  expect(d, ok, "b holds a's %u values (read: %s)", N, cubert_status_name(st));

  printf("[3] launch flaky(a -> c): it scribbles 0xdeadbeef over half of c, then fails\n");
  st = launch_and_sync(d->c0, d->flaky, cubert_arg_buffer(a), c, N, &at_launch);
  expect(d, st != CUBERT_OK, "the failure surfaced %s: %s",
         at_launch != CUBERT_OK ? "at launch" : "at sync", cubert_status_name(st));
  show_last_error();

  printf("[4] read c: the scribbled bytes must never reach the reader\n");
  ok = read_u32(d->c0, c, back, &st);
  expect(d, st == CUBERT_ERR_TAINTED, "read of c refused: %s", cubert_status_name(st));
  show_last_error();

  printf("[5] launch copy_u32(c -> x): its input carries the failure\n");
  st = launch_and_sync(d->c0, d->copy, cubert_arg_buffer(c), x, N, &at_launch);
  expect(d, st == CUBERT_ERR_TAINTED, "copy_u32 was not run: %s", cubert_status_name(st));
  ok = read_u32(d->c0, x, back, &st);
  expect(d, st == CUBERT_ERR_TAINTED, "read of x refused with the chain back to flaky: %s",
         cubert_status_name(st));
  show_last_error();

  printf("[6] two slices of one allocation e: flaky writes the low half only\n");
  if ((st = cubert_handle_create(d->c0, host, 2 * BYTES, &e)) != CUBERT_OK ||
      (st = cubert_handle_slice(e, 0, BYTES, &lo)) != CUBERT_OK ||
      (st = cubert_handle_slice(e, BYTES, 0, &hi)) != CUBERT_OK) {
    rc = cb_cli_fail("demo", "slicing", st);
    goto out;
  }
  st = launch_and_sync(d->c0, d->flaky, cubert_arg_buffer(a), lo, N, &at_launch);
  expect(d, st != CUBERT_OK, "flaky on the low half failed: %s", cubert_status_name(st));
  ok = read_u32(d->c0, hi, back, &st) && memcmp(back, host + N, BYTES) == 0;
  expect(d, ok, "the high half still reads its own values: %s", cubert_status_name(st));
  ok = read_u32(d->c0, lo, back, &st);
  expect(d, st == CUBERT_ERR_TAINTED, "the low half is refused: %s", cubert_status_name(st));
  ok = read_u32(d->c0, e, back, &st);
  expect(d, st == CUBERT_ERR_TAINTED, "the whole of e is refused, naming the low half: %s",
         cubert_status_name(st));
  show_last_error();

  printf("[7] device 1 reads the shared c through a peer binding\n");
  st = launch_and_sync(d->c1, d->peer_read, cubert_arg_peer(c), y, N, &at_launch);
  expect(d, st == CUBERT_ERR_TAINTED, "copy_peer_read on device 1 was not run: %s",
         cubert_status_name(st));
  ok = read_u32(d->c1, y, back, &st);
  expect(d, st == CUBERT_ERR_TAINTED, "read of y on device 1 refused with device 0's cause: %s",
         cubert_status_name(st));
  show_last_error();

  printf("[8] repair: write c from the host, then read it back\n");
  st = cubert_handle_write(d->c0, c, host, BYTES);
  expect(d, st == CUBERT_OK, "write of c: %s", cubert_status_name(st));
  ok = read_u32(d->c0, c, back, &st) && memcmp(back, host, BYTES) == 0;
  expect(d, ok, "c reads the new values: %s", cubert_status_name(st));
  st = launch_and_sync(d->c1, d->peer_read, cubert_arg_peer(c), y, N, &at_launch);
  ok = st == CUBERT_OK && read_u32(d->c1, y, back, &st) && memcmp(back, host, BYTES) == 0;
  expect(d, ok, "device 1 reads the repaired c through its peer binding: %s",
         cubert_status_name(st));
  if (!ok) show_last_error();
  st = cubert_handle_check(d->c0, x);
  expect(d, st == CUBERT_ERR_TAINTED, "x, never rewritten, still carries the failure: %s",
         cubert_status_name(st));
  uint32_t value = 7;
  uint64_t n = N;
  cubert_arg fill_args[3] = {cubert_arg_buffer(x), cubert_arg_scalar(&n, sizeof n),
                             cubert_arg_scalar(&value, sizeof value)};
  cubert_launch_config cfg = shape();
  st = cubert_launch(d->c0, d->fill, &cfg, fill_args, 3);
  if (st == CUBERT_OK) st = cubert_sync(d->c0);
  ok = read_u32(d->c0, x, back, &st) && back[0] == 7 && back[N - 1] == 7;
  expect(d, ok, "fill_u32(x, 7) rewrote x, which reads again: %s", cubert_status_name(st));

  printf("[9] memory pools after the tour\n");
  print_pools(d->c0, 0);
  print_pools(d->c1, 1);
  rc = CB_CLI_OK;

out:
  cubert_handle_release(y);
  cubert_handle_release(hi);
  cubert_handle_release(lo);
  cubert_handle_release(e);
  cubert_handle_release(x);
  cubert_handle_release(c);
  cubert_handle_release(b);
  cubert_handle_release(a);
  free(host);
  free(back);
  return rc;
}

int cb_cli_demo(int argc, char **argv) {
  const cb_cli_opt opts[] = {CB_END};
  const cb_cli_spec spec = {"demo", usage, opts, 0, 0, NULL};
  int first, parsed = cb_cli_parse(&spec, argc, argv, &first);
  if (parsed != CB_CLI_PARSED) return parsed;
  demo d;
  memset(&d, 0, sizeof d);
  printf("cubert %s demo: two simulated devices on the host backend\n", cubert_version());
  int rc = setup(&d);
  if (rc == CB_CLI_OK) rc = run_demo(&d);
  teardown(&d);
  if (rc != CB_CLI_OK) return rc;
  if (d.failed_steps != 0) {
    printf("demo: %d step%s did not behave as documented\n", d.failed_steps,
           d.failed_steps == 1 ? "" : "s");
    return CB_CLI_FAILED;
  }
  printf("demo: all steps behaved as documented\n");
  return CB_CLI_OK;
}
