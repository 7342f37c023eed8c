/* The runtime and its devices: create a runtime on the host backend (which
 * simulates devices in host memory, so this runs anywhere), list what it
 * found, and destroy it. */
#include <cubert/cubert.h>
#include <inttypes.h>
#include <stdio.h>

int main(void) {
  cubert_runtime_options options;
  cubert_runtime_options_init(&options); /* unset backends: the GPUs, else host */
  options.backends = "host";
  options.host_devices = 2;

  cubert_runtime *rt = NULL;
  cubert_status st = cubert_runtime_create(&options, &rt);
  if (st != CUBERT_OK) {
    fprintf(stderr, "runtime: %s: %s\n", cubert_status_name(st), cubert_last_error_message());
    return 1;
  }
  for (int d = 0; d < cubert_runtime_device_count(rt); d++) {
    cubert_device_info info;
    if (cubert_runtime_device_info(rt, d, &info) != CUBERT_OK) continue;
    printf("device %d: %s (%s backend, arch %s), %" PRIu64 " bytes\n", d, info.name, info.backend,
           info.arch, info.total_memory);
  }
  cubert_runtime_destroy(rt);
  return 0;
}
