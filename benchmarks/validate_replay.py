"""Issue 13's graph replay on real training steps: per-kernel energies, their reproducibility, the sum.

    python3 benchmarks/validate_replay.py --out DIR [--gpu 0] [--quick]

For a torchvision ResNet-50 training step (bf16, batch 64) and a transformer training step
(benchmarks/workloads), it captures one step as a CUDA graph and runs ``archline.replay`` twice
(``DIR/<workload>-1``, ``-2``: archline run directories with reports). It prints each group's
isolated energy per step in both runs and their difference (target: within 3 %), and the sum of
the isolated energies against the whole step. Each workload runs on its own; a failure is
reported and the other goes on. ``DIR/summary.json`` holds every figure with the board.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "workloads"))


def compare(a: Any, b: Any) -> list[dict[str, Any]]:
    """Rows of two replays of the same step: each group's energy in both and the difference (%)."""
    second = {r.group: r for r in b.rows}
    out = []
    for r in a.rows:
        s = second.get(r.group)
        diff = None if s is None or not r.energy_j else (s.energy_j / r.energy_j - 1) * 100
        out.append({"group": r.group, "energy_1_j": r.energy_j, "energy_2_j": None if s is None else s.energy_j,
                    "sigma_1_j": r.energy_sigma_j, "diff_pct": diff})  # fmt: skip
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="resnet50,transformer,mlp")
    ap.add_argument("--top", type=int, default=6, help="groups measured one by one")
    ap.add_argument("--no-marginal", action="store_true", help="skip the marginal energies (half the time)")
    a = ap.parse_args()
    import archline
    from archline.hw.nvml import device_static

    static = device_static(a.gpu)
    board = f"{static.get('name')} {str(static.get('uuid'))[:12]}"
    print(f"board: {board}", flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"board": board, "workloads": {}}
    top = a.top
    for name in a.only.split(","):
        t0 = time.time()
        try:
            if name == "resnet50":
                from train_resnet import make_step

                step = make_step(f"cuda:{a.gpu}", batch=64)
            else:
                from transformer_step import make_step as make_tstep

                step = make_tstep(f"cuda:{a.gpu}")
            runs = [archline.replay(step, gpu=a.gpu, top=top, out=a.out / f"{name}-{k}", force=True, max_total_s=2.0,
                                    marginal=not a.no_marginal)
                    for k in (1, 2)]  # fmt: skip
            rows = compare(*runs)
            worst = max((abs(r["diff_pct"]) for r in rows if r["diff_pct"] is not None), default=None)
            for r in rows:
                print(f"  {name} {r['group'][:70]}: {r['energy_1_j']:.4g} J then {r['energy_2_j']:.4g} J "
                      f"({r['diff_pct']:+.2f} %)", flush=True)  # fmt: skip
            s = runs[0].summary()
            print(f"PASS/FAIL {name}: run-to-run worst {worst:.2f} % (target ≤ 3 %): "
                  f"{'PASS' if worst is not None and worst <= 3 else 'FAIL'}; sum of isolated "
                  f"{s['sum_isolated_j']:.4g} J vs step {s['step_energy_j']:.4g} J ({s['sum_vs_step_pct']:+.2f} %)",
                  flush=True)  # fmt: skip
            summary["workloads"][name] = {"rows": rows, "worst_run_to_run_pct": worst, "run1": s,
                                          "run2": runs[1].summary(), "wall_s": time.time() - t0}  # fmt: skip
        except Exception as exc:
            traceback.print_exc()
            summary["workloads"][name] = {"error": repr(exc)}
    (a.out / f"summary-{a.only.replace(',', '-')}.json").write_text(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
