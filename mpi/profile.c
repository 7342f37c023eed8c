/* mpi/profile.c: per-phase timing of cubert's MPI transfers (mpi/profile.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "mpi/profile.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool prof_on;

static _Atomic uint64_t ns[PROF_PHASES_];
static _Atomic uint64_t nsend, nrecv, nmsg, nbytes;

static const char *const names[PROF_PHASES_] = {
    "checks and set-up", "walk of tainted ranges", "device read (staging)", "MPI posting",
    "sender MPI_Testall", "receiver header wait", "receiver chunk waits", "landing (checksum, device write)",
    "receiver taint and size check", "verdict and info", "pinned staging buffer taken",
    "shared memory: sender's copies", "shared memory: receiver's landing",
};
static _Atomic uint64_t events[PROF_EVENTS_];
static const char *const event_names[PROF_EVENTS_] = {
    "pinned staging buffers allocated", "pinned staging buffers released",
    "sends through shared memory", "sends to a rank of this node through MPI (no free shared buffer)",
    "sends in the eager form (one message)",
};

void prof_event_add(prof_event ev) {
  if (prof_on) atomic_fetch_add(&events[ev], 1);
}

double prof_now(void) {
  if (!prof_on) return 0;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void prof_lap(prof_phase phase, double *t) {
  if (!prof_on) return;
  double n = prof_now();
  atomic_fetch_add(&ns[phase], (uint64_t)((n - *t) * 1e9));
  *t = n;
}

void prof_count(bool send, uint64_t messages, uint64_t bytes) {
  if (!prof_on) return;
  atomic_fetch_add(send ? &nsend : &nrecv, 1);
  atomic_fetch_add(&nmsg, messages);
  atomic_fetch_add(&nbytes, bytes);
}

void prof_init(void) {
  const char *v = getenv("CUBERT_MPI_PROFILE");
  prof_on = v && *v && strcmp(v, "0") != 0;
}

void prof_report(int rank) {
  if (!prof_on) return;
  uint64_t s = atomic_load(&nsend), r = atomic_load(&nrecv), t = s + r;
  fprintf(stderr, "cubert_mpi profile, rank %d: %llu sends, %llu receives, %.2f MPI messages per transfer, %llu bytes\n",
          rank, (unsigned long long)s, (unsigned long long)r, t ? (double)atomic_load(&nmsg) / (double)t : 0.0,
          (unsigned long long)atomic_load(&nbytes));
  for (int i = 0; i < PROF_PHASES_; i++) {
    uint64_t v = atomic_load(&ns[i]);
    if (!v) continue;
    fprintf(stderr, "cubert_mpi profile, rank %d: %-34s %10.2f us per transfer (%.3f s in all)\n", rank, names[i],
            t ? (double)v / 1e3 / (double)t : 0.0, (double)v / 1e9);
  }
  for (int i = 0; i < PROF_EVENTS_; i++)
    fprintf(stderr, "cubert_mpi profile, rank %d: %-34s %10llu\n", rank, event_names[i],
            (unsigned long long)atomic_load(&events[i]));
}
