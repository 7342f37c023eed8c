/* backends/host/host_backend.h: the host backend's own settings (internal).
 *
 * The runtime passes them as cubert_backend_config.options when it opens the
 * host backend (backends/backend.h keeps no host-only field); NULL there
 * means HOST defaults: 4 devices of 1 GiB, every pair allowed, no bus ids.
 * The core never sees this header: libcubert reads the settings
 * (cb_host_settings_read, from lib/settings.c) and hands them to the core
 * as an opaque pointer (runtime/parts.h).
 *
 * Ownership: borrowed for the open call only; the backend copies what it
 * keeps. */
#ifndef CUBERT_BACKENDS_HOST_BACKEND_H
#define CUBERT_BACKENDS_HOST_BACKEND_H

#include <stdint.h>

#include "base/str.h"
#include "cubert/cubert.h"

typedef struct cb_host_options {
  int devices;                     /* simulated devices, 0 to 64 */
  uint64_t memory;                 /* bytes per device, more than 0 */
  const char *peer_deny;           /* "0-2,1-3": denied pairs (both ways); NULL: none */
  const char *const *pci_bus_ids;  /* bus id per device from a simulated node, or NULL */
  int pci_bus_id_count;
  const char *peer_deny_from;      /* the variable peer_deny was read from, for
                                      messages; NULL: an option, or none */
} cb_host_options;

/* The settings a runtime made with options `o` (complete: zero beyond the
 * caller's struct_size) opens the host backend with: o->host_devices, else
 * $CUBERT_HOST_DEVICES, else 4 (at most 64); o->host_memory, else
 * $CUBERT_HOST_MEMORY, else 1 GiB (a size as base/env.h reads it, not 0);
 * o->host_peer_deny, else $CUBERT_HOST_PEER_DENY (checked when the backend
 * opens). No bus ids: a simulated node is the caller's to add. A refusal
 * returns CUBERT_ERR_INVALID_ARGUMENT and appends the message a user sees to
 * `why` ("CUBERT_HOST_MEMORY is 0"); `out` is then untouched. Strings in
 * `out` are borrowed from `o` and the environment. */
cubert_status cb_host_settings_read(const cubert_runtime_options *o, cb_host_options *out, cb_str *why);

/* The host backend refused to open `host` saying `message`: appends to `why`
 * where a setting it names came from, when a variable gave it ("; the pairs
 * came from CUBERT_HOST_PEER_DENY=0-x"); else nothing. */
void cb_host_settings_explain(const cb_host_options *host, const char *message, cb_str *why);

#endif
