/* mpi/direct.c: the direct form (mpi/direct.h). */
#include "mpi/direct.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubert/mpi.h"

static bool on;

bool direct_init(char *why, size_t cap) {
  const char *v = getenv("CUBERT_MPI_GPU_AWARE");
  if (!v || !*v || strcmp(v, "auto") == 0) {
    on = cubert_mpi_gpu_aware();
  } else if (strcmp(v, "force") == 0) {
    on = true;
  } else if (strcmp(v, "off") == 0) {
    on = false;
  } else {
    snprintf(why, cap, "CUBERT_MPI_GPU_AWARE=%s: expected auto, force or off", v);
    return false;
  }
  return true;
}

bool direct_on(void) { return on; }

bool direct_send_begin(cubert_client *c, const cubert_handle *view, uint64_t size, direct_send *d) {
  memset(d, 0, sizeof *d);
  void *addr = NULL;
  if (cubert_handle_empty(c, size, &d->copy) != CUBERT_OK) return false;
  /* the external read waits for the copy and refuses it if it failed */
  if (cubert_handle_copy(c, view, d->copy) != CUBERT_OK ||
      cubert_handle_external_begin(c, d->copy, CUBERT_ACCESS_READ, &d->ext, &addr) != CUBERT_OK) {
    cubert_handle_release(d->copy);
    memset(d, 0, sizeof *d);
    return false;
  }
  d->addr = addr;
  return true;
}

void direct_send_end(direct_send *d) {
  if (d->ext) cubert_handle_external_end(d->ext, NULL);
  cubert_handle_release(d->copy);
  memset(d, 0, sizeof *d);
}

cubert_external *direct_recv_begin(cubert_client *c, const cubert_handle *view, uint64_t a, uint64_t b, void **addr) {
  cubert_handle *part = NULL;
  cubert_external *x = NULL;
  uint64_t size = cubert_handle_size_in_use(view);
  if (cubert_handle_slice(view, a, size - b, &part) == CUBERT_OK &&
      cubert_handle_external_begin(c, part, CUBERT_ACCESS_WRITE, &x, addr) != CUBERT_OK)
    x = NULL;
  cubert_handle_release(part); /* the access holds its own */
  return x;
}
