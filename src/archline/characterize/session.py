"""A measurement session on one GPU: NVML, executor, sampler and run directory, opened and closed together."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from archline.core.arch import VOLTA_NOTE
from archline.errors import UnsupportedArchitectureError
from archline.measurement.energy import WindowEstimator
from archline.measurement.sampler import Sampler
from archline.records import Manifest, RunDir, RunStatus

if TYPE_CHECKING:
    from archline.hw.cuda import CudaExecutor
    from archline.hw.nvml import NVMLSession

__all__ = ["MIN_COMPUTE_CAPABILITY", "GPUSession", "save_recording"]

#: archline's generated PTX targets sm_90; the driver JIT-compiles it for later GPUs too.
MIN_COMPUTE_CAPABILITY = (7, 5)


def save_recording(rd: RunDir, name: str, sampler: Sampler) -> None:
    """Write the sampler's recording into the run directory (archline's trace format)."""
    from archline.records.traces import save_recording as _save

    _save(rd.path / name, sampler.recording())


class GPUSession:
    """Everything a GPU command needs, in the order it must be opened and closed.

    Opening: NVML (errors: no driver, no GPU, no permission) → device facts and state (for the
    manifest) → the CUDA executor → the run directory → the sampler. Closing writes the raw
    traces, the state after, and the manifest's final status ("complete", or "interrupted"
    after Ctrl-C, or "failed"), so the directory is consistent whatever happened.

    ``nvml`` returns the caller's open NVML session of the GPU (the command's, which the caller
    closes; its clock stamps the readings); None: the session opens and closes one of its own.
    ``executor`` makes the executor of the GPU (None: :class:`~archline.hw.cuda.CudaExecutor`).
    """

    def __init__(
        self,
        gpu: int,
        out: Path,
        kind: str,
        *,
        force: bool = False,
        sources: tuple[str, ...] | None = None,
        extra: dict[str, Any] | None = None,
        nvml: Callable[[int], NVMLSession] | None = None,
        executor: Callable[[int], CudaExecutor] | None = None,
    ) -> None:
        self.gpu = gpu
        self._given_nvml = nvml
        self._make_executor = executor
        self.out = out
        self.kind = kind
        self.force = force
        self._sources = sources
        self._extra = dict(extra or {})
        self.t0 = 0.0
        self.ex: CudaExecutor
        self.rd: RunDir
        self.sampler: Sampler

    def __enter__(self) -> GPUSession:
        from archline.hw.cuda import CudaExecutor
        from archline.hw.nvml import NVMLSession, device_state, device_static, open_sources

        self._nvml = self._given_nvml(self.gpu) if self._given_nvml is not None else NVMLSession(self.gpu)
        self.t0 = self._nvml.clock.now_s()
        try:
            static = device_static(self._nvml)
            before = device_state(self._nvml)
            self.ex = (self._make_executor or CudaExecutor)(self.gpu)
            dev = self.ex.device
            if dev.compute_capability < MIN_COMPUTE_CAPABILITY:
                cc = f"{dev.compute_capability[0]}.{dev.compute_capability[1]}"
                raise UnsupportedArchitectureError(
                    f"{dev.name} has compute capability {cc}; archline's kernels need 7.5 (Turing) or later. "
                    + VOLTA_NOTE
                )
            gpu_facts = dict(static)
            gpu_facts.update(
                {
                    "compute_capability": list(dev.compute_capability),
                    "sm_count": dev.sm_count,
                    "l2_bytes": dev.l2_bytes,
                    "memory_bus_width_bits": dev.memory_bus_width_bits,
                    "shared_per_sm_b": dev.shared_per_sm_b,
                }
            )
            self.rd = RunDir.create(
                self.out,
                Manifest.new(self.kind, gpu=gpu_facts, state_before=before, extra=self._extra),
                overwrite=self.force,
            )
            sources = open_sources(self._nvml, self._sources)
            self.sampler = Sampler(sources, self._nvml.clock, meta={"gpu": self.gpu}).start()
        except BaseException as exc:
            # A run directory created before the failure must not stay "running".
            rd: RunDir | None = getattr(self, "rd", None)
            if rd is not None:
                status: RunStatus = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
                with contextlib.suppress(Exception):
                    rd.finish(status, notes=(*rd.manifest.notes, f"could not start: {exc}"))
            self._close_executor()
            self._close_nvml()
            raise
        return self

    def _close_nvml(self) -> None:
        if self._given_nvml is None:
            self._nvml.close()

    def _close_executor(self) -> None:
        close = getattr(getattr(self, "ex", None), "close", None)
        if callable(close):
            close()

    def estimator(self, progress: Callable[[str], None] | None = None) -> WindowEstimator:
        """The window estimator for NVML's sample buffer on this GPU (stored profile, or a quick
        calibration now), recorded in the manifest under ``extra.sensor_model``."""
        from archline.measurement.calibrate.run import estimator_for

        gpu = self.rd.manifest.gpu
        est, info = estimator_for(
            self.ex,
            self.sampler,
            gpu_uuid=str(gpu.get("uuid")),
            driver_version=str(gpu.get("driver_version")),
            progress=progress,
        )
        self.note_extra(sensor_model=info)
        return est

    def note_extra(self, **items: Any) -> None:
        """Add items to the manifest's ``extra`` (written at once)."""
        extra = dict(self.rd.manifest.extra)
        extra.update(items)
        self.rd.update_manifest(extra=extra)

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        from archline.hw.nvml import device_state

        status: RunStatus = "complete" if et is None else ("interrupted" if et is KeyboardInterrupt else "failed")
        try:
            try:
                self.sampler.stop()
            except Exception as exc:
                self.rd.update_manifest(notes=(*self.rd.manifest.notes, f"sampler: {exc}"))
            try:
                save_recording(self.rd, "traces.npz", self.sampler)
            finally:
                self.sampler.close()
            after = device_state(self._nvml)
            extra = dict(self.rd.manifest.extra)
            extra["wall_s"] = self._nvml.clock.now_s() - self.t0
            self.rd.finish(status, state_after=after, extra=extra)
        except BaseException as exc:
            # Closing failed or was interrupted (a second Ctrl-C): the manifest must still say so.
            if self.rd.manifest.status == "running":
                interrupted = isinstance(exc, KeyboardInterrupt)
                why = "interrupted while closing" if interrupted else f"closing failed: {exc}"
                final: RunStatus = "interrupted" if interrupted or status == "interrupted" else "failed"
                with contextlib.suppress(Exception):
                    self.rd.finish(final, notes=(*self.rd.manifest.notes, why))
            raise
        finally:
            with contextlib.suppress(Exception):
                self.sampler.close()  # stops the threads if stop() itself was interrupted
            self._close_executor()
            self._close_nvml()
