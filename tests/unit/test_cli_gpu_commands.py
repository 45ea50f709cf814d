"""The GPU commands on a machine without a GPU: shipped-run fallback and one-line errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archline.cli._common import Deps
from archline.cli.app import app
from tests.helpers.fake_gpu import FakeClock
from tests.helpers.fake_nvml import make_fake_nvml


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine whose NVML has no driver behind it (the fake pynvml fails nvmlInit)."""
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_nvml(init_error=9))


def _one_line_error(res: object) -> str:
    out = res.output  # type: ignore[attr-defined]
    assert "Traceback" not in out
    errors = [ln for ln in out.splitlines() if "archline: error:" in ln]
    assert len(errors) == 1, out
    return errors[0]


def test_characterize_without_a_gpu_renders_the_shipped_h100_run(no_gpu: None, tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["characterize", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "no GPU here" in res.output and "H100" in res.output
    text = (out / "report.md").read_text()
    assert "NVIDIA H100 80GB HBM3" in text and "arith.fp32.fma" in text
    assert (out / "report.html").is_file()


def test_characterize_no_shipped_fails_with_exit_3(no_gpu: None, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["characterize", "--no-shipped", "-o", str(tmp_path / "r")])
    assert res.exit_code == 3
    assert "NVML is not available" in _one_line_error(res)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["characterize", "--only", "arith.fp33.*"], "no benchmark matches 'arith.fp33.*'", 2),
        (["instructions", "--opt", "0,5"], "optimisation level 5 is outside 0–4", 2),
        (["instructions", "--opt", "fast"], "'fast' is not an optimisation level", 2),
        (["instructions", "--only", "frobnicate.u32"], "no instruction matches", 2),
        (["roofline", "--precision", "half"], "unknown precision 'half'", 2),
        (["roofline", "--heldout-error", "2"], "--heldout-error must be between 0 and 1", 2),
        (["sensor", "calibrate"], "NVML is not available", 3),
        (["sensor", "validate"], "NVML is not available", 3),
        (["instructions", "--only", "add.u32"], "NVML is not available", 3),
        (["roofline"], "NVML is not available", 3),
        (["measure", "--gpu", "0"], "no command given", 2),
    ],
)
def test_bad_input_and_missing_gpu_are_one_line(
    no_gpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str, code: int
) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, args)
    assert res.exit_code == code, res.output
    assert message in _one_line_error(res)


def test_repeat_of_a_run_without_an_instruction_table_fails_before_measuring(no_gpu: None, tmp_path: Path) -> None:
    from archline.records import Manifest, RunDir

    rd = RunDir.create(tmp_path / "earlier", Manifest.new("instructions"))
    res = CliRunner().invoke(app, ["instructions", "-o", str(tmp_path / "r"), "--repeat-of", str(rd.path)])
    assert res.exit_code == 2, res.output
    assert "instructions.csv" in _one_line_error(res)
    assert not (tmp_path / "r").exists()


def test_refresh_targets_refuses_a_run_of_another_kind(tmp_path: Path) -> None:
    from archline.records import Manifest, RunDir

    rd = RunDir.create(tmp_path / "r", Manifest.new("roofline"))
    rd.write_csv("results.csv", [{"name": "x", "group": "g"}])
    res = CliRunner().invoke(app, ["report", str(rd.path), "--refresh-targets", "why"])
    assert res.exit_code == 2
    assert "targets belong to characterize runs" in _one_line_error(res)


@pytest.mark.parametrize("args", [["report"], ["report", "h100/characterize"]])
def test_refresh_targets_of_a_shipped_run_is_refused_not_ignored(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, [*args, "--refresh-targets", "why"])
    assert res.exit_code == 2, res.output
    assert "a shipped run is read-only" in _one_line_error(res)
    assert not (tmp_path / "archline-report").exists()


def test_refresh_targets_recomputes_from_the_runs_own_tables(tmp_path: Path) -> None:
    import shutil

    src = Path(__file__).resolve().parents[2] / "results" / "h100" / "characterize-quick"
    run = tmp_path / "quick"
    shutil.copytree(src, run)
    (run / "targets.csv").unlink()
    res = CliRunner().invoke(app, ["report", str(run), "--refresh-targets", "test"])
    assert res.exit_code == 0, res.output
    text = (run / "targets.csv").read_text()
    assert "FP32 FMA" in text and "--quick suite" in text
    from archline.records import RunDir

    assert any("targets re-evaluated" in n and "test" in n for n in RunDir.open(run).manifest.notes)


def test_monitor_records_every_source_to_a_trace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sys

    from archline.records.traces import read_trace_csv
    from tests.helpers.fake_nvml import make_fake_nvml

    clock = FakeClock()
    now_us = round(clock.now_s() * 1e6)
    # The buffer holds 39 samples 20 ms apart; the monitor runs 0.6 s on the fake clock.
    fake = make_fake_nvml(samples=[(now_us + 20_000 * k, 100_000 + 1000 * k) for k in range(1, 40)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    out = tmp_path / "trace.csv"
    res = CliRunner().invoke(app, ["monitor", "--duration", "0.6", "-o", str(out)], obj=Deps(clock=clock))
    assert res.exit_code == 0, res.output
    r = read_trace_csv(out)
    assert len(r) == 39 and r.value.min() == 101.0 and r.value.max() == 139.0  # the buffer's readings, in W
    assert fake.state["init"] == 0  # every NVML session was closed


def test_monitor_all_closes_the_gpus_it_opened_when_a_later_one_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from tests.helpers.fake_nvml import NVMLError, make_fake_nvml

    fake = make_fake_nvml(count=2)
    opened = fake.nvmlDeviceGetHandleByIndex

    def second_is_lost(i: int) -> str:
        if i == 1:
            raise NVMLError(fake.NVML_ERROR_GPU_IS_LOST)
        return opened(i)

    monkeypatch.setattr(fake, "nvmlDeviceGetHandleByIndex", second_is_lost)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    res = CliRunner().invoke(app, ["monitor", "--gpu", "all", "--duration", "0.3"], obj=Deps(clock=FakeClock()))
    assert res.exit_code != 0
    _one_line_error(res)
    assert fake.state["init"] == 0  # GPU 0's NVML session was closed too


def test_measure_passes_a_signal_death_through_as_128_plus_n(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    fake = make_fake_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    res = CliRunner().invoke(app, ["measure", "--json", "--", "sh", "-c", "kill -9 $$"], obj=Deps(clock=FakeClock()))
    assert res.exit_code == 128 + 9, res.output
    assert json.loads(res.stdout)["exit_code"] == 137
    assert fake.state["init"] == 0  # the command's NVML session was closed


def test_measure_of_a_missing_command_is_one_line_127(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_nvml())
    res = CliRunner().invoke(
        app, ["measure", "--", "archline-no-such-command-xyz", "--flag"], obj=Deps(clock=FakeClock())
    )
    assert res.exit_code == 127
    assert "archline-no-such-command-xyz" in _one_line_error(res)


def test_run_opens_one_nvml_session_for_its_sensors_and_device_facts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = make_fake_nvml()
    inits: list[int] = []
    init = fake.nvmlInit

    def counted() -> None:
        inits.append(1)
        init()

    monkeypatch.setattr(fake, "nvmlInit", counted)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    out = tmp_path / "r"
    res = CliRunner().invoke(
        app, ["run", "--no-kernels", "-o", str(out), "--", "sh", "-c", "exit 0"], obj=Deps(clock=FakeClock())
    )
    # The fake NVML's sensors hold no readings: the run fails in one line, its directory kept.
    assert res.exit_code == 1 and "no usable 'nvml.energy' or 'nvml.buffer' readings" in res.output, res.output
    from archline.records import RunDir

    m = RunDir.open(out).manifest
    assert m.gpu.get("name") and m.state_before and m.state_after  # the device facts came through the session
    assert len(inits) == 1 and fake.state["init"] == 0  # one session for the command, closed
