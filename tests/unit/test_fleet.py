"""archline fleet: GPU selection, the Dask path on simulated GPUs, the fleet report, and its one-line errors."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archline.characterize.fleet import FleetTask, run_fleet
from archline.characterize.fleet_cluster import ClusterSpec, open_client
from archline.characterize.fleet_sim import SimulatedBoard, SimulatedRunner
from archline.cli._common import parse_gpus
from archline.cli.app import app
from archline.cli.multi_gpu import child_argv, safe_env
from archline.errors import InputError, MixedFleetError
from archline.records import RunDir, read_csv
from archline.report.fleet import render
from archline.report.fleet_stats import check_comparable, load_board, robust_z
from tests.helpers.bench import ROOT

distributed = pytest.importorskip("distributed")


def test_parse_gpus() -> None:
    assert parse_gpus("all", 4) == [0, 1, 2, 3]
    assert parse_gpus("0,2", 4) == [0, 2]
    assert parse_gpus(" 1 ", 2) == [1]
    for bad, why in (("5", "no GPU with index 5"), ("0,x", "an index"), ("1,1", "twice"), ("", "an index")):
        with pytest.raises(InputError, match=why):
            parse_gpus(bad, 4)
    with pytest.raises(InputError, match="no NVIDIA GPU"):
        parse_gpus("all", 0)


def test_child_argv_replaces_gpu_and_output() -> None:
    argv = ["characterize", "--quick", "--gpu", "all", "-o", "out", "--only=arith.*"]
    assert child_argv(argv, 1, Path("out/runs/gpu1")) == [
        "characterize", "--quick", "--only=arith.*", "--gpu", "1", "--output", "out/runs/gpu1",
    ]  # fmt: skip
    run = ["run", "--gpu=0,1", "--", "torchrun", "-o", "x"]
    assert child_argv(run, 0, Path("d")) == ["run", "--gpu", "0", "--output", "d", "--", "torchrun", "-o", "x"]
    env = safe_env({"PATH": "/bin", "NCCL_NVLS_ENABLE": "1"})
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["NVSHMEM_DISABLE_NVLS"] == "1" and env["PATH"] == "/bin"


def test_robust_z_flags_only_the_far_value() -> None:
    z = robust_z([1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 0.66])
    assert abs(z[-1]) > 3.5 and all(abs(v) < 3.5 for v in z[:-1])
    assert robust_z([2.0, 2.0, 2.0]) == [0.0, 0.0, 0.0]


def test_fleet_of_64_simulated_gpus_on_dask(tmp_path: Path) -> None:
    """The whole path: 64 tasks on a local Dask cluster, run directories gathered, report with the slow board."""
    tasks = [FleetTask(f"sim{i:03d}", "quick", gpu=i) for i in range(64)]
    runner = SimulatedRunner(slow={17: 1.5}, models={60: "Simulated H200", 61: "Simulated H200"})
    with open_client(ClusterSpec("local", workers=2, processes=False), len(tasks)) as (client, _):
        rd = run_fleet(client, tasks, tmp_path / "fleet", runner, pin=False)
    assert rd.manifest.status == "complete" and len(list((tmp_path / "fleet" / "runs").iterdir())) == 64
    rep = render(RunDir.open(tmp_path / "fleet"), tmp_path / "fleet")
    text = rep.markdown.read_text()
    assert "Simulated H100, driver sim-1: 62 GPUs" in text and "Simulated H200, driver sim-1: 2 GPUs" in text
    outliers = [ln for ln in text.splitlines() if ln.startswith("- sim")]
    assert outliers and all(ln.startswith("- sim017:") for ln in outliers)
    assert any("FP32 FMA" in ln for ln in outliers)
    rows = {r["label"]: r for r in read_csv(tmp_path / "fleet" / "fleet.csv")}
    board = SimulatedBoard(17, slow=1.5)
    fma = next(r for r in board.rows() if r["name"] == "arith.fp32.fma")
    assert rows["sim017"]["fp32_tflops"] == pytest.approx(float(fma["flops"]) / float(fma["time_s"]) * 1e-12)  # type: ignore[arg-type]
    assert rows["sim017"]["sensor_lag_ms"] == pytest.approx(board.lag_s * 1e3)
    assert any(p.suffix == ".png" for p in rep.files)


def test_fleet_report_renders_with_archline_report(tmp_path: Path) -> None:
    tasks = [FleetTask(f"b{i}", "quick", gpu=i) for i in range(3)]
    with open_client(ClusterSpec("local", workers=1, processes=False), 3) as (client, _):
        run_fleet(client, tasks, tmp_path / "f", SimulatedRunner(), pin=False)
    res = CliRunner().invoke(app, ["report", str(tmp_path / "f"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["kind"] == "fleet"


def test_mixed_models_in_one_comparison_is_a_one_line_error(tmp_path: Path) -> None:
    a = tmp_path / "a"
    b = tmp_path / "b"
    SimulatedBoard(1).write(a, "quick")
    SimulatedBoard(2, name="Simulated H200").write(b, "quick")
    with pytest.raises(MixedFleetError, match="mix GPU models or drivers"):
        check_comparable([load_board("a", a), load_board("b", b)])
    res = CliRunner().invoke(app, ["fleet", "compare", str(a), str(b), "-o", str(tmp_path / "c")])
    assert res.exit_code == 2 and "mix GPU models" in res.output and "Traceback" not in res.output
    ok = CliRunner().invoke(app, ["fleet", "compare", str(a), str(b), "-o", str(tmp_path / "c"), "--split"])
    assert ok.exit_code == 0, ok.output
    assert "Simulated H200, driver sim-1: 1 GPUs" in (tmp_path / "c" / "fleet_report.md").read_text()


def test_unreachable_scheduler_is_a_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = CliRunner().invoke(
        app, ["fleet", "run", "--scheduler", f"tcp://127.0.0.1:{port}", "--timeout-s", "0.5", "-o", str(tmp_path / "x")]
    )
    assert res.exit_code == 1 and "cannot reach the Dask scheduler" in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


def test_failed_gpu_task_is_listed_not_lost(tmp_path: Path) -> None:
    def runner(gpu: int, kind: str, out: Path) -> None:
        if gpu == 1:
            raise RuntimeError("board fell off the bus")
        SimulatedBoard(gpu).write(out, kind)

    tasks = [FleetTask(f"g{i}", "quick", gpu=i) for i in range(3)]
    with open_client(ClusterSpec("local", workers=1, processes=False), 3) as (client, _):
        rd = run_fleet(client, tasks, tmp_path / "f", runner, pin=False)
    assert rd.manifest.status == "complete" and any("fell off the bus" in n for n in rd.manifest.notes)
    rep = render(RunDir.open(tmp_path / "f"), tmp_path / "f")
    assert "fell off the bus" in rep.markdown.read_text()


@pytest.mark.parametrize(
    "args",
    [
        ["characterize", "--gpu", "2"],
        ["instructions", "--gpu", "0,3"],
        ["roofline", "--gpu", "9"],
        ["sensor", "calibrate", "--gpu", "2"],
        ["monitor", "--gpu", "4"],
        ["fleet", "run", "--gpu", "5"],
        ["run", "--gpu", "5", "--", "sh", "-c", "true"],
        ["run", "--gpu", "0,2", "--", "sh", "-c", "true"],
    ],
)
def test_a_gpu_that_does_not_exist_is_a_one_line_error(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from tests.helpers.fake_nvml import make_fake_nvml

    monkeypatch.setitem(sys.modules, "pynvml", make_fake_nvml(count=2))
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "no GPU with index" in res.output and "(this machine has 2)" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_device_uuids_map_cuda_visible_devices_to_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from archline.characterize.fleet import physical_gpu
    from tests.helpers.fake_nvml import make_fake_nvml

    monkeypatch.setitem(sys.modules, "pynvml", make_fake_nvml(count=3))
    assert physical_gpu({"CUDA_VISIBLE_DEVICES": "2,0,1"}) == 2
    assert physical_gpu({"CUDA_VISIBLE_DEVICES": "GPU-fa4e0000-0000-0000-0000-000000000001"}) == 1
    assert physical_gpu({}) == 0


def test_characterize_on_two_gpus_runs_one_process_per_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fan-out: one child per GPU, a fleet run directory listing both; children without NVML fail, and say so."""
    import sys

    from tests.helpers.fake_nvml import make_fake_nvml

    monkeypatch.setitem(sys.modules, "pynvml", make_fake_nvml(count=2))
    out = tmp_path / "both"
    argv = ["characterize", "--quick", "--gpu", "all", "-o", str(out)]
    monkeypatch.setattr(sys, "argv", ["archline", *argv])
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 1, res.output
    run = RunDir.open(out)
    assert run.manifest.kind == "fleet" and run.manifest.status == "failed"
    assert [r["label"] for r in run.manifest.extra["runs"]] == ["gpu0", "gpu1"]
    for g in (0, 1):
        log = (out / "runs" / f"gpu{g}.log").read_text()
        assert "archline: error:" in log and "Traceback" not in log
    assert "GPU 0:" in res.output and "GPU 1:" in res.output


def test_sensor_calibration_runs_give_lag_and_delay(tmp_path: Path) -> None:
    from archline.records import Manifest

    rd = RunDir.create(tmp_path / "cal", Manifest.new("sensor-calibration", gpu={"name": "X", "driver_version": "1"}))
    rd.write_json("profiles.json", {"profiles": {"nvml.buffer": {"model": {"lag_s": 0.1, "delay_s": 0.004}}}})
    b = load_board("cal", tmp_path / "cal")
    assert b.figures["sensor_lag_ms"] == pytest.approx(100.0) and b.figures["sensor_delay_ms"] == pytest.approx(4.0)
    assert b.figures["fp32_tflops"] is None


def test_a_batch_cluster_needs_a_job_count_and_its_submit_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --jobs, slurm/pbs is bad input (it used to start 0 workers and end in a traceback); without sbatch or
    qsub on PATH it is one line (it used to print the jobqueue thread's traceback, then wait for workers forever)."""
    res = CliRunner().invoke(app, ["fleet", "run", "--cluster", "slurm", "-o", str(tmp_path / "a")])
    assert res.exit_code == 2 and "--cluster slurm needs --jobs N" in res.output
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing to submit with
    pytest.importorskip("dask_jobqueue")
    for cluster, cmd in (("slurm", "sbatch"), ("pbs", "qsub")):
        res = CliRunner().invoke(app, ["fleet", "run", "--cluster", cluster, "--jobs", "2", "-o", str(tmp_path / "b")])
        assert res.exit_code == 1 and f"{cmd} is not on this machine's PATH" in res.output, res.output
        assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1
    res = CliRunner().invoke(app, ["fleet", "run", "--cluster", "slurm", "--jobs", "1", "--start-s", "0"])
    assert res.exit_code == 2 and "--start-s" in res.output


def test_compare_refuses_a_run_twice_a_cut_table_and_a_run_of_another_kind(tmp_path: Path) -> None:
    """A fresh user's review (session 17): the same directory twice was two GPUs, a results.csv cut short was
    compared with its cells missing, and an attribution run was counted as a GPU. Now each is one line, exit 2;
    two runs of one board are compared with a warning."""
    import shutil

    a, b = tmp_path / "a", tmp_path / "b"
    SimulatedBoard(1).write(a, "quick")
    SimulatedBoard(2).write(b, "quick")
    res = CliRunner().invoke(app, ["fleet", "compare", str(a), str(a), "-o", str(tmp_path / "c1")])
    assert res.exit_code == 2 and "given twice" in res.output
    cut = tmp_path / "cut"
    shutil.copytree(b, cut)
    lines = (cut / "results.csv").read_text().splitlines()
    (cut / "results.csv").write_text("\n".join([*lines[:-1], lines[-1][: len(lines[-1]) // 3]]) + "\n")
    res = CliRunner().invoke(app, ["fleet", "compare", str(a), str(cut), "-o", str(tmp_path / "c2")])
    assert res.exit_code == 2 and "corrupt results table" in res.output
    run = tmp_path / "run"
    shutil.copytree(ROOT / "results/h100/run/attribution-validation/cublas_gemm", run)
    res = CliRunner().invoke(app, ["fleet", "compare", str(a), str(run), "-o", str(tmp_path / "c3")])
    assert res.exit_code == 2 and "a run of kind 'attribute', not a characterization or sensor" in res.output
    twin = tmp_path / "twin"
    shutil.copytree(a, twin)
    res = CliRunner().invoke(app, ["fleet", "compare", str(a), str(twin), "-o", str(tmp_path / "c4")])
    assert res.exit_code == 0 and "runs of one board" in res.output
