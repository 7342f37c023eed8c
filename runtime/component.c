/* runtime/component.c: what components built on cubert's public API (the
 * MPI component, libcubert_mpi) need from the core to behave like the rest
 * of cubert: failures of their own making, and the thread's last error for
 * their own entry points. */
#include "runtime/internal.h"

cubert_status cubert_failure_create(cubert_client *client, cubert_status status, const char *message,
                                    const cubert_failure **failure) {
  if (!client) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_failure_create: client is NULL");
  if (!failure) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_failure_create: failure is NULL");
  if (status == CUBERT_OK || (unsigned)status >= CUBERT_STATUS_COUNT_)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT,
                   "cubert_failure_create: status %d is not an error status", (int)status);
  cubert_failure *f = cb_failure_new(status, message, client->dev->index, client->dev->info.name, 0, "transport", "", 0);
  if (!f) return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "cubert_failure_create: out of memory");
  *failure = f;
  return CUBERT_OK;
}

cubert_status cubert_error_record(cubert_status status, const char *message) {
  return cb_fail(status, "%s", message ? message : cubert_status_string(status));
}
