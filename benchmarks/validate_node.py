"""Issue 16 on a 2-GPU node (2×H200): every GPU from one command, a DDP job per GPU, and a Dask fleet.

    python3 benchmarks/validate_node.py --out DIR [--target-s 0.25] [--budget-s 300] [--ddp-seconds 20]

Sections (each on its own: a failing one is reported and the others go on; later ones are
skipped when the budget cannot hold them):

0. ``archline sensor calibrate --quick --gpu all``: both boards' sensor profiles at once (so the
   timed characterizations below start from stored profiles, equally).
1. ``archline characterize --quick --gpu 0`` alone, then ``--gpu all``: wall-time ratio (target ≤ 1.1×)
   and the fleet comparison report of the two boards (DIR/char_all/fleet_report.md).
2. ``archline measure --gpu all --json -- torchrun --nproc_per_node 2 benchmarks/workloads/ddp_train.py``:
   each GPU's energy against its own energy counter (target within 1 %).
3. ``archline fleet run --cluster local-cuda --kind quick --gpu all`` (needs archline[fleet]: dask,
   distributed, dask-cuda): its fleet report.
4. ``run`` (not among the default sections: ``--only run``, or ``scripts/device.sh noderun``):
   ``archline run --gpu all --tracer inject --
   torchrun --nproc_per_node 2 benchmarks/workloads/ddp_train.py --model transformer``: per GPU, the
   energy of its rows against that GPU's own energy counter (target within 1 %), its kernel and NCCL
   rows, the share of kernel energy in identifiable rows, each rank placed on its GPU by UUID; the wall
   time; then ``archline report`` of the run directory (DIR/ddp_run).

NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1), here and in every child. Writes DIR/summary.json and DIR/summary.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(MULTICAST_OFF)


def archline(args: list[str], log: Path, timeout_s: float) -> tuple[int, float, str]:
    """Run ``python -m archline ARGS`` with its output in ``log``; return (exit status, wall s, stdout).

    Raises RuntimeError (one line) on a non-zero exit or after ``timeout_s``; on a timeout the whole
    process group (archline, torchrun and its workers) is killed, so nothing is left holding a GPU.
    """
    env = dict(os.environ, **MULTICAST_OFF)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "archline", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        log.write_text(f"$ archline {' '.join(args)}\ntimed out after {timeout_s:.0f} s\n--- stdout\n{stdout}"
                       f"\n--- stderr\n{stderr}")  # fmt: skip
        raise RuntimeError(f"archline {args[0]} timed out after {timeout_s:.0f} s and was killed (log {log})") from None
    wall = time.perf_counter() - t0
    log.write_text(f"$ archline {' '.join(args)}\nexit {proc.returncode}, {wall:.1f} s\n--- stdout\n{stdout}"
                   f"\n--- stderr\n{stderr}")  # fmt: skip
    if proc.returncode != 0:
        tail = (stderr or stdout).strip().splitlines()
        raise RuntimeError(f"archline {args[0]} exited {proc.returncode}: {tail[-1] if tail else ''} (log {log})")
    return proc.returncode, wall, stdout


def boards() -> list[dict[str, str]]:
    from archline.hw.nvml import device_count, device_static

    out = []
    for i in range(device_count()):
        d = device_static(i)
        name, uuid = str(d.get("name")), str(d.get("uuid"))
        out.append({"index": str(i), "name": name, "uuid": uuid, "driver": str(d.get("driver_version")),
                    "board": f"{name} {uuid[:12]}"})  # fmt: skip
    return out


def sec_calibrate(out: Path, a: argparse.Namespace, s: dict[str, Any]) -> None:
    _, wall, _ = archline(["sensor", "calibrate", "--quick", "--gpu", "all", "-o", str(out / "sensor_all"), "--force"],
                          out / "sensor_all.log", 150)  # fmt: skip
    s["sensor_calibrate_all_wall_s"] = wall
    print(f"sensor calibrate --quick --gpu all: {wall:.1f} s", flush=True)


def sec_characterize(out: Path, a: argparse.Namespace, s: dict[str, Any]) -> None:
    common = ["characterize", "--quick", "--no-shipped", "--force", "--target-s", str(a.target_s)]
    _, solo, _ = archline([*common, "--gpu", "0", "-o", str(out / "char_solo")], out / "char_solo.log", 200)
    s["characterize_solo_wall_s"] = solo
    print(f"characterize --quick --gpu 0: {solo:.1f} s", flush=True)
    _, both, _ = archline([*common, "--gpu", "all", "-o", str(out / "char_all")], out / "char_all.log", 250)
    ratio = both / solo
    s.update(characterize_all_wall_s=both, characterize_ratio=ratio, characterize_ratio_target=1.1,
             characterize_ratio_passed=ratio <= 1.1)  # fmt: skip
    print(f"{'PASS' if ratio <= 1.1 else 'FAIL'}  characterize --quick --gpu all: {both:.1f} s = {ratio:.3f}× "
          f"one GPU alone (target ≤ 1.1×); report {out / 'char_all' / 'fleet_report.md'}", flush=True)  # fmt: skip


def sec_ddp(out: Path, a: argparse.Namespace, s: dict[str, Any]) -> None:
    prog = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
            str(HERE / "workloads" / "ddp_train.py"), "--seconds", str(a.ddp_seconds)]  # fmt: skip
    _, wall, stdout = archline(["measure", "--gpu", "all", "--json", "--", *prog], out / "ddp_measure.log",
                               a.ddp_seconds + 120)  # fmt: skip
    res = json.loads(stdout)
    (out / "ddp_measure.json").write_text(json.dumps(res, indent=2))
    rows = []
    for g in res["gpus"]:
        e, c = g["energy_j"], g["energy_counter_j"]
        err = None if e is None or not c else (e / c - 1) * 100
        ok = err is not None and abs(err) <= 1.0
        rows.append({"gpu": g["gpu"], "energy_j": e, "energy_uncertainty_j": g["energy_uncertainty_j"],
                     "energy_counter_j": c, "error_pct": err, "passed": ok})  # fmt: skip
        e_txt = "n/a" if err is None else f"{err:+.2f} %"
        print(f"{'PASS' if ok else 'FAIL'}  DDP GPU {g['gpu']}: archline {e} J vs counter {c} J ({e_txt}, "
              "limit ±1 %)", flush=True)  # fmt: skip
    tot = res["total"]
    print(f"DDP total: {tot['energy_j']} J ± {tot['energy_uncertainty_j']} J (counter {tot['energy_counter_j']} J), "
          f"wall {wall:.1f} s", flush=True)  # fmt: skip
    s.update(ddp_per_gpu=rows, ddp_total=tot, ddp_wall_s=wall)


def sec_fleet(out: Path, a: argparse.Namespace, s: dict[str, Any]) -> None:
    try:
        import dask_cuda  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as exc:
        raise RuntimeError(f"archline[fleet] is not installed here ({exc}): install the carried wheels") from None
    args = ["fleet", "run", "--cluster", "local-cuda", "--kind", "quick", "--gpu", "all",
            "-o", str(out / "fleet"), "--force", "--timeout-s", "60"]  # fmt: skip
    _, wall, _ = archline(args, out / "fleet.log", 280)
    s.update(fleet_wall_s=wall, fleet_report=str(out / "fleet" / "fleet_report.md"))
    print(f"fleet (LocalCUDACluster, quick): {wall:.1f} s; report {out / 'fleet' / 'fleet_report.md'}", flush=True)


def _counter_j(gpu_dir: Path) -> tuple[float | None, float | None]:
    """The GPU's energy counter in the run (its raw recording): from its first to its last update seen (the
    span the attribution analyses, which its rows must add up to), and from the first to the last reading
    (one counter window more)."""
    from archline.records.traces import load_recording

    en = load_recording(gpu_dir / "raw" / "recording.npz").get("nvml.energy")
    if en is None or len(en) < 2:
        return None, None
    changed = [i for i in range(1, len(en)) if en.value[i] != en.value[i - 1]]
    span = float(en.value[-1] - en.value[changed[0]]) if changed else None
    return span, float(en.value[-1] - en.value[0])


def run_summary(run_dir: Path) -> list[dict[str, Any]]:
    """Per GPU of an ``archline run --gpu all`` directory of the 2-rank job: its rows' energy against its own
    counter, its kernel and NCCL rows, identifiable share, untraced energy, the ranks placed on it by UUID
    (LOCAL_RANK r runs on cuda:r, which is NVML r under CUDA_DEVICE_ORDER=PCI_BUS_ID), and whether it passed."""
    from archline.records import RunDir

    rd = RunDir.open(run_dir)
    rows = rd.read_csv("kernels.csv")
    procs = rd.read_csv("processes.csv")
    per: list[dict[str, Any]] = []
    for g in rd.read_csv("gpus.csv"):
        i = g["gpu"]
        mine = [r for r in rows if r["gpu"] == i]
        e = sum(r["energy_j"] for r in mine)
        c, whole = _counter_j(run_dir / g["run_dir"])
        err = None if not c else (e / c - 1) * 100
        ranks = [p["rank"] for p in procs if str(p["gpus"]) == str(i)]
        ok = err is not None and abs(err) <= 1.0 and g["comm_rows"] > 0 and ranks == [i]
        per.append({"gpu": i, "uuid": g["gpu_uuid"], "energy_j": e, "energy_counter_j": c, "error_pct": err,
                    "energy_counter_recording_j": whole,
                    "kernel_rows": g["kernel_rows"], "nccl_rows": g["comm_rows"], "nccl_energy_j": g["comm_energy_j"],
                    "identifiable_share": g["identifiable_share"], "ranks": ranks, "sensor_model": g["sensor_model"],
                    "untraced_energy_j": sum(r["energy_j"] for r in mine if r["kind"] == "untraced"),
                    "status": g["status"], "passed": ok})  # fmt: skip
    return per


def run_line(g: dict[str, Any]) -> str:
    """One GPU of :func:`run_summary` as a PASS/FAIL line."""
    err, c, ident = g["error_pct"], g["energy_counter_j"], g["identifiable_share"]
    e_txt = "n/a" if err is None else f"{err:+.3f} %"
    c_txt = "n/a" if c is None else f"{c:.1f}"
    ident_txt = f"{100 * ident:.0f} %" if isinstance(ident, float) else "n/a"
    return (
        f"{'PASS' if g['passed'] else 'FAIL'}  run GPU {g['gpu']} ({str(g['uuid'])[:12]}, ranks {g['ranks']}): "
        f"archline {g['energy_j']:.1f} J vs its counter {c_txt} J over the span ({e_txt}, limit ±1 %; "
        f"{g['energy_counter_recording_j']:.1f} J over the whole recording); {g['kernel_rows']} kernel "
        f"rows, {g['nccl_rows']} NCCL rows ({g['nccl_energy_j']:.1f} J), identifiable {ident_txt} of kernel energy, "
        f"untraced {g['untraced_energy_j']:.1f} J"
    )


def sec_run(out: Path, a: argparse.Namespace, s: dict[str, Any]) -> None:
    run_dir = out / "ddp_run"
    job = [str(HERE / "workloads" / "ddp_train.py"), "--seconds", str(a.ddp_seconds), "--model", a.run_model]
    prog = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *job]
    args = ["run", "--gpu", "all", "--tracer", "inject", "--trace-duty", a.run_trace_duty, "--json", "--force",
            "-o", str(run_dir), "--", *prog]  # fmt: skip
    _, wall, stdout = archline(args, out / "ddp_run.log", a.ddp_seconds + 140)
    res = json.loads(stdout)
    per = run_summary(run_dir)
    for g in per:
        print(run_line(g), flush=True)
    total = res.get("total_energy_j")
    program_s = next((g["result"]["span_end_s"] - g["result"]["span_start_s"] for g in res["gpus"] if g["result"]), 0)
    print(f"run total: {total:.1f} J over {len(per)} GPUs; archline run wall {wall:.1f} s (analysed span "
          f"{program_s:.1f} s); tracer {res.get('tracer')}", flush=True)  # fmt: skip
    _, rep_wall, _ = archline(["report", str(run_dir)], out / "ddp_run_report.log", 120)
    print(f"report: {run_dir / 'report.md'} ({rep_wall:.1f} s)", flush=True)
    passed = len(per) == 2 and all(g["passed"] for g in per)
    s.update(run_per_gpu=per, run_total_j=total, run_wall_s=wall, run_dir=str(run_dir), run_passed=passed)
    if not passed:
        raise RuntimeError("archline run --gpu all: a GPU missed its target (see the FAIL lines above)")


SECTIONS: list[tuple[str, Callable[[Path, argparse.Namespace, dict[str, Any]], None], float]] = [
    ("sensor_calibrate", sec_calibrate, 40.0),
    ("characterize", sec_characterize, 120.0),
    ("ddp", sec_ddp, 40.0),
    ("fleet", sec_fleet, 70.0),
    ("run", sec_run, 90.0),
]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--target-s", type=float, default=0.25, help="seconds per benchmark in the characterizations")
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--ddp-seconds", type=float, default=20.0)
    ap.add_argument("--run-model", choices=("mlp", "transformer"), default="transformer",
                    help="the DDP job archline run attributes (section run)")  # fmt: skip
    ap.add_argument("--run-trace-duty", default="auto", help="archline run's --trace-duty in section run")
    # Section run has its own step (scripts/device.sh noderun): the node step's budget has no room for it.
    ap.add_argument("--only", nargs="*", default=[n for n, *_ in SECTIONS if n != "run"],
                    choices=[n for n, *_ in SECTIONS])  # fmt: skip
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    s: dict[str, Any] = {"env": MULTICAST_OFF, "errors": {}}
    try:
        s["boards"] = boards()
        print("boards: " + "; ".join(b["board"] for b in s["boards"]), flush=True)
    except Exception as exc:
        s["errors"]["boards"] = f"{type(exc).__name__}: {exc}"
    for name, fn, need_s in SECTIONS:
        if name not in a.only:
            continue
        left = a.budget_s - (time.perf_counter() - t0)
        if left < need_s:
            s["errors"][name] = f"skipped: {left:.0f} s of the budget left, needs about {need_s:.0f} s"
            print(f"SKIP  {name}: {s['errors'][name]}", flush=True)
            continue
        try:
            fn(out, a, s)
        except Exception as exc:
            s["errors"][name] = f"{type(exc).__name__}: {exc}"
            (out / f"{name}.traceback.txt").write_text(traceback.format_exc())
            print(f"ERROR {name}: {s['errors'][name]}", flush=True)
    s["wall_s"] = time.perf_counter() - t0
    (out / "summary.json").write_text(json.dumps(s, indent=2, default=str))
    lines = ["# validate_node summary", "", *(f"- board {b['index']}: {b['board']}" for b in s.get("boards", []))]
    lines += [f"- {k}: {v}" for k, v in s.items() if k not in ("boards", "errors", "env")]
    lines += [f"- error in {k}: {v}" for k, v in s["errors"].items()]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print(f"summary: {out / 'summary.md'} ({s['wall_s']:.0f} s)", flush=True)
    return 0 if not s["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
