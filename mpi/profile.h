/* mpi/profile.h: where the time of cubert's MPI transfers goes (internal to
 * libcubert_mpi). With CUBERT_MPI_PROFILE=1 in a rank's environment (read by
 * cubert_mpi_init), every transfer adds the time it spent in each phase to
 * per-process totals, and cubert_mpi_finalize prints them on stderr, one
 * line per phase, per transfer (docs/cluster.md, "Where the latency goes").
 * Off, a probe costs one load and a branch. */
#ifndef CUBERT_MPI_PROFILE_H
#define CUBERT_MPI_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

typedef enum prof_phase {
  PROF_CHECK,       /* argument checks, request set-up, reaping finished sends */
  PROF_WALK,        /* the sender's walk of its tainted ranges */
  PROF_READ,        /* the sender's reads from the device into staging */
  PROF_POST,        /* MPI_Isend / MPI_Irecv calls */
  PROF_SEND_TEST,   /* the sender's MPI_Testall (progress, completion) */
  PROF_HEADER_WAIT, /* the receiver waiting for the header message */
  PROF_CHUNK_WAIT,  /* the receiver waiting for chunk messages */
  PROF_LAND,        /* checksums and the receiver's writes to the device */
  PROF_TAINT,       /* the receiver tainting ranges, the size check */
  PROF_VERDICT,     /* the account of the call: info, message */
  PROF_STAGE_TAKE,  /* taking a pinned staging buffer (a new one: an allocation) */
  PROF_IPC_SEND,    /* shared memory, sender: device copies into the buffer, their fence */
  PROF_IPC_LAND,    /* shared memory, receiver: mapping, device copies, fence, answer */
  PROF_PHASES_
} prof_phase;

extern bool prof_on;

/* Seconds on a monotonic clock (0 when profiling is off). */
double prof_now(void);
/* Adds now - *t to `phase`, and sets *t to now. */
void prof_lap(prof_phase phase, double *t);
/* Counts one transfer (send or receive) and its MPI messages. */
void prof_count(bool send, uint64_t messages, uint64_t bytes);
/* Counts an event of the path a transfer took (how many pinned buffers
 * were allocated, sends that found no free shared-memory buffer...). */
typedef enum prof_event {
  PROF_EV_PIN_ALLOC,  /* a staging buffer pinned anew (none kept fitted) */
  PROF_EV_PIN_FREE,   /* a staging buffer released (the pool was full) */
  PROF_EV_IPC_SEND,   /* a send through shared memory */
  PROF_EV_IPC_MISS,   /* a send to a rank of this node that took MPI's messages (no free buffer) */
  PROF_EV_EAGER,      /* a send in the eager form (one message) */
  PROF_EVENTS_
} prof_event;
void prof_event_add(prof_event ev);
/* Reads CUBERT_MPI_PROFILE. */
void prof_init(void);
/* Prints the totals (when on) with this rank's number. */
void prof_report(int rank);

#endif
