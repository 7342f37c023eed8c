/* cubert/cubert.h: the umbrella header of cubert, a C11 runtime for GPU
 * clusters with an exact account of failure.
 *
 * Objects (all opaque, all created and destroyed through this API):
 *   cubert_runtime  the devices of every enabled backend. Owns its devices.
 *   cubert_client   the front door to one device. Owned by the caller;
 *                   destroy it before the runtime.
 *   Handles, bindings, weak bindings and timers may outlive their runtime
 *   (cubert_runtime_destroy says what is left of them). Objects of two
 *   runtimes never mix: a handle of another runtime is refused with
 *   CUBERT_ERR_WRONG_DEVICE, one whose runtime is gone with
 *   CUBERT_ERR_EXPIRED, and a refused call changes nothing.
 *   cubert_handle   a refcounted view of device memory. Each handle pointer is
 *                   one reference owned by the caller: release it with
 *                   cubert_handle_release(). Memory returns to its pool when the
 *                   last handle and the last binding on it are gone.
 *   cubert_binding  what a launch or copy holds: keeps memory reserved but
 *                   does not count toward can_mut. Owned by the caller.
 *   cubert_weak     a weak binding: keeps nothing reserved, upgrades only
 *                   while the allocation it names is alive. Owned by the caller.
 *   cubert_kernel   an immutable kernel descriptor, refcounted.
 *   cubert_failure  an immutable, refcounted record of one failure.
 *   cubert_error    an immutable, refcounted report of one failed call.
 *   cubert_host_buffer  page-locked host memory that writes and reads move
 *                   through asynchronously, with a ledger of its own. Owned
 *                   by the caller; release it before the runtime.
 *
 * Calls:
 *   Every call returns a cubert_status (CUBERT_OK is 0). Output parameters
 *   come last and are set only on success. A failed call records a
 *   cubert_error for the calling thread: cubert_last_error() returns it.
 *   Calls may come from any thread. No call aborts, asserts or exits on a
 *   caller's mistake or a device failure.
 *
 * Failure accounting (docs/failures.md has the whole story): when work that
 * writes fails, the bytes it should have written are tainted with the
 * failure, and every later read of them, on the device or on a peer sharing
 * the memory, fails with CUBERT_ERR_TAINTED and the original cause. */
#ifndef CUBERT_CUBERT_H
#define CUBERT_CUBERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubert/export.h"
#include "cubert/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cubert_runtime cubert_runtime;
typedef struct cubert_client cubert_client;
typedef struct cubert_handle cubert_handle;
typedef struct cubert_binding cubert_binding;
typedef struct cubert_weak cubert_weak;
typedef struct cubert_kernel cubert_kernel;
typedef struct cubert_failure cubert_failure;
typedef struct cubert_error cubert_error;
typedef struct cubert_host_buffer cubert_host_buffer;

/* A stream of one device. 0 means "the calling thread's current stream". */
typedef uint64_t cubert_stream;

/* ---------------------------------------------------------------- version */

/* "0.1.0"; static. */
CUBERT_API const char *cubert_version(void);

/* ---------------------------------------------------------------- allocator */

/* The functions cubert allocates its host memory with; each behaves as its
 * C library namesake (calloc_fn checks count * size for overflow, free_fn is
 * never called with NULL). */
typedef struct cubert_allocator {
  void *(*malloc_fn)(size_t size);
  void *(*calloc_fn)(size_t count, size_t size);
  void *(*realloc_fn)(void *ptr, size_t size);
  void (*free_fn)(void *ptr);
} cubert_allocator;

/* Makes every later host allocation of the library go through `allocator`
 * (copied; NULL restores the C library's). Every object, string and array
 * the library keeps, in every layer and backend, comes from these
 * functions. What does not: the memory of the host backend's simulated
 * devices (the device's, counted against its size) and of the host buffers
 * it allocates (page-aligned, as a GPU's pinned memory); what hwloc and
 * jansson allocate inside themselves; and the string cubert_topology_json()
 * returns (jansson's: free() it). The built-in kernels come from these
 * functions too, but are made once, on first use, and kept until the
 * process ends (kernels.h). A table with a NULL member:
 * CUBERT_ERR_INVALID_ARGUMENT and nothing changes.
 *
 * When an allocation fails, the call that needed it fails with
 * CUBERT_ERR_OUT_OF_MEMORY and a message that says host memory ran out
 * ("out of host memory ...", or from a backend "host:0: no host memory for
 * a stream") and what was being allocated, changes nothing, and leaks
 * nothing; work already
 * enqueued keeps its account: a failure whose record cannot be allocated is
 * still a failure (its bytes stay tainted, with a static failure of status
 * CUBERT_ERR_OUT_OF_MEMORY), and a taint with no memory for its range
 * taints the whole allocation (docs/architecture.md, "The allocator").
 *
 * Not thread-safe: call it before any other cubert call, or while no other
 * thread is in the library and nothing allocated by the previous functions
 * is alive (no runtime, handle, error, failure, kernel or topology: memory is
 * freed with the functions that made it). */
CUBERT_API cubert_status cubert_set_allocator(const cubert_allocator *allocator);

/* ---------------------------------------------------------------- errors */

/* The error of this thread's most recent failed call, as a new reference the
 * caller releases with cubert_error_release(); NULL if no call on this thread
 * has failed yet. Successful calls do not clear it (as errno). */
CUBERT_API cubert_error *cubert_last_error(void);

/* The message of this thread's most recent failed call; "" if none. The
 * string belongs to the thread and stays valid until its next failed call. */
CUBERT_API const char *cubert_last_error_message(void);

CUBERT_API void cubert_error_retain(cubert_error *error);
CUBERT_API void cubert_error_release(cubert_error *error);
CUBERT_API cubert_status cubert_error_status(const cubert_error *error);
/* The whole message: what failed, why, and for tainted data each failure with
 * its range, root cause and chain. Owned by the error. */
CUBERT_API const char *cubert_error_message(const cubert_error *error);
/* Failures the call met: for CUBERT_ERR_TAINTED, one per overlapping tainted
 * range; for a failed launch, copy, write or fill, the failure it recorded,
 * once per range of its write set (now tainted by it), in parameter order,
 * or once with the range 0..0 when it writes nothing. */
CUBERT_API size_t cubert_error_failure_count(const cubert_error *error);
/* Failure i (borrowed from the error) and the byte range of the allocation it
 * taints, relative to the allocation start (either range pointer may be
 * NULL). NULL when i is out of range. */
CUBERT_API const cubert_failure *cubert_error_failure(const cubert_error *error, size_t i,
                                                      uint64_t *range_start, uint64_t *range_end);

/* For components built on this API (libcubert_mpi) whose entry points must
 * behave like cubert's: records a plain error (no failures) with `message`
 * (NULL: the status's sentence) as the calling thread's last error, and
 * returns `status`. */
CUBERT_API cubert_status cubert_error_record(cubert_status status, const char *message);

/* Where a failure happened. Strings are owned by the failure. */
typedef struct cubert_origin {
  int device;             /* runtime-wide device index */
  cubert_stream stream;   /* stream of the device */
  const char *operation;  /* "launch", "copy", "fill", "write", "peer-write", "sync", ... */
  const char *kernel;     /* kernel name, "" for other work */
  uint64_t sequence;      /* the device's work sequence number */
} cubert_origin;

/* One link of a chain: kernel `kernel` was not run on `device` because its
 * input `input` carried the failure; its outputs were left unwritten. */
typedef struct cubert_skip {
  const char *kernel;
  const char *input;
  int device;
  uint64_t sequence;
} cubert_skip;

CUBERT_API void cubert_failure_retain(const cubert_failure *failure);
CUBERT_API void cubert_failure_release(const cubert_failure *failure);
/* A new root failure of a component's own making (a transport that lost
 * bytes, libcubert_mpi): cause `status` and `message`, origin the client's
 * device, operation "transport". `status` must be an error status: CUBERT_OK
 * or a value outside the enum is refused with CUBERT_ERR_INVALID_ARGUMENT
 * and nothing is made (as a NULL client or `failure`). *failure is a new reference the caller releases
 * with cubert_failure_release(); taint bytes with it through
 * cubert_handle_taint(). */
CUBERT_API cubert_status cubert_failure_create(cubert_client *client, cubert_status status,
                                               const char *message, const cubert_failure **failure);
/* 64-bit, never reused within a process. */
CUBERT_API uint64_t cubert_failure_id(const cubert_failure *failure);
/* The cause: status and message of the root failure this one descends from. */
CUBERT_API cubert_status cubert_failure_status(const cubert_failure *failure);
CUBERT_API const char *cubert_failure_message(const cubert_failure *failure);
CUBERT_API void cubert_failure_origin(const cubert_failure *failure, cubert_origin *origin);
/* The failure this one was passed on from (a skipped kernel's input); 0 for a
 * root failure. */
CUBERT_API uint64_t cubert_failure_parent_id(const cubert_failure *failure);
/* The original failure (itself for a root). Borrowed from `failure`. */
CUBERT_API const cubert_failure *cubert_failure_root(const cubert_failure *failure);
/* The chain of skipped work from the root to this failure, oldest first,
 * bounded: only the newest links are kept and `dropped` counts the rest. */
CUBERT_API size_t cubert_failure_skip_count(const cubert_failure *failure, uint64_t *dropped);
CUBERT_API bool cubert_failure_skip(const cubert_failure *failure, size_t i, cubert_skip *skip);

/* ------------------------------------------- failures across processes */

/* A failure as bytes: fixed size, no pointers, safe to copy between
 * processes, hosts and ranks (shared memory, MPI, files). Versioned (version
 * 1), little-endian fields, with a checksum; docs/failures.md has the
 * layout. Owned by whoever holds the bytes. */
#define CUBERT_FAILURE_RECORD_SIZE 1024
typedef struct cubert_failure_record {
  unsigned char bytes[CUBERT_FAILURE_RECORD_SIZE];
} cubert_failure_record;

/* Writes `failure` into *record: its cause, its origin, its root's cause and
 * origin, and the newest links of its chain that fit (the rest are counted
 * as dropped); strings are cut to bounds (host 63 bytes, operation 31,
 * kernel and device name 63, message 127, the root's message 255 (also
 * for a failure that is its own root), a link's kernel and input 31; a cut
 * ends in "..."). The origin recorded is this
 * process: host name, pid, the rank set by cubert_set_rank() (or -1), the
 * device index and name, the operation, kernel and the failure id; a
 * failure that was itself imported keeps the origin it came with. */
CUBERT_API cubert_status cubert_failure_export(const cubert_failure *failure,
                                               cubert_failure_record *record);

/* A new failure from a record made in another (or this) process; *failure
 * is a new reference the caller releases with cubert_failure_release(). A
 * corrupt, truncated or unknown-version record: CUBERT_ERR_INVALID_ARGUMENT
 * naming what was wrong, *failure untouched. Importing the same record twice
 * gives two failures (two local ids) with equal remote ids.
 *
 * An imported failure has a local id of this process
 * (cubert_failure_id); cubert_failure_origin, cubert_failure_parent_id and
 * the links of cubert_failure_skip are the other process's (device indices
 * and ids there); cubert_failure_root is an imported failure too, for the
 * root's cause; cubert_failure_remote says where it came from. */
CUBERT_API cubert_status cubert_failure_import(const cubert_failure_record *record,
                                               const cubert_failure **failure);

/* Where a failure came from when it crossed a process: remote is false for a
 * local failure (then the strings are "", rank -1, the numbers 0). Strings
 * owned by the failure. */
typedef struct cubert_remote_origin {
  bool remote;
  const char *host;        /* node name of the process that failed */
  int64_t pid;
  int rank;                /* MPI rank or -1 */
  int device;              /* that process's device index */
  const char *device_name;
  uint64_t id;             /* the failure id in that process */
} cubert_remote_origin;
CUBERT_API void cubert_failure_remote(const cubert_failure *failure, cubert_remote_origin *origin);

/* The rank this process reports in failures it exports (cubert_mpi sets it),
 * and the one the rank= filter of fault rules compares (none counts as 0
 * there, docs/faultinj.md); -1 (the default, and any negative value) is
 * none. Process-wide. */
CUBERT_API void cubert_set_rank(int rank);

/* ---------------------------------------------------------------- runtime */

typedef struct cubert_runtime_options {
  uint32_t struct_size;     /* sizeof(cubert_runtime_options); set by _init */
  const char *backends;     /* "host", "hip", "hip,host": these, in this order
                               (device 0 is the first one's; a name given
                               twice opens once); NULL: $CUBERT_BACKENDS
                               (unset or empty: as NULL), else the GPU
                               backends (hip) and, only when they find no
                               device, the host backend
                               (cubert_runtime_backend_note says why). An
                               unknown or empty name ("", "host,"):
                               CUBERT_ERR_INVALID_ARGUMENT; hip in a build
                               without it: CUBERT_ERR_UNSUPPORTED */
  int host_devices;         /* simulated host devices, 1 to 64; 0:
                               $CUBERT_HOST_DEVICES, else the GPU count of
                               the node $CUBERT_HOST_NODE names, else 4 */
  uint64_t host_memory;     /* bytes per host device; 0: $CUBERT_HOST_MEMORY, else 1 GiB */
  const char *host_peer_deny; /* pairs denied peer access, "0-2,1-3"; NULL:
                                 $CUBERT_HOST_PEER_DENY */
  const char *faults;       /* fault rules (docs/faultinj.md); NULL: $CUBERT_FAULTS */
  bool no_faultinj;         /* do not install the fault layer at all */
} cubert_runtime_options;

CUBERT_API void cubert_runtime_options_init(cubert_runtime_options *options);

/* A runtime over the enabled backends. A backend with no device contributes
 * zero devices, not an error. `options` may be NULL. */
CUBERT_API cubert_status cubert_runtime_create(const cubert_runtime_options *options,
                                               cubert_runtime **runtime);
/* Waits for all work, then frees every device. Clients should be gone
 * first; the teardown hooks of any still alive run before anything else
 * (cubert_client_on_destroy), and such a client then takes only
 * cubert_client_destroy: its device is gone, and any other call with it
 * (but the hook calls below, CUBERT_ERR_EXPIRED) reads freed memory, like
 * a call with a destroyed object, instead of returning an error.
 * Handles, bindings, weak bindings and timers still held are safe to keep
 * and to release afterwards, in any order: their records live on until the
 * last reference is released, but the device memory and the device are
 * gone. What needs no device still answers (sizes, ids, overlap, slice,
 * clone, bind, downgrade, claim keys); cubert_weak_upgrade,
 * cubert_timer_elapsed and every call that passes such a handle to a
 * client of another runtime fail with CUBERT_ERR_EXPIRED ("... belongs to a
 * runtime that was destroyed") and change nothing. */
CUBERT_API void cubert_runtime_destroy(cubert_runtime *runtime);
CUBERT_API int cubert_runtime_device_count(const cubert_runtime *runtime);
/* Number of backends enabled, and the name of backend i (static). */
CUBERT_API int cubert_runtime_backend_count(const cubert_runtime *runtime);
CUBERT_API const char *cubert_runtime_backend_name(const cubert_runtime *runtime, int i);
/* What backend i says about itself, owned by the runtime: why it found no
 * device (for HIP: hipGetDeviceCount's answer, whether this user may open
 * the device files, /dev/kfd and /dev/dri/renderD128 on AMD, and the
 * visibility variables ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES,
 * CUDA_VISIBLE_DEVICES), or for the host backend opened by default, that
 * no GPU backend found a device and why; "" when there is nothing to say;
 * NULL when i is out of range. */
CUBERT_API const char *cubert_runtime_backend_note(const cubert_runtime *runtime, int i);

typedef struct cubert_device_info {
  int device;                   /* runtime-wide index */
  const char *backend;          /* "host", "hip"; static */
  int backend_index;            /* index within its backend */
  char name[128];               /* "host:0", "NVIDIA H200", ... */
  char arch[64];                /* "host", "gfx90a", "sm_90" */
  char pci_bus_id[32];          /* "0000:c1:00.0", "" when none */
  uint64_t total_memory;
  uint32_t max_threads_per_block;
  uint32_t max_block[3];
  uint32_t max_grid[3];
  uint32_t max_shared_memory;   /* bytes per block */
  uint32_t warp_size;
  uint32_t multiprocessors;
  bool lost;                    /* a sticky error, or work that ran on it and
                                   failed with CUBERT_ERR_DEVICE_LOST, marked
                                   it lost */
} cubert_device_info;

CUBERT_API cubert_status cubert_runtime_device_info(cubert_runtime *runtime, int device,
                                                    cubert_device_info *info);

/* What the driver says joins two devices (cubert_device_link.type and
 * cubert_backend_link.type). A PCIe path's finer class (one switch, a host
 * bridge, across sockets...) is topology.h's cubert_link_class. */
typedef enum cubert_link_type {
  CUBERT_LINK_TYPE_UNKNOWN = 0,
  CUBERT_LINK_TYPE_XGMI = 1, /* xGMI (NVLink on NVIDIA) */
  CUBERT_LINK_TYPE_PCIE = 2
} cubert_link_type;

/* What the driver knows of the link between two devices of one backend.
 * type: a cubert_link_type (an int, as in earlier versions). links: the
 * link count, 0 when the driver does not say (HIP on AMD:
 * hipExtGetLinkTypeAndHopCount gives type and hops only; the topology then
 * takes the count from KFD, docs/topology.md). */
typedef struct cubert_device_link {
  int type;
  int hops;
  int links;
} cubert_device_link;

/* CUBERT_ERR_UNSUPPORTED when the backend cannot tell (always for host
 * devices: their layout comes from a simulated node file), CUBERT_ERR_INVALID_ARGUMENT
 * for devices of different backends. */
CUBERT_API cubert_status cubert_runtime_device_link(cubert_runtime *runtime, int a, int b,
                                                    cubert_device_link *link);

/* ---------------------------------------------------------------- clients */

CUBERT_API cubert_status cubert_client_create(cubert_runtime *runtime, int device,
                                              cubert_client **client);
/* Runs the client's teardown hooks (below), then frees the client. NULL is
 * fine. */
CUBERT_API void cubert_client_destroy(cubert_client *client);
CUBERT_API int cubert_client_device(const cubert_client *client);

/* Teardown hooks: the one lifetime hook of the API, for components built on
 * it that keep objects made with a client from one call to the next (the
 * MPI component keeps pinned staging buffers and sends in flight per
 * client, docs/cluster.md): what a component keeps must be released while
 * the client and its runtime are alive, and the user may destroy them
 * before telling the component (cubert_mpi_finalize).
 *
 * When: a client's hooks run once, at the client's end, before anything
 * of it is freed: first thing in cubert_client_destroy(client), or, for a
 * client still alive when its runtime is destroyed (a mistake: destroy
 * clients first), first thing in cubert_runtime_destroy, newest client
 * first, before any work is waited for or any device or memory freed.
 * Either way the client, its runtime, its devices and everything made with
 * them are usable inside a hook, which runs on the destroying thread as
 * fn(client, arg). After cubert_runtime_destroy ran them, the only call
 * such a client takes is cubert_client_destroy (which runs nothing more);
 * registering or removing a hook on it fails with CUBERT_ERR_EXPIRED.
 *
 * Order and duplicates: newest first, so a component registered after
 * another (built on it) is torn down before it. Each registration runs
 * once; registering the same (fn, arg) twice registers it twice (both
 * run), and cubert_client_hook_remove takes away one registration, the
 * newest.
 *
 * During teardown: a running hook is no longer registered (removing it from
 * inside itself fails with CUBERT_ERR_INVALID_ARGUMENT and changes
 * nothing); a hook may remove one not yet run (it will not run) and may
 * register another, which runs next (it is the newest), so a hook that
 * always registers itself again never ends. A hook must not destroy its
 * client, nor its runtime.
 *
 * Ownership: the client keeps the registration and frees it when it has
 * run or is removed; `arg` is the caller's and cubert never reads or frees
 * it. Threads: registrations and removals may come from any thread at the
 * same time as each other and as other calls with the client, but not
 * racing the client's destroy (as any call with the client).
 * Errors: a NULL client or fn, CUBERT_ERR_INVALID_ARGUMENT; out of host
 * memory, CUBERT_ERR_OUT_OF_MEMORY (nothing registered). */
typedef void (*cubert_client_hook)(cubert_client *client, void *arg);
CUBERT_API cubert_status cubert_client_on_destroy(cubert_client *client, cubert_client_hook fn, void *arg);
/* Removes one registration of (fn, arg), the newest, for a component that
 * lets go of the client first; CUBERT_ERR_INVALID_ARGUMENT ("no such hook")
 * when there is none (or it is the hook running now). */
CUBERT_API cubert_status cubert_client_hook_remove(cubert_client *client, cubert_client_hook fn, void *arg);

/* A new stream on the client's device. Streams live as long as the runtime. */
CUBERT_API cubert_status cubert_stream_create(cubert_client *client, cubert_stream *stream);
/* Pins the client to `stream` (0 unpins: back to the thread's current stream). */
CUBERT_API cubert_status cubert_client_use_stream(cubert_client *client, cubert_stream stream);
/* The stream the client's next call would use on this thread. */
CUBERT_API cubert_stream cubert_client_stream(const cubert_client *client);

/* Waits for the client's stream, then reports failures found there. */
CUBERT_API cubert_status cubert_sync(cubert_client *client);
CUBERT_API cubert_status cubert_sync_stream(cubert_client *client, cubert_stream stream);
/* Waits for every stream of the device. */
CUBERT_API cubert_status cubert_sync_device(cubert_client *client);

/* Timing. A timer marks a point of the client's stream; the elapsed time
 * between two marks is measured by the device (HIP events with timing on
 * HIP; the worker's clock on the host backend). Owned by the caller. */
typedef struct cubert_timer cubert_timer;
CUBERT_API cubert_status cubert_timer_record(cubert_client *client, cubert_timer **timer);
/* Waits for `end`, then gives the milliseconds between the two marks. Both
 * must come from the same device. */
CUBERT_API cubert_status cubert_timer_elapsed(const cubert_timer *start, const cubert_timer *end,
                                              double *ms);
CUBERT_API void cubert_timer_release(cubert_timer *timer);

/* ---------------------------------------------------------------- memory */

typedef enum cubert_overlap {
  CUBERT_OVERLAP_DISJOINT = 0,
  CUBERT_OVERLAP_SAME = 1,
  CUBERT_OVERLAP_PARTIAL = 2
} cubert_overlap;

/* `size` uninitialised bytes (tainted by nothing: never written is not
 * failed). Size 0 is CUBERT_ERR_INVALID_ARGUMENT (an empty view is a slice),
 * here and in cubert_handle_empty_with and cubert_handle_create. */
CUBERT_API cubert_status cubert_handle_empty(cubert_client *client, uint64_t size,
                                             cubert_handle **handle);
/* Flags of cubert_handle_empty_with(). */
/* Fine-grained memory, for hand-offs inside kernels: stores become visible to
 * kernels on other devices and to the host while the kernels run, through
 * system-scope atomics and fences, not only at synchronisation points. Use it
 * for memory that kernels on two devices hand off through (shared with
 * cubert_handle_share). It is a driver allocation of its own, outside the
 * pools (slower to allocate and free; freed when its last reference goes).
 * HIP on AMD: hipExtMallocWithFlags(hipDeviceMallocFinegrained), without
 * which AMD keeps device memory coherent only at synchronisation points
 * (docs/failures.md). HIP on NVIDIA: plain device memory (peer memory over
 * NVLink or PCIe already honours system-scope atomics). Host backend:
 * accepted, no different (host memory is coherent). */
#define CUBERT_MEMORY_FINE_GRAINED 1u
/* Memory other processes of this node may map (cubert_handle_export). A
 * driver allocation of its own, outside the pools, freed when its last
 * reference goes. Host backend: a POSIX shared-memory segment (mode 0600, a
 * name nobody can guess) instead of heap memory. HIP: a hipMalloc of its own,
 * whose hipIpcGetMemHandle opens to exactly its bytes. docs/processes.md. */
#define CUBERT_MEMORY_SHAREABLE 2u

/* cubert_handle_empty() with `flags` (CUBERT_MEMORY_*; 0 is
 * cubert_handle_empty). An unknown flag is CUBERT_ERR_INVALID_ARGUMENT; a
 * backend that cannot allocate such memory fails with its error (e.g.
 * CUBERT_ERR_UNSUPPORTED) and nothing is allocated. */
CUBERT_API cubert_status cubert_handle_empty_with(cubert_client *client, uint64_t size, uint32_t flags,
                                                  cubert_handle **handle);
/* `size` bytes copied from `data`. */
CUBERT_API cubert_status cubert_handle_create(cubert_client *client, const void *data,
                                              uint64_t size, cubert_handle **handle);
/* Reads the handle's bytes (exactly its size in use) into `dst`. Fails with
 * CUBERT_ERR_TAINTED when any of them carries a failure; `dst` is then
 * unspecified. */
CUBERT_API cubert_status cubert_handle_read(cubert_client *client, const cubert_handle *handle,
                                            void *dst, uint64_t size);
/* Writes `size` bytes (exactly the size in use) from `src`. */
CUBERT_API cubert_status cubert_handle_write(cubert_client *client, cubert_handle *handle,
                                             const void *src, uint64_t size);
/* Repeats a 1-, 2-, 4- or 8-byte pattern over the handle's bytes. The
 * view's size must be a whole number of patterns: another pattern size, or
 * a view of 10 bytes with a 4-byte pattern, is CUBERT_ERR_INVALID_ARGUMENT
 * (nothing written, nothing tainted). */
CUBERT_API cubert_status cubert_handle_fill(cubert_client *client, cubert_handle *handle,
                                            const void *pattern, size_t pattern_size);
/* Copies src's bytes into dst (same size in use, same device; views of one
 * allocation that share a byte are CUBERT_ERR_INVALID_ARGUMENT, as is a
 * wrong size CUBERT_ERR_OUT_OF_RANGE). */
CUBERT_API cubert_status cubert_handle_copy(cubert_client *client, const cubert_handle *src,
                                            cubert_handle *dst);
/* Copies between devices: src on src_client's device, dst on dst_client's
 * device (may be the same: then as cubert_handle_copy, overlapping views
 * refused). Enqueued on dst's stream after src's stream.
 * Both clients must be of one runtime (else CUBERT_ERR_INVALID_ARGUMENT,
 * refused before anything is queued: nothing is tainted). */
CUBERT_API cubert_status cubert_handle_copy_peer(cubert_client *src_client,
                                                 const cubert_handle *src,
                                                 cubert_client *dst_client, cubert_handle *dst);
/* CUBERT_OK when none of the handle's bytes carries a failure; else
 * CUBERT_ERR_TAINTED (or CUBERT_ERR_DEVICE_LOST) with the failures in the
 * last error. Asks; waits for nothing, clears nothing. */
CUBERT_API cubert_status cubert_handle_check(cubert_client *client, const cubert_handle *handle);
/* Walks the tainted ranges of the handle's view, one per call, in order of
 * address: the first range that ends after byte `from` (relative to the
 * allocation start, like cubert_error_failure's ranges), clipped to the view
 * and to `from`. On CUBERT_OK, *failure is the failure that taints it, a new
 * reference the caller releases with cubert_failure_release(), and
 * *range_start and *range_end (either may be NULL) its bytes; *failure is NULL
 * (and the range 0..0) when no tainted byte lies at or after `from` in the
 * view. To walk them all, start at 0 and pass each range's end as the next
 * `from`. Each call costs O(log n) in the allocation's n ranges, whatever
 * n: use it where a refused read's message, which names only the first few
 * ranges, is not enough. Asks; waits for nothing, clears nothing. The client
 * must be on the memory's device, or the memory shared. */
CUBERT_API cubert_status cubert_handle_tainted_range(cubert_client *client,
                                                     const cubert_handle *handle, uint64_t from,
                                                     uint64_t *range_start, uint64_t *range_end,
                                                     const cubert_failure **failure);

/* Taints the bytes of `view` (a handle or a slice of the client's device)
 * with `failure` (an imported one, or any), ordered on the client's stream
 * like a write: later reads of those bytes are refused with that failure as
 * the cause, exactly as for a failed write, and a later successful write
 * repairs them. For transports that bring bytes from elsewhere (another
 * process, MPI). Returns CUBERT_OK when the bytes now carry `failure`; the
 * ledger keeps its own reference. A NULL argument or a view of another
 * device is refused and taints nothing. */
CUBERT_API cubert_status cubert_handle_taint(cubert_client *client, cubert_handle *view,
                                             const cubert_failure *failure);

/* ---------------------------------------------------------------------
 * Memory shared between processes of a node (docs/processes.md)
 *
 * An exporter turns a view of memory allocated with CUBERT_MEMORY_SHAREABLE
 * into a descriptor: fixed-size bytes with no pointers, safe to copy through
 * any channel (a pipe, a file, an MPI message). Another process of the same
 * user on the same node imports it as a handle on its own device of the same
 * backend, seeing exactly the exported bytes. The failures of those bytes
 * live in a cell both processes map: a write that fails in one process
 * taints what the other reads (its error names the other process), a
 * successful write repairs, and a process that died is named by the
 * survivor's next use of the bytes. */
#define CUBERT_EXPORT_DESC_SIZE 512
/* Opaque; versioned, with a checksum. Owned by whoever holds the bytes. It
 * carries the host, the exporter's pid and uid, the backend, the offset and
 * size of the view in its allocation, the segment names and a random
 * 128-bit secret. */
typedef struct cubert_export_desc {
  unsigned char bytes[CUBERT_EXPORT_DESC_SIZE];
} cubert_export_desc;

/* Writes a descriptor of `view` (a handle or slice on the client's device,
 * of at least one byte) into *desc. The allocation must be
 * CUBERT_MEMORY_SHAREABLE (else CUBERT_ERR_INVALID_ARGUMENT saying so);
 * memory imported from another process is not exported again
 * (CUBERT_ERR_INVALID_ARGUMENT: hand on the descriptor it came with); a view
 * of another device is CUBERT_ERR_WRONG_DEVICE, an empty view
 * CUBERT_ERR_OUT_OF_RANGE. The first export of an allocation
 * makes its shared failure cell (later ones reuse it) and moves the taint
 * the allocation already has into it. The segments are removed when the
 * allocation is freed or its runtime destroyed; after a SIGKILL the next
 * cubert runtime of the node removes them (docs/processes.md). A refused
 * call changes nothing. */
CUBERT_API cubert_status cubert_handle_export(cubert_client *client, const cubert_handle *view,
                                              cubert_export_desc *desc);
/* A new handle on the client's device with exactly the bytes `desc`
 * describes, in *handle (released with cubert_handle_release; the mapping
 * goes with its last reference). Refused, with nothing mapped and nothing
 * tainted, with CUBERT_ERR_INVALID_ARGUMENT naming what was wrong: a
 * descriptor that is corrupt or truncated (checksum), of an unknown version,
 * from another host or another user, of memory already freed (stale) or
 * whose exporter has ended, or of another backend than the client's device
 * (wrong device kind); with CUBERT_ERR_BUSY when the memory already has 16
 * importers; with the backend's error when it cannot map the memory. A
 * descriptor of this very process imports too on the host backend; HIP
 * (CUDA) refuses to open a handle in the process that made it. */
CUBERT_API cubert_status cubert_handle_import(cubert_client *client, const cubert_export_desc *desc,
                                              cubert_handle **handle);

/* A new view of the same memory, `offset_start` bytes further in and
 * `offset_end` bytes shorter at the end, relative to `handle`'s view. */
CUBERT_API cubert_status cubert_handle_slice(const cubert_handle *handle, uint64_t offset_start,
                                             uint64_t offset_end, cubert_handle **slice);
/* One more reference to the same view. */
CUBERT_API cubert_handle *cubert_handle_clone(const cubert_handle *handle);
/* NULL is fine. */
CUBERT_API void cubert_handle_release(cubert_handle *handle);
/* True when this is the only handle on its memory (bindings do not count). */
CUBERT_API bool cubert_handle_can_mut(const cubert_handle *handle);
CUBERT_API cubert_overlap cubert_handle_overlap(const cubert_handle *a, const cubert_handle *b);
/* Size of the allocation, and of the bytes the offsets leave. */
CUBERT_API uint64_t cubert_handle_size(const cubert_handle *handle);
CUBERT_API uint64_t cubert_handle_size_in_use(const cubert_handle *handle);
CUBERT_API uint64_t cubert_handle_offset_start(const cubert_handle *handle);
CUBERT_API uint64_t cubert_handle_memory_id(const cubert_handle *handle);
CUBERT_API int cubert_handle_device(const cubert_handle *handle);
CUBERT_API cubert_stream cubert_handle_stream(const cubert_handle *handle);

/* Lets kernels on the other devices of the backend bind this memory: pins the
 * allocation (never freed, reused or moved while shared), enables peer access
 * for each pair once and records the device address. A refused pair fails
 * with CUBERT_ERR_PEER_ACCESS naming both devices; the pairs that were
 * enabled stay usable. Sharing twice is fine. */
CUBERT_API cubert_status cubert_handle_share(cubert_client *owner, cubert_handle *handle);
CUBERT_API bool cubert_handle_is_shared(const cubert_handle *handle);
/* Device address of the view's first byte as peers bind it; 0 if not shared. */
CUBERT_API uint64_t cubert_handle_peer_address(const cubert_handle *handle);

/* (memory id, start, end) of a binding: what claims are keyed by. */
typedef struct cubert_claim_key {
  uint64_t memory;
  uint64_t start;
  uint64_t end;
} cubert_claim_key;

CUBERT_API cubert_status cubert_handle_bind(const cubert_handle *handle, cubert_binding **binding);
CUBERT_API void cubert_binding_release(cubert_binding *binding);
CUBERT_API cubert_claim_key cubert_binding_claim_key(const cubert_binding *binding);
CUBERT_API cubert_status cubert_binding_downgrade(const cubert_binding *binding, cubert_weak **weak);
CUBERT_API cubert_status cubert_handle_downgrade(const cubert_handle *handle, cubert_weak **weak);
/* CUBERT_ERR_EXPIRED once the allocation was freed (a reused slot never
 * upgrades to its new tenant). */
CUBERT_API cubert_status cubert_weak_upgrade(const cubert_weak *weak, cubert_binding **binding);
CUBERT_API void cubert_weak_release(cubert_weak *weak);

/* ---------------------------------------------------------------- host buffers */

/* A host buffer: page-locked (pinned) host memory that writes and reads move
 * through at the link's rate, asynchronously: a transfer is queued on the
 * client's stream like a copy, and its bytes are there (or its failure is
 * known) after the next cubert_sync of that stream. A host buffer has a
 * ledger like device memory: a read into it that fails taints the bytes it
 * should have written, a read of tainted device bytes taints them with a
 * child failure, and a write from tainted host-buffer bytes is refused and
 * taints its destination the same way (docs/failures.md, "Host buffers").
 * A later successful read into the same bytes repairs them.
 *
 * Ownership: the caller owns the buffer and releases it with
 * cubert_host_buffer_release(), before cubert_runtime_destroy (as clients).
 * One still held when its runtime is destroyed (a mistake) stays safe to
 * use as memory, to check and to release, and refuses transfers with
 * CUBERT_ERR_EXPIRED, like a handle; but its memory is never given back
 * (allocated: not freed; registered: not unpinned), since the backend that
 * pinned it is gone.
 * Its bytes (cubert_host_buffer_data) belong to the buffer: read them as
 * good data only after a sync and a cubert_host_buffer_check of their range.
 * A buffer may be used with every client of its runtime. Transfers are
 * ordered on the stream they were queued on; between streams or devices,
 * order them with a sync, as for any host memory. */

/* `size` bytes of page-locked host memory on the NUMA node nearest
 * `client`'s device (HIP: hipHostRegister of memory placed there, or
 * hipHostMalloc; host backend: plain memory, placed likewise). Its bytes
 * are uninitialised and untainted. Size 0 is CUBERT_ERR_INVALID_ARGUMENT. */
CUBERT_API cubert_status cubert_host_buffer_alloc(cubert_client *client, uint64_t size,
                                                  cubert_host_buffer **buffer);
/* Pins `size` bytes the caller allocated at `data` (HIP: hipHostRegister;
 * memory already pinned is used as it is) and wraps them. The memory stays
 * the caller's: keep it alive until the buffer is released, which unpins it
 * and frees nothing. */
CUBERT_API cubert_status cubert_host_buffer_register(cubert_client *client, void *data, uint64_t size,
                                                     cubert_host_buffer **buffer);
/* Waits for every transfer queued with the buffer, then frees (alloc) or
 * unpins (register) its memory. Transfers of other threads must not race
 * it. NULL is fine. Failures found by that wait stay for the next sync. */
CUBERT_API void cubert_host_buffer_release(cubert_host_buffer *buffer);
/* The first byte and the size; NULL and 0 for NULL. */
CUBERT_API void *cubert_host_buffer_data(const cubert_host_buffer *buffer);
CUBERT_API uint64_t cubert_host_buffer_size(const cubert_host_buffer *buffer);
/* CUBERT_OK when none of bytes offset..offset+size carries a failure; else
 * CUBERT_ERR_TAINTED with every tainted range (in buffer bytes) in the last
 * error, like cubert_handle_check. Asks; waits for nothing, clears nothing:
 * sync first, a failure found at a fence taints the buffer then. A range
 * past the end is CUBERT_ERR_OUT_OF_RANGE. */
CUBERT_API cubert_status cubert_host_buffer_check(const cubert_host_buffer *buffer, uint64_t offset,
                                                  uint64_t size);
/* The caller wrote bytes offset..offset+size itself: they carry no failure
 * any more (a write from them is no longer refused). */
CUBERT_API cubert_status cubert_host_buffer_mark_written(cubert_host_buffer *buffer, uint64_t offset,
                                                         uint64_t size);
/* Queues a write of the handle's bytes (exactly its size in use, `size`)
 * from bytes offset..offset+size of `src`. Returns once queued; `src` must
 * not change until a sync. Tainted source bytes: refused with
 * CUBERT_ERR_TAINTED, the handle's bytes carry a child failure. */
CUBERT_API cubert_status cubert_handle_write_host(cubert_client *client, cubert_handle *handle,
                                                  const cubert_host_buffer *src, uint64_t offset,
                                                  uint64_t size);
/* Queues a read of the handle's bytes (exactly `size`) into bytes
 * offset..offset+size of `dst`. Returns once queued; the bytes are there
 * after a sync. Tainted device bytes: refused with CUBERT_ERR_TAINTED and
 * the destination range carries a child failure; a transfer that fails
 * (now or at a fence) taints the range with its failure. */
CUBERT_API cubert_status cubert_handle_read_host(cubert_client *client, const cubert_handle *handle,
                                                 cubert_host_buffer *dst, uint64_t offset, uint64_t size);

/* ---------------------------------------------------------------- pools */

typedef struct cubert_pool_usage {
  char name[32];          /* "sliced-64K", "exclusive", ... */
  uint64_t page_size;     /* 0 for pools of varied page sizes */
  uint64_t pages;
  uint64_t reserved;      /* bytes taken from the driver */
  uint64_t in_use;        /* bytes handed out (a block freed and kept for
                             the next allocation of its size is not: the
                             threads' caches are emptied first) */
  uint64_t high_water;    /* most bytes in use at once */
} cubert_pool_usage;

/* Copies up to `capacity` pool reports into `pools`; `count` gets how many
 * pools there are. */
CUBERT_API cubert_status cubert_memory_usage(cubert_client *client, cubert_pool_usage *pools,
                                             size_t capacity, size_t *count);
/* Empties every thread's cache of freed blocks of the client's device
 * (docs/guide.md, section 3), then returns every idle page to the driver. */
CUBERT_API cubert_status cubert_memory_cleanup(cubert_client *client);

/* ---------------------------------------------------------------- kernels */

typedef enum cubert_param_kind {
  CUBERT_PARAM_BUFFER = 0,      /* memory of the launching device */
  CUBERT_PARAM_PEER_BUFFER = 1, /* memory another device shared
                                   (cubert_handle_share; else
                                   CUBERT_ERR_NOT_SHARED), or memory of the
                                   launching device itself, shared or not:
                                   binding it needs no peer access */
  CUBERT_PARAM_SCALAR = 2,
  CUBERT_PARAM_TENSOR = 3       /* a strided view of memory of the launching
                                   device (cubert_arg_tensor, strided.h): the
                                   kernel gets a cubert_tensor by value, and
                                   the launch reads or writes exactly the
                                   view's footprint */
} cubert_param_kind;

typedef enum cubert_access {
  CUBERT_ACCESS_READ = 1,
  CUBERT_ACCESS_WRITE = 2,
  CUBERT_ACCESS_READ_WRITE = 3
} cubert_access;

typedef struct cubert_param {
  const char *name;
  cubert_param_kind kind;
  cubert_access access;   /* buffers and tensors */
  uint32_t size;          /* scalars: bytes, 1 to 64 */
} cubert_param;

/* ---------------------------------------------------------------- external access */

/* The device address of a view, for a transport that moves the bytes itself
 * (GPU-aware MPI hands device memory to the network; docs/cluster.md), under
 * an access that keeps the ledger exact. Owned by the caller from a
 * successful begin until its end, which frees it; every begin needs exactly
 * one end, and the view's memory stays allocated in between.
 *
 * cubert_handle_external_begin(client, view, access, &external, &address):
 *   waits for the work queued on the client's stream (failures it finds
 *   taint their bytes as at any sync; a wait that itself fails refuses the
 *   begin with its error, since what the stream wrote is then unknown), then
 *   - CUBERT_ACCESS_READ: refuses with CUBERT_ERR_TAINTED (the failures in
 *     the last error, as cubert_handle_check) when any byte of the view
 *     carries a failure: nothing failed is handed out as good bytes;
 *   - CUBERT_ACCESS_WRITE: the view's bytes carry a failure ("being written
 *     by an external transfer that has not ended") until the end, so a read
 *     in between is refused rather than seeing half-written bytes;
 *   and sets *address to the view's first byte in the device's address
 *   space (a device pointer on HIP; host memory on the host backend), valid
 *   until the end. The view must be memory of the client's device (else
 *   CUBERT_ERR_WRONG_DEVICE); CUBERT_ACCESS_READ_WRITE and NULL arguments
 *   are CUBERT_ERR_INVALID_ARGUMENT. A refused begin changes nothing.
 * The caller orders the transport's access after work on other streams
 * (sync them) and ends the access only once the transport is done with the
 * bytes. cubert does not order later work after the transport: end it
 * before queueing work on the view.
 *
 * cubert_handle_external_end(external, failure): for a write, `failure`
 * NULL says the transport wrote every byte good (a write: taint the bytes
 * held is gone); a failure (of cubert_failure_create, an imported one...)
 * says they are not good: they carry it, as after a failed write. Ending a
 * write of a device lost meanwhile returns CUBERT_ERR_DEVICE_LOST and the
 * bytes keep the pending failure. For a read, `failure` is ignored. NULL
 * external is CUBERT_ERR_INVALID_ARGUMENT. Either way `external` is freed. */
typedef struct cubert_external cubert_external;
CUBERT_API cubert_status cubert_handle_external_begin(cubert_client *client, cubert_handle *view,
                                                      cubert_access access, cubert_external **external,
                                                      void **address);
CUBERT_API cubert_status cubert_handle_external_end(cubert_external *external, const cubert_failure *failure);

/* What a host-backend kernel sees: the launch shape and one pointer per
 * argument (device bytes for buffers, the value's bytes for scalars, a
 * cubert_tensor for tensors). */
typedef struct cubert_host_launch {
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_memory;
  uint32_t nargs;
  void *const *args;
  const uint64_t *sizes;  /* bytes bound per argument (a tensor:
                             sizeof(cubert_tensor)) */
} cubert_host_launch;

/* Returns CUBERT_OK or an error with a message written to `message`. */
typedef cubert_status (*cubert_host_fn)(const cubert_host_launch *launch, char *message,
                                        size_t message_capacity);

/* A prebuilt code object for one architecture ("gfx90a", "sm_90"). */
typedef struct cubert_code_object {
  const char *arch;
  const void *data;
  size_t size;
} cubert_code_object;

typedef struct cubert_kernel_desc {
  const char *name;               /* required */
  const cubert_param *params;
  uint32_t nparams;
  const char *source;             /* HIP/CUDA common subset, `extern "C" __global__` */
  const char *entry;              /* symbol in source/objects; NULL: name */
  const char *compile_options;    /* extra hiprtc options, space separated */
  const cubert_code_object *objects;
  uint32_t nobjects;
  cubert_host_fn host_fn;         /* for the host backend */
} cubert_kernel_desc;

/* Copies the descriptor.
 * A kernel is compiled (HIP: hiprtc, unless a code object fits) or loaded on
 * a device at its first launch there. The compile holds up no other call on
 * that device: launches of other kernels go on meanwhile, and threads that
 * launch the same new kernel at once compile it once. Its modules live as
 * long as the kernel: when its last reference goes (launches in flight hold
 * one until they have run), they are unloaded on every device. */
CUBERT_API cubert_status cubert_kernel_create(const cubert_kernel_desc *desc, cubert_kernel **kernel);
CUBERT_API void cubert_kernel_retain(cubert_kernel *kernel);
CUBERT_API void cubert_kernel_release(cubert_kernel *kernel);
CUBERT_API const char *cubert_kernel_name(const cubert_kernel *kernel);

struct cubert_view; /* cubert/strided.h */

typedef struct cubert_arg {
  cubert_param_kind kind;
  const cubert_handle *handle;    /* buffers and tensors */
  const void *scalar;             /* scalars */
  uint32_t scalar_size;
  const struct cubert_view *view; /* tensors: borrowed for the call */
} cubert_arg;

static inline cubert_arg cubert_arg_buffer(const cubert_handle *handle) {
  cubert_arg a = {CUBERT_PARAM_BUFFER, handle, NULL, 0, NULL};
  return a;
}
static inline cubert_arg cubert_arg_peer(const cubert_handle *handle) {
  cubert_arg a = {CUBERT_PARAM_PEER_BUFFER, handle, NULL, 0, NULL};
  return a;
}
static inline cubert_arg cubert_arg_scalar(const void *value, uint32_t size) {
  cubert_arg a = {CUBERT_PARAM_SCALAR, NULL, value, size, NULL};
  return a;
}
/* A tensor: the view `view` of `handle` (cubert/strided.h). The view is
 * checked like cubert_view_check when the launch is made (an error names
 * the argument and the dimension) and read during cubert_launch only. */
static inline cubert_arg cubert_arg_tensor(const cubert_handle *handle, const struct cubert_view *view) {
  cubert_arg a = {CUBERT_PARAM_TENSOR, handle, NULL, 0, view};
  return a;
}

typedef struct cubert_launch_config {
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_memory;
} cubert_launch_config;

/* Checks the arguments against the kernel (CUBERT_ERR_LAUNCH_CONFIG, naming
 * the argument, for a count, a kind or a scalar size its parameters do not
 * take; CUBERT_ERR_INVALID_ARGUMENT for a NULL config, args, handle or
 * view; a tensor's view as cubert_view_check, with its status) and the
 * shape against the device
 * (CUBERT_ERR_LAUNCH_CONFIG, naming the dimension, for a grid or block over
 * the device's limits, and for grid[d] * block[d] over UINT32_MAX threads in
 * any dimension d, which ROCm refuses; on every backend), claims the write
 * set, then enqueues. A kernel with a tainted input is not
 * run: the call fails with CUBERT_ERR_TAINTED and its outputs carry a child
 * of the input's failure. A tensor argument's read and write sets are its
 * view's footprint, not the range around it: a tensor input is tainted only
 * where its footprint meets taint, and a failed launch taints exactly the
 * footprints of its tensor outputs (docs/failures.md, "Strided views"). */
CUBERT_API cubert_status cubert_launch(cubert_client *client, const cubert_kernel *kernel,
                                       const cubert_launch_config *config, const cubert_arg *args,
                                       uint32_t nargs);

#ifdef __cplusplus
}
#endif

#include "cubert/kernels.h"
#include "cubert/strided.h"

#endif
