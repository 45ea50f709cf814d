/*
 * archline's CUDA injection library: records the kernel, memcpy and memset timeline of any
 * CUDA program with CUPTI's activity API and writes it, as it goes, to a binary file.
 *
 * The CUDA driver loads it when CUDA_INJECTION64_PATH names it and calls InitializeInjection()
 * during cuInit, in every CUDA process of the program (torchrun's workers too: they inherit the
 * environment). Output: one file per process, $ARCHLINE_CUPTI_OUT/cupti-<pid>-<realtime ns>.bin
 * (created exclusively, so a reused pid never overwrites another process's file), a sequence of chunks, each a
 * 16-byte header {char magic[4] = "ALC1"; u32 type; u32 count; u32 bytes} followed by `bytes`
 * (a multiple of 8) of payload, little-endian:
 *   1 CLOCK_START, 2 CLOCK_END  count x {u64 host_before_ns, u64 cupti_ns, u64 host_after_ns}:
 *                               CLOCK_REALTIME read around cuptiGetTimestamp; CLOCK_END may come
 *                               more than once (duty cycle, detach mode): the last one counts
 *   3 ACTIVITIES                count x struct act_rec (48 bytes, below)
 *   4 NAMES                     count x {u32 id, u32 len, char name[len], zeros to 8 bytes}
 *   5 DROPPED                   u64: activity records CUPTI dropped
 *   6 ERROR                     "call\tresult\tmessage", NUL-padded: a CUPTI call that failed
 *   7 TRACE_ON, 8 TRACE_OFF     count x {u64 cupti_ns, u64 switch_ns}: kernel/copy tracing turned
 *                               on (stamped after enabling) or off (before disabling), and how
 *                               long the enable/disable calls took; only with a duty cycle
 *   9 DETACH                    count x {u64 wait_ns, u64 finalize_ns}: CUPTI detached from the
 *                               process: how long after the request, and how long cuptiFinalize
 *                               held the program's thread; only with a duty cycle in detach mode
 *  10 INCOMPLETE                u64: records handed over without a start or end time (a forced
 *                               flush caught them in flight: at a duty-cycle switch or at exit),
 *                               left out
 *  11 PROCESS                   "key=value" fields separated by tabs, NUL-padded: pid, ppid, host
 *                               and the launcher's variables (RANK, LOCAL_RANK, WORLD_SIZE, ...,
 *                               CUDA_VISIBLE_DEVICES) as this process found them; written first
 *  12 DEVICES                   count x struct dev_rec (88 bytes, below): which GPU (UUID) each
 *                               device id of the activity records is. From CUPTI's device records
 *                               (source 1), or, for a device id seen in records without one, from
 *                               the driver's cuDeviceGetUuid (source 2; CUPTI's device id is the
 *                               process's CUDA ordinal). The UUID, not the ordinal, names the GPU:
 *                               CUDA_VISIBLE_DEVICES renumbers ordinals, NVML does not
 *
 * Cost: the library does nothing on the program's launching threads except hand CUPTI a
 * buffer from a pool (zeroed in advance, so CUPTI need not zero it there). Records are read in
 * CUPTI's buffer-completed callback, which CUPTI runs on its worker thread: per record it copies
 * seven fields into a staging array; a kernel name is looked up by pointer (CUPTI shares one
 * string among a kernel's records) and written once. One write() per staged batch.
 *
 * What ran before a crash is kept: each completed buffer is written at once, a background
 * thread asks CUPTI for completed buffers every $ARCHLINE_CUPTI_FLUSH_MS ms (default 1000; 0
 * turns it off), and exit() forces out the rest and writes the end clock pairs.
 *
 * Duty cycle: $ARCHLINE_CUPTI_DUTY_MS="ON,PERIOD" traces for ON ms of every PERIOD ms, for
 * programs whose kernels are so short that CUPTI's own per-launch cost (about 1 us on Hopper)
 * would slow them down. A thread switches tracing and marks each switch. How it switches off
 * is set by $ARCHLINE_CUPTI_DUTY_MODE:
 *   detach (default): disable the activity kinds, flush, then detach CUPTI from the process with
 *     cuptiFinalize, called (as CUPTI asks) at the exit of the program's next CUDA API call, from
 *     a callback enabled only for that; switching on attaches CUPTI again. While detached, CUPTI
 *     costs the program nothing. Each off-switch also writes end clock pairs (the reader uses
 *     the last set), as no CUPTI call may be made while detached: it would attach CUPTI again.
 *   disable: only disable and enable the activity kinds; CUPTI stays attached, and part of its
 *     per-launch cost with it.
 * In detach mode the periodic flush thread is not started: a flush racing cuptiFinalize can
 * crash; each off-switch flushes instead, and CUPTI's own flush period runs while attached.
 * $ARCHLINE_CUPTI_DUTY_AUTO="PROBE_MS,RATE" (with a duty cycle) traces in full and starts cycling
 * as soon as the records show more than RATE x PROBE_MS / 1000 kernels, copies and memsets starting
 * within one PROBE_MS window (by their own timestamps); else stays traced. While it probes, CUPTI
 * gets small buffers, so that records reach the library (and the decision) within a few thousand
 * launches rather than one full 8 MB buffer (about 39 000 kernel records).
 *
 * Build: cc -shared -fPIC -O2 -Wall -Wextra -I<cupti include> -I<cuda include> cupti_inject.c \
 *           -L<cupti lib> -l:libcupti.so.13 -Wl,-rpath,<cupti lib> -lpthread -ldl
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 KernelRecord;
typedef CUpti_ActivityMemcpy6 MemcpyRecord;
#else
typedef CUpti_ActivityKernel9 KernelRecord;
typedef CUpti_ActivityMemcpy5 MemcpyRecord;
#endif
typedef CUpti_ActivityMemset4 MemsetRecord;
typedef CUpti_ActivityDevice5 DeviceRecord;

enum {
  CHUNK_CLOCK_START = 1,
  CHUNK_CLOCK_END = 2,
  CHUNK_ACTIVITIES = 3,
  CHUNK_NAMES = 4,
  CHUNK_DROPPED = 5,
  CHUNK_ERROR = 6,
  CHUNK_TRACE_ON = 7,
  CHUNK_TRACE_OFF = 8,
  CHUNK_DETACH = 9,
  CHUNK_INCOMPLETE = 10,
  CHUNK_PROCESS = 11,
  CHUNK_DEVICES = 12,
};
enum { ACT_KERNEL = 1, ACT_MEMCPY = 2, ACT_MEMSET = 3 };

struct chunk_header {
  char magic[4];
  uint32_t type;
  uint32_t count;
  uint32_t bytes;
};

struct act_rec {
  uint8_t kind;      /* ACT_* */
  uint8_t copy_kind; /* memcpy: CUpti_ActivityMemcpyKind */
  uint16_t reserved0;
  uint32_t name_id; /* kernel: id from a NAMES chunk; 0 = no name */
  uint64_t start_ns;
  uint64_t end_ns;
  uint32_t stream;
  uint32_t correlation;
  uint32_t device;
  uint32_t reserved1;
  uint64_t bytes;
};

enum { DEV_FROM_CUPTI = 1, DEV_FROM_DRIVER = 2 };
struct dev_rec {
  uint32_t id;          /* the device id of activity records */
  uint8_t source;       /* DEV_FROM_* */
  uint8_t cuda_visible; /* CUPTI: the device is visible to CUDA in this process; driver: 1 */
  uint16_t reserved;
  uint8_t uuid[16]; /* CUuuid bytes: "GPU-" + 8-4-4-4-12 hex digits is NVML's form */
  char name[64];    /* NUL-terminated, cut to 63 bytes */
};
_Static_assert(sizeof(struct chunk_header) == 16, "chunk header is 16 bytes");
_Static_assert(sizeof(struct act_rec) == 48, "activity record is 48 bytes");
_Static_assert(sizeof(struct dev_rec) == 88, "device record is 88 bytes");

#define BUFFER_BYTES (8u << 20)
/* While the automatic duty cycle probes: about 4 800 kernel records (216 bytes each, CUDA 13). */
#define PROBE_BUFFER_BYTES (1u << 20)
#define POOL_MAX 8
#define ACT_BATCH 8192
#define NAMES_BYTES (256u << 10)
#define NAME_MAX_CHARS 4096
#define CLOCK_PAIRS 7
#define DEFAULT_FLUSH_MS 1000L
/* CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER; by number, as older headers lack the name. */
#define ATTR_ZEROED_OUT_ACTIVITY_BUFFER ((CUpti_ActivityAttribute)5)

/* The output file and the staging below are guarded by out_mu. */
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;
static int out_fd = -1;
static pid_t owner_pid = 0;
static struct act_rec acts[ACT_BATCH];
static uint32_t n_acts = 0;
static uint8_t names_buf[NAMES_BYTES];
static uint32_t names_len = 0;
static uint32_t n_names = 0;

struct name_slot {
  const char *ptr; /* CUPTI's string */
  char *copy;      /* our copy, to notice a pointer reused for another name */
  uint32_t id;
};
static struct name_slot *name_table = NULL;
static size_t name_cap = 0;
static size_t name_used = 0;
static uint32_t next_name_id = 1;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *pool[POOL_MAX]; /* buffers of BUFFER_BYTES */
static int pool_n = 0;
static uint8_t *probe_pool[POOL_MAX]; /* buffers of PROBE_BUFFER_BYTES */
static int probe_pool_n = 0;

/* The automatic duty cycle's probe ($ARCHLINE_CUPTI_DUTY_AUTO). auto_probing: 1 while it probes
 * (atomic; the buffer size follows it). The window (out_mu): a tumbling window of auto_probe_ns of
 * the records' own start times; more than auto_win_max records in one window fires the probe. */
static int auto_probing = 0;
static int auto_fired = 0; /* atomic: the probe saw a launch-bound window */
static uint64_t auto_probe_ns = 0;
static uint64_t auto_win_max = 0;
static uint64_t auto_win_start = 0;
static uint64_t auto_win_n = 0;
static void auto_wake(void);

static pthread_mutex_t flush_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t flush_cv = PTHREAD_COND_INITIALIZER;
static pthread_t flusher;
static int flusher_running = 0;
static int flush_stop = 0;

static int initialized = 0;

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- output (out_mu held) */

static void write_all(struct iovec *iov, int n) {
  int i = 0;
  while (out_fd >= 0 && i < n) {
    ssize_t w = writev(out_fd, iov + i, n - i);
    if (w < 0) {
      if (errno == EINTR) continue;
      /* Disk full or similar: stop recording, never disturb the program. */
      close(out_fd);
      out_fd = -1;
      return;
    }
    size_t left = (size_t)w;
    while (i < n && left >= iov[i].iov_len) {
      left -= iov[i].iov_len;
      ++i;
    }
    if (i < n) {
      iov[i].iov_base = (char *)iov[i].iov_base + left;
      iov[i].iov_len -= left;
    }
  }
}

static void write_chunk(uint32_t type, uint32_t count, const void *payload, uint32_t bytes) {
  struct chunk_header h = {{'A', 'L', 'C', '1'}, type, count, bytes};
  struct iovec iov[2];
  iov[0].iov_base = &h;
  iov[0].iov_len = sizeof h;
  iov[1].iov_base = (void *)payload;
  iov[1].iov_len = bytes;
  write_all(iov, bytes > 0 ? 2 : 1);
}

static void flush_names(void) {
  if (n_names == 0) return;
  write_chunk(CHUNK_NAMES, n_names, names_buf, names_len);
  n_names = 0;
  names_len = 0;
}

/* Names go out first: a record may only refer to a name already in the file. */
static void flush_acts(void) {
  flush_names();
  if (n_acts == 0) return;
  write_chunk(CHUNK_ACTIVITIES, n_acts, acts, n_acts * (uint32_t)sizeof(struct act_rec));
  n_acts = 0;
}

static void clock_pairs(uint32_t type) {
  /* Several pairs: the reader keeps the one read in the shortest time. */
  uint64_t pairs[CLOCK_PAIRS][3];
  for (int i = 0; i < CLOCK_PAIRS; ++i) {
    uint64_t cupti_ns = 0;
    uint64_t before = realtime_ns();
    cuptiGetTimestamp(&cupti_ns);
    uint64_t after = realtime_ns();
    pairs[i][0] = before;
    pairs[i][1] = cupti_ns;
    pairs[i][2] = after;
  }
  write_chunk(type, CLOCK_PAIRS, pairs, (uint32_t)sizeof pairs);
}

static void report_error(const char *call, CUptiResult res) {
  const char *msg = "unknown";
  cuptiGetResultString(res, &msg);
  char text[1024];
  int n = snprintf(text, sizeof text, "%s\t%d\t%s", call, (int)res, msg);
  if (n < 0) return;
  size_t len = (size_t)n < sizeof text ? (size_t)n : sizeof text - 1;
  size_t padded = (len + 8) & ~(size_t)7; /* at least one NUL */
  if (padded > sizeof text) padded = sizeof text;
  memset(text + len, 0, padded - len);
  pthread_mutex_lock(&out_mu);
  write_chunk(CHUNK_ERROR, 1, text, (uint32_t)padded);
  pthread_mutex_unlock(&out_mu);
}

/* ---------------------------------------------------------------- kernel names (out_mu held) */

static size_t hash_ptr(const char *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x;
}

static int grow_names(void) {
  size_t cap = name_cap ? 2 * name_cap : 1024;
  struct name_slot *t = calloc(cap, sizeof *t);
  if (t == NULL) return 0;
  for (size_t i = 0; i < name_cap; ++i) {
    if (name_table[i].ptr == NULL) continue;
    size_t j = hash_ptr(name_table[i].ptr) & (cap - 1);
    while (t[j].ptr != NULL) j = (j + 1) & (cap - 1);
    t[j] = name_table[i];
  }
  free(name_table);
  name_table = t;
  name_cap = cap;
  return 1;
}

/* The id of a kernel name; the first time, the name is staged for the next NAMES chunk. */
static uint32_t name_id(const char *name) {
  if (name == NULL) return 0;
  if (2 * (name_used + 1) > name_cap && !grow_names()) return 0;
  size_t mask = name_cap - 1;
  size_t j = hash_ptr(name) & mask;
  while (name_table[j].ptr != NULL) {
    if (name_table[j].ptr == name) {
      if (strncmp(name_table[j].copy, name, NAME_MAX_CHARS - 1) == 0) return name_table[j].id;
      break; /* the pointer now holds another name (a module was unloaded): new id, same slot */
    }
    j = (j + 1) & mask;
  }
  size_t len = strnlen(name, NAME_MAX_CHARS - 1);
  char *copy = malloc(len + 1);
  if (copy == NULL) return 0;
  memcpy(copy, name, len);
  copy[len] = '\0';
  uint32_t entry = (uint32_t)((8 + len + 7) & ~(size_t)7);
  if (entry > NAMES_BYTES - names_len) flush_names();
  if (name_table[j].ptr != NULL) {
    free(name_table[j].copy);
  } else {
    ++name_used;
  }
  uint32_t id = next_name_id++;
  name_table[j].ptr = name;
  name_table[j].copy = copy;
  name_table[j].id = id;
  uint8_t *e = names_buf + names_len;
  uint32_t len32 = (uint32_t)len;
  memcpy(e, &id, 4);
  memcpy(e + 4, &len32, 4);
  memcpy(e + 8, name, len);
  memset(e + 8 + len, 0, entry - 8 - len);
  names_len += entry;
  ++n_names;
  return id;
}

/* ---------------------------------------------------------------- devices */

/* Device ids up to MAX_DEVICES - 1 are tracked (a node has at most 8 to 16 GPUs). */
#define MAX_DEVICES 64
static uint64_t devices_seen = 0;  /* ids in activity records (out_mu) */
static uint64_t devices_known = 0; /* ids with a CUDA-visible DEVICES record written (out_mu) */

/* out_mu held. */
static void write_device(uint32_t id, uint8_t source, uint8_t visible, const void *uuid, const char *name) {
  struct dev_rec d;
  memset(&d, 0, sizeof d);
  d.id = id;
  d.source = source;
  d.cuda_visible = visible;
  memcpy(d.uuid, uuid, sizeof d.uuid);
  if (name != NULL) strncpy(d.name, name, sizeof d.name - 1);
  write_chunk(CHUNK_DEVICES, 1, &d, (uint32_t)sizeof d);
  if (visible && id < MAX_DEVICES) devices_known |= 1ull << id;
}

typedef int (*cu_device_get_t)(int *, int);
typedef int (*cu_device_get_uuid_t)(CUuuid *, int);
typedef int (*cu_device_get_name_t)(char *, int, int);

/* A driver function from the libcuda the program has loaded (nothing here links against it). */
static void *driver_symbol(const char *name) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  void *sym = h != NULL ? dlsym(h, name) : NULL;
  if (h != NULL) dlclose(h);
  return sym != NULL ? sym : dlsym(RTLD_DEFAULT, name);
}

/* Device ids seen in records that no CUPTI device record named: ask the driver for their UUIDs.
 * CUPTI's device id is the CUDA ordinal of this process, so cuDeviceGet(id) is that device.
 * Called from the background threads and at exit, never with out_mu held across a driver call. */
static void resolve_devices(void) {
  pthread_mutex_lock(&out_mu);
  uint64_t missing = out_fd >= 0 ? devices_seen & ~devices_known : 0;
  pthread_mutex_unlock(&out_mu);
  if (missing == 0) return;
  cu_device_get_t get = (cu_device_get_t)driver_symbol("cuDeviceGet");
  cu_device_get_uuid_t uuid_of = (cu_device_get_uuid_t)driver_symbol("cuDeviceGetUuid_v2");
  if (uuid_of == NULL) uuid_of = (cu_device_get_uuid_t)driver_symbol("cuDeviceGetUuid");
  cu_device_get_name_t name_of = (cu_device_get_name_t)driver_symbol("cuDeviceGetName");
  if (get == NULL || uuid_of == NULL) return;
  for (uint32_t id = 0; id < MAX_DEVICES; ++id) {
    if (!((missing >> id) & 1)) continue;
    int dev = 0;
    CUuuid u;
    char name[64] = {0};
    if (get(&dev, (int)id) != 0 || uuid_of(&u, dev) != 0) continue;
    if (name_of == NULL || name_of(name, (int)sizeof name, dev) != 0) name[0] = '\0';
    pthread_mutex_lock(&out_mu);
    if (out_fd >= 0 && !((devices_known >> id) & 1)) write_device(id, DEV_FROM_DRIVER, 1, u.bytes, name);
    pthread_mutex_unlock(&out_mu);
  }
}

/* ---------------------------------------------------------------- CUPTI callbacks */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  /* Runs on the thread that needs the buffer, possibly the launching one: only a pool pop. */
  int small = __atomic_load_n(&auto_probing, __ATOMIC_RELAXED);
  size_t bytes = small ? PROBE_BUFFER_BYTES : BUFFER_BYTES;
  uint8_t *b = NULL;
  pthread_mutex_lock(&pool_mu);
  if (small && probe_pool_n > 0) b = probe_pool[--probe_pool_n];
  if (!small && pool_n > 0) b = pool[--pool_n];
  pthread_mutex_unlock(&pool_mu);
  if (b == NULL) b = calloc(1, bytes); /* fresh pages are zero: no memset here */
  *buffer = b;
  *size = b != NULL ? bytes : 0;
  *max_records = 0;
}

static void recycle(uint8_t *buffer, size_t size) {
  if (size == BUFFER_BYTES || size == PROBE_BUFFER_BYTES) {
    memset(buffer, 0, size); /* here, on CUPTI's thread, rather than on a launching one */
    int small = size == PROBE_BUFFER_BYTES;
    uint8_t **p = small ? probe_pool : pool;
    int *n = small ? &probe_pool_n : &pool_n;
    pthread_mutex_lock(&pool_mu);
    /* Probe buffers are kept only while the probe may still ask for them. */
    if (*n < POOL_MAX && !(small && !__atomic_load_n(&auto_probing, __ATOMIC_RELAXED))) {
      p[(*n)++] = buffer;
      buffer = NULL;
    }
    pthread_mutex_unlock(&pool_mu);
  }
  free(buffer);
}

/* One traced record starting at start_ns, while probing (out_mu held). Returns 1 when it fires. */
static int auto_count(uint64_t start_ns) {
  if (auto_win_n == 0 || start_ns >= auto_win_start + auto_probe_ns) {
    auto_win_start = start_ns;
    auto_win_n = 0;
  }
  if (++auto_win_n <= auto_win_max) return 0;
  __atomic_store_n(&auto_probing, 0, __ATOMIC_RELEASE); /* full-size buffers from now on */
  __atomic_store_n(&auto_fired, 1, __ATOMIC_RELEASE);
  return 1;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
                                      size_t valid_size) {
  CUpti_Activity *rec = NULL;
  uint64_t incomplete = 0;
  int probing = __atomic_load_n(&auto_probing, __ATOMIC_ACQUIRE);
  int fired = 0;
  pthread_mutex_lock(&out_mu);
  while (out_fd >= 0 && cuptiActivityGetNextRecord(buffer, valid_size, &rec) == CUPTI_SUCCESS) {
    struct act_rec *a = &acts[n_acts];
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const KernelRecord *k = (const KernelRecord *)rec;
        memset(a, 0, sizeof *a);
        a->kind = ACT_KERNEL;
        a->name_id = name_id(k->name);
        a->start_ns = k->start;
        a->end_ns = k->end;
        a->stream = k->streamId;
        a->correlation = k->correlationId;
        a->device = k->deviceId;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const MemcpyRecord *m = (const MemcpyRecord *)rec;
        memset(a, 0, sizeof *a);
        a->kind = ACT_MEMCPY;
        a->copy_kind = (uint8_t)m->copyKind;
        a->start_ns = m->start;
        a->end_ns = m->end;
        a->stream = m->streamId;
        a->correlation = m->correlationId;
        a->device = m->deviceId;
        a->bytes = m->bytes;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const MemsetRecord *s = (const MemsetRecord *)rec;
        memset(a, 0, sizeof *a);
        a->kind = ACT_MEMSET;
        a->start_ns = s->start;
        a->end_ns = s->end;
        a->stream = s->streamId;
        a->correlation = s->correlationId;
        a->device = s->deviceId;
        a->bytes = s->bytes;
        break;
      }
      case CUPTI_ACTIVITY_KIND_DEVICE: {
        /* Dumped again at every attach of a duty cycle: each CUDA-visible device is written once. */
        const DeviceRecord *d = (const DeviceRecord *)rec;
        int known = d->id < MAX_DEVICES && ((devices_known >> d->id) & 1);
        if (!(known && d->isCudaVisible))
          write_device(d->id, DEV_FROM_CUPTI, d->isCudaVisible ? 1 : 0, d->uuid.bytes, d->name);
        continue;
      }
      default:
        continue;
    }
    if (a->start_ns == 0 || a->end_ns < a->start_ns) {
      ++incomplete; /* caught in flight by a forced flush: not staged */
      continue;
    }
    if (a->device < MAX_DEVICES) devices_seen |= 1ull << a->device;
    if (probing && auto_count(a->start_ns)) {
      probing = 0;
      fired = 1;
    }
    if (++n_acts == ACT_BATCH) flush_acts();
  }
  flush_acts();
  if (incomplete > 0 && out_fd >= 0) write_chunk(CHUNK_INCOMPLETE, 0, &incomplete, (uint32_t)sizeof incomplete);
  size_t dropped = 0;
  if (out_fd >= 0 && cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS &&
      dropped > 0) {
    uint64_t d = (uint64_t)dropped;
    write_chunk(CHUNK_DROPPED, 0, &d, (uint32_t)sizeof d);
  }
  pthread_mutex_unlock(&out_mu);
  recycle(buffer, size);
  if (fired) auto_wake(); /* no lock held: the duty thread may be the one flushing */
}

/* ---------------------------------------------------------------- periodic flush */

/* A background thread with every signal blocked: the program's signals must keep going to its
 * own threads. Returns 1 if it started. */
static int spawn(pthread_t *t, void *(*fn)(void *), void *arg) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int ok = pthread_create(t, NULL, fn, arg) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return ok;
}

/* The CLOCK_REALTIME time ms milliseconds from now, for pthread_cond_timedwait. */
static struct timespec deadline(long ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec += 1;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

/* Ask a thread that waits on cv to stop, and join it. */
static void stop_thread(int *running, pthread_t *t, pthread_mutex_t *mu, pthread_cond_t *cv, int *stop) {
  if (!*running) return;
  pthread_mutex_lock(mu);
  __atomic_store_n(stop, 1, __ATOMIC_RELEASE);
  pthread_cond_signal(cv);
  pthread_mutex_unlock(mu);
  pthread_join(*t, NULL);
  *running = 0;
}

static void *flush_loop(void *arg) {
  long ms = (long)(intptr_t)arg;
  pthread_mutex_lock(&flush_mu);
  while (!flush_stop) {
    struct timespec ts = deadline(ms);
    pthread_cond_timedwait(&flush_cv, &flush_mu, &ts);
    if (flush_stop) break;
    pthread_mutex_unlock(&flush_mu);
    /* Not forced: only buffers whose records are all complete, so nothing is cut short. */
    cuptiActivityFlushAll(0);
    resolve_devices();
    pthread_mutex_lock(&flush_mu);
  }
  pthread_mutex_unlock(&flush_mu);
  return NULL;
}

static void start_flusher(void) {
  long ms = DEFAULT_FLUSH_MS;
  const char *env = getenv("ARCHLINE_CUPTI_FLUSH_MS");
  if (env != NULL && env[0] != '\0') {
    char *end = NULL;
    long v = strtol(env, &end, 10);
    if (end != env && v >= 0) ms = v;
  }
  if (ms == 0) return;
  flusher_running = spawn(&flusher, flush_loop, (void *)(intptr_t)ms);
}

/* ---------------------------------------------------------------- duty cycle */

static pthread_t duty_thread;
static int duty_running = 0;
static int duty_stop = 0;
static long duty_on_ms = 0, duty_period_ms = 0;
static int duty_detach = 1; /* $ARCHLINE_CUPTI_DUTY_MODE: 1 = detach, 0 = disable */
static pthread_mutex_t duty_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t duty_cv = PTHREAD_COND_INITIALIZER;
static const CUpti_ActivityKind traced_kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                                  CUPTI_ACTIVITY_KIND_MEMSET};

/* Detaching: the duty thread asks, the program's next CUDA API exit calls cuptiFinalize. Only the
 * duty thread calls CUPTI from the request until the answer, and never while detached. */
static pthread_mutex_t detach_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t detach_cv = PTHREAD_COND_INITIALIZER;
static int detach_requested = 0; /* atomic: 0 no, 1 asked, 2 claimed by a callback (finalizing) */
static int detach_done = 0;      /* set with the lock held: 1 detached, -1 cuptiFinalize failed */
static CUptiResult detach_result = CUPTI_SUCCESS;
static uint64_t detach_finalize_ns = 0;
static CUpti_SubscriberHandle subscriber = NULL;
static int attached = 1; /* duty thread only (and exit, after joining it): CUPTI attached */
#define DETACH_POLL_MS 5

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void mark(uint32_t type, uint64_t a, uint64_t b) {
  uint64_t rec[2] = {a, b};
  pthread_mutex_lock(&out_mu);
  if (out_fd >= 0) write_chunk(type, 1, rec, (uint32_t)sizeof rec);
  pthread_mutex_unlock(&out_mu);
}

static void set_kinds(int on) {
  for (size_t i = 0; i < sizeof traced_kinds / sizeof traced_kinds[0]; ++i) {
    CUptiResult r = on ? cuptiActivityEnable(traced_kinds[i]) : cuptiActivityDisable(traced_kinds[i]);
    if (r != CUPTI_SUCCESS) report_error(on ? "cuptiActivityEnable" : "cuptiActivityDisable", r);
  }
}

static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const void *cbdata) {
  (void)userdata;
  (void)cbid;
  /* Runs on the program's threads around every CUDA API call, but only while a detach is asked
   * (detach_requested 1). One thread claims it (1 -> 2) and calls cuptiFinalize holding no lock:
   * other threads, or a callback raised inside cuptiFinalize itself, find 2 and return at once. */
  if (__atomic_load_n(&detach_requested, __ATOMIC_ACQUIRE) != 1) return;
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  if (((const CUpti_CallbackData *)cbdata)->callbackSite != CUPTI_API_EXIT) return;
  int asked = 1;
  if (!__atomic_compare_exchange_n(&detach_requested, &asked, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
  uint64_t t0 = monotonic_ns();
  CUptiResult r = cuptiFinalize();
  uint64_t took = monotonic_ns() - t0;
  pthread_mutex_lock(&detach_mu);
  detach_result = r;
  detach_finalize_ns = took;
  detach_done = r == CUPTI_SUCCESS ? 1 : -1;
  __atomic_store_n(&detach_requested, 0, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&detach_cv);
  pthread_mutex_unlock(&detach_mu);
}

static int stopping(void) { return __atomic_load_n(&duty_stop, __ATOMIC_ACQUIRE); }

static void callbacks_off(void) {
  cuptiEnableDomain(0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
  cuptiEnableDomain(0, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
}

/* Detach CUPTI (tracing already off). Returns 1 if it detached. */
static int detach(void) {
  /* Let kernels launched before the switch finish, so their records are complete, then hand
   * every buffer back: nothing may stay with CUPTI when it is torn down. */
  struct timespec settle = {0, 10 * 1000000L};
  nanosleep(&settle, NULL);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  /* End clock pairs now: none can be read while detached, nor at exit if detached then. */
  pthread_mutex_lock(&out_mu);
  clock_pairs(CHUNK_CLOCK_END);
  pthread_mutex_unlock(&out_mu);
  CUptiResult r = cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
  if (r == CUPTI_SUCCESS) r = cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
  if (r != CUPTI_SUCCESS) {
    report_error("cuptiEnableDomain", r);
    callbacks_off();
    return 0;
  }
  uint64_t t0 = monotonic_ns();
  pthread_mutex_lock(&detach_mu);
  detach_done = 0;
  __atomic_store_n(&detach_requested, 1, __ATOMIC_RELEASE);
  while (detach_done == 0) {
    if (stopping()) {
      /* Exiting: withdraw the request, unless a callback has claimed it (then wait for it). */
      int asked = 1;
      if (__atomic_compare_exchange_n(&detach_requested, &asked, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) break;
    }
    /* Polled, so that a program that has stopped calling CUDA does not hold up its own exit. */
    struct timespec ts = deadline(DETACH_POLL_MS);
    pthread_cond_timedwait(&detach_cv, &detach_mu, &ts);
  }
  int done = detach_done;
  CUptiResult res = detach_result;
  uint64_t fin = detach_finalize_ns;
  pthread_mutex_unlock(&detach_mu);
  if (done == 0) {
    /* Exiting before the program made another CUDA call: stay attached, callbacks off. */
    callbacks_off();
    return 0;
  }
  if (done < 0) {
    /* Still attached: callbacks off, or they would cost every later CUDA call. */
    report_error("cuptiFinalize", res);
    callbacks_off();
    return 0;
  }
  subscriber = NULL;
  mark(CHUNK_DETACH, monotonic_ns() - t0, fin);
  return 1;
}

static int subscribe(void) {
  CUptiResult r = cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_api, NULL);
  if (r != CUPTI_SUCCESS) {
    /* Another tool holds CUPTI's one subscriber slot: switch by disabling only. */
    report_error("cuptiSubscribe", r);
    subscriber = NULL;
    return 0;
  }
  return 1;
}

static int start_tracing(void);

/* Off-switches made so far (atomic): the CPU tests' harness waits for enough of them instead of a fixed time. */
static int trace_offs = 0;

static void set_tracing(int on) {
  /* On: enable, then stamp (all after the stamp is traced). Off: stamp, then disable. */
  if (!on && !attached) return; /* nothing to switch off, and no CUPTI call while detached */
  uint64_t stamp = 0;
  if (!on) cuptiGetTimestamp(&stamp);
  uint64_t t0 = monotonic_ns();
  if (on && !attached) {
    int ok = start_tracing();
    attached = 1; /* its first call attached CUPTI, whether or not the rest worked */
    if (!ok) {
      set_kinds(0); /* failed (reported): tracing stays off until the next on-switch */
      return;
    }
    if (duty_detach) subscribe();
  } else {
    set_kinds(on);
  }
  uint64_t took = monotonic_ns() - t0;
  if (on) cuptiGetTimestamp(&stamp);
  mark(on ? CHUNK_TRACE_ON : CHUNK_TRACE_OFF, stamp, took);
  if (!on) __atomic_add_fetch(&trace_offs, 1, __ATOMIC_RELEASE); /* marked (a detach may then wait for a call) */
  if (!on && duty_detach && subscriber != NULL && detach()) attached = 0;
}

/* Automatic duty cycle ($ARCHLINE_CUPTI_DUTY_AUTO="PROBE_MS,RATE"): trace in full until the records
 * themselves show a launch-bound phase (auto_count, in buffer_completed: more than RATE x PROBE_MS
 * records starting within one PROBE_MS window), then cycle at once. The decision follows the data,
 * not a timer: the earlier version counted records handed over in each PROBE_MS window of wall
 * time, and CUPTI hands a buffer over only when it is full or all its records are complete, so a
 * launch-bound program whose first 8 MB buffer was not full at the end of the first window read
 * as idle and stayed traced. Until it fires, this thread flushes CUPTI's complete buffers every
 * PROBE_MS, in place of the flush thread (which must not run in detach mode: a flush racing
 * cuptiFinalize can crash). */
static long auto_probe_ms = 0;

static int auto_has_fired(void) { return __atomic_load_n(&auto_fired, __ATOMIC_ACQUIRE); }

/* Wake the duty thread: the probe fired (called from buffer_completed, holding no lock). */
static void auto_wake(void) {
  pthread_mutex_lock(&duty_mu);
  pthread_cond_broadcast(&duty_cv);
  pthread_mutex_unlock(&duty_mu);
}

static void *duty_loop(void *arg) {
  (void)arg;
  int on = 1;
  int probing = auto_probe_ms > 0;
  pthread_mutex_lock(&duty_mu);
  while (!duty_stop) {
    long ms = probing ? auto_probe_ms : on ? duty_on_ms : duty_period_ms - duty_on_ms;
    struct timespec ts = deadline(ms);
    int timed_out = 0;
    while (!duty_stop && !timed_out && !(probing && auto_has_fired()))
      timed_out = pthread_cond_timedwait(&duty_cv, &duty_mu, &ts) == ETIMEDOUT;
    if (duty_stop) break;
    pthread_mutex_unlock(&duty_mu);
    resolve_devices();
    if (probing) {
      /* Buffers whose records are all complete: their records may fire the probe. */
      if (!auto_has_fired()) cuptiActivityFlushAll(0);
      probing = !auto_has_fired();
      pthread_mutex_lock(&duty_mu);
      if (probing) continue; /* still traced in full: probe on */
      pthread_mutex_unlock(&duty_mu);
    }
    on = !on;
    set_tracing(on);
    pthread_mutex_lock(&duty_mu);
  }
  pthread_mutex_unlock(&duty_mu);
  return NULL;
}

/* Parse $ARCHLINE_CUPTI_DUTY_MS (and the mode); returns 1 if a duty cycle is asked for. */
static int duty_config(void) {
  const char *env = getenv("ARCHLINE_CUPTI_DUTY_MS");
  if (env == NULL || env[0] == '\0') return 0;
  long on = 0, period = 0;
  if (sscanf(env, "%ld,%ld", &on, &period) != 2 || on <= 0 || period <= on) return 0;
  duty_on_ms = on;
  duty_period_ms = period;
  const char *mode = getenv("ARCHLINE_CUPTI_DUTY_MODE");
  duty_detach = !(mode != NULL && strcmp(mode, "disable") == 0);
  const char *aut = getenv("ARCHLINE_CUPTI_DUTY_AUTO");
  long probe = 0;
  double rate = 0.0;
  if (aut != NULL && sscanf(aut, "%ld,%lf", &probe, &rate) == 2 && probe > 0 && rate >= 0) {
    auto_probe_ms = probe;
    auto_probe_ns = (uint64_t)probe * 1000000ull;
    double most = rate * (double)probe / 1e3; /* records one window may hold without cycling */
    auto_win_max = most < 1.8e19 ? (uint64_t)most : UINT64_MAX;
    __atomic_store_n(&auto_probing, 1, __ATOMIC_RELEASE);
  }
  return 1;
}

static void start_duty(void) {
  if (duty_detach && !subscribe()) duty_detach = 0;
  uint64_t stamp = 0;
  cuptiGetTimestamp(&stamp);
  mark(CHUNK_TRACE_ON, stamp, 0);
  duty_running = spawn(&duty_thread, duty_loop, NULL);
}

static void stop_duty(void) { stop_thread(&duty_running, &duty_thread, &duty_mu, &duty_cv, &duty_stop); }

static void stop_flusher(void) { stop_thread(&flusher_running, &flusher, &flush_mu, &flush_cv, &flush_stop); }

/* ---------------------------------------------------------------- start and exit */

static void at_exit(void) {
  /* A child forked after initialisation shares our file but has no flusher thread: leave both. */
  if (getpid() != owner_pid) return;
  stop_duty();
  stop_flusher();
  if (out_fd < 0) return;
  /* Detached by the duty cycle: any CUPTI call would attach it again, and nothing is pending. */
  if (attached) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  resolve_devices();
  pthread_mutex_lock(&out_mu);
  flush_acts();
  if (attached) clock_pairs(CHUNK_CLOCK_END);
  if (out_fd >= 0) close(out_fd);
  out_fd = -1;
  pthread_mutex_unlock(&out_mu);
}

#define CHECK(call)              \
  do {                           \
    CUptiResult _res = (call);   \
    if (_res != CUPTI_SUCCESS) { \
      report_error(#call, _res); \
      return 0;                  \
    }                            \
  } while (0)

static int start_tracing(void) {
  /* Best effort: a CUPTI that does not know the attribute zeroes buffers itself. */
  uint8_t zeroed = 1;
  size_t zeroed_size = sizeof zeroed;
  (void)cuptiActivitySetAttribute(ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &zeroed_size, &zeroed);
  CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
  CHECK(cuptiActivityFlushPeriod(500));
  /* Which GPU each device id is. CUPTI emits its device records during driver initialisation,
   * which is under way (this runs inside cuInit); EnableAndDump hands over those already made.
   * A failure costs only the driver fallback (resolve_devices). */
#if CUPTI_API_VERSION >= 130000
  CUptiResult dev = cuptiActivityEnableAndDump(CUPTI_ACTIVITY_KIND_DEVICE);
  if (dev != CUPTI_SUCCESS) dev = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE);
#else
  CUptiResult dev = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE);
#endif
  if (dev != CUPTI_SUCCESS) report_error("cuptiActivityEnable(DEVICE)", dev);
  return 1;
}

/* The launcher's variables that say which rank a process is, written in the PROCESS chunk. */
static const char *const process_vars[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
    "SLURM_PROCID", "SLURM_LOCALID", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
};

/* out_mu held. */
static void write_process(void) {
  char text[4096];
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  int n = snprintf(text, sizeof text, "pid=%ld\tppid=%ld\thost=%s", (long)getpid(), (long)getppid(), host);
  for (size_t i = 0; i < sizeof process_vars / sizeof process_vars[0] && n > 0 && (size_t)n < sizeof text; ++i) {
    const char *v = getenv(process_vars[i]);
    if (v != NULL) n += snprintf(text + n, sizeof text - (size_t)n, "\t%s=%s", process_vars[i], v);
  }
  if (n < 0) return;
  size_t len = (size_t)n < sizeof text ? (size_t)n : sizeof text - 1;
  size_t padded = (len + 8) & ~(size_t)7; /* at least one NUL */
  if (padded > sizeof text) padded = sizeof text;
  memset(text + len, 0, padded - len);
  write_chunk(CHUNK_PROCESS, 1, text, (uint32_t)padded);
}

/* This process's own file; exclusive, so that a reused pid never truncates another's. */
static int open_output(const char *dir) {
  char path[4096];
  uint64_t stamp = realtime_ns();
  for (int attempt = 0; attempt < 16; ++attempt) {
    int n = snprintf(path, sizeof path, "%s/cupti-%ld-%llu.bin", dir, (long)getpid(),
                     (unsigned long long)(stamp + (uint64_t)attempt));
    if (n < 0 || (size_t)n >= sizeof path) return -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

int InitializeInjection(void) {
  /* Always report success: a tracing failure must never stop the program itself. */
  if (initialized) return 1;
  initialized = 1;
  const char *dir = getenv("ARCHLINE_CUPTI_OUT");
  if (dir == NULL || dir[0] == '\0') return 1;
  int fd = open_output(dir);
  if (fd < 0) return 1;
  pthread_mutex_lock(&out_mu);
  out_fd = fd;
  owner_pid = getpid();
  write_process();
  clock_pairs(CHUNK_CLOCK_START);
  pthread_mutex_unlock(&out_mu);
  int duty = duty_config();
  if (start_tracing()) {
    if (duty) start_duty(); /* first: it falls back to disable mode if it cannot subscribe */
    if (!(duty && duty_detach)) start_flusher();
  }
  atexit(at_exit);
  return 1;
}
