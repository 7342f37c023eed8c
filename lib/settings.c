/* lib/settings.c: the backends' own settings as libcubert reads them
 * (lib/settings.h): the host backend's, and a simulated node's bus ids. */
#include <string.h>

#include "backends/host/host_backend.h"
#include "base/alloc.h"
#include "base/env.h"
#include "lib/settings.h"
#include "topology/host_node.h"

struct cb_backend_settings {
  cb_host_options host;
  char **node_bus_ids; /* $CUBERT_HOST_NODE's, or NULL */
  int nnode_bus_ids;
};

static bool is_host(const char *name) { return name && strcmp(name, "host") == 0; }

cubert_status cb_settings_new(const cubert_runtime_options *options, struct cb_backend_settings **settings,
                              cb_str *why) {
  cb_host_options host;
  cubert_status st = cb_host_settings_read(options, &host, why);
  if (st) return st;
  struct cb_backend_settings *s = cb_calloc(1, sizeof *s);
  if (!s) {
    cb_str_printf(why, "out of host memory reading the backends' settings");
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  s->host = host;
  const char *node = cb_env("CUBERT_HOST_NODE");
  if (node) {
    char msg[512] = "";
    st = cb_host_node_bus_ids(node, &s->node_bus_ids, &s->nnode_bus_ids, msg, sizeof msg);
    if (st) {
      cb_str_printf(why, "CUBERT_HOST_NODE=%s: %s", node, msg);
      cb_settings_free(s);
      return st;
    }
    s->host.pci_bus_ids = (const char *const *)s->node_bus_ids;
    s->host.pci_bus_id_count = s->nnode_bus_ids;
    if (!options->host_devices && !cb_env("CUBERT_HOST_DEVICES")) s->host.devices = s->nnode_bus_ids;
  }
  *settings = s;
  return CUBERT_OK;
}

const void *cb_settings_for(const struct cb_backend_settings *settings, const char *name) {
  return is_host(name) ? &settings->host : NULL;
}

void cb_settings_explain(const struct cb_backend_settings *settings, const char *name, const char *message,
                         cb_str *why) {
  if (is_host(name)) cb_host_settings_explain(&settings->host, message, why);
}

bool cb_settings_bus_ids_made_up(const struct cb_backend_settings *settings, const char *name) {
  return settings->node_bus_ids && is_host(name);
}

void cb_settings_free(struct cb_backend_settings *settings) {
  if (!settings) return;
  cb_host_node_free(settings->node_bus_ids, settings->nnode_bus_ids);
  cb_free(settings);
}
