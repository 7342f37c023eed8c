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
 * Scribbles (garbage over part of a failed call's outputs) go through the
 * inner backend with the call's own stream and work number: a fill over the
 * device's own memory, and over a launch's peer outputs a small kernel of
 * the layer's (cubert_faultinj_scribble, source and host function) writing
 * through a peer binding, as the failed kernel would have; a backend that
 * cannot load it gets a fill at the peer address instead.
 *
 * Threading: as backend.h; read, sync, progress and drain_failures are safe
 * beside other calls on the same device. Ownership: as backend.h; the
 * wrappers are freed by the matching close/destroy/unload. */
#ifndef CUBERT_FAULTINJ_DECORATOR_H
#define CUBERT_FAULTINJ_DECORATOR_H

#include "backends/backend.h"
#include "faultinj/injector.h"

const cubert_backend_ops *cb_faultinj_ops(void);

/* Opens `inner` (inner->open(config, ...)) and wraps it. `fi` is the
 * runtime's fault state (borrowed: it outlives the backend), whose rules
 * select the calls and whose log records the injections. `device_base` is
 * the runtime-wide index of this backend's device 0: device filters and logs
 * use runtime-wide indices. */
cubert_status cb_faultinj_open(const cubert_backend_ops *inner, cb_fi_state *fi, int device_base,
                               const cubert_backend_config *config, void **backend,
                               int *device_count, cubert_berr *err);

#endif
