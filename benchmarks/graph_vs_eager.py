"""Energy of one training step run eagerly against the same step replayed as a CUDA graph, on one GPU.

    python benchmarks/graph_vs_eager.py [--workloads resnet50 transformer] [--phase-s 3] [--rounds 4] [--json F]

Why: graph replay (``archline.replay``) is the reference that per-kernel attribution of a real loop is
checked against. If the same kernels cost more energy when the loop launches them eagerly than when a
graph replays them, replay's energies are a biased prior for the loop. This measures it without any
tracing: eager steps and graph replays alternate (A B A B …) on the same model and tensors (the graph is
captured from the eager step, so both update the same weights), each phase timed and read from the
board's energy counter. Per phase it prints J/step, ms/step, mean W, and the SM clock and temperature
sampled during it. Then, per workload:

* the eager − graph energy per step, and the power the extra time would need to draw to explain it all
  (``(E_eager − E_graph)/(T_eager − T_graph)``); an idle board draws about 120 W on an H100;
* a third phase ``graph+gap``: the graph replayed with the host waiting after each replay until the
  eager step's time has passed, so the GPU idles in the same share as eagerly (gaps as long as the eager
  loop's, but in one piece per step).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "workloads"))


def make_step(name: str) -> Any:
    if name == "resnet50":
        from train_resnet import make_step as resnet_step

        return resnet_step("cuda", batch=64)
    from transformer_step import make_step as transformer_step

    return transformer_step("cuda")


class Sampler:
    """The board's energy counter (J), SM clock (MHz) and temperature (°C), through archline's NVML layer.

    The clock and temperature are polled every 20 ms on a thread while a phase runs.
    """

    def __init__(self, gpu: int) -> None:
        from archline.hw.nvml import open_sources

        self.energy, self.clock, self.temp = open_sources(gpu, ["nvml.energy", "nvml.sm_clock", "nvml.temperature"])
        self.rows: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._t: threading.Thread | None = None

    def joules(self) -> float:
        return float(self.energy.read().value[-1])

    def _run(self) -> None:
        while not self._stop.is_set():
            self.rows.append((float(self.clock.read().value[-1]), float(self.temp.read().value[-1])))
            time.sleep(0.02)

    def __enter__(self) -> Sampler:
        self.rows, self._stop = [], threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._t is not None:
            self._t.join()


def phase(kind: str, run_one: Any, smp: Sampler, seconds: float, pad_s: float = 0.0) -> dict[str, Any]:
    import torch

    torch.cuda.synchronize()
    with smp:
        e0 = smp.joules()
        t0 = time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < seconds:
            ts = time.perf_counter()
            run_one()
            n += 1
            if pad_s > 0:
                torch.cuda.synchronize()
                while time.perf_counter() - ts < pad_s:
                    pass
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        e1 = smp.joules()
    clk = [r[0] for r in smp.rows]
    tmp = [r[1] for r in smp.rows]
    out = {"phase": kind, "steps": n, "j_per_step": (e1 - e0) / n, "ms_per_step": (t1 - t0) / n * 1e3,
           "mean_w": (e1 - e0) / (t1 - t0), "sm_mhz_median": statistics.median(clk) if clk else None,
           "temp_c_median": statistics.median(tmp) if tmp else None}  # fmt: skip
    print(f"  {kind:10s} {n:5d} steps  {out['j_per_step']:7.3f} J/step  {out['ms_per_step']:7.2f} ms/step  "
          f"{out['mean_w']:5.0f} W  SM {out['sm_mhz_median']:.0f} MHz  {out['temp_c_median']:.0f} °C",
          flush=True)  # fmt: skip
    return out


def capture(step: Any) -> Any:
    """The step warmed up on a side stream and captured as a PyTorch CUDA graph (as PyTorch documents)."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(5):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    return g


def open_board(gpu: int) -> tuple[Sampler, dict[str, Any]]:
    """Select ``gpu``, print its name, UUID prefix and limit; its sampler and static facts."""
    import torch

    from archline.hw.nvml import device_static

    torch.cuda.set_device(gpu)
    st = device_static(gpu)
    print(f"board: {st.get('name')} {str(st.get('uuid'))[:12]}, "
          f"default power limit {st.get('default_power_limit_w')} W", flush=True)  # fmt: skip
    return Sampler(gpu), st


def run(name: str, smp: Sampler, seconds: float, rounds: int, gpu: int) -> dict[str, Any]:
    import torch

    print(f"== {name}", flush=True)
    step = make_step(name)
    g = capture(step)
    for _ in range(3):
        step()
        g.replay()
    phases: list[dict[str, Any]] = []
    for _ in range(rounds):
        phases.append(phase("eager", step, smp, seconds))
        phases.append(phase("graph", g.replay, smp, seconds))
    t_eager = statistics.median(p["ms_per_step"] for p in phases if p["phase"] == "eager") / 1e3
    phases.append(phase("graph+gap", g.replay, smp, seconds, pad_s=t_eager))
    # The same two calls through archline's measure_callable (what archline.replay uses): its buffer
    # estimate and its counter cross-check, against the plain counter phases above.
    from archline.measurement.api import measure_callable

    mc = {}
    for kind, fn in (("graph", g.replay), ("eager", step)):
        m = measure_callable(fn, gpu=gpu, sync=torch.cuda.synchronize, max_total_s=20.0)
        mc[kind] = {"energy_j": m.energy_j, "sigma_j": m.energy_uncertainty_j, "counter_j": m.counter_energy_j,
                    "time_s": m.time_s, "calls": m.calls, "repetitions": m.repetitions,
                    "calls_per_repetition": m.calls_per_repetition, "sensor_model": m.sensor_model}  # fmt: skip
        cj = f"{m.counter_energy_j:.3f} J" if m.counter_energy_j is not None else "—"
        print(f"  measure_callable({kind}): {m.energy_j:.3f} ± {m.energy_uncertainty_j:.3f} J (buffer), counter {cj}, "
              f"{m.time_s * 1e3:.2f} ms, {m.repetitions} × {m.calls_per_repetition} calls; {m.sensor_model}",
              flush=True)  # fmt: skip
    med = {k: statistics.median(p["j_per_step"] for p in phases if p["phase"] == k) for k in ("eager", "graph")}
    tm = {k: statistics.median(p["ms_per_step"] for p in phases if p["phase"] == k) / 1e3 for k in ("eager", "graph")}
    extra_j = med["eager"] - med["graph"]
    dt = tm["eager"] - tm["graph"]
    summary = {"workload": name, "eager_j": med["eager"], "graph_j": med["graph"], "eager_s": tm["eager"],
               "graph_s": tm["graph"], "eager_over_graph_pct": 100 * extra_j / med["graph"],
               "power_to_explain_w": extra_j / dt if dt > 1e-6 else None,
               "graph_gap_j": phases[-1]["j_per_step"], "measure_callable": mc, "phases": phases}  # fmt: skip
    p_exp = f"{summary['power_to_explain_w']:.0f} W" if summary["power_to_explain_w"] is not None else "—"
    print(f"  eager {med['eager']:.3f} J in {tm['eager'] * 1e3:.2f} ms against graph {med['graph']:.3f} J in "
          f"{tm['graph'] * 1e3:.2f} ms: {summary['eager_over_graph_pct']:+.1f} %;\n  the extra time would have "
          f"to draw {p_exp} to explain it; graph with the eager step's idle {summary['graph_gap_j']:.3f} J",
          flush=True)  # fmt: skip
    del g, step
    torch.cuda.empty_cache()
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", nargs="+", default=["resnet50", "transformer"])
    ap.add_argument("--phase-s", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    smp, st = open_board(a.gpu)
    out = {"board": st.get("uuid"), "workloads": [run(w, smp, a.phase_s, a.rounds, a.gpu) for w in a.workloads]}
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
