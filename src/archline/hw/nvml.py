"""NVML power sources and device state: the only module that imports NVML (nvidia-ml-py).

Over 400 lines on purpose: everything that touches NVML lives here, so its errors are
translated in one map (:data:`_ERRORS`, used by :func:`nvml_call`), the library is initialised
in one place (:func:`_init`), every source is named once (:data:`SOURCES`) and every
timestamp comes from the session's injected clock.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import numpy as np

from archline.core.readings import Clock, Quantity, Readings, SystemClock, empty_readings
from archline.core.recording import SOURCE_NAMES
from archline.errors import (
    ArchlineError,
    GPUUnavailableError,
    NVMLUnavailableError,
    PermissionDeniedError,
    SensorError,
    UnknownNameError,
)

__all__ = [
    "DEFAULT_SOURCES",
    "SLOWDOWN_REASONS",
    "SOURCES",
    "THROTTLE_BITS",
    "NVMLSession",
    "decode_throttle",
    "device_count",
    "device_state",
    "device_static",
    "device_uuids",
    "index_of_uuid",
    "nvml_call",
    "open_sources",
]

#: Sources opened by default: every one that core.recording names, but the memory in use.
DEFAULT_SOURCES: tuple[str, ...] = tuple(n for n in SOURCE_NAMES if n != "nvml.memory_used")

#: NVML clock-event ("throttle") reason bits → name; the ones that mean the card slowed down.
THROTTLE_BITS: dict[int, tuple[str, bool]] = {
    0x1: ("gpu_idle", False),
    0x2: ("applications_clocks_setting", False),
    0x4: ("sw_power_cap", True),
    0x8: ("hw_slowdown", True),
    0x10: ("sync_boost", False),
    0x20: ("sw_thermal_slowdown", True),
    0x40: ("hw_thermal_slowdown", True),
    0x80: ("hw_power_brake_slowdown", True),
    0x100: ("display_clock_setting", False),
}
#: The names of the reasons that mean the card slowed its clocks (a power cap, a thermal or hardware slowdown).
SLOWDOWN_REASONS: frozenset[str] = frozenset(name for name, slow in THROTTLE_BITS.values() if slow)

_FI_POWER_AVERAGE = 185  # NVML_FI_DEV_POWER_AVERAGE: 1 s average on Ampere and later (NVML docs)
_FI_POWER_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT

P = ParamSpec("P")
T = TypeVar("T")


def _nvml() -> Any:
    try:
        import pynvml
    except ImportError:  # pragma: no cover - nvidia-ml-py is a hard dependency
        raise NVMLUnavailableError("the nvidia-ml-py package is not installed") from None
    return pynvml


def _error_map() -> dict[int, tuple[type[ArchlineError], str]]:
    """NVML return code → archline exception and its message (``{what}``, ``{msg}`` filled in)."""
    nv = _nvml()
    unavailable = (NVMLUnavailableError, "NVML is not available ({msg}): no NVIDIA driver on this machine?")
    lost = (GPUUnavailableError, "{what}: {msg}")
    return {
        nv.NVML_ERROR_LIBRARY_NOT_FOUND: unavailable,
        nv.NVML_ERROR_DRIVER_NOT_LOADED: unavailable,
        nv.NVML_ERROR_UNINITIALIZED: unavailable,
        nv.NVML_ERROR_NO_PERMISSION: (PermissionDeniedError, "{what}: permission denied by the NVIDIA driver ({msg})"),
        nv.NVML_ERROR_INVALID_ARGUMENT: lost,
        nv.NVML_ERROR_NOT_FOUND: lost,
        nv.NVML_ERROR_GPU_IS_LOST: lost,
        nv.NVML_ERROR_NOT_SUPPORTED: (SensorError, "{what}: not supported on this GPU ({msg})"),
    }


def _translate(exc: Exception, what: str) -> ArchlineError:
    """Map one NVMLError to archline's exception (the only place NVML errors are interpreted)."""
    cls, template = _error_map().get(getattr(exc, "value", -1), (SensorError, "{what}: NVML error: {msg}"))
    return cls(template.format(what=what, msg=str(exc)))


def nvml_call(what: str, fn: Callable[..., T], *args: Any) -> T:
    """Call one NVML function; its error becomes archline's, with ``what`` as context."""
    nv = _nvml()
    try:
        return fn(*args)
    except nv.NVMLError as exc:
        raise _translate(exc, what) from None


def _init() -> Any:
    """Initialise NVML (reference-counted by NVML itself) and return the module."""
    nv = _nvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        raise _translate(exc, "NVML initialisation") from None
    except OSError as exc:  # libnvidia-ml.so missing entirely
        raise NVMLUnavailableError(f"NVML library cannot be loaded ({exc})") from None
    return nv


def _guard(what: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Decorator: NVML errors inside become archline errors with ``what`` as context."""

    def deco(fn: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
            return nvml_call(what, lambda: fn(*args, **kwargs))

        return wrapper

    return deco


class NVMLSession:
    """An initialised NVML library and one device handle: the hardware session of one GPU.

    ``clock`` stamps every reading the session's sources take (the host's wall clock by
    default, the clock of NVML's sample buffer and of CUPTI).
    """

    @_guard("NVML initialisation")
    def __init__(self, gpu: int = 0, *, clock: Clock | None = None) -> None:
        nv = _init()
        self.clock: Clock = clock or SystemClock()
        n = nv.nvmlDeviceGetCount()
        if n == 0:
            nv.nvmlShutdown()
            raise GPUUnavailableError("NVML found no NVIDIA GPU on this machine")
        if not 0 <= gpu < n:
            nv.nvmlShutdown()
            raise GPUUnavailableError(f"no GPU with index {gpu} (this machine has {n}: 0..{n - 1})")
        self.gpu = gpu
        #: How many GPUs NVML sees (read when the session opened).
        self.device_count = int(n)
        try:
            self.handle = nv.nvmlDeviceGetHandleByIndex(gpu)
        except BaseException:
            nv.nvmlShutdown()
            raise
        self._open = True

    def close(self) -> None:
        if self._open:
            self._open = False
            with contextlib.suppress(Exception):  # shutting down: nothing useful to report
                _nvml().nvmlShutdown()

    def share(self, n: int) -> None:
        """Let ``n`` owners each :meth:`release` the session; the last release closes it."""
        self._refs = n

    def release(self) -> None:
        self._refs = getattr(self, "_refs", 1) - 1
        if self._refs <= 0:
            self.close()

    def __enter__(self) -> NVMLSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@_guard("NVML device count")
def device_count() -> int:
    """Number of NVIDIA GPUs NVML sees (raises NVMLUnavailableError without a driver)."""
    with _session_for_count() as n:
        return n


@_guard("NVML device UUIDs")
def device_uuids() -> list[str]:
    """Every GPU's UUID, in NVML's index order (the key that maps CUDA devices to NVML devices)."""
    nv = _init()
    try:
        return [
            str(_str(nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(i)))) for i in range(nv.nvmlDeviceGetCount())
        ]
    finally:
        nv.nvmlShutdown()


def index_of_uuid(uuid: str) -> int:
    """NVML's index of the GPU whose UUID is ``uuid`` or starts with it (as CUDA_VISIBLE_DEVICES may give it)."""
    uuids = device_uuids()
    hits = [i for i, u in enumerate(uuids) if u.startswith(uuid)]
    if len(hits) != 1:
        raise GPUUnavailableError(f"no single GPU with UUID {uuid!r} (this machine has {len(uuids)})")
    return hits[0]


@contextmanager
def _session_for_count() -> Iterator[int]:
    nv = _init()
    try:
        yield int(nv.nvmlDeviceGetCount())
    finally:
        nv.nvmlShutdown()


def decode_throttle(mask: int) -> tuple[list[str], bool]:
    """Names of the clock-event reasons set in ``mask``, and whether any means a slowdown."""
    names: list[str] = []
    slowed = False
    for bit, (name, is_slow) in THROTTLE_BITS.items():
        if mask & bit:
            names.append(name)
            slowed = slowed or is_slow
    return names, slowed


def _try(fn: Callable[[], Any]) -> Any:
    nv = _nvml()
    try:
        return fn()
    except nv.NVMLError as exc:
        return f"n/a ({exc})"


def _str(v: Any) -> Any:
    return v.decode() if isinstance(v, bytes) else v


def _as_session(gpu: int | NVMLSession) -> tuple[NVMLSession, bool]:
    """The session to use, and whether the caller owns it (and must close it)."""
    if isinstance(gpu, NVMLSession):
        return gpu, False
    return NVMLSession(gpu), True


def device_static(gpu: int | NVMLSession) -> dict[str, Any]:
    """Static facts for the manifest: name, UUID, driver and CUDA versions, limits, PCI id."""
    session, own = _as_session(gpu)
    try:
        return _device_static(session)
    finally:
        if own:
            session.close()


def _device_static(session: NVMLSession) -> dict[str, Any]:
    nv = _nvml()
    h = session.handle
    d: dict[str, Any] = {
        "index": session.gpu,
        "name": _str(_try(lambda: nv.nvmlDeviceGetName(h))),
        "uuid": _str(_try(lambda: nv.nvmlDeviceGetUUID(h))),
        "serial": _str(_try(lambda: nv.nvmlDeviceGetSerial(h))),
        "pci_bus_id": _str(_try(lambda: nv.nvmlDeviceGetPciInfo(h).busId)),
        "vbios": _str(_try(lambda: nv.nvmlDeviceGetVbiosVersion(h))),
        "driver_version": _str(_try(nv.nvmlSystemGetDriverVersion)),
        "cuda_driver_version": _try(nv.nvmlSystemGetCudaDriverVersion),
        "nvml_version": _str(_try(nv.nvmlSystemGetNVMLVersion)),
        "memory_total_b": _try(lambda: int(nv.nvmlDeviceGetMemoryInfo(h).total)),
        "max_sm_clock_mhz": _try(lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
        "max_mem_clock_mhz": _try(lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)),
        "default_power_limit_w": _try(lambda: nv.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000.0),
        "power_limit_range_w": _try(lambda: [x / 1000.0 for x in nv.nvmlDeviceGetPowerManagementLimitConstraints(h)]),
    }
    return d


def device_state(gpu: int | NVMLSession) -> dict[str, Any]:
    """The card's settings and readings now, as archline found them (it never changes them).

    Clocks in MHz, power in W, temperature in °C, memory in bytes.
    """
    session, own = _as_session(gpu)
    try:
        return _device_state(session)
    finally:
        if own:
            session.close()


def _device_state(session: NVMLSession) -> dict[str, Any]:
    nv = _nvml()
    h = session.handle

    def throttle() -> dict[str, Any]:
        mask = int(nv.nvmlDeviceGetCurrentClocksEventReasons(h))
        names, slowed = decode_throttle(mask)
        return {"mask": mask, "reasons": names, "throttled": slowed}

    return {
        "time_utc_s": session.clock.now_s(),
        "sm_clock_mhz": _try(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
        "mem_clock_mhz": _try(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
        "app_sm_clock_mhz": _try(lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_SM)),
        "app_mem_clock_mhz": _try(lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_MEM)),
        "power_limit_w": _try(lambda: nv.nvmlDeviceGetPowerManagementLimit(h) / 1000.0),
        "enforced_power_limit_w": _try(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0),
        "power_w": _try(lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
        "persistence_mode": _try(lambda: bool(nv.nvmlDeviceGetPersistenceMode(h))),
        "compute_mode": _try(lambda: int(nv.nvmlDeviceGetComputeMode(h))),
        "pstate": _try(lambda: int(nv.nvmlDeviceGetPerformanceState(h))),
        "temperature_c": _try(lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
        "memory_used_b": _try(lambda: int(nv.nvmlDeviceGetMemoryInfo(h).used)),
        "mig_mode": _try(lambda: nv.nvmlDeviceGetMigMode(h)[0]),
        "throttle": _try(throttle),
    }


# --------------------------------------------------------------------------- sources


class _NVMLSource:
    """Common parts of the NVML sources; subclasses implement ``_read``."""

    name: str = ""
    quantity: Quantity = "power"
    poll_interval_s: float = 0.01
    blocking: bool = False
    nominal_period_s: float | None = None

    def __init__(self, session: NVMLSession) -> None:
        self._session = session
        self._h = session.handle
        self._owns_session = False

    def read(self) -> Readings:
        return nvml_call(f"{self.name} on GPU {self._session.gpu}", self._read)

    def _now_ns(self) -> int:
        return round(self._session.clock.now_s() * 1e9)

    def _read(self) -> Readings:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        if self._owns_session:
            self._owns_session = False
            self._session.release()

    def _one(self, t_s: float, value: float) -> Readings:
        return Readings(self.name, self.quantity, np.array([t_s]), np.array([value], dtype=np.float64))


class BufferSource(_NVMLSource):
    """NVML's power sample buffer (``nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES)``).

    Units: W. Each sample carries the driver's own timestamp (µs of CLOCK_REALTIME). The ring
    holds ~119 samples (~2.4 s at 20 ms); it is drained every 0.25 s from ``LOOKBACK_S``
    before the newest stamp seen, and only stamps not yet seen are kept, so a sample the
    driver might file after a newer one would still be caught (none was seen on an H100:
    benchmarks/bench_sampler.py). Equivalent query: ``nvidia-smi
    --query-gpu=power.draw`` gives a different (averaged) value.
    """

    LOOKBACK_S = 0.5

    name = "nvml.buffer"
    quantity: Quantity = "power"
    poll_interval_s = 0.25
    nominal_period_s = 0.020

    def __init__(self, session: NVMLSession) -> None:
        super().__init__(session)
        # Start from "now" so the recording does not include samples from before it began.
        self._start_us = self._last_us = self._now_ns() // 1000
        self._recent: set[int] = set()

    def _read(self) -> Readings:
        nv = _nvml()
        since = max(self._start_us, self._last_us - int(self.LOOKBACK_S * 1e6))
        try:
            _, samples = nv.nvmlDeviceGetSamples(self._h, nv.NVML_TOTAL_POWER_SAMPLES, since)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) == nv.NVML_ERROR_NOT_FOUND:  # no new sample since last_us
                return empty_readings(self.name, self.quantity)
            raise
        ts = np.fromiter((int(s.timeStamp) for s in samples), dtype=np.int64, count=len(samples))
        vals = np.fromiter((float(s.sampleValue.uiVal) for s in samples), dtype=np.float64, count=len(samples))
        seen = self._recent
        keep = np.fromiter((t > self._start_us and t not in seen for t in ts.tolist()), dtype=bool, count=ts.size)
        ts, vals = ts[keep], vals[keep]
        if ts.size == 0:
            return empty_readings(self.name, self.quantity)
        order = np.argsort(ts, kind="stable")
        ts, vals = ts[order], vals[order]
        self._last_us = max(self._last_us, int(ts[-1]))
        seen.update(ts.tolist())
        horizon = self._last_us - 2 * int(self.LOOKBACK_S * 1e6)
        if len(seen) > 256:
            self._recent = {t for t in seen if t >= horizon}
        return Readings(self.name, self.quantity, ts.astype(np.float64) * 1e-6, vals * 1e-3)


class _ChangeOnly(_NVMLSource):
    """A polled power value that updates far less often than it is polled.

    Polling every 5 ms a value that changes every 100 ms returns each value ~20 times; only
    the first query that sees a new value is kept, stamped at that query. The stamp is then
    the update time to within one poll interval, and the repeats (Burtscher's "repeated
    readings") never reach the analysis. ``meta['polls']`` counts every query.
    """

    quantity: Quantity = "power"
    poll_interval_s = 0.005

    def __init__(self, session: NVMLSession) -> None:
        super().__init__(session)
        self._last: float | None = None
        self._polls = 0

    def _value_w(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _read(self) -> Readings:
        t0 = self._now_ns()
        v = self._value_w()
        t1 = self._now_ns()
        self._polls += 1
        if v == self._last:
            return empty_readings(self.name, self.quantity)
        self._last = v
        r = self._one((t0 + t1) * 0.5e-9, v)
        return Readings(r.source, r.quantity, r.t_s, r.value, {"polls": self._polls, "change_only": True})


class FieldSource(_ChangeOnly):
    """A power field read with ``nvmlDeviceGetFieldValues`` (instant: 186, average: 185).

    Units: W. NVML stamps the value with the query time, not with the time the value was
    produced (measured on H100/H200: the value changes every ~100 ms), so only changes are
    kept, stamped at the first query that saw them (see :class:`_ChangeOnly`).
    """

    def __init__(self, session: NVMLSession, field_id: int, name: str) -> None:
        super().__init__(session)
        self._fid = field_id
        self.name = name
        self.nominal_period_s = 0.1

    def _value_w(self) -> float:
        nv = _nvml()
        (fv,) = nv.nvmlDeviceGetFieldValues(self._h, [self._fid])
        if int(fv.nvmlReturn) != nv.NVML_SUCCESS:
            raise nv.NVMLError(int(fv.nvmlReturn))
        return float(fv.value.uiVal) * 1e-3


class UsageSource(_ChangeOnly):
    """``nvmlDeviceGetPowerUsage`` (W; on Ampere and later a 1 s average; ``nvidia-smi power.draw``).

    Only changes are kept (see :class:`_ChangeOnly`).
    """

    name = "nvml.usage"
    poll_interval_s = 0.01
    nominal_period_s = 0.1

    def _value_w(self) -> float:
        return float(_nvml().nvmlDeviceGetPowerUsage(self._h)) * 1e-3


class EnergySource(_NVMLSource):
    """``nvmlDeviceGetTotalEnergyConsumption``: cumulative board energy since driver load, J.

    The call blocks for 2–4.5 ms (measured on H100/H200), so it gets a thread of its own; the
    counter itself updates every ~100 ms. ``t_s`` is the mid-point of the call. The driver
    serialises these reads: 16 threads reading at once read only ~3x as often as one, each
    read then waiting ~66 ms (benchmarks/overhead_interleaved.py, docs/attribution.md).
    """

    name = "nvml.energy"
    quantity: Quantity = "energy"
    poll_interval_s = 0.01
    blocking = True
    nominal_period_s = 0.1

    def _read(self) -> Readings:
        nv = _nvml()
        t0 = self._now_ns()
        mj = nv.nvmlDeviceGetTotalEnergyConsumption(self._h)
        t1 = self._now_ns()
        r = self._one((t0 + t1) * 0.5e-9, float(mj) * 1e-3)
        return Readings(r.source, r.quantity, r.t_s, r.value, {"call_s": (t1 - t0) * 1e-9})


class _ScalarSource(_NVMLSource):
    """A cheap scalar telemetry value polled at 20 Hz."""

    poll_interval_s = 0.05

    def __init__(self, session: NVMLSession, name: str, quantity: Quantity, getter: Callable[[Any], float]) -> None:
        super().__init__(session)
        self.name = name
        self.quantity = quantity
        self._get = getter

    def _read(self) -> Readings:
        t0 = self._now_ns()
        v = self._get(self._h)
        t1 = self._now_ns()
        return self._one((t0 + t1) * 0.5e-9, float(v))


def _clock(kind: str) -> Callable[[Any], float]:
    return lambda h: float(_nvml().nvmlDeviceGetClockInfo(h, getattr(_nvml(), kind)))


#: Cheap scalar telemetry: name → (quantity, getter on a device handle).
_SCALARS: dict[str, tuple[Quantity, Callable[[Any], float]]] = {
    "nvml.sm_clock": ("sm_clock", _clock("NVML_CLOCK_SM")),
    "nvml.mem_clock": ("mem_clock", _clock("NVML_CLOCK_MEM")),
    "nvml.temperature": (
        "temperature",
        lambda h: float(_nvml().nvmlDeviceGetTemperature(h, _nvml().NVML_TEMPERATURE_GPU)),
    ),
    "nvml.throttle": ("throttle", lambda h: float(_nvml().nvmlDeviceGetCurrentClocksEventReasons(h))),
    "nvml.memory_used": ("memory_used", lambda h: float(_nvml().nvmlDeviceGetMemoryInfo(h).used)),
}


def open_sources(gpu: int | NVMLSession, names: Sequence[str] | None = None) -> list[_NVMLSource]:
    """Open the named NVML sources on a GPU (default :data:`DEFAULT_SOURCES`).

    ``gpu`` is an index or an open :class:`NVMLSession`. With an index, the sources own a
    session of their own, released when every source is closed. Unknown names raise
    ``UnknownNameError``; a source the GPU does not support raises ``SensorError`` when read.
    """
    if names is not None and not list(names):
        raise UnknownNameError("no NVML source named (give at least one, e.g. nvml.buffer)")
    session, own = _as_session(gpu)
    try:
        out = _open(session, names)
    except BaseException:
        if own:
            session.close()
        raise
    if own:
        session.share(len(out))
        for src in out:
            src._owns_session = True
    return out


#: Every NVML source by name, and how to open it on a session (the one list of names).
SOURCES: dict[str, Callable[[NVMLSession], _NVMLSource]] = {
    "nvml.buffer": BufferSource,
    "nvml.instant": lambda s: FieldSource(s, _FI_POWER_INSTANT, "nvml.instant"),
    "nvml.average": lambda s: FieldSource(s, _FI_POWER_AVERAGE, "nvml.average"),
    "nvml.usage": UsageSource,
    "nvml.energy": EnergySource,
    **{name: functools.partial(_ScalarSource, name=name, quantity=q, getter=g) for name, (q, g) in _SCALARS.items()},
}


def _open(session: NVMLSession, names: Sequence[str] | None) -> list[_NVMLSource]:
    wanted = tuple(names) if names is not None else DEFAULT_SOURCES
    unknown = [n for n in wanted if n not in SOURCES]
    if unknown:
        raise UnknownNameError(f"unknown NVML source {unknown[0]!r} (known: {', '.join(SOURCES)})")
    return [SOURCES[n](session) for n in wanted]
