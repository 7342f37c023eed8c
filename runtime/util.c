/* runtime/util.c: status strings, the version and the public allocator
 * setter. (The string builder, hashing, cb_env and cubert_berr_set are in
 * base/.) */
#include "base/alloc.h"
#include "runtime/internal.h"

const char *cubert_version(void) { return CUBERT_VERSION_STRING; }

cubert_status cubert_set_allocator(const cubert_allocator *a) {
  if (!a) {
    cb_allocator_set(NULL);
    return CUBERT_OK;
  }
  if (!a->malloc_fn || !a->calloc_fn || !a->realloc_fn || !a->free_fn)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT,
                   "cubert_set_allocator: every function of the table must be set");
  cb_allocator_set(a);
  return CUBERT_OK;
}

const char *cubert_status_string(cubert_status status) {
  switch (status) {
#define CB_CASE_(name, text) \
  case CUBERT_##name:        \
    return text;
    CUBERT_STATUS_MAP(CB_CASE_)
#undef CB_CASE_
    default:
      return "unknown status";
  }
}

const char *cubert_status_name(cubert_status status) {
  switch (status) {
#define CB_CASE_(name, text) \
  case CUBERT_##name:        \
    return #name;
    CUBERT_STATUS_MAP(CB_CASE_)
#undef CB_CASE_
    default:
      return "UNKNOWN";
  }
}
