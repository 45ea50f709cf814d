"""Is a replay design's per-measurement noise τ a drift in time, and would taking it out narrow the in-step energies?

    python benchmarks/design_drift.py REPLAY_DIR [REPLAY_DIR ...]

A REPLAY_DIR is a replay run directory whose ``replay.json`` holds a randomized design (halves) with replicates
(session 14 on). A design measures its configurations in the order recorded, then its replicates in the order
recorded (replay_context.run_context), so each measurement's place in that sequence is its time, to within the
spread of the measurements' lengths. Session 19 asked whether the replicates' differences, which set τ, are a slow
drift of the board (warming, clocks) rather than scatter: if so a drift term would take them out, and with them
part of the misfit that the fit now gives ρ.

Printed per design: the replicates' mean relative difference (second − first, %) and its correlation with the time
between the two (Pearson, with its two-sided p); then the design refitted three ways with the links model (additive
where no factor_nodes were recorded; a busy design is refitted with links alone, not as archline fitted it): as it
is (``d0``), and after dividing every
measurement by ``1 + a1 u`` (``d1``) or ``1 + a1 u + a2 u²`` (``d2``), u the measurement's place in the sequence
over its length, centred, the a's fitted by weighted least squares beside c0, the energies and (links) the broken
links, on every measurement as its own row (weights 1 / (σ² + (1 % E)²)). For each: ρ̂, √E[ρ²], τ̂, the reduced χ²,
the median relative in-step σ (``fold_sigma``) of the factors above 2 % of the step, and the share of the factors'
energy whose 95 % interval (1.96 σ) is within ±15 %: the design's own proxy for issue 13's figure (the run's rows
also carry the scale of the priors and the kernels' time here against there, so its figure is lower).
With several designs, a last line counts the designs whose share within ±15 % each drift fit raises, lowers or leaves
within 0.5 points of ``d0``, those at 0 % under both apart. Post hoc, on the shipped designs; it informs a rule, it
does not score one. Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
from numpy.typing import NDArray
from scipy import stats

F64 = NDArray[np.float64]
#: Relative noise added to each measurement's σ in the drift regression's weights (the replicates' scatter).
WEIGHT_REL = 0.01
#: Factors above this share of the step count in the median relative σ.
BIG_SHARE = 0.02
#: A drift fit's share within ±15 % closer than this (points) to the design's as-is share is "unchanged".
SAME_POINTS = 0.5


def load(path: Path) -> dict[str, Any]:
    """The design of one replay directory; ValueError where it has no randomized design with replicates."""
    f = path / "replay.json"
    try:
        doc = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{f}: not readable as a replay's JSON ({exc.__class__.__name__})") from None
    d = doc.get("design") if isinstance(doc, dict) else None
    if not isinstance(d, dict) or not d.get("configs"):
        raise ValueError(f"{f}: no randomized design")
    if d.get("kind", "halves") != "halves" or not d.get("repeats"):
        raise ValueError(f"{f}: not a halves design with replicates")
    return d


def sequence(d: dict[str, Any]) -> tuple[F64, F64, F64, list[tuple[int, float, float]], F64]:
    """The design's flags, energies, σ, its finite replicates (row, J, σ) and every measurement's place in time,
    configurations first, then the replicates (u, centred, over the sequence's length)."""
    cf = d["configs"]
    x = np.asarray([[float(ch == "1") for ch in c["on"]] if isinstance(c["on"], str) else c["on"] for c in cf])
    y = np.asarray([float(c["energy_j"]) for c in cf])
    s = np.asarray([float(c["sigma_j"]) for c in cf])
    if x.ndim != 2 or x.shape[0] != len(cf) or not (np.all(np.isfinite(y)) and np.all(np.isfinite(s))):
        raise ValueError("every configuration needs its on/off flags and a finite energy and σ")
    reps, places = [], []
    for k, r in enumerate(d["repeats"]):
        if not 0 <= int(r["row"]) < len(cf):
            raise ValueError(f"replicate {k} names configuration {r['row']}, not one of the design's {len(cf)}")
        if math.isfinite(float(r["energy_j"])) and math.isfinite(float(r["sigma_j"])):
            reps.append((int(r["row"]), float(r["energy_j"]), float(r["sigma_j"])))
            places.append(len(cf) + k)
    total = len(cf) + len(d["repeats"])
    t = np.r_[np.arange(len(cf), dtype=np.float64), np.asarray(places, np.float64)] / total
    return x, y, s, reps, t - t.mean()


def drift(x: F64, y: F64, s: F64, reps: list[tuple[int, float, float]], u: F64, extra: F64 | None, deg: int) -> F64:
    """The drift's coefficients a1..a_deg, fitted beside c0, the energies and ``extra`` on every measurement."""
    rows = [r for r, _, _ in reps]
    xx = np.vstack([x, x[rows]])
    yy = np.r_[y, [e for _, e, _ in reps]]
    ss = np.r_[s, [sd for _, _, sd in reps]]
    cols = [np.ones(len(yy)), *xx.T]
    if extra is not None:
        cols.append(np.r_[extra, extra[rows]])
    cols += [u**k * yy for k in range(1, deg + 1)]
    a = np.column_stack(cols)
    w = 1.0 / (ss**2 + (WEIGHT_REL * yy) ** 2)
    beta = np.linalg.solve(a.T @ (a * w[:, None]), a.T @ (w * yy))
    out: F64 = np.asarray(beta[-deg:], np.float64)
    return out


def refit(d: dict[str, Any], deg: int) -> dict[str, float]:
    """The design refitted with a drift of degree ``deg`` divided out (0: as archline fits it)."""
    from archline.measurement.attribute.replay_context import fold_sigma, link_breaks
    from archline.measurement.attribute.replay_design import Repeat, fit_design

    x, y, s, reps, u = sequence(d)
    cov = None
    if d.get("model") in ("links", "busy") and isinstance(d.get("factor_nodes"), list):
        cov = {"broken_link_j": link_breaks(x, d["factor_nodes"]).tolist()}
    a = np.zeros(0)
    if deg:
        extra = np.asarray(cov["broken_link_j"], np.float64) if cov else None
        a = drift(x, y, s, reps, u, extra, deg)
        fac = 1.0 + sum(a[k - 1] * u**k for k in range(1, deg + 1))
        n = len(y)
        y, s = y / fac[:n], s / fac[:n]
        reps = [(r, e / fac[n + i], sd / fac[n + i]) for i, (r, e, sd) in enumerate(reps)]
    fit = fit_design(x, y, s, [Repeat(r, e, sd) for r, e, sd in reps], cov)
    e = np.asarray(fit.energy_j)
    typical = float(np.mean(e**2))
    se_j, p_on = fit.energy_se_j, float(d.get("p_on", 0.5))
    sd = np.asarray(
        [fold_sigma(float(v), float(se), fit.rho_fold, typical, p_on) for v, se in zip(e, se_j, strict=True)]
    )
    pos = e > 0
    big = e > BIG_SHARE * e[pos].sum()
    tight = pos & (1.96 * sd <= 0.15 * np.abs(e))
    return {
        "rho": fit.rho, "rho_fold": fit.rho_fold, "tau": fit.tau, "chi2_red": fit.chi2_red,
        "median_rel_sigma": float(np.median(sd[big] / e[big])) if big.any() else math.nan,
        "share_within_15": float(e[tight].sum() / e[pos].sum()) if pos.any() else math.nan,
        **{f"a{k + 1}": float(v) for k, v in enumerate(a)},
    }  # fmt: skip


def replicate_drift(d: dict[str, Any]) -> tuple[float, float, float]:
    """The replicates' mean relative difference (second − first), its correlation with the time between, and the
    correlation's two-sided p."""
    _, y, _, reps, u = sequence(d)
    n = len(y)
    diff = np.asarray([(e - y[r]) / y[r] for r, e, _ in reps])
    gap = np.asarray([u[n + i] - u[r] for i, (r, _, _) in enumerate(reps)])
    if len(diff) > 2 and np.std(diff) > 0 and np.std(gap) > 0:
        res = stats.pearsonr(gap, diff)
        corr, p = float(res.statistic), float(res.pvalue)
    else:
        corr = p = math.nan
    return float(np.mean(diff)), corr, p


def lines(path: Path, shares: list[tuple[float, ...]] | None = None) -> list[str]:
    """The design's lines; each fit's share within ±15 % is appended to ``shares`` (d0, d1, d2)."""
    d = load(path)
    mean, corr, p = replicate_drift(d)
    out = [f"{path}: {len(d['repeats'])} replicates, second − first {100 * mean:+.2f} % on average, "
           f"correlation with the time between {corr:+.2f} (p = {p:.2g})"]  # fmt: skip
    got = []
    for deg in (0, 1, 2):
        f = refit(d, deg)
        got.append(100 * f["share_within_15"])
        a = " ".join(f"a{k}={100 * f[f'a{k}']:+.2f}%" for k in range(1, deg + 1))
        out.append(
            f"  d{deg}: ρ̂ {100 * f['rho']:.1f} %, √E[ρ²] {100 * f['rho_fold']:.2f} %, τ̂ {100 * f['tau']:.2f} %, "
            f"χ²/dof {f['chi2_red']:.1f}, median σ/e {100 * f['median_rel_sigma']:.1f} %, within ±15 % "
            f"{100 * f['share_within_15']:.1f} %" + (f"; {a}" if a else "")
        )
    if shares is not None:
        shares.append(tuple(got))
    return out


def tally(shares: list[tuple[float, ...]]) -> str:
    """How each drift fit moved the share within ±15 % against the design as it is, over the designs."""
    parts = []
    for deg in (1, 2):
        zero = sum(1 for s in shares if s[0] == 0.0 and s[deg] == 0.0)
        up = sum(1 for s in shares if s[deg] > s[0] + SAME_POINTS)
        down = sum(1 for s in shares if s[deg] < s[0] - SAME_POINTS)
        parts.append(f"d{deg} raises {up}, lowers {down}, leaves {len(shares) - up - down - zero} within "
                     f"{SAME_POINTS:g} points and {zero} at 0 %")  # fmt: skip
    return f"{len(shares)} designs, the share within ±15 % against d0: " + "; ".join(parts)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"design_drift: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("replay_dir", type=Path, nargs="+")
    try:
        a = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else 2
    shares: list[tuple[float, ...]] = []
    for path in a.replay_dir:
        try:
            print("\n".join(lines(path, shares)), flush=True)
        except (ValueError, KeyError, TypeError, IndexError, np.linalg.LinAlgError) as exc:
            why = str(exc) if isinstance(exc, ValueError) else f"{exc.__class__.__name__}: {exc}"
            print(f"design_drift: {path}: {why}" if str(path) not in why else f"design_drift: {why}", file=sys.stderr)
            return 2
    if len(shares) > 1:
        print(tally(shares))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
