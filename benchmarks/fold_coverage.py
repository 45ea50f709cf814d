"""How well graph replay's folded in-step σ covers the truth on simulated steps with pairwise interactions.

    python benchmarks/fold_coverage.py [--seeds 12]

The steps of ``tests/unit/test_replay_context.py``'s interaction test (12 groups of 0.1–2.4 J, each kernel
drawing ±10 % while a random partner is on, 0.2 % measurement noise, a 60-configuration halves design): for every
group, (in-step energy − truth) / ``context_sigma_j``. Prints the count, the RMS of that z, the share within 1 σ
and 2 σ, and the median relative error and σ. A calibrated fold gives an RMS near 1 and about 68 % and 95 %.
Run from the repository root (it uses the tests' fake graph).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=12)
    a = ap.parse_args(argv)
    from tests.helpers.fake_graph import FakeGraphGPU, FakeNode, NoisyMeasure
    from tests.unit.test_replay_context import FIXED_S, FIXED_W, in_step, step_nodes

    from archline.measurement.attribute.replay import replay_energy

    z, err, sig = [], [], []
    for seed in range(a.seeds):
        nodes = [FakeNode(n.name + f"-{i}", n.time_s, n.power_w) for i, n in enumerate(step_nodes(seed))]
        rng = np.random.default_rng(seed)
        k = len(nodes)
        partners = {i: (int((i + 1 + rng.integers(k - 1)) % k), float(rng.choice([-0.1, 0.1]))) for i in range(k)}
        gpu = FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W, interactions=partners)
        res = replay_energy(
            gpu, NoisyMeasure(gpu, rel=0.002, seed=seed), gpu.clock, top=2, marginal=False, design=60, design_seed=seed
        )
        truth = in_step(gpu)
        for r in res.rows:
            if r.group in truth and r.measurable and r.context_j is not None and r.context_sigma_j:
                z.append((r.context_j - truth[r.group]) / r.context_sigma_j)
                err.append(abs(r.context_j / truth[r.group] - 1.0))
                sig.append(r.context_sigma_j / truth[r.group])
    zz = np.array(z)
    c1, c2 = 100 * float(np.mean(np.abs(zz) <= 1)), 100 * float(np.mean(np.abs(zz) <= 2))
    print(
        f"{zz.size} groups over {a.seeds} steps: RMS z {float(np.sqrt(np.mean(zz**2))):.2f}; "
        f"within 1 σ {c1:.0f} %, within 2 σ {c2:.0f} %; "
        f"median |error| {100 * float(np.median(err)):.1f} %, median σ {100 * float(np.median(sig)):.1f} %"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
