/* topology/kfd.c: reads the KFD topology (topology/kfd.h) from a directory
 * or a pack, through one small file-access interface so that both go through
 * the same parser. */
#include "base/alloc.h"
#include "base/str.h"
#include "topology/kfd.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/array.h"
#include "base/msg.h"
#include "topology/internal.h"

#define KFD_NODES "sys/class/kfd/kfd/topology/nodes"
#define KFD_MAX_FILE (64u << 10) /* sysfs files hold at most a page */

/* ------------------------------------------------------------ file access */

/* Reads a whole sysfs file: 0, or the errno of open or read. */
static int default_read(void *ctx, const char *path, char *buf, size_t capacity, size_t *len) {
  (void)ctx;
  FILE *f = fopen(path, "rb");
  if (!f) return errno;
  size_t n = fread(buf, 1, capacity, f);
  int e = ferror(f) ? (errno ? errno : EIO) : 0;
  fclose(f);
  *len = n;
  return e;
}

static const cb_kfd_reader default_reader = {default_read, NULL};
static const cb_kfd_reader *reader = &default_reader;

void cb_kfd_set_reader(const cb_kfd_reader *r) { reader = r && r->read ? r : &default_reader; }

typedef struct pack_entry {
  const char *path;   /* not NUL-terminated: path_len bytes */
  size_t path_len;
  const char *data;
  size_t size;
} pack_entry;

typedef struct kfd_fs {
  const char *root;   /* directory, or NULL for a pack */
  pack_entry *entries;
  size_t nentries;
  const char *label;  /* for messages */
} kfd_fs;


/* Splits a pack into entries. */
static cubert_status pack_parse(const char *label, const char *pack, size_t size, pack_entry **out,
                                size_t *count, char *msg, size_t cap) {
  pack_entry *v = NULL;
  size_t n = 0, vcap = 0, at = 0;
  while (at < size) {
    const char *line = pack + at;
    const char *nl = memchr(line, '\n', size - at);
    if (size - at < 3 || memcmp(line, "@@ ", 3) != 0 || !nl) {
      cb_free(v);
      return cb_msgf(msg, cap, CUBERT_ERR_PARSE, "%s: byte %zu: expected \"@@ <path> <bytes>\"",
                  label, at);
    }
    const char *sp = NULL;
    for (const char *p = nl; p > line + 3; p--)
      if (*p == ' ') {
        sp = p;
        break;
      }
    char *end = NULL;
    unsigned long long len = sp ? strtoull(sp + 1, &end, 10) : 0;
    if (!sp || end != nl || sp == line + 3 || len > size - (size_t)(nl + 1 - pack)) {
      cb_free(v);
      return cb_msgf(msg, cap, CUBERT_ERR_PARSE, "%s: byte %zu: bad entry header \"%.*s\"", label,
                  at, (int)(nl - line), line);
    }
    if (n == vcap) {
      pack_entry *nv = cb_array_grow(v, vcap, n + 1, sizeof *nv, &vcap);
      if (!nv) {
        cb_free(v);
        return cb_msgf(msg, cap, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory reading %s", label);
      }
      v = nv;
    }
    v[n].path = line + 3;
    v[n].path_len = (size_t)(sp - (line + 3));
    v[n].data = nl + 1;
    v[n].size = (size_t)len;
    n++;
    at = (size_t)(nl + 1 - pack) + (size_t)len;
  }
  *out = v;
  *count = n;
  return CUBERT_OK;
}

/* The file at `rel` (NUL-terminated, caller frees); NULL with *missing set
 * when it does not exist, NULL with a message on another error. */
static char *fs_read(const kfd_fs *fs, const char *rel, bool *missing, cubert_status *st, char *msg,
                     size_t cap) {
  *missing = false;
  *st = CUBERT_OK;
  if (!fs->root) {
    size_t rl = strlen(rel);
    for (size_t i = 0; i < fs->nentries; i++) {
      const pack_entry *e = &fs->entries[i];
      if (e->path_len == rl && memcmp(e->path, rel, rl) == 0) {
        char *s = cb_malloc(e->size + 1);
        if (!s) {
          *st = cb_msgf(msg, cap, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory reading %s", rel);
          return NULL;
        }
        memcpy(s, e->data, e->size);
        s[e->size] = 0;
        return s;
      }
    }
    *missing = true;
    return NULL;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", fs->root, rel);
  char *s = cb_malloc(KFD_MAX_FILE + 1);
  if (!s) {
    *st = cb_msgf(msg, cap, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory reading %s", path);
    return NULL;
  }
  size_t n = 0;
  int e = reader->read(reader->ctx, path, s, KFD_MAX_FILE, &n);
  if (e) {
    cb_free(s);
    if (e == ENOENT) {
      *missing = true;
      return NULL;
    }
    /* The kernel refuses the files of a node outside the process's device
     * cgroup (kfd_topology.c: node_show and iolink_show return -EPERM):
     * the caller skips that node. */
    *st = cb_msgf(msg, cap, e == EPERM || e == EACCES ? CB_KFD_REFUSED : CUBERT_ERR_IO, "cannot read %s: %s",
               path, strerror(e));
    return NULL;
  }
  s[n < KFD_MAX_FILE ? n : KFD_MAX_FILE] = 0;
  return s;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static bool parse_index(const char *s, size_t len, int *out) {
  if (!len || len > 9) return false;
  int v = 0;
  for (size_t i = 0; i < len; i++) {
    if (!isdigit((unsigned char)s[i])) return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

/* Numeric entries of directory `rel`, sorted. *exists says whether the
 * directory is there at all. */
static cubert_status fs_list(const kfd_fs *fs, const char *rel, int **out, int *count, bool *exists,
                             char *msg, size_t cap) {
  int *v = NULL;
  int n = 0;
  size_t vcap = 0;
  *exists = false;
  if (!fs->root) {
    size_t rl = strlen(rel);
    for (size_t i = 0; i < fs->nentries; i++) {
      const pack_entry *e = &fs->entries[i];
      if (e->path_len <= rl + 1 || memcmp(e->path, rel, rl) != 0 || e->path[rl] != '/') continue;
      *exists = true;
      const char *name = e->path + rl + 1;
      const char *slash = memchr(name, '/', e->path_len - rl - 1);
      if (!slash) continue; /* a file directly in the directory */
      int id;
      if (!parse_index(name, (size_t)(slash - name), &id)) continue;
      bool dup = false;
      for (int k = 0; k < n; k++) dup |= v[k] == id;
      if (dup) continue;
      if ((size_t)n == vcap) {
        int *nv = cb_array_grow(v, vcap, vcap + 1, sizeof *nv, &vcap);
        if (!nv) {
          cb_free(v);
          return cb_msgf(msg, cap, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
        }
        v = nv;
      }
      v[n++] = id;
    }
  } else {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", fs->root, rel);
    DIR *d = opendir(path);
    if (!d) {
      if (errno == ENOENT || errno == ENOTDIR) {
        *out = NULL;
        *count = 0;
        return CUBERT_OK;
      }
      return cb_msgf(msg, cap, CUBERT_ERR_IO, "cannot open directory %s: %s", path, strerror(errno));
    }
    *exists = true;
    struct dirent *de;
    while ((de = readdir(d))) {
      int id;
      if (!parse_index(de->d_name, strlen(de->d_name), &id)) continue;
      if ((size_t)n == vcap) {
        int *nv = cb_array_grow(v, vcap, vcap + 1, sizeof *nv, &vcap);
        if (!nv) {
          cb_free(v);
          closedir(d);
          return cb_msgf(msg, cap, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
        }
        v = nv;
      }
      v[n++] = id;
    }
    closedir(d);
  }
  if (n) qsort(v, (size_t)n, sizeof *v, cmp_int);
  *out = v;
  *count = n;
  return CUBERT_OK;
}

/* ------------------------------------------------------------ properties */

#define PROP_MAX 96

typedef struct props {
  char key[PROP_MAX][48];
  uint64_t value[PROP_MAX];
  int n;
} props;

static void where(const kfd_fs *fs, const char *rel, char *out, size_t cap) {
  if (fs->root)
    snprintf(out, cap, "%s/%s", fs->root, rel);
  else
    snprintf(out, cap, "%s: %s", fs->label, rel);
}

/* Parses "name value" lines (value an unsigned decimal). */
static cubert_status props_parse(const kfd_fs *fs, const char *rel, const char *text, props *p,
                                 char *msg, size_t cap) {
  p->n = 0;
  int line = 0;
  const char *s = text;
  while (*s) {
    line++;
    const char *eol = strchr(s, '\n');
    size_t len = eol ? (size_t)(eol - s) : strlen(s);
    const char *k = s, *ke = s;
    while (ke < s + len && (isalnum((unsigned char)*ke) || *ke == '_')) ke++;
    const char *vs = ke;
    while (vs < s + len && *vs == ' ') vs++;
    const char *ve = vs;
    while (ve < s + len && isdigit((unsigned char)*ve)) ve++;
    const char *tail = ve;
    while (tail < s + len && isspace((unsigned char)*tail)) tail++;
    bool blank = true;
    for (size_t i = 0; i < len; i++) blank &= isspace((unsigned char)s[i]) != 0;
    if (!blank) {
      if (ke == k || vs == ke || ve == vs || tail != s + len || (size_t)(ke - k) >= sizeof p->key[0]) {
        char w[4200];
        where(fs, rel, w, sizeof w);
        return cb_msgf(msg, cap, CUBERT_ERR_PARSE, "%s: line %d: \"%.*s\" is not \"<name> <number>\"",
                    w, line, (int)(len > 80 ? 80 : len), s);
      }
      if (p->n < PROP_MAX) {
        memcpy(p->key[p->n], k, (size_t)(ke - k));
        p->key[p->n][ke - k] = 0;
        errno = 0;
        p->value[p->n] = strtoull(vs, NULL, 10);
        if (errno == ERANGE) {
          char w[4200];
          where(fs, rel, w, sizeof w);
          return cb_msgf(msg, cap, CUBERT_ERR_PARSE, "%s: line %d: value of %s out of range", w, line,
                      p->key[p->n]);
        }
        p->n++;
      }
    }
    s += len;
    if (*s == '\n') s++;
  }
  return CUBERT_OK;
}

static bool props_get(const props *p, const char *key, uint64_t *value) {
  for (int i = 0; i < p->n; i++)
    if (!strcmp(p->key[i], key)) {
      *value = p->value[i];
      return true;
    }
  return false;
}

/* Reads and parses a properties file that must exist. */
static cubert_status read_props(const kfd_fs *fs, const char *rel, props *p, char *msg, size_t cap) {
  bool missing;
  cubert_status st;
  char *text = fs_read(fs, rel, &missing, &st, msg, cap);
  if (!text) {
    if (st) return st;
    char w[4200];
    where(fs, rel, w, sizeof w);
    return cb_msgf(msg, cap, CUBERT_ERR_PARSE, "%s is missing", w);
  }
  st = props_parse(fs, rel, text, p, msg, cap);
  cb_free(text);
  return st;
}

static cubert_status need(const kfd_fs *fs, const char *rel, const props *p, const char *key,
                          uint64_t max, uint64_t *value, char *msg, size_t cap) {
  char w[4200];
  if (!props_get(p, key, value)) {
    where(fs, rel, w, sizeof w);
    return cb_msgf(msg, cap, CUBERT_ERR_PARSE, "%s: no \"%s\" line", w, key);
  }
  if (*value > max) {
    where(fs, rel, w, sizeof w);
    return cb_msgf(msg, cap, CUBERT_ERR_PARSE, "%s: %s %" PRIu64 " is out of range (at most %" PRIu64 ")",
                w, key, *value, max);
  }
  return CUBERT_OK;
}

/* ------------------------------------------------------------ loading */

void cb_kfd_free(cb_kfd *kfd) {
  if (!kfd) return;
  for (int i = 0; i < kfd->nnodes; i++) cb_free(kfd->nodes[i].links);
  cb_free(kfd->nodes);
  cb_free(kfd->refused);
  cb_free(kfd->source);
  cb_free(kfd);
}

static cubert_status load_node(const kfd_fs *fs, int id, cb_kfd_node *node, char *msg, size_t cap) {
  char rel[256];
  props p;
  cubert_status st;
  uint64_t v;
  node->id = id;

  snprintf(rel, sizeof rel, KFD_NODES "/%d/gpu_id", id);
  bool missing;
  char *text = fs_read(fs, rel, &missing, &st, msg, cap);
  if (!text) {
    if (st) return st;
    char w[4200];
    where(fs, rel, w, sizeof w);
    return cb_msgf(msg, cap, CUBERT_ERR_PARSE, "%s is missing", w);
  }
  char *end = NULL;
  errno = 0;
  node->gpu_id = strtoull(text, &end, 10);
  while (end && isspace((unsigned char)*end)) end++;
  bool bad = end == text || !end || *end || errno;
  cb_free(text);
  if (bad) {
    char w[4200];
    where(fs, rel, w, sizeof w);
    return cb_msgf(msg, cap, CUBERT_ERR_PARSE, "%s: not a number", w);
  }

  snprintf(rel, sizeof rel, KFD_NODES "/%d/properties", id);
  if ((st = read_props(fs, rel, &p, msg, cap))) return st;
  if (node->gpu_id) {
    uint64_t loc, domain = 0;
    /* Bits 15:0 are the PCI bus and devfn; kernels that split an MI300 into
     * partitions put the partition in bits 31:28. */
    if ((st = need(fs, rel, &p, "location_id", 0xffffffffu, &loc, msg, cap))) return st;
    node->partition = (int)(loc >> 28);
    if (props_get(&p, "domain", &v)) {
      if ((st = need(fs, rel, &p, "domain", 0xffff, &domain, msg, cap))) return st;
    }
    snprintf(node->bus_id, sizeof node->bus_id, "%04x:%02x:%02x.%x", (unsigned)domain,
             (unsigned)((loc >> 8) & 0xff), (unsigned)((loc >> 3) & 0x1f), (unsigned)(loc & 7));
  }

  snprintf(rel, sizeof rel, KFD_NODES "/%d/io_links", id);
  int *links = NULL, nlinks = 0;
  bool exists;
  if ((st = fs_list(fs, rel, &links, &nlinks, &exists, msg, cap))) return st;
  if (nlinks) {
    node->links = cb_calloc((size_t)nlinks, sizeof *node->links);
    if (!node->links) {
      cb_free(links);
      return cb_msgf(msg, cap, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
    }
  }
  for (int m = 0; m < nlinks; m++) {
    cb_kfd_link *l = &node->links[node->nlinks];
    snprintf(rel, sizeof rel, KFD_NODES "/%d/io_links/%d/properties", id, links[m]);
    if ((st = read_props(fs, rel, &p, msg, cap))) break;
    if ((st = need(fs, rel, &p, "type", 1000, &v, msg, cap))) break;
    l->type = (int)v;
    if ((st = need(fs, rel, &p, "node_to", 1u << 20, &v, msg, cap))) break;
    l->node_to = (int)v;
    if (props_get(&p, "node_from", &v) && v != (uint64_t)id) {
      char w[4200];
      where(fs, rel, w, sizeof w);
      st = cb_msgf(msg, cap, CUBERT_ERR_PARSE, "%s: node_from %" PRIu64 " but the link is under node %d",
                w, v, id);
      break;
    }
    if (props_get(&p, "weight", &v)) {
      if ((st = need(fs, rel, &p, "weight", 1u << 20, &v, msg, cap))) break;
      l->weight = (int)v;
    }
    props_get(&p, "min_bandwidth", &l->min_bandwidth);
    props_get(&p, "max_bandwidth", &l->max_bandwidth);
    node->nlinks++;
  }
  cb_free(links);
  return st;
}

static cubert_status load(const kfd_fs *fs, bool missing_ok, cb_kfd **out, char *msg, size_t cap) {
  int *ids = NULL, n = 0;
  bool exists;
  cubert_status st = fs_list(fs, KFD_NODES, &ids, &n, &exists, msg, cap);
  if (st) return st;
  if (!exists && !missing_ok) {
    cb_free(ids);
    char w[4200];
    where(fs, KFD_NODES, w, sizeof w);
    return cb_msgf(msg, cap, CUBERT_ERR_IO, "%s: no such directory (not a KFD topology)", w);
  }
  cb_kfd *k = cb_calloc(1, sizeof *k);
  if (!k || (n && !(k->nodes = cb_calloc((size_t)n, sizeof *k->nodes)))) {
    cb_free(ids);
    cb_free(k);
    return cb_msgf(msg, cap, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  if (!st && n && !(k->refused = cb_calloc((size_t)n, sizeof *k->refused)))
    st = cb_msgf(msg, cap, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  for (int i = 0; i < n && !st; i++) {
    cb_kfd_node *node = &k->nodes[k->nnodes];
    st = load_node(fs, ids[i], node, msg, cap);
    if (st == CB_KFD_REFUSED) { /* outside our device cgroup: skipped */
      cb_free(node->links);
      memset(node, 0, sizeof *node);
      k->refused[k->nrefused++] = ids[i];
      st = CUBERT_OK;
      continue;
    }
    k->nnodes++;
  }
  cb_free(ids);
  /* Links to refused nodes lead where nothing can be read: dropped. */
  for (int i = 0; i < k->nnodes && !st && k->nrefused; i++) {
    cb_kfd_node *node = &k->nodes[i];
    int kept = 0;
    for (int j = 0; j < node->nlinks; j++)
      if (!cb_kfd_refused(k, node->links[j].node_to)) node->links[kept++] = node->links[j];
    node->nlinks = kept;
  }
  /* Every link must point at a node that exists. */
  for (int i = 0; i < k->nnodes && !st; i++)
    for (int j = 0; j < k->nodes[i].nlinks && !st; j++)
      if (!cb_kfd_node_by_id(k, k->nodes[i].links[j].node_to)) {
        char rel[256], w[4200];
        snprintf(rel, sizeof rel, KFD_NODES "/%d/io_links", k->nodes[i].id);
        where(fs, rel, w, sizeof w);
        st = cb_msgf(msg, cap, CUBERT_ERR_PARSE, "%s: a link to node %d, which does not exist", w,
                  k->nodes[i].links[j].node_to);
      }
  if (!st) {
    k->source = cb_strdup(fs->root ? fs->root : fs->label);
    if (!k->source) st = cb_msgf(msg, cap, CUBERT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  if (st) {
    if (k->nodes && k->nnodes < n) cb_free(k->nodes[k->nnodes].links); /* the node that failed */
    cb_kfd_free(k);
    return st;
  }
  *out = k;
  return CUBERT_OK;
}

cubert_status cb_kfd_load_dir(const char *root, bool missing_ok, cb_kfd **kfd, char *message,
                              size_t message_capacity) {
  if (!root || !*root || !kfd)
    return cb_msgf(message, message_capacity, CUBERT_ERR_INVALID_ARGUMENT, "no KFD root directory");
  struct stat sb;
  if (stat(root, &sb) != 0)
    return cb_msgf(message, message_capacity, CUBERT_ERR_IO, "KFD root %s: %s", root, strerror(errno));
  if (!S_ISDIR(sb.st_mode))
    return cb_msgf(message, message_capacity, CUBERT_ERR_IO, "KFD root %s: not a directory", root);
  kfd_fs fs = {.root = root, .label = root};
  return load(&fs, missing_ok, kfd, message, message_capacity);
}

cubert_status cb_kfd_load_pack(const char *name, const char *pack, size_t size, cb_kfd **kfd,
                               char *message, size_t message_capacity) {
  char label[160];
  snprintf(label, sizeof label, "embedded KFD fixture of %s", name ? name : "?");
  kfd_fs fs = {.root = NULL, .label = label};
  cubert_status st = pack_parse(label, pack, size, &fs.entries, &fs.nentries, message, message_capacity);
  if (st) return st;
  st = load(&fs, false, kfd, message, message_capacity);
  cb_free(fs.entries);
  return st;
}

static cubert_status mkdirs(char *path, char *msg, size_t cap) {
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    int r = mkdir(path, 0777);
    int e = errno;
    *p = '/';
    if (r != 0 && e != EEXIST)
      return cb_msgf(msg, cap, CUBERT_ERR_IO, "cannot create directory %.*s: %s", (int)(p - path), path,
                  strerror(e));
  }
  return CUBERT_OK;
}

cubert_status cb_kfd_unpack(const char *pack, size_t size, const char *dir, char *message,
                            size_t message_capacity) {
  pack_entry *v = NULL;
  size_t n = 0;
  cubert_status st = pack_parse("KFD pack", pack, size, &v, &n, message, message_capacity);
  for (size_t i = 0; i < n && !st; i++) {
    char path[4096];
    int len = snprintf(path, sizeof path, "%s/%.*s", dir, (int)v[i].path_len, v[i].path);
    if (len < 0 || (size_t)len >= sizeof path || memmem(v[i].path, v[i].path_len, "..", 2)) {
      st = cb_msgf(message, message_capacity, CUBERT_ERR_INVALID_ARGUMENT, "bad path in KFD pack");
      break;
    }
    if ((st = mkdirs(path, message, message_capacity))) break;
    FILE *f = fopen(path, "wb");
    if (!f) {
      st = cb_msgf(message, message_capacity, CUBERT_ERR_IO, "cannot create %s: %s", path, strerror(errno));
      break;
    }
    size_t w = fwrite(v[i].data, 1, v[i].size, f);
    if (fclose(f) != 0 || w != v[i].size)
      st = cb_msgf(message, message_capacity, CUBERT_ERR_IO, "cannot write %s", path);
  }
  cb_free(v);
  return st;
}

const cb_kfd_node *cb_kfd_node_by_id(const cb_kfd *kfd, int id) {
  if (!kfd) return NULL;
  int lo = 0, hi = kfd->nnodes - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (kfd->nodes[mid].id == id) return &kfd->nodes[mid];
    if (kfd->nodes[mid].id < id)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  return NULL;
}

const cb_kfd_node *cb_kfd_find_bus(const cb_kfd *kfd, const char *bus_id) {
  const cb_kfd_node *first = NULL;
  return cb_kfd_bus_nodes(kfd, bus_id, &first, 1) ? first : NULL;
}

bool cb_kfd_refused(const cb_kfd *kfd, int id) {
  for (int i = 0; kfd && i < kfd->nrefused; i++)
    if (kfd->refused[i] == id) return true;
  return false;
}

static bool same_bus(const cb_kfd_node *n, const cb_pci_addr *want) {
  cb_pci_addr have;
  return n->gpu_id && cb_pci_parse(n->bus_id, &have) && have.domain == want->domain &&
         have.bus == want->bus && have.dev == want->dev && have.fn == want->fn;
}

int cb_kfd_bus_nodes(const cb_kfd *kfd, const char *bus_id, const cb_kfd_node **out, int capacity) {
  cb_pci_addr want;
  if (!kfd || !cb_pci_parse(bus_id, &want)) return 0;
  int n = 0;
  for (int i = 0; i < kfd->nnodes; i++) {
    const cb_kfd_node *node = &kfd->nodes[i];
    if (!same_bus(node, &want)) continue;
    /* insertion by partition: few nodes share a bus (8 at most) */
    int at = n < capacity ? n : capacity;
    while (at > 0 && out[at - 1]->partition > node->partition) {
      if (at < capacity) out[at] = out[at - 1];
      at--;
    }
    if (at < capacity) out[at] = node;
    n++;
  }
  return n;
}
