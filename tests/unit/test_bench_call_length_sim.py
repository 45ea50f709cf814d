"""benchmarks/call_length_sim.py: the simulated step's calls and truth, its figures at the long end, the docs' lines
reproduced from their seeds, and bad input a one-line exit 2."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers.bench import load_bench

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "data" / "call_length_sim_s31.txt"


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_bench("call_length_sim")


def test_one_step_holds_every_layers_calls(mod: ModuleType) -> None:
    calls = mod.step_calls()
    names = [c.name for c in calls]
    # per layer 4 GEMMs forward and 2 backward each; attention once each way; the optimizer 4 calls a layer
    assert names.count("gemm_dgrad") == names.count("gemm_wgrad") == 4 * mod.LAYERS
    assert names.count("attn_fwd") == names.count("attn_bwd") == mod.LAYERS
    assert names.count("sgd_update") == 4 * mod.LAYERS and set(names) == set(mod.KERNELS)


def test_the_truth_is_the_calls_time_by_their_power(mod: ModuleType) -> None:
    rec, acts, span, truth = mod.simulate(1.0, 3.0, 0, 0.0)
    per_step = len(mod.step_calls())
    assert len(acts) % per_step == 0 and len(acts) >= per_step * 2
    assert span[0] < acts[0].start_s and span[1] == pytest.approx(acts[-1].end_s)
    for name, (_, power_w) in mod.KERNELS.items():
        busy = sum(a.end_s - a.start_s for a in acts if a.name == name)
        # each call ±2 % in power about its name's nominal
        assert truth[name] == pytest.approx(busy * power_w, rel=0.02)
    assert set(rec.readings) == {"nvml.buffer", "nvml.energy"}


def test_long_calls_through_the_exact_model_are_identified_and_covered(mod: ModuleType) -> None:
    r = mod.score(1.0, 12.0, 0, instance_cv=0.0, model="exact")
    assert r["call_ms"] == pytest.approx(28.0) and r["rows"] == 13 and r["fit_windows"] == "buffer"
    assert r["within_15"] >= 95.0 and r["holds_truth"] >= 90.0


def test_the_docs_lines_come_back_from_their_seeds(mod: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    doc = DOC.read_text().splitlines()
    for block in ("--first-seed 6 --model shipped --instance-cv 0 --no-sensor-sigma",
                  "--first-seed 6 --model shipped --instance-cv 0"):  # fmt: skip
        i = doc.index(f"== {block}")
        assert mod.main(["--scales", "0.1,1", "--seeds", "1", *block.split()]) == 0
        got = capsys.readouterr().out.splitlines()
        for scale, line in zip(("0.1", "1"), got[1:], strict=True):
            assert line == next(x for x in doc[i + 2 : i + 17] if x.split()[:2] == [scale, "6"])


def test_the_summary_is_the_saved_outputs_ranges(mod: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert mod.main(["--summarize", str(DOC)]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "call_length_sim_s31_summary.txt").read_text().splitlines()
    # the held-out seeds, the model's σ carried in: at every scale the least share held is above what it was without
    by = {line.split(":")[0]: line for line in got}

    def least_held(block: str) -> dict[str, float]:
        cells = by[block].split(": ", 1)[1].split("; ")
        return {c.split(":")[0]: float(c.split(" within, ")[1].split("-")[0]) for c in cells}

    carried = least_held("--first-seed 6 --model shipped --instance-cv 0")
    bare = least_held("--first-seed 6 --model shipped --instance-cv 0 --no-sensor-sigma")
    assert set(carried) == set(bare) == {"0.01", "0.03", "0.1", "0.3", "1"}
    assert all(carried[k] > bare[k] for k in carried), (carried, bare)


@pytest.mark.parametrize("argv", [["--scales", "a,b"], ["--scales", "0"], ["--seeds", "0"], ["--instance-cv", "0.9"]])
def test_bad_input_is_one_line(mod: ModuleType, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert mod.main(argv) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
