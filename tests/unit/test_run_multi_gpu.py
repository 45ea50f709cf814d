"""``archline run --gpu all`` over a two-rank program on a fake two-GPU node (fake clock, sensors, torchrun).

The fake launcher starts two worker processes as torchrun does; each 'runs' kernels of known power on its
GPU and writes its own trace, naming its CUDA devices by UUID. The modes make a rank's CUDA ordinal differ
from the NVML index of the GPU it ran on, as CUDA_VISIBLE_DEVICES does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archline.cli._common import Deps
from archline.cli.app import app
from archline.records import RunDir
from archline.records.traces import load_recording
from tests.helpers.fake_node import HERE, NCCL, FakeNode

REPO = Path(__file__).resolve().parents[2]
KERNELS = ("gemm_kernel", "elementwise_kernel", NCCL)
#: The NVML GPU rank r runs on, per mode of the fake launcher (2 ranks).
RANK_GPU = {"plain": {0: 0, 1: 1}, "swap": {0: 1, 1: 0}, "isolated": {0: 1, 1: 0}}


def program(mode: str, nproc: int = 2) -> list[str]:
    return [sys.executable, str(HERE), "--nproc", str(nproc), "--mode", mode]


@pytest.fixture()
def node(monkeypatch, tmp_path):
    n = FakeNode(2)
    lib = tmp_path / "libfake_inject.so"
    lib.write_bytes(b"")
    n.deps = Deps(attribution_backend=lambda: n.backend(injection=lib))  # type: ignore[attr-defined]
    monkeypatch.chdir(REPO)
    for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(k, raising=False)
    return n


def _counter_j(run_dir: Path) -> float:
    """The GPU's energy counter from its first to its last update seen in the run (its raw recording)."""
    en = load_recording(run_dir / "raw" / "recording.npz").get("nvml.energy")
    assert en is not None and len(en) > 10
    first = next(i for i in range(1, len(en)) if en.value[i] != en.value[0])
    return float(en.value[-1] - en.value[first])


@pytest.mark.parametrize("mode", ["plain", "swap", "isolated"])
def test_each_gpus_kernels_are_attributed_against_its_own_sensors(node, tmp_path, mode):
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--gpu", "all", "-o", str(out), "--", *program(mode)], obj=node.deps)
    assert res.exit_code == 0, res.output
    rd = RunDir.open(out)
    assert rd.manifest.status == "complete" and rd.manifest.extra["multi_gpu"] is True
    procs = {p["rank"]: p for p in rd.read_csv("processes.csv")}
    # The UUID mapping: each rank's kernels land on the GPU it really ran on, whatever its CUDA ordinal was.
    assert {r: p["gpus"] for r, p in procs.items()} == RANK_GPU[mode]
    rows = rd.read_csv("kernels.csv")
    gpus = {g["gpu"]: g for g in rd.read_csv("gpus.csv")}
    for rank, gpu in RANK_GPU[mode].items():
        mine = {r["name"]: r for r in rows if r["gpu"] == gpu}
        assert set(KERNELS) <= set(mine)
        for name in KERNELS:
            r = mine[name]
            assert (r["rank"], r["pid"]) == (rank, procs[rank]["pid"])
            assert r["gpu_uuid"] == node.uuids[gpu][:12]
            assert r["comm"] == ("nccl" if name == NCCL else None)
            # Each GPU's kernels draw their own powers: the truth is recovered within the stated interval.
            truth = node.true_energy_j(gpu, name)
            assert r["energy_lo_j"] <= truth <= r["energy_hi_j"], (gpu, name, truth, r)
            assert r["energy_j"] == pytest.approx(truth, rel=0.05)
        # The rows add up to that GPU's own energy counter (within 1 %), and to its gpus.csv figure exactly.
        total = sum(r["energy_j"] for r in rows if r["gpu"] == gpu)
        assert total == pytest.approx(_counter_j(out / f"gpu{gpu}"), rel=0.01)
        assert total == pytest.approx(gpus[gpu]["energy_j"], rel=1e-9)
        assert gpus[gpu]["ranks"] == rank and gpus[gpu]["comm_rows"] == 1
        assert gpus[gpu]["comm_energy_j"] == pytest.approx(mine[NCCL]["energy_j"])
        own = RunDir.open(out / f"gpu{gpu}").manifest
        assert own.kind == "run" and own.status == "complete" and own.gpu["uuid"] == node.uuids[gpu]
        assert procs[rank]["kernel_energy_j"] == pytest.approx(gpus[gpu]["kernel_energy_j"])
    assert rd.manifest.extra["total_energy_j"] == pytest.approx(sum(g["energy_j"] for g in gpus.values()))
    assert set(rd.manifest.state_before) == {"gpu0", "gpu1"}
    assert all(s["power_limit_w"] == 700.0 for s in rd.manifest.state_before.values())
    # One trace per process, each written by the worker itself.
    assert len(list((out / "raw" / "cupti").glob("cupti-*.bin"))) == 2


def test_ranks_sharing_a_gpu_split_its_rows_and_an_idle_gpu_is_measured_whole(node, tmp_path):
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--gpu", "all", "-o", str(out), "--", *program("shared")], obj=node.deps)
    assert res.exit_code == 0, res.output
    rd = RunDir.open(out)
    procs = rd.read_csv("processes.csv")
    gpus = {g["gpu"]: g for g in rd.read_csv("gpus.csv")}
    assert [p["gpus"] for p in procs] == [0, 0] and gpus[0]["ranks"] == "0,1"
    rows = {r["name"]: r for r in rd.read_csv("kernels.csv") if r["gpu"] == 0}
    assert rows["gemm_kernel"]["rank"] == "0,1" and rows[NCCL]["comm"] == "nccl"
    # Each rank's share of the shared rows, by its time in them: together they are the GPU's kernel energy.
    assert sum(p["kernel_energy_j"] for p in procs) == pytest.approx(gpus[0]["kernel_energy_j"])
    assert all(p["kernel_energy_j"] > 0 for p in procs)
    # GPU 1 ran nothing: one [whole program] row, with the reason in its notes.
    assert gpus[1]["whole_program_only"] is True and gpus[1]["ranks"] is None
    assert any("no kernel of the program ran on this GPU" in n for n in RunDir.open(out / "gpu1").manifest.notes)


def test_a_one_gpu_run_keeps_only_the_kernels_that_ran_on_its_gpu(node, tmp_path):
    # Rank 0 sees only NVML GPU 1, rank 1 only GPU 0 (their own CUDA_VISIBLE_DEVICES): --gpu 0 gets rank 1's.
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--gpu", "0", "-o", str(out), "--", *program("isolated")], obj=node.deps)
    assert res.exit_code == 0, res.output
    rd = RunDir.open(out)
    rows = {r["name"]: r for r in rd.read_csv("kernels.csv")}
    truth = [t for t in node.truth if t[0] == 0 and t[1] == "gemm_kernel"]
    assert rows["gemm_kernel"]["calls"] == len(truth) and {t[6] for t in truth} == {1}
    assert any("GPU-000000a1, a GPU this run does not measure: left out" in n for n in rd.manifest.notes)


def test_terminal_and_json_show_every_gpu_and_the_total(node, tmp_path):
    res = CliRunner().invoke(app, ["run", "--gpu", "0,1", "-o", str(tmp_path / "t"), "--", *program("swap")],
                             obj=node.deps)  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "GPU 0 (Fake GPU" in res.output and "GPU 1 (Fake GPU" in res.output
    assert "total" in res.output and "gemm_kernel" in res.output
    res = CliRunner().invoke(app, ["run", "--gpu", "all", "--json", "-o", str(tmp_path / "j"), "--",
                                   *program("plain")], obj=node.deps)  # fmt: skip
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout[res.stdout.index("{") :])
    assert payload["exit_code"] == 0 and payload["status"] == "complete"
    assert [g["gpu"] for g in payload["gpus"]] == [0, 1]
    assert payload["total_energy_j"] == pytest.approx(sum(g["energy_j"] for g in payload["gpus"]))
    assert all(g["result"]["rows"] for g in payload["gpus"])
    assert sorted(p["rank"] for p in payload["processes"]) == [0, 1]


def test_the_report_shows_gpus_ranks_and_rebuilds_without_a_gpu(node, tmp_path):
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--gpu", "all", "-o", str(out), "--", *program("isolated")], obj=node.deps)
    assert res.exit_code == 0, res.output
    # archline report reads only the run directory (no backend, no GPU).
    res = CliRunner().invoke(app, ["report", str(out)])
    assert res.exit_code == 0, res.output
    md = (out / "report.md").read_text()
    assert "on 2 GPUs" in md and "## GPUs" in md and "## Ranks" in md
    assert "## GPU 0: Fake GPU (GPU-000000a0), ranks 1" in md and "## GPU 1: Fake GPU (GPU-000000a1), ranks 0" in md
    assert "ncclDevKernel_AllReduce" in md and "0→GPU-000000a0" in md
    assert (out / "report.html").is_file() and "gemm_kernel" in (out / "report.html").read_text()
    for g in (0, 1):
        assert (out / f"gpu{g}" / "report.md").is_file() and (out / f"gpu{g}" / "report.html").is_file()


def test_exit_status_is_passed_through(node, tmp_path):
    res = CliRunner().invoke(app, ["run", "--gpu", "all", "-o", str(tmp_path / "r"), "--", sys.executable, "-c",
                                   "raise SystemExit(4)"], obj=node.deps)  # fmt: skip
    assert res.exit_code == 4 and "exited with status 4" in res.output
    rd = RunDir.open(tmp_path / "r")
    # No CUDA process: each GPU is measured as a whole, and says why.
    assert rd.manifest.status == "complete"
    assert all(g["whole_program_only"] for g in rd.read_csv("gpus.csv"))


def test_gpus_of_different_models_each_keep_their_own_sensor_model(monkeypatch, tmp_path):
    n = FakeNode(2, names=["NVIDIA H100 80GB HBM3", "NVIDIA H200"], drivers=["570.86", "580.159"])
    lib = tmp_path / "lib.so"
    lib.write_bytes(b"")
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no stored calibration of these boards
    res = CliRunner().invoke(app, ["run", "--gpu", "all", "-o", str(tmp_path / "r"), "--", *program("plain")],
                             obj=Deps(attribution_backend=lambda: n.backend(injection=lib)))  # fmt: skip
    assert res.exit_code == 0, res.output
    rd = RunDir.open(tmp_path / "r")
    models = {g["gpu"]: g["sensor_model"] for g in rd.read_csv("gpus.csv")}
    # Each board's attribution took the shipped calibration of its own model, never the other's.
    assert "GPU-591bd772" in models[0] and "GPU-7c520d74" in models[1]
    assert any("different models or drivers" in note for note in rd.manifest.notes)


@pytest.mark.parametrize(
    ("gpu", "message"),
    [
        ("5", "no GPU with index 5 (this machine has 2)"),
        ("0,2", "no GPU with index 2 (this machine has 2)"),
        ("0,0", "names a GPU twice"),
        ("x", "--gpu must be an index, a list like 0,2, or 'all'"),
    ],
)
def test_a_gpu_that_does_not_exist_is_a_one_line_error(node, tmp_path, gpu, message):
    res = CliRunner().invoke(app, ["run", "--gpu", gpu, "-o", str(tmp_path / "r"), "--", *program("plain")],
                             obj=node.deps)  # fmt: skip
    assert res.exit_code == 2, res.output
    assert message in res.output and len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_several_gpus_need_the_injection_tracer(node, tmp_path):
    res = CliRunner().invoke(app, ["run", "--gpu", "all", "--tracer", "python", "-o", str(tmp_path / "r"), "--",
                                   *program("plain")], obj=node.deps)  # fmt: skip
    assert res.exit_code == 2 and "--tracer python records one process on one GPU" in res.output
    assert len(res.output.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_each_gpu_at_its_power_limit_is_warned_of(node, tmp_path, monkeypatch):
    import archline.cli.run_multi as run_multi

    seen: list[dict] = []

    def warning(extra):  # the GPUs' attributions, as the one-GPU path reads them (ceiling.at_limit_warning)
        seen.append(extra)
        return "at the limit (fake)" if len(seen) == 2 else None

    monkeypatch.setattr(run_multi, "at_limit_warning", warning)
    res = CliRunner().invoke(app, ["run", "--gpu", "0,1", "-o", str(tmp_path / "t"), "--", *program("plain")],
                             obj=node.deps)  # fmt: skip
    assert res.exit_code == 0, res.output
    assert len(seen) == 2 and all("at_limit" in e for e in seen)
    assert "archline: warning: GPU 1: at the limit (fake)" in res.output and "GPU 0: at the limit" not in res.output
    seen.clear()
    res = CliRunner().invoke(app, ["run", "--gpu", "0,1", "--json", "-o", str(tmp_path / "j"), "--",
                                   *program("plain")], obj=node.deps)  # fmt: skip
    assert res.exit_code == 0 and "archline: warning: GPU 1: at the limit (fake)" in res.stderr
