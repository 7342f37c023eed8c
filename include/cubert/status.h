/* cubert/status.h: the one status enum of cubert, and its string function.
 *
 * Every public call returns a cubert_status. CUBERT_OK is 0; every error is a
 * positive value. The list is an X-macro so that the enum, the names and the
 * descriptions come from one table and cannot drift apart.
 *
 * Ownership: cubert_status_string() and cubert_status_name() return static
 * strings that the caller must not free. */
#ifndef CUBERT_STATUS_H
#define CUBERT_STATUS_H

#include "cubert/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUBERT_STATUS_MAP(X)                                                    \
  X(OK, "success")                                                              \
  X(ERR_INVALID_ARGUMENT, "invalid argument")                                   \
  X(ERR_OUT_OF_RANGE, "offset or size out of range")                            \
  X(ERR_WRONG_DEVICE, "handle belongs to another device")                       \
  X(ERR_OUT_OF_MEMORY, "out of memory")                                         \
  X(ERR_TAINTED, "data carries a failure")                                      \
  X(ERR_LAUNCH, "kernel launch failed")                                         \
  X(ERR_LAUNCH_CONFIG, "launch does not fit the kernel or the device limits")   \
  X(ERR_COMPILE, "kernel compilation failed")                                   \
  X(ERR_COPY, "copy failed")                                                    \
  X(ERR_DEVICE_LOST, "device lost")                                             \
  X(ERR_PEER_ACCESS, "peer access refused")                                     \
  X(ERR_NOT_SHARED, "memory not shared with peers")                             \
  X(ERR_EXPIRED, "memory no longer allocated")                                  \
  X(ERR_NO_DEVICE, "no such device")                                            \
  X(ERR_UNSUPPORTED, "not supported by this backend")                           \
  X(ERR_BACKEND, "backend failure")                                             \
  X(ERR_IO, "input/output error")                                               \
  X(ERR_PARSE, "parse error")                                                   \
  X(ERR_TIMEOUT, "timed out")                                                   \
  X(ERR_BUSY, "resource in use")                                                \
  X(ERR_INTERNAL, "internal error")

typedef enum cubert_status {
#define CUBERT_STATUS_ENUM_(name, text) CUBERT_##name,
  CUBERT_STATUS_MAP(CUBERT_STATUS_ENUM_)
#undef CUBERT_STATUS_ENUM_
  CUBERT_STATUS_COUNT_
} cubert_status;

/* A sentence describing the status ("device lost"); "unknown status" for a
 * value outside the enum. Static storage. */
CUBERT_API const char *cubert_status_string(cubert_status status);

/* The enumerator's name without the prefix ("ERR_DEVICE_LOST"). Static. */
CUBERT_API const char *cubert_status_name(cubert_status status);

#ifdef __cplusplus
}
#endif
#endif
