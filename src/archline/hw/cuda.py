"""The CUDA executor: JIT PTX at a chosen ptxas level, launch and time kernels through cuda-core."""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from archline.core.executor import DeviceInfo, LaunchResult
from archline.errors import BenchmarkError, GPUUnavailableError

__all__ = ["CudaExecutor", "CudaKernel", "import_cuda_core"]


def import_cuda_core() -> Any:
    """The ``cuda.core`` module (1.x) or its 0.x ``experimental`` namespace."""
    try:
        import cuda.core as core

        if hasattr(core, "Linker"):
            return core
    except ImportError:
        pass
    try:
        import cuda.core.experimental as core_exp

        return core_exp
    except ImportError:
        raise GPUUnavailableError(
            "the CUDA Python packages are not installed (pip install 'archline[gpu]' for cuda-core and cuda-bindings)"
        ) from None


def _driver() -> Any:
    try:
        from cuda.bindings import driver
    except ImportError:
        raise GPUUnavailableError("cuda-bindings is not installed (pip install 'archline[gpu]')") from None
    return driver


def _check(result: Any, what: str) -> Any:
    """Unpack a cuda.bindings ``(err, *values)`` tuple, raising BenchmarkError on failure."""
    drv = _driver()
    if isinstance(result, tuple):
        err, rest = result[0], result[1:]
    else:
        err, rest = result, ()
    if err != drv.CUresult.CUDA_SUCCESS:
        _, name = drv.cuGetErrorName(err)
        raise BenchmarkError(f"{what} failed: {name.decode() if isinstance(name, bytes) else name}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


@dataclass
class CudaKernel:
    """A loaded kernel and how it was built."""

    name: str
    opt_level: int
    handle: Any
    registers: int | None = None
    local_bytes: int | None = None


class CudaExecutor:
    """The :class:`~archline.core.executor.Executor` for NVIDIA GPUs, built on NVIDIA's cuda-core.

    PTX is linked to a cubin by cuda-core's ``Linker`` (nvJitLink, or the driver's cuLink)
    with an explicit ``optimization_level`` (ptxas -O0 … -O4). Launches go on one stream;
    timing uses CUDA events (driver API) around the batch, and host wall-clock stamps
    (``time.time_ns``, the clock NVML's sample buffer uses) just before the first enqueue and
    just after the stream is synchronised.
    """

    def __init__(self, gpu: int = 0) -> None:
        core = import_cuda_core()
        self._core = core
        try:
            dev = core.Device(gpu)
            dev.set_current()
        except Exception as exc:
            raise GPUUnavailableError(f"cannot open CUDA device {gpu} ({exc})") from None
        self._dev = dev
        self._stream = dev.create_stream()
        self._cache: dict[tuple[str, str, int], CudaKernel] = {}
        self.device = self._device_info(gpu)

    # ------------------------------------------------------------------ device
    def _device_info(self, gpu: int) -> DeviceInfo:
        p = self._dev.properties

        def prop(name: str, default: int = 0) -> int:
            try:
                return int(getattr(p, name))
            except Exception:
                return default

        cc = self._dev.compute_capability
        try:
            uuid = str(self._dev.uuid)
        except Exception:
            uuid = ""
        total = 0
        try:
            _, total = _check(_driver().cuMemGetInfo(), "cuMemGetInfo")
        except Exception:
            total = 0
        return DeviceInfo(
            index=gpu,
            name=str(self._dev.name),
            compute_capability=(int(cc[0]), int(cc[1])),
            sm_count=prop("multiprocessor_count"),
            max_threads_per_sm=prop("max_threads_per_multiprocessor", 2048),
            max_shared_per_block_optin_b=prop("max_shared_memory_per_block_optin"),
            shared_per_sm_b=prop("max_shared_memory_per_multiprocessor"),
            l2_bytes=prop("l2_cache_size"),
            memory_bytes=int(total),
            memory_bus_width_bits=prop("global_memory_bus_width"),
            max_sm_clock_mhz=prop("clock_rate") / 1000.0,
            max_mem_clock_mhz=prop("memory_clock_rate") / 1000.0,
            uuid=uuid,
        )

    # ------------------------------------------------------------------ build
    def load(self, ptx: str, entry: str, *, opt_level: int = 3) -> CudaKernel:
        """JIT-link ``ptx`` for this GPU at ptxas level ``opt_level`` and return ``entry``."""
        if not 0 <= opt_level <= 4:
            raise BenchmarkError(f"optimisation level {opt_level} is outside 0–4")
        key = (hashlib.sha256(ptx.encode()).hexdigest(), entry, opt_level)
        if key in self._cache:
            return self._cache[key]
        core = self._core
        arch = self.device.arch
        # Architecture-specific PTX (``.target sm_90a``) links only for that exact target.
        specific = re.search(r"^\.target\s+(sm_\d+a)\b", ptx, re.MULTILINE)
        if specific and specific.group(1)[:-1] == arch:
            arch = specific.group(1)
        try:
            opts = core.LinkerOptions(arch=arch, optimization_level=opt_level)
            linker = core.Linker(core.ObjectCode.from_ptx(ptx.encode()), options=opts)
            cubin = linker.link("cubin")
            handle = cubin.get_kernel(entry)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BenchmarkError(f"building kernel {entry!r} at -O{opt_level} for {arch} failed: {first}") from None
        k = CudaKernel(entry, opt_level, handle)
        try:
            attrs = handle.attributes
            k.registers = int(attrs.num_regs())
            k.local_bytes = int(attrs.local_size_bytes())
        except Exception:
            pass
        self._cache[key] = k
        return k

    # ------------------------------------------------------------------ memory
    def alloc(self, nbytes: int) -> Any:
        try:
            return self._dev.allocate(max(int(nbytes), 1), stream=self._stream)
        except Exception as exc:
            raise BenchmarkError(f"cannot allocate {nbytes / 2**20:.1f} MiB of device memory ({exc})") from None

    @staticmethod
    def _ptr(buf: Any) -> int:
        return int(buf.handle)

    def upload(self, buf: Any, data: NDArray[np.generic]) -> None:
        arr = np.ascontiguousarray(data)
        self._stream.sync()
        _check(_driver().cuMemcpyHtoD(self._ptr(buf), arr.ctypes.data, arr.nbytes), "copy to device")

    def download(self, buf: Any, nbytes: int) -> NDArray[np.uint8]:
        out = np.empty(int(nbytes), dtype=np.uint8)
        self._stream.sync()
        _check(_driver().cuMemcpyDtoH(out.ctypes.data, self._ptr(buf), int(nbytes)), "copy to host")
        return out

    def fill(self, buf: Any, nbytes: int, byte: int) -> None:
        """Set ``nbytes`` of ``buf`` to ``byte`` (e.g. a poison pattern before a launch)."""
        _check(_driver().cuMemsetD8(self._ptr(buf), int(byte) & 0xFF, int(nbytes)), "memset")

    def free(self, buf: Any) -> None:
        try:
            buf.close(self._stream)
        except TypeError:
            buf.close()

    # ------------------------------------------------------------------ launch
    def _event(self) -> Any:
        return _check(_driver().cuEventCreate(0), "cuEventCreate")

    def _record(self, ev: Any) -> None:
        _check(_driver().cuEventRecord(ev, int(self._stream.handle)), "cuEventRecord")

    def _elapsed_s(self, a: Any, b: Any) -> float:
        ms = _check(_driver().cuEventElapsedTime(a, b), "cuEventElapsedTime")
        return float(ms) * 1e-3

    def _pack(self, args: Sequence[tuple[str, Any]]) -> list[Any]:
        conv = {"u32": np.uint32, "s32": np.int32, "u64": np.uint64, "f32": np.float32, "f64": np.float64}
        out: list[Any] = []
        for kind, v in args:
            if kind == "ptr":
                out.append(v)
            elif kind in conv:
                out.append(conv[kind](v))
            else:
                raise BenchmarkError(f"unknown kernel argument kind {kind!r}")
        return out

    def launch(
        self,
        kernel: Any,
        grid: int,
        block: int,
        args: Sequence[tuple[str, Any]],
        *,
        shared_bytes: int = 0,
        repeat: int = 1,
        per_launch_timing: bool = False,
    ) -> LaunchResult:
        core = self._core
        if shared_bytes > 48 * 1024:
            self._allow_shared(kernel, shared_bytes)
        cfg = core.LaunchConfig(grid=int(grid), block=int(block), shmem_size=int(shared_bytes))
        packed = self._pack(args)
        drv = _driver()
        n_ev = repeat + 1 if per_launch_timing else 2
        evs = [self._event() for _ in range(n_ev)]
        try:
            h0 = time.time_ns()
            self._record(evs[0])
            for i in range(repeat):
                core.launch(self._stream, cfg, kernel.handle, *packed)
                if per_launch_timing:
                    self._record(evs[i + 1])
            if not per_launch_timing:
                self._record(evs[1])
            _check(drv.cuEventSynchronize(evs[-1]), "kernel execution")
            h1 = time.time_ns()
            total = self._elapsed_s(evs[0], evs[-1])
            per: tuple[float, ...] = ()
            if per_launch_timing:
                per = tuple(self._elapsed_s(evs[i], evs[i + 1]) for i in range(repeat))
        except BenchmarkError:
            raise
        except Exception as exc:
            raise BenchmarkError(f"launching {kernel.name!r} failed: {exc}") from None
        finally:
            for e in evs:
                drv.cuEventDestroy(e)
        return LaunchResult(repeat, total, h0 * 1e-9, h1 * 1e-9, per)

    def _allow_shared(self, kernel: Any, nbytes: int) -> None:
        drv = _driver()
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        h = kernel.handle
        try:
            h.attributes.max_dynamic_shared_size_bytes = nbytes  # newer cuda-core
            return
        except Exception:
            pass
        try:
            raw = getattr(h, "handle", None) or getattr(h, "_handle", None)
            _check(drv.cuKernelSetAttribute(attr, nbytes, raw, self.device.index), "allow dynamic shared memory")
        except BenchmarkError:
            raise
        except Exception as exc:
            raise BenchmarkError(f"cannot raise the dynamic shared-memory limit to {nbytes} B ({exc})") from None

    def synchronize(self) -> None:
        self._stream.sync()

    # ------------------------------------------------------------------ reference copies
    def copy_bandwidth(self, nbytes: int = 1 << 30, repeat: int = 20) -> tuple[float, float]:
        """Device-to-device copy: (bytes read + written per second, seconds per copy), median of ``repeat``."""
        drv = _driver()
        a, b = self.alloc(nbytes), self.alloc(nbytes)
        try:
            _check(drv.cuMemsetD8(self._ptr(a), 0x5A, nbytes), "memset")
            times = []
            for i in range(repeat + 2):
                e0, e1 = self._event(), self._event()
                self._record(e0)
                _check(drv.cuMemcpyDtoDAsync(self._ptr(b), self._ptr(a), nbytes, int(self._stream.handle)), "copy")
                self._record(e1)
                _check(drv.cuEventSynchronize(e1), "copy")
                if i >= 2:  # two warm-ups
                    times.append(self._elapsed_s(e0, e1))
                drv.cuEventDestroy(e0)
                drv.cuEventDestroy(e1)
            t = float(np.median(times))
            return 2.0 * nbytes / t, t
        finally:
            self.free(a)
            self.free(b)

    def close(self) -> None:
        self._cache.clear()
        with contextlib.suppress(Exception):
            self._stream.close()
