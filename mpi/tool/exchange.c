/* mpi/tool/exchange.c: the send/receive programs of `cubert-mpi campaign`
 * (mpi/tool/exchange.h says what one is). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "mpi/tool/exchange.h"

#include <inttypes.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/faultinj.h"
#include "cubert/mpi.h"
#include "mpi/wire.h"

#define CHUNK 1024 /* CUBERT_MPI_CHUNK while the programs run */
#define TAG 77
#define DONE_TAG 78 /* a shared exchange's end: the receiver to the sender, on MPI_COMM_WORLD */
#define MAX_OPS 4

static const char *const names[XC_COUNT] = {
    [XC_PROGRAMS] = "exchanges", [XC_STEPS] = "steps", [XC_CHECKS] = "checks", [XC_FAULTS] = "faults",
    [XC_SHARED] = "through-shared-memory",
    [XC_SEND_FAIL] = "send-fail", [XC_SEND_PARTIAL] = "send-partial", [XC_SEND_SCRIBBLE] = "send-scribble",
    [XC_RECV_FAIL] = "recv-fail", [XC_RECV_PARTIAL] = "recv-partial", [XC_RECV_SCRIBBLE] = "recv-scribble",
    [XC_SENDER_FAIL] = "sender-fail", [XC_SENDER_SCRIBBLE] = "sender-scribble",
    [XC_SENDER_PARTIAL] = "sender-partial", [XC_SENDER_ASYNC] = "sender-async",
    [XC_SENDER_ASYNC_SCRIBBLE] = "sender-async-scribble", [XC_SENDER_READ_FAIL] = "sender-read-fail", [XC_RECEIVER_FAIL] = "receiver-write-fail",
    [XC_RECEIVER_SCRIBBLE] = "receiver-write-scribble", [XC_RECEIVER_PARTIAL] = "receiver-write-partial",
    [XC_SENDER_COPY_FAIL] = "sender-copy-fail", [XC_RECEIVER_COPY_FAIL] = "receiver-copy-fail",
    [XC_RECEIVER_COPY_SCRIBBLE] = "receiver-copy-scribble", [XC_RECEIVER_COPY_PARTIAL] = "receiver-copy-partial",
    [XC_VIOLATIONS] = "violations", [XC_V_WRONG_BYTES] = "wrong-bytes", [XC_V_NOT_REFUSED] = "taint-not-refused",
    [XC_V_FALSE_TAINT] = "false-taint", [XC_V_ORIGIN] = "wrong-origin", [XC_V_STATUS] = "wrong-status",
    [XC_V_NOT_INJECTED] = "fault-not-injected", [XC_V_PATH] = "wrong-path", [XC_V_SETUP] = "could-not-run",
};

const char *xc_name(int k) { return k >= 0 && k < XC_COUNT ? names[k] : "?"; }

static uint64_t mix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static uint64_t below(uint64_t *s, uint64_t n) { return n ? mix(s) % n : 0; }

/* ------------------------------------------------------------ programs */

enum { MPI_NONE, MPI_FAIL, MPI_PARTIAL, MPI_SCRIBBLE };
static const char *const fractions[] = {"0.25", "0.5", "0.75", "1"};

typedef struct op {
  uint64_t off, len;
  bool fill;          /* cubert_handle_fill of one byte, else a write */
  uint8_t value;      /* the fill's byte */
  uint64_t data;      /* the write's bytes, from this seed */
  int fault;          /* -1: none; else a cubert_fault_kind */
  const char *frac;
} op;

typedef struct program {
  bool shared;        /* a shared exchange (exchange.h): through shared memory */
  uint64_t index, seed;
  int sender, receiver;
  /* the sender's handle: total bytes, the view [so, so + size) is sent */
  uint64_t total, so, size, pattern;
  int nops;
  op ops[MAX_OPS];
  /* one MPI rule: at the send or the receive */
  bool mpi_at_send;
  int mpi_fault;
  const char *mpi_frac;
  bool nb_send, nb_recv;
  /* the receiver's handle: rtotal bytes, the view at ro; stale bytes from
   * stale, a stale taint over [ts, te) */
  uint64_t rtotal, ro, stale, ts, te;
  int recv_fault; /* -1: none; else fail, scribble or partial on its nth landing write
                     (shared: its nth copy out of shared memory) */
  const char *recv_frac;
  uint64_t recv_nth;
  uint64_t read_nth; /* 0: none; else the sender's nth read during the send fails
                        (shared: its nth copy into shared memory) */
} program;

static void draw(uint64_t seed, uint64_t i, bool shared, int nranks, program *p) {
  memset(p, 0, sizeof *p);
  uint64_t s = (shared ? seed ^ 0x5ba7ed0c0ffee5ull : seed) ^ (0xd1b54a32d192ed03ull * (i + 1));
  p->shared = shared;
  p->index = i;
  p->seed = mix(&s);
  s = p->seed;
  p->sender = (int)(i % (uint64_t)nranks);
  p->receiver = nranks == 1 ? 0 : (int)((p->sender + 1 + (int)((i / (uint64_t)nranks) % (uint64_t)(nranks - 1))) % nranks);
  static const uint64_t lo[4] = {1, 65, 4097, 16385}, span[4] = {64, 4032, 12288, 8000};
  int c = (int)below(&s, 4);
  p->size = lo[c] + below(&s, span[c]);
  p->so = below(&s, 3) == 0 ? below(&s, 256) : 0;
  p->total = p->so + p->size + (below(&s, 2) ? below(&s, 256) : 0);
  p->pattern = mix(&s);
  p->nops = (int)below(&s, MAX_OPS + 1);
  static const int kinds[5] = {CUBERT_FAULT_FAIL, CUBERT_FAULT_SCRIBBLE, CUBERT_FAULT_PARTIAL, CUBERT_FAULT_ASYNC,
                               CUBERT_FAULT_ASYNC_SCRIBBLE};
  for (int k = 0; k < p->nops; k++) {
    op *o = &p->ops[k];
    o->off = below(&s, p->total);
    uint64_t room = p->total - o->off;
    o->len = 1 + below(&s, room < 6000 ? room : 6000);
    o->fill = below(&s, 2);
    o->value = (uint8_t)mix(&s);
    o->data = mix(&s);
    o->fault = below(&s, 2) ? kinds[below(&s, 5)] : -1;
    o->frac = fractions[below(&s, 4)];
  }
  p->mpi_fault = below(&s, 10) < 6 ? 1 + (int)below(&s, 3) : MPI_NONE;
  p->mpi_at_send = below(&s, 2);
  p->mpi_frac = fractions[below(&s, 4)];
  p->nb_send = below(&s, 2);
  p->nb_recv = below(&s, 2);
  p->ro = below(&s, 2) ? below(&s, 300) : 0;
  p->rtotal = p->ro + p->size + (below(&s, 2) ? below(&s, 300) : 0);
  p->stale = mix(&s);
  if (below(&s, 3) == 0) {
    p->ts = below(&s, p->rtotal);
    p->te = p->ts + 1 + below(&s, p->rtotal - p->ts);
  }
  static const int rkinds[3] = {CUBERT_FAULT_FAIL, CUBERT_FAULT_SCRIBBLE, CUBERT_FAULT_PARTIAL};
  p->recv_fault = below(&s, 5) == 0 ? rkinds[below(&s, 3)] : -1;
  p->recv_frac = fractions[below(&s, 3)]; /* 0.25 to 0.75 */
  p->recv_nth = 1 + below(&s, 3);
  p->read_nth = below(&s, 6) == 0 ? 1 + below(&s, 3) : 0;
}

static void bytes_of(uint64_t seed, unsigned char *dst, uint64_t n) {
  for (uint64_t j = 0; j < n; j += 8) {
    uint64_t v = mix(&seed);
    for (uint64_t b = 0; b < 8 && j + b < n; b++) dst[j + b] = (unsigned char)(v >> (8 * b));
  }
}

/* ------------------------------------------------------------ the model */

/* A byte's account: good (its value), tainted by a failure of this process
 * (LOCAL) or of the sender's (REMOTE: cubert_failure_remote names it). */
enum { GOOD, LOCAL, REMOTE };

typedef struct model {
  uint64_t n;
  unsigned char *val, *state;
} model;

static bool model_new(model *m, uint64_t n) {
  m->n = n;
  m->val = calloc(n + 1, 1);
  m->state = calloc(n + 1, 1);
  return m->val && m->state;
}
static void model_free(model *m) {
  free(m->val);
  free(m->state);
}

/* The sender's handle after its steps: every op in order, a faulted one
 * tainting its whole write set (an async one too: the sync before the send
 * finds it, and what wrote the bytes later keeps its own verdict). */
static void sender_model(const program *p, model *m, unsigned char *tmp) {
  bytes_of(p->pattern, m->val, p->total);
  memset(m->state, GOOD, p->total);
  for (int k = 0; k < p->nops; k++) {
    const op *o = &p->ops[k];
    if (o->fault >= 0) {
      memset(m->state + o->off, LOCAL, o->len);
      continue;
    }
    if (o->fill) memset(m->val + o->off, o->value, o->len);
    else {
      bytes_of(o->data, tmp, o->len);
      memcpy(m->val + o->off, tmp, o->len);
    }
    memset(m->state + o->off, GOOD, o->len);
  }
}

/* What the transfer makes of the receiver's handle, chunk by chunk, as
 * docs/cluster.md says it goes: the eager form or chunks of CHUNK bytes; a
 * chunk a send fault stopped carries the sender's failure, one a receive
 * fault stopped or a scribble damaged the receiver's own; the others land
 * with one write each (the receiver's write fault fails its nth), and the
 * sender's tainted ranges are tainted over them and over the failed chunks
 * with the sender's failure (readers get the original cause).
 * *recv_fired: whether the write fault fires; *send_ok, *recv_ok: whether
 * each call must return CUBERT_OK. */
typedef struct outcome {
  bool recv_fired, read_fired; /* the receiver's write fault, the sender's read fault (shared: copies) */
  bool send_ok, recv_ok;       /* whether each call must return CUBERT_OK */
  bool shared;                 /* whether the bytes cross through shared memory */
} outcome;

/* The shared-memory path (docs/cluster.md, "Ranks of one node"), for a
 * view of n bytes in nchunks chunks of CHUNK that does not go eager: the
 * sender copies each good stretch of its view before `send_stop`'s chunk
 * into its buffer (its read_nth-th copy fails); what it did not copy
 * crosses as ranges with its failures. The receiver copies each good
 * stretch before `recv_stop`'s chunk out of it (its recv_nth-th copy
 * fails), or, under a receive scribble, finds every one damaged; the
 * chunks from recv_stop on are tainted with its own failure, and the
 * ranges the sender sent over everything, with the sender's. */
static void shared_path(const program *p, const unsigned char *sv, const unsigned char *ss, unsigned char *rv,
                        unsigned char *rs, uint64_t nchunks, uint64_t send_stop, uint64_t recv_stop, bool scribbled,
                        outcome *out) {
  uint64_t n = p->size;
  uint64_t send_end = send_stop * CHUNK < n ? send_stop * CHUNK : n, recv_end = recv_stop * CHUNK < n ? recv_stop * CHUNK : n;
  for (uint64_t j = 0; j < n; j++) rs[j] = ss[j] == LOCAL || j >= send_end ? REMOTE : GOOD;
  uint64_t copies = 0;
  for (uint64_t a = 0; a < send_end;) {
    uint64_t b = a;
    while (b < send_end && rs[b] == GOOD) b++;
    if (b > a && p->read_nth && ++copies == p->read_nth) {
      memset(rs + a, REMOTE, b - a);
      out->read_fired = true;
    }
    a = b > a ? b : a + 1;
  }
  out->send_ok = memchr(ss, LOCAL, n) == NULL && send_stop == nchunks && !out->read_fired;
  copies = 0;
  for (uint64_t a = 0; a < recv_end;) {
    uint64_t b = a;
    while (b < recv_end && rs[b] == GOOD) b++;
    bool bad = scribbled;
    if (b > a && !bad && p->recv_fault >= 0 && ++copies == p->recv_nth) bad = out->recv_fired = true;
    for (uint64_t j = a; j < b; j++) {
      if (bad) rs[j] = LOCAL;
      else rv[j] = sv[j];
    }
    a = b > a ? b : a + 1;
  }
  for (uint64_t j = recv_end; j < n; j++)
    if (rs[j] != REMOTE) rs[j] = LOCAL; /* the sender's ranges keep its cause */
  out->recv_ok = memchr(rs, LOCAL, n) == NULL && memchr(rs, REMOTE, n) == NULL;
}

static void receiver_model(const program *p, const model *snd, model *m, outcome *out) {
  bytes_of(p->stale, m->val, p->rtotal);
  memset(m->state, GOOD, p->rtotal);
  if (p->te > p->ts) memset(m->state + p->ts, LOCAL, p->te - p->ts);
  const unsigned char *sv = snd->val + p->so, *ss = snd->state + p->so;
  unsigned char *rv = m->val + p->ro, *rs = m->state + p->ro;
  bool sender_taint = memchr(ss, LOCAL, p->size) != NULL;
  bool send_fault = p->mpi_fault != MPI_NONE && p->mpi_at_send;
  bool recv_fault = p->mpi_fault != MPI_NONE && !p->mpi_at_send;
  bool eager = !send_fault && !sender_taint && p->size <= WIRE_EAGER_MAX;
  /* a shared exchange arms copy faults, which the wire's reads and writes
   * do not meet; it takes the wire in the eager form and when a send
   * scribble fires (the sender knows before it chooses the path) */
  uint64_t read_nth = p->shared ? 0 : p->read_nth;
  bool write_fault = !p->shared && p->recv_fault >= 0;
  uint64_t reads = 0; /* the sender's reads during the send: the eager form reads the view whole first */
  out->read_fired = false;
  out->recv_fired = false;
  if (eager && read_nth && ++reads == read_nth) eager = false, out->read_fired = true; /* then chunks */
  uint64_t chunk = eager ? p->size : CHUNK, nchunks = (p->size + chunk - 1) / chunk;
  double f = strtod(p->mpi_frac, NULL);
  uint64_t send_stop = nchunks, recv_stop = nchunks;
  if (send_fault && p->mpi_fault == MPI_FAIL) send_stop = 0;
  if (send_fault && p->mpi_fault == MPI_PARTIAL) send_stop = (uint64_t)((double)nchunks * f);
  if (recv_fault && p->mpi_fault == MPI_FAIL) recv_stop = 0;
  if (recv_fault && p->mpi_fault == MPI_PARTIAL) recv_stop = (uint64_t)((double)nchunks * f);
  bool scribbled = p->mpi_fault == MPI_SCRIBBLE;
  out->shared = p->shared && !eager && !(send_fault && scribbled);
  if (out->shared) {
    shared_path(p, sv, ss, rv, rs, nchunks, send_stop, recv_stop, scribbled, out);
    return;
  }
  out->send_ok = !sender_taint && send_stop == nchunks;
  uint64_t writes = 0;
  for (uint64_t k = 0; k < nchunks; k++) {
    uint64_t a = k * chunk, b = a + chunk < p->size ? a + chunk : p->size;
    int whole = -1; /* the chunk's own failure, under the sender's ranges */
    bool unread = false; /* one read per good stretch of the chunk, until one fails */
    for (uint64_t j = a; k < send_stop && !eager && read_nth && j < b && !unread;) {
      while (j < b && ss[j] == LOCAL) j++;
      if (j == b) break;
      unread = ++reads == read_nth;
      while (j < b && ss[j] != LOCAL) j++;
    }
    out->read_fired = out->read_fired || unread;
    out->send_ok = out->send_ok && !unread;
    if (k >= send_stop || unread) whole = REMOTE;
    else if (k >= recv_stop || scribbled) whole = LOCAL;
    if (whole >= 0) { /* the sender's ranges keep its cause (tainted last) */
      for (uint64_t j = a; j < b; j++) rs[j] = ss[j] == LOCAL ? REMOTE : (unsigned char)whole;
      continue;
    }
    bool write_fails = write_fault && ++writes == p->recv_nth;
    out->recv_fired = out->recv_fired || write_fails;
    for (uint64_t j = a; j < b; j++) {
      rv[j] = sv[j];
      rs[j] = ss[j] == LOCAL ? REMOTE : write_fails ? LOCAL : GOOD;
    }
  }
  out->recv_ok = memchr(rs, LOCAL, p->size) == NULL && memchr(rs, REMOTE, p->size) == NULL;
}

/* ------------------------------------------------------------ checks */

typedef struct ctx {
  cubert_runtime *rt;
  cubert_client *client;
  MPI_Comm comm; /* MPI_COMM_WORLD (the wire), or its duplicate with the shared path on */
  uint64_t *counts;
  FILE *err;
  const program *p;
  const char *side;
  unsigned char *buf;
  int told;
} ctx;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void violation(ctx *x, int kind, const char *fmt, ...) {
  x->counts[XC_VIOLATIONS]++;
  x->counts[kind]++;
  if (x->told++ >= 3) return; /* the first few of a program */
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const program *p = x->p;
  fprintf(x->err, "exchange %" PRIu64 " (seed %" PRIu64 ", rank %d to rank %d, %" PRIu64 " bytes), %s: %s: %s\n",
          p->index, p->seed, p->sender, p->receiver, p->size, x->side, names[kind], what);
}

static const char *state_name(int s) {
  return s == GOOD ? "good bytes" : s == LOCAL ? "a failure of this process" : "the sender's failure";
}

/* Every byte of `h` (a whole handle) against the model: the tainted ranges
 * and their origins, then a read of every stretch of one state. */
static void check_handle(ctx *x, cubert_handle *h, const model *m, int sender_rank) {
  uint64_t n = m->n, from = 0;
  unsigned char *seen = calloc(n + 1, 1);
  if (!seen) return;
  for (;;) { /* the tainted ranges, with the origin of each */
    uint64_t s = 0, e = 0;
    const cubert_failure *f = NULL;
    cubert_status st = cubert_handle_tainted_range(x->client, h, from, &s, &e, &f);
    x->counts[XC_CHECKS]++;
    if (st != CUBERT_OK) {
      violation(x, XC_V_SETUP, "cubert_handle_tainted_range: %s", cubert_last_error_message());
      break;
    }
    if (!f) break;
    cubert_remote_origin o;
    cubert_failure_remote(f, &o);
    bool bad_good = false, bad_origin = false;
    for (uint64_t j = s; j < e && j < n; j++) {
      seen[j] = 1;
      if (m->state[j] == GOOD) bad_good = true;
      else if (m->state[j] == LOCAL ? o.remote : !o.remote || o.rank != sender_rank) bad_origin = true;
    }
    if (bad_good)
      violation(x, XC_V_FALSE_TAINT, "bytes %" PRIu64 "..%" PRIu64 " tainted (%s), the model has good bytes there", s, e,
                cubert_failure_message(f));
    if (bad_origin)
      violation(x, XC_V_ORIGIN, "bytes %" PRIu64 "..%" PRIu64 " carry a failure %s (rank %d): %s", s, e,
                o.remote ? "from another process" : "of this process", o.rank, cubert_failure_message(f));
    cubert_failure_release(f);
    if (e <= from) break;
    from = e;
  }
  for (uint64_t j = 0; j < n; j++)
    if (m->state[j] != GOOD && !seen[j]) {
      uint64_t e = j;
      while (e < n && m->state[e] != GOOD && !seen[e]) e++;
      violation(x, XC_V_NOT_REFUSED, "bytes %" PRIu64 "..%" PRIu64 " are not tainted; the model has %s", j, e,
                state_name(m->state[j]));
      j = e;
    }
  free(seen);
  for (uint64_t a = 0; a < n;) { /* a read of every stretch */
    uint64_t b = a;
    bool good = m->state[a] == GOOD;
    while (b < n && (m->state[b] == GOOD) == good) b++;
    cubert_handle *part = NULL;
    cubert_status st = cubert_handle_slice(h, a, n - b, &part);
    if (st == CUBERT_OK) st = cubert_handle_read(x->client, part, x->buf, b - a);
    cubert_handle_release(part);
    x->counts[XC_CHECKS]++;
    if (good && st != CUBERT_OK)
      violation(x, XC_V_FALSE_TAINT, "reading good bytes %" PRIu64 "..%" PRIu64 ": %s", a, b, cubert_last_error_message());
    else if (good && memcmp(x->buf, m->val + a, b - a) != 0) {
      uint64_t j = a;
      while (x->buf[j - a] == m->val[j]) j++;
      violation(x, XC_V_WRONG_BYTES, "byte %" PRIu64 " reads 0x%02x, the model has 0x%02x", j, x->buf[j - a], m->val[j]);
    } else if (!good && st != CUBERT_ERR_TAINTED)
      violation(x, XC_V_NOT_REFUSED, "reading tainted bytes %" PRIu64 "..%" PRIu64 " returned %s", a, b,
                cubert_status_name(st));
    a = b;
  }
}

static void expect_status(ctx *x, const char *call, cubert_status st, bool ok) {
  if ((st == CUBERT_OK) != ok)
    violation(x, XC_V_STATUS, "%s returned %s, the model expects %s: %s", call, cubert_status_name(st),
              ok ? "OK" : "an error", st == CUBERT_OK ? "" : cubert_last_error_message());
}

static void expect_injected(ctx *x, const char *what, uint64_t got, uint64_t want) {
  if (got != want) violation(x, XC_V_NOT_INJECTED, "%s: %" PRIu64 " faults injected, the model expects %" PRIu64, what, got, want);
}

static char *mpi_rule(const program *p, char *buf, size_t cap) {
  static const char *const kind[] = {"", "fail", "partial", "scribble"};
  buf[0] = '\0';
  if (p->mpi_fault == MPI_NONE) return buf;
  snprintf(buf, cap, "%s nth=1 fault=%s%s%s", p->mpi_at_send ? "send" : "recv", kind[p->mpi_fault],
           p->mpi_fault == MPI_FAIL ? "" : ":", p->mpi_fault == MPI_FAIL ? "" : p->mpi_frac);
  return buf;
}

/* The send (or the receive) of the exchange, with its MPI rule armed, and
 * the checks that the rule fired exactly when the model says and that the
 * bytes took the model's path (`shared`: through shared memory). */
static cubert_status transfer(ctx *x, const program *p, cubert_handle *view, bool send, bool shared) {
  char rule[96];
  cubert_mpi_faults(mpi_rule(p, rule, sizeof rule));
  uint64_t before = cubert_mpi_faults_injected();
  cubert_status st;
  cubert_mpi_request *rq = NULL;
  cubert_mpi_info info;
  memset(&info, 0, sizeof info);
  /* isend to itself (one rank): its wait would wait for the receive */
  bool nb = send ? p->nb_send && p->receiver != p->sender : p->nb_recv;
  if (nb) {
    st = send ? cubert_mpi_isend(x->client, view, p->receiver, TAG, x->comm, &rq)
              : cubert_mpi_irecv(x->client, view, p->sender, TAG, x->comm, &rq);
    if (st == CUBERT_OK) st = cubert_mpi_wait(rq, &info);
  } else {
    st = send ? cubert_mpi_send(x->client, view, p->receiver, TAG, x->comm, &info)
              : cubert_mpi_recv(x->client, view, p->sender, TAG, x->comm, &info);
  }
  x->counts[XC_STEPS]++;
  expect_injected(x, send ? "the MPI send" : "the MPI receive", cubert_mpi_faults_injected() - before,
                  p->mpi_fault != MPI_NONE && p->mpi_at_send == send);
  cubert_mpi_faults(NULL);
  if (info.shared_memory != shared)
    violation(x, XC_V_PATH, "the bytes crossed through %s, the model has %s",
              info.shared_memory ? "shared memory" : "MPI's messages", shared ? "shared memory" : "MPI's messages");
  if (!send && info.shared_memory) x->counts[XC_SHARED]++;
  return st;
}

/* The device fault a shared exchange arms on each side: `copy` (into and
 * out of shared memory); the wire's: the sender's reads, the receiver's
 * writes. */
static const char *device_op(const program *p, bool sender) { return p->shared ? "copy" : sender ? "read" : "write"; }

/* ------------------------------------------------------------ the two sides */

static void run_sender(ctx *x, const program *p, const model *snd, unsigned char *tmp) {
  x->side = "sender";
  cubert_handle *h = NULL, *view = NULL;
  cubert_faultinj_reset(x->rt);
  bytes_of(p->pattern, tmp, p->total);
  if (cubert_handle_create(x->client, tmp, p->total, &h) != CUBERT_OK) {
    /* the receiver would wait for ever */
    fprintf(x->err, "exchange %" PRIu64 ": the sender cannot make its handle: %s\n", p->index,
            cubert_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  char rules[512] = "", one[96];
  for (int k = 0; k < p->nops; k++) {
    const op *o = &p->ops[k];
    if (o->fault < 0) continue;
    bool frac = o->fault == CUBERT_FAULT_SCRIBBLE || o->fault == CUBERT_FAULT_PARTIAL ||
                o->fault == CUBERT_FAULT_ASYNC_SCRIBBLE;
    snprintf(one, sizeof one, "write|fill nth=%d fault=%s%s%s; ", k + 1, cubert_fault_kind_name((cubert_fault_kind)o->fault),
             frac ? ":" : "", frac ? o->frac : "");
    strncat(rules, one, sizeof rules - strlen(rules) - 1);
    static const int at[] = {[CUBERT_FAULT_FAIL] = XC_SENDER_FAIL, [CUBERT_FAULT_SCRIBBLE] = XC_SENDER_SCRIBBLE,
                             [CUBERT_FAULT_PARTIAL] = XC_SENDER_PARTIAL, [CUBERT_FAULT_OOM] = 0, [CUBERT_FAULT_COMPILE] = 0,
                             [CUBERT_FAULT_DEVICE_LOST] = 0, [CUBERT_FAULT_ASYNC] = XC_SENDER_ASYNC,
                             [CUBERT_FAULT_ASYNC_SCRIBBLE] = XC_SENDER_ASYNC_SCRIBBLE};
    x->counts[at[o->fault]]++;
    x->counts[XC_FAULTS]++;
  }
  uint64_t want = 0;
  for (int k = 0; k < p->nops; k++) want += p->ops[k].fault >= 0;
  if (rules[0] && cubert_faultinj_add(x->rt, rules, "exchange", NULL, NULL) != CUBERT_OK)
    violation(x, XC_V_SETUP, "cubert_faultinj_add(%s): %s", rules, cubert_last_error_message());
  for (int k = 0; k < p->nops; k++) {
    const op *o = &p->ops[k];
    cubert_handle *part = NULL;
    if (cubert_handle_slice(h, o->off, p->total - o->off - o->len, &part) != CUBERT_OK) continue;
    if (o->fill) cubert_handle_fill(x->client, part, &o->value, 1);
    else {
      bytes_of(o->data, tmp, o->len);
      cubert_handle_write(x->client, part, tmp, o->len);
    }
    cubert_handle_release(part);
    x->counts[XC_STEPS]++;
  }
  cubert_sync(x->client); /* an async failure is found here */
  expect_injected(x, "the sender's runtime", cubert_faultinj_injected(x->rt), want);
  cubert_faultinj_clear(x->rt);
  check_handle(x, h, snd, -1);
  cubert_handle_slice(h, p->so, p->total - p->so - p->size, &view);
  model rcv = {0};
  outcome out = {0};
  if (!model_new(&rcv, p->rtotal)) {
    fprintf(x->err, "exchange %" PRIu64 ": out of memory\n", p->index);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  receiver_model(p, snd, &rcv, &out);
  model_free(&rcv);
  char rule[64];
  snprintf(rule, sizeof rule, "%s nth=%" PRIu64 " fault=fail", device_op(p, true), p->read_nth);
  if (p->read_nth && cubert_faultinj_add(x->rt, rule, "exchange", NULL, NULL) != CUBERT_OK)
    violation(x, XC_V_SETUP, "cubert_faultinj_add(%s): %s", rule, cubert_last_error_message());
  if (out.read_fired) {
    x->counts[p->shared ? XC_SENDER_COPY_FAIL : XC_SENDER_READ_FAIL]++;
    x->counts[XC_FAULTS]++;
  }
  cubert_status st = transfer(x, p, view, true, out.shared);
  expect_injected(x, "the sender's reads", cubert_faultinj_injected(x->rt), want + out.read_fired);
  cubert_faultinj_clear(x->rt);
  expect_status(x, p->nb_send ? "cubert_mpi_isend/wait" : "cubert_mpi_send", st, out.send_ok);
  cubert_handle_release(view);
  cubert_handle_release(h);
}

static void run_receiver(ctx *x, const program *p, const model *snd, unsigned char *tmp) {
  x->side = "receiver";
  model m = {0};
  if (!model_new(&m, p->rtotal)) return;
  outcome out;
  receiver_model(p, snd, &m, &out);
  bool fired = out.recv_fired;
  cubert_faultinj_reset(x->rt);
  cubert_handle *h = NULL, *view = NULL;
  bytes_of(p->stale, tmp, p->rtotal);
  if (cubert_handle_create(x->client, tmp, p->rtotal, &h) != CUBERT_OK ||
      cubert_handle_slice(h, p->ro, p->rtotal - p->ro - p->size, &view) != CUBERT_OK) {
    /* the sender may wait for ever */
    fprintf(x->err, "exchange %" PRIu64 ": the receiver cannot make its handle: %s\n", p->index,
            cubert_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (p->te > p->ts) {
    const cubert_failure *f = NULL;
    cubert_handle *part = NULL;
    if (cubert_failure_create(x->client, CUBERT_ERR_BACKEND, "a stale failure of the receiver's", &f) == CUBERT_OK &&
        cubert_handle_slice(h, p->ts, p->rtotal - p->te, &part) == CUBERT_OK)
      cubert_handle_taint(x->client, part, f);
    cubert_handle_release(part);
    cubert_failure_release(f);
  }
  if (p->recv_fault >= 0) {
    char rule[96];
    bool frac = p->recv_fault != CUBERT_FAULT_FAIL;
    snprintf(rule, sizeof rule, "%s nth=%" PRIu64 " fault=%s%s%s", device_op(p, false), p->recv_nth,
             cubert_fault_kind_name((cubert_fault_kind)p->recv_fault), frac ? ":" : "", frac ? p->recv_frac : "");
    if (cubert_faultinj_add(x->rt, rule, "exchange", NULL, NULL) != CUBERT_OK)
      violation(x, XC_V_SETUP, "cubert_faultinj_add(%s): %s", rule, cubert_last_error_message());
  }
  if (fired) {
    static const int kind[2][3] = {{XC_RECEIVER_FAIL, XC_RECEIVER_SCRIBBLE, XC_RECEIVER_PARTIAL},
                                   {XC_RECEIVER_COPY_FAIL, XC_RECEIVER_COPY_SCRIBBLE, XC_RECEIVER_COPY_PARTIAL}};
    x->counts[XC_FAULTS]++;
    x->counts[kind[p->shared][p->recv_fault == CUBERT_FAULT_FAIL ? 0 : p->recv_fault == CUBERT_FAULT_SCRIBBLE ? 1 : 2]]++;
  }
  if (p->mpi_fault != MPI_NONE) { /* counted once, here */
    static const int at[2][4] = {{0, XC_RECV_FAIL, XC_RECV_PARTIAL, XC_RECV_SCRIBBLE},
                                 {0, XC_SEND_FAIL, XC_SEND_PARTIAL, XC_SEND_SCRIBBLE}};
    x->counts[at[p->mpi_at_send][p->mpi_fault]]++;
    x->counts[XC_FAULTS]++;
  }
  cubert_status st = transfer(x, p, view, false, out.shared);
  expect_injected(x, "the receiver's runtime", cubert_faultinj_injected(x->rt), fired);
  cubert_faultinj_clear(x->rt);
  expect_status(x, p->nb_recv ? "cubert_mpi_irecv/wait" : "cubert_mpi_recv", st, out.recv_ok);
  check_handle(x, h, &m, p->sender);
  cubert_handle_release(view);
  cubert_handle_release(h);
  model_free(&m);
}

/* A duplicate of MPI_COMM_WORLD given to cubert_mpi_init with the shared
 * path on (collective); MPI_COMM_NULL, told on `err`, when it cannot be. */
static MPI_Comm shared_comm(FILE *err, int rank) {
  char *old = getenv("CUBERT_MPI_IPC") ? strdup(getenv("CUBERT_MPI_IPC")) : NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  setenv("CUBERT_MPI_IPC", "on", 1); /* every size, not only auto's */
  bool ok = MPI_Comm_dup(MPI_COMM_WORLD, &comm) == MPI_SUCCESS;
  if (ok && cubert_mpi_init(comm) != CUBERT_OK) {
    fprintf(err, "rank %d: shared exchanges cannot run: %s\n", rank, cubert_last_error_message());
    MPI_Comm_free(&comm);
    comm = MPI_COMM_NULL;
  }
  if (old) setenv("CUBERT_MPI_IPC", old, 1);
  else unsetenv("CUBERT_MPI_IPC");
  free(old);
  return comm;
}

void xc_run(uint64_t seed, uint64_t programs, bool shared, int rank, int nranks, uint64_t *counts, FILE *err) {
  if (shared && (nranks < 2 || !programs)) return; /* no rank sends to itself through shared memory */
  MPI_Comm comm = shared ? shared_comm(err, rank) : MPI_COMM_WORLD;
  char *old = getenv("CUBERT_MPI_CHUNK") ? strdup(getenv("CUBERT_MPI_CHUNK")) : NULL;
  setenv("CUBERT_MPI_CHUNK", "1024", 1);
  cubert_runtime_options o;
  cubert_runtime_options_init(&o);
  o.faults = ""; /* the programs arm their own rules */
  ctx x = {.counts = counts, .err = err, .comm = comm};
  size_t big = 16384 + 8000 + 1024;
  unsigned char *tmp = malloc(big);
  x.buf = malloc(big);
  bool ready = tmp && x.buf && comm != MPI_COMM_NULL && cubert_runtime_create(&o, &x.rt) == CUBERT_OK &&
               cubert_runtime_device_count(x.rt) > 0 &&
               cubert_client_create(x.rt, rank % cubert_runtime_device_count(x.rt), &x.client) == CUBERT_OK;
  if (!ready) fprintf(err, "rank %d: exchanges cannot run: %s\n", rank, cubert_last_error_message());
  for (uint64_t i = 0; i < programs; i++) {
    program p;
    draw(seed, i, shared, nranks, &p);
    if (rank != p.sender && rank != p.receiver) continue;
    x.p = &p;
    x.told = 0;
    model snd = {0};
    if (!ready || !model_new(&snd, p.total)) {
      counts[XC_VIOLATIONS]++;
      counts[XC_V_SETUP]++;
      model_free(&snd);
      continue;
    }
    sender_model(&p, &snd, tmp);
    if (rank == p.sender) {
      counts[XC_PROGRAMS]++;
      run_sender(&x, &p, &snd, tmp);
    }
    if (rank == p.receiver) run_receiver(&x, &p, &snd, tmp);
    model_free(&snd);
    /* the receiver has answered the sender's shared buffer: it is free
     * again when the sender's next call looks, so the next exchange finds
     * one whatever the ranks' timing */
    if (shared && rank == p.receiver) MPI_Send(NULL, 0, MPI_BYTE, p.sender, DONE_TAG, MPI_COMM_WORLD);
    if (shared && rank == p.sender) MPI_Recv(NULL, 0, MPI_BYTE, p.receiver, DONE_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  if (comm != MPI_COMM_NULL && comm != MPI_COMM_WORLD) { /* its buffers go while the runtime is there */
    cubert_mpi_finalize(comm);
    MPI_Comm_free(&comm);
  }
  if (x.client) cubert_client_destroy(x.client);
  if (x.rt) cubert_runtime_destroy(x.rt);
  free(tmp);
  free(x.buf);
  if (old) setenv("CUBERT_MPI_CHUNK", old, 1);
  else unsetenv("CUBERT_MPI_CHUNK");
  free(old);
}
