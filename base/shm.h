/* base/shm.h: POSIX shared-memory segments that processes of one user on one
 * node share (issue 13; docs/processes.md). A segment's name is
 * "/cubert.<creator pid>.<32 hex digits from getrandom()>": nobody can guess
 * it, and the pid lets the next process of the node remove the segments of a
 * creator that died without removing them (cb_shm_sweep). Segments are made
 * with O_EXCL and mode 0600, and opened only when this user owns them. */
#ifndef CUBERT_BASE_SHM_H
#define CUBERT_BASE_SHM_H

#include <stddef.h>
#include <stdint.h>

#define CB_SHM_NAME 64 /* bytes of a name, with its NUL */

/* Makes a segment of `size` bytes and maps it shared, read-write. On 0,
 * `name` holds its name and *map its bytes (zeroed). On failure, -1 with a
 * sentence in `message` (cap bytes); nothing is left behind. */
int cb_shm_create(size_t size, char name[CB_SHM_NAME], void **map, char *message, size_t cap);
/* Opens and maps the segment `name` when it is this user's and holds at
 * least `size` bytes. -1 with a sentence in `message` when it does not
 * exist, is another user's, or is smaller. */
int cb_shm_open(const char *name, size_t size, void **map, char *message, size_t cap);
/* Whether `name` is a name cb_shm_create makes (so nothing else is opened). */
int cb_shm_name_ok(const char *name);
/* The creator pid in a name (0 when it has none). */
int64_t cb_shm_name_pid(const char *name);
/* Removes this user's cubert segments whose creator is no longer alive
 * (after a SIGKILL: nothing else could remove them). Returns how many. */
int cb_shm_sweep(void);

#endif
