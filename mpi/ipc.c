/* mpi/ipc.c: transfers between ranks of one node through shared device
 * memory (mpi/ipc.h has the protocol; docs/cluster.md, "Ranks of one
 * node", what a user sees). Built on cubert's public API: shareable
 * memory, cubert_handle_export/import, device copies. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "mpi/ipc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi/alloc.h"
#include "mpi/profile.h"
#include "mpi/stage.h"
#include "mpi/wire.h"

#define IPC_GUARD 64           /* bytes after a buffer's data that nobody writes: the fences read them */
#define IPC_MIN_CAP (1u << 20) /* the smallest staging buffer */
#define ACK_MAGIC 0x4b434142u  /* "BACK" */

/* A staging buffer of this rank's, for one peer. */
typedef struct ipc_slot {
  cubert_handle *h;   /* shareable, cap + IPC_GUARD bytes */
  cubert_handle *old; /* the buffer h replaced: freed once the peer let go of it */
  cubert_export_desc desc;
  uint64_t id, cap, old_cap;
  bool busy; /* a send's bytes wait in it */
  bool dead; /* a send ended without its acknowledgement: the peer may still read it */
} ipc_slot;

/* A peer's buffer, as mapped here. */
typedef struct ipc_import {
  uint64_t id;
  cubert_handle *h;
} ipc_import;

typedef struct ipc_peer {
  bool node;        /* same node, and the path on at both ends */
  ipc_slot *slot;   /* IPC_SLOTS of them, for peers of this node only */
  ipc_import *imp;  /* IPC_SLOTS */
} ipc_peer;

struct mpi_ipc {
  pthread_mutex_t lock;
  int size, me;
  uint64_t min; /* views of fewer bytes take MPI's messages */
  ipc_peer *peers;
};

/* CUBERT_MPI_IPC=auto: the smallest view sent through shared memory.
 * Measured on one H200 shared by two ranks (2026-12-02 06:15Z,
 * docs/cluster.md): a transfer through shared memory costs about 270 us
 * whatever its size (the sender's copy and fence, the receiver's copy,
 * fence and answer, on a GPU the two processes take turns on), MPI's
 * messages about 142 us at 256 KiB and 500 us at 1 MiB: they cross near
 * 512 KiB. */
#define IPC_AUTO_MIN (512u << 10)

struct ipc_ticket {
  mpi_ipc *ipc;
  int peer, slot;
  unsigned char ack[WIRE_ACK_SIZE];
  unsigned char whole[WIRE_RANGE_SIZE]; /* the one range sent when there is no memory for the list */
};

static _Atomic uint64_t transfers, next_id = 1;

/* Device memory this process holds in staging buffers (every peer and
 * communicator). A new buffer of `cap` bytes is made only while the total
 * stays within the larger of IPC_HOLD and twice `cap`; else the transfer
 * takes the wire. */
#define IPC_HOLD (4ull << 30)
static _Atomic uint64_t held;

static void let_go(cubert_handle *h, uint64_t cap) {
  if (!h) return;
  cubert_handle_release(h);
  atomic_fetch_sub(&held, cap + IPC_GUARD);
}

uint64_t mpi_ipc_count(void) { return atomic_load(&transfers); }

/* ------------------------------------------------------------ open, close */

typedef struct ipc_who {
  int leader; /* the rank (in the communicator) of the first rank of its MPI_COMM_TYPE_SHARED group */
  int on;
  char host[120]; /* host name, boot id */
} ipc_who;

static void whoami(ipc_who *w) {
  char name[64] = "?", boot[40] = "";
  if (gethostname(name, sizeof name - 1) != 0) strcpy(name, "?");
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof boot, f)) boot[0] = '\0';
    fclose(f);
  }
  boot[strcspn(boot, "\n")] = '\0';
  snprintf(w->host, sizeof w->host, "%s %s", name, boot);
}

bool mpi_ipc_env_ok(char *why, size_t cap) {
  const char *v = getenv("CUBERT_MPI_IPC");
  if (!v || !*v || !strcmp(v, "auto") || !strcmp(v, "on") || !strcmp(v, "1") || !strcmp(v, "off") ||
      !strcmp(v, "0"))
    return true;
  snprintf(why, cap, "CUBERT_MPI_IPC=%s: expected auto, on or off", v);
  return false;
}

cubert_status mpi_ipc_open(MPI_Comm dup, bool lacking, mpi_ipc **out, char *why, size_t cap) {
  /* a bad value is said after the collective calls below, which every
   * rank makes whatever its environment */
  const char *v = getenv("CUBERT_MPI_IPC");
  bool off = v && (!strcmp(v, "off") || !strcmp(v, "0"));
  bool always = v && (!strcmp(v, "on") || !strcmp(v, "1"));
  bool bad = v && *v && !off && !always && strcmp(v, "auto");
  mpi_ipc *x = mb_calloc(1, sizeof *x);
  ipc_who me = {0}, *all = NULL;
  int size = 0, myrank = 0;
  MPI_Comm_rank(dup, &myrank);
  MPI_Comm_size(dup, &size);
  if (x) x->peers = mb_calloc((size_t)size, sizeof *x->peers);
  if (x && x->peers) all = mb_calloc((size_t)size, sizeof *all);
  /* Every rank makes every collective call below, whatever it lacks: a
   * rank short of memory says so in the allreduce, and every rank fails
   * alike (a rank that returned before them would leave the others
   * waiting in them for ever). */
  bool oom = lacking || !all;
  me.leader = myrank;
  /* the same node for MPI, and for the descriptors (host name, boot id) */
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(dup, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
      node != MPI_COMM_NULL) {
    MPI_Bcast(&me.leader, 1, MPI_INT, 0, node);
    MPI_Comm_free(&node);
  } else {
    me.leader = -1 - myrank; /* alone */
  }
  me.on = !off && !bad;
  whoami(&me);
  int short_here = oom, any = 0;
  if (MPI_Allreduce(&short_here, &any, 1, MPI_INT, MPI_MAX, dup) != MPI_SUCCESS) any = 1;
  if (any) {
    mb_free(all);
    if (x) mb_free(x->peers);
    mb_free(x);
    snprintf(why, cap, oom ? "out of host memory" : "another rank of the communicator ran out of host memory");
    return CUBERT_ERR_OUT_OF_MEMORY;
  }
  MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, dup);
  x->me = myrank;
  x->size = size;
  x->min = always ? 0 : IPC_AUTO_MIN;
  for (int p = 0; p < x->size; p++) {
    ipc_peer *pp = &x->peers[p];
    pp->node = p != x->me && me.on && all[p].on && all[p].leader == me.leader && !strcmp(all[p].host, me.host);
    if (pp->node) {
      /* no memory for its buffers: MPI's messages to that peer (its sends
       * here land alike: the receiver only needs the import table) */
      pp->slot = mb_calloc(IPC_SLOTS, sizeof *pp->slot);
      pp->imp = mb_calloc(IPC_SLOTS, sizeof *pp->imp);
      if (!pp->slot || !pp->imp) pp->node = false;
    }
  }
  mb_free(all);
  if (bad) {
    snprintf(why, cap, "CUBERT_MPI_IPC=%s: expected auto, on or off", v);
    for (int p = 0; p < x->size; p++) {
      mb_free(x->peers[p].slot);
      mb_free(x->peers[p].imp);
    }
    mb_free(x->peers);
    mb_free(x);
    return CUBERT_ERR_PARSE;
  }
  pthread_mutex_init(&x->lock, NULL);
  *out = x;
  return CUBERT_OK;
}

void mpi_ipc_close(mpi_ipc *x, MPI_Comm dup) {
  if (!x) return;
  (void)dup;
  for (int p = 0; p < x->size; p++)
    for (int s = 0; x->peers[p].imp && s < IPC_SLOTS; s++) cubert_handle_release(x->peers[p].imp[s].h);
  /* Every send was acknowledged (the caller finished them): no peer reads
   * these buffers any more, though it may still map them until its own
   * cubert_mpi_finalize or runtime's end. No barrier here, so that a rank
   * may finalize while its peer still waits for other messages (a host
   * backend peer keeps its mapping of the unlinked segment; on NVIDIA,
   * CUDA calls freeing memory that another process still maps undefined,
   * and the H200 runs of tests/test_processes.c do it without harm). */
  for (int p = 0; p < x->size; p++) {
    for (int s = 0; x->peers[p].slot && s < IPC_SLOTS; s++) {
      let_go(x->peers[p].slot[s].h, x->peers[p].slot[s].cap);
      let_go(x->peers[p].slot[s].old, x->peers[p].slot[s].old_cap);
    }
    mb_free(x->peers[p].slot);
    mb_free(x->peers[p].imp);
  }
  pthread_mutex_destroy(&x->lock);
  mb_free(x->peers);
  mb_free(x);
}

/* ------------------------------------------------------------ helpers */

static cubert_handle *part_of(const cubert_handle *h, uint64_t a, uint64_t b) {
  cubert_handle *part = NULL;
  if (cubert_handle_slice(h, a, cubert_handle_size_in_use(h) - b, &part) != CUBERT_OK) return NULL;
  return part;
}

/* Whether `client` may use buffer h (of cap data bytes) now: its runtime is
 * the client's and alive, its device the client's, its guard untainted. */
static bool usable(cubert_client *client, cubert_handle *h, uint64_t cap) {
  cubert_handle *g = part_of(h, cap, cap + 1);
  bool ok = g && cubert_handle_check(client, g) == CUBERT_OK;
  cubert_handle_release(g);
  return ok;
}

/* Waits for the client's work so far on this thread's stream (the copies
 * just enqueued) by reading one guard byte of h, which nobody writes: a
 * read waits for the stream, then records the failures found there, and,
 * unlike cubert_sync, leaves the stream's report to the caller's next
 * sync. When that read fails, cubert_sync does it. */
static void fence(cubert_client *client, cubert_handle *h, uint64_t cap) {
  cubert_handle *g = part_of(h, cap, cap + 1);
  unsigned char b;
  if (!g || cubert_handle_read(client, g, &b, 1) != CUBERT_OK) cubert_sync(client);
  cubert_handle_release(g);
}

typedef struct stretch {
  uint64_t a, b;
} stretch;

static int span_cmp(const void *x, const void *y) {
  uint64_t a = ((const stretch *)x)->a, b = ((const stretch *)y)->a;
  return (a > b) - (a < b);
}

/* The stretches of [0, end) that no span of the request covers, in order
 * (*n of them; NULL when out of memory). */
static stretch *good_stretches(void *req, uint64_t end, size_t *n) {
  const ipc_span *sp = NULL;
  size_t ns = mpi_req_spans(req, &sp);
  stretch *bad = mb_malloc((ns + 1) * sizeof *bad), *good = mb_malloc((ns + 2) * sizeof *good);
  if (!bad || !good) {
    mb_free(bad);
    mb_free(good);
    return NULL;
  }
  for (size_t i = 0; i < ns; i++) bad[i] = (stretch){sp[i].start, sp[i].end};
  qsort(bad, ns, sizeof *bad, span_cmp);
  uint64_t pos = 0;
  *n = 0;
  for (size_t i = 0; i <= ns && pos < end; i++) {
    uint64_t s = i < ns ? bad[i].a : end, e = i < ns ? bad[i].b : end;
    if (s > end) s = end;
    if (s > pos) good[(*n)++] = (stretch){pos, s};
    if (e > pos) pos = e;
  }
  mb_free(bad);
  return good;
}

/* The chunks from c->stop on did not cross: an injected fault. */
static void injected_stop(const ipc_call *c, bool send) {
  uint64_t from = c->stop * c->chunk;
  if (from >= c->size) return;
  bool all = c->hit && c->hit->fault == MPI_FAULT_FAIL;
  const cubert_failure *f =
      mpi_req_injected(c->req, all ? (send ? "send failed" : "receive failed")
                                   : (send ? "send stopped part way" : "receive stopped part way"));
  if (!f) return;
  mpi_req_note(c->req, CUBERT_ERR_BACKEND, cubert_failure_message(f));
  size_t ng = 0;
  stretch *good = send ? good_stretches(c->req, c->size, &ng) : NULL;
  if (good) {
    /* the view's tainted ranges keep their own cause (the receiver taints
     * the sent ranges in order: a stop over them would replace it) */
    for (size_t i = 0; i < ng; i++) {
      uint64_t a = good[i].a > from ? good[i].a : from;
      if (a >= good[i].b) continue;
      cubert_failure_retain(f);
      mpi_req_span(c->req, a, good[i].b, f);
    }
    mb_free(good);
    cubert_failure_release(f);
    return;
  }
  mpi_req_span(c->req, from, c->size, f);
}

/* A failure of this rank's making with `why` (NULL when none could be made). */
static const cubert_failure *plain(const ipc_call *c, cubert_status st, const char *why) {
  const cubert_failure *f = NULL;
  if (cubert_failure_create(c->client, st, why, &f) != CUBERT_OK) return NULL;
  return f;
}

/* ------------------------------------------------------------ send */

/* Adds a span for every tainted range of h's view (view-relative) that
 * falls in one of the `ng` good stretches, below `end`. */
static void cross_tainted(const ipc_call *c, const cubert_handle *h, const stretch *good, size_t ng, uint64_t end) {
  uint64_t base = cubert_handle_offset_start(h);
  for (uint64_t from = base;;) {
    uint64_t fs = 0, fe = 0;
    const cubert_failure *f = NULL;
    if (cubert_handle_tainted_range(c->client, h, from, &fs, &fe, &f) != CUBERT_OK || !f || fs - base >= end) {
      cubert_failure_release(f);
      return;
    }
    for (size_t i = 0; i < ng; i++) {
      uint64_t a = fs - base > good[i].a ? fs - base : good[i].a, b = fe - base < good[i].b ? fe - base : good[i].b;
      if (a >= b) continue;
      cubert_failure_retain(f);
      mpi_req_note(c->req, cubert_failure_status(f), cubert_failure_message(f));
      mpi_req_span(c->req, a, b, f);
    }
    cubert_failure_release(f);
    from = fe;
  }
}

/* A free buffer of at least `size` bytes for the peer, made if need be;
 * -1 when there is none (all busy, or no memory). Caller holds x->lock. */
static int slot_for(ipc_peer *p, cubert_client *client, uint64_t size) {
  int pick = -1;
  for (int s = 0; s < IPC_SLOTS && pick < 0; s++) {
    ipc_slot *sl = &p->slot[s];
    if (sl->h && !sl->busy && !sl->dead && sl->cap >= size && usable(client, sl->h, sl->cap)) pick = s;
  }
  if (pick >= 0) return pick;
  /* a new buffer: in an empty slot, else in place of a free one too small
   * (or of another runtime); the peer lets go of the one it replaces when
   * the new one's first transfer arrives */
  for (int s = 0; s < IPC_SLOTS && pick < 0; s++)
    if (!p->slot[s].h) pick = s;
  for (int s = 0; s < IPC_SLOTS && pick < 0; s++)
    if (!p->slot[s].busy && !p->slot[s].dead && !p->slot[s].old) pick = s;
  if (pick < 0) return -1;
  uint64_t cap = IPC_MIN_CAP;
  while (cap < size) cap *= 2;
  uint64_t now = atomic_fetch_add(&held, cap + IPC_GUARD) + cap + IPC_GUARD;
  if (now > (2 * cap > IPC_HOLD ? 2 * cap : IPC_HOLD)) {
    atomic_fetch_sub(&held, cap + IPC_GUARD);
    return -1;
  }
  cubert_handle *h = NULL;
  cubert_export_desc desc;
  if (cubert_handle_empty_with(client, cap + IPC_GUARD, CUBERT_MEMORY_SHAREABLE, &h) != CUBERT_OK) {
    atomic_fetch_sub(&held, cap + IPC_GUARD);
    return -1;
  }
  if (cubert_handle_export(client, h, &desc) != CUBERT_OK) {
    let_go(h, cap);
    return -1;
  }
  ipc_slot *sl = &p->slot[pick];
  sl->old = sl->h;
  sl->old_cap = sl->cap;
  sl->h = h;
  sl->desc = desc;
  sl->cap = cap;
  sl->id = atomic_fetch_add(&next_id, 1);
  return pick;
}

bool mpi_ipc_send(const ipc_call *c, unsigned char *header, MPI_Request **reqsp, int *nreqs, unsigned char **rangesp,
                  ipc_ticket **ticketp) {
  mpi_ipc *x = c->ipc;
  if (!x || c->peer < 0 || c->peer >= x->size || !x->peers[c->peer].node || !c->size || c->size < x->min)
    return false;
  if (c->hit && c->hit->fault == MPI_FAULT_SCRIBBLE) return false; /* found by the wire's checksum */
  ipc_ticket *t = mb_calloc(1, sizeof *t);
  MPI_Request *reqs = mb_calloc(3, sizeof *reqs);
  /* the client's teardown hook (mpi/stage.h) finishes this send before
   * the buffer's runtime can go */
  if (!t || !reqs || !stage_watch(c->client)) {
    mb_free(t);
    mb_free(reqs);
    return false;
  }
  pthread_mutex_lock(&x->lock);
  ipc_peer *p = &x->peers[c->peer];
  int s = slot_for(p, c->client, c->size);
  ipc_slot sl = {0};
  if (s >= 0) {
    p->slot[s].busy = true;
    sl = p->slot[s];
    sl.h = cubert_handle_clone(sl.h);
  }
  pthread_mutex_unlock(&x->lock);
  if (s < 0) {
    prof_event_add(PROF_EV_IPC_MISS);
    mb_free(t);
    mb_free(reqs);
    return false;
  }
  prof_event_add(PROF_EV_IPC_SEND);
  t->ipc = x;
  t->peer = c->peer;
  t->slot = s;
  memset(t->ack, 0, sizeof t->ack);

  /* From here on the exchange always completes. The good bytes: device to
   * device into the buffer; what cannot cross becomes a span. */
  injected_stop(c, true);
  uint64_t end = c->stop * c->chunk < c->size ? c->stop * c->chunk : c->size;
  size_t ng = 0;
  stretch *good = good_stretches(c->req, end, &ng);
  if (!good) {
    const cubert_failure *f = plain(c, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory sending");
    mpi_req_note(c->req, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
    mpi_req_span(c->req, 0, c->size, f);
  }
  for (size_t i = 0; i < ng; i++) {
    cubert_handle *src = part_of(c->view, good[i].a, good[i].b), *dst = part_of(sl.h, good[i].a, good[i].b);
    cubert_status st = src && dst ? cubert_handle_copy(c->client, src, dst) : CUBERT_ERR_OUT_OF_MEMORY;
    cubert_handle_release(src);
    cubert_handle_release(dst);
    if (st != CUBERT_OK) {
      char why[300];
      snprintf(why, sizeof why, "the sender could not copy bytes %llu..%llu of the view into shared memory: %s",
               (unsigned long long)good[i].a, (unsigned long long)good[i].b, cubert_status_string(st));
      const cubert_failure *f = mpi_req_failure(c->req, st, why);
      mpi_req_note(c->req, st, why);
      mpi_req_span(c->req, good[i].a, good[i].b, f);
      good[i].b = good[i].a; /* nothing of it counts below */
    }
  }
  /* Wait for the copies. One that failed on the device tainted its bytes of
   * the buffer (this rank is its only writer); work on the view that failed
   * after the walk, found at this fence, tainted the view's bytes (and, as
   * the copy read them, the buffer's with a child): those cross as spans,
   * the view's own failure last, so that it is the one the receiver gets. */
  if (ng) {
    fence(c->client, sl.h, sl.cap);
    cross_tainted(c, sl.h, good, ng, end);
    cross_tainted(c, c->view, good, ng, end);
  }
  mb_free(good);

  /* The header with the buffer's descriptor, the ranges, the
   * acknowledgement's receive. */
  const ipc_span *sp = NULL;
  size_t ns = mpi_req_spans(c->req, &sp);
  unsigned char *ranges = mb_malloc(ns * WIRE_RANGE_SIZE + 1), *rbuf = ranges;
  for (size_t i = 0; ranges && i < ns; i++)
    wire_range_encode(ranges + i * WIRE_RANGE_SIZE, sp[i].start, sp[i].end - sp[i].start, sp[i].failure);
  if (!ranges && ns) {
    /* no memory for the list (the header is not out yet): one range over
     * the whole view, in the ticket, so that the receiver still gets every
     * message the header announces and takes none of the bytes as good */
    const cubert_failure *f = plain(c, CUBERT_ERR_OUT_OF_MEMORY,
                                    "out of host memory sending: the sender could not list the tainted ranges");
    mpi_req_note(c->req, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory listing the tainted ranges");
    wire_range_encode(t->whole, 0, c->size, f); /* zeros without f: the receiver calls the record corrupt */
    cubert_failure_release(f);
    ns = 1;
    rbuf = t->whole;
  }
  wire_header h = {c->size, ns, c->chunk, c->nchunks, c->ptag, WIRE_IPC};
  wire_header_encode(&h, header);
  unsigned char *block = header + WIRE_HEADER_SIZE;
  memset(block, 0, WIRE_IPC_BLOCK);
  wire_put64(block, (uint64_t)s);
  wire_put64(block + 8, sl.id);
  wire_put64(block + 16, sl.cap);
  memcpy(block + 32, sl.desc.bytes, CUBERT_EXPORT_DESC_SIZE);
  cubert_handle_release(sl.h);
  int n = 0, rc = MPI_Isend(header, WIRE_HEADER_SIZE + WIRE_IPC_BLOCK, MPI_BYTE, c->peer, c->tag, c->comm, &reqs[n]);
  if (rc == MPI_SUCCESS) {
    n++;
    if (ns) rc = MPI_Isend(rbuf, (int)(ns * WIRE_RANGE_SIZE), MPI_BYTE, c->peer, c->ptag, c->dup, &reqs[n++]);
    if (rc == MPI_SUCCESS)
      rc = MPI_Irecv(t->ack, WIRE_ACK_SIZE, MPI_BYTE, c->peer, c->ptag + 1, c->dup, &reqs[n++]);
  }
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING + 64];
    int len = 0;
    snprintf(msg, sizeof msg, "posting the transfer through shared memory failed: ");
    size_t at = strlen(msg);
    MPI_Error_string(rc, msg + at, &len);
    msg[at + (size_t)len] = '\0';
    mpi_req_note(c->req, CUBERT_ERR_BACKEND, msg);
  }
  atomic_fetch_add(&transfers, 1);
  *reqsp = reqs;
  *nreqs = n;
  *rangesp = ranges;
  *ticketp = t;
  return true;
}

void mpi_ipc_ticket_end(ipc_ticket *t) {
  if (!t) return;
  mpi_ipc *x = t->ipc;
  bool acked = wire_get64(t->ack) == ACK_MAGIC;
  pthread_mutex_lock(&x->lock);
  ipc_peer *p = &x->peers[t->peer];
  ipc_slot *sl = &p->slot[t->slot];
  cubert_handle *drop = NULL;
  uint64_t drop_cap = 0;
  if (acked) {
    sl->busy = false;
    drop = sl->old; /* the peer let go of it before it answered */
    drop_cap = sl->old_cap;
    sl->old = NULL;
    if (wire_get64(t->ack + 8)) p->node = false; /* it could not map the buffer: the wire from now on */
  } else {
    sl->dead = true;
  }
  pthread_mutex_unlock(&x->lock);
  let_go(drop, drop_cap);
  mb_free(t);
}

/* ------------------------------------------------------------ receive */

static void ack(int peer, MPI_Comm dup, int ptag, uint64_t refused) {
  unsigned char a[WIRE_ACK_SIZE];
  wire_put64(a, ACK_MAGIC);
  wire_put64(a + 8, refused);
  MPI_Send(a, WIRE_ACK_SIZE, MPI_BYTE, peer, ptag + 1, dup);
}

void mpi_ipc_ack(int peer, MPI_Comm dup, int ptag) { ack(peer, dup, ptag, 0); }

/* The peer's buffer `slot`, mapped on the client's device (a new
 * reference), or NULL with `why` filled. */
static cubert_handle *mapped(const ipc_call *c, uint64_t slot, uint64_t id, uint64_t cap,
                             const unsigned char *descp, char *why, size_t whycap) {
  mpi_ipc *x = c->ipc;
  if (!x || c->peer < 0 || c->peer >= x->size || slot >= IPC_SLOTS || !x->peers[c->peer].imp) {
    snprintf(why, whycap, "the header names staging buffer %llu of rank %d, which this rank does not know",
             (unsigned long long)slot, c->peer);
    return NULL;
  }
  pthread_mutex_lock(&x->lock);
  ipc_import *im = &x->peers[c->peer].imp[slot];
  cubert_handle *h = NULL;
  if (im->h && im->id == id && usable(c->client, im->h, cap)) h = cubert_handle_clone(im->h);
  if (!h) {
    /* a new buffer in that slot, or this rank's client of another runtime
     * or device: let go of the old mapping, map the new one */
    cubert_handle_release(im->h);
    im->h = NULL;
    im->id = 0;
    cubert_export_desc desc;
    memcpy(desc.bytes, descp, CUBERT_EXPORT_DESC_SIZE);
    if (cubert_handle_import(c->client, &desc, &im->h) != CUBERT_OK) {
      snprintf(why, whycap, "%s", cubert_last_error_message());
      im->h = NULL;
    } else if (cubert_handle_size(im->h) < cap + 1) {
      snprintf(why, whycap, "the buffer holds %llu bytes, the header says %llu",
               (unsigned long long)cubert_handle_size(im->h), (unsigned long long)cap + 1);
      cubert_handle_release(im->h);
      im->h = NULL;
    } else {
      im->id = id;
      h = cubert_handle_clone(im->h);
    }
  }
  pthread_mutex_unlock(&x->lock);
  return h;
}

/* An injected scribble on a transfer that came through shared memory: the
 * bytes of [a, b) (chunk k) are taken through host memory, damaged after a
 * checksum of what the sender left, and checked as the wire path checks
 * them. True when they arrived damaged (always, unless the checksum misses). */
static bool scribbled(const ipc_call *c, cubert_handle *buf, uint64_t a, uint64_t b, uint64_t k) {
  unsigned char *data = mb_malloc((size_t)(b - a));
  cubert_handle *src = part_of(buf, a, b);
  bool bad = !data || !src || cubert_handle_read(c->client, src, data, b - a) != CUBERT_OK;
  if (!bad) {
    uint64_t sum = wire_checksum(data, (size_t)(b - a)), sd = c->hit->seed ^ k;
    size_t n = (size_t)((double)(b - a) * c->hit->fraction);
    if (!n) n = 1;
    for (size_t i = 0; i < n; i++) data[(sd + i * 7919u) % (b - a)] ^= (unsigned char)(0xa5 + i);
    bad = wire_checksum(data, (size_t)(b - a)) != sum;
  }
  mb_free(data);
  cubert_handle_release(src);
  return bad;
}

void mpi_ipc_land(const ipc_call *c, const unsigned char *block) {
  char why[900];
  uint64_t slot = wire_get64(block), id = wire_get64(block + 8), cap = wire_get64(block + 16);
  atomic_fetch_add(&transfers, 1);
  cubert_handle *buf = cap >= c->size ? mapped(c, slot, id, cap, block + 32, why, sizeof why) : NULL;
  if (cap < c->size) snprintf(why, sizeof why, "a buffer of %llu bytes for %llu", (unsigned long long)cap,
                              (unsigned long long)c->size);
  if (!buf) {
    char msg[1100];
    snprintf(msg, sizeof msg,
             "rank %d tag %d sent through shared memory, which this rank could not map: %s "
             "(CUBERT_MPI_IPC=off on both ranks sends through MPI instead)",
             c->peer, c->tag, why);
    const cubert_failure *f = plain(c, CUBERT_ERR_BACKEND, msg);
    mpi_req_note(c->req, CUBERT_ERR_BACKEND, msg);
    mpi_req_span(c->req, 0, c->size, f);
    ack(c->peer, c->dup, c->ptag, 1);
    return;
  }
  injected_stop(c, false);
  uint64_t end = c->stop * c->chunk < c->size ? c->stop * c->chunk : c->size;
  size_t ng = 0;
  stretch *good = good_stretches(c->req, end, &ng);
  bool scribble = c->hit && c->hit->fault == MPI_FAULT_SCRIBBLE;
  for (size_t i = 0; good && i < ng; i++) {
    for (uint64_t a = good[i].a; a < good[i].b;) {
      /* by chunk when a scribble must be checked as the wire checks it */
      uint64_t k = a / c->chunk, b = good[i].b;
      if (scribble && (k + 1) * c->chunk < b) b = (k + 1) * c->chunk;
      if (scribble && scribbled(c, buf, a, b, k)) {
        snprintf(why, sizeof why,
                 "bytes %llu..%llu from rank %d tag %d arrived damaged (checksum mismatch) after an injected "
                 "scribble",
                 (unsigned long long)a, (unsigned long long)b, c->peer, c->tag);
        mpi_req_span(c->req, a, b, plain(c, CUBERT_ERR_BACKEND, why));
      } else {
        cubert_handle *src = part_of(buf, a, b), *dst = part_of(c->view, a, b);
        cubert_status st = src && dst ? cubert_handle_copy(c->client, src, dst) : CUBERT_ERR_OUT_OF_MEMORY;
        cubert_handle_release(src);
        cubert_handle_release(dst);
        if (st != CUBERT_OK) {
          /* a copy that failed tainted its bytes of the view itself, but one
           * refused before it was queued (no memory for its record or its
           * slices) did not: the span carries the copy's failure, or a new one */
          snprintf(why, sizeof why, "copying bytes %llu..%llu from rank %d's shared memory failed: %s",
                   (unsigned long long)a, (unsigned long long)b, c->peer,
                   src && dst ? cubert_last_error_message() : "out of host memory");
          const cubert_failure *f = mpi_req_failure(c->req, st, why);
          mpi_req_note(c->req, st, why);
          mpi_req_span(c->req, a, b, f);
        }
      }
      a = b;
    }
  }
  if (!good) {
    mpi_req_note(c->req, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory receiving");
    mpi_req_span(c->req, 0, c->size, plain(c, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory receiving"));
  }
  mb_free(good);
  /* the copies are done before the sender may fill the buffer again */
  fence(c->client, buf, cap);
  cubert_handle_release(buf);
  ack(c->peer, c->dup, c->ptag, 0);
}
