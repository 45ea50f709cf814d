"""Exploration on a lent GPU: how much of a kernel's energy depends on operand data, not on counts.

Measures, with the NVML energy counter over ~1.5 s of back-to-back launches:
* an FFMA/DFMA-bound kernel whose operands are constants (the roofline sweep's involution,
  y = c − y) against the same kernel with random operands that change every instruction;
* cuBLAS SGEMM/DGEMM 8192² on random inputs against the same on constant and zero inputs.
Prints one JSON line per case and writes them to $OUT/explore_energy_terms.json.
Does not change any card setting.
"""

from __future__ import annotations

import json
import os
import time

import cupy as cp
import pynvml

OUT = os.environ.get("OUT", ".")
pynvml.nvmlInit()
H = pynvml.nvmlDeviceGetHandleByIndex(0)

SRC = r"""
template <typename T>
__device__ __forceinline__ T fmaT(T a, T b, T c);
template <> __device__ __forceinline__ float fmaT<float>(float a, float b, float c) { return __fmaf_rn(a, b, c); }
template <> __device__ __forceinline__ double fmaT<double>(double a, double b, double c) { return __fma_rn(a, b, c); }

template <typename T>
__device__ void involution(const T* seed, T* out, int trips) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    T y[8];
    for (int j = 0; j < 8; ++j) y[j] = seed[(t * 8 + j) % 4096];
    const T m = -(seed[0] / seed[0]), c = (T)1.75;  // -1 known only at run time
    for (int i = 0; i < trips; ++i) {
#pragma unroll
        for (int k = 0; k < 16; ++k) {
#pragma unroll
            for (int j = 0; j < 8; ++j) y[j] = fmaT<T>(y[j], m, c);
        }
    }
    T s = 0;
    for (int j = 0; j < 8; ++j) s += y[j];
    if (s == (T)12345.678) out[t] = s;
}

template <typename T>
__device__ void randomops(const T* seed, T* out, int trips) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    T a[8], b[8], y[8];
    for (int j = 0; j < 8; ++j) {
        a[j] = seed[(t * 24 + j) % 4096];
        b[j] = seed[(t * 24 + 8 + j) % 4096];
        y[j] = seed[(t * 24 + 16 + j) % 4096];
    }
    for (int i = 0; i < trips; ++i) {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
#pragma unroll
            for (int j = 0; j < 8; ++j) y[j] = fmaT<T>(a[(j + k) & 7], b[(3 * j + k) & 7], y[j]);
        }
#pragma unroll
        for (int k = 0; k < 8; ++k) {
#pragma unroll
            for (int j = 0; j < 8; ++j) y[j] = fmaT<T>(-a[(j + k) & 7], b[(3 * j + k) & 7], y[j]);
        }
    }
    T s = 0;
    for (int j = 0; j < 8; ++j) s += y[j];
    if (s == (T)12345.678) out[t] = s;
}

extern "C" __global__ void dmma_884(const double* seed, double* out, int trips) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    double a[4], na[4], b[4], d[8];
    for (int j = 0; j < 4; ++j) { a[j] = seed[(t * 16 + j) % 4096]; na[j] = -a[j]; b[j] = seed[(t * 16 + 4 + j) % 4096]; }
    for (int j = 0; j < 8; ++j) d[j] = seed[(t * 16 + 8 + j) % 4096];
    for (int i = 0; i < trips; ++i) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
#pragma unroll
            for (int j = 0; j < 4; ++j)
                asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
                             : "+d"(d[2 * j]), "+d"(d[2 * j + 1]) : "d"(a[(j + k) & 3]), "d"(b[(3 * j + k) & 3]));
#pragma unroll
            for (int j = 0; j < 4; ++j)
                asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
                             : "+d"(d[2 * j]), "+d"(d[2 * j + 1]) : "d"(na[(j + k) & 3]), "d"(b[(3 * j + k) & 3]));
        }
    }
    double s = 0;
    for (int j = 0; j < 8; ++j) s += d[j];
    if (s == 12345.678) out[t] = s;
}

extern "C" __global__ void inv_f32(const float* s, float* o, int n) { involution<float>(s, o, n); }
extern "C" __global__ void inv_f64(const double* s, double* o, int n) { involution<double>(s, o, n); }
extern "C" __global__ void rnd_f32(const float* s, float* o, int n) { randomops<float>(s, o, n); }
extern "C" __global__ void rnd_f64(const double* s, double* o, int n) { randomops<double>(s, o, n); }
"""

mod = cp.RawModule(code=SRC, options=("-arch=sm_90",))
sm = cp.cuda.Device().attributes["MultiProcessorCount"]
results = []


def energy_mj() -> int:
    return int(pynvml.nvmlDeviceGetTotalEnergyConsumption(H))


def timed(name: str, fn, fmas: float, target_s: float = 1.5) -> None:
    fn()
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    fn()
    cp.cuda.Device().synchronize()
    one = max(time.perf_counter() - t0, 1e-6)
    reps = max(3, int(target_s / one))
    time.sleep(0.3)
    e0, t0 = energy_mj(), time.perf_counter()
    for _ in range(reps):
        fn()
    cp.cuda.Device().synchronize()
    t1 = time.perf_counter()
    time.sleep(0.15)  # let the counter catch up; idle tail charged below
    e1, t2 = energy_mj(), time.perf_counter()
    idle_w = 0.0
    # idle power over a short quiet window
    ea, ta = energy_mj(), time.perf_counter()
    time.sleep(0.5)
    eb, tb = energy_mj(), time.perf_counter()
    idle_w = (eb - ea) / 1e3 / (tb - ta)
    busy = t1 - t0
    e = (e1 - e0) / 1e3 - idle_w * (t2 - t1)
    row = {
        "case": name,
        "reps": reps,
        "time_s_per_call": busy / reps,
        "energy_j_per_call": e / reps,
        "avg_power_w": e / busy,
        "idle_w": idle_w,
        "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(H, pynvml.NVML_CLOCK_SM),
        "pj_per_fma": e / reps / fmas * 1e12 if fmas else None,
        "fma_per_s": fmas * reps / busy if fmas else None,
    }
    print(json.dumps(row), flush=True)
    results.append(row)


for ty, dt in (("f32", cp.float32), ("f64", cp.float64)):
    seed = cp.random.RandomState(1).uniform(0.5, 1.5, 4096).astype(dt)
    seed *= cp.where(cp.random.RandomState(2).uniform(size=4096) < 0.5, -1, 1).astype(dt)
    grid, block = sm * 8, 256
    out = cp.zeros(grid * block, dtype=dt)
    trips = 2000 if ty == "f32" else 1000
    for kind, per_trip in (("inv", 128), ("rnd", 128)):
        k = mod.get_function(f"{kind}_{ty}")
        fmas = float(grid * block * trips * per_trip)
        timed(f"{kind}_{ty}", lambda k=k: k((grid,), (block,), (seed, out, cp.int32(trips))), fmas)

seed = cp.random.RandomState(1).uniform(0.5, 1.5, 4096)
seed *= cp.where(cp.random.RandomState(2).uniform(size=4096) < 0.5, -1, 1)
out = cp.zeros(sm * 8 * 256, dtype=cp.float64)
k = mod.get_function("dmma_884")
trips = 200
# per warp: 32 mma per trip, each m8n8k4 = 256 FMAs
fmas = float(sm * 8 * 256 // 32 * trips * 32 * 256)
timed("dmma_884", lambda: k((sm * 8,), (256,), (seed, out, cp.int32(trips))), fmas)

n = 8192
for dt, label in ((cp.float32, "sgemm"), (cp.float64, "dgemm")):
    rs = cp.random.RandomState(4)
    a = rs.uniform(-1, 1, (n, n)).astype(dt)
    b = rs.uniform(-1, 1, (n, n)).astype(dt)
    c = cp.empty((n, n), dtype=dt)
    fmas = float(n) ** 3
    timed(f"{label}.random", lambda: cp.matmul(a, b, out=c), fmas)
    a.fill(1.0)
    b.fill(1.0)
    timed(f"{label}.ones", lambda: cp.matmul(a, b, out=c), fmas)
    a.fill(0.0)
    b.fill(0.0)
    timed(f"{label}.zeros", lambda: cp.matmul(a, b, out=c), fmas)
    cp.get_default_memory_pool().free_all_blocks()

with open(os.path.join(OUT, "explore_energy_terms.json"), "w") as f:
    json.dump(results, f, indent=1)
