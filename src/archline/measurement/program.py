"""Run the program that ``archline run`` measures: Python in this interpreter, anything else as a child."""

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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from archline.errors import CommandError, InputError

__all__ = ["ProgramSpec", "classify_command", "run_binary", "run_python"]

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
# Interpreter options that take no argument / one argument, which an in-process run can honour
# by ignoring (they change how CPython starts, not what the program does).
_FLAGS0 = {"-u", "-B", "-O", "-OO", "-s", "-S", "-E", "-I", "-q", "-b", "-bb", "-d", "-v", "-P"}
_FLAGS1 = {"-X", "-W"}


@dataclass(frozen=True)
class ProgramSpec:
    """What to run. ``how``: ``script`` (a .py file), ``module`` (``-m``), ``code`` (``-c``) or ``binary``.

    ``target`` is the file, module name, code or executable path; ``argv`` is what the program
    sees as ``sys.argv`` (or the child's full command line).
    """

    how: Literal["script", "module", "code", "binary"]
    target: str
    argv: tuple[str, ...]

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
        return ProgramSpec("script", exe, tuple(cmd))
    base = os.path.basename(exe)
    if _PYTHON.match(base) or os.path.realpath(shutil.which(exe) or exe) == os.path.realpath(sys.executable):
        return _classify_python(cmd)
    path = (
        shutil.which(exe) if os.sep not in exe else (exe if os.access(exe, os.X_OK) and Path(exe).is_file() else None)
    )
    if path is None:
        raise CommandError(f"{exe}: command not found")
    return ProgramSpec("binary", path, tuple(cmd))


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
        proc = subprocess.Popen(list(spec.argv), env=dict(env), stdout=sys.stderr if stdout_to_stderr else None)
    except OSError as exc:
        raise CommandError(f"{spec.argv[0]}: cannot run ({exc.strerror})") from None
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
