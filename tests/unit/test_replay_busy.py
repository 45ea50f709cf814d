"""The design's busy-time model (session 17): each configuration timed kernel by kernel, the kernels' busy time beyond
theirs in the whole step fitted as β per second beside the energies (replay_busy.py, replay_context.run_context);
CUPTI's side (hw/cupti/busy.py) against the fake CUPTI."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pytest

from archline.hw.cupti.busy import kernel_busy_s
from archline.measurement.attribute.replay import replay_energy
from archline.measurement.attribute.replay_busy import BUSY_COVARIATE, excess_busy
from archline.measurement.attribute.replay_context import DEFAULT_DESIGN_MODEL
from tests.helpers.attrib_fakes import FakeCupti
from tests.helpers.fake_graph import FakeGraphGPU, FakeNode, NoisyMeasure
from tests.unit.test_replay_context import FIXED_S, FIXED_W, coverage, in_step, step_nodes

#: How much longer a consumer runs while its producer is switched off (reading from memory, not the L2).
SLOW = 0.25


def slow_chain(seed: int, spread_w: float = 0.0, slow: float = SLOW) -> FakeGraphGPU:
    """``step_nodes(seed)``, every node its own group at 400 W (± ``spread_w`` at random), each running ``slow``
    longer, at its own power, while the node before it is off."""
    rng = np.random.default_rng(seed)
    nodes = [FakeNode(f"{n.name}-{i}", n.time_s, 400.0 + float(rng.uniform(-spread_w, spread_w)))
             for i, n in enumerate(step_nodes(seed))]  # fmt: skip
    return FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W,
                        slowdowns={i: (i - 1, slow) for i in range(1, len(nodes))})  # fmt: skip


def design(gpu: FakeGraphGPU, seed: int, model: str, timer: object = "gpu", **kw: object) -> object:
    busy = gpu.busy_times if timer == "gpu" else timer
    return replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=seed), gpu.clock, top=2, marginal=False, design=60,
                         design_seed=seed, design_model=model, busy_timer=busy, **kw)  # type: ignore[arg-type]  # fmt: skip


def test_excess_busy_counts_the_enabled_kernels_beyond_the_whole_step() -> None:
    x = np.array([[1, 1, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]], float)
    groups = [["a"], ["b", "c"], ["d"]]  # the second factor is lumped: two names
    whole = {"a": 1.0, "b": 2.0, "c": 0.5, "d": 1.5, "memset": 0.1}
    traces = [
        whole,
        {"memset": 0.1},
        {"a": 1.0, "d": 1.5 + 0.3, "memset": 0.12},  # d runs 0.3 s longer without b and c; the base 0.02
        {"b": 2.0 + 0.1, "c": 0.5, "memset": 0.1, "a": 0.0},  # a name that is off counts nothing
    ]
    z = excess_busy(x, groups, traces)
    assert z.tolist() == pytest.approx([0.0, 0.0, 0.32, 0.1])
    with pytest.raises(ValueError, match="3 traces for 4"):
        excess_busy(x, groups, traces[:3])
    with pytest.raises(ValueError, match="not finite"):
        excess_busy(x, groups, [*traces[:3], {"a": float("nan")}])


def test_the_busy_model_takes_slow_consumers_out_of_the_energies_and_rho() -> None:
    folds: dict[str, list[float]] = {"additive": [], "busy": []}
    cover1: list[bool] = []
    cover2: list[bool] = []
    betas = []
    for seed in range(6):
        for model in ("additive", "busy"):
            gpu = slow_chain(seed)
            res = design(gpu, seed, model, design_replicates=8 if seed % 2 else None)
            d = res.design  # type: ignore[attr-defined]
            assert d is not None and d["model"] == model
            folds[model].append(d["rho_fold"])
            if model == "busy":
                b = d["covariates"][BUSY_COVARIATE]
                betas.append((b["value"], b["se"]))
                assert d["configs"][0]["busy_excess_s"] == 0.0 and len(d["factor_busy_s"]) == d["factors"]
                assert set(d["covariates"]) == {BUSY_COVARIATE, "broken_link_j"}  # beside the links, not instead
                assert d["busy_rel_sd_pct"] == 0.0 and d["busy_reference_drift_pct"] == 0.0  # the fake repeats exactly
                assert len(d["configs"][5]["busy_s"]) == d["factors"]
                note = next(n for n in res.notes if "β·excess busy time" in n)  # type: ignore[attr-defined]
                assert "c0 + Σ e_g + κ·links + β·excess busy time" in note and "W (none in the whole step;" in note
                cover1 += coverage(res, in_step(gpu), 1.0)
                cover2 += coverage(res, in_step(gpu), 2.0)
    assert max(folds["busy"]) < 0.01 < 0.05 < min(folds["additive"])
    assert all(abs(v - 400.0) <= 3 * se + 10.0 for v, se in betas)  # the excess runs at the nodes' 400 W
    assert np.mean(cover1) >= 0.68 and np.mean(cover2) >= 0.95


def test_kernels_of_different_powers_leave_the_difference_in_rho_and_stay_covered() -> None:
    add, busy, cover2 = [], [], []
    for seed in range(6):
        for model in ("additive", "busy"):
            gpu = slow_chain(seed, spread_w=200.0)
            res = design(gpu, seed, model)
            d = res.design  # type: ignore[attr-defined]
            (busy if model == "busy" else add).append(d["rho_fold"])
            if model == "busy":
                cover2 += coverage(res, in_step(gpu), 2.0)
    assert 0.0 < float(np.mean(busy)) < 0.6 * float(np.mean(add))
    assert np.mean(cover2) >= 0.9


def test_without_a_timer_or_when_timing_fails_it_fits_links_and_says_why() -> None:
    gpu = slow_chain(1)
    res = design(gpu, 1, "busy", timer=None)
    assert res.design["model"] == "links"  # type: ignore[attr-defined]
    assert any("busy-time model was not fitted (no kernel can be timed here): links instead" in n
               for n in res.notes)  # type: ignore[attr-defined]  # fmt: skip
    calls = {"n": 0}

    def flaky(fn: Callable[[], None]) -> Mapping[str, float]:
        calls["n"] += 1
        if calls["n"] > 10:
            raise RuntimeError("CUPTI went away")
        return gpu2.busy_times(fn)

    gpu2 = slow_chain(1)
    res2 = design(gpu2, 1, "busy", timer=flaky)
    assert res2.design["model"] == "links"  # type: ignore[attr-defined]
    assert any("(kernel timing failed (RuntimeError: CUPTI went away)): links instead" in n
               for n in res2.notes)  # type: ignore[attr-defined]  # fmt: skip


def test_kernels_that_never_change_their_time_leave_nothing_to_fit() -> None:
    """Without slowdowns the kernels' busy times equal the whole step's in every configuration: Z is 0 everywhere,
    which cannot be told from the groups; the links model is fitted and the note says why."""
    gpu = FakeGraphGPU([FakeNode(f"{n.name}-{i}", n.time_s, n.power_w) for i, n in enumerate(step_nodes(4))],
                       fixed_s=FIXED_S, fixed_w=FIXED_W)  # fmt: skip
    res = design(gpu, 4, "busy")
    assert res.design["model"] == "links"  # type: ignore[attr-defined]
    assert any("busy-time model was not fitted (no configuration's kernels ran longer" in n
               for n in res.notes)  # type: ignore[attr-defined]  # fmt: skip


def test_a_prefix_design_stays_additive_and_links_is_the_default_again() -> None:
    gpu = slow_chain(2)
    res = design(gpu, 2, "busy", design_kind="prefix")
    assert res.design["model"] == "additive" and "covariates" not in res.design  # type: ignore[attr-defined]
    assert DEFAULT_DESIGN_MODEL == "links"


def test_the_report_names_the_busy_model_and_its_power() -> None:
    from archline.report.replay import design_text

    gpu = slow_chain(3)
    res = design(gpu, 3, "busy")
    d = res.design  # type: ignore[attr-defined]
    text = design_text(d)
    v = d["covariates"][BUSY_COVARIATE]
    assert "fitted as c0 + Σ e + κ·links + β·excess busy time" in text
    assert f"{v['value']:.4g} ±" in text and " W, which" in text
    assert "busy time beyond" not in design_text({**d, "model": "additive"})


def test_kernel_busy_s_sums_each_names_kernels_from_cuptis_records() -> None:
    cupti = FakeCupti()  # its device clock is a float of ~1.8e18 ns: good to a few hundred ns, so kernels of ms

    def call() -> None:
        h = cupti.host_ns
        cupti.kernel("gemm", h + 1_000_000, h + 21_000_000)
        cupti.kernel("gemm", h + 30_000_000, h + 50_000_000)
        cupti.kernel("softmax", h + 60_000_000, h + 65_000_000)

    got = kernel_busy_s(call, cupti_module=cupti, synchronize=None)
    assert got == pytest.approx({"gemm": 40e-3, "softmax": 5e-3}, rel=1e-4)
    assert not cupti.enabled  # tracing stopped
    # a second call registers no second set of callbacks and sees only its own kernels
    got2 = kernel_busy_s(lambda: cupti.kernel("gemm", cupti.host_ns, cupti.host_ns + 7_000_000), cupti_module=cupti,
                         synchronize=None)  # fmt: skip
    assert got2 == pytest.approx({"gemm": 7e-3}, rel=1e-4) and cupti.registrations == 1


def test_kernel_names_that_do_not_match_the_graphs_are_not_fitted() -> None:
    """A timer whose names are spelt otherwise than the graph's (CUPTI against cuFuncGetName): without the check,
    every name would count as always on and drive the in-step energies towards nothing. The unknown names are
    dropped, the factors' names are missing from the whole step's timing, and links is fitted, with a note."""
    gpu = slow_chain(3)

    def renamed(fn: Callable[[], None]) -> Mapping[str, float]:
        return {k + "_v2": v for k, v in gpu.busy_times(fn).items()}

    res = design(gpu, 3, "busy", timer=renamed)
    assert res.design["model"] == "links"  # type: ignore[attr-defined]
    assert any("kernel names are not in the whole step's kernel timing" in n for n in res.notes)  # type: ignore[attr-defined]


def test_the_reference_is_traced_before_and_after_the_design_and_its_drift_reported() -> None:
    """A warm-up trace is discarded, the whole step is traced again after the configurations, and the two make the
    reference; a board whose kernels slow by 2 % over the design reports that drift, and the model still holds."""
    gpu = slow_chain(4)
    calls = {"n": 0}

    def drifting(fn: Callable[[], None]) -> Mapping[str, float]:
        calls["n"] += 1
        return {k: v * (1.0 + 0.02 * calls["n"] / 200.0) for k, v in gpu.busy_times(fn).items()}

    res = design(gpu, 4, "busy", timer=drifting)
    d = res.design  # type: ignore[attr-defined]
    assert d["model"] == "busy" and 0.5 < d["busy_reference_drift_pct"] < 3.0
    # the groups' ranking (replay._ranking), the design's warm-up, every configuration, the reference again:
    # BUSY_REPLAYS replays each
    from archline.measurement.attribute.replay_busy import BUSY_REPLAYS

    assert calls["n"] == BUSY_REPLAYS * (d["configurations"] + 3)
    assert np.mean(coverage(res, in_step(gpu), 2.0)) >= 0.9


def test_a_noisy_timer_is_reported_and_stays_covered() -> None:
    """Kernel durations that scatter by 1 % per name per replay: the scatter is recorded, β stays near the nodes'
    400 W and the in-step energies stay covered."""
    cover2, betas = [], []
    for seed in range(4):
        gpu = slow_chain(seed)
        rng = np.random.default_rng(100 + seed)

        def noisy(
            fn: Callable[[], None], gpu: FakeGraphGPU = gpu, rng: np.random.Generator = rng
        ) -> Mapping[str, float]:
            return {k: v * (1.0 + float(rng.normal(0.0, 0.01))) for k, v in gpu.busy_times(fn).items()}

        res = design(gpu, seed, "busy", timer=noisy)
        d = res.design  # type: ignore[attr-defined]
        assert d["model"] == "busy" and d["busy_rel_sd_pct"] > 0.0
        betas.append(d["covariates"][BUSY_COVARIATE]["value"])
        cover2 += coverage(res, in_step(gpu), 2.0)
    assert all(300.0 < b < 480.0 for b in betas)
    assert np.mean(cover2) >= 0.9


def test_kernel_busy_s_refuses_records_without_a_valid_start_and_end() -> None:
    from archline.errors import CUPTIUnavailableError

    cupti = FakeCupti()

    def call() -> None:
        h = cupti.host_ns
        cupti.kernel("gemm", h + 1_000_000, h + 2_000_000)
        cupti.pending.append(type(cupti.pending[-1])(**{**cupti.pending[-1].__dict__, "start": 0}))

    with pytest.raises(CUPTIUnavailableError, match="1 kernel record"):
        kernel_busy_s(call, cupti_module=cupti, synchronize=None)
