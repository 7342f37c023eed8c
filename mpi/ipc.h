/* mpi/ipc.h: transfers between two ranks of one node through device memory
 * both processes map (internal to libcubert_mpi; docs/cluster.md, "Ranks
 * of one node").
 *
 * The sender copies the good bytes of its view, device to device, into a
 * staging buffer of its own (CUBERT_MEMORY_SHAREABLE, exported once per
 * buffer: HIP IPC, POSIX shm on the host backend), waits for the copies, and
 * sends only the header (flag WIRE_IPC, with the buffer's descriptor) and
 * the tainted ranges, exactly as the wire form sends them. The receiver maps
 * the buffer once (kept for the next transfer), copies the good bytes into
 * its view, device to device, waits for the copies and answers with a small
 * acknowledgement, after which the sender may fill the buffer again. Up to
 * IPC_SLOTS buffers per peer are in flight (as many as osu_bw's window of
 * nonblocking sends); with none free the transfer takes the wire form, so
 * a send never waits for its receiver. MPI only
 * agrees: it carries the header, the ranges and the acknowledgement. */
#ifndef CUBERT_MPI_IPC_H
#define CUBERT_MPI_IPC_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubert/cubert.h"
#include "mpi/inject.h"

#define IPC_SLOTS 64 /* staging buffers per (communicator, peer of this node) */

/* One failed stretch of the view and the failure it gets (a reference). */
typedef struct ipc_span {
  uint64_t start, end; /* view-relative */
  const cubert_failure *failure;
} ipc_span;

typedef struct mpi_ipc mpi_ipc;       /* per communicator */
typedef struct ipc_ticket ipc_ticket; /* a send's hold on its staging buffer */

/* Collective over `dup` (cubert's duplicate of the caller's communicator):
 * which ranks share this node (MPI_COMM_TYPE_SHARED, and the same host name
 * and boot id, as a descriptor's import checks) and have the path on
 * ($CUBERT_MPI_IPC: auto, the default, on or off). Another value:
 * CUBERT_ERR_PARSE with `why` filled, nothing made, after the collective
 * calls (cubert_mpi_init checks it first with mpi_ipc_env_ok, so that
 * every rank fails alike). */
/* Collective over dup, made by every rank whatever it lacks: `lacking`
 * (the caller already ran out of host memory) or a rank that runs out here
 * makes every rank return CUBERT_ERR_OUT_OF_MEMORY (agreed through an
 * allreduce), so that none is left waiting in a collective call. */
cubert_status mpi_ipc_open(MPI_Comm dup, bool lacking, mpi_ipc **out, char *why, size_t cap);
/* Whether $CUBERT_MPI_IPC parses (unset, empty, auto, on, 1, off, 0); when
 * not, false with `why` naming it (cubert_mpi_init checks it with the rest
 * of this rank's environment, before the ranks agree). */
bool mpi_ipc_env_ok(char *why, size_t cap);
/* Lets go of the peers' buffers and frees this rank's (no peer reads them:
 * every send must be finished, its ticket ended); waits for no other rank.
 * NULL: nothing. */
void mpi_ipc_close(mpi_ipc *ipc, MPI_Comm dup);

/* What a transfer tells the path; `req` is transfer.c's request, for the
 * mpi_req_* calls below. */
typedef struct ipc_call {
  mpi_ipc *ipc;
  void *req;
  cubert_client *client;
  cubert_handle *view;
  uint64_t size, chunk, nchunks;
  uint64_t stop;   /* an injected fail or partial: chunks from here on do not cross */
  int peer, tag, ptag; /* the other rank (in the communicator), the caller's tag, the payload tag */
  MPI_Comm comm, dup;
  const mpi_hit *hit; /* the fault injected on this side, or NULL */
} ipc_call;

/* Sender: when the path applies (the peer shares the node, a buffer is
 * free or can be made, no scribble fault fired), copies the good bytes,
 * adds a span for every stretch that could not cross, posts the header
 * (into `header`, WIRE_HEADER_SIZE + WIRE_IPC_BLOCK bytes), the ranges and
 * the receive of the acknowledgement into *reqs (allocated, *nreqs of them;
 * the ranges' bytes in *ranges) and returns true; the request owns them and
 * *ticket. False: nothing was done, the wire form follows. */
bool mpi_ipc_send(const ipc_call *c, unsigned char *header, MPI_Request **reqs, int *nreqs, unsigned char **ranges,
                  ipc_ticket **ticket);
/* Ends a send's hold once its messages are finished (the acknowledgement
 * arrived: the buffer is free again; it did not: the buffer is never used
 * again). NULL: nothing. */
void mpi_ipc_ticket_end(ipc_ticket *ticket);

/* Receiver of a WIRE_IPC header whose ranges are in the request's spans:
 * copies the good bytes, adds spans for what could not land (the buffer
 * could not be mapped, an injected fault, a copy that failed), waits for
 * the copies and acknowledges. `block` is the header's WIRE_IPC_BLOCK. */
void mpi_ipc_land(const ipc_call *c, const unsigned char *block);
/* Acknowledges without taking the bytes (a receiver that refused the
 * transfer): the sender's buffer is free again. */
void mpi_ipc_ack(int peer, MPI_Comm dup, int ptag);

/* Transfers of this process through shared memory so far (both sides). */
uint64_t mpi_ipc_count(void);

/* Given by transfer.c: the request's account. */
void mpi_req_span(void *req, uint64_t start, uint64_t end, const cubert_failure *failure); /* takes the reference */
void mpi_req_note(void *req, cubert_status st, const char *message);
size_t mpi_req_spans(void *req, const ipc_span **spans); /* valid until the next mpi_req_span */
const cubert_failure *mpi_req_injected(void *req, const char *what);
const cubert_failure *mpi_req_failure(void *req, cubert_status st, const char *why);

#endif
