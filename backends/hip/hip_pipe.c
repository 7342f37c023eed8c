/* backends/hip/hip_pipe.c: the pinned staging pipeline of a device, for
 * large transfers with pageable host memory and for peer copies with peer
 * access off (issue 15, items 2 and 3).
 *
 * Why: from pageable memory the driver copies through its own staging at a
 * fraction of the link's rate (H200, 1 GiB: h2d 7.0 GB/s, d2h 14.3, where
 * the link moves 55 from pinned memory), and one host thread copying into
 * pinned chunks gains nothing (measured 1.0x h2d, 0.5x d2h): the host-side
 * memcpy is the bottleneck. So the pipeline has
 *  - `nchunks` pinned chunks of `chunk` bytes, one allocation on the
 *    device's NUMA node when the runtime places it (place_alloc +
 *    hipHostRegister, portable), else hipHostMalloc(portable);
 *  - a pool of copy threads (base/copier.h), placed near the device
 *    (place_thread), that split each chunk's memcpy with the calling
 *    thread;
 *  - one event per chunk on the device: the last transfer that used it.
 * A write copies chunk k+1 into pinned memory while chunk k is in flight
 * and returns when the last chunk is copied (the caller's buffer is then
 * consumed, as backend.h asks); a read keeps up to `nchunks` device-to-host
 * copies queued and copies each out as it lands, returning when all are in
 * the caller's buffer. Sizes come from the machine: copy threads (the
 * caller included) three quarters of the cores online, at most 16; 8
 * chunks of 8 MiB, split finer for smaller transfers. Each chunk's memcpy
 * is cut into pieces the threads take as they come free, so one thread
 * the scheduler holds back does not hold the chunk (docs/bench.md: with a
 * fixed share per thread and as many threads as cores, two H200 runs of
 * 2026-12-02 moved 11-12 and 40-42 GB/s at 256 MiB with the same settings).
 * A read copies out of the chunks with streaming stores (base/copy.h:
 * the caller's lines are written without being read first), a write that
 * fits in one pass over the chunks fills them with streaming stores and a
 * larger one with memcpy (pipe_get says why). $CUBERT_HIP_COPY_STREAM=0: memcpy
 * both ways, =all: streaming stores throughout, =reads: reads only;
 * $CUBERT_HIP_COPY_THREADS, $CUBERT_HIP_STAGING_CHUNKS and
 * $CUBERT_HIP_STAGING_CHUNK override them, $CUBERT_HIP_PIPE_FROM the size
 * from which transfers take the pipeline (default: reads from 1 MiB,
 * writes from 16 MiB, cb_hip_pipe_from).
 *
 * Peer copies with peer access off go device -> chunk -> device with no
 * host copy at all: the source's half runs on a stream of the source device
 * (one per source, made on first use), chunk k's upload waits on an event
 * of its download and the next download into chunk k waits on the upload's
 * event, so both directions of the two links run at once; the whole copy is
 * ordered after the destination stream's earlier work by an event the
 * source stream waits on. Everything is queued: the call returns without
 * waiting.
 *
 * One transfer at a time uses a device's pipeline (pipe_lock); a transfer
 * that finds it busy takes the direct path, as before the pipeline. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "backends/hip/hip_internal.h"
#include "base/copier.h"
#include "base/env.h"

#define PIPE_CHUNKS_MAX 16
#define PIPE_PIECE_MIN ((size_t)1 << 20) /* chunks no finer than this */

typedef struct peer_side {
  hipStream_t stream;               /* on the source device */
  hipEvent_t filled[PIPE_CHUNKS_MAX]; /* on the source device */
} peer_side;

struct cb_hip_pipe {
  char *buf;
  bool placed;
  size_t chunk, bytes;
  int nchunks;
  hipEvent_t done[PIPE_CHUNKS_MAX]; /* the last transfer that used chunk k */
  bool pending[PIPE_CHUNKS_MAX];
  hipEvent_t order; /* the destination stream's end, for peer copies */
  peer_side **peers; /* per source device index, made on first use */
  int npeers;
  cb_copier *cp;      /* the copy threads (base/copier.h) */
  bool stream_reads;  /* reads copy out with streaming stores ($CUBERT_HIP_COPY_STREAM) */
  int stream_writes;  /* writes fill the chunks with them: 0 never, 1 when the write fits in one pass, 2 always */
};

/* A size or count from the environment (`text`, may be NULL), else
 * `fallback`. What it reads was checked when the backend opened
 * (cb_hip_pipe_check_env): a value there is in its range. */
static uint64_t env_size(const char *text, uint64_t fallback) {
  uint64_t v = 0;
  return text && cb_parse_size(text, &v) && v ? v : fallback;
}

#define PIPE_CHUNK_MAX ((uint64_t)1 << 30)
#define PIPE_THREADS_MAX 256
#define PIPE_SPIN_US_MAX 100000

/* The pipeline's variables (README.md, "Environment"), each refused, with
 * its range and the value given, when set to what it does not take: a
 * number (a size: K, M, G or T) in its range, or one of its words. Read
 * when the backend opens, so a typo fails the runtime's creation instead of
 * quietly giving the default at a device's first large transfer. */
cubert_status cb_hip_pipe_check_env(cubert_berr *err) {
  static const struct {
    const char *name, *what;
    uint64_t lo, hi;
  } nums[] = {
      {"CUBERT_HIP_PIPE_FROM", "a size of at least 1 byte (K, M, G or T)", 1, UINT64_MAX},
      {"CUBERT_HIP_STAGING_CHUNK", "a size from 1 byte to 1G", 1, PIPE_CHUNK_MAX},
      {"CUBERT_HIP_STAGING_CHUNKS", "a number of chunks from 2 to 16", 2, PIPE_CHUNKS_MAX},
      {"CUBERT_HIP_COPY_THREADS", "a number of threads from 1 to 256", 1, PIPE_THREADS_MAX},
      {"CUBERT_HIP_COPY_SPIN_US", "microseconds from 0 to 100000", 0, PIPE_SPIN_US_MAX},
  };
  for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
    const char *v = cb_env(nums[i].name);
    uint64_t n = 0;
    if (v && (!cb_parse_size(v, &n) || n < nums[i].lo || n > nums[i].hi))
      return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "%s wants %s, not '%s'", nums[i].name, nums[i].what,
                             v);
  }
  const char *v = cb_env("CUBERT_HIP_COPY_STREAM");
  if (v && strcmp(v, "0") && strcmp(v, "reads") && strcmp(v, "all"))
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT,
                           "CUBERT_HIP_COPY_STREAM wants 0, reads or all (unset: the default), not '%s'", v);
  v = cb_env("CUBERT_HIP_PIPE_TRACE");
  if (v && strcmp(v, "0") && strcmp(v, "1"))
    return cubert_berr_set(err, CUBERT_ERR_INVALID_ARGUMENT, "CUBERT_HIP_PIPE_TRACE wants 1 (on) or 0, not '%s'",
                           v);
  return CUBERT_OK;
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The copy threads of a device's pipeline (base/copier.h), placed near it. */
static void place_worker(void *ctx, int index) {
  cb_hip_backend *b = ctx;
  if (b->place_thread) b->place_thread(b->place_ctx, index);
}

static cb_copier *copier_for(cb_hip_device *dev, int threads) {
  /* $CUBERT_HIP_COPY_SPIN_US: how long a copy thread spins before it
   * sleeps (default 100 us; 0: sleep at once). The chunks of one transfer
   * follow each other within microseconds, while a thread put to sleep may
   * take tens of microseconds to run again, so threads spin briefly before
   * they sleep, as OpenMP runtimes do before blocking. */
  const char *spin = cb_env("CUBERT_HIP_COPY_SPIN_US");
  uint64_t us = 100;
  if (spin && !cb_parse_size(spin, &us)) us = 100;
  if (us > PIPE_SPIN_US_MAX) us = PIPE_SPIN_US_MAX; /* at most 0.1 s */
  return cb_copier_new(threads, us * 1000u, place_worker, dev->backend, dev->index);
}

/* ------------------------------------------------------------ the trace */

/* $CUBERT_HIP_PIPE_TRACE=1: one line on stderr per pipelined transfer,
 * where its time went on the host (a developer's diagnostic, as HIP's own
 * AMD_LOG_LEVEL; docs/bench.md "Where a pipelined write's time goes"): the
 * whole call, the first piece's host copy and how many copy threads joined
 * it, the copies, the waits for chunks and the enqueues. */
typedef struct pipe_trace {
  bool on;
  uint64_t t0, first_copy, copies, waits, enq;
  int first_joined, pieces;
  long joined_sum;
} pipe_trace;

static bool trace_wanted(void) {
  static atomic_int want = -1;
  int w = atomic_load_explicit(&want, memory_order_relaxed);
  if (w < 0) {
    const char *e = cb_env("CUBERT_HIP_PIPE_TRACE");
    w = e && strcmp(e, "1") == 0;
    atomic_store_explicit(&want, w, memory_order_relaxed);
  }
  return w == 1;
}

static void trace_piece(pipe_trace *t, uint64_t copy_ns, int joined) {
  if (!t->on) return;
  if (t->pieces == 0) {
    t->first_copy = copy_ns;
    t->first_joined = joined;
  }
  t->copies += copy_ns;
  t->joined_sum += joined;
  t->pieces++;
}

static void trace_print(const pipe_trace *t, const char *what, uint64_t size, size_t piece, int threads) {
  if (!t->on) return;
  double total = (double)(now_ns() - t->t0) / 1e3;
  fprintf(stderr,
          "cubert pipe: %s %" PRIu64 " B in %d pieces of %zu B, %d threads: %.1f us in all; first piece's copy "
          "%.1f us (%d threads joined the caller); copies %.1f us (%.1f joined on average); chunk waits %.1f us; "
          "enqueues %.1f us\n",
          what, size, t->pieces, piece, threads, total, (double)t->first_copy / 1e3, t->first_joined,
          (double)t->copies / 1e3, t->pieces ? (double)t->joined_sum / t->pieces : 0.0, (double)t->waits / 1e3,
          (double)t->enq / 1e3);
}

/* ------------------------------------------------------------ the pipeline */

uint64_t cb_hip_pipe_from(bool write) {
  static _Atomic uint64_t from_read, from_write; /* 0: not read yet */
  uint64_t r = atomic_load_explicit(&from_read, memory_order_acquire);
  if (!r) {
    /* $CUBERT_HIP_PIPE_FROM sets both; by default reads from 1 MiB and
     * writes from 16 MiB: below that the driver's own staging of a pageable
     * write moved 13-15 GB/s on the H200 and the pipeline no more (1 MiB:
     * 0.43-0.87 of raw, 2-8 MiB 0.52-1.03 in four runs of 2026-12-02;
     * 16 MiB 1.27-1.32 in three of them), where a pipelined read gained
     * from 1 MiB in every run (1.03-1.45; docs/bench.md) */
    const char *env = cb_env("CUBERT_HIP_PIPE_FROM");
    atomic_store_explicit(&from_write, env_size(env, (uint64_t)16 << 20), memory_order_relaxed);
    r = env_size(env, (uint64_t)1 << 20);
    atomic_store_explicit(&from_read, r, memory_order_release); /* after from_write: the flag */
  }
  return write ? atomic_load_explicit(&from_write, memory_order_relaxed) : r;
}

static bool pipe_alloc(cb_hip_device *dev, cb_hip_pipe *p) {
  cb_hip_backend *b = dev->backend;
  void *m = b->place_alloc ? b->place_alloc(b->place_ctx, dev->index, p->bytes) : NULL;
  if (m) {
    if (hipHostRegister(m, p->bytes, hipHostRegisterPortable) == hipSuccess) {
      p->buf = m;
      p->placed = true;
      return true;
    }
    (void)hipGetLastError(); /* not an error of anything enqueued */
    b->place_free(b->place_ctx, m, p->bytes);
  }
  if (hipHostMalloc(&m, p->bytes, hipHostMallocPortable) != hipSuccess) {
    (void)hipGetLastError();
    return false;
  }
  p->buf = m;
  p->placed = false;
  return true;
}

static void pipe_free(cb_hip_device *dev, cb_hip_pipe *p) {
  for (int k = 0; k < p->nchunks; k++)
    if (p->done[k]) {
      (void)hipEventSynchronize(p->done[k]);
      (void)hipEventDestroy(p->done[k]);
    }
  if (p->order) (void)hipEventDestroy(p->order);
  if (p->buf && p->placed) {
    (void)hipHostUnregister(p->buf);
    dev->backend->place_free(dev->backend->place_ctx, p->buf, p->bytes);
  } else if (p->buf) {
    (void)hipHostFree(p->buf);
  }
  cb_copier_free(p->cp);
  cb_free(p->peers);
  cb_free(p);
}

/* The device's pipeline, made on first use; NULL when it cannot be (then
 * never tried again). The device is current; caller holds pipe_lock. */
static cb_hip_pipe *pipe_get(cb_hip_device *dev) {
  if (dev->pipe || dev->pipe_failed) return dev->pipe;
  cb_hip_pipe *p = cb_calloc(1, sizeof *p);
  peer_side **peers = cb_calloc((size_t)dev->backend->device_count + 1, sizeof *peers);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = (int)env_size(cb_env("CUBERT_HIP_COPY_THREADS"), 0);
  /* three quarters of the cores, at most 16 (the caller included): the
   * driver's threads and the application keep the rest */
  if (!threads) threads = cores >= 4 ? (int)(cores - cores / 4 < 16 ? cores - cores / 4 : 16) : 1;
  int nchunks = (int)env_size(cb_env("CUBERT_HIP_STAGING_CHUNKS"), 8);
  if (nchunks < 2) nchunks = 2;
  if (nchunks > PIPE_CHUNKS_MAX) nchunks = PIPE_CHUNKS_MAX;
  size_t chunk = (size_t)env_size(cb_env("CUBERT_HIP_STAGING_CHUNK"), (uint64_t)8 << 20);
  chunk = (chunk + 4095) & ~(size_t)4095;
  if (!p || !peers) goto fail;
  p->peers = peers;
  p->npeers = dev->backend->device_count;
  p->nchunks = nchunks;
  p->chunk = chunk;
  p->bytes = chunk * (size_t)nchunks;
  if (!pipe_alloc(dev, p)) goto fail;
  for (int k = 0; k < nchunks; k++)
    if (hipEventCreateWithFlags(&p->done[k], hipEventDisableTiming) != hipSuccess) goto fail_events;
  if (hipEventCreateWithFlags(&p->order, hipEventDisableTiming) != hipSuccess) goto fail_events;
  /* NULL when out of memory: the caller then copies alone */
  p->cp = copier_for(dev, threads - 1); /* the caller copies too */
  /* A read copies out of the chunks with streaming stores (the caller's
   * lines are written without being read first). A write that fits in one
   * pass over the chunks fills them with streaming stores; a larger one,
   * which comes back to each chunk, with memcpy. Measured on the H200
   * machine, the two ways alternated over three rounds on one machine
   * (07:57Z, docs/bench.md "Where a pipelined write's time goes"): 64 MiB
   * (one pass) 38.1-40.3 GB/s with streaming stores against 28.5-30.6
   * with memcpy; 256 MiB 38.9-42.1 against 42.7-45.2 and 1 GiB 43.4-44.1
   * against 49.8-52.2 (memcpy's copy into chunks written again and again
   * ran at ~60 GB/s, the streaming one at ~44). Streaming stores on the
   * first pass only and memcpy after was slower than both from 256 MiB
   * (33.0-36.6 and 41.5-49.0): the second pass found the chunks out of the
   * cache. $CUBERT_HIP_COPY_STREAM=0: memcpy both ways; =all: streaming
   * stores throughout; =reads: reads only (before 2026-12-03). */
  const char *stream = cb_env("CUBERT_HIP_COPY_STREAM");
  p->stream_reads = !(stream && strcmp(stream, "0") == 0);
  p->stream_writes = 1;
  if (stream && strcmp(stream, "all") == 0) p->stream_writes = 2;
  if (stream && (strcmp(stream, "0") == 0 || strcmp(stream, "reads") == 0)) p->stream_writes = 0;
  dev->pipe = p;
  return p;
fail_events:
  (void)hipGetLastError();
  pipe_free(dev, p);
  dev->pipe_failed = true;
  return NULL;
fail:
  cb_free(peers);
  cb_free(p);
  dev->pipe_failed = true;
  return NULL;
}

void cb_hip_pipe_teardown(cb_hip_device *dev) {
  cb_hip_pipe *p = dev->pipe;
  if (!p) return;
  dev->pipe = NULL;
  (void)cb_hip_enter(dev, NULL);
  for (int i = 0; i < p->npeers; i++) {
    peer_side *ps = p->peers[i];
    if (!ps) continue;
    (void)hipSetDevice(i); /* the source's objects, on its device */
    (void)hipStreamSynchronize(ps->stream);
    for (int k = 0; k < p->nchunks; k++) (void)hipEventDestroy(ps->filled[k]);
    (void)hipStreamDestroy(ps->stream);
    cb_free(ps);
  }
  (void)hipGetLastError();
  (void)cb_hip_enter(dev, NULL);
  pipe_free(dev, p);
}

/* The bytes a transfer of `size` moves per chunk: finer than a chunk for
 * smaller transfers, so that two or more are in flight. */
static size_t piece_for(const cb_hip_pipe *p, uint64_t size) {
  uint64_t piece = (size + (uint64_t)p->nchunks - 1) / (uint64_t)p->nchunks;
  if (piece < PIPE_PIECE_MIN) piece = PIPE_PIECE_MIN;
  piece = (piece + 4095) & ~(uint64_t)4095;
  return piece < p->chunk ? (size_t)piece : p->chunk;
}

/* Takes the pipeline for one transfer: NULL when busy or unavailable. */
static cb_hip_pipe *pipe_take(cb_hip_device *dev) {
  if (pthread_mutex_trylock(&dev->pipe_lock) != 0) return NULL;
  cb_hip_pipe *p = pipe_get(dev);
  if (!p) pthread_mutex_unlock(&dev->pipe_lock);
  return p;
}

static hipError_t chunk_wait(cb_hip_pipe *p, int k) {
  if (!p->pending[k]) return hipSuccess;
  p->pending[k] = false;
  return hipEventSynchronize(p->done[k]);
}

bool cb_hip_pipe_write(cb_hip_device *dev, cb_hip_stream *s, uint64_t dst, const void *src, uint64_t size,
                       hipError_t *err, const char **where) {
  pipe_trace tr = {.on = trace_wanted()};
  if (tr.on) tr.t0 = now_ns();
  cb_hip_pipe *p = pipe_take(dev);
  if (!p) return false;
  size_t piece = piece_for(p, size);
  hipError_t e = hipSuccess;
  uint64_t off = 0;
  bool one_pass = size <= (uint64_t)p->nchunks * piece; /* no chunk is written twice */
  for (int k = 0; off < size && e == hipSuccess; k = (k + 1) % p->nchunks) {
    size_t n = size - off < piece ? (size_t)(size - off) : piece;
    char *c = p->buf + (size_t)k * p->chunk;
    uint64_t t1 = tr.on ? now_ns() : 0;
    if ((e = chunk_wait(p, k)) != hipSuccess) {
      *where = "waiting for a staging chunk";
      break;
    }
    uint64_t t2 = tr.on ? now_ns() : 0;
    bool stream = p->stream_writes == 2 || (p->stream_writes == 1 && one_pass);
    cb_copier_copy(p->cp, c, (const char *)src + off, n, stream);
    uint64_t t3 = tr.on ? now_ns() : 0;
    if ((e = hipMemcpyAsync(CB_HIP_PTR(dst + off), c, n, hipMemcpyHostToDevice, s->stream)) != hipSuccess) {
      *where = "hipMemcpyAsync from a staging chunk";
      break;
    }
    if ((e = hipEventRecord(p->done[k], s->stream)) != hipSuccess) {
      *where = "hipEventRecord after a staging chunk";
      break;
    }
    if (tr.on) {
      tr.waits += t2 - t1;
      tr.enq += now_ns() - t3;
      trace_piece(&tr, t3 - t2, cb_copier_joined(p->cp));
    }
    p->pending[k] = true;
    off += n;
  }
  if (e != hipSuccess) (void)hipStreamSynchronize(s->stream); /* a copy may still read a chunk */
  trace_print(&tr, "write", size, piece, cb_copier_threads(p->cp) + 1);
  pthread_mutex_unlock(&dev->pipe_lock);
  *err = e;
  return true;
}

bool cb_hip_pipe_read(cb_hip_device *dev, cb_hip_stream *s, void *dst, uint64_t src, uint64_t size,
                      hipError_t *err, const char **where) {
  pipe_trace tr = {.on = trace_wanted()};
  if (tr.on) tr.t0 = now_ns();
  cb_hip_pipe *p = pipe_take(dev);
  if (!p) return false;
  size_t piece = piece_for(p, size);
  hipError_t e = hipSuccess;
  uint64_t queued = 0, landed = 0;
  int qk = 0, lk = 0;
  while (landed < size && e == hipSuccess) {
    /* keep every chunk busy: queue downloads into the free ones */
    while (queued < size && queued - landed < (uint64_t)p->nchunks * piece) {
      size_t n = size - queued < piece ? (size_t)(size - queued) : piece;
      if ((e = chunk_wait(p, qk)) != hipSuccess) {
        *where = "waiting for a staging chunk";
        break;
      }
      char *c = p->buf + (size_t)qk * p->chunk;
      if ((e = hipMemcpyAsync(c, CB_HIP_PTR(src + queued), n, hipMemcpyDeviceToHost, s->stream)) !=
          hipSuccess) {
        *where = "hipMemcpyAsync into a staging chunk";
        break;
      }
      if ((e = hipEventRecord(p->done[qk], s->stream)) != hipSuccess) {
        *where = "hipEventRecord after a staging chunk";
        break;
      }
      p->pending[qk] = true;
      queued += n;
      qk = (qk + 1) % p->nchunks;
    }
    if (e != hipSuccess) break;
    size_t n = size - landed < piece ? (size_t)(size - landed) : piece;
    uint64_t t1 = tr.on ? now_ns() : 0;
    if ((e = chunk_wait(p, lk)) != hipSuccess) {
      *where = "waiting for a download into a staging chunk";
      break;
    }
    uint64_t t2 = tr.on ? now_ns() : 0;
    cb_copier_copy(p->cp, (char *)dst + landed, p->buf + (size_t)lk * p->chunk, n, p->stream_reads);
    if (tr.on) {
      tr.waits += t2 - t1;
      trace_piece(&tr, now_ns() - t2, cb_copier_joined(p->cp));
    }
    landed += n;
    lk = (lk + 1) % p->nchunks;
  }
  if (e != hipSuccess) (void)hipStreamSynchronize(s->stream);
  for (int k = 0; k < p->nchunks; k++) (void)chunk_wait(p, k);
  trace_print(&tr, "read", size, piece, cb_copier_threads(p->cp) + 1);
  pthread_mutex_unlock(&dev->pipe_lock);
  *err = e;
  return true;
}

/* The source device's half of staged peer copies into `dev`. */
static peer_side *peer_get(cb_hip_pipe *p, cb_hip_device *from) {
  if (from->index < 0 || from->index >= p->npeers) return NULL;
  if (p->peers[from->index]) return p->peers[from->index];
  peer_side *ps = cb_calloc(1, sizeof *ps);
  if (!ps) return NULL;
  if (hipStreamCreateWithFlags(&ps->stream, hipStreamNonBlocking) != hipSuccess) {
    (void)hipGetLastError();
    cb_free(ps);
    return NULL;
  }
  for (int k = 0; k < p->nchunks; k++)
    if (hipEventCreateWithFlags(&ps->filled[k], hipEventDisableTiming) != hipSuccess) {
      (void)hipGetLastError();
      while (k--) (void)hipEventDestroy(ps->filled[k]);
      (void)hipStreamDestroy(ps->stream);
      cb_free(ps);
      return NULL;
    }
  p->peers[from->index] = ps;
  return ps;
}

bool cb_hip_pipe_peer(cb_hip_device *dev, cb_hip_stream *s, uint64_t dst, cb_hip_device *from, uint64_t src,
                      uint64_t size, hipError_t *err, const char **where) {
  cb_hip_pipe *p = pipe_take(dev);
  if (!p) return false;
  hipError_t e = hipSuccess;
  peer_side *ps = NULL;
  if (cb_hip_enter(from, NULL) != CUBERT_OK || !(ps = peer_get(p, from))) {
    (void)cb_hip_enter(dev, NULL);
    pthread_mutex_unlock(&dev->pipe_lock);
    return false; /* the driver's own path */
  }
  (void)cb_hip_enter(dev, NULL);
  size_t piece = piece_for(p, size);
  /* after the destination stream's earlier work */
  *where = "ordering a staged peer copy";
  if ((e = hipEventRecord(p->order, s->stream)) == hipSuccess && cb_hip_enter(from, NULL) == CUBERT_OK)
    e = hipStreamWaitEvent(ps->stream, p->order, 0);
  uint64_t off = 0;
  for (int k = 0; off < size && e == hipSuccess; k = (k + 1) % p->nchunks) {
    size_t n = size - off < piece ? (size_t)(size - off) : piece;
    char *c = p->buf + (size_t)k * p->chunk;
    (void)cb_hip_enter(from, NULL);
    *where = "staging a peer copy from the source";
    if (p->pending[k] && (e = hipStreamWaitEvent(ps->stream, p->done[k], 0)) != hipSuccess) break;
    if ((e = hipMemcpyAsync(c, CB_HIP_PTR(src + off), n, hipMemcpyDeviceToHost, ps->stream)) != hipSuccess ||
        (e = hipEventRecord(ps->filled[k], ps->stream)) != hipSuccess)
      break;
    (void)cb_hip_enter(dev, NULL);
    *where = "staging a peer copy to the destination";
    if ((e = hipStreamWaitEvent(s->stream, ps->filled[k], 0)) != hipSuccess ||
        (e = hipMemcpyAsync(CB_HIP_PTR(dst + off), c, n, hipMemcpyHostToDevice, s->stream)) != hipSuccess ||
        (e = hipEventRecord(p->done[k], s->stream)) != hipSuccess)
      break;
    p->pending[k] = true;
    off += n;
  }
  if (e != hipSuccess) {
    (void)cb_hip_enter(from, NULL);
    (void)hipStreamSynchronize(ps->stream);
    (void)cb_hip_enter(dev, NULL);
    (void)hipStreamSynchronize(s->stream);
  }
  (void)cb_hip_enter(dev, NULL);
  pthread_mutex_unlock(&dev->pipe_lock);
  *err = e;
  return true;
}
