/* Peers: memory of device 0, shared, read by a kernel on device 1 through
 * a peer binding (cubert_copy_peer_read: in is a peer buffer, out is local),
 * and copied between devices with cubert_handle_copy_peer. A failure on the
 * owner reaches the peer's readers the same way (docs/failures.md, rule 5). */
#include <cubert/cubert.h>
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
  options.host_devices = 2;
  cubert_runtime *rt = NULL;
  if (check(cubert_runtime_create(&options, &rt), "runtime")) return 1;
  cubert_client *c0 = NULL, *c1 = NULL;
  cubert_kernel *peer_read = NULL;
  cubert_handle *x = NULL, *y = NULL, *z = NULL;
  int rc = 1;
  if (check(cubert_client_create(rt, 0, &c0), "client 0") || check(cubert_client_create(rt, 1, &c1), "client 1"))
    goto out;

  enum { N = 512 };
  uint32_t data[N];
  for (int i = 0; i < N; i++) data[i] = (uint32_t)(3 * i);
  if (check(cubert_handle_create(c0, data, sizeof data, &x), "x on device 0") ||
      check(cubert_handle_empty(c1, sizeof data, &y), "y on device 1") ||
      check(cubert_handle_empty(c1, sizeof data, &z), "z on device 1"))
    goto out;

  /* Sharing pins x and enables peer access; a refused pair says so. Nothing
   * orders device 1's kernel after device 0's write of x: sync the owner. */
  if (check(cubert_handle_share(c0, x), "share") || check(cubert_sync(c0), "sync device 0")) goto out;
  uint64_t n = N;
  cubert_arg args[] = {cubert_arg_peer(x), cubert_arg_buffer(y), cubert_arg_scalar(&n, sizeof n)};
  cubert_launch_config cfg = {{2, 1, 1}, {256, 1, 1}, 0};
  if (check(cubert_builtin_kernel(CUBERT_BUILTIN_COPY_PEER_READ, &peer_read), "builtin") ||
      check(cubert_launch(c1, peer_read, &cfg, args, 3), "peer-read launch on device 1"))
    goto out;
  /* A copy between devices: enqueued on z's stream, after x's. */
  if (check(cubert_handle_copy_peer(c0, x, c1, z), "copy_peer")) goto out;

  uint32_t by_kernel[N], by_copy[N];
  if (check(cubert_handle_read(c1, y, by_kernel, sizeof by_kernel), "read y") ||
      check(cubert_handle_read(c1, z, by_copy, sizeof by_copy), "read z"))
    goto out;
  printf("device 1 read device 0's memory: y[100] = %u, z[100] = %u\n", by_kernel[100], by_copy[100]);
  rc = by_kernel[100] == 300 && by_copy[100] == 300 ? 0 : 1;
out:
  cubert_handle_release(z);
  cubert_handle_release(y);
  cubert_handle_release(x);
  if (peer_read) cubert_kernel_release(peer_read);
  if (c1) cubert_client_destroy(c1);
  if (c0) cubert_client_destroy(c0);
  cubert_runtime_destroy(rt);
  return rc;
}
