"""The characterization report of a run directory: header, MIPP tables, sweeps, spec chart, targets and flags."""

from __future__ import annotations

from pathlib import Path

from archline.records import RunDir
from archline.report.cells import Ctx
from archline.report.doc import Document, Heading, Para, Raw
from archline.report.header import header_table
from archline.report.registry import RenderedReport
from archline.report.render import write_document
from archline.report.rundata import RunData, load_run_data
from archline.report.sections import (
    above_spec_blocks,
    flag_blocks,
    status_text,
    sweep_blocks,
    targets_blocks,
    throughput_blocks,
)
from archline.report.tables import arithmetic_table, detail_table, group_rows, memory_table, sync_table
from archline.report.tensor import latency_blocks, tensor_blocks

__all__ = ["PLOTS_DIR", "build_document", "render"]

PLOTS_DIR = "plots"
_COVERED = ("arithmetic", "memory", "sync", "tensor")


def build_document(data: RunData, out_dir: Path, *, banner: str | None = None) -> tuple[Document, list[Path]]:
    """Assemble the report (writing its plots under ``out_dir/plots``); return it and the plot files."""
    m = data.manifest
    gpu = str(m.gpu.get("name") or "unknown GPU")
    ctx = Ctx(
        sm_count=data.sm_count,
        compute_capability=data.compute_capability,
        missing=data.missing,
        status=m.status,
    )
    plots = out_dir / PLOTS_DIR
    files: list[Path] = []
    doc = Document(f"GPU characterization: {gpu}")
    if banner:
        doc.add(Para(banner))
    doc.add(
        Para(
            f"Every figure below is read from, or computed from, the run directory `{data.run.path}` "
            "(manifest.json, results.csv, targets.csv). A missing value shows as — with its reason "
            "under the table. Energies are board energy per kernel launch, ± 1σ."
        ),
        Heading("Run"),
        header_table(m, data.rows, status_text(data)),
        Heading("Arithmetic"),
        arithmetic_table(data.rows, ctx),
        *above_spec_blocks(data.rows),
    )
    blocks, f = throughput_blocks(data, plots, PLOTS_DIR)
    files += f
    doc.add(*blocks)
    arith = group_rows(data.rows, "arithmetic")
    if arith:
        doc.add(detail_table(arith, ctx, "All arithmetic benchmarks"))
    doc.add(Heading("Memory"), memory_table(data.rows, ctx))
    blocks, f = sweep_blocks(data, ctx, plots, PLOTS_DIR)
    files += f
    doc.add(Heading("Sweeps"), *blocks)
    doc.add(Heading("Synchronisation"))
    if group_rows(data.rows, "sync"):
        doc.add(sync_table(data.rows, ctx))
    else:
        doc.add(Para("No synchronisation benchmarks in this run."))
    if group_rows(data.rows, "tensor") or group_rows(data.rows, "tensor", sweeps=True):
        doc.add(Heading("Tensor cores and operand data"), *tensor_blocks(data.rows, ctx))
    lat = latency_blocks(data.run.path)
    if lat:
        doc.add(Heading("Latency"), *lat)
    others = [r for r in data.rows if r.text("group") not in _COVERED]
    if others:
        doc.add(Heading("Other benchmarks"), detail_table(others, ctx, "Benchmarks of other groups"))
    doc.add(Heading("Targets"), *targets_blocks(data.targets))
    doc.add(Heading("Flags"), *flag_blocks(data.rows))
    return doc, files


def _roofline_section(run_dir: Path, out: Path) -> tuple[Raw | None, tuple[Path, ...]]:
    """The energy-roofline section when the run holds a roofline sweep (``characterize --roofline``)."""
    from archline.model.build import SWEEP_TABLE
    from archline.report.roofline import render_roofline

    if not (run_dir / SWEEP_TABLE).is_file():
        return None, ()
    sec = render_roofline(run_dir, out)
    return Raw(sec.markdown, sec.html_fragment), (sec.markdown_path, sec.html_path, *sec.plot_paths)


#: A benchmark's mean power above the board's power limit by this factor is not a reading to trust (bursts between
#: idle gaps reach about 1.45 × the limit on H100s: docs/attribution.md, "Power limit and burst ceiling").
SUSPICIOUS_POWER_FACTOR = 2.0


def suspicious_rows(data: RunData) -> list[str]:
    """Warnings for values no measurement gives: a time that is not positive, a negative energy or power, a mean
    power above twice the board's power limit; and a manifest that names no GPU. Each names results.csv's line."""
    out: list[str] = []
    gpu = data.manifest.gpu if isinstance(data.manifest.gpu, dict) else {}
    if not gpu.get("uuid"):
        out.append("manifest.json names no GPU (no uuid): which board measured this run is unknown")
    state = data.manifest.state_before if isinstance(data.manifest.state_before, dict) else {}
    limit = state.get("enforced_power_limit_w") or state.get("power_limit_w") or gpu.get("default_power_limit_w")
    odd: list[str] = []
    for r in data.rows:
        t, e, p = r.num("time_s"), r.num("energy_j"), r.num("avg_power_w")
        why = (
            "time ≤ 0" if t is not None and t <= 0 else
            "negative energy" if e is not None and e < 0 else
            "negative power" if p is not None and p < 0 else
            f"{p:.0f} W, above {SUSPICIOUS_POWER_FACTOR:g} × the {float(limit):.0f} W limit"
            if p is not None and isinstance(limit, (int, float)) and limit > 0 and p > SUSPICIOUS_POWER_FACTOR * limit
            else ""
        )  # fmt: skip
        if why:
            odd.append(f"results.csv:{r.line} {r.text('name')} ({why})")
    if odd:
        out.append(f"{len(odd)} row(s) hold values no measurement gives: {'; '.join(odd[:5])}"
                   + (f"; and {len(odd) - 5} more" if len(odd) > 5 else ""))  # fmt: skip
    return out


def render(run: RunDir | Path | str, out_dir: Path | None = None, *, banner: str | None = None) -> RenderedReport:
    """Render ``report.md``, ``report.html`` and ``plots/*.png`` of a characterization run into ``out_dir``."""
    data = load_run_data(run)
    out = Path(out_dir) if out_dir is not None else data.run.path
    doc, files = build_document(data, out, banner=banner)
    section, roofline_files = _roofline_section(data.run.path, out)
    if section is not None:
        doc.add(section)
    md, html = write_document(doc, out)
    files = [*files, *roofline_files]
    warnings: list[str] = []
    if data.manifest.status != "complete":
        warnings.append(f"run status is {data.manifest.status!r}: {status_text(data)}")
    bad = [r.text("name") for r in data.rows if (r.text("status") or "ok") != "ok"]
    if bad:
        warnings.append(f"{len(bad)} benchmark(s) not ok: {', '.join(bad)}")
    warnings += suspicious_rows(data)
    return RenderedReport(
        kind=data.manifest.kind,
        markdown=md,
        html=html,
        files=(md, html, *files),
        status=data.manifest.status,
        warnings=tuple(warnings),
    )
