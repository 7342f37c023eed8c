/* runtime/kcheck.h: a kernel's own launch check (internal). The runtime
 * header kernels/ may include besides runtime/fail.h: kernels/builtin.c
 * installs one on each built-in it creates, so a launch of a built-in is
 * checked by the rules of its host function on every backend, before
 * anything is enqueued (docs/architecture.md).
 *
 * A check sees the launch as the kernel's host function would
 * (cubert_host_launch): the configuration, each scalar's value, each
 * tensor's descriptor, and for each buffer the address the launching
 * device's kernel would get for it (a peer buffer's: the owner's address of
 * the same bytes; the offset modulo any alignment is the same) and the bytes
 * bound. It returns CUBERT_OK, or a refusal with a message naming the
 * kernel, the argument and the sizes (the launch is then refused: nothing
 * enqueued, nothing changed). On CUBERT_OK it may lower written[i], preset
 * to sizes[i] for every argument: a buffer argument whose parameter only
 * writes is then bound (its write set: released on success, tainted on
 * failure) over its first written[i] bytes only. Runs without a lock. */
#ifndef CUBERT_RUNTIME_KCHECK_H
#define CUBERT_RUNTIME_KCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "cubert/cubert.h"
#include "runtime/fail.h"

/* Arguments a checked kernel takes at most (a launch of more is left to the
 * usual checks, which refuse it against the kernel's parameters). */
#define CB_KCHECK_MAX_ARGS 8

typedef cubert_status (*cb_kernel_check_fn)(const cubert_host_launch *launch, uint64_t *written,
                                            char *message, size_t capacity);

/* Installs `check` on `k` (NULL removes it). For a kernel no launch has
 * seen yet: its creator's, before it hands the kernel out. */
void cb_kernel_set_check(cubert_kernel *k, cb_kernel_check_fn check);

/* The core's side (launch.c): runs k->check on a launch. A launch whose
 * arguments do not match the kernel's parameters (count, kinds, NULL
 * handles, scalars' sizes, tensor views of a wrong rank or element size)
 * is left to the usual checks, which name what is wrong: CUBERT_OK with
 * *use = args. Otherwise the check's refusal (in `eb`), or CUBERT_OK with
 * *use the arguments to launch: `args`, or `narrowed` (room for nargs)
 * where a write-only buffer is bound over fewer bytes, its handle then one
 * of `handles` (room for nargs; both the caller's, alive for the launch). */
cubert_status cb_kernel_check(cb_errb *eb, const cubert_kernel *k, const cubert_launch_config *cfg,
                              const cubert_arg *args, uint32_t nargs, cubert_arg *narrowed,
                              cubert_handle *handles, const cubert_arg **use);

#endif
