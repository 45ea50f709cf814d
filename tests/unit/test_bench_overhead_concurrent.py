"""The concurrent overhead benchmark: two copies' speeds over their common stretch, the slots cancelled in pairs."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "overhead_concurrent.py"


@pytest.fixture(scope="module")
def oc():
    spec = importlib.util.spec_from_file_location("overhead_concurrent", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["overhead_concurrent"] = mod
    spec.loader.exec_module(mod)
    return mod


def stamps(per_loop: float, start: float, end: float, slow: list[tuple[float, float, float]]) -> list[float]:
    """A block's loop ends for a copy whose loop takes ``per_loop`` s at full speed, slowed by the factor of any
    spell (from, to, factor) it is in: its progress is the integral of 1/(per_loop · factor)."""
    t = np.linspace(start, end, 200_001)
    f = np.ones_like(t)
    for a, b, k in slow:
        f[(t >= a) & (t < b)] = k
    rate = 1.0 / (per_loop * f)
    prog = np.concatenate([[0.0], np.cumsum((rate[1:] + rate[:-1]) / 2 * np.diff(t))])
    n = int(prog[-1])
    return [start, *np.interp(np.arange(1, n + 1), prog, t).tolist()]


def test_progress_counts_the_loop_under_way_in_proportion(oc):
    s = [10.0, 10.5, 11.5, 12.0]
    assert oc.progress(s, 9.0) == 0.0
    assert oc.progress(s, 10.25) == pytest.approx(0.5)
    assert oc.progress(s, 11.0) == pytest.approx(1.5)
    assert oc.progress(s, 11.5) == pytest.approx(2.0)
    assert oc.progress(s, 13.0) == 3.0


def test_a_slow_spell_both_copies_feel_cancels_in_their_ratio(oc):
    spells = [(5.0, 12.0, 2.0), (20.0, 24.0, 1.6)]  # the host, for both
    a = stamps(0.30, 0.00, 30.0, spells)
    b = stamps(0.30 * 1.03, 0.02, 30.4, spells)  # 3 % slower, started 20 ms later
    st = oc.common_stretch(a, b)
    assert st.start_s == pytest.approx(0.02) and st.end_s == pytest.approx(min(a[-1], b[-1]))
    assert math.exp(st.d) == pytest.approx(1 / 1.03, rel=2e-3)
    # whereas two blocks run one after the other, a spell in one of them, say something else entirely
    a2 = stamps(0.30, 0.0, 30.0, [(0.0, 15.0, 2.0)])
    b2 = stamps(0.309, 40.0, 70.0, [])
    mean = float(np.mean(np.diff(a2))) / float(np.mean(np.diff(b2)))
    assert abs(mean - 1 / 1.03) > 0.1


def test_blocks_that_do_not_overlap_are_refused(oc):
    with pytest.raises(ValueError, match="overlap"):
        oc.common_stretch([0.0, 1.0, 2.0], [3.0, 4.0])


def test_pairs_cancel_the_slots_own_difference(oc):
    delta, slots = math.log(1.021), math.log(0.94)  # the cost; slot 0 slower by itself
    ds, rec = [], []
    for k in range(10):
        r = k % 2
        ds.append(slots + (delta if r == 0 else -delta) + (0.001 if k % 3 == 0 else -0.0005))
        rec.append(r)
    costs = oc.pair_costs(ds, rec)
    assert len(costs) == 5
    assert all(abs(c - 0.021) < 0.002 for c in costs)
    v = oc.verdict_of(costs)
    assert v["verdict"] == "PASS" and v["lo"] <= 0.021 <= v["hi"] and v["n"] == 5
    with pytest.raises(ValueError, match="slot 0 then slot 1"):
        oc.pair_costs(ds[:2], [1, 0])
    with pytest.raises(ValueError, match="even"):
        oc.pair_costs(ds[:3], rec[:3])


def test_a_cost_above_the_limit_fails_and_a_speed_up_is_noise(oc):
    assert oc.verdict_of([0.05, 0.06, 0.055, 0.052, 0.058])["verdict"] == "FAIL"
    assert oc.verdict_of([-0.05, -0.06, -0.055, -0.052, -0.058])["verdict"] == "NOISE"
    assert oc.verdict_of([-0.04, 0.05, 0.0, 0.01, -0.02])["verdict"] == "UNRESOLVED"


def test_comovement_tells_shared_spells_from_each_copys_own(oc):
    spells = [(4.0, 9.0, 1.8), (15.0, 17.0, 1.5), (22.0, 27.0, 2.2)]
    shared = oc.comovement(stamps(0.3, 0, 30, spells), stamps(0.31, 0, 30, spells))
    own = oc.comovement(stamps(0.3, 0, 30, spells), stamps(0.31, 0, 30, [(10.0, 14.0, 1.8), (18.0, 21.0, 2.0)]))
    assert shared is not None and shared > 0.9
    assert own is not None and own < 0.3
    assert oc.comovement([0.0, 1.0, 2.0], [0.0, 1.0, 2.0]) is None  # too short for three bins


def test_steal_share_over_a_stretch(oc):
    samples = [(0.0, 100, 10_000), (1.0, 110, 10_800), (2.0, 150, 11_600), (3.0, 150, 12_400)]
    assert oc.steal_share(samples, 0.5, 3.0) == pytest.approx(40 / 1600)
    assert oc.steal_share(samples, 2.5, 3.0) is None


def test_cpus_split_in_two_sets_and_this_process(oc):
    a, b, own = oc.split_two(list(range(32)), "auto")
    assert a == list(range(16, 24)) and b == list(range(24, 32)) and own == list(range(16))
    assert oc.split_two(list(range(4)), "auto") == ([], [], [])
    a, b, own = oc.split_two(list(range(16)), "8-11/12-15")
    assert (a, b, own) == ([8, 9, 10, 11], [12, 13, 14, 15], list(range(8)))
    for bad in ("8-11", "8-12/12-15", "8-11/40-41"):
        with pytest.raises(ValueError, match="--cpus"):
            oc.split_two(list(range(16)), bad)


FAKE_CHILD = """\
import json, os, sys
args = sys.argv[1:]
slot = int(os.environ["CUDA_VISIBLE_DEVICES"])
print("READY", flush=True)
assert sys.stdin.readline().strip() == "go"
rec = os.environ.get("FAKE_RECORDED") == "1"
out = {"setup_s": 0.0}
t0 = 1_000.0
if "--spin-n" in args:
    # the CPU of the copy in slot 1 runs 1.5x slower for its second half: loops and spins alike
    cpu = [1.0 + (0.5 if slot == 1 and k >= 50 else 0.0) for k in range(101)]
    loop = [0.3 * (1.02 if rec else 1.0) * cpu[k] for k in range(100)]
    spin = [0.01 * cpu[min(k, 100)] for k in range(101)]
    st = [t0]
    for k in range(100):
        st.append(st[-1] + loop[k] + spin[k + 1])
    out |= {"loop_s": loop, "spin_s": spin}
else:
    per = 0.3 * (1.02 if rec else 1.0) * (1.05 if slot == 1 else 1.0)
    st = [t0 + k * per for k in range(101)]
out |= {"block_s": st[-1] - t0, "stamps_ns": [int(x * 1e9) for x in st]}
print(json.dumps(out), flush=True)
"""

FAKE_ARCHLINE = """\
#!{python}
import os, sys
args = sys.argv[1:]
assert args[:2] == ["run", "--gpu"], args
gpu = args[2]
cmd = args[args.index("--") + 1 :]
os.environ["CUDA_VISIBLE_DEVICES"] = gpu
os.environ["FAKE_RECORDED"] = "1"
os.execv(cmd[0], cmd)
"""


@pytest.fixture
def fakes(oc, tmp_path, monkeypatch):
    """The fake child in place of bench_run_overhead.py and a fake ``archline`` first on the PATH."""
    child = tmp_path / "child.py"
    child.write_text(FAKE_CHILD)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "archline"
    fake.write_text(FAKE_ARCHLINE.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(oc, "BENCH", child)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")


def test_end_to_end_with_fake_children_and_a_fake_archline(oc, fakes, tmp_path, capsys):
    """The start barrier, the alternation, the JSON and the verdict: a fake child whose loops take 0.3 s, 5 % more
    on GPU 1 and 2 % more under the fake ``archline run``; the stamps are made up, nothing waits on a clock."""
    out = tmp_path / "out"
    rc = oc.main(["--gpus", "0,1", "--reps", "6", "--aa", "1", "--block-s", "1", "--cpus", "none", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    summary = json.loads((out / "overhead_concurrent.json").read_text())
    res = summary["result"]
    assert res["verdict"] == "PASS" and res["n"] == 3
    assert res["estimate"] == pytest.approx(0.02, abs=1e-6)
    assert [r["recorded_slot"] for r in summary["reps"]] == [None, 0, 1, 0, 1, 0, 1]
    assert res["aa_d"] == [pytest.approx(math.log(1 / 1.05))]
    assert "whole cost on the time per loop: +2.00 %" in text


def test_per_speed_divides_each_loop_by_the_spins_around_it(oc):
    assert oc.per_speed({"loop_s": [0.3, 0.6], "spin_s": [0.01, 0.01, 0.03]}) == pytest.approx((30 + 30) / 2)
    assert oc.per_speed({"loop_s": [0.3], "spin_s": [0.01]}) is None
    assert oc.per_speed({"stamps_ns": [0, 1]}) is None


def test_judged_per_cpu_speed_where_a_cpu_slows_down(oc, fakes, tmp_path, capsys):
    """Slot 1's CPU slows by half for the second half of each block, loops and spins alike: the time per loop per
    CPU speed finds exactly the 2 % the fake archline adds to the loops; the time per loop as it ran, with the
    spins between the loops in it (which the fake archline does not slow), reads less."""
    out = tmp_path / "out"
    argv = ["--reps", "10", "--aa", "0", "--block-s", "1", "--cpus", "none", "--spin-n", "1000", "--out", str(out)]
    assert oc.main(argv) == 0
    text = capsys.readouterr().out
    res = json.loads((out / "overhead_concurrent.json").read_text())["result"]
    assert res["judged_on"] == "time per loop per CPU speed" and res["n"] == 5
    assert res["estimate"] == pytest.approx(0.02, abs=1e-6) and res["verdict"] == "PASS"
    assert "time per loop as it ran (not judged)" in text and "per CPU speed" in text
    assert 0.0 < res["raw"]["estimate"] < 0.019


def test_a_saved_summary_is_analysed_again(oc, tmp_path, capsys):
    out = tmp_path / "out"
    child = tmp_path / "child.py"
    child.write_text(FAKE_CHILD)
    reps = []
    for k in range(4):  # two pairs, per CPU speed, as the run saves them
        d = math.log(1.03) * (1 if k % 2 == 0 else -1) + 0.01
        reps.append({"rep": k, "recorded_slot": k % 2, "d": d + 0.2, "d_speed": d, "comovement": 0.1, "blocks": []})
    out.mkdir()
    (out / "overhead_concurrent.json").write_text(json.dumps({"workload": "decode", "block_s": 20, "reps": reps}))
    rc = oc.main(["--from-json", str(out / "overhead_concurrent.json")])
    text = capsys.readouterr().out
    assert rc == 1  # n = 2 pairs: every Walsh average, 50 %, and the estimate +3 %: not a PASS
    assert "per CPU speed: +3.00 %" in text and "as it ran (not judged)" in text
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert oc.main(["--from-json", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json" in err


def test_pairs_needed_by_the_normal_approximation(oc):
    sd, mean, n = oc.pairs_needed([0.01, 0.03, -0.01, 0.02, 0.0])
    d = [math.log1p(c) for c in (0.01, 0.03, -0.01, 0.02, 0.0)]
    assert sd == pytest.approx(float(np.std(d, ddof=1))) and mean == pytest.approx(float(np.mean(d)))
    assert n == math.ceil((1.645 * sd / (0.03 - abs(float(np.mean(d))))) ** 2)
    assert oc.pairs_needed([0.05, 0.06, 0.04])[2] is None
    assert oc.pairs_needed([0.01]) is None


def test_a_child_that_fails_is_one_line(oc, fakes, tmp_path, capsys):
    (tmp_path / "child.py").write_text("import sys\nprint('no block', file=sys.stderr)\nsys.exit(1)\n")
    out = tmp_path / "out"
    assert oc.main(["--reps", "2", "--aa", "0", "--cpus", "none", "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "repetition 0" in err and "exited 1" in err
    assert "no block" in (out / "children.log").read_text()


def test_bad_arguments_are_one_line_errors(oc, capsys):
    for argv in (["--gpus", "0"], ["--reps", "3"], ["--workload", "nope"], ["--cpus", "1-2"]):
        with pytest.raises(SystemExit) as e:
            oc.main(argv)
        assert e.value.code == 2
    assert "error:" in capsys.readouterr().err
