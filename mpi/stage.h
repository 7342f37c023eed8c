/* mpi/stage.h: pinned staging buffers of the MPI component, kept per client
 * and reused from one transfer to the next (internal to libcubert_mpi).
 *
 * Transfers stage device bytes through cubert host buffers
 * (cubert_host_buffer_alloc: page-locked on HIP), which move at the link's
 * rate and asynchronously, so the sender reads chunk k+1 from the device
 * while chunk k is handed to MPI, and the receiver writes chunk k to the
 * device while chunk k+1 arrives. Pinning memory costs far more than
 * copying a small view, so buffers are kept: up to STAGE_KEEP per client.
 *
 * Lifetime: a host buffer must be released while its runtime is alive, and
 * a user may destroy the client (and the runtime) before
 * cubert_mpi_finalize. So the first buffer taken for a client, or its
 * first send that stages nothing (the direct form, shared memory:
 * stage_watch), registers a hook on it (cubert_client_on_destroy): the
 * client's end first waits for its sends still travelling (stage_init's
 * `drain`), then releases its kept buffers. The last cubert_mpi_finalize releases
 * every pool and removes the hooks. */
#ifndef CUBERT_MPI_STAGE_H
#define CUBERT_MPI_STAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "cubert/cubert.h"

typedef struct stage_buf {
  cubert_client *client;
  cubert_host_buffer *hb; /* NULL: none */
  unsigned char *p;       /* its bytes */
  size_t cap;             /* its size, at least what was asked */
} stage_buf;

/* `drain(client)`: finishes (waits for) the sends still travelling from the
 * client's buffers; the hook calls it before releasing them. */
void stage_init(void (*drain)(cubert_client *client));
/* A pinned buffer of `size` bytes or more for `client`: a kept one, else a
 * new one. False, with the thread's last error set by cubert, when none can
 * be had (out of memory, pinning refused). */
bool stage_take(cubert_client *client, size_t size, stage_buf *out);
/* Makes sure the client's destroy drains its sends (the hook), for sends
 * that stage nothing (the direct form, shared memory); false when the hook
 * cannot be set. */
bool stage_watch(cubert_client *client);
/* Gives a buffer back (its transfers must be over): kept, in place of a
 * smaller one, or released. Nothing for an empty stage_buf. */
void stage_give(stage_buf *b);
/* Releases every kept buffer and removes the hooks (the last
 * cubert_mpi_finalize). */
void stage_drop_all(void);

#endif
