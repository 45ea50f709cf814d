"""The roofline section's tables: the shape of Choi et al.'s Tables II–IV, plus fit, power-cap and held-out tables."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from archline.model.balance import Balances, balances_from_params
from archline.model.reference import GTX_580, I7_950, ReferencePlatform
from archline.model.result import RooflineModel

__all__ = ["Table", "roofline_tables"]

_DASH = "—"


@dataclass(frozen=True)
class Table:
    """A titled table of already-formatted cells, rendered to both Markdown and HTML."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""


# --------------------------------------------------------------------------- formatting


def _g(v: float, scale: float = 1.0, digits: int = 3) -> str:
    return _DASH if v is None or not math.isfinite(v) else f"{v * scale:.{digits}g}"


def _pm(v: float, se: float | None, scale: float = 1.0) -> str:
    if se is None or not math.isfinite(se) or not math.isfinite(v):
        return _g(v, scale)
    return f"{v * scale:.3g} ± {se * scale:.2g}"


def _pct(v: float) -> str:
    return _DASH if not math.isfinite(v) else f"{100 * v:+.1f} %"


# Balance rows of Table II: (field, label, unit, scale to the unit).
_BALANCE_ROWS: tuple[tuple[str, str, str, float], ...] = (
    ("tau_flop_s", "τ_flop", "ps/flop", 1e12),
    ("tau_mem_s_per_b", "τ_mem", "ps/B", 1e12),
    ("b_tau", "B_τ = τ_mem/τ_flop", "flop/B", 1.0),
    ("eps_flop_j", "ε_flop", "pJ/flop", 1e12),
    ("eps_mem_j_per_b", "ε_mem", "pJ/B", 1e12),
    ("b_eps", "B_ε = ε_mem/ε_flop", "flop/B", 1.0),
    ("pi0_w", "π0", "W", 1.0),
    ("eps0_j", "ε_0 = π0·τ_flop", "pJ/flop", 1e12),
    ("eps_hat_flop_j", "ε̂_flop = ε_flop + ε_0", "pJ/flop", 1e12),
    ("eta_flop", "η_flop = ε_flop/ε̂_flop", "", 1.0),
    ("pi_flop_w", "π_flop = ε_flop/τ_flop", "W", 1.0),
    ("b_eps_hat_point", "B̂_ε point (B̂_ε(I) = I)", "flop/B", 1.0),
    ("balance_gap", "balance gap B_ε/B_τ", "", 1.0),
    ("effective_gap", "effective gap B̂_ε/B_τ", "", 1.0),
    ("max_power_w", "uncapped power at B_τ", "W", 1.0),
)


def _ref_balances(ref: ReferencePlatform, precisions: Sequence[str]) -> dict[str, Balances]:
    return {p: balances_from_params(p, ref.params(p)) for p in precisions}


# --------------------------------------------------------------------------- tables


def roofline_tables(model: RooflineModel) -> list[Table]:
    """The section's tables, in the shape of Choi et al.'s Tables III, IV and II, then fit, cap and held-out."""
    precs = list(model.parameters.precisions)
    refs = {r.name.split(" (")[0]: _ref_balances(r, precs) for r in (GTX_580, I7_950)}
    dev = model.device or "measured GPU"
    tables = [_platforms(model, dev), _coefficients(model, dev), _balances(model, dev, refs), _fit_quality(model)]
    tables.append(_cap_table(model))
    if model.heldout is not None:
        tables.append(_heldout_table(model))
    if model.counted is not None:
        tables += [_components_table(model), _counted_table(model)]
    return tables


_COMPONENT_LABELS = {
    "fp32_flop": ("FP32 flop, random operands", "pJ/flop"),
    "fp64_flop": ("FP64 flop, random operands", "pJ/flop"),
    "tensor_fp64_flop": ("FP64 tensor-core flop (DMMA)", "pJ/flop"),
    "l2_byte": ("L2 byte (beyond DRAM traffic)", "pJ/B"),
    "shared_byte": ("shared-memory byte", "pJ/B"),
    "thread_inst": ("other thread instruction (integer add)", "pJ"),
}


def _components_table(model: RooflineModel) -> Table:
    c = model.counted
    assert c is not None
    p0 = model.parameters.params(model.parameters.precisions[0])
    quiet = {"fp32_flop": p0.eps_flop_j}
    if "double" in model.parameters.precisions:
        quiet["fp64_flop"] = model.parameters.params("double").eps_flop_j
    rows = []
    for key, (label, unit) in _COMPONENT_LABELS.items():
        v = c.components.get(key)
        q = quiet.get(key)
        rows.append(
            (
                label,
                f"{_g(v, 1e12)} {unit}",
                f"{_g(q, 1e12)} pJ/flop" if q is not None else "",
                c.components.sources.get(key, ""),
            )
        )
    return Table(
        "Component energies for the counted model (above π0, from this run's microbenchmarks)",
        ("component", "ε", "sweep's ε (quiet operands)", "from"),
        tuple(rows),
        "The sweep's FMAs multiply by −1 and toggle few multiplier bits; real kernels multiply random data. "
        "ε = (E − π0·T)/count with the fitted π0.",
    )


def _counted_table(model: RooflineModel) -> Table:
    c = model.counted
    assert c is not None
    keys: tuple[str, ...] = ("constant", "dram", "fp32", "fp64", "tensor_fp64", "l2", "shared")
    if c.with_instructions:
        keys += ("instructions",)
    rows = tuple(
        (
            p.name,
            _g(p.time_s, 1e3, 4),
            _g(p.dram_bytes),
            _g(p.l2_bytes),
            _g(p.shared_bytes),
            *(_g(p.terms.get(k, 0.0), 1.0, 3) for k in keys),
            _g(p.energy_j, 1.0, 4) + (" (cap)" if p.cap_active else ""),
            _g(p.measured_energy_j, 1.0, 4),
            _pct(p.error),
        )
        for p in c.predictions
    )
    met = {True: "met", False: "missed"}
    note = (
        f"Median |error| {_pct(c.median_abs_error).lstrip('+')} (target ≤ {100 * c.target:.0f} %: "
        f"{met[c.target_met]}); eq. (9) alone with ncu's W and Q: "
        f"{_pct(c.eq9_ncu_median_abs_error).lstrip('+')}. Counts from Nsight Compute (one invocation each); "
        "'(cap)': the uncapped sum exceeds the power limit × T, so E = P_limit·T."
    )
    if c.notes:
        note += " " + " ".join(f"Note: {n}." for n in c.notes)
    return Table(
        "Held-out kernels: counted prediction (ncu counts × component energies, Choi §V-C extended)",
        ("kernel", "T ms", "DRAM B", "L2 B", "shared B", *(f"{k} J" for k in keys), "E pred J", "E J", "error"),
        rows,
        note,
    )


def _platforms(model: RooflineModel, dev: str) -> Table:
    tc, pk = model.time_costs, model.peaks
    run_peak = " / ".join(_g(pk.peak_for(p), 1e-9, 4) for p in model.parameters.precisions)
    sweep_peak = " / ".join(_g(1.0 / tc.tau_flop_s[p].value, 1e-9, 4) for p in model.parameters.precisions)
    rows = [
        (
            f"{dev} (peaks run)",
            run_peak,
            _g(pk.copy_bytes_per_s, 1e-9, 4),
            _g(pk.power_limit_w),
            _g(model.idle_power_w),
        ),
        (f"{dev} (sweep ends)", sweep_peak, _g(1.0 / tc.tau_mem_s_per_b.value, 1e-9, 4), _DASH, _DASH),
    ]
    for ref in (GTX_580, I7_950):
        peaks = " / ".join(_g(ref.peak_flops_per_s[p], 1e-9, 6) for p in model.parameters.precisions)
        rows.append(
            (ref.name, peaks, _g(ref.bandwidth_bytes_per_s, 1e-9, 4), _g(ref.power_limit_w), _g(ref.idle_power_w))
        )
    prec = " / ".join(model.parameters.precisions)
    return Table(
        "Platforms (shape of Choi et al., Table III)",
        ("platform", f"peak GFLOP/s ({prec})", "bandwidth GB/s", "power limit W", "idle W"),
        tuple(rows),
        "Sweep ends: 1/τ measured at the compute- and memory-bound ends of the sweep. "
        "Reference rows are quoted from the paper (Table III; GTX 580 limit from §V-B, idle from §V-A).",
    )


def _coefficients(model: RooflineModel, dev: str) -> Table:
    est = model.fit.estimates
    b = model.balances
    refs = (GTX_580, I7_950)

    def ref_cells(get: Callable[[ReferencePlatform], float], scale: float) -> tuple[str, ...]:
        return tuple(_g(get(r), scale) for r in refs)

    rows: list[tuple[str, ...]] = []
    e_s = est["eps_s_j"]
    rows.append(
        ("ε_s", "pJ/flop", _pm(e_s.value, e_s.stderr, 1e12), *ref_cells(lambda r: r.eps_flop_j["single"], 1e12))
    )
    if "double" in b:
        e_d = b["double"]
        rows.append(
            (
                "ε_d",
                "pJ/flop",
                _pm(e_d.eps_flop_j, e_d.stderr.get("eps_flop_j"), 1e12),
                *ref_cells(lambda r: r.eps_flop_j["double"], 1e12),
            )
        )
        d = est["delta_d_j"]
        rows.append(
            (
                "Δ_d = ε_d − ε_s",
                "pJ/flop",
                _pm(d.value, d.stderr, 1e12),
                *ref_cells(lambda r: r.eps_flop_j["double"] - r.eps_flop_j["single"], 1e12),
            )
        )
    m = est["eps_mem_j_per_b"]
    rows.append(("ε_mem", "pJ/B", _pm(m.value, m.stderr, 1e12), *ref_cells(lambda r: r.eps_mem_j_per_b, 1e12)))
    pi = est["pi0_w"]
    rows.append(("π0", "W", _pm(pi.value, pi.stderr), *ref_cells(lambda r: r.pi0_w, 1.0)))
    ci = f"{100 * model.fit.confidence:.0f} %"
    labels = {"eps_s_j": "ε_s", "eps_mem_j_per_b": "ε_mem", "pi0_w": "π0", "delta_d_j": "Δ_d"}
    for k, e in est.items():
        s = 1.0 if k == "pi0_w" else 1e12
        rows.append((f"{ci} CI of {labels[k]}", "", f"[{_g(e.ci_low, s)}, {_g(e.ci_high, s)}]", _DASH, _DASH))
    return Table(
        "Fitted energy coefficients, eq. (9) (shape of Choi et al., Table IV)",
        ("coefficient", "unit", dev, "GTX 580 (paper)", "i7-950 (paper)"),
        tuple(rows),
        "Values ± 1σ. The GTX 580 and i7-950 columns quote the paper's Table IV (Δ_d computed as ε_d − ε_s).",
    )


def _balances(model: RooflineModel, dev: str, refs: dict[str, dict[str, Balances]]) -> Table:
    precs = list(model.parameters.precisions)
    header = ["quantity", "unit"] + [f"{dev} {p}" for p in precs]
    for name in refs:
        header += [f"{name} {p}" for p in precs]
    rows: list[tuple[str, ...]] = []
    for fld, label, unit, scale in _BALANCE_ROWS:
        cells = [label, unit]
        cells += [_pm(getattr(model.balances[p], fld), model.balances[p].stderr.get(fld), scale) for p in precs]
        for rb in refs.values():
            cells += [_g(getattr(rb[p], fld), scale) for p in precs]
        rows.append(tuple(cells))
    verdict = ["race-to-halt holds", ""] + ["yes" if model.balances[p].race_to_halt else "no" for p in precs]
    for rb in refs.values():
        verdict += ["yes" if rb[p].race_to_halt else "no" for p in precs]
    rows.append(tuple(verdict))
    return Table(
        "Model parameters and derived balances (shape of Choi et al., Table II)",
        tuple(header),
        tuple(rows),
        "Measured columns ± 1σ (delta method over the fit's covariance and the measured τ). Reference columns "
        "are computed here from the paper's Tables III and IV, as the paper does (τ from peaks).",
    )


def _fit_quality(model: RooflineModel) -> Table:
    f, tc = model.fit, model.time_costs
    how = "weighted by 1/σ² of E/W" if f.weighting == "uncertainty" else "ordinary least squares"
    rows = (
        ("rows fitted", str(f.n_rows)),
        ("degrees of freedom", str(f.dof)),
        ("weighting", how),
        ("R² of E/W (adjusted)", f"{f.r2:.5f} ({f.r2_adjusted:.5f})"),
        ("RMS relative residual of E", _pct(f.rms_rel_residual).lstrip("+")),
        (
            "intervals",
            f"{100 * f.confidence:.0f} % two-sided, Student t with {f.dof} dof, covariance × residual variance",
        ),
        ("rows for τ_mem (memory-bound end)", str(tc.memory_bound_rows)),
        *((f"rows for τ_flop {p} (compute-bound end)", str(n)) for p, n in tc.compute_bound_rows.items()),
        *((f"1/τ_flop {p} / peaks run", _g(v)) for p, v in tc.peak_fraction.items()),
        ("1/τ_mem / copy bandwidth", _g(tc.bandwidth_fraction)),
    )
    return Table("Fit of eq. (9) and measured time costs", ("item", "value"), rows)


def _cap_table(model: RooflineModel) -> Table:
    c = model.capped
    rows = tuple(
        (
            r.precision,
            _g(r.intensity),
            _g(r.time_s, 1e3, 4),
            _g(r.time_uncapped_s, 1e3, 4),
            _g(r.time_capped_s, 1e3, 4),
            _g(r.power_w, 1.0, 4),
            _g(r.power_uncapped_w, 1.0, 4),
            _g(r.power_capped_w, 1.0, 4),
            _g(r.sm_clock_mhz, 1.0, 4),
            "yes" if r.cap_active else "no",
        )
        for r in c.rows
    )
    rows += (
        (
            "RMS rel. error",
            "",
            "",
            _pct(c.rms_time_uncapped).lstrip("+"),
            _pct(c.rms_time_capped).lstrip("+"),
            "",
            _pct(c.rms_power_uncapped).lstrip("+"),
            _pct(c.rms_power_capped).lstrip("+"),
            "",
            "",
        ),
    )
    if c.capped_better is None:
        note = f"No sweep point lies within a factor {c.window:g} of B_τ."
    else:
        word = "better" if c.capped_better else "no better"
        note = (
            f"Points within a factor {c.window:g} of B_τ; power limit {c.power_limit_w:.0f} W. The cap-aware model "
            f"explains them {word} than the uncapped one (time RMS {_pct(c.rms_time_capped).lstrip('+')} vs "
            f"{_pct(c.rms_time_uncapped).lstrip('+')}, power RMS {_pct(c.rms_power_capped).lstrip('+')} vs "
            f"{_pct(c.rms_power_uncapped).lstrip('+')}); the cap binds on {c.capped_rows} of {len(c.rows)} points."
        )
    return Table(
        "Power cap: measured points near B_τ against the uncapped and cap-aware models",
        (
            "precision",
            "I flop/B",
            "T ms",
            "T uncapped",
            "T capped",
            "P W",
            "P uncapped",
            "P capped",
            "SM MHz",
            "capped",
        ),
        rows,
        note,
    )


def _heldout_table(model: RooflineModel) -> Table:
    h = model.heldout
    assert h is not None
    rows = tuple(
        (
            p.name + (" (ε_cache calibration)" if p.calibration else ""),
            p.precision,
            _g(p.flops),
            _g(p.bytes),
            _g(p.intensity),
            _g(p.measured_time_s, 1e3, 4),
            _g(p.time_s, 1e3, 4),
            _g(p.measured_energy_j, 1.0, 4),
            _pm(p.energy_at_measured_time_j, p.energy_at_measured_time_sigma_j),
            _pct(p.energy_error_at_measured_time),
            _pm(p.energy_j, p.energy_sigma_j),
            _pct(p.energy_error),
        )
        for p in h.predictions
    )
    met = {True: "met", False: "missed"}
    note = (
        f"Median |error| of E: {_pct(h.median_abs_error_at_measured_time).lstrip('+')} with the measured time "
        f"(target ≤ {100 * h.target:.0f} %: {met[h.target_met_at_measured_time]}), "
        f"{_pct(h.median_abs_error_predicted_time).lstrip('+')} with the predicted time "
        f"({met[h.target_met_predicted_time]}); median |error| of T: {_pct(h.median_abs_time_error).lstrip('+')}."
    )
    if h.eps_cache_j_per_b:
        note += f" Cache-energy term (§V-C) ε_cache = {h.eps_cache_j_per_b * 1e12:.3g} pJ/B."
    return Table(
        "Held-out kernels: predicted against measured energy",
        (
            "kernel",
            "precision",
            "W flop",
            "Q B",
            "I flop/B",
            "T ms",
            "T pred ms",
            "E J",
            "E pred (T meas) J",
            "error",
            "E pred (T pred) J",
            "error",
        ),
        rows,
        note,
    )
