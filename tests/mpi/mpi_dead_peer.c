/* tests/mpi/mpi_dead_peer.c: a rank that dies while its peer receives
 * (issue 14 item 6; tests/mpi/dead_peer.cmake runs it under mpirun and
 * judges what mpirun and the survivor did; docs/cluster.md says what was
 * found).
 *
 * Rank 1 sends GOOD transfers of 64 KiB to rank 0 (cubert_mpi_send, chunks
 * of CUBERT_MPI_CHUNK), then dies (SIGKILL, or _exit(3) with
 * CUBERT_DEAD_PEER=exit) while rank 0 waits in cubert_mpi_recv for the
 * next one. Rank 0 receives in a loop and prints one line per transfer:
 * "transfer N good" only when the call returned CUBERT_OK and every byte
 * read back is what rank 1 wrote; "transfer N refused: ..." when the call
 * failed and no byte of the view reads as good; "transfer N STALE ..." when
 * the call failed but the view still reads as good (what must never
 * happen). MPI_COMM_WORLD is given MPI_ERRORS_RETURN, so an MPI that
 * reports the death returns it instead of aborting. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cubert/mpi.h"

#define GOOD 3
#define SIZE (64u << 10)

static void pattern(unsigned char *p, int n) {
  for (unsigned i = 0; i < SIZE; i++) p[i] = (unsigned char)(i * 31u + (unsigned)n * 7u + 1u);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  cubert_runtime *rt = NULL;
  cubert_client *c = NULL;
  cubert_handle *h = NULL;
  unsigned char *want = malloc(SIZE), *got = malloc(SIZE);
  if (size != 2 || !want || !got || cubert_mpi_init(MPI_COMM_WORLD) != CUBERT_OK ||
      cubert_runtime_create(NULL, &rt) != CUBERT_OK || cubert_client_create(rt, 0, &c) != CUBERT_OK ||
      cubert_handle_empty(c, SIZE, &h) != CUBERT_OK) {
    fprintf(stderr, "rank %d: cannot start (2 ranks needed): %s\n", rank, cubert_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (rank == 1) {
    for (int n = 0; n < GOOD; n++) {
      pattern(want, n);
      if (cubert_handle_write(c, h, want, SIZE) != CUBERT_OK ||
          cubert_mpi_send(c, h, 0, 5, MPI_COMM_WORLD, NULL) != CUBERT_OK)
        fprintf(stderr, "rank 1: transfer %d: %s\n", n, cubert_last_error_message());
    }
    /* let the last transfer leave (a dead process's queued bytes are lost
     * with it), then die while rank 0 waits for the next one */
    cubert_mpi_finalize(MPI_COMM_WORLD);
    sleep(1);
    fprintf(stderr, "rank 1: dying now\n");
    const char *how = getenv("CUBERT_DEAD_PEER");
    if (how && !strcmp(how, "exit")) _exit(3);
    raise(SIGKILL);
  }
  for (int n = 0; n < GOOD + 2; n++) {
    cubert_status st = cubert_mpi_recv(c, h, 1, 5, MPI_COMM_WORLD, NULL);
    cubert_status rd = cubert_handle_read(c, h, got, SIZE);
    pattern(want, n);
    if (st == CUBERT_OK && rd == CUBERT_OK && !memcmp(got, want, SIZE))
      printf("transfer %d good\n", n);
    else if (st == CUBERT_OK)
      printf("transfer %d WRONG: the call returned OK, the bytes %s\n", n,
             rd == CUBERT_OK ? "differ from what was sent" : "are refused");
    else if (rd == CUBERT_OK)
      printf("transfer %d STALE: the call failed (%s) but the view reads as good\n", n, cubert_status_name(st));
    else
      printf("transfer %d refused: %s\n", n, cubert_last_error_message());
    fflush(stdout);
  }
  cubert_handle_release(h);
  cubert_client_destroy(c);
  cubert_runtime_destroy(rt);
  free(want);
  free(got);
  cubert_mpi_finalize(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
