"""Shared CLI plumbing: one-line errors with exit codes, consoles, JSON output."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from archline.core.readings import Clock, SystemClock
from archline.errors import ArchlineError, InputError
from archline.records import to_jsonable

if TYPE_CHECKING:
    from archline.hw.nvml import NVMLSession

__all__ = [
    "Deps",
    "GpuSessions",
    "console",
    "deps",
    "err_console",
    "fail",
    "gpu_indices",
    "handle_errors",
    "parse_gpus",
    "print_json",
    "progress_bar",
    "read_progress_bar",
]

# Messages are not hard-wrapped at the console's width (80 in a pipe): the terminal wraps them where it wraps.
console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Deps:
    """What the commands open hardware with, handed down through Typer's ``obj`` (no module globals).

    ``attribution_backend`` makes the sensors and tracer of ``archline run`` (None: this machine's
    NVML and CUPTI). ``clock`` runs the commands that poll sensors (``monitor``) on an injected
    clock. Tests pass fakes: ``CliRunner().invoke(app, args, obj=Deps(...))``.
    """

    attribution_backend: Callable[[], Any] | None = None
    #: The clock every reading and wait of a command runs on (None: the host's wall clock).
    clock: Clock | None = None

    def effective_clock(self) -> Clock:
        """:attr:`clock`, or the host's wall clock."""
        return self.clock or SystemClock()

    def open_gpu(self, gpu: int) -> NVMLSession:
        """The command's hardware session of one GPU (NVML), on :attr:`clock`; the command closes it."""
        from archline.hw.nvml import NVMLSession

        return NVMLSession(gpu, clock=self.clock)


class GpuSessions:
    """The hardware sessions of one command, opened through :meth:`Deps.open_gpu` when first asked for
    (``sessions(gpu)``), one per GPU, all closed when the ``with`` block ends."""

    def __init__(self, d: Deps) -> None:
        self._deps = d
        self._open: dict[int, NVMLSession] = {}

    def __call__(self, gpu: int) -> NVMLSession:
        if gpu not in self._open:
            self._open[gpu] = self._deps.open_gpu(gpu)
        return self._open[gpu]

    def __enter__(self) -> GpuSessions:
        return self

    def __exit__(self, *exc: object) -> None:
        for session in self._open.values():
            session.close()
        self._open.clear()


def deps(ctx: typer.Context) -> Deps:
    """The command's dependencies (the defaults unless the caller handed some in)."""
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Deps) else Deps()


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``archline: error: message`` on stderr and return the Exit to raise."""
    err_console.print(f"[bold red]archline: error:[/] {message}", soft_wrap=True, markup=True)
    return typer.Exit(code)


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn archline's exceptions into a one-line message and a non-zero exit, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except ArchlineError as exc:
            raise fail(_escape(str(exc)), exc.exit_code) from None
        except KeyboardInterrupt:
            raise fail("interrupted", 130) from None
        except BrokenPipeError:
            sys.stderr.close()
            raise typer.Exit(1) from None
        except OSError as exc:  # a file archline had to read or write (disk full, not a directory, no permission)
            where = f"{exc.filename}: " if exc.filename is not None else ""
            raise fail(_escape(f"{where}{exc.strerror or exc}"), 1) from None

    return wrapper


def _escape(s: str) -> str:
    return s.replace("[", r"\[")


#: ``--keep-repeats`` of ``archline analyze`` and ``archline sensor fit``.
KEEP_REPEATS_HELP = (
    "Every reading is a sample (an exact meter or a simulator): equal readings are constant power, not a sensor "
    "repeating its last update."
)


def print_para(text: str, *, to: Console | None = None, indent: str = "  ", style: str | None = None) -> None:
    """Print prose wrapped by words at the terminal's width (the consoles never wrap, so that numbers and paths in
    tables stay whole; a sentence of 250 characters should not run off an 80-column terminal)."""
    import textwrap

    c = to or console
    c.print(textwrap.fill(text, width=max(c.width, 40), subsequent_indent=indent, break_long_words=False,
                          break_on_hyphens=False), markup=False, style=style)  # fmt: skip


def print_json(obj: Any) -> None:
    """Print ``obj`` as strict JSON on stdout (no Rich markup, no wrapping)."""
    sys.stdout.write(json.dumps(to_jsonable(obj), indent=2) + "\n")
    sys.stdout.flush()


def progress_bar() -> Progress:
    """The progress bar of long GPU commands (on stderr, gone when done)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )


def read_progress_bar() -> Progress:
    """The progress bar of a long file read: bytes read of the file's size, time left (on stderr, transient)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    )


def parse_gpus(spec: str, count: int | None) -> list[int]:
    """GPU indices from ``--gpu``: one index, a comma list (``0,2``) or ``all``, checked against ``count`` GPUs
    (None: the syntax alone, before any GPU is asked for)."""
    text = spec.strip().lower()
    if text == "all":
        if count is not None and count <= 0:
            raise InputError("--gpu all: NVML found no NVIDIA GPU")
        return list(range(count or 0))
    try:
        picked = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"--gpu must be an index, a list like 0,2, or 'all', not {spec!r}") from None
    if not picked:
        raise InputError(f"--gpu must be an index, a list like 0,2, or 'all', not {spec!r}")
    for g in picked:
        if g < 0:
            raise InputError(f"--gpu: {g} is not a GPU index (0, 1, …)")
        if count is not None and g >= count:
            raise InputError(f"--gpu: no GPU with index {g} (this machine has {count})")
    if len(set(picked)) != len(picked):
        raise InputError(f"--gpu names a GPU twice: {spec!r}")
    return picked


def gpu_indices(spec: str) -> list[int]:
    """:func:`parse_gpus` against the GPUs NVML sees on this machine; a spec that is no GPU list at all is bad
    input before NVML is asked (exit 2, not 'NVML is not available')."""
    from archline.hw.nvml import device_count

    parse_gpus(spec, None)  # the syntax alone
    return parse_gpus(spec, device_count())
