"""CLI: `archline report DIR [-o OUT] [--json]` rebuilds a run directory's report on any machine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from archline.cli._common import console, err_console, handle_errors, print_json
from archline.cli.tables import Col, fit_table
from archline.errors import InputError

__all__ = ["register"]

_DEFAULT_OUT = Path("archline-report")


def _list(json_out: bool) -> None:
    from archline.report.shipped import list_shipped, shipped_roots

    runs = list_shipped()
    if json_out:
        print_json(
            {
                "roots": [str(r) for r in shipped_roots()],
                "runs": [
                    {"key": r.key, "kind": r.kind, "status": r.status, "gpu": r.gpu_name, "path": str(r.path)}
                    for r in runs
                ],
            }
        )
        return
    if not runs:
        console.print("No shipped recorded runs found.")
        return
    # Names wrap, never get cut; the folder they live in is said once, below (full paths: --json).
    cols = [Col("run (give it to archline report)", "name"), Col("kind", "text"), Col("status", "text", drop=1)]
    t, _ = fit_table(
        [*cols, Col("GPU", "text", drop=2)],
        [[escape(r.key), r.kind, r.status, escape(r.gpu_name)] for r in runs],
        console=console,
        title="Shipped recorded runs",
    )
    console.print(t)
    roots = sorted({str(r.path.parents[len(Path(r.key).parts) - 1]) for r in runs})
    console.print(f"under {', '.join(roots)}", soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add this module's commands to app."""

    @app.command("report")
    @handle_errors
    def report(
        run_dir: Annotated[
            str | None,
            typer.Argument(
                metavar="DIR",
                help="Run directory (or a shipped run such as h100/characterize). "
                "Without it, the default shipped characterization run.",
                show_default=False,
            ),
        ] = None,
        out: Annotated[
            Path | None,
            typer.Option(
                "-o",
                "--out",
                "--output",
                help="Folder for report.md, report.html and plots/ (default: the run directory itself; "
                "for a shipped run, ./archline-report).",
            ),
        ] = None,
        list_runs: Annotated[bool, typer.Option("--list", help="List the shipped recorded runs and exit.")] = False,
        json_out: Annotated[bool, typer.Option("--json", help="Print where the report is as JSON.")] = False,
        refresh_targets: Annotated[
            str | None,
            typer.Option(
                "--refresh-targets",
                metavar="REASON",
                help="Re-evaluate a characterize run's targets.csv from its own tables first (noted in its manifest).",
            ),
        ] = None,
    ) -> None:
        """Rebuild the report of a run directory (characterize, instructions, or any registered kind)."""
        from archline.report.registry import RenderedReport, render_run
        from archline.report.shipped import find_shipped, render_shipped_default_report

        if list_runs:
            _list(json_out)
            return
        rendered: RenderedReport | None = None
        if out is not None and run_dir is not None and (out / "manifest.json").is_file():
            from archline.report.shipped import same_run

            found = None if Path(run_dir).exists() else find_shipped(run_dir)
            src = Path(run_dir) if found is None else found.path
            if out.resolve() != src.resolve() and not same_run(out / "manifest.json", src / "manifest.json"):
                raise InputError(
                    f"{out}: holds another run directory; its report would mix two runs (-o another folder)"
                )
        shipped_run = run_dir is None or (not Path(run_dir).exists() and find_shipped(run_dir) is not None)
        if refresh_targets and shipped_run:
            raise InputError("--refresh-targets needs a run directory of your own (a shipped run is read-only)")
        if run_dir is None:
            rendered = render_shipped_default_report(out or _DEFAULT_OUT)
        else:
            path = Path(run_dir)
            shipped = None if path.exists() else find_shipped(run_dir)
            if shipped is not None:
                target = out or _DEFAULT_OUT / shipped.key.replace("/", "-")
                rendered = render_run(shipped.path, target)
            else:
                if refresh_targets:
                    from archline.characterize.suite import refresh_targets as _refresh
                    from archline.records import RunDir

                    _refresh(RunDir.open(path), refresh_targets)
                rendered = render_run(path, out)
        if json_out:
            print_json(rendered.to_json())
            return
        console.print(f"report: {rendered.markdown}", soft_wrap=True, markup=False)
        if rendered.html is not None:
            console.print(f"html:   {rendered.html}", soft_wrap=True, markup=False)
        for w in rendered.warnings:
            err_console.print(f"archline: warning: {w}", soft_wrap=True, markup=False)
