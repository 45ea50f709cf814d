"""Tables of a run directory's report: per-kernel energy with intervals, unattributed energy, attribution vs replay.

They read the rows as recorded (``attribution.json``'s rows, keys of ``records.attribution.KERNEL_COLUMNS``), so a
column that a run did not record (``dominated_by`` before archline wrote it) shows "—" with the reason, never a
default. Each column has one number format and its unit in the header; the HTML tables sort by clicking a header.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from archline.core.activity import demangle, short_name
from archline.report.doc import Cell, Missing, SortKey, Table
from archline.report.fmt import fmt_num, fmt_pm, fmt_sig, is_number

__all__ = ["ACTIVITY_KINDS", "kernel_table", "replay_comparison", "row_notes", "unattributed_table"]

#: Rows of GPU work; every other kind (idle, gap, residual, untraced) is energy not attributed to a kernel.
ACTIVITY_KINDS = ("kernel", "memcpy", "memset", "program")
NAME_WIDTH = 80

NO_DOMINANCE = "not recorded: this run's attribution.json has no dominated_by column (written by an older archline)"
NO_WEIGHT = "not recorded: this run's attribution.json has no data_weight column"
NO_INTERVAL = "no interval recorded for this row"
NO_RESIDUAL_INTERVAL = "total minus every other row: no interval of its own"
NO_TIME = "no busy time of its own"
NOT_RECORDED = "not recorded for this row"
NO_CALLS = "no calls recorded for this row"
NO_REPLAY = "no kernel group of this name in the replay"


def _num(row: Mapping[str, Any], key: str) -> float | None:
    v = row.get(key)
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    return float(v) if isinstance(v, (int, float)) and is_number(v) else None


def _fmt(x: float | None, fmt: str, missing: str, scale: float = 1.0) -> Cell:
    """``x × scale`` in the column's one format: ``sig`` (3 significant figures), ``int`` or a format spec."""
    if x is None:
        return Missing(missing)
    v = x * scale
    if fmt == "sig":
        return fmt_sig(v)
    if fmt == "int":
        return fmt_num(round(v))
    return format(v, fmt)


def _interval(lo: float | None, hi: float | None, missing: str, scale: float = 1.0) -> Cell:
    if lo is None or hi is None:
        return Missing(missing)
    return f"{fmt_sig(lo * scale)} – {fmt_sig(hi * scale)}"


def _per_call(row: Mapping[str, Any], key: str) -> float | None:
    calls, x = _num(row, "calls"), _num(row, key)
    return x / calls if x is not None and calls else None


def _outer_template(name: str) -> str:
    """A kernel name with its outermost template arguments kept and everything nested deeper, and every parameter
    list, elided: ``vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<…>, std::array<…> >(…)``."""
    name = name.removeprefix("void ").replace("(anonymous namespace)", "{anonymous}")
    out: list[str] = []
    stack: list[str] = []
    for ch in name:
        if ch in "<(":
            if stack and not (len(stack) == 1 and stack[0] == "<"):
                stack.append(ch)
                continue
            if ch == "<" and not stack:
                out.append("<")
            elif len(stack) == 1:
                out.append("<…>" if ch == "<" else "(…)")
            else:
                out.append("(…)")
            stack.append(ch)
        elif ch in ">)" and stack:
            stack.pop()
            if not stack and ch == ">":
                out.append(">")
        elif not stack or (len(stack) == 1 and stack[0] == "<"):
            out.append(ch)
    return "".join(out)


def kernel_labels(names: Sequence[str], width: int = NAME_WIDTH) -> dict[str, str]:
    """A label per kernel name that tells the rows apart: the short name (templates and parameters elided); where
    several names share one, their outer template arguments; where those still collide, a number (#1, #2 …)."""
    labels = {n: short_name(n.replace("(anonymous namespace)", "{anonymous}"), width) for n in names}
    for first in (True, False):
        groups: dict[str, list[str]] = {}
        for n in names:
            groups.setdefault(labels[n], []).append(n)
        for same in groups.values():
            if len(same) < 2:
                continue
            for k, n in enumerate(same, start=1):
                if first:
                    full = _outer_template(n)
                    labels[n] = full if len(full) <= width + 40 else full[: width + 39] + "…"
                else:
                    labels[n] = f"{labels[n]} #{k}"
    return labels


def _name(row: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> str:
    name = str(row.get("name", ""))
    if row.get("kind") not in ("kernel", "memcpy", "memset"):
        return name
    return labels[name] if labels is not None and name in labels else short_name(name, NAME_WIDTH)


def _flag(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    return None


def _method(row: Mapping[str, Any]) -> str:
    method = str(row.get("method") or "")
    return method + (", not identifiable" if _flag(row.get("identifiable")) is False else "")


def _dominance(row: Mapping[str, Any]) -> Cell:
    v = row.get("dominated_by")
    return str(v) if isinstance(v, str) and v else Missing(NO_DOMINANCE)


def row_notes(rows: Sequence[Mapping[str, Any]], labels: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The rows' own notes, each said once with how many rows (and which) carry it."""
    by_note: dict[str, list[str]] = {}
    for r in rows:
        note = r.get("note")
        if isinstance(note, str) and note.strip():
            by_note.setdefault(note.strip(), []).append(_name(r, labels))
    out = []
    for note, names in by_note.items():
        who = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        out.append(f"{len(names)} row{'s' if len(names) > 1 else ''} ({who}): {note}")
    return tuple(out)


def _energy_order(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(rows, key=lambda r: -(_num(r, "energy_j") or -math.inf))


def _labels(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    return kernel_labels([str(r.get("name", "")) for r in rows if r.get("kind") in ("kernel", "memcpy", "memset")])


def kernel_table(rows: Sequence[Mapping[str, Any]], confidence: float) -> Table:
    """One row per kernel name (and copy kind), most energy first: time, energy with its interval, energy per
    call, share, power, method, what dominated the estimate (data or prior) and the data's weight."""
    conf = round(100 * confidence)
    header = (
        "kernel",
        "calls",
        "time (ms)",
        "time per call (µs)",
        "energy (J)",
        f"{conf} % interval (J)",
        "energy per call (mJ)",
        "share (%)",
        "power (W)",
        "method",
        "dominated by",
        "data weight (0–1)",
    )
    cells: list[tuple[Cell, ...]] = []
    keys: list[tuple[SortKey, ...]] = []
    kernels = _energy_order([r for r in rows if r.get("kind") in ACTIVITY_KINDS])
    labels = _labels(kernels)
    for r in kernels:
        name = _name(r, labels)
        calls = _num(r, "calls")
        dom = _dominance(r)
        weight = _num(r, "data_weight") if "data_weight" in r else None
        cells.append(
            (
                name,
                _fmt(calls, "int", NO_CALLS),
                _fmt(_num(r, "time_s"), "sig", NOT_RECORDED, 1e3),
                _fmt(_per_call(r, "time_s"), "sig", NO_CALLS, 1e6),
                _fmt(_num(r, "energy_j"), "sig", NOT_RECORDED),
                _interval(_num(r, "energy_lo_j"), _num(r, "energy_hi_j"), NO_INTERVAL),
                _fmt(_per_call(r, "energy_j"), "sig", NO_CALLS, 1e3),
                _fmt(_num(r, "share"), ".1f", NOT_RECORDED, 100.0),
                _fmt(_num(r, "mean_power_w"), ".0f", NO_TIME),
                _method(r),
                dom,
                _fmt(weight, ".2f", NO_WEIGHT),
            )
        )
        keys.append(
            (
                name,
                calls,
                _num(r, "time_s"),
                _per_call(r, "time_s"),
                _num(r, "energy_j"),
                _num(r, "energy_lo_j"),
                _per_call(r, "energy_j"),
                _num(r, "share"),
                _num(r, "mean_power_w"),
                _method(r),
                None if isinstance(dom, Missing) else dom,
                weight,
            )
        )
    caption = f"Energy by kernel, {len(kernels)} rows (report.html: click a header to sort)"
    return Table(header, tuple(cells), caption=caption, notes=row_notes(kernels, labels), sort_keys=tuple(keys))


def unattributed_table(rows: Sequence[Mapping[str, Any]], confidence: float) -> Table:
    """Idle time before/after the program, the GPU idle inside it, launch gaps, untraced time and the residual."""
    conf = round(100 * confidence)
    ci = f"{conf} % interval (J)"
    header = ("part", "periods", "time (ms)", "energy (J)", ci, "share (%)", "power (W)", "method")
    cells: list[tuple[Cell, ...]] = []
    rest = [r for r in rows if r.get("kind") not in ACTIVITY_KINDS]
    for r in rest:
        no_ci = NO_RESIDUAL_INTERVAL if r.get("kind") in ("residual", "untraced") else NO_INTERVAL
        time_s = _num(r, "time_s")
        calls = _num(r, "calls")
        cells.append(
            (
                _name(r),
                _fmt(calls if calls else None, "int", NO_CALLS),
                _fmt(time_s if time_s else None, "sig", NO_TIME, 1e3),
                _fmt(_num(r, "energy_j"), "sig", NOT_RECORDED),
                _interval(_num(r, "energy_lo_j"), _num(r, "energy_hi_j"), no_ci)
                if r.get("kind") not in ("residual", "untraced")
                else Missing(no_ci),
                _fmt(_num(r, "share"), ".1f", NOT_RECORDED, 100.0),
                _fmt(_num(r, "mean_power_w") if time_s else None, ".0f", NO_TIME),
                _method(r),
            )
        )
    return Table(header, tuple(cells), caption="Energy not attributed to a kernel", notes=row_notes(rest))


def replay_comparison(
    rows: Sequence[Mapping[str, Any]],
    replay_rows: Sequence[Mapping[str, Any]],
    confidence: float,
    fixed_j: tuple[float, float] | None = None,
) -> Table | None:
    """Each kernel's attributed energy per call against graph replay's isolated energy per call (``replay.csv``:
    a group's energy per replay of the step over its nodes per step, less ``fixed_j``, a replay's fixed cost
    still in it: ``replay_result.fixed_cost_to_take_out``); None when no name matches."""
    conf = round(100 * confidence)
    names = demangle([str(r.get("group", "")) for r in replay_rows])
    replay: dict[str, tuple[float, float | None]] = {}
    for g in replay_rows:
        n, e = _num(g, "nodes_per_step"), _num(g, "energy_j")
        if n and e is not None:
            group = str(g.get("group", ""))
            sd = _num(g, "energy_sigma_j")
            if fixed_j is not None:
                e, sd = e - fixed_j[0], None if sd is None else math.hypot(sd, fixed_j[1])
            replay[names.get(group, group)] = (e / n, None if sd is None else sd / n)
    header = (
        "kernel",
        "attributed per call (mJ)",
        f"{conf} % interval (mJ)",
        "replay, isolated per call (mJ ± 1 σ)",
        "attributed − replay (%)",
        "dominated by",
    )
    cells: list[tuple[Cell, ...]] = []
    keys: list[tuple[SortKey, ...]] = []
    kernels = _energy_order([r for r in rows if r.get("kind") in ACTIVITY_KINDS])
    labels = _labels(kernels)
    for r in kernels:
        if str(r.get("name")) not in replay:
            continue
        ref, ref_sd = replay[str(r.get("name"))]
        per_call = _per_call(r, "energy_j")
        diff = None if per_call is None or ref <= 0 else 100.0 * (per_call / ref - 1.0)
        calls = _num(r, "calls")
        lo, hi = _num(r, "energy_lo_j"), _num(r, "energy_hi_j")
        lo_call = None if lo is None or not calls else lo / calls
        hi_call = None if hi is None or not calls else hi / calls
        dom = _dominance(r)
        name = _name(r, labels)
        cells.append(
            (
                name,
                _fmt(per_call, "sig", NO_CALLS, 1e3),
                _interval(lo_call, hi_call, NO_INTERVAL, 1e3),
                fmt_pm(ref, ref_sd, NO_REPLAY, scale=1e3),
                _fmt(diff, "+.1f", NO_REPLAY),
                dom,
            )
        )
        keys.append((name, per_call, lo_call, ref, diff, None if isinstance(dom, Missing) else dom))
    if not cells:
        return None
    caption = f"Attribution against graph replay ({len(cells)} of {len(replay)} replayed groups matched by name)"
    if fixed_j is not None:
        caption += (
            f"; isolated energies less a replay's fixed cost ({1e3 * fixed_j[0]:.3g} mJ, the design's c0), "
            "which this replay, recorded before session 11, left in each"
        )
    return Table(header, tuple(cells), caption=caption, sort_keys=tuple(keys))
