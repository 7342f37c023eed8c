/* base/env.c: environment variables and sizes (base/env.h). */
#include "base/env.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

const char *cb_env(const char *name) {
  const char *v = getenv(name);
  return (v && *v) ? v : NULL;
}

bool cb_parse_size(const char *text, uint64_t *bytes) {
  if (!text || !isdigit((unsigned char)*text)) return false;
  char *end = NULL;
  errno = 0;
  unsigned long long whole = strtoull(text, &end, 10);
  if (errno) return false;
  unsigned shift = 0;
  switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
  }
  if (shift && (*end == 'i' || *end == 'I')) end++;
  if (*end == 'b' || *end == 'B') end++;
  if (*end != '\0') return false;
  const uint64_t limit = UINT64_C(9000000000000000000);
  if (whole > (limit >> shift)) return false;
  uint64_t v = (uint64_t)whole << shift;
  *bytes = v;
  return true;
}
