"""The report of an ``archline run`` over several GPUs: the GPUs side by side, the ranks, then each GPU's kernels.

It reads the tables the run wrote (``gpus.csv``, ``processes.csv``, ``kernels.csv`` with a gpu column)
and the manifest (each GPU's state before and after); each GPU's own run directory (``gpu<i>/``) gets
its own full report (timeline, trace) beside it, linked from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from archline.errors import RunDirError
from archline.records import RunDir
from archline.records.attribution import AttributionResult
from archline.records.multi_run import MultiRunTables, gpu_dir_name
from archline.report.doc import Bullets, Cell, Document, Heading, Missing, Para, SortKey, Table
from archline.report.fmt import fmt_sig, is_number
from archline.report.registry import RenderedReport, Renderer
from archline.report.render import write_document
from archline.report.run_tables import kernel_table, unattributed_table

__all__ = ["render_multi_run_report"]

NOT_RECORDED = "not recorded for this GPU"


def _sig(v: Any, missing: str = NOT_RECORDED, scale: float = 1.0) -> Cell:
    return fmt_sig(float(v) * scale) if is_number(v) else Missing(missing)


def _text(v: Any) -> str:
    return "" if v is None else str(v)


def _key(v: Any) -> SortKey:
    return float(v) if is_number(v) else (None if v is None else str(v))


def _state(m: Any, gpu: int) -> Mapping[str, Any]:
    s = (m.state_before or {}).get(gpu_dir_name(gpu))
    return s if isinstance(s, Mapping) else {}


def _gpu_table(run: RunDir, gpus: Sequence[Mapping[str, Any]]) -> Table:
    header = ("GPU", "UUID", "model", "driver", "ranks", "energy (J)", "kernels (J)", "NCCL (J)", "identifiable (%)",
              "span (s)", "mean power (W)", "power limit (W)", "SM clock (MHz)", "persistence", "sensor model",
              "status")  # fmt: skip
    cells: list[tuple[Cell, ...]] = []
    keys: list[tuple[SortKey, ...]] = []
    for g in gpus:
        st = _state(run.manifest, int(g["gpu"]))
        share = g.get("identifiable_share")
        share_pct = 100 * float(share) if isinstance(share, (int, float)) and is_number(share) else None
        persistence = st.get("persistence_mode")
        row: tuple[Any, ...] = (
            str(g["gpu"]), str(g.get("gpu_uuid", ""))[:12], _text(g.get("name")), _text(g.get("driver_version")),
            _text(g.get("ranks")), g.get("energy_j"), g.get("kernel_energy_j"), g.get("comm_energy_j"),
            share_pct, g.get("span_s"), g.get("mean_power_w"),
            st.get("enforced_power_limit_w") or st.get("power_limit_w") or g.get("power_limit_w"),
            st.get("sm_clock_mhz"), None if persistence is None else ("on" if persistence else "off"),
            _text(g.get("sensor_model")) or "none (counter windows)", _text(g.get("status")),
        )  # fmt: skip
        cells.append(tuple(_sig(v) if i in (5, 6, 7, 8, 9, 10, 11, 12) else _text(v) for i, v in enumerate(row)))
        keys.append(tuple(_key(v) for v in row))
    return Table(
        header,
        tuple(cells),
        caption="Each GPU, attributed against its own sensors (report.html: click a header to sort)",
        notes=(
            "energy: the GPU's energy counter over its analysed span, which its rows add up to; kernels: its kernel, "
            "copy and memset rows, NCCL included; identifiable: share of kernel energy in rows the data identified; "
            "clock, power limit and persistence as archline found them before the run (it never changes them)",
        ),
        sort_keys=tuple(keys),
    )


def _rank_table(procs: Sequence[Mapping[str, Any]]) -> Table:
    header = ("rank", "local rank", "pid", "GPUs (NVML)", "CUDA devices → UUID", "CUDA_VISIBLE_DEVICES", "calls",
              "busy (s)", "kernel energy (J)", "NCCL energy (J)")  # fmt: skip
    ordered = sorted(procs, key=lambda p: (p.get("rank") is None, p.get("rank") or 0, p.get("pid") or 0))
    cells = tuple(
        (
            _text(p.get("rank")), _text(p.get("local_rank")), _text(p.get("pid")), _text(p.get("gpus")),
            _text(p.get("devices")), _text(p.get("cuda_visible_devices")), _text(p.get("calls")),
            _sig(p.get("busy_s"), "no activity"), _sig(p.get("kernel_energy_j"), "no kernel on a measured GPU"),
            _sig(p.get("comm_energy_j"), "no kernel on a measured GPU"),
        )
        for p in ordered
    )  # fmt: skip
    return Table(
        header,
        cells,
        caption="Each traced CUDA process (rank) and the GPUs its kernels ran on, mapped by UUID",
        notes=(
            "a process's energy is its share of its GPUs' kernel rows; a row that several processes ran on one GPU "
            "is split between them by their time in it",
        ),
    )


def _confidence(run: RunDir, gpu: int) -> float:
    try:
        return AttributionResult.read(run.path / gpu_dir_name(gpu)).confidence
    except RunDirError:
        return 0.95


def _gpu_sections(
    run: RunDir, out_dir: Path, tables: MultiRunTables, single: Renderer, files: list[Path], warnings: list[str]
) -> list[Any]:
    blocks: list[Any] = []
    for g in tables.gpus:
        i = int(g["gpu"])
        sub = gpu_dir_name(i)
        rows = [r for r in tables.kernels if r.get("gpu") == i]
        blocks.append(Heading(f"GPU {i}: {_text(g.get('name'))} ({str(g.get('gpu_uuid', ''))[:12]}), ranks "
                              f"{_text(g.get('ranks')) or 'none'}"))  # fmt: skip
        try:
            rep = single(RunDir.open(run.path / sub), out_dir / sub)
            files += [rep.markdown, *([rep.html] if rep.html else []), *rep.files]
            link = f"Its own report, with the power timeline and every call: `{sub}/report.html` (`{sub}/report.md`)."
        except RunDirError as exc:
            warnings.append(f"GPU {i}: no report of its own ({exc})")
            link = f"Its own run directory `{sub}/` cannot be reported ({exc})."
        blocks.append(Para(f"Energy {_text(_sig(g.get('energy_j')))} J over {_text(_sig(g.get('span_s')))} s. {link}"))
        if rows:
            conf = _confidence(run, i)
            blocks += [kernel_table(rows, conf), unattributed_table(rows, conf)]
    return blocks


def render_multi_run_report(run: RunDir, out_dir: Path, single: Renderer) -> RenderedReport:
    """``archline report`` for an ``archline run`` over several GPUs: report.md and report.html with the GPUs,
    the ranks and each GPU's kernels, and each GPU's own report in ``gpu<i>/`` (written by ``single``, the
    renderer of a one-GPU run)."""
    m = run.manifest
    try:
        tables = MultiRunTables.read(run.path)
    except RunDirError as exc:
        raise RunDirError(f"{run.path}: a run over several GPUs without its tables ({exc})") from None
    files: list[Path] = []
    warnings: list[str] = []
    extra = m.extra or {}
    total = extra.get("total_energy_j")
    n = len(tables.gpus)
    doc = Document(f"GPU energy by kernel on {n} GPUs: `{' '.join(m.command) if m.command else '(Python API)'}`")
    doc.add(Para(
        f"Run of {m.created_utc} on {m.host.get('hostname', '?')} ({m.status}, tracer {extra.get('tracer', '?')}): "
        f"{len(tables.processes)} traced processes on {n} GPUs, "
        f"total {_text(_sig(total, 'unknown'))} J over all GPUs"
        + (f", program {fmt_sig(float(extra['program_s']))} s" if is_number(extra.get("program_s")) else "")
        + ". Every kernel is placed on the GPU whose UUID its process's device has (never by CUDA ordinal), and "
        "each GPU's kernels are attributed against that GPU's own sensors and sensor model."
    ))  # fmt: skip
    doc.add(Heading("GPUs"), _gpu_table(run, tables.gpus))
    doc.add(Heading("Ranks"), _rank_table(tables.processes) if tables.processes else Para("No process was traced."))
    blocks = _gpu_sections(run, out_dir, tables, single, files, warnings)
    notes = [*warnings, *m.notes]
    if notes:
        doc.add(Heading("Notes"), Bullets(tuple(dict.fromkeys(notes))))
    doc.add(*blocks)
    md, html = write_document(doc, out_dir)
    return RenderedReport(
        kind=m.kind,
        markdown=md,
        html=html,
        files=tuple(files),
        status=m.status,
        warnings=tuple(warnings),
        extra={"total_energy_j": total, "gpus": n},
    )
