/* base/copy.h: a memcpy that writes its destination with streaming
 * (non-temporal) stores. Thread-safe; no allocation. */
#ifndef CUBERT_BASE_COPY_H
#define CUBERT_BASE_COPY_H

#include <stddef.h>

/* Copies n bytes from src to dst (they must not overlap), as memcpy does,
 * but from the first 16-byte boundary of dst on with stores that write
 * the destination's lines without reading them first and without keeping
 * them in the cache; every store is fenced before it returns, so what
 * the caller publishes next (a release, a lock, a DMA it starts) comes
 * after the bytes. Right for large copies nobody reads soon on this CPU:
 * out of a staging chunk into a caller's buffer, or into a chunk a device
 * reads by DMA. Plain memcpy where the compiler offers no such stores
 * (anything but x86 with SSE2). */
void cb_copy_stream(void *dst, const void *src, size_t n);

#endif
