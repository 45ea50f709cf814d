"""The analysis of benchmarks/validate_attribution_real.py on a simulated run and a fake replay."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

from archline.measurement.attribute.attribution import AttributionOptions, attribute_energy
from tests.helpers.attrib_sim import SimKernel
from tests.helpers.attrib_steady import LAGGED_BUFFER, LoopSpec, steady_loop

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "validate_attribution_real.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("validate_attribution_real", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["validate_attribution_real"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def simulated():
    kernels = [SimKernel("gemm", 0.0004, 520.0), SimKernel("norm", 0.0001, 300.0), SimKernel("sgd", 0.00005, 220.0)]
    phases = [[("gemm", 60), ("norm", 60)], [("sgd", 200)]]
    run = steady_loop(LoopSpec(kernels, phases, steps=60), seed=4)
    opts = AttributionOptions(buffer_model=LAGGED_BUFFER, power_limit_w=700.0)
    res = attribute_energy(run.recording, run.activities, program_span=run.program_span, options=opts)
    # The replay per step: gemm measured 5 % high, norm right, sgd missing; names mangled as graph nodes are.
    per_step = {n: run.truth_energy_j[n] / 60 for n in ("gemm", "norm")}
    replay = [
        {"group": "_Z4gemmv", "nodes_per_step": 60, "energy_j": 1.05 * per_step["gemm"], "energy_sigma_j": 0.01},
        {"group": "norm", "nodes_per_step": 60, "energy_j": per_step["norm"], "energy_sigma_j": 0.01},
        {"group": "[all other nodes]", "nodes_per_step": 200, "energy_j": 1.0, "energy_sigma_j": 0.01},
    ]
    return run, json.loads(json.dumps(res.to_json())), replay


def test_analysis_figures_of_a_simulated_run(bench, simulated):
    run, result, replay = simulated
    s = bench.analyse(result, replay, names={"_Z4gemmv": "gemm"})
    assert s["kernel_rows"] == 3
    assert s["kernel_energy_j"] == pytest.approx(sum(run.truth_energy_j.values()), rel=0.03)
    assert s["identifiable_share"] == pytest.approx(1.0)
    assert s["dominated_by_share"] == {"data": pytest.approx(1.0)}
    assert s["identifiable_rows_above_limit"] == []
    assert s["power_limit_w"] == 700.0
    top = {t["name"]: t for t in s["top"]}
    assert top["norm"]["diff_pct"] == pytest.approx(0.0, abs=5.0)
    assert top["gemm"]["diff_pct"] == pytest.approx(-100 * 0.05 / 1.05, abs=2.0)
    assert top["gemm"]["replay_per_call_j"] == pytest.approx(1.05 * run.truth_per_call_j("gemm"), rel=1e-6)
    assert top["sgd"]["diff_pct"] is None
    assert s["top_compared"] == 2
    # the replay's energy per call inside the row's own 95 % interval, counted per compared row
    inside = [t["replay_in_interval"] for t in s["top"] if t["diff_pct"] is not None]
    assert s["top_replay_in_interval"] == sum(inside) and top["sgd"]["replay_in_interval"] is None
    assert top["norm"]["replay_in_interval"] is True  # its replay is the truth, within its interval
    far = [dict(r, energy_j=r["energy_j"] * 10.0) if r["group"] == "norm" else r for r in replay]
    assert bench.analyse(result, far, names={"_Z4gemmv": "gemm"})["top_replay_in_interval"] == s[
        "top_replay_in_interval"
    ] - int(top["norm"]["replay_in_interval"])
    assert abs(s["rows_vs_counter_pct"]) < 1e-6
    assert s["fit_windows"] == "buffer"
    lines = bench.verdicts(s)
    assert len(lines) == 5 and all(v.endswith("PASS") for v in lines[1:])
    assert lines[0].endswith("PASS") == (s["identifiable_within_15pct_share"] >= 0.8)
    # An identifiable row above the limit fails the check.
    hot = dict(result, rows=[dict(r, mean_power_w=800.0) if r["name"] == "gemm" else r for r in result["rows"]])
    assert bench.analyse(hot, replay)["identifiable_rows_above_limit"] == ["gemm"]
    assert bench.analyse(hot, replay)["identifiable_rows_above_bound"] == ["gemm"]  # its bound is the limit × 1.05
    # With a burst ceiling its bound is higher: above the limit (the wording), within its bound.
    burst = dict(hot, extra=dict(hot["extra"], power_bound_w={"gemm": 1007.0}, power_ceiling_w=959.0))
    b = bench.analyse(burst, replay)
    assert b["identifiable_rows_above_limit"] == ["gemm"] and b["identifiable_rows_above_bound"] == []
    bl = bench.verdicts(b)
    assert "up to 959 W in bursts" in bl[2] and bl[2].endswith("FAIL") and bl[3].endswith("PASS")
    # No row sits at the bound here; one pinned at 735 W counts its energy there.
    assert s["at_bound_share"] == 0.0
    pinned = dict(result, rows=[dict(r, mean_power_w=735.0) if r["name"] == "norm" else r for r in result["rows"]])
    e = {r["name"]: r["energy_j"] for r in result["rows"]}
    assert bench.analyse(pinned, replay)["at_bound_share"] == pytest.approx(e["norm"] / s["kernel_energy_j"])
    unbounded = dict(result, extra={k: v for k, v in result["extra"].items() if k != "power_limit_w"})
    assert math.isnan(bench.analyse(unbounded, replay)["at_bound_share"])  # no limit: unknown, not 0 %


def test_report_prints_every_top_row(bench, simulated, capsys):
    _, result, replay = simulated
    bench.report("sim", bench.analyse(result, replay))
    out = capsys.readouterr().out
    assert "== sim: 3 kernel rows" in out and "no replay row" in out and out.count("PASS/FAIL sim:") == 5


def test_arguments_are_checked_before_any_gpu_work(bench, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main([])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        bench.main(["--out", "x", "--only", "vgg"])
    assert e.value.code == 2 and "unknown workload 'vgg'" in capsys.readouterr().err


def test_a_bad_design_count_is_an_argument_error(bench, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--out", "x", "--design", "lots"])
    assert e.value.code == 2 and "--design" in capsys.readouterr().err


def test_a_replays_fixed_cost_is_taken_out_of_isolated_energies_recorded_with_it(bench, simulated):
    # Replays recorded before session 11 left c0 (a replay's launch, synchronisation, idle) in every isolated
    # energy; given the design's c0, the comparison takes it out; a replay with the fixed-cost row already did.
    _, result, replay = simulated
    names = {"_Z4gemmv": "gemm"}
    base = bench.analyse(result, replay, names=names)
    c0 = 0.5
    with_c0 = [dict(r, energy_j=r["energy_j"] + c0) if not r["group"].startswith("[") else r for r in replay]
    raw = bench.analyse(result, with_c0, names=names)
    fixed = bench.analyse(result, with_c0, names=names, fixed_j=(c0, 0.01))
    for a, b, c in zip(base["top"], raw["top"], fixed["top"], strict=True):
        if a["diff_pct"] is not None:
            assert c["diff_pct"] == pytest.approx(a["diff_pct"], abs=1e-9) and b["diff_pct"] < a["diff_pct"] - 0.1
    assert fixed["replay_fixed_taken_out_j"] == c0 and base["replay_fixed_taken_out_j"] is None
    net = [*with_c0, {"group": "[a replay's fixed cost]", "nodes_per_step": 0, "energy_j": c0, "energy_sigma_j": 0.01}]
    assert bench.analyse(result, net, names=names, fixed_j=(c0, 0.01))["replay_fixed_taken_out_j"] is None
    assert bench.design_c0({"c0_j": 0.05, "c0_se_j": 0.004}) == (0.05, 0.004) and bench.design_c0(None) is None


def test_every_workload_builds_its_step_with_its_own_shape(bench, monkeypatch):
    """Each name of WORKLOADS reaches its workload module with the shape the docs name (fake modules, no torch)."""
    import types

    calls: list[tuple[str, dict[str, object]]] = []

    def fake(module: str):
        m = types.ModuleType(module)
        m.make_step = lambda device, **kw: calls.append((module, {"device": device, **kw})) or (lambda: None)  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, module, m)

    for module in ("train_resnet", "transformer_step", "gpt2_decode", "widecnn_step"):
        fake(module)
    for name in bench.WORKLOADS:
        assert callable(bench.make_step(name, "cuda:1", 8))
    got = dict(zip(bench.WORKLOADS, calls, strict=True))
    assert got["transformer"] == ("transformer_step", {"device": "cuda:1", "batch": 8})
    assert got["transformer2k"] == (
        "transformer_step",
        {"device": "cuda:1", "batch": 8, "seq": 1024, "d_model": 2048, "nhead": 16},
    )
    assert got["vgg16cl"] == (
        "train_resnet",
        {"device": "cuda:1", "batch": 64, "channels_last": True, "arch": "vgg16"},
    )
    assert got["transformer8k"] == (
        "transformer_step",
        {"device": "cuda:1", "batch": 16, "seq": 2048, "d_model": 8192, "nhead": 64, "layers": 2},
    )
    assert got["widecnn"] == ("widecnn_step", {"device": "cuda:1"})
    assert got["resnet50"][1]["channels_last"] is False and got["resnet50cl"][1]["channels_last"] is True
    with pytest.raises(ValueError, match="unknown workload"):
        bench.make_step("vgg19", "cuda", 8)
