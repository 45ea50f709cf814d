"""Graph replay by a randomized design: every group's energy inside the step ("context"), the fixed cost c0, ρ.

An isolated replay (only one group enabled) carries the whole replay's fixed cost c0 (graph
launch, synchronisation, the idle power over them) and runs the group without its neighbours.
Here every measurable group is a factor: each configuration enables each factor with
probability ½ (balanced, seeded; replay_design.py), plus the whole step and the fixed cost
alone (only the nodes enabled in every replay). Each configuration is one measurement; the
additive fit gives each group's energy per step in the step's company and c0, and ρ bounds
how much a group's energy depends on its neighbours.

Each row's ``context_sigma_j`` is √(se² + ρ_f²·(e²/p + p·⟨e²⟩/(1 − p)²)), ⟨e²⟩ the mean of the
factors' squared energies, p the share of configurations each factor is on in, and ρ_f² the mean of ρ²
over ρ's likelihood (flat prior; until session 12 the 95 % bound ρ_up, which folded into a 95 % interval
counted ρ's uncertainty twice: on the fake step below it covered 0.98 at 1.96 σ, ρ_f 0.96); at p = ½
that is √(se² + 2·ρ_f²·(e² + ⟨e²⟩)). Why: take a pairwise interaction, group g drawing r·e_g more while
one other group is on. The fit's main effects absorb a share p of it, so g's estimate misses
(1 − p)·r·e_g of its own in-step energy and carries p·r·e_k of the interaction of a group k that
g's presence changes (of a typical group's size: ⟨e²⟩); the part left in the residuals,
(x_g − p)(x_h − p)·r·e_g, has variance p²(1 − p)²·r²·e_g², so the residuals' ρ² = p(1 − p)²·r².
Putting r in terms of ρ gives the fold. At p = ½ the own term alone covered the in-step energies
of simulated steps with ±10 % pairwise interactions at 1 σ / 2 σ in 0.55 / 0.88 of the cases, with
⟨e²⟩ in 0.78 / 0.97 (docs/data/fold_coverage.txt); at p = 0.85 the p = ½ fold covered 0.49 / 0.78
(a higher p shrinks ρ, not the interactions: tests/unit/test_replay_top_choice.py). A prefix design
folds as at p = ½.
``Σ e + c0`` is checked against the whole step, and the whole step's own configuration
against the fit's prediction from the others.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from archline.core.readings import Clock
from archline.hw.graph_nodes import SwitchError
from archline.measurement.attribute.replay_busy import BUSY_COVARIATE, BusyTimings
from archline.measurement.attribute.replay_design import (
    MIN_RESIDUAL_DOF,
    TAU_STEP,
    DesignFit,
    Repeat,
    draw_design,
    fit_design,
)
from archline.measurement.attribute.replay_result import FIXED, LUMPED, PINNED, REST, ReplayRow
from archline.measurement.attribute.replay_stats import Energy

Array = np.ndarray[Any, np.dtype[np.float64]]

__all__ = [
    "AUTO_MIN",
    "DEFAULT_DESIGN_MODEL",
    "DESIGN_MODELS",
    "ContextResult",
    "check_design",
    "check_replicates",
    "context_rows",
    "design_size",
    "fold_sigma",
    "fold_typical",
    "link_breaks",
    "prefix_rows",
    "replicate_count",
    "run_context",
    "set_step",
]

#: ``design="auto"``: three configurations per factor, at least this many.
AUTO_MIN = 40
#: The fewest configurations a design may ask for: c0, one factor and the residual degrees of freedom.
MIN_CONFIGS = 2 + MIN_RESIDUAL_DOF
#: How ρ is folded into each energy's σ at p = ½ (module docstring); runs before session 12 folded ρ_up, the 95 %
#: bound, and recorded "rho_up" in its place.
FOLD = "context_sigma_j = sqrt(se^2 + 2 rho_fold^2 (e^2 + mean e^2)), rho_fold^2 = E[rho^2] over its likelihood"
#: The same for a share p of configurations on (FOLD at p = ½).
FOLD_P = (
    "context_sigma_j = sqrt(se^2 + rho_fold^2 (e^2 / p + p mean e^2 / (1 - p)^2)), p = {p:g}, "
    "rho_fold^2 = E[rho^2] over its likelihood"
)
#: The same where the dependence scales as |e|^(α/2) (replay_design.interaction_load; refold_replay.py --alpha).
FOLD_ALPHA = (
    "context_sigma_j = sqrt(se^2 + rho_fold^2 e_rms^(2 - a) (|e|^a / p + p mean |e|^a / (1 - p)^2)), a = {a:g}, "
    "p = {p:g}, e_rms the factors' RMS energy, rho_fold^2 = E[rho^2] over its likelihood"
)


def fold_sigma(
    e: float, se: float, rho: float, typical: float, p_on: float = 0.5, alpha: float = 2.0, e_rms: float = 1.0
) -> float:
    """A design's in-step energy's σ with the neighbour dependence folded in (module docstring): ``typical`` is
    ⟨e²⟩, ``p_on`` the share of configurations each factor is on in. Where the dependence scales as |e|^(α/2)
    (replay_design.interaction_load; ``alpha`` ≠ 2), e² becomes |e|^α·e_rms^(2−α) throughout, ``typical`` being
    ⟨|e|^α⟩ then (:func:`fold_typical`)."""
    scale = 1.0 if alpha == 2.0 else e_rms ** (2.0 - alpha)
    return math.sqrt(se**2 + rho**2 * scale * (abs(e) ** alpha / p_on + p_on * typical / (1.0 - p_on) ** 2))


def fold_typical(energies: Sequence[float], alpha: float = 2.0) -> tuple[float, float]:
    """(⟨|e|^α⟩, e_rms) of the design's factors' energies, for :func:`fold_sigma` (NaN, NaN without any)."""
    es = [abs(v) for v in energies if math.isfinite(v)]
    if not es:
        return math.nan, math.nan
    return sum(v**alpha for v in es) / len(es), math.sqrt(sum(v * v for v in es) / len(es))


#: ``replicates="auto"``: this share of a design's measurements are second measurements of its configurations.
AUTO_REPLICATE_SHARE = 0.2
#: ``replicates="auto"`` measures at least this many configurations twice.
AUTO_REPLICATES_MIN = 8


#: The design models: ``additive``, E = c0 + Σ x_g e_g; ``links`` (session 14), plus κ·B with B the configuration's
#: broken producer→consumer links (:func:`link_breaks`); ``busy`` (session 17), plus β·Z with Z the configuration's
#: kernel busy time beyond the same kernels' in the whole step (replay_busy.py). A halves design only.
DESIGN_MODELS = ("additive", "links", "busy")
#: The design model of ``archline replay`` and ``archline.replay``: ``links`` (sessions 14–16, and again since
#: session 18); ``busy`` was the default in session 17 only: held out on H100 GPU-c7661d05 it fitted the transformer's
#: design no better than links refitted on the same configurations (√E[ρ²] 4.30 % against 4.41 %) and its timings
#: cost a tenth of the design's configurations (docs/replay.md "Session 18").
DEFAULT_DESIGN_MODEL = "links"
#: Each covariate's term in the fitted formula (notes and reports).
COVARIATE_TERM = {"broken_link_j": " + κ·links", "excess_busy_w": " + β·excess busy time"}


def link_breaks(x: Array, cols: Sequence[Sequence[int]]) -> Array:
    """Each configuration's broken links: among the factors' nodes in capture order, the pairs of consecutive nodes
    of different factors whose first is off and second on (a consumer that runs without the kernel before it, so
    it reads what that kernel did not write this time, from memory rather than the L2). 0 in the whole step and in
    the fixed cost's configuration. ``x``: on/off flags per factor; ``cols``: each factor's node indices. Nodes
    that are not factors (the base: memsets, pinned groups) are skipped, so a chain A → memset → B counts as a link
    A → B."""
    owner = {int(i): g for g, idx in enumerate(cols) for i in idx}
    order = sorted(owner)
    pairs = [(owner[a], owner[b]) for a, b in itertools.pairwise(order) if owner[a] != owner[b]]
    if not pairs:
        return np.zeros(x.shape[0])
    first = np.array([p for p, _ in pairs])
    then = np.array([c for _, c in pairs])
    return np.asarray(((1.0 - x[:, first]) * x[:, then]).sum(axis=1), np.float64)


def check_replicates(replicates: int | str | None) -> None:
    """ValueError for replicates that are neither None, ``"auto"`` nor a count ≥ 0."""
    if replicates is None or replicates == "auto":
        return
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 0:
        raise ValueError(f"replicates must be a number of configurations (0 or more) or 'auto', not {replicates!r}")


def replicate_count(replicates: int | str | None, total: int) -> int:
    """Of ``total`` measurements a design may make, how many are second measurements: the number given, or for
    ``"auto"`` a fifth (at least :data:`AUTO_REPLICATES_MIN`)."""
    if replicates is None:
        return 0
    if replicates == "auto":
        return max(AUTO_REPLICATES_MIN, math.ceil(AUTO_REPLICATE_SHARE * total))
    return int(replicates)


def check_design(design: int | str | None) -> None:
    """ValueError for a design that is neither None, ``"auto"`` nor a number of configurations ≥ MIN_CONFIGS."""
    if design is None or design == "auto":
        return
    if isinstance(design, bool) or not isinstance(design, int):
        raise ValueError(f"design must be a number of configurations or 'auto', not {design!r}")
    if design < MIN_CONFIGS:
        raise ValueError(f"a design needs at least {MIN_CONFIGS} configurations, not {design}")


def design_size(design: int | str, factors: int) -> int:
    """Configurations asked for: the number given, or for ``"auto"`` max(3 · factors, AUTO_MIN)."""
    return max(3 * factors, AUTO_MIN) if design == "auto" else int(design)


@dataclass
class ContextResult:
    """Each factor's energy per step in context (J) with 1 σ, the design's summary and its notes."""

    values: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: Each factor's time per step inside the step (s): the same additive fit of the configurations' times.
    times: dict[str, float] = field(default_factory=dict)
    lumped: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _factors(groups: Mapping[str, Sequence[int]], n: int) -> tuple[dict[str, list[int]], list[str]]:
    """The design's factors for ``n`` configurations: every group (longest first) while they fit, else the
    longest ones and the rest switched together as :data:`LUMPED`."""
    room = n - 1 - MIN_RESIDUAL_DOF
    names = list(groups)
    if len(names) <= room:
        return {g: list(groups[g]) for g in names}, []
    keep, lumped = names[: room - 1], names[room - 1 :]
    out = {g: list(groups[g]) for g in keep}
    out[LUMPED] = [i for g in lumped for i in groups[g]]
    return out, lumped


#: The covariates' names in a design's record: the links model's cost per broken link (J).
LINK_COVARIATE = "broken_link_j"


def covariate_model(covariates: Mapping[str, object] | None) -> str:
    """The design model a fit's covariates make: ``busy`` (β·Z, with or without κ·B), ``links`` or ``additive``."""
    if covariates and BUSY_COVARIATE in covariates:
        return "busy"
    return "links" if covariates and LINK_COVARIATE in covariates else "additive"


def run_context(
    run: Callable[[Sequence[int]], Energy],
    groups: Mapping[str, Sequence[int]],
    base: Sequence[int],
    clock: Clock,
    *,
    design: int | str,
    seed: int | None = None,
    budget_s: float | None = None,
    kind: str = "halves",
    p_on: float = 0.5,
    replicates: int | str | None = None,
    model: str = "additive",
    busy: Callable[[Sequence[int]], Sequence[Mapping[str, float]]] | None = None,
) -> ContextResult:
    """Measure a randomized design of the ``groups`` (name → node indices, longest first) and fit it.

    ``kind``: ``halves`` switches each factor on in a random share ``p_on`` of the configurations (half by
    default); ``prefix`` replays random prefixes of the step instead (:func:`prefix_rows`), so that no enabled
    kernel ever runs without the kernels before it.

    ``run(nodes)`` measures one replay with ``nodes`` enabled; ``base`` stays enabled in every one.
    The whole step and the fixed cost are measured first; their time sets how many configurations
    ``budget_s`` allows (fewer than asked: a note; too few for every group: the shortest are lumped).
    Σ e + c0 is checked against the design's own whole-step configuration; :func:`set_step` checks it against
    the whole step measured apart.

    ``replicates`` (a count, ``"auto"`` or None): that many configurations, the whole step and others drawn at
    random, are measured a second time after all the others, in random order, so that the fit can tell a
    measurement's own scatter (τ) from the neighbour dependence ρ (replay_design). They count in the budget:
    with ``"auto"`` a fifth of the measurements the design makes.

    ``model``: ``additive``, ``links`` or ``busy`` (:data:`DESIGN_MODELS`): ``links`` also fits a cost κ per broken
    producer→consumer link (:func:`link_breaks`), which the whole step has none of, so that cost leaves the
    groups' in-step energies and ρ (a halves design; a prefix design breaks no link, and stays additive).
    ``busy`` fits beside κ β per second of the configuration's kernel busy time beyond the same kernels' in the
    whole step (replay_busy.py): ``busy(nodes)`` traces replays with ``nodes`` enabled after each configuration's
    measurement and returns each one's busy time by kernel name. Without ``busy``, or where a timing fails or the
    names do not match, the links model is fitted alone, with a note.
    """
    if model not in DESIGN_MODELS:
        raise ValueError(f"unknown design model {model!r} ({' or '.join(DESIGN_MODELS)})")
    out = ContextResult()
    if not groups:
        out.notes.append("design skipped: no group can be switched")
        return out
    seed = secrets.randbits(32) if seed is None else seed
    asked = design_size(design, len(groups))
    every = list(base) + [i for idx in groups.values() for i in idx]
    timing = BusyTimings(busy if model == "busy" and kind == "halves" else None)
    if model == "busy" and kind != "halves":
        out.notes.append("a prefix design breaks no link and slows no kernel: fitted as additive")

    def measure(nodes: Sequence[int]) -> Energy:
        e = run(nodes)
        timing.take(nodes)
        return e

    timing.warm_up(every)  # before the clock starts: CUPTI's set-up is no configuration's cost
    t0 = clock.now_s()
    try:
        first = [measure(every), measure(list(base))]
    except SwitchError as exc:
        out.notes.append(f"design skipped: switching failed ({exc})")
        return out
    per_s = (clock.now_s() - t0) / 2
    reps = replicate_count(replicates, round(asked / (1 - AUTO_REPLICATE_SHARE)))  # "auto": a fifth of all
    n = asked
    if budget_s is not None and per_s > 0:
        allowed = 2 + int(max(budget_s - 2 * per_s, 0.0) // per_s)
        if allowed < asked + reps:
            reps = max(min(reps, replicate_count(replicates, allowed), allowed - MIN_CONFIGS), 0)
            n = allowed - reps
            out.notes.append(
                f"design reduced from {asked} to {n} configurations"
                + (f" and {reps} measured twice" if reps else "")
                + f" to stay within its budget of {budget_s:g} s (≈ {per_s:.3g} s per configuration)"
            )
    reps = min(reps, n)
    if n < MIN_CONFIGS:
        out.notes.append(f"design skipped: {n} configurations, fewer than the {MIN_CONFIGS} it needs")
        return out
    factors, lumped = _factors(groups, n)
    if lumped:
        out.notes.append(
            f"design of {n} configurations cannot fit {len(groups)} groups one by one: the {len(lumped)} shortest "
            f"are switched together as '{LUMPED}' (at least {len(groups) + 1 + MIN_RESIDUAL_DOF} configurations "
            "measure every group)"
        )
    cols = list(factors.values())
    rng = np.random.default_rng(seed)
    if kind == "prefix":
        try:
            x, configs = prefix_rows(cols, n, rng)
        except ValueError as exc:
            out.notes.append(f"design skipped: {exc}")
            return out
    elif kind == "halves":
        x = draw_design(len(factors), n, rng, p_on=p_on).astype(np.float64)
        configs = [[i for on, idx in zip(row, cols, strict=True) if on for i in idx] for row in x[2:]]
    else:
        raise ValueError(f"unknown design kind {kind!r} (halves or prefix)")
    measured = list(first)
    for enabled in configs:
        nodes = list(base) + enabled
        try:
            measured.append(measure(nodes))
        except SwitchError as exc:
            out.notes.append(f"design stopped after {len(measured)} configurations: switching failed ({exc})")
            break
    x = x[: len(measured)]
    timing.take_reference(every)
    again: list[tuple[int, Energy]] = []
    if reps and len(measured) == n:
        rows = [0, *(int(i) + 1 for i in rng.choice(n - 1, size=reps - 1, replace=False))] if reps > 1 else [0]
        enabled_of = [every, list(base), *configs]
        for row in rng.permutation(np.asarray(rows)):
            nodes = enabled_of[int(row)] if int(row) < 2 else list(base) + enabled_of[int(row)]
            try:
                again.append((int(row), run(nodes)))
            except SwitchError as exc:
                out.notes.append(f"replicates stopped after {len(again)}: switching failed ({exc})")
                break
    repeats = [
        Repeat(row, m.energy_j, m.sigma_j) for row, m in again if math.isfinite(m.energy_j) and math.isfinite(m.sigma_j)
    ]
    covariates: dict[str, list[float]] = {}
    if model in ("links", "busy") and kind == "halves":
        breaks = link_breaks(x, cols)
        # no link, or links that follow the groups exactly: the cost cannot be told from the energies
        if np.linalg.matrix_rank(np.hstack([np.ones((x.shape[0], 1)), x, breaks[:, None]])) == x.shape[1] + 2:
            covariates[LINK_COVARIATE] = breaks.tolist()
        else:
            out.notes.append(
                "the links model was asked for, but this design's broken links cannot be told from its groups "
                "(one group, or links that follow the groups exactly): fitted as additive"
            )
    factor_groups = [list(lumped) if f == LUMPED else [f] for f in factors]
    if model == "busy" and kind == "halves":
        z, why = timing.covariate(x, factor_groups)
        cand = {**covariates, BUSY_COVARIATE: z} if z is not None else None
        if cand is not None and np.linalg.matrix_rank(
            np.hstack([np.ones((x.shape[0], 1)), x, np.array(list(cand.values())).T])
        ) == x.shape[1] + 1 + len(cand):
            covariates = cand
        else:
            why = why or "its excess busy time cannot be told from the groups and the links"
            out.notes.append(f"the busy-time model was not fitted ({why}): {covariate_model(covariates)} instead")
    try:
        fit = fit_design(x, [m.energy_j for m in measured], [m.sigma_j for m in measured], repeats, covariates or None)
    except ValueError as exc:
        out.notes.append(f"design not fitted: {exc}")
        return out
    typical, e_rms = fold_typical(fit.energy_j, fit.alpha)
    if fit.alpha == 2.0:
        typical = float(np.mean(np.square(fit.energy_j)))
    p = p_on if kind == "halves" else 0.5
    for name, e, se in zip(factors, fit.energy_j, fit.energy_se_j, strict=True):
        out.values[name] = (e, fold_sigma(e, se, fit.rho_fold, typical, p, fit.alpha, e_rms))
    out.times = dict(zip(factors, _times(x, [m.time_s for m in measured]), strict=True))
    out.lumped = lumped
    # the whole step's σ: of the mean of its two measurements where it was measured again
    step_sd = next((math.hypot(measured[0].sigma_j, r.sigma_j) / 2.0 for r in repeats if r.row == 0), None)
    out.summary = _summary(fit, x, measured, seed, asked, lumped, clock.now_s() - t0, budget_s, step_sd)
    out.summary["kind"] = kind
    out.summary["model"] = covariate_model(covariates)
    if BUSY_COVARIATE in covariates:
        rec = timing.record(factor_groups)
        for c, zc, bc in zip(out.summary["configs"], covariates[BUSY_COVARIATE], rec.pop("busy_s"), strict=True):
            c["busy_excess_s"], c["busy_s"] = zc, bc
        out.summary.update(rec)
    if again:
        out.summary["repeats"] = [
            {"row": row, "energy_j": m.energy_j, "sigma_j": m.sigma_j, "time_s": m.time_s, "nonfinite": m.nonfinite}
            for row, m in again
        ]
    # what each column of a configuration's flags is, and its nodes (their capture order): enough to study the
    # interactions of neighbouring groups from a shipped replay.json later
    out.summary["factor_names"] = list(factors)
    out.summary["factor_nodes"] = [list(map(int, idx)) for idx in cols]
    if kind == "halves":
        out.summary["p_on"] = p_on
        if p_on != 0.5:
            out.summary["fold"] = FOLD_P.format(p=p_on)
    out.notes.append(_note(out.summary))
    return out


def set_step(ctx: ContextResult, step_j: float, step_sigma_j: float) -> None:
    """Check the design's Σ e + c0 against the whole step measured apart (after the design ran): the summary's
    step fields and the design's note are redone with it."""
    s = ctx.summary
    if not s:
        return
    if not math.isfinite(step_j):
        ctx.notes.append("the whole step measured after the design is not finite: Σ e + c0 is checked against the "
                         "design's own whole-step configuration")  # fmt: skip
        return
    old = _note(s)
    s.update(_sum_check(float(s["sum_j"]), float(s["sum_se_j"]), step_j, step_sigma_j))
    ctx.notes = [_note(s) if n == old else n for n in ctx.notes]


def _sum_check(sum_j: float, sum_se_j: float, step_j: float, step_sigma_j: float) -> dict[str, float]:
    """Σ e + c0 against a whole step: the summary's ``step_j``, ``sum_vs_step_pct`` and ``sum_vs_step_sigma``."""
    diff = sum_j - step_j
    sd = math.hypot(sum_se_j, step_sigma_j)
    return {
        "step_j": step_j,
        "sum_vs_step_pct": diff / step_j * 100.0 if step_j else math.nan,
        "sum_vs_step_sigma": diff / sd if sd else math.nan,
    }


def _times(x: Array, times_s: Sequence[float]) -> list[float]:
    """Each factor's time per step inside the step: ``T(S) = t0 + Σ x_g t_g`` by least squares (NaN where the
    configurations' times are not all finite). The kernels' own time in the step's company, for comparing a
    prior's calls with the program's (the isolated timings also carry each lone replay's launch)."""
    t = np.asarray(times_s, np.float64)
    if not np.all(np.isfinite(t)):
        return [math.nan] * x.shape[1]
    a = np.hstack([np.ones((x.shape[0], 1)), x])
    beta = np.linalg.lstsq(a, t, rcond=None)[0]
    return [float(b) for b in beta[1:]]


def _d_optimal(cand: Array, weight: Array, first: Array, first_w: Array, m: int) -> list[int]:
    """Greedy D-optimal choice of ``m`` rows of ``cand`` (model rows ``[1, shares]``, weights ``weight``) to add
    to ``first``: each pick maximises ``w aᵀ M⁻¹ a``, the information matrix ``M`` updated by Sherman–Morrison.
    A row is picked again only once every row has been."""
    p = cand.shape[1]
    info = (first * first_w[:, None]).T @ first + 1e-9 * np.eye(p)
    inv = np.linalg.inv(info)
    used = np.zeros(cand.shape[0], bool)
    picks: list[int] = []
    for _ in range(m):
        gain = weight * np.einsum("ij,jk,ik->i", cand, inv, cand)
        if used.all():
            used[:] = False
        gain[used] = -np.inf
        k = int(np.argmax(gain))
        a = cand[k]
        ia = inv @ a
        inv -= weight[k] * np.outer(ia, ia) / (1.0 + weight[k] * float(a @ ia))
        used[k] = True
        picks.append(k)
    return picks


def prefix_rows(
    cols: Sequence[Sequence[int]], n: int, rng: np.random.Generator, choose: str = "d-optimal"
) -> tuple[Array, list[list[int]]]:
    """A prefix design of ``n`` configurations over the factors ``cols`` (node indices): rows 0 and 1 the whole
    step and none, then ``n − 2`` random cuts of the step in capture order, each enabling every factor node
    before the cut. Node indices follow a topological order of the graph (graph_nodes._launch_order), so
    every node's producers come before it: no enabled factor kernel reads what a switched-off one should have
    written (the base, memsets and pinned groups, runs in every replay, after the cut too). A row holds each
    factor's share of its nodes enabled, so the fit's coefficients are still each factor's energy in the whole
    step. ``choose``: the cuts at random, or (``d-optimal``, the default) greedily for the most information,
    each weighted by 1/E² for a measurement whose noise is relative to its energy E, taken as the step's
    fixed cost (2 %) plus the prefix's share of the nodes."""
    order = sorted(i for idx in cols for i in idx)
    if len(order) < 2:
        raise ValueError("a prefix design needs at least two nodes to cut between")
    pos = {i: k for k, i in enumerate(order)}
    size = np.array([len(idx) for idx in cols], np.float64)
    m = n - 2
    # cuts up to the whole step: the last node is then seen in more configurations than the whole step's
    every = np.arange(1, len(order) + 1)
    shares = np.zeros((every.size, len(cols)), np.float64)
    for j, idx in enumerate(cols):
        for i in idx:
            shares[pos[i] :, j] += 1.0 / size[j]  # the cut after position pos[i] includes node i
    if choose == "random":
        cuts = rng.choice(every, size=m, replace=m > len(order))
    elif choose == "d-optimal":
        ones = np.ones((every.size, 1))
        weight = 1.0 / (0.02 + every / every.size) ** 2
        first = np.vstack([np.ones(len(cols) + 1), np.r_[1.0, np.zeros(len(cols))]])
        picks = _d_optimal(np.hstack([ones, shares]), weight, first, np.array([1.0, 1.0 / 0.02**2]), m)
        cuts = every[rng.permutation(np.asarray(picks))]  # measured in random order
    else:
        raise ValueError(f"unknown way of choosing cuts {choose!r} (random or d-optimal)")
    x = np.zeros((n, len(cols)), np.float64)
    x[0] = 1.0
    enabled: list[list[int]] = []
    for r, cut in enumerate(cuts, start=2):
        x[r] = shares[int(cut) - 1]
        enabled.append(order[: int(cut)])
    return x, enabled


def _summary(
    fit: DesignFit,
    x: np.ndarray[Any, Any],
    measured: Sequence[Energy],
    seed: int,
    asked: int,
    lumped: Sequence[str],
    spent_s: float,
    budget_s: float | None,
    all_on_sigma_j: float | None = None,
) -> dict[str, Any]:
    return {
        "configurations": len(measured),
        "asked": asked,
        "seed": seed,
        "factors": int(x.shape[1]),
        "lumped_groups": list(lumped),
        **fit.summary(),
        **_sum_check(fit.sum_j, fit.sum_se_j, fit.all_on_j,
                     measured[0].sigma_j if all_on_sigma_j is None else all_on_sigma_j),
        "fold": FOLD,
        "seconds": spent_s,
        "budget_s": budget_s,
        "configs": [
            {"on": _on(row), "energy_j": m.energy_j, "sigma_j": m.sigma_j, "time_s": m.time_s,
             "nonfinite": m.nonfinite}
            for row, m in zip(x, measured, strict=True)
        ],
        # configurations with a repetition that ended with the step's state non-finite (hw/graph_state.py)
        "nonfinite_configs": sum(1 for m in measured if m.nonfinite > 0),
    }  # fmt: skip


def _on(row: Array) -> str | list[float]:
    """A configuration as stored: on/off flags as a string of 0 and 1, a prefix's shares as numbers."""
    if np.all((row == 0.0) | (row == 1.0)):
        return "".join("1" if v else "0" for v in row)
    return [round(float(v), 6) for v in row]


def _note(s: Mapping[str, Any]) -> str:
    return (
        f"context energies: randomized design ({s.get('kind', 'halves')}"
        + (f", each group on in {100 * s['p_on']:.0f} % of them" if s.get("p_on", 0.5) != 0.5 else "")
        + f") of {s['configurations']} configurations "
        f"(seed {s['seed']}) fitted "
        f"as c0 + Σ e_g{''.join(COVARIATE_TERM.get(k, '') for k in s.get('covariates') or {})}; c0 = {s['c0_j']:.4g} ± "
        f"{s['c0_se_j']:.2g} J per replay; neighbour dependence ρ = "
        f"{100 * s['rho']:.1f} % (95 % upper bound {100 * s['rho_up']:.1f} %; √E[ρ²] "
        f"{100 * s.get('rho_fold', s['rho_up']):.1f} %, folded in as {s['fold']}); "
        f"residual RMS {s['residual_rms_pct']:.2f} % (noise {s['noise_rms_pct']:.2f} %); Σ e + c0 is "
        f"{s['sum_vs_step_pct']:+.2f} % of the whole step; the whole step predicted from the other "
        f"configurations is off by {s['all_on_error_pct']:+.2f} %"
        + (
            f"; fitted with a cost per broken producer→consumer link of "
            f"{1e3 * s['covariates']['broken_link_j']['value']:.3g} ± "
            f"{1e3 * s['covariates']['broken_link_j']['se']:.2g} mJ (none in the whole step)"
            if s.get("model") in ("links", "busy") and "broken_link_j" in s.get("covariates", {})
            else ""
        )
        + (
            f"; fitted with the energy of the kernels' busy time beyond theirs in the whole step (each configuration "
            f"timed kernel by kernel), {s['covariates'][BUSY_COVARIATE]['value']:.4g} ± "
            f"{s['covariates'][BUSY_COVARIATE]['se']:.2g} W (none in the whole step; the timings scatter by "
            f"{s.get('busy_rel_sd_pct', math.nan):.2f} % of the step's {1e3 * s.get('busy_total_s', math.nan):.4g} ms "
            f"of kernel time, which drifted by {s.get('busy_reference_drift_pct', math.nan):+.2f} % over the design)"
            if s.get("model") == "busy" and BUSY_COVARIATE in s.get("covariates", {})
            else ""
        )
        + (
            f"; {s['replicates']} configurations measured twice: one measurement scatters by τ = "
            f"{100 * s['tau']:.2f} % of its energy (95 % upper bound {100 * s['tau_up']:.2f} % on a "
            f"{100 * TAU_STEP:.2f} % grid; the replicates' RMS "
            f"{s['replicate_rms_pct']:.2f} %), which ρ no longer takes for a neighbour dependence"
            if s.get("replicates")
            else ""
        )
        + (
            f"; {s['nonfinite_configs']} of {s['configurations']} configurations ended a repetition with the "
            "step's state non-finite (kernels computing on NaN for part of it; each configuration's count is "
            "in design.configs)"
            if s.get("nonfinite_configs")
            else ""
        )
    )


def context_rows(
    rows: Sequence[ReplayRow], ctx: ContextResult, info: Mapping[str, tuple[str, int, float]]
) -> list[ReplayRow]:
    """The rows with each group's in-context energy; a factor without a row (not among the top groups, or
    the lumped ones) gets one of its own, with NaN isolated energies. ``info``: group → (kind, nodes, time s)."""
    have = {r.group for r in rows}
    out = [
        dataclasses.replace(
            r,
            context_j=ctx.values[r.group][0],
            context_sigma_j=ctx.values[r.group][1],
            context_time_s=ctx.times.get(r.group),
        )
        if r.group in ctx.values
        else r
        for r in rows
    ]
    new = []
    for name, (e, sd) in ctx.values.items():
        if name in have:
            continue
        kind, nodes, time_s = info.get(name, ("mixed", 0, math.nan))
        new.append(
            ReplayRow(
                name, kind, nodes, time_s, math.nan, math.nan, math.nan, context_j=e, context_sigma_j=sd,
                context_time_s=ctx.times.get(name),
            )
        )  # fmt: skip
    at = next((k for k, r in enumerate(out) if r.group in (REST, PINNED, FIXED) or not r.measurable), len(out))
    return out[:at] + new + out[at:]
