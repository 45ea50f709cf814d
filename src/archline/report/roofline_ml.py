"""The roofline report's section on ML kernels: the counted model of the frozen protocol, then its post-hoc variant.

It shows what the run wrote (``roofline_ml_model.json`` and ``roofline_ml_predictions.csv``, and the post-hoc
variant's ``roofline_ml_posthoc*``); where a file is missing it is computed from the run's tables now, and says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archline.model.ml import POSTHOC_LABEL
from archline.model.ml_run import (
    ML_MODEL_FILE,
    ML_POSTHOC_FILE,
    ML_POSTHOC_PREDICTIONS_TABLE,
    ML_PREDICTIONS_TABLE,
    ML_TABLE,
    ML_V2_FILE,
    ML_V2_PREDICTIONS_TABLE,
    analyze_ml_run,
    ml_model_json,
    ml_prediction_rows,
)
from archline.model.parameters import ParameterSet
from archline.report.doc import Block, Bullets, Cell, Heading, Missing, Para, SortKey, Table
from archline.report.fmt import fmt_sig, is_number

__all__ = ["FROZEN_TITLE", "POSTHOC_TITLE", "V2_TITLE", "MlRecord", "ml_section", "read_ml_records"]

FROZEN_TITLE = "Machine-learning kernels: the counted model (frozen protocol)"
V2_TITLE = "Protocol v2 (frozen before its scoring runs): observed cap, capped dynamic energy κ, time source"
POSTHOC_TITLE = "Post hoc: the cap at the observed capped power, terms chosen on the uncapped calibration kernels"
_TARGET_MEASURED = "≤ 5 %"
_TARGET_PREDICTED = "≤ 12 %"
_NOT_SCORED = "not scored: no kernel of this group has a finite error"
_NO_SIGMA = "no uncertainty recorded for this component"
_NOT_MEASURED = "its microbenchmark did not run or its row is incomplete"


@dataclass(frozen=True)
class MlRecord:
    """One variant as the run recorded it: the model file's JSON and the predictions table's rows."""

    model: Mapping[str, Any]
    rows: Sequence[Mapping[str, Any]]
    #: How it was obtained: the file it was read from, or "computed now …".
    source: str


def read_ml_records(run_dir: Path, params: ParameterSet | None) -> tuple[MlRecord, MlRecord | None] | None:
    """The frozen record and the post-hoc one of a roofline run; None when the run has no ML kernels.

    A missing file is computed now with :func:`archline.model.ml_run.analyze_ml_run` (not written) when
    ``params`` is given.
    """
    from archline.records import read_csv

    if not (run_dir / ML_TABLE).is_file():
        return None

    def read(model_file: str, table: str) -> MlRecord | None:
        if not ((run_dir / model_file).is_file() and (run_dir / table).is_file()):
            return None
        return MlRecord(json.loads((run_dir / model_file).read_text()), read_csv(run_dir / table), model_file)

    frozen, posthoc = read(ML_MODEL_FILE, ML_PREDICTIONS_TABLE), read(ML_POSTHOC_FILE, ML_POSTHOC_PREDICTIONS_TABLE)
    if (frozen is None or posthoc is None) and params is not None:
        run = analyze_ml_run(run_dir, params, write=False)
        if run is not None:
            now = "computed now from the run's tables (the run did not write it)"
            frozen = frozen or MlRecord(ml_model_json(run), ml_prediction_rows(run), now)
            if run.posthoc is not None:
                posthoc = posthoc or MlRecord(
                    ml_model_json(run.posthoc, posthoc=True), ml_prediction_rows(run.posthoc), now
                )
    return (frozen, posthoc) if frozen is not None else None


# --------------------------------------------------------------------------- cells


def _f(v: Any) -> float:
    return float(v) if is_number(v) else math.nan


def _pct(v: Any, missing: str, signed: bool = True) -> Cell:
    x = _f(v)
    if not math.isfinite(x):
        return Missing(missing)
    return f"{100 * x:+.1f} %" if signed else f"{100 * x:.1f} %"


def _verdict(ok: Any) -> str:
    return "PASS" if ok else "FAIL"


def _key(v: Any) -> SortKey:
    x = _f(v)
    return x if math.isfinite(x) else None


# --------------------------------------------------------------------------- tables


def _summary_table(rec: MlRecord, caption: str) -> Table:
    rows = []
    for group, label in (("calibration", "calibration"), ("heldout", "held-out")):
        s = rec.model.get(group) or {}
        met = s.get("met") or {}
        over = list(s.get("over_20pct") or [])
        n = int(s.get("kernels") or 0)
        rows.append(
            (
                label,
                str(n),
                _pct(s.get("median_abs_error_measured_time"), _NOT_SCORED, signed=False),
                _verdict(met.get("median_measured_time")),
                _pct(s.get("median_abs_error_predicted_time"), _NOT_SCORED, signed=False),
                _verdict(met.get("median_predicted_time")),
                _pct(s.get("median_abs_error_ncu_time"), _NOT_SCORED, signed=False),
                str(len(over)),
                _verdict(met.get("none_over_20pct")),
            )
        )
    held = list((rec.model.get("heldout") or {}).get("over_20pct") or [])
    note = (
        "Targets (issue 15) apply to the held-out kernels; the calibration kernels are shown against them for "
        "reference. Median |error| of the energy at the measured time, at the time-roofline's predicted time and at "
        "Nsight Compute's duration; 'beyond 20 %': at measured or predicted time."
    )
    if held:
        note += f" Held-out beyond 20 %: {', '.join(held)}."
    header = (
        "kernels",
        "count",
        "median |error|, measured T",
        f"target {_TARGET_MEASURED}",
        "median |error|, predicted T",
        f"target {_TARGET_PREDICTED}",
        "median |error|, ncu's T",
        "beyond 20 %",
        "none beyond 20 %",
    )
    return Table(header, tuple(rows), caption=caption, notes=(note,))


def _scores_table(rec: MlRecord, scored_on: str) -> Table:
    c = (rec.model.get("model") or {}).get("choices") or {}
    chosen = "+".join((rec.model.get("model") or {}).get("terms") or []) or "base"
    scores: Mapping[str, Any] = c.get("term_scores_median_abs_error") or {}
    rows = tuple(
        (
            f"`{name}`",
            _pct(v, "no calibration kernel scored", signed=False),
            "chosen" if name == chosen else "",
        )
        for name, v in scores.items()
    )
    return Table(
        ("optional terms", "median |error|, measured T", "choice"),
        rows,
        caption=f"Optional terms (L1, other instructions, operand activity): the eight scores on {scored_on}",
        notes=("The lowest median wins; a smaller subset wins a tie within 0.1 percentage point.",),
    )


_COMPONENTS: tuple[tuple[str, str, str, str], ...] = (
    ("tensor_bf16_flop", "tensor-core flop, BF16 (wgmma, random data)", "pJ/flop", ""),
    ("tensor_fp16_flop", "tensor-core flop, FP16 (wgmma, random data)", "pJ/flop", ""),
    ("tensor_fp8_flop", "tensor-core flop, FP8 e4m3 (wgmma, random data)", "pJ/flop", ""),
    ("tensor_fp64_flop", "tensor-core flop, FP64 (DMMA)", "pJ/flop", ""),
    ("l1_byte", "L1 byte (beyond L2 traffic)", "pJ/B", "l1"),
)


def _components_table(model: Mapping[str, Any]) -> Table:
    eps: Mapping[str, Any] = model.get("eps") or {}
    sig: Mapping[str, Any] = model.get("eps_sigma") or {}
    src: Mapping[str, Any] = model.get("sources") or {}
    terms = set(model.get("terms") or [])
    rows: list[tuple[Cell, ...]] = []
    for key, label, unit, optional in _COMPONENTS:
        v, s = _f(eps.get(key)), _f(sig.get(key))
        rows.append(
            (
                label,
                unit,
                fmt_sig(1e12 * v, 3) if math.isfinite(v) else Missing(_NOT_MEASURED),
                fmt_sig(1e12 * s, 2) if math.isfinite(s) else Missing(_NO_SIGMA),
                "yes" if not optional or optional in terms else "no (not chosen)",
                str(src.get(key) or ""),
            )
        )
    a, b = _f(model.get("activity_intercept")), _f(model.get("activity_slope"))
    for label, v in (("operand activity: intercept a of ε(α) = a + b·α", a), ("operand activity: slope b", b)):
        rows.append(
            (
                label,
                "pJ/flop",
                fmt_sig(1e12 * v, 3) if math.isfinite(v) else Missing("no toggle sweep in this run"),
                Missing("a line through the toggle sweep; no uncertainty"),
                "yes" if "activity" in terms else "no (not chosen)",
                str(src.get("activity") or ""),
            )
        )
    return Table(
        ("component", "unit", "ε", "± 1σ", "in the model", "from"),
        tuple(rows),
        caption="The model's new components (this run's microbenchmarks; energy per counted unit above π0)",
        notes=(
            "ε = (E − π0·T)/count. The activity factor scales the tensor-core terms by ε(α)/ε(½); the kernels here "
            "multiply independent random data, α = ½, so it is 1 for them.",
        ),
    )


_CLASSES = (("tensor", "tensor cores"), ("cuda", "CUDA cores (FP32/FP64)"), ("memory", "memory (DRAM, L2, L1, shared)"))


def _eta_table(model: Mapping[str, Any]) -> Table:
    eta: Mapping[str, Any] = model.get("eta") or {}
    ratios: Mapping[str, Any] = (model.get("choices") or {}).get("eta_ratios") or {}
    rows = tuple(
        (
            label,
            fmt_sig(_f(eta.get(cls)), 3) if math.isfinite(_f(eta.get(cls))) else Missing("no η recorded"),
            str(len(ratios.get(cls) or [])),
            ", ".join(fmt_sig(_f(r), 3) for r in ratios.get(cls) or []) or "none: η = 1",
        )
        for cls, label in _CLASSES
    )
    return Table(
        ("bounding unit's class", "η", "calibration kernels", "T_roofline/T_measured of each"),
        rows,
        caption="Time-roofline efficiency η per class (median over the calibration kernels the class bounds)",
    )


def _kernel_table(rec: MlRecord, caption: str) -> Table:
    rows: list[tuple[Cell, ...]] = []
    keys: list[tuple[SortKey, ...]] = []
    for r in rec.rows:
        name, group, bound = str(r.get("name")), str(r.get("group")), str(r.get("bound") or "")
        group_label = "held-out" if group == "heldout" else group
        capped = "yes" if r.get("cap_active_measured") in (True, "true", "True") else "no"
        e = _f(r.get("measured_energy_j"))
        rows.append(
            (
                f"`{name}`",
                group_label,
                bound or Missing("no counted unit"),
                capped,
                fmt_sig(e, 4) if math.isfinite(e) else Missing("not measured"),
                _pct(r.get("error_measured_time"), "no measured time"),
                _pct(r.get("error_predicted_time"), "no predicted time"),
                _pct(r.get("time_error"), "no predicted time"),
            )
        )
        keys.append(
            (
                name,
                group_label,
                bound or None,
                capped,
                _key(e),
                _key(r.get("error_measured_time")),
                _key(r.get("error_predicted_time")),
                _key(r.get("time_error")),
            )
        )
    return Table(
        (
            "kernel",
            "group",
            "bound",
            "capped",
            "measured E (J)",
            "E error, measured T",
            "E error, predicted T",
            "T error",
        ),
        tuple(rows),
        caption=f"{caption}, {len(rows)} kernels (roofline.html: click a header to sort)",
        notes=(
            "Error = (predicted − measured)/measured. 'bound': the unit whose count/rate bounds the time roofline. "
            "'capped': the uncapped prediction at the measured time exceeds the cap, so E = P_cap·T.",
        ),
        sort_keys=tuple(keys),
    )


# --------------------------------------------------------------------------- the section


def _board(manifest_gpu: Mapping[str, Any]) -> str:
    name = str(manifest_gpu.get("name") or "GPU")
    uuid = str(manifest_gpu.get("uuid") or "")
    drv = manifest_gpu.get("driver_version")
    return f"{name} {uuid[:12]}".rstrip() + (f", driver {drv}" if drv else "")


def _frozen_blocks(rec: MlRecord, board: str) -> list[Block]:
    m = rec.model.get("model") or {}
    c = m.get("choices") or {}
    pi0, sd = _f(m.get("pi0_w")), _f(m.get("pi0_sigma_w"))
    pi0_text = f"{pi0:.1f} ± {sd:.1f} W" if math.isfinite(sd) else f"{pi0:.1f} W"
    terms = "+".join(m.get("terms") or []) or "base (none of the optional terms)"
    n_cal = len(c.get("calibration_kernels") or [])
    n_held = int((rec.model.get("heldout") or {}).get("kernels") or 0)
    return [
        Heading(FROZEN_TITLE, 3),
        Para(
            "The counted model of docs/roofline.md §10b: ncu counts × this run's component energies, with tensor-core, "
            f"L1 and operand-activity terms. Every choice was made on the {n_cal} calibration kernels, written down "
            f"before the {n_held} held-out kernels were scored once; these are the frozen figures ({rec.source})."
        ),
        Bullets(
            (
                f"Board: {board}.",
                f"π0 = {pi0_text} (the sweep's fit); power limit {_f(m.get('power_limit_w')):.0f} W.",
                f"Terms chosen on calibration: {terms}.",
            )
        ),
        _summary_table(rec, "Frozen protocol against the targets"),
        _scores_table(rec, "the calibration kernels (median |error| of E at the measured time)"),
        _components_table(m),
        _eta_table(m),
        _kernel_table(rec, "Frozen protocol, every kernel"),
    ]


def _same_machine(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """π0, components and η agree (to rounding: the two files may come from different machines' arithmetic)."""

    def flat(m: Mapping[str, Any]) -> dict[str, float]:
        out = {"pi0_w": _f(m.get("pi0_w"))}
        for group in ("eps", "eta"):
            out |= {f"{group}.{k}": _f(v) for k, v in (m.get(group) or {}).items()}
        return out

    fa, fb = flat(a), flat(b)
    return fa.keys() == fb.keys() and all(
        math.isclose(fa[k], fb[k], rel_tol=1e-9) or not (math.isfinite(fa[k]) or math.isfinite(fb[k])) for k in fa
    )


def _posthoc_blocks(rec: MlRecord, frozen: MlRecord) -> list[Block]:
    m = rec.model.get("model") or {}
    c = m.get("choices") or {}
    capped: Mapping[str, Any] = c.get("capped_calibration_kernels") or {}
    n_sel = len(c.get("term_selection_kernels") or [])
    terms = "+".join(m.get("terms") or []) or "base"
    same = _same_machine(frozen.model.get("model") or {}, m)
    cap = (
        f"{_f(c.get('capped_power_w')):.1f} W, the median measured power of the {len(capped)} calibration kernels "
        f"whose uncapped prediction exceeds the nominal limit ({', '.join(f'`{k}`' for k in capped)})"
        if capped
        else f"{_f(c.get('capped_power_w')):.1f} W: no calibration kernel is capped, so the nominal limit"
    )
    label = str(rec.model.get("label") or c.get("label") or POSTHOC_LABEL)
    return [
        Heading(POSTHOC_TITLE, 4),
        Para(
            f"**{label}.** The frozen protocol plus two changes, both made on calibration kernels only: (a) the cap is "
            "the observed capped power instead of the nominal limit; (b) the optional terms are scored on the "
            "uncapped calibration kernels (a capped kernel's prediction is P·T whatever the terms). Not a frozen "
            f"result: on the board it was chosen on, its held-out figures are not out of sample ({rec.source})."
        ),
        Bullets(
            (
                f"Cap: {cap}; nominal limit {_f(c.get('power_limit_nominal_w')):.0f} W.",
                f"Terms chosen on the {n_sel} uncapped calibration kernels: {terms}.",
                "Components, π0 and η: as in the frozen model above."
                if same
                else "Components differ from the frozen model's (see the model file).",
            )
        ),
        _summary_table(rec, "Post hoc against the targets"),
        _scores_table(rec, "the uncapped calibration kernels (median |error| of E at the measured time)"),
        _kernel_table(rec, "Post hoc, every kernel"),
    ]


def ml_section(run_dir: Path, params: ParameterSet | None, manifest_gpu: Mapping[str, Any]) -> list[Block]:
    """The blocks of the ML section (empty when the run has no ML kernels)."""
    recs = read_ml_records(run_dir, params)
    if recs is None:
        return []
    frozen, posthoc = recs
    blocks = _frozen_blocks(frozen, _board(manifest_gpu))
    if posthoc is not None:
        blocks += _posthoc_blocks(posthoc, frozen)
    if (run_dir / ML_V2_FILE).is_file() and (run_dir / ML_V2_PREDICTIONS_TABLE).is_file():
        from archline.records import read_csv

        v2 = MlRecord(
            json.loads((run_dir / ML_V2_FILE).read_text()), read_csv(run_dir / ML_V2_PREDICTIONS_TABLE), ML_V2_FILE
        )
        blocks += _v2_blocks(v2)
    return blocks


def _v2_blocks(rec: MlRecord) -> list[Block]:
    """Protocol v2 (docs/roofline.md §10e), shown only where the run wrote its files."""
    m = rec.model.get("model") or {}
    c = m.get("choices") or {}
    kk: Mapping[str, Any] = c.get("cap_kappa_kernels") or {}
    sc: Mapping[str, Any] = c.get("time_source_scores_median_abs_error_predicted_time") or {}
    label = str(rec.model.get("label") or c.get("label") or "protocol v2")
    return [
        Heading(V2_TITLE, 4),
        Para(
            f"**{label}.** The post-hoc rules (a) and (b) above, plus (c) κ: a kernel whose predicted power exceeds "
            "the cap spends κ·E_dyn at the capped power, T = max(T, κ·E_dyn/(P_cap − π0)); (d) the predicted time "
            "starts from the time roofline or from Nsight Compute's duration, whichever the calibration kernels "
            f"favour ({rec.source})."
        ),
        Bullets(
            (
                f"Cap: {_f(c.get('capped_power_w')):.1f} W; κ = {_f(c.get('cap_kappa')):.3f}, the median "
                f"(E − π0·T)/E_dyn of {len(kk)} capped calibration kernels.",
                f"Time source: {c.get('time_source')} ("
                + ", ".join(f"{k} {100 * _f(v):.2f} %" for k, v in sc.items())
                + " median |error| at predicted time on calibration).",
                f"Terms chosen on the uncapped calibration kernels: {'+'.join(m.get('terms') or []) or 'base'}.",
            )
        ),
        _summary_table(rec, "Protocol v2 against the targets"),
        _kernel_table(rec, "Protocol v2, every kernel"),
    ]
