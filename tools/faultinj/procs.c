/* tools/faultinj/procs.c: `cubert faultinj procs`, fault injection and the
 * checker across real processes (docs/faultinj.md, docs/processes.md).
 *
 * The driver spawns 2 or 3 workers (`cubert faultinj procs-worker`, fresh
 * processes with runtimes of their own). Worker 0 owns a CUBERT_MEMORY_SHAREABLE
 * handle and exports it; the others import it. The driver sends each step to
 * the process it names over a pipe, one line each way, and compares every
 * answer with a model of what every process must see:
 *   write P B       P writes B over the whole handle: it succeeds; all read B
 *   failwrite P B   a fault rule injected in P alone (`write nth=1 fault=fail`)
 *                   fails P's write: the bytes are tainted; every process's
 *                   read is refused TAINTED, another's naming P's process id
 *   read P          P reads: B, or the refusal the model says
 *   kill P          SIGKILL P (an importer): every survivor's read is refused
 *                   TAINTED naming P's process id until a write repairs
 * Built-in scenarios (owner->importer, importer->owner, repair, killed
 * process) run first, then N seeded random programs. Exit 1 on a violation;
 * a backend with no device: "skipped: no device", exit 0. */
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cubert/cubert.h"
#include "cubert/faultinj.h"
#include "tools/faultinj/procs.h"

#define PROCS_SIZE 4096
#define PROCS_MAX 3
#define LINE 4096

extern char **environ;

/* ---- the worker ------------------------------------------------------- */

static void answer_refused(const char *word, cubert_status st) {
  char m[LINE];
  snprintf(m, sizeof m, "%s", cubert_last_error_message());
  for (char *c = m; *c; c++)
    if (*c == '\n') *c = ' ';
  printf("%s %s: %s\n", word, cubert_status_name(st), m);
}

int cb_fi_procs_worker(const char *backend) {
  cubert_runtime_options o;
  cubert_runtime_options_init(&o);
  o.backends = backend ? backend : "host";
  cubert_runtime *rt = NULL;
  cubert_client *c = NULL;
  if (cubert_runtime_create(&o, &rt) || cubert_client_create(rt, 0, &c)) {
    fprintf(stderr, "procs-worker: %s\n", cubert_last_error_message());
    return 1;
  }
  cubert_handle *h = NULL;
  unsigned char buf[PROCS_SIZE];
  char line[LINE];
  cubert_status st;
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = '\0';
    unsigned b = 0;
    if (!strcmp(line, "export")) {
      cubert_export_desc d;
      memset(buf, 0, sizeof buf);
      if ((st = cubert_handle_empty_with(c, PROCS_SIZE, CUBERT_MEMORY_SHAREABLE, &h)) ||
          (st = cubert_handle_write(c, h, buf, sizeof buf)) || (st = cubert_sync(c)) ||
          (st = cubert_handle_export(c, h, &d))) {
        answer_refused("refused", st);
      } else {
        printf("desc ");
        for (size_t i = 0; i < sizeof d.bytes; i++) printf("%02x", d.bytes[i]);
        printf("\n");
      }
    } else if (!strncmp(line, "import ", 7)) {
      cubert_export_desc d;
      bool bad = strlen(line + 7) != 2 * sizeof d.bytes;
      for (size_t i = 0; i < sizeof d.bytes && !bad; i++) {
        unsigned v;
        bad = sscanf(line + 7 + 2 * i, "%2x", &v) != 1;
        d.bytes[i] = (unsigned char)v;
      }
      if (bad)
        printf("bad descriptor\n");
      else if ((st = cubert_handle_import(c, &d, &h)))
        answer_refused("refused", st);
      else
        printf("ok\n");
    } else if (h && (sscanf(line, "write %u", &b) == 1 || sscanf(line, "failwrite %u", &b) == 1)) {
      uint32_t rule = 0;
      bool inject = line[0] == 'f';
      if (inject && (st = cubert_faultinj_add(rt, "write nth=1 fault=fail", "procs", &rule, NULL))) {
        answer_refused("norule", st);
      } else {
        memset(buf, (int)b, sizeof buf);
        st = cubert_handle_write(c, h, buf, sizeof buf);
        cubert_status st2 = cubert_sync(c);
        if (!st) st = st2;
        if (st)
          answer_refused("failed", st);
        else
          printf("ok\n");
        if (inject) cubert_faultinj_remove(rt, rule);
      }
    } else if (h && !strcmp(line, "read")) {
      if ((st = cubert_handle_read(c, h, buf, sizeof buf))) {
        answer_refused("refused", st);
      } else {
        size_t i = 1;
        while (i < sizeof buf && buf[i] == buf[0]) i++;
        if (i == sizeof buf)
          printf("ok %u\n", buf[0]);
        else
          printf("mixed %u at 0, %u at %zu\n", buf[0], buf[i], i);
      }
    } else if (!strcmp(line, "quit")) {
      break;
    } else {
      printf("unknown %s\n", line);
    }
    fflush(stdout);
  }
  cubert_handle_release(h);
  cubert_client_destroy(c);
  cubert_runtime_destroy(rt);
  return 0;
}

/* ---- the driver and its model ------------------------------------------ */

typedef struct worker {
  pid_t pid;
  FILE *to, *from;
  bool alive;
} worker;

typedef enum { ST_CLEAN, ST_TAINTED, ST_LOST } cell_state;

typedef struct model {
  cell_state st;
  unsigned byte;
  int who; /* the process whose failure or death tainted the bytes */
} model;

typedef struct step {
  char op; /* 'w' write, 'f' failwrite, 'r' read, 'k' kill */
  int p;
  unsigned b;
} step;

typedef struct run_ctx {
  worker w[PROCS_MAX];
  int n;
  model m;
  int violations;
  const char *label;
  bool verbose;
} run_ctx;

static bool spawn_worker(const char *backend, worker *w) {
  int to[2], from[2];
  if (pipe(to) || pipe(from)) return false;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, to[0], 0);
  posix_spawn_file_actions_adddup2(&fa, from[1], 1);
  posix_spawn_file_actions_addclose(&fa, to[1]);
  posix_spawn_file_actions_addclose(&fa, from[0]);
  char *argv[] = {"cubert", "faultinj", "--backend", (char *)backend, "procs-worker", NULL};
  int rc = posix_spawn(&w->pid, "/proc/self/exe", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(to[0]);
  close(from[1]);
  if (rc) {
    close(to[1]);
    close(from[0]);
    return false;
  }
  w->to = fdopen(to[1], "w");
  w->from = fdopen(from[0], "r");
  w->alive = true;
  return true;
}

static void ask(worker *w, const char *cmd, char *reply) {
  reply[0] = '\0';
  if (fprintf(w->to, "%s\n", cmd) < 0 || fflush(w->to) || !fgets(reply, LINE, w->from)) {
    snprintf(reply, LINE, "no answer (the process ended)");
    return;
  }
  reply[strcspn(reply, "\n")] = '\0';
}

static void violation(run_ctx *x, int i, const step *s, const char *want, const char *got) {
  x->violations++;
  fprintf(stderr, "VIOLATION %s step %d (%c by process %d): expected %s; got: %s\n", x->label, i, s->op, s->p,
          want, got);
}

static bool names(const char *reply, pid_t pid) {
  char want[48];
  snprintf(want, sizeof want, "process %lld", (long long)pid);
  const char *at = strstr(reply, want);
  return at && (at[strlen(want)] < '0' || at[strlen(want)] > '9');
}

static void do_step(run_ctx *x, int i, const step *s) {
  char cmd[64], reply[LINE], want[128];
  worker *w = &x->w[s->p];
  model *m = &x->m;
  if (s->op == 'k') {
    kill(w->pid, SIGKILL);
    waitpid(w->pid, NULL, 0);
    fclose(w->to);
    fclose(w->from);
    w->alive = false;
    m->st = ST_LOST;
    m->who = s->p;
    if (x->verbose) fprintf(stderr, "  %s step %d: k p%d (process %lld)\n", x->label, i, s->p, (long long)w->pid);
    return;
  }
  if (s->op == 'r') {
    ask(w, "read", reply);
    if (m->st == ST_CLEAN) {
      snprintf(want, sizeof want, "ok %u", m->byte);
      if (strcmp(reply, want)) violation(x, i, s, want, reply);
    } else if (m->st == ST_TAINTED || m->st == ST_LOST) {
      bool other = m->who != s->p;
      if (other)
        snprintf(want, sizeof want, "a TAINTED refusal naming process %lld", (long long)x->w[m->who].pid);
      else
        snprintf(want, sizeof want, "a TAINTED refusal");
      if (strncmp(reply, "refused ", 8) || !strstr(reply, "ERR_TAINTED") ||
          (other && !names(reply, x->w[m->who].pid)))
        violation(x, i, s, want, reply);
    }
  } else {
    snprintf(cmd, sizeof cmd, "%s %u", s->op == 'f' ? "failwrite" : "write", s->b);
    ask(w, cmd, reply);
    if (s->op == 'w') {
      if (strcmp(reply, "ok")) violation(x, i, s, "ok", reply);
      m->st = ST_CLEAN;
      m->byte = s->b;
    } else {
      if (strncmp(reply, "failed ", 7) || !strstr(reply, "injected fault"))
        violation(x, i, s, "a failure naming the injected fault", reply);
      m->st = ST_TAINTED;
      m->who = s->p;
    }
  }
  if (x->verbose) fprintf(stderr, "  %s step %d: %c p%d %u -> %s\n", x->label, i, s->op, s->p, s->b, reply);
}

/* One program over `n` processes: export, import, the steps, quit. */
static int run_program(const char *backend, const char *label, int n, const step *steps, int nsteps, bool verbose) {
  run_ctx x = {.n = n, .label = label, .verbose = verbose, .m = {ST_CLEAN, 0, 0}};
  char reply[LINE], cmd[LINE + 8];
  int spawned = 0;
  for (; spawned < n; spawned++)
    if (!spawn_worker(backend, &x.w[spawned])) {
      fprintf(stderr, "VIOLATION %s: could not start process %d\n", label, spawned);
      x.violations++;
      break;
    }
  if (spawned == n) {
    ask(&x.w[0], "export", reply);
    if (strncmp(reply, "desc ", 5)) {
      fprintf(stderr, "VIOLATION %s: export: %s\n", label, reply);
      x.violations++;
    } else {
      snprintf(cmd, sizeof cmd, "import %s", reply + 5);
      for (int p = 1; p < n; p++) {
        ask(&x.w[p], cmd, reply);
        if (strcmp(reply, "ok")) {
          fprintf(stderr, "VIOLATION %s: import in process %d: %s\n", label, p, reply);
          x.violations++;
        }
      }
      for (int i = 0; i < nsteps && !x.violations; i++) do_step(&x, i, &steps[i]);
    }
  }
  for (int p = 0; p < spawned; p++) {
    if (!x.w[p].alive) continue;
    ask(&x.w[p], "quit", reply);
    fclose(x.w[p].to);
    fclose(x.w[p].from);
    int ws = 0;
    waitpid(x.w[p].pid, &ws, 0);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws)) {
      fprintf(stderr, "VIOLATION %s: process %d ended with status %d\n", label, p, ws);
      x.violations++;
    }
  }
  return x.violations;
}

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* A seeded program: 2 or 3 processes, `len` steps of writes, injected
 * failed writes and reads in any process; a third of them end with an
 * importer killed, another survivor's read (which may be another importer's)
 * and its repairing write; then every process still alive reads. */
static int make_program(uint64_t seed, int len, step *out, int *n) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  *n = 2 + (int)(next(&s) % 2);
  int k = 0;
  for (int i = 0; i < len; i++) {
    int r = (int)(next(&s) % 20);
    step st = {r < 8 ? 'w' : r < 13 ? 'f' : 'r', (int)(next(&s) % (uint64_t)*n), (unsigned)(next(&s) % 256)};
    out[k++] = st;
  }
  int victim = -1;
  if (next(&s) % 3 == 0) {
    victim = 1 + (int)(next(&s) % (uint64_t)(*n - 1));
    int survivor = (victim + 1 + (int)(next(&s) % (uint64_t)(*n - 1))) % *n;
    out[k++] = (step){'w', 0, 11};
    out[k++] = (step){'k', victim, 0};
    out[k++] = (step){'r', survivor, 0};
    out[k++] = (step){'w', survivor, 12};
  }
  for (int p = 0; p < *n; p++)
    if (p != victim) out[k++] = (step){'r', p, 0};
  return k;
}

static const struct {
  const char *name;
  int n, len;
  step steps[8];
} scenarios[] = {
    {"owner-to-importer", 2, 3, {{'w', 0, 5}, {'f', 0, 6}, {'r', 1, 0}}},
    {"importer-to-owner", 2, 3, {{'w', 1, 5}, {'f', 1, 6}, {'r', 0, 0}}},
    {"repair", 3, 7, {{'f', 0, 6}, {'r', 1, 0}, {'r', 2, 0}, {'w', 2, 7}, {'r', 0, 0}, {'r', 1, 0}, {'r', 2, 0}}},
    {"killed-importer", 3, 6, {{'w', 0, 3}, {'k', 2, 0}, {'r', 1, 0}, {'w', 1, 4}, {'r', 0, 0}, {'r', 1, 0}}},
};

/* Whether `backend` has a device for the workers. */
static bool has_device(const char *backend) {
  cubert_runtime_options o;
  cubert_runtime_options_init(&o);
  o.backends = backend;
  cubert_runtime *rt = NULL;
  bool yes = cubert_runtime_create(&o, &rt) == CUBERT_OK && cubert_runtime_device_count(rt) > 0;
  cubert_runtime_destroy(rt);
  return yes;
}

int cb_fi_procs(const char *backend, uint64_t seed, uint64_t programs, int len, bool verbose) {
  if (!has_device(backend)) {
    printf("faultinj procs: skipped: no device (backend %s)\n", backend);
    return 0;
  }
  int bad = 0, scen = (int)(sizeof scenarios / sizeof scenarios[0]);
  signal(SIGPIPE, SIG_IGN); /* a worker that died unplanned is a violation, not our end */
  for (int i = 0; i < scen; i++) {
    int v = run_program(backend, scenarios[i].name, scenarios[i].n, scenarios[i].steps, scenarios[i].len, verbose);
    printf("scenario %-18s %s\n", scenarios[i].name, v ? "VIOLATION" : "ok");
    bad += v;
  }
  step steps[64];
  if (len < 1) len = 1;
  if (len > CB_FI_PROCS_MAX_STEPS) len = CB_FI_PROCS_MAX_STEPS;
  for (uint64_t i = 0; i < programs; i++) {
    int n = 0, k = make_program(seed + i, len, steps, &n);
    char label[48];
    snprintf(label, sizeof label, "program seed %llu", (unsigned long long)(seed + i));
    int v = run_program(backend, label, n, steps, k, verbose);
    if (v) fprintf(stderr, "%s (%d processes) failed; replay: --seed %llu --programs 1\n", label, n,
                   (unsigned long long)(seed + i));
    bad += v;
  }
  printf("faultinj procs: %d scenarios and %llu programs (seed %llu) over 2-3 processes: %d violation%s\n", scen,
         (unsigned long long)programs, (unsigned long long)seed, bad, bad == 1 ? "" : "s");
  return bad;
}
