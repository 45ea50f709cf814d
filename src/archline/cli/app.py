"""The ``archline`` command: one Typer app assembled from one module per command group."""

from __future__ import annotations

import typer

from archline.cli import (
    analyze,
    characterize,
    fleet_cmd,
    instructions,
    kernels_cmd,
    measure_cmd,
    model_cmd,
    monitor,
    replay_cmd,
    report_cmd,
    roofline,
    run_cmd,
    sensor,
    sensor_gpu,
)
from archline.core.version import __version__

__all__ = ["app", "main"]

app = typer.Typer(
    name="archline",
    help="What GPU code costs in time, power and energy on your own NVIDIA GPU, and why.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"archline {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """archline: measure, characterize and model GPU energy."""


for _mod in (
    analyze,
    sensor,
    sensor_gpu,
    monitor,
    measure_cmd,
    characterize,
    report_cmd,
    instructions,
    kernels_cmd,
    roofline,
    model_cmd,
    run_cmd,
    replay_cmd,
    fleet_cmd,
):
    _mod.register(app)


def _terminate(signum: int, frame: object) -> None:
    # A run killed with SIGTERM (timeout, batch scheduler) unwinds like Ctrl-C, so every run
    # directory is closed consistently (status "interrupted", traces saved).
    raise KeyboardInterrupt


def main() -> None:
    """Console-script entry point."""
    import signal

    signal.signal(signal.SIGTERM, _terminate)
    app()


if __name__ == "__main__":
    main()
