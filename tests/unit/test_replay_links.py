"""The design's "links" model: a kernel run without the one before it (a broken producer→consumer link) costs
more; the whole step breaks no link, so that cost is fitted as κ per link beside the energies
(replay_context.link_breaks, replay_design.fit_design's covariates)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from archline.measurement.attribute.replay import replay_energy
from archline.measurement.attribute.replay_context import link_breaks
from archline.measurement.attribute.replay_design import fit_design
from tests.helpers.fake_graph import FakeGraphGPU, FakeNode, NoisyMeasure
from tests.unit.test_replay_context import FIXED_S, FIXED_W, coverage, in_step, step_nodes

#: What a broken link costs the consumer (J): a read from memory instead of the L2.
LINK_J = 0.04


def chain_step(seed: int) -> FakeGraphGPU:
    """``step_nodes(seed)`` with every node its own group, each drawing LINK_J more while the node before it is off."""
    base = step_nodes(seed)
    nodes, inter = [], {}
    for i, n in enumerate(base):
        a = LINK_J / (n.time_s * n.power_w) if i else 0.0  # the first node has no producer
        nodes.append(FakeNode(f"{n.name}-{i}", n.time_s, n.power_w * (1.0 + a)))
        if i:
            inter[i] = (i - 1, 1.0 / (1.0 + a) - 1.0)  # with its producer on it draws its own power
    return FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W, interactions=inter)


def test_link_breaks_counts_consumers_run_without_their_producer() -> None:
    cols = [[0, 3], [1], [2, 4]]  # capture order 0 1 2 3 4: factors 0 1 2 0 2
    x = np.array([[1, 1, 1], [0, 0, 0], [0, 1, 1], [1, 0, 1], [1, 1, 0]], float)
    # links (0→1), (1→2), (2→0), (0→2); broken where the first is off and the second on
    assert link_breaks(x, cols).tolist() == [0.0, 0.0, 2.0, 1.0, 1.0]
    assert link_breaks(x[:, :1], [[0, 1]]).tolist() == [0.0] * 5  # one factor: no link between factors


def test_the_links_model_takes_the_broken_links_out_of_rho_and_the_energies() -> None:
    folds: dict[str, list[float]] = {"additive": [], "links": []}
    errs: dict[str, list[float]] = {"additive": [], "links": []}
    cover1: list[bool] = []
    cover2: list[bool] = []
    kappas = []
    for seed in range(6):
        for model in ("additive", "links"):
            gpu = chain_step(seed)
            res = replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=seed), gpu.clock, top=2, marginal=False,
                                design=60, design_seed=seed, design_model=model,
                                design_replicates=8 if seed % 2 else None)  # fmt: skip
            d = res.design
            assert d is not None and d["model"] == model
            folds[model].append(d["rho_fold"])
            errs[model].append(abs(d["all_on_error_pct"]))
            if model == "links":
                k = d["covariates"]["broken_link_j"]
                kappas.append((k["value"], k["se"]))
                assert any("broken producer→consumer link" in n for n in res.notes)
                cover1 += coverage(res, in_step(gpu), 1.0)
                cover2 += coverage(res, in_step(gpu), 2.0)
            else:
                assert "covariates" not in d
    assert max(folds["links"]) < 0.01 < min(folds["additive"])
    assert float(np.mean(errs["links"])) < 0.5 * float(np.mean(errs["additive"]))
    assert all(abs(v - LINK_J) <= 3 * se + 0.05 * LINK_J for v, se in kappas)
    assert np.mean(cover1) >= 0.68 and np.mean(cover2) >= 0.95


def test_a_prefix_design_breaks_no_link_and_stays_additive() -> None:
    gpu = chain_step(1)
    res = replay_energy(gpu, NoisyMeasure(gpu, seed=1), gpu.clock, top=2, marginal=False, design=40, design_seed=1,
                        design_kind="prefix", design_model="links")  # fmt: skip
    assert res.design is not None and res.design["model"] == "additive" and "covariates" not in res.design


def test_covariates_must_vanish_in_the_whole_step_and_unknown_models_are_refused() -> None:
    x = np.vstack([np.ones(3), np.zeros(3), np.eye(3), 1 - np.eye(3)])
    y, s = list(1.0 + x.sum(axis=1)), [0.01] * len(x)
    with pytest.raises(ValueError, match="0 in the whole step"):
        fit_design(x, y, s, covariates={"b": [1.0] + [0.0] * (len(x) - 1)})
    fit = fit_design(x, y, s, covariates={"b": [0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0]})
    assert set(fit.covariates) == {"b"} and math.isfinite(fit.covariates["b"][0])
    gpu = chain_step(0)
    with pytest.raises(ValueError, match="design model"):
        replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, design=40, design_model="curved")


def test_the_links_model_falls_back_to_additive_where_links_cannot_be_told_from_the_groups() -> None:
    """One switchable group: no link between factors, so no covariate; the design is fitted as additive, with a note."""
    gpu = FakeGraphGPU([FakeNode("only", 0.002, 400.0)] * 3, fixed_s=FIXED_S, fixed_w=FIXED_W)
    res = replay_energy(gpu, NoisyMeasure(gpu, seed=2), gpu.clock, top=1, marginal=False, design=20, design_seed=2,
                        design_model="links")  # fmt: skip
    assert res.design is not None and res.design["model"] == "additive"
    assert any("fitted as additive" in n for n in res.notes)


def test_covariates_stay_out_of_the_energies_and_of_the_steps_sum() -> None:
    """With replicates and the links covariate: Σ e + c0 is the whole step's prediction without κ, and each energy's σ
    is the fit's own (an independent weighted least squares, scaled by the reduced χ² as fit_design does)."""
    from archline.measurement.attribute.replay_design import Repeat

    rng = np.random.default_rng(5)
    cols = [[g, g + 8] for g in range(8)]
    x = np.vstack([np.ones(8), np.zeros(8), (rng.random((38, 8)) < 0.5).astype(float)])
    b = link_breaks(x, cols)
    e = rng.uniform(0.1, 0.4, 8)
    y = 0.05 + x @ e + 0.02 * b + rng.normal(0, 2e-3, len(x))
    s = np.full(len(x), 2e-3)
    fit = fit_design(x, list(y), list(s), [Repeat(0, float(y[0]) + 1e-3, 2e-3)], {"broken_link_j": b.tolist()})
    assert fit.sum_j == pytest.approx(fit.c0_j + sum(fit.energy_j), rel=1e-12)
    assert fit.covariates["broken_link_j"][0] == pytest.approx(0.02, abs=4 * fit.covariates["broken_link_j"][1])
    y0 = y.copy()
    y0[0] = (y[0] + y[0] + 1e-3) / 2  # the whole step: the mean of its two measurements
    s0 = s.copy()
    s0[0] = math.hypot(2e-3, 2e-3) / 2
    a = np.hstack([np.ones((len(x), 1)), x, b[:, None]])
    w = 1 / s0**2
    cov = np.linalg.inv(a.T @ (a * w[:, None]))
    beta = cov @ (a.T @ (w * y0))
    chi2 = float(np.sum(w * (y0 - a @ beta) ** 2)) / (len(x) - a.shape[1])
    se = np.sqrt(np.diag(cov) * max(1.0, chi2))
    assert np.allclose(fit.energy_j, beta[1:9], rtol=1e-9) and np.allclose(fit.energy_se_j, se[1:9], rtol=1e-9)
    ones = np.r_[np.ones(9), 0.0]
    assert fit.sum_se_j == pytest.approx(math.sqrt(float(ones @ cov @ ones) * max(1.0, chi2)), rel=1e-9)


def test_the_report_names_the_links_model_and_its_cost() -> None:
    from archline.report.replay import design_text

    gpu = chain_step(2)
    res = replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=2), gpu.clock, top=2, marginal=False, design=60,
                        design_seed=2, design_model="links")  # fmt: skip
    assert res.design is not None
    text = design_text(res.design)
    k = res.design["covariates"]["broken_link_j"]
    assert "cost per broken producer→consumer link" in text and f"{1e3 * k['value']:.3g} ±" in text
    assert "fitted as c0 + Σ e + κ·links" in text and any("c0 + Σ e_g + κ·links" in n for n in res.notes)
    assert "broken producer" not in design_text({**res.design, "model": "additive"})
