"""Priors from the counted energy model: KernelPrior's model form, the builder from ncu counts, ``archline counts``
and ``archline run --prior-model`` (a fake ncu and a fake GPU), and the attribution on simulated steady loops."""

from __future__ import annotations

import math
import os
import stat
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from archline.characterize.model_priors import model_priors, read_model_priors
from archline.cli.app import app
from archline.errors import InputError
from archline.hw.ncu import METRICS, parse_raw_csv, slim_raw_csv
from archline.measurement.attribute.prior import KernelPrior
from archline.model.ml.machine import MlModel
from archline.records import RunDir
from tests.unit.test_attribution_prior_fit import NAMES, _attribute, _run

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_MODEL = ROOT / "results/h100/roofline-ml-v2-8908fa3f"

# -- KernelPrior's model form


def test_a_model_prior_s_power_is_its_constant_plus_its_dynamic_energy_over_the_call_s_time():
    p = KernelPrior(0.080 + 0.2, 0.01, "model", time_per_call_s=1e-3, constant_w=80.0)
    assert p.power_at(1e-3) == pytest.approx(280.0)
    assert p.power_at(2e-3) == pytest.approx(180.0)  # the dynamic energy does not grow with the time
    capped = replace(p, cap_w=200.0)
    assert capped.power_at(1e-3) == pytest.approx(200.0) and capped.power_at(2e-3) == pytest.approx(180.0)
    plain = KernelPrior(0.28, 0.01, "replay", time_per_call_s=1e-3)
    assert plain.power_at(2e-3) == pytest.approx(140.0)  # a measured energy is spread over the time


def test_a_model_prior_needs_the_time_its_energy_is_given_at():
    with pytest.raises(ValueError, match="constant power"):
        KernelPrior(1.0, 0.1, "model", constant_w=80.0)
    with pytest.raises(ValueError, match="constant power"):
        KernelPrior(1.0, 0.1, "model", time_per_call_s=1e-3, constant_w=-1.0)


# -- the builder


def _model(**kw: object) -> MlModel:
    base = dict(
        pi0_w=80.0, pi0_sigma_w=1.0, eps_mem_j_per_b=1e-10, eps_mem_sigma=1e-12, power_limit_w=700.0,
        eps={"fp32_flop": 2e-12}, eps_sigma={"fp32_flop": 1e-13}, sources={}, rates={"dram": 3e12, "fp32": 5e13},
        model_sigma=0.06,
    )  # fmt: skip
    base.update(kw)
    return MlModel(**base)  # type: ignore[arg-type]


def _vals(dram_b: float, ffma: float, time_ns: float | None) -> dict[str, float]:
    v = {"dram_read_b": dram_b, "dram_write_b": 0.0, "ffma": ffma, "l2_b": dram_b}
    if time_ns is not None:
        v["time_ns"] = time_ns
    return v


def test_a_name_s_prior_is_the_mean_of_its_launches_under_the_model():
    m = _model()
    launches = [
        ("_Z4gemmv", _vals(1e9, 1e10, 1e6)),  # 0.1 J of DRAM, 0.04 J of FP32, 1 ms
        ("_Z4gemmv", _vals(3e9, 1e10, 3e6)),  # 0.3 J + 0.04 J, 3 ms
        ("relu", _vals(1e8, 0.0, 2e5)),
    ]
    mp = model_priors(m, launches)
    assert mp.launches == 3 and mp.skipped == 0 and set(mp.priors) >= {"relu"}
    gemm = mp.priors.get("gemm()") or mp.priors["_Z4gemmv"]  # demangled where c++filt is installed
    assert gemm.source == "model" and gemm.constant_w == 80.0 and gemm.cap_w == 700.0
    assert gemm.time_per_call_s == pytest.approx(2e-3)
    assert gemm.energy_per_call_j == pytest.approx(80.0 * 2e-3 + 0.2 + 0.04)
    # the model's own 1 σ: its calibrated 6 % at that energy, and its parameters' spread, summed in quadrature
    assert 0.06 * 0.3 * 0.9 < gemm.sd_j < 0.06 * 0.4 * 1.5
    assert gemm.power_at(2e-3) == pytest.approx(80.0 + 0.24 / 2e-3)


def test_launches_without_a_time_take_the_models_roofline_and_empty_ones_are_skipped():
    m = _model()
    mp = model_priors(m, [("copy", _vals(3e9, 0.0, None)), ("nothing", {})])
    assert mp.priors["copy"].time_per_call_s == pytest.approx(1e-3)  # 3 GB at 3 TB/s
    assert "nothing" not in mp.priors and mp.skipped == 1


def test_a_priors_power_never_exceeds_the_models_cap_and_keeps_its_dynamic_energy():
    mp = model_priors(_model(power_limit_w=300.0), [("hot", _vals(1e10, 0.0, 1e6))])  # 1 J in 1 ms: 1080 W
    p = mp.priors["hot"]
    assert p.energy_per_call_j == pytest.approx(80.0 * 1e-3 + 1.0)  # uncapped: the cap is on the power at a time
    assert p.power_at(1e-3) == pytest.approx(300.0)
    assert p.power_at(10e-3) == pytest.approx(80.0 + 1.0 / 10e-3)  # a longer call spreads all its dynamic energy


def _ncu_csv(rows: list[tuple[str, float, float, float]]) -> str:
    """An ncu raw page (with device-attribute columns and a units row): (name, DRAM bytes, FFMA, ns) per launch."""
    cols = ["ID", "Kernel Name", "device__attribute_display_name", METRICS["dram_read_b"], METRICS["ffma"],
            METRICS["time_ns"], METRICS["l2_b"]]  # fmt: skip
    lines = ["==PROF== Disconnected", ",".join(f'"{c}"' for c in cols), '"","","","byte","inst","nsecond","byte"']
    for i, (n, b, f, t) in enumerate(rows):
        lines.append(f'"{i}","{n}","NVIDIA H100 80GB HBM3","{b:,.0f}","{f:.0f}","{t:.0f}","{b:.0f}"')
    return "\n".join(lines) + "\n"


def test_the_slim_csv_keeps_the_launches_and_their_counts():
    text = _ncu_csv([("k", 1e6, 10.0, 1000.0), ("k", 2e6, 0.0, 2000.0)])
    slim = slim_raw_csv(text, METRICS.values())
    assert "device__attribute_display_name" not in slim and "==PROF==" not in slim
    assert parse_raw_csv(slim) == parse_raw_csv(text)


def test_read_model_priors_from_the_shipped_model_and_a_csv(tmp_path):
    f = tmp_path / "counts.csv"
    f.write_text(_ncu_csv([("k", 1e9, 1e9, 1e6), ("k", 1e9, 1e9, 1e6)]))
    mp = read_model_priors(SHIPPED_MODEL, f)
    p = mp.priors["k"]
    m_pi0 = 83.0  # the shipped model's π0 is about this; the prior carries it exactly
    assert p.constant_w == pytest.approx(m_pi0, rel=0.1) and p.time_per_call_s == pytest.approx(1e-3)
    assert 0 < p.sd_j < p.energy_per_call_j


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (None, "file not found"),
        ('"ID","Kernel Name","Grid Size"\n"","",""\n"0","k","1"\n', "no archline count"),
        ('"ID","Name"\n"0","k"\n', "no 'Kernel Name' column"),
        ("not a csv at all\n", "no CSV rows"),
    ],
)
def test_bad_counts_are_one_input_error_naming_the_file(tmp_path, content, match):
    f = tmp_path / "c.csv"
    if content is not None:
        f.write_text(content)
    with pytest.raises(InputError, match=match) as e:
        read_model_priors(SHIPPED_MODEL, f)
    assert "c.csv" in str(e.value)


def test_a_missing_model_is_an_input_error(tmp_path):
    f = tmp_path / "c.csv"
    f.write_text(_ncu_csv([("k", 1e9, 1e9, 1e6)]))
    with pytest.raises(InputError, match="no such file"):
        read_model_priors(tmp_path / "nomodel", f)


# -- the attribution on simulated steady loops (tests/unit/test_attribution_prior_fit.py's phased training step)


def _model_like_priors(run, t_factor: float, bias: float, seed: int, model: bool) -> dict[str, KernelPrior]:
    """Each kernel's truth split into 80 W of constant power and the rest dynamic, given at a call time
    ``t_factor`` × its traced one (as ncu's serialized launch may run), scattered by a 6 % model error × ``bias``.
    ``model=False``: the same energies as measured energies (no constant part), which the attribution must widen."""
    rng = np.random.default_rng(500 + seed)
    out = {}
    for n in NAMES:
        t = run.mean_call_s(n)
        w = run.truth_per_call_j(n) / t
        dyn = (w - 80.0) * t * bias * (1.0 + 0.06 * float(rng.standard_normal()))
        e = 80.0 * t * t_factor + dyn
        kw = {"constant_w": 80.0} if model else {}
        out[n] = KernelPrior(e, 0.06 * e, "model", time_per_call_s=t * t_factor, **kw)  # type: ignore[arg-type]
    return out


def test_model_priors_follow_the_call_time_and_cover_the_truth():
    """A model prior given at a 30 % longer (ncu) time is widened like a measured energy (the launches counted may
    not be the program's mix) but centred on the model's power at the traced time: closer to the truth."""
    errs: dict[bool, list[float]] = {True: [], False: []}
    hits = cases = 0
    for seed in range(2):
        run = _run(seed)
        for model in (True, False):
            res = _attribute(run, _model_like_priors(run, 1.3, 1.0, seed, model))
            errs[model] += [abs(r.energy_j / run.truth_energy_j[r.name] - 1.0) for r in res.kernels]
            if model:
                for r in res.kernels:
                    cases += 1
                    hits += r.energy_lo_j <= run.truth_energy_j[r.name] <= r.energy_hi_j
                assert res.extra["priors"] and set(res.extra["priors"].values()) == {"model"}
                assert sum(r.energy_j for r in res.rows) == pytest.approx(res.total_energy_j, rel=1e-9)
    # identical priors would give identical rows: the model's power at the traced time must do better
    assert np.median(errs[True]) < 0.95 * np.median(errs[False]), (np.median(errs[True]), np.median(errs[False]))
    assert hits >= 0.9 * cases, (hits, cases)


# -- the CLI

FAKE_NCU = """#!{python}
import sys, pathlib
a = sys.argv[1:]
if "--query-metrics" in a:
    print("Device GH100\\n" + "\\n".join(m.split(".")[0] + " Counter  things" for m in {metrics!r}))
    sys.exit(0)
if "--import" in a:
    pathlib.Path({args!r} + ".import").write_text(" ".join(a))
    sys.stdout.write(pathlib.Path({csv!r}).read_text())
    sys.exit(0)
out = a[a.index("-o") + 1]
pathlib.Path(out + ".ncu-rep").write_text("report")
pathlib.Path({args!r}).write_text(" ".join(a))
sys.exit({rc})
"""


def _fake_ncu(tmp_path: Path, monkeypatch, rc: int = 0) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    csvf = tmp_path / "ncu-out.csv"
    csvf.write_text(_ncu_csv([("_Z4gemmv", 1e9, 1e9, 1e6), ("relu", 1e8, 0.0, 1e5)]))
    exe = bindir / "ncu"
    exe.write_text(FAKE_NCU.format(python=sys.executable, metrics=list(METRICS.values()), csv=str(csvf),
                                   args=str(tmp_path / "args.txt"), rc=rc))  # fmt: skip
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    return tmp_path / "args.txt"


def test_counts_profiles_the_program_in_its_profiler_range_with_clocks_untouched(tmp_path, monkeypatch):
    args = _fake_ncu(tmp_path, monkeypatch)
    out = tmp_path / "c" / "counts.csv"
    res = CliRunner().invoke(app, ["counts", "-o", str(out), "--profiler-range", "--", "python3", "step.py"])
    assert res.exit_code == 0, res.output
    assert "2 launches" in res.output
    given = args.read_text().split()
    for flag, value in (("--clock-control", "none"), ("--profile-from-start", "off"), ("--cache-control", "none")):
        assert given[given.index(flag) + 1] == value
    assert given[-2:] == ["python3", "step.py"] and "--filter-mode" not in given
    imported = Path(str(args) + ".import").read_text().split()
    assert imported[imported.index("--print-kernel-base") + 1] == "mangled"  # names as CUPTI traces them
    assert len(parse_raw_csv(out.read_text())) == 2 and not list(out.parent.glob("*.tmp"))


def test_counts_per_config_counts_each_launch_configuration(tmp_path, monkeypatch):
    args = _fake_ncu(tmp_path, monkeypatch)
    out = tmp_path / "counts.csv"
    res = CliRunner().invoke(app, ["counts", "-o", str(out), "--per-config", "2", "--", "python3", "decode.py"])
    assert res.exit_code == 0, res.output
    given = args.read_text().split()
    assert given[given.index("--filter-mode") + 1] == "per-launch-config"
    assert given[given.index("--launch-count") + 1] == "2"
    res = CliRunner().invoke(app, ["counts", "-o", str(out), "--per-config", "2", "--launch-count", "5", "--", "x"])
    assert res.exit_code == 2 and "replaces --launch-count" in res.output


def test_counts_failures_are_one_line(tmp_path, monkeypatch):
    _fake_ncu(tmp_path, monkeypatch, rc=5)
    res = CliRunner().invoke(app, ["counts", "-o", str(tmp_path / "c.csv"), "--", "python3", "step.py"])
    assert res.exit_code == 3 and "exit code 5" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(app, ["counts", "-o", str(tmp_path / "c.csv"), "--launch-count", "0", "--", "x"])
    assert res.exit_code == 2 and "--launch-count" in res.output
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr("archline.hw.ncu.find_ncu", _no_ncu)
    res = CliRunner().invoke(app, ["counts", "-o", str(tmp_path / "c.csv"), "--", "x"])
    assert res.exit_code == 3 and "not found" in res.output


def _no_ncu() -> str:
    from archline.hw.ncu import NcuUnavailableError

    raise NcuUnavailableError("ncu (Nsight Compute) not found on PATH or in /usr/local/cuda/bin")


@pytest.fixture()
def fake_gpu(monkeypatch):
    from archline.cli._common import Deps
    from tests.helpers.attrib_fakes import PROGRAM_MODULE, FakeGPU

    gpu = FakeGPU()
    monkeypatch.setitem(sys.modules, PROGRAM_MODULE, gpu.module())
    gpu.deps = Deps(attribution_backend=gpu.backend)  # type: ignore[attr-defined]
    monkeypatch.chdir(ROOT)
    for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(k, raising=False)
    return gpu


SCRIPT = """
import archline_fake_cuda as gpu
for i in range(64):
    gpu.launch("hot_kernel" if (i // 16) % 2 == 0 else "cool_kernel", 0.005, 400.0 if (i // 16) % 2 == 0 else 180.0)
"""


def test_run_takes_model_priors_for_the_counted_kernels(fake_gpu, tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(SCRIPT)
    counts = tmp_path / "counts.csv"
    counts.write_text(_ncu_csv([("hot_kernel", 1e10, 0.0, 5e6)]))
    out = tmp_path / "run"
    argv = ["run", "-o", str(out), "--tracer", "python", "--prior-model", str(SHIPPED_MODEL), "--prior-counts",
            str(counts), "--", str(script)]  # fmt: skip
    res = CliRunner().invoke(app, argv, obj=fake_gpu.deps)
    assert res.exit_code == 0, res.output
    assert "model priors for 1 kernel names from 1 counted launches" in res.output
    att = RunDir.open(out).read_json("attribution.json")
    assert att["extra"]["priors"] == {"hot_kernel": "model"}


def test_run_needs_both_the_model_and_the_counts(fake_gpu, tmp_path):
    res = CliRunner().invoke(app, ["run", "--prior-model", str(SHIPPED_MODEL), "--", "x.py"], obj=fake_gpu.deps)
    assert res.exit_code == 2 and "go together" in res.output
    res = CliRunner().invoke(
        app,
        ["run", "--prior-model", str(SHIPPED_MODEL), "--prior-counts", str(tmp_path / "no.csv"), "--", "x.py"],
        obj=fake_gpu.deps,
    )
    assert res.exit_code == 2 and "no.csv: file not found" in res.output and "Traceback" not in res.output


def test_the_api_gives_the_same_priors(tmp_path):
    import archline

    f = tmp_path / "counts.csv"
    f.write_text(_ncu_csv([("k", 1e9, 1e9, 1e6)]))
    assert archline.model_priors(SHIPPED_MODEL, f) == read_model_priors(SHIPPED_MODEL, f).priors
    assert math.isfinite(archline.model_priors(SHIPPED_MODEL, f)["k"].constant_w)
