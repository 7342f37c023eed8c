/* Fault injection in your program: rules added through the API to a runtime
 * (or from $CUBERT_FAULTS with no change to the program), a rule text with a
 * mistake refused with where it went wrong, and the log of what was
 * injected. Rules, counters and the log belong to the runtime. */
#include <cubert/cubert.h>
#include <cubert/faultinj.h>
#include <stdio.h>

int main(void) {
  cubert_runtime_options options;
  cubert_runtime_options_init(&options);
  options.backends = "host";
  options.host_memory = 64u << 20;
  cubert_runtime *rt = NULL;
  cubert_client *client = NULL;
  cubert_handle *h[4] = {NULL};
  int rc = 1;
  if (cubert_runtime_create(&options, &rt) != CUBERT_OK || cubert_client_create(rt, 0, &client) != CUBERT_OK) {
    fprintf(stderr, "setup: %s\n", cubert_last_error_message());
    goto out;
  }
  cubert_faultinj_diag diag;
  /* A mistake in a rule is refused with its place; nothing is added. */
  if (cubert_faultinj_add(rt, "launch kernel=cubert_fill_u32 nth=zero", "example", NULL, &diag) == CUBERT_ERR_PARSE)
    printf("refused: %s\n", diag.message);

  /* Every allocation on device 0 after the first fails: out of memory. */
  uint32_t rule = 0;
  if (cubert_faultinj_add(rt, "alloc device=0 after=1 fault=oom", "example", &rule, &diag) != CUBERT_OK) {
    fprintf(stderr, "%s\n", diag.message);
    goto out;
  }
  /* Large allocations each take pages from the driver. A refused page makes
   * the pool give back its idle pages and ask once more, so each refused
   * allocation is two injections in the log. */
  int refused = 0;
  for (int i = 0; i < 4; i++)
    if (cubert_handle_empty(client, 8u << 20, &h[i]) == CUBERT_ERR_OUT_OF_MEMORY) refused++;

  cubert_fault_record log[8];
  size_t nlog = cubert_faultinj_log(rt, 0, log, 8);
  printf("rule %u: %d allocations refused, %llu faults injected\n", rule, refused,
         (unsigned long long)cubert_faultinj_injected(rt));
  for (size_t i = 0; i < nlog; i++) printf("  #%llu %s\n", (unsigned long long)log[i].id, log[i].message);
  rc = refused > 0 && nlog > 0 ? 0 : 1;
out:
  for (int i = 0; i < 4; i++) cubert_handle_release(h[i]);
  if (client) cubert_client_destroy(client);
  cubert_runtime_destroy(rt); /* its rules, log and counters go with it */
  return rc;
}
