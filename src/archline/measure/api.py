"""The Python API for measuring energy: ``archline.measure()`` regions and ``measure_callable``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from archline.bench.energy import WindowEstimate, estimate_window
from archline.measure.recording import Recording, Region
from archline.measure.sampler import Sampler
from archline.sensors.base import Clock, PowerSource

__all__ = ["Measurement", "RegionEnergy", "measure"]

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

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    @classmethod
    def from_estimate(cls, r: Region, e: WindowEstimate) -> RegionEnergy:
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
        )


@dataclass
class Measurement(contextlib.ContextDecorator):
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
    sync: Callable[[], None] | None = None
    clock: Clock | None = None
    estimator: Callable[[Recording, Region], WindowEstimate] = estimate_window
    settle_s: float = 0.1
    regions: dict[str, RegionEnergy] = field(default_factory=dict, init=False)
    trace: Recording | None = field(default=None, init=False)
    _sampler: Sampler | None = field(default=None, init=False, repr=False)
    _total: RegionEnergy | None = field(default=None, init=False, repr=False)
    _t0: float = field(default=0.0, init=False, repr=False)
    _names: set[str] = field(default_factory=set, init=False, repr=False)

    def _sync(self) -> None:
        if self.sync is None:
            from archline.gpu.sync import default_synchronizer

            self.sync = default_synchronizer(self.gpu)
        self.sync()

    def __enter__(self) -> Measurement:
        srcs = list(self.sources) if self.sources is not None else self._open_nvml()
        self._sampler = Sampler(srcs, self.clock, settle_s=self.settle_s, meta={"gpu": self.gpu}).start()
        self.regions = {}
        self._names = set()
        self._sync()
        self._t0 = self._sampler.now_s()
        return self

    def _open_nvml(self) -> list[PowerSource]:
        from archline.sensors.nvml import open_sources

        return list(open_sources(self.gpu))

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
        self._sync()
        total = self._sampler.mark(_TOTAL, self._t0, self._sampler.now_s(), "host")
        try:
            self.trace = self._sampler.stop()
        finally:
            self._sampler.close()
        rec = self.trace
        self._total = RegionEnergy.from_estimate(total, self.estimator(rec, total))
        self.regions = {
            r.name: RegionEnergy.from_estimate(r, self.estimator(rec, r)) for r in rec.regions if r.name != _TOTAL
        }

    # ------------------------------------------------------------------ results
    def _done(self) -> RegionEnergy:
        if self._total is None:
            raise RuntimeError("the measurement has not finished yet")
        return self._total

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


def measure(gpu: int = 0, **kwargs: Any) -> Measurement:
    """Context manager (and decorator) measuring GPU energy; see :class:`Measurement`."""
    return Measurement(gpu=gpu, **kwargs)
