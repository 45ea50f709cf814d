"""The Python API for measuring energy: ``archline.measure()`` regions and ``measure_callable``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

from archline.core.frames import Tabular, dataclass_rows
from archline.core.readings import Clock, PowerSource, SystemClock
from archline.core.recording import Recording, Region
from archline.errors import ArchlineError, InputError
from archline.measurement.choose import GpuIdentity, ModelChoice, choose_model
from archline.measurement.energy import WindowEstimate, WindowEstimator, clock_state
from archline.measurement.sampler import Sampler
from archline.measurement.sensor_model import SensorModel

if TYPE_CHECKING:
    from archline.hw.nvml import NVMLSession
    from archline.measurement.multi import MultiMeasurement

__all__ = ["CallableEnergy", "Measurement", "RegionEnergy", "measure", "measure_callable"]

_TOTAL = "__total__"


@dataclass(frozen=True)
class RegionEnergy:
    """The energy of one region. J, W, s; ``energy_uncertainty_j`` is 1 σ."""

    name: str
    start_s: float
    end_s: float
    energy_j: float | None
    energy_uncertainty_j: float | None
    mean_power_w: float | None
    max_power_w: float | None
    resolvable: bool
    notes: tuple[str, ...] = ()
    counter_energy_j: float | None = None
    #: which sensor model was used and how it was chosen (override, calibration, prior, inferred)
    sensor_model: str = ""

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    @classmethod
    def from_estimate(cls, r: Region, e: WindowEstimate, sensor_model: str = "") -> RegionEnergy:
        return cls(
            r.name,
            r.start_s,
            r.end_s,
            e.energy_j,
            e.energy_uncertainty_j,
            e.mean_power_w,
            e.max_power_w,
            e.resolvable,
            e.notes,
            e.counter_energy_j,
            sensor_model,
        )


@dataclass
class Measurement(contextlib.ContextDecorator, Tabular):
    """Measure the GPU energy of a block of code, and of named regions inside it.

    >>> with archline.measure(gpu=0) as m:          # doctest: +SKIP
    ...     with m.region("forward"):
    ...         model(x)
    >>> m.energy_j, m.regions["forward"].energy_j    # doctest: +SKIP

    The GPU is synchronised at every boundary (``sync``; by default PyTorch's, CuPy's or the
    current CUDA context's, whichever the program uses), so a region covers the execution of
    its work, not only its enqueueing. Boundaries are host wall-clock times, the clock NVML's
    sample buffer is stamped with. Energies are computed when the outer block exits.
    """

    gpu: int = 0
    sources: Sequence[PowerSource] | None = None
    #: An open NVML session of ``gpu`` (the caller's, which it closes) to read the sensors and the
    #: GPU's identity through; None: the measurement opens its own.
    session: NVMLSession | None = None
    sync: Callable[[], None] | None = None
    clock: Clock | None = None
    estimator: Callable[[Recording, Region], WindowEstimate] | None = None
    model: SensorModel | None = None
    #: seconds recorded before the block and after it, so the energy counter (~100 ms updates)
    #: has an update on each side of every region
    pre_s: float = 0.25
    settle_s: float = 0.3
    regions: dict[str, RegionEnergy] = field(default_factory=dict, init=False)
    trace: Recording | None = field(default=None, init=False, repr=False)
    _sampler: Sampler | None = field(default=None, init=False, repr=False)
    _total: RegionEnergy | None = field(default=None, init=False, repr=False)
    _t0: float = field(default=0.0, init=False, repr=False)
    _names: set[str] = field(default_factory=set, init=False, repr=False)

    def _sync(self) -> None:
        if self.sync is None:
            from archline.hw.sync import default_synchronizer

            self.sync = default_synchronizer(self.gpu)
        self.sync()

    def __enter__(self) -> Measurement:
        srcs = list(self.sources) if self.sources is not None else self._open_nvml()
        self._sampler = Sampler(srcs, self.clock, settle_s=self.settle_s, meta={"gpu": self.gpu}).start()
        self.regions = {}
        self._names = set()
        self._sync()
        if self.pre_s > 0:
            (self.clock or SystemClock()).sleep(self.pre_s)
        self._t0 = self._sampler.now_s()
        return self

    def _open_nvml(self) -> list[PowerSource]:
        from archline.hw.nvml import open_sources

        return list(open_sources(self.session if self.session is not None else self.gpu))

    @contextlib.contextmanager
    def region(self, name: str, **meta: Any) -> Iterator[None]:
        """Mark a named region (nested and repeated names allowed; a repeat gets a ``#n`` suffix)."""
        if self._sampler is None:
            raise RuntimeError("region() must be used inside 'with archline.measure(...)'")
        self._sync()
        t0 = self._sampler.now_s()
        try:
            yield
        finally:
            self._sync()
            key = name
            n = 2
            while key in self._names:
                key = f"{name}#{n}"
                n += 1
            self._names.add(key)
            self._sampler.mark(key, t0, self._sampler.now_s(), "host", **meta)

    def __exit__(self, *exc: object) -> None:
        assert self._sampler is not None
        try:
            self._sync()
            total = self._sampler.mark(_TOTAL, self._t0, self._sampler.now_s(), "host")
            self.trace = self._sampler.stop()
        finally:
            self._sampler.close()
        rec = self.trace
        # One sensor model for every region of this measurement, chosen once (measurement/choose.py).
        est = self.estimator if self.estimator is not None else WindowEstimator(self.model, identity=self._identity())
        self._total = RegionEnergy.from_estimate(total, est(rec, total), _described(est))
        self.regions = {
            r.name: RegionEnergy.from_estimate(r, est(rec, r), _described(est)) for r in rec.regions if r.name != _TOTAL
        }

    def _identity(self) -> GpuIdentity | None:
        """This GPU's UUID, driver and name, when its own sensors are read (not with given sources)."""
        if self.sources is not None:
            return None
        from archline.hw.nvml import device_static

        return GpuIdentity.from_static(device_static(self.session if self.session is not None else self.gpu))

    # ------------------------------------------------------------------ results
    def _done(self) -> RegionEnergy:
        if self._total is None:
            raise RuntimeError("the measurement has not finished yet")
        return self._total

    def table_rows(self) -> list[dict[str, Any]]:
        """The whole block, then each region: J, W, s (``.to_pandas()``, Jupyter's display)."""
        items = ([self._total] if self._total is not None else []) + list(self.regions.values())
        return [{**r, "duration_s": x.duration_s} for r, x in zip(dataclass_rows(items), items, strict=True)]

    def table_title(self) -> str:
        return f"GPU {self.gpu}: energy of the block and its regions"

    @property
    def total(self) -> RegionEnergy:
        """The whole block as a region (span, energy, mean and maximum power)."""
        return self._done()

    @property
    def energy_j(self) -> float | None:
        """Board energy of the whole block, J."""
        return self._done().energy_j

    @property
    def energy_uncertainty_j(self) -> float | None:
        return self._done().energy_uncertainty_j

    @property
    def mean_power_w(self) -> float | None:
        return self._done().mean_power_w

    @property
    def duration_s(self) -> float:
        return self._done().duration_s

    @property
    def resolvable(self) -> bool:
        return self._done().resolvable


def _described(est: Callable[[Recording, Region], WindowEstimate]) -> str:
    choice = getattr(est, "choice", None)
    return choice.describe if isinstance(choice, ModelChoice) else ""


@overload
def measure(gpu: int = 0, **kwargs: Any) -> Measurement: ...
@overload
def measure(gpu: Sequence[int], **kwargs: Any) -> MultiMeasurement: ...
def measure(gpu: int | Sequence[int] = 0, **kwargs: Any) -> Measurement | MultiMeasurement:
    """Context manager (and decorator) measuring GPU energy; see :class:`Measurement`.

    ``gpu=[0, 1]`` measures several GPUs over the same span (:class:`~archline.measurement.multi.MultiMeasurement`).
    """
    index = _gpu_index(gpu)
    if index is not None:
        return Measurement(gpu=index, **kwargs)
    if isinstance(gpu, (str, bytes)) or not isinstance(gpu, Iterable):
        raise InputError(f"gpu must be a GPU index or a list of them, not {gpu!r}")
    indices = [_gpu_index(g) for g in gpu]
    if any(i is None for i in indices):
        raise InputError(f"gpu must be a GPU index or a list of them, not {gpu!r}")
    gpu = [int(i) for i in indices if i is not None]
    if not gpu:
        raise InputError("gpu=[] names no GPU")
    if kwargs.get("sources") is not None:
        raise InputError("sources= are one GPU's sensors: with several GPUs each reads its own (leave sources out)")
    from archline.measurement.multi import MultiMeasurement

    return MultiMeasurement(list(gpu), lambda g: Measurement(gpu=g, **kwargs))


@dataclass(frozen=True)
class CallableEnergy(Tabular):
    """The energy of one call of a function, from many phase-shifted repetitions of it.

    ``energy_j`` (J, 1 σ in ``energy_uncertainty_j``) is one call's board energy;
    ``time_s`` one call's wall time with the GPU synchronised; ``counter_energy_j`` the same
    energy from NVML's energy counter over all repetitions (None if they total under 1 s).
    ``sm_clock_mhz`` (MHz, the mean of the SM clock's readings during the repetitions) and ``clock_event_reasons``
    (NVML's clock-event reasons set in any reading during them, comma-separated: ``sw_power_cap`` where the board
    held its clocks down to keep within its power limit) say what the clocks did while the call was measured; None
    and "" where no such reading was taken.
    """

    energy_j: float
    energy_uncertainty_j: float
    time_s: float
    mean_power_w: float
    calls: int
    repetitions: int
    calls_per_repetition: int
    resolvable: bool
    counter_energy_j: float | None
    expected_rel_error: float
    sensor_model: str
    note: str = ""
    sm_clock_mhz: float | None = None
    clock_event_reasons: str = ""
    trace: Recording | None = field(default=None, repr=False, compare=False)

    def table_rows(self) -> list[dict[str, Any]]:
        return dataclass_rows([self])


def _time_one_call(fn: Callable[[], Any], sync: Callable[[], None], clock: Clock) -> float:
    """Wall time of one call, doubling the batch until it lasts 20 ms (pyperf's calibration)."""
    n = 1
    while True:
        t0 = clock.now_s()
        for _ in range(n):
            fn()
        sync()
        dt = clock.now_s() - t0
        if dt >= 0.02 or n >= 1 << 20:
            return dt / n
        n *= 2


def measure_callable(
    fn: Callable[[], Any],
    gpu: int = 0,
    target_rel_error: float = 0.02,
    *,
    sync: Callable[[], None] | None = None,
    sources: Sequence[PowerSource] | None = None,
    model: Any = None,
    clock: Clock | None = None,
    max_total_s: float = 60.0,
    source: str = "nvml.buffer",
    between: Callable[[], Any] | None = None,
) -> CallableEnergy:
    """Measure the energy of one call of ``fn`` (which enqueues GPU work) to ``target_rel_error``.

    ``fn`` is repeated back to back until each repetition spans enough sensor updates for the
    requested accuracy (Burtscher: about 10 updates for 5 %), and the repetitions start at
    evenly spread phases of the sensor period (idle gaps of different lengths), as Yang et al.
    (SC'24) do for part-time sensors. The sensor model is chosen as everywhere
    (measurement/choose.py): ``model``, this GPU's calibration, a shipped prior for its
    generation, or the recording. ``counter_energy_j`` comes from NVML's energy counter over the
    repetitions, corrected for the counter's update grid (measurement/counter.py). ``between`` runs
    after each repetition, outside it, before the idle gap that follows (graph replay restores the
    step's state there).
    """
    from archline.measurement.repetition import estimate_call_energy, plan_repetitions

    clk: Clock = clock or SystemClock()
    # bad arguments and a missing GPU are found before ``fn`` runs at all (it may be a training step that updates
    # weights: without a GPU it used to run hundreds of times before NVML was asked)
    if not (0.0 < target_rel_error < 1.0):
        raise InputError(f"target_rel_error must be between 0 and 1, not {target_rel_error!r}")
    if not max_total_s > 0:
        raise InputError(f"max_total_s must be a number of seconds > 0, not {max_total_s!r}")
    if sources is not None and source not in {s.name for s in sources}:
        raise InputError(f"source {source!r} is not among the given sources ({', '.join(s.name for s in sources)})")
    identity = _identity(gpu, sources)
    if sync is None:
        from archline.hw.sync import default_synchronizer

        sync = default_synchronizer(gpu)
    fn()  # warm-up: JIT, allocations, clocks ramping
    sync()
    call_s = _time_one_call(fn, sync, clk)
    prior: ModelChoice | None = None
    if model is not None or identity is not None:
        with contextlib.suppress(ArchlineError):  # no calibration and no prior: plan nominally
            prior = choose_model(source, None, override=model, identity=identity)
    planning = (
        prior.model
        if prior is not None
        else SensorModel(kind="averaging", period_s=0.02, identified=False, origin="nominal")
    )
    plan = plan_repetitions(call_s, planning, target_rel_error, max_total_s=max_total_s)
    srcs = list(sources) if sources is not None else _open(gpu)
    sampler = Sampler(srcs, clk, settle_s=0.3, meta={"gpu": gpu}).start()
    regions: list[Region] = []
    try:
        clk.sleep(plan.gaps_s[0])
        for j in range(plan.repetitions):
            t0 = clk.now_s()
            for _ in range(plan.calls_per_repetition):
                fn()
            sync()
            regions.append(sampler.mark(f"rep{j}", t0, clk.now_s(), "host"))
            if between is not None:
                between()
            clk.sleep(plan.gaps_s[(j + 1) % len(plan.gaps_s)])
        rec = sampler.stop()
    finally:
        sampler.close()
    readings = rec.get(source)
    choice = prior
    if choice is None:
        choice = (
            choose_model(source, readings)
            if readings is not None and len(readings) >= 3
            else ModelChoice(planning, "inferred", "nominal: no readings")
        )
    use = choice.model
    est = estimate_call_energy(rec, regions, plan.calls_per_repetition, use, source=source)
    counter = None
    en = rec.get("nvml.energy")
    total_calls = plan.calls_per_repetition * len(regions)
    if en is not None and sum(r.duration_s for r in regions) >= 1.0:
        from archline.measurement.counter import counter_call_energy

        with contextlib.suppress(ArchlineError):  # the counter changed too rarely: no cross-check
            counter, _ = counter_call_energy(en, regions, plan.calls_per_repetition)
    clocks = clock_state(rec, [(r.start_s, r.end_s) for r in regions])
    return CallableEnergy(
        energy_j=est.energy_j,
        energy_uncertainty_j=est.energy_uncertainty_j,
        time_s=float(sum(r.duration_s for r in regions)) / total_calls,
        mean_power_w=est.mean_power_w,
        calls=total_calls,
        repetitions=len(regions),
        calls_per_repetition=plan.calls_per_repetition,
        resolvable=est.resolvable,
        counter_energy_j=counter,
        expected_rel_error=plan.expected_rel_error,
        sensor_model=choice.describe,
        note="; ".join(x for x in (est.note, *plan.notes) if x),
        sm_clock_mhz=clocks.sm_clock_mhz,
        clock_event_reasons=",".join(clocks.reasons),
        trace=rec,
    )


def _gpu_index(g: object) -> int | None:
    """``g`` as a GPU index (an int, a numpy integer: anything ``operator.index`` takes, but a bool), else None."""
    import operator

    if isinstance(g, bool):
        return None
    try:
        i = operator.index(g)  # type: ignore[arg-type]
    except TypeError:
        return None
    return int(i) if i >= 0 else None


def _open(gpu: int) -> list[PowerSource]:
    """The power sources and the clock telemetry; a clock source the GPU or driver refuses (NVML's clock-event reasons
    before driver 535, a vGPU) is dropped by the Sampler (``OPTIONAL_QUANTITIES``), its figures then None."""
    from archline.hw.nvml import open_sources

    return list(open_sources(gpu, ("nvml.buffer", "nvml.energy", "nvml.sm_clock", "nvml.throttle")))


def _identity(gpu: int, sources: Sequence[PowerSource] | None) -> GpuIdentity | None:
    """This GPU's identity for choosing a calibration or prior (None with given sources)."""
    if sources is not None:
        return None
    from archline.hw.nvml import device_static

    return GpuIdentity.from_static(device_static(gpu))
