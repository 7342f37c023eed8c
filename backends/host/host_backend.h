/* backends/host/host_backend.h: the host backend's own settings (internal).
 *
 * The runtime passes them as cubert_backend_config.options when it opens the
 * host backend (backends/backend.h keeps no host-only field); NULL there
 * means HOST defaults: 4 devices of 1 GiB, every pair allowed, no bus ids.
 *
 * Ownership: borrowed for the open call only; the backend copies what it
 * keeps. */
#ifndef CUBERT_BACKENDS_HOST_BACKEND_H
#define CUBERT_BACKENDS_HOST_BACKEND_H

#include <stdint.h>

typedef struct cb_host_options {
  int devices;                     /* simulated devices, 0 to 64 */
  uint64_t memory;                 /* bytes per device, more than 0 */
  const char *peer_deny;           /* "0-2,1-3": denied pairs (both ways); NULL: none */
  const char *const *pci_bus_ids;  /* bus id per device from a simulated node, or NULL */
  int pci_bus_id_count;
} cb_host_options;

#endif
