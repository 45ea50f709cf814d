"""On a real GPU: CUPTI sees CuPy kernels on the host clock, and ``archline run`` attributes a script's energy."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

pytestmark = pytest.mark.gpu


def test_tracer_records_kernels_on_the_host_clock():
    cp = pytest.importorskip("cupy")
    pytest.importorskip("cupti")
    from archline.hw.cupti.trace import KernelTracer

    x = cp.random.random(1 << 24, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    t0 = time.time()
    with KernelTracer() as tr:
        for _ in range(10):
            x = x * 1.0001
        cp.cuda.Device().synchronize()
    t1 = time.time()
    kernels = [r for r in tr.records if r.kind == "kernel"]
    assert len(kernels) >= 10
    assert all(t0 - 0.001 <= r.start_s <= r.end_s <= t1 + 0.001 for r in kernels)
    assert tr.clock_map is not None and tr.clock_map.error_s < 1e-4
    assert abs(tr.clock_map.drift_ppm) < 100


def test_archline_run_attributes_a_cupy_script(tmp_path):
    pytest.importorskip("cupy")
    pytest.importorskip("cupti")
    from archline.cli.app import app
    from archline.records import RunDir

    script = tmp_path / "prog.py"
    script.write_text(
        "import cupy as cp, time\n"
        "x = cp.random.random(1 << 26, dtype=cp.float32)\n"
        "t = time.time() + 2.0\n"
        "while time.time() < t:\n"
        "    for _ in range(20):\n"
        "        x = cp.sqrt(x * x + 1e-3)\n"
        "    cp.cuda.Device().synchronize()\n"
    )
    out = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "-o", str(out), "--", str(script)])
    assert res.exit_code == 0, res.output
    rows = RunDir.open(out).read_csv("kernels.csv")
    kernels = [r for r in rows if r["kind"] == "kernel"]
    assert kernels and kernels[0]["calls"] > 0
    total = sum(r["energy_j"] for r in rows)
    assert total > 0
