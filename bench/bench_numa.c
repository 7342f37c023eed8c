/* bench/bench_numa.c: `cubert bench numa`. For each device and each NUMA
 * node of this machine: the calling thread bound to the node's CPUs, a host
 * buffer bound to the node's memory (hwloc), and the bandwidth of
 * cubert_handle_write (H2D, timed to the end of a sync) and
 * cubert_handle_read (D2H) at one size, median of repetitions. The node(s)
 * local to the device (cubert_topology_device.numa_nodes) are marked, so
 * the table shows what placement is worth. On a machine with one NUMA node
 * there is nothing to compare: it says so and exits 0 (--force measures the
 * one node anyway, which is what the smoke test does).
 *
 * Ownership: everything is made and freed in cb_bench_numa_main; the
 * thread's original CPU binding is put back before it returns. */
#include "bench/bench_numa.h"

#include <errno.h>
#include <hwloc.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cubert/topology.h"

#define NUMA_MAX_DEVICES 64

typedef struct numa_opts {
  uint64_t size;
  int reps, warmup;
  const char *backend;
  cb_cli_output json, csv;
  int device;                   /* runtime index; -1 all of the backend */
  bool force, quick, quiet;
} numa_opts;

typedef struct numa_result {
  int device, node;             /* runtime index; NUMA node OS index */
  int local;                    /* 1 local, 0 remote, -1 unknown */
  bool bound_cpu;               /* the thread ran on the node's CPUs */
  cb_bench_stats h2d, d2h;      /* GB/s */
  double *h2d_samples, *d2h_samples;
  bool validated;
} numa_result;

static void usage(FILE *out) {
  fprintf(out,
          "usage: cubert bench numa [--size SIZE] [--reps N] [--warmup N] [--device D]\n"
          "                         [--backend hip|host] [--json FILE] [--csv FILE] [--force]\n"
          "                         [--quick] [--quiet]\n"
          "\n"
          "For each device and each NUMA node: the thread bound to the node's CPUs, a host\n"
          "buffer on the node's memory; H2D (cubert_handle_write + sync) and D2H\n"
          "(cubert_handle_read) bandwidth, median of N repetitions. `local` marks the\n"
          "device's own NUMA node(s) (cubert topo). With one NUMA node there is nothing to\n"
          "compare: it says so and exits 0, unless --force.\n"
          "\n"
          "  --size SIZE    bytes per transfer (default 64M; --quick 4M)\n"
          "  --reps N       repetitions (default 10; --quick 3), --warmup N (default 2; --quick 1)\n"
          "  --device D     only runtime device D (0 to 4095)\n"
          "  --backend B    hip or host (default: hip when it has devices)\n"
          "  --json FILE    the results as JSON (- for stdout)\n"
          "  --csv FILE     one line per device and node as CSV (- for stdout)\n"
          "  --quick        a small size and few repetitions (CI)\n"
          "  --quiet        no progress on stderr\n"
          "  --force        measure even on a machine with one NUMA node\n");
}

static int parse_options(int argc, char **argv, numa_opts *o) {
  const char *size = NULL;
  o->device = -1;
  o->reps = o->warmup = -1;
  const cb_cli_opt opts[] = {CB_TEXT("size", 0, &size),        CB_INT("reps", &o->reps, 1, 100000),
                             CB_INT("warmup", &o->warmup, 0, 100000), CB_INT("device", &o->device, 0, 4095),
                             CB_CHOICE("backend", &o->backend, "hip|host"), CB_OUTPUT("json", &o->json),
                             CB_OUTPUT("csv", &o->csv),        CB_FLAG("force", 0, &o->force),
                             CB_FLAG("quick", 0, &o->quick),   CB_FLAG("quiet", 0, &o->quiet),
                             CB_END};
  const cb_cli_spec spec = {"bench numa", usage, opts, 0, 0, NULL};
  int first, rc = cb_cli_parse(&spec, argc, argv, &first);
  if (rc != CB_CLI_PARSED) return rc;
  o->size = o->quick ? 4u << 20 : 64u << 20;
  if (size && (!cb_bench_parse_size(size, &o->size) || o->size == 0)) {
    fprintf(stderr, "cubert bench numa: --size wants a size such as 4096, 64K or 64M, not '%s'\n", size);
    return CB_CLI_USAGE;
  }
  if (o->reps < 0) o->reps = o->quick ? 3 : 10;
  if (o->warmup < 0) o->warmup = o->quick ? 1 : 2;
  return cb_cli_open_outputs(&spec) ? CB_CLI_PARSED : CB_CLI_FAILED;
}

/* The NUMA node's CPUs and memory for this thread; false with a message. */
static bool bind_to_node(hwloc_topology_t topo, hwloc_obj_t node, bool *bound_cpu) {
  *bound_cpu = false;
  if (node->cpuset && !hwloc_bitmap_iszero(node->cpuset)) {
    if (hwloc_set_cpubind(topo, node->cpuset, HWLOC_CPUBIND_THREAD) != 0) {
      fprintf(stderr, "cubert bench numa: binding the thread to NUMA node %u's CPUs failed: %s\n",
              node->os_index, strerror(errno));
      return false;
    }
    *bound_cpu = true;
  }
  return true;
}

/* One (device, node) cell. */
static bool measure(cubert_client *client, const numa_opts *o, hwloc_topology_t topo, hwloc_obj_t node,
                    numa_result *r) {
  bool ok = false;
  cubert_handle *h = NULL;
  double *h2d = calloc((size_t)o->reps, sizeof *h2d), *d2h = calloc((size_t)o->reps, sizeof *d2h);
  void *buf = hwloc_alloc_membind(topo, o->size, node->nodeset, HWLOC_MEMBIND_BIND,
                                  HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_STRICT);
  if (!buf) {
    fprintf(stderr, "cubert bench numa: %" PRIu64 " bytes on NUMA node %u: %s\n", o->size, node->os_index,
            strerror(errno));
    goto out;
  }
  if (!h2d || !d2h) {
    fprintf(stderr, "cubert bench numa: out of host memory\n");
    goto out;
  }
  if (!bind_to_node(topo, node, &r->bound_cpu)) goto out;
  /* First touch from the bound thread: the pages are placed now, not timed. */
  uint32_t *words = buf;
  uint64_t nwords = o->size / 4;
  for (uint64_t i = 0; i < nwords; i++) words[i] = (uint32_t)(i * 2654435761u) ^ (uint32_t)r->device;
  if (o->size % 4) memset((char *)buf + nwords * 4, 0x5a, o->size % 4);
  cubert_status st = cubert_handle_empty(client, o->size, &h);
  if (st) goto fail;
  for (int i = -o->warmup; i < o->reps; i++) {
    double t0 = cb_bench_now();
    if ((st = cubert_handle_write(client, h, buf, o->size)) || (st = cubert_sync(client))) goto fail;
    double t1 = cb_bench_now();
    if (i >= 0) h2d[i] = (double)o->size / (t1 - t0) / 1e9;
  }
  /* The device now holds the pattern; reading it back must give it again. */
  void *check = malloc(o->size);
  if (!check) {
    fprintf(stderr, "cubert bench numa: out of host memory\n");
    goto out;
  }
  memcpy(check, buf, o->size);
  for (int i = -o->warmup; i < o->reps; i++) {
    memset(buf, 0, o->size < 4096 ? o->size : 4096);
    double t0 = cb_bench_now();
    if ((st = cubert_handle_read(client, h, buf, o->size))) {
      free(check);
      goto fail;
    }
    double t1 = cb_bench_now();
    if (i >= 0) d2h[i] = (double)o->size / (t1 - t0) / 1e9;
  }
  r->validated = memcmp(check, buf, o->size) == 0;
  free(check);
  if (!r->validated)
    fprintf(stderr, "cubert bench numa: device %d, node %d: the bytes read back differ from those written\n",
            r->device, r->node);
  r->h2d = cb_bench_stats_of(h2d, o->reps);
  r->d2h = cb_bench_stats_of(d2h, o->reps);
  r->h2d_samples = h2d;
  r->d2h_samples = d2h;
  h2d = d2h = NULL;
  ok = true;
  goto out;
fail:
  fprintf(stderr, "cubert bench numa: device %d, node %d: %s: %s\n", r->device, r->node, cubert_status_name(st),
          cubert_last_error_message());
out:
  cubert_handle_release(h);
  if (buf) hwloc_free(topo, buf, o->size);
  free(h2d);
  free(d2h);
  return ok;
}

static json_t *results_json(const numa_opts *o, const numa_result *res, int n, int numa_nodes,
                            const char *backend, const char *note, bool passed, int checks) {
  json_t *root = json_object();
  json_object_set_new(root, "tool", json_string("cubert bench numa"));
  json_object_set_new(root, "backend", json_string(backend ? backend : ""));
  json_object_set_new(root, "size", json_integer((json_int_t)o->size));
  json_object_set_new(root, "reps", json_integer(o->reps));
  json_object_set_new(root, "numa_nodes", json_integer(numa_nodes));
  json_object_set_new(root, "unit", json_string("GB/s"));
  if (note) json_object_set_new(root, "note", json_string(note));
  json_t *a = json_array();
  for (int i = 0; i < n; i++) {
    const numa_result *r = &res[i];
    json_t *row = json_object();
    json_object_set_new(row, "device", json_integer(r->device));
    json_object_set_new(row, "node", json_integer(r->node));
    json_object_set_new(row, "local", r->local < 0 ? json_null() : json_boolean(r->local));
    json_object_set_new(row, "thread_bound", json_boolean(r->bound_cpu));
    json_object_set_new(row, "h2d", cb_bench_stats_json(&r->h2d, r->h2d_samples, r->h2d.n));
    json_object_set_new(row, "d2h", cb_bench_stats_json(&r->d2h, r->d2h_samples, r->d2h.n));
    json_object_set_new(row, "validated", json_boolean(r->validated));
    json_array_append_new(a, row);
  }
  json_object_set_new(root, "results", a);
  json_t *v = json_object();
  json_object_set_new(v, "passed", json_boolean(passed));
  json_object_set_new(v, "checks", json_integer(checks));
  json_object_set_new(root, "validation", v);
  return root;
}

/* One line per device and node; the medians and ranges in GB/s. */
static bool results_csv(const numa_result *res, int n, FILE *out) {
  fputs("device,node,local,bound_cpu,h2d_median,h2d_min,h2d_max,d2h_median,d2h_min,d2h_max,validated\n", out);
  for (int i = 0; i < n; i++) {
    const numa_result *r = &res[i];
    fprintf(out, "%d,%d,%s,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%d\n", r->device, r->node,
            r->local < 0 ? "unknown" : r->local ? "local" : "remote", r->bound_cpu, r->h2d.median, r->h2d.min,
            r->h2d.max, r->d2h.median, r->d2h.min, r->d2h.max, r->validated);
  }
  return !ferror(out);
}

static int numa_main(numa_opts *o);

int cb_bench_numa_main(int argc, char **argv) {
  numa_opts o = {0};
  int rc = parse_options(argc, argv, &o);
  if (rc != CB_CLI_PARSED) return rc;
  rc = numa_main(&o);
  if (!cb_cli_output_close("bench numa", "json", &o.json)) rc = CB_CLI_FAILED;
  if (!cb_cli_output_close("bench numa", "csv", &o.csv)) rc = CB_CLI_FAILED;
  return rc;
}

static int numa_main(numa_opts *op) {
  numa_opts o = *op;
  int rc;

  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
    fprintf(stderr, "cubert bench numa: hwloc cannot load this machine's topology: %s\n", strerror(errno));
    return CB_CLI_FAILED;
  }
  int nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  if (nodes < 2 && !o.force) {
    printf("one NUMA node: no local/remote difference to measure\n");
    int out = CB_CLI_OK;
    if (o.json.file) {
      json_t *root = results_json(&o, NULL, 0, nodes, o.backend,
                                  "one NUMA node: no local/remote difference to measure", true, 0);
      if (!cb_bench_write_json(root, o.json.file, "bench numa")) out = CB_CLI_FAILED;
      json_decref(root);
    }
    if (o.csv.file && !results_csv(NULL, 0, o.csv.file)) out = CB_CLI_FAILED;
    hwloc_topology_destroy(topo);
    return out;
  }

  rc = CB_CLI_FAILED;
  cubert_runtime *rt = NULL;
  cubert_topology *ct = NULL;
  cubert_client *clients[NUMA_MAX_DEVICES] = {0};
  int devs[NUMA_MAX_DEVICES], ndev = 0;
  numa_result *res = NULL;
  int nres = 0;
  hwloc_bitmap_t original = hwloc_bitmap_alloc();
  bool have_original = original && hwloc_get_cpubind(topo, original, HWLOC_CPUBIND_THREAD) == 0;

  cubert_runtime_options ro;
  cubert_runtime_options_init(&ro);
  if (o.backend) ro.backends = o.backend;
  cubert_status st = cubert_runtime_create(&ro, &rt);
  if (st) {
    fprintf(stderr, "cubert bench numa: cubert_runtime_create: %s: %s\n", cubert_status_name(st),
            cubert_last_error_message());
    goto done;
  }
  int total = cubert_runtime_device_count(rt);
  const char *want = o.backend;
  if (!want) {
    want = "host";
    for (int d = 0; d < total; d++) {
      cubert_device_info info;
      if (cubert_runtime_device_info(rt, d, &info) == CUBERT_OK && strcmp(info.backend, "hip") == 0) want = "hip";
    }
  }
  for (int d = 0; d < total && ndev < NUMA_MAX_DEVICES; d++) {
    cubert_device_info info;
    if (cubert_runtime_device_info(rt, d, &info) || strcmp(info.backend, want) != 0) continue;
    if (o.device >= 0 && d != o.device) continue;
    devs[ndev++] = d;
  }
  if (ndev == 0) {
    if (o.device >= 0) { /* a bad value, as bench peer --devices 9: nothing was measured */
      fprintf(stderr,
              "cubert bench numa: --device %d is not a %s device of this runtime (%d devices; `cubert info` lists "
              "them)\n",
              o.device, want, total);
      rc = CB_CLI_USAGE;
    } else
      fprintf(stderr, "cubert bench numa: no %s device; CUBERT_BACKENDS or --backend choose them\n", want);
    goto done;
  }
  if (cubert_topology_create(rt, NULL, &ct) != CUBERT_OK) {
    fprintf(stderr, "cubert bench numa: topology unavailable (%s): `local` is unknown\n", cubert_last_error_message());
    ct = NULL;
  }
  res = calloc((size_t)ndev * (size_t)(nodes > 0 ? nodes : 1), sizeof *res);
  if (!res) {
    fprintf(stderr, "cubert bench numa: out of host memory\n");
    goto done;
  }
  int steps = ndev * nodes, step = 0, checks = 0;
  bool passed = true;
  for (int i = 0; i < ndev; i++) {
    if ((st = cubert_client_create(rt, devs[i], &clients[i]))) {
      fprintf(stderr, "cubert bench numa: client of device %d: %s\n", devs[i], cubert_last_error_message());
      goto done;
    }
    cubert_topology_device td;
    bool known = ct && cubert_topology_device_info(ct, devs[i], &td) == CUBERT_OK && !td.simulated && td.found &&
                 td.numa_count > 0;
    for (int k = 0; k < nodes; k++) {
      hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)k);
      numa_result *r = &res[nres];
      r->device = devs[i];
      r->node = (int)node->os_index;
      r->local = -1;
      if (known) {
        r->local = 0;
        for (int m = 0; m < td.numa_count; m++)
          if (td.numa_nodes[m] == r->node) r->local = 1;
      }
      cb_bench_progress(o.quiet, ++step, steps, "device %d from NUMA node %d", r->device, r->node);
      if (!measure(clients[i], &o, topo, node, r)) goto done;
      nres++;
      checks++;
      passed = passed && r->validated;
    }
  }
  cb_bench_progress_done(o.quiet);

  char sz[32];
  printf("cubert bench numa: %s devices, %s per transfer, median of %d; %d NUMA node%s\n", want,
         cb_bench_size_name(o.size, sz, sizeof sz), o.reps, nodes, nodes == 1 ? "" : "s");
  printf("%-8s %-6s %-8s %12s %12s\n", "device", "node", "local", "H2D GB/s", "D2H GB/s");
  for (int i = 0; i < nres; i++) {
    const numa_result *r = &res[i];
    printf("%-8d %-6d %-8s %12.2f %12.2f%s\n", r->device, r->node,
           r->local < 0 ? "?" : r->local ? "local" : "remote", r->h2d.median, r->d2h.median,
           r->bound_cpu ? "" : "  (node without CPUs: thread not bound)");
  }
  if (nodes == 1) printf("one NUMA node: no local/remote difference to measure (measured with --force)\n");
  printf("validation: %s (%d check%s: bytes read back equal those written)\n", passed ? "passed" : "FAILED", checks,
         checks == 1 ? "" : "s");
  rc = passed ? CB_CLI_OK : CB_CLI_FAILED;
  if (o.json.file) {
    json_t *root = results_json(&o, res, nres, nodes, want, nodes == 1 ? "one NUMA node (--force)" : NULL, passed,
                                checks);
    if (!cb_bench_write_json(root, o.json.file, "bench numa")) rc = CB_CLI_FAILED;
    json_decref(root);
  }
  if (o.csv.file && !results_csv(res, nres, o.csv.file)) rc = CB_CLI_FAILED;

done:
  cb_bench_progress_done(o.quiet);
  if (have_original) hwloc_set_cpubind(topo, original, HWLOC_CPUBIND_THREAD);
  hwloc_bitmap_free(original);
  for (int i = 0; i < nres; i++) {
    free(res[i].h2d_samples);
    free(res[i].d2h_samples);
  }
  free(res);
  for (int i = 0; i < ndev; i++) cubert_client_destroy(clients[i]);
  cubert_topology_destroy(ct);
  cubert_runtime_destroy(rt);
  hwloc_topology_destroy(topo);
  return rc;
}
