/* backends/hip/hip_compile.c: kernel sources compiled at run time (hiprtc;
 * on NVIDIA HIP maps it to NVRTC) and the module cache on disk. The cache's
 * rules are in hip_compile.h.
 *
 * Targets: AMD takes --offload-arch=<gcnArchName> and gives a code object
 * (ELF) for exactly that target, features included; NVIDIA takes
 * --gpu-architecture=compute_XY and gives PTX, which the driver turns into
 * machine code when the module is loaded (the driver keeps its own cache). */
#if !defined(__HIP_PLATFORM_NVIDIA__)
#include <dlfcn.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/str.h"
#include "backends/hip/hip_compile.h"
#include "backends/hip/hip_internal.h"
#include "backends/hip/hip_testing.h"

#define CACHE_MAGIC "CBHIPMOD"
#define CACHE_FORMAT 1u
#define CACHE_MAX_BYTES (256u << 20) /* larger files are not ours */
#define MAX_OPTIONS 48

const char *cb_hip_platform(void) { return CB_HIP_NVIDIA ? "nvidia" : "amd"; }

/* hiprtc is not known to be thread-safe on every ROCm release: one compile
 * at a time in the process. Compiles are rare (the caches absorb repeats). */
static pthread_mutex_t rtc_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------ versions */

static pthread_once_t versions_once = PTHREAD_ONCE_INIT;
static int runtime_version;
static int rtc_major, rtc_minor;
static size_t comgr_major, comgr_minor; /* AMD: 0.0 when comgr cannot be asked */

#if !CB_HIP_NVIDIA
/* On AMD hiprtcVersion always answers 9.0 (ROCm/clr hipamd/src/hiprtc/
 * hiprtc.cpp, hiprtcVersion); the compiler is comgr, which hiprtc loads
 * (rocclr/device/comgrctx.cpp): its version goes into the key. */
static void comgr_version(void) {
  static const char *const names[] = {"libamd_comgr.so.3", "libamd_comgr.so.2", "libamd_comgr.so"};
  void *lib = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
    lib = dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD); /* the one hiprtc uses */
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
    lib = dlopen(names[i], RTLD_LAZY | RTLD_LOCAL);
  if (!lib) return;
  void (*get)(size_t *, size_t *) = NULL;
  void *sym = dlsym(lib, "amd_comgr_get_version");
  memcpy(&get, &sym, sizeof get < sizeof sym ? sizeof get : sizeof sym);
  if (get) get(&comgr_major, &comgr_minor);
  /* kept loaded: hiprtc holds it too */
}
#endif

static void versions_init(void) {
  if (hipRuntimeGetVersion(&runtime_version) != hipSuccess || runtime_version <= 0) {
#if CB_HIP_NVIDIA
    runtime_version = CUDART_VERSION; /* no driver here: the headers' version */
#else
    runtime_version = HIP_VERSION;
#endif
  }
  if (hiprtcVersion(&rtc_major, &rtc_minor) != HIPRTC_SUCCESS) rtc_major = rtc_minor = -1;
#if !CB_HIP_NVIDIA
  comgr_version();
#endif
}

bool cb_hip_comgr_version(size_t *major, size_t *minor) {
  pthread_once(&versions_once, versions_init);
  *major = comgr_major;
  *minor = comgr_minor;
  return comgr_major || comgr_minor;
}

/* Options ROCm's hiprtc appends to every compile from the environment
 * (rocclr/utils/flags.hpp HIPRTC_COMPILE_OPTIONS_APPEND, applied by
 * hipamd/src/hiprtc/hiprtcInternal.hpp AppendCompileOptions): they change the
 * code, so they are in the key. NVIDIA's NVRTC reads no such variable. */
static const char *options_append(void) {
#if CB_HIP_NVIDIA
  return "";
#else
  const char *v = getenv("HIPRTC_COMPILE_OPTIONS_APPEND");
  return v ? v : "";
#endif
}

/* ------------------------------------------------------------ cache files */

static bool join(char *buf, size_t cap, const char *a, const char *b) {
  int n = snprintf(buf, cap, "%s%s", a, b);
  return n > 0 && (size_t)n < cap;
}

bool cb_hip_cache_dir(char *buf, size_t capacity) {
  const char *v = getenv("CUBERT_CACHE_DIR");
  bool ok;
  if (v && *v) ok = join(buf, capacity, v, "");
  else if ((v = getenv("XDG_CACHE_HOME")) && *v) ok = join(buf, capacity, v, "/cubert");
  else if ((v = getenv("HOME")) && *v) ok = join(buf, capacity, v, "/.cache/cubert");
  else ok = false;
  if (!ok) return false;
  size_t n = strlen(buf);
  while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
  return true;
}

/* mkdir -p; true when the folder exists afterwards. */
static bool make_dirs(char *path) {
  struct stat st;
  if (stat(path, &st) == 0) return S_ISDIR(st.st_mode);
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    int r = mkdir(path, 0700);
    int e = errno;
    *p = '/';
    if (r != 0 && e != EEXIST) return false;
  }
  return mkdir(path, 0700) == 0 || errno == EEXIST;
}

typedef struct cache_header {
  char magic[8];
  uint32_t format;
  uint32_t key_size;
  uint64_t code_size;
  uint64_t code_hash;
} cache_header;

static bool read_all(int fd, void *buf, size_t size) {
  char *p = buf;
  while (size) {
    ssize_t r = read(fd, p, size);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    size -= (size_t)r;
  }
  return true;
}

static bool write_all(int fd, const void *buf, size_t size) {
  const char *p = buf;
  while (size) {
    ssize_t r = write(fd, p, size);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    size -= (size_t)r;
  }
  return true;
}

/* The entry at `path` when it is whole and its key is `key`; NULL otherwise
 * (missing, short, corrupt, another key: the caller rebuilds). */
static void *cache_read(const char *path, const char *key, size_t *size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  void *code = NULL;
  char *stored_key = NULL;
  struct stat st;
  cache_header h;
  size_t key_size = strlen(key);
  if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof h || st.st_size > CACHE_MAX_BYTES) goto out;
  if (!read_all(fd, &h, sizeof h)) goto out;
  if (memcmp(h.magic, CACHE_MAGIC, 8) != 0 || h.format != CACHE_FORMAT || h.key_size != key_size ||
      h.code_size == 0 || (uint64_t)st.st_size != sizeof h + key_size + h.code_size)
    goto out;
  stored_key = cb_malloc(key_size + 1);
  code = cb_malloc(h.code_size);
  if (!stored_key || !code || !read_all(fd, stored_key, key_size) ||
      memcmp(stored_key, key, key_size) != 0 || !read_all(fd, code, h.code_size) ||
      cubert_hash64(code, h.code_size) != h.code_hash) {
    cb_free(code);
    code = NULL;
    goto out;
  }
  *size = h.code_size;
out:
  cb_free(stored_key);
  close(fd);
  return code;
}

/* Writes the entry under a temporary name, then renames it into place:
 * readers see the old entry or the new one, never a part. Best effort. */
static void cache_write(const char *dir, const char *path, const char *key, const void *code,
                        size_t size) {
  static atomic_uint counter;
  char tmp[4200];
  char dirbuf[4096];
  if (!join(dirbuf, sizeof dirbuf, dir, "") || !make_dirs(dirbuf)) return;
  int n = snprintf(tmp, sizeof tmp, "%s.%ld.%u.tmp", path, (long)getpid(),
                   atomic_fetch_add(&counter, 1));
  if (n <= 0 || (size_t)n >= sizeof tmp) return;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return;
  cache_header h;
  memcpy(h.magic, CACHE_MAGIC, 8);
  h.format = CACHE_FORMAT;
  h.key_size = (uint32_t)strlen(key);
  h.code_size = size;
  h.code_hash = cubert_hash64(code, size);
  bool ok = write_all(fd, &h, sizeof h) && write_all(fd, key, h.key_size) &&
            write_all(fd, code, size);
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

/* ------------------------------------------------------------ compiling */

/* The option that names the target: --offload-arch=gfx90a on AMD,
 * --gpu-architecture=compute_90 on NVIDIA (from "sm_90" or "compute_90"). */
static bool target_option(const char *arch, char *buf, size_t cap) {
  int n;
#if CB_HIP_NVIDIA
  const char *digits = NULL;
  if (strncmp(arch, "sm_", 3) == 0) digits = arch + 3;
  else if (strncmp(arch, "compute_", 8) == 0) digits = arch + 8;
  if (!digits || !*digits) return false;
  n = snprintf(buf, cap, "--gpu-architecture=compute_%s", digits);
#else
  if (strncmp(arch, "gfx", 3) != 0) return false;
  n = snprintf(buf, cap, "--offload-arch=%s", arch);
#endif
  return n > 0 && (size_t)n < cap;
}

/* The compiler log made readable in one message: comgr's temporary source
 * path becomes "source", caret lines go, lines are joined with " | ", and
 * what does not fit is cut with a note. */
static void tidy_log(const char *log, char *out, size_t cap) {
  size_t o = 0;
  if (cap == 0) return;
  const char *p = log;
  while (*p && o + 1 < cap) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    bool caret = true, blank = true;
    for (size_t i = 0; i < len; i++) {
      if (p[i] != ' ' && p[i] != '\t') blank = false;
      if (p[i] != ' ' && p[i] != '\t' && p[i] != '^' && p[i] != '~') caret = false;
    }
    if (!caret && !blank) {
      if (o && o + 3 < cap) {
        memcpy(out + o, " | ", 3);
        o += 3;
      }
      const char *line = p;
      const char *src = strstr(p, "/input/CompileSource");
      if (src && src < p + len) { /* "/tmp/comgr-xxxx/input/CompileSource:1:2:" */
        const char *start = src;
        while (start > p && start[-1] != ' ' && start[-1] != '\t') start--;
        size_t pre = (size_t)(start - p);
        for (size_t i = 0; i < pre && o + 1 < cap; i++) out[o++] = p[i];
        for (const char *s = "source"; *s && o + 1 < cap; s++) out[o++] = *s;
        line = src + strlen("/input/CompileSource");
      }
      for (const char *s = line; s < p + len && o + 1 < cap; s++) out[o++] = *s;
    }
    if (!eol) break;
    p = eol + 1;
  }
  out[o] = '\0';
  if (*p && o + 1 >= cap && cap > 16) memcpy(out + cap - 16, " [log cut]...", 14);
}

static cubert_status compile(const char *arch, const char *target, const cubert_backend_kernel *k,
                             void **code, size_t *size, cubert_berr *err) {
  const char *name = k->name ? k->name : "kernel";
  char *opts = k->options ? cb_strdup(k->options) : NULL;
  if (k->options && !opts)
    return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory compiling `%s`", name);
  const char *argv[MAX_OPTIONS];
  int argc = 0;
  argv[argc++] = target;
  for (char *save = NULL, *t = opts ? strtok_r(opts, " \t\n", &save) : NULL; t;
       t = strtok_r(NULL, " \t\n", &save)) {
    if (argc == MAX_OPTIONS) {
      cb_free(opts);
      return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                             "kernel `%s`: more than %d compile options", name, MAX_OPTIONS - 1);
    }
    argv[argc++] = t;
  }
  char progname[96];
  cb_hip_format(progname, sizeof progname, "%s.cu", name);

  cubert_status st = CUBERT_OK;
  hiprtcProgram prog = NULL;
  char *log = NULL;
  pthread_mutex_lock(&rtc_lock);
  hiprtcResult r = hiprtcCreateProgram(&prog, k->source, progname, 0, NULL, NULL);
  if (r != HIPRTC_SUCCESS) {
    st = cubert_berr_set(err, r == HIPRTC_ERROR_OUT_OF_MEMORY ? CUBERT_ERR_OUT_OF_MEMORY : CUBERT_ERR_COMPILE,
                         "hiprtcCreateProgram for kernel `%s`: %s", name, hiprtcGetErrorString(r));
    prog = NULL;
    goto out;
  }
  r = hiprtcCompileProgram(prog, argc, argv);
  size_t log_size = 0;
  if (hiprtcGetProgramLogSize(prog, &log_size) == HIPRTC_SUCCESS && log_size > 1 &&
      (log = cb_malloc(log_size + 1)) != NULL) {
    if (hiprtcGetProgramLog(prog, log) != HIPRTC_SUCCESS) log[0] = '\0';
    log[log_size] = '\0';
  }
  if (r != HIPRTC_SUCCESS) {
    char tidy[400];
    tidy_log(log ? log : "", tidy, sizeof tidy);
    st = cubert_berr_set(err, CUBERT_ERR_COMPILE, "cannot compile kernel `%s` for %s (%s): %s",
                         name, arch, hiprtcGetErrorString(r),
                         tidy[0] ? tidy : "the compiler left no log");
    goto out;
  }
  size_t n = 0;
  if ((r = hiprtcGetCodeSize(prog, &n)) != HIPRTC_SUCCESS || n == 0) {
    st = cubert_berr_set(err, CUBERT_ERR_COMPILE, "kernel `%s` for %s: the compiler gave no code (%s)",
                         name, arch, hiprtcGetErrorString(r));
    goto out;
  }
  void *buf = cb_malloc(n);
  if (!buf) {
    st = cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory for %zu bytes of code", n);
    goto out;
  }
  if ((r = hiprtcGetCode(prog, buf)) != HIPRTC_SUCCESS) {
    cb_free(buf);
    st = cubert_berr_set(err, CUBERT_ERR_COMPILE, "kernel `%s` for %s: hiprtcGetCode: %s", name,
                         arch, hiprtcGetErrorString(r));
    goto out;
  }
  *code = buf;
  *size = n;
out:
  if (prog) hiprtcDestroyProgram(&prog);
  pthread_mutex_unlock(&rtc_lock);
  cb_free(log);
  cb_free(opts);
  return st;
}

cubert_status cb_hip_compile(const char *arch, const cubert_backend_kernel *k, unsigned flags,
                             void **code, size_t *size, bool *from_cache, cubert_berr *err) {
  if (!arch || !k || !code || !size)
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "cb_hip_compile: missing argument");
  const char *name = k->name ? k->name : "(unnamed)";
  if (!k->source)
    return cubert_berr_set(err, CUBERT_ERR_COMPILE,
                           "kernel `%s` has no source and no code object for %s", name, arch);
  const char *entry = k->entry ? k->entry : name;
  char target[96];
  if (!target_option(arch, target, sizeof target))
    return cubert_berr_set(err, CUBERT_ERR_COMPILE, "kernel `%s`: `%s` is not a %s target", name, arch,
                           CB_HIP_NVIDIA ? "NVIDIA (sm_XY)" : "AMD (gfxNNN)");
  pthread_once(&versions_once, versions_init);

  /* The key names everything the code depends on. */
  size_t srclen = strlen(k->source);
  uint64_t srchash = k->source_hash ? k->source_hash : cubert_hash64(k->source, srclen);
  const char *append = options_append();
  size_t keycap = 512 + strlen(entry) + (k->options ? strlen(k->options) : 0) + strlen(append);
  char *key = cb_malloc(keycap);
  if (!key) return cubert_berr_set(err, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  snprintf(key, keycap,
           "cubert hip module\nplatform=%s\ntarget=%s\nruntime=%d\nrtc=%d.%d\ncomgr=%zu.%zu\n"
           "entry=%s\nsource=%016" PRIx64 ":%zu\noptions=%s\noptions_append=%s\n",
           cb_hip_platform(), target, runtime_version, rtc_major, rtc_minor, comgr_major, comgr_minor,
           entry, srchash, srclen, k->options ? k->options : "", append);

  char dir[4096], path[4096 + 256];
  bool use_cache = !(flags & CB_HIP_COMPILE_NO_CACHE) && cb_hip_cache_dir(dir, sizeof dir);
  if (use_cache) {
    char safe[64];
    size_t i = 0;
    for (; arch[i] && i + 1 < sizeof safe; i++) {
      char c = arch[i];
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '-';
      safe[i] = ok ? c : '_';
    }
    safe[i] = '\0';
    int n = snprintf(path, sizeof path, "%s/%s-%s-%016" PRIx64 ".hipmod", dir, cb_hip_platform(),
                     safe, cubert_hash64(key, strlen(key)));
    use_cache = n > 0 && (size_t)n < sizeof path;
  }
  if (use_cache && !(flags & CB_HIP_COMPILE_REBUILD)) {
    void *cached = cache_read(path, key, size);
    if (cached) {
      cb_free(key);
      *code = cached;
      if (from_cache) *from_cache = true;
      return CUBERT_OK;
    }
  }
  cubert_status st = compile(arch, target, k, code, size, err);
  if (st == CUBERT_OK) {
    if (use_cache) cache_write(dir, path, key, *code, *size);
    if (from_cache) *from_cache = false;
  }
  cb_free(key);
  return st;
}
