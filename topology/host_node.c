/* topology/host_node.c: simulated nodes (embedded or from a file), hwloc
 * loading with cubert's filters, and PCI bus id helpers. */
#include "base/alloc.h"
#include "base/str.h"
#include "topology/host_node.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/msg.h"
#include "topology/embedded.h"
#include "topology/internal.h"

#define XML_MAX_BYTES (64u << 20)

/* ------------------------------------------------------------ PCI ids */

static bool hexfield(const char **s, int min, int max, char stop, unsigned *out) {
  unsigned v = 0;
  int n = 0;
  const char *p = *s;
  for (; *p && *p != stop; p++, n++) {
    int d;
    if (*p >= '0' && *p <= '9')
      d = *p - '0';
    else if (*p >= 'a' && *p <= 'f')
      d = *p - 'a' + 10;
    else if (*p >= 'A' && *p <= 'F')
      d = *p - 'A' + 10;
    else
      return false;
    v = v * 16 + (unsigned)d;
  }
  if (n < min || n > max || *p != stop) return false;
  *out = v;
  *s = stop ? p + 1 : p;
  return true;
}

bool cb_pci_parse(const char *text, cb_pci_addr *addr) {
  if (!text) return false;
  cb_pci_addr a = {0, 0, 0, 0};
  const char *s = text;
  int colons = 0;
  for (const char *p = text; *p; p++) colons += *p == ':';
  if (colons == 2 && !hexfield(&s, 1, 8, ':', &a.domain)) return false;
  if (colons != 1 && colons != 2) return false;
  if (!hexfield(&s, 1, 2, ':', &a.bus) || !hexfield(&s, 1, 2, '.', &a.dev) ||
      !hexfield(&s, 1, 1, 0, &a.fn))
    return false;
  if (a.domain > 0xffff || a.dev > 31 || a.fn > 7) return false;
  *addr = a;
  return true;
}

void cb_pci_format(const cb_pci_addr *addr, char *buf, size_t capacity) {
  snprintf(buf, capacity, "%04x:%02x:%02x.%x", addr->domain, addr->bus, addr->dev, addr->fn);
}

bool cb_pci_is_gpu(const hwloc_obj_t pci) {
  if (!pci || pci->type != HWLOC_OBJ_PCI_DEVICE) return false;
  unsigned cls = pci->attr->pcidev.class_id;
  return (cls >> 8) == 0x03 || cls == 0x0b40 || (cls >> 8) == 0x12;
}

/* ------------------------------------------------------------ hwloc */

static cubert_status read_file(const char *path, char **out, char *msg, size_t cap) {
  struct stat sb;
  if (stat(path, &sb) != 0)
    return cb_msgf(msg, cap, CUBERT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  if (S_ISDIR(sb.st_mode)) return cb_msgf(msg, cap, CUBERT_ERR_IO, "%s is a directory, not an XML file", path);
  FILE *f = fopen(path, "rb");
  if (!f) return cb_msgf(msg, cap, CUBERT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  char *buf = cb_malloc(XML_MAX_BYTES + 1);
  if (!buf) {
    fclose(f);
    return cb_msgf(msg, cap, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory reading %s", path);
  }
  size_t n = fread(buf, 1, XML_MAX_BYTES + 1, f);
  bool err = ferror(f);
  fclose(f);
  if (err || n > XML_MAX_BYTES) {
    cb_free(buf);
    return cb_msgf(msg, cap, err ? CUBERT_ERR_IO : CUBERT_ERR_PARSE,
                err ? "cannot read %s" : "%s is larger than 64 MiB: not a topology", path);
  }
  buf[n] = 0;
  *out = buf;
  return CUBERT_OK;
}

/* What hwloc 2.9 would refuse without saying why. */
static cubert_status precheck_xml(const char *xml, const char *label, char *msg, size_t cap) {
  const char *top = strstr(xml, "<topology");
  if (!top)
    return cb_msgf(msg, cap, CUBERT_ERR_PARSE, "%s: no <topology> element: not an hwloc XML topology",
                label);
  const char *end = strchr(top, '>');
  const char *ver = strstr(top, "version=\"");
  if (ver && (!end || ver < end) && strncmp(ver + 9, "2.", 2) != 0)
    return cb_msgf(msg, cap, CUBERT_ERR_PARSE,
                "%s: hwloc XML version %.*s; hwloc 2.9 reads version 2.0 only (write the file "
                "with hwloc 2.x)",
                label, (int)strcspn(ver + 9, "\""), ver + 9);
  /* A file cut short (a copy that stopped, a full disk) ends before the root
   * closes. Said here, not left to hwloc: besides saying nothing useful,
   * hwloc 2.9 leaks the object it was importing when a child tag is cut
   * (fixed upstream after 2.9: open-mpi/hwloc#781). */
  size_t len = strlen(xml);
  while (len && (xml[len - 1] == ' ' || xml[len - 1] == '\n' || xml[len - 1] == '\r' || xml[len - 1] == '\t'))
    len--;
  static const char close[] = "</topology>";
  if (len < sizeof close - 1 || memcmp(xml + len - (sizeof close - 1), close, sizeof close - 1) != 0)
    return cb_msgf(msg, cap, CUBERT_ERR_PARSE,
                "%s: the XML ends before </topology>: the file is truncated (or not an hwloc XML "
                "topology)",
                label);
  return CUBERT_OK;
}

cubert_status cb_hwloc_load(const char *xml_path, const char *xml_buffer, const char *label,
                            hwloc_topology_t *topology, char *message, size_t message_capacity) {
  char *owned = NULL;
  cubert_status st;
  if (xml_path) {
    if ((st = read_file(xml_path, &owned, message, message_capacity))) return st;
    xml_buffer = owned;
    label = xml_path;
  }
  if (!label) label = "XML buffer";
  if (xml_buffer && (st = precheck_xml(xml_buffer, label, message, message_capacity))) {
    cb_free(owned);
    return st;
  }
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) {
    cb_free(owned);
    return cb_msgf(message, message_capacity, CUBERT_ERR_OUT_OF_MEMORY, "hwloc_topology_init failed");
  }
  /* hwloc_topology_init loaded the PCI plugin and libpciaccess; unloaded at
   * destroy, libpciaccess's global state would turn into unreachable memory
   * (reported as a leak by every LeakSanitizer run). Keep it resident. */
  static atomic_bool pinned;
  if (!xml_buffer && !atomic_exchange(&pinned, true))
    (void)dlopen("libpciaccess.so.0", RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  /* The filter must be set before loading, XML included: GPUs, NICs and the
   * bridges above them stay, the rest of the PCI tree goes. */
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (xml_buffer) {
    size_t len = strlen(xml_buffer);
    if (len + 1 > (size_t)1 << 30 || hwloc_topology_set_xmlbuffer(t, xml_buffer, (int)len + 1) != 0) {
      int e = errno;
      hwloc_topology_destroy(t);
      cb_free(owned);
      return cb_msgf(message, message_capacity, CUBERT_ERR_PARSE,
                  "%s: hwloc 2.9 cannot read this XML (%s); it must be a well-formed hwloc XML "
                  "version 2.0 file (try `lstopo --input` on it)",
                  label, strerror(e));
    }
  }
  if (hwloc_topology_load(t) != 0) {
    int e = errno;
    hwloc_topology_destroy(t);
    cb_free(owned);
    if (xml_buffer)
      return cb_msgf(message, message_capacity, CUBERT_ERR_PARSE,
                  "%s: hwloc 2.9 could not load this XML topology (%s); it must be a well-formed "
                  "hwloc XML version 2.0 file (try `lstopo --input` on it)",
                  label, strerror(e));
    return cb_msgf(message, message_capacity, CUBERT_ERR_BACKEND,
                "hwloc could not load this machine's topology: %s", strerror(e));
  }
  cb_free(owned);
  *topology = t;
  return CUBERT_OK;
}

static int cmp_pci(const void *a, const void *b) {
  const struct hwloc_pcidev_attr_s *x = &(*(const hwloc_obj_t *)a)->attr->pcidev;
  const struct hwloc_pcidev_attr_s *y = &(*(const hwloc_obj_t *)b)->attr->pcidev;
  unsigned kx = ((unsigned)x->domain << 16) | ((unsigned)x->bus << 8) | ((unsigned)x->dev << 3) | x->func;
  unsigned ky = ((unsigned)y->domain << 16) | ((unsigned)y->bus << 8) | ((unsigned)y->dev << 3) | y->func;
  return (kx > ky) - (kx < ky);
}

cubert_status cb_hwloc_gpu_bus_ids(hwloc_topology_t topology, char ***bus_ids, int *count,
                                   char *message, size_t message_capacity) {
  int n = 0;
  for (hwloc_obj_t o = hwloc_get_next_pcidev(topology, NULL); o; o = hwloc_get_next_pcidev(topology, o))
    n += cb_pci_is_gpu(o);
  hwloc_obj_t *objs = cb_calloc((size_t)n + 1, sizeof *objs);
  char **ids = cb_calloc((size_t)n + 1, sizeof *ids);
  if (!objs || !ids) {
    cb_free(objs);
    cb_free(ids);
    return cb_msgf(message, message_capacity, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  int k = 0;
  for (hwloc_obj_t o = hwloc_get_next_pcidev(topology, NULL); o; o = hwloc_get_next_pcidev(topology, o))
    if (cb_pci_is_gpu(o)) objs[k++] = o;
  qsort(objs, (size_t)n, sizeof *objs, cmp_pci);
  for (int i = 0; i < n; i++) {
    cb_pci_addr a = {objs[i]->attr->pcidev.domain, objs[i]->attr->pcidev.bus,
                     objs[i]->attr->pcidev.dev, objs[i]->attr->pcidev.func};
    ids[i] = cb_malloc(16);
    if (!ids[i]) {
      cb_host_node_free(ids, i);
      cb_free(objs);
      return cb_msgf(message, message_capacity, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    cb_pci_format(&a, ids[i], 16);
  }
  cb_free(objs);
  *bus_ids = ids;
  *count = n;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ nodes */

const cb_embedded_node *cb_host_node_find(const char *name) {
  if (!name) return NULL;
  for (int i = 0; i < cb_embedded_node_count; i++)
    if (!strcmp(cb_embedded_nodes[i].name, name)) return &cb_embedded_nodes[i];
  return NULL;
}

const char *cb_host_node_names(void) { return "frontier, mi300x, pcie"; }

void cb_node_source_free(cb_node_source *source) {
  if (!source) return;
  cb_free(source->xml_path);
  cb_free(source->kfd_dir);
  cb_free(source->name);
  memset(source, 0, sizeof *source);
}

cubert_status cb_node_resolve(const char *spec, cb_node_source *source, char *message,
                              size_t message_capacity) {
  memset(source, 0, sizeof *source);
  if (!spec || !*spec)
    return cb_msgf(message, message_capacity, CUBERT_ERR_INVALID_ARGUMENT,
                "empty node name (one of %s, or the path of an hwloc XML file)", cb_host_node_names());
  source->name = cb_strdup(spec);
  if (!source->name) return cb_msgf(message, message_capacity, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  source->embedded = cb_host_node_find(spec);
  if (source->embedded) return CUBERT_OK;
  struct stat sb;
  if (stat(spec, &sb) != 0) {
    int e = errno;
    bool looks_like_name = !strchr(spec, '/') && !strchr(spec, '.');
    cb_node_source_free(source);
    if (looks_like_name)
      return cb_msgf(message, message_capacity, CUBERT_ERR_INVALID_ARGUMENT,
                  "unknown node '%s': one of %s, or the path of an hwloc XML file", spec,
                  cb_host_node_names());
    return cb_msgf(message, message_capacity, CUBERT_ERR_IO, "cannot open node file %s: %s", spec,
                strerror(e));
  }
  source->xml_path = cb_strdup(spec);
  /* frontier.xml -> frontier-kfd/ beside it. */
  size_t len = strlen(spec);
  size_t stem = (len > 4 && !strcmp(spec + len - 4, ".xml")) ? len - 4 : len;
  char *kfd = cb_malloc(stem + 5);
  if (!source->xml_path || !kfd) {
    cb_free(kfd);
    cb_node_source_free(source);
    return cb_msgf(message, message_capacity, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  memcpy(kfd, spec, stem);
  memcpy(kfd + stem, "-kfd", 5);
  if (stat(kfd, &sb) == 0 && S_ISDIR(sb.st_mode))
    source->kfd_dir = kfd;
  else
    cb_free(kfd);
  return CUBERT_OK;
}

cubert_status cb_node_load_hwloc(const cb_node_source *source, hwloc_topology_t *topology,
                                 char *message, size_t message_capacity) {
  if (source->embedded) {
    char label[96];
    snprintf(label, sizeof label, "embedded node %s", source->embedded->name);
    return cb_hwloc_load(NULL, source->embedded->xml, label, topology, message, message_capacity);
  }
  return cb_hwloc_load(source->xml_path, NULL, NULL, topology, message, message_capacity);
}

cubert_status cb_host_node_bus_ids(const char *spec, char ***bus_ids, int *count, char *message,
                                   size_t message_capacity) {
  if (!bus_ids || !count)
    return cb_msgf(message, message_capacity, CUBERT_ERR_INVALID_ARGUMENT, "no output for the bus ids");
  cb_node_source src;
  cubert_status st = cb_node_resolve(spec, &src, message, message_capacity);
  if (st) return st;
  hwloc_topology_t t;
  st = cb_node_load_hwloc(&src, &t, message, message_capacity);
  if (!st) {
    char **ids = NULL;
    int n = 0;
    st = cb_hwloc_gpu_bus_ids(t, &ids, &n, message, message_capacity);
    if (!st && n == 0) {
      cb_host_node_free(ids, 0);
      st = cb_msgf(message, message_capacity, CUBERT_ERR_INVALID_ARGUMENT,
                "node %s has no GPU (no PCI device of class 03xx, 0b40 or 12xx)", src.name);
    } else if (!st) {
      *bus_ids = ids;
      *count = n;
    }
    hwloc_topology_destroy(t);
  }
  cb_node_source_free(&src);
  return st;
}

void cb_host_node_free(char **bus_ids, int count) {
  if (!bus_ids) return;
  for (int i = 0; i < count; i++) cb_free(bus_ids[i]);
  cb_free(bus_ids);
}
