/* faultinj/decorator.h: the fault-injection backend decorator (internal; for
 * the runtime).
 *
 * The runtime opens every backend through cb_faultinj_open() instead of
 * inner->open(), then makes every later call through cb_faultinj_ops() with
 * the states it got back: the decorator's backend, device, stream and module
 * states wrap the inner ones (events and memory cookies are the inner
 * backend's own, passed through untouched). Each call is forwarded
 * unchanged unless a rule (cubert/faultinj.h) selects it.
 *
 * The table's `name` is "faultinj": name a backend after the inner table's
 * name. Its `open` slot refuses (CUBERT_ERR_UNSUPPORTED): the decorator
 * needs the inner table and device_base, which only cb_faultinj_open takes.
 *
 * What the layer needs from the inner backend beyond backend.h: a fill at
 * a peer's address (a shared buffer another device owns) issued on the
 * launching device, for scribbling over a launch's peer outputs; a backend
 * that refuses it leaves those bytes alone (the launch still fails).
 *
 * Threading: as backend.h; read, sync, progress and drain_failures are safe
 * beside other calls on the same device. Ownership: as backend.h; the
 * wrappers are freed by the matching close/destroy/unload. */
#ifndef CUBERT_FAULTINJ_DECORATOR_H
#define CUBERT_FAULTINJ_DECORATOR_H

#include "cubert/backend.h"

const cubert_backend_ops *cb_faultinj_ops(void);

/* Opens `inner` (inner->open(config, ...)) and wraps it. `device_base` is
 * the runtime-wide index of this backend's device 0: device filters and logs
 * use runtime-wide indices. */
cubert_status cb_faultinj_open(const cubert_backend_ops *inner, int device_base,
                               const cubert_backend_config *config, void **backend,
                               int *device_count, cubert_berr *err);

#endif
