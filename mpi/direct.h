/* mpi/direct.h: the direct form of a transfer (internal to libcubert_mpi):
 * MPI moves device memory itself (GPU-aware MPI), nothing is staged through
 * the host, and the ledger stays exact through cubert's external access
 * (cubert_handle_external_begin/end).
 *
 * When: CUBERT_MPI_GPU_AWARE=auto (default: when cubert_mpi_gpu_aware()
 * says the MPI library moves device memory), force (always: for the host
 * backend, whose device memory is host memory, and tests), off (never).
 *
 * Sender: a view with no tainted byte and no injected fault is copied on
 * its device (one device-to-device copy, so that the send returns at once
 * and the view is the caller's again, as in the staged form), and MPI sends
 * the chunks from that copy, under an external read; the copy goes when MPI
 * is done. Anything else goes in the staged form, which carries the account.
 * Receiver: each chunk of a direct transfer lands straight in the view,
 * under an external write per chunk: pending (tainted) until MPI completes,
 * then repaired when it arrived whole, or tainted with why not. */
#ifndef CUBERT_MPI_DIRECT_H
#define CUBERT_MPI_DIRECT_H

#include <stdbool.h>
#include <stdint.h>

#include "cubert/cubert.h"

/* Reads CUBERT_MPI_GPU_AWARE; false with `why` filled when it is none of
 * auto, force, off. */
bool direct_init(char *why, size_t cap);
/* Whether this process hands device memory to MPI. */
bool direct_on(void);

typedef struct direct_send {
  cubert_handle *copy;
  cubert_external *ext;
  unsigned char *addr; /* the copy's first byte, for MPI */
} direct_send;

/* The copy of `view` (`size` bytes on `client`'s device) and its address;
 * false when it cannot be had (out of device memory, the copy failed): the
 * staged form then. */
bool direct_send_begin(cubert_client *client, const cubert_handle *view, uint64_t size, direct_send *d);
/* After MPI is done with the copy (or MPI is gone). Nothing for a zeroed one. */
void direct_send_end(direct_send *d);

/* Begins the external write of view bytes [a, b): *addr for MPI_Irecv.
 * NULL with the thread's last error when refused. */
cubert_external *direct_recv_begin(cubert_client *client, const cubert_handle *view, uint64_t a, uint64_t b,
                                   void **addr);

#endif
