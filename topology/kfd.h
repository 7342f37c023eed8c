/* topology/kfd.h: the AMD KFD topology of sysfs, read from a directory or
 * from a packed fixture (internal, never installed).
 *
 * The layout read is the kernel's:
 *   <root>/sys/class/kfd/kfd/topology/nodes/N/gpu_id        0 for a CPU node
 *   <root>/sys/class/kfd/kfd/topology/nodes/N/properties    "name value" lines;
 *       GPU nodes carry location_id ((bus << 8) | devfn, plus the partition
 *       in bits 31:28 on partitioned MI300s) and domain (PCI segment; absent
 *       before Linux 5.x: 0)
 *   <root>/sys/class/kfd/kfd/topology/nodes/N/io_links/M/properties
 *       type (11 xGMI, 2 PCIe), node_from, node_to, weight,
 *       min_bandwidth, max_bandwidth (MB/s)
 * `root` is "/" on a live machine, a fixture directory in tests.
 *
 * A pack is the same files in one buffer, each as "@@ <path> <bytes>\n"
 * followed by exactly that many bytes, paths relative to the root
 * ("sys/class/kfd/..."). topology/CMakeLists.txt builds the packs of the
 * simulated nodes.
 *
 * Ownership: a cb_kfd owns everything it points to; cb_kfd_free() frees it. */
#ifndef CUBERT_TOPOLOGY_KFD_H
#define CUBERT_TOPOLOGY_KFD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubert/status.h"

#define CB_KFD_LINK_PCIE 2
#define CB_KFD_LINK_XGMI 11

typedef struct cb_kfd_link {
  int node_to;
  int type;
  int weight;
  uint64_t min_bandwidth;  /* MB/s of one link */
  uint64_t max_bandwidth;  /* MB/s of all links of the pair */
} cb_kfd_link;

typedef struct cb_kfd_node {
  int id;                  /* N of nodes/N */
  uint64_t gpu_id;         /* 0: a CPU node */
  char bus_id[20];         /* GPU nodes: "0000:c1:00.0"; "" for CPU nodes */
  int partition;           /* location_id bits 31:28: several nodes of one PCI device */
  cb_kfd_link *links;
  int nlinks;
} cb_kfd_node;

typedef struct cb_kfd {
  cb_kfd_node *nodes;      /* sorted by id; refused nodes are not among them */
  int nnodes;
  int *refused;            /* ids of nodes whose files the kernel refused */
  int nrefused;
  char *source;            /* the directory or "embedded KFD fixture of NAME" */
} cb_kfd;

/* Internal status of a read the kernel refused (EPERM, EACCES); never
 * returned by the functions below. */
#define CB_KFD_REFUSED ((cubert_status)(CUBERT_STATUS_COUNT_ + 1))

/* How files under a root directory are read (tests stand in their own to
 * show what a live kernel does, such as refusing a node): read() fills
 * buf with at most `capacity` bytes of the file at `path`, sets *len, and
 * returns 0 or an errno (ENOENT: no such file). */
typedef struct cb_kfd_reader {
  int (*read)(void *ctx, const char *path, char *buf, size_t capacity, size_t *len);
  void *ctx;
} cb_kfd_reader;

/* Replaces the reader of cb_kfd_load_dir() for the whole process (NULL: the
 * default, fopen and fread). For tests; not thread-safe. */
void cb_kfd_set_reader(const cb_kfd_reader *reader);

/* Reads the KFD topology under `root`. With `missing_ok`, a root without
 * sys/class/kfd/kfd/topology/nodes gives an empty topology (a machine with no
 * AMD GPU); otherwise that is CUBERT_ERR_IO. A malformed file is
 * CUBERT_ERR_PARSE with its path and line in `message`.
 *
 * A node whose files the kernel refuses with EPERM or EACCES (a GPU outside
 * the process's device cgroup: Slurm's --gpus-per-task on a larger node) is
 * skipped, listed in `refused`, and links to it are dropped; the other
 * nodes keep their links and weights. Any other read error is CUBERT_ERR_IO. */
cubert_status cb_kfd_load_dir(const char *root, bool missing_ok, cb_kfd **kfd, char *message,
                              size_t message_capacity);

/* The same from a pack; `name` only names it in messages. */
cubert_status cb_kfd_load_pack(const char *name, const char *pack, size_t size, cb_kfd **kfd,
                               char *message, size_t message_capacity);

/* Writes the files of a pack under directory `dir` (created as needed). */
cubert_status cb_kfd_unpack(const char *pack, size_t size, const char *dir, char *message,
                            size_t message_capacity);

void cb_kfd_free(cb_kfd *kfd);

/* The GPU node with PCI bus id `bus_id` (compared as numbers), or NULL.
 * For a partitioned device, its partition 0. */
const cb_kfd_node *cb_kfd_find_bus(const cb_kfd *kfd, const char *bus_id);

/* The GPU nodes of PCI bus id `bus_id`, by partition number (several on a
 * partitioned MI300: CPX, DPX, QPX), at most `capacity` of them into `out`;
 * returns how many there are. */
int cb_kfd_bus_nodes(const cb_kfd *kfd, const char *bus_id, const cb_kfd_node **out, int capacity);

/* Whether node `id` was refused (see cb_kfd_load_dir). */
bool cb_kfd_refused(const cb_kfd *kfd, int id);

/* The node numbered `id`, or NULL. */
const cb_kfd_node *cb_kfd_node_by_id(const cb_kfd *kfd, int id);

#endif
