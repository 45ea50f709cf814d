"""CLI: ``archline monitor``: a live view of every GPU power source, and recording to a trace file."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer
from rich.live import Live
from rich.table import Table

from archline.cli._common import console, gpu_indices, handle_errors
from archline.errors import InputError

__all__ = ["register"]


def _latest(r: Any) -> float | None:
    return float(r.value[-1]) if r is not None and len(r) else None


def _view(samplers: dict[int, Any], t0: float) -> Table:
    from archline.hw.nvml import decode_throttle
    from archline.measurement.energy import counter_energy_j

    t = Table(title=f"archline monitor — {time.time() - t0:6.1f} s")
    for col in ("GPU", "buffer W", "instant W", "average W", "energy J", "SM MHz", "°C", "throttle"):
        t.add_column(col, justify="right")
    for g, s in samplers.items():
        rec = s.recording()
        en = rec.get("nvml.energy")
        e = None
        if en is not None and len(en) >= 2:
            e = counter_energy_j(en, float(en.t_s[0]), float(en.t_s[-1]))
        thr = _latest(rec.get("nvml.throttle"))
        names = ",".join(n for n in decode_throttle(int(thr))[0] if n != "gpu_idle") if thr is not None else ""

        def f(v: float | None, fmt: str = "{:.1f}") -> str:
            return "—" if v is None else fmt.format(v)

        t.add_row(
            str(g),
            f(_latest(rec.get("nvml.buffer"))),
            f(_latest(rec.get("nvml.instant"))),
            f(_latest(rec.get("nvml.average"))),
            f(e, "{:.2f}"),
            f(_latest(rec.get("nvml.sm_clock")), "{:.0f}"),
            f(_latest(rec.get("nvml.temperature")), "{:.0f}"),
            names or "—",
        )
    return t


def register(app: typer.Typer) -> None:
    """Add ``archline monitor``."""

    @app.command("monitor")
    @handle_errors
    def monitor(
        gpu: str = typer.Option("0", "--gpu", help="GPU index, or 'all'."),
        duration: float = typer.Option(0.0, "--duration", help="Seconds to run (0: until Ctrl-C)."),
        output: Path | None = typer.Option(
            None, "-o", "--output", "--out", help="Write the recorded trace (one file per GPU with 'all')."
        ),
    ) -> None:
        """Show live GPU power from every NVML source; optionally record it to a trace file."""
        from archline.hw.nvml import open_sources
        from archline.measurement.sampler import Sampler
        from archline.records.traces import write_trace_csv

        if duration < 0:
            raise InputError("--duration must be ≥ 0")
        gpus = gpu_indices(gpu)
        samplers: dict[int, Sampler] = {}
        recs = {}
        interrupted = False
        try:
            for g in gpus:
                sources = open_sources(g)
                try:
                    samplers[g] = Sampler(sources, settle_s=0.05).start()
                except BaseException:
                    for src in sources:
                        src.close()
                    raise
            t0 = time.time()
            with Live(_view(samplers, t0), console=console, refresh_per_second=4) as live:
                while duration == 0 or time.time() - t0 < duration:
                    time.sleep(0.25)
                    live.update(_view(samplers, t0))
        except KeyboardInterrupt:
            interrupted = True
        finally:
            # Every GPU opened so far is closed, also when a later one failed to open.
            for g, s in samplers.items():
                try:
                    recs[g] = s.stop()
                finally:
                    s.close()
        if output is not None:
            for g, rec in recs.items():
                path = output if len(gpus) == 1 else output.with_name(f"{output.stem}.gpu{g}{output.suffix or '.csv'}")
                write_trace_csv(path, rec)
                console.print(f"wrote {path}")
        if interrupted:
            raise typer.Exit(130)
