/* runtime/record.c: a failure as bytes (cubert_failure_record) and back,
 * remote origins, and tainting a view with a given failure.
 *
 * Layout of a record (version 1, every integer little-endian):
 *
 *   0   "CBFR"          magic
 *   4   u16 version     1
 *   6   u16 zero
 *   8   u32 used        bytes of the record in use (header included)
 *   12  u32 zero
 *   16  u64 checksum    FNV-1a 64 of bytes 0..16 then 24..used
 *   24  the failure, then u8 has_root and the root (same fields), then
 *       u64 dropped, u8 nskips and the links, oldest first
 *
 * A failure's fields: its origin process (str host, i64 pid, i32 rank),
 * u64 id, u64 parent_id, i32 status, i32 device, u64 stream, u64 sequence,
 * str operation, str kernel, str device_name, str message. A link: str
 * kernel, str input, i32 device, u64 sequence. A str is a u16 length and
 * that many bytes (no NUL), cut to a bound per field ("..." marks a cut);
 * the failure's message is bound like the root's when it has no root (it
 * is the root cause).
 * The links are the newest that fit; the others count as dropped, as the
 * failure's own bounded chain does. Unused bytes are zero.
 *
 * Nothing here reads a pointer out of a record: a record is data from
 * another process and is checked field by field before anything is made. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "runtime/internal.h"
#include "runtime/fault_state.h"

#define REC_MAGIC "CBFR"
#define REC_VERSION 1u
#define REC_HEADER 24u
#define REC_SIZE CUBERT_FAILURE_RECORD_SIZE

/* bounds per string field, bytes */
#define MAX_HOST 63u
#define MAX_OPERATION 31u
#define MAX_KERNEL 63u
#define MAX_DEVICE_NAME 63u
#define MAX_MESSAGE 127u      /* the failure's own message */
#define MAX_ROOT_MESSAGE 255u /* the root cause */
#define MAX_LINK 31u          /* a link's kernel and input */

/* ------------------------------------------------------------ writing */

typedef struct writer {
  unsigned char *p;
  size_t n;
} writer;

static void put_u(writer *w, uint64_t v, unsigned bytes) {
  for (unsigned i = 0; i < bytes; i++) w->p[w->n++] = (unsigned char)(v >> (8 * i));
}

static size_t str_len(const char *s, size_t max) {
  size_t n = s ? strlen(s) : 0;
  return n < max ? n : max;
}

static void put_str(writer *w, const char *s, size_t max) {
  size_t full = s ? strlen(s) : 0, n = str_len(s, max);
  put_u(w, n, 2);
  if (n) memcpy(w->p + w->n, s, n);
  if (full > n && n >= 3) memcpy(w->p + w->n + n - 3, "...", 3);
  w->n += n;
}

typedef struct origin {
  const char *host;
  int64_t pid;
  int rank;
} origin;

static void put_failure(writer *w, const cubert_failure *f, const origin *here, size_t max_message) {
  /* a failure that came from elsewhere keeps its origin when passed on */
  origin o = f->remote ? (origin){f->remote_host, f->remote_pid, f->remote_rank} : *here;
  put_str(w, o.host, MAX_HOST);
  put_u(w, (uint64_t)o.pid, 8);
  put_u(w, (uint64_t)(int64_t)o.rank, 4);
  put_u(w, f->remote ? f->remote_id : f->id, 8);
  put_u(w, f->parent_id, 8);
  put_u(w, (uint64_t)(int64_t)f->status, 4);
  put_u(w, (uint64_t)(int64_t)f->device, 4);
  put_u(w, f->stream, 8);
  put_u(w, f->sequence, 8);
  put_str(w, f->operation, MAX_OPERATION);
  put_str(w, f->kernel, MAX_KERNEL);
  put_str(w, f->device_name, MAX_DEVICE_NAME);
  put_str(w, f->message, max_message);
}

static size_t link_size(const cubert_skip *s) {
  return 2 + str_len(s->kernel, MAX_LINK) + 2 + str_len(s->input, MAX_LINK) + 4 + 8;
}

cubert_status cubert_failure_export(const cubert_failure *failure, cubert_failure_record *record) {
  if (!failure) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_failure_export: failure is NULL");
  if (!record) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, "cubert_failure_export: record is NULL");
  char host[MAX_HOST + 1] = "";
  if (gethostname(host, sizeof host) != 0) strcpy(host, "?");
  host[MAX_HOST] = '\0';
  origin here = {host, (int64_t)getpid(), cb_failure_rank()};
  cubert_failure_record r;
  memset(&r, 0, sizeof r);
  writer w = {r.bytes, REC_HEADER};
  /* a root failure's own message is the root cause: the root's bound */
  put_failure(&w, failure, &here, failure->root ? MAX_MESSAGE : MAX_ROOT_MESSAGE);
  put_u(&w, failure->root ? 1 : 0, 1);
  if (failure->root) put_failure(&w, failure->root, &here, MAX_ROOT_MESSAGE);
  /* the newest links that fit; the rest count as dropped */
  size_t room = REC_SIZE - w.n - 9, keep = 0;
  while (keep < failure->nskips) {
    size_t need = link_size(&failure->skips[failure->nskips - 1 - keep]);
    if (need > room) break;
    room -= need;
    keep++;
  }
  size_t from = failure->nskips - keep;
  put_u(&w, failure->dropped + from, 8);
  put_u(&w, keep, 1);
  for (size_t i = from; i < failure->nskips; i++) {
    const cubert_skip *s = &failure->skips[i];
    put_str(&w, s->kernel, MAX_LINK);
    put_str(&w, s->input, MAX_LINK);
    put_u(&w, (uint64_t)(int64_t)s->device, 4);
    put_u(&w, s->sequence, 8);
  }
  size_t used = w.n;
  memcpy(r.bytes, REC_MAGIC, 4);
  w.n = 4;
  put_u(&w, REC_VERSION, 2);
  put_u(&w, 0, 2);
  put_u(&w, used, 4);
  put_u(&w, 0, 4);
  uint64_t sum = cb_fnv1a64_more(cb_fnv1a64_more(CB_FNV1A64_SEED, r.bytes, 16), r.bytes + REC_HEADER,
                                 used - REC_HEADER);
  put_u(&w, sum, 8);
  *record = r;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ reading */

typedef struct reader {
  const unsigned char *p;
  size_t n, end;
  const char *bad; /* the first thing that was wrong, NULL while all is well */
  bool oom;        /* what went wrong was host memory, not the record */
} reader;

static uint64_t get_u(reader *r, unsigned bytes, const char *what) {
  if (r->bad) return 0;
  if (r->end - r->n < bytes) {
    r->bad = what;
    return 0;
  }
  uint64_t v = 0;
  for (unsigned i = 0; i < bytes; i++) v |= (uint64_t)r->p[r->n++] << (8 * i);
  return v;
}

static int32_t get_i32(reader *r, const char *what) {
  uint32_t u = (uint32_t)get_u(r, 4, what);
  return u > INT32_MAX ? (int32_t)(int64_t)(u - 0x100000000ull) : (int32_t)u;
}

/* A copy of a string field (malloc'd, NUL added); NULL and r->bad set when
 * it runs past the record, is longer than its bound or holds a NUL. */
static char *get_str(reader *r, size_t max, const char *what) {
  size_t n = (size_t)get_u(r, 2, what);
  if (r->bad) return NULL;
  if (n > max || r->end - r->n < n || memchr(r->p + r->n, 0, n)) {
    r->bad = what;
    return NULL;
  }
  char *s = cb_malloc(n + 1);
  if (!s) {
    r->bad = what;
    r->oom = true;
    return NULL;
  }
  memcpy(s, r->p + r->n, n);
  s[n] = '\0';
  r->n += n;
  return s;
}

static cubert_failure *get_failure(reader *r, size_t max_message) {
  cubert_failure *f = cb_failure_alloc();
  if (!f) {
    r->bad = "the failure";
    r->oom = true;
    return NULL;
  }
  f->remote = true;
  f->remote_host = get_str(r, MAX_HOST, "the host name");
  f->remote_pid = (int64_t)get_u(r, 8, "the process id");
  f->remote_rank = get_i32(r, "the rank");
  f->remote_id = get_u(r, 8, "the failure id");
  f->parent_id = get_u(r, 8, "the parent id");
  f->status = (cubert_status)get_i32(r, "the status");
  f->device = get_i32(r, "the device");
  f->stream = get_u(r, 8, "the stream");
  f->sequence = get_u(r, 8, "the work number");
  f->owned_operation = get_str(r, MAX_OPERATION, "the operation");
  f->operation = f->owned_operation ? f->owned_operation : "work";
  f->kernel = get_str(r, MAX_KERNEL, "the kernel name");
  f->device_name = get_str(r, MAX_DEVICE_NAME, "the device name");
  f->message = get_str(r, max_message, "the message");
  if (!r->bad && (f->status <= CUBERT_OK || f->status >= CUBERT_STATUS_COUNT_)) r->bad = "the status";
  if (!r->bad && (f->remote_id == 0 || f->remote_rank < -1 || f->remote_pid <= 0 || f->device < -1))
    r->bad = f->remote_id == 0 ? "the failure id" : f->remote_pid <= 0 ? "the process id"
             : f->remote_rank < -1                ? "the rank"
                                                  : "the device";
  if (r->bad) {
    cubert_failure_release(f);
    return NULL;
  }
  return f;
}

cubert_status cubert_failure_import(const cubert_failure_record *record, const cubert_failure **failure) {
#define fn "cubert_failure_import"
  if (!record) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, fn ": record is NULL");
  if (!failure) return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, fn ": failure is NULL");
  const unsigned char *b = record->bytes;
  if (memcmp(b, REC_MAGIC, 4) != 0)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT,
                   fn ": not a failure record (its first bytes are %02x %02x %02x %02x, not \"CBFR\")", b[0],
                   b[1], b[2], b[3]);
  reader r = {b, 4, REC_HEADER, NULL, false};
  unsigned version = (unsigned)get_u(&r, 2, "");
  if (version != REC_VERSION)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT,
                   fn ": record version %u is unknown to this cubert (it reads version %u)", version,
                   REC_VERSION);
  get_u(&r, 2, "");
  size_t used = (size_t)get_u(&r, 4, "");
  get_u(&r, 4, "");
  uint64_t sum = get_u(&r, 8, "");
  if (used < REC_HEADER || used > REC_SIZE)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, fn ": the record says it uses %zu bytes (%u to %u)", used,
                   REC_HEADER, REC_SIZE);
  uint64_t want = cb_fnv1a64_more(cb_fnv1a64_more(CB_FNV1A64_SEED, b, 16), b + REC_HEADER, used - REC_HEADER);
  if (sum != want)
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT,
                   fn ": the record is corrupt or truncated (checksum %016llx, its %zu bytes give %016llx)",
                   (unsigned long long)sum, used, (unsigned long long)want);
  /* the checksum covers the bytes in use; the rest is zero (the layout) */
  for (size_t i = used; i < REC_SIZE; i++)
    if (b[i])
      return cb_fail(CUBERT_ERR_INVALID_ARGUMENT,
                     fn ": the record is corrupt (byte %zu, after the %zu bytes in use, is not zero)", i, used);
  r.end = used;
  cubert_failure *f = get_failure(&r, MAX_ROOT_MESSAGE), *root = NULL;
  uint64_t has_root = get_u(&r, 1, "the root flag");
  if (!r.bad && has_root > 1) r.bad = "the root flag";
  /* only a failure that is its own root carries a message to the root's bound */
  if (!r.bad && has_root && f->message && strlen(f->message) > MAX_MESSAGE) r.bad = "the message";
  if (!r.bad && has_root) root = get_failure(&r, MAX_ROOT_MESSAGE);
  uint64_t dropped = get_u(&r, 8, "the dropped link count");
  size_t nskips = (size_t)get_u(&r, 1, "the link count");
  if (!r.bad && (nskips > CB_SKIPS_KEPT || (nskips && !root))) r.bad = "the link count";
  for (size_t i = 0; i < nskips && !r.bad; i++) {
    cubert_skip *s = &f->skips[f->nskips];
    s->kernel = get_str(&r, MAX_LINK, "a link's kernel");
    s->input = get_str(&r, MAX_LINK, "a link's input");
    s->device = get_i32(&r, "a link's device");
    s->sequence = get_u(&r, 8, "a link's work number");
    f->nskips++;
  }
  if (!r.bad && r.n != used) r.bad = "the record's length (bytes left over)";
  if (r.bad) {
    cubert_failure_release(f);
    cubert_failure_release(root);
    if (r.oom)
      return cb_fail(CUBERT_ERR_OUT_OF_MEMORY, fn ": out of host memory reading %s of the record", r.bad);
    return cb_fail(CUBERT_ERR_INVALID_ARGUMENT, fn ": the record is malformed: %s is out of place or out of range",
                   r.bad);
  }
  f->dropped = dropped;
  if (root) {
    f->root = root;
    f->status = root->status; /* a child's status is its root's */
  }
  *failure = f;
  return CUBERT_OK;
#undef fn
}

void cubert_failure_remote(const cubert_failure *f, cubert_remote_origin *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->rank = -1;
  o->host = "";
  o->device_name = "";
  if (!f || !f->remote) return;
  o->remote = true;
  o->host = f->remote_host ? f->remote_host : "";
  o->pid = f->remote_pid;
  o->rank = f->remote_rank;
  o->device = f->device;
  o->device_name = f->device_name ? f->device_name : "";
  o->id = f->remote_id;
}
