/* base/array.h: the one growable array of the library (internal).
 *
 * An array is the caller's own three fields (a pointer, a count, a
 * capacity, of any integer types); cb_array_grow() makes room in it:
 *
 *   if (n == cap) {
 *     size_t ncap;
 *     T *v = cb_array_grow(items, cap, n + 1, sizeof *v, &ncap);
 *     if (!v) return CUBERT_ERR_OUT_OF_MEMORY;   (items is untouched)
 *     items = v;
 *     cap = ncap;
 *   }
 *
 * Growth doubles from CB_ARRAY_MIN_CAP, so n pushes cost O(n). Memory comes
 * from base's allocator (base/alloc.h): free the array with cb_free(). */
#ifndef CUBERT_BASE_ARRAY_H
#define CUBERT_BASE_ARRAY_H

#include <stddef.h>

#define CB_ARRAY_MIN_CAP 8

/* `items` (room for `cap` elements of `elem` bytes; NULL when cap is 0)
 * with room for at least `need` elements: the array to use from now on, and
 * its capacity in *new_cap. When it already has room, `items` itself. NULL
 * when out of memory or the size would overflow: then `items` and its
 * contents are unchanged and still the caller's. */
void *cb_array_grow(void *items, size_t cap, size_t need, size_t elem, size_t *new_cap);

#endif
