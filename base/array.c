/* base/array.c: the growable array (base/array.h). */
#include "base/array.h"

#include <stdint.h>

#include "base/alloc.h"

void *cb_array_grow(void *items, size_t cap, size_t need, size_t elem, size_t *new_cap) {
  if (items && need <= cap) {
    *new_cap = cap;
    return items;
  }
  size_t ncap = cap ? cap : CB_ARRAY_MIN_CAP;
  while (ncap < need) {
    if (ncap > SIZE_MAX / 2) return NULL;
    ncap *= 2;
  }
  if (elem && ncap > SIZE_MAX / elem) return NULL;
  void *v = cb_realloc(items, ncap * elem);
  if (!v) return NULL;
  *new_cap = ncap;
  return v;
}
