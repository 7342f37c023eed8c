/* cli/info.c: `cubert info`: the backends, every device with its limits, and
 * each device's memory pools, as text or as JSON (jansson). */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"

#define MAX_POOLS 32

static void usage(FILE *out) {
  fputs("usage: cubert info [--json] [--backends LIST] [--host-devices N]\n"
        "\n"
        "Lists the enabled backends and their devices: name, architecture, PCI bus id,\n"
        "memory, launch limits, and the memory pools of each device.\n"
        "\n"
        "  --json             print one JSON object instead of text\n"
        "  --backends LIST    backends to open, in device order, e.g. host or hip,host\n"
        "                     (default: $CUBERT_BACKENDS, else hip, and host only\n"
        "                     when hip finds no device)\n"
        "  --host-devices N   simulated host devices, 1 to 64 (default: $CUBERT_HOST_DEVICES,\n"
        "                     else the GPU count of the $CUBERT_HOST_NODE node, else 4)\n",
        out);
}

/* What one device told us. */
typedef struct device_report {
  cubert_device_info info;
  cubert_status info_status;
  cubert_status memory_status;  /* of client creation or cubert_memory_usage */
  char memory_error[256];
  size_t npools;                /* pools reported (at most MAX_POOLS kept) */
  cubert_pool_usage pools[MAX_POOLS];
} device_report;

static void remember_error(device_report *r, cubert_status st) {
  r->memory_status = st;
  snprintf(r->memory_error, sizeof r->memory_error, "%s: %s", cubert_status_name(st),
           cubert_last_error_message());
}

static void probe(cubert_runtime *rt, int d, device_report *r) {
  memset(r, 0, sizeof *r);
  r->info_status = cubert_runtime_device_info(rt, d, &r->info);
  if (r->info_status != CUBERT_OK) return;
  cubert_client *client = NULL;
  cubert_status st = cubert_client_create(rt, d, &client);
  if (st != CUBERT_OK) {
    remember_error(r, st);
    return;
  }
  size_t count = 0;
  st = cubert_memory_usage(client, r->pools, MAX_POOLS, &count);
  if (st != CUBERT_OK)
    remember_error(r, st);
  else
    r->npools = count < MAX_POOLS ? count : MAX_POOLS;
  cubert_client_destroy(client);
}

static int devices_of(const device_report *reports, int n, const char *backend) {
  int count = 0;
  for (int d = 0; d < n; d++)
    if (reports[d].info_status == CUBERT_OK && strcmp(reports[d].info.backend, backend) == 0)
      count++;
  return count;
}

static void print_text(cubert_runtime *rt, const device_report *reports, int n) {
  char b1[32], b2[32], b3[32], b4[32];
  printf("cubert %s\n", cubert_version());
  int nbackends = cubert_runtime_backend_count(rt);
  for (int b = 0; b < nbackends; b++) {
    const char *name = cubert_runtime_backend_name(rt, b);
    int count = devices_of(reports, n, name);
    const char *note = cubert_runtime_backend_note(rt, b);
    printf("backend %s: %d device%s%s%s\n", name, count, count == 1 ? "" : "s",
           note && note[0] ? ": " : "", note && note[0] ? note : "");
  }
  for (int d = 0; d < n; d++) {
    const device_report *r = &reports[d];
    const cubert_device_info *i = &r->info;
    if (r->info_status != CUBERT_OK) {
      printf("device %d: no information: %s\n", d, cubert_status_name(r->info_status));
      continue;
    }
    printf("\ndevice %d: %s%s\n", d, i->name, i->lost ? "  (LOST)" : "");
    printf("  backend      %s, index %d\n", i->backend, i->backend_index);
    printf("  arch         %s\n", i->arch);
    printf("  pci bus id   %s\n", i->pci_bus_id[0] != '\0' ? i->pci_bus_id : "-");
    printf("  memory       %s (%" PRIu64 " bytes)\n", cb_cli_bytes(i->total_memory, b1, sizeof b1),
           i->total_memory);
    printf("  limits       %" PRIu32 " threads/block, block %" PRIu32 "x%" PRIu32 "x%" PRIu32
           ", grid %" PRIu32 "x%" PRIu32 "x%" PRIu32 "\n",
           i->max_threads_per_block, i->max_block[0], i->max_block[1], i->max_block[2],
           i->max_grid[0], i->max_grid[1], i->max_grid[2]);
    printf("               %s shared memory/block, warp %" PRIu32 ", %" PRIu32
           " multiprocessors\n",
           cb_cli_bytes(i->max_shared_memory, b1, sizeof b1), i->warp_size, i->multiprocessors);
    if (r->memory_status != CUBERT_OK) {
      printf("  pools        unavailable: %s\n", r->memory_error);
      continue;
    }
    if (r->npools == 0) {
      printf("  pools        none\n");
      continue;
    }
    printf("  pools        %-14s %10s %6s %10s %10s %10s\n", "name", "page", "pages", "reserved",
           "in use", "high water");
    for (size_t p = 0; p < r->npools; p++) {
      const cubert_pool_usage *u = &r->pools[p];
      printf("               %-14s %10s %6" PRIu64 " %10s %10s %10s\n", u->name,
             u->page_size != 0 ? cb_cli_bytes(u->page_size, b1, sizeof b1) : "varied", u->pages,
             cb_cli_bytes(u->reserved, b2, sizeof b2), cb_cli_bytes(u->in_use, b3, sizeof b3),
             cb_cli_bytes(u->high_water, b4, sizeof b4));
    }
  }
}

static json_t *u32_triple(const uint32_t v[3]) {
  return json_pack("[III]", (json_int_t)v[0], (json_int_t)v[1], (json_int_t)v[2]);
}

static json_t *device_json(const device_report *r, int d) {
  const cubert_device_info *i = &r->info;
  if (r->info_status != CUBERT_OK)
    return json_pack("{s:i, s:s}", "device", d, "error", cubert_status_name(r->info_status));
  json_t *limits = json_pack(
      "{s:I, s:o, s:o, s:I, s:I, s:I}", "max_threads_per_block",
      (json_int_t)i->max_threads_per_block, "max_block", u32_triple(i->max_block), "max_grid",
      u32_triple(i->max_grid), "max_shared_memory", (json_int_t)i->max_shared_memory,
      "warp_size", (json_int_t)i->warp_size, "multiprocessors", (json_int_t)i->multiprocessors);
  json_t *memory = json_object();
  if (r->memory_status != CUBERT_OK) {
    json_object_set_new(memory, "error", json_string(r->memory_error));
  } else {
    json_t *pools = json_array();
    for (size_t p = 0; p < r->npools; p++) {
      const cubert_pool_usage *u = &r->pools[p];
      json_array_append_new(
          pools, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "name", u->name, "page_size",
                           (json_int_t)u->page_size, "pages", (json_int_t)u->pages, "reserved",
                           (json_int_t)u->reserved, "in_use", (json_int_t)u->in_use,
                           "high_water", (json_int_t)u->high_water));
    }
    json_object_set_new(memory, "pools", pools);
  }
  return json_pack("{s:i, s:s, s:i, s:s, s:s, s:s, s:I, s:b, s:o, s:o}", "device", i->device,
                   "backend", i->backend, "backend_index", i->backend_index, "name", i->name,
                   "arch", i->arch, "pci_bus_id", i->pci_bus_id, "total_memory",
                   (json_int_t)i->total_memory, "lost", (int)i->lost, "limits", limits, "memory",
                   memory);
}

static int print_json(cubert_runtime *rt, const device_report *reports, int n) {
  json_t *backends = json_array();
  int nbackends = cubert_runtime_backend_count(rt);
  for (int b = 0; b < nbackends; b++) {
    const char *name = cubert_runtime_backend_name(rt, b);
    json_array_append_new(backends,
                          json_pack("{s:s, s:i, s:s}", "name", name, "devices",
                                    devices_of(reports, n, name), "note",
                                    cubert_runtime_backend_note(rt, b)));
  }
  json_t *devices = json_array();
  for (int d = 0; d < n; d++) json_array_append_new(devices, device_json(&reports[d], d));
  json_t *root = json_pack("{s:s, s:o, s:o}", "version", cubert_version(), "backends", backends,
                           "devices", devices);
  if (root == NULL) {
    fputs("cubert info: could not build the JSON report\n", stderr);
    return CB_CLI_FAILED;
  }
  int rc = json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  fputc('\n', stdout);
  return rc == 0 ? CB_CLI_OK : CB_CLI_FAILED;
}

int cb_cli_info(int argc, char **argv) {
  bool json = false;
  int host_devices = 0;
  cubert_runtime_options options;
  cubert_runtime_options_init(&options);
  const cb_cli_opt opts[] = {
      CB_FLAG("json", 0, &json), CB_TEXT("backends", 0, &options.backends),
      CB_INT("host-devices", &host_devices, 1, 64), /* the runtime's range (runtime/runtime.c) */
      CB_END};
  const cb_cli_spec spec = {"info", usage, opts, 0, 0, NULL};
  int first, parsed = cb_cli_parse(&spec, argc, argv, &first);
  if (parsed != CB_CLI_PARSED) return parsed;
  options.host_devices = host_devices;
  /* a name the runtime does not know is a bad value (exit 2, nothing run),
   * as --host-devices 65 is; the runtime checks the same names */
  for (const char *p = options.backends; p;) { /* "" and "host," hold an empty name */
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (!((len == 4 && !strncmp(p, "host", 4)) || (len == 3 && !strncmp(p, "hip", 3)))) {
      fprintf(stderr, "cubert info: --backends wants host, hip or a list such as hip,host, not '%s'\n",
              options.backends);
      return CB_CLI_USAGE;
    }
    p = e ? e + 1 : NULL;
  }

  cubert_runtime *rt = NULL;
  cubert_status st = cubert_runtime_create(&options, &rt);
  if (st != CUBERT_OK) return cb_cli_fail("info", "creating the runtime", st);
  int n = cubert_runtime_device_count(rt);
  device_report *reports = calloc(n > 0 ? (size_t)n : 1, sizeof *reports);
  if (reports == NULL) {
    cubert_runtime_destroy(rt);
    fputs("cubert info: out of memory\n", stderr);
    return CB_CLI_FAILED;
  }
  bool all_ok = true;
  for (int d = 0; d < n; d++) {
    probe(rt, d, &reports[d]);
    /* A lost device is reported as such, not counted as a failure of info. */
    if (reports[d].info_status != CUBERT_OK ||
        (reports[d].memory_status != CUBERT_OK && !reports[d].info.lost))
      all_ok = false;
  }
  int rc = json ? print_json(rt, reports, n) : (print_text(rt, reports, n), CB_CLI_OK);
  free(reports);
  cubert_runtime_destroy(rt);
  if (rc == CB_CLI_OK && !all_ok) {
    fputs("cubert info: some devices could not be queried (see above)\n", stderr);
    rc = CB_CLI_FAILED;
  }
  return rc;
}
