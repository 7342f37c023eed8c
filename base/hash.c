/* base/hash.c: FNV-1a (base/hash.h) and cubert_hash64() (backends/backend.h). */
#include "base/hash.h"

#include <string.h>

#include "backends/backend.h"

uint64_t cb_fnv1a64_more(uint64_t h, const void *data, size_t size) {
  const unsigned char *p = data;
  for (size_t i = 0; i < size; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t cb_fnv1a64(const void *data, size_t size) {
  return data ? cb_fnv1a64_more(CB_FNV1A64_SEED, data, size) : 0;
}

uint64_t cb_fnv1a64_str(const char *s) { return cb_fnv1a64_more(CB_FNV1A64_SEED, s, strlen(s)); }

uint64_t cubert_hash64(const void *data, size_t size) { return cb_fnv1a64(data, size); }
