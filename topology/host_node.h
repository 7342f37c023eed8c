/* topology/host_node.h: simulated nodes for the host backend (internal,
 * never installed).
 *
 * A node spec is "frontier", "mi300x", "pcie" (hwloc XML 2.0 files and KFD
 * sysfs fixtures embedded in the library at build time, so an installed
 * binary needs no source tree) or the path of an hwloc XML file. A file node
 * takes its KFD fixture from the directory beside it named like the file
 * without ".xml" plus "-kfd" (frontier.xml -> frontier-kfd/), when there is
 * one; docs/topology.md has the details.
 *
 * Ownership: cb_host_node_bus_ids() hands the caller an array of strings it
 * frees with cb_host_node_free(). cb_host_node_find() returns static data. */
#ifndef CUBERT_TOPOLOGY_HOST_NODE_H
#define CUBERT_TOPOLOGY_HOST_NODE_H

#include <stddef.h>

#include "cubert/status.h"

/* The PCI bus ids ("0000:c1:00.0") of the node's GPUs (PCI class 03xx,
 * 0b40 or 1200), in bus order. The runtime gives simulated host device i the
 * i-th id. On failure `message` names the spec or file and what was wrong. */
cubert_status cb_host_node_bus_ids(const char *spec, char ***bus_ids, int *count, char *message,
                                   size_t message_capacity);

/* Frees what cb_host_node_bus_ids() returned (NULL is fine). */
void cb_host_node_free(char **bus_ids, int count);

/* One node built into the library. */
typedef struct cb_embedded_node {
  const char *name;       /* "frontier" */
  const char *xml;        /* hwloc XML 2.0, NUL-terminated */
  size_t xml_size;        /* bytes, without the NUL */
  const char *kfd_pack;   /* KFD fixture, packed (topology/kfd.h); NULL when none */
  size_t kfd_pack_size;
} cb_embedded_node;

/* The embedded node named `name`, or NULL. */
const cb_embedded_node *cb_host_node_find(const char *name);

/* Names of the embedded nodes, for messages: "frontier, mi300x, pcie". */
const char *cb_host_node_names(void);

#endif
