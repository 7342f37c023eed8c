/* mpi/wire.c: encoding of the transfer header, and the chunk checksum. */
#include "mpi/wire.h"

#include <stdio.h>
#include <string.h>

void wire_put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

uint64_t wire_get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

void wire_header_encode(const wire_header *h, unsigned char out[WIRE_HEADER_SIZE]) {
  memset(out, 0, WIRE_HEADER_SIZE);
  wire_put64(out, (uint64_t)WIRE_MAGIC | ((uint64_t)WIRE_VERSION << 32));
  wire_put64(out + 8, h->size);
  wire_put64(out + 16, h->nranges);
  wire_put64(out + 24, h->chunk);
  wire_put64(out + 32, h->nchunks);
  wire_put64(out + 40, (uint64_t)(uint32_t)h->payload_tag | ((uint64_t)h->flags << 32));
}

bool wire_header_decode(const unsigned char in[WIRE_HEADER_SIZE], wire_header *h, char *why, size_t cap) {
  uint64_t mv = wire_get64(in);
  if ((uint32_t)mv != WIRE_MAGIC) {
    snprintf(why, cap, "the message is not a cubert transfer header (magic %08x, expected %08x)",
             (unsigned)(uint32_t)mv, WIRE_MAGIC);
    return false;
  }
  if ((uint32_t)(mv >> 32) != WIRE_VERSION) {
    snprintf(why, cap, "cubert transfer header version %u, this library speaks %u",
             (unsigned)(mv >> 32), WIRE_VERSION);
    return false;
  }
  h->size = wire_get64(in + 8);
  h->nranges = wire_get64(in + 16);
  h->chunk = wire_get64(in + 24);
  h->nchunks = wire_get64(in + 32);
  uint64_t tf = wire_get64(in + 40);
  h->payload_tag = (int32_t)(uint32_t)tf;
  h->flags = (uint32_t)(tf >> 32);
  bool failed = h->flags & WIRE_FAILED;
  uint64_t want = h->chunk && !failed ? (h->size + h->chunk - 1) / h->chunk : 0;
  bool eager_bad = (h->flags & ~(WIRE_EAGER | WIRE_IPC | WIRE_DIRECT | WIRE_FAILED)) ||
                   (failed && (h->flags != WIRE_FAILED || h->nranges)) ||
                   ((h->flags & WIRE_EAGER) && (h->flags & (WIRE_IPC | WIRE_DIRECT))) ||
                   ((h->flags & WIRE_IPC) && (h->flags & WIRE_DIRECT)) ||
                   ((h->flags & WIRE_EAGER) && (h->nranges || h->nchunks != 1 || h->size > WIRE_EAGER_MAX)) ||
                   ((h->flags & WIRE_DIRECT) && h->nranges);
  if ((h->size && !h->chunk) || h->nchunks != want || h->payload_tag < 0 || h->nranges > h->size || eager_bad) {
    snprintf(why, cap, "corrupt cubert transfer header (size %llu, chunk %llu, chunks %llu, ranges %llu, flags %x)",
             (unsigned long long)h->size, (unsigned long long)h->chunk, (unsigned long long)h->nchunks,
             (unsigned long long)h->nranges, (unsigned)h->flags);
    return false;
  }
  return true;
}

void wire_range_encode(unsigned char *p, uint64_t offset, uint64_t size, const cubert_failure *f) {
  wire_put64(p, offset);
  wire_put64(p + 8, size);
  if (cubert_failure_export(f, (cubert_failure_record *)(p + 16)) != CUBERT_OK)
    memset(p + 16, 0, CUBERT_FAILURE_RECORD_SIZE); /* the receiver says: corrupt record */
}

/* Eight bytes at a time, multiply and rotate, with the length and the
 * tail mixed in. */
uint64_t wire_checksum(const unsigned char *p, size_t n) {
  const uint64_t k = 0x9e3779b97f4a7c15ull;
  uint64_t a = 0x243f6a8885a308d3ull ^ n, b = 0x13198a2e03707344ull;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    uint64_t x, y;
    memcpy(&x, p + i, 8);
    memcpy(&y, p + i + 8, 8);
    a = (a ^ x) * k;
    b = (b ^ y) * k;
    a = (a << 29) | (a >> 35);
    b = (b << 31) | (b >> 33);
  }
  for (; i < n; i++) a = (a ^ p[i]) * k;
  a ^= b * 0xc2b2ae3d27d4eb4full;
  a ^= a >> 33;
  return a * 0xff51afd7ed558ccdull;
}
