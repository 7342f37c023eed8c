/* cubert/export.h: symbol visibility for the public API. Nothing to own. */
#ifndef CUBERT_EXPORT_H
#define CUBERT_EXPORT_H

#if defined(CUBERT_STATIC_DEFINE)
#define CUBERT_API
#elif defined(__GNUC__)
#define CUBERT_API __attribute__((visibility("default")))
#else
#define CUBERT_API
#endif

#define CUBERT_VERSION_MAJOR 0
#define CUBERT_VERSION_MINOR 1
#define CUBERT_VERSION_PATCH 0
#define CUBERT_VERSION_STRING "0.1.0"

#endif
