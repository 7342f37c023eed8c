/* tests/test_placement.c: the runtime's placement hooks (topology/placement.h)
 * bind threads and host memory near a device on a machine of two NUMA
 * nodes, and do nothing on a machine of one.
 *
 * No machine here has two NUMA nodes, so the two-node case runs on a
 * hand-made hwloc XML 2.0 topology handed to hwloc as this machine
 * (HWLOC_XMLFILE + HWLOC_THISSYSTEM=1): two packages of one allowed CPU
 * each, NUMA nodes 0 and 1, and an NVIDIA GPU (0000:41:00.0) under package 1.
 * hwloc then binds for real, through the kernel: the CPU binding is checked
 * as the kernel reports it (sched_getaffinity). Binding memory to node 1
 * needs a kernel that has a node 1; where it has none, the test checks what
 * the placement asked for (node 1, via its topology and its count of bound
 * allocations) and prints a skip line for the kernel's side.
 *
 * The devices are given to the placement by bus id (cb_placement_start_ids),
 * as the runtime does for a runtime's devices: no backend here has a
 * device of this machine with a bus id (host devices take theirs from
 * simulated nodes, which are never placed). */
#include <check.h>
#include <errno.h>
#include <hwloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topology/placement.h"
#include "tests/testutil.h"

#define GPU_BUS_ID "0000:41:00.0"
#define ALLOC_BYTES ((size_t)1 << 20)

/* Two packages, one NUMA node and one PU each; the GPU hangs under package
 * 1. %s: machine cpuset (x3), package 0 cpuset (x6), PU 0 os index (%u),
 * package 1 cpuset (x6), PU 1 os index (%u). */
static const char two_node_xml[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
    "<topology version=\"2.0\">\n"
    "<object type=\"Machine\" os_index=\"0\" cpuset=\"%s\" complete_cpuset=\"%s\" allowed_cpuset=\"%s\""
    " nodeset=\"0x00000003\" complete_nodeset=\"0x00000003\" allowed_nodeset=\"0x00000003\" gp_index=\"1\">\n"
    "  <info name=\"Backend\" value=\"Linux\"/>\n"
    "  <object type=\"Package\" os_index=\"0\" cpuset=\"%s\" complete_cpuset=\"%s\""
    " nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" gp_index=\"2\">\n"
    "    <object type=\"NUMANode\" os_index=\"0\" cpuset=\"%s\" complete_cpuset=\"%s\""
    " nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" local_memory=\"1073741824\" gp_index=\"3\"/>\n"
    "    <object type=\"PU\" os_index=\"%u\" cpuset=\"%s\" complete_cpuset=\"%s\""
    " nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" gp_index=\"4\"/>\n"
    "  </object>\n"
    "  <object type=\"Package\" os_index=\"1\" cpuset=\"%s\" complete_cpuset=\"%s\""
    " nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\" gp_index=\"5\">\n"
    "    <object type=\"NUMANode\" os_index=\"1\" cpuset=\"%s\" complete_cpuset=\"%s\""
    " nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\" local_memory=\"1073741824\" gp_index=\"6\"/>\n"
    "    <object type=\"PU\" os_index=\"%u\" cpuset=\"%s\" complete_cpuset=\"%s\""
    " nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\" gp_index=\"7\"/>\n"
    "    <object type=\"Bridge\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[40-41]\" gp_index=\"8\">\n"
    "      <object type=\"PCIDev\" pci_busid=\"" GPU_BUS_ID "\" pci_type=\"0302 [10de:2335] [10de:18be] a1\""
    " pci_link_speed=\"0.000000\" gp_index=\"9\">\n"
    "        <info name=\"PCIVendor\" value=\"NVIDIA Corporation\"/>\n"
    "        <info name=\"PCIDevice\" value=\"fake H200\"/>\n"
    "      </object>\n"
    "    </object>\n"
    "  </object>\n"
    "</object>\n"
    "</topology>\n";

/* The first two CPUs this process may run on; false when it has fewer. */
static bool two_cpus(unsigned *a, unsigned *b) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
  int found = 0;
  for (unsigned c = 0; c < CPU_SETSIZE && found < 2; c++)
    if (CPU_ISSET(c, &set)) *(found++ ? b : a) = c;
  return found == 2;
}

/* Writes the two-node XML for CPUs a (node 0) and b (node 1) into a temp
 * file; returns its path (malloc'd). */
static char *write_two_node_xml(unsigned a, unsigned b) {
  char all[64], ca[64], cb[64];
  hwloc_bitmap_t s = hwloc_bitmap_alloc();
  ck_assert_ptr_nonnull(s);
  hwloc_bitmap_only(s, a);
  hwloc_bitmap_snprintf(ca, sizeof ca, s);
  hwloc_bitmap_only(s, b);
  hwloc_bitmap_snprintf(cb, sizeof cb, s);
  hwloc_bitmap_set(s, a);
  hwloc_bitmap_snprintf(all, sizeof all, s);
  hwloc_bitmap_free(s);
  char *text = NULL;
  int n = asprintf(&text, two_node_xml, all, all, all, ca, ca, ca, ca, a, ca, ca, cb, cb, cb, cb, b, cb, cb);
  ck_assert_int_gt(n, 0);
  const char *dir = getenv("TMPDIR");
  char *path = NULL;
  ck_assert_int_gt(asprintf(&path, "%s/cubert-placement-XXXXXX", dir && *dir ? dir : "/tmp"), 0);
  int fd = mkstemp(path);
  ck_assert_msg(fd >= 0, "mkstemp %s: %s", path, strerror(errno));
  ck_assert_int_eq(write(fd, text, (size_t)n), n);
  ck_assert_int_eq(close(fd), 0);
  free(text);
  return path;
}

/* What a thread bound by the hook saw of its own CPU binding. */
typedef struct bind_probe {
  void *ctx;
  int index;
  cpu_set_t before, after;
  int rc_before, rc_after;
} bind_probe;

static void *probe_thread(void *arg) {
  bind_probe *p = arg;
  CPU_ZERO(&p->before);
  CPU_ZERO(&p->after);
  p->rc_before = sched_getaffinity(0, sizeof p->before, &p->before);
  cb_place_thread(p->ctx, p->index); /* what a backend's worker does first */
  p->rc_after = sched_getaffinity(0, sizeof p->after, &p->after);
  return NULL;
}

/* Runs the hook on a fresh thread (the test's own binding stays as it was,
 * also with CK_FORK=no). */
static void probe(void *ctx, int index, bind_probe *p) {
  memset(p, 0, sizeof *p);
  p->ctx = ctx;
  p->index = index;
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, probe_thread, p), 0);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_int_eq(p->rc_before, 0);
  ck_assert_int_eq(p->rc_after, 0);
}

static bool kernel_has_node1(void) { return access("/sys/devices/system/node/node1", F_OK) == 0; }

START_TEST(test_two_nodes_bind_thread_and_memory_to_the_gpu_node) {
  unsigned a, b;
  if (!two_cpus(&a, &b)) {
    cb_test_skip("this process may run on one CPU only: two are needed to tell the nodes apart");
    return;
  }
  char *xml = write_two_node_xml(a, b);
  ck_assert_int_eq(setenv("HWLOC_XMLFILE", xml, 1), 0);
  ck_assert_int_eq(setenv("HWLOC_THISSYSTEM", "1", 1), 0);

  cb_placement *p = cb_placement_new();
  ck_assert_ptr_nonnull(p);
  /* runtime devices: 0 the GPU, 1 without a bus id, 2 a bus id hwloc does
   * not have; backend 0 holds devices 0-1, backend 1 device 2 */
  const char *ids[3] = {GPU_BUS_ID, NULL, "0000:99:00.0"};
  void *ctx0 = cb_placement_ctx(p, 0, 0);
  void *ctx1 = cb_placement_ctx(p, 1, 2);
  ck_assert_ptr_nonnull(ctx0);
  ck_assert_ptr_nonnull(ctx1);

  /* Before start, nothing is placed. */
  bind_probe pr;
  probe(ctx0, 0, &pr);
  ck_assert(CPU_EQUAL(&pr.before, &pr.after));
  ck_assert_ptr_null(cb_place_alloc(ctx0, 0, ALLOC_BYTES));
  ck_assert_ptr_null(cb_placement_topology(p));

  cb_placement_start_ids(p, ids, 3);

  /* The GPU's worker thread: bound to node 1's CPU, and only to it. */
  probe(ctx0, 0, &pr);
  /* hwloc has read the file now (the placement's topology, made by that
   * first hook call, and one of the test's own for reading the memory
   * binding back): remove it before anything can fail */
  hwloc_topology_t topo;
  ck_assert_int_eq(hwloc_topology_init(&topo), 0);
  int loaded = hwloc_topology_load(topo);
  unlink(xml);
  free(xml);
  ck_assert_int_eq(loaded, 0);
  ck_assert_msg(CPU_ISSET(a, &pr.before) && CPU_ISSET(b, &pr.before),
                "the thread started on CPUs %u and %u", a, b);
  cpu_set_t node1;
  CPU_ZERO(&node1);
  CPU_SET(b, &node1);
  ck_assert_msg(CPU_EQUAL(&pr.after, &node1), "bound to %d CPUs, CPU %u %s; expected CPU %u only",
                CPU_COUNT(&pr.after), b, CPU_ISSET(b, &pr.after) ? "in" : "not in", b);
  ck_assert_int_eq(cb_placement_bound(p), 1);

  /* The topology the hooks settled on: the GPU, local to node 1 only, on a
   * machine of two nodes. */
  const cubert_topology *t = cb_placement_topology(p);
  ck_assert_ptr_nonnull(t);
  ck_assert_int_eq(cubert_topology_device_count(t), 2); /* devices 0 and 2 have bus ids */
  cubert_topology_device d;
  cb_test_ok(cubert_topology_device_info(t, 0, &d));
  ck_assert(d.found);
  ck_assert(!d.simulated);
  ck_assert_str_eq(d.source, "live");
  ck_assert_int_eq(d.machine_numa_nodes, 2);
  ck_assert_int_eq(d.numa_count, 1);
  ck_assert_int_eq(d.numa_nodes[0], 1);
  char want[16];
  snprintf(want, sizeof want, "%u", b);
  ck_assert_str_eq(d.cpuset, want);

  /* Devices the placement cannot place: no bound thread, no memory. */
  probe(ctx0, 1, &pr); /* no bus id */
  ck_assert(CPU_EQUAL(&pr.before, &pr.after));
  probe(ctx1, 0, &pr); /* bus id not in the topology */
  ck_assert(CPU_EQUAL(&pr.before, &pr.after));
  ck_assert_int_eq(cb_placement_bound(p), 1);
  ck_assert_ptr_null(cb_place_alloc(ctx0, 1, ALLOC_BYTES));
  ck_assert_ptr_null(cb_place_alloc(ctx1, 0, ALLOC_BYTES));
  ck_assert_ptr_null(cb_place_alloc(ctx0, 0, 0));
  ck_assert_ptr_null(cb_place_alloc(ctx0, -1, ALLOC_BYTES));
  ck_assert_ptr_null(cb_place_alloc(ctx0, 7, ALLOC_BYTES));
  ck_assert_int_eq(cb_placement_allocated(p), 0);

  /* The GPU's staging memory: asked for on node 1. */
  char *mem = cb_place_alloc(ctx0, 0, ALLOC_BYTES);
  ck_assert_ptr_nonnull(mem);
  ck_assert_int_eq(cb_placement_allocated(p), 1);
  ck_assert_uint_eq((uintptr_t)mem % (uintptr_t)sysconf(_SC_PAGESIZE), 0);
  memset(mem, 0x5a, ALLOC_BYTES); /* pages come into being under the policy */
  ck_assert_int_eq(mem[ALLOC_BYTES - 1], 0x5a);

  /* What the kernel did with it, as hwloc reads it back (get_mempolicy),
   * through the same XML loaded as this system. Where the kernel has no
   * node 1 it refused the binding (mbind: EINVAL) and hwloc, not asked to be
   * strict, returned the memory unbound. */
  ck_assert(hwloc_topology_is_thissystem(topo));
  ck_assert_int_eq(hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE), 2);
  hwloc_nodeset_t ns = hwloc_bitmap_alloc();
  ck_assert_ptr_nonnull(ns);
  hwloc_membind_policy_t policy = HWLOC_MEMBIND_DEFAULT;
  int rc = hwloc_get_area_membind(topo, mem, ALLOC_BYTES, ns, &policy, HWLOC_MEMBIND_BYNODESET);
  if (kernel_has_node1()) {
    char got[64] = "";
    hwloc_bitmap_list_snprintf(got, sizeof got, ns);
    ck_assert_msg(rc == 0, "hwloc_get_area_membind: %s", strerror(errno));
    ck_assert_msg(policy == HWLOC_MEMBIND_BIND && hwloc_bitmap_isset(ns, 1) && hwloc_bitmap_weight(ns) == 1,
                  "memory bound with policy %d to nodes %s; expected BIND to node 1", (int)policy, got);
  } else {
    cb_test_skip("no second NUMA node on this machine: the kernel's binding of the memory to node 1 "
                 "is not checked (the placement asked for node 1, checked above)");
  }
  hwloc_bitmap_free(ns);
  hwloc_topology_destroy(topo);
  cb_place_free(ctx0, mem, ALLOC_BYTES);
  cb_place_free(ctx0, NULL, ALLOC_BYTES); /* fine */

  cb_placement_destroy(p);
  unsetenv("HWLOC_XMLFILE");
  unsetenv("HWLOC_THISSYSTEM");
}
END_TEST

START_TEST(test_one_node_machine_binds_nothing) {
  unsetenv("HWLOC_XMLFILE");
  unsetenv("HWLOC_THISSYSTEM");
  hwloc_topology_t topo;
  ck_assert_int_eq(hwloc_topology_init(&topo), 0);
  ck_assert_int_eq(hwloc_topology_load(topo), 0);
  int nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  /* A device of this machine: a PCI device hwloc keeps with its default
   * filter, if any; the placement must bind nothing either way. */
  char bus[32] = "0000:00:00.0";
  hwloc_obj_t pci = hwloc_get_next_pcidev(topo, NULL);
  if (pci)
    snprintf(bus, sizeof bus, "%04x:%02x:%02x.%x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
             pci->attr->pcidev.dev, pci->attr->pcidev.func);
  hwloc_topology_destroy(topo);
  if (nodes > 1) {
    cb_test_skip("this machine has %d NUMA nodes: the one-node case does not apply", nodes);
    return;
  }
  cb_placement *p = cb_placement_new();
  ck_assert_ptr_nonnull(p);
  void *ctx = cb_placement_ctx(p, 0, 0);
  const char *ids[1] = {bus};
  cb_placement_start_ids(p, ids, 1);
  bind_probe pr;
  probe(ctx, 0, &pr);
  ck_assert(CPU_EQUAL(&pr.before, &pr.after));
  ck_assert_int_eq(cb_placement_bound(p), 0);
  ck_assert_ptr_null(cb_place_alloc(ctx, 0, ALLOC_BYTES));
  ck_assert_int_eq(cb_placement_allocated(p), 0);
  /* one node: the topology was made once and dropped, nothing is kept */
  ck_assert_ptr_null(cb_placement_topology(p));
  cb_placement_destroy(p);
}
END_TEST

/* NULL placements and contexts are no placement, not a crash. */
START_TEST(test_null_placement_is_none) {
  ck_assert_ptr_null(cb_placement_ctx(NULL, 0, 0));
  cb_place_thread(NULL, 0);
  ck_assert_ptr_null(cb_place_alloc(NULL, 0, ALLOC_BYTES));
  cb_place_free(NULL, NULL, 0);
  cb_placement_start_ids(NULL, NULL, 0);
  ck_assert_int_eq(cb_placement_bound(NULL), 0);
  ck_assert_int_eq(cb_placement_allocated(NULL), 0);
  ck_assert_ptr_null(cb_placement_topology(NULL));
  cb_placement *p = cb_placement_new();
  ck_assert_ptr_nonnull(p);
  ck_assert_ptr_null(cb_placement_ctx(p, 4, 0)); /* backends 0-3 */
  cb_placement_start_ids(p, NULL, 0);             /* no devices: nothing to place */
  ck_assert_ptr_null(cb_place_alloc(cb_placement_ctx(p, 0, 0), 0, ALLOC_BYTES));
  cb_placement_destroy(p);
  cb_placement_destroy(NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("placement");
  TCase *tc = tcase_create("placement");
  tcase_add_test(tc, test_two_nodes_bind_thread_and_memory_to_the_gpu_node);
  tcase_add_test(tc, test_one_node_machine_binds_nothing);
  tcase_add_test(tc, test_null_placement_is_none);
  suite_add_tcase(s, tc);
  return cb_test_run(s);
}
