"""Attribution of steady training loops on the power buffer: coverage of the intervals, priors, the power limit."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from archline.measurement.attribute.attribution import AttributionOptions, attribute_energy
from archline.measurement.attribute.column_fit import cap_impossible_priors
from archline.measurement.attribute.prior import KernelPrior, dominance, priors_from_replay
from archline.measurement.attribute.replay import ReplayResult, ReplayRow
from tests.helpers.attrib_sim import SimKernel
from tests.helpers.attrib_steady import LAGGED_BUFFER, LoopSpec, steady_loop

KERNELS = [
    SimKernel("conv_fwd", 0.00030, 450.0),
    SimKernel("bn_fwd", 0.00008, 300.0),
    SimKernel("relu", 0.00005, 260.0),
    SimKernel("conv_bwd", 0.00050, 520.0),
    SimKernel("bn_bwd", 0.00010, 330.0),
    SimKernel("adam", 0.00004, 210.0),
    SimKernel("cast_a", 0.00003, 380.0),
    SimKernel("cast_b", 0.00003, 240.0),
]
FORWARD = [("conv_fwd", 40), ("bn_fwd", 40), ("relu", 40), ("cast_a", 20), ("cast_b", 20)]
BACKWARD = [("conv_bwd", 50), ("bn_bwd", 40), ("cast_a", 30), ("cast_b", 30)]
OPTIMIZER = [("adam", 300), ("cast_a", 10), ("cast_b", 10)]
LOOP = LoopSpec(KERNELS, [FORWARD, BACKWARD, OPTIMIZER], steps=70)
ON_BUFFER = AttributionOptions(buffer_model=LAGGED_BUFFER)


def _attribute(seed: int, opts: AttributionOptions = ON_BUFFER, spec: LoopSpec = LOOP):
    run = steady_loop(spec, seed=seed)
    return run, attribute_energy(run.recording, run.activities, program_span=run.program_span, options=opts)


def test_phases_inside_a_steady_loop_recover_each_kernel_within_its_interval_over_seeds():
    hits = cases = 0
    for seed in range(4):
        run, res = _attribute(seed)
        assert res.extra["fit_windows"] == "buffer"
        assert res.extra["fit_window_count"] > 4 * res.windows
        for r in res.kernels:
            truth = run.truth_energy_j[r.name]
            assert r.dominated_by == "data" and r.identifiable
            assert r.energy_hi_j - r.energy_lo_j < 0.6 * r.energy_j
            cases += 1
            hits += r.energy_lo_j <= truth <= r.energy_hi_j
        # Rows add up to the counter; the gap rows and the residual absorb what is not a kernel's.
        assert sum(r.energy_j for r in res.rows) == pytest.approx(res.total_energy_j, rel=1e-9)
        assert abs(res.table["(unexplained residual)"].energy_j) < 0.01 * res.total_energy_j
    # Nominal 95 %: at least 28 of 32 (a count this low happens by chance < 2 % of the time).
    assert hits >= 28, f"{hits} of {cases} intervals held the truth"


def test_the_buffer_narrows_the_intervals_of_the_counter_windows():
    _, on_buffer = _attribute(0)
    _, on_counter = _attribute(0, AttributionOptions(fit_source="counter"))
    for r in on_buffer.kernels:
        c = on_counter.table[r.name]
        assert r.energy_hi_j - r.energy_lo_j < 0.8 * (c.energy_hi_j - c.energy_lo_j)


def _interleaved_spec() -> LoopSpec:
    pair = [("mul_x", 1), ("mul_y", 1)] * 25
    kernels = [*KERNELS, SimKernel("mul_x", 0.00002, 400.0), SimKernel("mul_y", 0.00002, 250.0)]
    phases = [[*FORWARD, *pair], [*BACKWARD, *pair], [*OPTIMIZER, *pair]]
    return LoopSpec(kernels, phases, steps=70)


def test_the_prior_dominates_kernels_the_data_cannot_tell_apart_and_says_so():
    spec = _interleaved_spec()
    run = steady_loop(spec, seed=5)
    # Replay measured each of the pair 10 % high (its isolated energy carries the replay's idle share).
    priors = {
        n: KernelPrior(1.10 * run.truth_per_call_j(n), 0.15 * run.truth_per_call_j(n)) for n in ("mul_x", "mul_y")
    }
    opts = AttributionOptions(buffer_model=LAGGED_BUFFER, priors=priors)
    res = attribute_energy(run.recording, run.activities, program_span=run.program_span, options=opts)
    plain = attribute_energy(run.recording, run.activities, program_span=run.program_span, options=ON_BUFFER)
    for n in ("mul_x", "mul_y"):
        r, p = res.table[n], plain.table[n]
        # The data pin down the pair's sum, not its split: the prior carries a large part of each row.
        assert r.data_weight < 0.8 and r.dominated_by in ("prior", "mixed") and not r.identifiable
        assert "not identifiable" in r.note and "replay prior" in r.note
        assert r.energy_lo_j <= run.truth_energy_j[n] <= r.energy_hi_j
        # The replay prior narrows what the weak default leaves wide open.
        assert r.energy_hi_j - r.energy_lo_j < 0.5 * (p.energy_hi_j - p.energy_lo_j)
        assert not p.identifiable and "default prior" in p.note
    assert res.extra["priors"] == {"mul_x": "replay", "mul_y": "replay"}
    # The kernels of distinct phases are still the data's.
    assert res.table["conv_bwd"].dominated_by == "data"


def test_a_kernel_the_data_never_see_apart_is_set_by_its_prior():
    # "shadow" always runs right after conv_bwd, one for one: only the prior can split them.
    kernels = [*KERNELS, SimKernel("shadow", 0.00001, 300.0)]
    phases = [FORWARD, [*BACKWARD[:1], *[("conv_bwd", 1), ("shadow", 1)] * 10, *BACKWARD[1:]], OPTIMIZER]
    run = steady_loop(LoopSpec(kernels, phases, steps=70), seed=2)
    prior = KernelPrior(run.truth_per_call_j("shadow"), 0.1 * run.truth_per_call_j("shadow"))
    opts = AttributionOptions(buffer_model=LAGGED_BUFFER, priors={"shadow": prior})
    res = attribute_energy(run.recording, run.activities, program_span=run.program_span, options=opts)
    r = res.table["shadow"]
    assert r.dominated_by == "prior" and not r.identifiable
    assert r.energy_lo_j <= run.truth_energy_j["shadow"] <= r.energy_hi_j


def test_no_row_is_fitted_or_marked_identifiable_above_the_power_limit():
    limit_w = 400.0
    opts = AttributionOptions(buffer_model=LAGGED_BUFFER, power_limit_w=limit_w)
    _, res = _attribute(1, opts)
    for r in res.kernels:
        assert r.mean_power_w <= 1.05 * limit_w + 1e-6
        if r.identifiable:
            assert r.power_hi_w <= 1.05 * limit_w or r.mean_power_w <= limit_w
    for n in ("conv_bwd", "conv_fwd"):  # truly 520 W and 450 W
        assert not res.table[n].identifiable and "limit" in res.table[n].note
    assert res.extra["power_limit_w"] == limit_w
    assert sum(r.energy_j for r in res.rows) == pytest.approx(res.total_energy_j, rel=1e-9)


def test_a_prior_above_the_power_limit_at_this_runs_call_time_is_capped_widened_and_named():
    # A replay prior 4x bn_bwd's true energy per call: over the loop's time per call it would draw 1320 W on a
    # 700 W board. It cannot hold here: capped at the bound and widened by ln(1320 / 735), it says little, the
    # row stays under the limit, and the notes say so.
    run = steady_loop(LOOP, seed=3)
    truth = run.truth_per_call_j("bn_bwd")
    bad = {"bn_bwd": KernelPrior(4.0 * truth, 0.01 * truth, "replay")}
    good = {"bn_bwd": KernelPrior(truth, 0.01 * truth, "replay")}
    out = {}
    for name, priors in (("bad", bad), ("good", good)):
        opts = AttributionOptions(buffer_model=LAGGED_BUFFER, power_limit_w=700.0, priors=priors, prior_scale="fixed")
        out[name] = attribute_energy(run.recording, run.activities, program_span=run.program_span, options=opts)
    noted = [n for n in out["bad"].notes if "impossible in this run" in n]
    assert len(noted) == 1 and "bn_bwd" in noted[0] and "capped" in noted[0]
    assert not any("impossible in this run" in n for n in out["good"].notes)
    r = out["bad"].table["bn_bwd"]
    assert r.mean_power_w < 1.05 * 700.0
    assert out["bad"].extra["priors"]["bn_bwd"] == "replay"
    # the sane prior is kept and holds the row near its truth (330 W)
    assert out["good"].table["bn_bwd"].mean_power_w == pytest.approx(330.0, rel=0.05)
    assert sum(x.energy_j for x in out["bad"].rows) == pytest.approx(out["bad"].total_energy_j, rel=1e-9)


def test_priors_from_replay_rows_and_results():
    rows = [
        {"group": "gemm", "kind": "kernel", "nodes_per_step": "4", "energy_j": "2.0", "energy_sigma_j": "0.02"},
        {"group": "[all other nodes]", "nodes_per_step": "9", "energy_j": "1.0", "energy_sigma_j": "0.1"},
        {"group": "[memcpy]", "nodes_per_step": "1", "energy_j": "0.1", "energy_sigma_j": "0.0"},
        {"group": "bad", "nodes_per_step": "0", "energy_j": "1.0"},
        {"group": "noisy", "nodes_per_step": "1", "energy_j": "1.0", "energy_sigma_j": "0.5"},
    ]
    p = priors_from_replay(rows)
    assert set(p) == {"gemm", "noisy"}
    assert p["gemm"].energy_per_call_j == pytest.approx(0.5)
    assert p["gemm"].sd_j == pytest.approx(0.005)  # the replay's own σ: the attribution calibrates the rest
    assert priors_from_replay(rows, min_rel_sd=0.15)["gemm"].sd_j == pytest.approx(0.15 * 0.5)  # a floor on request
    assert p["noisy"].sd_j == pytest.approx(0.5)
    res = ReplayResult(2.0, 0.01, 0.01, rows=[ReplayRow("k", "kernel", 2, 0.001, 0.4, 0.004, 400.0)])
    assert priors_from_replay(res)["k"].energy_per_call_j == pytest.approx(0.2)
    with pytest.raises(ValueError):
        KernelPrior(math.nan, 1.0)


@pytest.mark.parametrize(("weight", "expected"), [(0.95, "data"), (0.5, "mixed"), (0.05, "prior")])
def test_dominance_from_the_data_weight(weight, expected):
    assert dominance(weight) == expected


def test_real_h200_pulses_on_the_buffer_with_the_shipped_sensor_model(tmp_path):
    """The H200 probe (test_attribution_validation): 5–100 ms squares and 2–100 ms pulses of one kernel
    whose 0.2–3 s steps are integrated. Fitted on the buffer through the shipped H200 model (a lagged
    sample, C ≈ 13 ms), the short calls' power matches the long steps' within 2 %, with intervals that carry the
    model's lag and delay σ and still beat the counter's."""
    from archline.measurement.choose import GpuIdentity, choose_model
    from tests.unit.test_attribution_validation import _probe

    rec, acts = _probe()
    choice = choose_model("nvml.buffer", None, identity=GpuIdentity("GPU-none", "0", "NVIDIA H200"), cache_dir=tmp_path)
    assert choice.how == "prior" and choice.model.kind == "lagged"
    span = (acts[0].start_s - 0.5, acts[-1].end_s + 0.5)
    res = attribute_energy(rec, acts, program_span=span, options=AttributionOptions(buffer_model=choice.model))
    on_counter = attribute_energy(rec, acts, program_span=span, options=AttributionOptions(fit_source="counter"))
    assert res.extra["fit_windows"] == "buffer"
    long_w = res.table["long_200ms_to_3s"].mean_power_w
    for n in ("square_5_to_100ms", "pulse_2_to_100ms"):
        r, c = res.table[n], on_counter.table[n]
        assert r.mean_power_w == pytest.approx(long_w, rel=0.02) and r.identifiable
        # narrower than the counter's even with the shipped model's lag and delay uncertainty carried in (session 31;
        # without it, less than half the counter's)
        assert r.energy_hi_j - r.energy_lo_j < 0.9 * (c.energy_hi_j - c.energy_lo_j)
    sens = res.extra["sensor_model_sensitivity"]
    assert set(sens["parameters"]) == {"lag_s", "delay_s"} and sens["parameters"]["lag_s"] == choice.model.lag_sigma_s
    assert any(n.startswith("the power buffer's sensor model is known to within its σ") for n in res.notes)


def test_priors_from_a_replay_design_use_the_in_step_energy_and_its_measured_spread():
    rows = [
        # ran in the design and alone: the in-step energy wins
        {"group": "gemm", "nodes_per_step": "4", "time_s": "0.005", "group_time_s": "0.004", "energy_j": "2.4",
         "energy_sigma_j": "0.02",
         "context_j": "2.0", "context_sigma_j": "0.08"},
        # in the design only (no isolated value)
        {"group": "relu", "nodes_per_step": "2", "time_s": "", "energy_j": "", "context_j": "0.2",
         "context_sigma_j": "0.02"},
        # the design's lumped group gives none
        {"group": "[groups lumped in the design]", "nodes_per_step": "7", "context_j": "0.3", "context_sigma_j": "0.1"},
        # alone only: isolated, without a measured spread
        {"group": "copy_k", "nodes_per_step": "1", "time_s": "0.001", "energy_j": "0.1", "energy_sigma_j": "0.001"},
        # alone only, and some of its repetitions ended on NaN weights: no prior
        {"group": "nan_k", "nodes_per_step": "1", "time_s": "0.001", "energy_j": "0.1", "energy_sigma_j": "0.001",
         "nonfinite_reps": "2"},
    ]  # fmt: skip
    p = priors_from_replay(rows, design={"rho_up": 0.04})
    assert set(p) == {"gemm", "relu", "copy_k"}
    assert p["gemm"].energy_per_call_j == pytest.approx(0.5) and p["gemm"].sd_j == pytest.approx(0.02)
    assert p["gemm"].context_rel_sd == 0.04 and p["gemm"].time_per_call_s == pytest.approx(0.001)
    assert p["relu"].energy_per_call_j == pytest.approx(0.1) and math.isnan(p["relu"].time_per_call_s)
    assert math.isnan(p["copy_k"].context_rel_sd) and p["copy_k"].energy_per_call_j == pytest.approx(0.1)
    # Without the design's summary the in-step energies are still used, with no measured spread to carry.
    assert math.isnan(priors_from_replay(rows)["gemm"].context_rel_sd)
    row = ReplayRow("k", "kernel", 2, 0.001, 0.4, 0.004, 400.0, context_j=0.3, context_sigma_j=0.006)
    res = ReplayResult(2.0, 0.01, 0.01, rows=[row])
    res.design = {"rho_up": 0.03}
    q = priors_from_replay(res)["k"]
    assert q.energy_per_call_j == pytest.approx(0.15) and q.context_rel_sd == 0.03


def test_archline_run_reads_a_design_replay_directory(tmp_path):
    import csv
    import json

    from archline.cli.run_cmd import read_replay_priors
    from archline.errors import InputError
    from archline.records.replay import REPLAY_COLUMNS

    d = tmp_path / "replay"
    d.mkdir()
    row = {"group": "gemm", "kind": "kernel", "nodes_per_step": 4, "time_s": 0.005, "group_time_s": 0.004,
           "energy_j": 2.4, "energy_sigma_j": 0.02, "context_j": 2.0, "context_sigma_j": 0.08,
           "measurable": True}  # fmt: skip
    with (d / "replay.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, REPLAY_COLUMNS)
        w.writeheader()
        w.writerow({k: row.get(k, "") for k in REPLAY_COLUMNS})
    (d / "replay.json").write_text(json.dumps({"design": {"rho_up": 0.05}}))
    for where in (d, d / "replay.csv"):
        p = read_replay_priors(where)["gemm"]
        assert p.energy_per_call_j == pytest.approx(0.5) and p.context_rel_sd == 0.05
        assert p.time_per_call_s == pytest.approx(0.001)
    with pytest.raises(InputError, match="file not found"):
        read_replay_priors(tmp_path / "nowhere")
    (d / "replay.json").write_text("{not json")
    with pytest.raises(InputError, match="replay.json"):
        read_replay_priors(d)


def test_a_written_replay_keeps_the_in_step_time_and_the_nan_counts_for_its_priors(tmp_path):
    # Session 8 added context_time_s and nonfinite_reps to the rows but not to replay.csv: read back from disk,
    # the priors had no in-step time. Written and read back, both survive now.
    import csv

    from archline.cli.run_cmd import read_replay_priors
    from archline.records import Manifest, RunDir
    from archline.records.replay import write_replay

    row = ReplayRow("gemm", "kernel", 4, 0.005, 2.4, 0.02, 480.0, context_j=2.0, context_sigma_j=0.08,
                    context_time_s=0.0036, group_time_s=0.004, nonfinite_reps=3)  # fmt: skip
    res = ReplayResult(2.5, 0.01, 0.005, rows=[row])
    res.design = {"rho_up": 0.05}
    rd = RunDir.create(tmp_path / "r", Manifest.new("replay", gpu={"name": "fake"}))
    write_replay(rd, [r.to_row() for r in res.rows], res.summary())
    rd.finish("complete")
    got = next(csv.DictReader((tmp_path / "r" / "replay.csv").open()))
    assert float(got["context_time_s"]) == pytest.approx(0.0036) and int(got["nonfinite_reps"]) == 3
    p = read_replay_priors(tmp_path / "r")["gemm"]
    assert p.time_per_call_s == pytest.approx(0.0009)  # the design's time in the step, not the isolated one
    assert p.time_per_call_s == pytest.approx(priors_from_replay(res)["gemm"].time_per_call_s)


def test_capping_keeps_a_prior_just_above_the_bound_informative_and_one_far_above_it_vague():
    pm = np.array([800.0, 2000.0, 500.0, 900.0])
    psd = np.array([40.0, 20.0, 50.0, 90.0])
    src = ["replay", "replay", "replay", "default"]
    upper = np.full(4, 735.0)
    cm, cs, capped = cap_impossible_priors(pm, psd, src, upper)
    assert capped == [0, 1]  # under the bound, or the pooled default: left as they are
    assert cm.tolist() == [735.0, 735.0, 500.0, 900.0] and cs[2:].tolist() == [50.0, 90.0]
    assert cs[0] / 735.0 == pytest.approx(math.hypot(0.05, math.log(800.0 / 735.0)), rel=1e-12)  # 9.8 %
    assert cs[1] / 735.0 == pytest.approx(math.hypot(0.01, math.log(2000.0 / 735.0)), rel=1e-12)  # 100 %
    assert pm[0] == 800.0  # the inputs are not modified


def test_a_capped_prior_stays_out_of_the_scale_calibration_and_is_named_with_its_power():
    # Every kernel has its true energy per call as a replay prior, except bn_bwd: 2.5x its truth, 825 W over the
    # loop's time per call on a 700 W board. Calibrated ("fit"), the scale must come from the other seven alone,
    # and bn_bwd's capped prior must not be scaled back over the bound nor identify its row as calibrated.
    run = steady_loop(LOOP, seed=5)
    priors = {
        k.name: KernelPrior(run.truth_per_call_j(k.name), 0.05 * run.truth_per_call_j(k.name), "replay")
        for k in KERNELS
    }
    priors["bn_bwd"] = KernelPrior(2.5 * run.truth_per_call_j("bn_bwd"), 0.01 * run.truth_per_call_j("bn_bwd"))
    opts = AttributionOptions(buffer_model=LAGGED_BUFFER, power_limit_w=700.0, priors=priors, prior_scale="fit")
    res = attribute_energy(run.recording, run.activities, program_span=run.program_span, options=opts)
    noted = [n for n in res.notes if "impossible in this run" in n]
    assert len(noted) == 1 and "left out of the priors' scale" in noted[0] and "capped at 735 W" in noted[0]
    named = re.search(r"bn_bwd \((\d+) W\)", noted[0])
    assert named is not None and float(named.group(1)) == pytest.approx(825.0, rel=0.01)
    assert res.extra["capped_priors_w"] == {"bn_bwd": pytest.approx(825.0, rel=0.01)}
    fit = res.extra["prior_fit"]["replay"]
    assert fit["columns"] == len(KERNELS) - 1 and fit["scale"] == pytest.approx(1.0, abs=0.1)
    r = res.table["bn_bwd"]
    assert r.mean_power_w <= 1.05 * 700.0 + 1e-6 and "calibrated on this run" not in r.note
    # its row says its prior was capped, and gives no breakdown it could not add up
    assert "capped at the bound" in r.note and "prior's 1 σ" not in r.note
    # the seven sane priors hold their rows near the truth
    assert res.table["conv_bwd"].mean_power_w == pytest.approx(520.0, rel=0.05)


def test_a_column_left_out_of_the_calibration_keeps_replays_floor_and_is_not_scaled():
    from archline.measurement.attribute.prior_fit import fit_priors

    rng = np.random.default_rng(0)
    x = rng.uniform(0.0, 0.01, size=(200, 4))
    truth = np.array([300.0, 400.0, 500.0, 735.0])
    y = x @ truth * 1.2 + rng.normal(0.0, 0.01, 200)  # every column draws 1.2x its prior
    pm = truth.copy()
    psd = np.array([15.0, 20.0, 25.0, 0.02 * 735.0])
    src = ["replay"] * 4
    left = np.array([False, False, False, True])
    for mode in ("fixed", "fit"):
        m, sd, fits = fit_priors(mode, x, y, pm, psd, src, uncalibrated=left)
        assert m[3] == 735.0  # never scaled back over the bound
        assert sd[3] == pytest.approx(0.15 * 735.0)  # taken as given: replay's floor, not its 2 %
    m, sd, fits = fit_priors("fit", x, y, pm, psd, src, uncalibrated=left)
    (f,) = fits
    assert f.columns == 3 and f.scale == pytest.approx(1.2, rel=0.05)
    assert m[:3] == pytest.approx(1.2 * truth[:3], rel=0.05)


def test_a_replay_priors_time_is_its_kernels_cupti_busy_time_where_replay_traced_it(tmp_path):
    """Like with like (session 20): the program's calls are timed by CUPTI, so a design's prior carries its group's
    CUPTI busy time in the whole step where replay traced it, before the design's wall-time share; a busy-model
    design's factor_busy_s stands in for replays before the column; an isolated energy keeps the lone replay's time;
    time_source says which it is."""
    from archline.cli.run_cmd import read_replay_priors
    from archline.records import Manifest, RunDir
    from archline.records.replay import REPLAY_COLUMNS, write_replay

    assert "busy_time_s" in REPLAY_COLUMNS
    rows = [
        ReplayRow("gemm", "kernel", 4, 0.005, 2.4, 0.02, 480.0, context_j=2.0, context_sigma_j=0.08,
                  context_time_s=0.0036, group_time_s=0.004, busy_time_s=0.0042),
        ReplayRow("relu", "kernel", 2, 0.001, 0.2, 0.002, 200.0, context_j=0.2, context_sigma_j=0.02,
                  context_time_s=0.0008, group_time_s=0.001),
        # an isolated energy keeps the lone replay's time even where CUPTI timed the group in the whole step
        ReplayRow("copy", "kernel", 1, 0.001, 0.1, 0.001, 100.0, group_time_s=0.0005, busy_time_s=0.0003),
    ]  # fmt: skip
    res = ReplayResult(2.5, 0.01, 0.005, rows=rows)
    res.design = {"rho_up": 0.05}
    rd = RunDir.create(tmp_path / "r", Manifest.new("replay", gpu={"name": "fake"}))
    write_replay(rd, [r.to_row() for r in res.rows], res.summary())
    rd.finish("complete")
    for p in (read_replay_priors(tmp_path / "r"), priors_from_replay(res)):
        assert p["gemm"].time_per_call_s == pytest.approx(0.00105) and p["gemm"].time_source == "busy"
        assert p["relu"].time_per_call_s == pytest.approx(0.0004) and p["relu"].time_source == "step"
        assert p["copy"].time_per_call_s == pytest.approx(0.0005) and p["copy"].time_source == "alone"
    # a busy-model design of session 17-18 recorded each factor's busy time in the whole step
    old = [r.to_row() | {"busy_time_s": None} for r in rows]
    design = {"rho_up": 0.05, "factor_names": ["gemm", "relu"], "factor_busy_s": [0.0044, 0.0012]}
    q = priors_from_replay(old, design=design)
    assert q["gemm"].time_per_call_s == pytest.approx(0.0011) and q["relu"].time_per_call_s == pytest.approx(0.0006)
    assert q["relu"].time_source == "busy" and q["copy"].time_source == "alone"
    # lists of different lengths are not a record to trust: the design's fit of the wall time is used instead
    r = priors_from_replay(old, design={**design, "factor_busy_s": [0.0044]})
    assert r["gemm"].time_source == "step" and r["gemm"].time_per_call_s == pytest.approx(0.0009)


def test_a_design_prior_carries_the_part_of_its_spread_that_is_the_neighbour_dependence():
    """context_fold_rel is the ρ term of replay_context.fold_sigma relative to the group's in-step energy (⟨e²⟩ over
    the design's factors, p its share on); the rest of the prior's relative σ is the design's own se."""
    from archline.measurement.attribute.replay_context import fold_sigma

    energies = {"gemm": 2.0, "relu": 0.2, "[groups lumped in the design]": 0.6}
    se = {"gemm": 0.01, "relu": 0.004, "[groups lumped in the design]": 0.02}
    rho, p = 0.04, 0.6
    typical = sum(e * e for e in energies.values()) / len(energies)
    rows = [{"group": g, "nodes_per_step": "4", "context_j": str(e),
             "context_sigma_j": str(fold_sigma(e, se[g], rho, typical, p)), "context_time_s": "0.001"}
            for g, e in energies.items()]  # fmt: skip
    pri = priors_from_replay(rows, design={"rho_fold": rho, "p_on": p})
    assert set(pri) == {"gemm", "relu"}
    for g in ("gemm", "relu"):
        e = energies[g]
        want = rho * math.sqrt(e**2 / p + p * typical / (1 - p) ** 2) / e
        assert pri[g].context_fold_rel == pytest.approx(want, rel=1e-12)
        rel = pri[g].sd_j / pri[g].energy_per_call_j
        assert math.sqrt(rel**2 - pri[g].context_fold_rel ** 2) == pytest.approx(se[g] / e, rel=1e-9)
    # the small group's spread is mostly the neighbour dependence of the typical group's size
    assert pri["relu"].context_fold_rel > pri["gemm"].context_fold_rel
    # without a design's in-step energy (an isolated prior) there is none
    iso = priors_from_replay([{"group": "k", "nodes_per_step": "1", "energy_j": "0.5", "energy_sigma_j": "0.01"}])
    assert math.isnan(iso["k"].context_fold_rel)


def test_a_prefix_designs_fold_part_is_taken_at_one_half():
    """replay_context folds a prefix design as at p = ½ whatever its p_on; the prior's fold part does the same."""
    rows = [{"group": g, "nodes_per_step": "1", "context_j": str(e), "context_sigma_j": "0.2"}
            for g, e in (("a", 1.0), ("b", 0.5))]  # fmt: skip
    typical = (1.0 + 0.25) / 2
    pri = priors_from_replay(rows, design={"rho_fold": 0.03, "p_on": 0.8, "kind": "prefix"})
    assert pri["a"].context_fold_rel == pytest.approx(0.03 * math.sqrt(2.0 + 2.0 * typical))
