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

NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1), here and in every child. Writes DIR/summary.json and DIR/summary.md.
"""

from __future__ import annotations

import argparse
import json
import os
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
    """Run ``python -m archline ARGS`` with its output in ``log``; return (exit status, wall s, stdout)."""
    env = dict(os.environ, **MULTICAST_OFF)
    t0 = time.perf_counter()
    try:
        res = subprocess.run([sys.executable, "-m", "archline", *args], capture_output=True, text=True,
                             env=env, timeout=timeout_s, check=False)  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        log.write_text(f"timed out after {timeout_s:.0f} s\n{exc.stdout or ''}\n{exc.stderr or ''}")
        return 124, time.perf_counter() - t0, ""
    wall = time.perf_counter() - t0
    log.write_text(f"$ archline {' '.join(args)}\nexit {res.returncode}, {wall:.1f} s\n--- stdout\n{res.stdout}"
                   f"\n--- stderr\n{res.stderr}")  # fmt: skip
    if res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()
        raise RuntimeError(f"archline {args[0]} exited {res.returncode}: {tail[-1] if tail else ''} (log {log})")
    return res.returncode, wall, res.stdout


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


SECTIONS: list[tuple[str, Callable[[Path, argparse.Namespace, dict[str, Any]], None], float]] = [
    ("sensor_calibrate", sec_calibrate, 40.0),
    ("characterize", sec_characterize, 120.0),
    ("ddp", sec_ddp, 40.0),
    ("fleet", sec_fleet, 70.0),
]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--target-s", type=float, default=0.25, help="seconds per benchmark in the characterizations")
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--ddp-seconds", type=float, default=20.0)
    ap.add_argument("--only", nargs="*", default=[n for n, *_ in SECTIONS], choices=[n for n, *_ in SECTIONS])
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
