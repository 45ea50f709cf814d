"""The GPU executor interface: build, launch and time kernels; the rest of archline sees only this."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

__all__ = ["DeviceInfo", "Executor", "LaunchResult", "LoadedKernel"]


@dataclass(frozen=True)
class DeviceInfo:
    """Static facts about one GPU, read from the driver.

    Clocks in MHz, memory in bytes, bandwidth-relevant widths in bits.
    """

    index: int
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    max_threads_per_sm: int = 2048
    max_shared_per_block_optin_b: int = 0
    shared_per_sm_b: int = 0
    l2_bytes: int = 0
    memory_bytes: int = 0
    memory_bus_width_bits: int = 0
    max_sm_clock_mhz: float = 0.0
    max_mem_clock_mhz: float = 0.0
    uuid: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def arch(self) -> str:
        """``sm_XY`` for the compute capability."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"


@dataclass(frozen=True)
class LaunchResult:
    """Timing of a batch of identical launches on one stream.

    ``host_start_s``/``host_end_s`` are on the common clock (Unix-epoch seconds), taken just
    before the first launch was enqueued and just after the stream was synchronised;
    ``gpu_start_s``/``gpu_end_s`` are the kernel's own ``%globaltimer`` stamps where the
    kernel records them (None otherwise). ``event_s`` is the CUDA-event time of the whole
    batch; ``per_launch_event_s`` the event time of each launch when measured one by one.
    """

    launches: int
    event_s: float
    host_start_s: float
    host_end_s: float
    per_launch_event_s: tuple[float, ...] = ()
    gpu_start_s: float | None = None
    gpu_end_s: float | None = None


class LoadedKernel(Protocol):
    """A kernel built and loaded on the device."""

    name: str
    opt_level: int


@runtime_checkable
class Executor(Protocol):
    """Builds, launches and times kernels on one GPU.

    Implementations: :class:`archline.hw.cuda.CudaExecutor` (cuda-core) and the fakes in
    the tests. Buffers are opaque handles from :meth:`alloc`.
    """

    device: DeviceInfo

    def load(self, ptx: str, entry: str, *, opt_level: int = 3) -> LoadedKernel:
        """JIT-compile PTX at ptxas optimisation level ``opt_level`` (0–4) and load ``entry``."""
        ...

    def alloc(self, nbytes: int) -> Any:
        """Allocate ``nbytes`` of device memory."""
        ...

    def upload(self, buf: Any, data: NDArray[np.generic]) -> None: ...

    def download(self, buf: Any, nbytes: int) -> NDArray[np.uint8]: ...

    def free(self, buf: Any) -> None: ...

    def launch(
        self,
        kernel: LoadedKernel,
        grid: int,
        block: int,
        args: Sequence[tuple[str, Any]],
        *,
        shared_bytes: int = 0,
        repeat: int = 1,
        per_launch_timing: bool = False,
    ) -> LaunchResult:
        """Launch ``repeat`` times back to back, synchronise, and time it.

        ``args`` are ``(kind, value)`` pairs in PTX parameter order: kind ``ptr`` takes a
        buffer from :meth:`alloc`; ``u32``/``s32``/``u64``/``f32``/``f64`` take numbers.
        """
        ...

    def synchronize(self) -> None: ...
