/* topology/internal.h: helpers shared by the files of topology/ (internal,
 * never installed): loading hwloc topologies, resolving node specs, PCI bus
 * ids.
 *
 * Ownership: a cb_node_source owns its strings (cb_node_source_free); a
 * hwloc topology from cb_hwloc_load belongs to the caller
 * (hwloc_topology_destroy). */
#ifndef CUBERT_TOPOLOGY_INTERNAL_H
#define CUBERT_TOPOLOGY_INTERNAL_H

#include <hwloc.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/str.h"
#include "cubert/status.h"
#include "cubert/topology.h"
#include "topology/host_node.h"

/* A PCI address. */
typedef struct cb_pci_addr {
  unsigned domain, bus, dev, fn;
} cb_pci_addr;

/* Parses "0000:c1:00.0", "00000000:C1:00.0" (8-digit domain, as NVIDIA
 * writes it) or "c1:00.0" (domain 0). */
bool cb_pci_parse(const char *text, cb_pci_addr *addr);

/* "0000:c1:00.0" into buf (at least 16 bytes). */
void cb_pci_format(const cb_pci_addr *addr, char *buf, size_t capacity);

/* Loads a topology with the I/O filter KEEP_IMPORTANT: from `xml_path`, from
 * `xml_buffer` (NUL-terminated, `label` names it in messages), or, with both
 * NULL, from this machine. An XML file is read by cubert first, so a missing
 * or unreadable file and a format-3.0 file get their own message. */
cubert_status cb_hwloc_load(const char *xml_path, const char *xml_buffer, const char *label,
                            hwloc_topology_t *topology, char *message, size_t message_capacity);

/* True for the PCI classes cubert counts as GPUs: 03xx (display), 0b40
 * (co-processor) and 12xx (processing accelerator). */
bool cb_pci_is_gpu(const hwloc_obj_t pci);

/* Where a node spec's files are. */
typedef struct cb_node_source {
  const cb_embedded_node *embedded; /* a built-in node, or NULL */
  char *xml_path;                   /* a file node: its XML */
  char *kfd_dir;                    /* a file node: its "-kfd" sibling, NULL when none */
  char *name;                       /* "frontier" or the path given */
} cb_node_source;

/* Resolves "frontier", "mi300x", "pcie" or the path of an XML file. */
cubert_status cb_node_resolve(const char *spec, cb_node_source *source, char *message,
                              size_t message_capacity);
void cb_node_source_free(cb_node_source *source);

/* Loads the node's hwloc topology. */
cubert_status cb_node_load_hwloc(const cb_node_source *source, hwloc_topology_t *topology,
                                 char *message, size_t message_capacity);

/* GPU bus ids of a loaded topology in bus order (caller frees with
 * cb_host_node_free). */
cubert_status cb_hwloc_gpu_bus_ids(hwloc_topology_t topology, char ***bus_ids, int *count,
                                   char *message, size_t message_capacity);

/* cubert_topology_alloc_local with its failure as a value (topology.c): the
 * message goes to `why` (the caller frees it), never to the thread's last
 * error, because a failed placement (placement.c) falls back to the
 * backend's own memory and must not replace the error the caller's thread
 * will see. */
cubert_status cb_topology_alloc_near(const cubert_topology *t, int device, size_t size, void **memory,
                                     cubert_placement *placement, cb_str *why);

#endif
