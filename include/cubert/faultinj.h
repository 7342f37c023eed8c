/* cubert/faultinj.h: fault injection, for tests, campaigns and unmodified
 * programs.
 *
 * The fault layer is a backend decorator: the runtime puts it between itself
 * and every backend (host, HIP). It forwards every call unchanged and fails
 * the calls its rules select: a launch that fails before writing or after
 * scribbling garbage over its outputs, a copy that fails or stops part way,
 * an allocation or compile that fails, a device that is lost, a failure that
 * surfaces only at sync. With no rule set it costs one predictable branch
 * per call. docs/faultinj.md has the rule syntax and its grammar.
 *
 * Fault injection belongs to a runtime: each runtime has its own rules, seed,
 * counters, injection log and pair classifier, and every function here takes
 * the runtime it acts on. Rules of one runtime never select calls of
 * another; `device=` and `peer=` name that runtime's devices, `rank=` the
 * process's rank (cubert_set_rank(); none counts as 0). `send` and `recv`
 * rules are the MPI component's (cubert/mpi.h): the parser here skips them
 * without error and adds nothing for them. Rules come from
 * this API, from $CUBERT_FAULTS (or the runtime option `faults`), which
 * configures every runtime created in the process (each its own copy: counts
 * such as nth=3 are per runtime), and from rule files. Every injection gets
 * an id (1, 2, 3... per runtime) and a log record; the error the runtime
 * keeps says "injected fault #N (rule R): ...". The same seed and the same
 * sequence of calls inject the same faults.
 *
 * Errors: a refused call returns its status, records the error for the
 * calling thread (cubert_last_error(): the message names what was wrong, as
 * every other cubert call) and changes nothing. A runtime created with
 * `no_faultinj` has no fault layer: every call here is refused with
 * CUBERT_ERR_UNSUPPORTED.
 *
 * Threading: every function is thread-safe. Ownership: nothing returned
 * needs freeing; records, stats and diagnostics are copied into the caller's
 * structs; strings from cubert_fault_kind_name() are static; the runtime
 * stays the caller's. */
#ifndef CUBERT_FAULTINJ_H
#define CUBERT_FAULTINJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubert/cubert.h"
#include "cubert/export.h"
#include "cubert/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a rule does to a call it selects. */
typedef enum cubert_fault_kind {
  CUBERT_FAULT_FAIL = 0,        /* fail before doing anything (a launch: before writing) */
  CUBERT_FAULT_SCRIBBLE,        /* garbage over part of every output, then fail */
  CUBERT_FAULT_PARTIAL,         /* a copy, write, read or fill does a prefix, then fails */
  CUBERT_FAULT_OOM,             /* an allocation fails: CUBERT_ERR_OUT_OF_MEMORY */
  CUBERT_FAULT_COMPILE,         /* a module load fails: CUBERT_ERR_COMPILE */
  CUBERT_FAULT_DEVICE_LOST,     /* this call and every later one on the device fail, sticky */
  CUBERT_FAULT_ASYNC,           /* work runs, then is reported failed by drain_failures */
  CUBERT_FAULT_ASYNC_SCRIBBLE,  /* as ASYNC, with garbage over part of its outputs */
  CUBERT_FAULT_ASYNC_DEVICE_LOST, /* as ASYNC, reported sticky: the device is lost from the
                                     sync that finds it on */
  CUBERT_FAULT_KIND_COUNT_
} cubert_fault_kind;

/* "fail", "scribble", "partial", "oom", "compile-error", "device-lost",
 * "async", "async-scribble", "async-device-lost"; "unknown" outside the
 * enum. Static. */
CUBERT_API const char *cubert_fault_kind_name(cubert_fault_kind kind);

/* Where a rule text was wrong. */
typedef struct cubert_faultinj_diag {
  char source[128];     /* "CUBERT_FAULTS", a file path, or the name given */
  int line;             /* 1-based; 0 when the error is not in the text (unreadable file) */
  int column;           /* 1-based, in bytes */
  char message[512];    /* "source:line:column: what was wrong" */
} cubert_faultinj_diag;

/* Adds the rules in `text` (docs/faultinj.md) to `rt`. `source` names the
 * text in error messages (NULL: "api"). All or nothing: on an error no rule
 * is added, CUBERT_ERR_PARSE is returned and `diag` (may be NULL) and the
 * thread's last error say where. A `seed=N` statement sets the runtime's
 * seed (cubert_faultinj_set_seed). Rule ids are consecutive; `first_id` (may
 * be NULL) gets the first one added, 0 when the text held no rule. A
 * kernel= name that no kernel has is not an error here (the kernel may come
 * later); the summary names such rules. */
CUBERT_API cubert_status cubert_faultinj_add(cubert_runtime *rt, const char *text, const char *source,
                                             uint32_t *first_id, cubert_faultinj_diag *diag);

/* cubert_faultinj_add() over the whole file at `path` (errors name the
 * path). CUBERT_ERR_IO when it cannot be read. */
CUBERT_API cubert_status cubert_faultinj_load(cubert_runtime *rt, const char *path, uint32_t *first_id,
                                              cubert_faultinj_diag *diag);

/* What cubert_runtime_create calls for each new runtime: `text` is the
 * `faults` option (errors name "faults option"), NULL for $CUBERT_FAULTS
 * (errors name "CUBERT_FAULTS"). A text starting with '@' names a rule file.
 * The configured rules of `rt` are exactly the last configuration's: the
 * same text again keeps them, counts and all; another text replaces them; no
 * text (NULL and no variable, or "") removes them. Rules added through
 * cubert_faultinj_add() stay. On an error the rules in place stay too. */
CUBERT_API cubert_status cubert_faultinj_configure(cubert_runtime *rt, const char *text,
                                                   cubert_faultinj_diag *diag);

/* Removes one rule of `rt` (CUBERT_ERR_INVALID_ARGUMENT when there is none
 * by that id), or every rule. The log and the counters stay. */
CUBERT_API cubert_status cubert_faultinj_remove(cubert_runtime *rt, uint32_t rule_id);
CUBERT_API cubert_status cubert_faultinj_clear(cubert_runtime *rt);

/* Removes every rule of `rt`, empties its log, sets its counters, ids and
 * seed back to 0 (the next rule and the next injection are #1 again).
 * Devices already lost stay lost: that state belongs to the open device. */
CUBERT_API cubert_status cubert_faultinj_reset(cubert_runtime *rt);

/* The seed of every probabilistic rule of `rt` without its own `seed=`.
 * Each rule draws from its own stream (the seed mixed with the rule id), so
 * one rule's draws do not shift another's. Setting the seed restarts those
 * streams. cubert_faultinj_seed() returns 0 (and records an error) for a
 * runtime it refuses. */
CUBERT_API cubert_status cubert_faultinj_set_seed(cubert_runtime *rt, uint64_t seed);
CUBERT_API uint64_t cubert_faultinj_seed(cubert_runtime *rt);

/* Decides which device pairs `pair=` filters of `rt` match: returns the
 * class of (device, peer), indices of `rt`, as a static upper-case name
 * ("SELF", "XGMI", "NVLINK", "PIX", "PXB", "PHB", "NODE", "SYS"), or NULL
 * when unknown. Called with the runtime's fault lock held: it must not call
 * cubert_faultinj_*. The runtime installs its topology's classifier when a
 * configured rule has `pair=`; without a classifier `pair=` never matches.
 * fn NULL removes it. */
typedef const char *(*cubert_faultinj_pair_classifier)(void *ctx, int device, int peer);
CUBERT_API cubert_status cubert_faultinj_set_pair_classifier(cubert_runtime *rt,
                                                             cubert_faultinj_pair_classifier fn, void *ctx);

/* One injection. */
typedef struct cubert_fault_record {
  uint64_t id;              /* 1, 2, 3... since the runtime's last reset */
  uint32_t rule;            /* the rule that fired */
  cubert_fault_kind fault;
  cubert_status status;     /* what the call returned, or drain_failures reported */
  char operation[24];       /* "launch", "copy_peer", "alloc", ... */
  int device;               /* index of the device called, in its runtime */
  int peer;                 /* the other device of a peer operation, -1 for none */
  uint64_t stream;          /* the stream's number on its device (1, 2...), 0 for none */
  uint64_t work;            /* the runtime's work number, 0 for none */
  uint64_t match;           /* how many calls the rule had matched, this one included */
  char kernel[128];         /* "" when no kernel */
  char message[256];        /* "injected fault #N (rule R): ..." */
} cubert_fault_record;

/* Copies the records of `rt` with ids from `first_id` on (0 or 1: the
 * oldest kept) into `out`, at most `capacity`; returns how many (0, with an
 * error recorded, when refused: `out` NULL with a capacity). The log keeps
 * the newest CUBERT_FAULTINJ_LOG_CAPACITY records; stats.log_dropped counts
 * the rest. */
#define CUBERT_FAULTINJ_LOG_CAPACITY 16384
CUBERT_API size_t cubert_faultinj_log(cubert_runtime *rt, uint64_t first_id, cubert_fault_record *out,
                                      size_t capacity);
/* The record of injection `id`; false when it is not (or no longer) logged,
 * or the call is refused (`record` NULL records an error). */
CUBERT_API bool cubert_faultinj_record(cubert_runtime *rt, uint64_t id, cubert_fault_record *record);

/* How many faults were injected in `rt` since its last reset (0 when
 * refused, with an error recorded). */
CUBERT_API uint64_t cubert_faultinj_injected(cubert_runtime *rt);

typedef struct cubert_faultinj_stats {
  uint64_t injected;        /* faults injected */
  uint64_t calls;           /* calls checked against the rules (only while a rule is set) */
  uint64_t matched;         /* calls that matched the filters of some rule */
  uint64_t log_dropped;     /* records dropped from the log */
  uint64_t seed;
  uint32_t rules;           /* rules set now */
  uint32_t idle_kernel_rules; /* rules with a kernel= name that no kernel launched or
                               * compiled in this runtime has had (so far): they select
                               * nothing; the summary names them */
} cubert_faultinj_stats;
CUBERT_API cubert_status cubert_faultinj_get_stats(cubert_runtime *rt, cubert_faultinj_stats *stats);

/* The rule in canonical syntax (it parses back to the same rule) and its
 * counts. CUBERT_ERR_INVALID_ARGUMENT for no such rule. `text` may be NULL;
 * it is truncated to `capacity`. */
CUBERT_API cubert_status cubert_faultinj_rule_describe(cubert_runtime *rt, uint32_t rule_id, char *text,
                                                       size_t capacity, uint64_t *matched, uint64_t *injected);

/* One line for people: "fault injection: no faults were injected (2 rules
 * set; 0 of 120 calls matched)" or "fault injection: 5 faults injected,
 * #1-#5 (seed 7; 2 rules set; 9 of 120 calls matched)". Rules that select
 * nothing because no kernel of theirs has run are named after it: "...;
 * WARNING: rule 1 selects nothing through kernel=fill_u32: no kernel
 * launched or compiled in this runtime has that name (the built-in is named
 * `cubert_fill_u32`)". Returns the length it wanted (as snprintf); `text`
 * NULL asks for the length only and needs `capacity` 0 (NULL with a
 * capacity is refused: 0, CUBERT_ERR_INVALID_ARGUMENT recorded). */
CUBERT_API size_t cubert_faultinj_summary(cubert_runtime *rt, char *text, size_t capacity);

#ifdef __cplusplus
}
#endif
#endif
