"""The busy-time design model against the links and additive ones on fake steps of known in-step energies (session 17).

    python benchmarks/busy_sim.py [--seeds N]

Each fake step (tests/helpers/fake_graph.py: 16 nodes of 0.5–4 ms, each its own group) is measured by a design of 60
configurations three times, once per model (replay_context.run_context: ``additive``, ``links``, ``busy`` with the
fake board's kernel timer), and each group's in-step energy with its folded σ is scored against the truth.
Scenarios: consumers 25 % slower while their producer is off, all at 400 W; the same with powers of 200–600 W;
slowdowns of 0–40 % at 200–600 W mixed with ±5 % or ±10 % pairwise power interactions (a kernel drawing more or less
while a random partner is on, its time unchanged); and the last again (±10 %) with a kernel timer whose every name's
busy time scatters by 1 % per traced replay. The busy model fits β·Z beside the links model's κ·B. Printed per
scenario and model: the share of groups within 1 σ and 2 σ, and the mean √E[ρ²]. A fake step decides nothing about a
real one: it shows what each model covers when the step behaves as its scenario says.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

MODELS = ("additive", "links", "busy")
SCENARIOS = ("slow, 400 W", "slow, 200-600 W", "mixed, ±5 %", "mixed, ±10 %", "mixed, timer ±1 %")
#: The last scenario's kernel timer scatters each name's busy time by this much per traced replay.
TIMER_SD = 0.01


def _step(scenario: str, seed: int) -> Any:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.helpers.fake_graph import FakeGraphGPU, FakeNode
    from tests.unit.test_replay_context import FIXED_S, FIXED_W, step_nodes

    rng = np.random.default_rng(seed)
    base = step_nodes(seed)
    k = len(base)
    if scenario == "slow, 400 W":
        powers, slow, inter = [400.0] * k, {i: (i - 1, 0.25) for i in range(1, k)}, {}
    elif scenario == "slow, 200-600 W":
        powers = [float(rng.uniform(200.0, 600.0)) for _ in range(k)]
        slow, inter = {i: (i - 1, 0.25) for i in range(1, k)}, {}
    else:
        amp = 0.05 if "±5 %" in scenario else 0.10
        powers = [float(rng.uniform(200.0, 600.0)) for _ in range(k)]
        inter = {i: (int((i + 1 + rng.integers(k - 1)) % k), float(rng.choice([-amp, amp]))) for i in range(k)}
        slow = {i: (i - 1, float(rng.uniform(0.0, 0.4))) for i in range(1, k)}
    nodes = [FakeNode(f"{n.name}-{i}", n.time_s, p) for i, (n, p) in enumerate(zip(base, powers, strict=True))]
    return FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W, interactions=inter, slowdowns=slow)


def simulate(seeds: int) -> dict[str, dict[str, dict[str, float]]]:
    """Scenario → model → within_1sd, within_2sd, rho_fold (means over ``seeds`` steps) and groups."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.helpers.fake_graph import NoisyMeasure
    from tests.unit.test_replay_context import in_step

    from archline.measurement.attribute.replay import replay_energy

    out: dict[str, dict[str, dict[str, float]]] = {}
    for scenario in SCENARIOS:
        out[scenario] = {}
        for model in MODELS:
            z: list[float] = []
            rho: list[float] = []
            for seed in range(seeds):
                gpu = _step(scenario, seed)
                timer = gpu.busy_times
                if "timer" in scenario:
                    rng = np.random.default_rng(1000 + seed)

                    def timer(fn: Any, gpu: Any = gpu, rng: np.random.Generator = rng) -> dict[str, float]:
                        got = gpu.busy_times(fn)
                        return {k: v * (1.0 + float(rng.normal(0.0, TIMER_SD))) for k, v in got.items()}

                res = replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=seed), gpu.clock, top=2, marginal=False,
                                    design=60, design_seed=seed, design_model=model, busy_timer=timer)  # fmt: skip
                if res.design is None or res.design["model"] != model:
                    raise ValueError(f"{scenario}, seed {seed}: the {model} model was not fitted")
                truth = in_step(gpu)
                z += [(r.context_j - truth[r.group]) / r.context_sigma_j for r in res.rows
                      if r.group in truth and r.measurable and r.context_sigma_j]  # fmt: skip
                rho.append(float(res.design["rho_fold"]))
            zz = np.abs(np.asarray(z))
            out[scenario][model] = {"within_1sd": float(np.mean(zz <= 1.0)), "within_2sd": float(np.mean(zz <= 2.0)),
                                    "rho_fold": float(np.mean(rho)), "groups": float(zz.size)}  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8, help="fake steps per scenario")
    a = ap.parse_args(argv)
    if a.seeds < 1:
        print("busy_sim: --seeds must be at least 1", file=sys.stderr)
        return 2
    sim = simulate(a.seeds)
    print(f"{a.seeds} fake steps per scenario; in-step energies within 1 σ / 2 σ of the fold, and mean √E[ρ²]")
    print(f"{'scenario':17s} " + "  ".join(f"{m:>22s}" for m in MODELS))
    for scenario, row in sim.items():
        cells = [f"{100 * r['within_1sd']:3.0f} / {100 * r['within_2sd']:3.0f} %, ρ {100 * r['rho_fold']:5.2f} %"
                 for r in row.values()]  # fmt: skip
        print(f"{scenario:17s} " + "  ".join(f"{c:>22s}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
