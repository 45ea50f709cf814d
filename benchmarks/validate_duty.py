"""Duty-cycled kernel tracing on a GPU: what it saves a launch-bound program, and what it keeps of the attribution.

Usage (GPU machine): python benchmarks/validate_duty.py OUT_DIR [--reps 3] [--calls 600000] [--duty 0.4/2,0.4/4]
                     [--duty-modes detach,disable]

Runs benchmarks/workload_launch_bound.py under ``archline run`` several ways, alternating, ``--reps``
times each: ``--no-kernels`` (sensors only, the baseline), full tracing (``--tracer inject``) and
duty-cycled tracing (``--trace-duty``, one run per comma-separated setting and ``--trace-duty-mode``).
Prints, with PASS/FAIL:
* overhead: the change of the program's own block time against the baseline (median), target < 3 %;
* agreement: each kernel's attributed energy per call, duty-cycled against full tracing (medians),
  target within 10 %;
* totals: every run's rows add up to the counter total (to 1e-6).
Keeps every run directory under OUT_DIR and writes OUT_DIR/duty_summary.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

WORKLOAD = Path(__file__).with_name("workload_launch_bound.py")


def run(out: Path, flags: list[str], calls: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "archline", "run", "--json", "--force", "-o", str(out), *flags, "--"]
    cmd += [sys.executable, str(WORKLOAD), str(calls)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
    payload: dict[str, Any] = json.loads(p.stdout[p.stdout.index("{") :])
    prog = [ln for ln in p.stderr.splitlines() if ln.startswith("{") and "block_s" in ln]
    payload["block_s"] = json.loads(prog[-1])["block_s"]
    return payload


def per_call(payload: dict[str, Any]) -> dict[str, float]:
    rows = payload["result"]["rows"]
    return {r["name"]: r["energy_j"] / r["calls"] for r in rows if r["kind"] == "kernel" and r["calls"]}


def calls_of(runs: list[dict[str, Any]], name: str) -> int:
    return min(
        (x["calls"] for r in runs for x in r["result"]["rows"] if x["name"] == name and x["kind"] == "kernel"),
        default=0,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--calls", type=int, default=600_000)
    ap.add_argument("--duty", default="0.4/2,0.4/4")
    ap.add_argument("--duty-modes", default="detach", help="comma-separated --trace-duty-mode values")
    a = ap.parse_args(argv)
    duties = [d for d in a.duty.split(",") if d]
    modes = {"none": ["--no-kernels"], "full": ["--tracer", "inject"]}
    for d in duties:
        for dm in (m for m in a.duty_modes.split(",") if m):
            modes[f"duty {d} {dm}"] = ["--tracer", "inject", "--trace-duty", d, "--trace-duty-mode", dm]
    res: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for rep in range(a.reps):
        for m, flags in modes.items():
            res[m].append(run(a.out / f"{m.replace(' ', '-').replace('/', '-')}-{rep}", flags, a.calls))
            print(f"{m} rep {rep}: block {res[m][-1]['block_s']:.3f} s", flush=True)
    base = statistics.median(r["block_s"] for r in res["none"])
    summary: dict[str, Any] = {
        "duty": a.duty,
        "duty_modes": a.duty_modes,
        "calls": a.calls,
        "reps": a.reps,
        "baseline_block_s": base,
        "block_s": {m: [r["block_s"] for r in rs] for m, rs in res.items()},
        "checks": [],
    }
    ok = True

    def check(name: str, value: float, limit: float, unit: str = "%") -> None:
        nonlocal ok
        passed = abs(value) < limit
        ok &= passed
        summary["checks"].append({"check": name, "value": value, "limit": limit, "passed": passed})
        print(f"  {name:58s} {value:+7.2f} {unit}  (limit {limit:g}) {'PASS' if passed else 'FAIL'}")

    print(f"baseline (sensors only): block {base:.3f} s")
    for m in [m for m in modes if m != "none"]:
        check(
            f"overhead, {m} tracing (block time vs sensors only)",
            100 * (statistics.median(r["block_s"] for r in res[m]) / base - 1),
            3.0,
        )
    full = [per_call(r) for r in res["full"]]
    for dm in [m for m in modes if m.startswith("duty")]:
        duty = [per_call(r) for r in res[dm]]
        for k in sorted(set(full[0]) & set(duty[0])):
            f = statistics.median(x[k] for x in full if k in x)
            d = statistics.median(x[k] for x in duty if k in x)
            summary.setdefault("per_call_j", {}).setdefault(dm, {})[k] = {"full": f, "duty": d}
            if calls_of(res[dm], k) < 1000:
                continue
            check(f"per-call energy of {k[:24]}, {dm} vs full", 100 * (d / f - 1), 10.0)
    for m in modes:
        for r in res[m]:
            tot = r["result"]["total_energy_j"]
            s = sum(x["energy_j"] for x in r["result"]["rows"])
            check(f"rows add up to the counter total ({m})", 100 * (s / tot - 1), 1e-4)
    for dm in [m for m in modes if m.startswith("duty")]:
        rows = [x for r in res[dm] for x in r["result"]["rows"]]
        shares = [x["share"] for x in rows if x["kind"] == "untraced"]
        summary.setdefault("untraced_share", {})[dm] = shares
        print(f"{dm}: untraced share of the energy " + ", ".join(f"{100 * v:.0f} %" for v in shares))
        for x in rows:
            if x["kind"] == "kernel" and x["calls"] > 1000:
                ident = "identifiable" if x["identifiable"] else "NOT identifiable"
                print(
                    f"  {x['name'][:24]:24s} {x['calls']:>9d} calls  {x['energy_j']:.4g} J "
                    f"[{x['energy_lo_j']:.4g}, {x['energy_hi_j']:.4g}]  {ident}"
                )
        notes = [n for r in res[dm] for n in r.get("notes", []) if n.startswith("duty cycle:")]
        summary.setdefault("switch_notes", {})[dm] = notes
        for n in notes:
            print(f"  {n}")
    summary["passed"] = ok
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "duty_summary.json").write_text(json.dumps(summary, indent=1))
    print("overall:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
