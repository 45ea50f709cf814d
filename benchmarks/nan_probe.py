"""Which kernel groups of a real training step make NaN when switched off alone (issue 13's design).

    python benchmarks/nan_probe.py [--only resnet50,transformer] [--gpu 0] [--replays 3] [--json FILE]
                                   [--prime] [--keep-buffers]

Random halves of a step's groups computed on NaN in most configurations even with the state copied back before
every replay (docs/replay.md, session 9). If only a few groups make NaN when switched off (a kernel that fills a
buffer others read, a zeroing pass), pinning those on would leave the halves design their well-conditioned split
without the NaN. For each group this captures the step, copies the state back, switches that group alone off and
replays ``--replays`` times (state copied back before each), then checks the step's state: a group is a NaN
maker if the state ended non-finite. Then the same for a random half of the groups with the makers kept on, 20
times: how many end non-finite (against the same halves with every group switchable).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from validate_attribution_real import DEFAULT_ONLY, WORKLOADS, make_step  # noqa: E402


def _ends_finite(graph: Any, nodes: list[int], replays: int, prime: bool = False) -> bool:
    if prime:  # one whole step from the restored state first, as replay's prime=True does
        graph.restore_state()
        graph.set_enabled(None)
        graph.replay()
        graph.synchronize()
    graph.restore_state()
    graph.set_enabled(nodes)
    for _ in range(replays):
        graph.reset_state()
        graph.replay()
    graph.synchronize()
    ok = bool(graph.state.finite())
    graph.restore_state()
    return ok


def probe(
    name: str, gpu: int, replays: int, halves: int, seed: int, prime: bool = False, keep: bool = False
) -> dict[str, Any]:
    import numpy as np

    from archline.hw.graph import capture_torch
    from archline.measurement.attribute.replay import _plan

    graph = capture_torch(make_step(name, f"cuda:{gpu}"), gpu, keep_buffers=keep)
    try:
        if graph.state is None or not graph.state.guarded:
            return {"workload": name, "error": "the step's state is not guarded"}
        plan, switching = _plan(graph, {})
        names = plan.measurable
        every = plan.base + [i for g in names for i in plan.groups[g]]
        whole_ok = _ends_finite(graph, every, replays, prime)
        makers = []
        for g in names:
            off = set(plan.groups[g])
            if not _ends_finite(graph, [i for i in every if i not in off], replays, prime):
                makers.append(g)
        rng = np.random.default_rng(seed)
        counts = {"all switchable": 0, "makers kept on": 0}
        for _ in range(halves):
            on = {g for g in names if rng.random() < 0.5}
            for label, kept_on in (("all switchable", set()), ("makers kept on", set(makers))):
                nodes = plan.base + [i for g in names if g in on or g in kept_on for i in plan.groups[g]]
                counts[label] += 0 if _ends_finite(graph, nodes, replays, prime) else 1
        return {
            "workload": name, "groups": len(names), "switching": switching.summary().get("mode"),
            "whole_step_finite": whole_ok, "nan_makers": makers,
            "halves": halves, "halves_nonfinite": counts, "prime": prime, "keep_buffers": keep,
            "notes": list(graph.notes),
        }  # fmt: skip
    finally:
        graph.set_enabled(None)
        graph.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=DEFAULT_ONLY, help=f"from {','.join(WORKLOADS)}")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--replays", type=int, default=3)
    ap.add_argument("--halves", type=int, default=20)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--prime", action="store_true", help="a whole step before each configuration (replay's prime)")
    ap.add_argument("--keep-buffers", action="store_true", help="capture with no buffer reused (replay's keep_buffers)")
    a = ap.parse_args(argv)
    from archline.core.activity import demangle
    from archline.hw.nvml import device_static

    board = device_static(a.gpu)
    print(f"board: {board.get('name', '?')} {str(board.get('uuid', '?'))[:12]}", flush=True)
    out = []
    for name in a.only.split(","):
        r = probe(name, a.gpu, a.replays, a.halves, a.seed, a.prime, a.keep_buffers)
        out.append(r)
        if "error" in r:
            print(f"{name}: {r['error']}", flush=True)
            continue
        short = demangle(r["nan_makers"])
        head = f"{name}: prime {r['prime']}, keep_buffers {r['keep_buffers']}; "
        print(head + " ".join(r["notes"])[:300], flush=True)
        print(f"{name}: {r['groups']} groups ({r['switching']}); whole step finite: {r['whole_step_finite']}; "
              f"{len(r['nan_makers'])} make NaN when switched off alone:", flush=True)  # fmt: skip
        for g in r["nan_makers"]:
            print(f"    {short.get(g, g)[:110]}", flush=True)
        h = r["halves_nonfinite"]
        print(f"  {r['halves']} random halves ending non-finite: {h['all switchable']} with every group switchable, "
              f"{h['makers kept on']} with the NaN makers kept on", flush=True)  # fmt: skip
    if a.json:
        a.json.write_text(json.dumps({"board": board, "workloads": out}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
