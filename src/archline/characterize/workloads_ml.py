"""Machine-learning kernels for the energy model: cuBLASLt GEMMs, flash attention, norms, softmax, cuDNN, gathers.

Each workload is one invocation of a PyTorch operator on random data (normal values, never
zeros), checked against an independent reference, with its nominal work: ``flops`` counts a
multiply-add as 2 (the tensor-core flops of a GEMM are 2·M·N·K), ``dram_bytes`` is the
compulsory traffic (each input read once, each output written once), a lower bound. The model
uses Nsight Compute's counts; these nominal figures are for the eq. (9) comparison and the
table. Two disjoint sets: :func:`ml_calibration_workloads` (modelling choices are made on them)
and :func:`ml_heldout_workloads` (only ever scored). PyTorch is imported only inside methods.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from archline.characterize.workloads import Workload
from archline.errors import BenchmarkError, GPUUnavailableError

__all__ = [
    "MlWorkload",
    "ml_calibration_workloads",
    "ml_heldout_workloads",
    "workload_registry",
]

_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise GPUUnavailableError("PyTorch is not installed (pip install torch)") from None
    return torch


def _dtype(torch: Any, name: str) -> Any:
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8": torch.float8_e4m3fn}[name]


class MlWorkload(Workload):
    """A PyTorch operator on the current CUDA device; ``dtype`` names its data type (bf16, fp16, fp8, fp32)."""

    dtype: str = "bf16"
    library: str = ""

    def __init__(self, name: str, dtype: str, flops: float, dram_bytes: float, library: str, note: str) -> None:
        self.name, self.dtype, self.flops, self.dram_bytes = name, dtype, float(flops), float(dram_bytes)
        self.library, self.note = library, note
        self.precision = "single"  # the sweep whose constant power the model uses
        self._t: dict[str, Any] = {}
        self._fn: Callable[[], Any] | None = None

    def synchronize(self) -> None:
        _torch().cuda.synchronize()

    def teardown(self) -> None:
        self._t.clear()
        self._fn = None
        torch = _torch()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def _randn(self, *shape: int, dtype: str | None = None, seed: int = 0) -> Any:
        torch = _torch()
        g = torch.Generator(device="cuda").manual_seed(seed)
        x = torch.randn(*shape, device="cuda", dtype=torch.float32, generator=g)
        x[x == 0] = 0.5
        return x.to(_dtype(torch, dtype or self.dtype))

    def run(self) -> None:
        if self._fn is None:
            raise BenchmarkError(f"{self.name}: run() before setup()")
        self._t["out"] = self._fn()

    def _close(self, got: Any, ref: Any, rtol: float, what: str) -> None:
        torch = _torch()
        g, r = got.float(), ref.float()
        if not bool(torch.isfinite(g).all()):
            raise self._fail(f"{what}: non-finite values")
        err = float((g - r).abs().max())
        scale = float(r.abs().max()) or 1.0
        if err > rtol * scale:
            raise self._fail(f"{what}: max |error| {err:.3g} > {rtol:g} × max |reference| {scale:.3g}")


class _Gemm(MlWorkload):
    """C = A·B (``torch.matmul``, cuBLASLt), optionally batched; W = 2·b·M·N·K."""

    def __init__(self, name: str, dtype: str, m: int, n: int, k: int, batch: int = 1) -> None:
        b = _BYTES[dtype]
        out_b = 2 if dtype == "fp8" else b
        super().__init__(
            name,
            dtype,
            2.0 * batch * m * n * k,
            batch * ((m * k + k * n) * b + m * n * out_b),
            "cuBLASLt",
            f"{'batched ' if batch > 1 else ''}GEMM {batch}×{m}×{n}×{k} {dtype}; Q compulsory (lower bound)",
        )
        self.m, self.n, self.k, self.batch = m, n, k, batch

    def setup(self) -> None:
        torch = _torch()
        shape_a = (self.batch, self.m, self.k) if self.batch > 1 else (self.m, self.k)
        shape_b = (self.batch, self.k, self.n) if self.batch > 1 else (self.k, self.n)
        if self.dtype == "fp8":
            a = self._randn(*shape_a, dtype="fp32", seed=1)
            bt = self._randn(self.n, self.k, dtype="fp32", seed=2)  # B as column-major (Bᵀ row-major)
            self._t.update(a=a.to(torch.float8_e4m3fn), bt=bt.to(torch.float8_e4m3fn))
            one = torch.ones((), device="cuda", dtype=torch.float32)
            self._t.update(sa=one, sb=one.clone())
            t = self._t
            self._fn = lambda: torch._scaled_mm(t["a"], t["bt"].t(), t["sa"], t["sb"], out_dtype=torch.bfloat16)
            return
        self._t.update(a=self._randn(*shape_a, seed=1), b=self._randn(*shape_b, seed=2))
        t = self._t
        self._fn = lambda: torch.matmul(t["a"], t["b"])

    def check(self) -> None:
        torch = _torch()
        self.synchronize()
        out = self._t["out"]
        rows = torch.arange(0, self.m, max(1, self.m // 16), device="cuda")
        if self.dtype == "fp8":
            a, b = self._t["a"].float(), self._t["bt"].float().t()
            ref = a[rows] @ b
            self._close(out[rows], ref, 2e-2, "sampled rows of A·B")
            return
        a, b = self._t["a"].float(), self._t["b"].float()
        if self.batch > 1:
            ref = a[:2, rows] @ b[:2]
            self._close(out[:2, rows], ref, 2e-2, "sampled rows of A·B")
        else:
            self._close(out[rows], a[rows] @ b, 2e-2, "sampled rows of A·B")


class _Attention(MlWorkload):
    """Flash attention (``scaled_dot_product_attention``, flash backend), forward or backward."""

    def __init__(self, name: str, dtype: str, b: int, h: int, s: int, d: int, *, causal: bool, backward: bool) -> None:
        frac = 0.5 if causal else 1.0
        fwd = 4.0 * b * h * s * s * d * frac
        # Backward: dV, dP, dQ, dK products plus the recomputed QKᵀ (5 GEMMs against the forward's 2).
        flops = 2.5 * fwd if backward else fwd
        io = b * h * s * d * _BYTES[dtype]
        super().__init__(
            name,
            dtype,
            flops,
            (8 if backward else 4) * io,
            "PyTorch SDPA (flash)",
            f"{'backward' if backward else 'forward'} B{b} H{h} S{s} D{d}{' causal' if causal else ''}",
        )
        self.shape, self.causal, self.backward = (b, h, s, d), causal, backward

    def _sdpa(self, q: Any, k: Any, v: Any) -> Any:
        torch = _torch()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal)

    def setup(self) -> None:
        torch = _torch()
        q, k, v = (self._randn(*self.shape, seed=s).requires_grad_(self.backward) for s in (3, 4, 5))
        self._t.update(q=q, k=k, v=v)
        if not self.backward:
            self._fn = lambda: self._sdpa(q, k, v).detach()
            return
        o = self._sdpa(q, k, v)
        go = self._randn(*self.shape, seed=6)
        self._t.update(o=o, go=go)
        self._fn = lambda: torch.autograd.grad(o, (q, k, v), go, retain_graph=True)

    def check(self) -> None:
        torch = _torch()
        self.synchronize()
        q, k, v = (self._t[x].detach()[:1, :2].float().requires_grad_(True) for x in "qkv")
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        if not self.backward:
            self._close(self._t["out"][:1, :2], ref, 3e-2, "attention output")
            return
        grads = torch.autograd.grad(ref, (q, k, v), self._t["go"][:1, :2].float())
        for name, got, want in zip("qkv", self._t["out"], grads, strict=True):
            self._close(got[:1, :2], want, 5e-2, f"d{name}")


class _Unary(MlWorkload):
    """A row-wise operator (layer norm, softmax, GELU, row sum) on a rows × cols tensor."""

    def __init__(self, name: str, dtype: str, op: str, rows: int, cols: int) -> None:
        per = {"layernorm": 8.0, "softmax": 5.0, "gelu": 8.0, "rowsum": 1.0}[op]
        out_cols = 1 if op == "rowsum" else cols
        super().__init__(
            name,
            dtype,
            per * rows * cols,
            (rows * cols + rows * out_cols) * _BYTES[dtype],
            "PyTorch",
            f"{op} over {rows}×{cols} {dtype}; flops nominal ({per:g} per element)",
        )
        self.op, self.rows, self.cols = op, rows, cols

    def _apply(self, x: Any, w: Any, b: Any) -> Any:
        torch = _torch()
        f = torch.nn.functional
        if self.op == "layernorm":
            return f.layer_norm(x, (self.cols,), w, b, 1e-5)
        if self.op == "softmax":
            return torch.softmax(x, dim=-1)
        if self.op == "gelu":
            return f.gelu(x)
        return x.sum(dim=-1)

    def setup(self) -> None:
        x = self._randn(self.rows, self.cols, seed=7)
        w, b = self._randn(self.cols, seed=8), self._randn(self.cols, seed=9)
        self._t.update(x=x, w=w, b=b)
        self._fn = lambda: self._apply(x, w, b)

    def check(self) -> None:
        self.synchronize()
        x, w, b = (self._t[k][:64].float() if k == "x" else self._t[k].float() for k in "xwb")
        self._close(self._t["out"][:64], self._apply(x, w, b), 3e-2, self.op)


class _Conv(MlWorkload):
    """A cuDNN 2-D convolution, NHWC (channels-last), forward; W = 2·N·K·C·R·S·P·Q."""

    def __init__(self, name: str, dtype: str, n: int, c: int, hw: int, k: int, r: int) -> None:
        p = hw  # stride 1, "same" padding
        b = _BYTES[dtype]
        super().__init__(
            name,
            dtype,
            2.0 * n * k * c * r * r * p * p,
            (n * c * hw * hw + k * c * r * r + n * k * p * p) * b,
            "cuDNN",
            f"conv2d N{n} C{c} {hw}×{hw} K{k} {r}×{r} {dtype} NHWC",
        )
        self.shape = (n, c, hw, k, r)

    def setup(self) -> None:
        torch = _torch()
        torch.backends.cudnn.benchmark = False
        n, c, hw, k, r = self.shape
        x = self._randn(n, c, hw, hw, seed=10).contiguous(memory_format=torch.channels_last)
        w = (self._randn(k, c, r, r, seed=11).float() / math.sqrt(c * r * r)).to(x.dtype)
        w = w.contiguous(memory_format=torch.channels_last)
        self._t.update(x=x, w=w)
        self._fn = lambda: torch.nn.functional.conv2d(x, w, padding=r // 2)

    def check(self) -> None:
        torch = _torch()
        self.synchronize()
        x, w = self._t["x"][:2].float(), self._t["w"].float()
        ref = torch.nn.functional.conv2d(x, w, padding=self.shape[4] // 2)
        self._close(self._t["out"][:2], ref, 3e-2, "convolution")


class _Embedding(MlWorkload):
    """An embedding gather (``F.embedding``): ``lookups`` random rows of a vocab × dim table."""

    def __init__(self, name: str, dtype: str, vocab: int, dim: int, lookups: int) -> None:
        b = _BYTES[dtype]
        super().__init__(
            name,
            dtype,
            0.0,
            2.0 * lookups * dim * b + 8.0 * lookups,
            "PyTorch",
            f"embedding gather of {lookups} rows from {vocab}×{dim} {dtype}",
        )
        self.vocab, self.dim, self.lookups = vocab, dim, lookups

    def setup(self) -> None:
        torch = _torch()
        g = torch.Generator(device="cuda").manual_seed(12)
        idx = torch.randint(0, self.vocab, (self.lookups,), device="cuda", generator=g)
        table = self._randn(self.vocab, self.dim, seed=13)
        self._t.update(idx=idx, table=table)
        self._fn = lambda: torch.nn.functional.embedding(idx, table)

    def check(self) -> None:
        torch = _torch()
        self.synchronize()
        if not bool(torch.equal(self._t["out"], self._t["table"][self._t["idx"]])):
            raise self._fail("gathered rows differ from table[idx]")


def ml_calibration_workloads() -> list[MlWorkload]:
    """The calibration kernels: modelling choices (terms, tensor-op convention, time efficiency) are made on these."""
    return [
        _Gemm("ml.cal.gemm.bf16.6144", "bf16", 6144, 6144, 6144),
        _Gemm("ml.cal.gemm.fp16.m2048n8192k4096", "fp16", 2048, 8192, 4096),
        _Gemm("ml.cal.gemm.fp8.6144", "fp8", 6144, 6144, 6144),
        _Attention("ml.cal.sdpa.fwd.bf16.s1024", "bf16", 16, 16, 1024, 128, causal=False, backward=False),
        _Unary("ml.cal.gelu.bf16", "bf16", "gelu", 16384, 8192),
        _Unary("ml.cal.rowsum.bf16", "bf16", "rowsum", 32768, 4096),
    ]


def ml_heldout_workloads() -> list[MlWorkload]:
    """The held-out ML kernels (20): only scored, never used to choose anything."""
    return [
        _Gemm("ml.gemm.bf16.4096", "bf16", 4096, 4096, 4096),
        _Gemm("ml.gemm.bf16.m16384n4096k4096", "bf16", 16384, 4096, 4096),
        _Gemm("ml.gemm.bf16.skinny.m64n8192k8192", "bf16", 64, 8192, 8192),
        _Gemm("ml.bmm.bf16.b64.m512n512k128", "bf16", 512, 512, 128, batch=64),
        _Gemm("ml.gemm.fp16.4096", "fp16", 4096, 4096, 4096),
        _Gemm("ml.gemm.fp16.m8192n1024k8192", "fp16", 8192, 1024, 8192),
        _Gemm("ml.bmm.fp16.b32.m1024n1024k64", "fp16", 1024, 1024, 64, batch=32),
        _Gemm("ml.gemm.fp8.8192", "fp8", 8192, 8192, 8192),
        _Gemm("ml.gemm.fp8.m4096n4096k8192", "fp8", 4096, 4096, 8192),
        _Attention("ml.sdpa.fwd.bf16.s4096", "bf16", 4, 16, 4096, 128, causal=False, backward=False),
        _Attention("ml.sdpa.bwd.bf16.s4096", "bf16", 4, 16, 4096, 128, causal=False, backward=True),
        _Attention("ml.sdpa.fwd.fp16.causal.s2048", "fp16", 8, 32, 2048, 64, causal=True, backward=False),
        _Attention("ml.sdpa.bwd.fp16.causal.s2048", "fp16", 8, 32, 2048, 64, causal=True, backward=True),
        _Unary("ml.layernorm.bf16", "bf16", "layernorm", 32768, 4096),
        _Unary("ml.layernorm.fp32", "fp32", "layernorm", 16384, 4096),
        _Unary("ml.softmax.bf16", "bf16", "softmax", 65536, 4096),
        _Unary("ml.softmax.fp32", "fp32", "softmax", 32768, 2048),
        _Conv("ml.conv.bf16.3x3", "bf16", 64, 256, 56, 256, 3),
        _Conv("ml.conv.fp16.1x1", "fp16", 128, 512, 28, 512, 1),
        _Embedding("ml.embedding.bf16", "bf16", 128256, 4096, 16384),
    ]


def workload_registry() -> dict[str, Workload]:
    """Every workload archline can count or measure, by name: the classic held-out set and both ML sets."""
    from archline.characterize.workloads import default_workloads

    out: dict[str, Workload] = {w.name: w for w in default_workloads()}
    out.update({w.name: w for w in ml_calibration_workloads()})
    out.update({w.name: w for w in ml_heldout_workloads()})
    return out
