/* Host buffers: page-locked host memory that writes and reads move through
 * asynchronously, at the link's rate. A transfer is queued on the client's
 * stream and done at the next sync; the buffer has a ledger, so bytes a
 * failed read should have written are refused as good data. */
#include <cubert/cubert.h>
#include <stdio.h>
#include <string.h>

static int check(cubert_status st, const char *what) {
  if (st == CUBERT_OK) return 0;
  fprintf(stderr, "%s: %s: %s\n", what, cubert_status_name(st), cubert_last_error_message());
  return 1;
}

int main(void) {
  cubert_runtime_options options;
  cubert_runtime_options_init(&options);
  options.backends = "host";
  cubert_runtime *rt = NULL;
  if (check(cubert_runtime_create(&options, &rt), "runtime")) return 1;
  cubert_client *client = NULL;
  cubert_host_buffer *staging = NULL;
  cubert_handle *h = NULL;
  int rc = 1;
  if (check(cubert_client_create(rt, 0, &client), "client")) goto out;

  enum { N = 1 << 20 };
  /* Pinned, on the NUMA node of the client's device. */
  if (check(cubert_host_buffer_alloc(client, 2 * N, &staging), "host buffer")) goto out;
  unsigned char *bytes = cubert_host_buffer_data(staging);
  memset(bytes, 42, N);
  if (check(cubert_handle_empty(client, N, &h), "empty")) goto out;

  /* Both are queued: they return before the bytes move. */
  if (check(cubert_handle_write_host(client, h, staging, 0, N), "write from the host buffer") ||
      check(cubert_handle_read_host(client, h, staging, N, N), "read into the host buffer"))
    goto out;
  if (check(cubert_sync(client), "sync")) goto out;

  /* After the sync, ask the buffer's ledger before trusting the bytes. */
  if (check(cubert_host_buffer_check(staging, N, N), "check")) goto out;
  printf("read back %d, last byte %d\n", bytes[N], bytes[2 * N - 1]);
  rc = bytes[N] == 42 && bytes[2 * N - 1] == 42 ? 0 : 1;
out:
  cubert_handle_release(h);
  cubert_host_buffer_release(staging); /* waits for its transfers; before the runtime */
  if (client) cubert_client_destroy(client);
  cubert_runtime_destroy(rt);
  return rc;
}
