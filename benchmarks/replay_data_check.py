"""Does graph replay change the data a training step computes on, and with it the step's energy?

    python benchmarks/replay_data_check.py [--workloads resnet50 transformer] [--phase-s 3] [--train-s 25]

A training step replayed as a CUDA graph keeps updating the same weights; replays with nodes switched
off (``archline.replay``'s isolated timings and measurements) update them from stale gradients. Tensor
cores draw less power on degenerate operands (zeros, NaN), so the energy archline.replay reports may
not be the energy of the program's own step. Per workload, on the same model and tensors:

1. ``fresh``: the step's graph (captured here) replayed for ``--phase-s`` s, J/step from the counter;
2. ``after replay``: the same, after ``archline.replay(step, top=4)`` ran on the step (its whole-step
   energy is printed beside), with the weights' state: non-finite values, max |w|, change of ‖w‖;
3. ``restored``: the same, after the weights and optimizer state are copied back from before 2;
4. ``trained``: the same, after ``--train-s`` s of plain all-on replays (training on one batch),
   with the weights' state.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from graph_vs_eager import Sampler, capture, make_step, open_board, phase  # noqa: E402


def _state(step: Any) -> tuple[Any, Any]:
    """The model and optimizer a workload's step closes over."""
    import torch

    model = opt = None
    for cell in step.__closure__ or ():
        v = cell.cell_contents
        if isinstance(v, torch.nn.Module):
            model = v
        elif isinstance(v, torch.optim.Optimizer):
            opt = v
    if model is None or opt is None:
        raise SystemExit("the workload's step does not close over a model and an optimizer")
    return model, opt


def _tensors(model: Any, opt: Any) -> list[Any]:
    import torch

    out = [p.data for p in model.parameters()] + [b for b in model.buffers()]
    for st in opt.state.values():
        out += [v for v in st.values() if isinstance(v, torch.Tensor)]
    return out


def _weights(model: Any, ref_norm: float | None) -> dict[str, Any]:
    import torch

    ps = [p.data.float() for p in model.parameters()]
    bad = sum(int((~torch.isfinite(p)).sum()) for p in ps)
    total = sum(p.numel() for p in ps)
    norm = float(torch.sqrt(sum((torch.nan_to_num(p) ** 2).sum() for p in ps)))
    big = max(float(torch.nan_to_num(p).abs().max()) for p in ps)
    zero = sum(int((p == 0).sum()) for p in ps)
    d = {"nonfinite": bad, "params": total, "max_abs": big, "norm": norm, "zero_frac": zero / total}
    rel = f", ‖w‖ {100 * (norm / ref_norm - 1):+.2f} %" if ref_norm else ""
    print(f"    weights: {bad} of {total} non-finite, {100 * zero / total:.2f} % zero, max |w| {big:.3g}{rel}",
          flush=True)  # fmt: skip
    return d


def run(name: str, smp: Sampler, gpu: int, seconds: float, train_s: float) -> dict[str, Any]:
    import torch

    import archline

    print(f"== {name}", flush=True)
    step = make_step(name)
    model, opt = _state(step)
    g = capture(step)
    g.replay()
    torch.cuda.synchronize()
    snap = [t.detach().clone() for t in _tensors(model, opt)]
    w0 = _weights(model, None)
    out: dict[str, Any] = {"workload": name, "fresh_weights": w0}
    out["fresh"] = phase("fresh", g.replay, smp, seconds)
    rep = archline.replay(step, gpu=gpu, top=4, marginal=False, max_total_s=1.5)
    print(f"    archline.replay: whole step {rep.step_energy_j:.3f} ± {rep.step_sigma_j:.3f} J in "
          f"{rep.step_time_s * 1e3:.2f} ms", flush=True)  # fmt: skip
    out["archline_replay_step_j"] = rep.step_energy_j
    out["archline_replay_state"] = rep.state
    out["archline_replay_sum_vs_step_pct"] = rep.sum_vs_step_pct
    st = rep.state or {}
    print(f"    archline.replay: isolated groups sum to {rep.sum_vs_step_pct:+.1f} % of the step; state "
          f"non-finite at the end of {st.get('nonfinite_before_restore')} of {st.get('restores')} "
          "repetitions and measurements", flush=True)  # fmt: skip
    out["after_weights"] = _weights(model, w0["norm"])
    out["after"] = phase("after", g.replay, smp, seconds)
    with torch.no_grad():
        for t, c in zip(_tensors(model, opt), snap, strict=True):
            t.copy_(c)
    out["restored"] = phase("restored", g.replay, smp, seconds)
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < train_s:
        g.replay()
        n += 1
        if n % 50 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    print(f"    trained: {n} more all-on replays", flush=True)
    out["trained_replays"] = n
    out["trained_weights"] = _weights(model, w0["norm"])
    out["trained"] = phase("trained", g.replay, smp, seconds)
    del g, step, model, opt, snap
    torch.cuda.empty_cache()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", nargs="+", default=["resnet50", "transformer"])
    ap.add_argument("--phase-s", type=float, default=3.0)
    ap.add_argument("--train-s", type=float, default=25.0)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    smp, st = open_board(a.gpu)
    out = {"board": st.get("uuid"), "workloads": [run(w, smp, a.gpu, a.phase_s, a.train_s) for w in a.workloads]}
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
