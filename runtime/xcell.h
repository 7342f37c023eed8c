/* runtime/xcell.h: the failure cell of memory shared between processes
 * (internal; issue 13, items 3 and 4). runtime/xshare.c keeps one in the
 * segment of each exported allocation (docs/processes.md); tested on its own
 * in tests/test_xcell.c and through export/import in tests/test_processes.c.
 *
 * A cell lives in memory the caller maps MAP_SHARED in every process that
 * uses the allocation. It holds the allocation's tainted ranges, range-exact,
 * each with its failure as a cubert_failure_record (plain bytes: no pointer
 * crosses). Its lock is a process-shared, robust mutex: a process that dies
 * holding it leaves the next locker EOWNERDEAD, and that process's pid is
 * remembered (lost_pid). Any other failure to lock is returned, never
 * hidden (tests force one: xcell_testing.h); xshare.c keeps what it could
 * not settle until a lock works. An update never writes the table readers use:
 * it writes the other of two tables and then flips one index, so a process
 * killed in the middle of an update leaves the last whole table in force.
 *
 * Set, never add, as the ledger: setting a range replaces what was there. A
 * cell holds at most CB_XCELL_RANGES ranges; past that (after a set, or a
 * clear that cuts a hole in a range), the two ranges with
 * the smallest gap are joined (the gap and the older failure's bytes take
 * the newer failure): bytes are never left untainted, at worst tainted with
 * the neighbour's cause. */
#ifndef CUBERT_RUNTIME_XCELL_H
#define CUBERT_RUNTIME_XCELL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cubert/cubert.h"

#define CB_XCELL_RANGES 32

typedef struct cb_xcell_range {
  uint64_t start, end;
  cubert_failure_record record;
} cb_xcell_range;

typedef struct cb_xcell_table {
  uint32_t n;
  cb_xcell_range ranges[CB_XCELL_RANGES + 2]; /* sorted, disjoint; n <= CB_XCELL_RANGES between
                                             updates (2 spare for a split) */
} cb_xcell_table;

typedef struct cb_xcell {
  uint32_t magic;
  uint32_t version;
  pthread_mutex_t lock;   /* process-shared, robust */
  uint64_t size;          /* bytes of the allocation it covers */
  _Atomic uint32_t current; /* the table in force: 0 or 1 */
  uint64_t generation;    /* bumps on every change */
  int64_t holder;         /* the process holding the lock, 0 none */
  int64_t lost_pid;       /* the last process that died holding the lock, 0 none */
  cb_xcell_table tables[2];
} cb_xcell;

/* Makes a cell in `mem` (sizeof(cb_xcell) bytes the caller mapped shared)
 * for an allocation of `size` bytes. CUBERT_OK, or the pthread error as
 * CUBERT_ERR_BACKEND with a message in `message`. */
cubert_status cb_xcell_init(cb_xcell *cell, uint64_t size, char *message, size_t cap);
/* Whether `cell` looks like a cell made by cb_xcell_init (magic, version). */
bool cb_xcell_valid(const cb_xcell *cell);

/* Locks the cell. A previous holder that died: the cell is made consistent
 * (its table in force is whole, see above), its pid kept in lost_pid, and
 * *died (may be NULL) set to that pid. CUBERT_ERR_BACKEND when locking fails. */
cubert_status cb_xcell_lock(cb_xcell *cell, int64_t *died);
void cb_xcell_unlock(cb_xcell *cell);

/* Under the lock: [start, end) now carries `record` (set), or nothing
 * (clear). Ranges are clipped to the allocation. */
void cb_xcell_set(cb_xcell *cell, uint64_t start, uint64_t end, const cubert_failure_record *record);
void cb_xcell_clear(cb_xcell *cell, uint64_t start, uint64_t end);
/* Under the lock: the footprint of `pattern` (runtime/pattern.h) now
 * carries `record` (set), or nothing (clear), as one update. A set of more
 * runs than the table holds taints their bounds (the gaps too); a clear
 * cuts at most 4 * CB_XCELL_RANGES runs out of tainted ranges (the rest
 * stays tainted). Bytes are never left untainted either way. */
struct cb_pattern;
void cb_xcell_set_pattern(cb_xcell *cell, const struct cb_pattern *pattern, const cubert_failure_record *record);
void cb_xcell_clear_pattern(cb_xcell *cell, const struct cb_pattern *pattern);
/* Under the lock: the first tainted range ending after `from` that starts
 * before `end`, clipped to [from, end); false when none. */
bool cb_xcell_first(const cb_xcell *cell, uint64_t from, uint64_t end, uint64_t *range_start,
                    uint64_t *range_end, const cubert_failure_record **record);

#endif
