/* tests/test_hip_gfx90a.c: every built-in kernel compiles for a real GPU
 * target with the platform's run-time compiler, without a GPU: gfx90a
 * (MI250X) through hiprtc on the AMD build (a code object: ELF naming the
 * kernel), sm_90 (H100/H200) through NVRTC on the NVIDIA build (PTX with the
 * kernel's .entry). A broken source fails with the compiler's log. The disk
 * cache serves a second compile, rebuilds a corrupt entry, and stays whole
 * when several processes write it at once.
 *
 * Built without HIP, each test prints "skipped: no HIP backend". */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/hip/hip_compile.h"
#include "backends/hip/hip_testing.h"
#include "backends/backend.h"
#include "cubert/cubert.h"
#include "cubert/kernels.h"

static bool hip_built(void) {
  if (cubert_backend_hip() != NULL) return true;
  fprintf(stderr, "skipped: no HIP backend\n");
  return false;
}

static bool on_amd(void) { return strcmp(cb_hip_platform(), "amd") == 0; }

/* The target compiled for: the AMD one this test is named after, or the
 * H200's on the NVIDIA platform. */
static const char *target(void) { return on_amd() ? "gfx90a" : "sm_90"; }

static cubert_backend_kernel from_desc(const cubert_kernel_desc *d) {
  cubert_backend_kernel k;
  memset(&k, 0, sizeof k);
  k.name = d->name;
  k.entry = d->entry ? d->entry : d->name;
  k.source = d->source;
  k.options = d->compile_options;
  k.params = d->params;
  k.nparams = d->nparams;
  k.source_hash = d->source ? cubert_hash64(d->source, strlen(d->source)) : 0;
  return k;
}

/* Whether `hay` (size bytes, may hold NULs) contains the string `needle`. */
static bool contains(const void *hay, size_t size, const char *needle) {
  size_t n = strlen(needle);
  const char *h = hay;
  for (size_t i = 0; i + n <= size; i++)
    if (h[i] == needle[0] && memcmp(h + i, needle, n) == 0) return true;
  return false;
}

/* The code is what the platform's loader takes, and defines `entry`. */
static void assert_code(const void *code, size_t size, const char *entry) {
  ck_assert_msg(code != NULL && size > 0, "no code for %s", entry);
  const unsigned char *c = code;
  if (on_amd()) {
    ck_assert_msg(size > 64 && c[0] == 0x7f && c[1] == 'E' && c[2] == 'L' && c[3] == 'F',
                  "the code object of %s is not an ELF (%zu bytes, starts %02x %02x %02x %02x)",
                  entry, size, c[0], c[1], c[2], c[3]);
    ck_assert_msg(c[4] == 2, "the code object of %s is not a 64-bit ELF", entry);
    ck_assert_msg(contains(code, size, entry), "the code object does not name `%s`", entry);
    char kd[160];
    snprintf(kd, sizeof kd, "%s.kd", entry); /* the kernel descriptor HIP launches */
    ck_assert_msg(contains(code, size, kd), "the code object has no kernel descriptor `%s`", kd);
  } else {
    ck_assert_msg(c[size - 1] == '\0', "PTX for %s is not NUL-terminated", entry);
    ck_assert_msg(strstr(code, ".target sm_90") != NULL, "PTX for %s does not target sm_90", entry);
    char e[160];
    snprintf(e, sizeof e, ".entry %s(", entry);
    ck_assert_msg(strstr(code, e) != NULL, "PTX does not define `%s`", e);
  }
}

/* A fresh cache folder for this process. */
static void private_cache(char *dir, size_t cap) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, cap, "%s/cubert-hip-cache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  setenv("CUBERT_CACHE_DIR", dir, 1);
}

/* Counts files in `dir` ending with `suffix`. */
static int count_files(const char *dir, const char *suffix) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  int n = 0;
  size_t sl = strlen(suffix);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t l = strlen(e->d_name);
    if (l >= sl && strcmp(e->d_name + l - sl, suffix) == 0) n++;
  }
  closedir(d);
  return n;
}

static void first_file(const char *dir, const char *suffix, char *path, size_t cap) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  size_t sl = strlen(suffix);
  path[0] = '\0';
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t l = strlen(e->d_name);
    if (l >= sl && strcmp(e->d_name + l - sl, suffix) == 0) {
      snprintf(path, cap, "%s/%s", dir, e->d_name);
      break;
    }
  }
  closedir(d);
  ck_assert_msg(path[0] != '\0', "no *%s file in %s", suffix, dir);
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  char path[4352];
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.' && (e->d_name[1] == '\0' || (e->d_name[1] == '.' && e->d_name[2] == '\0')))
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

START_TEST(test_every_builtin_compiles_for_the_target) {
  if (!hip_built()) return;
  int compiled = 0;
  for (int i = 0; i < CUBERT_BUILTIN_COUNT; i++) {
    const cubert_kernel_desc *d = cubert_builtin_desc((cubert_builtin)i);
    ck_assert_msg(d != NULL, "built-in %d has no descriptor", i);
    ck_assert_msg(d->source != NULL, "built-in `%s` has no source", d->name);
    cubert_backend_kernel k = from_desc(d);
    cubert_berr err = {0};
    void *code = NULL;
    size_t size = 0;
    cubert_status st = cb_hip_compile(target(), &k, CB_HIP_COMPILE_NO_CACHE, &code, &size, NULL, &err);
    ck_assert_msg(st == CUBERT_OK, "built-in `%s` does not compile for %s: %s: %s", d->name,
                  target(), cubert_status_name(st), err.message);
    assert_code(code, size, k.entry);
    free(code);
    compiled++;
  }
  ck_assert_int_eq(compiled, CUBERT_BUILTIN_COUNT);
  ck_assert_ptr_null(cubert_builtin_desc(CUBERT_BUILTIN_COUNT));
}
END_TEST

#if CB_TEST_BENCH
#include "bench/bench.h"
#endif

/* The bench's kernels (bench/bench_kernels.c), the hold kernel among them:
 * on AMD it counts wall_clock64(), on NVIDIA clock64(). */
START_TEST(test_bench_kernels_compile_for_the_target) {
  if (!hip_built()) return;
#if CB_TEST_BENCH
  static const char *const entries[] = {"cb_bench_empty0", "cb_bench_empty4", "cb_bench_empty16",
                                        "cb_bench_hold", "cb_bench_chase"};
  const char *source = cb_bench_kernel_source();
  if (on_amd()) ck_assert_ptr_nonnull(strstr(source, "wall_clock64()"));
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    cubert_backend_kernel k;
    memset(&k, 0, sizeof k);
    k.name = k.entry = entries[i];
    k.source = source;
    k.source_hash = cubert_hash64(source, strlen(source));
    cubert_berr err = {0};
    void *code = NULL;
    size_t size = 0;
    cubert_status st = cb_hip_compile(target(), &k, CB_HIP_COMPILE_NO_CACHE, &code, &size, NULL, &err);
    ck_assert_msg(st == CUBERT_OK, "`%s` does not compile for %s: %s", entries[i], target(), err.message);
    assert_code(code, size, entries[i]);
    free(code);
  }
#else
  fprintf(stderr, "skipped: no bench\n");
#endif
}
END_TEST

/* Shared memory, barriers and system-scope atomics: what peer hand-offs
 * use, beyond the built-ins. */
static const char handoff_source[] =
    "extern \"C\" __global__ void cubert_test_handoff(unsigned int *flag, float *x,\n"
    "                                                unsigned long long n)\n"
    "{\n"
    "  extern __shared__ float s[];\n"
    "  unsigned int t = threadIdx.x;\n"
    "  s[t] = t < n ? x[t] : 0.0f;\n"
    "  __syncthreads();\n"
    "  if (t == 0) {\n"
    "    x[0] = s[blockDim.x - 1];\n"
    "    __threadfence_system();\n"
    "    atomicAdd_system(flag, 1u);\n"
    "  }\n"
    "}\n";

START_TEST(test_sample_with_shared_memory_and_system_atomics_compiles) {
  if (!hip_built()) return;
  cubert_backend_kernel k;
  memset(&k, 0, sizeof k);
  k.name = k.entry = "cubert_test_handoff";
  k.source = handoff_source;
  k.options = "-DUNUSED_MACRO=1";
  cubert_berr err = {0};
  void *code = NULL;
  size_t size = 0;
  cubert_status st = cb_hip_compile(target(), &k, CB_HIP_COMPILE_NO_CACHE, &code, &size, NULL, &err);
  ck_assert_msg(st == CUBERT_OK, "%s: %s", cubert_status_name(st), err.message);
  assert_code(code, size, k.entry);
  free(code);
}
END_TEST

START_TEST(test_broken_source_fails_with_the_log) {
  if (!hip_built()) return;
  cubert_backend_kernel k;
  memset(&k, 0, sizeof k);
  k.name = k.entry = "cubert_test_broken";
  k.source = "extern \"C\" __global__ void cubert_test_broken(int *x) { x[0] = not_declared_here; }\n";
  cubert_berr err = {0};
  void *code = NULL;
  size_t size = 0;
  cubert_status st = cb_hip_compile(target(), &k, CB_HIP_COMPILE_NO_CACHE, &code, &size, NULL, &err);
  ck_assert_msg(st == CUBERT_ERR_COMPILE, "a broken source gave %s", cubert_status_name(st));
  ck_assert_ptr_null(code);
  ck_assert_msg(strstr(err.message, "cubert_test_broken") != NULL, "the message does not name the kernel: %s", err.message);
  ck_assert_msg(strstr(err.message, "not_declared_here") != NULL, "the message lacks the log: %s", err.message);
  ck_assert_msg(strstr(err.message, "error") != NULL, "the message lacks the error: %s", err.message);
  ck_assert_msg(strstr(err.message, "/tmp/comgr-") == NULL, "the compiler's temporary path is left in: %s", err.message);
}
END_TEST

START_TEST(test_a_long_log_is_cut_to_fit) {
  if (!hip_built()) return;
  /* Many errors: the log is far longer than a message. */
  static char src[8192];
  size_t o = (size_t)snprintf(src, sizeof src, "extern \"C\" __global__ void cubert_test_noisy(int *x) {\n");
  for (int i = 0; i < 60 && o + 64 < sizeof src; i++)
    o += (size_t)snprintf(src + o, sizeof src - o, "  x[%d] = undeclared_%d;\n", i, i);
  snprintf(src + o, sizeof src - o, "}\n");
  cubert_backend_kernel k;
  memset(&k, 0, sizeof k);
  k.name = k.entry = "cubert_test_noisy";
  k.source = src;
  cubert_berr err = {0};
  void *code = NULL;
  size_t size = 0;
  cubert_status st = cb_hip_compile(target(), &k, CB_HIP_COMPILE_NO_CACHE, &code, &size, NULL, &err);
  ck_assert_int_eq(st, CUBERT_ERR_COMPILE);
  ck_assert_msg(strlen(err.message) < sizeof err.message, "message not terminated");
  ck_assert_msg(strstr(err.message, "undeclared_0") != NULL, "the first error is missing: %s", err.message);
}
END_TEST

START_TEST(test_wrong_target_is_refused) {
  if (!hip_built()) return;
  const cubert_kernel_desc *d = cubert_builtin_desc(CUBERT_BUILTIN_FILL_U32);
  cubert_backend_kernel k = from_desc(d);
  cubert_berr err = {0};
  void *code = NULL;
  size_t size = 0;
  /* a target of the other vendor */
  const char *other = on_amd() ? "sm_90" : "gfx90a";
  cubert_status st = cb_hip_compile(other, &k, CB_HIP_COMPILE_NO_CACHE, &code, &size, NULL, &err);
  ck_assert_int_eq(st, CUBERT_ERR_COMPILE);
  ck_assert_msg(strstr(err.message, other) != NULL, "message: %s", err.message);
  /* no source at all */
  k.source = NULL;
  st = cb_hip_compile(target(), &k, 0, &code, &size, NULL, &err);
  ck_assert_int_eq(st, CUBERT_ERR_COMPILE);
  ck_assert_msg(strstr(err.message, "no source") != NULL, "message: %s", err.message);
}
END_TEST

START_TEST(test_cache_serves_rebuilds_corrupt_entries) {
  if (!hip_built()) return;
  char dir[512];
  private_cache(dir, sizeof dir);
  char resolved[4096];
  ck_assert(cb_hip_cache_dir(resolved, sizeof resolved));
  ck_assert_str_eq(resolved, dir);

  cubert_backend_kernel k = from_desc(cubert_builtin_desc(CUBERT_BUILTIN_COPY_U32));
  cubert_berr err = {0};
  void *a = NULL, *b = NULL, *c = NULL;
  size_t na = 0, nb = 0, nc = 0;
  bool cached = true;
  ck_assert_int_eq(cb_hip_compile(target(), &k, 0, &a, &na, &cached, &err), CUBERT_OK);
  ck_assert_msg(!cached, "an empty cache served a compile");
  ck_assert_int_eq(count_files(dir, ".hipmod"), 1);

  ck_assert_int_eq(cb_hip_compile(target(), &k, 0, &b, &nb, &cached, &err), CUBERT_OK);
  ck_assert_msg(cached, "the second compile did not come from the cache");
  ck_assert_uint_eq(na, nb);
  ck_assert(memcmp(a, b, na) == 0);

  /* Other options are another entry. */
  cubert_backend_kernel k2 = k;
  k2.options = "-DCUBERT_OTHER=1";
  void *o = NULL;
  size_t no = 0;
  ck_assert_int_eq(cb_hip_compile(target(), &k2, 0, &o, &no, &cached, &err), CUBERT_OK);
  ck_assert(!cached);
  ck_assert_int_eq(count_files(dir, ".hipmod"), 2);
  free(o);

  /* Corrupt the entries: one byte of the code flipped, then a short file. */
  char path[4352];
  for (int attempt = 0; attempt < 2; attempt++) {
    DIR *dd = opendir(dir);
    ck_assert_ptr_nonnull(dd);
    for (struct dirent *e; (e = readdir(dd)) != NULL;) {
      if (!strstr(e->d_name, ".hipmod")) continue;
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      FILE *f = fopen(path, "r+b");
      ck_assert_ptr_nonnull(f);
      if (attempt == 0) { /* flip the last byte */
        ck_assert_int_eq(fseek(f, -1, SEEK_END), 0);
        int ch = fgetc(f);
        ck_assert_int_eq(fseek(f, -1, SEEK_END), 0);
        fputc(ch ^ 0x5a, f);
      }
      fclose(f);
      if (attempt == 1) ck_assert_int_eq(truncate(path, 40), 0); /* a short file */
    }
    closedir(dd);
    free(c);
    c = NULL;
    ck_assert_int_eq(cb_hip_compile(target(), &k, 0, &c, &nc, &cached, &err), CUBERT_OK);
    ck_assert_msg(!cached, "a corrupt entry was served (attempt %d)", attempt);
    ck_assert_uint_eq(nc, na);
    ck_assert(memcmp(a, c, na) == 0);
    /* the entry was rewritten whole */
    free(c);
    c = NULL;
    ck_assert_int_eq(cb_hip_compile(target(), &k, 0, &c, &nc, &cached, &err), CUBERT_OK);
    ck_assert_msg(cached, "the rebuilt entry was not written back (attempt %d)", attempt);
  }
  ck_assert_int_eq(count_files(dir, ".tmp"), 0);
  free(a);
  free(b);
  free(c);
  remove_dir(dir);
}
END_TEST

/* On AMD hiprtcVersion always says 9.0 and hiprtc appends
 * $HIPRTC_COMPILE_OPTIONS_APPEND to every compile (ROCm/clr hiprtc.cpp,
 * hiprtcInternal.hpp): the key holds comgr's version and that variable. */
START_TEST(test_cache_key_holds_comgr_version_and_appended_options) {
  if (!hip_built()) return;
  size_t major = 0, minor = 0;
  bool known = cb_hip_comgr_version(&major, &minor);
  if (on_amd())
    ck_assert_msg(known && major >= 2, "comgr version not found (%zu.%zu)", major, minor);
  else
    ck_assert(!known);
  fprintf(stderr, "comgr version in the key: %zu.%zu\n", major, minor);
  char dir[512];
  private_cache(dir, sizeof dir);
  unsetenv("HIPRTC_COMPILE_OPTIONS_APPEND");
  cubert_backend_kernel k = from_desc(cubert_builtin_desc(CUBERT_BUILTIN_COPY_U32));
  cubert_berr err = {0};
  void *a = NULL;
  size_t na = 0;
  bool cached = true;
  ck_assert_int_eq(cb_hip_compile(target(), &k, 0, &a, &na, &cached, &err), CUBERT_OK);
  ck_assert(!cached);
  free(a);
  setenv("HIPRTC_COMPILE_OPTIONS_APPEND", "-DCUBERT_APPENDED=1", 1);
  ck_assert_int_eq(cb_hip_compile(target(), &k, 0, &a, &na, &cached, &err), CUBERT_OK);
  /* another entry on AMD; NVRTC reads no such variable */
  ck_assert_msg(cached == !on_amd(), "with options appended the cache %s", cached ? "served" : "missed");
  ck_assert_int_eq(count_files(dir, ".hipmod"), on_amd() ? 2 : 1);
  free(a);
  unsetenv("HIPRTC_COMPILE_OPTIONS_APPEND");
  ck_assert_int_eq(cb_hip_compile(target(), &k, 0, &a, &na, &cached, &err), CUBERT_OK);
  ck_assert(cached);
  free(a);
  remove_dir(dir);
}
END_TEST

START_TEST(test_cache_shared_by_processes_stays_whole) {
  if (!hip_built()) return;
  char dir[512];
  private_cache(dir, sizeof dir);
  cubert_backend_kernel k = from_desc(cubert_builtin_desc(CUBERT_BUILTIN_FILL_U32));
  enum { WRITERS = 3, ROUNDS = 3 };
  pid_t pids[WRITERS];
  for (int w = 0; w < WRITERS; w++) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
      /* Each process rewrites the entry and reads it back, racing the
       * others: a reader must see a whole entry or none. */
      int bad = 0;
      for (int r = 0; r < ROUNDS; r++) {
        cubert_berr err = {0};
        void *code = NULL;
        size_t size = 0;
        unsigned flags = r % 2 ? 0 : CB_HIP_COMPILE_REBUILD;
        if (cb_hip_compile(target(), &k, flags, &code, &size, NULL, &err) != CUBERT_OK) bad++;
        else if (on_amd() ? memcmp(code, "\x7f" "ELF", 4) != 0 : strstr(code, ".entry") == NULL) bad++;
        free(code);
      }
      _exit(bad ? 1 : 0);
    }
    pids[w] = pid;
  }
  for (int w = 0; w < WRITERS; w++) {
    int status = 0;
    ck_assert_int_eq(waitpid(pids[w], &status, 0), pids[w]);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d saw a broken entry", w);
  }
  ck_assert_int_eq(count_files(dir, ".hipmod"), 1);
  ck_assert_int_eq(count_files(dir, ".tmp"), 0);
  char path[4352];
  first_file(dir, ".hipmod", path, sizeof path);
  bool cached = false;
  void *code = NULL;
  size_t size = 0;
  cubert_berr err = {0};
  ck_assert_int_eq(cb_hip_compile(target(), &k, 0, &code, &size, &cached, &err), CUBERT_OK);
  ck_assert_msg(cached, "the shared entry is not usable");
  assert_code(code, size, k.entry);
  free(code);
  remove_dir(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("hip_gfx90a");
  TCase *tc = tcase_create("compile");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_every_builtin_compiles_for_the_target);
  tcase_add_test(tc, test_sample_with_shared_memory_and_system_atomics_compiles);
  tcase_add_test(tc, test_bench_kernels_compile_for_the_target);
  tcase_add_test(tc, test_broken_source_fails_with_the_log);
  tcase_add_test(tc, test_a_long_log_is_cut_to_fit);
  tcase_add_test(tc, test_wrong_target_is_refused);
  tcase_add_test(tc, test_cache_serves_rebuilds_corrupt_entries);
  tcase_add_test(tc, test_cache_key_holds_comgr_version_and_appended_options);
  tcase_add_test(tc, test_cache_shared_by_processes_stays_whole);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
