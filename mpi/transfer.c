/* mpi/transfer.c: send and receive of handles that carry their taint
 * (cubert/mpi.h). Built on cubert's public API only: the tainted-range walk
 * on the sender, failure records across, cubert_handle_taint on the
 * receiver. mpi/wire.h has the messages. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cubert/mpi.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mpi/direct.h"
#include "mpi/inject.h"
#include "mpi/alloc.h"
#include "mpi/profile.h"
#include "mpi/seam.h"
#include "mpi/stage.h"
#include "mpi/ipc.h"
#include "mpi/wire.h"

#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

/* ------------------------------------------------------------ errors */

static cubert_status fail(cubert_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static cubert_status fail(cubert_status st, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return cubert_error_record(st, msg);
}

static void mpi_text(int code, char *out, size_t cap) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, s, &len) != MPI_SUCCESS) len = snprintf(s, sizeof s, "MPI error %d", code);
  snprintf(out, cap, "%.*s", len, s);
}

/* How many communicators cubert_mpi_init made usable; the last
 * cubert_mpi_finalize releases the staging pools (mpi/stage.h). */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static int comms_live;

/* ------------------------------------------------------------ communicators */

/* What cubert_mpi_init keeps on a communicator (an attribute). */
typedef struct comm_state {
  MPI_Comm dup;        /* cubert's payload messages */
  int size;
  int tag_ub;
  _Atomic uint32_t *next; /* per peer: payload tag pairs handed out */
  mpi_ipc *ipc;        /* ranks of this node: mpi/ipc.c */
} comm_state;

static void reap(bool wait, const comm_state *only, const cubert_client *client);
static bool chunk_env_ok(char *why, size_t cap);
static void drain_client(cubert_client *client);

static pthread_mutex_t keyval_lock = PTHREAD_MUTEX_INITIALIZER;
static int keyval = MPI_KEYVAL_INVALID;

static bool mpi_ready(void) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

static comm_state *state_of(MPI_Comm comm) {
  pthread_mutex_lock(&keyval_lock);
  int kv = keyval;
  pthread_mutex_unlock(&keyval_lock);
  if (kv == MPI_KEYVAL_INVALID || comm == MPI_COMM_NULL) return NULL;
  void *v = NULL;
  int found = 0;
  if (MPI_Comm_get_attr(comm, kv, &v, &found) != MPI_SUCCESS || !found) return NULL;
  return v;
}

/* Collective over `dup`: whether any rank failed its own part of
 * cubert_mpi_init (`local`, `why` its message). CUBERT_OK when none did;
 * else every rank returns one rank's status (out of host memory before a
 * parse error, then the lowest rank: MPI_MAXLOC) and `why` says which rank
 * and what it said. */
static cubert_status init_agree(MPI_Comm dup, cubert_status local, char *why, size_t cap) {
  int me = 0;
  MPI_Comm_rank(dup, &me);
  struct {
    int severity, rank;
  } mine = {local == CUBERT_OK ? 0 : local == CUBERT_ERR_OUT_OF_MEMORY ? 2 : 1, me}, worst = {0, 0};
  if (MPI_Allreduce(&mine, &worst, 1, MPI_2INT, MPI_MAXLOC, dup) != MPI_SUCCESS) {
    snprintf(why, cap, "MPI_Allreduce failed (agreeing on the ranks' settings)");
    return CUBERT_ERR_BACKEND;
  }
  if (worst.severity == 0) return CUBERT_OK;
  struct {
    int status;
    char message[160];
  } said = {(int)local, ""};
  if (me == worst.rank) snprintf(said.message, sizeof said.message, "%s", why);
  if (MPI_Bcast(&said, (int)sizeof said, MPI_BYTE, worst.rank, dup) != MPI_SUCCESS) {
    snprintf(why, cap, "MPI_Bcast failed (agreeing on the ranks' settings)");
    return CUBERT_ERR_BACKEND;
  }
  if (me != worst.rank)
    snprintf(why, cap, "rank %d of the communicator failed it (nothing was made on any rank): %.150s", worst.rank,
             said.message);
  return (cubert_status)said.status;
}

MPI_Comm mpi_payload_comm(MPI_Comm comm) {
  comm_state *cs = state_of(comm);
  return cs ? cs->dup : MPI_COMM_NULL;
}

cubert_status cubert_mpi_init(MPI_Comm comm) {
  if (!mpi_ready())
    return fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_mpi_init: MPI is not initialised (call MPI_Init first)");
  if (comm == MPI_COMM_NULL) return fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_mpi_init: comm is MPI_COMM_NULL");
  pthread_mutex_lock(&keyval_lock);
  int rc = MPI_SUCCESS;
  if (keyval == MPI_KEYVAL_INVALID)
    rc = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &keyval, NULL);
  pthread_mutex_unlock(&keyval_lock);
  if (rc != MPI_SUCCESS) return fail(CUBERT_ERR_BACKEND, "cubert_mpi_init: MPI_Comm_create_keyval failed");
  if (state_of(comm)) return CUBERT_OK;

  prof_init();
  stage_init(drain_client);
  /* This rank's own part: its environment, the memory for its state. What
   * fails here is this rank's alone, but MPI_Comm_dup and mpi_ipc_open are
   * collective: a rank that returned before them would leave the others
   * waiting in them for ever. So every rank makes them, and agrees first
   * (init_agree) on whether any rank failed its part: then every rank
   * fails alike, nothing made. (The GPU-aware setting, the profile and
   * the fault rules are the process's, not the communicator's: a rank
   * whose own part succeeded keeps what it read.) */
  char why[256] = "";
  cubert_status local = CUBERT_OK;
  if (!direct_init(why, sizeof why) || !chunk_env_ok(why, sizeof why) || !mpi_ipc_env_ok(why, sizeof why))
    local = CUBERT_ERR_PARSE;
  if (local == CUBERT_OK) local = mpi_inject_env(why, sizeof why); /* a parse error, or out of memory */
  comm_state *cs = mb_calloc(1, sizeof *cs);
  int size = 0;
  MPI_Comm_size(comm, &size);
  if (cs) {
    cs->size = size;
    cs->next = mb_calloc((size_t)size, sizeof *cs->next);
  }
  if (local == CUBERT_OK && (!cs || !cs->next)) {
    local = CUBERT_ERR_OUT_OF_MEMORY;
    snprintf(why, sizeof why, "out of host memory for the communicator's state");
  }
  void *ub = NULL;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
  MPI_Comm dup = MPI_COMM_NULL;
  if (MPI_Comm_dup(comm, &dup) != MPI_SUCCESS) {
    if (cs) mb_free(cs->next);
    mb_free(cs);
    return fail(CUBERT_ERR_BACKEND, "cubert_mpi_init: MPI_Comm_dup failed");
  }
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  cubert_status ast = init_agree(dup, local, why, sizeof why);
  mpi_ipc *ipc = NULL;
  if (ast == CUBERT_OK) ast = mpi_ipc_open(dup, false, &ipc, why, sizeof why);
  if (ast != CUBERT_OK) {
    MPI_Comm_free(&dup);
    if (cs) mb_free(cs->next);
    mb_free(cs);
    return fail(ast, "cubert_mpi_init: %s", why);
  }
  cs->tag_ub = found && ub ? *(int *)ub : 32767;
  cs->dup = dup;
  cs->ipc = ipc;
  MPI_Comm_set_attr(comm, keyval, cs);
  pthread_mutex_lock(&live_lock);
  comms_live++;
  pthread_mutex_unlock(&live_lock);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  cubert_set_rank(rank);
  return CUBERT_OK;
}

cubert_status cubert_mpi_finalize(MPI_Comm comm) {
  if (!mpi_ready()) return fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_mpi_finalize: MPI is not initialised");
  comm_state *cs = state_of(comm);
  if (!cs) return CUBERT_OK;
  reap(true, cs, NULL);
  mpi_ipc_close(cs->ipc, cs->dup);
  int me = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  prof_report(me);
  MPI_Comm_delete_attr(comm, keyval);
  MPI_Comm_free(&cs->dup);
  mb_free(cs->next);
  mb_free(cs);
  pthread_mutex_lock(&live_lock);
  bool last = --comms_live == 0;
  pthread_mutex_unlock(&live_lock);
  if (last) stage_drop_all();
  return CUBERT_OK;
}

bool cubert_mpi_gpu_aware(void) {
  bool yes = false;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  yes = yes || MPIX_Query_cuda_support();
#endif
#if defined(MPIX_ROCM_AWARE_SUPPORT) && MPIX_ROCM_AWARE_SUPPORT
  yes = yes || MPIX_Query_rocm_support();
#endif
  return yes;
}

cubert_status cubert_mpi_faults(const char *rules) {
  char why[256];
  cubert_status st = mpi_inject_set(NULL, rules, "rules", why, sizeof why); /* a parse error, or out of memory */
  if (st != CUBERT_OK) return fail(st, "cubert_mpi_faults: %s", why);
  return CUBERT_OK;
}

uint64_t cubert_mpi_faults_injected(void) { return mpi_inject_count(); }

uint64_t cubert_mpi_shared_transfers(void) { return mpi_ipc_count(); }

/* ------------------------------------------------------------ requests */

/* One failed stretch of the view and the failure it gets (mpi/ipc.h). */
typedef ipc_span span;

struct cubert_mpi_request {
  bool send;
  cubert_client *client;
  cubert_handle *view; /* a clone */
  MPI_Comm comm;
  comm_state *cs;
  int peer, tag, ptag;
  uint64_t size, chunk, nchunks;
  MPI_Request header_req;
  /* send: every message posted, and what they point at */
  unsigned char *ranges;
  stage_buf stage;        /* pinned, of the client's pool (mpi/stage.h) */
  direct_send direct;     /* the direct form's device copy (mpi/direct.h) */
  bool device_direct;     /* the bytes moved in the direct form */
  cubert_failure_record *records;
  MPI_Request *reqs;
  int nreqs;
  /* the account: what crossed tainted, why */
  span *spans;
  size_t nspans, capspans;
  size_t nsent;           /* receive: the first nsent spans are the sender's ranges */
  const cubert_failure *spare; /* receive: for bytes whose own failure could not be made */
  bool overflow;          /* receive: a span found no room: the whole view carries the spare */
  cubert_status result;   /* the first error of the exchange */
  char message[512];      /* its message */
  mpi_hit hit;
  bool injected;
  double pt;              /* profile: when the current phase began */
  uint64_t messages;      /* profile: MPI messages of the exchange */
  bool shared;       /* through shared memory (mpi/ipc.c) */
  ipc_ticket *ipc;   /* a send's hold on its staging buffer */
  struct cubert_mpi_request *next; /* in the list of sends still travelling */
  /* last, and not zeroed at set-up (16 KiB: a cost per small transfer):
   * the header; in the eager form its one chunk follows in the same message */
  unsigned char header[WIRE_HEADER_SIZE + WIRE_CHUNK_PREFIX + WIRE_EAGER_MAX];
};

/* What a request holds of the caller's: its failures and its view. */
static void request_settle(cubert_mpi_request *r) {
  for (size_t i = 0; i < r->nspans; i++) cubert_failure_release(r->spans[i].failure);
  r->nspans = 0;
  cubert_failure_release(r->spare);
  r->spare = NULL;
  cubert_handle_release(r->view);
  r->view = NULL;
}

static void request_free(cubert_mpi_request *r) {
  request_settle(r);
  mb_free(r->spans);
  mb_free(r->ranges);
  stage_give(&r->stage);
  direct_send_end(&r->direct);
  mb_free(r->records);
  if (r->reqs != &r->header_req) mb_free(r->reqs);
  mpi_ipc_ticket_end(r->ipc);
  mb_free(r);
}

/* Sends whose messages still travel after the sender's call returned: the
 * bytes were staged, so the view is the caller's again, but MPI still
 * holds the staging buffers until the receiver takes them. Finishing them
 * is not the sender's call's business: two ranks that each send to the
 * other before receiving would otherwise wait for each other forever. Every
 * later call tests them (MPI_Testall), oldest first, and stops at the
 * REAP_OPEN-th still open: sends to one peer finish in the order they were
 * posted, and testing every one of a window of 64 on each call (each test
 * a turn of MPI's progress engine) made each call cost O(window).
 * cubert_mpi_finalize waits for those of its communicator. */
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static cubert_mpi_request *pending, **pending_tail = &pending; /* oldest first */
#define REAP_OPEN 2

static void reap(bool wait, const comm_state *only, const cubert_client *client) {
  bool live = mpi_ready();
  int open = 0;
  pthread_mutex_lock(&pending_lock);
  for (cubert_mpi_request **p = &pending; *p && (wait || open < REAP_OPEN);) {
    cubert_mpi_request *r = *p;
    int done = 0;
    if ((only && r->cs != only) || (client && r->client != client)) {
      p = &r->next;
      continue;
    }
    if (!live) {
      done = 1; /* MPI is gone, and what it held with it */
    } else if (wait) {
      MPI_Waitall(r->nreqs, r->reqs, MPI_STATUSES_IGNORE);
      done = 1;
    } else if (MPI_Testall(r->nreqs, r->reqs, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
      done = 1; /* an error on a send already returned: nothing more to learn */
    }
    if (done) {
      *p = r->next;
      if (pending_tail == &r->next) pending_tail = p;
      request_free(r);
    } else {
      p = &r->next;
      open++;
    }
  }
  pthread_mutex_unlock(&pending_lock);
}

/* The client is being destroyed (mpi/stage.h): its sends still travelling
 * finish first, since MPI reads their staging buffers. */
static void drain_client(cubert_client *client) { reap(true, NULL, client); }

static void note(cubert_mpi_request *r, cubert_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void note(cubert_mpi_request *r, cubert_status st, const char *fmt, ...) {
  if (r->result != CUBERT_OK) return;
  r->result = st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
}

/* Adds a span (takes the reference). */
static bool span_add(cubert_mpi_request *r, uint64_t start, uint64_t end, const cubert_failure *f) {
  if (r->nspans == r->capspans) {
    size_t cap = r->capspans ? 2 * r->capspans : 8;
    span *s = mb_realloc(r->spans, cap * sizeof *s);
    if (!s) {
      cubert_failure_release(f);
      if (r->spare) r->overflow = true;
      return false;
    }
    r->spans = s;
    r->capspans = cap;
  }
  r->spans[r->nspans++] = (span){start, end, f};
  return true;
}

/* Room for `n` spans in all; false when there is none. */
static bool span_reserve(cubert_mpi_request *r, uint64_t n) {
  if (n <= r->capspans) return true;
  span *s = n < SIZE_MAX / sizeof *s ? mb_realloc(r->spans, (size_t)n * sizeof *s) : NULL;
  if (!s) return false;
  r->spans = s;
  r->capspans = (size_t)n;
  return true;
}

/* `f`; when it is NULL (it could not be made: out of host memory), a
 * reference to the receive's spare failure, so that bytes meant to carry a
 * failure never stay untainted. */
static const cubert_failure *need(cubert_mpi_request *r, const cubert_failure *f) {
  if (f || !r->spare) return f;
  note(r, CUBERT_ERR_OUT_OF_MEMORY, "%s", cubert_failure_message(r->spare));
  cubert_failure_retain(r->spare);
  return r->spare;
}

/* A failure for bytes that could not cross: the one the thread's last error
 * names (the cause cubert gave), else a new one with `why`. */
static const cubert_failure *failure_for(cubert_client *client, cubert_status st, const char *why) {
  cubert_error *e = cubert_last_error();
  const cubert_failure *f = e ? cubert_error_failure(e, 0, NULL, NULL) : NULL;
  if (f) cubert_failure_retain(f);
  if (e) cubert_error_release(e);
  if (!f && cubert_failure_create(client, st == CUBERT_OK ? CUBERT_ERR_BACKEND : st, why, &f) != CUBERT_OK)
    f = NULL;
  return f;
}

static const cubert_failure *injected_failure(cubert_mpi_request *r, const char *what) {
  char msg[256];
  snprintf(msg, sizeof msg, "injected fault #%llu (MPI rule %u): %s %s rank %d tag %d",
           (unsigned long long)r->hit.id, r->hit.rule, what, r->send ? "to" : "from", r->peer, r->tag);
  const cubert_failure *f = NULL;
  if (cubert_failure_create(r->client, CUBERT_ERR_BACKEND, msg, &f) != CUBERT_OK) return NULL;
  return f;
}

/* $CUBERT_MPI_CHUNK: digits, optionally k or M, 64 bytes to 1 GiB; 0 when
 * it is not such a value. */
static uint64_t chunk_parse(const char *v) {
  if (!(*v >= '0' && *v <= '9')) return 0;
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (errno || n > (1ull << 30)) return 0;
  if (*end == 'k' || *end == 'K') n <<= 10, end++;
  else if (*end == 'm' || *end == 'M') n <<= 20, end++;
  return !*end && n >= 64 && n <= (1ull << 30) ? n : 0;
}

/* Whether $CUBERT_MPI_CHUNK, when set, is a value chunk_parse takes
 * (cubert_mpi_init refuses one that is not). */
static bool chunk_env_ok(char *why, size_t cap) {
  const char *v = getenv("CUBERT_MPI_CHUNK");
  if (!v || !*v || chunk_parse(v)) return true;
  snprintf(why, cap, "CUBERT_MPI_CHUNK=%s: expected bytes per chunk from 64 to 1G (a number, or with k or M: 64k, 1M)",
           v);
  return false;
}

static uint64_t chunk_size(void) {
  const char *v = getenv("CUBERT_MPI_CHUNK");
  uint64_t n = v && *v ? chunk_parse(v) : 0;
  return n ? n : WIRE_CHUNK_DEFAULT;
}

/* The checks made before any message could be matched: what fails here
 * sends and receives nothing. */
static cubert_status check_call(const char *fn, cubert_client *client, const cubert_handle *view, int peer,
                                int tag, MPI_Comm comm, bool recv, comm_state **out) {
  if (!mpi_ready()) return fail(CUBERT_ERR_INVALID_ARGUMENT, "%s: MPI is not initialised (call MPI_Init first)", fn);
  if (!client) return fail(CUBERT_ERR_INVALID_ARGUMENT, "%s: client is NULL", fn);
  if (!view) return fail(CUBERT_ERR_INVALID_ARGUMENT, "%s: view is NULL", fn);
  if (comm == MPI_COMM_NULL) return fail(CUBERT_ERR_INVALID_ARGUMENT, "%s: comm is MPI_COMM_NULL", fn);
  comm_state *cs = state_of(comm);
  if (!cs)
    return fail(CUBERT_ERR_INVALID_ARGUMENT,
                "%s: the communicator was not given to cubert_mpi_init (call it once, on every rank)", fn);
  if (!(peer >= 0 && peer < cs->size) && !(recv && peer == MPI_ANY_SOURCE))
    return fail(CUBERT_ERR_INVALID_ARGUMENT, "%s: rank %d is not in the communicator (size %d)", fn, peer,
                cs->size);
  if (!(tag >= 0 && tag <= cs->tag_ub) && !(recv && tag == MPI_ANY_TAG))
    return fail(CUBERT_ERR_INVALID_ARGUMENT, "%s: tag %d is outside 0..%d (MPI_TAG_UB)", fn, tag, cs->tag_ub);
  *out = cs;
  reap(false, NULL, NULL);
  return CUBERT_OK;
}

static int next_ptag(comm_state *cs, int dest) {
  uint32_t pairs = (uint32_t)(cs->tag_ub - 1) / 2;
  uint32_t n = atomic_fetch_add(&cs->next[dest], 1) % pairs;
  return (int)(2 * n);
}

static cubert_status post(cubert_mpi_request *r, int rc, const char *what) {
  prof_lap(PROF_POST, &r->pt);
  r->messages++;
  if (rc == MPI_SUCCESS) return CUBERT_OK;
  char t[MPI_MAX_ERROR_STRING + 1];
  mpi_text(rc, t, sizeof t);
  note(r, CUBERT_ERR_BACKEND, "%s to rank %d failed: %s", what, r->peer, t);
  return CUBERT_ERR_BACKEND;
}

/* The failed form (mpi/wire.h) for a send with no memory for its request:
 * the header and the failure record from the stack, by a blocking send
 * (1,088 bytes: sent eagerly by MPI libraries, which buffer messages this
 * small, so it does not wait for the receiver in practice). */
static void send_failed_bare(cubert_client *client, uint64_t size, int peer, int tag, MPI_Comm comm) {
  unsigned char msg[WIRE_HEADER_SIZE + CUBERT_FAILURE_RECORD_SIZE];
  uint64_t chunk = chunk_size();
  wire_header h = {size, 0, chunk, 0, 0, WIRE_FAILED};
  wire_header_encode(&h, msg);
  char why[200];
  snprintf(why, sizeof why, "the sender could not send to rank %d tag %d (nothing crossed): out of host memory",
           peer, tag);
  const cubert_failure *f = NULL;
  cubert_failure_create(client, CUBERT_ERR_OUT_OF_MEMORY, why, &f);
  cubert_failure_record *rec = (cubert_failure_record *)(msg + WIRE_HEADER_SIZE);
  if (!f || cubert_failure_export(f, rec) != CUBERT_OK) memset(rec, 0, CUBERT_FAILURE_RECORD_SIZE);
  cubert_failure_release(f);
  MPI_Send(msg, (int)sizeof msg, MPI_BYTE, peer, tag, comm);
}

/* A request for a call that passed check_call. */
static cubert_status request_new(const char *fn, cubert_client *client, const cubert_handle *view, int peer, int tag,
                                 MPI_Comm comm, bool send, cubert_mpi_request **out) {
  double t0 = prof_now();
  comm_state *cs = NULL;
  cubert_status st = check_call(fn, client, view, peer, tag, comm, !send, &cs);
  if (st) return st;
  cubert_mpi_request *r = mb_malloc(sizeof *r);
  cubert_handle *clone = r ? cubert_handle_clone(view) : NULL;
  if (!clone) {
    mb_free(r);
    if (send) send_failed_bare(client, cubert_handle_size_in_use(view), peer, tag, comm);
    return fail(CUBERT_ERR_OUT_OF_MEMORY, "%s: out of memory%s", fn,
                send ? " (the receiver was told: its view is tainted)" : "");
  }
  memset(r, 0, offsetof(cubert_mpi_request, header));
  r->send = send;
  r->client = client;
  r->view = clone;
  r->comm = comm;
  r->cs = cs;
  r->peer = peer;
  r->tag = tag;
  r->size = cubert_handle_size_in_use(view);
  r->pt = t0;
  prof_lap(PROF_CHECK, &r->pt);
  *out = r;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ ranks of one node (mpi/ipc.c) */

void mpi_req_span(void *req, uint64_t start, uint64_t end, const cubert_failure *failure) {
  failure = need(req, failure);
  if (failure) span_add(req, start, end, failure);
}
void mpi_req_note(void *req, cubert_status st, const char *message) { note(req, st, "%s", message); }
size_t mpi_req_spans(void *req, const ipc_span **spans) {
  *spans = ((cubert_mpi_request *)req)->spans;
  return ((cubert_mpi_request *)req)->nspans;
}
const cubert_failure *mpi_req_injected(void *req, const char *what) { return injected_failure(req, what); }
const cubert_failure *mpi_req_failure(void *req, cubert_status st, const char *why) {
  return failure_for(((cubert_mpi_request *)req)->client, st, why);
}

/* What mpi/ipc.c is told of a transfer; `stop`: an injected fail or
 * partial stops the chunks from there on. */
static ipc_call ipc_call_of(cubert_mpi_request *r, uint64_t stop) {
  return (ipc_call){r->cs->ipc, r, r->client, r->view, r->size, r->chunk, r->nchunks, stop, r->peer, r->tag,
                    r->ptag, r->comm, r->cs->dup, r->injected ? &r->hit : NULL};
}

/* Waits for the work this transfer queued on the client's stream (its
 * staged reads or writes) without taking the stream's report of failed
 * work, which belongs to the caller's next cubert_sync (docs/failures.md,
 * rule 8: reported once per stream, so cubert_sync here would take the
 * report of the caller's own earlier work). An external read access waits
 * as a sync does (failures it finds taint their bytes: the staging
 * buffer's, the view's), then asks the view's ledger: a refusal for tainted
 * bytes came after the wait. One that could not wait (the wait itself
 * failed, no host memory) falls back to cubert_sync; a lost device or a
 * view of another device had nothing of this transfer queued. */
static void fence(cubert_client *client, cubert_handle *view) {
  cubert_external *x = NULL;
  void *addr = NULL;
  cubert_status st = cubert_handle_external_begin(client, view, CUBERT_ACCESS_READ, &x, &addr);
  if (st == CUBERT_OK)
    cubert_handle_external_end(x, NULL);
  else if (st != CUBERT_ERR_TAINTED && st != CUBERT_ERR_DEVICE_LOST && st != CUBERT_ERR_WRONG_DEVICE)
    cubert_sync(client);
}

/* ------------------------------------------------------------ send */

/* Reads view bytes [a, b) into dst; on failure, a reference to why. */
static const cubert_failure *read_part(cubert_mpi_request *r, uint64_t a, uint64_t b, unsigned char *dst) {
  cubert_handle *part = NULL;
  cubert_status st = cubert_handle_slice(r->view, a, r->size - b, &part);
  if (st == CUBERT_OK) st = cubert_handle_read(r->client, part, dst, b - a);
  cubert_handle_release(part);
  if (st == CUBERT_OK) return NULL;
  char why[192];
  snprintf(why, sizeof why, "the sender could not read bytes %llu..%llu of the view: %s", (unsigned long long)a,
           (unsigned long long)b, cubert_status_string(st));
  return failure_for(r->client, st, why);
}

/* Why cubert_handle_tainted_range refused the view (another device's or
 * runtime's handle, a lost device), without its name: the caller's call is
 * cubert_mpi_send or _recv, which the message names. */
static const char *view_refusal(void) {
  static const char probe[] = "cubert_handle_tainted_range: ";
  const char *m = cubert_last_error_message();
  return strncmp(m, probe, sizeof probe - 1) ? m : m + sizeof probe - 1;
}

/* The tainted ranges of the view, as spans; when the view cannot be walked
 * (another device's handle, a lost device), one span over all of it. */
static cubert_status walk(cubert_mpi_request *r) {
  uint64_t base = cubert_handle_offset_start(r->view);
  uint64_t from = base;
  for (;;) {
    uint64_t s = 0, e = 0;
    const cubert_failure *f = NULL;
    cubert_status st = cubert_handle_tainted_range(r->client, r->view, from, &s, &e, &f);
    if (st != CUBERT_OK) {
      char why[256];
      snprintf(why, sizeof why, "the sender's view could not be sent: %s", view_refusal());
      note(r, st, "%s", why);
      for (size_t i = 0; i < r->nspans; i++) cubert_failure_release(r->spans[i].failure);
      r->nspans = 0;
      const cubert_failure *all = failure_for(r->client, st, why);
      if (!all) return CUBERT_ERR_OUT_OF_MEMORY;
      return span_add(r, 0, r->size, all) ? CUBERT_OK : CUBERT_ERR_OUT_OF_MEMORY;
    }
    if (!f) return CUBERT_OK;
    if (!span_add(r, s - base, e - base, f)) return CUBERT_ERR_OUT_OF_MEMORY;
    from = e;
  }
}

/* The eager form (mpi/wire.h): a small view with no tainted byte, read
 * whole, goes as one message, header and chunk together; no message on
 * cubert's communicator, no second match on the receiver. False when the
 * view does not qualify (tainted ranges, an injected fault, too big, a read
 * that fails: the chunked form then carries the account as always). */
static bool send_eager(cubert_mpi_request *r) {
  if (r->injected || r->nspans || !r->size || r->size > WIRE_EAGER_MAX) return false;
  unsigned char *msg = r->header + WIRE_HEADER_SIZE, *data = msg + WIRE_CHUNK_PREFIX;
  const cubert_failure *bad = read_part(r, 0, r->size, data);
  prof_lap(PROF_READ, &r->pt);
  if (bad) {
    cubert_failure_release(bad);
    return false;
  }
  r->reqs = mb_calloc(1, sizeof *r->reqs);
  if (!r->reqs) return false;
  r->chunk = r->size;
  r->nchunks = 1;
  wire_header h = {r->size, 0, r->chunk, 1, r->ptag, WIRE_EAGER};
  wire_header_encode(&h, r->header);
  wire_put64(msg, wire_checksum(data, (size_t)r->size));
  wire_put64(msg + 8, 0);
  post(r, MPI_Isend(r->header, (int)(WIRE_HEADER_SIZE + WIRE_CHUNK_PREFIX + r->size), MPI_BYTE, r->peer, r->tag,
                    r->comm, &r->reqs[r->nreqs++]),
       "the message");
  prof_event_add(PROF_EV_EAGER);
  return true;
}

/* Queues the reads of chunk k (view bytes [a, b)) into its slot of the
 * pinned staging buffer: the good stretches from the device
 * (cubert_handle_read_host: asynchronous, done at the next sync); the
 * tainted ones are zeroed here (the sender's zeros: marked written in the
 * buffer's ledger). Chunks from `stop` on are not read: they get the
 * injected failure (*inj, made at first use). Returns NULL, or a reference
 * to why the chunk cannot travel (a read refused at once). *si walks the
 * view's first `norig` spans (its tainted ranges, in order). */
static const cubert_failure *stage_chunk(cubert_mpi_request *r, uint64_t k, uint64_t stop,
                                         const cubert_failure **inj, size_t *si, size_t norig) {
  if (k >= stop) {
    if (!*inj) *inj = injected_failure(r, r->hit.fault == MPI_FAULT_FAIL ? "send failed" : "send stopped part way");
    if (*inj) cubert_failure_retain(*inj);
    return *inj;
  }
  uint64_t a = k * r->chunk, b = a + r->chunk < r->size ? a + r->chunk : r->size;
  uint64_t off = k * (WIRE_CHUNK_PREFIX + r->chunk) + WIRE_CHUNK_PREFIX; /* of the data, in the buffer */
  for (uint64_t pos = a; pos < b;) {
    while (*si < norig && r->spans[*si].end <= pos) (*si)++;
    uint64_t gap_end = b;
    if (*si < norig && r->spans[*si].start <= pos) {
      uint64_t end = r->spans[*si].end < b ? r->spans[*si].end : b;
      memset(r->stage.p + off + (pos - a), 0, (size_t)(end - pos)); /* tainted bytes travel as zeros */
      cubert_host_buffer_mark_written(r->stage.hb, off + (pos - a), end - pos);
      pos = end;
      continue;
    }
    if (*si < norig && r->spans[*si].start < b) gap_end = r->spans[*si].start;
    cubert_handle *part = NULL;
    cubert_status st = cubert_handle_slice(r->view, pos, r->size - gap_end, &part);
    if (st == CUBERT_OK) st = cubert_handle_read_host(r->client, part, r->stage.hb, off + (pos - a), gap_end - pos);
    cubert_handle_release(part);
    if (st != CUBERT_OK) {
      char why[192];
      snprintf(why, sizeof why, "the sender could not read bytes %llu..%llu of the view: %s",
               (unsigned long long)pos, (unsigned long long)gap_end, cubert_status_string(st));
      return failure_for(r->client, st, why);
    }
    pos = gap_end;
  }
  return NULL;
}

/* After the sync that ended chunk k's reads: NULL when its staged bytes
 * are good, else a reference to the failure a read met (at a fence). */
static const cubert_failure *staged_check(cubert_mpi_request *r, uint64_t k) {
  uint64_t a = k * r->chunk, b = a + r->chunk < r->size ? a + r->chunk : r->size;
  uint64_t off = k * (WIRE_CHUNK_PREFIX + r->chunk) + WIRE_CHUNK_PREFIX;
  cubert_status st = cubert_host_buffer_check(r->stage.hb, off, b - a);
  if (st == CUBERT_OK) return NULL;
  char why[192];
  snprintf(why, sizeof why, "the sender's read of bytes %llu..%llu of the view from the device failed: %s",
           (unsigned long long)a, (unsigned long long)b, cubert_status_string(st));
  return failure_for(r->client, st, why);
}

/* The direct form (mpi/direct.h): GPU-aware MPI sends the chunks from a
 * device copy of the view. False when this rank does not use it or the
 * view does not qualify (tainted ranges, an injected fault, no copy): the
 * staged form then carries the account. */
static bool send_direct(cubert_mpi_request *r) {
  if (!direct_on() || r->injected || r->nspans || !r->size) return false;
  if (!stage_watch(r->client) || !direct_send_begin(r->client, r->view, r->size, &r->direct)) return false;
  prof_lap(PROF_READ, &r->pt);
  r->reqs = mb_calloc((size_t)(1 + r->nchunks), sizeof *r->reqs);
  if (!r->reqs) {
    direct_send_end(&r->direct);
    return false;
  }
  r->device_direct = true;
  wire_header h = {r->size, 0, r->chunk, r->nchunks, r->ptag, WIRE_DIRECT};
  wire_header_encode(&h, r->header);
  post(r, MPI_Isend(r->header, WIRE_HEADER_SIZE, MPI_BYTE, r->peer, r->tag, r->comm, &r->reqs[r->nreqs++]),
       "the header");
  for (uint64_t k = 0; k < r->nchunks; k++) {
    uint64_t a = k * r->chunk, b = a + r->chunk < r->size ? a + r->chunk : r->size;
    post(r, MPI_Isend(r->direct.addr + a, (int)(b - a), MPI_BYTE, r->peer, r->ptag, r->cs->dup,
                      &r->reqs[r->nreqs++]),
         "a chunk");
  }
  return true;
}

/* The failed form (mpi/wire.h): the sender cannot send the view (no host
 * memory for its account or its staging buffer), but the receiver must not
 * wait for bytes that will not come: the header says so, with the failure
 * record of why in the same message (zeros when it cannot be made: the
 * receiver calls that a corrupt record). It needs no memory: the request's
 * own header buffer and request. The call returns the error (`why`). */
static void send_failed(cubert_mpi_request *r, cubert_status st, const char *why) {
  for (size_t i = 0; i < r->nspans; i++) cubert_failure_release(r->spans[i].failure);
  r->nspans = 0;
  mb_free(r->reqs);
  r->reqs = &r->header_req; /* not freed (request_free) */
  r->nreqs = 0;
  char msg[300];
  snprintf(msg, sizeof msg, "the sender could not send to rank %d tag %d (nothing crossed): %s", r->peer, r->tag, why);
  const cubert_failure *f = NULL;
  cubert_failure_create(r->client, st, msg, &f);
  wire_header h = {r->size, 0, r->chunk, 0, r->ptag, WIRE_FAILED};
  wire_header_encode(&h, r->header);
  cubert_failure_record *rec = (cubert_failure_record *)(r->header + WIRE_HEADER_SIZE);
  if (!f || cubert_failure_export(f, rec) != CUBERT_OK) memset(rec, 0, CUBERT_FAILURE_RECORD_SIZE);
  cubert_failure_release(f);
  note(r, st, "%s (the receiver was told: its view is tainted)", why);
  post(r, MPI_Isend(r->header, WIRE_HEADER_SIZE + CUBERT_FAILURE_RECORD_SIZE, MPI_BYTE, r->peer, r->tag, r->comm,
                    &r->reqs[r->nreqs++]),
       "the header");
}

static cubert_status start_send(const char *fn, cubert_client *client, const cubert_handle *view, int dest,
                                int tag, MPI_Comm comm, cubert_mpi_request **out) {
  cubert_mpi_request *r = NULL;
  cubert_status st = request_new(fn, client, view, dest, tag, comm, true, &r);
  if (st) return st;
  r->chunk = chunk_size();
  r->nchunks = (r->size + r->chunk - 1) / r->chunk;
  r->ptag = next_ptag(r->cs, dest);
  int me = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  r->injected = mpi_inject_decide(true, me, dest, &r->hit);

  /* From here on the exchange always completes: every message is sent,
   * whatever this side finds wrong. */
  if (walk(r) != CUBERT_OK) {
    send_failed(r, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory walking the view's tainted ranges");
    *out = r;
    return CUBERT_OK;
  }
  prof_lap(PROF_WALK, &r->pt);
  if (send_eager(r) || send_direct(r)) {
    *out = r;
    return CUBERT_OK;
  }
  uint64_t ipc_stop = r->nchunks;
  if (r->injected && r->hit.fault == MPI_FAULT_PARTIAL) ipc_stop = (uint64_t)((double)r->nchunks * r->hit.fraction);
  if (r->injected && r->hit.fault == MPI_FAULT_FAIL) ipc_stop = 0;
  ipc_call call = ipc_call_of(r, ipc_stop);
  if ((r->shared = mpi_ipc_send(&call, r->header, &r->reqs, &r->nreqs, &r->ranges, &r->ipc))) {
    prof_lap(PROF_IPC_SEND, &r->pt);
    r->messages += (uint64_t)r->nreqs;
    *out = r;
    return CUBERT_OK;
  }
  r->reqs = mb_calloc((size_t)(2 + 2 * r->nchunks), sizeof *r->reqs);
  r->ranges = mb_malloc(r->nspans * WIRE_RANGE_SIZE + 1);
  /* chunk k's message at k * (prefix + chunk); the last may be shorter */
  r->records = mb_malloc((size_t)r->nchunks * sizeof *r->records + 1);
  prof_lap(PROF_CHECK, &r->pt);
  bool staged = r->reqs && r->ranges && r->records &&
                stage_take(client, (size_t)(r->nchunks * WIRE_CHUNK_PREFIX + r->size), &r->stage);
  prof_lap(PROF_STAGE_TAKE, &r->pt);
  if (!staged) {
    /* stage_take's error says why: out of host memory, or the pinning
     * refused (the device lost...): the receiver is told the real cause */
    cubert_status why_st = CUBERT_ERR_OUT_OF_MEMORY;
    cubert_error *e = r->reqs && r->ranges && r->records ? cubert_last_error() : NULL;
    if (e) why_st = cubert_error_status(e);
    char why[300];
    if (why_st == CUBERT_ERR_OUT_OF_MEMORY || why_st == CUBERT_OK)
      snprintf(why, sizeof why, "out of host memory staging %llu bytes", (unsigned long long)r->size);
    else
      snprintf(why, sizeof why, "no pinned buffer to stage %llu bytes: %s", (unsigned long long)r->size,
               cubert_error_message(e));
    if (why_st == CUBERT_OK) why_st = CUBERT_ERR_OUT_OF_MEMORY;
    cubert_error_release(e);
    send_failed(r, why_st, why);
    *out = r;
    return CUBERT_OK;
  }
  wire_header h = {r->size, r->nspans, r->chunk, r->nchunks, r->ptag, 0};
  wire_header_encode(&h, r->header);
  post(r, MPI_Isend(r->header, WIRE_HEADER_SIZE, MPI_BYTE, dest, tag, comm, &r->reqs[r->nreqs++]), "the header");
  for (size_t i = 0; i < r->nspans; i++)
    wire_range_encode(r->ranges + i * WIRE_RANGE_SIZE, r->spans[i].start, r->spans[i].end - r->spans[i].start,
                      r->spans[i].failure);
  if (r->nspans)
    post(r, MPI_Isend(r->ranges, (int)(r->nspans * WIRE_RANGE_SIZE), MPI_BYTE, dest, r->ptag, r->cs->dup,
                      &r->reqs[r->nreqs++]),
         "the tainted ranges");

  /* Chunks: the good stretches of each are read from the device into the
   * pinned staging buffer (the tainted ones travel as zeros), checksummed
   * and posted; chunk k+1's reads are queued before chunk k is posted, so
   * the device reads it while MPI takes chunk k. */
  size_t si = 0, norig = r->nspans; /* chunks that fail add spans after these */
  uint64_t stop = r->nchunks; /* a partial fault: chunks from here are not read */
  if (r->injected && r->hit.fault == MPI_FAULT_PARTIAL) stop = (uint64_t)((double)r->nchunks * r->hit.fraction);
  if (r->injected && r->hit.fault == MPI_FAULT_FAIL) stop = 0;
  const cubert_failure *inj = NULL, *next_bad = NULL;
  if (r->nchunks) {
    next_bad = stage_chunk(r, 0, stop, &inj, &si, norig);
    fence(client, r->view); /* what failed shows in the buffer's ledger (staged_check) */
  }
  for (uint64_t k = 0; k < r->nchunks; k++) {
    uint64_t a = k * r->chunk, b = a + r->chunk < r->size ? a + r->chunk : r->size;
    unsigned char *msg = r->stage.p + k * (WIRE_CHUNK_PREFIX + r->chunk), *data = msg + WIRE_CHUNK_PREFIX;
    const cubert_failure *bad = next_bad;
    next_bad = NULL;
    if (!bad) bad = staged_check(r, k);
    if (k + 1 < r->nchunks) next_bad = stage_chunk(r, k + 1, stop, &inj, &si, norig);
    uint32_t flags = 0;
    prof_lap(PROF_READ, &r->pt);
    if (bad) {
      memset(data, 0, (size_t)(b - a)); /* what was read of it does not travel */
      flags = WIRE_CHUNK_UNREAD;
      if (cubert_failure_export(bad, &r->records[k]) != CUBERT_OK) memset(&r->records[k], 0, sizeof r->records[k]);
      char why[128];
      snprintf(why, sizeof why, "bytes %llu..%llu could not be read or sent", (unsigned long long)a,
               (unsigned long long)b);
      note(r, k >= stop ? CUBERT_ERR_BACKEND : cubert_failure_status(bad), "%s: %s", why,
           cubert_failure_message(bad));
      span_add(r, a, b, bad);
    }
    wire_put64(msg, wire_checksum(data, (size_t)(b - a)));
    wire_put64(msg + 8, flags);
    if (r->injected && r->hit.fault == MPI_FAULT_SCRIBBLE && b > a) {
      /* damage in flight, after the checksum: the receiver must notice */
      uint64_t sd = r->hit.seed ^ k;
      size_t n = (size_t)((double)(b - a) * r->hit.fraction);
      if (!n) n = 1;
      for (size_t i = 0; i < n; i++) data[(sd + i * 7919u) % (b - a)] ^= (unsigned char)(0x5a + i);
    }
    post(r, MPI_Isend(msg, (int)(WIRE_CHUNK_PREFIX + (b - a)), MPI_BYTE, dest, r->ptag, r->cs->dup,
                      &r->reqs[r->nreqs++]),
         "a chunk");
    if (flags)
      post(r, MPI_Isend(&r->records[k], CUBERT_FAILURE_RECORD_SIZE, MPI_BYTE, dest, r->ptag + 1, r->cs->dup,
                        &r->reqs[r->nreqs++]),
           "a failure record");
    if (k + 1 < r->nchunks) {
      /* let MPI move what is posted (without a progress thread it moves
       * only inside MPI calls); an error shows again in finish_send's
       * test. Then chunk k+1's reads are over. */
      int done = 0;
      MPI_Testall(r->nreqs, r->reqs, &done, MPI_STATUSES_IGNORE);
      prof_lap(PROF_SEND_TEST, &r->pt);
      fence(client, r->view);
      prof_lap(PROF_READ, &r->pt);
    }
  }
  if (inj) cubert_failure_release(inj);
  *out = r;
  return CUBERT_OK;
}

static int span_cmp(const void *a, const void *b) {
  uint64_t x = ((const span *)a)->start, y = ((const span *)b)->start;
  return (x > y) - (x < y);
}

static void fill_info(const cubert_mpi_request *r, cubert_mpi_info *info) {
  if (!info) return;
  memset(info, 0, sizeof *info);
  info->peer = r->peer;
  info->tag = r->tag;
  info->bytes = r->size;
  info->chunks = r->nchunks;
  info->device_direct = r->device_direct;
  info->shared_memory = r->shared;
  /* spans may overlap (a chunk that failed over a tainted range): count
   * each byte once */
  uint64_t covered = 0, reach = 0;
  span *s = mb_malloc(r->nspans * sizeof *s + 1);
  if (s) {
    if (r->nspans) memcpy(s, r->spans, r->nspans * sizeof *s);
    qsort(s, r->nspans, sizeof *s, span_cmp);
    for (size_t i = 0; i < r->nspans; i++) {
      uint64_t a = s[i].start > reach ? s[i].start : reach;
      if (s[i].end > a) covered += s[i].end - a;
      if (s[i].end > reach) reach = s[i].end;
    }
    mb_free(s);
  }
  info->tainted_bytes = covered;
  info->tainted_ranges = r->nspans;
}

/* "N of M bytes crossed tainted (K ranges): bytes a..b carry failure #i: ..." */
static void describe_spans(const cubert_mpi_request *r, const char *verb, char *out, size_t cap) {
  cubert_mpi_info info;
  fill_info(r, &info);
  int n = snprintf(out, cap, "%llu of %llu bytes %s tainted (%zu range%s)", (unsigned long long)info.tainted_bytes,
                   (unsigned long long)r->size, verb, r->nspans, r->nspans == 1 ? "" : "s");
  for (size_t i = 0; i < r->nspans && i < 3 && n > 0 && (size_t)n < cap; i++) {
    const cubert_failure *f = r->spans[i].failure;
    cubert_remote_origin o;
    cubert_failure_remote(f, &o);
    char from[160] = "";
    if (o.remote)
      snprintf(from, sizeof from, " from rank %d (pid %lld on %s, device %d, its failure #%llu)", o.rank,
               (long long)o.pid, o.host, o.device, (unsigned long long)o.id);
    n += snprintf(out + n, cap - (size_t)n, "%s bytes %llu..%llu carry failure #%llu%s: %s", i ? ";" : ":",
                  (unsigned long long)r->spans[i].start, (unsigned long long)r->spans[i].end,
                  (unsigned long long)cubert_failure_id(f), from, cubert_failure_message(f));
  }
  if (r->nspans > 3 && n > 0 && (size_t)n < cap) snprintf(out + n, cap - (size_t)n, "; and %zu more", r->nspans - 3);
}

/* What the call returns: its first error, else CUBERT_ERR_TAINTED when
 * bytes crossed tainted, else CUBERT_OK; the message is recorded. */
static cubert_status verdict(const cubert_mpi_request *r, cubert_mpi_info *info) {
  fill_info(r, info);
  const char *who = r->send ? "cubert_mpi_send to" : "cubert_mpi_recv from";
  char msg[1400];
  if (r->result != CUBERT_OK) {
    snprintf(msg, sizeof msg, "%s rank %d tag %d: %s", who, r->peer, r->tag, r->message);
    return cubert_error_record(r->result, msg);
  }
  if (!r->nspans) return CUBERT_OK;
  char d[1200];
  describe_spans(r, r->send ? "crossed" : "arrived", d, sizeof d);
  snprintf(msg, sizeof msg, "%s rank %d tag %d: %s%s", who, r->peer, r->tag, r->send ? "sent, but " : "", d);
  return cubert_error_record(CUBERT_ERR_TAINTED, msg);
}

static cubert_status finish_send(cubert_mpi_request *r, cubert_mpi_info *info) {
  char t[MPI_MAX_ERROR_STRING + 1];
  int done = 0;
  r->pt = prof_now(); /* the time since the isend returned is the caller's */
  int rc = MPI_Testall(r->nreqs, r->reqs, &done, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    mpi_text(rc, t, sizeof t);
    note(r, CUBERT_ERR_BACKEND, "MPI_Testall failed: %s", t);
    done = 1;
  }
  prof_lap(PROF_SEND_TEST, &r->pt);
  cubert_status st = verdict(r, info);
  prof_lap(PROF_VERDICT, &r->pt);
  prof_count(true, r->messages, r->size);
  if (done) {
    request_free(r);
  } else {
    request_settle(r);
    pthread_mutex_lock(&pending_lock);
    r->next = NULL;
    *pending_tail = r;
    pending_tail = &r->next;
    pthread_mutex_unlock(&pending_lock);
  }
  return st;
}

/* ------------------------------------------------------------ receive */

/* Memory for a message received only to be dropped (n bytes): the heap's,
 * else anonymous pages mapped for it (the kernel gives them as the
 * message writes them and takes them back at scratch_put): no receive is
 * ever given a buffer smaller than its message. Such a receive is
 * erroneous (MPI 4.0, section 3.2.4), and Open MPI 4.1 does not stop at
 * the buffer's end: over its shared-memory transport a message above the
 * eager size is copied whole (single copy, process_vm_readv) past it
 * (docs/cluster.md, "What cubert assumes of MPI"). False when neither can
 * be had. */
typedef struct scratch {
  unsigned char *p;
  size_t n;
  bool mapped;
} scratch;

static bool scratch_get(scratch *s, size_t n) {
  s->n = n ? n : 1;
  s->mapped = false;
  if ((s->p = mb_malloc(s->n))) return true;
  void *m = mmap(NULL, s->n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    s->p = NULL;
    return false;
  }
  s->p = m;
  s->mapped = true;
  return true;
}

static void scratch_put(scratch *s) {
  if (s->mapped) munmap(s->p, s->n);
  else mb_free(s->p);
  s->p = NULL;
}

/* Receives the next message from `peer` with `tag` on `comm` and drops
 * it: MPI_Probe says its size, and it is received whole, into buf when it
 * fits in cap bytes, else into scratch memory (whose first cap bytes are
 * copied to buf). No other receive of cubert's matches that peer and tag
 * (payload tags are the exchange's own), so the probed message is the one
 * received. *got (may be NULL): the message's bytes. MPI_ERR_NO_MEM when
 * no memory can hold it: the message is left (its sender's send does not
 * complete), never received into less. */
static int take(void *buf, size_t cap, int peer, int tag, MPI_Comm comm, int *got) {
  MPI_Status s;
  int count = 0;
  int rc = MPI_Probe(peer, tag, comm, &s);
  if (rc == MPI_SUCCESS) rc = MPI_Get_count(&s, MPI_BYTE, &count);
  if (rc == MPI_SUCCESS && count < 0) rc = MPI_ERR_COUNT; /* MPI_UNDEFINED: not bytes */
  if (rc != MPI_SUCCESS) return rc;
  if (got) *got = count;
  if ((size_t)count <= cap) return MPI_Recv(buf, count, MPI_BYTE, peer, tag, comm, MPI_STATUS_IGNORE);
  scratch sc;
  if (!scratch_get(&sc, (size_t)count)) return MPI_ERR_NO_MEM;
  rc = MPI_Recv(sc.p, count, MPI_BYTE, peer, tag, comm, MPI_STATUS_IGNORE);
  memcpy(buf, sc.p, cap);
  scratch_put(&sc);
  return rc;
}

/* The flags of a chunk message of `got` bytes at msg (0 when it is too
 * short to have them). */
static uint64_t chunk_flags(const unsigned char *msg, int got) {
  return got >= WIRE_CHUNK_PREFIX ? wire_get64(msg + 8) : 0;
}

static const cubert_failure *import_or_explain(cubert_mpi_request *r, const cubert_failure_record *rec,
                                               const char *what);

/* Takes the failure record that follows chunk k, flagged unread by the
 * sender. keep: its bytes get a span with the sender's failure (the
 * original cause of their taint); else the record is dropped. */
static void take_record(cubert_mpi_request *r, uint64_t k, bool keep) {
  cubert_failure_record rec;
  int rc = take(&rec, sizeof rec, r->peer, r->ptag + 1, r->cs->dup, NULL);
  r->messages++;
  if (!keep) return;
  if (rc != MPI_SUCCESS) memset(&rec, 0, sizeof rec);
  uint64_t a = k * r->chunk, b = a + r->chunk < r->size ? a + r->chunk : r->size;
  const cubert_failure *f = need(r, import_or_explain(r, &rec, "an unread chunk"));
  if (f) span_add(r, a, b, f);
}

/* Takes chunks from..nchunks-1 of the exchange (`direct`: bare bytes, no
 * prefix, no record), each with the failure record that follows it when
 * the sender flagged it unread, through buf (cap bytes: at least the
 * prefix; take); drops their bytes. keep: as take_record. Stops at an
 * error: MPI says the transport broke, and what follows cannot be counted
 * (it is never more than the sender sent: the receiver waits for nothing
 * that will not come), or no memory could hold a message. */
static void drain_chunks(cubert_mpi_request *r, uint64_t from, uint64_t nchunks, bool direct, unsigned char *buf,
                         size_t cap, bool keep) {
  for (uint64_t k = from; k < nchunks; k++) {
    int got = 0;
    if (take(buf, cap, r->peer, r->ptag, r->cs->dup, &got) != MPI_SUCCESS) break;
    r->messages++;
    if (!direct && (chunk_flags(buf, got) & WIRE_CHUNK_UNREAD)) take_record(r, k, keep);
  }
}

/* Receives the rest of an exchange whose bytes cannot land (a view that
 * does not fit, a header that makes no sense is not drained: nothing is
 * known of what follows). Every message the header announces is taken,
 * with or without host memory: without, each goes through the request's
 * header buffer (no longer needed: the header is decoded), a message
 * longer than it through anonymous pages mapped for it (take). */
static void drain(cubert_mpi_request *r, const wire_header *h) {
  if (h->flags & WIRE_EAGER) return; /* the chunk came with the header */
  bool direct = h->flags & WIRE_DIRECT;   /* bare chunks, nothing else */
  size_t cap = (size_t)((direct ? 0 : WIRE_CHUNK_PREFIX) + (h->chunk < (1ull << 30) ? h->chunk : 0));
  if (cap < CUBERT_FAILURE_RECORD_SIZE) cap = CUBERT_FAILURE_RECORD_SIZE;
  unsigned char *buf = mb_malloc(cap);
  unsigned char *use = buf ? buf : r->header;
  if (!buf) cap = sizeof r->header;
  if (h->nranges) take(use, cap, r->peer, r->ptag, r->cs->dup, NULL);
  if (h->flags & WIRE_IPC) { /* no chunk follows: the sender waits to hear its buffer is free */
    mpi_ipc_ack(r->peer, r->cs->dup, r->ptag);
    mb_free(buf);
    return;
  }
  drain_chunks(r, 0, h->nchunks, direct, use, cap, false);
  mb_free(buf);
}

/* Taints view bytes [a, b) with f. */
static cubert_status taint_part(cubert_mpi_request *r, uint64_t a, uint64_t b, const cubert_failure *f) {
  if (b <= a) return CUBERT_OK;
  cubert_handle *part = NULL;
  cubert_status st = cubert_handle_slice(r->view, a, r->size - b, &part);
  if (st == CUBERT_OK) st = cubert_handle_taint(r->client, part, f);
  else st = cubert_handle_taint(r->client, r->view, f); /* no memory for the slice: all of the view */
  cubert_handle_release(part);
  return st;
}

static const cubert_failure *import_or_explain(cubert_mpi_request *r, const cubert_failure_record *rec,
                                               const char *what) {
  const cubert_failure *f = NULL;
  if (cubert_failure_import(rec, &f) == CUBERT_OK) return f;
  char why[400];
  snprintf(why, sizeof why, "%s from rank %d arrived with a failure record that could not be read: %s", what,
           r->peer, cubert_last_error_message());
  cubert_failure_create(r->client, CUBERT_ERR_BACKEND, why, &f);
  return f;
}

/* A receive that learnt nothing it could use: the whole view is tainted
 * with `why`, the request freed. */
static cubert_status fail_whole(cubert_mpi_request *r, const char *why) {
  const cubert_failure *f = NULL;
  if (cubert_failure_create(r->client, CUBERT_ERR_BACKEND, why, &f) == CUBERT_OK) {
    taint_part(r, 0, r->size, f);
    cubert_failure_release(f);
  }
  request_free(r);
  return fail(CUBERT_ERR_BACKEND, "cubert_mpi_recv %s (the view is tainted)", why);
}

/* Lands chunk k (its message at msg: prefix and bytes, whole) on the view:
 * the bytes are written, or the chunk's range becomes a span when the
 * sender could not read it, an injected fault covers it (chunks from `stop`
 * on) or its checksum does not match. *inj: the injected failure, made at
 * first use. `sb`: the pinned buffer msg lies in, at byte `at` (its write
 * is queued, done at the next sync), or NULL (a blocking write). */
static void land_chunk(cubert_mpi_request *r, uint64_t k, unsigned char *msg, uint64_t stop,
                       const cubert_failure **injp, const stage_buf *sb, uint64_t at) {
  char why[600];
  uint64_t a = k * r->chunk, b = a + r->chunk < r->size ? a + r->chunk : r->size;
  unsigned char *data = msg + WIRE_CHUNK_PREFIX;
  const cubert_failure *inj = *injp;
  int rc;
  cubert_status st;
  uint64_t flags = wire_get64(msg + 8);
  const cubert_failure *bad = NULL;
  bool failed = false; /* the chunk does not land (bad: why, when it could be made) */
  if (flags & WIRE_CHUNK_UNREAD) {
    cubert_failure_record rec;
    rc = MPI_Recv(&rec, CUBERT_FAILURE_RECORD_SIZE, MPI_BYTE, r->peer, r->ptag + 1, r->cs->dup, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) memset(&rec, 0, sizeof rec);
    bad = import_or_explain(r, &rec, "an unread chunk");
    failed = true;
    r->messages++;
  }
  if (!failed && k >= stop) {
    if (!inj) inj = injected_failure(r, r->hit.fault == MPI_FAULT_FAIL ? "receive failed" : "receive stopped part way");
    bad = inj;
    if (bad) cubert_failure_retain(bad);
    failed = true;
    note(r, CUBERT_ERR_BACKEND, "%s", inj ? cubert_failure_message(inj) : "injected fault");
  }
  if (!failed && r->injected && r->hit.fault == MPI_FAULT_SCRIBBLE && b > a) {
    uint64_t sd = r->hit.seed ^ k;
    size_t n = (size_t)((double)(b - a) * r->hit.fraction);
    if (!n) n = 1;
    for (size_t i = 0; i < n; i++) data[(sd + i * 7919u) % (b - a)] ^= (unsigned char)(0xa5 + i);
  }
  if (!failed && wire_checksum(data, (size_t)(b - a)) != wire_get64(msg)) {
    snprintf(why, sizeof why,
             "bytes %llu..%llu from rank %d tag %d arrived damaged (checksum mismatch)%s", (unsigned long long)a,
             (unsigned long long)b, r->peer, r->tag,
             r->injected && r->hit.fault == MPI_FAULT_SCRIBBLE ? " after an injected scribble" : "");
    cubert_failure_create(r->client, CUBERT_ERR_BACKEND, why, &bad);
    failed = true;
  }
  if (failed) {
    bad = need(r, bad);
    if (bad) span_add(r, a, b, bad);
  } else {
    cubert_handle *part = NULL;
    st = cubert_handle_slice(r->view, a, r->size - b, &part);
    if (st == CUBERT_OK && sb) {
      /* MPI wrote these bytes of the buffer: no earlier failure holds them */
      st = cubert_host_buffer_mark_written(sb->hb, at + WIRE_CHUNK_PREFIX, b - a);
      if (st == CUBERT_OK) st = cubert_handle_write_host(r->client, part, sb->hb, at + WIRE_CHUNK_PREFIX, b - a);
    } else if (st == CUBERT_OK) {
      st = cubert_handle_write(r->client, part, data, b - a);
    }
    cubert_handle_release(part);
    if (st != CUBERT_OK) {
      /* a write that failed tainted its bytes itself, but one refused
       * before it was queued (no memory for its record, or for the slice)
       * did not: the span carries the write's failure, or a new one */
      snprintf(why, sizeof why, "writing bytes %llu..%llu failed: %s", (unsigned long long)a,
               (unsigned long long)b, cubert_last_error_message());
      const cubert_failure *f = need(r, failure_for(r->client, st, why));
      note(r, st, "%s", why);
      if (f) span_add(r, a, b, f);
    }
  }
  *injp = inj;
}

/* After the last sync of a receive, before the spans are tainted: a byte
 * of the view tainted outside every span is one whose queued write failed
 * (at a fence): the call says so (the ledger already has it tainted). */
static void write_failures(cubert_mpi_request *r) {
  uint64_t base = cubert_handle_offset_start(r->view), from = base;
  for (;;) {
    uint64_t s = 0, e = 0;
    const cubert_failure *f = NULL;
    if (cubert_handle_tainted_range(r->client, r->view, from, &s, &e, &f) != CUBERT_OK || !f) return;
    uint64_t p = s - base; /* covered as far as p by spans */
    for (bool moved = true; p < e - base && moved;) {
      moved = false;
      for (size_t i = 0; i < r->nspans; i++)
        if (r->spans[i].start <= p && p < r->spans[i].end) {
          p = r->spans[i].end;
          moved = true;
        }
    }
    bool covered = p >= e - base;
    if (!covered)
      note(r, cubert_failure_status(f), "writing bytes %llu..%llu to the device failed: %s",
           (unsigned long long)(s - base), (unsigned long long)(e - base), cubert_failure_message(f));
    cubert_failure_release(f);
    if (!covered) return;
    from = e;
  }
}

/* Why chunk k (bytes [a, b)) of a direct transfer is not good: NULL when
 * it is; else a reference. `rc`/`got`: how its receive ended. Injected
 * receive faults: chunks from `stop` on fail; a scribble taints the chunk
 * (the direct form carries no checksum to find the damage with, so the
 * receiver taints what it would damage). */
static const cubert_failure *direct_verdict(cubert_mpi_request *r, uint64_t k, int rc, int got, uint64_t stop,
                                            const cubert_failure **injp) {
  uint64_t a = k * r->chunk, b = a + r->chunk < r->size ? a + r->chunk : r->size;
  char t[MPI_MAX_ERROR_STRING + 1], why[600];
  const cubert_failure *bad = NULL;
  bool failed = true;
  if (rc != MPI_SUCCESS || (uint64_t)got != b - a) {
    if (rc == MPI_SUCCESS) snprintf(t, sizeof t, "chunk %llu has %d bytes, expected %llu", (unsigned long long)k, got,
                                    (unsigned long long)(b - a));
    else mpi_text(rc, t, sizeof t);
    snprintf(why, sizeof why, "the transfer from rank %d tag %d broke at byte %llu: %s", r->peer, r->tag,
             (unsigned long long)a, t);
    note(r, CUBERT_ERR_BACKEND, "%s", why);
    cubert_failure_create(r->client, CUBERT_ERR_BACKEND, why, &bad);
  } else if (k >= stop) {
    if (!*injp)
      *injp = injected_failure(r, r->hit.fault == MPI_FAULT_FAIL ? "receive failed" : "receive stopped part way");
    bad = *injp;
    if (bad) cubert_failure_retain(bad);
    note(r, CUBERT_ERR_BACKEND, "%s", bad ? cubert_failure_message(bad) : "injected fault");
  } else if (r->injected && r->hit.fault == MPI_FAULT_SCRIBBLE && b > a) {
    snprintf(why, sizeof why,
             "bytes %llu..%llu from rank %d tag %d arrived damaged by an injected scribble (the direct form has no "
             "checksum to find it: the receiver taints what it damaged)",
             (unsigned long long)a, (unsigned long long)b, r->peer, r->tag);
    cubert_failure_create(r->client, CUBERT_ERR_BACKEND, why, &bad);
  } else {
    failed = false;
  }
  return failed ? need(r, bad) : NULL;
}

/* The chunks of a direct transfer (mpi/direct.h), all posted at once: into
 * the view itself under an external write per chunk, when this rank hands
 * device memory to MPI; else into a pinned buffer of the whole view, then
 * written to the device. A chunk whose landing cannot begin is received
 * into scratch memory (scratch_get: the heap's, else pages mapped for it)
 * and tainted with why. With neither, it is posted with no buffer, a
 * truncated receive (erroneous, see take), the last resort left: its
 * chunk is tainted all the same. */
static void recv_direct(cubert_mpi_request *r, uint64_t stop, const cubert_failure **injp) {
  uint64_t n = r->nchunks;
  bool into_view = direct_on();
  r->device_direct = into_view;
  MPI_Request *rq = mb_malloc((size_t)n * sizeof *rq);
  cubert_external **ext = mb_calloc((size_t)n, sizeof *ext);
  const cubert_failure **early = mb_calloc((size_t)n, sizeof *early);
  scratch spare = {0};
  stage_buf sb = {0};
  if (!rq || !ext || !early || (!into_view && !stage_take(r->client, (size_t)r->size, &sb))) {
    note(r, CUBERT_ERR_OUT_OF_MEMORY, "out of memory receiving %llu bytes", (unsigned long long)r->size);
    wire_header h = {r->size, 0, r->chunk, n, r->ptag, WIRE_DIRECT};
    drain(r, &h);
    const cubert_failure *f = NULL;
    cubert_failure_create(r->client, CUBERT_ERR_OUT_OF_MEMORY, r->message, &f);
    if ((f = need(r, f))) span_add(r, 0, r->size, f);
    mb_free(rq);
    mb_free(ext);
    mb_free(early);
    return;
  }
  for (uint64_t k = 0; k < n; k++) {
    uint64_t a = k * r->chunk, b = a + r->chunk < r->size ? a + r->chunk : r->size;
    void *addr = into_view ? NULL : sb.p + a;
    if (into_view && !(ext[k] = direct_recv_begin(r->client, r->view, a, b, &addr))) {
      char why[400];
      snprintf(why, sizeof why, "bytes %llu..%llu could not be received into the view: %s", (unsigned long long)a,
               (unsigned long long)b, cubert_last_error_message());
      early[k] = need(r, failure_for(r->client, CUBERT_ERR_BACKEND, why));
      note(r, CUBERT_ERR_BACKEND, "%s", why);
      if (!spare.p) scratch_get(&spare, (size_t)r->size);
      addr = spare.p ? spare.p + a : NULL;
    }
    MPI_Irecv(addr, addr ? (int)(b - a) : 0, MPI_BYTE, r->peer, r->ptag, r->cs->dup, &rq[k]);
  }
  r->messages += n;
  prof_lap(PROF_POST, &r->pt);
  for (uint64_t k = 0; k < n; k++) {
    uint64_t a = k * r->chunk, b = a + r->chunk < r->size ? a + r->chunk : r->size;
    MPI_Status s;
    int got = 0, rc = MPI_Wait(&rq[k], &s);
    if (rc == MPI_SUCCESS) MPI_Get_count(&s, MPI_BYTE, &got);
    prof_lap(PROF_CHUNK_WAIT, &r->pt);
    const cubert_failure *bad = early[k] ? early[k] : direct_verdict(r, k, rc, got, stop, injp);
    if (ext[k]) {
      cubert_handle_external_end(ext[k], bad); /* repaired, or tainted with bad */
    } else if (!bad && !into_view) {
      cubert_handle *part = NULL;
      cubert_status st = cubert_handle_slice(r->view, a, r->size - b, &part);
      if (st == CUBERT_OK) st = cubert_host_buffer_mark_written(sb.hb, a, b - a);
      if (st == CUBERT_OK) st = cubert_handle_write_host(r->client, part, sb.hb, a, b - a);
      cubert_handle_release(part);
      if (st != CUBERT_OK) { /* as in land_chunk */
        char why[600];
        snprintf(why, sizeof why, "writing bytes %llu..%llu failed: %s", (unsigned long long)a,
                 (unsigned long long)b, cubert_last_error_message());
        bad = need(r, failure_for(r->client, st, why));
        note(r, st, "%s", why);
      }
    }
    if (bad) span_add(r, a, b, bad);
    prof_lap(PROF_LAND, &r->pt);
  }
  if (!into_view) {
    fence(r->client, r->view); /* the writes are over: the buffer goes back */
    stage_give(&sb);
    write_failures(r);
  }
  if (spare.p) scratch_put(&spare);
  mb_free(rq);
  mb_free(ext);
  mb_free(early);
}

/* Waits for the header and checks it: true with *h filled; false when
 * the receive learnt nothing it could use (the view tainted, the request
 * freed, the call's status in *st). */
static bool recv_header(cubert_mpi_request *r, wire_header *h, cubert_status *st) {
  char t[MPI_MAX_ERROR_STRING + 1], why[600];
  MPI_Status s;
  r->pt = prof_now();
  int rc = MPI_Wait(&r->header_req, &s);
  prof_lap(PROF_HEADER_WAIT, &r->pt);
  r->messages = 1;
  if (rc != MPI_SUCCESS) {
    mpi_text(rc, t, sizeof t);
    snprintf(why, sizeof why, "the header from rank %d tag %d did not arrive: %s", r->peer, r->tag, t);
    *st = fail_whole(r, why);
    return false;
  }
  r->peer = s.MPI_SOURCE;
  r->tag = s.MPI_TAG;
  int count = 0;
  MPI_Get_count(&s, MPI_BYTE, &count);
  char notheader[256];
  if (count < WIRE_HEADER_SIZE) {
    snprintf(notheader, sizeof notheader, "a message of %d bytes is not a cubert transfer header (%d bytes)", count,
             WIRE_HEADER_SIZE);
  } else if (wire_header_decode(r->header, h, notheader, sizeof notheader)) {
    uint64_t want = WIRE_HEADER_SIZE + ((h->flags & WIRE_EAGER) ? WIRE_CHUNK_PREFIX + h->size : 0) +
                    ((h->flags & WIRE_IPC) ? WIRE_IPC_BLOCK : 0) +
                    ((h->flags & WIRE_FAILED) ? CUBERT_FAILURE_RECORD_SIZE : 0);
    if ((uint64_t)count == want)
      notheader[0] = '\0';
    else
      snprintf(notheader, sizeof notheader, "a cubert transfer header message of %d bytes, expected %llu", count,
               (unsigned long long)want);
  }
  if (notheader[0]) {
    snprintf(why, sizeof why, "from rank %d tag %d: %s", r->peer, r->tag, notheader);
    *st = fail_whole(r, why);
    return false;
  }
  r->ptag = h->payload_tag;
  r->chunk = h->chunk;
  r->nchunks = h->nchunks;
  return true;
}

/* Whether the bytes can land (the view can be written and has the sent
 * size); if not, takes the rest of the exchange, changes nothing, frees
 * the request and says why in *st. */
static bool recv_fits(cubert_mpi_request *r, const wire_header *h, cubert_status *st) {
  uint64_t fs = 0, fe = 0;
  const cubert_failure *probe = NULL;
  cubert_status s = cubert_handle_tainted_range(r->client, r->view, cubert_handle_offset_start(r->view), &fs, &fe,
                                                &probe);
  if (probe) cubert_failure_release(probe);
  if (s == CUBERT_OK && h->size == r->size) return true;
  char msg[900];
  if (s != CUBERT_OK)
    snprintf(msg, sizeof msg, "cubert_mpi_recv from rank %d tag %d: the view cannot be written: %s", r->peer, r->tag,
             view_refusal());
  else {
    snprintf(msg, sizeof msg,
             "cubert_mpi_recv from rank %d tag %d: rank %d sent %llu bytes, the view holds %llu "
             "(the exchange was received and dropped; the view is unchanged)",
             r->peer, r->tag, r->peer, (unsigned long long)h->size, (unsigned long long)r->size);
    s = CUBERT_ERR_OUT_OF_RANGE;
  }
  drain(r, h);
  request_free(r);
  *st = fail(s, "%s", msg);
  return false;
}

/* The sender's tainted ranges (h->nranges of them), as spans. */
static void recv_ranges(cubert_mpi_request *r, const wire_header *h) {
  if (!h->nranges) return;
  char t[MPI_MAX_ERROR_STRING + 1], why[600];
  size_t len = (size_t)h->nranges * WIRE_RANGE_SIZE;
  unsigned char *buf = mb_malloc(len);
  if (!buf) {
    /* no memory for the list: the message is taken all the same (else a
     * chunk's receive would match it, and the exchange's messages would be
     * left to a later transfer), and the whole view carries the spare */
    unsigned char one[WIRE_RANGE_SIZE];
    take(one, sizeof one, r->peer, r->ptag, r->cs->dup, NULL);
    note(r, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory for the %llu tainted ranges from rank %d",
         (unsigned long long)h->nranges, r->peer);
    const cubert_failure *f = need(r, NULL);
    if (f) span_add(r, 0, r->size, f);
    r->nsent = r->nspans;
    r->messages++;
    return;
  }
  int rc = MPI_Recv(buf, (int)len, MPI_BYTE, r->peer, r->ptag, r->cs->dup, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) {
    mpi_text(rc, t, sizeof t);
    snprintf(why, sizeof why, "the tainted ranges from rank %d did not arrive: %s", r->peer, t);
    const cubert_failure *f = NULL;
    cubert_failure_create(r->client, CUBERT_ERR_BACKEND, why, &f);
    note(r, CUBERT_ERR_BACKEND, "%s", why);
    if ((f = need(r, f))) span_add(r, 0, r->size, f);
  } else {
    for (uint64_t i = 0; i < h->nranges; i++) {
      const unsigned char *p = buf + i * WIRE_RANGE_SIZE;
      uint64_t off = wire_get64(p), n = wire_get64(p + 8);
      if (off > r->size || n > r->size - off) continue; /* the header said the size: cannot be */
      const cubert_failure *f = need(r, import_or_explain(r, (const cubert_failure_record *)(p + 16), "a tainted range"));
      if (f) span_add(r, off, off + n, f);
    }
  }
  mb_free(buf);
  r->nsent = r->nspans;
  r->messages++;
  prof_lap(PROF_CHUNK_WAIT, &r->pt);
}

enum { RING = 3 };

/* After chunk k of a staged receive broke (an MPI error, a chunk of the
 * wrong size): every message of the exchange still to come is taken, so
 * that the sender's sends complete (its cubert_mpi_finalize, or the
 * destruction of its client, waits for them) and none is left for a later
 * transfer's receive to match. The view's bytes from the break on land
 * nowhere: the caller's span gives them the break's failure, the call's
 * one error; a chunk the sender flagged unread gets the sender's failure
 * instead (its record: the original cause, as on a transfer that did not
 * break). `kgot`: the bytes chunk k's message wrote into its slot (0 when
 * it told nothing: its flags are not read); ktaken: false when chunk k's
 * receive was never posted (MPI_Irecv failed), so its message is still to
 * come.
 *
 * The receives still posted in the ring are cancelled and waited for: the
 * wait returns whatever the sender does, and either the cancel succeeded
 * (the message stays for another receive) or the receive completed and
 * took its message (MPI 4.0, section 3.8.4). A message matches the
 * earliest posted receive still pending (section 3.5, non-overtaking), so
 * those that completed hold the next messages of the exchange, in the
 * order they were posted; the rest are then taken one at a time into the
 * ring (drain_chunks). When chunk k's own receive failed with an error
 * other than a truncation, its message is counted as taken: if it was not,
 * one message of the exchange stays behind, but the receiver never waits
 * for one that will not come. */
static void recv_broken(cubert_mpi_request *r, uint64_t k, bool ktaken, int kgot, MPI_Request *rq,
                        unsigned char *ring, size_t slot, uint64_t posted) {
  if (ktaken && (chunk_flags(ring + (k % RING) * slot, kgot) & WIRE_CHUNK_UNREAD)) take_record(r, k, true);
  uint64_t next = ktaken ? k + 1 : k; /* the next message of the exchange not yet taken */
  for (uint64_t j = k + 1; j < posted; j++) {
    MPI_Request *q = &rq[j % RING];
    MPI_Status s;
    if (*q == MPI_REQUEST_NULL) continue; /* never posted: nothing took its message */
    MPI_Cancel(q);
    int rc = MPI_Wait(q, &s), cancelled = 0, got = 0, cls = MPI_SUCCESS;
    MPI_Test_cancelled(&s, &cancelled);
    if (cancelled) continue; /* its message is still to come: drained below */
    if (rc == MPI_SUCCESS) MPI_Get_count(&s, MPI_BYTE, &got);
    else if (MPI_Error_class(rc, &cls) == MPI_SUCCESS && cls == MPI_ERR_TRUNCATE) got = (int)slot;
    r->messages++;
    if (chunk_flags(ring + (j % RING) * slot, got) & WIRE_CHUNK_UNREAD) take_record(r, next, true);
    next++;
  }
  /* the ring is free: no receive is posted into it, and chunk k-1's write
   * from its slot is over after this */
  fence(r->client, r->view);
  drain_chunks(r, next, r->nchunks, false, ring, RING * slot, true);
}

/* The chunks of the staged form, RING posted at once into a pinned ring;
 * chunk k's write to the device is queued, and runs while chunk k+1
 * arrives. */
static void recv_staged(cubert_mpi_request *r, const wire_header *h, uint64_t stop, const cubert_failure **inj) {
  char t[MPI_MAX_ERROR_STRING + 1], why[600];
  size_t slot = (size_t)(WIRE_CHUNK_PREFIX + r->chunk);
  if (r->chunk > r->size) slot = (size_t)(WIRE_CHUNK_PREFIX + r->size); /* one chunk: no bigger */
  stage_buf ringb = {0};
  unsigned char *ring = stage_take(r->client, RING * slot, &ringb) ? ringb.p : NULL;
  if (!ring) {
    note(r, CUBERT_ERR_OUT_OF_MEMORY, "no pinned memory for %zu bytes of receive buffers: %s", RING * slot,
         cubert_last_error_message());
    wire_header rest = *h;
    rest.nranges = 0; /* taken */
    drain(r, &rest);
    const cubert_failure *f = NULL;
    cubert_failure_create(r->client, CUBERT_ERR_OUT_OF_MEMORY, r->message, &f);
    if ((f = need(r, f))) span_add(r, 0, r->size, f);
    return;
  }
  MPI_Request rq[RING] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  uint64_t posted = 0;
  for (; posted < r->nchunks && posted < RING; posted++)
    MPI_Irecv(ring + (posted % RING) * slot, (int)slot, MPI_BYTE, r->peer, r->ptag, r->cs->dup, &rq[posted % RING]);
  for (uint64_t k = 0; k < r->nchunks; k++) {
    uint64_t a = k * r->chunk, b = a + r->chunk < r->size ? a + r->chunk : r->size;
    unsigned char *msg = ring + (k % RING) * slot;
    MPI_Status s;
    bool was_posted = rq[k % RING] != MPI_REQUEST_NULL;
    int rc = MPI_Wait(&rq[k % RING], &s);
    prof_lap(PROF_CHUNK_WAIT, &r->pt);
    r->messages++;
    int got = 0;
    if (rc == MPI_SUCCESS) MPI_Get_count(&s, MPI_BYTE, &got);
    if (rc != MPI_SUCCESS || (uint64_t)got != WIRE_CHUNK_PREFIX + (b - a)) {
      /* the transfer broke: the rest of the view is not what was sent */
      if (rc == MPI_SUCCESS) snprintf(t, sizeof t, "chunk %llu has %d bytes, expected %llu", (unsigned long long)k,
                                      got, (unsigned long long)(WIRE_CHUNK_PREFIX + (b - a)));
      else mpi_text(rc, t, sizeof t);
      snprintf(why, sizeof why, "the transfer from rank %d tag %d broke at byte %llu: %s", r->peer, r->tag,
               (unsigned long long)a, t);
      const cubert_failure *f = NULL;
      cubert_failure_create(r->client, CUBERT_ERR_BACKEND, why, &f);
      note(r, CUBERT_ERR_BACKEND, "%s", why);
      if ((f = need(r, f))) span_add(r, a, r->size, f);
      int cls = MPI_SUCCESS;
      bool truncated = rc != MPI_SUCCESS && MPI_Error_class(rc, &cls) == MPI_SUCCESS && cls == MPI_ERR_TRUNCATE;
      recv_broken(r, k, was_posted, rc == MPI_SUCCESS ? got : truncated ? (int)slot : 0, rq, ring, slot, posted);
      break;
    }
    if (k >= 1 && posted < r->nchunks) {
      /* chunk k-1's write is over after this sync: its slot takes the next */
      fence(r->client, r->view);
      prof_lap(PROF_LAND, &r->pt);
      MPI_Irecv(ring + (posted % RING) * slot, (int)slot, MPI_BYTE, r->peer, r->ptag, r->cs->dup,
                &rq[posted % RING]);
      posted++;
      prof_lap(PROF_POST, &r->pt);
    }
    land_chunk(r, k, msg, stop, inj, &ringb, (uint64_t)(msg - ring));
    prof_lap(PROF_LAND, &r->pt);
  }
  fence(r->client, r->view); /* the last writes are over: the ring goes back */
  stage_give(&ringb);
  write_failures(r);
}

/* The bytes, in the form the header names. */
static void recv_bytes(cubert_mpi_request *r, const wire_header *h) {
  uint64_t stop = r->nchunks;
  if (r->injected && r->hit.fault == MPI_FAULT_PARTIAL) stop = (uint64_t)((double)r->nchunks * r->hit.fraction);
  if (r->injected && r->hit.fault == MPI_FAULT_FAIL) stop = 0;
  const cubert_failure *inj = NULL;
  r->shared = h->flags & WIRE_IPC;
  if (h->flags & WIRE_FAILED) { /* the sender could not send: nothing follows */
    const cubert_failure *f = import_or_explain(r, (const cubert_failure_record *)(r->header + WIRE_HEADER_SIZE),
                                                "a failed send");
    note(r, CUBERT_ERR_BACKEND, "rank %d could not send (nothing crossed; the view is tainted): %s", r->peer,
         f ? cubert_failure_message(f) : "its failure could not be made here");
    if ((f = need(r, f))) span_add(r, 0, r->size, f);
  } else if (r->shared) { /* the bytes wait in the sender's shared memory */
    ipc_call call = ipc_call_of(r, stop);
    mpi_ipc_land(&call, r->header + WIRE_HEADER_SIZE);
    write_failures(r); /* a copy that failed at its fence (the land waited for them) */
    r->messages++; /* the answer */
    prof_lap(PROF_IPC_LAND, &r->pt);
  } else if (h->flags & WIRE_EAGER) { /* the one chunk came with the header */
    land_chunk(r, 0, r->header + WIRE_HEADER_SIZE, stop, &inj, NULL, 0);
    /* as a one-chunk staged transfer: a write that fails at its fence is
     * the call's to report */
    fence(r->client, r->view);
    write_failures(r);
    prof_lap(PROF_LAND, &r->pt);
  } else if (h->flags & WIRE_DIRECT) {
    recv_direct(r, stop, &inj);
  } else if (r->nchunks) {
    recv_staged(r, h, stop, &inj);
  }
  if (inj) cubert_failure_release(inj);
}

static cubert_status finish_recv(cubert_mpi_request *r, cubert_mpi_info *info) {
  wire_header h;
  cubert_status st = CUBERT_OK;
  if (!recv_header(r, &h, &st) || !recv_fits(r, &h, &st)) return st;
  /* What keeps the account when host memory runs out on the way: a
   * failure for bytes whose own failure cannot be made, and room for every
   * span (the sender's ranges, twice over in the shared-memory form's
   * stretches, one per chunk, a few whole-view ones). Without them nothing
   * lands: the rest of the exchange is taken, the view unchanged. */
  char why[300];
  snprintf(why, sizeof why,
           "out of host memory receiving from rank %d tag %d: the failure of these bytes could not be made",
           r->peer, r->tag);
  if (cubert_failure_create(r->client, CUBERT_ERR_OUT_OF_MEMORY, why, &r->spare) != CUBERT_OK ||
      !span_reserve(r, 2 * h.nranges + h.nchunks + 4)) {
    int peer = r->peer, tag = r->tag;
    drain(r, &h);
    request_free(r);
    return fail(CUBERT_ERR_OUT_OF_MEMORY,
                "cubert_mpi_recv from rank %d tag %d: out of host memory (the exchange was received and dropped; "
                "the view is unchanged)",
                peer, tag);
  }
  int me = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  r->injected = mpi_inject_decide(false, me, r->peer, &r->hit);
  prof_lap(PROF_TAINT, &r->pt);
  recv_ranges(r, &h);
  recv_bytes(r, &h);

  /* The account: every span tainted, after the good bytes were written;
   * the sender's ranges last (tainting sets), so that bytes the sender had
   * tainted keep its cause where their chunk also failed on the way. */
  if (r->overflow) taint_part(r, 0, r->size, r->spare); /* a span was lost: all of it */
  for (size_t j = 0; j < r->nspans; j++) {
    size_t i = j < r->nspans - r->nsent ? r->nsent + j : j - (r->nspans - r->nsent);
    st = taint_part(r, r->spans[i].start, r->spans[i].end, r->spans[i].failure);
    if (st != CUBERT_OK)
      note(r, st, "tainting bytes %llu..%llu failed: %s", (unsigned long long)r->spans[i].start,
           (unsigned long long)r->spans[i].end, cubert_last_error_message());
  }
  prof_lap(PROF_TAINT, &r->pt);
  st = verdict(r, info);
  prof_lap(PROF_VERDICT, &r->pt);
  prof_count(false, r->messages, r->size);
  request_free(r);
  return st;
}

static cubert_status start_recv(const char *fn, cubert_client *client, cubert_handle *view, int source, int tag,
                                MPI_Comm comm, cubert_mpi_request **out) {
  cubert_mpi_request *r = NULL;
  cubert_status st = request_new(fn, client, view, source, tag, comm, false, &r);
  if (st) return st;
  int rc = MPI_Irecv(r->header, (int)sizeof r->header, MPI_BYTE, source, tag, comm, &r->header_req);
  prof_lap(PROF_POST, &r->pt);
  if (rc != MPI_SUCCESS) {
    char t[MPI_MAX_ERROR_STRING + 1];
    mpi_text(rc, t, sizeof t);
    request_free(r);
    return fail(CUBERT_ERR_BACKEND, "%s: MPI_Irecv failed: %s", fn, t);
  }
  *out = r;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ entry points */

cubert_status cubert_mpi_send(cubert_client *client, const cubert_handle *view, int dest, int tag, MPI_Comm comm,
                              cubert_mpi_info *info) {
  cubert_mpi_request *r = NULL;
  cubert_status st = start_send("cubert_mpi_send", client, view, dest, tag, comm, &r);
  return st ? st : finish_send(r, info);
}

cubert_status cubert_mpi_recv(cubert_client *client, cubert_handle *view, int source, int tag, MPI_Comm comm,
                              cubert_mpi_info *info) {
  cubert_mpi_request *r = NULL;
  cubert_status st = start_recv("cubert_mpi_recv", client, view, source, tag, comm, &r);
  return st ? st : finish_recv(r, info);
}

cubert_status cubert_mpi_isend(cubert_client *client, const cubert_handle *view, int dest, int tag, MPI_Comm comm,
                               cubert_mpi_request **request) {
  if (!request) return fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_mpi_isend: request is NULL");
  return start_send("cubert_mpi_isend", client, view, dest, tag, comm, request);
}

cubert_status cubert_mpi_irecv(cubert_client *client, cubert_handle *view, int source, int tag, MPI_Comm comm,
                               cubert_mpi_request **request) {
  if (!request) return fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_mpi_irecv: request is NULL");
  return start_recv("cubert_mpi_irecv", client, view, source, tag, comm, request);
}

cubert_status cubert_mpi_wait(cubert_mpi_request *request, cubert_mpi_info *info) {
  if (!request) return fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_mpi_wait: request is NULL");
  return request->send ? finish_send(request, info) : finish_recv(request, info);
}
