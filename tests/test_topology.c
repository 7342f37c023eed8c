/* tests/test_topology.c: device-pair classes, NUMA locality and placement
 * (include/cubert/topology.h) on the simulated nodes built into the library
 * (whose facts come from REFERENCES.md), on fixtures written by the tests,
 * and on this machine's live topology. */
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <hwloc.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cubert/topology.h"
#include "tests/testutil.h"
#include "topology/host_node.h"
#include "topology/kfd.h"
#include "topology/testing.h"

/* ------------------------------------------------------------ helpers */

/* The published Frontier / LUMI-G layout (REFERENCES.md). */
static const char *const frontier_bus[8] = {"0000:c1:00.0", "0000:c6:00.0", "0000:c9:00.0", "0000:ce:00.0",
                                            "0000:d1:00.0", "0000:d6:00.0", "0000:d9:00.0", "0000:de:00.0"};
static const int frontier_numa[8] = {3, 3, 1, 1, 0, 0, 2, 2};
static const char *const frontier_cpus[8] = {"48-55,112-119", "56-63,120-127", "16-23,80-87",
                                             "24-31,88-95",   "0-7,64-71",     "8-15,72-79",
                                             "32-39,96-103",  "40-47,104-111"};
static const int frontier_xgmi[8][3] = {{1, 2, 6}, {0, 3, 5}, {0, 3, 4}, {1, 2, 7},
                                        {2, 5, 6}, {1, 4, 7}, {0, 4, 7}, {3, 5, 6}};

static bool frontier_neighbours(int a, int b) {
  for (int k = 0; k < 3; k++)
    if (frontier_xgmi[a][k] == b) return true;
  return false;
}

static bool same_package(int a, int b) { return a / 2 == b / 2; }

static cubert_topology *node_topology(const char *node) {
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  src.node = node;
  cubert_topology *t = NULL;
  cb_test_ok(cubert_topology_create_from(&src, &t));
  return t;
}

static cubert_topology_link pair(const cubert_topology *t, int a, int b) {
  cubert_topology_link l;
  cb_test_ok(cubert_topology_pair(t, a, b, &l));
  return l;
}

static cubert_topology_device device(const cubert_topology *t, int i) {
  cubert_topology_device d;
  cb_test_ok(cubert_topology_device_info(t, i, &d));
  return d;
}

static char tmp_root[256];

static const char *make_tmp(void) {
  snprintf(tmp_root, sizeof tmp_root, "/tmp/cubert-topo-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmp_root));
  return tmp_root;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static void rm_tree(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static void write_text(const char *path, const char *text) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", path);
  for (char *p = dir + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(dir, 0777);
      *p = '/';
    }
  FILE *f = fopen(path, "w");
  ck_assert_msg(f != NULL, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot read %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  ck_assert_uint_eq(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = 0;
  fclose(f);
  return s;
}

#define KFD_NODES "sys/class/kfd/kfd/topology/nodes"

/* A KFD node in fixture `root`: gpu_id and properties (location_id for GPUs). */
static void kfd_node(const char *root, int id, unsigned gpu_id, unsigned bus) {
  char path[1024], text[256];
  snprintf(path, sizeof path, "%s/" KFD_NODES "/%d/gpu_id", root, id);
  snprintf(text, sizeof text, "%u\n", gpu_id);
  write_text(path, text);
  snprintf(path, sizeof path, "%s/" KFD_NODES "/%d/properties", root, id);
  snprintf(text, sizeof text, "cpu_cores_count %d\nsimd_count %d\nlocation_id %u\ndomain 0\n",
           gpu_id ? 0 : 16, gpu_id ? 440 : 0, gpu_id ? bus << 8 : 0);
  write_text(path, text);
}

static void kfd_link(const char *root, int from, int m, int type, int to, int weight, unsigned lo,
                     unsigned hi) {
  char path[1024], text[512];
  snprintf(path, sizeof path, "%s/" KFD_NODES "/%d/io_links/%d/properties", root, from, m);
  snprintf(text, sizeof text,
           "type %d\nversion_major 0\nversion_minor 0\nnode_from %d\nnode_to %d\nweight %d\n"
           "min_latency 0\nmax_latency 0\nmin_bandwidth %u\nmax_bandwidth %u\n"
           "recommended_transfer_size 0\nflags 1\n",
           type, from, to, weight, lo, hi);
  write_text(path, text);
}

/* A fixture for the pcie node, numbered out of bus order on purpose: node 0
 * is a CPU, node 1 is GPU6 (bus 83), node 2 is GPU0 (bus 05), node 3 is
 * GPU2 (bus 09). xGMI: GPU0-GPU6 with 2 links, GPU6 also to the CPU (to
 * be ignored), and GPU2 to GPU6 so GPU0-GPU2 is two xGMI hops away. */
static void pcie_kfd_fixture(const char *root) {
  kfd_node(root, 0, 0, 0);
  kfd_node(root, 1, 4242, 0x83);
  kfd_node(root, 2, 777, 0x05);
  kfd_node(root, 3, 999, 0x09);
  kfd_link(root, 1, 0, 11, 2, 15, 50000, 100000);
  kfd_link(root, 1, 1, 11, 0, 15, 50000, 50000);
  kfd_link(root, 1, 2, 11, 3, 15, 50000, 50000);
  kfd_link(root, 2, 0, 11, 1, 15, 50000, 100000);
  kfd_link(root, 2, 1, 2, 0, 20, 0, 0);
  kfd_link(root, 3, 0, 11, 1, 15, 50000, 50000);
}

/* ------------------------------------------------------------ Frontier */

START_TEST(test_frontier_gcds_follow_the_published_bus_and_numa_layout) {
  cubert_topology *t = node_topology("frontier");
  ck_assert_int_eq(cubert_topology_device_count(t), 8);
  for (int i = 0; i < 8; i++) {
    cubert_topology_device d = device(t, i);
    ck_assert_str_eq(d.pci_bus_id, frontier_bus[i]);
    ck_assert(d.found);
    ck_assert(d.simulated);
    ck_assert(!d.nvidia);
    ck_assert_int_eq(d.numa_count, 1);
    ck_assert_int_eq(d.numa_nodes[0], frontier_numa[i]);
    ck_assert_str_eq(d.cpuset, frontier_cpus[i]);
    ck_assert_int_eq(d.package, 0);
    ck_assert_int_eq(d.machine_numa_nodes, 4);
    ck_assert_int_eq(d.machine_packages, 1);
    ck_assert_str_eq(d.source, "node:frontier");
    ck_assert_str_eq(d.pci_name, "Aldebaran/MI200 [Instinct MI250X]");
  }
  cubert_topology_destroy(t);
}
END_TEST

START_TEST(test_frontier_xgmi_only_between_published_neighbours) {
  cubert_topology *t = node_topology("frontier");
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 8; b++) {
      cubert_topology_link l = pair(t, a, b);
      if (a == b) {
        ck_assert_int_eq(l.link_class, CUBERT_LINK_SELF);
        ck_assert_int_eq(l.hops, 0);
      } else if (frontier_neighbours(a, b)) {
        ck_assert_msg(l.link_class == CUBERT_LINK_XGMI, "GCD %d-%d: %s, expected XGMI", a, b,
                      cubert_link_class_name(l.link_class));
        ck_assert_int_eq(l.hops, 1);
        ck_assert_int_eq(l.links, same_package(a, b) ? 4 : 1);
        ck_assert_str_eq(cubert_topology_pair_name(t, a, b), "XGMI");
      } else {
        /* Not neighbours: never in one package, never on one NUMA node. */
        ck_assert_msg(l.link_class == CUBERT_LINK_SYS, "GCD %d-%d: %s, expected SYS", a, b,
                      cubert_link_class_name(l.link_class));
        ck_assert_int_eq(l.links, 0);
        ck_assert_int_eq(l.xgmi_hops, 2);
      }
    }
  /* The brief's own words: GCD 0 reaches 1, 2 and 6 over xGMI. */
  for (int b = 1; b < 8; b++)
    ck_assert_int_eq(pair(t, 0, b).link_class == CUBERT_LINK_XGMI, b == 1 || b == 2 || b == 6);
  cubert_topology_destroy(t);
}
END_TEST

START_TEST(test_frontier_weights_match_rocm_smi) {
  /* `rocm-smi --showtopo` weights for GCD0 on Frontier: 0 15 15 30 30 30 15 30. */
  static const int expect[8] = {0, 15, 15, 30, 30, 30, 15, 30};
  cubert_topology *t = node_topology("frontier");
  for (int b = 0; b < 8; b++) {
    cubert_topology_link l = pair(t, 0, b);
    ck_assert_int_eq(l.xgmi_weight, expect[b]);
    ck_assert_int_eq(l.xgmi_hops, b == 0 ? 0 : expect[b] / 15);
  }
  cubert_topology_destroy(t);
}
END_TEST

/* ------------------------------------------------------------ MI300X */

START_TEST(test_mi300x_all_pairs_xgmi_and_numa_split_by_socket) {
  static const char *const bus[8] = {"0c", "15", "1e", "69", "9f", "af", "bf", "df"};
  cubert_topology *t = node_topology("mi300x");
  ck_assert_int_eq(cubert_topology_device_count(t), 8);
  for (int a = 0; a < 8; a++) {
    cubert_topology_device d = device(t, a);
    char want[16];
    snprintf(want, sizeof want, "0000:%s:00.0", bus[a]);
    ck_assert_str_eq(d.pci_bus_id, want);
    ck_assert_int_eq(d.numa_count, 1);
    ck_assert_int_eq(d.numa_nodes[0], a < 4 ? 0 : 1);
    ck_assert_int_eq(d.package, a < 4 ? 0 : 1);
    ck_assert_int_eq(d.machine_numa_nodes, 2);
    for (int b = 0; b < 8; b++) {
      if (a == b) continue;
      cubert_topology_link l = pair(t, a, b);
      ck_assert_int_eq(l.link_class, CUBERT_LINK_XGMI);
      ck_assert_int_eq(l.links, 1);
      ck_assert_int_eq(l.hops, 1);
      ck_assert_int_eq(l.xgmi_hops, 1);
      ck_assert_int_eq(l.xgmi_weight, 15);
    }
  }
  cubert_topology_destroy(t);
}
END_TEST

START_TEST(test_mi300x_without_kfd_falls_back_to_pcie_classes) {
  /* The same XML with no KFD: the PCIe path decides (NODE within a socket,
   * SYS across), which proves XGMI came from the fixture, not from hwloc. */
  const char *dir = make_tmp();
  cb_test_ok(cubert_topology_write_node("mi300x", dir));
  char xml[512];
  snprintf(xml, sizeof xml, "%s/mi300x.xml", dir);
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  src.xml_path = xml;
  cubert_topology *t = NULL;
  cb_test_ok(cubert_topology_create_from(&src, &t));
  ck_assert_int_eq(cubert_topology_device_count(t), 8);
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 8; b++)
      if (a != b)
        ck_assert_int_eq(pair(t, a, b).link_class, (a < 4) == (b < 4) ? CUBERT_LINK_NODE : CUBERT_LINK_SYS);
  cubert_topology_destroy(t);
  rm_tree(dir);
}
END_TEST

/* ------------------------------------------------------------ PCIe node */

START_TEST(test_pcie_node_produces_every_pcie_class) {
  cubert_topology *t = node_topology("pcie");
  ck_assert_int_eq(cubert_topology_device_count(t), 8);
  struct {
    int a, b;
    cubert_link_class c;
    int hops;
  } want[] = {
      {0, 1, CUBERT_LINK_PIX, 3},  /* two downstream ports of one switch */
      {2, 3, CUBERT_LINK_PIX, 3},  {6, 7, CUBERT_LINK_PIX, 3},
      {0, 2, CUBERT_LINK_PXB, 7},  /* switch under switch, no host bridge */
      {1, 3, CUBERT_LINK_PXB, 7},  {0, 4, CUBERT_LINK_PHB, 7}, /* one host bridge, two root ports */
      {0, 5, CUBERT_LINK_NODE, 8}, /* two host bridges, one NUMA node */
      {4, 5, CUBERT_LINK_NODE, 4}, {0, 6, CUBERT_LINK_SYS, 10}, /* across sockets */
      {5, 7, CUBERT_LINK_SYS, 6},
  };
  bool seen[CUBERT_LINK_CLASS_COUNT] = {false};
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    cubert_topology_link l = pair(t, want[k].a, want[k].b);
    cubert_topology_link r = pair(t, want[k].b, want[k].a);
    ck_assert_msg(l.link_class == want[k].c, "GPU%d-GPU%d: %s, expected %s", want[k].a, want[k].b,
                  cubert_link_class_name(l.link_class), cubert_link_class_name(want[k].c));
    ck_assert_int_eq(r.link_class, l.link_class);
    ck_assert_int_eq(l.hops, want[k].hops);
    ck_assert_int_eq(l.links, 0);
    ck_assert_int_eq(l.xgmi_hops, 0);
  }
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 8; b++)
      if (a != b) seen[pair(t, a, b).link_class] = true;
  ck_assert(seen[CUBERT_LINK_PIX] && seen[CUBERT_LINK_PXB] && seen[CUBERT_LINK_PHB] && seen[CUBERT_LINK_NODE] &&
            seen[CUBERT_LINK_SYS]);
  ck_assert(!seen[CUBERT_LINK_XGMI] && !seen[CUBERT_LINK_UNKNOWN]);
  ck_assert_int_eq(device(t, 0).numa_nodes[0], 0);
  ck_assert_int_eq(device(t, 6).numa_nodes[0], 1);
  cubert_topology_destroy(t);
}
END_TEST

START_TEST(test_kfd_maps_nodes_by_location_id_not_by_order) {
  const char *dir = make_tmp();
  pcie_kfd_fixture(dir);
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  src.node = "pcie";
  src.kfd_root = dir;
  cubert_topology *t = NULL;
  cb_test_ok(cubert_topology_create_from(&src, &t));
  cubert_topology_link l = pair(t, 0, 6);
  ck_assert_int_eq(l.link_class, CUBERT_LINK_XGMI);
  ck_assert_int_eq(l.links, 2); /* max_bandwidth / min_bandwidth */
  ck_assert_int_eq(pair(t, 6, 0).link_class, CUBERT_LINK_XGMI);
  /* GPU0 -> GPU6 -> GPU2: two xGMI hops, but no direct link: the PCIe class stays. */
  l = pair(t, 0, 2);
  ck_assert_int_eq(l.link_class, CUBERT_LINK_PXB);
  ck_assert_int_eq(l.xgmi_hops, 2);
  ck_assert_int_eq(l.xgmi_weight, 30);
  /* Everything else keeps its PCIe class. */
  ck_assert_int_eq(pair(t, 0, 1).link_class, CUBERT_LINK_PIX);
  ck_assert_int_eq(pair(t, 0, 7).link_class, CUBERT_LINK_SYS);
  cubert_topology_destroy(t);
  rm_tree(dir);
}
END_TEST

START_TEST(test_nvidia_devices_name_xgmi_nvlink) {
  /* The pcie node with NVIDIA's vendor id, plus the xGMI fixture above: a
   * direct link between NVIDIA devices prints as NVLINK. */
  const char *dir = make_tmp();
  pcie_kfd_fixture(dir);
  cb_test_ok(cubert_topology_write_node("pcie", dir));
  char path[512];
  snprintf(path, sizeof path, "%s/pcie.xml", dir);
  char *xml = read_text(path);
  for (char *p = xml; (p = strstr(p, "1002:740f")); p += 9) memcpy(p, "10de:2335", 9);
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  src.xml_buffer = xml;
  src.kfd_root = dir;
  cubert_topology *t = NULL;
  cb_test_ok(cubert_topology_create_from(&src, &t));
  ck_assert(device(t, 0).nvidia);
  ck_assert_str_eq(device(t, 0).source, "xml:buffer");
  ck_assert_int_eq(pair(t, 0, 6).link_class, CUBERT_LINK_XGMI);
  ck_assert_str_eq(cubert_topology_pair_name(t, 0, 6), "NVLINK");
  ck_assert_str_eq(cubert_topology_pair_name(t, 0, 1), "PIX");
  ck_assert_ptr_null(cubert_topology_pair_name(t, 0, 8));
  cubert_topology_destroy(t);
  free(xml);
  rm_tree(dir);
}
END_TEST

START_TEST(test_driver_answer_decides_over_kfd) {
  /* What cubert_topology_create() gets from cubert_runtime_device_link(). */
  cubert_device_link drv[64];
  for (int k = 0; k < 64; k++) drv[k] = (cubert_device_link){-1, 0, 0};
  drv[0 * 8 + 7] = drv[7 * 8 + 0] = (cubert_device_link){CUBERT_LINK_TYPE_XGMI, 1, 18}; /* direct, 18 links */
  drv[0 * 8 + 3] = drv[3 * 8 + 0] = (cubert_device_link){CUBERT_LINK_TYPE_XGMI, 2, 0}; /* xGMI, but two hops */
  drv[0 * 8 + 6] = drv[6 * 8 + 0] = (cubert_device_link){CUBERT_LINK_TYPE_PCIE, 1, 0}; /* PCIe, whatever KFD says */
  const char *dir = make_tmp();
  pcie_kfd_fixture(dir); /* KFD says 0-6 is xGMI */
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  src.node = "pcie";
  src.kfd_root = dir;
  cubert_topology *t = NULL;
  cb_test_ok(cb_topology_create_with_driver(&src, drv, &t));
  cubert_topology_link l = pair(t, 0, 7);
  ck_assert_int_eq(l.link_class, CUBERT_LINK_XGMI);
  ck_assert_int_eq(l.links, 18);
  ck_assert_int_eq(l.hops, 1);
  l = pair(t, 0, 3);
  ck_assert_int_eq(l.link_class, CUBERT_LINK_PXB);
  ck_assert_int_eq(l.xgmi_hops, 2);
  ck_assert_int_eq(pair(t, 0, 6).link_class, CUBERT_LINK_SYS);
  ck_assert_int_eq(pair(t, 6, 7).link_class, CUBERT_LINK_PIX); /* no answer, no KFD link */
  cubert_topology_destroy(t);
  rm_tree(dir);
}
END_TEST

/* ------------------------------------------------------------ bus ids, errors */

START_TEST(test_bus_id_not_in_topology_is_unknown) {
  const char *ids[3] = {"0000:C1:00.0", "0000:42:00.0", "d9:00.0"};
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  src.node = "frontier";
  src.bus_ids = ids;
  src.device_count = 3;
  cubert_topology *t = NULL;
  cb_test_ok(cubert_topology_create_from(&src, &t));
  ck_assert(device(t, 0).found);
  ck_assert_str_eq(device(t, 0).pci_bus_id, "0000:c1:00.0"); /* normalised */
  ck_assert(!device(t, 1).found);
  ck_assert_int_eq(device(t, 1).numa_count, 0);
  ck_assert_int_eq(device(t, 1).package, -1);
  ck_assert_str_eq(device(t, 1).cpuset, "");
  ck_assert_int_eq(pair(t, 0, 1).link_class, CUBERT_LINK_UNKNOWN);
  ck_assert_int_eq(pair(t, 1, 2).link_class, CUBERT_LINK_UNKNOWN);
  ck_assert_int_eq(pair(t, 0, 1).hops, -1);
  ck_assert_int_eq(pair(t, 1, 1).link_class, CUBERT_LINK_SELF);
  ck_assert_int_eq(pair(t, 0, 2).link_class, CUBERT_LINK_XGMI); /* GCD 0 and 6 */
  cubert_topology_destroy(t);

  const char *bad[1] = {"c1-00-0"};
  src.bus_ids = bad;
  src.device_count = 1;
  cb_test_status(cubert_topology_create_from(&src, &t), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "c1-00-0"));
}
END_TEST

/* topology.h: a pair the driver reports as a direct xGMI link is XGMI even
 * when one device is missing from the topology (rule 1 before rule 2 of
 * docs/topology.md); without that answer such a pair is UNKNOWN. */
START_TEST(test_device_missing_from_topology_keeps_the_driver_s_xgmi) {
  const char *ids[3] = {"0000:c1:00.0", "0000:42:00.0", "0000:43:00.0"};
  cubert_device_link drv[9];
  for (int k = 0; k < 9; k++) drv[k] = (cubert_device_link){-1, 0, 0};
  drv[0 * 3 + 1] = drv[1 * 3 + 0] = (cubert_device_link){CUBERT_LINK_TYPE_XGMI, 1, 4};
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  src.node = "frontier";
  src.bus_ids = ids;
  src.device_count = 3;
  cubert_topology *t = NULL;
  cb_test_ok(cb_topology_create_with_driver(&src, drv, &t));
  ck_assert(!device(t, 1).found);
  ck_assert_int_eq(pair(t, 0, 1).link_class, CUBERT_LINK_XGMI);
  ck_assert_int_eq(pair(t, 0, 1).links, 4);
  ck_assert_int_eq(pair(t, 1, 0).link_class, CUBERT_LINK_XGMI);
  ck_assert_int_eq(pair(t, 0, 2).link_class, CUBERT_LINK_UNKNOWN); /* the driver did not answer */
  ck_assert_int_eq(pair(t, 1, 2).link_class, CUBERT_LINK_UNKNOWN);
  cubert_topology_destroy(t);
}
END_TEST

START_TEST(test_malformed_xml_names_the_file) {
  const char *dir = make_tmp();
  char path[512];
  snprintf(path, sizeof path, "%s/broken.xml", dir);
  write_text(path, "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object type=\"Machine\" cpuset=\"0x1\"\n");
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  src.xml_path = path;
  cubert_topology *t = NULL;
  cb_test_status(cubert_topology_create_from(&src, &t), CUBERT_ERR_PARSE);
  ck_assert_ptr_null(t);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), path));

  write_text(path, "<?xml version=\"1.0\"?>\n<topology version=\"3.0\">\n</topology>\n");
  cb_test_status(cubert_topology_create_from(&src, &t), CUBERT_ERR_PARSE);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "version 3.0"));
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), path));

  write_text(path, "not xml at all\n");
  cb_test_status(cubert_topology_create_from(&src, &t), CUBERT_ERR_PARSE);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), path));

  /* The same through a node spec and the runtime's hook. */
  char msg[512] = "";
  char **ids = NULL;
  int n = -1;
  ck_assert_int_eq(cb_host_node_bus_ids(path, &ids, &n, msg, sizeof msg), CUBERT_ERR_PARSE);
  ck_assert_ptr_nonnull(strstr(msg, path));
  ck_assert_ptr_null(ids);
  ck_assert_int_eq(n, -1);
  rm_tree(dir);
}
END_TEST

START_TEST(test_missing_file_and_unknown_node_are_clear_errors) {
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  src.xml_path = "/nonexistent/cubert/node.xml";
  cubert_topology *t = NULL;
  cb_test_status(cubert_topology_create_from(&src, &t), CUBERT_ERR_IO);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "/nonexistent/cubert/node.xml"));

  cubert_topology_source_init(&src);
  src.node = "/nonexistent/cubert/node.xml";
  cb_test_status(cubert_topology_create_from(&src, &t), CUBERT_ERR_IO);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "/nonexistent/cubert/node.xml"));

  src.node = "summit";
  cb_test_status(cubert_topology_create_from(&src, &t), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "summit"));
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "frontier"));

  src.node = "frontier";
  src.kfd_root = "/nonexistent/kfd";
  cb_test_status(cubert_topology_create_from(&src, &t), CUBERT_ERR_IO);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "/nonexistent/kfd"));

  char msg[256] = "";
  char **ids = NULL;
  int n = 0;
  ck_assert_int_eq(cb_host_node_bus_ids("summit", &ids, &n, msg, sizeof msg), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(msg, "summit"));

  cubert_topology_source_init(&src);
  src.struct_size = 0;
  cb_test_status(cubert_topology_create_from(&src, &t), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(t);
}
END_TEST

START_TEST(test_malformed_kfd_fixture_names_file_and_line) {
  const char *dir = make_tmp();
  cb_test_ok(cubert_topology_write_node("frontier", dir));
  char xml[512], link[768];
  snprintf(xml, sizeof xml, "%s/frontier.xml", dir);
  snprintf(link, sizeof link, "%s/frontier-kfd/" KFD_NODES "/5/io_links/1/properties", dir);
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  src.node = xml;
  cubert_topology *t = NULL;

  /* Intact, the written node behaves like the built-in one. */
  cb_test_ok(cubert_topology_create_from(&src, &t));
  ck_assert_int_eq(pair(t, 0, 1).link_class, CUBERT_LINK_XGMI);
  ck_assert_int_eq(pair(t, 0, 1).links, 4);
  ck_assert_int_eq(pair(t, 0, 3).link_class, CUBERT_LINK_SYS);
  ck_assert(!strncmp(device(t, 0).source, "node:", 5) && strstr(device(t, 0).source, "frontier.xml"));
  cubert_topology_destroy(t);
  t = NULL;

  char *orig = read_text(link);
  write_text(link, "type 11\nnode_from 5\nnode_to 4\nweight fifteen\n");
  cb_test_status(cubert_topology_create_from(&src, &t), CUBERT_ERR_PARSE);
  ck_assert_ptr_null(t);
  ck_assert_msg(strstr(cubert_last_error_message(), link) != NULL, "message: %s", cubert_last_error_message());
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "line 4"));

  write_text(link, "type 11\nnode_from 5\nnode_to 42\nweight 15\n");
  cb_test_status(cubert_topology_create_from(&src, &t), CUBERT_ERR_PARSE);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "node 42"));

  write_text(link, "type 11\nweight 15\n");
  cb_test_status(cubert_topology_create_from(&src, &t), CUBERT_ERR_PARSE);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "node_to"));

  write_text(link, orig);
  char props[768];
  snprintf(props, sizeof props, "%s/frontier-kfd/" KFD_NODES "/4/properties", dir);
  write_text(props, "cpu_cores_count 0\nsimd_count 440\n");
  cb_test_status(cubert_topology_create_from(&src, &t), CUBERT_ERR_PARSE);
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), "location_id"));
  ck_assert_ptr_nonnull(strstr(cubert_last_error_message(), props));
  free(orig);
  rm_tree(dir);
}
END_TEST

/* ------------------------------------------------------------ KFD as the kernel shows it */

/* A reader that refuses every file of KFD nodes refuse_lo..refuse_hi with
 * EPERM, as the kernel does for GPUs outside the process's device cgroup
 * (kfd_topology.c: node_show, iolink_show). */
static int refuse_lo = -1, refuse_hi = -1;

static int refusing_read(void *ctx, const char *path, char *buf, size_t capacity, size_t *len) {
  (void)ctx;
  const char *p = strstr(path, KFD_NODES "/");
  if (p) {
    int id = atoi(p + strlen(KFD_NODES "/"));
    if (id >= refuse_lo && id <= refuse_hi) return EPERM;
  }
  FILE *f = fopen(path, "rb");
  if (!f) return errno;
  *len = fread(buf, 1, capacity, f);
  fclose(f);
  return 0;
}

/* Fails node 5's files with EIO. */
static int failing_read(void *ctx, const char *path, char *buf, size_t capacity, size_t *len) {
  if (strstr(path, KFD_NODES "/5/")) return EIO;
  refuse_lo = refuse_hi = -1;
  return refusing_read(ctx, path, buf, capacity, len);
}

START_TEST(test_kfd_nodes_refused_by_the_device_cgroup_are_skipped) {
  /* Slurm --gpus-per-task=4 on Frontier: this task sees GCDs 0-3; the
   * kernel refuses KFD nodes 8-11 (GCDs 4-7). The visible GCDs keep their
   * xGMI links, counts and multi-hop paths. */
  const char *dir = make_tmp();
  cb_test_ok(cubert_topology_write_node("frontier", dir));
  char xml[512];
  snprintf(xml, sizeof xml, "%s/frontier.xml", dir);
  const cb_kfd_reader refusing = {refusing_read, NULL};
  refuse_lo = 8;
  refuse_hi = 11;
  cb_kfd_set_reader(&refusing);
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  src.node = xml;
  src.bus_ids = frontier_bus;
  src.device_count = 4;
  cubert_topology *t = NULL;
  cb_test_ok(cubert_topology_create_from(&src, &t));
  cubert_topology_link l = pair(t, 0, 1);
  ck_assert_int_eq(l.link_class, CUBERT_LINK_XGMI);
  ck_assert_int_eq(l.links, 4);
  ck_assert_int_eq(pair(t, 0, 2).link_class, CUBERT_LINK_XGMI);
  ck_assert_int_eq(pair(t, 0, 2).xgmi_weight, 15);
  l = pair(t, 0, 3); /* through GCD 1 or 2, both visible */
  ck_assert_int_eq(l.link_class, CUBERT_LINK_SYS);
  ck_assert_int_eq(l.xgmi_hops, 2);
  const char *notes = cubert_topology_notes(t);
  ck_assert_msg(strstr(notes, "refused") && strstr(notes, "8, 9, 10, 11"), "notes: %s", notes);
  cubert_topology_destroy(t);

  /* The loader itself: the refused nodes listed, links to them dropped. */
  char root[600], msg[512] = "";
  snprintf(root, sizeof root, "%s/frontier-kfd", dir);
  cb_kfd *k = NULL;
  cb_test_ok(cb_kfd_load_dir(root, false, &k, msg, sizeof msg));
  ck_assert_int_eq(k->nnodes, 8);
  ck_assert_int_eq(k->nrefused, 4);
  ck_assert(cb_kfd_refused(k, 9) && !cb_kfd_refused(k, 4));
  for (int i = 0; i < k->nnodes; i++)
    for (int j = 0; j < k->nodes[i].nlinks; j++) ck_assert_int_lt(k->nodes[i].links[j].node_to, 8);
  cb_kfd_free(k);

  /* Another read error still fails, naming the file. */
  const cb_kfd_reader failing = {failing_read, NULL};
  cb_kfd_set_reader(&failing);
  k = NULL;
  ck_assert_int_eq(cb_kfd_load_dir(root, false, &k, msg, sizeof msg), CUBERT_ERR_IO);
  ck_assert_ptr_null(k);
  ck_assert_msg(strstr(msg, "nodes/5/") != NULL, "message: %s", msg);
  cb_kfd_set_reader(NULL);
  refuse_lo = refuse_hi = -1;
  rm_tree(dir);
}
END_TEST

/* The fixture of an MI300X node whose GPU 0 is in CPX mode: 8 partitions,
 * one KFD node each, all with GPU 0's bus id (topology/nodes/gen_nodes.py,
 * mi300x_cpx_kfd). */
static void cpx_fixture(char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s/topology/nodes/mi300x-cpx-kfd", CB_SOURCE_DIR);
  ck_assert(n > 0 && (size_t)n < cap);
}

static const char *const mi300x_bus[8] = {"0000:0c:00.0", "0000:15:00.0", "0000:1e:00.0", "0000:69:00.0",
                                          "0000:9f:00.0", "0000:af:00.0", "0000:bf:00.0", "0000:df:00.0"};

START_TEST(test_mi300x_cpx_partitions_map_to_their_own_kfd_nodes) {
  /* HIP shows 15 devices: GPU 0's 8 partitions (one bus id), then GPUs 1-7. */
  char kfd[1024];
  cpx_fixture(kfd, sizeof kfd);
  const char *ids[15];
  for (int i = 0; i < 8; i++) ids[i] = mi300x_bus[0];
  for (int g = 1; g < 8; g++) ids[7 + g] = mi300x_bus[g];
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  src.node = "mi300x";
  src.kfd_root = kfd;
  src.bus_ids = ids;
  src.device_count = 15;
  cubert_topology *t = NULL;
  cb_test_ok(cubert_topology_create_from(&src, &t));
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 8; b++) {
      if (a == b) continue;
      cubert_topology_link l = pair(t, a, b);
      /* partitions of one GPU: KFD's intra-socket link (weight 13) */
      ck_assert_msg(l.link_class == CUBERT_LINK_XGMI && l.xgmi_weight == 13,
                    "partitions %d-%d: %s, weight %d", a, b, cubert_link_class_name(l.link_class),
                    l.xgmi_weight);
    }
  /* a partition to another GPU: the partition's own link, weight 41 */
  ck_assert_int_eq(pair(t, 3, 8).link_class, CUBERT_LINK_XGMI);
  ck_assert_int_eq(pair(t, 3, 8).xgmi_weight, 41);
  /* an SPX GPU to partition 5: its link to node 7, weight 15 */
  ck_assert_int_eq(pair(t, 9, 5).xgmi_weight, 15);
  ck_assert_str_eq(cubert_topology_notes(t), "");
  cubert_topology_destroy(t);

  /* Only two of the eight partitions visible: which they are is unknown. */
  const char *some[3] = {mi300x_bus[0], mi300x_bus[0], mi300x_bus[1]};
  src.bus_ids = some;
  src.device_count = 3;
  cb_test_ok(cubert_topology_create_from(&src, &t));
  ck_assert_msg(strstr(cubert_topology_notes(t), "partitioned") != NULL, "notes: %s", cubert_topology_notes(t));
  ck_assert_int_ne(pair(t, 0, 1).link_class, CUBERT_LINK_XGMI);
  ck_assert_int_ne(pair(t, 0, 2).link_class, CUBERT_LINK_XGMI);
  ck_assert_int_eq(pair(t, 0, 2).xgmi_hops, 0);
  cubert_topology_destroy(t);
}
END_TEST

START_TEST(test_driver_xgmi_without_a_link_count_takes_kfd_s) {
  /* HIP on AMD (hipExtGetLinkTypeAndHopCount) says xGMI, one hop, and no
   * link count: KFD's bandwidth ratio gives it (4 between the GCDs of one
   * MI250X, 1 between packages). */
  cubert_device_link drv[64];
  for (int k = 0; k < 64; k++) drv[k] = (cubert_device_link){-1, 0, 0};
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 8; b++)
      if (a != b && frontier_neighbours(a, b)) drv[a * 8 + b] = (cubert_device_link){1, 1, 0};
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  src.node = "frontier";
  cubert_topology *t = NULL;
  cb_test_ok(cb_topology_create_with_driver(&src, drv, &t));
  ck_assert_int_eq(pair(t, 0, 1).link_class, CUBERT_LINK_XGMI);
  ck_assert_int_eq(pair(t, 0, 1).links, 4);
  ck_assert_int_eq(pair(t, 0, 2).links, 1);
  cubert_topology_destroy(t);
}
END_TEST

START_TEST(test_host_node_bus_ids_in_bus_order) {
  const char *nodes[3] = {"frontier", "mi300x", "pcie"};
  for (int k = 0; k < 3; k++) {
    char msg[256] = "";
    char **ids = NULL;
    int n = 0;
    ck_assert_msg(cb_host_node_bus_ids(nodes[k], &ids, &n, msg, sizeof msg) == CUBERT_OK, "%s: %s", nodes[k], msg);
    ck_assert_int_eq(n, 8);
    for (int i = 1; i < n; i++) ck_assert_msg(strcmp(ids[i - 1], ids[i]) < 0, "%s not in bus order", nodes[k]);
    if (k == 0)
      for (int i = 0; i < n; i++) ck_assert_str_eq(ids[i], frontier_bus[i]);
    cb_host_node_free(ids, n);
  }
}
END_TEST

/* ------------------------------------------------------------ JSON, names */

START_TEST(test_json_holds_devices_matrix_and_pairs) {
  cubert_topology *t = node_topology("frontier");
  char *text = NULL;
  cb_test_ok(cubert_topology_json(t, &text));
  json_error_t err;
  json_t *j = json_loads(text, 0, &err);
  ck_assert_msg(j != NULL, "JSON does not parse: %s", err.text);
  ck_assert_uint_eq(json_array_size(json_object_get(j, "devices")), 8);
  ck_assert_uint_eq(json_array_size(json_object_get(j, "pairs")), 56);
  json_t *m = json_object_get(j, "matrix");
  ck_assert_str_eq(json_string_value(json_array_get(json_array_get(m, 0), 1)), "XGMI");
  ck_assert_str_eq(json_string_value(json_array_get(json_array_get(m, 0), 3)), "SYS");
  ck_assert_str_eq(json_string_value(json_array_get(json_array_get(m, 2), 2)), "SELF");
  json_t *d0 = json_array_get(json_object_get(j, "devices"), 0);
  ck_assert_str_eq(json_string_value(json_object_get(d0, "cpuset")), "48-55,112-119");
  ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(d0, "numa_nodes"), 0)), 3);
  ck_assert_ptr_nonnull(json_object_get(json_object_get(j, "legend"), "PXB"));
  json_t *p0 = json_array_get(json_object_get(j, "pairs"), 0); /* 0 -> 1 */
  ck_assert_int_eq(json_integer_value(json_object_get(p0, "links")), 4);
  json_decref(j);
  free(text);
  cubert_topology_destroy(t);
}
END_TEST

START_TEST(test_class_names_and_bad_indices) {
  static const char *const names[] = {"SELF", "XGMI", "PIX", "PXB", "PHB", "NODE", "SYS", "UNKNOWN"};
  for (int c = 0; c < CUBERT_LINK_CLASS_COUNT; c++) {
    ck_assert_str_eq(cubert_link_class_name((cubert_link_class)c), names[c]);
    ck_assert(strlen(cubert_link_class_description((cubert_link_class)c)) > 3);
  }
  ck_assert_str_eq(cubert_link_class_name((cubert_link_class)99), "?");
  ck_assert_str_eq(cubert_placement_name(CUBERT_PLACEMENT_SINGLE_NODE), "single-node");
  cubert_topology *t = node_topology("pcie");
  cubert_topology_link l;
  cb_test_status(cubert_topology_pair(t, 0, 8, &l), CUBERT_ERR_NO_DEVICE);
  cb_test_status(cubert_topology_pair(t, -1, 0, &l), CUBERT_ERR_NO_DEVICE);
  cubert_topology_device d;
  cb_test_status(cubert_topology_device_info(t, 8, &d), CUBERT_ERR_NO_DEVICE);
  cb_test_status(cubert_topology_write_node("summit", "/tmp"), CUBERT_ERR_INVALID_ARGUMENT);
  cubert_topology_destroy(t);
  cubert_topology_destroy(NULL);
}
END_TEST

/* ------------------------------------------------------------ placement */

START_TEST(test_placement_is_not_applied_on_a_simulated_node) {
  cubert_topology *t = node_topology("frontier");
  cubert_placement p = CUBERT_PLACEMENT_BOUND;
  cb_test_ok(cubert_topology_bind_thread(t, 0, &p));
  ck_assert_int_eq(p, CUBERT_PLACEMENT_NOT_THIS_MACHINE);
  void *mem = NULL;
  cb_test_ok(cubert_topology_alloc_local(t, 3, 1 << 20, &mem, &p));
  ck_assert_int_eq(p, CUBERT_PLACEMENT_NOT_THIS_MACHINE);
  memset(mem, 0x5a, 1 << 20);
  cubert_topology_free_local(t, 3, mem, 1 << 20);
  cb_test_status(cubert_topology_alloc_local(t, 3, 0, &mem, &p), CUBERT_ERR_INVALID_ARGUMENT);
  cubert_topology_destroy(t);
}
END_TEST

/* The first PCI device of this machine as hwloc sees it, or "" . */
static void first_live_pci(char *out, size_t cap, int *numa_nodes) {
  hwloc_topology_t h;
  out[0] = 0;
  ck_assert_int_eq(hwloc_topology_init(&h), 0);
  hwloc_topology_set_io_types_filter(h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  ck_assert_int_eq(hwloc_topology_load(h), 0);
  hwloc_obj_t o = hwloc_get_next_pcidev(h, NULL);
  if (o)
    snprintf(out, cap, "%04x:%02x:%02x.%x", o->attr->pcidev.domain, o->attr->pcidev.bus, o->attr->pcidev.dev,
             o->attr->pcidev.func);
  *numa_nodes = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
  hwloc_topology_destroy(h);
}

START_TEST(test_live_topology_loads_and_places) {
  /* Every GPU of this machine (there may be none). */
  cubert_topology_source src;
  cubert_topology_source_init(&src);
  cubert_topology *t = NULL;
  cb_test_ok(cubert_topology_create_from(&src, &t));
  int gpus = cubert_topology_device_count(t);
  for (int i = 0; i < gpus; i++) {
    ck_assert(device(t, i).found);
    ck_assert(!device(t, i).simulated);
    ck_assert_str_eq(device(t, i).source, "live");
  }
  cubert_topology_destroy(t);

  char bus[32];
  int numa = 0;
  first_live_pci(bus, sizeof bus, &numa);
  const char *ids[2] = {bus[0] ? bus : "0000:ff:1f.7", "0000:ff:1f.7"};
  src.bus_ids = ids;
  src.device_count = 2;
  cb_test_ok(cubert_topology_create_from(&src, &t));
  cubert_topology_device d = device(t, 0);
  ck_assert_int_eq(d.machine_numa_nodes, numa);
  cubert_placement p;
  void *mem = NULL;
  /* An unknown device: nothing to bind to, memory still comes. */
  cb_test_ok(cubert_topology_bind_thread(t, 1, &p));
  ck_assert_int_eq(p, CUBERT_PLACEMENT_NO_LOCALITY);
  cb_test_ok(cubert_topology_alloc_local(t, 1, 4096, &mem, &p));
  ck_assert_int_eq(p, CUBERT_PLACEMENT_NO_LOCALITY);
  memset(mem, 1, 4096);
  cubert_topology_free_local(t, 1, mem, 4096);
  if (!bus[0]) {
    cb_test_skip("no PCI device visible to hwloc: live placement on a device not exercised");
  } else {
    ck_assert(d.found);
    ck_assert(d.cpuset[0]);
    cb_test_ok(cubert_topology_bind_thread(t, 0, &p));
    cb_test_ok(cubert_topology_alloc_local(t, 0, 1 << 16, &mem, &p));
    memset(mem, 2, 1 << 16);
    cubert_topology_free_local(t, 0, mem, 1 << 16);
    if (numa <= 1) {
      ck_assert_int_eq(p, CUBERT_PLACEMENT_SINGLE_NODE);
    } else if (d.numa_count > 0) {
      ck_assert_int_eq(p, CUBERT_PLACEMENT_BOUND);
      /* The thread now runs inside the device's CPUs. */
      hwloc_topology_t h;
      hwloc_topology_init(&h);
      hwloc_topology_load(h);
      hwloc_bitmap_t cur = hwloc_bitmap_alloc(), want = hwloc_bitmap_alloc();
      ck_assert_int_eq(hwloc_get_cpubind(h, cur, HWLOC_CPUBIND_THREAD), 0);
      hwloc_bitmap_list_sscanf(want, d.cpuset);
      ck_assert(hwloc_bitmap_isincluded(cur, want));
      hwloc_bitmap_free(cur);
      hwloc_bitmap_free(want);
      hwloc_topology_destroy(h);
    }
  }
  cubert_topology_destroy(t);
}
END_TEST

/* ------------------------------------------------------------ runtime */

START_TEST(test_runtime_host_devices_take_the_node_layout) {
  setenv("CUBERT_HOST_NODE", "frontier", 1);
  unsetenv("CUBERT_HOST_DEVICES");
  cubert_runtime_options o;
  cubert_runtime_options_init(&o);
  o.backends = "host";
  o.faults = "";
  o.host_memory = 64ull << 20;
  cubert_runtime *rt = NULL;
  cb_test_ok(cubert_runtime_create(&o, &rt));
  ck_assert_int_eq(cubert_runtime_device_count(rt), 8);
  cubert_topology *t = NULL;
  cb_test_ok(cubert_topology_create(rt, NULL, &t));
  ck_assert_int_eq(cubert_topology_device_count(t), 8);
  for (int a = 0; a < 8; a++) {
    cubert_topology_device d = device(t, a);
    char name[16];
    snprintf(name, sizeof name, "host:%d", a);
    ck_assert_str_eq(d.name, name);
    ck_assert_str_eq(d.pci_bus_id, frontier_bus[a]);
    ck_assert_int_eq(d.numa_nodes[0], frontier_numa[a]);
    for (int b = 0; b < 8; b++)
      if (a != b)
        ck_assert_int_eq(pair(t, a, b).link_class, frontier_neighbours(a, b) ? CUBERT_LINK_XGMI : CUBERT_LINK_SYS);
  }
  cubert_topology_destroy(t);
  cubert_runtime_destroy(rt);

  /* Without a node, host devices have no bus id: UNKNOWN, not an error. */
  unsetenv("CUBERT_HOST_NODE");
  o.host_devices = 2;
  cb_test_ok(cubert_runtime_create(&o, &rt));
  cb_test_ok(cubert_topology_create(rt, NULL, &t));
  ck_assert_int_eq(cubert_topology_device_count(t), 2);
  ck_assert_int_eq(pair(t, 0, 1).link_class, CUBERT_LINK_UNKNOWN);
  ck_assert(!device(t, 0).found);
  cubert_placement p;
  cb_test_ok(cubert_topology_bind_thread(t, 0, &p));
  ck_assert_int_eq(p, CUBERT_PLACEMENT_NO_LOCALITY);
  cubert_topology_destroy(t);
  cubert_runtime_destroy(rt);
}
END_TEST

int main(void) {
  Suite *s = suite_create("topology");
  TCase *tc = tcase_create("topology");
  tcase_add_test(tc, test_frontier_gcds_follow_the_published_bus_and_numa_layout);
  tcase_add_test(tc, test_frontier_xgmi_only_between_published_neighbours);
  tcase_add_test(tc, test_frontier_weights_match_rocm_smi);
  tcase_add_test(tc, test_mi300x_all_pairs_xgmi_and_numa_split_by_socket);
  tcase_add_test(tc, test_mi300x_without_kfd_falls_back_to_pcie_classes);
  tcase_add_test(tc, test_pcie_node_produces_every_pcie_class);
  tcase_add_test(tc, test_kfd_maps_nodes_by_location_id_not_by_order);
  tcase_add_test(tc, test_nvidia_devices_name_xgmi_nvlink);
  tcase_add_test(tc, test_driver_answer_decides_over_kfd);
  tcase_add_test(tc, test_bus_id_not_in_topology_is_unknown);
  tcase_add_test(tc, test_device_missing_from_topology_keeps_the_driver_s_xgmi);
  tcase_add_test(tc, test_malformed_xml_names_the_file);
  tcase_add_test(tc, test_missing_file_and_unknown_node_are_clear_errors);
  tcase_add_test(tc, test_malformed_kfd_fixture_names_file_and_line);
  tcase_add_test(tc, test_kfd_nodes_refused_by_the_device_cgroup_are_skipped);
  tcase_add_test(tc, test_mi300x_cpx_partitions_map_to_their_own_kfd_nodes);
  tcase_add_test(tc, test_driver_xgmi_without_a_link_count_takes_kfd_s);
  tcase_add_test(tc, test_host_node_bus_ids_in_bus_order);
  tcase_add_test(tc, test_json_holds_devices_matrix_and_pairs);
  tcase_add_test(tc, test_class_names_and_bad_indices);
  tcase_add_test(tc, test_placement_is_not_applied_on_a_simulated_node);
  tcase_add_test(tc, test_live_topology_loads_and_places);
  tcase_add_test(tc, test_runtime_host_devices_take_the_node_layout);
  suite_add_tcase(s, tc);
  return cb_test_run(s);
}
