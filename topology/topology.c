/* topology/topology.c: the public topology API (include/cubert/topology.h).
 *
 * A topology holds up to two "machines" (hwloc topologies): the simulated
 * node that host devices took their bus ids from, and this machine (or the
 * XML file standing for it). Each device is found by its PCI bus id in its
 * machine; every pair is classified once, at creation, so queries are
 * lookups. docs/topology.md states the rules implemented in classify(). */
#include "base/alloc.h"
#include "cubert/topology.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/env.h"
#include "base/str.h"
#include "runtime/fail.h"
#include "topology/internal.h"
#include "topology/kfd.h"
#include "topology/testing.h"

#define MAX_MACHINES 2
#define MSG 1024

typedef struct machine {
  hwloc_topology_t topo;
  char *source;      /* "live", "xml:PATH", "xml:buffer", "node:NAME" */
  bool simulated;    /* not this machine */
  cb_kfd *kfd;       /* NULL: no KFD topology */
  int numa_count;
  int package_count;
} machine;

typedef struct dev {
  char *name;
  char *pci_name;
  char *bus_id;
  char *cpuset_text;
  int machine;       /* index into machines */
  hwloc_obj_t pci;   /* NULL: not found */
  hwloc_bitmap_t cpuset;   /* local CPUs; NULL when not found */
  hwloc_bitmap_t nodeset;  /* local NUMA nodes; NULL when not found */
  int *numa;
  int nnuma;
  int package;
  bool nvidia;
  const cb_kfd_node *kfd_node;
} dev;

struct cubert_topology {
  machine machines[MAX_MACHINES];
  int nmachines;
  dev *devs;
  int n;
  cubert_topology_link *pairs; /* n * n */
  char *notes;                 /* what could not be read, or NULL */
};

/* A link the driver reported through the runtime. */
typedef struct drv_link {
  bool known;
  int type, hops, links;
} drv_link;

/* ------------------------------------------------------------ names */

static const char *const class_names[CUBERT_LINK_CLASS_COUNT] = {
    "SELF", "XGMI", "PIX", "PXB", "PHB", "NODE", "SYS", "UNKNOWN"};

static const char *const class_text[CUBERT_LINK_CLASS_COUNT] = {
    "Self",
    "Connection over a direct xGMI link (NVLink on NVIDIA devices), as the driver reports it",
    "Connection traversing a single PCIe switch",
    "Connection traversing multiple PCIe bridges (without traversing the PCIe host bridge)",
    "Connection traversing PCIe as well as a PCIe host bridge (typically the CPU)",
    ("Connection traversing PCIe as well as the interconnect between PCIe host bridges within a "
     "NUMA node"),
    "Connection traversing PCIe as well as the interconnect between NUMA nodes or sockets",
    "A device has no PCI object in the topology: nothing is known"};

const char *cubert_link_class_name(cubert_link_class c) {
  return (unsigned)c < CUBERT_LINK_CLASS_COUNT ? class_names[c] : "?";
}

const char *cubert_link_class_description(cubert_link_class c) {
  return (unsigned)c < CUBERT_LINK_CLASS_COUNT ? class_text[c] : "?";
}

const char *cubert_placement_name(cubert_placement p) {
  switch (p) {
    case CUBERT_PLACEMENT_BOUND: return "bound";
    case CUBERT_PLACEMENT_SINGLE_NODE: return "single-node";
    case CUBERT_PLACEMENT_NO_LOCALITY: return "no-locality";
    case CUBERT_PLACEMENT_NOT_THIS_MACHINE: return "not-this-machine";
  }
  return "?";
}

void cubert_topology_source_init(cubert_topology_source *source) {
  if (!source) return;
  memset(source, 0, sizeof *source);
  source->struct_size = sizeof *source;
}

/* ------------------------------------------------------------ lifetime */

void cubert_topology_destroy(cubert_topology *t) {
  if (!t) return;
  for (int i = 0; i < t->n; i++) {
    dev *d = &t->devs[i];
    cb_free(d->name);
    cb_free(d->pci_name);
    cb_free(d->bus_id);
    cb_free(d->cpuset_text);
    cb_free(d->numa);
    hwloc_bitmap_free(d->cpuset);
    hwloc_bitmap_free(d->nodeset);
  }
  cb_free(t->devs);
  for (int m = 0; m < t->nmachines; m++) {
    if (t->machines[m].topo) hwloc_topology_destroy(t->machines[m].topo);
    cb_kfd_free(t->machines[m].kfd);
    cb_free(t->machines[m].source);
  }
  cb_free(t->pairs);
  cb_free(t->notes);
  cb_free(t);
}

static void add_note(cubert_topology *t, const char *text) {
  size_t old = t->notes ? strlen(t->notes) : 0;
  char *n = cb_realloc(t->notes, old + strlen(text) + 3);
  if (!n) return; /* a note lost to OOM is not worth failing for */
  if (old) memcpy(n + old, "; ", 3), old += 2;
  else n[0] = 0;
  strcpy(n + old, text);
  t->notes = n;
}

/* Out of host memory, as a value in `eb`. */
static cubert_status oom(cb_errb *eb) { return cb_errb_set(eb, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory"); }


/* Adds a machine that owns `topo` and `kfd` (both taken, also on failure). */
static cubert_status add_machine(cubert_topology *t, hwloc_topology_t topo, cb_kfd *kfd,
                                 const char *source, bool simulated, int *index, cb_errb *eb) {
  if (t->nmachines == MAX_MACHINES) {
    hwloc_topology_destroy(topo);
    cb_kfd_free(kfd);
    return cb_errb_set(eb, CUBERT_ERR_INTERNAL, "topology: more than %d machines", MAX_MACHINES);
  }
  machine *m = &t->machines[t->nmachines];
  m->topo = topo;
  m->kfd = kfd;
  m->simulated = simulated;
  m->source = cb_strdup(source);
  t->nmachines++;
  if (!m->source) return oom(eb);
  m->numa_count = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  m->package_count = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  if (kfd && kfd->nrefused) {
    char note[512];
    int at = snprintf(note, sizeof note, "the kernel refused to show KFD node%s",
                      kfd->nrefused > 1 ? "s" : "");
    for (int k = 0; k < kfd->nrefused && at > 0 && (size_t)at < sizeof note - 80; k++)
      at += snprintf(note + at, sizeof note - (size_t)at, "%s %d", k ? "," : "", kfd->refused[k]);
    if (at > 0 && (size_t)at < sizeof note)
      snprintf(note + at, sizeof note - (size_t)at,
               " (outside this process's device cgroup): skipped with their links");
    add_note(t, note);
  }
  *index = t->nmachines - 1;
  return CUBERT_OK;
}

/* Finds the device's PCI object and its locality. */
static cubert_status place_device(cubert_topology *t, int i, int mi, const char *name,
                                  const char *bus_id, bool nvidia_hint, cb_errb *eb) {
  dev *d = &t->devs[i];
  machine *m = &t->machines[mi];
  d->machine = mi;
  d->package = -1;
  d->nvidia = nvidia_hint;
  d->bus_id = cb_strdup(bus_id);
  if (!d->bus_id) return oom(eb);
  cb_pci_addr a;
  if (bus_id && *bus_id && cb_pci_parse(bus_id, &a)) {
    d->pci = hwloc_get_pcidev_by_busid(m->topo, a.domain, a.bus, a.dev, a.fn);
    char norm[20];
    cb_pci_format(&a, norm, sizeof norm);
    cb_free(d->bus_id);
    if (!(d->bus_id = cb_strdup(norm))) return oom(eb);
  } else if (bus_id && *bus_id) {
    return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT,
                       "device %d: '%s' is not a PCI bus id (expected DDDD:BB:DD.F, e.g. 0000:c1:00.0)", i,
                       bus_id);
  }
  const char *pci_name = d->pci ? hwloc_obj_get_info_by_name(d->pci, "PCIDevice") : NULL;
  d->pci_name = cb_strdup(pci_name);
  if (name && *name)
    d->name = cb_strdup(name);
  else if (pci_name)
    d->name = cb_strdup(pci_name);
  else {
    char buf[32];
    snprintf(buf, sizeof buf, "device %d", i);
    d->name = cb_strdup(buf);
  }
  if (!d->pci_name || !d->name) return oom(eb);
  if (m->kfd) d->kfd_node = cb_kfd_find_bus(m->kfd, d->bus_id);
  if (!d->pci) {
    d->cpuset_text = cb_strdup("");
    return d->cpuset_text ? CUBERT_OK : oom(eb);
  }
  if (d->pci->attr->pcidev.vendor_id == 0x10de) d->nvidia = true;

  hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(m->topo, d->pci);
  d->cpuset = hwloc_bitmap_dup(anchor->cpuset);
  d->nodeset = hwloc_bitmap_alloc();
  if (!d->cpuset || !d->nodeset) return oom(eb);
  char *text = NULL; /* hwloc's, from the C library: copied so that all of ours is cb_free'd */
  if (hwloc_bitmap_list_asprintf(&text, d->cpuset) >= 0 && text) d->cpuset_text = cb_strdup(text);
  free(text);
  if (!d->cpuset_text) return oom(eb);
  hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(m->topo, HWLOC_OBJ_PACKAGE, anchor);
  if (!pkg && anchor->type == HWLOC_OBJ_PACKAGE) pkg = anchor;
  /* Attached above the packages (a VM, firmware without locality): with one
   * package there is still no doubt which it is. */
  if (!pkg && m->package_count == 1) pkg = hwloc_get_obj_by_type(m->topo, HWLOC_OBJ_PACKAGE, 0);
  d->package = pkg ? (int)pkg->os_index : -1;

  /* Local NUMA nodes: those whose locality contains the device's (on
   * Frontier a GCD hangs under an L3, smaller than its NUMA node). */
  unsigned cap = (unsigned)(m->numa_count > 0 ? m->numa_count : 1), nr = cap;
  hwloc_obj_t *nodes = cb_calloc(cap, sizeof *nodes);
  if (!nodes) return oom(eb);
  struct hwloc_location loc;
  loc.type = HWLOC_LOCATION_TYPE_OBJECT;
  loc.location.object = d->pci;
  if (hwloc_get_local_numanode_objs(m->topo, &loc, &nr, nodes,
                                    HWLOC_LOCAL_NUMANODE_FLAG_LARGER_LOCALITY) != 0)
    nr = 0;
  if (nr > cap) nr = cap; /* hwloc says how many there would have been */
  d->numa = cb_calloc(nr ? nr : 1, sizeof *d->numa);
  if (!d->numa) {
    cb_free(nodes);
    return oom(eb);
  }
  for (unsigned k = 0; k < nr; k++) {
    d->numa[k] = (int)nodes[k]->os_index;
    hwloc_bitmap_set(d->nodeset, nodes[k]->os_index);
  }
  d->nnuma = (int)nr;
  cb_free(nodes);
  return CUBERT_OK;
}

/* Partitioned GPUs (MI300 in CPX, DPX or QPX mode): every partition reports
 * its GPU's PCI bus id, and KFD has one node per partition (location_id bits
 * 31:28). HIP lists a GPU's partitions in KFD's order, so when every
 * partition of a bus is a device here, the k-th device of that bus is the
 * k-th partition node; when only some are, which is which cannot be told:
 * their KFD facts (xGMI links, hops, weights) are unknown. */
static void map_partitions(cubert_topology *t) {
  enum { MAX_PARTS = 16 };
  for (int i = 0; i < t->n; i++) {
    dev *d = &t->devs[i];
    const machine *m = &t->machines[d->machine];
    if (!m->kfd || !d->bus_id || !d->bus_id[0]) continue;
    const cb_kfd_node *parts[MAX_PARTS];
    int np = cb_kfd_bus_nodes(m->kfd, d->bus_id, parts, MAX_PARTS);
    if (np <= 1) continue; /* not partitioned: place_device's node stands */
    int count = 0, rank = 0;
    for (int j = 0; j < t->n; j++)
      if (t->devs[j].machine == d->machine && t->devs[j].bus_id && !strcmp(t->devs[j].bus_id, d->bus_id)) {
        if (j < i) rank++;
        count++;
      }
    if (count == np && np <= MAX_PARTS) {
      d->kfd_node = parts[rank];
      continue;
    }
    d->kfd_node = NULL;
    if (rank == 0) {
      char note[256];
      snprintf(note, sizeof note,
               "%s is a partitioned GPU with %d KFD nodes but %d of its partitions are devices here: "
               "which partition each is cannot be told, so their xGMI links are unknown",
               d->bus_id, np, count);
      add_note(t, note);
    }
  }
}

/* ------------------------------------------------------------ classification */

static bool is_bridge(hwloc_obj_t o) { return o->type == HWLOC_OBJ_BRIDGE; }

/* The PCIe class of two different PCI objects of one machine. */
static void classify_pci(const dev *a, const dev *b, cubert_topology_link *out) {
  out->links = 0;
  if (a->pci == b->pci) { /* one GPU seen twice (two backends) */
    out->link_class = CUBERT_LINK_SELF;
    out->hops = 0;
    return;
  }
  hwloc_obj_t chain[256];
  int na = 0;
  for (hwloc_obj_t o = a->pci->parent; o && na < 256; o = o->parent) chain[na++] = o;
  hwloc_obj_t lca = NULL;
  int below_b = 0; /* bridges strictly below the LCA on b's side */
  for (hwloc_obj_t o = b->pci->parent; o && !lca; o = o->parent) {
    for (int k = 0; k < na; k++)
      if (chain[k] == o) {
        lca = o;
        break;
      }
    if (!lca && is_bridge(o)) below_b++;
  }
  int below_a = 0;
  for (int k = 0; k < na && chain[k] != lca; k++) below_a += is_bridge(chain[k]);
  if (!lca) { /* cannot happen in one hwloc tree; be safe */
    out->link_class = CUBERT_LINK_SYS;
    out->hops = below_a + below_b;
    return;
  }
  if (is_bridge(lca)) {
    out->hops = below_a + below_b + 1;
    if (lca->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST)
      out->link_class = CUBERT_LINK_PHB;
    else if (below_a <= 1 && below_b <= 1)
      out->link_class = CUBERT_LINK_PIX;
    else
      out->link_class = CUBERT_LINK_PXB;
    return;
  }
  out->hops = below_a + below_b;
  if (hwloc_obj_type_is_io(lca->type)) { /* a PCI device above another: one switch at most */
    out->link_class = CUBERT_LINK_PIX;
    return;
  }
  /* The path leaves PCIe through two host bridges: same NUMA node or not. */
  bool same_node = !hwloc_bitmap_iszero(a->nodeset) && hwloc_bitmap_isequal(a->nodeset, b->nodeset);
  out->link_class = same_node ? CUBERT_LINK_NODE : CUBERT_LINK_SYS;
}

/* The KFD xGMI link a -> b (either direction listed), or NULL. */
static const cb_kfd_link *kfd_direct(const cb_kfd_node *a, const cb_kfd_node *b) {
  for (int k = 0; k < a->nlinks; k++)
    if (a->links[k].type == CB_KFD_LINK_XGMI && a->links[k].node_to == b->id) return &a->links[k];
  for (int k = 0; k < b->nlinks; k++)
    if (b->links[k].type == CB_KFD_LINK_XGMI && b->links[k].node_to == a->id) return &b->links[k];
  return NULL;
}

/* Links of a direct KFD xGMI pair: all links' bandwidth over one link's;
 * 1 when KFD gives no bandwidth. */
static int kfd_link_count(const cb_kfd_link *kl) {
  if (kl->min_bandwidth > 0 && kl->max_bandwidth >= kl->min_bandwidth)
    return (int)((kl->max_bandwidth + kl->min_bandwidth / 2) / kl->min_bandwidth);
  return 1;
}

/* Shortest xGMI path from `from` to every GPU node (Dijkstra by weight, then
 * hops; a weight of 0 counts as 1). Results indexed like kfd->nodes. */
static cubert_status xgmi_paths(const cb_kfd *kfd, const cb_kfd_node *from, int *hops, int *weight,
                                cb_errb *eb) {
  int n = kfd->nnodes;
  bool *done = cb_calloc((size_t)n, sizeof *done);
  long *cost = cb_calloc((size_t)n, sizeof *cost);
  if (!done || !cost) {
    cb_free(done);
    cb_free(cost);
    return oom(eb);
  }
  for (int i = 0; i < n; i++) {
    hops[i] = -1;
    weight[i] = 0;
    cost[i] = -1;
  }
  int src = (int)(from - kfd->nodes);
  hops[src] = 0;
  cost[src] = 0;
  for (;;) {
    int u = -1;
    for (int i = 0; i < n; i++)
      if (!done[i] && cost[i] >= 0 && (u < 0 || cost[i] < cost[u] || (cost[i] == cost[u] && hops[i] < hops[u])))
        u = i;
    if (u < 0) break;
    done[u] = true;
    const cb_kfd_node *nu = &kfd->nodes[u];
    for (int k = 0; k < nu->nlinks; k++) {
      const cb_kfd_link *l = &nu->links[k];
      if (l->type != CB_KFD_LINK_XGMI) continue;
      const cb_kfd_node *to = cb_kfd_node_by_id(kfd, l->node_to);
      if (!to || !to->gpu_id) continue; /* xGMI to a CPU is not a GPU path */
      int v = (int)(to - kfd->nodes);
      long c = cost[u] + (l->weight > 0 ? l->weight : 1);
      if (cost[v] < 0 || c < cost[v] || (c == cost[v] && hops[u] + 1 < hops[v])) {
        cost[v] = c;
        hops[v] = hops[u] + 1;
        weight[v] = weight[u] + l->weight;
      }
    }
  }
  cb_free(done);
  cb_free(cost);
  return CUBERT_OK;
}

static cubert_status classify_all(cubert_topology *t, const drv_link *drv, cb_errb *eb) {
  int n = t->n;
  t->pairs = cb_calloc((size_t)n * (size_t)(n ? n : 1), sizeof *t->pairs);
  if (!t->pairs) return oom(eb);
  for (int a = 0; a < n; a++) {
    const dev *da = &t->devs[a];
    const machine *m = &t->machines[da->machine];
    int *hops = NULL, *weight = NULL;
    if (m->kfd && da->kfd_node) {
      hops = cb_calloc((size_t)m->kfd->nnodes, sizeof *hops);
      weight = cb_calloc((size_t)m->kfd->nnodes, sizeof *weight);
      cubert_status st = (!hops || !weight) ? oom(eb) : xgmi_paths(m->kfd, da->kfd_node, hops, weight, eb);
      if (st) {
        cb_free(hops);
        cb_free(weight);
        return st;
      }
    }
    for (int b = 0; b < n; b++) {
      const dev *db = &t->devs[b];
      cubert_topology_link *out = &t->pairs[(size_t)a * (size_t)n + (size_t)b];
      memset(out, 0, sizeof *out);
      if (a == b) {
        out->link_class = CUBERT_LINK_SELF;
        continue;
      }
      bool same = da->machine == db->machine;
      /* xGMI, whatever the PCIe path: from the driver first, then KFD. */
      const drv_link *dl = drv ? &drv[(size_t)a * (size_t)n + (size_t)b] : NULL;
      const cb_kfd_link *kl = (same && da->kfd_node && db->kfd_node) ? kfd_direct(da->kfd_node, db->kfd_node) : NULL;
      if (hops && db->kfd_node) {
        int k = (int)(db->kfd_node - m->kfd->nodes);
        if (hops[k] > 0) {
          out->xgmi_hops = hops[k];
          out->xgmi_weight = weight[k];
        }
      }
      if (dl && dl->known) { /* the driver answered: it decides */
        if (dl->type == CUBERT_LINK_TYPE_XGMI && !out->xgmi_hops) out->xgmi_hops = dl->hops > 0 ? dl->hops : 1;
        if (dl->type == CUBERT_LINK_TYPE_XGMI && dl->hops <= 1) {
          out->link_class = CUBERT_LINK_XGMI;
          out->hops = 1;
          /* HIP on AMD says type and hops but not how many links: KFD's
           * bandwidth ratio does, where it has the pair */
          out->links = dl->links > 0 ? dl->links : kl ? kfd_link_count(kl) : 1;
          continue;
        }
      } else if (kl) {
        out->link_class = CUBERT_LINK_XGMI;
        out->hops = 1;
        out->links = kfd_link_count(kl);
        continue;
      }
      if (!same || !da->pci || !db->pci) {
        out->link_class = CUBERT_LINK_UNKNOWN;
        out->hops = -1;
        continue;
      }
      classify_pci(da, db, out);
    }
    cb_free(hops);
    cb_free(weight);
  }
  return CUBERT_OK;
}

/* ------------------------------------------------------------ creation */

static cubert_status alloc_topology(int n, cubert_topology **out, cb_errb *eb) {
  if (n < 0 || n > 4096) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "topology: %d devices", n);
  cubert_topology *t = cb_calloc(1, sizeof *t);
  if (!t || !(t->devs = cb_calloc((size_t)(n ? n : 1), sizeof *t->devs))) {
    cb_free(t);
    return oom(eb);
  }
  t->n = n;
  *out = t;
  return CUBERT_OK;
}

/* Loads a node's hwloc topology and KFD (kfd_root overrides the node's). */
static cubert_status load_node_machine(cubert_topology *t, const char *spec, const char *kfd_root,
                                       int *index, cb_errb *eb) {
  char msg[MSG] = "";
  cb_node_source src;
  cubert_status st = cb_node_resolve(spec, &src, msg, sizeof msg);
  if (st) return cb_errb_set(eb, st, "node %s: %s", spec, msg);
  hwloc_topology_t topo;
  if ((st = cb_node_load_hwloc(&src, &topo, msg, sizeof msg))) {
    cb_node_source_free(&src);
    return cb_errb_set(eb, st, "%s", msg);
  }
  cb_kfd *kfd = NULL;
  if (kfd_root)
    st = cb_kfd_load_dir(kfd_root, false, &kfd, msg, sizeof msg);
  else if (src.embedded && src.embedded->kfd_pack)
    st = cb_kfd_load_pack(src.embedded->name, src.embedded->kfd_pack, src.embedded->kfd_pack_size,
                          &kfd, msg, sizeof msg);
  else if (src.kfd_dir)
    st = cb_kfd_load_dir(src.kfd_dir, false, &kfd, msg, sizeof msg);
  if (st) {
    hwloc_topology_destroy(topo);
    cb_node_source_free(&src);
    return cb_errb_set(eb, st, "%s", msg);
  }
  char label[4200];
  snprintf(label, sizeof label, "node:%s", src.name);
  cb_node_source_free(&src);
  return add_machine(t, topo, kfd, label, true, index, eb);
}

/* Loads this machine, or an XML file/buffer standing for it. `kfd_root`
 * NULL: "/" for this machine (absent is fine), none for XML. */
static cubert_status load_plain_machine(cubert_topology *t, const char *xml_path, const char *xml_buffer,
                                        const char *kfd_root, int *index, cb_errb *eb) {
  char msg[MSG] = "";
  hwloc_topology_t topo;
  cubert_status st = cb_hwloc_load(xml_path, xml_buffer, xml_buffer ? "XML buffer" : NULL, &topo, msg,
                                   sizeof msg);
  if (st) return cb_errb_set(eb, st, "%s", msg);
  bool live = !xml_path && !xml_buffer;
  cb_kfd *kfd = NULL;
  if (kfd_root) {
    if ((st = cb_kfd_load_dir(kfd_root, false, &kfd, msg, sizeof msg))) {
      hwloc_topology_destroy(topo);
      return cb_errb_set(eb, st, "%s", msg);
    }
  } else if (live && cb_kfd_load_dir("/", true, &kfd, msg, sizeof msg)) {
    /* This machine's sysfs is what it is: say so, but keep going. */
    char note[MSG + 64];
    snprintf(note, sizeof note, "KFD topology not read: %s", msg);
    add_note(t, note);
    kfd = NULL;
  } else if (kfd && kfd->nnodes == 0) { /* no AMD GPU driver here */
    cb_kfd_free(kfd);
    kfd = NULL;
  }
  char label[4200];
  if (live)
    snprintf(label, sizeof label, "live");
  else if (xml_path)
    snprintf(label, sizeof label, "xml:%s", xml_path);
  else
    snprintf(label, sizeof label, "xml:buffer");
  return add_machine(t, topo, kfd, label, !live, index, eb);
}

static cubert_status create_from(const cubert_topology_source *source, const cubert_device_link *driver,
                                 cubert_topology **topology, cb_errb *eb);

cubert_status cubert_topology_create_from(const cubert_topology_source *source, cubert_topology **topology) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  return cb_errb_return(&eb, create_from(source, NULL, topology, &eb));
}

cubert_status cb_topology_create_with_driver(const cubert_topology_source *source,
                                             const cubert_device_link *driver, cubert_topology **topology) {
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  return cb_errb_return(&eb, create_from(source, driver, topology, &eb));
}

static cubert_status create_from(const cubert_topology_source *source, const cubert_device_link *driver,
                                 cubert_topology **topology, cb_errb *eb) {
  if (!source || !topology)
    return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "cubert_topology_create_from: %s is NULL",
                       source ? "topology" : "source");
  if (source->struct_size < sizeof *source)
    return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT,
                       "topology: source.struct_size is %u (call cubert_topology_source_init)",
                       source->struct_size);
  if (source->device_count < 0 || (source->device_count > 0 && !source->bus_ids))
    return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "topology: %d devices but no bus ids",
                       source->device_count);
  cubert_topology *t = NULL; /* set by alloc_topology only on success */
  cubert_status st = alloc_topology(0, &t, eb);
  if (st) return st;
  int mi = 0;
  if (source->node)
    st = load_node_machine(t, source->node, source->kfd_root, &mi, eb);
  else
    st = load_plain_machine(t, source->xml_path, source->xml_buffer, source->kfd_root, &mi, eb);
  char **gpus = NULL;
  int n = source->device_count;
  const char *const *ids = source->bus_ids;
  if (!st && !ids) {
    char msg[MSG] = "";
    if ((st = cb_hwloc_gpu_bus_ids(t->machines[mi].topo, &gpus, &n, msg, sizeof msg)))
      st = cb_errb_set(eb, st, "%s", msg);
    ids = (const char *const *)gpus;
  }
  if (!st && n > 0) {
    dev *devs = cb_calloc((size_t)n, sizeof *devs);
    if (!devs)
      st = oom(eb);
    else {
      cb_free(t->devs);
      t->devs = devs;
    }
  }
  for (int i = 0; i < n && !st; i++) {
    t->n = i + 1;
    st = place_device(t, i, mi, source->names ? source->names[i] : NULL, ids[i], false, eb);
  }
  cb_host_node_free(gpus, gpus ? n : 0);
  drv_link *drv = NULL;
  if (!st && driver && n > 0) {
    if (!(drv = cb_calloc((size_t)n * (size_t)n, sizeof *drv))) st = oom(eb);
    for (size_t k = 0; drv && k < (size_t)n * (size_t)n; k++)
      if (driver[k].type >= 0) drv[k] = (drv_link){true, driver[k].type, driver[k].hops, driver[k].links};
  }
  if (!st) map_partitions(t);
  if (!st) st = classify_all(t, drv, eb);
  cb_free(drv);
  if (st) {
    cubert_topology_destroy(t);
    return st;
  }
  *topology = t;
  return CUBERT_OK;
}

cubert_status cubert_topology_create(cubert_runtime *runtime, const char *xml_path, cubert_topology **topology) {
  if (!runtime || !topology)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_topology_create: %s is NULL",
                   runtime ? "topology" : "runtime");
  int n = cubert_runtime_device_count(runtime);
  cubert_device_info *info = cb_calloc((size_t)(n > 0 ? n : 1), sizeof *info);
  if (!info) return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  cubert_topology *t = NULL;
  drv_link *drv = NULL;
  cb_errb eb;
  cb_errb_init(&eb, CUBERT_OK);
  cubert_status st = alloc_topology(n, &t, &eb);
  for (int i = 0; i < n && !st; i++) st = cubert_runtime_device_info(runtime, i, &info[i]);

  const char *node = cb_env("CUBERT_HOST_NODE");
  if (!xml_path) xml_path = cb_env("CUBERT_TOPOLOGY");
  int sim = -1, live = -1;
  for (int i = 0; i < n && !st; i++) {
    bool simulated = node && !strcmp(info[i].backend, "host") && info[i].pci_bus_id[0];
    if (simulated && sim < 0) st = load_node_machine(t, node, NULL, &sim, &eb);
    if (!simulated && live < 0 && !st) st = load_plain_machine(t, xml_path, NULL, NULL, &live, &eb);
    if (st) break;
    t->n = i + 1;
    st = place_device(t, i, simulated ? sim : live, info[i].name, info[i].pci_bus_id,
                      !strncmp(info[i].arch, "sm_", 3), &eb);
  }
  /* What the driver says of each pair of real devices of one backend. */
  if (!st && n > 1) {
    drv = cb_calloc((size_t)n * (size_t)n, sizeof *drv);
    if (!drv) st = oom(&eb);
  }
  bool unknown_nvlink = false;
  for (int a = 0; a < n && !st; a++)
    for (int b = 0; b < n; b++) {
      if (a == b || strcmp(info[a].backend, info[b].backend) || !strcmp(info[a].backend, "host")) continue;
      cubert_device_link l;
      if (cubert_runtime_device_link(runtime, a, b, &l) == CUBERT_OK) {
        drv_link *d = &drv[(size_t)a * (size_t)n + (size_t)b];
        d->known = true;
        d->type = l.type;
        d->hops = l.hops;
        d->links = l.links;
      } else if (t->devs[a].nvidia && t->devs[b].nvidia) {
        unknown_nvlink = true;
      }
    }
  if (unknown_nvlink)
    add_note(t, "the driver API does not report NVLink here (HIP on NVIDIA has no call for it): "
                "NVIDIA pairs show their PCIe class");
  if (!st) map_partitions(t);
  if (!st) st = classify_all(t, drv, &eb);
  cb_free(drv);
  cb_free(info);
  if (st) {
    cubert_topology_destroy(t);
    return cb_errb_return(&eb, st);
  }
  *topology = t;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ queries */

int cubert_topology_device_count(const cubert_topology *t) { return t ? t->n : 0; }

/* Whether `d` is a device of `t`; starts `eb`, which holds the refusal (and
 * nothing to free when `d` is good). */
static cubert_status check_device(const cubert_topology *t, int d, cb_errb *eb) {
  cb_errb_init(eb, CUBERT_OK);
  if (!t) return cb_errb_set(eb, CUBERT_ERR_INVALID_ARGUMENT, "topology is NULL");
  if (d < 0 || d >= t->n)
    return cb_errb_set(eb, CUBERT_ERR_NO_DEVICE, "device %d: the topology has %d devices (0 to %d)", d, t->n,
                       t->n - 1);
  return CUBERT_OK;
}

cubert_status cubert_topology_device_info(const cubert_topology *t, int device, cubert_topology_device *info) {
  cb_errb eb;
  if (check_device(t, device, &eb)) return cb_errb_finish(&eb);
  if (!info) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_topology_device_info: info is NULL");
  const dev *d = &t->devs[device];
  const machine *m = &t->machines[d->machine];
  cubert_topology_device r;
  memset(&r, 0, sizeof r);
  r.device = device;
  r.name = d->name;
  r.pci_name = d->pci_name;
  r.pci_bus_id = d->bus_id;
  r.found = d->pci != NULL;
  r.nvidia = d->nvidia;
  r.simulated = m->simulated;
  r.numa_count = d->nnuma;
  r.numa_nodes = d->numa;
  r.package = d->package;
  r.cpuset = d->cpuset_text;
  r.source = m->source;
  r.machine_numa_nodes = m->numa_count;
  r.machine_packages = m->package_count;
  *info = r;
  return CUBERT_OK;
}

cubert_status cubert_topology_pair(const cubert_topology *t, int a, int b, cubert_topology_link *link) {
  cb_errb eb;
  if (check_device(t, a, &eb) || check_device(t, b, &eb)) return cb_errb_finish(&eb);
  if (!link) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_topology_pair: link is NULL");
  *link = t->pairs[(size_t)a * (size_t)t->n + (size_t)b];
  return CUBERT_OK;
}

const char *cubert_topology_pair_name(const cubert_topology *t, int a, int b) {
  if (!t || a < 0 || b < 0 || a >= t->n || b >= t->n) return NULL;
  cubert_link_class c = t->pairs[(size_t)a * (size_t)t->n + (size_t)b].link_class;
  if (c == CUBERT_LINK_XGMI && t->devs[a].nvidia && t->devs[b].nvidia) return "NVLINK";
  return cubert_link_class_name(c);
}

const char *cubert_topology_notes(const cubert_topology *t) { return t && t->notes ? t->notes : ""; }

/* ------------------------------------------------------------ JSON */

cubert_status cubert_topology_json(const cubert_topology *t, char **json) {
  if (!t || !json)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_topology_json: %s is NULL", t ? "json" : "topology");
  json_t *root = json_object();
  json_t *devices = json_array(), *machines = json_array(), *matrix = json_array();
  json_t *pairs = json_array(), *legend = json_object();
  bool ok = root && devices && machines && matrix && pairs && legend;
  for (int m = 0; ok && m < t->nmachines; m++) {
    const machine *mc = &t->machines[m];
    ok &= !json_array_append_new(machines, json_pack("{s:s, s:b, s:i, s:i, s:s?}", "source", mc->source,
                                                     "simulated", mc->simulated, "numa_nodes",
                                                     mc->numa_count, "packages", mc->package_count,
                                                     "kfd", mc->kfd ? mc->kfd->source : NULL));
  }
  for (int i = 0; ok && i < t->n; i++) {
    const dev *d = &t->devs[i];
    json_t *numa = json_array();
    for (int k = 0; numa && k < d->nnuma; k++) json_array_append_new(numa, json_integer(d->numa[k]));
    json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:b, s:b, s:b, s:o*, s:i, s:s, s:s}", "device", i,
                          "name", d->name, "pci_name", d->pci_name, "pci_bus_id", d->bus_id, "found",
                          d->pci != NULL, "nvidia", d->nvidia, "simulated",
                          t->machines[d->machine].simulated, "numa_nodes", numa, "package",
                          d->package, "cpuset", d->cpuset_text, "source",
                          t->machines[d->machine].source);
    ok &= o && !json_array_append_new(devices, o);
    json_t *row = json_array();
    for (int j = 0; row && j < t->n; j++) {
      json_array_append_new(row, json_string(cubert_topology_pair_name(t, i, j)));
      if (j == i) continue;
      const cubert_topology_link *l = &t->pairs[(size_t)i * (size_t)t->n + (size_t)j];
      ok &= !json_array_append_new(
          pairs, json_pack("{s:i, s:i, s:s, s:i, s:i, s:i, s:i}", "a", i, "b", j, "class",
                           cubert_topology_pair_name(t, i, j), "links", l->links, "hops", l->hops,
                           "xgmi_hops", l->xgmi_hops, "xgmi_weight", l->xgmi_weight));
    }
    ok &= row && !json_array_append_new(matrix, row);
  }
  for (int c = 0; ok && c < CUBERT_LINK_CLASS_COUNT; c++)
    ok &= !json_object_set_new(legend, class_names[c], json_string(class_text[c]));
  if (ok) {
    ok &= !json_object_set_new(root, "devices", devices);
    ok &= !json_object_set_new(root, "machines", machines);
    ok &= !json_object_set_new(root, "matrix", matrix);
    ok &= !json_object_set_new(root, "pairs", pairs);
    ok &= !json_object_set_new(root, "legend", legend);
    if (t->notes) json_object_set_new(root, "notes", json_string(t->notes));
  } else {
    json_decref(devices);
    json_decref(machines);
    json_decref(matrix);
    json_decref(pairs);
    json_decref(legend);
  }
  char *text = ok ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
  json_decref(root);
  if (!text) return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory writing the topology as JSON");
  *json = text;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ placement */

/* Whether binding means anything for device d, and if not, why. */
static bool bindable(const cubert_topology *t, int d, cubert_placement *why) {
  const dev *dv = &t->devs[d];
  const machine *m = &t->machines[dv->machine];
  if (m->simulated) *why = CUBERT_PLACEMENT_NOT_THIS_MACHINE;
  else if (!dv->pci || !dv->nodeset || hwloc_bitmap_iszero(dv->nodeset))
    *why = CUBERT_PLACEMENT_NO_LOCALITY;
  else if (m->numa_count <= 1)
    *why = CUBERT_PLACEMENT_SINGLE_NODE;
  else
    return true;
  return false;
}

cubert_status cubert_topology_bind_thread(const cubert_topology *t, int device, cubert_placement *placement) {
  cb_errb eb;
  if (check_device(t, device, &eb)) return cb_errb_finish(&eb);
  cubert_placement p = CUBERT_PLACEMENT_BOUND;
  if (bindable(t, device, &p)) {
    const dev *d = &t->devs[device];
    if (hwloc_set_cpubind(t->machines[d->machine].topo, d->cpuset, HWLOC_CPUBIND_THREAD) != 0)
      return cb_fail(CUBERT_ERR_BACKEND, "binding the calling thread to CPUs %s (near device %d, %s) failed: %s",
                     d->cpuset_text, device, d->bus_id, strerror(errno));
  }
  if (placement) *placement = p;
  return CUBERT_OK;
}

cubert_status cubert_topology_alloc_local(const cubert_topology *t, int device, size_t size, void **memory,
                                          cubert_placement *placement) {
  cb_errb eb;
  if (check_device(t, device, &eb)) return cb_errb_finish(&eb);
  if (!memory) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_topology_alloc_local: memory is NULL");
  if (!size) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_topology_alloc_local: size is 0");
  cb_str why = {0};
  cubert_status st = cb_topology_alloc_near(t, device, size, memory, placement, &why);
  if (st) {
    cb_fail(st, "%s", why.p ? why.p : "placement failed");
    cb_str_free(&why);
  }
  return st;
}

cubert_status cb_topology_alloc_near(const cubert_topology *t, int device, size_t size, void **memory,
                                     cubert_placement *placement, cb_str *why) {
  if (!t || device < 0 || device >= t->n || !memory || !size) {
    cb_str_printf(why, "placement: no device %d or no bytes to place", device);
    return CUBERT_ERR_INVALID_ARGUMENT;
  }
  const dev *d = &t->devs[device];
  hwloc_topology_t topo = t->machines[d->machine].topo;
  cubert_placement p = CUBERT_PLACEMENT_BOUND;
  void *mem;
  if (bindable(t, device, &p)) {
    mem = hwloc_alloc_membind(topo, size, d->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
    if (!mem) {
      char nodes[64] = "";
      hwloc_bitmap_list_snprintf(nodes, sizeof nodes, d->nodeset);
      int e = errno;
      cb_str_printf(why, "allocating %zu bytes on NUMA node(s) %s (near device %d, %s) failed: %s", size,
                    nodes, device, d->bus_id, strerror(e));
      return e == ENOMEM ? CUBERT_ERR_OUT_OF_MEMORY : CUBERT_ERR_BACKEND;
    }
  } else {
    mem = hwloc_alloc(topo, size);
    if (!mem) {
      cb_str_printf(why, "allocating %zu bytes of host memory failed", size);
      return CUBERT_ERR_OUT_OF_MEMORY;
    }
  }
  *memory = mem;
  if (placement) *placement = p;
  return CUBERT_OK;
}

void cubert_topology_free_local(const cubert_topology *t, int device, void *memory, size_t size) {
  if (!t || !memory || device < 0 || device >= t->n) return;
  hwloc_free(t->machines[t->devs[device].machine].topo, memory, size);
}

/* ------------------------------------------------------------ nodes */

cubert_status cubert_topology_write_node(const char *node, const char *dir) {
  if (!node || !dir || !*dir)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_topology_write_node: %s",
                   !node ? "node is NULL" : !dir ? "dir is NULL" : "dir is empty");
  const cb_embedded_node *e = cb_host_node_find(node);
  if (!e) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "unknown node '%s': one of %s", node, cb_host_node_names());
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return cb_fail(CUBERT_ERR_IO, "cannot create directory %s: %s", dir, strerror(errno));
  size_t len = strlen(dir) + strlen(node) + 16;
  char *path = cb_malloc(len);
  if (!path) return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  snprintf(path, len, "%s/%s.xml", dir, node);
  FILE *f = fopen(path, "wb");
  if (!f) {
    cubert_status st = cb_fail(CUBERT_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    cb_free(path);
    return st;
  }
  size_t w = fwrite(e->xml, 1, e->xml_size, f);
  if (fclose(f) != 0 || w != e->xml_size) {
    cubert_status st = cb_fail(CUBERT_ERR_IO, "cannot write %s", path);
    cb_free(path);
    return st;
  }
  cubert_status st = CUBERT_OK;
  if (e->kfd_pack) {
    snprintf(path, len, "%s/%s-kfd", dir, node);
    char msg[MSG] = "";
    if ((st = cb_kfd_unpack(e->kfd_pack, e->kfd_pack_size, path, msg, sizeof msg))) st = cb_fail(st, "%s", msg);
  }
  cb_free(path);
  return st;
}
