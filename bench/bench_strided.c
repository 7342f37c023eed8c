/* bench/bench_strided.c: `cubert bench strided`, strided copies through
 * cubert beside the vendor's pitched copies done raw, in the same run
 * (issue 17 item 5; docs/bench.md, "bench strided").
 *
 * Layouts (f32 elements; --quick shrinks them for CI and the host backend):
 *   col-block   a column block, 8192 rows x 1024 columns, of an 8192 x 8192
 *               matrix (row pitch 32 KiB): 2-D
 *   narrow-64B  16384 rows of 64 bytes at a pitch of 4 KiB: 2-D
 *   box-3d      a 256^3 box of a 512^3 grid (row pitch 2 KiB, slice 1 MiB): 3-D
 * Tests per layout (cubert against raw):
 *   h2d         cubert_handle_write_strided from packed pageable host memory
 *               against hipMemcpy2DAsync/hipMemcpy3DAsync host to device
 *   d2h         cubert_handle_read_strided against the pitched copy back
 *   d2d         cubert_handle_copy_strided (same layout on both sides)
 *               against the pitched copy device to device
 *   d2d-kernel  the built-in cubert_copy_strided (tensor parameters) against
 *               the same raw pitched device-to-device copy (baseline "raw
 *               pitched d2d": kernel against copy engine)
 * GB/s = footprint bytes x count / time; cubert timed with cubert timers on
 * its client's stream, raw with hipEvents (host clock on the host backend).
 * Each repetition clears the destination first; the last one is checked
 * on the host: every byte of the footprint holds the pattern, every byte
 * of the destination allocation outside it is still zero. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/hip/hip_raw.h"
#include "bench/bench.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cubert/kernels.h"
#include "cubert/strided.h"

typedef cb_bench_basic_opts sopts;

/* One layout: a view of u32/f32 elements and the allocation it lies in. */
typedef struct layout {
  const char *name;
  const char *what;
  uint64_t alloc;   /* bytes of each allocation */
  cubert_view view; /* the same view on the source and the destination */
} layout;

enum { T_H2D = 0, T_D2H, T_D2D, T_KERNEL, T_COUNT };
static const char *const test_name[T_COUNT] = {"h2d", "d2h", "d2d", "d2d-kernel"};

typedef struct sctx {
  sopts o;
  cubert_runtime *rt;
  cubert_client *client;
  cubert_device_info info;
  int dev, raw_dev;
  cb_bench_raw *raw;
  char raw_note[256];
  cubert_kernel *k_copy;
  cb_bench_rows rows;
  int checks, failed, errors;
  json_t *notes;
  int step, steps;
  /* per layout */
  const layout *l;
  uint64_t nbytes;               /* footprint bytes */
  uint32_t *pattern;             /* alloc bytes: P(offset) */
  uint32_t *packed, *packed_in;  /* nbytes: the d2h destination; the h2d source P(k) */
  uint32_t *whole;               /* alloc bytes: a destination read back */
  uint64_t *offs;                /* element offsets of the footprint, packed order */
  cubert_handle *src, *dst;
  uint64_t raw_src, raw_dst;
} sctx;

static uint32_t pattern_at(uint64_t i) { return (uint32_t)(i * 0x9E3779B1u + 0x7F4A7C15u) ^ (uint32_t)(i >> 5); }

/* ------------------------------------------------------------ layouts */

static layout make_2d(const char *name, const char *what, uint64_t rows, uint64_t pitch_elems, uint64_t cols,
                      uint64_t first_col) {
  layout l = {name, what, rows * pitch_elems * 4, {0}};
  l.view.ndims = 2;
  l.view.elem_size = 4;
  l.view.offset = first_col;
  l.view.shape[0] = rows;
  l.view.shape[1] = cols;
  l.view.strides[0] = pitch_elems;
  l.view.strides[1] = 1;
  return l;
}

static layout make_3d(const char *name, const char *what, uint64_t grid, uint64_t box) {
  layout l = {name, what, grid * grid * grid * 4, {0}};
  uint64_t at = (grid - box) / 2;
  l.view.ndims = 3;
  l.view.elem_size = 4;
  l.view.offset = at * grid * grid + at * grid + at;
  for (int d = 0; d < 3; d++) l.view.shape[d] = box;
  l.view.strides[0] = grid * grid;
  l.view.strides[1] = grid;
  l.view.strides[2] = 1;
  return l;
}

static size_t make_layouts(bool quick, layout *v) {
  if (quick) {
    v[0] = make_2d("col-block", "256 x 64 columns of a 256 x 8192 f32 matrix, pitch 32 KiB", 256, 8192, 64, 1024);
    v[1] = make_2d("narrow-64B", "1024 rows of 64 B at pitch 4 KiB", 1024, 1024, 16, 8);
    v[2] = make_3d("box-3d", "a 32^3 box of a 64^3 f32 grid (pitches 256 B, 16 KiB)", 64, 32);
  } else {
    v[0] = make_2d("col-block", "8192 x 1024 columns of an 8192 x 8192 f32 matrix, pitch 32 KiB", 8192, 8192,
                   1024, 2048);
    v[1] = make_2d("narrow-64B", "16384 rows of 64 B at pitch 4 KiB", 16384, 1024, 16, 8);
    v[2] = make_3d("box-3d", "a 256^3 box of a 512^3 f32 grid (pitches 2 KiB, 1 MiB)", 512, 256);
  }
  return 3;
}

/* The raw pitched copy of the layout, `op` direction; host side packed. */
static cb_hip_raw_pitched raw_params(const sctx *c, int t) {
  const cubert_view *v = &c->l->view;
  bool three = v->ndims == 3;
  uint64_t row = v->strides[v->ndims - 2] * 4, width = v->shape[v->ndims - 1] * 4;
  uint64_t rows = three ? v->strides[0] / v->strides[1] : 0, height = v->shape[v->ndims - 2];
  uint64_t first = v->offset * 4;
  cb_hip_raw_pitched p = {0};
  p.width = width;
  p.height = height;
  p.depth = three ? v->shape[0] : 0;
  p.op = t == T_H2D ? CB_HIP_RAW_H2D : t == T_D2H ? CB_HIP_RAW_D2H : CB_HIP_RAW_D2D;
  p.src = t == T_H2D ? (uint64_t)(uintptr_t)c->packed_in : c->raw_src + first;
  p.dst = t == T_D2H ? (uint64_t)(uintptr_t)c->packed : c->raw_dst + first;
  p.src_pitch = t == T_H2D ? width : row;
  p.src_rows = t == T_H2D ? height : rows;
  p.dst_pitch = t == T_D2H ? width : row;
  p.dst_rows = t == T_D2H ? height : rows;
  return p;
}

/* Element offsets of the footprint in packed (row-major) order. */
static void footprint(sctx *c) {
  const cubert_view *v = &c->l->view;
  uint64_t n = c->nbytes / 4, idx[CUBERT_VIEW_MAX_DIMS] = {0};
  for (uint64_t k = 0; k < n; k++) {
    uint64_t o = v->offset;
    for (uint32_t d = 0; d < v->ndims; d++) o += idx[d] * v->strides[d];
    c->offs[k] = o;
    for (int d = (int)v->ndims - 1; d >= 0; d--) {
      if (++idx[d] < v->shape[d]) break;
      idx[d] = 0;
    }
  }
}

/* ------------------------------------------------------------ checks */

/* The destination of test t, read back whole (or the packed host buffer
 * for d2h): the footprint holds the pattern, the rest is zero. */
static bool check_bytes(sctx *c, int t) {
  uint64_t n = c->nbytes / 4;
  if (t == T_D2H) {
    for (uint64_t k = 0; k < n; k++)
      if (c->packed[k] != c->pattern[c->offs[k]]) return false;
    return true;
  }
  uint64_t total = c->l->alloc / 4, k = 0;
  for (uint64_t o = 0; o < total; o++) {
    uint32_t want = 0;
    if (k < n && c->offs[k] == o) {
      want = t == T_H2D ? c->packed_in[k] : c->pattern[o];
      k++;
    }
    if (c->whole[o] != want) return false;
  }
  return k == n;
}

/* ------------------------------------------------------------ one side */

static cubert_status cubert_op(sctx *c, int t) {
  const cubert_view *v = &c->l->view;
  switch (t) {
  case T_H2D: return cubert_handle_write_strided(c->client, c->dst, v, c->packed_in, c->nbytes);
  case T_D2H: return cubert_handle_read_strided(c->client, c->src, v, c->packed, c->nbytes);
  case T_D2D: return cubert_handle_copy_strided(c->client, c->src, v, c->dst, v);
  default: {
    cubert_launch_config cfg;
    cubert_status st = cubert_builtin_config(CUBERT_BUILTIN_COPY_STRIDED, &c->info, c->nbytes / 4, &cfg);
    cubert_arg args[2] = {cubert_arg_tensor(c->src, v), cubert_arg_tensor(c->dst, v)};
    return st ? st : cubert_launch(c->client, c->k_copy, &cfg, args, 2);
  }
  }
}

static cubert_status cubert_rep(sctx *c, int t, uint32_t count, double *ms, bool check, bool *ok) {
  uint32_t zero = 0;
  cubert_status st = t == T_D2H ? (memset(c->packed, 0, c->nbytes), CUBERT_OK)
                                : cubert_handle_fill(c->client, c->dst, &zero, 4);
  if (!st) st = cubert_sync(c->client);
  cubert_timer *t0 = NULL, *t1 = NULL;
  if (!st) st = cubert_timer_record(c->client, &t0);
  for (uint32_t k = 0; k < count && !st; k++) st = cubert_op(c, t);
  if (!st) st = cubert_timer_record(c->client, &t1);
  if (!st) st = cubert_timer_elapsed(t0, t1, ms);
  cubert_timer_release(t0);
  cubert_timer_release(t1);
  if (!st && check) {
    if (t != T_D2H) st = cubert_handle_read(c->client, c->dst, c->whole, c->l->alloc);
    if (!st) *ok = check_bytes(c, t);
  }
  return st;
}

static cubert_status raw_rep(sctx *c, int t, uint32_t count, double *ms, bool check, bool *ok) {
  cubert_status st = CUBERT_OK;
  if (t == T_D2H) memset(c->packed, 0, c->nbytes);
  else st = cb_bench_raw_fill(c->raw, c->raw_dev, c->raw_dst, 0, c->l->alloc);
  cb_hip_raw_pitched p = raw_params(c, t);
  if (!st) st = cb_bench_raw_pitched(c->raw, c->raw_dev, &p, count, ms);
  if (!st && check) {
    if (t != T_D2H) st = cb_bench_raw_download(c->raw, c->raw_dev, c->whole, c->raw_dst, c->l->alloc);
    if (!st) *ok = check_bytes(c, t);
  }
  return st;
}

/* ------------------------------------------------------------ one cell */

static void measure(sctx *c, int t) {
  cb_bench_row *row = cb_bench_rows_add(&c->rows);
  if (!row) {
    c->errors++;
    return;
  }
  snprintf(row->section, sizeof row->section, "%s", c->l->name);
  snprintf(row->test, sizeof row->test, "%s", test_name[t]);
  snprintf(row->dir, sizeof row->dir, "uni");
  snprintf(row->unit, sizeof row->unit, "GB/s");
  snprintf(row->link, sizeof row->link, "%s", t == T_H2D || t == T_D2H ? "HOST" : "SELF");
  row->src = t == T_H2D ? -1 : c->dev;
  row->dst = t == T_D2H ? -1 : c->dev;
  row->size = c->nbytes;
  uint64_t k = (c->o.quick ? (4u << 20) : (64u << 20)) / (c->nbytes ? c->nbytes : 1);
  row->count = k < 1 ? 1 : k > 16 ? 16 : (uint32_t)k;
  row->higher_better = true;
  if (t == T_KERNEL) snprintf(row->baseline, sizeof row->baseline, "raw pitched d2d");
  snprintf(row->engine, sizeof row->engine, "%s", t == T_KERNEL ? "kernel" : "");
  const char *raw_call = c->l->view.ndims == 3 ? "hipMemcpy3DAsync" : "hipMemcpy2DAsync";
  snprintf(row->note, sizeof row->note, "%.100s; raw: %s", c->l->what,
           !c->raw || !c->raw_dst ? "no raw baseline" : cb_bench_raw_is_host(c->raw) ? "memcpy per row" : raw_call);
  int total = c->o.warmup + c->o.reps;
  double *v = calloc((size_t)total, sizeof *v);
  if (!v) {
    c->errors++;
    return;
  }
  bool all_ok = true, any = false;
  for (int side = 0; side < 2; side++) {
    bool raw = side == 1;
    if (raw && (!c->raw || !c->raw_dst)) continue;
    cb_bench_progress(c->o.quiet, ++c->step, c->steps, "%s %s %s", c->l->name, test_name[t], raw ? "raw" : "cubert");
    cubert_status st = CUBERT_OK;
    int kept = 0;
    for (int r = 0; r < total && !st; r++) {
      bool last = r == total - 1, ok = true;
      double ms = 0;
      st = raw ? raw_rep(c, t, row->count, &ms, last, &ok) : cubert_rep(c, t, row->count, &ms, last, &ok);
      if (st) break;
      if (last) {
        c->checks++;
        if (!ok) {
          c->failed++;
          all_ok = false;
          cb_bench_note(c->notes, "check failed: %s %s (%s): the bytes read back are not the pattern", c->l->name, test_name[t],
               raw ? "raw" : "cubert");
        }
      }
      if (r >= c->o.warmup) v[kept++] = ms > 0 ? (double)c->nbytes * row->count / (ms * 1e6) : 0;
    }
    if (st) {
      c->errors++;
      all_ok = false;
      snprintf(row->note, sizeof row->note, "%s: %.150s", raw ? "raw" : "cubert",
               raw ? cb_bench_raw_error(c->raw) : cubert_last_error_message());
      if (!raw) (void)cubert_sync(c->client);
      continue;
    }
    cb_bench_row_set(row, raw, v, kept);
    any = true;
  }
  row->validated = any ? (all_ok ? 1 : 0) : -1;
  free(v);
}

/* ------------------------------------------------------------ per layout */

static void drop_layout(sctx *c) {
  cubert_handle_release(c->src);
  cubert_handle_release(c->dst);
  c->src = c->dst = NULL;
  if (c->raw) {
    if (c->raw_src) cb_bench_raw_free(c->raw, c->raw_dev, c->raw_src);
    if (c->raw_dst) cb_bench_raw_free(c->raw, c->raw_dev, c->raw_dst);
  }
  c->raw_src = c->raw_dst = 0;
  free(c->pattern);
  free(c->packed);
  free(c->packed_in);
  free(c->whole);
  free(c->offs);
  c->pattern = c->packed = c->packed_in = c->whole = NULL;
  c->offs = NULL;
}

static bool setup_layout(sctx *c, const layout *l) {
  c->l = l;
  c->nbytes = cubert_view_bytes(&l->view);
  uint64_t n = c->nbytes / 4, total = l->alloc / 4;
  c->pattern = malloc(l->alloc);
  c->whole = malloc(l->alloc);
  c->packed = malloc(c->nbytes);
  c->packed_in = malloc(c->nbytes);
  c->offs = malloc(n * sizeof *c->offs);
  if (!c->pattern || !c->whole || !c->packed || !c->packed_in || !c->offs) {
    cb_bench_note(c->notes, "%s: out of host memory", l->name);
    return false;
  }
  for (uint64_t i = 0; i < total; i++) c->pattern[i] = pattern_at(i);
  for (uint64_t k = 0; k < n; k++) c->packed_in[k] = pattern_at(k + 77);
  footprint(c);
  cubert_status st = cubert_handle_empty(c->client, l->alloc, &c->src);
  if (!st) st = cubert_handle_empty(c->client, l->alloc, &c->dst);
  if (!st) st = cubert_view_check(c->src, &l->view);
  if (!st) st = cubert_handle_write(c->client, c->src, c->pattern, l->alloc);
  if (!st) st = cubert_sync(c->client);
  if (st) {
    cb_bench_note(c->notes, "%s: cubert: %s", l->name, cubert_last_error_message());
    return false;
  }
  if (c->raw) {
    st = cb_bench_raw_alloc(c->raw, c->raw_dev, l->alloc, &c->raw_src);
    if (!st) st = cb_bench_raw_alloc(c->raw, c->raw_dev, l->alloc, &c->raw_dst);
    if (!st) st = cb_bench_raw_upload(c->raw, c->raw_dev, c->raw_src, c->pattern, l->alloc);
    if (st) {
      cb_bench_note(c->notes, "%s: no raw baseline: %s", l->name, cb_bench_raw_error(c->raw));
      cb_bench_raw_free(c->raw, c->raw_dev, c->raw_src);
      cb_bench_raw_free(c->raw, c->raw_dev, c->raw_dst);
      c->raw_src = c->raw_dst = 0;
    }
  }
  return true;
}

/* ------------------------------------------------------------ report */

static void print_rows(const sctx *c) {
  printf("\n%-11s %-11s %10s %5s %12s %12s %7s  %s\n", "layout", "test", "bytes", "count", "cubert GB/s",
         "raw GB/s", "ratio", "valid");
  for (size_t i = 0; i < c->rows.n; i++) {
    const cb_bench_row *r = &c->rows.v[i];
    char size[32], cu[32] = "-", rw[32] = "-", ra[32] = "-";
    if (r->have_cubert) snprintf(cu, sizeof cu, "%.2f", r->cubert.median);
    if (r->have_raw) snprintf(rw, sizeof rw, "%.2f", r->raw.median);
    double ratio = cb_bench_ratio(r);
    if (ratio > 0) snprintf(ra, sizeof ra, "%.3f", ratio);
    printf("%-11s %-11s %10s %5" PRIu32 " %12s %12s %7s  %s\n", r->section, r->test,
           cb_bench_size_name(r->size, size, sizeof size), r->count, cu, rw, ra,
           r->validated < 0 ? "-" : r->validated ? "pass" : "FAIL");
  }
  printf("ratio = cubert / raw of the medians (higher is better for cubert; 1.0 = no overhead);\n"
         "d2d-kernel's raw is the pitched copy engine (hipMemcpy2D/3DAsync d2d)\n");
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: cubert bench strided [options]\n"
          "\n"
          "Strided copies through cubert beside the vendor's pitched copies done raw in\n"
          "the same run: a column block of an 8192 x 8192 f32 matrix (pitch 32 KiB), rows\n"
          "of 64 B at a pitch of 4 KiB, a 256^3 box of a 512^3 grid. Per layout:\n"
          "cubert_handle_write_strided (h2d), cubert_handle_read_strided (d2h),\n"
          "cubert_handle_copy_strided (d2d) and the built-in cubert_copy_strided kernel\n"
          "(d2d-kernel), each against hipMemcpy2DAsync/hipMemcpy3DAsync (a memcpy per row\n"
          "on the host backend). Every cell's bytes are checked, gaps included.\n"
          "\n"
          "  --reps N         timed repetitions per cell (default 5, 3 with --quick)\n"
          "  --warmup N       untimed repetitions first (default 1)\n"
          "  --backend NAME   hip or host (default: hip when it has devices)\n"
          "  --json FILE      everything as JSON\n"
          "  --csv FILE       every cell as CSV\n"
          "  --quick          small layouts (CI, the host backend)\n"
          "  --quiet          no progress on stderr\n"
          "  --help           this text\n"
          "\n"
          "GB/s of footprint bytes, median. ratio = cubert / raw. Exit status 1 when a\n"
          "check or a measurement failed.\n");
}

static bool open_device(sctx *c) {
  c->dev = cb_bench_basic_open("bench strided", &c->o, &c->rt, &c->info, &c->client, &c->raw, c->notes);
  if (c->dev < 0) return false;
  c->raw_dev = c->info.backend_index;
  if (cubert_builtin_kernel(CUBERT_BUILTIN_COPY_STRIDED, &c->k_copy)) {
    fprintf(stderr, "cubert bench strided: %s\n", cubert_last_error_message());
    return false;
  }
  return true;
}

static int run(sctx *c) {
  if (!open_device(c)) return 1;
  layout ls[3];
  size_t nl = make_layouts(c->o.quick, ls);
  c->steps = (int)nl * T_COUNT * (c->raw ? 2 : 1);
  printf("cubert bench strided: device %d (%s, backend %s)\nbaseline: %s\n", c->dev, c->info.name,
         c->info.backend, c->raw ? cb_bench_raw_describe(c->raw) : "no raw baseline");
  printf("%d warm-up + %d timed repetitions per cell; GB/s of footprint bytes, median\n", c->o.warmup, c->o.reps);
  for (size_t i = 0; i < nl; i++) {
    if (setup_layout(c, &ls[i]))
      for (int t = 0; t < T_COUNT; t++) measure(c, t);
    else
      c->errors++;
    drop_layout(c);
  }
  cb_bench_progress_done(c->o.quiet);
  print_rows(c);
  json_t *doc = cb_bench_basic_doc("cubert bench strided", &c->o, &c->info, c->raw);
  return cb_bench_basic_report("bench strided", &c->o, doc, &c->rows, NULL, c->checks, c->failed, c->errors,
                               c->notes);
}

static cb_bench_basic_parts parts(void *ctx) {
  sctx *c = ctx;
  return (cb_bench_basic_parts){&c->o, &c->rt, &c->client, &c->raw, &c->rows, &c->notes};
}

static int run_ctx(void *ctx) { return run(ctx); }

static void drop(void *ctx) {
  sctx *c = ctx;
  drop_layout(c);
  if (c->k_copy) cubert_kernel_release(c->k_copy);
}

int cb_bench_strided_main(int argc, char **argv) {
  static const cb_bench_basic_def def = {"bench strided", usage, sizeof(sctx), parts, run_ctx, drop};
  return cb_bench_basic_main(&def, argc, argv);
}
