/* base/shm.c: shared-memory segments of a node (shm.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/shm.h"

#define PREFIX "cubert."

int cb_shm_name_ok(const char *name) {
  if (!name || name[0] != '/' || strncmp(name + 1, PREFIX, strlen(PREFIX)) != 0) return 0;
  size_t n = strnlen(name, CB_SHM_NAME);
  if (n >= CB_SHM_NAME) return 0;
  for (const char *p = name + 1 + strlen(PREFIX); *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || *p == '.')) return 0;
  return cb_shm_name_pid(name) > 0;
}

int64_t cb_shm_name_pid(const char *name) {
  const char *p = strstr(name ? name : "", PREFIX);
  if (!p) return 0;
  char *end = NULL;
  long long pid = strtoll(p + strlen(PREFIX), &end, 10);
  return end && *end == '.' && pid > 0 ? (int64_t)pid : 0;
}

int cb_shm_create(size_t size, char name[CB_SHM_NAME], void **map, char *message, size_t cap) {
  unsigned char r[16];
  if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
    snprintf(message, cap, "getrandom for a shared segment's name: %s", strerror(errno));
    return -1;
  }
  int n = snprintf(name, CB_SHM_NAME, "/" PREFIX "%lld.", (long long)getpid());
  for (size_t i = 0; i < sizeof r; i++) n += snprintf(name + n, CB_SHM_NAME - (size_t)n, "%02x", r[i]);
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(message, cap, "shm_open(%s): %s", name, strerror(errno));
    return -1;
  }
  void *p = MAP_FAILED;
  if (ftruncate(fd, (off_t)size) == 0) p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name);
    snprintf(message, cap, "making a shared segment of %zu bytes: %s", size, strerror(e));
    return -1;
  }
  *map = p;
  return 0;
}

int cb_shm_open(const char *name, size_t size, void **map, char *message, size_t cap) {
  if (!cb_shm_name_ok(name)) {
    snprintf(message, cap, "not a cubert segment name");
    return -1;
  }
  int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(message, cap, "shm_open(%s): %s", name,
             errno == ENOENT ? "no such segment (its memory was freed, or its process ended)" : strerror(errno));
    return -1;
  }
  struct stat st;
  void *p = MAP_FAILED;
  if (fstat(fd, &st) != 0) {
    snprintf(message, cap, "fstat(%s): %s", name, strerror(errno));
  } else if (st.st_uid != geteuid()) {
    snprintf(message, cap, "segment %s belongs to uid %u, not this user (%u)", name, (unsigned)st.st_uid,
             (unsigned)geteuid());
  } else if ((uint64_t)st.st_size < size) {
    snprintf(message, cap, "segment %s holds %lld bytes, fewer than the %zu expected", name, (long long)st.st_size,
             size);
  } else {
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) snprintf(message, cap, "mmap(%s): %s", name, strerror(errno));
  }
  close(fd);
  if (p == MAP_FAILED) return -1;
  *map = p;
  return 0;
}

int cb_shm_sweep(void) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  int removed = 0;
  char name[CB_SHM_NAME + 1];
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, PREFIX, strlen(PREFIX)) != 0 || strlen(e->d_name) >= CB_SHM_NAME - 1) continue;
    size_t len = strlen(e->d_name); /* < CB_SHM_NAME - 1: checked above */
    name[0] = '/';
    memcpy(name + 1, e->d_name, len + 1);
    int64_t pid = cb_shm_name_pid(name);
    struct stat st;
    if (pid <= 0 || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != geteuid()) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours to ask) */
    if (shm_unlink(name) == 0) removed++;
  }
  closedir(d);
  return removed;
}
