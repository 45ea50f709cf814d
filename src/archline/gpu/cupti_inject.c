/*
 * archline's CUDA injection library: records the kernel, memcpy and memset timeline of any
 * CUDA program with CUPTI's activity API and writes it, as it goes, to a text file.
 *
 * The CUDA driver loads it when CUDA_INJECTION64_PATH names it and calls InitializeInjection()
 * during cuInit. Records go to $ARCHLINE_CUPTI_OUT/cupti-<pid>.tsv, one tab-separated line each:
 *   C  host_before_ns  cupti_ns  host_after_ns  start|end     clock pairs (CLOCK_REALTIME vs CUPTI)
 *   K  start_ns  end_ns  stream  correlation  device  0      name     a kernel
 *   M  start_ns  end_ns  stream  correlation  device  bytes  copykind a memcpy
 *   S  start_ns  end_ns  stream  correlation  device  bytes           a memset
 *   D  dropped                                                         records CUPTI dropped
 *   E  call  result  message                                           a CUPTI call that failed
 * Buffers are written whenever CUPTI completes one (and at least every 500 ms), so a program
 * that crashes still leaves what ran before.
 *
 * Build: cc -shared -fPIC -O2 -I<cupti include> -I<cuda include> cupti_inject.c \
 *           -L<cupti lib> -l:libcupti.so.13 -Wl,-rpath,<cupti lib> -lpthread
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#define BUFFER_BYTES (8u << 20)
#define RECORD_ALIGN 8
#define NAME_MAX_CHARS 4096

static FILE *out_fp = NULL;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized = 0;

static uint64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void report_error(const char *call, CUptiResult res) {
  const char *msg = "unknown";
  cuptiGetResultString(res, &msg);
  if (out_fp == NULL) return;
  pthread_mutex_lock(&out_mu);
  fprintf(out_fp, "E\t%s\t%d\t%s\n", call, (int)res, msg);
  fflush(out_fp);
  pthread_mutex_unlock(&out_mu);
}

#define CHECK(call)                          \
  do {                                       \
    CUptiResult _res = (call);               \
    if (_res != CUPTI_SUCCESS) {             \
      report_error(#call, _res);             \
      return 0;                              \
    }                                        \
  } while (0)

static void clock_pairs(const char *phase) {
  /* Several pairs: the reader keeps the one read in the shortest time. */
  for (int i = 0; i < 7; ++i) {
    uint64_t cupti_ns = 0;
    uint64_t before = realtime_ns();
    cuptiGetTimestamp(&cupti_ns);
    uint64_t after = realtime_ns();
    fprintf(out_fp, "C\t%llu\t%llu\t%llu\t%s\n", (unsigned long long)before, (unsigned long long)cupti_ns,
            (unsigned long long)after, phase);
  }
  fflush(out_fp);
}

static void clean_name(char *dst, const char *src) {
  size_t i = 0;
  if (src != NULL) {
    for (; src[i] != '\0' && i < NAME_MAX_CHARS - 1; ++i) {
      char c = src[i];
      dst[i] = (c == '\t' || c == '\n' || c == '\r') ? ' ' : c;
    }
  }
  dst[i] = '\0';
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = (uint8_t *)aligned_alloc(RECORD_ALIGN, BUFFER_BYTES);
  *size = *buffer ? BUFFER_BYTES : 0;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
                                      size_t valid_size) {
  (void)size;
  static char name[NAME_MAX_CHARS];
  CUpti_Activity *rec = NULL;
  pthread_mutex_lock(&out_mu);
  while (out_fp != NULL && cuptiActivityGetNextRecord(buffer, valid_size, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const KernelRecord *k = (const KernelRecord *)rec;
        clean_name(name, k->name);
        fprintf(out_fp, "K\t%llu\t%llu\t%u\t%u\t%u\t0\t%s\n", (unsigned long long)k->start,
                (unsigned long long)k->end, k->streamId, k->correlationId, k->deviceId, name);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const MemcpyRecord *m = (const MemcpyRecord *)rec;
        fprintf(out_fp, "M\t%llu\t%llu\t%u\t%u\t%u\t%llu\t%u\n", (unsigned long long)m->start,
                (unsigned long long)m->end, m->streamId, m->correlationId, m->deviceId,
                (unsigned long long)m->bytes, (unsigned)m->copyKind);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const MemsetRecord *s = (const MemsetRecord *)rec;
        fprintf(out_fp, "S\t%llu\t%llu\t%u\t%u\t%u\t%llu\t\n", (unsigned long long)s->start,
                (unsigned long long)s->end, s->streamId, s->correlationId, s->deviceId,
                (unsigned long long)s->bytes);
        break;
      }
      default:
        break;
    }
  }
  size_t dropped = 0;
  if (out_fp != NULL && cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS &&
      dropped > 0) {
    fprintf(out_fp, "D\t%zu\n", dropped);
  }
  if (out_fp != NULL) fflush(out_fp);
  pthread_mutex_unlock(&out_mu);
  free(buffer);
}

static void at_exit(void) {
  if (out_fp == NULL) return;
  cuptiActivityFlushAll(1);
  pthread_mutex_lock(&out_mu);
  clock_pairs("end");
  fclose(out_fp);
  out_fp = NULL;
  pthread_mutex_unlock(&out_mu);
}

static int start_tracing(void) {
  CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
  CHECK(cuptiActivityFlushPeriod(500));
  return 1;
}

int InitializeInjection(void) {
  /* Always report success: a tracing failure must never stop the program itself. */
  if (initialized) return 1;
  initialized = 1;
  const char *dir = getenv("ARCHLINE_CUPTI_OUT");
  if (dir == NULL || dir[0] == '\0') return 1;
  char path[4096];
  snprintf(path, sizeof path, "%s/cupti-%ld.tsv", dir, (long)getpid());
  out_fp = fopen(path, "w");
  if (out_fp == NULL) return 1;
  clock_pairs("start");
  start_tracing();
  atexit(at_exit);
  return 1;
}
