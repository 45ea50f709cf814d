"""CLI: ``archline monitor``: a live view of every GPU power source, and recording to a trace file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.live import Live
from rich.table import Table

from archline.cli._common import Deps, console, deps, gpu_indices, handle_errors
from archline.cli.tables import Col, fit_table
from archline.core.readings import Clock
from archline.errors import InputError

__all__ = ["register"]


def _latest(r: Any) -> float | None:
    return float(r.value[-1]) if r is not None and len(r) else None


def _view(samplers: dict[int, Any], elapsed_s: float) -> Table:
    from archline.hw.nvml import decode_throttle
    from archline.measurement.energy import counter_energy_j

    cols = [
        Col("GPU", "text"),
        Col("buffer W"),
        Col("instant W", drop=2),
        Col("average W", drop=1),
        Col("energy J"),
        Col("SM MHz", drop=3),
        Col("°C", drop=4),
        Col("throttle", "text"),
    ]
    rows = []
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

        rows.append(
            [
                str(g),
                f(_latest(rec.get("nvml.buffer"))),
                f(_latest(rec.get("nvml.instant"))),
                f(_latest(rec.get("nvml.average"))),
                f(e, "{:.2f}"),
                f(_latest(rec.get("nvml.sm_clock")), "{:.0f}"),
                f(_latest(rec.get("nvml.temperature")), "{:.0f}"),
                names or "—",
            ]
        )
    t, _ = fit_table(cols, rows, console=console, title=f"archline monitor — {elapsed_s:6.1f} s")
    return t


def _serve_prometheus(gpus: list[int], port: int, bind: str, duration: float, d: Deps) -> None:
    """Serve the GPUs' telemetry to Prometheus until ``duration`` s have passed (0: until Ctrl-C)."""
    from archline.hw.nvml import NVMLSession, decode_throttle, device_static, open_sources
    from archline.measurement.exporter import GpuSources, serve

    if not 0 <= port <= 65535:
        raise InputError(f"--prometheus: {port} is not a TCP port (0–65535; 0 picks a free one)")
    clock = d.effective_clock()
    opened: list[GpuSources] = []
    sessions: list[NVMLSession] = []
    try:
        for g in gpus:
            session = d.open_gpu(g)
            sessions.append(session)
            uuid = str(device_static(session).get("uuid") or "")
            opened.append(GpuSources(g, uuid, open_sources(session)))
        try:
            server, bound, collector = serve(opened, decode_throttle, port, bind)
        except OSError as exc:
            raise InputError(f"--prometheus {port}: cannot listen on {bind}:{port} ({exc.strerror or exc})") from None
        console.print(f"serving Prometheus metrics of GPU {', '.join(map(str, gpus))} at http://{bind}:{bound}/metrics")
        try:
            t0 = clock.now_s()
            while duration == 0 or clock.now_s() - t0 < duration:
                clock.sleep(min(0.1, duration) if duration else 0.5)
        finally:
            server.shutdown()
        for where, why in collector.errors.items():
            console.print(f"[dim]note: GPU {where} left out: {why}[/]")
    finally:
        for gs in opened:
            for src in gs.sources:
                src.close()
        for session in sessions:
            session.close()


def _watch(samplers: dict[int, Any], duration: float, clock: Clock) -> tuple[dict[int, Any], bool]:
    """Show the live table until ``duration`` s have passed (0: until Ctrl-C); return every GPU's
    recording and whether the user interrupted."""
    recs: dict[int, Any] = {}
    interrupted = False
    t0 = clock.now_s()
    try:
        with Live(_view(samplers, 0.0), console=console, refresh_per_second=4) as live:
            while duration == 0 or clock.now_s() - t0 < duration:
                clock.sleep(0.25)
                for s in samplers.values():
                    s.flush()  # on an injected clock the sampler reads only when asked
                live.update(_view(samplers, clock.now_s() - t0))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for g, s in samplers.items():
            recs[g] = s.stop()
    return recs, interrupted


def register(app: typer.Typer) -> None:
    """Add ``archline monitor``."""

    @app.command("monitor")
    @handle_errors
    def monitor(
        ctx: typer.Context,
        gpu: str = typer.Option("0", "--gpu", help="GPU index, or 'all'."),
        duration: float = typer.Option(0.0, "--duration", help="Seconds to run (0: until Ctrl-C)."),
        output: Path | None = typer.Option(
            None, "-o", "--output", "--out", help="Write the recorded trace (one file per GPU with 'all')."
        ),
        prometheus: int | None = typer.Option(
            None,
            "--prometheus",
            metavar="PORT",
            help="Serve per-GPU power, energy, clocks, temperature and throttle reasons to Prometheus on PORT "
            "(/metrics) instead of the live table.",
        ),
        bind: str = typer.Option(
            "127.0.0.1", "--bind", help="Address the Prometheus exporter listens on (0.0.0.0: every interface)."
        ),
    ) -> None:
        """Show live GPU power from every NVML source; record it to a trace file, or serve it to Prometheus."""
        from archline.hw.nvml import NVMLSession, open_sources
        from archline.measurement.sampler import Sampler
        from archline.records.traces import write_trace_csv

        if duration < 0:
            raise InputError("--duration must be ≥ 0")
        if prometheus is not None and output is not None:
            raise InputError("--prometheus serves live values and records nothing: drop -o/--out")
        if prometheus is not None and not 0 <= prometheus <= 65535:
            raise InputError(f"--prometheus: {prometheus} is not a TCP port (0–65535; 0 picks a free one)")
        gpus = gpu_indices(gpu)
        if prometheus is not None:
            try:
                _serve_prometheus(gpus, prometheus, bind, duration, deps(ctx))
            except KeyboardInterrupt:
                raise typer.Exit(130) from None
            return
        d = deps(ctx)
        clock = d.effective_clock()
        sessions: list[NVMLSession] = []
        samplers: dict[int, Sampler] = {}
        try:
            for g in gpus:
                sessions.append(d.open_gpu(g))
                samplers[g] = Sampler(open_sources(sessions[-1]), clock, settle_s=0.05).start()
            recs, interrupted = _watch(samplers, duration, clock)
        finally:
            # Every GPU opened so far is closed, also when a later one failed to open.
            for s in samplers.values():
                s.close()
            for session in sessions:
                session.close()
        if output is not None:
            for g, rec in recs.items():
                path = output if len(gpus) == 1 else output.with_name(f"{output.stem}.gpu{g}{output.suffix or '.csv'}")
                write_trace_csv(path, rec)
                console.print(f"wrote {path}")
        if interrupted:
            raise typer.Exit(130)
