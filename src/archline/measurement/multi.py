"""Several GPUs measured at once: one :class:`Measurement` (and sampler thread) per GPU, per GPU and in total."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from archline.core.frames import Tabular


class Measurement(Protocol):
    """What a per-GPU measurement offers (archline.measurement.api.Measurement)."""

    def __enter__(self) -> Any: ...
    def __exit__(self, *exc: object) -> None: ...
    def region(self, name: str, **meta: Any) -> contextlib.AbstractContextManager[None]: ...
    @property
    def energy_j(self) -> float | None: ...
    @property
    def energy_uncertainty_j(self) -> float | None: ...
    @property
    def mean_power_w(self) -> float | None: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def resolvable(self) -> bool: ...


__all__ = ["Measurement", "MultiMeasurement"]


class MultiMeasurement(contextlib.ContextDecorator, Tabular):
    """``with archline.measure(gpu=[0, 1]) as m``: ``m.per_gpu[i]`` is GPU i's :class:`Measurement`.

    Each GPU is sampled by its own thread over the same span; ``energy_j`` is their sum, with the
    per-GPU uncertainties added in quadrature (the GPUs' sensors are independent).
    """

    def __init__(self, gpus: Sequence[int], make: Callable[[int], Measurement]) -> None:
        if not gpus:
            raise ValueError("measure(gpu=[...]) needs at least one GPU")
        self.per_gpu: dict[int, Measurement] = {g: make(g) for g in gpus}

    def table_rows(self) -> list[dict[str, Any]]:
        """One row per GPU: energy (J) with its 1 σ, mean power (W)."""
        return [
            {
                "gpu": g,
                "energy_j": m.energy_j,
                "energy_uncertainty_j": m.energy_uncertainty_j,
                "mean_power_w": m.mean_power_w,
                "resolvable": m.resolvable,
            }
            for g, m in self.per_gpu.items()
        ]

    def __enter__(self) -> MultiMeasurement:
        entered: list[Measurement] = []
        try:
            for m in self.per_gpu.values():
                m.__enter__()
                entered.append(m)
        except BaseException:
            for m in reversed(entered):
                with contextlib.suppress(Exception):
                    m.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        errors: list[BaseException] = []
        for m in self.per_gpu.values():
            try:
                m.__exit__(*exc)
            except Exception as e:  # close every GPU's sampler before raising the first failure
                errors.append(e)
        if errors:
            raise errors[0]

    @contextlib.contextmanager
    def region(self, name: str, **meta: Any) -> Iterator[None]:
        """The same named region on every GPU."""
        with contextlib.ExitStack() as stack:
            for m in self.per_gpu.values():
                stack.enter_context(m.region(name, **meta))
            yield

    @property
    def energy_j(self) -> float | None:
        vals = [m.energy_j for m in self.per_gpu.values()]
        return None if any(v is None for v in vals) else math.fsum(v for v in vals if v is not None)

    @property
    def energy_uncertainty_j(self) -> float | None:
        vals = [m.energy_uncertainty_j for m in self.per_gpu.values()]
        return None if any(v is None for v in vals) else math.hypot(*(v for v in vals if v is not None))

    @property
    def mean_power_w(self) -> float | None:
        vals = [m.mean_power_w for m in self.per_gpu.values()]
        return None if any(v is None for v in vals) else math.fsum(v for v in vals if v is not None)

    @property
    def duration_s(self) -> float:
        return max(m.duration_s for m in self.per_gpu.values())

    @property
    def resolvable(self) -> bool:
        return all(m.resolvable for m in self.per_gpu.values())
