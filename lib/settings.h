/* lib/settings.h: the backends' own settings as libcubert reads them
 * (internal): the settings_* members of runtime/parts.h. Only the host
 * backend has any: cb_host_options (backends/host/host_backend.h) read by
 * cb_host_settings_read, with the PCI bus ids of a simulated node
 * ($CUBERT_HOST_NODE, topology/host_node.h) added. The core sees none of
 * it, only the opaque struct cb_backend_settings.
 *
 * Ownership: cb_settings_new hands the caller a struct it frees with
 * cb_settings_free; what cb_settings_for returns is borrowed from it.
 * Tests that pass a parts table of their own may use these too. */
#ifndef CUBERT_LIB_SETTINGS_H
#define CUBERT_LIB_SETTINGS_H

#include <stdbool.h>

#include "base/str.h"
#include "cubert/cubert.h"

struct cb_backend_settings;

/* Reads the host backend's settings from `options` (complete) and the
 * environment, then $CUBERT_HOST_NODE's bus ids (which set the number of
 * host devices when neither host_devices nor $CUBERT_HOST_DEVICES does).
 * A refusal appends its message to `why` ("CUBERT_HOST_NODE=x: ...") and
 * returns its status, with nothing to free. */
cubert_status cb_settings_new(const cubert_runtime_options *options, struct cb_backend_settings **settings,
                              cb_str *why);
/* The host backend's settings for backend "host"; NULL for any other. */
const void *cb_settings_for(const struct cb_backend_settings *settings, const char *name);
/* Where a setting the host backend's refusal `message` names came from. */
void cb_settings_explain(const struct cb_backend_settings *settings, const char *name, const char *message,
                         cb_str *why);
/* Backend "host" with a simulated node: its bus ids are the node's. */
bool cb_settings_bus_ids_made_up(const struct cb_backend_settings *settings, const char *name);
void cb_settings_free(struct cb_backend_settings *settings);

#endif
