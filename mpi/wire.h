/* mpi/wire.h: the messages of one cubert transfer between ranks (internal to
 * libcubert_mpi; docs/cluster.md describes them for people).
 *
 *   1. header, on the caller's communicator and tag: WIRE_HEADER_SIZE bytes
 *      (magic, version, view size, tainted ranges, chunk size, chunks, the
 *      payload tag, the sender's flags);
 *   2. when ranges > 0, on cubert's duplicate of the communicator with the
 *      payload tag: the tainted ranges, WIRE_RANGE_SIZE bytes each (offset
 *      in the view, size, failure record);
 *   3. each chunk, same communicator and tag: WIRE_CHUNK_PREFIX bytes
 *      (checksum of the bytes, flags) then the bytes;
 *   4. after a chunk flagged WIRE_CHUNK_UNREAD, with the payload tag + 1:
 *      the failure record of why the sender could not read it.
 * Eager form (header flag WIRE_EAGER): a view of 1..WIRE_EAGER_MAX bytes
 * with no tainted range, read whole, travels as one message: the header,
 * then its one chunk (prefix and bytes) in the same message; nothing
 * follows on cubert's communicator.
 * Shared-memory form (header flag WIRE_IPC; mpi/ipc.c): the bytes were
 * copied into device memory the receiver maps (HIP IPC, POSIX shm on the
 * host backend); the header message carries WIRE_IPC_BLOCK more bytes
 * (which staging buffer, its descriptor), the tainted ranges follow as in
 * 2., no chunk follows, and the receiver answers with WIRE_ACK_SIZE bytes
 * on the payload tag + 1 once it has taken the bytes.
 * Direct form (header flag WIRE_DIRECT, version 4, GPU-aware MPI, mpi/direct.h): a
 * view with no tainted range; each chunk is its bare bytes (no prefix, no
 * checksum: MPI moved them from device memory), nothing else follows.
 * Failed form (header flag WIRE_FAILED): a sender that could not send the
 * view (no host memory for its account or its staging buffer) sends the
 * header (no range, no chunk) with the failure record of why in the same
 * message; nothing follows. The receiver taints its whole view with it.
 * Every number is little-endian. */
#ifndef CUBERT_MPI_WIRE_H
#define CUBERT_MPI_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubert/cubert.h"

#define WIRE_MAGIC 0x504d4243u /* "CBMP" */
#define WIRE_VERSION 3u /* 2: the eager and shared-memory forms; 3: the direct form */
#define WIRE_HEADER_SIZE 64
#define WIRE_RANGE_SIZE (16 + CUBERT_FAILURE_RECORD_SIZE)
#define WIRE_CHUNK_PREFIX 16
#define WIRE_CHUNK_DEFAULT (4ull << 20)
#define WIRE_EAGER_MAX 16384 /* bytes of a view sent in the eager form, at most */

/* Header flags. */
#define WIRE_EAGER 1u /* the one chunk follows the header in its message */
#define WIRE_IPC 2u   /* the bytes wait in shared memory: WIRE_IPC_BLOCK follows the header */
#define WIRE_IPC_BLOCK (32 + CUBERT_EXPORT_DESC_SIZE)
#define WIRE_ACK_SIZE 16
#define WIRE_DIRECT 4u /* the chunks are the bare bytes, sent from device memory */
#define WIRE_FAILED 8u /* the sender could not send (out of host memory): its failure record follows the
                        * header in its message; no range, no chunk, nothing else */

/* Chunk flags. */
#define WIRE_CHUNK_UNREAD 1u /* the sender could not read these bytes: a record follows */

typedef struct wire_header {
  uint64_t size;       /* bytes of the view */
  uint64_t nranges;    /* tainted ranges that follow */
  uint64_t chunk;      /* bytes per chunk (the last may be shorter) */
  uint64_t nchunks;
  int32_t payload_tag; /* on cubert's communicator; +1 for records */
  uint32_t flags;      /* WIRE_EAGER, WIRE_IPC, WIRE_DIRECT, WIRE_FAILED, or 0 */
} wire_header;

void wire_put64(unsigned char *p, uint64_t v);
uint64_t wire_get64(const unsigned char *p);
void wire_header_encode(const wire_header *h, unsigned char out[WIRE_HEADER_SIZE]);
/* False, with `why` filled, when the bytes are not a cubert header of this
 * version. */
bool wire_header_decode(const unsigned char in[WIRE_HEADER_SIZE], wire_header *h, char *why, size_t cap);

/* Writes one tainted range (WIRE_RANGE_SIZE bytes): offset in the view,
 * size, and f's record (zeros, which the receiver calls a corrupt record,
 * when it cannot be exported). */
void wire_range_encode(unsigned char *p, uint64_t offset, uint64_t size, const cubert_failure *f);

/* The checksum of a chunk's bytes (detects bytes damaged in flight, such as
 * an injected scribble; not a defence against an adversary). */
uint64_t wire_checksum(const unsigned char *p, size_t n);

#endif
