"""Report of a graph-replay run: each kernel group's energy per step (isolated, marginal, in context), the sums."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from archline.errors import RunDirError
from archline.measurement.attribute.replay_context import COVARIATE_TERM
from archline.records import RunDir
from archline.report.doc import Document, Para, Table
from archline.report.registry import RenderedReport
from archline.report.render import write_document

__all__ = [
    "clock_warning",
    "design_text",
    "preparation_text",
    "read_replay",
    "render_replay",
    "replay_priors",
    "replay_summary_text",
    "replay_table",
]


def _f(v: Any, fmt: str) -> str:
    try:
        return format(float(v), fmt)
    except (TypeError, ValueError):
        return "—"


def _ms(v: Any) -> float | None:
    try:
        return 1e3 * float(v)
    except (TypeError, ValueError):
        return None


def read_replay(directory: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``replay.json`` (the summary; empty where only ``replay.csv`` was kept) and ``replay.csv`` (the rows) of
    ``directory``; RunDirError naming the file."""
    from archline.records.rundir import read_csv

    rows = read_csv(directory / "replay.csv")
    p = directory / "replay.json"
    if not p.is_file():
        return {}, rows
    try:
        summary = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{p}: corrupt JSON ({exc})") from None
    if not isinstance(summary, dict):
        raise RunDirError(f"{p}: not a JSON object")
    return summary, rows


def replay_priors(directory: Path) -> dict[str, Any]:
    """The kernel priors a replay run directory gives the attribution (``priors_from_replay`` of its rows, with
    the randomized design of its ``replay.json`` where it ran one); RunDirError naming a bad file."""
    from archline.measurement.attribute.prior import priors_from_replay

    summary, rows = read_replay(directory)
    design = summary.get("design")
    return dict(priors_from_replay(rows, design=design if isinstance(design, dict) else None))


def state_warning(s: Mapping[str, Any]) -> str | None:
    """Why this replay's energies may be of a step computing on NaN (None: its state was restored)."""
    if not s:
        return None
    st = s.get("state")
    if "state" not in s:
        return (
            "this replay predates archline's restoring the step's state between replays (session 8): replays "
            "with nodes switched off could leave a training step's weights NaN, so its energies may be of "
            "kernels computing on NaN (docs/replay.md, 'The step's state')"
        )
    if isinstance(st, Mapping) and not st.get("guarded"):
        return (
            f"the step's state was not restored between replays ({st.get('why_not') or 'no state found'}); "
            "energies after a replay with nodes switched off may be of kernels computing on NaN"
        )
    return None


def replay_summary_text(s: Mapping[str, Any]) -> str:
    """The whole step's energy and time, the sum of the isolated energies against it, how nodes were switched
    and, with repeats, how well the groups' energies reproduced."""
    text = (
        f"Whole step: {_f(s.get('step_energy_j'), '.4g')} ± {_f(s.get('step_sigma_j'), '.2g')} J in "
        f"{_f(_ms(s.get('step_time_s')), '.4g')} ms. Sum of the isolated energies: "
        f"{_f(s.get('sum_isolated_j'), '.4g')} ± {_f(s.get('sum_isolated_sigma_j'), '.2g')} J "
        f"({_f(s.get('sum_vs_step_pct'), '+.2f')} % of the step)."
    )
    sw = s.get("switching") or {}
    if sw.get("mode"):
        stuck = sw.get("not_switchable_nodes") or 0
        text += f" Nodes switched by '{sw['mode']}'" + (f" ({stuck} nodes could not be)." if stuck else ".")
    text += design_text(s.get("design") or {})
    text += preparation_text(s)
    rep = s.get("reproducibility") or {}
    if rep:
        from archline.measurement.attribute.replay_stats import unresolved_text

        text += (
            f" Over {s.get('repeats')} runs the groups' energies spread by {_f(rep.get('median_spread_pct'), '.2f')} % "
            f"(median) and {_f(rep.get('max_spread_pct'), '.2f')} % at most ({rep.get('worst_group')}): "
            f"{rep.get('verdict')} against {_f(rep.get('target_pct'), 'g')} %{unresolved_text(rep)}; resolution "
            f"{rep.get('resolution')}."
        )
    return text


def preparation_text(s: Mapping[str, Any]) -> str:
    """How replays with nodes switched off were prepared: primed by a whole step, every buffer its own ('' where
    the replay predates both records)."""
    primed, kept = s.get("primed"), s.get("kept_buffers")
    parts = []
    if primed is not None:
        parts.append("each was preceded by one unmeasured whole step" if primed else "none was primed by a whole step")
    if kept is not None:
        parts.append(
            "the step was captured with every buffer its own"
            if kept
            else "the step was captured with its memory reused between tensors (a switched-off node's consumers may "
            "read another tensor's data)"
        )
    return f" Replays with nodes switched off: {'; '.join(parts)}." if parts else ""


def design_text(d: Mapping[str, Any]) -> str:
    """The randomized design's summary in a sentence ('' without one)."""
    if not d:
        return ""
    terms = "".join(COVARIATE_TERM.get(k, "") for k in d.get("covariates") or {})
    return (
        f" Context energies: randomized design of {d.get('configurations')} configurations (seed {d.get('seed')}, "
        f"{d.get('factors')} factors) fitted as c0 + Σ e{terms}; "
        f"c0 = {_f(d.get('c0_j'), '.4g')} ± "
        f"{_f(d.get('c0_se_j'), '.2g')} J per replay; neighbour dependence ρ = {_f(_pct(d.get('rho')), '.1f')} % "
        f"(95 % upper bound {_f(_pct(d.get('rho_up')), '.1f')} %"
        + (f"; √E[ρ²] {_f(_pct(d.get('rho_fold')), '.1f')} %, folded into each σ" if "rho_fold" in d else "")
        + f"); residual RMS {_f(d.get('residual_rms_pct'), '.2f')} "
        f"% against noise {_f(d.get('noise_rms_pct'), '.2f')} %; Σ e + c0 is {_f(d.get('sum_vs_step_pct'), '+.2f')} % "
        f"of the whole step; the whole step predicted from the other configurations is off by "
        f"{_f(d.get('all_on_error_pct'), '+.2f')} %."
        + (
            f" {d['replicates']} configurations were measured twice: one measurement scatters by τ = "
            f"{_f(_pct(d.get('tau')), '.2f')} % of its energy (95 % upper bound "
            f"{_f(_pct(d.get('tau_up')), '.2f')} % on a 0.25 % grid), "
            "which ρ does not take for a neighbour dependence."
            if d.get("replicates")
            else ""
        )
        + (
            f" Fitted with a cost per broken producer→consumer link (a kernel run without the one before it) of "
            f"{_f(_mj(d['covariates']['broken_link_j'].get('value')), '.3g')} ± "
            f"{_f(_mj(d['covariates']['broken_link_j'].get('se')), '.2g')} mJ, which the whole step has none of."
            if d.get("model") in ("links", "busy") and "broken_link_j" in (d.get("covariates") or {})
            else ""
        )
        + (
            " Fitted with the energy of the kernels' busy time beyond theirs in the whole step (each configuration "
            "timed kernel by kernel: a kernel run without its neighbours can run longer, e.g. reading from memory "
            "what a switched-off producer left out of the L2), "
            f"{_f(d['covariates']['excess_busy_w'].get('value'), '.4g')} ± "
            f"{_f(d['covariates']['excess_busy_w'].get('se'), '.2g')} W, which the whole step has none of."
            if d.get("model") == "busy" and "excess_busy_w" in (d.get("covariates") or {})
            else ""
        )
        + (" Its configurations are random prefixes of the step." if d.get("kind") == "prefix" else "")
        + (
            f" Each group was on in {_f(_pct(d.get('p_on')), '.0f')} % of them; the interval folds ρ for that share "
            f"({d.get('fold')})."
            if d.get("p_on") not in (None, 0.5)
            else ""
        )
        + (
            f" {d['nonfinite_configs']} configuration{'' if d['nonfinite_configs'] == 1 else 's'} ended a repetition "
            "with the step's state non-finite."
            if d.get("nonfinite_configs")
            else ""
        )
    )


def _int(v: Any) -> int:
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return 0


def _mj(v: Any) -> float | None:
    try:
        return 1e3 * float(v)
    except (TypeError, ValueError):
        return None


def _pct(v: Any) -> float | None:
    try:
        return 100.0 * float(v)
    except (TypeError, ValueError):
        return None


def replay_table(rows: Sequence[Mapping[str, Any]], notes: Sequence[str] = ()) -> Table:
    """One row per kernel group: nodes per step, time, isolated energy ± σ, power, marginal energy ± σ; with a
    design the energy in context ± σ, with repeats the run-to-run spread, and for a group not measured, why."""
    spread = any(r.get("run_spread_pct") not in (None, "") for r in rows)
    context = any(r.get("context_j") not in (None, "") for r in rows)
    why = any(r.get("reason") not in (None, "") for r in rows)
    nan = any(_int(r.get("nonfinite_reps")) > 0 for r in rows)
    clock = any(r.get("sm_clock_mhz") not in (None, "") for r in rows)
    cells = []
    for r in rows:
        cell = [
            str(r["group"]),
            str(r["nodes_per_step"]),
            _f(_ms(r["time_s"]), ".4g"),
            "—"
            if r.get("energy_j") in (None, "")
            else f"{_f(r['energy_j'], '.4g')} ± {_f(r['energy_sigma_j'], '.2g')}",
            _f(r["mean_power_w"], ".0f"),
            "—"
            if r.get("marginal_j") in (None, "")
            else f"{_f(r['marginal_j'], '.4g')} ± {_f(r['marginal_sigma_j'], '.2g')}",
        ]
        if context:
            c = r.get("context_j")
            cell.append("—" if c in (None, "") else f"{_f(c, '.4g')} ± {_f(r.get('context_sigma_j'), '.2g')}")
        if spread:
            cell.append(_f(r.get("run_spread_pct"), ".2f"))
        if clock:
            reasons = str(r.get("clock_event_reasons") or "").replace(",", ", ")
            cell.append(_f(r.get("sm_clock_mhz"), ".0f") + (f" ({reasons})" if reasons else ""))
        if nan:
            cell.append(str(_int(r.get("nonfinite_reps"))))
        if why:
            cell.append(str(r.get("reason") or ""))
        cells.append(tuple(cell))
    header = ["group", "nodes/step", "time (ms)", "isolated energy (J)", "power (W)", "marginal energy (J)"]
    header += ["in-context energy (J)"] * context + ["run-to-run spread (%)"] * spread
    header += ["SM clock alone (MHz; clock-event reasons)"] * clock
    header += ["repetitions on NaN"] * nan + ["not measured because"] * why
    return Table(tuple(header), tuple(cells), caption="Per replay of the step; σ is 1 σ", notes=tuple(notes))


def clock_warning(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """Which groups were measured alone while the board slowed its clocks (a power cap, a thermal or hardware
    slowdown: NVML's clock-event reasons), and what that does to their isolated energies (None: none was)."""
    from archline.hw.nvml import SLOWDOWN_REASONS as slowing

    hit = []
    for r in rows:
        reasons = [x for x in str(r.get("clock_event_reasons") or "").split(",") if x in slowing]
        if reasons:
            hit.append(f"{r.get('group')} ({', '.join(reasons)}, {_f(r.get('sm_clock_mhz'), '.0f')} MHz)")
    if not hit:
        return None
    return (
        f"{len(hit)} group{'' if len(hit) == 1 else 's'} measured alone while the board slowed its clocks: "
        + "; ".join(hit)
        + ". A group that runs alone above the board's power limit can be held down by its power controller, as "
        "it may not be inside the step: its isolated energy and time then depend on that controller's state and "
        "may not reproduce from one run to the next (docs/replay.md, 'Session 22')"
    )


def render_replay(run: RunDir, out_dir: Path) -> RenderedReport:
    """``archline replay``'s run directory as Markdown and HTML."""
    m = run.manifest
    s, rows = read_replay(run.path)
    doc = Document("Graph replay: energy of each kernel group of one step")
    g = m.gpu
    doc.add(
        Para(
            f"{g.get('name', '?')} (UUID {g.get('uuid', '?')}, driver {g.get('driver_version', '?')}); run "
            f"{m.created_utc}, status {m.status}. " + replay_summary_text(s)
        )
    )
    warnings = [w for w in (state_warning(s), clock_warning(rows)) if w is not None]
    for w in warnings:
        doc.add(Para(f"Warning: {w}."))
    doc.add(replay_table(rows, s.get("notes", [])))
    md, html = write_document(doc, out_dir)
    return RenderedReport("replay", md, html, (), m.status, warnings=tuple(warnings))
