/* tests/xproc_child.c: the other process of tests/test_processes.c. A
 * fresh process with its own runtime (spawned, never only forked), so that
 * HIP's IPC sees two processes.
 *
 *   xproc_child BACKEND read HEX BYTE    import; every byte BYTE: "ok", 0;
 *                                        refused: "refused NAME: message", 3
 *   xproc_child BACKEND write HEX BYTE   import, fill with BYTE, 0
 *   xproc_child BACKEND taint HEX        import, taint with a failure of its own
 *   xproc_child BACKEND taint-unsettled HEX HOLD  the same while this process's
 *                                        cell lock fails (runtime/xcell_testing.h):
 *                                        "unsettled"; HOLD 1: wait to be killed,
 *                                        0: release (the taint goes in then)
 *   xproc_child BACKEND hold HEX         import, "ready", wait to be killed
 *   xproc_child BACKEND export SIZE BYTE allocate shareable, fill, export the
 *                                        whole: the descriptor's hex, then
 *                                        wait for stdin to close
 *   xproc_child BACKEND import HEX       import: "imported", 0, or the refusal, 3
 *   xproc_child BACKEND die-locked HEX   import, take the memory's failure cell's
 *                                        lock, "locked", and SIGKILL itself
 *   xproc_child BACKEND import-nobody HEX  the same as user 65534 (needs root)
 *   xproc_child BACKEND import-elsewhere HEX  the same with another host name
 *                                        (a UTS namespace of its own; needs root)
 * Anything unexpected: a message on stderr, exit 2; another user or host
 * it cannot play: exit 4. HEX is a
 * cubert_export_desc, two digits a byte. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cubert/cubert.h"
#include "runtime/internal.h"
#include "runtime/xcell.h"
#include "runtime/xcell_testing.h"
#include "tests/testutil.h"

static int die(const char *what) {
  fprintf(stderr, "xproc_child: %s: %s\n", what, cubert_last_error_message());
  return 2;
}

static int refused(cubert_status st) {
  printf("refused %s: %s\n", cubert_status_name(st), cubert_last_error_message());
  return 3;
}

static int unhex(const char *hex, cubert_export_desc *d) {
  if (strlen(hex) != 2 * sizeof d->bytes) return -1;
  for (size_t i = 0; i < sizeof d->bytes; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return -1;
    d->bytes[i] = (unsigned char)v;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: xproc_child BACKEND OP ARG [BYTE]\n");
    return 2;
  }
  const char *op = argv[2];
  cubert_runtime_options o;
  cb_test_options(argv[1], &o);
  cubert_runtime *rt = NULL;
  cubert_client *c = NULL;
  if (cubert_runtime_create(&o, &rt) || cubert_client_create(rt, 0, &c)) return die("runtime");
  int rc = 0;
  cubert_handle *h = NULL;
  cubert_status st;
  if (!strcmp(op, "export")) {
    uint64_t size = strtoull(argv[3], NULL, 10);
    unsigned char byte = (unsigned char)atoi(argv[4]);
    cubert_export_desc d;
    if (cubert_handle_empty_with(c, size, CUBERT_MEMORY_SHAREABLE, &h) ||
        cubert_handle_fill(c, h, &byte, 1) || cubert_sync(c) || cubert_handle_export(c, h, &d))
      return die("export");
    for (size_t i = 0; i < sizeof d.bytes; i++) printf("%02x", d.bytes[i]);
    printf("\n");
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {
    }
  } else {
    cubert_export_desc d;
    if (unhex(argv[3], &d)) {
      fprintf(stderr, "xproc_child: bad hex\n");
      return 2;
    }
    bool imports = !strncmp(op, "import", 6);
    /* cannot play another user or host here (no privilege, a container): 4 */
    if ((!strcmp(op, "import-nobody") && setuid(65534) != 0) ||
        (!strcmp(op, "import-elsewhere") &&
         (unshare(CLONE_NEWUTS) != 0 || sethostname("elsewhere", strlen("elsewhere")) != 0))) {
      printf("cannot: %s\n", strerror(errno));
      return 4;
    }
    if ((st = cubert_handle_import(c, &d, &h))) {
      rc = refused(st);
      if (!imports) rc = 2;
    } else if (imports) {
      printf("imported\n");
    } else if (!strcmp(op, "read")) {
      uint64_t n = cubert_handle_size_in_use(h);
      unsigned char *buf = malloc(n);
      if ((st = cubert_handle_read(c, h, buf, n))) {
        rc = refused(st);
      } else {
        for (uint64_t i = 0; i < n && !rc; i++)
          if (buf[i] != (unsigned char)atoi(argv[4])) {
            printf("byte %llu is %u\n", (unsigned long long)i, buf[i]);
            rc = 1;
          }
        if (!rc) printf("ok\n");
      }
      free(buf);
    } else if (!strcmp(op, "write")) {
      unsigned char byte = (unsigned char)atoi(argv[4]);
      if (cubert_handle_fill(c, h, &byte, 1) || cubert_sync(c)) rc = die("write");
    } else if (!strcmp(op, "taint")) {
      const cubert_failure *f = NULL;
      if (cubert_failure_create(c, CUBERT_ERR_COPY, "the child's transfer failed", &f) ||
          cubert_handle_taint(c, h, f))
        rc = die("taint");
      cubert_failure_release(f);
    } else if (!strcmp(op, "taint-unsettled")) {
      const cubert_failure *f = NULL;
      if (cubert_failure_create(c, CUBERT_ERR_COPY, "the child's transfer failed, locked out of the cell", &f))
        return die("failure");
      cb_xcell_testing_fail_locks(1);
      if (cubert_handle_taint(c, h, f)) return die("taint");
      cubert_failure_release(f);
      if (cb_xcell_testing_fail_locks(0) != 0) {
        fprintf(stderr, "xproc_child: the taint did not lock the cell\n");
        return 2;
      }
      printf("unsettled\n");
      fflush(stdout);
      if (atoi(argv[4]))
        for (;;) pause();
    } else if (!strcmp(op, "die-locked")) {
      if (cb_xcell_lock(cb_xshare_cell(h), NULL)) return die("locking the cell");
      printf("locked\n");
      fflush(stdout);
      raise(SIGKILL);
    } else if (!strcmp(op, "hold")) {
      printf("ready\n");
      fflush(stdout);
      for (;;) pause();
    } else {
      fprintf(stderr, "xproc_child: unknown op %s\n", op);
      rc = 2;
    }
  }
  fflush(stdout);
  cubert_handle_release(h);
  cubert_client_destroy(c);
  cubert_runtime_destroy(rt);
  return rc;
}
