/* tests/test_host_backend.c: the host backend through its ops table alone
 * (no runtime): devices, memory and its limit, in-order streams, transfers,
 * peer copies, events, asynchronous failures, progress, peer access and its
 * deny list, and many threads enqueuing at once. */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/host/host_backend.h"
#include "backends/host/host_internal.h"
#include "backends/host/host_testing.h"
#include "base/alloc.h"
#include "cubert/kernels.h"

static const cubert_backend_ops *ops;

/* ------------------------------------------------------------ helpers */

typedef struct fixture {
  void *backend;
  int count;
  void *dev[8];
  cubert_device_info info[8];
} fixture;

static atomic_int gate;
static atomic_int gated_running;

static void open_fixture(fixture *f, int devices, uint64_t memory, const char *deny) {
  memset(f, 0, sizeof *f);
  atomic_store(&gate, 0); /* tests may share a process (CK_FORK=no) */
  atomic_store(&gated_running, 0);
  ops = cubert_backend_host();
  cb_host_options config_host = {.devices = devices, .memory = memory, .peer_deny = deny};
  cubert_backend_config config = {.options = &config_host};
  cubert_berr err = {0};
  ck_assert_int_eq(ops->open(&config, &f->backend, &f->count, &err), CUBERT_OK);
  ck_assert_int_eq(f->count, devices);
  for (int i = 0; i < devices; i++)
    ck_assert_int_eq(ops->device_open(f->backend, i, &f->dev[i], &f->info[i], &err), CUBERT_OK);
}

static void close_fixture(fixture *f) {
  for (int i = 0; i < f->count; i++)
    ops->device_close(f->dev[i]);
  ops->close(f->backend);
}

static uint64_t alloc(void *dev, uint64_t size, cubert_backend_mem *mem) {
  cubert_berr err = {0};
  ck_assert_int_eq(ops->mem_alloc(dev, size, mem, &err), CUBERT_OK);
  return mem->address;
}

static void *stream(void *dev) {
  void *s = NULL;
  cubert_berr err = {0};
  ck_assert_int_eq(ops->stream_create(dev, &s, &err), CUBERT_OK);
  return s;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Host kernels for the tests. */

/* out[0] = value, once the gate opens. */
static cubert_status gated_store(const cubert_host_launch *l, char *msg, size_t cap) {
  atomic_store(&gated_running, 1);
  while (!atomic_load(&gate))
    sleep_ms(1);
  uint32_t v;
  memcpy(&v, l->args[1], 4);
  memcpy(l->args[0], &v, 4);
  return CUBERT_OK;
}

/* out[0] = value, or a failure when `fail` is nonzero. */
static cubert_status maybe_fail(const cubert_host_launch *l, char *msg, size_t cap) {
  uint32_t v, fail;
  memcpy(&v, l->args[1], 4);
  memcpy(&fail, l->args[2], 4);
  if (fail) {
    snprintf(msg, cap, "asked to fail with code %" PRIu32, fail);
    return CUBERT_ERR_LAUNCH;
  }
  memcpy(l->args[0], &v, 4);
  return CUBERT_OK;
}

static const cubert_param store_params[] = {
    {"out", CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, 0},
    {"value", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 4},
    {"fail", CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 4},
};

static void *load(void *dev, const char *name, cubert_host_fn fn, uint32_t nparams) {
  cubert_backend_kernel k = {name, name, NULL, NULL, NULL, 0, fn, store_params, nparams, 0};
  void *m = NULL;
  cubert_berr err = {0};
  ck_assert_int_eq(ops->module_load(dev, &k, &m, &err), CUBERT_OK);
  return m;
}

static cubert_status launch_store(void *dev, void *s, uint64_t work, void *module, uint32_t nargs,
                                  uint64_t out, uint32_t value, uint32_t fail, cubert_berr *err) {
  cubert_launch_config config = {{1, 1, 1}, {1, 1, 1}, 0};
  cubert_backend_arg args[3] = {
      {CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, out, 4, NULL, 0, NULL},
      {CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 0, 0, &value, 4, NULL},
      {CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 0, 0, &fail, 4, NULL},
  };
  return ops->launch(dev, s, work, module, &config, args, nargs, err);
}

static uint32_t read_u32(void *dev, void *s, uint64_t work, uint64_t addr) {
  uint32_t v = 0;
  cubert_berr err = {0};
  ck_assert_int_eq(ops->read(dev, s, work, &v, addr, 4, &err), CUBERT_OK);
  return v;
}

/* ------------------------------------------------------------ devices */

START_TEST(open_reports_devices_and_their_limits) {
  fixture f;
  open_fixture(&f, 3, 1 << 20, NULL);
  for (int i = 0; i < 3; i++) {
    char name[32];
    snprintf(name, sizeof name, "host:%d", i);
    ck_assert_str_eq(f.info[i].name, name);
    ck_assert_str_eq(f.info[i].arch, "host");
    ck_assert_str_eq(f.info[i].pci_bus_id, "");
    ck_assert_uint_eq(f.info[i].total_memory, 1 << 20);
    ck_assert_uint_eq(f.info[i].max_threads_per_block, 1024);
    ck_assert_uint_eq(f.info[i].max_block[0], 1024);
    ck_assert_uint_eq(f.info[i].max_block[1], 1024);
    ck_assert_uint_eq(f.info[i].max_block[2], 64);
    ck_assert_uint_eq(f.info[i].max_grid[0], 2147483647u);
    ck_assert_uint_eq(f.info[i].max_grid[1], 65535);
    ck_assert_uint_eq(f.info[i].max_grid[2], 65535);
    ck_assert_uint_eq(f.info[i].max_shared_memory, 65536);
    ck_assert_uint_eq(f.info[i].warp_size, 32);
    ck_assert_uint_eq(f.info[i].multiprocessors, (uint32_t)sysconf(_SC_NPROCESSORS_ONLN));
  }
  cubert_berr err = {0};
  void *again = NULL;
  cubert_device_info info;
  ck_assert_int_eq(ops->device_open(f.backend, 1, &again, &info, &err), CUBERT_ERR_BUSY);
  ck_assert_int_eq(ops->device_open(f.backend, 3, &again, &info, &err), CUBERT_ERR_NO_DEVICE);
  ck_assert_ptr_null(again);
  ck_assert_str_eq(ops->name, "host");
  ck_assert_uint_eq(ops->abi, CUBERT_BACKEND_ABI);
  /* Every slot filled: the runtime never checks for NULL. */
  const void *slots[] = {
      (const void *)ops->open,            (const void *)ops->close,
      (const void *)ops->device_open,     (const void *)ops->device_close,
      (const void *)ops->mem_alloc,       (const void *)ops->mem_free,
      (const void *)ops->stream_create,   (const void *)ops->stream_destroy,
      (const void *)ops->event_record,    (const void *)ops->stream_wait,
      (const void *)ops->event_destroy,   (const void *)ops->write,
      (const void *)ops->read,            (const void *)ops->fill,
      (const void *)ops->copy,            (const void *)ops->copy_peer,
      (const void *)ops->module_load,     (const void *)ops->module_unload,
      (const void *)ops->launch,          (const void *)ops->sync,
      (const void *)ops->progress,        (const void *)ops->drain_failures,
      (const void *)ops->peer_can_access, (const void *)ops->peer_enable,
      (const void *)ops->link_info,       (const void *)ops->timer_record,
      (const void *)ops->timer_elapsed,   (const void *)ops->timer_destroy,
  };
  for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++)
    ck_assert_msg(slots[i] != NULL, "slot %zu is empty", i);
  cubert_backend_link link;
  ck_assert_int_eq(ops->link_info(f.dev[0], f.dev[1], &link, &err), CUBERT_ERR_UNSUPPORTED);
  close_fixture(&f);
}
END_TEST

START_TEST(open_defaults_zero_devices_and_bus_ids) {
  ops = cubert_backend_host();
  cubert_berr err = {0};
  void *b = NULL;
  int n = -1;
  ck_assert_int_eq(ops->open(NULL, &b, &n, &err), CUBERT_OK);
  ck_assert_int_eq(n, 4);
  ops->close(b);

  cb_host_options zero_host = {.devices = 0, .memory = 1 << 20};
  cubert_backend_config zero = {.options = &zero_host};
  ck_assert_int_eq(ops->open(&zero, &b, &n, &err), CUBERT_OK);
  ck_assert_int_eq(n, 0);
  ops->close(b);

  cb_host_options no_memory_host = {.devices = 2, .memory = 0};
  cubert_backend_config no_memory = {.options = &no_memory_host};
  ck_assert_int_eq(ops->open(&no_memory, &b, &n, &err), CUBERT_ERR_INVALID_ARGUMENT);

  const char *ids[] = {"0000:c1:00.0", "0000:c6:00.0"};
  cb_host_options bus_host = {.devices = 3, .memory = 1 << 20, .pci_bus_ids = ids, .pci_bus_id_count = 2};
  cubert_backend_config bus = {.options = &bus_host};
  ck_assert_int_eq(ops->open(&bus, &b, &n, &err), CUBERT_OK);
  void *d;
  cubert_device_info info;
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(ops->device_open(b, i, &d, &info, &err), CUBERT_OK);
    ck_assert_str_eq(info.pci_bus_id, i < 2 ? ids[i] : "");
    ops->device_close(d);
  }
  ops->close(b);
}
END_TEST

/* ------------------------------------------------------------ memory */

START_TEST(memory_is_aligned_and_limited) {
  fixture f;
  open_fixture(&f, 2, 4096, NULL);
  cubert_berr err = {0};
  cubert_backend_mem a, b, c;
  alloc(f.dev[0], 1000, &a);
  alloc(f.dev[0], 3000, &b);
  ck_assert_uint_eq(a.address % 256, 0);
  ck_assert_uint_eq(b.address % 256, 0);
  ck_assert_uint_eq(a.size, 1000);
  /* 96 bytes left on host:0: more is refused, naming size and device. */
  ck_assert_int_eq(ops->mem_alloc(f.dev[0], 97, &c, &err), CUBERT_ERR_OUT_OF_MEMORY);
  ck_assert_ptr_nonnull(strstr(err.message, "host:0"));
  ck_assert_ptr_nonnull(strstr(err.message, "97 bytes"));
  alloc(f.dev[0], 96, &c);
  /* The budget is per device. */
  cubert_backend_mem other;
  alloc(f.dev[1], 4096, &other);
  ck_assert_int_eq(ops->mem_alloc(f.dev[1], 1, &c, &err), CUBERT_ERR_OUT_OF_MEMORY);
  ck_assert_ptr_nonnull(strstr(err.message, "host:1"));
  /* Freeing gives the budget back. */
  ops->mem_free(f.dev[0], &b);
  alloc(f.dev[0], 3000, &b);
  ck_assert_int_eq(ops->mem_alloc(f.dev[0], 0, &c, &err), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(ops->mem_alloc(f.dev[0], UINT64_MAX, &c, &err), CUBERT_ERR_OUT_OF_MEMORY);
  ops->mem_free(f.dev[0], &a);
  ops->mem_free(f.dev[0], &b);
  /* Memory left allocated is freed by device_close (LSan checks). */
  close_fixture(&f);
}
END_TEST

START_TEST(addresses_are_checked_before_enqueue) {
  fixture f;
  open_fixture(&f, 2, 1 << 20, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m0, m1;
  uint64_t a0 = alloc(f.dev[0], 1024, &m0);
  uint64_t a1 = alloc(f.dev[1], 1024, &m1);
  void *s = stream(f.dev[0]);
  char buf[2048] = {0};
  ck_assert_int_eq(ops->write(f.dev[0], s, 1, a0 + 1000, buf, 25, &err), CUBERT_ERR_OUT_OF_RANGE);
  ck_assert_int_eq(ops->write(f.dev[0], s, 1, a0 + 1000, buf, 24, &err), CUBERT_OK);
  ck_assert_int_eq(ops->write(f.dev[0], s, 2, a1, buf, 16, &err), CUBERT_ERR_WRONG_DEVICE);
  ck_assert_ptr_nonnull(strstr(err.message, "host:1"));
  ck_assert_int_eq(ops->read(f.dev[0], s, 3, buf, 4096, 4, &err), CUBERT_ERR_OUT_OF_RANGE);
  ck_assert_int_eq(ops->copy(f.dev[0], s, 4, a0, a0 + 512, 513, &err), CUBERT_ERR_OUT_OF_RANGE);
  ck_assert_int_eq(ops->fill(f.dev[0], s, 5, a0, "abc", 3, 6, &err), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(ops->fill(f.dev[0], s, 5, a0, "abcd", 4, 6, &err), CUBERT_ERR_INVALID_ARGUMENT);
  void *s1 = stream(f.dev[1]);
  ck_assert_int_eq(ops->write(f.dev[0], s1, 6, a0, buf, 4, &err), CUBERT_ERR_WRONG_DEVICE);
  ck_assert_int_eq(ops->sync(f.dev[0], s, &err), CUBERT_OK);
  ck_assert_uint_eq(ops->progress(f.dev[0], s), 1); /* only the valid write was enqueued */
  close_fixture(&f);
}
END_TEST

/* ------------------------------------------------------------ streams */

START_TEST(stream_runs_write_fill_copy_read_in_order) {
  fixture f;
  open_fixture(&f, 1, 1 << 20, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m;
  uint64_t a = alloc(f.dev[0], 4096, &m);
  void *s = stream(f.dev[0]);
  ck_assert_uint_eq(ops->progress(f.dev[0], s), 0);

  uint8_t src[1024];
  for (int i = 0; i < 1024; i++)
    src[i] = (uint8_t)(i * 7 + 1);
  uint64_t work = 0;
  ck_assert_int_eq(ops->fill(f.dev[0], s, ++work, a, "\x11", 1, 4096, &err), CUBERT_OK);
  ck_assert_int_eq(ops->write(f.dev[0], s, ++work, a, src, 1024, &err), CUBERT_OK);
  memset(src, 0, sizeof src); /* the write staged its own copy */
  uint16_t p2 = 0xBEEF;
  uint32_t p4 = 0xDEADBEEF;
  uint64_t p8 = 0x0123456789ABCDEFull;
  ck_assert_int_eq(ops->fill(f.dev[0], s, ++work, a + 1024, "\x5A", 1, 256, &err), CUBERT_OK);
  ck_assert_int_eq(ops->fill(f.dev[0], s, ++work, a + 1280, &p2, 2, 250, &err), CUBERT_OK);
  ck_assert_int_eq(ops->fill(f.dev[0], s, ++work, a + 1536, &p4, 4, 500, &err), CUBERT_OK);
  ck_assert_int_eq(ops->fill(f.dev[0], s, ++work, a + 2048, &p8, 8, 1000, &err), CUBERT_OK);
  ck_assert_int_eq(ops->copy(f.dev[0], s, ++work, a + 3072, a, 1024, &err), CUBERT_OK);
  /* Overwrite the source after the copy was enqueued: the copy saw the old. */
  ck_assert_int_eq(ops->fill(f.dev[0], s, ++work, a, "\0", 1, 1024, &err), CUBERT_OK);

  uint8_t back[4096];
  ck_assert_int_eq(ops->read(f.dev[0], s, ++work, back, a, 4096, &err), CUBERT_OK);
  ck_assert_uint_eq(ops->progress(f.dev[0], s), work);
  for (int i = 0; i < 1024; i++) {
    ck_assert_uint_eq(back[i], 0);
    ck_assert_uint_eq(back[3072 + i], (uint8_t)(i * 7 + 1));
  }
  for (int i = 0; i < 256; i++)
    ck_assert_uint_eq(back[1024 + i], 0x5A);
  for (int i = 0; i < 125; i++) {
    uint16_t v;
    memcpy(&v, back + 1280 + 2 * i, 2);
    ck_assert_uint_eq(v, p2);
  }
  for (int i = 0; i < 125; i++) {
    uint32_t v;
    memcpy(&v, back + 1536 + 4 * i, 4);
    ck_assert_uint_eq(v, p4);
  }
  for (int i = 0; i < 125; i++) {
    uint64_t v;
    memcpy(&v, back + 2048 + 8 * i, 8);
    ck_assert_uint_eq(v, p8);
  }
  /* Each fill stopped at its size. */
  ck_assert_uint_eq(back[1280 + 250], 0x11);
  ck_assert_uint_eq(back[1536 + 500], 0x11);
  ck_assert_uint_eq(back[2048 + 1000], 0x11);
  close_fixture(&f);
}
END_TEST

START_TEST(copy_peer_moves_bytes_between_devices) {
  fixture f;
  open_fixture(&f, 2, 1 << 20, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m0, m1;
  uint64_t a0 = alloc(f.dev[0], 4096, &m0);
  uint64_t a1 = alloc(f.dev[1], 4096, &m1);
  void *s0 = stream(f.dev[0]), *s1 = stream(f.dev[1]);
  uint32_t src[1024];
  for (int i = 0; i < 1024; i++)
    src[i] = (uint32_t)i * 2654435761u;
  ck_assert_int_eq(ops->write(f.dev[0], s0, 1, a0, src, sizeof src, &err), CUBERT_OK);
  ck_assert_int_eq(ops->sync(f.dev[0], s0, &err), CUBERT_OK);
  ck_assert_int_eq(ops->copy_peer(f.dev[1], s1, 1, a1, f.dev[0], a0, 4096, &err), CUBERT_OK);
  uint32_t back[1024] = {0};
  ck_assert_int_eq(ops->read(f.dev[1], s1, 2, back, a1, sizeof back, &err), CUBERT_OK);
  ck_assert_mem_eq(back, src, sizeof src);
  /* The source must be memory of the source device. */
  ck_assert_int_eq(ops->copy_peer(f.dev[1], s1, 3, a1, f.dev[0], a1, 16, &err),
                   CUBERT_ERR_WRONG_DEVICE);
  close_fixture(&f);
}
END_TEST

typedef struct reader {
  void *dev, *stream;
  uint64_t addr;
  uint32_t value;
  atomic_int done;
} reader;

static void *read_thread(void *arg) {
  reader *r = arg;
  cubert_berr err = {0};
  ck_assert_int_eq(ops->read(r->dev, r->stream, 20, &r->value, r->addr, 4, &err), CUBERT_OK);
  atomic_store(&r->done, 1);
  return NULL;
}

START_TEST(event_makes_one_stream_wait_for_another) {
  fixture f;
  open_fixture(&f, 1, 1 << 20, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m;
  uint64_t a = alloc(f.dev[0], 256, &m);
  void *sa = stream(f.dev[0]), *sb = stream(f.dev[0]);
  void *k = load(f.dev[0], "gated_store", gated_store, 2);
  uint32_t zero = 0;
  ck_assert_int_eq(ops->write(f.dev[0], sa, 1, a, &zero, 4, &err), CUBERT_OK);
  ck_assert_int_eq(ops->sync(f.dev[0], sa, &err), CUBERT_OK);

  /* A's kernel blocks until the gate opens, then stores 42. */
  ck_assert_int_eq(launch_store(f.dev[0], sa, 10, k, 2, a, 42, 0, &err), CUBERT_OK);
  void *ev = NULL;
  ck_assert_int_eq(ops->event_record(f.dev[0], sa, &ev, &err), CUBERT_OK);
  while (!atomic_load(&gated_running))
    sleep_ms(1);

  /* Control: B without the wait reads the old value while A is held. */
  ck_assert_uint_eq(read_u32(f.dev[0], sb, 11, a), 0);

  /* With the wait, B's read cannot finish before A's kernel. */
  ck_assert_int_eq(ops->stream_wait(f.dev[0], sb, ev, &err), CUBERT_OK);
  ops->event_destroy(f.dev[0], ev); /* the enqueued wait keeps what it needs */
  reader r = {f.dev[0], sb, a, 0, 0};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, read_thread, &r), 0);
  sleep_ms(100);
  ck_assert_int_eq(atomic_load(&r.done), 0);
  ck_assert_uint_lt(ops->progress(f.dev[0], sa), 10);
  atomic_store(&gate, 1);
  pthread_join(t, NULL);
  ck_assert_uint_eq(r.value, 42);
  ck_assert_uint_eq(ops->progress(f.dev[0], sa), 10);
  ck_assert_uint_eq(ops->progress(f.dev[0], sb), 20);

  /* An event already reached, and one on the same stream, cost nothing. */
  ck_assert_int_eq(ops->event_record(f.dev[0], sa, &ev, &err), CUBERT_OK);
  ck_assert_int_eq(ops->stream_wait(f.dev[0], sb, ev, &err), CUBERT_OK);
  ck_assert_int_eq(ops->stream_wait(f.dev[0], sa, ev, &err), CUBERT_OK);
  ops->event_destroy(f.dev[0], ev);
  ops->module_unload(f.dev[0], k);
  close_fixture(&f);
}
END_TEST

typedef struct syncer {
  void *dev;
  atomic_int done;
} syncer;

static void *sync_thread(void *arg) {
  syncer *s = arg;
  cubert_berr err = {0};
  ck_assert_int_eq(ops->sync(s->dev, NULL, &err), CUBERT_OK);
  atomic_store(&s->done, 1);
  return NULL;
}

START_TEST(sync_of_the_device_waits_for_every_stream) {
  fixture f;
  open_fixture(&f, 1, 1 << 20, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m;
  uint64_t a = alloc(f.dev[0], 256, &m);
  void *s[3] = {stream(f.dev[0]), stream(f.dev[0]), stream(f.dev[0])};
  void *k = load(f.dev[0], "gated_store", gated_store, 2);
  ck_assert_int_eq(ops->write(f.dev[0], s[0], 1, a + 8, "abcd", 4, &err), CUBERT_OK);
  ck_assert_int_eq(launch_store(f.dev[0], s[1], 2, k, 2, a, 7, 0, &err), CUBERT_OK);
  ck_assert_int_eq(ops->write(f.dev[0], s[2], 3, a + 16, "efgh", 4, &err), CUBERT_OK);
  syncer sy = {f.dev[0], 0};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, sync_thread, &sy), 0);
  sleep_ms(100);
  ck_assert_int_eq(atomic_load(&sy.done), 0);
  atomic_store(&gate, 1);
  pthread_join(t, NULL);
  for (int i = 0; i < 3; i++)
    ck_assert_uint_eq(ops->progress(f.dev[0], s[i]), (uint64_t)i + 1);
  /* address == pointer on the host backend */
  ck_assert_uint_eq(*(uint32_t *)(uintptr_t)a, 7);
  ops->module_unload(f.dev[0], k);
  close_fixture(&f);
}
END_TEST

/* An allocator that refuses every allocation while `starved` is set. */
static atomic_int starved;
static void *starve_malloc(size_t n) { return atomic_load(&starved) ? NULL : malloc(n); }
static void *starve_calloc(size_t c, size_t n) { return atomic_load(&starved) ? NULL : calloc(c, n); }
static void *starve_realloc(void *p, size_t n) { return atomic_load(&starved) ? NULL : realloc(p, n); }
static const cubert_allocator starving = {starve_malloc, starve_calloc, starve_realloc, free};

static void *open_gate_later(void *arg) {
  (void)arg;
  sleep_ms(100);
  atomic_store(&gate, 1);
  return NULL;
}

/* A sync of the whole device with no host memory for its snapshot of the
 * streams still waits for every stream. It used to return
 * CUBERT_ERR_OUT_OF_MEMORY at once, and the runtime's teardown, which
 * waits through it, then freed device memory that queued work wrote
 * afterwards (found by an outside program failing each allocation). */
START_TEST(sync_of_the_device_short_of_host_memory_still_waits) {
  fixture f;
  /* set while no other thread runs (cubert_set_allocator's rule; TSan saw
   * a stream's worker free through it as it changed): it refuses only
   * while `starved` is set */
  cb_allocator_set(&starving);
  open_fixture(&f, 1, 1 << 20, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m;
  uint64_t a = alloc(f.dev[0], 256, &m);
  void *s[2] = {stream(f.dev[0]), stream(f.dev[0])};
  void *k = load(f.dev[0], "gated_store", gated_store, 2);
  ck_assert_int_eq(ops->write(f.dev[0], s[0], 1, a + 8, "abcd", 4, &err), CUBERT_OK);
  ck_assert_int_eq(launch_store(f.dev[0], s[1], 2, k, 2, a, 7, 0, &err), CUBERT_OK);
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, open_gate_later, NULL), 0);
  atomic_store(&starved, 1);
  cubert_status st = ops->sync(f.dev[0], NULL, &err);
  atomic_store(&starved, 0);
  ck_assert_int_eq(st, CUBERT_OK);
  /* the gated kernel had finished when the sync returned */
  ck_assert_uint_eq(*(volatile uint32_t *)(uintptr_t)a, 7);
  ck_assert_uint_eq(ops->progress(f.dev[0], s[1]), 2);
  pthread_join(t, NULL);
  ops->module_unload(f.dev[0], k);
  close_fixture(&f);
  cb_allocator_set(NULL);
}
END_TEST

/* ------------------------------------------------------------ failures */

START_TEST(failing_host_function_is_reported_and_the_stream_goes_on) {
  fixture f;
  open_fixture(&f, 1, 1 << 20, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m;
  uint64_t a = alloc(f.dev[0], 256, &m);
  void *s = stream(f.dev[0]);
  void *k = load(f.dev[0], "maybe_fail", maybe_fail, 3);
  cubert_async_failure out[4];
  ck_assert_uint_eq(ops->drain_failures(f.dev[0], out, 4), 0);

  ck_assert_int_eq(launch_store(f.dev[0], s, 10, k, 3, a, 1, 0, &err), CUBERT_OK);
  ck_assert_int_eq(launch_store(f.dev[0], s, 11, k, 3, a + 4, 2, 77, &err), CUBERT_OK);
  ck_assert_int_eq(launch_store(f.dev[0], s, 12, k, 3, a + 8, 3, 0, &err), CUBERT_OK);
  ck_assert_int_eq(launch_store(f.dev[0], s, 13, k, 3, a + 12, 4, 78, &err), CUBERT_OK);
  ck_assert_int_eq(launch_store(f.dev[0], s, 14, k, 3, a + 16, 5, 79, &err), CUBERT_OK);
  ck_assert_int_eq(ops->sync(f.dev[0], s, &err), CUBERT_OK);
  ck_assert_uint_eq(ops->progress(f.dev[0], s), 14); /* failed work counts as completed */

  /* Work after the failure ran. */
  uint32_t v[5] = {0};
  ck_assert_int_eq(ops->read(f.dev[0], s, 15, v, a, sizeof v, &err), CUBERT_OK);
  ck_assert_uint_eq(v[0], 1);
  ck_assert_uint_eq(v[2], 3);

  /* Drained in order, at most `capacity` at a time; the rest stays. */
  ck_assert_uint_eq(ops->drain_failures(f.dev[0], out, 2), 2);
  ck_assert_uint_eq(out[0].work, 11);
  ck_assert_int_eq(out[0].status, CUBERT_ERR_LAUNCH);
  ck_assert(!out[0].sticky);
  ck_assert_ptr_nonnull(strstr(out[0].message, "maybe_fail"));
  ck_assert_ptr_nonnull(strstr(out[0].message, "code 77"));
  ck_assert_uint_eq(out[1].work, 13);
  ck_assert_uint_eq(ops->drain_failures(f.dev[0], out, 4), 1);
  ck_assert_uint_eq(out[0].work, 14);
  ck_assert_ptr_nonnull(strstr(out[0].message, "code 79"));
  ck_assert_uint_eq(ops->drain_failures(f.dev[0], out, 4), 0);
  ops->module_unload(f.dev[0], k);
  close_fixture(&f);
}
END_TEST

START_TEST(builtin_refusal_becomes_an_async_failure) {
  fixture f;
  open_fixture(&f, 1, 1 << 20, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m;
  uint64_t a = alloc(f.dev[0], 256, &m);
  void *s = stream(f.dev[0]);
  const cubert_kernel_desc *d = cubert_builtin_desc(CUBERT_BUILTIN_FILL_U32);
  cubert_backend_kernel bk = {d->name, d->entry, d->source, NULL, NULL, 0,
                              d->host_fn, d->params, d->nparams, 0};
  void *mod;
  ck_assert_int_eq(ops->module_load(f.dev[0], &bk, &mod, &err), CUBERT_OK);
  uint64_t n = 65; /* 260 bytes into a 256-byte binding */
  uint32_t value = 9;
  cubert_launch_config config = {{2, 1, 1}, {32, 1, 1}, 0};
  cubert_backend_arg args[3] = {
      {CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, a, 256, NULL, 0, NULL},
      {CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 0, 0, &n, 8, NULL},
      {CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 0, 0, &value, 4, NULL},
  };
  ck_assert_int_eq(ops->launch(f.dev[0], s, 5, mod, &config, args, 3, &err), CUBERT_OK);
  n = 64; /* the copy of the scalar was taken at enqueue: this changes nothing queued */
  ck_assert_int_eq(ops->launch(f.dev[0], s, 6, mod, &config, args, 3, &err), CUBERT_OK);
  ck_assert_int_eq(ops->sync(f.dev[0], NULL, &err), CUBERT_OK);
  cubert_async_failure out[2];
  ck_assert_uint_eq(ops->drain_failures(f.dev[0], out, 2), 1);
  ck_assert_uint_eq(out[0].work, 5);
  ck_assert_int_eq(out[0].status, CUBERT_ERR_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(out[0].message, "cubert_fill_u32"));
  ck_assert_uint_eq(((uint32_t *)(uintptr_t)a)[63], 9);
  ops->module_unload(f.dev[0], mod);
  close_fixture(&f);
}
END_TEST

START_TEST(progress_stops_at_unfinished_work) {
  fixture f;
  open_fixture(&f, 1, 1 << 20, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m;
  uint64_t a = alloc(f.dev[0], 256, &m);
  void *s = stream(f.dev[0]);
  void *k = load(f.dev[0], "gated_store", gated_store, 2);
  ck_assert_int_eq(ops->write(f.dev[0], s, 5, a, "xxxx", 4, &err), CUBERT_OK);
  ck_assert_int_eq(launch_store(f.dev[0], s, 6, k, 2, a, 1, 0, &err), CUBERT_OK);
  ck_assert_int_eq(ops->write(f.dev[0], s, 7, a + 4, "yyyy", 4, &err), CUBERT_OK);
  while (!atomic_load(&gated_running))
    sleep_ms(1);
  /* The kernel (6) is held, so 5 is the answer, however long we look. */
  for (int i = 0; i < 20; i++) {
    ck_assert_uint_eq(ops->progress(f.dev[0], s), 5);
    sleep_ms(2);
  }
  atomic_store(&gate, 1);
  ck_assert_int_eq(ops->sync(f.dev[0], s, &err), CUBERT_OK);
  ck_assert_uint_eq(ops->progress(f.dev[0], s), 7);
  ck_assert_uint_eq(ops->progress(f.dev[0], NULL), 0);
  ops->module_unload(f.dev[0], k);
  close_fixture(&f);
}
END_TEST

/* ------------------------------------------------------------ large writes */

enum { MIB = 1 << 20 };

static void fill_pattern(uint8_t *p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)(i * 31 + seed);
}

START_TEST(large_write_to_an_idle_stream_lands_before_it_returns_without_staging) {
  fixture f;
  open_fixture(&f, 1, 8 * MIB, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m;
  uint64_t a = alloc(f.dev[0], 4 * MIB, &m);
  void *s = stream(f.dev[0]);
  uint8_t *src = malloc(4 * MIB);
  ck_assert_ptr_nonnull(src);
  fill_pattern(src, 4 * MIB, 3);
  uint64_t allocs = cb_host_testing_staging_allocs();
  ck_assert_int_eq(ops->write(f.dev[0], s, 1, a, src, 4 * MIB, &err), CUBERT_OK);
  /* No sync: the worker copied from src before the call returned. */
  ck_assert_uint_eq(ops->progress(f.dev[0], s), 1);
  ck_assert_mem_eq((void *)(uintptr_t)a, src, 4 * MIB);
  ck_assert_uint_eq(cb_host_testing_staging_allocs(), allocs);
  /* Just below the size: staged, as small writes are. */
  ck_assert_int_eq(ops->write(f.dev[0], s, 2, a, src + 1, HOST_WRITE_LARGE - 1, &err), CUBERT_OK);
  memset(src, 0, HOST_WRITE_LARGE);
  ck_assert_int_eq(ops->sync(f.dev[0], s, &err), CUBERT_OK);
  fill_pattern(src, HOST_WRITE_LARGE, 3);
  ck_assert_mem_eq((void *)(uintptr_t)a, src + 1, HOST_WRITE_LARGE - 1);
  ck_assert_uint_eq(cb_host_testing_staging_allocs(), allocs);
  free(src);
  close_fixture(&f);
}
END_TEST

/* Holds the stream with gated_store, queues `n` writes, the i-th of
 * sizes[i] bytes right after the one before it from `a` on, of pattern
 * seed 40 + i from one buffer scribbled after every call, then lets the
 * stream go and checks every write landed. */
static void writes_of_sizes_behind_a_held_kernel(void *dev, void *s, void *gated, uint64_t a, uint64_t flag,
                                                 int n, const size_t *sizes, uint64_t *work) {
  cubert_berr err = {0};
  size_t most = 0;
  for (int i = 0; i < n; i++)
    most = sizes[i] > most ? sizes[i] : most;
  uint8_t *src = malloc(most), *want = malloc(most);
  ck_assert(src && want);
  atomic_store(&gate, 0);
  atomic_store(&gated_running, 0);
  ck_assert_int_eq(launch_store(dev, s, ++*work, gated, 2, flag, 7, 0, &err), CUBERT_OK);
  while (!atomic_load(&gated_running))
    sleep_ms(1);
  uint64_t at = a;
  for (int i = 0; i < n; i++) {
    fill_pattern(src, sizes[i], (uint8_t)(40 + i));
    ck_assert_int_eq(ops->write(dev, s, ++*work, at, src, sizes[i], &err), CUBERT_OK);
    memset(src, 0xEE, sizes[i]); /* the write staged its own copy */
    at += sizes[i];
  }
  ck_assert_uint_lt(ops->progress(dev, s), *work - (uint64_t)n + 1); /* all still queued */
  atomic_store(&gate, 1);
  ck_assert_int_eq(ops->sync(dev, s, &err), CUBERT_OK);
  ck_assert_uint_eq(ops->progress(dev, s), *work);
  at = a;
  for (int i = 0; i < n; i++) {
    fill_pattern(want, sizes[i], (uint8_t)(40 + i));
    ck_assert_mem_eq((void *)(uintptr_t)at, want, sizes[i]);
    at += sizes[i];
  }
  free(src);
  free(want);
}

/* The same, `n` writes of `size` bytes (n <= 8). */
static void writes_behind_a_held_kernel(void *dev, void *s, void *gated, uint64_t a, uint64_t flag,
                                        int n, size_t size, uint64_t *work) {
  size_t sizes[8];
  ck_assert_int_le(n, 8);
  for (int i = 0; i < n; i++)
    sizes[i] = size;
  writes_of_sizes_behind_a_held_kernel(dev, s, gated, a, flag, n, sizes, work);
}

/* One device of `memory` bytes, `size` bytes at `a` to write to, a flag
 * for gated_store and a stream to hold with it. */
typedef struct held {
  fixture f;
  cubert_backend_mem m, mf;
  uint64_t a, flag;
  void *s, *gated;
} held;

static void open_held(held *h, uint64_t memory, uint64_t size) {
  open_fixture(&h->f, 1, memory, NULL);
  h->a = alloc(h->f.dev[0], size, &h->m);
  h->flag = alloc(h->f.dev[0], 256, &h->mf);
  h->s = stream(h->f.dev[0]);
  h->gated = load(h->f.dev[0], "gated_store", gated_store, 2);
}

static void close_held(held *h) {
  ops->module_unload(h->f.dev[0], h->gated);
  close_fixture(&h->f);
}

START_TEST(large_writes_behind_work_reuse_kept_staging_blocks_up_to_a_bound) {
  held h;
  open_held(&h, 64 * MIB, 8 * MIB);
  uint64_t work = 0;
  uint64_t allocs = cb_host_testing_staging_allocs(), kept = cb_host_testing_staging_kept();

  /* Two writes queued at once need two blocks; both are kept after. */
  writes_behind_a_held_kernel(h.f.dev[0], h.s, h.gated, h.a, h.flag, 2, MIB, &work);
  ck_assert_uint_eq(cb_host_testing_staging_allocs() - allocs, 2);
  ck_assert_uint_eq(cb_host_testing_staging_kept() - kept, 2 * MIB);
  /* Two more, and two smaller ones: the kept blocks serve them all. */
  writes_behind_a_held_kernel(h.f.dev[0], h.s, h.gated, h.a, h.flag, 2, MIB, &work);
  writes_behind_a_held_kernel(h.f.dev[0], h.s, h.gated, h.a, h.flag, 2, MIB / 2, &work);
  ck_assert_uint_eq(cb_host_testing_staging_allocs() - allocs, 2);
  /* Six at once: four blocks are kept at most. */
  writes_behind_a_held_kernel(h.f.dev[0], h.s, h.gated, h.a, h.flag, 6, MIB, &work);
  ck_assert_uint_eq(cb_host_testing_staging_allocs() - allocs, 6);
  ck_assert_uint_eq(cb_host_testing_staging_kept() - kept, HOST_STAGING_KEEP * (uint64_t)MIB);
  /* A larger write than any kept block drops the largest kept one. */
  writes_behind_a_held_kernel(h.f.dev[0], h.s, h.gated, h.a, h.flag, 1, 4 * MIB, &work);
  ck_assert_uint_eq(cb_host_testing_staging_allocs() - allocs, 7);
  ck_assert_uint_eq(cb_host_testing_staging_kept() - kept, 3 * MIB + 4 * MIB);

  /* device_close gives every kept block back (ASan checks none leaks). */
  close_held(&h);
  ck_assert_uint_eq(cb_host_testing_staging_kept(), kept);
}
END_TEST

START_TEST(a_staging_block_that_ran_is_kept_in_place_of_the_smallest) {
  held h;
  open_held(&h, 8 * MIB, 4 * MIB);
  uint64_t work = 0, kept = cb_host_testing_staging_kept();
  /* Four blocks of 512 KiB fill the kept places as they run; the 2 MiB
   * block that runs last takes the place of one of them. */
  size_t sizes[5] = {MIB / 2, MIB / 2, MIB / 2, MIB / 2, 2 * MIB};
  writes_of_sizes_behind_a_held_kernel(h.f.dev[0], h.s, h.gated, h.a, h.flag, 5, sizes, &work);
  ck_assert_uint_eq(cb_host_testing_staging_kept() - kept, 3 * (MIB / 2) + 2 * MIB);
  close_held(&h);
  ck_assert_uint_eq(cb_host_testing_staging_kept(), kept);
}
END_TEST

/* ------------------------------------------------------------ strided writes */

/* 16 x 8 runs of 1 KiB (128 KiB, from HOST_WRITE_LARGE) from a strided host
 * source (gaps between its runs, so the staged path must pack) into gaps of
 * device memory; `nruns` of them (a prefix, as a partial transfer moves). */
enum { SW_ROWS = 16, SW_COLS = 8, SW_RUN = 1024, SW_SRC_SPAN = SW_ROWS * 9000, SW_DST_SPAN = SW_ROWS * 13000 };

static cubert_backend_strided strided_write_layout(uint64_t nruns) {
  cubert_backend_strided l = {SW_RUN, 2, {SW_ROWS, SW_COLS}, {9000, 1100}, {13000, 1536}, nruns};
  return l;
}

/* What device memory at `a` (SW_DST_SPAN bytes, all 0xAA before) must hold
 * after the first `nruns` runs of `l` from `src`: written by its own loops,
 * not the backend's walk. */
static void strided_write_expect(uint8_t *want, const uint8_t *src, const cubert_backend_strided *l) {
  memset(want, 0xAA, SW_DST_SPAN);
  uint64_t k = 0;
  for (uint64_t r = 0; r < l->count[0]; r++)
    for (uint64_t c = 0; c < l->count[1] && k < l->nruns; c++, k++)
      memcpy(want + r * l->dst_pitch[0] + c * l->dst_pitch[1], src + r * l->src_pitch[0] + c * l->src_pitch[1],
             (size_t)l->run);
}

START_TEST(large_strided_write_to_an_idle_stream_lands_before_it_returns_without_staging) {
  fixture f;
  open_fixture(&f, 1, 8 * MIB, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m;
  uint64_t a = alloc(f.dev[0], SW_DST_SPAN, &m);
  void *s = stream(f.dev[0]);
  uint8_t *src = malloc(SW_SRC_SPAN), *want = malloc(SW_DST_SPAN);
  ck_assert(src && want);
  uint64_t allocs = cb_host_testing_staging_allocs(), work = 0;
  /* The whole layout, then a prefix of 100 runs (100 KiB) of other bytes. */
  uint64_t nruns[2] = {SW_ROWS * SW_COLS, 100};
  for (int i = 0; i < 2; i++) {
    memset((void *)(uintptr_t)a, 0xAA, SW_DST_SPAN);
    fill_pattern(src, SW_SRC_SPAN, (uint8_t)(5 + i));
    cubert_backend_strided l = strided_write_layout(nruns[i]);
    ck_assert_uint_ge(l.nruns * l.run, HOST_WRITE_LARGE);
    ck_assert_int_eq(ops->copy_strided(f.dev[0], s, ++work, CUBERT_BACKEND_HOST_TO_DEVICE, a, NULL,
                                       (uint64_t)(uintptr_t)src, &l, &err),
                     CUBERT_OK);
    /* No sync: the worker moved the runs straight from src before the call returned. */
    ck_assert_uint_eq(ops->progress(f.dev[0], s), work);
    strided_write_expect(want, src, &l);
    ck_assert_mem_eq((void *)(uintptr_t)a, want, SW_DST_SPAN);
  }
  ck_assert_uint_eq(cb_host_testing_staging_allocs(), allocs);
  free(src);
  free(want);
  close_fixture(&f);
}
END_TEST

START_TEST(strided_writes_behind_work_are_packed_and_reuse_kept_staging_blocks) {
  fixture f;
  open_fixture(&f, 1, 16 * MIB, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m[3], mf;
  uint64_t a[3];
  for (int i = 0; i < 3; i++)
    a[i] = alloc(f.dev[0], SW_DST_SPAN, &m[i]);
  uint64_t flag = alloc(f.dev[0], 256, &mf);
  void *s = stream(f.dev[0]);
  void *gated = load(f.dev[0], "gated_store", gated_store, 2);
  uint8_t *src = malloc(SW_SRC_SPAN), *want = malloc(SW_DST_SPAN);
  ck_assert(src && want);
  uint64_t allocs = cb_host_testing_staging_allocs(), work = 0;
  /* Per round, behind a held kernel: the whole layout, a prefix of 100
   * runs, and 40 runs (40 KiB, below HOST_WRITE_LARGE: a small staging
   * allocation), each from src scribbled after the call. */
  uint64_t nruns[3] = {SW_ROWS * SW_COLS, 100, 40};
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < 3; i++)
      memset((void *)(uintptr_t)a[i], 0xAA, SW_DST_SPAN);
    atomic_store(&gate, 0);
    atomic_store(&gated_running, 0);
    ck_assert_int_eq(launch_store(f.dev[0], s, ++work, gated, 2, flag, 7, 0, &err), CUBERT_OK);
    while (!atomic_load(&gated_running))
      sleep_ms(1);
    for (int i = 0; i < 3; i++) {
      fill_pattern(src, SW_SRC_SPAN, (uint8_t)(60 + 3 * round + i));
      cubert_backend_strided l = strided_write_layout(nruns[i]);
      ck_assert_int_eq(ops->copy_strided(f.dev[0], s, ++work, CUBERT_BACKEND_HOST_TO_DEVICE, a[i], NULL,
                                         (uint64_t)(uintptr_t)src, &l, &err),
                       CUBERT_OK);
      memset(src, 0xEE, SW_SRC_SPAN); /* the write packed its own copy */
    }
    ck_assert_uint_lt(ops->progress(f.dev[0], s), work - 3); /* all still queued */
    atomic_store(&gate, 1);
    ck_assert_int_eq(ops->sync(f.dev[0], s, &err), CUBERT_OK);
    for (int i = 0; i < 3; i++) {
      fill_pattern(src, SW_SRC_SPAN, (uint8_t)(60 + 3 * round + i));
      cubert_backend_strided l = strided_write_layout(nruns[i]);
      strided_write_expect(want, src, &l);
      ck_assert_mem_eq((void *)(uintptr_t)a[i], want, SW_DST_SPAN);
    }
    /* Two large blocks the first round; the second reuses them. */
    ck_assert_uint_eq(cb_host_testing_staging_allocs() - allocs, 2);
  }
  free(src);
  free(want);
  ops->module_unload(f.dev[0], gated);
  close_fixture(&f);
}
END_TEST

/* ------------------------------------------------------------ kernels */

START_TEST(module_without_host_function_is_unsupported) {
  fixture f;
  open_fixture(&f, 1, 1 << 20, NULL);
  cubert_berr err = {0};
  cubert_backend_kernel k = {"gpu_only", "gpu_only", "extern \"C\" __global__ void gpu_only() {}",
                             NULL, NULL, 0, NULL, NULL, 0, 0};
  void *m = NULL;
  ck_assert_int_eq(ops->module_load(f.dev[0], &k, &m, &err), CUBERT_ERR_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(err.message, "kernel `gpu_only` has no host function"));
  ck_assert_ptr_null(m);
  close_fixture(&f);
}
END_TEST

START_TEST(launch_checks_arguments_and_shape) {
  fixture f;
  open_fixture(&f, 1, 1 << 20, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m;
  uint64_t a = alloc(f.dev[0], 256, &m);
  void *s = stream(f.dev[0]);
  void *k = load(f.dev[0], "maybe_fail", maybe_fail, 3);
  ck_assert_int_eq(launch_store(f.dev[0], s, 1, k, 2, a, 1, 0, &err), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(launch_store(f.dev[0], s, 1, k, 3, a + 254, 1, 0, &err),
                   CUBERT_ERR_OUT_OF_RANGE);
  uint32_t v = 0;
  cubert_launch_config bad = {{1, 1, 1}, {1024, 2, 1}, 0};
  cubert_backend_arg args[3] = {
      {CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, a, 4, NULL, 0, NULL},
      {CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 0, 0, &v, 4, NULL},
      {CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 0, 0, &v, 4, NULL},
  };
  ck_assert_int_eq(ops->launch(f.dev[0], s, 1, k, &bad, args, 3, &err), CUBERT_ERR_LAUNCH_CONFIG);
  cubert_launch_config zero = {{0, 1, 1}, {1, 1, 1}, 0};
  ck_assert_int_eq(ops->launch(f.dev[0], s, 1, k, &zero, args, 3, &err), CUBERT_ERR_LAUNCH_CONFIG);
  cubert_launch_config shared = {{1, 1, 1}, {1, 1, 1}, 65537};
  ck_assert_int_eq(ops->launch(f.dev[0], s, 1, k, &shared, args, 3, &err),
                   CUBERT_ERR_LAUNCH_CONFIG);
  args[2].scalar_size = 8;
  cubert_launch_config ok = {{1, 1, 1}, {1, 1, 1}, 0};
  ck_assert_int_eq(ops->launch(f.dev[0], s, 1, k, &ok, args, 3, &err), CUBERT_ERR_INVALID_ARGUMENT);
  args[2].scalar_size = 4;
  args[0].kind = CUBERT_PARAM_PEER_BUFFER;
  ck_assert_int_eq(ops->launch(f.dev[0], s, 1, k, &ok, args, 3, &err), CUBERT_ERR_INVALID_ARGUMENT);
  ck_assert_uint_eq(ops->progress(f.dev[0], s), 0); /* nothing was enqueued */
  close_fixture(&f); /* the module is left for device_close to free (LSan checks) */
}
END_TEST

/* ------------------------------------------------------------ peers */

START_TEST(peer_access_honours_the_deny_list) {
  fixture f;
  open_fixture(&f, 4, 1 << 20, "0-2,1-3");
  cubert_berr err = {0};
  bool can;
  for (int i = 0; i < 4; i++) {
    for (int j = 0; j < 4; j++) {
      ck_assert_int_eq(ops->peer_can_access(f.dev[i], f.dev[j], &can, &err), CUBERT_OK);
      bool denied = (i % 2 == j % 2); /* 0-2 and 1-3, both ways, and self */
      ck_assert_msg(can == !denied, "%d -> %d", i, j);
    }
  }
  ck_assert_int_eq(ops->peer_enable(f.dev[0], f.dev[2], &err), CUBERT_ERR_PEER_ACCESS);
  ck_assert_ptr_nonnull(strstr(err.message, "host:0 -> host:2"));
  ck_assert_int_eq(ops->peer_enable(f.dev[3], f.dev[1], &err), CUBERT_ERR_PEER_ACCESS);
  ck_assert_ptr_nonnull(strstr(err.message, "host:3 -> host:1"));
  ck_assert_int_eq(ops->peer_enable(f.dev[0], f.dev[1], &err), CUBERT_OK);
  ck_assert_int_eq(ops->peer_enable(f.dev[0], f.dev[1], &err), CUBERT_OK);
  close_fixture(&f);
}
END_TEST

START_TEST(malformed_deny_lists_are_refused_by_name) {
  static const struct {
    const char *text, *part;
  } bad[] = {
      {"0-", "`0-`"},          {"0-2,", "``"},       {"a-b", "`a-b`"},
      {"0-2;1-3", "`0-2;1-3`"}, {" 0-2", "` 0-2`"},  {"0-0", "`0-0`"},
      {"0-9", "`0-9`"},        {"-1-2", "`-1-2`"},   {"0--2", "`0--2`"},
      {"0-2,,1-3", "``"},      {"1-2,x", "`x`"},     {"0-1-2", "`0-1-2`"},
      {"99999999999-1", "`99999999999-1`"},
  };
  ops = cubert_backend_host();
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cb_host_options config_host = {.devices = 4, .memory = 1 << 20, .peer_deny = bad[i].text};
    cubert_backend_config config = {.options = &config_host};
    cubert_berr err = {0};
    void *b = NULL;
    int n = -1;
    ck_assert_msg(ops->open(&config, &b, &n, &err) == CUBERT_ERR_INVALID_ARGUMENT, "\"%s\"",
                  bad[i].text);
    ck_assert_msg(strstr(err.message, bad[i].part) != NULL, "\"%s\": %s", bad[i].text, err.message);
    ck_assert_ptr_null(b);
    ck_assert_int_eq(n, -1);
  }
  static const char *good[] = {"", "0-1", "3-0,1-2", "03-1"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    cb_host_options config_host = {.devices = 4, .memory = 1 << 20, .peer_deny = good[i]};
    cubert_backend_config config = {.options = &config_host};
    cubert_berr err = {0};
    void *b = NULL;
    int n = -1;
    ck_assert_msg(ops->open(&config, &b, &n, &err) == CUBERT_OK, "\"%s\": %s", good[i], err.message);
    ops->close(b);
  }
}
END_TEST

START_TEST(peer_kernel_needs_enabled_access) {
  fixture f;
  open_fixture(&f, 2, 1 << 20, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m0, m1;
  uint64_t a0 = alloc(f.dev[0], 1024, &m0);
  uint64_t a1 = alloc(f.dev[1], 1024, &m1);
  void *s0 = stream(f.dev[0]), *s1 = stream(f.dev[1]);
  uint32_t src[256];
  for (int i = 0; i < 256; i++)
    src[i] = 1000u + (uint32_t)i;
  ck_assert_int_eq(ops->write(f.dev[0], s0, 1, a0, src, sizeof src, &err), CUBERT_OK);
  ck_assert_int_eq(ops->sync(f.dev[0], s0, &err), CUBERT_OK);

  /* host:1 reads host:0's memory through a peer binding. */
  const cubert_kernel_desc *d = cubert_builtin_desc(CUBERT_BUILTIN_COPY_PEER_READ);
  cubert_backend_kernel bk = {d->name, d->entry, d->source, NULL, NULL, 0,
                              d->host_fn, d->params, d->nparams, 0};
  void *mod;
  ck_assert_int_eq(ops->module_load(f.dev[1], &bk, &mod, &err), CUBERT_OK);
  uint64_t n = 256;
  cubert_launch_config config = {{4, 1, 1}, {64, 1, 1}, 0};
  cubert_backend_arg args[3] = {
      {CUBERT_PARAM_PEER_BUFFER, CUBERT_ACCESS_READ, a0, 1024, NULL, 0, f.dev[0]},
      {CUBERT_PARAM_BUFFER, CUBERT_ACCESS_WRITE, a1, 1024, NULL, 0, NULL},
      {CUBERT_PARAM_SCALAR, CUBERT_ACCESS_READ, 0, 0, &n, 8, NULL},
  };
  ck_assert_int_eq(ops->launch(f.dev[1], s1, 2, mod, &config, args, 3, &err),
                   CUBERT_ERR_PEER_ACCESS);
  ck_assert_ptr_nonnull(strstr(err.message, "host:1 -> host:0"));
  /* Enabling the other direction does not help. */
  ck_assert_int_eq(ops->peer_enable(f.dev[0], f.dev[1], &err), CUBERT_OK);
  ck_assert_int_eq(ops->launch(f.dev[1], s1, 2, mod, &config, args, 3, &err),
                   CUBERT_ERR_PEER_ACCESS);
  ck_assert_int_eq(ops->peer_enable(f.dev[1], f.dev[0], &err), CUBERT_OK);
  ck_assert_int_eq(ops->launch(f.dev[1], s1, 2, mod, &config, args, 3, &err), CUBERT_OK);
  uint32_t back[256];
  ck_assert_int_eq(ops->read(f.dev[1], s1, 3, back, a1, sizeof back, &err), CUBERT_OK);
  ck_assert_mem_eq(back, src, sizeof src);
  ops->module_unload(f.dev[1], mod);
  /* A plain buffer argument on another device is refused. */
  d = cubert_builtin_desc(CUBERT_BUILTIN_COPY_U32);
  bk = (cubert_backend_kernel){d->name, d->entry, d->source, NULL, NULL, 0,
                               d->host_fn, d->params, d->nparams, 0};
  ck_assert_int_eq(ops->module_load(f.dev[1], &bk, &mod, &err), CUBERT_OK);
  args[0].kind = CUBERT_PARAM_BUFFER;
  ck_assert_int_eq(ops->launch(f.dev[1], s1, 4, mod, &config, args, 3, &err),
                   CUBERT_ERR_WRONG_DEVICE);
  ops->module_unload(f.dev[1], mod);
  close_fixture(&f);
}
END_TEST

/* ------------------------------------------------------------ concurrency */

enum { THREADS = 12, STREAMS = 6, ROUNDS = 200, SLOT = 64 };

typedef struct shared_state {
  fixture *f;
  void *streams[2][STREAMS];
  void *module[2];
  uint64_t base[2];
  pthread_mutex_t device_lock[2]; /* what the runtime holds around enqueues */
  uint64_t next_work[2];
  atomic_int failures_launched[2];
  atomic_int failures_seen[2];
  atomic_int stop;
} shared_state;

typedef struct worker_arg {
  shared_state *st;
  int id;
} worker_arg;

static void *enqueue_thread(void *arg) {
  worker_arg *w = arg;
  shared_state *st = w->st;
  int dev = w->id % 2;
  void *d = st->f->dev[dev];
  uint64_t addr = st->base[dev] + (uint64_t)(w->id / 2) * SLOT;
  cubert_berr err = {0};
  for (int r = 0; r < ROUNDS; r++) {
    void *s = st->streams[dev][(w->id + r) % STREAMS];
    uint8_t data[SLOT];
    memset(data, (uint8_t)(w->id * 31 + r), sizeof data);
    uint32_t fail = (r % 17 == 3) ? 1u : 0u;
    pthread_mutex_lock(&st->device_lock[dev]);
    ck_assert_int_eq(ops->write(d, s, ++st->next_work[dev], addr, data, SLOT, &err), CUBERT_OK);
    ck_assert_int_eq(launch_store(d, s, ++st->next_work[dev], st->module[dev], 3, addr + 4,
                                  (uint32_t)r, fail, &err),
                     CUBERT_OK);
    pthread_mutex_unlock(&st->device_lock[dev]);
    if (fail)
      atomic_fetch_add(&st->failures_launched[dev], 1);
    /* read runs without the device lock, as the runtime may call it. */
    uint8_t back[SLOT];
    ck_assert_int_eq(ops->read(d, s, 0, back, addr, SLOT, &err), CUBERT_OK);
    ck_assert_uint_eq(back[0], data[0]);
    ck_assert_uint_eq(back[SLOT - 1], data[SLOT - 1]);
    uint32_t stored;
    memcpy(&stored, back + 4, 4);
    if (!fail)
      ck_assert_uint_eq(stored, (uint32_t)r);
    else
      ck_assert_uint_eq(stored, (uint32_t)data[4] * 0x01010101u);
  }
  return NULL;
}

static void *observer_thread(void *arg) {
  shared_state *st = arg;
  cubert_berr err = {0};
  cubert_async_failure out[3];
  while (!atomic_load(&st->stop)) {
    for (int dev = 0; dev < 2; dev++) {
      void *d = st->f->dev[dev];
      for (int i = 0; i < STREAMS; i++)
        (void)ops->progress(d, st->streams[dev][i]);
      size_t n = ops->drain_failures(d, out, 3);
      for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(out[i].status, CUBERT_ERR_LAUNCH);
      atomic_fetch_add(&st->failures_seen[dev], (int)n);
      ck_assert_int_eq(ops->sync(d, st->streams[dev][0], &err), CUBERT_OK);
    }
  }
  return NULL;
}

START_TEST(many_threads_enqueue_on_many_streams) {
  fixture f;
  open_fixture(&f, 2, 1 << 20, NULL);
  shared_state *st = calloc(1, sizeof *st);
  ck_assert_ptr_nonnull(st);
  st->f = &f;
  for (int dev = 0; dev < 2; dev++) {
    cubert_backend_mem m;
    st->base[dev] = alloc(f.dev[dev], THREADS * SLOT, &m);
    for (int i = 0; i < STREAMS; i++)
      st->streams[dev][i] = stream(f.dev[dev]);
    st->module[dev] = load(f.dev[dev], "maybe_fail", maybe_fail, 3);
    pthread_mutex_init(&st->device_lock[dev], NULL);
  }
  pthread_t obs[2], t[THREADS];
  worker_arg args[THREADS];
  for (int i = 0; i < 2; i++)
    ck_assert_int_eq(pthread_create(&obs[i], NULL, observer_thread, st), 0);
  for (int i = 0; i < THREADS; i++) {
    args[i] = (worker_arg){st, i};
    ck_assert_int_eq(pthread_create(&t[i], NULL, enqueue_thread, &args[i]), 0);
  }
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  atomic_store(&st->stop, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(obs[i], NULL);
  cubert_berr err = {0};
  cubert_async_failure out[64];
  for (int dev = 0; dev < 2; dev++) {
    ck_assert_int_eq(ops->sync(f.dev[dev], NULL, &err), CUBERT_OK);
    size_t n;
    while ((n = ops->drain_failures(f.dev[dev], out, 64)) > 0)
      atomic_fetch_add(&st->failures_seen[dev], (int)n);
    ck_assert_int_eq(atomic_load(&st->failures_seen[dev]),
                     atomic_load(&st->failures_launched[dev]));
    ck_assert_int_gt(atomic_load(&st->failures_launched[dev]), 0);
    ops->module_unload(f.dev[dev], st->module[dev]);
    pthread_mutex_destroy(&st->device_lock[dev]);
  }
  /* Streams and memory are left for device_close to free. */
  close_fixture(&f);
  free(st);
}
END_TEST

START_TEST(destroying_a_stream_runs_its_pending_work) {
  fixture f;
  open_fixture(&f, 1, 1 << 20, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m;
  uint64_t a = alloc(f.dev[0], 1 << 16, &m);
  void *s = stream(f.dev[0]);
  void *other = stream(f.dev[0]);
  static uint8_t data[1 << 16];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (uint8_t)(i * 13);
  for (int i = 0; i < 64; i++)
    ck_assert_int_eq(ops->write(f.dev[0], s, (uint64_t)i + 1, a + (uint64_t)i * 1024,
                                data + i * 1024, 1024, &err),
                     CUBERT_OK);
  void *ev;
  ck_assert_int_eq(ops->event_record(f.dev[0], s, &ev, &err), CUBERT_OK);
  ops->stream_destroy(f.dev[0], s);
  ck_assert_mem_eq((void *)(uintptr_t)a, data, sizeof data);
  /* The event outlives its stream: waiting on it is immediate. */
  ck_assert_int_eq(ops->stream_wait(f.dev[0], other, ev, &err), CUBERT_OK);
  ops->event_destroy(f.dev[0], ev);
  ck_assert_int_eq(ops->sync(f.dev[0], NULL, &err), CUBERT_OK);
  close_fixture(&f);
}
END_TEST

/* Sleeps `value` milliseconds. */
static cubert_status sleeper(const cubert_host_launch *l, char *msg, size_t cap) {
  uint32_t v;
  memcpy(&v, l->args[1], 4);
  sleep_ms((int)v);
  return CUBERT_OK;
}

START_TEST(timers_measure_the_worker_clock) {
  fixture f;
  open_fixture(&f, 1, 1 << 20, NULL);
  cubert_berr err = {0};
  cubert_backend_mem m;
  uint64_t a = alloc(f.dev[0], 256, &m);
  void *s = stream(f.dev[0]);
  void *sleepy = load(f.dev[0], "sleeper", sleeper, 2);
  void *t0, *t1, *t2;
  ck_assert_int_eq(ops->timer_record(f.dev[0], s, &t0, &err), CUBERT_OK);
  ck_assert_int_eq(launch_store(f.dev[0], s, 1, sleepy, 2, a, 60, 0, &err), CUBERT_OK);
  ck_assert_int_eq(ops->timer_record(f.dev[0], s, &t1, &err), CUBERT_OK);
  ck_assert_int_eq(ops->timer_record(f.dev[0], s, &t2, &err), CUBERT_OK);
  double ms = -1;
  /* elapsed waits for the end mark itself: no sync needed. */
  ck_assert_int_eq(ops->timer_elapsed(f.dev[0], t0, t1, &ms, &err), CUBERT_OK);
  ck_assert_msg(ms >= 60.0 && ms < 10000.0, "%f ms around a 60 ms kernel", ms);
  ck_assert_int_eq(ops->timer_elapsed(f.dev[0], t1, t2, &ms, &err), CUBERT_OK);
  ck_assert_msg(ms >= 0.0 && ms < 60.0, "%f ms between two adjacent marks", ms);
  ops->timer_destroy(f.dev[0], t0);
  ops->timer_destroy(f.dev[0], t1);
  ops->timer_destroy(f.dev[0], t2);

  /* A timer destroyed before its stream reached it is freed by the worker. */
  void *gated = load(f.dev[0], "gated_store", gated_store, 2);
  ck_assert_int_eq(launch_store(f.dev[0], s, 2, gated, 2, a, 1, 0, &err), CUBERT_OK);
  ck_assert_int_eq(ops->timer_record(f.dev[0], s, &t0, &err), CUBERT_OK);
  ops->timer_destroy(f.dev[0], t0);
  atomic_store(&gate, 1);
  ck_assert_int_eq(ops->sync(f.dev[0], s, &err), CUBERT_OK);
  close_fixture(&f);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("host_backend");
  TCase *t = tcase_create("core");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, open_reports_devices_and_their_limits);
  tcase_add_test(t, open_defaults_zero_devices_and_bus_ids);
  tcase_add_test(t, memory_is_aligned_and_limited);
  tcase_add_test(t, addresses_are_checked_before_enqueue);
  tcase_add_test(t, stream_runs_write_fill_copy_read_in_order);
  tcase_add_test(t, large_write_to_an_idle_stream_lands_before_it_returns_without_staging);
  tcase_add_test(t, large_writes_behind_work_reuse_kept_staging_blocks_up_to_a_bound);
  tcase_add_test(t, a_staging_block_that_ran_is_kept_in_place_of_the_smallest);
  tcase_add_test(t, large_strided_write_to_an_idle_stream_lands_before_it_returns_without_staging);
  tcase_add_test(t, strided_writes_behind_work_are_packed_and_reuse_kept_staging_blocks);
  tcase_add_test(t, copy_peer_moves_bytes_between_devices);
  tcase_add_test(t, event_makes_one_stream_wait_for_another);
  tcase_add_test(t, sync_of_the_device_waits_for_every_stream);
  tcase_add_test(t, sync_of_the_device_short_of_host_memory_still_waits);
  tcase_add_test(t, failing_host_function_is_reported_and_the_stream_goes_on);
  tcase_add_test(t, builtin_refusal_becomes_an_async_failure);
  tcase_add_test(t, progress_stops_at_unfinished_work);
  tcase_add_test(t, module_without_host_function_is_unsupported);
  tcase_add_test(t, launch_checks_arguments_and_shape);
  tcase_add_test(t, peer_access_honours_the_deny_list);
  tcase_add_test(t, malformed_deny_lists_are_refused_by_name);
  tcase_add_test(t, peer_kernel_needs_enabled_access);
  tcase_add_test(t, many_threads_enqueue_on_many_streams);
  tcase_add_test(t, destroying_a_stream_runs_its_pending_work);
  tcase_add_test(t, timers_measure_the_worker_clock);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
