/* bench/bench_out.c: helpers of `cubert bench`: the clock, sizes, progress,
 * statistics, and result rows as JSON and CSV. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/env.h"
#include "bench/bench.h"
#include "cli/commands.h"

double cb_bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cb_bench_note(json_t *notes, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  json_array_append_new(notes, json_string(buf));
}

int cb_bench_parse_basic(const char *command, void (*usage)(FILE *out), int argc, char **argv,
                         cb_bench_basic_opts *o) {
  o->reps = -1;
  o->warmup = -1;
  const cb_cli_opt opts[] = {CB_INT("reps", &o->reps, 1, 10000),  CB_INT("warmup", &o->warmup, 0, 10000),
                             CB_CHOICE("backend", &o->backend, "hip|host"), CB_OUTPUT("json", &o->json),
                             CB_OUTPUT("csv", &o->csv),              CB_FLAG("quick", 0, &o->quick),
                             CB_FLAG("quiet", 0, &o->quiet),         CB_END};
  const cb_cli_spec spec = {command, usage, opts, 0, 0, NULL};
  int first, rc = cb_cli_parse(&spec, argc, argv, &first);
  if (rc != CB_CLI_PARSED) return rc;
  if (o->reps < 0) o->reps = o->quick ? 3 : 5;
  if (o->warmup < 0) o->warmup = 1;
  return cb_cli_open_outputs(&spec) ? CB_CLI_PARSED : CB_CLI_FAILED;
}

int cb_bench_pick_device(cubert_runtime *rt, const char *backend, const char *command, cubert_device_info *info) {
  int total = cubert_runtime_device_count(rt);
  for (int pass = 0; pass < 2; pass++)
    for (int d = 0; d < total; d++) {
      if (cubert_runtime_device_info(rt, d, info)) continue;
      if (strcmp(info->backend, backend ? backend : pass ? "host" : "hip") == 0) return d;
    }
  fprintf(stderr, "cubert %s: no %s device in the backends opened:", command, backend ? backend : "hip or host");
  for (int i = 0; i < cubert_runtime_backend_count(rt); i++) fprintf(stderr, " %s", cubert_runtime_backend_name(rt, i));
  fprintf(stderr, " (CUBERT_BACKENDS or --backend choose them)\n");
  return -1;
}

int cb_bench_basic_open(const char *command, cb_bench_basic_opts *o, cubert_runtime **rt, cubert_device_info *info,
                        cubert_client **client, cb_bench_raw **raw, json_t *notes) {
  *client = NULL;
  *raw = NULL;
  cubert_runtime_options ro;
  cubert_runtime_options_init(&ro);
  ro.backends = o->backend;
  if (cubert_runtime_create(&ro, rt)) {
    fprintf(stderr, "cubert %s: cubert_runtime_create: %s\n", command, cubert_last_error_message());
    return -1;
  }
  int dev = cb_bench_pick_device(*rt, o->backend, command, info);
  if (dev < 0) return -1;
  o->backend = info->backend;
  if (cubert_client_create(*rt, dev, client)) {
    fprintf(stderr, "cubert %s: client: %s\n", command, cubert_last_error_message());
    return -1;
  }
  if (cb_bench_raw_open(info->backend, raw)) {
    *raw = NULL;
    cb_bench_note(notes, "no raw baseline: the raw %s calls are not available", info->backend);
  }
  return dev;
}

json_t *cb_bench_basic_doc(const char *tool, const cb_bench_basic_opts *o, const cubert_device_info *info,
                           const cb_bench_raw *raw) {
  json_t *doc = cb_bench_json_head(tool, o->backend);
  json_object_set_new(doc, "device", json_string(info->name));
  json_object_set_new(doc, "raw_baseline", json_string(raw ? cb_bench_raw_describe(raw) : "none"));
  json_t *opts = json_object();
  json_object_set_new(opts, "reps", json_integer(o->reps));
  json_object_set_new(opts, "warmup", json_integer(o->warmup));
  json_object_set_new(opts, "quick", json_boolean(o->quick));
  json_object_set_new(doc, "options", opts);
  return doc;
}

int cb_bench_basic_report(const char *command, const cb_bench_basic_opts *o, json_t *doc, const cb_bench_rows *rows,
                          json_t *targets, int checks, int failed, int errors, json_t *notes) {
  size_t nn = json_array_size(notes);
  if (nn) printf("\nNotes:\n");
  for (size_t i = 0; i < nn; i++) printf("  %s\n", json_string_value(json_array_get(notes, i)));
  bool passed = failed == 0 && checks > 0;
  printf("\nvalidation: %s (%d checks, %d failed; %d measurement errors)\n", passed ? "passed" : "FAILED", checks,
         failed, errors);
  int rc = passed && errors == 0 ? 0 : 1;
  if (!targets) targets = json_array();
  cb_bench_json_tail(doc, rows, targets, (long)checks, (long)failed, (long)errors, notes);
  json_decref(targets);
  if (o->json.file && !cb_bench_write_json(doc, o->json.file, command)) rc = 1;
  json_decref(doc);
  if (o->csv.file && !cb_bench_rows_csv(rows, o->csv.file)) rc = 1;
  return rc;
}

bool cb_bench_basic_close(const char *command, cb_bench_basic_opts *o, cubert_client *client, cb_bench_raw *raw,
                          cubert_runtime *rt) {
  bool ok = cb_cli_output_close(command, "json", &o->json);
  if (!cb_cli_output_close(command, "csv", &o->csv)) ok = false;
  if (client) cubert_client_destroy(client);
  if (raw) cb_bench_raw_close(raw);
  if (rt) cubert_runtime_destroy(rt);
  return ok;
}

int cb_bench_basic_main(const cb_bench_basic_def *def, int argc, char **argv) {
  void *ctx = calloc(1, def->size);
  if (!ctx) return 1;
  cb_bench_basic_parts p = def->parts(ctx);
  int rc = cb_bench_parse_basic(def->command, def->usage, argc, argv, p.o);
  if (rc != CB_CLI_PARSED) {
    free(ctx);
    return rc;
  }
  *p.notes = json_array();
  rc = def->run(ctx);
  if (def->drop) def->drop(ctx);
  if (!cb_bench_basic_close(def->command, p.o, *p.client, *p.raw, *p.rt)) rc = 1;
  cb_bench_rows_free(p.rows);
  json_decref(*p.notes);
  free(ctx);
  return rc;
}

/* ------------------------------------------------------------ sizes */

bool cb_bench_parse_size(const char *text, uint64_t *bytes) {
  uint64_t b = 0;
  if (!cb_parse_size(text, &b) || b == 0) return false;
  *bytes = b;
  return true;
}

int cb_bench_cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

bool cb_bench_parse_sizes(const char *text, uint64_t **sizes, size_t *count, char *message,
                          size_t capacity) {
  uint64_t *v = NULL;
  size_t n = 0, cap = 0;
  char *copy = strdup(text ? text : "");
  if (!copy) {
    snprintf(message, capacity, "out of memory");
    return false;
  }
  bool ok = true;
  char *save = NULL;
  for (char *item = strtok_r(copy, ",", &save); item && ok; item = strtok_r(NULL, ",", &save)) {
    char *dots = strstr(item, "..");
    uint64_t lo, hi, factor = 2;
    if (dots) {
      *dots = '\0';
      char *hi_text = dots + 2;
      char *colon = strchr(hi_text, ':');
      if (colon) {
        *colon = '\0';
        char *end = NULL;
        unsigned long long f = strtoull(colon + 1, &end, 10);
        if (!end || *end || f < 2 || f > 1024) {
          snprintf(message, capacity, "--sizes: factor '%s' is not an integer from 2 to 1024", colon + 1);
          ok = false;
          break;
        }
        factor = f;
      }
      if (!cb_bench_parse_size(item, &lo) || !cb_bench_parse_size(hi_text, &hi) || hi < lo) {
        snprintf(message, capacity, "--sizes: '%s..%s' is not a range of sizes (e.g. 1K..1G)", item, hi_text);
        ok = false;
        break;
      }
    } else {
      if (!cb_bench_parse_size(item, &lo)) {
        snprintf(message, capacity, "--sizes: '%s' is not a size (e.g. 4096, 64K, 256M, 1G)", item);
        ok = false;
        break;
      }
      hi = lo;
    }
    for (uint64_t s = lo; s <= hi; s *= factor) {
      if (n == cap) {
        cap = cap ? cap * 2 : 32;
        uint64_t *nv = realloc(v, cap * sizeof *nv);
        if (!nv) {
          snprintf(message, capacity, "out of memory");
          ok = false;
          break;
        }
        v = nv;
      }
      v[n++] = s;
      if (n > 4096) {
        snprintf(message, capacity, "--sizes: more than 4096 sizes");
        ok = false;
        break;
      }
      if (s > UINT64_MAX / factor) break;
    }
  }
  free(copy);
  if (ok && n == 0) {
    snprintf(message, capacity, "--sizes: empty list");
    ok = false;
  }
  if (!ok) {
    free(v);
    return false;
  }
  qsort(v, n, sizeof *v, cb_bench_cmp_u64);
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (m == 0 || v[m - 1] != v[i]) v[m++] = v[i];
  *sizes = v;
  *count = m;
  return true;
}

const char *cb_bench_size_name(uint64_t bytes, char *buf, size_t capacity) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t u = 0;
  double v = (double)bytes;
  while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1024.0;
    u++;
  }
  if (v == floor(v)) snprintf(buf, capacity, "%.0f %s", v, units[u]);
  else snprintf(buf, capacity, "%.1f %s", v, units[u]);
  return buf;
}

/* ------------------------------------------------------------ progress */

static bool progress_open;

void cb_bench_progress(bool quiet, int step, int total, const char *fmt, ...) {
  if (quiet) return;
  static int tty = -1;
  if (tty < 0) tty = isatty(STDERR_FILENO);
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  /* time left: the mean time of the steps so far times the steps to come */
  static double start;
  double t = cb_bench_now();
  if (step <= 1) start = t;
  char eta[48] = "";
  if (step > 1 && total >= step) snprintf(eta, sizeof eta, ", about %.0f s left", (t - start) / (step - 1) * (total - step + 1));
  if (tty) {
    fprintf(stderr, "\r\033[K[%d/%d%s] %s", step, total, eta, line);
    progress_open = true;
  } else {
    fprintf(stderr, "[%d/%d%s] %s\n", step, total, eta, line);
  }
  fflush(stderr);
}

void cb_bench_progress_done(bool quiet) {
  if (!quiet && progress_open) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
  }
  progress_open = false;
}

/* ------------------------------------------------------------ statistics */

int cb_bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

cb_bench_stats cb_bench_stats_of(double *samples, int n) {
  cb_bench_stats s = {0};
  if (n <= 0) return s;
  qsort(samples, (size_t)n, sizeof *samples, cb_bench_cmp_double);
  s.n = n;
  s.min = samples[0];
  s.max = samples[n - 1];
  s.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  double sum = 0;
  for (int i = 0; i < n; i++) sum += samples[i];
  s.mean = sum / n;
  if (n > 1 && s.mean != 0) {
    double sq = 0;
    for (int i = 0; i < n; i++) sq += (samples[i] - s.mean) * (samples[i] - s.mean);
    s.cv = sqrt(sq / (n - 1)) / fabs(s.mean);
  }
  return s;
}

/* A number JSON can hold (NaN and infinities become null). */
static json_t *number(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *cb_bench_stats_json(const cb_bench_stats *s, const double *samples, int n) {
  json_t *o = json_object();
  json_object_set_new(o, "median", number(s->median));
  json_object_set_new(o, "min", number(s->min));
  json_object_set_new(o, "max", number(s->max));
  json_object_set_new(o, "mean", number(s->mean));
  json_object_set_new(o, "cv", number(s->cv));
  json_object_set_new(o, "n", json_integer(s->n));
  if (samples) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, number(samples[i]));
    json_object_set_new(o, "samples", a);
  }
  return o;
}

/* ------------------------------------------------------------ rows */

double cb_bench_ratio(const cb_bench_row *r) {
  if (!r->have_cubert || !r->have_raw || r->raw.median == 0) return 0;
  return r->cubert.median / r->raw.median;
}

cb_bench_row *cb_bench_rows_add(cb_bench_rows *rows) {
  if (rows->n == rows->cap) {
    size_t cap = rows->cap ? rows->cap * 2 : 64;
    cb_bench_row *v = realloc(rows->v, cap * sizeof *v);
    if (!v) return NULL;
    rows->v = v;
    rows->cap = cap;
  }
  cb_bench_row *r = &rows->v[rows->n++];
  memset(r, 0, sizeof *r);
  r->validated = -1;
  r->src = r->dst = -1;
  snprintf(r->link, sizeof r->link, "?");
  snprintf(r->dir, sizeof r->dir, "uni");
  return r;
}

void cb_bench_row_set(cb_bench_row *row, bool raw, double *samples, int n) {
  double *keep = n > 0 ? malloc((size_t)n * sizeof *keep) : NULL;
  if (keep) memcpy(keep, samples, (size_t)n * sizeof *keep);
  cb_bench_stats s = cb_bench_stats_of(samples, n);
  if (raw) {
    row->raw = s;
    row->raw_samples = keep;
    row->have_raw = true;
  } else {
    row->cubert = s;
    row->cubert_samples = keep;
    row->have_cubert = true;
  }
}

void cb_bench_rows_free(cb_bench_rows *rows) {
  for (size_t i = 0; i < rows->n; i++) {
    free(rows->v[i].cubert_samples);
    free(rows->v[i].raw_samples);
  }
  free(rows->v);
  rows->v = NULL;
  rows->n = rows->cap = 0;
}

json_t *cb_bench_json_head(const char *tool, const char *backend) {
  json_t *doc = json_object();
  json_object_set_new(doc, "tool", json_string(tool));
  json_object_set_new(doc, "cubert_version", json_string(cubert_version()));
  char date[64];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  json_object_set_new(doc, "date", json_string(date));
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  json_object_set_new(doc, "host", json_string(host));
  json_object_set_new(doc, "backend", json_string(backend));
  json_t *env = json_object();
  static const char *const copy_env[] = {"HSA_ENABLE_SDMA", "ROC_P2P_SDMA_SIZE", "GPU_FORCE_BLIT_COPY_SIZE"};
  for (size_t i = 0; i < sizeof copy_env / sizeof copy_env[0]; i++) {
    const char *v = getenv(copy_env[i]);
    json_object_set_new(env, copy_env[i], v ? json_string(v) : json_null());
  }
  json_object_set_new(doc, "copy_env", env);
  return doc;
}

void cb_bench_json_tail(json_t *doc, const cb_bench_rows *rows, json_t *targets, long checks,
                        long failed, long errors, json_t *notes) {
  json_t *res = json_array();
  for (size_t i = 0; i < rows->n; i++) json_array_append_new(res, cb_bench_row_json(&rows->v[i]));
  json_object_set_new(doc, "results", res);
  json_object_set_new(doc, "targets", json_incref(targets));
  json_t *v = json_object();
  json_object_set_new(v, "checks", json_integer(checks));
  json_object_set_new(v, "failed", json_integer(failed));
  json_object_set_new(v, "errors", json_integer(errors));
  json_object_set_new(v, "passed", json_boolean(failed == 0 && checks > 0));
  json_object_set_new(doc, "validation", v);
  json_object_set_new(doc, "notes", json_incref(notes));
}

json_t *cb_bench_row_json(const cb_bench_row *r) {
  json_t *o = json_object();
  json_object_set_new(o, "section", json_string(r->section));
  json_object_set_new(o, "test", json_string(r->test));
  json_object_set_new(o, "direction", json_string(r->dir));
  json_object_set_new(o, "src", r->src >= 0 ? json_integer(r->src) : json_string("host"));
  json_object_set_new(o, "dst", r->dst >= 0 ? json_integer(r->dst) : json_string("host"));
  json_object_set_new(o, "link", json_string(r->link));
  if (r->engine[0]) json_object_set_new(o, "engine", json_string(r->engine));
  json_object_set_new(o, "size", json_integer((json_int_t)r->size));
  json_object_set_new(o, "count", json_integer(r->count));
  json_object_set_new(o, "unit", json_string(r->unit));
  json_object_set_new(o, "higher_is_better", json_boolean(r->higher_better));
  json_object_set_new(o, "cubert", r->have_cubert ? cb_bench_stats_json(&r->cubert, r->cubert_samples, r->cubert.n)
                                                  : json_null());
  json_object_set_new(o, "raw", r->have_raw ? cb_bench_stats_json(&r->raw, r->raw_samples, r->raw.n) : json_null());
  json_object_set_new(o, "baseline", json_string(r->baseline[0] ? r->baseline : "raw"));
  double ratio = cb_bench_ratio(r);
  json_object_set_new(o, "ratio", ratio > 0 ? number(ratio) : json_null());
  if (strcmp(r->dir, "bidi") == 0) {
    json_t *d = json_object();
    json_object_set_new(d, "cubert_forward", number(r->cubert_fwd));
    json_object_set_new(d, "cubert_reverse", number(r->cubert_rev));
    json_object_set_new(d, "raw_forward", number(r->raw_fwd));
    json_object_set_new(d, "raw_reverse", number(r->raw_rev));
    json_object_set_new(o, "directions", d);
  }
  json_object_set_new(o, "validated", r->validated < 0 ? json_null() : json_boolean(r->validated == 1));
  if (r->note[0]) json_object_set_new(o, "note", json_string(r->note));
  if (r->engine_ratio > 0) json_object_set_new(o, "copy_engine_ratio", json_real(r->engine_ratio));
  return o;
}

static void csv_text(FILE *out, const char *s) {
  bool quote = strpbrk(s, ",\"\n") != NULL;
  if (!quote) {
    fputs(s, out);
    return;
  }
  fputc('"', out);
  for (; *s; s++) {
    if (*s == '"') fputc('"', out);
    fputc(*s, out);
  }
  fputc('"', out);
}

static void csv_num(FILE *out, bool have, double v) {
  if (have && isfinite(v)) fprintf(out, ",%.6g", v);
  else fputs(",", out);
}

bool cb_bench_rows_csv(const cb_bench_rows *rows, FILE *out) {
  fputs("section,test,direction,src,dst,link,size,count,unit,"
        "cubert_median,cubert_min,cubert_max,cubert_cv,raw_median,raw_min,raw_max,raw_cv,"
        "ratio,cubert_forward,cubert_reverse,raw_forward,raw_reverse,validated,baseline,note\n",
        out);
  for (size_t i = 0; i < rows->n; i++) {
    const cb_bench_row *r = &rows->v[i];
    bool bidi = strcmp(r->dir, "bidi") == 0;
    csv_text(out, r->section);
    fputc(',', out);
    csv_text(out, r->test);
    fprintf(out, ",%s,", r->dir);
    if (r->src >= 0) fprintf(out, "%d,", r->src);
    else fputs("host,", out);
    if (r->dst >= 0) fprintf(out, "%d,", r->dst);
    else fputs("host,", out);
    csv_text(out, r->link);
    fprintf(out, ",%" PRIu64 ",%" PRIu32 ",%s", r->size, r->count, r->unit);
    csv_num(out, r->have_cubert, r->cubert.median);
    csv_num(out, r->have_cubert, r->cubert.min);
    csv_num(out, r->have_cubert, r->cubert.max);
    csv_num(out, r->have_cubert, r->cubert.cv);
    csv_num(out, r->have_raw, r->raw.median);
    csv_num(out, r->have_raw, r->raw.min);
    csv_num(out, r->have_raw, r->raw.max);
    csv_num(out, r->have_raw, r->raw.cv);
    double ratio = cb_bench_ratio(r);
    csv_num(out, ratio > 0, ratio);
    csv_num(out, bidi && r->have_cubert, r->cubert_fwd);
    csv_num(out, bidi && r->have_cubert, r->cubert_rev);
    csv_num(out, bidi && r->have_raw, r->raw_fwd);
    csv_num(out, bidi && r->have_raw, r->raw_rev);
    fprintf(out, ",%s,", r->validated < 0 ? "" : r->validated ? "pass" : "FAIL");
    csv_text(out, r->baseline[0] ? r->baseline : "raw");
    fputc(',', out);
    csv_text(out, r->note);
    fputc('\n', out);
  }
  return !ferror(out);
}

bool cb_bench_write_json(json_t *root, FILE *out, const char *command) {
  if (json_dumpf(root, out, JSON_INDENT(1) | JSON_REAL_PRECISION(8)) != 0 || fputc('\n', out) == EOF) {
    cb_cli_error(command, "--json: writing the JSON failed: %s", strerror(errno));
    return false;
  }
  return true;
}
