/* bench/bench.h: what the files of `cubert bench` share (internal, never
 * installed): statistics, result rows, the raw baselines, the bench's own
 * kernels, output (table, CSV, JSON, SVG) and small helpers.
 *
 *   cli_bench.c     cb_cli_bench: `cubert bench peer|runtime|plot`
 *   bench_peer.c    peer bandwidth: matrix, size sweep, latency
 *   bench_strided.c strided copies (2-D, 3-D) beside hipMemcpy2D/3DAsync
 *   bench_runtime.c the runtime's own costs: pools, launch path, ledger,
 *                   fault layer
 *   bench_kernels.c kernels the bench launches through cubert and compiles
 *                   raw: empty kernels, the hold kernel, the pointer chase
 *   bench_raw.c     raw baselines behind one interface: plain memcpy and
 *                   host calls on the host backend, plain HIP
 *                   (backends/hip/hip_raw.h) on HIP devices
 *   bench_out.c     statistics, rows to JSON/CSV, the terminal table
 *   bench_svg.c     SVG heatmap and size sweep through cairo (from the JSON)
 *   hip_raw_none.c  the raw HIP calls when cubert is built without HIP
 *
 * Ownership: a cb_bench_rows owns its rows; JSON objects returned are new
 * references the caller decrefs; a cb_bench_raw is owned by whoever opened
 * it and closed with cb_bench_raw_close(). */
#ifndef CUBERT_BENCH_BENCH_H
#define CUBERT_BENCH_BENCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/options.h"
#include "cubert/cubert.h"

/* ------------------------------------------------------------ helpers */

/* Seconds of CLOCK_MONOTONIC. */
double cb_bench_now(void);

/* "1K", "64M", "1G", "4096", "4KiB" into bytes (binary units; the syntax of
 * cb_parse_size, base/env.h); false when it is not a size or is 0. */
bool cb_bench_parse_size(const char *text, uint64_t *bytes);
/* "1K..1G" (powers of two between), "1K..1G:4" (factor 4), "4K,1M,64M" (a
 * list) into a sorted list without duplicates; false with a message that
 * names the option ("--sizes: ..."). */
bool cb_bench_parse_sizes(const char *text, uint64_t **sizes, size_t *count, char *message,
                          size_t capacity);
/* "1 KiB", "256 MiB" (exact), "1.5 MiB" otherwise. */
const char *cb_bench_size_name(uint64_t bytes, char *buf, size_t capacity);

/* Progress on stderr: a line per step ("[12/150, about 40 s left] peer-ce
 * 0->1 256 MiB", the time left from the mean step so far); on a terminal the
 * line is rewritten in place. Off with quiet. */
void cb_bench_progress(bool quiet, int step, int total, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
void cb_bench_progress_done(bool quiet);

/* A note (printf format) appended to `notes`, a JSON array. */
void cb_bench_note(json_t *notes, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The options of the one-device benchmarks (bench runtime, bench strided). */
typedef struct cb_bench_basic_opts {
  int reps, warmup;
  bool quick, quiet;
  const char *backend; /* "hip", "host" or NULL (hip when it has devices) */
  cb_cli_output json, csv;
} cb_bench_basic_opts;

/* Parses --reps, --warmup, --backend hip|host, --json, --csv, --quick and
 * --quiet for `cubert <command>` (cli/options.h conventions) and opens the
 * outputs; reps default to 3 with --quick, else 5; warmup to 1. Returns
 * CB_CLI_PARSED when the command should run, else its exit status. */
int cb_bench_parse_basic(const char *command, void (*usage)(FILE *out), int argc, char **argv,
                         cb_bench_basic_opts *o);

/* The device a one-device benchmark measures: the first of `backend`, or
 * (NULL) the first HIP device, else the first host device. Its runtime
 * index, its info in *info; -1 after a message on stderr naming `command`. */
int cb_bench_pick_device(cubert_runtime *rt, const char *backend, const char *command, cubert_device_info *info);

/* ------------------------------------------------------------ statistics */

typedef struct cb_bench_stats {
  int n;
  double median, min, max, mean;
  double cv;      /* standard deviation / mean (0 for fewer than 2 samples) */
} cb_bench_stats;

/* Statistics of `n` samples (sorted in place). */
cb_bench_stats cb_bench_stats_of(double *samples, int n);
/* qsort's comparisons, ascending. */
int cb_bench_cmp_u64(const void *a, const void *b);
int cb_bench_cmp_double(const void *a, const void *b);
json_t *cb_bench_stats_json(const cb_bench_stats *s, const double *samples, int n);

/* ------------------------------------------------------------ rows */

/* One measured cell: a test, a device pair, a size; cubert's figures and the
 * raw baseline's, in the same unit. For bidirectional rows `cubert`/`raw`
 * are the sum of both directions (per repetition) and fwd/rev each one. */
typedef struct cb_bench_row {
  char test[24];        /* "peer-ce", "peer-read", "h2d", "chase", ... */
  char dir[8];          /* "uni", "bidi" */
  char section[12];     /* "matrix", "sweep", "latency" */
  int src, dst;         /* devices; -1 for the host */
  char link[16];        /* the pair's topology class, "?" when unknown */
  uint64_t size;        /* bytes per operation */
  uint32_t count;       /* operations per repetition */
  char unit[8];         /* "GB/s", "us", "ns" */
  bool higher_better;   /* GB/s: true; times: false */
  bool have_cubert, have_raw;
  cb_bench_stats cubert, raw;
  double cubert_fwd, cubert_rev, raw_fwd, raw_rev; /* bidi medians */
  double *cubert_samples, *raw_samples;            /* owned */
  int validated;        /* 1 passed, 0 failed, -1 not checked */
  char baseline[32];    /* what `raw` holds when it is not the raw baseline
                           ("clean ledger", "no fault layer"); "" for raw */
  char note[160];
  char engine[16];      /* cb_bench_copy_engine(); "" for rows that copy nothing */
  double engine_ratio;  /* kernel copies: cubert's median / the copy engine's raw
                           median, same devices and size; 0 when not known */
} cb_bench_row;

/* What a copy is, for cb_bench_copy_engine(). */
typedef enum cb_bench_copy {
  CB_BENCH_COPY_HOST = 0,     /* host memory to or from a device */
  CB_BENCH_COPY_SAME_DEVICE,  /* within one device */
  CB_BENCH_COPY_PEER,         /* device to device, by the runtime's copy */
  CB_BENCH_COPY_KERNEL        /* done by a kernel (d2d-kernel, peer-read/write) */
} cb_bench_copy;

/* The engine that carries a copy of `size` bytes (bench_engine.c):
 * "sdma" or "blit-kernel" on ROCm (arch "gfx..."; from the copy, its size
 * and $HSA_ENABLE_SDMA, $ROC_P2P_SDMA_SIZE, $GPU_FORCE_BLIT_COPY_SIZE),
 * "copy-engine" on CUDA (arch "sm_..."), "memcpy" on the host backend,
 * "kernel" for kernel copies; "" when unknown. A static string. */
const char *cb_bench_copy_engine(const char *backend, const char *arch, cb_bench_copy kind,
                                 uint64_t size);

/* cubert/raw of the medians (0 when either is missing). */
double cb_bench_ratio(const cb_bench_row *row);

typedef struct cb_bench_rows {
  cb_bench_row *v;
  size_t n, cap;
} cb_bench_rows;

/* A zeroed row appended (NULL when out of memory). */
cb_bench_row *cb_bench_rows_add(cb_bench_rows *rows);
/* The row's cubert figures (raw: its raw ones) from `n` samples: their
 * statistics (the samples are sorted in place), a copy of them in the order
 * given that the row owns (none when out of memory), have_cubert or
 * have_raw set. */
void cb_bench_row_set(cb_bench_row *row, bool raw, double *samples, int n);
void cb_bench_rows_free(cb_bench_rows *rows);
json_t *cb_bench_row_json(const cb_bench_row *row);
/* A new JSON document with the common head of a run: "tool",
 * "cubert_version", "date" (UTC, ISO 8601), "host", "backend" and
 * "copy_env" (the values of HSA_ENABLE_SDMA, ROC_P2P_SDMA_SIZE and
 * GPU_FORCE_BLIT_COPY_SIZE, null when unset: they choose ROCm's copy engine). */
json_t *cb_bench_json_head(const char *tool, const char *backend);
/* Sets the common tail of a run's JSON document: "results" (the rows),
 * "targets", "validation" {checks, failed, errors, passed} and "notes"
 * (targets and notes are borrowed: the document takes its own reference). */
void cb_bench_json_tail(json_t *doc, const cb_bench_rows *rows, json_t *targets, long checks,
                        long failed, long errors, json_t *notes);
/* The header and the rows as CSV. */
bool cb_bench_rows_csv(const cb_bench_rows *rows, FILE *out);

/* Writes `root` (indented) to `out`, an output opened before measuring
 * (cli/options.h); false with a message on stderr naming `command`. */
bool cb_bench_write_json(json_t *root, FILE *out, const char *command);

/* ------------------------------------------------------------ SVG */

/* True when cubert was built with cairo (SVG output). */
bool cb_bench_svg_available(void);
/* From a `cubert bench peer` or `cubert-mpi bench` JSON document:
 * PREFIX-matrix.svg (a heatmap per matrix test, over devices or ranks: the
 * "devices" entries; of several sizes, the largest) and PREFIX-sweep.svg
 * (GB/s against size, cubert and raw: the "sweep" rows, or where there are
 * none the matrix rows of the first pair).
 * Files with nothing to draw are not written; each written path is printed
 * on `log`. False with a message on stderr. */
bool cb_bench_svg_write(json_t *peer_doc, const char *prefix, FILE *log);
/* Whether PREFIX's folder can take the pictures, asked before measuring;
 * false with a message naming `command` and the folder. */
bool cb_bench_svg_writable(const char *prefix, const char *command);

/* ------------------------------------------------------------ kernels */

/* The bench's own kernels, created once per process (references the caller
 * releases). Each has HIP source and a host function. */
typedef enum cb_bench_kernel_id {
  CB_BENCH_EMPTY0 = 0,    /* no parameter */
  CB_BENCH_EMPTY4,        /* 4 buffers: 2 read, 2 write */
  CB_BENCH_EMPTY16,       /* 16 buffers: 8 read, 8 write */
  CB_BENCH_TOUCH,         /* in: read, out: write; does nothing */
  CB_BENCH_TAINT,         /* out: write; the fault rule fails it */
  CB_BENCH_HOLD,          /* ticks: u64; spins that long (AMD wall_clock64, NVIDIA
                             clock64, ns on the host) */
  CB_BENCH_CHASE,         /* next: read, state: read-write u32, steps: u64 */
  CB_BENCH_CHASE_PEER,    /* the same with `next` a peer buffer */
  CB_BENCH_KERNEL_COUNT
} cb_bench_kernel_id;

cubert_status cb_bench_kernel(cb_bench_kernel_id id, cubert_kernel **kernel);
/* One HIP source holding every bench kernel, for the raw baseline. Entry
 * names: cb_bench_empty0, cb_bench_empty4, cb_bench_empty16, cb_bench_hold,
 * cb_bench_chase. */
const char *cb_bench_kernel_source(void);
/* The host function of a kernel (for the host raw baseline). */
cubert_host_fn cb_bench_kernel_host_fn(cb_bench_kernel_id id);

/* Pointer chase data: `bytes` of u32 holding one random cycle through nodes
 * `stride` u32 apart (Sattolo), seeded. next[node] = next node's index. */
void cb_bench_chase_fill(uint32_t *next, uint64_t bytes, uint32_t stride, uint64_t seed);
/* Where a chase of `steps` steps from `start` ends. */
uint32_t cb_bench_chase_walk(const uint32_t *next, uint32_t start, uint64_t steps);

/* ------------------------------------------------------------ raw baselines */

/* The raw baseline: the same work without cubert. On HIP devices plain HIP
 * calls timed with hipEvents (backends/hip/hip_raw.h); on the host backend
 * plain memcpy and direct host-function calls timed with the host clock.
 * Devices are the backend's own indexes (cubert_device_info.backend_index).
 * Addresses are device addresses on HIP, host pointers on the host. */
typedef struct cb_bench_raw cb_bench_raw;

typedef enum cb_bench_raw_op {
  CB_RAW_H2D = 0,       /* host `src` (pageable) -> device `dst` */
  CB_RAW_H2D_PINNED,    /* host `src` (pinned) -> device `dst` */
  CB_RAW_D2H,           /* device `src` -> host `dst` (pageable) */
  CB_RAW_D2D,           /* within one device, copy engine */
  CB_RAW_PEER,          /* between devices, copy engine (hipMemcpyPeerAsync) */
  CB_RAW_KERNEL         /* the copy kernel on `exec` (pointers local or peer) */
} cb_bench_raw_op;

typedef struct cb_bench_xfer {
  cb_bench_raw_op op;
  int exec;             /* the device whose stream runs and times it */
  int src_dev, dst_dev; /* -1 for host memory */
  uint64_t src, dst;
  uint64_t size;
  uint32_t grid, block; /* CB_RAW_KERNEL */
} cb_bench_xfer;

/* "hip" or "host". */
cubert_status cb_bench_raw_open(const char *backend, cb_bench_raw **raw);
void cb_bench_raw_close(cb_bench_raw *raw);
/* One line saying what the baseline is ("plain memcpy on the host ..."). */
const char *cb_bench_raw_describe(const cb_bench_raw *raw);
/* The last error's message. */
const char *cb_bench_raw_error(const cb_bench_raw *raw);
bool cb_bench_raw_is_host(const cb_bench_raw *raw);

/* The hold kernel's clock rate on `dev` in kHz where the platform says it
 * (AMD, ROCm >= 6: hipDeviceAttributeWallClockRate, the rate of
 * wall_clock64()); CUBERT_ERR_UNSUPPORTED elsewhere (then the bench
 * calibrates the clock against timers). */
cubert_status cb_bench_raw_hold_clock_khz(cb_bench_raw *raw, int dev, int *khz);
cubert_status cb_bench_raw_alloc(cb_bench_raw *raw, int dev, uint64_t size, uint64_t *addr);
void cb_bench_raw_free(cb_bench_raw *raw, int dev, uint64_t addr);
cubert_status cb_bench_raw_host_alloc(cb_bench_raw *raw, uint64_t size, void **ptr); /* pinned */
void cb_bench_raw_host_free(cb_bench_raw *raw, void *ptr);
cubert_status cb_bench_raw_upload(cb_bench_raw *raw, int dev, uint64_t dst, const void *src,
                                  uint64_t size);
cubert_status cb_bench_raw_download(cb_bench_raw *raw, int dev, void *dst, uint64_t src,
                                    uint64_t size);
cubert_status cb_bench_raw_fill(cb_bench_raw *raw, int dev, uint64_t dst, uint32_t value,
                                uint64_t size);
/* Whether `dev` can access `peer`'s memory; enables it when it can. */
cubert_status cb_bench_raw_peer(cb_bench_raw *raw, int dev, int peer, bool *can);
/* CHECKSUM_U32 over n u32 at `addr` (kernels.h), on `dev`. */
cubert_status cb_bench_raw_checksum(cb_bench_raw *raw, int dev, uint64_t addr, uint64_t n,
                                    uint64_t *sum);
/* `count` copies of each of `n` (1 or 2) transfers, concurrently when 2,
 * each on its own stream of its exec device, after a hold kernel of
 * `hold_ticks` (0: none); ms[i] is transfer i's elapsed time, enqueue_ms
 * the host's enqueue time (may be NULL), *short_hold (may be NULL) whether
 * a hold had ended before the last transfer was enqueued (a start event
 * already fired), so that the timed window holds enqueue time too. */
cubert_status cb_bench_raw_run(cb_bench_raw *raw, const cb_bench_xfer *x, int n, uint32_t count,
                               uint64_t hold_ticks, double *ms, double *enqueue_ms, bool *short_hold);
/* `count` times: `src_dev` to the pinned host buffer, then to `dst_dev`;
 * host-timed milliseconds for all. */
cubert_status cb_bench_raw_staged(cb_bench_raw *raw, int src_dev, uint64_t src, int dst_dev,
                                  uint64_t dst, void *pinned, uint64_t size, uint32_t count,
                                  double *ms);
/* The chase kernel on `exec` over `next` (local or peer), `state` one u32
 * on exec: start index in, end index out. Device-timed ms. */
cubert_status cb_bench_raw_chase(cb_bench_raw *raw, int exec, uint64_t next, uint64_t state,
                                 uint64_t steps, double *ms);
/* `count` small pageable transfers (`d2h`, else h2d) between `host` and
 * `dev_addr` with one of the HIP backend's extra steps added
 * (cb_hip_raw_step, backends/hip/hip_raw.h); host-timed us per call and the
 * stream queries that said busy. HIP only: CUBERT_ERR_UNSUPPORTED on the
 * host backend. */
cubert_status cb_bench_raw_small(cb_bench_raw *raw, int dev, int step, bool d2h, void *host, uint64_t dev_addr,
                                 uint64_t size, uint32_t count, double *us, uint32_t *busy);
/* cb_bench_raw_small's loop with `before(arg)` (may be NULL) called before
 * each transfer, in its time (nonzero stops the loop with an error), and
 * each call's nanoseconds in ns[k] (may be NULL; count entries). */
cubert_status cb_bench_raw_small_each(cb_bench_raw *raw, int dev, int step, bool d2h, void *host, uint64_t dev_addr,
                                      uint64_t size, uint32_t count, int (*before)(void *), void *arg,
                                      uint64_t *ns, double *us);
/* `count` launches of the empty kernel with `nbuffers` (0, 4, 16) buffer
 * arguments, then one sync; host-timed ns per launch, and (enqueue_ns, may
 * be NULL) of the launches alone, before the sync. `packed` (HIP only; the
 * host backend ignores it): the arguments as one buffer (`extra`). */
cubert_status cb_bench_raw_launch_loop(cb_bench_raw *raw, int dev, int nbuffers,
                                       const uint64_t *buffers, uint32_t count, bool packed, double *ns,
                                       double *enqueue_ns);
/* `count` allocations of `size` each freed at once (hipMalloc+hipFree,
 * malloc+free); host-timed ns per pair. */
/* Raw launches of the empty kernel with one of the HIP backend's steps
 * added (cb_hip_raw_lstep, backends/hip/hip_raw.h); host ns per launch
 * before the sync. HIP only. */
cubert_status cb_bench_raw_launch_step(cb_bench_raw *raw, int dev, int step, int nbuffers, const uint64_t *buffers,
                                       uint32_t count, double *enqueue_ns);
cubert_status cb_bench_raw_alloc_loop(cb_bench_raw *raw, int dev, uint64_t size, uint32_t count,
                                      double *ns);
/* `count` pitched copies (backends/hip/hip_raw.h, cb_hip_raw_pitched: 2-D
 * when depth is 0, else 3-D): hipMemcpy2DAsync/hipMemcpy3DAsync timed with
 * hipEvents on HIP; a memcpy per row, host-timed, on the host backend. */
struct cb_hip_raw_pitched;
cubert_status cb_bench_raw_pitched(cb_bench_raw *raw, int dev, const struct cb_hip_raw_pitched *p,
                                   uint32_t count, double *ms);

/* ------------------------------------------------------------ one-device runs */

/* What bench runtime and bench strided share around their measurements. */
/* The start of a one-device benchmark: a runtime of `o->backend` (NULL: the
 * default backends), its device (cb_bench_pick_device; o->backend becomes
 * the device's backend, its info in *info), a client of it, and the raw
 * baseline of that backend (NULL, with a note appended to `notes`, when
 * there is none). Returns the device's runtime index, or -1 after a message
 * on stderr naming `command`; what was made is in *rt, *client and *raw
 * either way, for cb_bench_basic_close(). */
int cb_bench_basic_open(const char *command, cb_bench_basic_opts *o, cubert_runtime **rt, cubert_device_info *info,
                        cubert_client **client, cb_bench_raw **raw, json_t *notes);
/* The JSON document of a one-device run: cb_bench_json_head(tool,
 * o->backend) with "device", "raw_baseline" and "options" {reps, warmup,
 * quick} (the caller may add to "options"). A new reference. */
json_t *cb_bench_basic_doc(const char *tool, const cb_bench_basic_opts *o, const cubert_device_info *info,
                           const cb_bench_raw *raw);
/* The end of a one-device run, after its table: prints `notes` and the
 * validation line, completes `doc` (cb_bench_json_tail with `targets`, NULL
 * for an empty list) and writes it to --json, the rows to --csv. Takes
 * `doc` and `targets` (released here); `notes` is borrowed. Returns the
 * exit status: 0 when at least one check ran, none failed, and nothing
 * failed to measure or to be written; else 1. */
int cb_bench_basic_report(const char *command, const cb_bench_basic_opts *o, json_t *doc, const cb_bench_rows *rows,
                          json_t *targets, int checks, int failed, int errors, json_t *notes);
/* Closes --json and --csv (false when one fails) and releases what
 * cb_bench_basic_open made (each may be NULL). */
bool cb_bench_basic_close(const char *command, cb_bench_basic_opts *o, cubert_client *client, cb_bench_raw *raw,
                          cubert_runtime *rt);

/* Where a one-device run's context keeps what the shared main sets up and
 * releases: its options, runtime, client, raw baseline, rows and notes. */
typedef struct cb_bench_basic_parts {
  cb_bench_basic_opts *o;
  cubert_runtime **rt;
  cubert_client **client;
  cb_bench_raw **raw;
  cb_bench_rows *rows;
  json_t **notes;
} cb_bench_basic_parts;

/* One one-device benchmark, for cb_bench_basic_main. */
typedef struct cb_bench_basic_def {
  const char *command;                     /* "bench runtime" */
  void (*usage)(FILE *out);
  size_t size;                             /* of its context, allocated zeroed */
  cb_bench_basic_parts (*parts)(void *ctx);
  int (*run)(void *ctx);                   /* the exit status */
  void (*drop)(void *ctx);                 /* what else the context holds; NULL: nothing */
} cb_bench_basic_def;

/* The main of a one-device benchmark: a zeroed context, the options
 * (cb_bench_parse_basic), a notes array, def->run, then def->drop and
 * everything cb_bench_basic_close releases. Returns the exit status: run's,
 * or 1 when an output cannot be closed or there is no memory. */
int cb_bench_basic_main(const cb_bench_basic_def *def, int argc, char **argv);

/* ------------------------------------------------------------ commands */

int cb_bench_peer_main(int argc, char **argv);
int cb_bench_runtime_main(int argc, char **argv);
int cb_bench_plot_main(int argc, char **argv);
int cb_bench_strided_main(int argc, char **argv);

#endif
