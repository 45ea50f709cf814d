"""The benchmark runner: build, calibrate, warm up, measure under the sampler, verify, and record."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from archline.characterize.kernels.archs import device_arch, skip_reason
from archline.core.arch import VOLTA_NOTE, ptx_for
from archline.core.executor import Executor, LaunchResult
from archline.core.kernel import Arg, KernelSpec
from archline.core.readings import Clock, SystemClock
from archline.core.recording import Recording, Region
from archline.errors import BenchmarkError
from archline.measurement.energy import WindowEstimate, WindowEstimator
from archline.measurement.sampler import Sampler

__all__ = ["POISON_BYTE", "KernelRun", "Runner", "RunnerOptions"]

#: Byte every ``out`` buffer is filled with before a verified launch: a kernel that did not
#: write its outputs leaves 0xFFFFFFFF words (NaN as float32/float64), which verify rejects.
POISON_BYTE = 0xFF

_U32_MAX = 2**32 - 1


@dataclass(frozen=True)
class RunnerOptions:
    """How long and how carefully each benchmark is measured.

    ``target_s``: wall time of the measured batch (≥ 1 s gives the 20 ms sensor ≥ 50 updates);
    ``calib_min_s``: a calibration launch must last at least this long before it is trusted
    (pyperf-style doubling); ``idle_gap_s``: idle time between benchmarks, which gives the
    sensor time to report the end of one and the idle baseline of the next;
    ``max_launch_s``: no single launch longer than this (the batch repeats launches instead).
    """

    target_s: float = 1.0
    calib_min_s: float = 0.02
    idle_gap_s: float = 0.35
    max_launch_s: float = 1.0
    opt_level: int = 3
    verify: bool = True
    seed: int = 12345
    warmup: bool = True


@dataclass
class KernelRun:
    """Everything measured for one KernelSpec: the results row plus the raw timing."""

    spec: KernelSpec
    row: dict[str, Any]
    launch: LaunchResult | None = None
    region: Region | None = None
    estimate: WindowEstimate | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _dtype_for(arg: Arg, spec: KernelSpec) -> np.dtype[Any]:
    return np.dtype(spec.out_dtypes.get(arg.name, "uint32"))


class _HostArrays:
    """Host-side initial contents of buffers, cached by (init, size, stride)."""

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._cache: dict[tuple[str, int, int], NDArray[np.generic]] = {}

    def get(self, init: str, nbytes: int, stride: int) -> NDArray[np.generic] | None:
        key = (init, nbytes, stride)
        if key in self._cache:
            return self._cache[key]
        rng = np.random.default_rng(self._seed)
        n4 = nbytes // 4
        arr: NDArray[np.generic] | None
        if init == "zeros":
            arr = None  # memset
        elif init == "iota_u32":
            arr = np.arange(n4, dtype=np.uint32)
        elif init == "random_u32":
            arr = rng.integers(0, 2**32, size=n4, dtype=np.uint32)
        elif init == "random_f32":
            arr = rng.uniform(1.0, 2.0, size=n4).astype(np.float32)
        elif init == "ones_f32":
            arr = np.ones(n4, dtype=np.float32)
        elif init == "ones_f64":
            arr = np.ones(nbytes // 8, dtype=np.float64)
        elif init == "chase_u32":
            idx = np.arange(n4, dtype=np.uint64)
            arr = ((idx + max(stride, 1)) % max(n4, 1)).astype(np.uint32)
        else:
            raise BenchmarkError(f"unknown buffer initialisation {init!r}")
        if arr is not None and arr.nbytes < nbytes:
            pad = np.zeros(nbytes - arr.nbytes, dtype=np.uint8)
            arr = np.concatenate([arr.view(np.uint8), pad])
        if arr is not None and nbytes <= 1 << 31:
            self._cache[key] = arr
        return arr


class Runner:
    """Runs KernelSpecs on an Executor while a Sampler records power.

    The sampler runs for the whole session; each measured batch is marked as a region on the
    common clock (end = host time after the stream synchronised, start = end − CUDA-event
    time of the batch), so its energy can be computed from any recorded source.
    """

    def __init__(
        self,
        executor: Executor,
        sampler: Sampler,
        options: RunnerOptions | None = None,
        clock: Clock | None = None,
        estimator: Callable[[Recording, Region], WindowEstimate] | None = None,
    ) -> None:
        self.ex = executor
        self.sampler = sampler
        self.opt = options or RunnerOptions()
        self.clock: Clock = clock or SystemClock()
        # Without a calibrated estimator, the model is inferred once from the data, then reused.
        self._estimate = estimator if estimator is not None else WindowEstimator()
        self._host = _HostArrays(self.opt.seed)

    # ------------------------------------------------------------------ public
    def run(
        self,
        spec: KernelSpec,
        *,
        opt_level: int | None = None,
        target_s: float | None = None,
        iters: int | None = None,
    ) -> KernelRun:
        """Measure one kernel. Failures become a row with ``status=failed`` and a note.

        ``iters`` fixes the trip count instead of calibrating it (an overhead kernel must run
        the same trips as its instruction kernel).
        """
        lvl = self.opt.opt_level if opt_level is None else opt_level
        why = self.skip_reason(spec)
        if why is not None:
            return KernelRun(spec, self._base_row(spec, lvl) | {"status": "skipped", "note": why})
        try:
            return self._run(spec, lvl, target_s or self.opt.target_s, iters)
        except BenchmarkError as exc:
            return KernelRun(spec, self._base_row(spec, lvl) | {"status": "failed", "note": str(exc)})

    def skip_reason(self, spec: KernelSpec) -> str | None:
        """Why ``spec`` cannot run on this device (one line), or None."""
        arch = device_arch(self.ex.device.compute_capability)
        return VOLTA_NOTE if arch is None else skip_reason(spec, arch)

    def ptx(self, spec: KernelSpec) -> str:
        """``spec``'s PTX for this device's architecture (raises BenchmarkError where it cannot run)."""
        arch = device_arch(self.ex.device.compute_capability)
        why = self.skip_reason(spec)
        if arch is None or why is not None:
            raise BenchmarkError(f"{spec.name}: {why}")
        return ptx_for(spec, arch)

    # ------------------------------------------------------------------ internals
    def _base_row(self, spec: KernelSpec, opt_level: int) -> dict[str, Any]:
        return {
            "name": spec.name,
            "group": spec.group,
            "unit": spec.work.unit,
            "description": spec.description,
            "sweep_var": spec.sweep[0] if spec.sweep else None,
            "sweep_value": spec.sweep[1] if spec.sweep else None,
            "opt_level": opt_level,
        }

    def _buffers(self, spec: KernelSpec, threads: int) -> dict[str, tuple[Any, int]]:
        bufs: dict[str, tuple[Any, int]] = {}
        try:
            for a in spec.args:
                if a.kind != "ptr":
                    continue
                n = a.nbytes(threads)
                buf = self.ex.alloc(n)
                bufs[a.name] = (buf, n)
                self._initialise(a, buf, n)
        except BaseException:
            for b, _ in bufs.values():
                self.ex.free(b)
            raise
        return bufs

    def _initialise(self, a: Arg, buf: Any, n: int) -> None:
        host = self._host.get(a.init, n, a.chase_stride_elems)
        if host is None:
            fill = getattr(self.ex, "fill", None)
            if callable(fill):
                fill(buf, n, 0)
            else:
                self.ex.upload(buf, np.zeros(n, dtype=np.uint8))
        else:
            self.ex.upload(buf, host)

    def _poison(self, spec: KernelSpec, bufs: Mapping[str, tuple[Any, int]]) -> None:
        for a in spec.args:
            if a.role == "out" and a.name in bufs:
                buf, n = bufs[a.name]
                fill = getattr(self.ex, "fill", None)
                if callable(fill):
                    fill(buf, n, POISON_BYTE)
                else:
                    self.ex.upload(buf, np.full(n, POISON_BYTE, dtype=np.uint8))

    def _args(self, spec: KernelSpec, bufs: Mapping[str, tuple[Any, int]], iters: int) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for a in spec.args:
            if a.kind == "ptr":
                out.append(("ptr", bufs[a.name][0]))
            elif a.role == "iters":
                out.append((a.kind, iters))
            else:
                if a.value is None:
                    raise BenchmarkError(f"{spec.name}: scalar argument {a.name!r} has no value")
                out.append((a.kind, a.value))
        return out

    def _scalars(self, spec: KernelSpec, iters: int, grid: int, block: int) -> dict[str, float | int]:
        d: dict[str, float | int] = {"grid": grid, "block": block, "threads": grid * block}
        for a in spec.args:
            if a.role == "iters":
                d[a.name] = iters
            elif a.kind != "ptr" and a.value is not None:
                d[a.name] = a.value
        return d

    def _calibrate(
        self, spec: KernelSpec, k: Any, grid: int, block: int, bufs: Any, target_launch_s: float
    ) -> tuple[int, float]:
        """Double ``iters`` until a launch lasts ``calib_min_s``, then scale to the target.

        Returns the trip count and the predicted time of one launch with it.
        """
        if spec.iters_arg is None:
            r = self.ex.launch(k, grid, block, self._args(spec, bufs, 1), shared_bytes=spec.launch.shared_bytes)
            return 1, r.event_s
        iters = 1
        for _ in range(40):
            r = self.ex.launch(k, grid, block, self._args(spec, bufs, iters), shared_bytes=spec.launch.shared_bytes)
            if r.event_s >= self.opt.calib_min_s or iters >= _U32_MAX // 2:
                break
            grow = 2 if r.event_s <= 0 else min(64.0, max(2.0, self.opt.calib_min_s / r.event_s))
            iters = min(_U32_MAX, math.ceil(iters * grow))
        per_iter = max(r.event_s, 1e-9) / iters
        n = max(1, min(_U32_MAX, round(target_launch_s / per_iter)))
        return n, per_iter * n

    def _run(self, spec: KernelSpec, opt_level: int, target_s: float, fixed_iters: int | None) -> KernelRun:
        dev = self.ex.device
        grid = spec.launch.grid_for(dev.sm_count)
        block = spec.launch.block
        threads = grid * block
        row = self._base_row(spec, opt_level) | {"grid": grid, "block": block, "threads": threads}
        timing: dict[str, float] = {}
        t0 = self.clock.now_s()
        k = self.ex.load(self.ptx(spec), spec.entry, opt_level=opt_level)
        bufs = self._buffers(spec, threads)
        timing["build_s"] = self.clock.now_s() - t0
        try:
            launch_s = min(target_s, self.opt.max_launch_s)
            t1 = self.clock.now_s()
            if fixed_iters is None:
                iters, one_s = self._calibrate(spec, k, grid, block, bufs, launch_s)
            else:
                iters = fixed_iters
                # One launch at the fixed trip count: a warm-up, and how long a launch takes.
                one_s = self.ex.launch(
                    k, grid, block, self._args(spec, bufs, iters), shared_bytes=spec.launch.shared_bytes
                ).event_s
            args = self._args(spec, bufs, iters)
            if self.opt.warmup:
                # Warm-up at full length settles clocks; it also tells how long a launch is.
                warm = self.ex.launch(k, grid, block, args, shared_bytes=spec.launch.shared_bytes)
                one_s = warm.event_s
            launches = max(1, round(target_s / max(one_s, 1e-9)))
            timing["calibrate_s"] = self.clock.now_s() - t1
            self.clock.sleep(self.opt.idle_gap_s)
            if self.opt.verify and spec.verify is not None:
                self._poison(spec, bufs)
            res = self.ex.launch(
                k, grid, block, args, shared_bytes=spec.launch.shared_bytes, repeat=launches, per_launch_timing=True
            )
            # Anchor on the host time taken just before the first launch was enqueued: it is read
            # while this thread runs, whereas the time after synchronising can be late by however
            # long the thread waits to be scheduled (seen: up to a few ms with the sampler busy).
            start = res.host_start_s
            region = self.sampler.mark(spec.name, start, start + res.event_s, "event", opt_level=opt_level)
            t2 = self.clock.now_s()
            verified, note = self._verify(spec, bufs, iters, grid, block)
            timing["verify_s"] = self.clock.now_s() - t2
        finally:
            for b, _ in bufs.values():
                self.ex.free(b)
        self.clock.sleep(self.opt.idle_gap_s)
        t_est = self.clock.now_s()
        flush = getattr(self.sampler, "flush", None)
        if callable(flush):
            flush()
        est = self._estimate(self.sampler.recording(), region)
        timing["estimate_s"] = self.clock.now_s() - t_est
        row |= self._figures(spec, res, iters, launches, threads, est)
        row["verified"] = verified
        row["status"] = "ok" if verified is not False else "failed"
        notes = [n for n in (note, *est.notes) if n]
        row["note"] = "; ".join(notes) if notes else None
        row["wall_s"] = self.clock.now_s() - t0
        return KernelRun(spec, row, res, region, est, {"iters": iters, "timing": timing})

    def _verify(self, spec: KernelSpec, bufs: Any, iters: int, grid: int, block: int) -> tuple[bool | None, str | None]:
        if not self.opt.verify or spec.verify is None:
            return None, None
        outs: dict[str, NDArray[np.generic]] = {}
        for a in spec.args:
            if a.role in ("out", "inout") and a.name in bufs:
                buf, n = bufs[a.name]
                outs[a.name] = self.ex.download(buf, n).view(_dtype_for(a, spec))
        msg = spec.verify(outs, self._scalars(spec, iters, grid, block))
        return (msg is None), (f"output check failed: {msg}" if msg else None)

    def _figures(
        self, spec: KernelSpec, res: LaunchResult, iters: int, launches: int, threads: int, est: WindowEstimate
    ) -> dict[str, Any]:
        dev = self.ex.device
        per = np.asarray(res.per_launch_event_s) if res.per_launch_event_s else np.array([res.event_s / launches])
        t = float(np.mean(per))
        cv = float(np.std(per) / t) if t > 0 and per.size > 1 else 0.0
        ops = spec.work.ops_total(threads, iters)
        flops = spec.work.flops_total(threads, iters)
        nbytes = spec.work.bytes_total(threads, iters)
        clk = est.sm_clock_mhz
        ops_clk = ops / (t * clk * 1e6 * dev.sm_count) if (clk and t > 0 and ops) else None
        e = est.energy_j / launches if est.energy_j is not None else None
        de = None
        if est.energy_j is not None and est.idle_power_w:
            de = (est.energy_j - est.idle_power_w * res.event_s) / launches
        eu = est.energy_uncertainty_j / launches if est.energy_uncertainty_j is not None else None
        return {
            "iters": iters,
            "launches": launches,
            "time_s": t,
            "time_cv": cv,
            "sm_clock_mhz": clk,
            "mem_clock_mhz": est.mem_clock_mhz,
            "ops": ops or None,
            "ops_per_clk_per_sm": ops_clk,
            "flops": flops or None,
            "bytes": nbytes or None,
            "bytes_per_s": nbytes / t if nbytes and t > 0 else None,
            "bytes_per_clk_per_sm": nbytes / (t * clk * 1e6 * dev.sm_count) if (nbytes and clk and t > 0) else None,
            "avg_power_w": est.mean_power_w,
            "max_power_w": est.max_power_w,
            "idle_power_w": est.idle_power_w,
            "energy_j": e,
            "energy_uncertainty_j": eu,
            "energy_counter_j": est.counter_energy_j / launches if est.counter_energy_j is not None else None,
            "dynamic_energy_j": de,
            "nj_per_op": e / ops * 1e9 if (e is not None and ops) else None,
            "dyn_nj_per_op": de / ops * 1e9 if (de is not None and ops) else None,
            "mips_per_w_per_sm": (ops / t / 1e6) / est.mean_power_w / dev.sm_count
            if (ops and est.mean_power_w and t > 0)
            else None,
            "temperature_c": est.temperature_c,
            "throttle_reasons": ",".join(est.throttle_reasons) if est.throttle_reasons else None,
            "throttled": est.throttled,
            "resolvable": est.resolvable,
        }
