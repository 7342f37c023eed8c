/* base/hash.h: the one hash of the library, 64-bit FNV-1a (internal; the
 * cubert_hash64() of backends/backend.h is the same function). Not
 * for security: for cache keys, seeds and stable names. */
#ifndef CUBERT_BASE_HASH_H
#define CUBERT_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define CB_FNV1A64_SEED 0xcbf29ce484222325ull

/* FNV-1a of size bytes at data, continuing from `h` (CB_FNV1A64_SEED to
 * start); data may be NULL when size is 0. */
uint64_t cb_fnv1a64_more(uint64_t h, const void *data, size_t size);
/* FNV-1a of size bytes at data; 0 for NULL data. */
uint64_t cb_fnv1a64(const void *data, size_t size);
/* FNV-1a of the bytes of a NUL-terminated string (without the NUL). */
uint64_t cb_fnv1a64_str(const char *s);

#endif
