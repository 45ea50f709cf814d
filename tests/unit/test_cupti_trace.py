"""The CUPTI layer on a CPU: record conversion, clock mapping, the tracer with a fake cupti, injection output."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from archline.errors import CUPTIUnavailableError, TraceError
from archline.hw.cupti.inject import (
    ChunkType,
    build_injection,
    find_cupti,
    injection_env,
    read_injection_output,
)
from archline.hw.cupti.trace import ClockMap, ClockPair, KernelTracer, clock_residuals_s, convert_activity
from tests.helpers.attrib_fakes import FakeCupti, FakeRecord, FakeResult, injection_chunk, injection_output

DATA = Path(__file__).resolve().parents[1] / "data"


def test_clock_map_uses_the_tightest_pairs_and_measures_drift():
    start = [ClockPair(1_000_000, 5_000_400, 1_000_900), ClockPair(2_000_000, 6_000_050, 2_000_100)]
    end = [ClockPair(1_002_000_000, 1_006_001_050, 1_002_000_100)]
    cm = ClockMap.from_pairs(start, end)
    assert cm.device_ref_ns == 6_000_050
    assert cm.error_s == pytest.approx(50e-9)
    # 1 s + 1 µs of device time took 1 s of host time: the device clock runs 1 ppm fast.
    assert cm.drift_ppm == pytest.approx(1.0, abs=0.01)
    assert cm.to_host_s(6_000_050) == pytest.approx(2_000_050e-9)
    assert abs(clock_residuals_s([*start[1:], *end], cm)).max() < 1e-9
    assert cm.to_json()["offset_s"] == pytest.approx(cm.offset_s)


def test_one_sided_clock_map_has_no_drift():
    cm = ClockMap.from_pairs([ClockPair(10, 30, 20)])
    assert cm.slope == 1.0 and cm.span_s == 0.0
    with pytest.raises(ValueError):
        ClockMap.from_pairs([])


def test_convert_activity_kinds():
    k = FakeRecord(kind=10, name="_Z3fooPf", start=5, end=9, stream_id=3, correlation_id=11, device_id=0)
    assert convert_activity(k) == ("kernel", "_Z3fooPf", 5, 9, 3, 11, 0, 0)
    m = FakeRecord(kind=1, copy_kind=1, bytes=4096, start=1, end=2, stream_id=1, correlation_id=2, device_id=0)
    assert convert_activity(m) == ("memcpy", "[memcpy HtoD]", 1, 2, 1, 2, 0, 4096)
    s = FakeRecord(kind=2, bytes=64, start=1, end=2, stream_id=1, correlation_id=3, device_id=0)
    assert convert_activity(s)[:2] == ("memset", "[memset]")
    assert convert_activity(FakeRecord(kind=5, start=1, end=2)) is None


def test_tracer_maps_kernels_onto_the_host_clock():
    cupti = FakeCupti(offset_ns=7_000_000_000, drift_ppm=20.0)
    synced = []
    tr = KernelTracer(cupti_module=cupti, host_ns=cupti.host_clock, synchronize=lambda: synced.append(1))
    with tr:
        t_launch = cupti.host_ns + 1_000_000
        cupti.kernel("gemm", t_launch, t_launch + 250_000, corr=5)
        cupti.kernel("relu", t_launch + 300_000, t_launch + 310_000, corr=6)
        cupti.tick(2_000_000_000)
    assert synced == [1]
    assert [r.name for r in tr.records] == ["gemm", "relu"]
    gemm = tr.records[0]
    assert gemm.start_s == pytest.approx(t_launch * 1e-9, abs=2e-6)
    assert gemm.duration_s == pytest.approx(250e-6, rel=1e-3)
    assert gemm.correlation_id == 5 and gemm.stream == 7 and gemm.start_ns is not None
    assert tr.clock_map is not None and tr.clock_map.drift_ppm == pytest.approx(20.0, abs=1.0)
    assert tr.clock_map.offset_s == pytest.approx(-7.0, abs=1e-5)
    assert cupti.enabled == set()


def test_tracer_delivers_batches_and_survives_a_failing_sink():
    cupti = FakeCupti()
    batches = []

    def sink(batch):
        batches.append(batch)
        raise OSError("disk full")

    tr = KernelTracer(cupti_module=cupti, host_ns=cupti.host_clock, on_batch=sink, synchronize=None, max_pending=0)
    with tr:
        cupti.kernel("k", cupti.host_ns + 10, cupti.host_ns + 20)
        cupti.activity_flush_all(0)
    assert len(batches) == 1 and batches[0][0][1] == "k"
    assert tr.batch_errors and "disk full" in tr.batch_errors[0]
    assert len(tr.records) == 1


class CountingRecord(FakeRecord):
    """A record that counts reads of its start time (only a conversion reads it)."""

    reads = 0

    def __getattribute__(self, name: str):
        if name == "start":
            CountingRecord.reads += 1
        return object.__getattribute__(self, name)


class ListReusingCupti(FakeCupti):
    """Empties the list it passed once the callback returns, as a binding that reuses it may."""

    def activity_flush_all(self, flag: int) -> None:
        completed = self.callbacks[1]
        passed = []

        def keep(batch):
            passed.append(batch)
            completed(batch)

        self.callbacks = (self.callbacks[0], keep)
        try:
            super().activity_flush_all(flag)
        finally:
            self.callbacks = (self.callbacks[0], completed)
        for b in passed:
            b.clear()


def test_records_are_converted_after_stop_not_in_cuptis_callback():
    cupti = ListReusingCupti()
    batches = []
    CountingRecord.reads = 0
    tr = KernelTracer(cupti_module=cupti, host_ns=cupti.host_clock, on_batch=batches.append, synchronize=None)
    with tr:
        t = cupti.host_ns
        for i in range(50):
            cupti.kernel("k", t + 1000 * i, t + 1000 * i + 500, corr=i)
        cupti.pending = [CountingRecord(**vars(r)) for r in cupti.pending]
        cupti.activity_flush_all(0)
        assert CountingRecord.reads == 0
    assert CountingRecord.reads > 0
    assert batches == []  # nothing was converted while tracing, so nothing to save incrementally
    assert [r.correlation_id for r in tr.records] == list(range(50))
    assert len({id(r.name) for r in tr.records}) == 1  # one string per kernel name


def test_too_many_pending_records_are_converted_and_saved_early():
    cupti = FakeCupti()
    batches = []
    tr = KernelTracer(
        cupti_module=cupti, host_ns=cupti.host_clock, on_batch=batches.append, synchronize=None, max_pending=3
    )
    with tr:
        for round_ in range(2):
            for i in range(2):
                t = cupti.host_ns
                cupti.kernel(f"k{round_}", t + 10, t + 20, corr=10 * round_ + i)
            cupti.activity_flush_all(0)
    # The first flush leaves 2 pending (≤ 3); the second brings 4 and spills all of them.
    assert [len(b) for b in batches] == [4]
    assert len(tr.records) == 4 and len(tr.raw) == 4
    with pytest.raises(ValueError, match="max_pending"):
        KernelTracer(max_pending=-1)


def test_odd_records_take_the_careful_path():
    cupti = FakeCupti()
    with KernelTracer(cupti_module=cupti, host_ns=cupti.host_clock, synchronize=None) as tr:
        t = cupti.host_ns
        cupti.kernel("named", t + 10, t + 20, corr=1)
        cupti.kernel("", t + 30, t + 40, corr=2)
        cupti.pending[-1].name = b"_Z5bytesv"
        cupti.pending.append(FakeRecord(kind=5, start=1, end=2))  # a kind archline does not trace
        cupti.pending.append(
            FakeRecord(kind=1, copy_kind=2, bytes=8, start=cupti.device_time(t + 50), end=cupti.device_time(t + 60))
        )
    assert [r.name for r in tr.records] == ["named", "_Z5bytesv", "[memcpy DtoH]"]


def test_callbacks_are_registered_once_per_process():
    cupti = FakeCupti()
    for _ in range(2):
        with KernelTracer(cupti_module=cupti, host_ns=cupti.host_clock, synchronize=None):
            pass
    assert cupti.registrations == 1


def test_two_tracers_at_once_are_refused():
    cupti = FakeCupti()
    first = KernelTracer(cupti_module=cupti, host_ns=cupti.host_clock, synchronize=None).start()
    with pytest.raises(CUPTIUnavailableError, match="already recording"):
        KernelTracer(cupti_module=cupti, host_ns=cupti.host_clock).start()
    first.stop()


def test_refusal_is_one_line_with_the_reason():
    cupti = FakeCupti(refuse=int(FakeResult.ERROR_INSUFFICIENT_PRIVILEGES))
    with pytest.raises(CUPTIUnavailableError) as ei:
        KernelTracer(cupti_module=cupti, host_ns=cupti.host_clock).start()
    msg = str(ei.value)
    assert "INSUFFICIENT_PRIVILEGES" in msg and "\n" not in msg
    assert ei.value.exit_code == 3
    # A refused start leaves nothing recording: the next tracer may start.
    cupti.refuse = None
    KernelTracer(cupti_module=cupti, host_ns=cupti.host_clock, synchronize=None).start().stop()


def test_missing_cupti_python_is_a_one_line_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)
    with pytest.raises(CUPTIUnavailableError, match="cupti-python"):
        KernelTracer().start()


def test_unknown_kinds_are_rejected():
    with pytest.raises(ValueError, match="unknown activity kinds"):
        KernelTracer(kinds=("kernel", "graph"))


# --------------------------------------------------------------------------- injection output


def test_injection_output_from_libcupti_without_a_gpu():
    """The injection library, loaded on a machine without a GPU, wrote clock pairs and CUPTI's refusal."""
    d = DATA / "cupti_inject_nogpu.tsv"
    out = read_injection_output_file(d)
    assert out.records == []
    assert out.errors and "cuptiActivityEnable" in out.errors[0]
    assert len(out.clocks) == 1
    # libcupti's timestamps follow CLOCK_REALTIME: offset well under a millisecond.
    assert abs(out.clocks[0].offset_s) < 1e-3
    assert out.clocks[0].error_s < 1e-6


def read_injection_output_file(path: Path):
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(path, Path(tmp) / "cupti-1.tsv")
        return read_injection_output(tmp)


def test_injection_records_parse_and_map(tmp_path):
    lines = [
        "C\t1000000000\t1000000500\t1000000020\tstart",
        "K\t1000100500\t1000200500\t7\t3\t0\t0\t_Z6kernelPfi",
        "M\t1000300500\t1000310500\t7\t4\t0\t4096\t2",
        "S\t1000400500\t1000400600\t7\t5\t0\t64\t",
        "D\t3",
        "C\t2000000000\t2000000500\t2000000020\tend",
        "K\t1000500500\t10005",  # cut short: the program died while writing
    ]
    (tmp_path / "cupti-42.tsv").write_text("\n".join(lines))
    out = read_injection_output(tmp_path)
    assert [r.kind for r in out.records] == ["kernel", "memcpy", "memset"]
    assert out.records[1].name == "[memcpy DtoH]" and out.records[1].bytes == 4096
    assert out.records[0].start_s == pytest.approx(1.00010001, abs=1e-8)
    assert out.dropped == 3


def test_binary_injection_output_parses_and_maps(tmp_path):
    host0, dev0 = 1_795_000_000_000_000_000, 1_000_000_000
    kernels = [("_Z4gemmv", dev0 + 100_000, dev0 + 300_000), ("relu", dev0 + 400_000, dev0 + 410_000)]
    kernels.append(("_Z4gemmv", dev0 + 500_000, dev0 + 700_000))
    data = injection_output(kernels, clock=(host0, dev0), memcpys=[(1, 4096, dev0 + 800_000, dev0 + 810_000)])
    (tmp_path / "cupti-7.bin").write_bytes(data + injection_chunk(ChunkType.DROPPED, 0, (5).to_bytes(8, "little")))
    out = read_injection_output(tmp_path)
    assert [r.name for r in out.records] == ["_Z4gemmv", "relu", "_Z4gemmv", "[memcpy HtoD]"]
    assert out.records[0].start_s == pytest.approx((host0 + 100_000 + 20) * 1e-9, abs=1e-8)
    assert out.records[1].end_ns - out.records[1].start_ns == 10_000
    assert out.records[3].bytes == 4096 and out.records[2].correlation_id == 3
    assert out.dropped == 5 and out.truncated == [] and out.errors == []
    assert len(out.clocks) == 1 and out.clocks[0].span_s > 0


def test_binary_output_cut_short_keeps_what_was_complete(tmp_path):
    kernels = [("k", 1_000_000 + i * 1000, 1_000_500 + i * 1000) for i in range(4)]
    data = injection_output(kernels, clock=(10**18, 1_000_000), end=False)
    more = injection_chunk(ChunkType.ACTIVITIES, 100, b"\0" * 4800)
    (tmp_path / "cupti-1.bin").write_bytes(data + more[:-100])
    out = read_injection_output(tmp_path)
    assert len(out.records) == 4 and out.truncated == [tmp_path / "cupti-1.bin"]
    assert out.clocks[0].span_s == 0.0  # no end pairs: one-sided clock map


def test_malformed_binary_output_is_a_one_line_error(tmp_path):
    data = injection_output([("k", 10, 20)], clock=(10**18, 1))
    (tmp_path / "cupti-3.bin").write_bytes(data + b"XXXX" + b"\0" * 12)
    with pytest.raises(TraceError, match=r"cupti-3\.bin: .*no chunk header at byte"):
        read_injection_output(tmp_path)
    (tmp_path / "cupti-3.bin").write_bytes(injection_chunk(ChunkType.ACTIVITIES, 2, b"\0" * 48))
    with pytest.raises(TraceError, match="do not fill"):
        read_injection_output(tmp_path)


def test_malformed_injection_output_names_the_line(tmp_path):
    (tmp_path / "cupti-1.tsv").write_text("C\t1\t2\t3\tstart\nK\tx\t2\t3\t4\t5\t0\tname\n")
    with pytest.raises(TraceError, match=r"cupti-1\.tsv:2"):
        read_injection_output(tmp_path)


def test_injection_env_names_the_library_and_the_folder(tmp_path):
    env = injection_env(tmp_path / "lib.so", tmp_path)
    assert env["CUDA_INJECTION64_PATH"].endswith("lib.so") and env["ARCHLINE_CUPTI_OUT"] == str(tmp_path)


def _cupti_available() -> bool:
    try:
        find_cupti()
    except CUPTIUnavailableError:
        return False
    return shutil.which("cc") is not None


def test_find_cupti_says_what_is_missing(tmp_path):
    with pytest.raises(CUPTIUnavailableError, match="CUPTI headers and library not found"):
        find_cupti([(tmp_path, tmp_path)], [tmp_path])
    (tmp_path / "cupti.h").write_text("")
    (tmp_path / "libcupti.so.13").write_text("")
    with pytest.raises(CUPTIUnavailableError, match=r"cuda\.h not found"):
        find_cupti([(tmp_path, tmp_path)], [])
    (tmp_path / "cuda.h").write_text("")
    assert find_cupti([(tmp_path, tmp_path)], []).lib_path.name == "libcupti.so.13"


@pytest.mark.skipif(not _cupti_available(), reason="CUPTI headers/library or a C compiler are not installed")
def test_injection_library_builds_and_writes_clock_pairs(tmp_path):
    lib = build_injection(tmp_path / "cache")
    assert lib.is_file() and build_injection(tmp_path / "cache") == lib
    out = tmp_path / "out"
    out.mkdir()
    code = f"import ctypes; ctypes.CDLL({str(lib)!r}).InitializeInjection()"
    env = {**os.environ, **injection_env(lib, out), "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}
    env.pop("CUDA_INJECTION64_PATH")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    trace = read_injection_output(out)
    assert trace.clocks and abs(trace.clocks[0].offset_s) < 0.01
    (proc,) = trace.processes
    assert (proc.rank, proc.local_rank, proc.world_size) == (1, 1, 2) and proc.pid != os.getpid()


# The injection library's record handling, driven without a GPU: its source is compiled together
# with stand-ins for the CUPTI calls it makes, and fed buffers of records laid out as CUPTI does.
HARNESS = r"""
#include INJECT_SOURCE

static size_t rec_size(const CUpti_Activity *r) {
  size_t n = sizeof(CUpti_ActivityAPI);
  if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) n = sizeof(KernelRecord);
  if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) n = sizeof(MemcpyRecord);
  if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) n = sizeof(MemsetRecord);
  if (r->kind == CUPTI_ACTIVITY_KIND_DEVICE) n = sizeof(DeviceRecord);
  return (n + 7) & ~(size_t)7;
}
CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record) {
  size_t off = *record == NULL ? 0 : (size_t)((uint8_t *)*record - buffer) + rec_size(*record);
  if (off >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = (CUpti_Activity *)(buffer + off);
  return CUPTI_SUCCESS;
}
/* Detach mode: CUPTI is "detached" from cuptiFinalize until the next attach (callbacks registered). */
static int n_finalize = 0, n_subscribe = 0, finalize_off_main = 0, calls_detached = 0, is_detached = 0;
static pthread_t main_thread;
#define TOUCH() (calls_detached += is_detached)
CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *t) { TOUCH(); *t = realtime_ns() + 5000; return CUPTI_SUCCESS; }
CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult r, const char **s) { (void)r; *s = "?"; return CUPTI_SUCCESS; }
CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc f, void *u) {
  (void)f; (void)u; TOUCH(); *s = (CUpti_SubscriberHandle)&n_subscribe; ++n_subscribe; return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t e, CUpti_SubscriberHandle s, CUpti_CallbackDomain d) {
  (void)e; (void)s; (void)d; TOUCH(); return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiFinalize(void) {
  finalize_off_main |= !pthread_equal(pthread_self(), main_thread);
  /* A CUDA call made inside cuptiFinalize raises a callback on this same thread: it must return. */
  CUpti_CallbackData nested;
  memset(&nested, 0, sizeof nested);
  nested.callbackSite = CUPTI_API_EXIT;
  on_api(NULL, CUPTI_CB_DOMAIN_DRIVER_API, 1, &nested);
  ++n_finalize; is_detached = 1; return CUPTI_SUCCESS;
}
static size_t to_drop = 3;
CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *d) {
  (void)c; (void)s; *d = to_drop; to_drop = 0; return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t f) { (void)f; TOUCH(); return CUPTI_SUCCESS; }
CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *n, void *v) {
  (void)a; (void)n; (void)v; return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r,
                                                    CUpti_BuffersCallbackCompleteFunc c) {
  (void)r; (void)c; is_detached = 0; return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind k) { (void)k; TOUCH(); return CUPTI_SUCCESS; }
CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind k) { (void)k; TOUCH(); return CUPTI_SUCCESS; }
CUptiResult CUPTIAPI cuptiActivityFlushPeriod(uint32_t t) { (void)t; TOUCH(); return CUPTI_SUCCESS; }
CUptiResult CUPTIAPI cuptiActivityEnableAndDump(CUpti_ActivityKind k) { (void)k; TOUCH(); return CUPTI_SUCCESS; }
/* The driver, for device ids no CUPTI device record names (found by dlsym: built with -rdynamic). */
CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal) { *d = ordinal + 100; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *u, CUdevice d) { memset(u->bytes, d, 16); return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice d) {
  snprintf(name, (size_t)len, "stub %d", d); return CUDA_SUCCESS;
}

static char name_a[64] = "_Z4gemmPfS_i";
static char name_b[64] = "relu\tkernel";

static uint8_t *put(uint8_t *p, CUpti_ActivityKind kind, uint64_t start, const char *name) {
  CUpti_Activity *r = (CUpti_Activity *)p;
  r->kind = kind;
  if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
    KernelRecord *k = (KernelRecord *)p;
    k->start = start; k->end = start + 500; k->streamId = 7; k->deviceId = (uint32_t)(start / 1000 % 2);
    k->correlationId = (uint32_t)(start / 1000 % 1000000); k->name = name;
  } else if (kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
    MemcpyRecord *m = (MemcpyRecord *)p;
    m->start = start; m->end = start + 500; m->bytes = 4096; m->copyKind = 2; m->streamId = 7;
  } else if (kind == CUPTI_ACTIVITY_KIND_MEMSET) {
    MemsetRecord *s = (MemsetRecord *)p;
    s->start = start; s->end = start + 500; s->bytes = 64; s->streamId = 7;
  }
  return p + rec_size(r);
}

static size_t first_buffer = 0;

static void report(void) {
  printf("finalize=%d subscribe=%d finalize_off_main=%d calls_detached=%d first_buffer=%zu\n", n_finalize,
         n_subscribe, finalize_off_main, calls_detached, first_buffer);
}

/* argv: OUT [DUTY_MS [MODE [calls|quiet]]]: with "calls", the program makes a CUDA call each ms. */
int main(int argc, char **argv) {
  main_thread = pthread_self();
  atexit(report);  /* before the library's: runs after it */
  setenv("ARCHLINE_CUPTI_OUT", argv[1], 1);
  setenv("ARCHLINE_CUPTI_FLUSH_MS", "5", 1);
  if (argc > 2) setenv("ARCHLINE_CUPTI_DUTY_MS", argv[2], 1);
  if (argc > 3) setenv("ARCHLINE_CUPTI_DUTY_MODE", argv[3], 1);
  int calls = argc > 4 && strcmp(argv[4], "calls") == 0;
  if (argc > 5) setenv("ARCHLINE_CUPTI_DUTY_AUTO", argv[5], 1);
  InitializeInjection();
  uint64_t t = realtime_ns() + 1000000;
  uint8_t *buf; size_t size, max;
  buffer_requested(&buf, &size, &max);
  first_buffer = size;
  /* The automatic duty cycle's probe hands out small buffers; 10 004 records need a full-size one. */
  int own = size < (4u << 20);
  if (own) {
    free(buf);
    size = 8u << 20;
    buf = calloc(1, size);
  }
  uint8_t *p = buf;
  for (uint64_t i = 0; i < 10000; ++i)
    p = put(p, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, t + 1000 * i, i % 2 ? name_b : name_a);
  p = put(p, CUPTI_ACTIVITY_KIND_DRIVER, 0, NULL);
  /* CUPTI names device 1 (and a device hidden from CUDA under the same id, which must not win);
   * device 0 it leaves to the driver. */
  DeviceRecord *dv = (DeviceRecord *)p;
  dv->kind = CUPTI_ACTIVITY_KIND_DEVICE; dv->id = 1; dv->isCudaVisible = 1; dv->name = "NVIDIA H100 80GB HBM3";
  for (int i = 0; i < 16; ++i) dv->uuid.bytes[i] = (char)(0x10 + i);
  p += rec_size((CUpti_Activity *)p);
  dv = (DeviceRecord *)p;
  dv->kind = CUPTI_ACTIVITY_KIND_DEVICE; dv->id = 1; dv->isCudaVisible = 0; dv->name = "hidden";
  p += rec_size((CUpti_Activity *)p);
  p = put(p, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, t + 20000000, NULL);
  p = put(p, CUPTI_ACTIVITY_KIND_MEMCPY, t + 20001000, NULL);
  p = put(p, CUPTI_ACTIVITY_KIND_MEMSET, t + 20002000, NULL);
  uint8_t *cut = p;  /* a kernel caught in flight by a forced flush: no end time yet */
  p = put(p, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, t + 20003000, name_a);
  ((KernelRecord *)cut)->end = 0;
  buffer_completed(NULL, 0, buf, size, (size_t)(p - buf));
  uint8_t *again; buffer_requested(&again, &size, &max);
  if ((!own && again != buf) || again[0] != 0) return 2;  /* recycled, and zeroed */
  strcpy(name_a, "reused_name");  /* a module unloaded, its name's memory reused */
  p = put(again, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, t + 30000000, name_a);
  buffer_completed(NULL, 0, again, size, (size_t)(p - again));
  /* Let the flusher (and the duty cycle) run, making CUDA "calls" if asked: at least 20 ms (95 ms with a duty
   * cycle), then until the duty cycle has switched off $HARNESS_OFFS times (a busy machine's scheduling stretches
   * the periods: a test that needs switches waits for them, not for a time; 20 s at most). */
  const char *offs_env = getenv("HARNESS_OFFS");
  int offs = offs_env != NULL ? atoi(offs_env) : 0;
  uint64_t start = monotonic_ns(), until = start + (argc > 2 ? 95000000ull : 20000000ull);
  CUpti_CallbackData cb;
  memset(&cb, 0, sizeof cb);
  while (monotonic_ns() < until ||
         (__atomic_load_n(&trace_offs, __ATOMIC_ACQUIRE) < offs && monotonic_ns() < start + 20000000000ull)) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
    if (!calls) continue;
    cb.callbackSite = CUPTI_API_ENTER;
    on_api(NULL, CUPTI_CB_DOMAIN_DRIVER_API, 1, &cb);  /* an entry never detaches */
    cb.callbackSite = CUPTI_API_EXIT;
    on_api(NULL, CUPTI_CB_DOMAIN_DRIVER_API, 1, &cb);
  }
  return 0;
}
"""


def _harness(tmp_path):
    from archline.hw.cupti.inject import INJECTION_SOURCE

    paths = find_cupti()
    src = tmp_path / "harness.c"
    src.write_text(HARNESS)
    exe = tmp_path / "harness"
    cmd = [shutil.which("cc"), "-O1", "-Wall", "-Wextra", "-Werror", f'-DINJECT_SOURCE="{INJECTION_SOURCE}"']
    cmd += [f"-I{paths.include_dir}", f"-I{paths.cuda_include_dir}", str(src), "-rdynamic", "-lpthread", "-ldl"]
    cmd += ["-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert build.returncode == 0, build.stderr
    return exe


def _run_harness(tmp_path, *args: str, offs: int = 0):
    """Build and run the harness with ``args`` after its output folder: (trace, the stubs' counters). ``offs``: run
    on until the duty cycle has switched off that many times (20 s at most)."""
    exe = _harness(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "CUDA_VISIBLE_DEVICES": "2,0"}
    env["HARNESS_OFFS"] = str(offs)
    res = subprocess.run([str(exe), str(out), *args], check=True, timeout=60, capture_output=True, text=True, env=env)
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("finalize="))
    return read_injection_output(out), {k: int(v) for k, v in (f.split("=") for f in line.split())}


@pytest.mark.skipif(not _cupti_available(), reason="CUPTI headers or a C compiler are not installed")
def test_injection_library_marks_its_duty_cycle(tmp_path):
    trace, n = _run_harness(tmp_path, "10,30", "disable", offs=3)
    assert trace.errors == [] and len(trace.records) == 10004
    assert trace.traced is not None and len(trace.traced) >= 3
    # 10 ms on, 20 ms off: never shorter; a busy machine can delay a switch, so the typical period is judged
    ons = [b - a for a, b in trace.traced[:-1]]
    assert all(d > 0.009 for d in ons) and statistics.median(ons) < 0.03, ons
    gaps = [b[0] - a[1] for a, b in zip(trace.traced, trace.traced[1:], strict=False)]
    assert all(g > 0.015 for g in gaps) and statistics.median(gaps) < 0.06, gaps
    assert n["finalize"] == 0 and trace.detach_s == []


@pytest.mark.skipif(not _cupti_available(), reason="CUPTI headers or a C compiler are not installed")
def test_duty_cycle_detaches_cupti_at_the_programs_next_cuda_call(tmp_path):
    trace, n = _run_harness(tmp_path, "10,30", "detach", "calls", offs=3)
    assert trace.errors == [] and len(trace.records) == 10004
    assert trace.traced is not None and len(trace.traced) >= 3
    # Every off-switch detached CUPTI, on the program's own thread; every on-switch attached it
    # again (a new subscriber each time); no CUPTI call was made while detached, not even at exit.
    assert n["finalize"] >= 2 and n["finalize"] == len(trace.detach_s) == len(trace.detach_wait_s)
    assert n["subscribe"] in (n["finalize"], n["finalize"] + 1)
    assert n["finalize_off_main"] == 0 and n["calls_detached"] == 0
    # The request waits out the 10 ms settle, then the next "call" (1 ms apart) detaches.
    waits = trace.detach_wait_s
    assert all(w >= 0 for w in waits) and statistics.median(waits) < 0.05, waits
    ons = [b - a for a, b in trace.traced[:-1]]
    assert all(d > 0.009 for d in ons) and statistics.median(ons) < 0.03, ons
    # End clock pairs come from the last detach: the clock map spans most of the run.
    assert trace.clocks[0].span_s > 0.03


@pytest.mark.skipif(not _cupti_available(), reason="CUPTI headers or a C compiler are not installed")
def test_automatic_duty_cycle_cycles_a_launch_bound_program(tmp_path):
    # 10 004 kernels within 10 ms of their own timestamps: far above 100 launches/s over the 10 s window (1 000
    # records), so tracing cycles and detaches.
    trace, n = _run_harness(tmp_path, "10,30", "detach", "calls", "10000,100", offs=2)
    assert trace.errors == [] and len(trace.records) == 10004
    assert trace.traced is not None and len(trace.traced) >= 2
    # The probe fired on the first buffer's records, not at the end of its 10 s window: the first off-switch
    # follows at once (the harness delivers that buffer as it starts). The window is long so that a busy machine's
    # scheduling delay (an 80 ms window was once blurred by 64 ms) cannot blur "at once" into "at the window's end".
    assert trace.traced[0][1] - trace.traced[0][0] < 5.0
    assert n["finalize"] >= 1
    # While probing, CUPTI got small buffers, so records (and the decision) come within ~5 000 launches.
    assert n["first_buffer"] == 1 << 20


def test_injection_library_hands_out_full_size_buffers_without_the_probe(tmp_path):
    if not _cupti_available():
        pytest.skip("CUPTI headers or a C compiler are not installed")
    _, n = _run_harness(tmp_path, "10,30", "detach", "calls")
    assert n["first_buffer"] == 8 << 20


@pytest.mark.skipif(not _cupti_available(), reason="CUPTI headers or a C compiler are not installed")
def test_automatic_duty_cycle_keeps_tracing_a_program_below_the_rate(tmp_path):
    # The same program against a threshold no program reaches: traced throughout, never detached.
    trace, n = _run_harness(tmp_path, "10,30", "detach", "calls", "20,1e12")
    assert trace.errors == [] and len(trace.records) == 10004
    assert trace.traced is None  # never switched off: read as traced throughout
    assert n["finalize"] == 0 and n["first_buffer"] == 1 << 20


@pytest.mark.skipif(not _cupti_available(), reason="CUPTI headers or a C compiler are not installed")
def test_automatic_duty_cycle_counts_by_the_records_own_time(tmp_path):
    # The harness's first 10 000 kernels start 1 µs apart: 10 000 records within 10 ms of their own
    # timestamps, delivered at once. Over a 20 ms window, 600 000/s allows 12 000 records (not
    # reached: traced throughout); 400 000/s allows 8 000 (exceeded: cycled).
    trace, n = _run_harness(tmp_path, "10,30", "detach", "calls", "20,600000")
    assert trace.traced is None and n["finalize"] == 0
    (tmp_path / "b").mkdir()
    trace, n = _run_harness(tmp_path / "b", "10,30", "detach", "calls", "20,400000", offs=2)
    assert trace.traced is not None and n["finalize"] >= 1


@pytest.mark.skipif(not _cupti_available(), reason="CUPTI headers or a C compiler are not installed")
def test_duty_cycle_without_cuda_calls_stays_attached_and_exits(tmp_path):
    trace, n = _run_harness(tmp_path, "10,30", "detach", "quiet", offs=1)
    # No CUDA call ever came to detach at: tracing still switched (kinds disabled), nothing hung.
    assert n["finalize"] == 0 and trace.detach_s == [] and trace.errors == []
    assert trace.traced is not None and len(trace.traced) >= 1 and len(trace.records) == 10004


def test_traced_intervals_from_marks():
    from archline.hw.cupti.inject import traced_intervals

    marks = [(1.0, True), (1.5, False), (2.0, True), (2.2, False), (3.0, True)]
    assert traced_intervals(marks, 3.4) == [(1.0, 1.5), (2.0, 2.2), (3.0, 3.4)]
    assert traced_intervals([(1.0, False), (2.0, True), (2.0, True)], 1.5) == []


@pytest.mark.skipif(not _cupti_available(), reason="CUPTI headers or a C compiler are not installed")
def test_injection_library_records_without_a_gpu(tmp_path):
    trace, n = _run_harness(tmp_path)
    assert n["finalize"] == 0 and n["subscribe"] == 0  # no duty cycle: CUPTI stays attached
    assert trace.traced is None
    assert [p.suffix for p in trace.files] == [".bin"] and trace.truncated == [] and trace.errors == []
    names = [r.name for r in trace.records]
    assert names[:4] == ["_Z4gemmPfS_i", "relu\tkernel", "_Z4gemmPfS_i", "relu\tkernel"]
    assert len(names) == 10004 and names.count("_Z4gemmPfS_i") == 5000
    assert names[-4:] == ["(unnamed kernel)", "[memcpy DtoH]", "[memset]", "reused_name"]
    assert trace.records[-3].bytes == 4096 and trace.records[-2].bytes == 64
    assert all(r.end_ns - r.start_ns == 500 and r.stream == 7 for r in trace.records)
    assert trace.dropped == 3 and trace.incomplete == 1
    assert trace.clocks[0].offset_s == pytest.approx(-5e-6, abs=2e-6)


@pytest.mark.skipif(not _cupti_available(), reason="CUPTI headers or a C compiler are not installed")
def test_injection_library_names_its_process_and_each_device_by_uuid(tmp_path):
    trace, _ = _run_harness(tmp_path)
    (proc,) = trace.processes
    (path,) = trace.files
    # One file per process, named by pid and creation time, so a reused pid never overwrites one.
    assert path.name.startswith(f"cupti-{proc.pid}-") and proc.pid != os.getpid()
    assert (proc.rank, proc.local_rank, proc.world_size) == (3, 1, 4)
    assert proc.env["CUDA_VISIBLE_DEVICES"] == "2,0" and proc.env["ppid"] == str(os.getpid())
    # Device 1 from CUPTI's (CUDA-visible) device record; device 0, which no record names, from the
    # driver: cuDeviceGet(0) is handle 100, whose stub UUID is sixteen bytes of 100.
    assert proc.devices[1].uuid == "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f"
    assert proc.devices[1].source == "cupti" and proc.devices[1].name == "NVIDIA H100 80GB HBM3"
    assert proc.devices[0].uuid == "GPU-" + "64646464-6464-6464-6464-646464646464"
    assert (proc.devices[0].source, proc.devices[0].name) == ("driver", "stub 100")
    assert {r.device for r in proc.records if r.kind == "kernel"} == {0, 1}
    assert len(proc.records) == len(trace.records) == 10004


def test_on_switches_give_the_attach_times_and_a_slow_attach_is_named(tmp_path):
    import struct

    from archline.hw.cupti.inject import ChunkType, InjectionTrace
    from archline.measurement.attribute.run import describe_injection

    data = injection_output([("k", 1_000, 2_000)], clock=(0, 0))
    data += injection_chunk(ChunkType.TRACE_ON, 1, struct.pack("<2Q", 0, 0))  # the start: no switch time
    for i, (attach_ns, off_ns) in enumerate([(12_000_000, 3_000), (2_100_000_000, 4_000), (1_900_000_000, 2_000)]):
        t = (i + 1) * 10**10
        data += injection_chunk(ChunkType.TRACE_OFF, 1, struct.pack("<2Q", t, off_ns))
        data += injection_chunk(ChunkType.DETACH, 1, struct.pack("<2Q", 10**6, 5 * 10**6))  # detach mode
        data += injection_chunk(ChunkType.TRACE_ON, 1, struct.pack("<2Q", t + 10**9, attach_ns))
    # an on-switch without a detach before it (disable mode, or a detach that failed) only enables: not an attach
    data += injection_chunk(ChunkType.TRACE_OFF, 1, struct.pack("<2Q", 5 * 10**10, 1_000))
    data += injection_chunk(ChunkType.TRACE_ON, 1, struct.pack("<2Q", 5 * 10**10 + 10**9, 3_000_000_000))
    (tmp_path / "cupti-9.bin").write_bytes(data)
    out = read_injection_output(tmp_path)
    assert out.attach_s == pytest.approx([0.012, 2.1, 1.9])
    assert sorted(out.switch_s) == pytest.approx(sorted([0.012, 2.1, 1.9, 3e-6, 4e-6, 2e-6, 1e-6, 3.0]))
    notes: list[str] = []
    info: dict[str, object] = {}
    describe_injection(out, notes, info)
    assert info["trace_attach_s_median"] == pytest.approx(1.9)
    slow = [n for n in notes if "to attach" in n]
    assert len(slow) == 1 and "1.9 s" in slow[0] and "another process reading NVML" in slow[0]
    # archline's own sensors alone: 11-20 ms, no note
    notes, info = [], {}
    describe_injection(InjectionTrace(switch_s=[0.015, 1e-6], attach_s=[0.015, 0.018]), notes, info)
    assert info["trace_attach_s_median"] == pytest.approx(0.018) and not any("to attach" in n for n in notes)
