"""The few device facts kernel sizes depend on (SM count, L2 size, shared memory), without CUDA."""

from __future__ import annotations

from dataclasses import dataclass

from archline.core.executor import DeviceInfo

__all__ = ["DRAM_BUFFER_MIN_B", "Target"]

#: DRAM benchmarks stream through at least this much memory per pass (H100 L2 is 50 MB,
#: H200 60 MB), so no pass is served from the L2.
DRAM_BUFFER_MIN_B = 1 << 30


@dataclass(frozen=True)
class Target:
    """Sizes for one GPU. The defaults describe an H100 SXM (132 SMs, 50 MiB L2, 227 KiB
    opt-in shared memory per block); pass the real device with :meth:`from_device`."""

    sm_count: int = 132
    l2_bytes: int = 50 * 1024 * 1024
    shared_per_block_b: int = 227 * 1024
    max_threads_per_sm: int = 2048
    name: str = "default (H100 SXM sizes)"
    #: Bytes each DRAM pass streams through at least (tests shrink it to simulate on a CPU).
    dram_buffer_b: int = DRAM_BUFFER_MIN_B

    @classmethod
    def from_device(cls, dev: DeviceInfo) -> Target:
        return cls(
            sm_count=dev.sm_count,
            l2_bytes=dev.l2_bytes or cls.l2_bytes,
            shared_per_block_b=dev.max_shared_per_block_optin_b or cls.shared_per_block_b,
            max_threads_per_sm=dev.max_threads_per_sm or cls.max_threads_per_sm,
            name=dev.name,
        )

    @classmethod
    def of(cls, device: DeviceInfo | Target | None) -> Target:
        if device is None:
            return cls()
        if isinstance(device, Target):
            return device
        return cls.from_device(device)
