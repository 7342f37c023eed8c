/* mpi/tool/exchange.h: the send/receive programs of `cubert-mpi campaign`
 * (docs/cluster.md, "Campaigns and bandwidth over ranks").
 *
 * Exchange program i of seed S moves one view from a sender to a receiver
 * through cubert_mpi_send/recv (or isend/irecv and wait). Everything it does
 * is drawn from S and i alone: the sender's view (a handle or a slice), the
 * runtime faults that taint the sender's bytes before they are sent, a
 * failed read of the sender's device while it sends (that chunk goes
 * unread, with the read's failure), the
 * MPI fault rule armed at the send or the receive (fail, partial, scribble),
 * a write fault on the receiver, the receiver's stale bytes and stale taint.
 * Its sender and receiver are ranks (i mod N) and another one picked from i
 * (N = 1: rank 0 sends to itself); which ranks run it changes nothing it
 * counts. The receiver computes from the program what every byte of its
 * handle must be (good with the sender's value, tainted by the sender's
 * failure, tainted by its own) and checks each one: the tainted ranges it
 * finds (and the origin of each: cubert_failure_remote() must name the
 * sending rank exactly where the model says the sender failed), and a read
 * of every good and every tainted stretch. The sender checks its own handle
 * the same way before it sends. */
#ifndef CUBERT_MPI_TOOL_EXCHANGE_H
#define CUBERT_MPI_TOOL_EXCHANGE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* What every rank adds up (summed over ranks with MPI_Reduce). */
enum {
  XC_PROGRAMS, XC_STEPS, XC_CHECKS, XC_FAULTS,
  XC_SHARED, /* transfers that crossed through shared memory (the shared exchanges) */
  /* faults by kind */
  XC_SEND_FAIL, XC_SEND_PARTIAL, XC_SEND_SCRIBBLE, XC_RECV_FAIL, XC_RECV_PARTIAL, XC_RECV_SCRIBBLE,
  XC_SENDER_FAIL, XC_SENDER_SCRIBBLE, XC_SENDER_PARTIAL, XC_SENDER_ASYNC, XC_SENDER_ASYNC_SCRIBBLE, XC_SENDER_READ_FAIL,
  XC_RECEIVER_FAIL, XC_RECEIVER_SCRIBBLE, XC_RECEIVER_PARTIAL,
  /* the shared exchanges' device faults: copies into and out of shared memory */
  XC_SENDER_COPY_FAIL, XC_RECEIVER_COPY_FAIL, XC_RECEIVER_COPY_SCRIBBLE, XC_RECEIVER_COPY_PARTIAL,
  XC_VIOLATIONS,
  /* violations by kind */
  XC_V_WRONG_BYTES, XC_V_NOT_REFUSED, XC_V_FALSE_TAINT, XC_V_ORIGIN, XC_V_STATUS, XC_V_NOT_INJECTED, XC_V_PATH,
  XC_V_SETUP,
  XC_COUNT
};
#define XC_FIRST_KIND XC_SEND_FAIL
#define XC_FIRST_VIOLATION XC_V_WRONG_BYTES

/* The name of count k in the `counts:` line ("send-fail", "wrong-bytes"). */
const char *xc_name(int k);

/* Runs this rank's part of exchange programs 0..programs-1 of `seed` over
 * `nranks` ranks and adds to counts[XC_COUNT]. Violations are told on
 * `err` (program index, seed, ranks, what). Needs cubert_mpi_init(MPI_COMM_WORLD)
 * with CUBERT_MPI_IPC=off (the wire). Sets CUBERT_MPI_CHUNK to 1024 while it
 * runs (the model's chunk size).
 *
 * shared: the shared exchanges, which cross through shared memory (the
 * ranks share the node): another stream of programs (from the same seed)
 * sent over a duplicate of MPI_COMM_WORLD given to cubert_mpi_init with
 * CUBERT_MPI_IPC=auto. Their device faults are the path's own: a failed
 * copy of the sender's into its shared buffer (the receiver's bytes it
 * covers carry the sender's failure), a failed, scribbled or partial copy
 * of the receiver's out of it; the injected MPI faults as docs/cluster.md
 * says they go on that path (a send scribble takes MPI's messages; a
 * receive scribble is found by the checksum of the chunk's good bytes);
 * and each transfer's path (cubert_mpi_info.shared_memory) must be the
 * model's: shared memory, or the eager form. Each exchange ends with a
 * message from the receiver to the sender, so that the sender's staging
 * buffers are free again, deterministically, for the next. A rank cannot
 * send to itself through shared memory: with one rank none runs (counts
 * stay zero). */
void xc_run(uint64_t seed, uint64_t programs, bool shared, int rank, int nranks, uint64_t *counts, FILE *err);

#endif
