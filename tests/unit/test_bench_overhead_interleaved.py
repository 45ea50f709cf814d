"""benchmarks/overhead_interleaved.py: the default recording's cost inside one process, from synthetic loop timelines
(sensors toggled 10 s on / 10 s off, 0.5 s traced of every 10 s); its JSON; bad input a one-line exit 2."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest

from tests.helpers.bench import load_bench

Interval = tuple[float, float]
T0 = 1.7e9  # Unix seconds, as the child stamps them


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_bench("overhead_interleaved")


def _advance(a: float, work: float, traced: list[Interval], slow: float) -> float:
    """When a loop of ``work`` seconds started at ``a`` ends, running ``1 + slow`` times slower in traced periods."""
    t = a
    for lo, hi in traced:
        if hi <= t:
            continue
        if lo >= t + work:
            break
        if lo > t:
            work -= lo - t
            t = lo
        cap = (hi - t) / (1.0 + slow)
        if work <= cap:
            return t + work * (1.0 + slow)
        work -= cap
        t = hi
    return t + work


def timeline(
    seed: int = 1,
    seconds: float = 600.0,
    sensors: float = 0.0,
    excess_s: float = 0.04,
    noise: float = 0.10,
    drift: float = 0.03,
    loop_s: float = 0.3,
    toggle_s: float = 10.0,
    probe_in_block_s: float = 0.8,
    after_s: float = 0.0,
) -> tuple[list[Interval], list[tuple[Interval, Interval]], list[Interval]]:
    """Loops of ~``loop_s`` (lognormal ``noise``, a linear ``drift`` over the block); the sensors' halves of
    ``toggle_s`` in on-off, off-on, ... cycles with 0.8 s between halves (their pre- and post-roll); the loops
    starting in an on-half ``sensors`` slower; the probe traced from before the block to ``probe_in_block_s``
    into it, then 0.5 s of every 10 s, each traced period costing ``excess_s`` (the program slower there) and
    the first loop starting after it ``after_s`` more (the detach, after the library's OFF stamp)."""
    rng = np.random.default_rng(seed)
    gap = 0.8
    cycles: list[tuple[Interval, Interval]] = []
    t, c = T0 + 0.3, 0
    while t + 2 * (toggle_s + gap) < T0 + seconds:
        h1, h2 = (t, t + toggle_s), (t + toggle_s + gap, t + 2 * toggle_s + gap)
        cycles.append((h1, h2) if c % 2 == 0 else (h2, h1))
        t, c = t + 2 * (toggle_s + gap), c + 1
    on = [h for h, _ in cycles]
    traced = [(T0 - 1.5, T0 + probe_in_block_s)]
    traced += [(T0 + 5.0 + 10.0 * j, T0 + 5.5 + 10.0 * j) for j in range(int(seconds / 10))]
    slow = excess_s / (0.5 - excess_s)  # 0.5 s of wall time traced: excess_s of it is the excess
    loops: list[Interval] = []
    a = T0
    while a < T0 + seconds:
        work = loop_s * (1.0 + drift * (a - T0) / seconds) * float(rng.lognormal(0.0, noise))
        if any(lo <= a < hi for lo, hi in on):
            work *= 1.0 + sensors
        b = _advance(a, work, traced, slow)
        if after_s and any(hi <= a and (not loops or loops[-1][0] < hi) for _, hi in traced[1:]):
            b += after_s  # the first loop to start after a period's end
        loops.append((a, b))
        a = b
    return loops, cycles, traced


def _covers(lo: float | None, hi: float | None, x: float) -> bool:
    return lo is not None and hi is not None and lo <= x <= hi


def test_without_noise_each_figure_is_the_injected_cost(mod: ModuleType) -> None:
    # (Unix seconds as floats: durations good to ~0.3 µs, hence the tolerances)
    loops, cycles, traced = timeline(noise=0.0, drift=0.0, excess_s=0.04)
    a = mod.analyse(loops, cycles, traced, guard_s=0.0)  # the periods as stamped
    assert a.sensor_changes == pytest.approx([0.0] * len(cycles), abs=1e-5) and len(cycles) >= 27
    steady = loops[-1][1] - traced[0][1]
    assert a.tracing.steady_s == pytest.approx(steady)
    assert len(a.tracing.excess_s) == len(traced) - 1 == 60 and a.tracing.skipped == 0
    assert a.tracing.excess_s == pytest.approx([0.04] * 60, abs=2e-6)
    assert a.tracing.per_period_s.centre == pytest.approx(0.04, abs=2e-6)
    assert a.tracing.fraction.centre == pytest.approx(60 * 0.04 / steady, rel=1e-4)
    # the probe: 0.8 s of full tracing in the block, 8 % of it its excess; not in the steady state
    assert a.probe.interval == traced[0]
    assert a.probe.in_block_s == pytest.approx(0.8) and a.probe.excess_s == pytest.approx(0.064, abs=2e-6)
    assert a.probe.loops == 3
    assert a.total.centre == pytest.approx(a.tracing.fraction.centre)
    assert a.sensors.verdict == a.tracing.fraction.verdict == a.total.verdict == "PASS"


def test_without_noise_a_sensors_cost_is_every_cycles_change(mod: ModuleType) -> None:
    loops, cycles, traced = timeline(noise=0.0, drift=0.0, excess_s=0.0, sensors=0.05)
    a = mod.analyse(loops, cycles, traced)
    assert a.sensor_changes == pytest.approx([0.05] * len(cycles), abs=1e-5)
    assert (a.sensors.centre, a.sensors.lo, a.sensors.hi) == pytest.approx((0.05, 0.05, 0.05), abs=1e-5)
    assert a.sensors.verdict == "FAIL" and a.total.verdict == "FAIL"


# The noisy tests: fixed seeds; the intervals are ~90 % ones, so about one seed in ten would miss. The tracing
# excess reads a few ms high per period with 10 % lognormal noise (the median reference, and the loops a period
# touches being the longer ones): conservative.


def test_noisy_estimates_recover_the_injected_costs_within_their_intervals(mod: ModuleType) -> None:
    loops, cycles, traced = timeline(seed=3, sensors=0.02, excess_s=0.04)
    a = mod.analyse(loops, cycles, traced)
    s, per, frac = a.sensors, a.tracing.per_period_s, a.tracing.fraction
    assert s.n == len(cycles) and _covers(s.lo, s.hi, 0.02)
    assert s.hi - s.lo < 0.03  # the cycles resolve a few per cent
    assert per.n == 60 and _covers(per.lo, per.hi, 0.04)
    truth = 60 * 0.04 / a.tracing.steady_s
    assert _covers(frac.lo, frac.hi, truth)
    assert a.total.lo == pytest.approx(s.lo + frac.lo) and a.total.hi == pytest.approx(s.hi + frac.hi)
    assert _covers(a.total.lo, a.total.hi, 0.02 + truth)
    assert a.probe.in_block_s == pytest.approx(0.8)


def test_no_injected_cost_passes(mod: ModuleType) -> None:
    loops, cycles, traced = timeline(seed=2, sensors=0.0, excess_s=0.0)
    a = mod.analyse(loops, cycles, traced, guard_s=0.0)
    assert _covers(a.sensors.lo, a.sensors.hi, 0.0)
    assert _covers(a.tracing.fraction.lo, a.tracing.fraction.hi, 0.0)
    assert a.sensors.verdict == a.tracing.fraction.verdict == a.total.verdict == "PASS" and a.passed


def test_the_guard_errs_high_by_little_where_nothing_costs(mod: ModuleType) -> None:
    # With the guard a period also charges a few untraced loops, each a little above the median reference
    # (the noise is skewed): over eight seeds the no-cost intervals stay within -0.4 .. +0.6 % and PASS, and
    # their centres average 0 .. 0.2 %.
    centres = []
    for seed in range(1, 9):
        a = mod.analyse(*timeline(seed=seed, sensors=0.0, excess_s=0.0))
        f = a.tracing.fraction
        assert f.verdict == "PASS" and f.lo is not None and f.hi is not None and f.lo > -0.004 and f.hi < 0.006
        centres.append(f.centre)
    assert 0.0 < float(np.mean(centres)) < 0.002


def test_a_cost_after_the_off_stamp_is_charged_only_with_the_guard(mod: ModuleType) -> None:
    # 40 ms in the period, 60 ms on the first loop after its OFF stamp (the detach): 100 ms a period in all
    loops, cycles, traced = timeline(noise=0.0, drift=0.0, excess_s=0.04, after_s=0.06)
    stamped = mod.analyse(loops, cycles, traced, guard_s=0.0).tracing.per_period_s.centre
    guarded = mod.analyse(loops, cycles, traced).tracing.per_period_s.centre
    assert stamped == pytest.approx(0.04, abs=2e-3)  # misses the detach
    assert guarded == pytest.approx(0.10, abs=2e-3)


@pytest.mark.parametrize(("effect", "want"), [(0.08, "FAIL"), (-0.08, "NOISE")])
def test_a_large_sensors_effect_is_a_fail_or_noise(mod: ModuleType, effect: float, want: str) -> None:
    loops, cycles, traced = timeline(seed=7, sensors=effect, excess_s=0.04)
    a = mod.analyse(loops, cycles, traced)
    assert _covers(a.sensors.lo, a.sensors.hi, effect)
    assert a.sensors.verdict == want and a.total.verdict == want and not a.passed
    assert a.tracing.fraction.verdict == "PASS"


def test_interval_verdict_is_two_sided(mod: ModuleType) -> None:
    v = mod.interval_verdict
    assert [v(-0.01, 0.02), v(0.03, 0.05), v(-0.05, -0.03), v(0.01, 0.04), v(-0.04, 0.0), v(None, 0.0)] == [
        "PASS",
        "FAIL",
        "NOISE",
        "UNRESOLVED",
        "UNRESOLVED",
        "UNRESOLVED",
    ]


def test_a_process_traced_throughout_leaves_tracing_unresolved(mod: ModuleType) -> None:
    loops, cycles, _ = timeline(seed=2, seconds=200.0, excess_s=0.0)
    a = mod.analyse(loops, cycles, None)
    assert a.sensors.centre is not None and a.sensors.lo is not None
    assert a.tracing.fraction.verdict == "UNRESOLVED" and a.total.verdict == "UNRESOLVED" and not a.passed
    assert a.probe.interval is None
    json.dumps(a.to_json(), allow_nan=False)


def test_loops_touching_and_inside(mod: ModuleType) -> None:
    loops = [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0)]
    # a period ending where a loop starts does not touch it; one inside a loop touches it
    assert mod.touched_flags(loops, [(0.5, 1.0), (2.2, 2.4)]) == [True, False, True, False]
    assert list(mod._touching(loops, (0.5, 1.5))) == [0, 1]
    assert list(mod._inside(loops, (0.5, 3.0))) == [1, 2]
    assert mod.sensor_changes(loops, [((0.0, 2.0), (2.0, 4.0))], [], min_loops=2) == [0.0]
    assert mod.sensor_changes(loops, [((0.0, 2.0), (2.0, 4.0))], [], min_loops=3) == []


def test_the_json_keeps_every_loop_half_and_traced_period(mod: ModuleType, tmp_path: Path) -> None:
    loops, cycles, traced = timeline(seed=4, seconds=120.0, noise=0.0, drift=0.0)
    a = mod.analyse(loops, cycles, traced)
    stamps = [round(loops[0][0] * 1e9)] + [round(b * 1e9) for _, b in loops]
    halves = [(k, *h) for on, off in cycles for k, h in (("on", on), ("off", off))]
    rec = mod.ChildRecord(stamps, halves, cycles, traced, 120.0, 5.0, 130.0, 1000, [])
    path = tmp_path / "out" / mod.OUT_NAME
    mod.write_json(path, {"workloads": {"w": mod.record_json("w", rec, a, [8, 9])}})
    assert [p.name for p in path.parent.iterdir()] == [mod.OUT_NAME]  # no temporary file left
    got = json.loads(path.read_text())["workloads"]["w"]
    assert len(got["loops"]) == len(loops) == len(got["stamps_ns"]) - 1
    assert got["loops"][5] == pytest.approx(list(loops[5]), abs=1e-6)
    assert got["sensors_on"] == [list(on) for on, _ in cycles] and len(got["sensor_halves"]) == 2 * len(cycles)
    assert got["traced"] == [list(x) for x in traced]
    assert got["env"]["ARCHLINE_CUPTI_DUTY_MODE"] == "detach" and "ARCHLINE_CUPTI_DUTY_AUTO" in got["env"]
    figs = got["figures"]
    assert figs["sensors"]["verdict"] == "PASS" and figs["tracing"]["excess_s"] == pytest.approx(a.tracing.excess_s)
    assert figs["probe"]["in_block_s"] == pytest.approx(0.8)
    # rewritten in place
    mod.write_json(path, {"passed": False})
    assert json.loads(path.read_text()) == {"passed": False}
    lines = mod.report_lines(a)
    assert len(lines) == 4 and "ms per traced period" in lines[1] and "probe" in lines[3]


@pytest.mark.parametrize(
    "argv",
    [
        ["--workloads", "torch,nope"],
        ["--workloads", ","],
        ["--seconds", "abc"],
        ["--seconds", "30", "--toggle-s", "10"],
        ["--toggle-s", "0"],
        ["--cpus", "x-y"],
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_gpu(
    mod: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    def no_gpu(*args: object, **kwargs: object) -> int:
        raise AssertionError("measured despite bad input")

    monkeypatch.setattr(mod, "run", no_gpu)
    monkeypatch.setattr(mod, "measure_workload", no_gpu)
    assert mod.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("overhead_interleaved: ")


def test_the_child_repeats_its_loop_for_block_s(
    mod: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bro = mod.bro
    clock = {"t": 100.0}

    def step() -> None:
        clock["t"] += 0.25

    fake_time = SimpleNamespace(perf_counter=lambda: clock["t"], time_ns=lambda: round(clock["t"] * 1e9))
    monkeypatch.setattr(bro, "time", fake_time)
    monkeypatch.setitem(bro.WORKLOADS, "fake", lambda: ("fake", step))
    assert bro.main(["--child", "fake", "--block-s", "2.1", "--cpus", "none"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "READY" and len(out) == 2
    res = json.loads(out[-1])
    assert len(res["stamps_ns"]) == 1 + 9  # 9 loops of 0.25 s: the first to reach 2.1 s
    assert res["block_s"] == pytest.approx(2.25)
    # without --block-s: --loops, as before
    assert bro.main(["--child", "fake", "--loops", "3", "--cpus", "none"]) == 0
    assert len(json.loads(capsys.readouterr().out.splitlines()[-1])["stamps_ns"]) == 4


SHIPPED = [
    Path(__file__).resolve().parents[2]
    / "results"
    / g
    / "bench"
    / "overhead-interleaved-s13"
    / f"overhead_interleaved-GPU-{b}.json"
    for g, b in (("h100", "d61dff47"), ("h200", "339faabf"))
]


def test_summarize_redoes_the_shipped_figures_and_pools_the_cycles(
    mod: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert mod.main(["--summarize", *map(str, SHIPPED)]) == 0
    out = capsys.readouterr().out
    assert "DIFFERS" not in out
    # the docs' figures: the tracing share of each run, and the pooled sensors' change, post hoc
    for fig in ("+1.02 % [+0.63 .. +1.41 %]", "+1.56 % [+0.88 .. +2.25 %]", "+0.57 % [+0.25 .. +0.90 %]"):
        assert fig in out
    # redone with the guard (post hoc for these runs), and the pooled sensors' change with it
    assert "redone with each traced period 0.5 s longer" in out
    for fig in ("+1.78 % [+1.15 .. +2.41 %]", "+2.17 % [+1.08 .. +3.27 %]", "+0.37 % [-0.16 .. +0.90 %]"):
        assert fig in out
    assert "+1.68 % [+0.61 .. +2.75 %]" in out
    assert "pooled (post hoc): +2.17 % [-2.16 .. +6.68 %]" in out and "n=36 cycles" in out


def test_summarize_flags_a_saved_figure_the_data_do_not_give(
    mod: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(SHIPPED[1].read_text())
    doc["workloads"]["torch"]["figures"]["tracing"]["fraction"]["centre"] = 0.001
    f = tmp_path / "tampered.json"
    f.write_text(json.dumps(doc))
    assert mod.main(["--summarize", str(f)]) == 1
    assert "DIFFERS" in capsys.readouterr().out


def test_summarize_of_a_broken_file_is_one_line_exit_2(
    mod: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "broken.json"
    f.write_text('{"workloads": {"torch": {"loops": [[1, 2]]}}}')
    assert mod.main(["--summarize", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "broken.json" in err[0]


def test_the_guards_held_out_run_reproduces_as_shipped(mod: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    # recorded after GUARD_S was committed (scripts/plan_s13a.sh): analysed with the guard by the run itself
    f = SHIPPED[0].parent / "overhead_interleaved-GPU-cbb21413.json"
    assert json.loads(f.read_text())["guard_s"] == mod.GUARD_S
    assert mod.main(["--summarize", str(f)]) == 0
    out = capsys.readouterr().out
    assert "DIFFERS" not in out and "redone with" not in out
    assert "+0.74 % [-0.13 .. +1.62 %]" in out and "+0.52 % [-1.23 .. +2.27 %]" in out


def test_the_first_loop_after_each_period_shows_what_the_stamps_miss(
    mod: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    loops, _, traced = timeline(noise=0.0, drift=0.0, excess_s=0.04, after_s=0.06)
    after = mod.first_after_excess(loops, traced)
    assert after.centre == pytest.approx(0.06, abs=2e-3) and after.n == len(traced) - 1
    none = mod.first_after_excess(*timeline(noise=0.0, drift=0.0, excess_s=0.04)[::2])
    assert none.centre == pytest.approx(0.0, abs=2e-3)
    # the shipped runs' figures behind GUARD_S (docs/attribution.md, session 13)
    assert mod.main(["--summarize", *map(str, SHIPPED)]) == 0
    out = capsys.readouterr().out
    for ms in ("+34.3 ms", "+58.6 ms", "+8.3 ms", "+26.1 ms"):
        assert f"first loop after each traced period (as stamped): {ms}" in out


# The dose (--sensor-copies): several sets of sensors in every on-half, the change scaled back to one by the NVML
# reads per second. Synthetic: a sampler whose cost is proportional to its reads, 16 of them at once.


def test_a_dose_scales_the_sensors_figure_to_one_sampler_by_the_reads(mod: ModuleType) -> None:
    per_one = 0.004  # one sampler costs the loop 0.4 %; 16 cost 6.4 %, which 10 % noise resolves
    loops, cycles, traced = timeline(seed=5, sensors=16 * per_one, excess_s=0.0)
    dose = mod.Dose(copies=16, one_per_s=650.0, on_per_s=16 * 650.0)
    a = mod.analyse(loops, cycles, traced, dose=dose)
    assert a.sensors_dosed is not None and _covers(a.sensors_dosed.lo, a.sensors_dosed.hi, 16 * per_one)
    assert a.sensors_dosed.lo > 0.03  # the dosed effect is resolved above zero
    s = a.sensors
    assert (s.centre, s.lo, s.hi) == pytest.approx(
        (a.sensors_dosed.centre / 16, a.sensors_dosed.lo / 16, a.sensors_dosed.hi / 16)
    )
    assert _covers(s.lo, s.hi, per_one) and s.verdict == "PASS" and s.hi - s.lo < 0.01
    undosed = mod.analyse(loops, cycles, traced)
    assert undosed.sensors.verdict == "FAIL"  # the same loops read as one sampler's: 6.4 %
    lines = mod.report_lines(a)
    assert "sensors x16 samplers (measured)" in lines[0] and "x16.00" in lines[0] and "÷ 16.00" in lines[1]
    assert len(lines) == 5
    # a saturated dose (fewer reads than copies x one) scales by the reads, not by the copies
    half = mod.analyse(loops, cycles, traced, dose=mod.Dose(16, 650.0, 8 * 650.0))
    assert half.sensors.centre == pytest.approx(a.sensors_dosed.centre / 8)


def test_a_dosed_run_keeps_its_reads_and_summarize_redoes_it(
    mod: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loops, cycles, traced = timeline(seed=6, seconds=200.0, sensors=0.08, excess_s=0.02)
    halves = [(k, *h) for on, off in cycles for k, h in (("on", on), ("off", off))]
    on_s = sum(b - a for on, _ in cycles for a, b in [on])
    per_half = [{"nvml.energy": [int(80 * 8 * (b - a)), 0.5], "nvml.instant": [int(570 * 8 * (b - a)), 0.1]}
                for (a, b), _ in cycles]  # fmt: skip
    cal = {"1": {"seconds": 3.0, "reads": {}, "per_s": 650.0}, "8": {"seconds": 3.0, "reads": {}, "per_s": 5200.0}}
    stamps = [round(loops[0][0] * 1e9)] + [round(b * 1e9) for _, b in loops]
    rec = mod.ChildRecord(stamps, halves, cycles, traced, 200.0, 5.0, 210.0, 1000, [],
                          on_reads=per_half, copies=8, calibration=cal)  # fmt: skip
    dose = rec.dose
    assert dose is not None and dose.copies == 8
    assert dose.on_per_s == pytest.approx(sum(mod.reads(r) for r in per_half) / on_s)
    assert dose.factor == pytest.approx(8.0, rel=0.01)
    a = mod.analyse(loops, cycles, traced, dose=dose)
    path = tmp_path / mod.OUT_NAME
    doc = {"k_ref": mod.K_REF, "level": mod.LEVEL, "guard_s": mod.GUARD_S, "sensor_copies": 8,
           "workloads": {"decode": mod.record_json("decode", rec, a, [8, 9])}}  # fmt: skip
    mod.write_json(path, doc)
    got = json.loads(path.read_text())["workloads"]["decode"]
    assert got["sensor_copies"] == 8 and got["sensor_reads_on"][0]["nvml.energy"][0] > 0
    assert got["figures"]["dose"]["factor"] == pytest.approx(dose.factor)
    assert got["figures"]["sensors_dosed"]["centre"] == pytest.approx(8 * got["figures"]["sensors"]["centre"])
    assert mod.main(["--summarize", str(path)]) == 0
    out = capsys.readouterr().out
    assert "sensors x8 samplers (measured)" in out and "DIFFERS" not in out
    # without copies the record has no dose and the JSON no dose keys (older runs' figures still compare)
    plain = mod.ChildRecord(stamps, halves, cycles, traced, 200.0, 5.0, 210.0, 1000, [])
    assert plain.dose is None and "dose" not in mod.analyse(loops, cycles, traced).to_json()


def test_the_read_counter_counts_every_source_read(mod: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from archline.hw import nvml

    monkeypatch.setattr(nvml._NVMLSource, "read", nvml._NVMLSource.read)  # restored after the test

    class Fake(nvml._NVMLSource):
        name = "nvml.fake"

        def _read(self) -> object:
            return 1.0

    counter = mod.ReadCounter()
    counter.install()
    counter.install()  # a second install does not count twice
    src = Fake(SimpleNamespace(handle=None, gpu=0))
    for _ in range(5):
        assert src.read() == 1.0
    got = counter.take()
    assert list(got) == ["nvml.fake"] and got["nvml.fake"][0] == 5
    assert counter.take() == {} and mod.reads(got) == 5
    # from several threads at once, as the samplers read: every read counted once
    threads = [threading.Thread(target=lambda: [src.read() for _ in range(200)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mod.reads(counter.take()) == 800


@pytest.mark.parametrize("copies", ["0", "65"])
def test_sensor_copies_out_of_range_is_one_line_exit_2(
    mod: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], copies: str
) -> None:
    monkeypatch.setattr(mod, "run", lambda *a, **k: pytest.fail("measured despite bad input"))
    assert mod.main(["--sensor-copies", copies]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--sensor-copies" in err[0]


def test_a_bare_sampler_polls_every_source_until_it_stops(mod: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from archline.hw import nvml

    class Src:
        def __init__(self, name: str) -> None:
            self.name, self.poll_interval_s, self.reads, self.closed = name, 0.0, 0, False
            self.third = threading.Event()

        def read(self) -> None:
            self.reads += 1
            if self.reads >= 3:
                self.third.set()

        def close(self) -> None:
            self.closed = True

    opened: list[Src] = []

    def fake_open(gpu: int, names: tuple[str, ...]) -> list[Src]:
        opened.extend(Src(n) for n in names)
        return opened

    monkeypatch.setattr(nvml, "open_sources", fake_open)
    with mod.BareSampler(0):
        for src in opened:
            assert src.third.wait(30.0)  # a guard against hanging, not a timing: each source is read 3 times
    assert sorted(s.name for s in opened) == ["nvml.buffer", "nvml.energy"]  # what archline run opens
    assert all(s.closed for s in opened)
    assert all(src.reads >= 3 for src in opened)


ROOT = Path(__file__).resolve().parents[2]
S16 = [
    ROOT / "results" / "h100" / "bench" / "overhead-interleaved-s16" / "overhead_interleaved-GPU-0a416f09.json",
    ROOT / "results" / "h200" / "bench" / "overhead-interleaved-s16" / "overhead_interleaved-GPU-bfbb7738.json",
]


def test_the_switch_table_in_the_docs_comes_from_the_shipped_runs(
    mod: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = sorted(ROOT.glob("results/h*/bench/overhead-interleaved-s1[3-6]/*.json"))
    assert mod.main(["--switches", *map(str, paths)]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "switch_by_state_s16.txt").read_text().splitlines()
    rows = [line.split() for line in got[1:]]
    dosed = [float(r[5]) for r in rows if r[2] == "16" and r[3] == "on"]
    quiet = [float(r[5]) for r in rows if r[3] == "off" and r[5] != "-"]
    assert len(dosed) == 3 and min(dosed) > 1000.0  # 16 samplers: CUPTI's attach waits seconds
    assert len(quiet) == 7 and max(quiet) < 20.0  # no sensors: 11-17 ms


def test_the_dosed_runs_redo_as_shipped(mod: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert mod.main(["--summarize", *map(str, S16)]) == 0
    out = capsys.readouterr().out
    assert out.count("sensors x16 samplers (measured)") == 6 and "DIFFERS" not in out  # as run, and redone:
    # the 2 s attaches with 16 samplers reach past the 0.5 s guard: redone with each period started that much earlier
    assert out.count("starting its CUPTI attach time earlier where that is longer than the guard") == 3
    assert "+1.02 % [-4.48 .. +4.88 %]" in out  # the decode loop on GPU-0a416f09, per sampler, redone
    assert "pooled (post hoc; a dosed run's changes ÷ its factor)" in out
    assert "+1.15 % [-3.13 .. +4.62 %]" in out  # the decode loop on GPU-0a416f09, per sampler
    # the driver serialises the energy counter's reads: 4.4 ms alone, ~66 ms each with 16 samplers queued
    one = "calibration (1 sampler alone, 3.0 s): 101 NVML reads/s; per read: nvml.buffer 1.9 ms, nvml.energy 4.4 ms"
    assert one + "; time in reads 0.44 s/s" in out  # one sampler keeps the driver's read path busy 44 % of the time
    assert "calibration (16 samplers alone, 3.0 s): 306 NVML reads/s" in out and "nvml.energy 66.3 ms" in out
    # scaled by the read path's busy time (44 % -> all of it) instead of the reads (x3.12): a wider interval
    assert "÷ 2.29: +1.57 % [-4.27 .. +6.30 %]" in out
    # switching outside the halves: the 15 bare samplers' queued reads held archline's sensors up on leaving
    assert "switching the sensors (leave an on-half): 2.49-2.80 s outside the halves (median 2.53 s, n=4)" in out
    assert "switching the sensors (leave an on-half): 13.72-13.76 s" in out  # 16 full sets on the H200


def test_period_states_and_attach_times_pair_the_saved_switches(mod: ModuleType) -> None:
    w = {
        "traced": [[0.0, 1.0], [10.0, 10.5], [20.0, 20.5], [30.0, 30.5]],
        "sensor_halves": [["on", 5.0, 15.0], ["off", 15.2, 25.0], ["on", 25.2, 30.2]],
        "switch_s": [1e-6, 0.012, 1e-6, 0.013, 1e-6, 2.0, 1e-6],
    }
    assert mod.period_states(w) == ["on", "off", "between"]
    assert mod.attach_times(w) == [0.012, 0.013, 2.0]
    # a run that saved the injection reader's own attach times: those, one per period; else the switch times
    assert mod.attach_times({**w, "attach_s": [0.02, 0.03, 1.5]}) == [0.02, 0.03, 1.5]
    assert mod.attach_times({**w, "attach_s": [0.02]}) == [0.012, 0.013, 2.0]
    w["switch_s"] = w["switch_s"][:-2]  # does not pair with the periods: none
    assert mod.attach_times(w) is None


def test_widened_starts_a_period_earlier_only_by_an_attach_beyond_the_guard(mod: ModuleType) -> None:
    traced = [(20.0, 20.5), (0.0, 1.0), (10.0, 10.5)]
    assert mod.widened(traced, [0.015, 2.0], 0.5) == [(0.0, 1.0), (10.0, 10.5), (18.5, 20.5)]  # the probe untouched
    assert mod.widened(traced, None, 0.5) == sorted(traced) and mod.widened(None, [1.0], 0.5) is None


def test_the_busy_factor_caps_the_dose_at_a_read_path_busy_throughout(mod: ModuleType) -> None:
    cal = {"1": {"seconds": 2.0, "reads": {"nvml.energy": [200, 0.9]}},
           "16": {"seconds": 2.0, "reads": {"nvml.energy": [600, 40.0]}}}  # fmt: skip
    assert mod.busy_factor({"calibration": cal}) == pytest.approx(1.0 / 0.45)  # 0.45 s/s alone, all of it dosed
    cal["16"]["reads"]["nvml.energy"] = [400, 1.2]  # 0.6 s/s: not saturated
    assert mod.busy_factor({"calibration": cal}) == pytest.approx(0.6 / 0.45)
    assert mod.busy_factor({"calibration": {"1": cal["1"]}}) is None and mod.busy_factor({}) is None


def test_a_calibration_without_reads_leaves_the_figure_undosed(mod: ModuleType) -> None:
    assert math.isnan(mod.Dose(16, 0.0, 300.0).factor)
    halves = [("on", 0.0, 10.0), ("off", 10.0, 20.0)]
    cal = {"1": {"seconds": 3.0, "reads": {}, "per_s": 0.0}, "16": {"seconds": 3.0, "reads": {}, "per_s": 0.0}}
    rec = mod.ChildRecord([0, 1], halves, [], None, 1.0, 0.0, 1.0, 0, [], on_reads=[{}], copies=16, calibration=cal)
    assert rec.dose is None


def test_the_switch_table_matches_each_period_to_its_excess_in_a_run_that_widened_them(
    mod: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loops, cycles, traced = timeline(seed=8, seconds=200.0, noise=0.0, drift=0.0, excess_s=0.04)
    n = len(traced) - 1
    attach = [2.0] * n  # every attach past the guard: each period widened by 1.5 s
    switch_s = [1e-6] + [x for t in attach for x in (t, 1e-6)]
    halves = [(k, *h) for on, off in cycles for k, h in (("on", on), ("off", off))]
    stamps = [round(loops[0][0] * 1e9)] + [round(b * 1e9) for _, b in loops]
    rec = mod.ChildRecord(stamps, halves, cycles, traced, 200.0, 5.0, 210.0, 1000, [], switch_s=switch_s)
    assert mod.attach_times({"traced": traced, "switch_s": switch_s}) == attach
    a = mod.analyse(loops, cycles, mod.widened(traced, attach, mod.GUARD_S))
    doc = {"guard_s": mod.GUARD_S, "attach_guard": True, "workloads": {"torch": mod.record_json("torch", rec, a, [])}}
    path = tmp_path / "overhead_interleaved-GPU-test.json"
    mod.write_json(path, doc)
    assert mod.main(["--switches", str(path)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert {r[3] for r in rows} <= {"on", "off", "between"} and sum(int(r[4]) for r in rows) == n
    assert all(r[6] != "-" for r in rows if r[3] in ("on", "off"))  # every period found its excess


def test_the_session_18_decode_run_redoes_the_docs_figures(mod: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/attribution.md "Session 18": the decode loop's tracing share on H100 GPU-4626eead, and its sensors."""
    path = ROOT / "results/h100/bench/overhead-interleaved-s18/overhead_interleaved-GPU-4626eead.json"
    assert mod.main(["--summarize", str(path)]) == 0
    out = capsys.readouterr().out
    assert "DIFFERS" not in out
    assert "+1.33 % [+0.10 .. +2.56 %]" in out and "133.2 ms per traced period" in out
    assert "+9.06 % [-9.26 .. +34.87 %]" in out and "n=7 cycles" in out
