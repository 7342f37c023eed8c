/* cli/topo.c: `cubert topo`, the device list, the pair-class matrix
 * (as `nvidia-smi topo -m` and `rocm-smi --showtopo` print theirs), NUMA
 * affinity and a legend; or all of it as JSON. Part of the cubert tool, not
 * of the library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "cubert/topology.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: cubert topo [--json] [--node NAME|FILE] [--xml FILE] [--write-node DIR]\n"
          "\n"
          "Where the devices sit: each device's bus id, NUMA node(s) and CPUs, and the\n"
          "class of every pair (XGMI/NVLINK, PIX, PXB, PHB, NODE, SYS).\n"
          "\n"
          "  --json            everything as JSON\n"
          "  --node NAME|FILE  the GPUs of a simulated node (frontier, mi300x, pcie, or an\n"
          "                    hwloc XML file) without a runtime; default: the runtime's\n"
          "                    devices (CUBERT_HOST_NODE gives host devices a node's layout)\n"
          "  --xml FILE        hwloc XML 2.0 file standing for this machine (default:\n"
          "                    $CUBERT_TOPOLOGY, else this machine as hwloc sees it);\n"
          "                    not with --node\n"
          "  --write-node DIR  with --node NAME: write the built-in node's XML and KFD\n"
          "                    fixture into DIR (a file node: --node DIR/NAME.xml)\n");
}

/* "        GPU0    GPU1 ..."; `more` when columns follow the last GPU. */
static void print_matrix_header(int n, bool more) {
  printf("%-8s", "");
  for (int j = 0; j < n; j++) printf(j + 1 < n || more ? "GPU%-5d" : "GPU%d", j);
}

static void print_text(const cubert_topology *t, const char *origin) {
  int n = cubert_topology_device_count(t);
  printf("cubert topo: %d device%s (%s)\n\n", n, n == 1 ? "" : "s", origin);
  if (!n) return;
  printf("%-6s %-13s %-6s %-8s %-18s %s\n", "", "bus id", "NUMA", "package", "CPUs", "name");
  bool any_nvidia = false, any_xgmi = false, any_simulated = false;
  for (int i = 0; i < n; i++) {
    cubert_topology_device d;
    if (cubert_topology_device_info(t, i, &d)) continue;
    char numa[64] = "", pkg[16] = "-";
    for (int k = 0; k < d.numa_count; k++) {
      size_t l = strlen(numa);
      snprintf(numa + l, sizeof numa - l, "%s%d", k ? "," : "", d.numa_nodes[k]);
    }
    if (!d.numa_count) snprintf(numa, sizeof numa, "-");
    if (d.package >= 0) snprintf(pkg, sizeof pkg, "%d", d.package);
    char gpu[16];
    snprintf(gpu, sizeof gpu, "GPU%d", i);
    bool show_pci = d.pci_name[0] && strcmp(d.pci_name, d.name) != 0;
    printf("%-6s %-13s %-6s %-8s %-18s %s%s%s%s\n", gpu, d.pci_bus_id[0] ? d.pci_bus_id : "-", numa, pkg,
           d.cpuset[0] ? d.cpuset : "-", d.name, show_pci ? " (" : "", show_pci ? d.pci_name : "",
           show_pci ? ")" : "");
    if (d.pci_bus_id[0] && !d.found) printf("       (bus id %s is not in the topology)\n", d.pci_bus_id);
    any_nvidia |= d.nvidia;
    any_simulated |= d.simulated;
  }

  printf("\n");
  print_matrix_header(n, true);
  printf("%-18s %s\n", "CPU Affinity", "NUMA Affinity");
  bool seen[CUBERT_LINK_CLASS_COUNT] = {false};
  for (int i = 0; i < n; i++) {
    char gpu[16];
    snprintf(gpu, sizeof gpu, "GPU%d", i);
    printf("%-8s", gpu);
    for (int j = 0; j < n; j++) {
      cubert_topology_link l;
      if (cubert_topology_pair(t, i, j, &l)) continue;
      seen[l.link_class] = true;
      any_xgmi |= l.xgmi_hops > 0;
      printf("%-8s", i == j ? "X" : cubert_topology_pair_name(t, i, j));
    }
    cubert_topology_device d;
    if (cubert_topology_device_info(t, i, &d)) continue;
    char numa[64] = "";
    for (int k = 0; k < d.numa_count; k++) {
      size_t l = strlen(numa);
      snprintf(numa + l, sizeof numa - l, "%s%d", k ? "," : "", d.numa_nodes[k]);
    }
    printf("%-18s %s\n", d.cpuset[0] ? d.cpuset : "N/A", d.numa_count ? numa : "N/A");
  }

  if (any_xgmi) {
    static const char *const titles[3] = {
        "xGMI weight (as rocm-smi --showtopo prints it; 0: self or no xGMI path)",
        "xGMI hops (through other GPUs where there is no direct link; 0: none)",
        "xGMI links of directly connected pairs (0: not directly connected)"};
    for (int k = 0; k < 3; k++) {
      printf("\n%s:\n", titles[k]);
      print_matrix_header(n, false);
      printf("\n");
      for (int i = 0; i < n; i++) {
        printf("GPU%-5d", i);
        for (int j = 0; j < n; j++) {
          cubert_topology_link l;
          if (cubert_topology_pair(t, i, j, &l)) continue;
          int v = k == 0 ? l.xgmi_weight : k == 1 ? l.xgmi_hops : (l.link_class == CUBERT_LINK_XGMI ? l.links : 0);
          printf(j + 1 < n ? "%-8d" : "%d", v);
        }
        printf("\n");
      }
    }
  }

  printf("\nLegend:\n\n");
  printf("  %-7s = %s\n", "X", cubert_link_class_description(CUBERT_LINK_SELF));
  for (int c = CUBERT_LINK_XGMI; c < CUBERT_LINK_CLASS_COUNT; c++) {
    if (c == CUBERT_LINK_UNKNOWN && !seen[c]) continue;
    const char *name = cubert_link_class_name((cubert_link_class)c);
    if (c == CUBERT_LINK_XGMI && any_nvidia) name = "NVLINK";
    printf("  %-7s = %s\n", name, cubert_link_class_description((cubert_link_class)c));
  }
  if (any_simulated)
    printf("\nSimulated layout: placement (thread binding, NUMA-local memory) is not applied.\n");
  if (cubert_topology_notes(t)[0]) printf("\nNote: %s.\n", cubert_topology_notes(t));
}

int cb_cli_topo(int argc, char **argv) {
  bool json = false;
  const char *node = NULL, *xml = NULL, *write_dir = NULL;
  const cb_cli_opt opts[] = {CB_FLAG("json", 0, &json), CB_TEXT("node", 0, &node), CB_TEXT("xml", 0, &xml),
                             CB_TEXT("write-node", 0, &write_dir), CB_END};
  const cb_cli_spec spec = {"topo", usage, opts, 0, 0, NULL};
  int first, parsed = cb_cli_parse(&spec, argc, argv, &first);
  if (parsed != CB_CLI_PARSED) return parsed;
  if (!cb_cli_node_ok("topo", node)) return CB_CLI_USAGE;
  if (node && xml) { /* a simulated node has no machine for --xml to stand for */
    fprintf(stderr, "cubert topo: --xml goes with the runtime's devices, not with --node (a node is a whole machine)\n");
    return CB_CLI_USAGE;
  }
  if (write_dir) {
    if (!cb_cli_node_builtin(node)) { /* a file node is already written out */
      fprintf(stderr, "cubert topo: --write-node needs --node NAME, a built-in node (frontier, mi300x or pcie)%s%s%s\n",
              node ? ", not '" : "", node ? node : "", node ? "'" : "");
      return CB_CLI_USAGE;
    }
    cubert_status st = cubert_topology_write_node(node, write_dir);
    if (st) return cb_cli_fail("topo", "writing the node", st);
    printf("wrote %s/%s.xml (use --node %s/%s.xml or CUBERT_HOST_NODE=%s/%s.xml)\n", write_dir, node,
           write_dir, node, write_dir, node);
    return CB_CLI_OK;
  }

  cubert_topology *t = NULL;
  cubert_runtime *rt = NULL;
  cubert_status st;
  char origin[512];
  if (node) {
    cubert_topology_source src;
    cubert_topology_source_init(&src);
    src.node = node;
    st = cubert_topology_create_from(&src, &t);
    if (st) return cb_cli_fail("topo", "loading the node", st);
    snprintf(origin, sizeof origin, "simulated node %s", node);
  } else {
    st = cubert_runtime_create(NULL, &rt);
    if (st) return cb_cli_fail("topo", "creating the runtime", st);
    st = cubert_topology_create(rt, xml, &t);
    if (st) {
      cubert_runtime_destroy(rt);
      return cb_cli_fail("topo", "reading the topology", st);
    }
    const char *env_node = getenv("CUBERT_HOST_NODE");
    if (env_node && *env_node)
      snprintf(origin, sizeof origin, "runtime devices; host devices on simulated node %s", env_node);
    else
      snprintf(origin, sizeof origin, "runtime devices; %s", xml ? xml : "this machine");
  }
  int rc = CB_CLI_OK;
  if (json) {
    char *text = NULL;
    st = cubert_topology_json(t, &text);
    if (st)
      rc = cb_cli_fail("topo", "writing JSON", st);
    else
      printf("%s\n", text);
    free(text);
  } else {
    print_text(t, origin);
  }
  cubert_topology_destroy(t);
  cubert_runtime_destroy(rt);
  return rc;
}
