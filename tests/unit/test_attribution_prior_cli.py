"""``archline run --prior-replay``: replay priors, the board's power limit and the 'from' column, on a fake GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archline.cli._common import Deps
from archline.cli.app import app
from archline.records import RunDir
from tests.helpers.attrib_fakes import PROGRAM_MODULE, FakeGPU

SCRIPT = """
import archline_fake_cuda as gpu
for i in range(64):
    gpu.launch("hot_kernel" if (i // 16) % 2 == 0 else "cool_kernel", 0.005, 400.0 if (i // 16) % 2 == 0 else 180.0)
"""


def _script_and_replay(tmp_path: Path) -> tuple[Path, Path]:
    """The traced program, and a replay directory whose one group is its hot kernel (2 J per step, σ 0.02 J)."""
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    replay = tmp_path / "replay"
    replay.mkdir()
    (replay / "replay.csv").write_text(
        "group,kind,nodes_per_step,time_s,energy_j,energy_sigma_j,mean_power_w,marginal_j,marginal_sigma_j\n"
        "hot_kernel,kernel,1,0.005,2.0,0.02,400,,\n"
    )
    return script, replay


@pytest.fixture()
def fake_gpu(monkeypatch):
    gpu = FakeGPU()
    monkeypatch.setitem(sys.modules, PROGRAM_MODULE, gpu.module())
    gpu.deps = Deps(attribution_backend=gpu.backend)  # type: ignore[attr-defined]
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(k, raising=False)
    return gpu


def test_run_takes_replay_priors_and_the_boards_power_limit(fake_gpu, tmp_path):
    script, replay = _script_and_replay(tmp_path)
    out = tmp_path / "run"
    argv = ["run", "-o", str(out), "--tracer", "python", "--prior-replay", str(replay), "--", str(script)]
    res = CliRunner().invoke(app, argv, obj=fake_gpu.deps)
    assert res.exit_code == 0, res.output
    rd = RunDir.open(out)
    assert rd.manifest.extra["power_limit_w"] == 700.0
    rows = {r["name"]: r for r in rd.read_csv("kernels.csv")}
    assert rows["hot_kernel"]["dominated_by"] in ("data", "mixed", "prior")
    att = rd.read_json("attribution.json")
    assert att["extra"]["priors"] == {"hot_kernel": "replay"}
    assert att["extra"]["power_limit_w"] == 700.0
    # The replay is kept beside the run, and its report sets the attribution against it.
    assert (out / "replay.csv").read_bytes() == (replay / "replay.csv").read_bytes()
    assert "replay.csv" in rd.manifest.files
    from archline.report.registry import render_run

    md = render_run(out, tmp_path / "report").markdown.read_text()
    assert "## Graph replay" in md and "Attribution against graph replay (1 of 1 replayed groups" in md
    # replay: 2.0 J per replay of the step, one node per step, σ 0.02 J → 2000 ± 20 mJ per call
    assert any(line.startswith("| hot_kernel | ") and "| 2000 ± 20 |" in line for line in md.splitlines())


def test_a_missing_replay_directory_is_one_line_exit_2(fake_gpu, tmp_path):
    argv = ["run", "--prior-replay", str(tmp_path / "nope"), "--", "true"]
    res = CliRunner().invoke(app, argv, obj=fake_gpu.deps)
    assert res.exit_code == 2
    assert "nope: file not found" in res.output and "Traceback" not in res.output


def test_run_warns_when_its_replay_priors_predate_the_state_restore(fake_gpu, tmp_path):
    script, replay = _script_and_replay(tmp_path)
    (replay / "replay.json").write_text('{"step_energy_j": 2.0}')
    argv = ["run", "-o", str(tmp_path / "run"), "--tracer", "python", "--prior-replay", str(replay), "--", str(script)]
    res = CliRunner().invoke(app, argv, obj=fake_gpu.deps)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "archline: warning:" in text and "predates" in text and "NaN" in text


def test_run_takes_the_shipped_burst_ceiling_of_its_board(fake_gpu, tmp_path, monkeypatch):
    # A burst measurement shipped for a board of the fake's name: archline run finds it by name, bounds each
    # kernel by it and says where it came from; another board's measurement is not used.
    import json

    shipped = tmp_path / "shipped"
    f = shipped / "fake" / "bench" / "burst-power" / "burst_power-GPU-fake.json"
    f.parent.mkdir(parents=True)
    rows = [{"gemm_w": 900.0, "verdict": "above"}, {"gemm_w": 700.0, "verdict": "below"}]
    f.write_text(json.dumps({"board": "Fake GPU", "uuid": "GPU-fake", "rows": rows}))
    monkeypatch.setenv("ARCHLINE_SHIPPED_DIR", str(shipped))
    script = tmp_path / "bursts.py"
    script.write_text(BURSTS)  # kernels that never fill a window: bounded by the ceiling, not the limit
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "-o", str(out), "--tracer", "python", "--", str(script)], obj=fake_gpu.deps)
    assert res.exit_code == 0, res.output
    att = RunDir.open(out).read_json("attribution.json")
    assert att["extra"]["power_ceiling_w"] == 900.0
    notes = [*att.get("notes", []), *RunDir.open(out).manifest.notes]
    assert any("900 W, the most a bf16 GEMM" in n and "fake/bench/burst-power" in n for n in notes), notes
    assert att["extra"]["power_bound_w"]["hot_kernel"] == pytest.approx(1.05 * 900.0)
    f.write_text(json.dumps({"board": "Another GPU", "uuid": "GPU-x", "rows": rows}))
    out2 = tmp_path / "run2"
    res = CliRunner().invoke(app, ["run", "-o", str(out2), "--tracer", "python", "--", str(script)], obj=fake_gpu.deps)
    assert res.exit_code == 0, res.output
    assert RunDir.open(out2).read_json("attribution.json")["extra"]["power_ceiling_w"] is None


BURSTS = """
import archline_fake_cuda as gpu
for i in range(400):
    gpu.launch("hot_kernel" if i % 2 == 0 else "cool_kernel", 0.002, 400.0 if i % 2 == 0 else 180.0)
"""


def test_run_takes_a_power_ceiling_given_on_the_command_line(fake_gpu, tmp_path):
    # hot and cool kernels alternate every 2 ms: neither fills a window, so each is bounded by the ceiling given
    # (× 1.05); with 0, by the fake's 700 W limit × 1.05
    script = tmp_path / "bursts.py"
    script.write_text(BURSTS)
    for given, bound in ((800.0, 1.05 * 800.0), (0.0, 1.05 * 700.0)):
        out = tmp_path / f"run{given:g}"
        argv = ["run", "-o", str(out), "--tracer", "python", "--power-ceiling", f"{given:g}", "--", str(script)]
        res = CliRunner().invoke(app, argv, obj=fake_gpu.deps)
        assert res.exit_code == 0, res.output
        att = RunDir.open(out).read_json("attribution.json")
        assert att["extra"]["power_ceiling_w"] == given
        assert att["extra"]["power_bound_w"]["hot_kernel"] == pytest.approx(bound)
    argv = ["run", "-o", str(tmp_path / "bad"), "--power-ceiling", "-5", "--", str(script)]
    res = CliRunner().invoke(app, argv, obj=fake_gpu.deps)
    assert res.exit_code == 2 and "--power-ceiling must be a power in W ≥ 0 (got -5.0)" in res.output
    assert len([ln for ln in res.output.splitlines() if ln.strip()]) == 1
