/* base/env.h: environment variables and sizes (internal). */
#ifndef CUBERT_BASE_ENV_H
#define CUBERT_BASE_ENV_H

#include <stdbool.h>
#include <stdint.h>

/* The variable's value, or NULL when it is unset or empty. The string
 * belongs to the environment. */
const char *cb_env(const char *name);

/* A size in bytes: a whole decimal number, optionally followed by a unit
 * K, M, G or T (powers of 1024, either case), optionally "i" after the
 * unit, optionally "B" (4K, 4k, 4KiB, 4KB, 4096 and 4096B are all 4096).
 * The text starts with a digit and has nothing after the unit. False (and
 * *bytes untouched) for anything else (a sign, a fraction, a space, an
 * unknown unit), and above 9e18 bytes. Zero is a size. */
bool cb_parse_size(const char *text, uint64_t *bytes);

#endif
