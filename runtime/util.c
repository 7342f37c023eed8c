/* runtime/util.c: status strings and the version. (The string builder,
 * hashing, cb_env and cubert_berr_set are in base/.) */
#include "runtime/internal.h"

const char *cubert_version(void) { return CUBERT_VERSION_STRING; }

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
