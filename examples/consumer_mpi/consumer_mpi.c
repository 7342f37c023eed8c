/* examples/consumer_mpi/consumer_mpi.c: a program built against an
 * installed cubert's MPI component. Run it with two ranks or more
 * (mpirun -n 2 ./consumer_mpi): rank 0 sends 1 MiB, a part of it tainted,
 * to rank 1, which finds exactly that part tainted and the rest good. */
#include <cubert/cubert.h>
#include <cubert/mpi.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE (1u << 20)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, rc = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  cubert_runtime *rt = NULL;
  cubert_client *c = NULL;
  cubert_handle *h = NULL;
  unsigned char *buf = malloc(SIZE);
  if (size < 2 || !buf || cubert_mpi_init(MPI_COMM_WORLD) || cubert_runtime_create(NULL, &rt) ||
      cubert_client_create(rt, 0, &c)) {
    fprintf(stderr, "rank %d: setup failed: %s\n", rank, size < 2 ? "needs 2 ranks" : cubert_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (unsigned i = 0; i < SIZE; i++) buf[i] = (unsigned char)(i * 7);
  if (rank == 0) {
    /* bytes 1000..2000 carry a failure (here one made by hand; in a real
     * program, work that failed) */
    cubert_handle *part = NULL;
    const cubert_failure *f = NULL;
    cubert_handle_create(c, buf, SIZE, &h);
    cubert_handle_slice(h, 1000, SIZE - 2000, &part);
    cubert_failure_create(c, CUBERT_ERR_LAUNCH, "kernel `k` failed on rank 0", &f);
    cubert_handle_taint(c, part, f);
    cubert_failure_release(f);
    cubert_handle_release(part);
    cubert_status st = cubert_mpi_send(c, h, 1, 0, MPI_COMM_WORLD, NULL);
    printf("rank 0: send: %s: %s\n", cubert_status_name(st), cubert_last_error_message());
    rc = st == CUBERT_ERR_TAINTED ? 0 : 1;
  } else if (rank == 1) {
    cubert_mpi_info info;
    cubert_handle_empty(c, SIZE, &h);
    cubert_status st = cubert_mpi_recv(c, h, 0, 0, MPI_COMM_WORLD, &info);
    uint64_t s = 0, e = 0;
    const cubert_failure *f = NULL;
    cubert_handle_tainted_range(c, h, 0, &s, &e, &f);
    cubert_remote_origin o = {0};
    if (f) cubert_failure_remote(f, &o);
    printf("rank 1: receive: %s; bytes %llu..%llu tainted by rank %d: %s\n", cubert_status_name(st),
           (unsigned long long)s, (unsigned long long)e, o.rank, f ? cubert_failure_message(f) : "(none)");
    rc = st == CUBERT_ERR_TAINTED && s == 1000 && e == 2000 && o.remote && o.rank == 0 ? 0 : 1;
    if (f) cubert_failure_release(f);
  } else {
    rc = 0;
  }
  cubert_handle_release(h);
  cubert_client_destroy(c);
  cubert_runtime_destroy(rt);
  free(buf);
  cubert_mpi_finalize(MPI_COMM_WORLD);
  int all = 0;
  MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return all;
}
