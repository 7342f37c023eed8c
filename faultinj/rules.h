/* faultinj/rules.h: one fault rule, its text syntax and its trigger (internal).
 *
 * Pure functions, no process state: cb_fi_parse() turns rule text into
 * cb_fi_rule values, cb_fi_rule_format() prints one back in canonical syntax
 * (which parses to the same rule), cb_fi_rule_filters() and
 * cb_fi_rule_trigger() decide whether a call is selected. The grammar is in
 * docs/faultinj.md.
 *
 * Ownership: cb_fi_parse() fills a cb_fi_parsed whose rule array the caller
 * frees with cb_fi_parsed_free(). Nothing else allocates. */
#ifndef CUBERT_FAULTINJ_RULES_H
#define CUBERT_FAULTINJ_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubert/faultinj.h"

/* Operations, as bits: a call has one primary bit, plus CB_FI_OP_PEER_WRITE
 * when it writes another device's memory (copy_peer, or a launch with a
 * writable peer buffer). */
enum {
  CB_FI_OP_LAUNCH = 1u << 0,
  CB_FI_OP_WRITE = 1u << 1,
  CB_FI_OP_READ = 1u << 2,
  CB_FI_OP_FILL = 1u << 3,
  CB_FI_OP_COPY = 1u << 4,
  CB_FI_OP_COPY_PEER = 1u << 5,
  CB_FI_OP_PEER_WRITE = 1u << 6,
  CB_FI_OP_ALLOC = 1u << 7,
  CB_FI_OP_COMPILE = 1u << 8,
  CB_FI_OP_SYNC = 1u << 9,
  CB_FI_OP_PEER_ENABLE = 1u << 10,
  CB_FI_OP_PEER_CAN_ACCESS = 1u << 11,
  CB_FI_OP_STREAM_CREATE = 1u << 12,
  CB_FI_OP_EVENT_RECORD = 1u << 13,
  CB_FI_OP_STREAM_WAIT = 1u << 14,
  CB_FI_OP_DEVICE_OPEN = 1u << 15,
  CB_FI_OP_LINK_INFO = 1u << 16,
  CB_FI_OP_COUNT_ = 17
};
#define CB_FI_OP_ALL ((1u << CB_FI_OP_COUNT_) - 1u)
/* Work that writes device memory. */
#define CB_FI_OP_WORK \
  (CB_FI_OP_LAUNCH | CB_FI_OP_WRITE | CB_FI_OP_FILL | CB_FI_OP_COPY | CB_FI_OP_COPY_PEER | \
   CB_FI_OP_PEER_WRITE)
/* Calls made on a stream. */
#define CB_FI_OP_STREAMED \
  (CB_FI_OP_WORK | CB_FI_OP_READ | CB_FI_OP_SYNC | CB_FI_OP_EVENT_RECORD | CB_FI_OP_STREAM_WAIT)
/* Calls that name a kernel. */
#define CB_FI_OP_KERNEL (CB_FI_OP_LAUNCH | CB_FI_OP_COMPILE | CB_FI_OP_PEER_WRITE)
/* Calls that involve a second device. */
#define CB_FI_OP_PAIRED \
  (CB_FI_OP_LAUNCH | CB_FI_OP_COPY_PEER | CB_FI_OP_PEER_WRITE | CB_FI_OP_PEER_ENABLE | \
   CB_FI_OP_PEER_CAN_ACCESS | CB_FI_OP_LINK_INFO)

/* The name of one operation bit ("launch", "copy_peer"); NULL otherwise. */
const char *cb_fi_op_name(uint32_t op);

#define CB_FI_MAX_LIST 8
#define CB_FI_NAME_MAX 128
#define CB_FI_CLASS_MAX 8
#define CB_FI_LEXEME_MAX 32

typedef struct cb_fi_range {
  uint64_t lo, hi;            /* inclusive */
} cb_fi_range;

typedef struct cb_fi_rule {
  uint32_t ops;               /* CB_FI_OP_* mask, never 0 */
  cubert_fault_kind fault;
  double fraction;            /* scribble/partial share of the bytes */
  char fraction_text[CB_FI_LEXEME_MAX]; /* as written; "" when defaulted */
  cubert_status status;       /* CUBERT_OK: the operation's usual error */

  /* Filters; a count of 0 means "any". */
  char kernels[CB_FI_MAX_LIST][CB_FI_NAME_MAX]; /* "name" or "prefix*" */
  uint32_t nkernels;
  cb_fi_range devices[CB_FI_MAX_LIST];
  uint32_t ndevices;
  cb_fi_range peers[CB_FI_MAX_LIST];
  uint32_t npeers;
  cb_fi_range ranks[CB_FI_MAX_LIST]; /* the process's rank (cubert_set_rank; none: 0) */
  uint32_t nranks;
  cb_fi_range streams[CB_FI_MAX_LIST];
  uint32_t nstreams;
  char pairs[CB_FI_MAX_LIST][CB_FI_CLASS_MAX];  /* upper case */
  uint32_t npairs;

  /* Triggers: all that are set must hold; none set means every call. */
  uint64_t nth, every, first, after, times;     /* 0: unset */
  bool has_after;
  bool has_prob;
  double prob;
  char prob_text[CB_FI_LEXEME_MAX];
  bool has_seed;
  uint64_t seed;
} cb_fi_rule;

typedef struct cb_fi_parsed {
  cb_fi_rule *rules;
  size_t count;
  bool has_seed;              /* a `seed=N` statement */
  uint64_t seed;
  size_t mpi_rules;           /* `send`/`recv` rules: the MPI component's, skipped */
} cb_fi_parsed;

/* Parses `len` bytes of `text`. A statement whose operation is `send` or
 * `recv` is a rule of the MPI component (libcubert_mpi reads it from
 * $CUBERT_FAULTS with its own grammar): it is skipped, unchecked, and
 * counted in mpi_rules; `send` or `recv` joined to other operations is an
 * error. On error returns CUBERT_ERR_PARSE (or
 * CUBERT_ERR_OUT_OF_MEMORY), fills `diag` (may be NULL) with source, line and
 * column, and leaves `out` empty. */
cubert_status cb_fi_parse(const char *text, size_t len, const char *source, cb_fi_parsed *out,
                          cubert_faultinj_diag *diag);
void cb_fi_parsed_free(cb_fi_parsed *parsed);

/* Canonical text of a rule; returns the length it wanted (as snprintf). */
size_t cb_fi_rule_format(const cb_fi_rule *rule, char *buf, size_t capacity);

/* A call as the filters see it. */
typedef struct cb_fi_call {
  uint32_t op;                /* the primary CB_FI_OP_* bit */
  uint32_t ops;               /* op plus CB_FI_OP_PEER_WRITE when it writes a peer */
  int device;                 /* runtime-wide */
  uint64_t stream;            /* 0: none */
  uint64_t work;              /* 0: none */
  const char *kernel;         /* NULL: none */
  const int *peers;           /* runtime-wide indices of the other devices */
  uint32_t npeers;
  int rank;                   /* the process's rank (cubert_set_rank), 0 when none */
} cb_fi_call;

/* Whether the rule's operation, kernel, device, peer, stream and rank filters
 * accept the call (the pair filter is the caller's: it needs the classifier). */
bool cb_fi_rule_filters(const cb_fi_rule *rule, const cb_fi_call *call);
bool cb_fi_rule_pair_matches(const cb_fi_rule *rule, const char *pair_class);
/* Whether one kernel= item ("name" or "prefix*") matches a kernel's name. */
bool cb_fi_kernel_matches(const char *pattern, const char *name);

/* Whether the rule fires on its `count`-th matching call (1-based), having
 * injected `injected` faults so far; `prng` is its stream, advanced only when
 * the probability is drawn. */
bool cb_fi_rule_trigger(const cb_fi_rule *rule, uint64_t count, uint64_t injected, uint64_t *prng);

/* splitmix64: the step of every rule's stream, and the mixer of seeds. */
uint64_t cb_fi_splitmix64(uint64_t *state);
/* The starting state of a rule's stream. */
uint64_t cb_fi_stream_seed(uint64_t seed, uint32_t rule_id, bool own_seed);

/* Copies src into dst (capacity cap > 0), truncating; always terminated.
 * Messages are bounded on purpose: this says so to the compiler too. */
void cb_fi_copy(char *dst, size_t cap, const char *src);

/* The status a fault makes a call return when the rule sets none. */
cubert_status cb_fi_default_status(uint32_t op, cubert_fault_kind fault);

#endif
