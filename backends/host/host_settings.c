/* backends/host/host_settings.c: the host backend's settings as a runtime
 * reads them, from cubert_runtime_options and the CUBERT_HOST_* variables
 * (host_backend.h). What a user may set and the words of a refusal are the
 * host backend's own; the core only hands the result to the backend, as
 * its config's `options` (lib/settings.c). */
#include <string.h>

#include "backends/host/host_backend.h"
#include "base/env.h"

#define SETTABLE_DEVICES 64 /* the most host devices a user may ask for */

static cubert_status invalid(cb_str *why, const char *what, const char *value, const char *says) {
  cb_str_printf(why, "%s=%s%s", what, value, says);
  return CUBERT_ERR_INVALID_ARGUMENT;
}

cubert_status cb_host_settings_read(const cubert_runtime_options *o, cb_host_options *out, cb_str *why) {
  cb_host_options host = {0};
  host.devices = o->host_devices;
  if (!host.devices) {
    const char *v = cb_env("CUBERT_HOST_DEVICES");
    uint64_t n = 4;
    /* 1 to 64, as README.md and `cubert --help` say (0 would open a host
     * backend without devices; CUBERT_BACKENDS=hip is how to have none) */
    if (v && v[0] == '-')
      return invalid(why, "CUBERT_HOST_DEVICES", v, " is negative: the number of host devices, 1 to 64");
    if (v && !cb_parse_size(v, &n))
      return invalid(why, "CUBERT_HOST_DEVICES", v, " is not a number of host devices, 1 to 64");
    if (n == 0)
      return invalid(why, "CUBERT_HOST_DEVICES", v,
                     ": the number of host devices is 1 to 64 (CUBERT_BACKENDS without host opens none)");
    if (n > SETTABLE_DEVICES) return invalid(why, "CUBERT_HOST_DEVICES", v, ": at most 64 host devices");
    host.devices = (int)n;
  }
  if (host.devices < 0 || host.devices > SETTABLE_DEVICES) {
    cb_str_printf(why, "host_devices is %d: 0 to 64", host.devices);
    return CUBERT_ERR_INVALID_ARGUMENT;
  }
  host.memory = o->host_memory;
  if (!host.memory) {
    const char *v = cb_env("CUBERT_HOST_MEMORY");
    host.memory = UINT64_C(1) << 30;
    if (v && !cb_parse_size(v, &host.memory))
      return invalid(why, "CUBERT_HOST_MEMORY", v, " is not a size (a whole number, optionally K, M, G or T)");
    if (!host.memory) {
      cb_str_printf(why, "CUBERT_HOST_MEMORY is 0");
      return CUBERT_ERR_INVALID_ARGUMENT;
    }
  }
  host.peer_deny = o->host_peer_deny ? o->host_peer_deny : cb_env("CUBERT_HOST_PEER_DENY");
  if (!o->host_peer_deny && host.peer_deny) host.peer_deny_from = "CUBERT_HOST_PEER_DENY";
  *out = host;
  return CUBERT_OK;
}

void cb_host_settings_explain(const cb_host_options *host, const char *message, cb_str *why) {
  if (host->peer_deny_from && strstr(message, "peer_deny"))
    cb_str_printf(why, "; the pairs came from %s=%s", host->peer_deny_from, host->peer_deny);
}
