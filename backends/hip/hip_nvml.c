/* backends/hip/hip_nvml.c: NVLink between two NVIDIA devices, from NVML
 * (HIP on NVIDIA has no call for the link type). Built on the NVIDIA
 * platform only.
 *
 * NVML is not linked: libnvidia-ml.so.1 (installed with the driver, not
 * with CUDA) is dlopen()ed on first use, with the few entry points declared
 * here by their documented ABI, so cubert builds and runs where it is
 * absent; link_info then answers CUBERT_ERR_UNSUPPORTED as before. It is
 * loaded and initialised once per process (nvmlInit_v2 is reference counted
 * inside NVML, so an application's own init/shutdown are unaffected) and
 * kept: initialising takes long, and a topology asks for every pair.
 *
 * A pair's links: the active NVLinks of device a (nvmlDeviceGetNvLinkState)
 * whose remote end (nvmlDeviceGetNvLinkRemotePciInfo_v2) is device b's PCI
 * address. Links that end at an NVSwitch (nvmlDeviceGetNvLinkRemoteDeviceType,
 * where the driver has it) join every GPU of the fabric: two devices that
 * both have some are joined by min(a's, b's) switch links, one hop, as
 * `nvidia-smi topo -m` counts them (NV18 on an 8-GPU HGX H100). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backends/hip/hip_internal.h"

/* ---- NVML's ABI (nvml.h), declared here: no header is needed to build */
typedef int cb_nvml_return;                 /* nvmlReturn_t; NVML_SUCCESS is 0 */
typedef struct cb_nvml_device_st *cb_nvml_device; /* nvmlDevice_t */
#define CB_NVML_SUCCESS 0
#define CB_NVML_FEATURE_ENABLED 1           /* nvmlEnableState_t */
#define CB_NVML_NVLINK_DEVICE_TYPE_SWITCH 2 /* nvmlIntNvLinkDeviceType_t */
#define CB_NVML_NVLINK_MAX_LINKS 18         /* NVML_NVLINK_MAX_LINKS (Hopper, Blackwell) */

/* nvmlPciInfo_t, the layout _v2/_v3 calls fill (NVML >= 9). */
typedef struct cb_nvml_pci_info {
  char bus_id_legacy[16];                   /* NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE */
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];                          /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */
} cb_nvml_pci_info;
_Static_assert(sizeof(cb_nvml_pci_info) == 68, "nvmlPciInfo_t is 68 bytes");

static struct {
  bool ok;
  char why[256];                            /* when !ok */
  cb_nvml_return (*init)(void);             /* nvmlInit_v2 */
  const char *(*error_string)(cb_nvml_return);
  cb_nvml_return (*by_bus_id)(const char *, cb_nvml_device *); /* nvmlDeviceGetHandleByPciBusId_v2 */
  cb_nvml_return (*link_state)(cb_nvml_device, unsigned int, int *); /* nvmlDeviceGetNvLinkState */
  cb_nvml_return (*remote_pci)(cb_nvml_device, unsigned int, cb_nvml_pci_info *); /* ..RemotePciInfo_v2 */
  cb_nvml_return (*remote_type)(cb_nvml_device, unsigned int, int *); /* ..RemoteDeviceType; may be NULL */
} nvml;

static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

static const char *nvml_error(cb_nvml_return r) {
  const char *s = nvml.error_string ? nvml.error_string(r) : NULL;
  return s ? s : "unknown NVML error";
}

/* dlsym into a function pointer without a cast between object and function
 * pointers (which ISO C does not define). */
static bool sym(void *lib, const char *name, void *fn_ptr, size_t size) {
  void *p = dlsym(lib, name);
  if (!p) return false;
  memcpy(fn_ptr, &p, size);
  return true;
}

static void nvml_load(void) {
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(nvml.why, sizeof nvml.why, "NVML is not available (%s)", e ? e : "libnvidia-ml.so.1 not found");
    return;
  }
  const char *missing = NULL;
  if (!sym(lib, "nvmlInit_v2", &nvml.init, sizeof nvml.init)) missing = "nvmlInit_v2";
  else if (!sym(lib, "nvmlDeviceGetHandleByPciBusId_v2", &nvml.by_bus_id, sizeof nvml.by_bus_id))
    missing = "nvmlDeviceGetHandleByPciBusId_v2";
  else if (!sym(lib, "nvmlDeviceGetNvLinkState", &nvml.link_state, sizeof nvml.link_state))
    missing = "nvmlDeviceGetNvLinkState";
  else if (!sym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &nvml.remote_pci, sizeof nvml.remote_pci))
    missing = "nvmlDeviceGetNvLinkRemotePciInfo_v2";
  if (missing) {
    snprintf(nvml.why, sizeof nvml.why, "this NVML (libnvidia-ml.so.1) lacks %s", missing);
    dlclose(lib);
    return;
  }
  if (!sym(lib, "nvmlErrorString", &nvml.error_string, sizeof nvml.error_string)) nvml.error_string = NULL;
  if (!sym(lib, "nvmlDeviceGetNvLinkRemoteDeviceType", &nvml.remote_type, sizeof nvml.remote_type))
    nvml.remote_type = NULL;
  cb_nvml_return r = nvml.init();
  if (r != CB_NVML_SUCCESS) {
    snprintf(nvml.why, sizeof nvml.why, "nvmlInit_v2 failed: %s (%d)", nvml_error(r), r);
    dlclose(lib);
    return;
  }
  /* Kept initialised and loaded for the process (see the top comment): no
   * nvmlShutdown, which would also pull NVML from under a concurrent
   * caller. */
  nvml.ok = true;
}

typedef struct pci_addr {
  unsigned int domain, bus, device, function;
} pci_addr;

static bool parse_bus_id(const char *text, pci_addr *a) {
  unsigned int d, b, v, f;
  if (!text || sscanf(text, "%x:%x:%x.%x", &d, &b, &v, &f) != 4) return false;
  *a = (pci_addr){d, b, v, f};
  return true;
}

static bool same_addr(const pci_addr *x, const pci_addr *y) {
  return x->domain == y->domain && x->bus == y->bus && x->device == y->device && x->function == y->function;
}

/* Counts a's active links to `peer` and to NVSwitches. False when NVML
 * answered for none of a's links (no NVLink state at all). */
static bool count_links(cb_nvml_device a, const pci_addr *peer, int *direct, int *to_switch) {
  *direct = *to_switch = 0;
  bool answered = false;
  for (unsigned int l = 0; l < CB_NVML_NVLINK_MAX_LINKS; l++) {
    int active = 0;
    if (nvml.link_state(a, l, &active) != CB_NVML_SUCCESS) continue;
    answered = true;
    if (active != CB_NVML_FEATURE_ENABLED) continue;
    int type = -1;
    if (nvml.remote_type && nvml.remote_type(a, l, &type) == CB_NVML_SUCCESS &&
        type == CB_NVML_NVLINK_DEVICE_TYPE_SWITCH) {
      (*to_switch)++;
      continue;
    }
    cb_nvml_pci_info pci;
    memset(&pci, 0, sizeof pci);
    if (nvml.remote_pci(a, l, &pci) != CB_NVML_SUCCESS) continue;
    pci.bus_id[sizeof pci.bus_id - 1] = '\0';
    pci.bus_id_legacy[sizeof pci.bus_id_legacy - 1] = '\0';
    pci_addr r;
    if (!parse_bus_id(pci.bus_id, &r) && !parse_bus_id(pci.bus_id_legacy, &r))
      r = (pci_addr){pci.domain, pci.bus, pci.device, 0};
    if (same_addr(&r, peer)) (*direct)++;
  }
  return answered;
}

static cubert_status device_handle(cb_hip_device *dev, char *bus, size_t cap, pci_addr *addr,
                                   cb_nvml_device *handle, cubert_berr *err) {
  hipError_t e = hipDeviceGetPCIBusId(bus, (int)cap, dev->index);
  if (e != hipSuccess)
    return cb_hip_fail(dev, err, e, CUBERT_ERR_UNSUPPORTED, "NVLink of %s: hipDeviceGetPCIBusId", dev->label);
  if (!parse_bus_id(bus, addr))
    return cubert_berr_set(err, CUBERT_ERR_UNSUPPORTED, "NVLink of %s: PCI bus id \"%s\" not understood",
                           dev->label, bus);
  cb_nvml_return r = nvml.by_bus_id(bus, handle);
  if (r != CB_NVML_SUCCESS)
    return cubert_berr_set(err, CUBERT_ERR_UNSUPPORTED,
                           "NVLink of %s: nvmlDeviceGetHandleByPciBusId_v2(%s): %s (%d)", dev->label, bus,
                           nvml_error(r), r);
  return CUBERT_OK;
}

cubert_status cb_hip_nvml_link(cb_hip_device *dev, cb_hip_device *peer, cubert_backend_link *link,
                               cubert_berr *err) {
  if (!dev || !peer || !link)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "NVLink: no device, peer or output");
  if (dev->index == peer->index) {
    memset(link, 0, sizeof *link);
    return CUBERT_OK;
  }
  pthread_once(&nvml_once, nvml_load);
  if (!nvml.ok)
    return cubert_berr_set(err, CUBERT_ERR_UNSUPPORTED, "link between %s and %s: %s", dev->label, peer->label,
                           nvml.why);
  char bus_a[64] = "", bus_b[64] = "";
  pci_addr addr_a, addr_b;
  cb_nvml_device ha = NULL, hb = NULL;
  cubert_status st = device_handle(dev, bus_a, sizeof bus_a, &addr_a, &ha, err);
  if (st || (st = device_handle(peer, bus_b, sizeof bus_b, &addr_b, &hb, err))) return st;

  int direct = 0, switch_a = 0, direct_b = 0, switch_b = 0;
  bool said_a = count_links(ha, &addr_b, &direct, &switch_a);
  bool said_b = count_links(hb, &addr_a, &direct_b, &switch_b);
  if (!said_a && !said_b)
    return cubert_berr_set(err, CUBERT_ERR_UNSUPPORTED,
                           "link between %s and %s: NVML reports no NVLink state for either device",
                           dev->label, peer->label);
  if (direct_b > direct) direct = direct_b; /* one side's driver may answer less */
  memset(link, 0, sizeof *link);
  if (direct > 0) {
    link->type = CUBERT_LINK_TYPE_XGMI;
    link->links = direct;
    link->hops = 1;
  } else if (switch_a > 0 && switch_b > 0) {
    link->type = CUBERT_LINK_TYPE_XGMI;
    link->links = switch_a < switch_b ? switch_a : switch_b;
    link->hops = 1;
  } else {
    link->type = CUBERT_LINK_TYPE_PCIE; /* NVML answered: no NVLink between them, so PCIe */
    link->hops = 0;
  }
  return CUBERT_OK;
}
