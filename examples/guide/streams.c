/* Clients and streams: a client is the front door to one device. Work goes
 * to the client's stream (the thread's current one unless pinned); a sync
 * waits for it and reports the failures found there. */
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
  cubert_runtime *rt = NULL;
  if (check(cubert_runtime_create(&options, &rt), "runtime")) return 1;

  cubert_client *client = NULL;
  cubert_stream second = 0;
  cubert_handle *h = NULL;
  int rc = 1;
  if (check(cubert_client_create(rt, 0, &client), "client")) goto out;
  if (check(cubert_stream_create(client, &second), "stream")) goto out;

  /* Pinned to `second`, the client enqueues its work there. */
  if (check(cubert_client_use_stream(client, second), "use_stream")) goto out;
  uint32_t pattern = 7;
  if (check(cubert_handle_empty(client, 1024, &h), "alloc")) goto out;
  if (check(cubert_handle_fill(client, h, &pattern, sizeof pattern), "fill")) goto out;
  if (check(cubert_sync(client), "sync")) goto out;
  if (check(cubert_client_use_stream(client, 0), "unpin")) goto out; /* back to the thread's stream */
  if (check(cubert_sync_device(client), "sync_device")) goto out;    /* every stream of the device */
  printf("filled 1024 bytes on stream %llu of device %d\n", (unsigned long long)second,
         cubert_client_device(client));
  rc = 0;
out:
  cubert_handle_release(h);
  if (client) cubert_client_destroy(client); /* clients go before their runtime */
  cubert_runtime_destroy(rt);
  return rc;
}
