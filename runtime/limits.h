/* runtime/limits.h: numbers of the runtime that code outside it depends on
 * (internal; the fault-injection checker in tools/faultinj/). */
#ifndef CUBERT_RUNTIME_LIMITS_H
#define CUBERT_RUNTIME_LIMITS_H

/* A device reaps its completed work records (and so finds asynchronous
 * failures on its own) once per this many new records. */
#define CB_RUNTIME_REAP_INTERVAL 256u

/* A refused read's message names at most this many tainted ranges, then
 * counts the rest (the error's failures list them all). */
#define CB_MESSAGE_RANGES 8u

#endif
