"""Held-out real kernels (STREAM triad, reduction, cuBLAS GEMM, 5-point stencil) with counted W and Q, via CuPy.

Each workload allocates random inputs (never zeros: data values change the power drawn),
enqueues one invocation per :meth:`Workload.run`, checks its output against an independent
reference, and states its counts: W in flops (an FMA counts 2), Q in DRAM bytes with each
input read once and each output written once. Those Q are lower bounds wherever caches
cannot hold the reuse (GEMM above all); GEMM also carries a nominal on-chip traffic estimate
for Choi et al.'s optional cache-energy term (§V-C). CuPy is imported only inside methods.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from archline.errors import BenchmarkError, GPUUnavailableError
from archline.model.sweep import HeldOutRow, Precision

__all__ = ["Gemm", "Reduction", "Stencil5", "Triad", "Workload", "default_workloads"]

_DTYPES: dict[str, type[np.floating[Any]]] = {"single": np.float32, "double": np.float64}


def _cupy() -> Any:
    try:
        import cupy
    except ImportError:
        raise GPUUnavailableError("CuPy is not installed (pip install cupy-cuda13x)") from None
    return cupy


def _random(cp: Any, shape: tuple[int, ...], dtype: Any, seed: int) -> Any:
    # Uniform in [-1, 1) with any exact zero replaced: random signs and mantissas toggle the
    # datapaths the way real data does, unlike constant or zero-filled buffers.
    x = cp.random.RandomState(seed).uniform(-1.0, 1.0, size=shape, dtype=dtype)
    x[x == 0] = 0.5
    return x


class Workload:
    """One held-out kernel: counts, ``setup()``, ``run()`` (enqueue one invocation), ``check()``.

    ``flops`` (W), ``dram_bytes`` (Q) and ``cache_bytes`` (nominal on-chip traffic, 0 if not
    estimated) are per invocation; ``note`` says what the counts assume.
    """

    name: str
    precision: Precision
    flops: float
    dram_bytes: float
    cache_bytes: float = 0.0
    note: str = ""

    def setup(self) -> None:
        """Allocate and fill the inputs and outputs (on the current CuPy device)."""
        raise NotImplementedError

    def run(self) -> None:
        """Enqueue one invocation on the current stream (no synchronisation)."""
        raise NotImplementedError

    def check(self) -> None:
        """Synchronise and verify the output; raise :class:`BenchmarkError` if it is wrong."""
        raise NotImplementedError

    def teardown(self) -> None:
        """Drop the device buffers."""
        for k in [k for k, v in vars(self).items() if hasattr(v, "__cuda_array_interface__")]:
            setattr(self, k, None)

    def synchronize(self) -> None:
        _cupy().cuda.get_current_stream().synchronize()

    def heldout_row(self, time_s: float, energy_j: float, energy_uncertainty_j: float = math.nan) -> HeldOutRow:
        """The model's input row for one invocation measured at ``time_s`` and ``energy_j``."""
        return HeldOutRow(
            name=self.name,
            precision=self.precision,
            flops=self.flops,
            bytes=self.dram_bytes,
            time_s=time_s,
            energy_j=energy_j,
            energy_uncertainty_j=energy_uncertainty_j,
            cache_bytes=self.cache_bytes,
        )

    def _fail(self, what: str) -> BenchmarkError:
        return BenchmarkError(f"{self.name}: output check failed ({what})")


class Triad(Workload):
    """STREAM triad a = b + s·c over ``n`` elements: W = 2n, Q = 3n·itemsize (b, c read; a written)."""

    def __init__(self, n: int = 1 << 27, precision: Precision = "single", scalar: float = 3.0) -> None:
        self.n, self.precision, self.scalar = n, precision, scalar
        self.itemsize = np.dtype(_DTYPES[precision]).itemsize
        self.name = f"triad.{'fp32' if precision == 'single' else 'fp64'}.n{n}"
        self.flops = 2.0 * n
        self.dram_bytes = 3.0 * n * self.itemsize
        self.note = "one fused elementwise kernel; every element read or written exactly once"

    def setup(self) -> None:
        cp = _cupy()
        dt = _DTYPES[self.precision]
        self.b = _random(cp, (self.n,), dt, 1)
        self.c = _random(cp, (self.n,), dt, 2)
        self.a = cp.empty_like(self.b)
        self.kernel = cp.ElementwiseKernel("T b, T c, T s", "T a", "a = b + s * c", "archline_triad")
        self.s = dt(self.scalar)

    def run(self) -> None:
        self.kernel(self.b, self.c, self.s, self.a)

    def check(self) -> None:
        cp = _cupy()
        self.synchronize()
        ref = self.b.astype(cp.float64) + self.scalar * self.c.astype(cp.float64)
        scale = cp.abs(self.b.astype(cp.float64)) + abs(self.scalar) * cp.abs(self.c.astype(cp.float64))
        eps = float(np.finfo(_DTYPES[self.precision]).eps)
        bad = int(cp.count_nonzero(cp.abs(self.a.astype(cp.float64) - ref) > 4 * eps * scale))
        if bad:
            raise self._fail(f"{bad} of {self.n} elements differ from b + s·c")


class Reduction(Workload):
    """Sum of ``n`` elements (``cupy.sum``): W = n − 1 adds, Q = (n + 1)·itemsize."""

    def __init__(self, n: int = 1 << 28, precision: Precision = "single") -> None:
        self.n, self.precision = n, precision
        self.itemsize = np.dtype(_DTYPES[precision]).itemsize
        self.name = f"reduce.sum.{'fp32' if precision == 'single' else 'fp64'}.n{n}"
        self.flops = float(n - 1)
        self.dram_bytes = float(n + 1) * self.itemsize
        self.note = "CuPy/CUB device reduction; partial sums stay on chip"

    def setup(self) -> None:
        cp = _cupy()
        self.x = _random(cp, (self.n,), _DTYPES[self.precision], 3)
        self.out = cp.empty((), dtype=_DTYPES[self.precision])

    def run(self) -> None:
        _cupy().sum(self.x, out=self.out)

    def check(self) -> None:
        self.synchronize()
        host = self.x.get().astype(np.float64)
        ref, bound = float(host.sum()), float(np.abs(host).sum())
        got = float(self.out.get())
        # γ_n·Σ|x| bounds the rounding error of any summation order in this precision.
        tol = self.n * float(np.finfo(_DTYPES[self.precision]).eps) * bound
        if not math.isfinite(got) or abs(got - ref) > tol:
            raise self._fail(f"sum {got!r} vs reference {ref!r} (tolerance {tol:.3g})")


class Gemm(Workload):
    """C = A·B for ``n``×``n`` matrices through cuBLAS (``cupy.matmul``): W = 2n³.

    Q = 3n²·itemsize (A, B read once, C written once, β = 0) is a LOWER BOUND: whether cuBLAS
    re-reads panels from DRAM depends on its tiling and the L2. ``cache_bytes`` is a nominal
    estimate of L2→SM traffic assuming 128×128 output tiles (each tile streams a 128×n panel
    of A and an n×128 panel of B: 2n³/128 elements), for the §V-C cache-energy term.
    FP32 runs in full FP32 unless CuPy's CUPY_TF32=1 is set (the smoke script refuses that);
    FP64 on Hopper may use the FP64 tensor cores (DMMA), whose energy per flop differs from
    the FFMA/DFMA sweep's.
    """

    def __init__(self, n: int = 4096, precision: Precision = "single") -> None:
        self.n, self.precision = n, precision
        self.itemsize = np.dtype(_DTYPES[precision]).itemsize
        self.name = f"{'sgemm' if precision == 'single' else 'dgemm'}.n{n}"
        self.flops = 2.0 * n**3
        self.dram_bytes = 3.0 * n * n * self.itemsize
        self.cache_bytes = 2.0 * n**3 / 128.0 * self.itemsize
        self.note = "Q is a lower bound (compulsory traffic); cache_bytes assumes 128×128 tiles"

    def setup(self) -> None:
        cp = _cupy()
        dt = _DTYPES[self.precision]
        self.a = _random(cp, (self.n, self.n), dt, 4)
        self.b = _random(cp, (self.n, self.n), dt, 5)
        self.c = cp.empty((self.n, self.n), dtype=dt)

    def run(self) -> None:
        _cupy().matmul(self.a, self.b, out=self.c)

    def check(self) -> None:
        cp = _cupy()
        self.synchronize()
        rng = np.random.default_rng(6)
        rows = cp.asarray(rng.choice(self.n, size=min(64, self.n), replace=False))
        cols = cp.asarray(rng.choice(self.n, size=min(64, self.n), replace=False))
        a = self.a[rows].get().astype(np.float64)
        b = self.b[:, cols].get().astype(np.float64)
        got = self.c[rows][:, cols].get().astype(np.float64)
        ref, bound = a @ b, np.abs(a) @ np.abs(b)
        tol = self.n * float(np.finfo(_DTYPES[self.precision]).eps) * bound
        bad = int(np.count_nonzero(~(np.abs(got - ref) <= tol)))
        if bad:
            raise self._fail(f"{bad} of {got.size} sampled entries differ from A·B")


class Stencil5(Workload):
    """5-point Jacobi step y = 0.2·(x_c + x_n + x_s + x_e + x_w) on an ``n``×``n`` grid, borders copied.

    W = 5 flops per interior point (4 adds, 1 multiply); Q = 2n²·itemsize (x read once, y
    written once), which assumes the neighbours' reuse hits in cache: a lower bound.
    """

    _OP = """
    const long long r = i / width, c = i % width;
    if (r == 0 || c == 0 || r == width - 1 || c == width - 1) {
        y = x[i];
    } else {
        y = (T)0.2 * (x[i] + x[i - 1] + x[i + 1] + x[i - width] + x[i + width]);
    }
    """

    def __init__(self, n: int = 8192, precision: Precision = "single") -> None:
        self.n, self.precision = n, precision
        self.itemsize = np.dtype(_DTYPES[precision]).itemsize
        self.name = f"stencil5.{'fp32' if precision == 'single' else 'fp64'}.n{n}"
        self.flops = 5.0 * (n - 2) ** 2
        self.dram_bytes = 2.0 * n * n * self.itemsize
        self.note = "Q assumes neighbour reuse in cache (lower bound)"

    def setup(self) -> None:
        cp = _cupy()
        self.x = _random(cp, (self.n, self.n), _DTYPES[self.precision], 7)
        self.y = cp.empty_like(self.x)
        # ``n`` and ``i`` are reserved names inside CuPy elementwise kernels, hence ``width``.
        self.kernel = cp.ElementwiseKernel("raw T x, int64 width", "T y", self._OP, "archline_stencil5")
        self.width = np.int64(self.n)

    def run(self) -> None:
        self.kernel(self.x, self.width, self.y)

    def check(self) -> None:
        self.synchronize()
        x = self.x.get().astype(np.float64)
        got = self.y.get().astype(np.float64)
        ref, bound = x.copy(), np.abs(x)
        ref[1:-1, 1:-1] = 0.2 * (x[1:-1, 1:-1] + x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:])
        bound[1:-1, 1:-1] = 0.2 * (
            np.abs(x[1:-1, 1:-1])
            + np.abs(x[:-2, 1:-1])
            + np.abs(x[2:, 1:-1])
            + np.abs(x[1:-1, :-2])
            + np.abs(x[1:-1, 2:])
        )
        tol = 8 * float(np.finfo(_DTYPES[self.precision]).eps) * bound
        bad = int(np.count_nonzero(~(np.abs(got - ref) <= tol)))
        if bad:
            raise self._fail(f"{bad} of {got.size} points differ from the 5-point average")


def default_workloads(gemm_sizes: tuple[int, ...] = (2048, 4096, 8192)) -> list[Workload]:
    """The held-out set: triad (FP32, FP64), FP32 reduction, SGEMM and DGEMM at ``gemm_sizes``, FP32 stencil."""
    out: list[Workload] = [Triad(precision="single"), Triad(precision="double"), Reduction(), Stencil5()]
    out += [Gemm(n, "single") for n in gemm_sizes]
    out += [Gemm(n, "double") for n in gemm_sizes]
    return out
