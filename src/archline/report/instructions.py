"""The instruction-energy report (Arafa): Table I for this GPU, the paper's Volta/Turing side by side, techniques."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from archline.records import RunDir
from archline.records.csvload import load_csv
from archline.records.instructions import (
    CATEGORIES,
    INSTRUCTION_TYPES,
    INSTRUCTIONS_NAME,
    TECHNIQUES_NAME,
    InstructionRow,
    TechniqueRow,
    read_instruction_rows,
    read_technique_rows,
    summarize_techniques,
)
from archline.report.arafa_reference import CITATION, VERIFICATION, Arch, match_reference
from archline.report.cells import UNRESOLVABLE
from archline.report.doc import Block, Bullets, Cell, Document, Figure, Heading, Missing, Para, Table
from archline.report.fmt import fmt_pm, fmt_sig, fmt_value
from archline.report.header import header_table
from archline.report.plots import BarGroup, plot_grouped_bars, plot_technique_errors
from archline.report.registry import RenderedReport
from archline.report.render import write_document
from archline.report.rundata import open_run

__all__ = ["build_document", "render", "technique_finding"]

PLOTS_DIR = "plots"
_PAPER_ARCHS: tuple[Arch, ...] = ("Volta", "Turing")
_UJ_TO_PJ = 1e6
_UJ_TO_NJ = 1e3


def _problem(r: InstructionRow) -> str | None:
    if r.status != "ok":
        return f"{r.instruction} at -O{r.opt_level} ({r.shape}) {r.status}" + (f": {r.note}" if r.note else "")
    return None


def _energy(r: InstructionRow | None, warp: bool = False, dynamic: bool = False) -> Cell:
    """Per-instruction energy in pJ ± 1σ; '—' when absent, failed or unresolvable (never noise)."""
    if r is None:
        return Missing("not measured in this run")
    problem = _problem(r)
    if problem:
        return Missing(problem)
    if r.resolvable is False:
        return Missing(UNRESOLVABLE)
    if dynamic:
        return fmt_pm(
            r.dynamic_energy_per_thread_instr_pj,
            r.dynamic_energy_per_thread_instr_uncertainty_pj,
            "no idle power recorded for this row",
        )
    v, u = (
        (r.energy_per_warp_instr_pj, r.energy_per_warp_instr_uncertainty_pj)
        if warp
        else (r.energy_per_thread_instr_pj, r.energy_per_thread_instr_uncertainty_pj)
    )
    return fmt_pm(v, u, "per-instruction energy not recorded in instructions.csv")


def _pct(v: float | None, reason: str) -> Cell:
    return Missing(reason) if v is None else f"{fmt_sig(v, 2)} %"


def _categories(rows: Sequence[InstructionRow]) -> list[str]:
    order = list(CATEGORIES)
    return sorted({r.category for r in rows}, key=lambda c: (order.index(c) if c in order else len(order), c))


def _index(rows: Sequence[InstructionRow]) -> dict[tuple[str, int, str, str], InstructionRow]:
    return {(r.instruction, r.opt_level, r.shape, r.technique): r for r in rows}


def _techniques(rows: Sequence[InstructionRow]) -> list[str]:
    pref = {"mtsm": 0, "counter": 1, "end_instant": 2, "sma": 3}
    return sorted({r.technique for r in rows}, key=lambda t: (pref.get(t, 9), t))


def table_i(rows: Sequence[InstructionRow], shape: str) -> Table:
    """Our Table I for one launch shape: per category, each instruction's pJ at -O3 and -O0 (per technique)."""
    idx = _index(rows)
    techs = _techniques(rows)
    full = shape != "single"
    header: list[str] = ["Instruction"]
    for opt in (3, 0):
        for t in techs:
            header.append(f"-O{opt} pJ/thread-instr ({t})" if full else f"-O{opt} pJ ({t})")
            if full:
                header.append(f"-O{opt} pJ/warp-instr ({t})")
                header.append(f"-O{opt} dynamic pJ/thread-instr ({t})")
    header += ["Repeat diff -O3", "Repeat diff -O0"]
    body: list[tuple[Cell, ...]] = []
    shaped = [r for r in rows if r.shape == shape]
    for cat in _categories(shaped):
        body.append((f"**{CATEGORIES.get(cat, cat)}**", *[""] * (len(header) - 1)))
        for instr in sorted({r.instruction for r in shaped if r.category == cat}):
            cells: list[Cell] = [f"`{instr}`"]
            for opt in (3, 0):
                for t in techs:
                    r = idx.get((instr, opt, shape, t))
                    cells.append(_energy(r))
                    if full:
                        cells.append(_energy(r, warp=True))
                        cells.append(_energy(r, dynamic=True))
            for opt in (3, 0):
                r = idx.get((instr, opt, shape, techs[0]))
                cells.append(_pct(r.repeat_diff_pct if r else None, "no repeat recorded"))
            body.append(tuple(cells))
    what = "one thread in one block" if not full else "the full GPU (every SM)"
    caption = f"Energy per instruction, {what} (shape of {CITATION})"
    notes = (
        "Arafa eq. (1): (E_kernel − E_overhead) / instructions, ± 1σ; repeat diff: |E1 − E2| / mean of two runs.",
        "Board energy includes the board's idle draw over the extra time the instructions take (as the paper's "
        "figures do); 'dynamic' removes idle power × time from both kernels first.",
    )
    return Table(tuple(header), tuple(body), caption=caption, notes=notes)


def _nj(r: InstructionRow | None) -> Cell:
    cell = _energy(r)
    if isinstance(cell, Missing) or r is None:
        return cell
    return fmt_pm(r.energy_per_thread_instr_pj, r.energy_per_thread_instr_uncertainty_pj, "", scale=1e-3)


def _ordered_instructions(rows: Sequence[InstructionRow], shape: str) -> list[str]:
    order = list(CATEGORIES)
    cats = {r.instruction: r.category for r in rows if r.shape == shape}
    return sorted(cats, key=lambda i: (order.index(cats[i]) if cats[i] in order else len(order), i))


def comparison_table(rows: Sequence[InstructionRow]) -> Table:
    """This GPU's single-thread figures beside the paper's Volta and Turing MTSM figures, all in nJ."""
    idx = _index(rows)
    tech = _techniques(rows)[0]
    header = ["Instruction", "Paper row"]
    for opt in (3, 0):
        header.append(f"This GPU -O{opt} (nJ)")
        header += [f"{a} -O{opt} (nJ)" for a in _PAPER_ARCHS]
    body: list[tuple[Cell, ...]] = []
    for instr in _ordered_instructions(rows, "single"):
        ref = match_reference(instr)
        cells: list[Cell] = [f"`{instr}`", ref.label if ref else Missing(f"no matching row in {CITATION}")]
        for opt in (3, 0):
            cells.append(_nj(idx.get((instr, opt, "single", tech))))
            for arch in _PAPER_ARCHS:
                v = ref.mtsm_uj(arch, opt) if ref else None
                cells.append(Missing(f"no matching row in {CITATION}") if v is None else fmt_sig(v * _UJ_TO_NJ, 3))
        body.append(tuple(cells))
    notes = (
        f"Paper columns: {CITATION}, MTSM figures (the second of each pair), Volta = TITAN V, "
        "Turing = TITAN RTX, CUDA 10.1, one thread in one block; printed in µJ, shown here × 10³ as nJ. "
        f"They are reference constants, not measurements of this GPU. This GPU: technique {tech}.",
    )
    return Table(
        tuple(header), tuple(body), caption="This GPU against the paper (one thread in one block)", notes=notes
    )


def category_plots(rows: Sequence[InstructionRow], plots_dir: Path) -> list[tuple[str, Path]]:
    """One grouped-bar plot per category: -O3 and -O0 pJ (single thread), paper Volta/Turing -O3 as markers."""
    idx = _index(rows)
    tech = _techniques(rows)[0] if rows else "mtsm"
    shape = "single" if any(r.shape == "single" for r in rows) else "full"
    out = []
    for cat in _categories([r for r in rows if r.shape == shape]):
        groups = []
        for instr in sorted({r.instruction for r in rows if r.category == cat and r.shape == shape}):
            vals: dict[str, tuple[float | None, float | None]] = {}
            for opt in (3, 0):
                r = idx.get((instr, opt, shape, tech))
                ok = r is not None and _problem(r) is None and r.resolvable is not False
                vals[f"-O{opt}"] = (
                    (r.energy_per_thread_instr_pj, r.energy_per_thread_instr_uncertainty_pj)
                    if ok and r is not None
                    else (None, None)
                )
            ref = match_reference(instr)
            refs: dict[str, float | None] = {}
            for a in _PAPER_ARCHS:
                v = ref.mtsm_uj(a, 3) if ref else None
                refs[f"{a} -O3 (paper)"] = None if v is None else v * _UJ_TO_PJ
            groups.append(BarGroup(instr, vals, refs))
        path = plots_dir / f"instructions_{cat}.png"
        plot_grouped_bars(
            groups,
            series=["-O3", "-O0"],
            references=[f"{a} -O3 (paper)" for a in _PAPER_ARCHS],
            ylabel=f"pJ per thread-instruction ({shape})",
            title=CATEGORIES.get(cat, cat),
            path=path,
        )
        out.append((cat, path))
    return out


def technique_finding(rows: Sequence[TechniqueRow]) -> str:
    """One sentence: does MTSM beat end-instant on this GPU, as it did in the paper?"""
    s = {t.technique: t for t in summarize_techniques(rows)}
    ref = f"paper: MTSM {VERIFICATION['mtsm'].mape_pct} % vs PAPI {VERIFICATION['end_instant'].mape_pct} %"
    if "mtsm" not in s or "end_instant" not in s:
        return "MTSM and end-instant were not both measured, so they cannot be compared."
    m, e = s["mtsm"], s["end_instant"]
    fig = f"MAPE {fmt_sig(m.mape_pct, 3)} % vs {fmt_sig(e.mape_pct, 3)} % over {m.n} and {e.n} runs"
    if m.mape_pct < e.mape_pct:
        return f"MTSM beats end-instant on this GPU ({fig}), as in the paper ({ref})."
    return f"Finding: MTSM does not beat end-instant on this GPU ({fig}), unlike the paper ({ref})."


def technique_blocks(rows: Sequence[TechniqueRow], plots_dir: Path) -> tuple[list[Block], list[Path]]:
    summary = summarize_techniques(rows)
    st = Table(
        ("Technique", "Runs", "MAPE (%)", "RMSE (J)", "Mean error (%)"),
        tuple(
            (
                t.technique,
                str(t.n),
                fmt_sig(t.mape_pct, 3),
                fmt_sig(t.rmse_j, 3),
                fmt_sig(round(t.mean_error_pct, 3) + 0.0, 3),
            )
            for t in summary
        ),
        caption="Techniques against the reference (energy counter over long repeated runs)",
        notes=(
            f"Paper (§VI-A, TITAN V against a hardware meter): MTSM MAPE {VERIFICATION['mtsm'].mape_pct}, "
            f"RMSE {VERIFICATION['mtsm'].rmse}; PAPI MAPE {VERIFICATION['end_instant'].mape_pct}, "
            f"RMSE {VERIFICATION['end_instant'].rmse} (RMSE unit not stated).",
        ),
    )
    body = tuple(
        (
            r.run,
            f"`{r.benchmark}`",
            r.technique,
            fmt_sig(r.energy_j, 4) if r.energy_j is not None else Missing("no estimate recorded"),
            fmt_pm(r.reference_energy_j, r.reference_uncertainty_j, "no reference recorded"),
            fmt_sig(r.error_pct, 3) if r.error_pct is not None else Missing("no estimate or reference"),
        )
        for r in rows
    )
    runs = Table(("Run", "Benchmark", "Technique", "Estimate (J)", "Reference (J)", "Error (%)"), body, caption="Runs")
    errors: dict[str, list[float]] = {}
    for t in summary:
        errors[t.technique] = [r.error_pct for r in rows if r.technique == t.technique and r.error_pct is not None]
    path = plot_technique_errors(errors, title="Error of each technique", path=plots_dir / "techniques.png")
    fig = Figure(f"{PLOTS_DIR}/{path.name}", "Error of each run against the reference, by technique (bar: MAPE).")
    return [Para(technique_finding(rows)), st, fig, runs], [path]


def kernels_table(rows: Sequence[InstructionRow]) -> Table:
    """What eq. (1) was computed from: each row's instruction count, times and both kernels' energies."""
    order = list(CATEGORIES)
    body: list[tuple[Cell, ...]] = []
    for r in sorted(
        rows,
        key=lambda r: (r.shape, order.index(r.category) if r.category in order else 99, r.instruction, -r.opt_level),
    ):
        absent = "not recorded in instructions.csv"
        body.append(
            (
                f"`{r.instruction}`",
                f"-O{r.opt_level}",
                r.shape,
                r.technique,
                fmt_value(r.instructions_per_launch, absent),
                fmt_value(r.time_per_launch_s, absent, scale=1e3),
                fmt_pm(r.kernel_energy_j, r.kernel_energy_uncertainty_j, absent),
                fmt_pm(r.overhead_energy_j, r.overhead_energy_uncertainty_j, absent),
                r.status,
            )
        )
    header = (
        "Instruction",
        "Opt",
        "Shape",
        "Technique",
        "Instr/launch",
        "ms/launch",
        "Kernel (J)",
        "Overhead (J)",
        "Status",
    )
    return Table(header, tuple(body), caption="Kernel and overhead energies per launch")


def _flags(rows: Sequence[InstructionRow]) -> list[Block]:
    items = []
    for r in rows:
        where = f"`{r.instruction}` -O{r.opt_level} {r.shape} ({r.technique})"
        if _problem(r):
            items.append(f"{where}: {r.status}" + (f" — {r.note}" if r.note else ""))
        if r.throttled:
            items.append(f"{where}: throttled")
        if r.verified is False:
            items.append(f"{where}: output not verified")
        if r.resolvable is False and not _problem(r):
            items.append(f"{where}: below what the sensor can resolve — not printed")
    return [Bullets(tuple(items))] if items else [Para("No row was throttled, unverified, unresolvable or failed.")]


def build_document(run: RunDir, out_dir: Path) -> tuple[Document, list[Path]]:
    rows = read_instruction_rows(run.path / INSTRUCTIONS_NAME)
    table = load_csv(run.path / INSTRUCTIONS_NAME, INSTRUCTION_TYPES, (), what="instruction-energy table")
    tpath = run.path / TECHNIQUES_NAME
    techs = read_technique_rows(tpath) if tpath.is_file() else None
    m = run.manifest
    plots = out_dir / PLOTS_DIR
    files: list[Path] = []
    doc = Document(f"Instruction energy: {m.gpu.get('name') or 'unknown GPU'}")
    doc.add(
        Para(
            f"Every figure is read from, or computed from, `{run.path}` (instructions.csv, techniques.csv); "
            f"the paper's values are reference constants from {CITATION}. A missing value shows as — with its reason."
        ),
        Heading("Run"),
        header_table(m, table.rows, f"{m.status}: {len(rows)} instruction rows"),
    )
    for shape, title in (("single", "one thread in one block"), ("full", "full GPU")):
        if any(r.shape == shape for r in rows):
            doc.add(Heading(f"Table I for this GPU: {title}"), table_i(rows, shape))
    if any(r.shape == "single" for r in rows):
        doc.add(Heading("Against the paper: Volta and Turing"), comparison_table(rows))
    doc.add(Heading("By category"))
    for cat, path in category_plots(rows, plots):
        files.append(path)
        doc.add(Figure(f"{PLOTS_DIR}/{path.name}", f"{CATEGORIES.get(cat, cat)}: pJ per thread-instruction."))
    doc.add(Heading("Measurement techniques"))
    if techs:
        blocks, f = technique_blocks(techs, plots)
        files += f
        doc.add(*blocks)
    else:
        doc.add(Para("This run has no techniques.csv: the techniques were not compared."))
    doc.add(Heading("Kernels"), kernels_table(rows))
    doc.add(Heading("Flags"), *_flags(rows))
    return doc, files


def render(run: RunDir | Path | str, out_dir: Path | None = None) -> RenderedReport:
    """Render ``report.md``, ``report.html`` and plots of an instruction-energy run into ``out_dir``."""
    rd = open_run(run)
    out = Path(out_dir) if out_dir is not None else rd.path
    doc, files = build_document(rd, out)
    md, html = write_document(doc, out)
    warnings = [] if rd.manifest.status == "complete" else [f"run status is {rd.manifest.status!r}"]
    return RenderedReport(rd.manifest.kind, md, html, (md, html, *files), rd.manifest.status, tuple(warnings))
