/* Handles, slices and bindings: a handle is a refcounted view of device
 * memory. A slice is a view of part of it; writing a slice touches only its
 * bytes. A binding holds memory the way a launch does. */
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
  cubert_handle *whole = NULL, *tail = NULL, *again = NULL;
  int rc = 1;
  if (check(cubert_client_create(rt, 0, &client), "client")) goto out;

  uint32_t data[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  if (check(cubert_handle_create(client, data, sizeof data, &whole), "create")) goto out;
  /* The last half: 16 bytes in from the start, 0 bytes shorter at the end. */
  if (check(cubert_handle_slice(whole, 16, 0, &tail), "slice")) goto out;
  uint32_t nine = 9;
  if (check(cubert_handle_fill(client, tail, &nine, sizeof nine), "fill")) goto out;

  uint32_t back[8];
  if (check(cubert_handle_read(client, whole, back, sizeof back), "read")) goto out;
  printf("after filling the tail:");
  for (int i = 0; i < 8; i++) printf(" %u", back[i]);
  printf("\n");

  again = cubert_handle_clone(whole); /* one more reference to the same view */
  printf("size %llu, tail in use %llu, overlap %d, only handle: %s\n",
         (unsigned long long)cubert_handle_size(whole), (unsigned long long)cubert_handle_size_in_use(tail),
         (int)cubert_handle_overlap(whole, tail), cubert_handle_can_mut(whole) ? "yes" : "no");

  /* A binding keeps the memory reserved (as a launch does) without counting
   * as a handle; a weak binding keeps nothing and upgrades only while the
   * memory lives. */
  cubert_binding *binding = NULL;
  cubert_weak *weak = NULL;
  if (check(cubert_handle_bind(tail, &binding), "bind") || check(cubert_binding_downgrade(binding, &weak), "weak"))
    goto out;
  cubert_claim_key key = cubert_binding_claim_key(binding);
  printf("binding on memory %llu, bytes %llu..%llu\n", (unsigned long long)key.memory,
         (unsigned long long)key.start, (unsigned long long)key.end);
  cubert_binding_release(binding);
  cubert_handle_release(again);
  cubert_handle_release(tail);
  cubert_handle_release(whole);
  again = tail = whole = NULL; /* the memory is gone now */
  cubert_binding *late = NULL;
  cubert_status st = cubert_weak_upgrade(weak, &late);
  printf("weak upgrade after the last release: %s\n", cubert_status_name(st));
  cubert_weak_release(weak);
  rc = back[0] == 0 && back[4] == 9 && st == CUBERT_ERR_EXPIRED ? 0 : 1;
out:
  cubert_handle_release(again); /* NULL is fine */
  cubert_handle_release(tail);
  cubert_handle_release(whole);
  if (client) cubert_client_destroy(client);
  cubert_runtime_destroy(rt);
  return rc;
}
