/* Failures and what a tainted read tells you: the first launch of
 * cubert_fill_u32 is made to fail (a fault rule, see faultinj.c), so the
 * bytes it should have written are tainted; a copy reading them is refused
 * and passes the failure on; the read of the copy's output says where the
 * failure came from. Writing the bytes again clears them. */
#include <cubert/cubert.h>
#include <cubert/faultinj.h>
#include <stdio.h>

static int check(cubert_status st, const char *what) {
  if (st == CUBERT_OK) return 0;
  fprintf(stderr, "%s: %s: %s\n", what, cubert_status_name(st), cubert_last_error_message());
  return 1;
}

int main(void) {
  cubert_runtime_options options;
  cubert_runtime_options_init(&options);
  options.backends = "host";
  options.faults = "launch kernel=cubert_fill_u32 nth=1 fault=fail";
  cubert_runtime *rt = NULL;
  if (check(cubert_runtime_create(&options, &rt), "runtime")) return 1;
  cubert_client *client = NULL;
  cubert_kernel *fill = NULL;
  cubert_handle *a = NULL, *b = NULL;
  int rc = 1;
  if (check(cubert_client_create(rt, 0, &client), "client") ||
      check(cubert_builtin_kernel(CUBERT_BUILTIN_FILL_U32, &fill), "builtin") ||
      check(cubert_handle_empty(client, 4096, &a), "a") || check(cubert_handle_empty(client, 4096, &b), "b"))
    goto out;

  /* fill_u32: (out: write, n: u64, value: u32). The rule fails this launch. */
  uint64_t n = 1024;
  uint32_t value = 42;
  cubert_arg args[] = {cubert_arg_buffer(a), cubert_arg_scalar(&n, sizeof n), cubert_arg_scalar(&value, sizeof value)};
  cubert_launch_config cfg = {{4, 1, 1}, {256, 1, 1}, 0};
  cubert_status st = cubert_launch(client, fill, &cfg, args, 3);
  printf("launch: %s\n", cubert_status_name(st));

  /* The copy reads a's tainted bytes: refused, and b carries a child failure. */
  st = cubert_handle_copy(client, a, b);
  printf("copy a -> b: %s\n", cubert_status_name(st));

  uint32_t out[1024];
  st = cubert_handle_read(client, b, out, sizeof out);
  if (st != CUBERT_ERR_TAINTED) {
    fprintf(stderr, "expected a tainted read, got %s\n", cubert_status_name(st));
    goto out;
  }
  cubert_error *e = cubert_last_error();
  uint64_t start = 0, end = 0;
  const cubert_failure *f = cubert_error_failure(e, 0, &start, &end);
  const cubert_failure *root = cubert_failure_root(f);
  cubert_origin where;
  cubert_failure_origin(root, &where);
  printf("read of b: %s, bytes %llu..%llu, failure #%llu, root #%llu: %s of `%s` on device %d: %s\n",
         cubert_status_name(st), (unsigned long long)start, (unsigned long long)end,
         (unsigned long long)cubert_failure_id(f), (unsigned long long)cubert_failure_id(root), where.operation,
         where.kernel, where.device, cubert_failure_message(root));
  cubert_error_release(e);

  /* The rule fired once (nth=1): the second launch runs, and writing a again
   * releases its taint; b is written by a new copy. */
  if (check(cubert_launch(client, fill, &cfg, args, 3), "launch again") ||
      check(cubert_handle_copy(client, a, b), "copy again") ||
      check(cubert_handle_read(client, b, out, sizeof out), "read again"))
    goto out;
  printf("after rewriting: b[0] = %u\n", out[0]);
  rc = out[0] == 42 ? 0 : 1;
out:
  cubert_handle_release(b);
  cubert_handle_release(a);
  if (fill) cubert_kernel_release(fill);
  if (client) cubert_client_destroy(client);
  cubert_runtime_destroy(rt);
  return rc;
}
