"""A small CuPy program with several short kernels, for `archline run` (about 5 s on an H100)."""

from __future__ import annotations

import cupy as cp

x = cp.random.rand(1 << 24, dtype=cp.float32)
y = cp.empty_like(x)
a = cp.random.rand(2048, 2048, dtype=cp.float32)
for _ in range(300):
    cp.sqrt(x * x + 1.0, out=y)  # two short memory-bound kernels
    b = a @ a  # one cuBLAS SGEMM
    float(y[:1].sum())  # a reduction and a tiny copy back
cp.cuda.Device().synchronize()
print("checksum", float(y.sum()), float(b[0, 0]))
