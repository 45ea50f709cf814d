"""archline's exceptions: every expected failure maps to one of these, with a one-line message."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "ArchlineError",
    "BenchmarkError",
    "CUPTIUnavailableError",
    "CommandError",
    "FleetError",
    "GPUUnavailableError",
    "InputError",
    "MixedFleetError",
    "ModelFileError",
    "NVMLUnavailableError",
    "PermissionDeniedError",
    "RunDirError",
    "SensorError",
    "TooLittleTracedError",
    "TraceError",
    "UnknownNameError",
    "UnsupportedArchitectureError",
    "suggest",
]


class ArchlineError(Exception):
    """Base of archline's expected errors. ``str(err)`` is a complete one-line message.

    ``exit_code`` is what the CLI exits with (2 for bad input, 3 for a missing capability,
    1 for anything else).
    """

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class InputError(ArchlineError):
    """Bad input from the user: a value, option or file content that cannot be used."""

    exit_code = 2


class TraceError(InputError):
    """A trace or windows file that is missing, empty, unsorted or malformed.

    The message names the file and, where known, the line (1-based, as an editor shows it).
    """

    def __init__(self, path: object, message: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.line = line


class UnknownNameError(InputError):
    """An unknown benchmark, instruction, pattern or sensor kind."""


class ModelFileError(InputError):
    """A model file that is missing, malformed or of another schema version."""


class RunDirError(InputError):
    """A run directory that is missing, incomplete or corrupt."""


class UnsupportedArchitectureError(ArchlineError):
    """A GPU architecture that archline has no spec table or kernels for."""

    exit_code = 3


class GPUUnavailableError(ArchlineError):
    """No NVIDIA GPU (or no CUDA driver) is available."""

    exit_code = 3


class NVMLUnavailableError(GPUUnavailableError):
    """NVML (libnvidia-ml) cannot be loaded or initialised."""


class CUPTIUnavailableError(ArchlineError):
    """CUPTI cannot be loaded, or refused to trace (for example, no profiling permission)."""

    exit_code = 3


class PermissionDeniedError(ArchlineError):
    """The driver refused an operation for lack of permission."""

    exit_code = 3


class SensorError(ArchlineError):
    """A power sensor misbehaved or returned data that cannot be used."""


class TooLittleTracedError(SensorError):
    """Duty-cycled tracing left too few of the energy counter's windows inside traced periods to fit."""


class BenchmarkError(ArchlineError):
    """A benchmark failed: its output check failed, or the kernel could not be built or run."""


class CommandError(ArchlineError):
    """A child command could not be started."""

    exit_code = 127


class FleetError(ArchlineError):
    """A fleet could not be run: its scheduler cannot be reached, or no worker has a GPU."""


class MixedFleetError(InputError):
    """Runs of different GPU models or drivers put in one comparison (they are compared apart)."""


def suggest(patterns: Iterable[str], candidates: Iterable[str]) -> str:
    """``; did you mean …?`` with up to three close names, or an empty string."""
    pool = list(candidates)
    close: list[str] = []
    for p in patterns:
        stem = p.rstrip("*.?")
        close += difflib.get_close_matches(stem, pool, n=3, cutoff=0.6)
        if not close and stem:
            close += [c for c in pool if c.startswith(stem.split(".")[0] + ".")][:3]
    unique = list(dict.fromkeys(close))[:3]
    return f"; did you mean {', '.join(unique)}?" if unique else ""
