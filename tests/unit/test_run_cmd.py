"""``archline run`` and ``archline.attribute()`` end to end on a fake GPU (fake clock, sensors and tracer)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from archline import attribute
from archline.cli._common import Deps
from archline.cli.app import app
from archline.errors import CommandError, InputError, SensorError
from archline.measurement.attribute.program import TracerChoice, choose_tracer, classify_command
from archline.records import RunDir
from tests.helpers.attrib_fakes import PROGRAM_MODULE, FakeGPU, FakeSource
from tests.helpers.fake_gpu import FakeClock

SCRIPT = """
import sys
import archline_fake_cuda as gpu
# Blocks of 16 calls (about four counter windows) alternate between the kernels, so each
# window holds a different mix, and most windows only one kernel.
for i in range(int(sys.argv[1])):
    if (i // 16) % 2 == 0:
        gpu.launch("hot_kernel", 0.005, 400.0)
    else:
        gpu.launch("cool_kernel", 0.005, 180.0)
print("program output")
sys.exit(int(sys.argv[2]))
"""


@pytest.fixture()
def fake_gpu(monkeypatch):
    gpu = FakeGPU()
    monkeypatch.setitem(sys.modules, PROGRAM_MODULE, gpu.module())
    gpu.deps = Deps(attribution_backend=gpu.backend)  # type: ignore[attr-defined]
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(k, raising=False)
    return gpu


@pytest.fixture()
def script(tmp_path):
    p = tmp_path / "prog.py"
    p.write_text(SCRIPT)
    return p


def test_python_script_runs_in_process_and_gets_per_kernel_rows(fake_gpu, script, tmp_path):
    out = tmp_path / "run"
    # 128 calls of 5 ms (32 counter windows, 8 blocks of 16).
    res = CliRunner().invoke(app, ["run", "-o", str(out), "--", str(script), "128", "0"], obj=fake_gpu.deps)
    assert res.exit_code == 0, res.output
    assert "hot_kernel" in res.output and "cool_kernel" in res.output
    assert "program output" in res.output
    rd = RunDir.open(out)
    assert rd.manifest.status == "complete" and rd.manifest.kind == "run"
    for name in ("kernels.csv", "attribution.json", "trace.perfetto.json", "timeline.png", "raw/recording.npz"):
        assert (out / name).is_file(), name
    assert not list((out / "raw").glob("activities.part-*"))
    rows = {r["name"]: r for r in rd.read_csv("kernels.csv")}
    assert rows["hot_kernel"]["calls"] == 64
    # 400 W vs 180 W kernels, told apart by a 20 ms counter (the fake GPU runs on the fake clock).
    assert rows["hot_kernel"]["mean_power_w"] == pytest.approx(400.0, rel=0.05)
    assert rows["cool_kernel"]["mean_power_w"] == pytest.approx(180.0, rel=0.05)
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == "0"


def test_exit_status_is_passed_through_and_outputs_kept(fake_gpu, script, tmp_path):
    out = tmp_path / "run"
    res = CliRunner().invoke(
        app, ["run", "-o", str(out), "--", sys.executable, str(script), "3", "4"], obj=fake_gpu.deps
    )
    assert res.exit_code == 4
    assert "exited with status 4" in res.output
    assert RunDir.open(out).manifest.status == "complete"
    assert (out / "kernels.csv").is_file()


def test_a_crashing_program_keeps_its_run_directory(fake_gpu, tmp_path):
    p = tmp_path / "crash.py"
    p.write_text("import archline_fake_cuda as gpu\ngpu.launch('k', 0.01, 300.0)\n1/0\n")
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "-o", str(out), "--", str(p)], obj=fake_gpu.deps)
    assert res.exit_code == 1
    assert "ZeroDivisionError" in res.output
    assert (out / "raw" / "recording.npz").is_file() and (out / "kernels.csv").is_file()


def test_a_failure_message_with_brackets_is_printed_verbatim(fake_gpu, tmp_path):
    p = tmp_path / "crash.py"
    p.write_text("import archline_fake_cuda as gpu\ngpu.launch('k', 0.01, 300.0)\n"
                 "raise ValueError('bad shape [/x]')\n")  # fmt: skip
    res = CliRunner().invoke(app, ["run", "-o", str(tmp_path / "run"), "--", str(p)], obj=fake_gpu.deps)
    assert res.exit_code == 1, res.output
    assert "bad shape [/x]" in res.output


def test_json_output_is_clean(fake_gpu, script, tmp_path):
    res = CliRunner().invoke(
        app, ["run", "--json", "-o", str(tmp_path / "r"), "--", str(script), "2", "0"], obj=fake_gpu.deps
    )
    assert res.exit_code == 0
    start = res.stdout.index("{")
    payload = json.loads(res.stdout[start:])
    assert payload["exit_code"] == 0 and payload["status"] == "complete"
    names = [r["name"] for r in payload["result"]["rows"]]
    assert "hot_kernel" in names and "(unexplained residual)" in names


def test_command_not_found_is_one_line_127(fake_gpu, tmp_path):
    res = CliRunner().invoke(app, ["run", "-o", str(tmp_path / "r"), "--", "no-such-program-xyz"], obj=fake_gpu.deps)
    assert res.exit_code == 127
    assert "command not found" in res.output and "Traceback" not in res.output


def test_no_gpu_is_one_line_exit_3(monkeypatch, script, tmp_path):
    gpu = FakeGPU()
    no_gpu = Deps(attribution_backend=lambda: gpu.backend(no_gpu=True))
    res = CliRunner().invoke(app, ["run", "-o", str(tmp_path / "r"), "--", str(script), "1", "0"], obj=no_gpu)
    assert res.exit_code == 3
    assert "no NVIDIA GPU" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "r").exists()


def test_cupti_refusal_is_one_line_exit_3(monkeypatch, script, tmp_path):
    gpu = FakeGPU()
    refusing = Deps(attribution_backend=lambda: gpu.backend(fail_tracer=True))
    out = tmp_path / "r"
    res = CliRunner().invoke(app, ["run", "-o", str(out), "--", str(script), "1", "0"], obj=refusing)
    assert res.exit_code == 3
    assert "INSUFFICIENT_PRIVILEGES" in res.output and "Traceback" not in res.output
    assert RunDir.open(out).manifest.status == "failed"


def test_binary_without_injection_gets_whole_program_energy(fake_gpu, tmp_path):
    # The fake GPU's injection library does not build; the child 'runs' 0.2 s on the fake clock.
    out = tmp_path / "r"
    res = CliRunner().invoke(app, ["run", "-o", str(out), "--", "sh", "-c", "exit 5"], obj=fake_gpu.deps)
    assert res.exit_code == 5
    assert "whole-program energy only" in res.output
    rows = RunDir.open(out).read_csv("kernels.csv")
    assert rows[0]["name"] == "[whole program]" and rows[0]["kind"] == "program"
    assert any("per-kernel rows unavailable" in n for n in RunDir.open(out).manifest.notes)


def test_python_api_gives_a_kernel_table(fake_gpu, tmp_path):
    # 24 calls of 20 ms span 24 counter windows.
    with attribute(gpu=0, backend=fake_gpu.backend(), out=tmp_path / "api") as a:
        for _ in range(24):
            fake_gpu.launch("matmul", 0.02, 450.0)
    assert a.kernels["matmul"].calls == 24
    assert a.kernels["matmul"].mean_power_w == pytest.approx(450.0, rel=0.05)
    assert a.table.energy_j == pytest.approx(a.result.total_energy_j)
    assert (tmp_path / "api" / "kernels.csv").is_file()
    with pytest.raises(RuntimeError, match="after the with-block"):
        _ = attribute(backend=fake_gpu.backend()).kernels
    assert (tmp_path / "api" / "trace.perfetto.json").is_file()  # the default writer wrote the report files
    # render=None: the run directory without report files; its printed table has intervals and a legend
    with attribute(gpu=0, backend=fake_gpu.backend(), out=tmp_path / "bare", render=None) as b:
        for _ in range(24):
            fake_gpu.launch("matmul", 0.02, 450.0)
    assert (tmp_path / "bare" / "kernels.csv").is_file() and not (tmp_path / "bare" / "trace.perfetto.json").exists()
    text = str(b.kernels)
    assert "95 % interval J" in text and "(?): not identifiable" in text and "nan" not in text
    with pytest.raises(InputError, match="render must be"):
        attribute(render="html")


class _BrokenSource(FakeSource):
    name = "nvml.broken"

    def read(self) -> Any:
        raise SensorError("sensor lost (fake)")


class _InterruptedPostSleep:
    """The fake GPU's clock, except that the sleep after the block (``post_s``) is interrupted (a second Ctrl-C)."""

    post_s = 0.123

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    def now_s(self) -> float:
        return self.clock.now_s()

    def sleep(self, seconds: float) -> None:
        if seconds == self.post_s:
            raise KeyboardInterrupt
        self.clock.sleep(seconds)


def test_a_sensor_failure_after_the_block_still_closes_the_run_directory(fake_gpu, tmp_path):
    b = fake_gpu.backend()
    b = dataclasses.replace(b, open_sources=lambda gpu, f=b.open_sources: [*f(gpu), _BrokenSource(fake_gpu)])
    with pytest.raises(SensorError, match="sensor lost"), attribute(gpu=0, backend=b, out=tmp_path / "r"):
        fake_gpu.launch("k", 0.005, 300.0)
    m = RunDir.open(tmp_path / "r").manifest
    assert m.status == "failed" and m.finished_utc is not None
    assert any("sensor lost" in n for n in m.notes)


def test_an_interrupt_while_finishing_leaves_an_interrupted_run_directory(fake_gpu, tmp_path):
    clock = _InterruptedPostSleep(fake_gpu.clock)
    b = dataclasses.replace(fake_gpu.backend(), clock=clock, post_s=clock.post_s)
    with pytest.raises(KeyboardInterrupt), attribute(gpu=0, backend=b, out=tmp_path / "r"):
        fake_gpu.launch("k", 0.005, 300.0)
    m = RunDir.open(tmp_path / "r").manifest
    assert m.status == "interrupted" and m.finished_utc is not None


def test_command_classification(tmp_path):
    p = tmp_path / "s.py"
    p.write_text("")
    assert classify_command([str(p), "a"]).how == "script"
    spec = classify_command(["python3", "-u", str(p), "--lr", "0.1"])
    assert spec.how == "script" and spec.argv == (str(p), "--lr", "0.1")
    spec = classify_command(["python", "-m", "pkg.mod", "x"])
    assert spec.how == "module" and spec.argv == ("pkg.mod", "x")
    assert classify_command(["python", "-c", "print(1)"]).how == "code"
    assert classify_command(["sh", "-c", "true"]).how == "binary"
    with pytest.raises(CommandError):
        classify_command([str(tmp_path / "missing.py")])
    with pytest.raises(InputError):
        classify_command(["python"])
    with pytest.raises(InputError):
        classify_command(["python", "-i", str(p)])
    with pytest.raises(InputError):
        classify_command([])


# --------------------------------------------------------------------------- the tracer choice

REPO = Path(__file__).resolve().parents[2]

# Stands in for a CUDA program under the injection library: it 'runs' kernels of 4 ms on the fake
# clock (from the start time the fake GPU hands it) and writes what the library would have written
# into $ARCHLINE_CUPTI_OUT, then the fake time at which it ended.
CHILD_SCRIPT = f"""
import os, struct, sys
sys.path.insert(0, {str(REPO)!r})
from tests.helpers.attrib_fakes import CHILD_END_FILE, CHILD_START_NS, injection_chunk, injection_output
from archline.hw.cupti.inject import ChunkType
out = os.environ.get("ARCHLINE_CUPTI_OUT")
if not out:
    sys.exit(9)
t0 = t = int(os.environ[CHILD_START_NS])
kernels = []
for i in range(int(sys.argv[1])):
    kernels.append(("child_kernel", t, t + 4_000_000))
    t += 4_100_000
data = injection_output(kernels, clock=(t0, t0))
probe_ms = int(os.environ.get("ARCHLINE_CUPTI_DUTY_AUTO", "0,0").split(",")[0])
if probe_ms and kernels[-1][2] - t0 < probe_ms * 10**6:
    # The automatic duty cycle on a program shorter than its probe: one on-mark, never off.
    data += injection_chunk(ChunkType.TRACE_ON, 1, struct.pack("<2Q", t0, 0))
elif os.environ.get("ARCHLINE_CUPTI_DUTY_MS"):
    # What the library marks with a duty cycle: on, off, on, off ... and a detach per off-switch.
    on_ms, period_ms = (int(x) for x in os.environ["ARCHLINE_CUPTI_DUTY_MS"].split(","))
    t, n = t0, 0
    while t < kernels[-1][2]:
        data += injection_chunk(ChunkType.TRACE_ON, 1, struct.pack("<2Q", t, 3 * 10**6 * (n > 0)))
        data += injection_chunk(ChunkType.TRACE_OFF, 1, struct.pack("<2Q", t + on_ms * 10**6, 3 * 10**6))
        if os.environ["ARCHLINE_CUPTI_DUTY_MODE"] == "detach":
            data += injection_chunk(ChunkType.DETACH, 1, struct.pack("<2Q", 15 * 10**6, (n + 1) * 10**6))
        t, n = t + period_ms * 10**6, n + 1
with open(os.path.join(out, f"cupti-{{os.getpid()}}.bin"), "wb") as fh:
    fh.write(data)
with open(os.environ[CHILD_END_FILE], "w") as fh:
    fh.write(str(kernels[-1][2] + 1_000_000))
print("child output")
sys.exit(int(sys.argv[2]))
"""


@pytest.fixture()
def injecting_gpu(fake_gpu, monkeypatch, tmp_path):
    """The fake GPU, with an injection library that 'builds'."""
    lib = tmp_path / "libfake_inject.so"
    lib.write_bytes(b"")
    fake_gpu.deps = Deps(attribution_backend=lambda: fake_gpu.backend(injection=lib))
    return fake_gpu


def test_inject_runs_a_python_program_as_a_child_with_the_injection_library(injecting_gpu, tmp_path):
    p = tmp_path / "child.py"
    p.write_text(CHILD_SCRIPT)
    out = tmp_path / "run"
    res = CliRunner().invoke(
        app, ["run", "--tracer", "inject", "-o", str(out), "--", str(p), "12", "3"], obj=injecting_gpu.deps
    )
    assert res.exit_code == 3, res.output
    # At 80 columns the table may break the name after its underscore; the CSV below has it whole.
    assert "child_" in res.output and "exited with status 3" in res.output
    assert any(r["name"] == "child_kernel" for r in RunDir.open(out).read_csv("kernels.csv"))
    rd = RunDir.open(out)
    assert rd.manifest.extra["tracer"] == "inject"
    assert any(n.startswith("tracer: inject") and "--tracer inject" in n for n in rd.manifest.notes)
    # The default tracing: automatic, named with its expected cost; a 48 ms program stays traced.
    auto = [n for n in rd.manifest.notes if n.startswith("tracing: automatic")]
    assert len(auto) == 1 and "37–243 ms" in auto[0] and "+0.07 to +0.14 %" in auto[0] and "session 28" in auto[0]
    assert "500 ms of every 30000 ms" in auto[0]
    assert not any("untraced" in r["name"] for r in rd.read_csv("kernels.csv"))
    assert rd.manifest.command[0] == sys.executable
    rows = {r["name"]: r for r in rd.read_csv("kernels.csv")}
    assert rows["child_kernel"]["calls"] == 12
    (trace,) = (out / "raw" / "cupti").glob("cupti-*.bin")
    assert trace.stem != f"cupti-{os.getpid()}"  # written by another process


def test_tracer_python_keeps_the_program_in_process(injecting_gpu, script, tmp_path):
    out = tmp_path / "run"
    res = CliRunner().invoke(
        app, ["run", "--tracer", "python", "-o", str(out), "--", str(script), "32", "0"], obj=injecting_gpu.deps
    )
    assert res.exit_code == 0, res.output
    rd = RunDir.open(out)
    assert rd.manifest.extra["tracer"] == "python"
    assert {r["name"] for r in rd.read_csv("kernels.csv")} >= {"hot_kernel", "cool_kernel"}


def test_auto_falls_back_to_in_process_without_the_injection_library(fake_gpu, script, tmp_path):
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--json", "-o", str(out), "--", str(script), "2", "0"], obj=fake_gpu.deps)
    assert res.exit_code == 0
    payload = json.loads(res.stdout[res.stdout.index("{") :])
    assert payload["tracer"] == "python"
    note = next(n for n in RunDir.open(out).manifest.notes if n.startswith("tracer:"))
    assert "chosen by --tracer auto because the CUPTI injection library is unavailable" in note


def test_auto_injects_a_python_program_when_the_library_builds(tmp_path):
    from archline.measurement.attribute.program import choose_tracer, classify_command

    (tmp_path / "x.py").write_text("pass\n")
    spec = classify_command(["python", str(tmp_path / "x.py")])
    assert spec.in_process
    lib = tmp_path / "libinject.so"
    choice = choose_tracer(spec, "auto", trace=True, build=lambda: lib)
    assert choice.mode == "inject" and choice.lib == lib
    assert "--tracer auto" in choice.note
    assert choose_tracer(spec, "python", trace=True, build=lambda: lib).mode == "python"


def test_tracer_inject_without_the_library_is_one_line_exit_3(fake_gpu, tmp_path):
    marker = tmp_path / "ran"
    p = tmp_path / "prog.py"
    p.write_text(f"open({str(marker)!r}, 'w').close()\n")
    res = CliRunner().invoke(
        app, ["run", "--tracer", "inject", "-o", str(tmp_path / "r"), "--", str(p)], obj=fake_gpu.deps
    )
    assert res.exit_code == 3
    assert "--tracer inject" in res.output and "CUPTI" in res.output and "Traceback" not in res.output
    assert not marker.exists() and not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tracer", "cuda"], "--tracer must be one of auto, inject, python"),
        (["--tracer", "python", "--", "sh", "-c", "true"], "traces Python programs only"),
    ],
)
def test_tracer_option_errors_are_one_line_exit_2(fake_gpu, tmp_path, args, message):
    cmd = ["run", "-o", str(tmp_path / "r"), *args]
    if "--" not in args:
        cmd += ["--", "sh", "-c", "true"]
    res = CliRunner().invoke(app, cmd, obj=fake_gpu.deps)
    assert res.exit_code == 2
    assert message in res.output and "Traceback" not in res.output
    assert not (tmp_path / "r").exists()


def test_choose_tracer(tmp_path):
    from archline.errors import CUPTIUnavailableError

    lib = tmp_path / "lib.so"
    built = []

    def ok() -> Path:
        built.append(1)
        return lib

    def missing() -> Path:
        raise CUPTIUnavailableError("no cc")

    py = classify_command(["python", "-c", "pass"])
    binary = classify_command(["sh", "-c", "true"])
    choose = choose_tracer
    assert choose(py, "auto", trace=True, build=ok) == TracerChoice(
        "inject", lib, "tracer: inject (CUPTI injection library in a child process; --tracer auto)"
    )
    assert built  # auto injects Python programs too (cheaper than in-process on every measured workload)
    assert choose(py, "auto", trace=True, build=missing).mode == "python"
    assert choose(py, "inject", trace=True, build=ok).lib == lib
    with pytest.raises(CUPTIUnavailableError, match="--tracer inject: no cc"):
        choose(py, "inject", trace=True, build=missing)
    built.clear()
    assert choose(py, "python", trace=True, build=ok).mode == "python" and not built
    # No tracing: nothing is built; the tracer only says where the program runs.
    assert choose(py, "auto", trace=False, build=ok) == TracerChoice("python")
    assert choose(py, "inject", trace=False, build=ok).lib is None and not built
    b = choose(binary, "auto", trace=True, build=missing)
    assert b.mode == "inject" and b.lib is None and "unavailable (no cc)" in (b.untraced or "")
    assert choose(binary, "auto", trace=True, build=ok).lib == lib
    with pytest.raises(InputError, match="Python programs only"):
        choose(binary, "python", trace=True, build=ok)


def test_a_python_program_as_a_child_runs_as_given(tmp_path):
    from archline.measurement.attribute.program import as_child

    p = tmp_path / "s.py"
    p.write_text("")
    assert as_child(classify_command([str(p), "x"])).argv == (sys.executable, str(p), "x")
    spec = as_child(classify_command([sys.executable, "-u", str(p), "--lr", "0.1"]))
    assert spec.how == "binary" and spec.argv == (sys.executable, "-u", str(p), "--lr", "0.1")
    assert as_child(classify_command([sys.executable, "-m", "pkg.mod"])).argv == (sys.executable, "-m", "pkg.mod")
    binary = classify_command(["sh", "-c", "true"])
    assert as_child(binary) is binary


def test_trace_duty_parsing():
    from archline.cli.run_cmd import parse_duty

    assert parse_duty("0.25/1") == (250, 1000)
    assert parse_duty("0.5/2.5") == (500, 2500)
    for bad in ("1/1", "0.001/1", "x/1", "0.5", "2/1"):
        with pytest.raises(InputError, match="--trace-duty"):
            parse_duty(bad)


@pytest.mark.parametrize("mode", ["detach", "disable"])
def test_trace_duty_marks_reach_the_run_and_its_notes(injecting_gpu, tmp_path, mode):
    p = tmp_path / "child.py"
    p.write_text(CHILD_SCRIPT)
    out = tmp_path / "run"
    args = ["run", "--tracer", "inject", "--trace-duty", "0.2/0.3", "--trace-duty-mode", mode, "-o", str(out)]
    res = CliRunner().invoke(app, [*args, "--", str(p), "300", "0"], obj=injecting_gpu.deps)
    assert res.exit_code == 0, res.output
    rd = RunDir.open(out)
    notes = rd.manifest.notes
    how = "CUPTI detached" if mode == "detach" else "CUPTI's records disabled"
    assert any(n.startswith("tracing duty cycle: kernels traced 200 ms of every 300 ms") and how in n for n in notes)
    assert any(n.startswith("duty cycle:") and "switches of tracing, median 3 ms each" in n for n in notes)
    detach_note = [n for n in notes if "cuptiFinalize held the program's thread" in n]
    if mode == "detach":
        (note,) = detach_note
        n = rd.manifest.extra["trace_detaches"]
        assert f"CUPTI detached {n} times" in note and f"{n:g} ms at most" in note, note
    else:
        assert detach_note == []
    rows = {r["name"]: r for r in rd.read_csv("kernels.csv")}
    assert "(untraced time, duty-cycled tracing)" in rows
    assert 0 < int(rows["child_kernel"]["calls"]) < 300


def test_too_little_traced_time_keeps_the_run_as_one_whole_program_row(injecting_gpu, tmp_path):
    p = tmp_path / "child.py"
    p.write_text(CHILD_SCRIPT)
    out = tmp_path / "run"
    args = ["run", "--tracer", "inject", "--trace-duty", "0.01/0.5", "-o", str(out), "--", str(p), "150", "0"]
    res = CliRunner().invoke(app, args, obj=injecting_gpu.deps)
    assert res.exit_code == 0, res.output
    rd = RunDir.open(out)
    assert rd.manifest.status == "complete"
    (note,) = [n for n in rd.manifest.notes if n.startswith("per-kernel rows unavailable")]
    assert "lie inside the traced intervals" in note and note.endswith("whole-program energy only")
    rows = {r["name"]: r for r in rd.read_csv("kernels.csv")}
    assert "[whole program]" in rows and "child_kernel" not in rows


def test_trace_duty_mode_is_checked(fake_gpu, script, tmp_path):
    res = CliRunner().invoke(
        app,
        ["run", "--trace-duty", "0.25/1", "--trace-duty-mode", "off", "--", str(script), "2", "0"],
        obj=fake_gpu.deps,
    )
    assert res.exit_code == 2 and "--trace-duty-mode: expected one of detach, disable" in res.output
    assert "Traceback" not in res.output


def test_trace_duty_needs_the_injection_tracer(fake_gpu, script, tmp_path):
    out = tmp_path / "run"
    res = CliRunner().invoke(
        app,
        ["run", "--tracer", "python", "--trace-duty", "0.25/1", "-o", str(out), "--", str(script), "2", "0"],
        obj=fake_gpu.deps,
    )
    assert res.exit_code == 2
    assert "--trace-duty needs the injection tracer" in res.output
    assert "Traceback" not in res.output


def test_a_launch_bound_program_gets_a_note_pointing_to_duty_cycling():
    from archline.measurement.attribute.launch_bound import launch_bound_note
    from archline.records.attribution import KernelRow

    def row(name, kind, calls, time_s):
        nan = float("nan")
        return KernelRow(name, kind, calls, time_s, 1.0, 1.0, 1.0, 0.1, nan, nan, nan, "regression")

    class Result:
        def __init__(self, rows):
            self.table = rows

    launchy = Result([row("k", "kernel", 20000, 0.1), row("(launch gaps)", "gap", 20000, 0.5)])
    note = launch_bound_note(launchy, (0.0, 1.0), duty_cycled=False)
    assert note is not None and "between 20000 kernel launches for 50 % of the program" in note
    assert "--trace-duty 0.3/6" in note
    assert launch_bound_note(launchy, (0.0, 1.0), duty_cycled=True) is None
    assert launch_bound_note(launchy, (0.0, 2.0), duty_cycled=False) is None  # 25 % of the span
    few = Result([row("(launch gaps)", "gap", 500, 0.9)])
    assert launch_bound_note(few, (0.0, 1.0), duty_cycled=False) is None


def test_a_run_through_the_shipped_sensor_prior_says_how_to_get_the_boards_own(fake_gpu, tmp_path, monkeypatch):
    """Session 27: on a board without its own calibration the run fits the buffer through its generation's shipped
    prior and a note names it and the command that gives the board's own; with the board's profile in the cache the
    run takes it and no such note is made."""
    from archline.measurement.calibrate.profile import SensorProfile, save_profile
    from archline.measurement.choose import shipped_priors

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    static = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-fake-h100", "driver_version": "580.159.04"}

    def run(out: Path) -> Any:
        backend = dataclasses.replace(fake_gpu.backend(), device_static=lambda gpu: dict(static))
        with attribute(gpu=0, backend=backend, out=out, render=None) as a:
            for _ in range(24):
                fake_gpu.launch("matmul", 0.02, 450.0)
        return a

    a = run(tmp_path / "prior")
    (note,) = [n for n in a.notes if "archline sensor calibrate" in n]
    assert "fitted through the shipped calibration of GPU-591bd772" in note and "not this board's own" in note
    assert "prior (shipped calibration" in RunDir.open(tmp_path / "prior").manifest.extra["buffer_model"]
    # the board's own profile in the cache: taken, and no note
    _, shipped = shipped_priors(static["name"], "nvml.buffer")[0]
    own = dataclasses.replace(shipped, gpu_uuid=static["uuid"], driver_version=static["driver_version"])
    assert isinstance(own, SensorProfile)
    save_profile(own)
    b = run(tmp_path / "own")
    assert not [n for n in b.notes if "archline sensor calibrate" in n]
    assert "calibration (GPU-fake-h10" in RunDir.open(tmp_path / "own").manifest.extra["buffer_model"]


def test_a_program_at_the_boards_power_limit_is_warned_of(fake_gpu, tmp_path):
    # the fake board is limited to 700 W; a kernel drawing 690 W back to back keeps it at ≥ 97 % of that
    p = tmp_path / "capped.py"
    p.write_text("import archline_fake_cuda as gpu\nfor i in range(128):\n    gpu.launch('gemm', 0.005, 690.0)\n")
    res = CliRunner().invoke(app, ["run", "-o", str(tmp_path / "run"), "--", str(p)], obj=fake_gpu.deps)
    assert res.exit_code == 0, res.output
    assert "archline: warning: the board was at its power limit (≥ 97 % of 700 W) in " in res.stderr
    assert "power limit" not in res.stdout  # once, on stderr: not also as a note
    info = json.loads((tmp_path / "run" / "attribution.json").read_text())["extra"]["at_limit"]
    assert info["share"] >= 0.9 and info["limit_w"] == 700.0
    p.write_text("import archline_fake_cuda as gpu\nfor i in range(128):\n    gpu.launch('gemm', 0.005, 400.0)\n")
    res = CliRunner().invoke(app, ["run", "-o", str(tmp_path / "run2"), "--", str(p)], obj=fake_gpu.deps)
    assert res.exit_code == 0 and "power limit" not in res.output
