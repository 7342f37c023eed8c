/* cubert/mpi.h: handles that carry their taint between MPI ranks (the
 * optional component libcubert_mpi; CMake cubert::mpi, pkg-config cubert-mpi).
 *
 * A send moves the bytes of a handle's view (a handle or a slice) to a rank,
 * and with them the sender's account of them: every tainted range of the
 * sent view arrives as the same range tainted on the receiver's view, with a
 * failure imported from the sender (cubert_failure_remote() names the
 * sending rank, host, pid, device and its failure id; the root cause and the
 * first links of the chain come along). Bytes the sender could not read, or
 * that arrived damaged (a checksum per chunk), are tainted on the receiver
 * too. Nothing stale is ever readable as good on the receiver.
 *
 * The wire (docs/cluster.md has it byte by byte): one header message on the
 * caller's communicator and tag (view size, number of tainted ranges, the
 * tag of the payload), then on a communicator of cubert's own (a duplicate
 * made by cubert_mpi_init) the tainted ranges as (offset, size, failure
 * record) triples and the bytes in chunks of CUBERT_MPI_CHUNK (default
 * 4 MiB), staged through pinned host buffers kept per client and pipelined
 * (the next chunk is read from the device while the last one travels; the
 * receiver writes a chunk to the device while the next arrives). A view of at most 16 KiB
 * with no tainted byte goes as one message: the header with its one chunk
 * (the eager form). With GPU-aware MPI (MPIX_Query_cuda_support,
 * MPIX_Query_rocm_support; $CUBERT_MPI_GPU_AWARE=auto|force|off) a view with
 * no tainted byte goes in the direct form (wire version 3): the sender
 * copies it on its device and MPI sends from that copy; the receiver's MPI
 * writes straight into the view, each chunk tainted as pending until it
 * arrived whole (cubert_handle_external_begin/end, cubert.h); the other
 * views are staged as above (docs/cluster.md).
 *
 * Ranks of one node (the same MPI_COMM_TYPE_SHARED group, host name and
 * boot id) skip MPI's host copies: the sender copies the good bytes, device
 * to device, into a staging buffer of shareable memory that the receiver
 * maps (HIP IPC; POSIX shm on the host backend), and MPI carries only the
 * header, the tainted ranges and the receiver's acknowledgement. The taint
 * crosses exactly as on the wire. $CUBERT_MPI_IPC (read by cubert_mpi_init,
 * agreed by both ranks): auto (the default: views of 512 KiB or more), on
 * (every view) or off. A send whose scribble fault fires, a view of at most
 * 16 KiB with no tainted byte (the eager form), under auto a view of less
 * than 512 KiB, a send to itself, and a send that finds its peer's 64
 * staging buffers all still in use go through MPI; with the direct form
 * on, a view it takes (no tainted byte) goes in it, which is tried first. A send through shared memory
 * holds the staging buffer, memory of the client's runtime, until the
 * receiver has taken the bytes: the client's teardown hook (below) waits
 * for it.
 *
 * Both sides always complete the exchange: a sender whose bytes are tainted,
 * whose device is lost or whose read fails still sends the header, every
 * chunk and the failures, so the receiver never waits for a message that
 * will not come; a receiver with a view it cannot use (another client's, a
 * size that does not match) still takes every message of the exchange and
 * changes nothing; one whose transfer breaks part way (an MPI error, a
 * chunk of the wrong size) takes the rest of it too, its view tainted from
 * the break on. Calls refused before any message could be matched (MPI
 * not initialised, the communicator never given to cubert_mpi_init, a rank
 * outside the communicator, a negative tag, NULL arguments) send and receive
 * nothing.
 *
 * Statuses: CUBERT_OK; for a send, CUBERT_ERR_TAINTED when the exchange
 * completed but some bytes crossed tainted (the message says which ranges
 * and why; the receiver has them tainted); CUBERT_ERR_INVALID_ARGUMENT,
 * CUBERT_ERR_WRONG_DEVICE, CUBERT_ERR_OUT_OF_RANGE (CUBERT_ERR_EXPIRED: a
 * view whose runtime was destroyed) for a caller's mistake;
 * CUBERT_ERR_DEVICE_LOST when the view's device is lost (a sender's bytes
 * then cross tainted with the loss); CUBERT_ERR_BACKEND for an MPI error
 * (give the communicator MPI_ERRORS_RETURN to see them rather than have MPI
 * abort the job); CUBERT_ERR_OUT_OF_MEMORY when host memory ran out (a
 * sender still tells its receiver, which taints its whole view and returns
 * CUBERT_ERR_BACKEND: docs/cluster.md, "A sender that runs out of host
 * memory"; a sender refused a pinned staging buffer for another reason,
 * its device lost, tells it the same way, with that cause). A failed
 * call records the thread's last error (cubert_last_error_message()), as
 * every cubert call does.
 *
 * Clients: the component keeps pinned staging buffers per client and a
 * teardown hook on every client whose sends hold memory of its runtime
 * (staged, direct or through shared memory: all but the eager form's;
 * cubert_client_on_destroy): the client's end (cubert_client_destroy, or
 * cubert_runtime_destroy of a client still alive) first waits for that
 * client's sends still travelling, through MPI's messages or shared memory
 * (the receivers must take them), then releases the buffers; a client and
 * its runtime may so be destroyed before cubert_mpi_finalize.
 *
 * Threading: calls may come from any thread if MPI was initialised with
 * MPI_THREAD_MULTIPLE; otherwise from the thread MPI allows. Ownership: the
 * communicator, client and handles stay the caller's; a request is owned by
 * the caller until cubert_mpi_wait() frees it (every started request needs
 * its wait: there is no other way to free one). A request holds a reference
 * of its own to the view, so the caller may release its handle before the
 * wait; the client must stay alive until then. */
#ifndef CUBERT_MPI_H
#define CUBERT_MPI_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cubert/cubert.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CUBERT_MPI_STATIC_DEFINE) || !defined(__GNUC__)
#define CUBERT_MPI_API
#else
#define CUBERT_MPI_API __attribute__((visibility("default")))
#endif

/* Makes `comm` usable by cubert (collective over `comm`): duplicates it for
 * cubert's payload messages, and gives cubert_set_rank() this process's rank
 * in MPI_COMM_WORLD, so that failures it exports name it. MPI must be
 * initialised (else CUBERT_ERR_INVALID_ARGUMENT, "MPI is not initialised").
 * Reads this rank's environment: the fault rules (below),
 * $CUBERT_MPI_GPU_AWARE (auto, force or off), $CUBERT_MPI_IPC (auto, on or
 * off), $CUBERT_MPI_CHUNK (64 to 1G bytes: 65536, 64k, 1M) and
 * $CUBERT_MPI_PROFILE (set, not 0: a profile on stderr at finalize). A value
 * that does not parse: CUBERT_ERR_PARSE naming the variable; out of host
 * memory (reading the rules too): CUBERT_ERR_OUT_OF_MEMORY. Either fails
 * on every rank of `comm` alike when any rank fails (none is left waiting
 * in a collective call; out of memory wins over a parse error): the other
 * ranks' message names the rank and what it said, and nothing is made.
 * Calling it again for the same communicator does
 * nothing. */
CUBERT_MPI_API cubert_status cubert_mpi_init(MPI_Comm comm);
/* Frees what cubert_mpi_init made for `comm` (collective). Call it before
 * MPI_Comm_free or MPI_Finalize. A communicator never initialised: nothing. */
CUBERT_MPI_API cubert_status cubert_mpi_finalize(MPI_Comm comm);

/* What MPI offers for device memory: true when the MPI library says it can
 * move memory of that kind (MPIX_Query_cuda_support, ..._rocm_support;
 * false when the library has no such query). */
CUBERT_MPI_API bool cubert_mpi_gpu_aware(void);

/* Fault injection at send and receive, for tests and campaigns: replaces
 * this process's MPI rules with `rules` (NULL or "": none); the grammar is
 * docs/cluster.md's ("send rank=1 nth=2 fault=partial:0.5; recv
 * fault=scribble"). cubert_mpi_init() sets them the same way from the send
 * and recv statements of $CUBERT_FAULTS (its other statements are the
 * runtime's, skipped here; "@path" names a rule file) followed by
 * $CUBERT_MPI_FAULTS, when either is set (a rule there that does not parse
 * fails it with CUBERT_ERR_PARSE naming the variable and the rule).
 * A rule text that does not parse: CUBERT_ERR_PARSE; no host memory to
 * copy it (or a rule file) into: CUBERT_ERR_OUT_OF_MEMORY ("out of host
 * memory ..."); either way the rules are unchanged.
 * A fault fails the exchange as a real one would (the sender's call fails
 * and the receiver's bytes it covers are tainted; a scribble damages bytes
 * in flight, which the receiver's checksum finds and taints). */
CUBERT_MPI_API cubert_status cubert_mpi_faults(const char *rules);
/* Faults injected at send and receive in this process so far. */
CUBERT_MPI_API uint64_t cubert_mpi_faults_injected(void);
/* Transfers of this process (sends and receives) that moved through shared
 * memory so far (cubert_mpi_info.shared_memory). */
CUBERT_MPI_API uint64_t cubert_mpi_shared_transfers(void);

/* What one transfer did, on either side. */
typedef struct cubert_mpi_info {
  int peer;                /* the other rank (in the communicator) */
  int tag;                 /* the caller's tag (a receive with MPI_ANY_TAG: the sender's) */
  uint64_t bytes;          /* bytes of the view */
  uint64_t tainted_bytes;  /* of them, bytes that crossed (or arrived) tainted */
  size_t tainted_ranges;   /* how many ranges */
  uint64_t chunks;         /* payload messages (through shared memory, where no
                              message carries the bytes: the CUBERT_MPI_CHUNK
                              pieces of the view, which partial faults count) */
  bool device_direct;      /* moved by GPU-aware MPI, the direct form (false: staged
                              through host memory); on a receive: landed straight in
                              the view */
  bool shared_memory;      /* moved through memory both processes of one node map
                              (CUBERT_MPI_IPC), not through MPI's messages */
} cubert_mpi_info;

/* Sends the bytes of `view` (on `client`'s device) and their taint to rank
 * `dest` of `comm` with `tag`. Returns once the bytes are read from the
 * device and handed to MPI (staged: the view may be written again at once,
 * as after MPI_Bsend); the messages may still travel, and later cubert_mpi
 * calls (and cubert_mpi_finalize, which waits for them) finish them, so
 * that two ranks each sending to the other before receiving never wait for
 * each other. What the receiver makes of the bytes is its call's to say. `info` may be NULL; it is filled whenever the exchange
 * completed (CUBERT_OK or CUBERT_ERR_TAINTED). */
CUBERT_MPI_API cubert_status cubert_mpi_send(cubert_client *client, const cubert_handle *view, int dest,
                                             int tag, MPI_Comm comm, cubert_mpi_info *info);
/* Receives into `view` (exactly its size in use) from rank `source` (or
 * MPI_ANY_SOURCE) with `tag` (or MPI_ANY_TAG). Good bytes are written (a
 * write: it repairs earlier taint); the sender's tainted ranges, and chunks
 * that arrived damaged or that the sender could not read, are tainted with
 * the sender's failures (imported) or the transport's. A transfer that
 * fails part way (an MPI error) taints every byte not yet written with that
 * failure. CUBERT_OK when every byte arrived good; CUBERT_ERR_TAINTED when
 * some arrived tainted (the last error names them). */
CUBERT_MPI_API cubert_status cubert_mpi_recv(cubert_client *client, cubert_handle *view, int source, int tag,
                                             MPI_Comm comm, cubert_mpi_info *info);

typedef struct cubert_mpi_request cubert_mpi_request;

/* Nonblocking forms: the same exchange, started now, finished by
 * cubert_mpi_wait(). isend reads the view's bytes and posts every message
 * before it returns (so that two ranks sending to each other never wait
 * for each other); irecv posts the receive of the header. *request is set
 * only on CUBERT_OK. */
CUBERT_MPI_API cubert_status cubert_mpi_isend(cubert_client *client, const cubert_handle *view, int dest,
                                              int tag, MPI_Comm comm, cubert_mpi_request **request);
CUBERT_MPI_API cubert_status cubert_mpi_irecv(cubert_client *client, cubert_handle *view, int source,
                                              int tag, MPI_Comm comm, cubert_mpi_request **request);
/* Finishes the exchange and frees `request`; returns what the blocking call
 * would have returned. `info` may be NULL. */
CUBERT_MPI_API cubert_status cubert_mpi_wait(cubert_mpi_request *request, cubert_mpi_info *info);

#ifdef __cplusplus
}
#endif
#endif
