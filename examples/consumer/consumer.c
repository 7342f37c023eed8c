/* examples/consumer/consumer.c: a program outside the cubert tree that uses
 * the installed library: it copies data through a built-in kernel on the
 * first device (the first GPU, else a simulated host device) and reads it
 * back, then shows a refused read with its reason.
 * Built by CMakeLists.txt (find_package) and by Makefile (pkg-config). */
#include <cubert/cubert.h>
#include <stdio.h>
#include <string.h>

#define N 4096u

static int fail(const char *what, cubert_status st) {
  fprintf(stderr, "consumer: %s: %s: %s\n", what, cubert_status_name(st),
          cubert_last_error_message());
  return 1;
}

int main(void) {
  static unsigned int in[N], out[N];
  for (unsigned int i = 0; i < N; i++) in[i] = i * 7u + 3u;

  /* The default backends: the GPUs, or where there is none, 2 simulated
   * host devices (so it runs anywhere). options.backends = "hip" would ask
   * for GPUs only. */
  cubert_runtime_options options;
  cubert_runtime_options_init(&options);
  options.host_devices = 2;

  cubert_runtime *rt = NULL;
  cubert_client *client = NULL;
  cubert_kernel *copy = NULL;
  cubert_handle *a = NULL, *b = NULL;
  int rc = 1;
  cubert_status st = cubert_runtime_create(&options, &rt);
  if (st != CUBERT_OK) return fail("cubert_runtime_create", st);
  if ((st = cubert_client_create(rt, 0, &client)) != CUBERT_OK) {
    rc = fail("cubert_client_create", st);
    goto out;
  }
  if ((st = cubert_handle_create(client, in, sizeof in, &a)) != CUBERT_OK ||
      (st = cubert_handle_empty(client, sizeof out, &b)) != CUBERT_OK) {
    rc = fail("allocating", st);
    goto out;
  }
  if ((st = cubert_builtin_kernel(CUBERT_BUILTIN_COPY_U32, &copy)) != CUBERT_OK) {
    rc = fail("cubert_builtin_kernel", st);
    goto out;
  }
  uint64_t n = N;
  cubert_arg args[3] = {cubert_arg_buffer(a), cubert_arg_buffer(b), cubert_arg_scalar(&n, sizeof n)};
  cubert_launch_config cfg = {{8, 1, 1}, {128, 1, 1}, 0};
  if ((st = cubert_launch(client, copy, &cfg, args, 3)) != CUBERT_OK) {
    rc = fail("cubert_launch", st);
    goto out;
  }
  if ((st = cubert_handle_read(client, b, out, sizeof out)) != CUBERT_OK) {
    rc = fail("cubert_handle_read", st);
    goto out;
  }
  if (memcmp(in, out, sizeof in) != 0) {
    fprintf(stderr, "consumer: the copy does not match its source\n");
    goto out;
  }
  /* A mistake is an error value with a message, never an abort. */
  cubert_status wrong_size = cubert_handle_read(client, b, out, sizeof out + 1);
  if (wrong_size == CUBERT_OK) {
    fprintf(stderr, "consumer: a read of the wrong size was accepted\n");
    goto out;
  }
  cubert_device_info info;
  if ((st = cubert_runtime_device_info(rt, 0, &info)) != CUBERT_OK) {
    rc = fail("cubert_runtime_device_info", st);
    goto out;
  }
  printf("consumer: cubert %s, %d devices, copied %u values on device 0 (%s, backend %s); a wrong-size "
         "read said: %s\n",
         cubert_version(), cubert_runtime_device_count(rt), N, info.name, info.backend,
         cubert_status_name(wrong_size));
  rc = 0;

out:
  cubert_handle_release(b);
  cubert_handle_release(a);
  if (copy != NULL) cubert_kernel_release(copy);
  if (client != NULL) cubert_client_destroy(client);
  cubert_runtime_destroy(rt);
  return rc;
}
