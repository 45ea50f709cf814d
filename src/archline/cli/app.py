"""The ``archline`` command: one Typer app assembled from one module per command group."""

from __future__ import annotations

from typing import Any

import typer

from archline.cli import (
    analyze,
    characterize,
    counts_cmd,
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
    counts_cmd,
    replay_cmd,
    fleet_cmd,
):
    _mod.register(app)


def _reflow(doc: str) -> str:
    """A docstring's paragraphs each on one line (blank lines kept): the help's own terminal wraps them, where the
    docstring's line breaks, kept by Rich, broke its sentences in odd places."""
    paras = [" ".join(line.strip() for line in block.splitlines()) for block in doc.strip().split("\n\n")]
    return "\n\n".join(p for p in paras if p)


def _reflow_help(t: typer.Typer) -> None:
    """Every command's help, in this Typer and the groups under it, as :func:`_reflow` gives it."""
    import inspect

    for info in t.registered_commands:
        doc = info.help or (inspect.getdoc(info.callback) if info.callback is not None else None)
        if doc:
            info.help = _reflow(doc)
    for group in t.registered_groups:
        if group.typer_instance is not None:
            _reflow_help(group.typer_instance)


_reflow_help(app)


def _terminate(signum: int, frame: object) -> None:
    # A run killed with SIGTERM (timeout, batch scheduler) unwinds like Ctrl-C, so every run
    # directory is closed consistently (status "interrupted", traces saved).
    raise KeyboardInterrupt


def _click_exceptions() -> Any:
    """The exception classes of the click that Typer runs on (recent Typers carry their own copy): the module that
    defines typer.BadParameter."""
    import importlib

    return importlib.import_module(typer.BadParameter.__module__)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. A usage error (an unknown option, a missing argument, a value of the wrong type)
    is one line on stderr and exit 2, like every other bad input, instead of click's boxed panel."""
    import signal
    import sys

    cx = _click_exceptions()
    no_args = getattr(cx, "NoArgsIsHelpError", ())  # click 8.2 on; before, the help is printed and exit is 0/2
    signal.signal(signal.SIGTERM, _terminate)
    command = typer.main.get_command(app)
    try:
        rc = command.main(args=argv, prog_name="archline", standalone_mode=False)
    except no_args as exc:  # 'archline' or 'archline fleet' alone: their help (Rich printed it already, if it ran)
        if msg := exc.format_message().strip():
            typer.echo(msg)
        sys.exit(2)
    except cx.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "archline"
        typer.echo(f"archline: error: {exc.format_message()} (see '{where} --help')", err=True)
        sys.exit(2)
    except cx.ClickException as exc:
        typer.echo(f"archline: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("Aborted!", err=True)
        sys.exit(1)
    sys.exit(rc if isinstance(rc, int) else 0)


if __name__ == "__main__":
    main()
