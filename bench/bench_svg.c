/* bench/bench_svg.c: pictures of a `cubert bench peer` run, drawn with
 * cairo's SVG surface from the run's JSON document (so `cubert bench plot`
 * can redraw a run made on a machine without cairo):
 *   PREFIX-matrix.svg  a heatmap per matrix test: the cubert median of each
 *                      pair, its ratio to raw and the pair's topology class
 *   PREFIX-sweep.svg   GB/s against size (both axes logarithmic), cubert
 *                      solid, raw dashed, one colour per test
 * Built without cairo, cb_bench_svg_available() is false and nothing is
 * drawn. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"

#define CB_PI 3.14159265358979323846

bool cb_bench_svg_writable(const char *prefix, const char *command) {
  const char *slash = strrchr(prefix, '/');
  char dir[4096];
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else
    snprintf(dir, sizeof dir, "%.*s", slash == prefix ? 1 : (int)(slash - prefix), prefix);
  if (access(dir, W_OK) != 0) {
    cb_cli_error(command, "--svg: cannot write into %s: %s", dir, strerror(errno));
    return false;
  }
  return true;
}

#ifdef CB_BENCH_HAVE_CAIRO
#include <cairo-svg.h>
#include <cairo.h>
#include <fontconfig/fontconfig.h>

bool cb_bench_svg_available(void) { return true; }

/* ------------------------------------------------------------ JSON access */

static int device_count(json_t *doc) { return (int)json_array_size(json_object_get(doc, "devices")); }

static int device_index(json_t *doc, int i) {
  return (int)json_integer_value(json_object_get(json_array_get(json_object_get(doc, "devices"), (size_t)i), "index"));
}

/* Position in the device list of runtime index `v` (a row's src/dst). */
static int position(json_t *doc, json_t *v) {
  if (!json_is_integer(v)) return -1;
  int n = device_count(doc);
  for (int i = 0; i < n; i++)
    if (device_index(doc, i) == (int)json_integer_value(v)) return i;
  return -1;
}

static const char *str(json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

static double median(json_t *row, const char *side) {
  json_t *s = json_object_get(row, side);
  return json_is_object(s) ? json_number_value(json_object_get(s, "median")) : NAN;
}

/* ------------------------------------------------------------ drawing */

static void color_for(double t, double *r, double *g, double *b) {
  /* dark blue -> teal -> green -> yellow, t in [0, 1] */
  static const double stops[][3] = {{0.19, 0.07, 0.40}, {0.13, 0.40, 0.56}, {0.13, 0.64, 0.53},
                                    {0.48, 0.82, 0.32}, {0.99, 0.91, 0.15}};
  if (!(t >= 0)) t = 0;
  if (t > 1) t = 1;
  double x = t * 4;
  int i = (int)x;
  if (i >= 4) i = 3;
  double f = x - i;
  *r = stops[i][0] + f * (stops[i + 1][0] - stops[i][0]);
  *g = stops[i][1] + f * (stops[i + 1][1] - stops[i][1]);
  *b = stops[i][2] + f * (stops[i + 1][2] - stops[i][2]);
}

static void text_at(cairo_t *cr, double x, double y, double size, bool bold, bool center, const char *s) {
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
  cairo_text_extents_t e;
  cairo_text_extents(cr, s, &e);
  cairo_move_to(cr, center ? x - e.width / 2 - e.x_bearing : x, y);
  cairo_show_text(cr, s);
}

typedef struct panel {
  const char *title;
  const char *section, *test, *diag, *dir;
  bool lower_better;
} panel;

static const panel panels[] = {
    {"Copy engine, GB/s (peer-ce; diagonal d2d)", "matrix", "peer-ce", "d2d", "uni", false},
    {"Copy engine, both directions, sum GB/s", "matrix", "peer-ce", NULL, "bidi", false},
    {"Kernel copy, destination reads, GB/s", "matrix", "peer-read", "d2d-kernel", "uni", false},
    {"Kernel copy, source writes, GB/s", "matrix", "peer-write", "d2d-kernel", "uni", false},
    {"Peer access off (staged via host), GB/s", "matrix", "staged", NULL, "uni", false},
    {"Pointer chase, ns per load (row reads column)", "latency", "chase", "chase", "uni", true},
    /* cubert-mpi bench: rank pairs, at the largest size measured */
    {"cubert send/recv one way, GB/s", "matrix", "send-recv", NULL, "uni", false},
    {"cubert send/recv both ways, sum GB/s", "matrix", "send-recv", NULL, "bidi", false},
    {"cubert send/recv latency, us (half a round trip)", "latency", "send-recv", NULL, "uni", true},
};
#define NPANELS (sizeof panels / sizeof panels[0])

/* The row of panel p for cell (a, b) (positions), or NULL; of several
 * sizes, the first row of the largest. */
static json_t *panel_row(json_t *doc, const panel *p, int a, int b) {
  json_t *res = json_object_get(doc, "results");
  bool bidi = strcmp(p->dir, "bidi") == 0;
  const char *test = a == b ? p->diag : p->test;
  if (!test) return NULL;
  if (bidi && a > b) {
    int t = a;
    a = b;
    b = t;
  }
  json_t *best = NULL;
  json_int_t best_size = -1;
  for (size_t i = 0; i < json_array_size(res); i++) {
    json_t *r = json_array_get(res, i);
    if (strcmp(str(r, "section"), p->section) || strcmp(str(r, "test"), test) || strcmp(str(r, "direction"), p->dir))
      continue;
    json_int_t size = json_integer_value(json_object_get(r, "size"));
    if (position(doc, json_object_get(r, "src")) == a && position(doc, json_object_get(r, "dst")) == b &&
        size > best_size)
      best = r, best_size = size;
  }
  return best;
}

/* "devices" or, for a run over MPI ranks (a "ranks" member), "ranks". */
static const char *units_of(json_t *doc, int n) {
  if (json_object_get(doc, "ranks")) return n == 1 ? "rank" : "ranks";
  return n == 1 ? "device" : "devices";
}

/* 1 written, 0 nothing to draw, -1 failed. */
static int write_matrix(json_t *doc, const char *path) {
  int n = device_count(doc);
  if (n <= 0) return 0;
  bool have[NPANELS];
  int npanels = 0;
  for (size_t p = 0; p < NPANELS; p++) {
    have[p] = false;
    for (int a = 0; a < n && !have[p]; a++)
      for (int b = 0; b < n && !have[p]; b++) have[p] = panel_row(doc, &panels[p], a, b) != NULL;
    npanels += have[p];
  }
  if (!npanels) return 0;
  double cellw = n <= 2 ? 120 : n <= 4 ? 90 : n <= 8 ? 64 : 40;
  double cellh = cellw * 0.6;
  double pw = 60 + cellw * n + 20, ph = 70 + cellh * n + 30;
  int cols = npanels < 3 ? npanels : 3;
  int rows = (npanels + cols - 1) / cols;
  double W = pw * cols + 20, H = ph * rows + 70;
  cairo_surface_t *surf = cairo_svg_surface_create(path, W, H);
  cairo_t *cr = cairo_create(surf);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_set_source_rgb(cr, 0, 0, 0);
  char title[256];
  snprintf(title, sizeof title, "%s: %s, %d %s, %s", str(doc, "tool"), str(doc, "backend"), n, units_of(doc, n),
           str(doc, "date"));
  text_at(cr, 20, 26, 15, true, false, title);
  text_at(cr, 20, 46, 11, false, false,
          "cell: cubert median (largest size); (ratio cubert/raw); pair class. Colour scaled per panel, brighter = "
          "better.");
  int k = 0;
  for (size_t p = 0; p < NPANELS; p++) {
    if (!have[p]) continue;
    double x0 = 10 + (k % cols) * pw, y0 = 60 + (k / cols) * ph;
    k++;
    double lo = INFINITY, hi = -INFINITY;
    for (int a = 0; a < n; a++)
      for (int b = 0; b < n; b++) {
        double v = median(panel_row(doc, &panels[p], a, b), "cubert");
        if (isfinite(v) && v > 0) {
          lo = fmin(lo, log(v));
          hi = fmax(hi, log(v));
        }
      }
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, x0 + 10, y0 + 20, 12, true, false, panels[p].title);
    text_at(cr, x0 + 10, y0 + 38, 10, false, false, panels[p].lower_better ? "row: executing device" : "row: source");
    for (int a = 0; a < n; a++) {
      char lbl[16];
      snprintf(lbl, sizeof lbl, "%d", device_index(doc, a));
      cairo_set_source_rgb(cr, 0, 0, 0);
      text_at(cr, x0 + 40, y0 + 60 + cellh * a + cellh / 2 + 4, 11, true, true, lbl);
      text_at(cr, x0 + 60 + cellw * a + cellw / 2, y0 + 55, 11, true, true, lbl);
      for (int b = 0; b < n; b++) {
        double cx = x0 + 60 + cellw * b, cy = y0 + 60 + cellh * a;
        json_t *r = panel_row(doc, &panels[p], a, b);
        double v = median(r, "cubert");
        if (r && isfinite(v) && v > 0) {
          double t = hi > lo ? (log(v) - lo) / (hi - lo) : 1.0;
          if (panels[p].lower_better) t = 1 - t;
          double cr_, cg, cb;
          color_for(t, &cr_, &cg, &cb);
          cairo_set_source_rgb(cr, cr_, cg, cb);
        } else {
          cairo_set_source_rgb(cr, 0.92, 0.92, 0.92);
        }
        cairo_rectangle(cr, cx + 1, cy + 1, cellw - 2, cellh - 2);
        cairo_fill(cr);
        if (!r) continue;
        bool dark = isfinite(v) && v > 0 && (hi <= lo || (panels[p].lower_better ? (hi - log(v)) : (log(v) - lo)) <
                                                              0.55 * (hi - lo));
        if (dark) cairo_set_source_rgb(cr, 1, 1, 1);
        else cairo_set_source_rgb(cr, 0, 0, 0);
        char buf[48];
        if (isfinite(v)) snprintf(buf, sizeof buf, "%.4g", v);
        else snprintf(buf, sizeof buf, "error");
        json_t *valid = json_object_get(r, "validated");
        if (json_is_false(valid)) strncat(buf, " !", sizeof buf - strlen(buf) - 1);
        text_at(cr, cx + cellw / 2, cy + cellh * 0.40, cellw >= 60 ? 11 : 9, true, true, buf);
        double ratio = json_number_value(json_object_get(r, "ratio"));
        char line2[48];
        if (json_is_number(json_object_get(r, "ratio"))) snprintf(line2, sizeof line2, "(%.2f) %s", ratio, str(r, "link"));
        else snprintf(line2, sizeof line2, "%s", str(r, "link"));
        text_at(cr, cx + cellw / 2, cy + cellh * 0.78, cellw >= 60 ? 9 : 7, false, true, line2);
      }
    }
  }
  cairo_destroy(cr);
  cairo_surface_finish(surf);
  int ok = cairo_surface_status(surf) == CAIRO_STATUS_SUCCESS ? 1 : -1;
  cairo_surface_destroy(surf);
  return ok;
}

/* ------------------------------------------------------------ sweep */

typedef struct series {
  char name[48];
  double x[64], yc[64], yr[64];
  int n;
  bool cubert; /* has cubert's figures (else the raw line alone) */
} series;

/* Whether row r belongs to the size sweep: the "sweep" section; in a run
 * without one (cubert-mpi bench), the matrix rows of the first pair (the
 * first two entries of "devices") when they hold several sizes. */
static bool in_sweep(json_t *doc, json_t *r, bool from_matrix) {
  if (!from_matrix) return strcmp(str(r, "section"), "sweep") == 0;
  return strcmp(str(r, "section"), "matrix") == 0 && position(doc, json_object_get(r, "src")) == 0 &&
         position(doc, json_object_get(r, "dst")) == 1;
}

static bool sweep_from_matrix(json_t *doc) {
  json_t *res = json_object_get(doc, "results");
  json_int_t size = -1;
  bool several = false;
  for (size_t i = 0; i < json_array_size(res); i++) {
    json_t *r = json_array_get(res, i);
    if (in_sweep(doc, r, false)) return false;
    if (!in_sweep(doc, r, true)) continue;
    json_int_t z = json_integer_value(json_object_get(r, "size"));
    several = several || (size >= 0 && z != size);
    size = z;
  }
  return several;
}

static int write_sweep(json_t *doc, const char *path) {
  json_t *res = json_object_get(doc, "results");
  series *s = calloc(16, sizeof *s);
  int ns = 0;
  if (!s) return -1;
  bool from_matrix = sweep_from_matrix(doc);
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (size_t i = 0; i < json_array_size(res); i++) {
    json_t *r = json_array_get(res, i);
    if (!in_sweep(doc, r, from_matrix) || strcmp(str(r, "unit"), "GB/s")) continue;
    char name[48];
    snprintf(name, sizeof name, "%s%s", str(r, "test"), strcmp(str(r, "direction"), "bidi") == 0 ? " bidi" : "");
    int k = 0;
    while (k < ns && strcmp(s[k].name, name)) k++;
    if (k == ns) {
      if (ns == 16) continue;
      snprintf(s[ns++].name, sizeof s[0].name, "%s", name);
    }
    if (s[k].n == 64) continue;
    double x = log2((double)json_integer_value(json_object_get(r, "size")));
    double yc = median(r, "cubert"), yr = median(r, "raw");
    s[k].x[s[k].n] = x;
    s[k].yc[s[k].n] = yc;
    s[k].yr[s[k].n] = yr;
    s[k].n++;
    s[k].cubert = s[k].cubert || (isfinite(yc) && yc > 0);
    xmin = fmin(xmin, x);
    xmax = fmax(xmax, x);
    if (isfinite(yc) && yc > 0) ymin = fmin(ymin, yc), ymax = fmax(ymax, yc);
    if (isfinite(yr) && yr > 0) ymin = fmin(ymin, yr), ymax = fmax(ymax, yr);
  }
  if (!ns || !isfinite(ymin)) {
    free(s);
    return 0;
  }
  if (xmax <= xmin) xmax = xmin + 1;
  double ly0 = floor(log10(ymin)), ly1 = ceil(log10(ymax));
  if (ly1 <= ly0) ly1 = ly0 + 1;
  double W = 900, H = 560, L = 80, R = 200, T = 60, B = 60;
  double pw = W - L - R, ph = H - T - B;
  cairo_surface_t *surf = cairo_svg_surface_create(path, W, H);
  cairo_t *cr = cairo_create(surf);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_set_source_rgb(cr, 0, 0, 0);
  char title[256];
  snprintf(title, sizeof title, "%s: size sweep%s (%s, %s)", str(doc, "tool"),
           from_matrix ? (json_object_get(doc, "ranks") ? ", ranks 0 and 1" : ", the first pair") : "",
           str(doc, "backend"), str(doc, "date"));
  text_at(cr, 20, 26, 15, true, false, title);
  text_at(cr, 20, 44, 11, false, false,
          "GB/s (1e9 B/s) against bytes per copy; solid: cubert, dashed: raw baseline (a raw series alone: dashed)");
  /* axes and grid */
  cairo_set_line_width(cr, 1);
  for (double d = ly0; d <= ly1 + 1e-9; d += 1) {
    double y = T + ph - (d - ly0) / (ly1 - ly0) * ph;
    cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
    cairo_move_to(cr, L, y);
    cairo_line_to(cr, L + pw, y);
    cairo_stroke(cr);
    char lbl[32];
    snprintf(lbl, sizeof lbl, "%g", pow(10, d));
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, L - 8 - 6 * (double)strlen(lbl), y + 4, 11, false, false, lbl);
  }
  for (int e = (int)ceil(xmin); e <= (int)floor(xmax); e++) {
    if ((e - (int)ceil(xmin)) % 2) continue;
    double x = L + (e - xmin) / (xmax - xmin) * pw;
    cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
    cairo_move_to(cr, x, T);
    cairo_line_to(cr, x, T + ph);
    cairo_stroke(cr);
    char lbl[32];
    cb_bench_size_name(UINT64_C(1) << e, lbl, sizeof lbl);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, x, T + ph + 18, 10, false, true, lbl);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, L, T, pw, ph);
  cairo_stroke(cr);
  text_at(cr, L + pw / 2, H - 14, 11, false, true, "bytes per copy");
  cairo_save(cr);
  cairo_translate(cr, 22, T + ph / 2);
  cairo_rotate(cr, -CB_PI / 2);
  text_at(cr, 0, 0, 11, false, true, "GB/s (median)");
  cairo_restore(cr);
  static const double pal[][3] = {{0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17}, {0.84, 0.15, 0.16},
                                  {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29}, {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50},
                                  {0.74, 0.74, 0.13}, {0.09, 0.75, 0.81}};
  for (int k = 0; k < ns; k++) {
    const double *c = pal[k % 10];
    for (int side = 0; side < 2; side++) {
      const double *y = side ? s[k].yr : s[k].yc;
      double dash[] = {6, 4};
      cairo_set_dash(cr, dash, side ? 2 : 0, 0);
      cairo_set_line_width(cr, side ? 1.5 : 2.2);
      cairo_set_source_rgb(cr, c[0], c[1], c[2]);
      bool pen = false;
      for (int i = 0; i < s[k].n; i++) {
        if (!(isfinite(y[i]) && y[i] > 0)) {
          pen = false;
          continue;
        }
        double px = L + (s[k].x[i] - xmin) / (xmax - xmin) * pw;
        double py = T + ph - (log10(y[i]) - ly0) / (ly1 - ly0) * ph;
        if (pen) cairo_line_to(cr, px, py);
        else cairo_move_to(cr, px, py);
        pen = true;
      }
      cairo_stroke(cr);
      if (!side) /* dots on cubert's measured points */
        for (int i = 0; i < s[k].n; i++) {
          if (!(isfinite(y[i]) && y[i] > 0)) continue;
          double px = L + (s[k].x[i] - xmin) / (xmax - xmin) * pw;
          double py = T + ph - (log10(y[i]) - ly0) / (ly1 - ly0) * ph;
          cairo_arc(cr, px, py, 2.5, 0, 2 * CB_PI);
          cairo_fill(cr);
        }
    }
    double ly = T + 10 + 20 * k;
    double legend_dash[] = {6, 4};
    cairo_set_dash(cr, legend_dash, s[k].cubert ? 0 : 2, 0);
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    cairo_set_line_width(cr, s[k].cubert ? 2.2 : 1.5);
    cairo_move_to(cr, L + pw + 15, ly);
    cairo_line_to(cr, L + pw + 40, ly);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, L + pw + 46, ly + 4, 11, false, false, s[k].name);
  }
  cairo_destroy(cr);
  cairo_surface_finish(surf);
  int ok = cairo_surface_status(surf) == CAIRO_STATUS_SUCCESS ? 1 : -1;
  cairo_surface_destroy(surf);
  free(s);
  return ok;
}

bool cb_bench_svg_write(json_t *doc, const char *prefix, FILE *log) {
  size_t n = strlen(prefix) + 16;
  char *path = malloc(n);
  if (!path) return false;
  bool ok = true;
  for (int k = 0; k < 2; k++) {
    snprintf(path, n, "%s-%s.svg", prefix, k ? "sweep" : "matrix");
    int r = k ? write_sweep(doc, path) : write_matrix(doc, path);
    if (r > 0) fprintf(log, "wrote %s\n", path);
    else if (r < 0) {
      fprintf(stderr, "%s bench: could not write %s\n", cb_cli_program(), path);
      ok = false;
    }
  }
  free(path);
  /* cairo and fontconfig keep font caches for the process: give them
   * back, so leak checkers (ASan in CI) see a clean exit */
  cairo_debug_reset_static_data();
  FcFini();
  return ok;
}

#else /* no cairo */

bool cb_bench_svg_available(void) { return false; }

bool cb_bench_svg_write(json_t *doc, const char *prefix, FILE *log) {
  (void)doc;
  (void)prefix;
  (void)log;
  fprintf(stderr, "%s bench: built without cairo (libcairo2-dev): no SVG\n", cb_cli_program());
  return false;
}

#endif
