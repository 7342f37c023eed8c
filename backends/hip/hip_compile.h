/* backends/hip/hip_compile.h: run-time compilation of kernel sources for the
 * HIP backend (hiprtc on AMD, NVRTC through HIP on NVIDIA) and its module
 * cache on disk (internal).
 *
 * This header names no vendor type, so tests and tools can compile kernels
 * for a target without a device (tests/test_hip_gfx90a.c) and without
 * including <hip/...>. Built without HIP (hip_none.c), cb_hip_compile()
 * returns CUBERT_ERR_UNSUPPORTED and cb_hip_platform() says "none".
 *
 * The disk cache lives in $CUBERT_CACHE_DIR, else $XDG_CACHE_HOME/cubert,
 * else ~/.cache/cubert. An entry's key is the platform, the target, the HIP
 * runtime and compiler versions (on AMD also comgr's: hiprtcVersion always
 * answers 9.0 there), the entry symbol, the source hash and length, the
 * options and, on AMD, $HIPRTC_COMPILE_OPTIONS_APPEND (hiprtc adds it to
 * every compile); the file is named after the key's hash and holds the key
 * itself, the code size and a hash of the code, so a collision, a short or
 * corrupt file is detected, ignored and rebuilt. Entries are written to a
 * temporary name and renamed into place, so processes sharing the folder
 * never read a half-written entry. The cache is best effort: failing to read
 * or write it never fails a compile.
 *
 * Ownership: *code is allocated with malloc and belongs to the caller. */
#ifndef CUBERT_BACKENDS_HIP_COMPILE_H
#define CUBERT_BACKENDS_HIP_COMPILE_H

#include <stdbool.h>
#include <stddef.h>

#include "backends/backend.h"

/* cb_hip_compile flags. */
#define CB_HIP_COMPILE_REBUILD 1u  /* ignore a cached entry (rewrite it after) */
#define CB_HIP_COMPILE_NO_CACHE 2u /* neither read nor write the disk cache */

/* "amd", "nvidia", or "none" when built without HIP. */
const char *cb_hip_platform(void);

/* Compiles kernel->source (entry kernel->entry, extra options
 * kernel->options, space separated) for `arch`: an AMD target ("gfx90a",
 * "gfx90a:sramecc+:xnack-") or an NVIDIA one ("sm_90" or "compute_90").
 * AMD gives a code object (ELF), NVIDIA gives NUL-terminated PTX. A compile
 * error is CUBERT_ERR_COMPILE with the compiler's log (cut to fit) in
 * err->message. `from_cache` (may be NULL) says whether the disk cache
 * served it. */
cubert_status cb_hip_compile(const char *arch, const cubert_backend_kernel *kernel, unsigned flags,
                             void **code, size_t *size, bool *from_cache, cubert_berr *err);

/* The folder of the disk cache as resolved now (no trailing slash); false
 * when none can be named (no $HOME). */
bool cb_hip_cache_dir(char *buf, size_t capacity);

#endif
