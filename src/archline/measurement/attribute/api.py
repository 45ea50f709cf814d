"""``archline.attribute()``: per-kernel energy of any block of GPU code (CUPTI timeline + NVML sensors).

The context manager's life cycle (sensors, tracer, interrupt, the run directory written as data
arrives) is one state machine. Its steps (:meth:`Attribution.start_recording`, :meth:`~Attribution.stop_recording`,
:meth:`~Attribution.end`) are public so that one program can be recorded on several GPUs at once (``multi_run``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from archline.core.activity import ActivityRecord, demangle
from archline.core.readings import Clock, SystemClock
from archline.core.recording import Recording
from archline.errors import ArchlineError, TooLittleTracedError
from archline.measurement.attribute.attribution import AttributionOptions, attribute_energy
from archline.measurement.attribute.backend import SOURCES, Backend, ChildRunner, ReportWriter, Tracer, nvml_backend
from archline.measurement.attribute.ceiling import shipped_burst_ceiling
from archline.measurement.attribute.io import ChunkWriter, save_raw
from archline.measurement.attribute.launch_bound import LAUNCH_BOUND_MIN_GAPS, LAUNCH_BOUND_SHARE, launch_bound_note
from archline.measurement.attribute.prior import KernelPrior
from archline.measurement.choose import GpuIdentity, choose_model
from archline.records import Manifest, RunDir, RunStatus
from archline.records.attribution import RAW_FILES, RESULT_FILES, AttributionResult, KernelTable

__all__ = [
    "LAUNCH_BOUND_MIN_GAPS",
    "LAUNCH_BOUND_SHARE",
    "SOURCES",
    "Attribution",
    "Backend",
    "ChildRunner",
    "ReportWriter",
    "Tracer",
    "attribute",
    "launch_bound_note",
    "nvml_backend",
]

WHOLE_PROGRAM = "[whole program]"


class Attribution(contextlib.AbstractContextManager["Attribution"]):
    """Record a block of GPU code and attribute its energy to its kernels.

    >>> with archline.attribute(gpu=0) as a:      # doctest: +SKIP
    ...     model(batch)
    >>> print(a.kernels)                          # doctest: +SKIP

    The sensors start ``pre_s`` before the block and stop ``post_s`` after it (the energy
    counter updates every ~100 ms, so it needs updates on both sides). With ``out`` the raw
    traces, the tables, the Perfetto trace and the plot go into that run directory; activity
    batches the tracer converts while the block runs are saved as they arrive (the CUPTI
    tracer converts most only after the block, to keep its cost off the program).
    ``trace=False`` records no kernels: the block gets whole-program energy only, unless
    activities are added with :meth:`add_activities` (e.g. from the injection library).
    """

    def __init__(
        self,
        gpu: int = 0,
        *,
        out: str | Path | None = None,
        force: bool = False,
        pre_s: float | None = None,
        post_s: float | None = None,
        trace: bool = True,
        options: AttributionOptions | None = None,
        backend: Backend | None = None,
        command: Sequence[str] | None = None,
        kind: str = "attribute",
        render: ReportWriter | None = None,
    ) -> None:
        self.gpu = gpu
        self.render = render
        self.out = Path(out) if out is not None else None
        self.force = force
        self.backend = backend or nvml_backend()
        self.pre_s = self.backend.pre_s if pre_s is None else pre_s
        self.post_s = self.backend.post_s if post_s is None else post_s
        self.trace = trace
        self.options = options
        self.command = tuple(command) if command is not None else None
        self.kind = kind
        self.clock: Clock = self.backend.clock or SystemClock()
        self.run_dir: RunDir | None = None
        self.result: AttributionResult | None = None
        self.recording: Recording | None = None
        self.activities: list[ActivityRecord] = []
        self.program_span: tuple[float, float] | None = None
        self.notes: list[str] = []
        #: Facts for the manifest's ``extra`` (e.g. which tracer recorded the kernels).
        self.info: dict[str, Any] = {}
        self.clock_info: dict[str, Any] | None = None
        #: Host-clock intervals in which kernels were traced (duty-cycled tracing); None = always.
        self.traced: list[tuple[float, float]] | None = None
        self.status: RunStatus = "running"
        self._extra: list[ActivityRecord] = []
        self._whole_reason: str | None = None
        self._sampler: Any = None
        self._tracer: Tracer | None = None
        self._chunks: ChunkWriter | None = None
        self._t0 = 0.0
        self._records: list[ActivityRecord] = []
        self._tracer_error: ArchlineError | None = None

    # -- public results
    @property
    def kernels(self) -> KernelTable:
        """The per-kernel rows (after the block)."""
        return self._need().kernels

    @property
    def table(self) -> KernelTable:
        """Every row, kernels first, then idle, gaps and the residual."""
        return self._need().table

    def _need(self) -> AttributionResult:
        if self.result is None:
            raise RuntimeError("the attribution is available after the with-block ends")
        return self.result

    def add_activities(
        self,
        records: Sequence[ActivityRecord],
        clock_info: dict[str, Any] | None = None,
        *,
        traced: Sequence[tuple[float, float]] | None = None,
    ) -> None:
        """Add activities recorded elsewhere (e.g. by the injection library of a child process).

        ``traced``: the host-clock intervals in which they were recorded, if tracing was duty-cycled.
        """
        self._extra.extend(records)
        if clock_info is not None:
            self.clock_info = clock_info
        if traced is not None:
            self.traced = [*(self.traced or []), *((float(a), float(b)) for a, b in traced)]

    def whole_program_only(self, reason: str) -> None:
        """Attribute the block as one '[whole program]' row, saying why per-kernel rows are missing."""
        self._whole_reason = reason

    # -- lifecycle
    def __enter__(self) -> Attribution:
        self.start_recording()
        try:
            self.clock.sleep(self.pre_s)
            if self.trace:
                self._tracer = self.backend.make_tracer(self._chunks)
                self._tracer.start()
        except BaseException as exc:
            self.abort(f"could not start: {exc}")
            raise
        self.mark_program_start()
        return self

    def abort(self, reason: str) -> None:
        """Close the sensors of a recording that cannot go on and mark its run directory failed, with ``reason``."""
        if self._sampler is not None:
            self._sampler.close()
        if self.run_dir is not None:
            self.status = "failed"
            self.run_dir.finish("failed", notes=(*self.notes, reason))

    def start_recording(self) -> None:
        """Open the sensors and the run directory and start sampling (no pre-roll, no tracer): the first step of
        ``with``, on its own for a caller that records several GPUs over one program (``multi_run``)."""
        from archline.measurement.sampler import Sampler

        sources = self.backend.open_sources(self.gpu)
        try:
            if self.out is not None:
                static, state = self._device_facts()
                manifest = Manifest.new(self.kind, gpu=static, state_before=state)
                if self.command is not None:
                    manifest = manifest.with_(command=self.command)
                self.run_dir = RunDir.create(self.out, manifest, overwrite=self.force)
                self._chunks = ChunkWriter(self.run_dir.path / "raw")
        except BaseException:
            for src in sources:
                src.close()
            raise
        self._sampler = Sampler(sources, self.clock)
        self._sampler.start()

    def mark_program_start(self, t_s: float | None = None) -> None:
        """The program starts at ``t_s`` on the common clock (default: now)."""
        self._t0 = self.clock.now_s() if t_s is None else t_s

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.end(exc_type)

    def end(
        self, exc_type: type[BaseException] | None = None, *, stopped: bool = False, stop_s: float | None = None
    ) -> None:
        """What ``with`` does at its end: stop recording (unless ``stopped``: :meth:`stop_recording` was called),
        attribute, write the run directory. ``exc_type``: what ended the block (an interrupt, a failure)."""
        if exc_type is KeyboardInterrupt:
            self.status = "interrupted"
        elif exc_type is not None:
            self.status = "failed"
        try:
            if not stopped:
                self.stop_recording(stop_s=stop_s)
            self._analyze()
        except BaseException as err:
            self._close_unfinished(err)
            if isinstance(err, ArchlineError) and exc_type is not None:
                return  # The block's own exception is the one to report; ours is in the notes.
            raise

    def _close_unfinished(self, err: BaseException) -> None:
        """Mark the run directory finished when :meth:`end` stopped before writing its manifest
        (a sensor error, a second Ctrl-C, a failed write), so it never stays ``running``."""
        if self.run_dir is None or self.run_dir.manifest.status != "running":
            return
        interrupted = isinstance(err, KeyboardInterrupt) or self.status == "interrupted"
        self.status = "interrupted" if interrupted else "failed"
        why = "interrupted while finishing" if isinstance(err, KeyboardInterrupt) else f"could not finish: {err}"
        with contextlib.suppress(Exception):
            self.run_dir.finish(self.status, notes=(*self.notes, why))

    def _device_facts(self) -> tuple[dict[str, Any], dict[str, Any]]:
        static: dict[str, Any] = {}
        state: dict[str, Any] = {}
        try:
            static = self.backend.device_static(self.gpu)
            state = self.backend.device_state(self.gpu)
        except ArchlineError as exc:
            self.notes.append(f"device facts unavailable ({exc})")
        return static, state

    def stop_recording(self, *, stop_s: float | None = None, settle: bool = True) -> None:
        """Stop the tracer; the program ended at ``stop_s`` (default: now); after ``post_s`` (unless not ``settle``)
        stop the sensors. The sampler is stopped and its sources closed whatever the tracer or the sleep raise."""
        self._records = []
        self._tracer_error = None
        try:
            try:
                if self._tracer is not None:
                    self._records = list(self._tracer.stop())
                    cm = getattr(self._tracer, "clock_map", None)
                    if cm is not None and hasattr(cm, "to_json"):
                        self.clock_info = cm.to_json()
                    for err in getattr(self._tracer, "batch_errors", []):
                        self.notes.append(f"saving activity batches failed: {err}")
            except ArchlineError as exc:
                self._tracer_error = exc
                self.notes.append(f"kernel tracing failed: {exc}")
            self.program_span = (self._t0, self.clock.now_s() if stop_s is None else stop_s)
            if settle:
                self.clock.sleep(self.post_s)
        finally:
            try:
                self.recording = self._sampler.stop()
            finally:
                self._sampler.close()

    def _analyze(self) -> None:
        """Attribute the recording (after :meth:`stop_recording`) and write the run directory."""
        if self.program_span is None or self.recording is None:
            raise RuntimeError("stop_recording() must come before the analysis")
        recording, t1 = self.recording, self.program_span[1]
        records, tracer_error = [*self._records, *self._extra], self._tracer_error
        if self._whole_reason is not None or (not self.trace and not records):
            records = self._whole_program(self._whole_reason or "kernel tracing was off", t1)
        names = demangle([r.name for r in records if r.kind == "kernel"])
        records = [replace(r, name=names[r.name]) if r.name in names else r for r in records]
        self.activities = sorted(records, key=lambda r: (r.start_s, r.end_s))
        error: ArchlineError | None = tracer_error
        if error is None:
            try:
                try:
                    self.options = self._effective_options()
                    self.result = attribute_energy(
                        recording,
                        self.activities,
                        program_span=self.program_span,
                        options=self.options,
                        traced=self.traced if self._whole_reason is None else None,
                    )
                except TooLittleTracedError as exc:
                    # Duty-cycled tracing saw too little to fit: keep the run, as one whole-program row.
                    self.activities = self._whole_program(str(exc), t1)
                    self.result = attribute_energy(
                        recording, self.activities, program_span=self.program_span, options=self.options
                    )
            except ArchlineError as exc:
                error = exc
                self.notes.append(f"attribution failed: {exc}")
            else:
                hint = launch_bound_note(self.result, self.program_span, duty_cycled=self.traced is not None)
                if hint:
                    self.notes.append(hint)
        if self.status == "running":
            self.status = "failed" if error is not None else "complete"
        self._write()
        if error is not None:
            raise error

    def _effective_options(self) -> AttributionOptions:
        """The options with what the board says filled in: its enforced power limit (a bound on every
        row's power) and the power buffer's sensor model (its calibration, or the shipped prior of its
        generation), so the kernels' powers are fitted on the 20 ms buffer."""
        opts = self.options or AttributionOptions()
        if opts.power_limit_w is not None and opts.buffer_model is not None and opts.power_ceiling_w is not None:
            return opts
        static, state = self._device_facts()
        changes: dict[str, Any] = {}
        lim = state.get("enforced_power_limit_w") or state.get("power_limit_w")
        if opts.power_limit_w is None and isinstance(lim, int | float) and lim > 0:
            changes["power_limit_w"] = float(lim)
            self.info["power_limit_w"] = float(lim)
        if opts.power_ceiling_w is None and static.get("name"):
            ceiling = shipped_burst_ceiling(str(static["name"]))
            if ceiling is not None:
                changes["power_ceiling_w"] = ceiling.power_w
                self.info["power_ceiling_w"] = ceiling.power_w
                self.notes.append(f"a kernel's power may exceed the board's limit in bursts: {ceiling.describe()}")
        if opts.buffer_model is None and static:
            try:
                choice = choose_model("nvml.buffer", None, identity=GpuIdentity.from_static(static))
            except ArchlineError:
                choice = None
            if choice is not None:
                changes["buffer_model"] = choice.model
                self.info["buffer_model"] = choice.describe
                if choice.how == "prior":
                    self.notes.append(
                        f"the power buffer's 20 ms readings are fitted through the {choice.detail}, not this "
                        "board's own: archline sensor calibrate (about 70 s, once per board and driver) gives its own, "
                        "which later runs take (docs/attribution.md, 'Session 27')"
                    )
        return replace(opts, **changes) if changes else opts

    def _whole_program(self, reason: str, t1: float) -> list[ActivityRecord]:
        """The block as one '[whole program]' activity, with a note saying why."""
        self.notes.append(f"per-kernel rows unavailable: {reason}; whole-program energy only")
        return [ActivityRecord(WHOLE_PROGRAM, self._t0, t1, kind="program")]

    def _write(self) -> None:
        if self.run_dir is None or self.recording is None:
            return
        d = self.run_dir.path
        save_raw(
            d,
            self.recording,
            self.activities,
            program_span=self.program_span,
            clock=self.clock_info,
            info={"gpu": self.gpu, "status": self.status, "traced_intervals": self.traced},
        )
        if self._chunks is not None:
            self._chunks.remove()
        files = dict(RAW_FILES)
        if self.clock_info is None:
            files.pop("raw/clock.json", None)
        if self.result is not None:
            self.result.write(d)
            files.update(RESULT_FILES)
            if self.render is not None:
                files.update(self.render(d, self.recording, self.activities, self.result, self.program_span))
        _, state_after = self._device_facts()
        notes = tuple(self.notes) + (self.result.notes if self.result is not None else ())
        extra: dict[str, Any] = {**self.info, "gpu_index": self.gpu}
        if self.result is not None:
            extra["total_energy_j"] = self.result.total_energy_j
            extra["whole_program_only"] = self.result.whole_program_only
        if self.program_span is not None:
            extra["program_s"] = self.program_span[1] - self.program_span[0]
        self.run_dir.finish(self.status, state_after=state_after, files=files, notes=notes, extra=extra)

    def __repr__(self) -> str:
        e = self.result.total_energy_j if self.result is not None else math.nan
        return f"Attribution(gpu={self.gpu}, status={self.status!r}, total_energy_j={e:.4g})"


def attribute(
    gpu: int = 0,
    *,
    out: str | Path | None = None,
    force: bool = False,
    pre_s: float | None = None,
    post_s: float | None = None,
    options: AttributionOptions | None = None,
    backend: Backend | None = None,
    render: ReportWriter | None = None,
    priors: Mapping[str, KernelPrior] | None = None,
) -> Attribution:
    """Per-kernel energy of the code in a ``with`` block (see :class:`Attribution`).

    >>> with archline.attribute(gpu=0) as a:      # doctest: +SKIP
    ...     loss = model(batch).sum(); loss.backward()
    >>> a.kernels[0].name, a.kernels[0].energy_j   # doctest: +SKIP

    ``priors``: what is known of kernels' energy per call, e.g.
    ``priors_from_replay(archline.replay(step))``; each row's ``dominated_by`` says whether the
    data or its prior set it.
    """
    if priors is not None:
        options = replace(options or AttributionOptions(), priors=dict(priors))
    return Attribution(
        gpu, out=out, force=force, pre_s=pre_s, post_s=post_s, options=options, backend=backend, render=render
    )
