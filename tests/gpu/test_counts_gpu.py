"""On a real GPU with Nsight Compute: `archline counts` of a PyTorch program in its profiler range, and model priors."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
import torch
x = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    y = torch.relu(x @ x)  # warm-up, not profiled
torch.cuda.synchronize()
torch.cuda.profiler.start()
y = torch.relu(x @ x)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
"""


def test_counts_of_a_profiler_range_give_model_priors(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    if shutil.which("ncu") is None and not Path("/usr/local/cuda/bin/ncu").exists():
        pytest.skip("no ncu")
    from typer.testing import CliRunner

    from archline.characterize.model_priors import read_model_priors
    from archline.cli.app import app
    from archline.hw.ncu import parse_raw_csv

    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "counts.csv"
    res = CliRunner().invoke(app, ["counts", "-o", str(out), "--profiler-range", "--timeout", "300", "--",
                                   sys.executable, str(prog)])  # fmt: skip
    assert res.exit_code == 0, res.output
    launches = parse_raw_csv(out.read_text())
    assert 1 <= len(launches) <= 4  # the GEMM (maybe split) and the ReLU of the one profiled step
    model = ROOT / ("results/h200/roofline-ml-v2-339faabf" if "H200" in torch.cuda.get_device_name()
                    else "results/h100/roofline-ml-v2-8908fa3f")  # fmt: skip
    mp = read_model_priors(model, out)
    assert mp.priors and all(p.source == "model" and p.energy_per_call_j > 0 for p in mp.priors.values())
    assert any("relu" in n.lower() or "elementwise" in n for n in mp.priors)  # demangled as CUPTI's rows are
