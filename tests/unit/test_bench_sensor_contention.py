"""benchmarks/sensor_contention.py: the sensors' effect on a launch + synchronise loop, from synthetic iterations
(three sensor states in rotating halves, known delays); its JSON and --summarize; bad input a one-line exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.helpers.bench import load_bench

T0 = 1.7e9  # Unix seconds


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_bench("sensor_contention")


def synthetic(
    seed: int, delay: dict[str, float], wait: dict[str, float] | None = None, cycles: int = 12, half_s: float = 0.5,
    states: tuple[str, ...] = ("none", "one", "x16"),
) -> tuple[np.ndarray, np.ndarray, list[tuple[str, float, float]]]:  # fmt: skip
    """~50 µs iterations (lognormal 30 %, each half ±2 % slower or faster at random) in rotating halves of three
    states; an iteration starting in a state's half is ``delay[state]`` slower, and ``wait[state]`` of them take
    4.4 ms more (a queued NVML read)."""
    rng = np.random.default_rng(seed)
    k = len(states)
    spans, t = [], T0
    for c in range(cycles):
        for st in states[c % k :] + states[: c % k]:
            spans.append((st, t, t + half_s))
            t += half_s + 0.4  # the switch between halves
    starts, durs = [], []
    for st, a, b in spans:
        n = int((b - a) / 50e-6)
        d = 50e3 * rng.lognormal(0.0, 0.3, n) * (1 + rng.normal(0, 0.02)) * (1 + delay.get(st, 0.0))
        if wait and wait.get(st):
            d += 4.4e6 * (rng.random(n) < wait[st])
        s = np.round(a * 1e9 + np.concatenate([[0], np.cumsum(d[:-1])]))
        keep = s < b * 1e9
        starts.append(s[keep]), durs.append(d[keep])
    return np.concatenate(starts).astype(np.int64), np.round(np.concatenate(durs)).astype(np.int64), spans


def test_a_dose_that_slows_every_call_is_found_and_one_sampler_that_does_not_passes(mod: ModuleType) -> None:
    s, d, spans = synthetic(1, {"x16": 0.10})
    halves = mod.halves_of(s, d, spans)
    assert len(halves) == 36 and all(h.n > 5000 for h in halves)
    assert len(mod.cycles_of(halves, ["none", "one", "x16"])) == 12
    one, dosed = mod.changes(halves, ["none", "one", "x16"])
    assert one.state == "one" and one.lo < 0.0 < one.hi and one.verdict == "PASS"
    assert dosed.lo < 0.10 < dosed.hi and dosed.verdict == "FAIL"
    assert dosed.extra_ns == pytest.approx(0.10 * 50e3 * np.exp(0.045), rel=0.3)  # ~5.2 µs per launch + sync
    lines = mod.report_lines(halves, ["none", "one", "x16"], [one, dosed])
    assert "one vs none" in lines[-2] and "(the default's figure)" in lines[-2] and "PASS" in lines[-2]


def test_without_a_dose_the_cycles_are_none_and_one_alone(mod: ModuleType) -> None:
    """``--copies 1``: two states, so about 1.5 times the cycles of none against one in the same time, and a delay of
    one sampler is still found."""
    assert mod.states_for(1) == ["none", "one"] and mod.states_for(16) == ["none", "one", "x16"]
    s, d, spans = synthetic(5, {"one": 0.08}, cycles=24, states=("none", "one"))
    halves = mod.halves_of(s, d, spans)
    assert len(mod.cycles_of(halves, mod.states_for(1))) == 24
    (one,) = mod.changes(halves, mod.states_for(1))
    assert one.state == "one" and one.n == 24 and one.lo > 0.03 and one.verdict == "FAIL"
    assert one.centre == pytest.approx(0.08, abs=0.02)
    s, d, spans = synthetic(6, {}, cycles=24, states=("none", "one"))
    (one,) = mod.changes(mod.halves_of(s, d, spans), mod.states_for(1))
    assert one.lo < 0.0 < one.hi and one.verdict == "PASS"


def test_a_half_lost_to_a_sensor_failure_leaves_only_its_own_cycle_incomplete(mod: ModuleType) -> None:
    """With cycle numbers recorded (session 19 on), a missing half does not shift every later cycle: by position,
    two alternating states would pair none with none and one with one from there on."""
    s, d, spans = synthetic(7, {}, cycles=20, states=("none", "one"))
    numbered = [(st, a, b, i // 2) for i, (st, a, b) in enumerate(spans)]
    del numbered[9]  # cycle 4's second half: its sensors failed to start
    halves = mod.halves_of(s, d, numbered)
    assert len(mod.cycles_of(halves, mod.states_for(1))) == 19
    positional = [mod.Half(h.state, h.start_s, h.end_s, h.n, h.sum_ns, h.hist) for h in halves]
    assert len(mod.cycles_of(positional, mod.states_for(1))) < 19
    doc = {"states": ["none", "one"], "level": mod.LEVEL, "halves": [h.to_json() for h in halves]}
    again, _, _ = mod.analysed(doc)
    assert [h.cycle for h in again] == [h.cycle for h in halves]


def test_rare_long_waits_move_the_mean_not_the_median(mod: ModuleType) -> None:
    s, d, spans = synthetic(2, {}, wait={"one": 0.002})  # 0.2 % of calls wait one 4.4 ms read: +17 % on the mean
    halves = mod.halves_of(s, d, spans)
    one, _ = mod.changes(halves, ["none", "one", "x16"])
    assert one.lo > 0.1 and one.verdict == "FAIL"
    med = {st: np.median([h.quantile_ns(0.5) for h in halves if h.state == st]) for st in ("none", "one")}
    assert med["one"] == pytest.approx(med["none"], rel=0.03)


def test_the_json_redoes_every_figure(mod: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s, d, spans = synthetic(3, {"x16": 0.03})
    halves = mod.halves_of(s, d, spans)
    doc = {"states": ["none", "one", "x16"], "seconds": 20.0, "half_s": 0.5, "copies": 16, "gpu": 0,
           "level": mod.LEVEL, "cpus": [], "halves": [h.to_json() for h in halves]}  # fmt: skip
    got = mod.changes(halves, doc["states"])
    doc["figures"] = [c.to_json() for c in got]
    path = tmp_path / "contention.json"
    mod.oi.write_json(path, doc)
    _, _, redone = mod.analysed(json.loads(path.read_text()))
    assert [c.to_json() for c in redone] == doc["figures"]
    assert mod.main(["--summarize", str(path)]) == 0
    out = capsys.readouterr().out
    assert "12 full cycles" in out and out.count(" vs none: mean ") == 2


def test_too_few_cycles_give_no_interval(mod: ModuleType) -> None:
    s, d, spans = synthetic(4, {}, cycles=3)
    one, _ = mod.changes(mod.halves_of(s, d, spans), ["none", "one", "x16"])
    assert one.n == 3 and one.lo is None and one.verdict == "UNRESOLVED"


@pytest.mark.parametrize(
    "argv",
    [
        ["--half-s", "0"],
        ["--seconds", "10", "--half-s", "2"],
        ["--copies", "0"],
        ["--copies", "65"],
        ["--seconds", "14", "--half-s", "0.5", "--copies", "1"],
        ["--cpus", "x-y"],
        ["--launches", "0"],
        ["--launches", "1001"],
    ],
)
def test_bad_input_is_one_line_exit_2_before_any_gpu(
    mod: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    monkeypatch.setattr(mod, "measure", lambda *a, **k: pytest.fail("measured despite bad input"))
    assert mod.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sensor_contention: ")


def test_summarize_of_a_broken_file_is_one_line_exit_2(
    mod: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "broken.json"
    f.write_text("{}")
    assert mod.main(["--summarize", str(f)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_session_18_runs_redo_the_docs_table(mod: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/attribution.md "Session 18": one sampler against none, and 16, on two H100s; neither bounded to 3 %."""
    d = Path(__file__).resolve().parents[2] / "results/h100/bench/sensor-contention-s18"
    files = sorted(d.glob("sensor_contention-GPU-*.json.xz"))
    assert [f.name for f in files] == [
        "sensor_contention-GPU-2cc41057.json.xz",
        "sensor_contention-GPU-c7661d05.json.xz",
    ]
    assert mod.main(["--summarize", *map(str, files)]) == 0
    out = capsys.readouterr().out
    assert "one vs none: mean +0.54 % [-2.19 .. +3.71 %] UNRESOLVED" in out and "n=45 cycles" in out
    assert "one vs none: mean -0.38 % [-3.95 .. +4.55 %] UNRESOLVED" in out and "n=11 cycles" in out
    assert (
        "x16 vs none: mean +0.41 % [-2.47 .. +3.33 %]" in out and "x16 vs none: mean +1.47 % [-2.79 .. +4.27 %]" in out
    )
    assert "PASS" not in out


def test_the_session_19_run_without_the_dose_redoes_the_docs_table(
    mod: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/attribution.md "Session 19": one sampler against none alone (``--copies 1``), 100 cycles on H100
    GPU-cedf2c17; still not bounded to 3 %."""
    root = Path(__file__).resolve().parents[2]
    f = root / "results/h100/bench/sensor-contention-s19/sensor_contention-GPU-cedf2c17.json.xz"
    assert mod.main(["--summarize", str(f)]) == 0
    out = capsys.readouterr().out
    assert "one vs none: mean +1.72 % [-0.48 .. +4.05 %] UNRESOLVED" in out and "n=100 cycles" in out
    assert "x16" not in out
    assert out.splitlines() == (root / "docs/data/sensor_contention_s19.txt").read_text().splitlines()


def test_the_session_21_run_bounds_the_sensors_share_within_3_percent(
    mod: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/attribution.md "Session 21": plan_s21d, frozen before it ran, the same as session 19's run for 840 s on
    H100 GPU-83db9584: 175 cycles, one sampler against none +0.20 % [-0.74, +1.24], the whole interval inside ±3 %."""
    root = Path(__file__).resolve().parents[2]
    f = root / "results/h100/bench/sensor-contention-s21/sensor_contention-GPU-83db9584.json.xz"
    assert mod.main(["--summarize", str(f)]) == 0
    out = capsys.readouterr().out
    assert "one vs none: mean +0.20 % [-0.74 .. +1.24 %] PASS" in out and "n=175 cycles" in out
    assert out.splitlines() == (root / "docs/data/sensor_contention_s21.txt").read_text().splitlines()


@pytest.mark.parametrize(
    ("folder", "board", "figure", "cycles"),
    [("h100/bench/sensor-contention-s22", "GPU-e7ad0b8d", "+0.06 % [-0.88 .. +1.00 %] PASS", 125),
     ("h100/bench/sensor-contention-s22-busy", "GPU-3d9d0cda", "-0.15 % [-2.24 .. +2.44 %] PASS", 49),
     ("h200/bench/sensor-contention-s23-busy", "GPU-df21093a", "+0.01 % [-1.82 .. +2.39 %] PASS", 49)],
)  # fmt: skip
def test_the_runs_of_sessions_22_and_23_bound_the_sensors_share_on_a_launch_bound_loop(
    mod: ModuleType, capsys: pytest.CaptureFixture[str], folder: str, board: str, figure: str, cycles: int
) -> None:
    """docs/attribution.md "Session 22" and "Session 23": plan_s22a (H100 GPU-e7ad0b8d, 600 s), plan_s22c (H100
    GPU-3d9d0cda, 240 s, the host's other GPU busy) and plan_s23a (H200 GPU-df21093a, 240 s, the other GPU busy), each
    frozen before it ran: 64 launches per synchronise, one sampler against none."""
    root = Path(__file__).resolve().parents[2]
    f = root / "results" / folder / f"sensor_contention-{board}.json.xz"
    assert mod.main(["--summarize", str(f)]) == 0
    out = capsys.readouterr().out
    assert f"one vs none: mean {figure}" in out and f"n={cycles} cycles" in out and "per 64 launches + sync" in out
    doc = "sensor_contention_" + folder.rsplit("sensor-contention-", 1)[1].replace("-", "_") + ".txt"
    assert out.splitlines() == (root / "docs/data" / doc).read_text().splitlines()


def test_the_child_launches_k_kernels_per_synchronise(
    mod: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--launches K``: each timed iteration is K launches and one synchronise (a fake torch counts them; a loop of
    0 s times exactly one iteration, after 1000 warm-up launches and synchronises)."""
    calls = {"add": 0, "sync": 0}

    class _X:
        def add_(self, _: float) -> None:
            calls["add"] += 1

    fake = ModuleType("torch")
    fake.zeros = lambda *a, **k: _X()  # type: ignore[attr-defined]
    fake.cuda = ModuleType("torch.cuda")  # type: ignore[attr-defined]
    fake.cuda.synchronize = lambda: calls.__setitem__("sync", calls["sync"] + 1)  # type: ignore[attr-defined]
    monkeypatch.setitem(__import__("sys").modules, "torch", fake)
    out = tmp_path / "it.npz"
    assert mod.child(0.0, out, [], launches=32) == 0
    assert calls == {"add": 1000 + 32, "sync": 1000 + 1}
    assert len(np.load(out)["durs_ns"]) == 1 and capsys.readouterr().out.strip() == "READY"


def test_a_run_of_k_launches_says_so_per_iteration(
    mod: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s, d, spans = synthetic(5, {}, states=("none", "one"))
    halves = mod.halves_of(s, d, spans)
    doc = {"states": ["none", "one"], "seconds": 20.0, "half_s": 0.5, "copies": 1, "launches": 32, "gpu": 0,
           "level": mod.LEVEL, "cpus": [], "halves": [h.to_json() for h in halves]}  # fmt: skip
    path = tmp_path / "k.json"
    mod.oi.write_json(path, doc)
    assert mod.main(["--summarize", str(path)]) == 0
    out = capsys.readouterr().out
    assert "µs per 32 launches + sync" in out and "per launch + sync" not in out
