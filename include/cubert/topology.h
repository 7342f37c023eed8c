/* cubert/topology.h: where devices sit — the class of every device pair
 * (xGMI/NVLink, PCIe switch, host bridge, NUMA node, socket), each device's
 * local NUMA nodes and CPUs, and placement of threads and host memory near a
 * device. docs/topology.md defines the classes precisely.
 *
 * Sources: the PCI tree and NUMA layout come from hwloc (this machine, an
 * hwloc XML 2.0 file, or a simulated node built into the library: "frontier",
 * "mi300x", "pcie"); xGMI comes from the driver (cubert_runtime_device_link)
 * or the AMD KFD sysfs topology, never from hwloc.
 *
 * Ownership: a cubert_topology is created by one of the create calls and
 * owned by the caller, who destroys it with cubert_topology_destroy(). It
 * does not keep the runtime it was made from. Strings and arrays reached
 * through cubert_topology_device belong to the topology and stay valid until
 * it is destroyed. cubert_topology_json() returns a string the caller frees
 * with free(). Names returned by cubert_link_class_name() and friends are
 * static.
 *
 * Threads: a topology is immutable after creation; every call may come from
 * any thread. */
#ifndef CUBERT_TOPOLOGY_H
#define CUBERT_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubert/cubert.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cubert_topology cubert_topology;

/* Classes of a device pair, from near to far. */
typedef enum cubert_link_class {
  CUBERT_LINK_SELF = 0,    /* the same device */
  CUBERT_LINK_XGMI = 1,    /* a direct xGMI link (named NVLINK on NVIDIA devices) */
  CUBERT_LINK_PIX = 2,     /* one PCIe switch */
  CUBERT_LINK_PXB = 3,     /* several PCIe bridges, no host bridge */
  CUBERT_LINK_PHB = 4,     /* through one PCIe host bridge */
  CUBERT_LINK_NODE = 5,    /* between host bridges of one NUMA node */
  CUBERT_LINK_SYS = 6,     /* across NUMA nodes or sockets */
  CUBERT_LINK_UNKNOWN = 7  /* a device has no PCI object in the topology */
} cubert_link_class;

#define CUBERT_LINK_CLASS_COUNT 8

/* The link between two devices. */
typedef struct cubert_topology_link {
  cubert_link_class link_class;
  int links;        /* XGMI: parallel links of the pair (4 between the two GCDs
                       of an MI250X); 0 for every other class */
  int hops;         /* XGMI: the driver's hop count (1); PCIe classes: PCI
                       bridges on the path; SELF 0; UNKNOWN -1 */
  int xgmi_hops;    /* xGMI links on the shortest xGMI path, through other
                       GPUs if need be; 0 when there is none (and for SELF) */
  int xgmi_weight;  /* the driver's weight summed along that path (what
                       `rocm-smi --showtopo` prints); 0 when unknown */
} cubert_topology_link;

/* One device as the topology sees it. */
typedef struct cubert_topology_device {
  int device;               /* index in the topology (= runtime index) */
  const char *name;         /* "host:0", "AMD Instinct MI250X", ... */
  const char *pci_name;     /* hwloc's PCI device name; "" when unknown */
  const char *pci_bus_id;   /* "0000:c1:00.0"; "" when the device has none */
  bool found;               /* its PCI object is in the topology */
  bool nvidia;              /* an NVIDIA device: XGMI is named NVLINK */
  bool simulated;           /* its topology is not this machine (a simulated
                               node or an XML file): placement is not applied */
  int numa_count;           /* local NUMA nodes (hwloc, larger locality) */
  const int *numa_nodes;    /* their OS indexes */
  int package;              /* OS index of its package (socket); -1 unknown
                               (the only package when the machine has one) */
  const char *cpuset;       /* local CPUs as a list, "48-55,112-119"; "" unknown */
  const char *source;       /* "live", "xml:PATH", "xml:buffer", "node:NAME" */
  int machine_numa_nodes;   /* NUMA nodes of its machine */
  int machine_packages;     /* packages of its machine */
} cubert_topology_device;

/* Explicit inputs for cubert_topology_create_from(). */
typedef struct cubert_topology_source {
  uint32_t struct_size;         /* sizeof(cubert_topology_source); set by _init */
  const char *node;             /* "frontier", "mi300x", "pcie" or the path of an
                                   XML file: a simulated node with its KFD fixture
                                   (embedded, or the file's "-kfd" sibling
                                   directory). Overrides xml_path/xml_buffer. */
  const char *xml_path;         /* an hwloc XML 2.0 file */
  const char *xml_buffer;       /* hwloc XML text, NUL-terminated */
  const char *kfd_root;         /* directory standing for "/" that holds
                                   sys/class/kfd/kfd/topology; NULL: the node's
                                   fixture for a node, "/" for this machine,
                                   none for an XML file or buffer */
  const char *const *bus_ids;   /* one per device; NULL: every GPU of the
                                   topology (PCI class 03xx, 0b40, 12xx) in
                                   bus order */
  int device_count;             /* entries of bus_ids */
  const char *const *names;     /* optional device names (NULL: hwloc's) */
} cubert_topology_source;

CUBERT_API void cubert_topology_source_init(cubert_topology_source *source);

/* The topology of a runtime's devices. Host devices that took their bus ids
 * from a simulated node ($CUBERT_HOST_NODE) are placed with that node's XML
 * and KFD fixture. Other devices use `xml_path` when given, else
 * $CUBERT_TOPOLOGY, else this machine (live hwloc); their xGMI links come
 * from cubert_runtime_device_link(), else this machine's KFD sysfs. A pair
 * the driver (or KFD) reports as a direct xGMI link is XGMI even when a
 * device is missing from the topology; every other pair with a device
 * without a bus id, or whose bus id is not in its topology, is UNKNOWN.
 * That is not an error (docs/topology.md, the order of the rules). */
CUBERT_API cubert_status cubert_topology_create(cubert_runtime *runtime, const char *xml_path,
                                                cubert_topology **topology);

/* A topology from explicit inputs (tests, tools, what-if layouts). */
CUBERT_API cubert_status cubert_topology_create_from(const cubert_topology_source *source,
                                                     cubert_topology **topology);

/* NULL is fine. */
CUBERT_API void cubert_topology_destroy(cubert_topology *topology);

CUBERT_API int cubert_topology_device_count(const cubert_topology *topology);

CUBERT_API cubert_status cubert_topology_device_info(const cubert_topology *topology, int device,
                                                     cubert_topology_device *info);

/* The link from device a to device b (any pair, including a == b). */
CUBERT_API cubert_status cubert_topology_pair(const cubert_topology *topology, int a, int b,
                                              cubert_topology_link *link);

/* "SELF", "XGMI", "PIX", "PXB", "PHB", "NODE", "SYS", "UNKNOWN"; "?" outside
 * the enum. Static. */
CUBERT_API const char *cubert_link_class_name(cubert_link_class link_class);

/* One line for a legend ("Connection traversing a single PCIe switch").
 * Static. */
CUBERT_API const char *cubert_link_class_description(cubert_link_class link_class);

/* The pair's class name as tools print it: "NVLINK" instead of "XGMI" when
 * both devices are NVIDIA's; NULL for an index out of range. Static. */
CUBERT_API const char *cubert_topology_pair_name(const cubert_topology *topology, int a, int b);

/* What the topology could not find out, in words ("the driver API does not
 * report NVLink here ..."); "" when nothing. Owned by the topology. */
CUBERT_API const char *cubert_topology_notes(const cubert_topology *topology);

/* The whole topology as JSON (devices, machines, the class matrix, every
 * pair, the legend). The caller frees *json with free(). */
CUBERT_API cubert_status cubert_topology_json(const cubert_topology *topology, char **json);

/* ---------------------------------------------------------------- placement */

/* What a placement call did. Only BOUND changed anything; the others are
 * successes that say why nothing was needed or possible. */
typedef enum cubert_placement {
  CUBERT_PLACEMENT_BOUND = 0,           /* bound to the device's local CPUs / NUMA nodes */
  CUBERT_PLACEMENT_SINGLE_NODE = 1,     /* the machine has one NUMA node: nothing to choose */
  CUBERT_PLACEMENT_NO_LOCALITY = 2,     /* the device's PCI object or locality is unknown */
  CUBERT_PLACEMENT_NOT_THIS_MACHINE = 3 /* the device's topology is simulated or from a file */
} cubert_placement;

/* "bound", "single-node", "no-locality", "not-this-machine"; "?" outside the
 * enum. Static. */
CUBERT_API const char *cubert_placement_name(cubert_placement placement);

/* Binds the calling thread to the device's local CPUs (hwloc_set_cpubind).
 * `placement` (may be NULL) says what was done. */
CUBERT_API cubert_status cubert_topology_bind_thread(const cubert_topology *topology, int device,
                                                     cubert_placement *placement);

/* `size` bytes of page-aligned host memory, bound to the device's local NUMA
 * node(s) when that means something (hwloc_alloc_membind), plain otherwise.
 * Free it with cubert_topology_free_local() with the same device and size. */
CUBERT_API cubert_status cubert_topology_alloc_local(const cubert_topology *topology, int device,
                                                     size_t size, void **memory,
                                                     cubert_placement *placement);
CUBERT_API void cubert_topology_free_local(const cubert_topology *topology, int device,
                                           void *memory, size_t size);

/* ---------------------------------------------------------------- nodes */

/* Writes a built-in simulated node into directory `dir` (created if need
 * be): DIR/NAME.xml and, when the node has one, its KFD fixture under
 * DIR/NAME-kfd/sys/class/kfd/... . The result is a file node:
 * CUBERT_HOST_NODE=DIR/NAME.xml behaves like CUBERT_HOST_NODE=NAME. */
CUBERT_API cubert_status cubert_topology_write_node(const char *node, const char *dir);

#ifdef __cplusplus
}
#endif
#endif
