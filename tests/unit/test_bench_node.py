"""The summary of benchmarks/validate_node.py's ``run`` section, on a run of the fake two-GPU node."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archline.cli._common import Deps
from archline.cli.app import app
from tests.helpers.fake_node import HERE, FakeNode

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "validate_node.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("validate_node", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["validate_node"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(("mode", "passed"), [("plain", True), ("swap", False)])
def test_run_summary_checks_each_gpu_against_its_own_counter(bench, tmp_path, monkeypatch, mode, passed):
    node = FakeNode(2)
    lib = tmp_path / "lib.so"
    lib.write_bytes(b"")
    monkeypatch.chdir(BENCH.parents[1])
    for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(k, raising=False)
    out = tmp_path / "ddp_run"
    args = ["run", "--gpu", "all", "-o", str(out), "--", sys.executable, str(HERE), "--mode", mode]
    res = CliRunner().invoke(app, args, obj=Deps(attribution_backend=lambda: node.backend(injection=lib)))
    assert res.exit_code == 0, res.output
    per = bench.run_summary(out)
    assert [g["gpu"] for g in per] == [0, 1]
    for g in per:
        assert g["error_pct"] == pytest.approx(0.0, abs=1.0)
        assert g["nccl_rows"] == 1 and g["kernel_rows"] == 3
        assert g["energy_counter_recording_j"] > g["energy_counter_j"]
        # The job puts LOCAL_RANK r on cuda:r = NVML r; a rank found elsewhere fails the GPU.
        assert g["passed"] is passed
        line = bench.run_line(g)
        assert line.startswith("PASS" if passed else "FAIL") and f"run GPU {g['gpu']}" in line
