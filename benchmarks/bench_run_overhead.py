"""How much does recording slow a workload down? Sensors, the in-process CUPTI tracer, the injection library.

Usage (GPU machine):
    python benchmarks/bench_run_overhead.py [--gpu 0] [--reps 5] [--out DIR]
        [--workloads gemm,small,torch] [--modes sensors,python,inject]

Target: every figure < 3 %. Each figure is the change of a median time against the median
without recording, over ``--reps`` alternating repetitions. Workloads: a cuBLAS GEMM loop (few,
long kernels), a loop of 40 000 elementwise ~10 µs kernels (CUPTI's worst case) and, if torch
is installed, a small transformer's training steps.

* In-process (``archline run --tracer python``): the workload runs in this interpreter, timed
  by the host clock around its synchronised block, without recording, under the sensors only
  (``sensors``) and under the sensors with the cupti-python tracer (``python``).
* Child process (``archline run --tracer inject``): the workload runs as
  ``python bench_run_overhead.py --child NAME``, plain, under the sensors (``sensors``) and under
  the sensors with the injection library (``inject``), so process start-up is in every run. Two
  figures: the child's wall time (start-up, CUDA and CUPTI initialisation and the final flush
  included) and the block the child times itself; PASS needs both < 3 %.

Prints every figure with PASS/FAIL; exits 0 only if all pass.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from archline.errors import CUPTIUnavailableError
from archline.measurement.attribute_api import Attribution

LIMIT = 0.03
MODES = ("sensors", "python", "inject")
Workload = tuple[str, Callable[[], None]]


def gemm_workload() -> Workload:
    import cupy as cp

    a = cp.random.random((4096, 4096), dtype=cp.float32)
    b = cp.random.random((4096, 4096), dtype=cp.float32)

    def run() -> None:
        for _ in range(200):
            cp.matmul(a, b)
        cp.cuda.Device().synchronize()

    return "cuBLAS SGEMM 4096² × 200", run


def small_kernel_workload() -> Workload:
    import cupy as cp

    x = cp.random.random(1 << 16, dtype=cp.float32)

    def run() -> None:
        y = x
        for _ in range(20000):
            y = y * 1.0001 + 1e-6
        cp.cuda.Device().synchronize()

    return "40 000 elementwise kernels (20 000 × multiply, add) of 64 Ki floats", run


def torch_workload() -> Workload | None:
    try:
        import torch
        from torch import nn
    except ImportError:
        return None
    dev = torch.device("cuda")
    model = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True), num_layers=6
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(32, 256, 512, device=dev)

    def run() -> None:
        for _ in range(20):
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
        torch.cuda.synchronize()

    return "transformer training, 20 steps", run


WORKLOADS: dict[str, Callable[[], Workload | None]] = {
    "gemm": gemm_workload,
    "small": small_kernel_workload,
    "torch": torch_workload,
}


def timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def child_main(name: str) -> int:
    """The workload alone, as a child process: warm up, time one block, print it as JSON."""
    load = WORKLOADS[name]()
    if load is None:
        return 3
    _, fn = load
    fn()
    print(json.dumps({"block_s": timed(fn)}), flush=True)
    return 0


@dataclass
class Figure:
    label: str
    changes: dict[str, float]  # what was timed -> relative change of its median
    detail: str = ""
    ok: bool = True  # False: the recording did not work, whatever the times say

    @property
    def passed(self) -> bool:
        return self.ok and all(c < LIMIT for c in self.changes.values())

    def line(self) -> str:
        figs = ", ".join(f"{k} {100 * c:+.2f} %" for k, c in self.changes.items())
        return f"  {self.label:<38} {figs:<34} {'PASS' if self.passed else 'FAIL'}  {self.detail}".rstrip()


@dataclass
class Summary:
    figures: dict[str, list[float]] = field(default_factory=dict)
    failed: bool = False

    def add(self, mode: str, fig: Figure) -> None:
        self.figures.setdefault(mode, []).append(max(fig.changes.values()))
        self.failed |= not fig.passed


def _change(times: list[float], base: list[float]) -> float:
    return statistics.median(times) / statistics.median(base) - 1.0


def in_process(fn: Callable[[], None], modes: list[str], gpu: int, reps: int, out: Path, summary: Summary) -> None:
    base: list[float] = []
    times: dict[str, list[float]] = {m: [] for m in modes if m in ("sensors", "python")}
    records = 0
    skipped: str | None = None
    for rep in range(reps):
        base.append(timed(fn))
        if "sensors" in times:
            with Attribution(gpu, trace=False, pre_s=0.3, post_s=0.3):
                times["sensors"].append(timed(fn))
        if "python" in times and skipped is None:
            try:
                with Attribution(gpu, out=out / f"python-{rep}", force=True, pre_s=0.3, post_s=0.3) as a:
                    times["python"].append(timed(fn))
                records = len(a.activities)
            except CUPTIUnavailableError as exc:
                skipped = str(exc)
    b = statistics.median(base)
    print(f"in-process: {b * 1e3:.1f} ms (spread {100 * (max(base) - min(base)) / b:.1f} %)")
    for mode, ts in times.items():
        if not ts:
            print(f"  {mode}: not measured ({skipped})")
            continue
        label = "sensors only" if mode == "sensors" else "sensors + in-process CUPTI (python)"
        fig = Figure(label, {"time": _change(ts, base)}, f"{records} records" if mode == "python" else "")
        fig.ok = mode != "python" or records > 0
        summary.add(mode, fig)
        print(fig.line())


def _run_child(name: str, env: dict[str, str]) -> tuple[float, float]:
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, __file__, "--child", name], env=env, stdout=subprocess.PIPE, text=True, check=True
    )
    wall = time.perf_counter() - t0
    return wall, float(json.loads(res.stdout.strip().splitlines()[-1])["block_s"])


def as_child(name: str, modes: list[str], gpu: int, reps: int, out: Path, summary: Summary) -> None:
    from archline.gpu.cupti_inject import build_injection, injection_env, read_injection_output

    env = dict(os.environ)
    lib: Path | None = None
    skipped: str | None = None
    if "inject" in modes:
        try:
            lib = build_injection()
        except CUPTIUnavailableError as exc:
            skipped = str(exc)
    _run_child(name, env)  # warm up: kernel caches, page cache
    base: list[tuple[float, float]] = []
    times: dict[str, list[tuple[float, float]]] = {m: [] for m in modes if m in ("sensors", "inject")}
    traced = None
    for rep in range(reps):
        base.append(_run_child(name, env))
        if "sensors" in times:
            with Attribution(gpu, trace=False, pre_s=0.3, post_s=0.3):
                times["sensors"].append(_run_child(name, env))
        if "inject" in times and lib is not None:
            d = out / f"inject-{name}-{rep}"
            d.mkdir(parents=True, exist_ok=True)
            with Attribution(gpu, trace=False, pre_s=0.3, post_s=0.3):
                times["inject"].append(_run_child(name, {**env, **injection_env(lib, d)}))
            traced = read_injection_output(d)
    walls, blocks = [w for w, _ in base], [b for _, b in base]
    w, b = statistics.median(walls), statistics.median(blocks)
    print(
        f"child process: wall {w:.2f} s, block {b * 1e3:.1f} ms (spread {100 * (max(blocks) - min(blocks)) / b:.1f} %)"
    )
    for mode, ts in times.items():
        if not ts:
            print(f"  {mode}: not measured ({skipped})")
            continue
        changes = {"wall": _change([t for t, _ in ts], walls), "block": _change([t for _, t in ts], blocks)}
        if mode == "sensors":
            fig = Figure("sensors only", changes)
        else:
            n = len(traced.records) if traced is not None else 0
            why = "; ".join(traced.errors) if traced is not None and traced.errors else ""
            detail = f"{n} records" + (f", {traced.dropped} dropped" if traced and traced.dropped else "")
            fig = Figure("sensors + injection library (inject)", changes, detail + (f" ({why})" if why else ""))
            fig.ok = n > 0
        summary.add(mode, fig)
        print(fig.line())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None, help="keep the run directories and traces here")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help=f"from {','.join(WORKLOADS)}")
    ap.add_argument("--modes", default=",".join(MODES), help=f"from {','.join(MODES)}")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        return child_main(args.child)
    names = [w for w in args.workloads.split(",") if w]
    modes = [m for m in args.modes.split(",") if m]
    bad = [w for w in names if w not in WORKLOADS] + [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown workloads or modes: {', '.join(bad)}")
    # The sensors read NVML GPU --gpu; show CUDA (here and in the children) the same GPU.
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        os.environ["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
    out = args.out or Path(tempfile.mkdtemp(prefix="archline-overhead-"))
    summary = Summary()
    for name in names:
        load = WORKLOADS[name]()
        if load is None:
            print(f"== {name}: skipped (not installed)")
            continue
        title, fn = load
        print(f"== {title}")
        fn()  # warm up (JIT, cuBLAS handles, allocator)
        in_process(fn, modes, args.gpu, args.reps, out, summary)
        if "sensors" in modes or "inject" in modes:
            as_child(name, modes, args.gpu, args.reps, out, summary)
    worst = ", ".join(
        f"{m} {100 * max(v):+.2f} % {'PASS' if max(v) < LIMIT else 'FAIL'}" for m, v in summary.figures.items()
    )
    print(f"worst per mode: {worst}")
    print(f"overall: {'FAIL' if summary.failed else 'PASS'} (every figure < {100 * LIMIT:.0f} %); runs in {out}")
    return 1 if summary.failed else 0


if __name__ == "__main__":
    sys.exit(main())
