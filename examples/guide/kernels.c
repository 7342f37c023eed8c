/* Kernels and launches: a built-in (cubert_scale_add_f32: y = a * x + y)
 * and a kernel of your own, with its HIP source for GPUs and a host function
 * for the host backend. The parameter list tells the runtime what each
 * argument is and whether the kernel reads or writes it: that is what the
 * failure account is built on. */
#include <cubert/cubert.h>
#include <stdio.h>

static int check(cubert_status st, const char *what) {
  if (st == CUBERT_OK) return 0;
  fprintf(stderr, "%s: %s: %s\n", what, cubert_status_name(st), cubert_last_error_message());
  return 1;
}

/* Your own kernel: out[i] = in[i] * in[i]. */
static const char square_source[] =
    "extern \"C\" __global__ void square_u32(const unsigned *in, unsigned *out,\n"
    "                                         unsigned long long n) {\n"
    "  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
    "       i += (unsigned long long)gridDim.x * blockDim.x)\n"
    "    out[i] = in[i] * in[i];\n"
    "}\n";

/* The same for the host backend: one pointer per argument. */
static cubert_status square_host(const cubert_host_launch *l, char *message, size_t capacity) {
  const uint32_t *in = l->args[0];
  uint32_t *out = l->args[1];
  uint64_t n = *(const uint64_t *)l->args[2];
  if (l->sizes[0] < n * 4 || l->sizes[1] < n * 4) {
    snprintf(message, capacity, "square_u32: buffers hold fewer than n values");
    return CUBERT_ERR_INVALID_ARGUMENT;
  }
  for (uint64_t i = 0; i < n; i++) out[i] = in[i] * in[i];
  return CUBERT_OK;
}

static const cubert_param square_params[] = {
    {"in", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_READ, 0},
    {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0},
    {"n", CUBERT_PARAM_SCALAR, 0, 8},
};

int main(void) {
  cubert_runtime_options options;
  cubert_runtime_options_init(&options);
  options.backends = "host";
  cubert_runtime *rt = NULL;
  if (check(cubert_runtime_create(&options, &rt), "runtime")) return 1;
  cubert_client *client = NULL;
  cubert_kernel *axpy = NULL, *square = NULL;
  cubert_handle *x = NULL, *y = NULL, *sq = NULL;
  int rc = 1;
  if (check(cubert_client_create(rt, 0, &client), "client")) goto out;

  enum { N = 256 };
  float xs[N], ys[N];
  for (int i = 0; i < N; i++) xs[i] = (float)i, ys[i] = 1.0f;
  if (check(cubert_handle_create(client, xs, sizeof xs, &x), "x") ||
      check(cubert_handle_create(client, ys, sizeof ys, &y), "y"))
    goto out;

  /* Built-in: parameters (x: read, y: read-write, a: f32, n: u64), in that
   * order (cubert/kernels.h lists every built-in's). */
  float a = 2.0f;
  uint64_t n = N;
  cubert_arg axpy_args[] = {cubert_arg_buffer(x), cubert_arg_buffer(y), cubert_arg_scalar(&a, sizeof a),
                            cubert_arg_scalar(&n, sizeof n)};
  cubert_launch_config cfg = {{4, 1, 1}, {64, 1, 1}, 0}; /* grid, block, shared memory */
  if (check(cubert_builtin_kernel(CUBERT_BUILTIN_SCALE_ADD_F32, &axpy), "builtin") ||
      check(cubert_launch(client, axpy, &cfg, axpy_args, 4), "launch scale_add"))
    goto out;

  /* Your own. On a GPU the source is compiled by hiprtc at the first launch
   * (and cached on disk, $CUBERT_CACHE_DIR); the host backend calls host_fn. */
  cubert_kernel_desc desc = {0};
  desc.name = "square_u32";
  desc.params = square_params;
  desc.nparams = 3;
  desc.source = square_source;
  desc.host_fn = square_host;
  if (check(cubert_kernel_create(&desc, &square), "kernel_create")) goto out;
  uint32_t in[N];
  for (int i = 0; i < N; i++) in[i] = (uint32_t)i;
  cubert_handle *hin = NULL;
  if (check(cubert_handle_create(client, in, sizeof in, &hin), "in")) goto out;
  if (check(cubert_handle_empty(client, sizeof in, &sq), "out")) {
    cubert_handle_release(hin);
    goto out;
  }
  cubert_arg square_args[] = {cubert_arg_buffer(hin), cubert_arg_buffer(sq), cubert_arg_scalar(&n, sizeof n)};
  cubert_status st = cubert_launch(client, square, &cfg, square_args, 3);
  cubert_handle_release(hin); /* the launch holds what it needs */
  if (check(st, "launch square")) goto out;

  /* Reading results: a read waits for the work that writes the bytes. */
  uint32_t squares[N];
  if (check(cubert_handle_read(client, y, ys, sizeof ys), "read y") ||
      check(cubert_handle_read(client, sq, squares, sizeof squares), "read squares"))
    goto out;
  printf("y[3] = %.1f (2 * 3 + 1), squares[12] = %u\n", ys[3], squares[12]);
  rc = ys[3] == 7.0f && squares[12] == 144 ? 0 : 1;
out:
  cubert_handle_release(sq);
  cubert_handle_release(y);
  cubert_handle_release(x);
  if (square) cubert_kernel_release(square);
  if (axpy) cubert_kernel_release(axpy);
  if (client) cubert_client_destroy(client);
  cubert_runtime_destroy(rt);
  return rc;
}
