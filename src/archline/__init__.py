"""archline: what GPU code costs in time, power and energy on your own NVIDIA GPU, and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from archline.core.version import __version__
from archline.errors import (
    ArchlineError,
    GPUUnavailableError,
    InputError,
    NVMLUnavailableError,
    RunDirError,
    TraceError,
)

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping

    from archline.measurement.analyze_api import analyze
    from archline.measurement.api import CallableEnergy, Measurement, measure, measure_callable
    from archline.measurement.attribute.api import Attribution
    from archline.measurement.attribute.attribution import AttributionOptions
    from archline.measurement.attribute.backend import Backend, ReportWriter
    from archline.measurement.attribute.prior import KernelPrior
    from archline.measurement.attribute.replay_result import ReplayResult

# The measuring API pulls in scipy; import it on first use so the CLI starts quickly.
_LAZY = {
    "analyze": "archline.measurement.analyze_api",
    "CallableEnergy": "archline.measurement.api",
    "Measurement": "archline.measurement.api",
    "measure": "archline.measurement.api",
    "measure_callable": "archline.measurement.api",
    "Attribution": "archline.measurement.attribute.api",
}


def attribute(
    gpu: int = 0,
    *,
    out: str | os.PathLike[str] | None = None,
    force: bool = False,
    pre_s: float | None = None,
    post_s: float | None = None,
    options: AttributionOptions | None = None,
    backend: Backend | None = None,
    render: ReportWriter | str | None = "default",
    priors: Mapping[str, KernelPrior] | None = None,
) -> Attribution:
    """Per-kernel energy of the code in a ``with`` block; with ``out=DIR`` its report files too.

    The keywords are those of :func:`archline.measurement.attribute.api.attribute`; ``render``: archline's report
    writer by default, None for no report files, or a writer of your own.
    """
    from pathlib import Path

    if isinstance(render, str) and render != "default":
        raise InputError(f"render must be 'default', None or a report writer, not {render!r}")
    from archline.measurement.attribute.api import attribute as _attribute
    from archline.report.attribution_run import write_report_files

    return _attribute(
        gpu, out=Path(out) if out is not None else None, force=force, pre_s=pre_s, post_s=post_s, options=options,
        backend=backend, render=write_report_files if isinstance(render, str) else render, priors=priors,
    )  # fmt: skip


def replay(step: Any, gpu: int = 0, top: int = 8, **kwargs: Any) -> ReplayResult:
    """Each kernel group's energy in one call of a PyTorch ``step``, by CUDA-graph replay.

    Returns a :class:`~archline.measurement.attribute.replay.ReplayResult` (``.kernels``,
    ``.step_energy_j``, ``.sum_vs_step_pct``; with ``design=N`` or ``"auto"`` every group's energy inside
    the step, ``context_j``, and ``.design``). With ``out=DIR`` it also writes a run directory
    and its report. The keywords are those of :func:`archline.measurement.attribute.replay.run_replay`.
    A replay that hangs the GPU (a wait longer than ``hang_s``, 60 s or more for a long step) ends the calling
    process with one line and exit status 2, since a kernel that does not end cannot be stopped from the host;
    ``hang_s=None`` turns that watchdog off (docs/replay.md, "What cannot be captured").
    """
    from archline.measurement.attribute.replay import run_replay

    res = run_replay(step, gpu=gpu, top=top, **kwargs)
    if kwargs.get("out") is not None:
        from archline.report.registry import render_run

        render_run(kwargs["out"])
    return res


def model_priors(model: str | os.PathLike[str], counts: str | os.PathLike[str]) -> dict[str, KernelPrior]:
    """Each counted kernel's prior from this GPU's calibrated energy model, for ``attribute(priors=...)``.

    ``model``: an ``archline roofline`` run directory (or its model file); ``counts``: the program's Nsight Compute
    counts per launch (``archline counts -o FILE -- PROGRAM``). See
    :mod:`archline.characterize.model_priors`.
    """
    from archline.characterize.model_priors import read_model_priors

    return dict(read_model_priors(model, counts).priors)


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'archline' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names with the lazily imported ones (``help(archline)``, ``dir()`` and tab completion)."""
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ArchlineError",
    "Attribution",
    "CallableEnergy",
    "GPUUnavailableError",
    "InputError",
    "Measurement",
    "NVMLUnavailableError",
    "RunDirError",
    "TraceError",
    "__version__",
    "analyze",
    "attribute",
    "measure",
    "measure_callable",
    "model_priors",
    "replay",
]
