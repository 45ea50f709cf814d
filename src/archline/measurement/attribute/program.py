"""Run the program that ``archline run`` measures: in this interpreter (Python only) or as a child process."""

from __future__ import annotations

import contextlib
import os
import re
import runpy
import shutil
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from archline.errors import CommandError, CUPTIUnavailableError, InputError

__all__ = [
    "TRACERS",
    "ProgramSpec",
    "TracerChoice",
    "as_child",
    "check_tracer",
    "choose_tracer",
    "classify_command",
    "run_binary",
    "run_python",
]

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
# Interpreter options that take no argument / one argument, which an in-process run can honour
# by ignoring (they change how CPython starts, not what the program does).
_FLAGS0 = {"-u", "-B", "-O", "-OO", "-s", "-S", "-E", "-I", "-q", "-b", "-bb", "-d", "-v", "-P"}
_FLAGS1 = {"-X", "-W"}


@dataclass(frozen=True)
class ProgramSpec:
    """What to run. ``how``: ``script`` (a .py file), ``module`` (``-m``), ``code`` (``-c``) or ``binary``.

    ``target`` is the file, module name, code or executable path; ``argv`` is what the program
    sees as ``sys.argv`` (or the child's full command line); ``command`` the command as given.
    """

    how: Literal["script", "module", "code", "binary"]
    target: str
    argv: tuple[str, ...]
    command: tuple[str, ...] = ()

    @property
    def in_process(self) -> bool:
        return self.how != "binary"


def classify_command(cmd: Sequence[str]) -> ProgramSpec:
    """Decide how to run ``cmd``: Python programs in-process (so CUPTI sees their kernels), others as a child."""
    if not cmd:
        raise InputError("no command given: archline run [OPTIONS] -- COMMAND [ARGS]...")
    exe = cmd[0]
    if exe.endswith(".py"):
        if not Path(exe).is_file():
            raise CommandError(f"{exe}: no such file")
        return ProgramSpec("script", exe, tuple(cmd), tuple(cmd))
    base = os.path.basename(exe)
    if _PYTHON.match(base) or os.path.realpath(shutil.which(exe) or exe) == os.path.realpath(sys.executable):
        return replace(_classify_python(cmd), command=tuple(cmd))
    path = _executable(exe)
    if path is None:
        raise CommandError(f"{exe}: command not found")
    return ProgramSpec("binary", path, tuple(cmd), tuple(cmd))


def _executable(exe: str) -> str | None:
    if os.sep not in exe:
        return shutil.which(exe)
    return exe if os.access(exe, os.X_OK) and Path(exe).is_file() else None


def as_child(spec: ProgramSpec) -> ProgramSpec:
    """The program as a child process: a binary as it is, a Python program with its interpreter.

    The command runs as given (``python3 -u train.py`` starts that ``python3``); a bare ``.py``
    file runs with this interpreter, as it would in-process.
    """
    if spec.how == "binary":
        return spec
    cmd = spec.command or spec.argv
    if cmd[0].endswith(".py"):
        cmd = (sys.executable, *cmd)
    path = _executable(cmd[0])
    if path is None:
        raise CommandError(f"{cmd[0]}: command not found")
    return ProgramSpec("binary", path, cmd, spec.command)


def _classify_python(cmd: Sequence[str]) -> ProgramSpec:
    i = 1
    while i < len(cmd):
        a = cmd[i]
        if a in _FLAGS0:
            i += 1
        elif a in _FLAGS1:
            i += 2
        elif a == "-m":
            if i + 1 >= len(cmd):
                raise InputError("python -m needs a module name")
            return ProgramSpec("module", cmd[i + 1], (cmd[i + 1], *cmd[i + 2 :]))
        elif a == "-c":
            if i + 1 >= len(cmd):
                raise InputError("python -c needs a code string")
            return ProgramSpec("code", cmd[i + 1], ("-c", *cmd[i + 2 :]))
        elif a.startswith("-"):
            raise InputError(f"python option {a} is not supported by archline run (run the script directly)")
        else:
            if not Path(a).is_file():
                raise CommandError(f"{a}: no such file")
            return ProgramSpec("script", a, tuple(cmd[i:]))
    raise InputError("archline run needs a script, -m module or -c code after python (no interactive session)")


#: ``--tracer`` values: ``inject`` (a child process with the CUPTI injection library), ``python``
#: (in this interpreter with cupti-python), ``auto``: ``inject`` for every program (it costs less
#: than the in-process tracer on every workload of benchmarks/bench_run_overhead.py, H100), and
#: ``python`` for a Python program when the injection library cannot be built.
TRACERS = ("auto", "inject", "python")


@dataclass(frozen=True)
class TracerChoice:
    """How ``archline run`` records a program's kernels.

    ``mode``: ``inject`` runs the program as a child process (with the injection library
    ``lib`` when kernels are traced), ``python`` in this interpreter with cupti-python.
    ``untraced`` says why a child gets no kernel trace; ``note`` is the line for the run's notes.
    """

    mode: Literal["inject", "python"]
    lib: Path | None = None
    note: str = ""
    untraced: str | None = None


def check_tracer(tracer: str) -> None:
    """Refuse a ``--tracer`` value that is not one of :data:`TRACERS` (InputError)."""
    if tracer not in TRACERS:
        raise InputError(f"--tracer must be one of {', '.join(TRACERS)} (got {tracer!r})")


def choose_tracer(spec: ProgramSpec, tracer: str, *, trace: bool, build: Callable[[], Path]) -> TracerChoice:
    """Resolve ``--tracer`` for ``spec``; ``build`` returns the injection library or raises CUPTIUnavailableError."""
    check_tracer(tracer)
    if not spec.in_process and tracer == "python":
        raise InputError(
            f"--tracer python traces Python programs only; {spec.argv[0]} runs as a child process "
            "(use --tracer inject or auto)"
        )
    if not trace:
        if spec.in_process and tracer != "inject":
            return TracerChoice("python")
        return TracerChoice("inject", untraced="kernel tracing was turned off (--no-kernels)")
    if tracer == "python":
        return TracerChoice("python", note="tracer: python (cupti-python in archline's process; --tracer python)")
    try:
        lib = build()
    except CUPTIUnavailableError as exc:
        if tracer == "inject":
            raise CUPTIUnavailableError(f"--tracer inject: {exc}") from None
        if spec.in_process:
            return TracerChoice(
                "python",
                note=f"tracer: python (cupti-python in archline's process), chosen by --tracer auto because the "
                f"CUPTI injection library is unavailable ({exc}); expect more overhead for launch-bound programs",
            )
        return TracerChoice("inject", untraced=f"the CUPTI injection library is unavailable ({exc})")
    how = "--tracer auto" if tracer == "auto" else "--tracer inject"
    return TracerChoice("inject", lib, f"tracer: inject (CUPTI injection library in a child process; {how})")


@contextlib.contextmanager
def _as_main(argv: Sequence[str], path0: str) -> Iterator[None]:
    old_argv, old_path = sys.argv[:], sys.path[:]
    main = sys.modules.get("__main__")
    sys.argv = list(argv)
    sys.path.insert(0, path0)
    try:
        yield
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
        if main is not None:
            sys.modules["__main__"] = main


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_python(spec: ProgramSpec) -> tuple[int, str | None]:
    """Run a Python program in this interpreter as ``__main__``.

    Returns its exit status and, if it raised, a one-line description (its traceback is
    printed on stderr, as Python would). ``KeyboardInterrupt`` propagates.
    """
    try:
        if spec.how == "script":
            with _as_main(spec.argv, str(Path(spec.target).resolve().parent)):
                runpy.run_path(spec.target, run_name="__main__")
        elif spec.how == "module":
            with _as_main(spec.argv, os.getcwd()):
                runpy.run_module(spec.target, run_name="__main__", alter_sys=True)
        elif spec.how == "code":
            with _as_main(spec.argv, ""):
                code = compile(spec.target, "<string>", "exec")
                exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
        else:
            raise ValueError(f"not a Python program: {spec.how}")
    except SystemExit as exc:
        return _exit_code(exc), None
    except KeyboardInterrupt:
        raise
    except ImportError as exc:
        if spec.how == "module" and getattr(exc, "name", None) == spec.target:
            raise CommandError(f"no module named {spec.target}") from None
        traceback.print_exc()
        return 1, f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # the program's own failure: report it like Python does
        traceback.print_exc()
        return 1, f"{type(exc).__name__}: {exc}"
    return 0, None


def run_binary(spec: ProgramSpec, env: Mapping[str, str], *, stdout_to_stderr: bool = False) -> int:
    """Run a child process to completion and return its exit status (negative: killed by a signal)."""
    try:
        # fd 2, not sys.stderr: that may be a Python object without a file descriptor.
        proc = subprocess.Popen(list(spec.argv), env=dict(env), stdout=2 if stdout_to_stderr else None)
    except OSError as exc:
        raise CommandError(f"{spec.argv[0]}: cannot run ({exc.strerror or exc})") from None
    try:
        return proc.wait()
    except KeyboardInterrupt:
        # Let the child handle the interrupt (it shares the terminal), then wait for it to go.
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
