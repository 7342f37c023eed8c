/* backends/host/host_testing.h: seams for tests of what the runtime does
 * around the host backend's modules, and of its write staging (internal,
 * never installed).
 *
 * The host backend has nothing to compile: its module_prepare only counts
 * and calls the hook a test set, which stands for a slow compile (it may
 * block until the test lets it go). The counters are process-wide, over
 * every host device of every runtime. */
#ifndef CUBERT_BACKENDS_HOST_TESTING_H
#define CUBERT_BACKENDS_HOST_TESTING_H

#include <stdint.h>

/* Called by module_prepare with the kernel's name, on the thread that
 * launches (without the device's lock); NULL (the default): none. */
typedef void (*cb_host_prepare_hook)(const char *kernel, void *ctx);
void cb_host_testing_set_prepare_hook(cb_host_prepare_hook hook, void *ctx);

/* module_prepare and module_load calls so far, and modules loaded and not
 * unloaded now. */
uint64_t cb_host_testing_prepares(void);
uint64_t cb_host_testing_loads(void);
int64_t cb_host_testing_live_modules(void);

/* Large staging blocks allocated so far (writes from HOST_WRITE_LARGE
 * queued behind other work; one kept from an earlier write is not counted
 * again), and the bytes of blocks kept now, over every host device. */
uint64_t cb_host_testing_staging_allocs(void);
uint64_t cb_host_testing_staging_kept(void);

#endif
