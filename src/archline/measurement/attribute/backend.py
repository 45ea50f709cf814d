"""What an Attribution is plugged into: where its sensors, device facts and tracer come from, and its report writer."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from archline.core.activity import ActivityRecord
from archline.core.readings import Clock, PowerSource
from archline.core.recording import Recording
from archline.measurement.attribute.program import ProgramSpec
from archline.records.attribution import AttributionResult

if TYPE_CHECKING:
    from archline.hw.nvml import NVMLSession

__all__ = ["SOURCES", "Backend", "ChildRunner", "ReportWriter", "Tracer", "nvml_backend"]

#: The sensor channels an attribution records.
SOURCES = ("nvml.buffer", "nvml.energy")


class Tracer(Protocol):
    """What :class:`Attribution` needs from a kernel tracer (:class:`archline.hw.cupti.trace.KernelTracer`)."""

    records: list[ActivityRecord]

    def start(self) -> Any: ...

    def stop(self) -> list[ActivityRecord]: ...


class ChildRunner(Protocol):
    """Runs the measured program as a child process and returns its exit status
    (:func:`archline.measurement.attribute.program.run_binary`)."""

    def __call__(self, spec: ProgramSpec, env: Mapping[str, str], *, stdout_to_stderr: bool = False) -> int: ...


@dataclass(frozen=True)
class Backend:
    """Where sensors, device facts and the tracer come from (NVML + CUPTI, or fakes in tests)."""

    open_sources: Callable[[int], Sequence[PowerSource]]
    device_static: Callable[[int], dict[str, Any]]
    device_state: Callable[[int], dict[str, Any]]
    make_tracer: Callable[[Callable[[list[Any]], None] | None], Tracer]
    clock: Clock | None = None
    #: Builds (or finds) the CUPTI injection library for tracing a child process and returns
    #: its path; raises CUPTIUnavailableError where it cannot. None: archline's own
    #: (:func:`archline.hw.cupti.inject.build_injection`).
    injection: Callable[[], Path] | None = None
    #: Sensor time recorded before and after the block: the energy counter updates every
    #: ~100 ms and the attribution needs several updates on either side.
    pre_s: float = 0.5
    post_s: float = 0.5
    #: Runs a child program (None: :func:`~archline.measurement.attribute.program.run_binary`); a
    #: simulated GPU moves its clock by the time the child ran.
    run_child: ChildRunner | None = None
    #: How many GPUs the machine has (``--gpu all``, and a one-line error for an index past them);
    #: None: unknown, no check.
    device_count: Callable[[], int] | None = None


def nvml_backend(session: Callable[[int], NVMLSession] | None = None, clock: Clock | None = None) -> Backend:
    """NVML sensors and a CUPTI tracer (imported only when used).

    ``session`` returns the caller's open NVML session of a GPU, which the sensors and the device
    facts share (the caller closes it); None: each opens a session of its own. ``clock``: the
    sessions' clock (None: the host's wall clock).
    """

    def gpu_or_session(gpu: int) -> int | NVMLSession:
        return session(gpu) if session is not None else gpu

    def open_sources(gpu: int) -> Sequence[PowerSource]:
        from archline.hw.nvml import open_sources as _open

        return _open(gpu_or_session(gpu), SOURCES)

    def static(gpu: int) -> dict[str, Any]:
        from archline.hw.nvml import device_static

        return device_static(gpu_or_session(gpu))

    def state(gpu: int) -> dict[str, Any]:
        from archline.hw.nvml import device_state

        return device_state(gpu_or_session(gpu))

    def tracer(on_batch: Callable[[list[Any]], None] | None) -> Tracer:
        from archline.hw.cupti.trace import KernelTracer

        return KernelTracer(on_batch=on_batch)

    def count() -> int:
        if session is not None:  # the count the caller's session read (no second NVML initialisation)
            return session(0).device_count
        from archline.hw.nvml import device_count

        return device_count()

    return Backend(open_sources, static, state, tracer, clock=clock, device_count=count)


class ReportWriter(Protocol):
    """Writes the report files of a finished attribution into its run directory (the report layer's job)."""

    def __call__(
        self,
        directory: Path,
        recording: Recording,
        activities: Sequence[ActivityRecord],
        result: AttributionResult,
        program_span: tuple[float, float] | None,
    ) -> Mapping[str, str]:
        """Write the files; return file name → what it holds, for the manifest."""
        ...
