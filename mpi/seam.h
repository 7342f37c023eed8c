/* mpi/seam.h: what tests reach inside libcubert_mpi (internal; like
 * mpi_alloc_set in mpi/alloc.h, a seam for tests, never for programs). */
#ifndef CUBERT_MPI_SEAM_H
#define CUBERT_MPI_SEAM_H

#include <mpi.h>

/* cubert's duplicate of `comm`, on which the payload of its transfers
 * travels (mpi/wire.h); MPI_COMM_NULL when cubert_mpi_init was not given
 * `comm`. tests/mpi/test_mpi_recv_broken.c sends hand-made transfers on
 * it, and checks that a receive left no message of an exchange behind. */
MPI_Comm mpi_payload_comm(MPI_Comm comm);

#endif
