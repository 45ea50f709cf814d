"""The CUPTI layer on a CPU: record conversion, clock mapping, the tracer with a fake cupti, injection output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from archline.errors import CUPTIUnavailableError, TraceError
from archline.gpu.cupti_inject import build_injection, find_cupti, injection_env, read_injection_output
from archline.gpu.cupti_trace import ClockMap, ClockPair, KernelTracer, clock_residuals_s, convert_activity
from tests.helpers.attrib_fakes import FakeCupti, FakeRecord, FakeResult

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

    with KernelTracer(cupti_module=cupti, host_ns=cupti.host_clock, on_batch=sink, synchronize=None) as tr:
        cupti.kernel("k", cupti.host_ns + 10, cupti.host_ns + 20)
    assert len(batches) == 1 and batches[0][0][1] == "k"
    assert tr.batch_errors and "disk full" in tr.batch_errors[0]
    assert len(tr.records) == 1


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
    env = {**os.environ, **injection_env(lib, out)}
    env.pop("CUDA_INJECTION64_PATH")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    trace = read_injection_output(out)
    assert trace.clocks and abs(trace.clocks[0].offset_s) < 0.01
