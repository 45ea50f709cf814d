"""How long must a step's calls be for archline's per-kernel rows to be identifiable within ±15 %? Simulated sensors.

    python benchmarks/call_length_sim.py [--scales 0.01,0.03,0.1,0.3,1] [--seeds 3] [--first-seed 0] [--seconds 12]
        [--instance-cv 0.05] [--model exact|shipped] [--json FILE]
    python benchmarks/call_length_sim.py --summarize SAVED_OUTPUT

Session 31, on a CPU, frozen before any GPU run of its workloads (scripts/plan_s31c.sh). One transformer-like
training step, two layers: per layer forward a QKV GEMM, attention, the output projection, add + layer norm, the
feed-forward's two GEMMs with an activation between, add + layer norm; backward each GEMM twice (data and weight
gradient), attention's backward and the elementwise and norm backward kernels; then the optimizer. Each kernel's
call time at scale 1 is computed for two d = 8192 layers over 16 × 2048 tokens on an H200 at about 630 TFLOP/s (bf16)
and 4 TB/s, not measured (the GEMMs 7-28 ms, attention 5 and 12 ms, the elementwise kernels 1.5-2 ms); ``--scales``
multiplies every call time, so 0.01 puts the GEMMs at 0.07-0.28 ms, near the shipped transformer runs' calls (their
split names' classes average 4-339 µs: docs/data/split_by_length_s31.txt). Calls of a name
share a nominal power (GEMMs 620-650 W, attention 560/540, elementwise 330-350, the optimizer 300; 200 W in launch
gaps, 90 W idle); every call is drawn ±2 % in time and power, and every call's place in the step (a kernel name's
i-th call in the step, the same every step) keeps a power of its own, ``--instance-cv`` (5 %) about its name's (a GEMM
of another shape under the same name, say: on session 22's transformer run its largest cuBLAS GEMM name ran calls of
57 and 181 µs, ``benchmarks/split_by_length.py``), which per-name constant powers cannot fit; the shipped runs' buffer
residuals recur with the step (docs/attribution.md "Session 26").

The sensors: the power buffer an instantaneous sample of a first-order lag of 13.6 ms, 3.9 ms late, every 20 ms
(jitter 0.2 ms, 1 W of noise: near the top of the lags and delays of the eight shipped calibrations, 12.86-13.61 and
2.76-3.97 ms, docs/data/buffer_models_s31.txt); the energy counter every 100 ms, polled as archline polls it.
``--model exact`` fits through the sensor's own model; ``--model shipped`` through the model ``archline run`` takes on
an H200 without a calibration of its own, the shipped H200 calibration (results/h200/sensor/calibration: 13.2 ms, 3.3
ms, with its σ), as a board at the other end of that spread would be fitted. The program runs ``--seconds`` of steps
between 0.5 s of idle; ``archline.attribute``'s own fit (``attribute_energy`` with the buffer's model, no priors:
every column's prior the weak pooled one) attributes it.

Per scale and seed: the call time the kernel energy sits in (energy-weighted median, ms), the share of kernel energy
in identifiable rows within ±15 % at 95 % (issue 13's figure), the share whose 95 % interval holds its true energy,
and the energy-weighted median 95 % half-width. Planning, not a score: real programs' kernels, sensors and drifts
are not these.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: One kernel name: its call time at scale 1 (s) and nominal power (W).
KERNELS: dict[str, tuple[float, float]] = {
    "gemm_qkv": (0.021, 650.0),
    "attn_fwd": (0.005, 560.0),
    "gemm_out": (0.007, 640.0),
    "add_ln_fwd": (0.0015, 350.0),
    "gemm_ffn1": (0.028, 650.0),
    "act_fwd": (0.002, 330.0),
    "gemm_ffn2": (0.028, 650.0),
    "gemm_dgrad": (0.028, 640.0),
    "gemm_wgrad": (0.028, 620.0),
    "act_bwd": (0.002, 340.0),
    "ln_bwd": (0.002, 345.0),
    "attn_bwd": (0.012, 540.0),
    "sgd_update": (0.002, 300.0),
}
#: The dgrad/wgrad kernels' time per backward GEMM, relative to the forward GEMM they differentiate.
BACKWARD = (("gemm_ffn2", 1.0), ("gemm_ffn1", 1.0), ("gemm_out", 0.25), ("gemm_qkv", 0.75))
LAYERS = 2
GAP_S = 8e-6
GAP_W, IDLE_W = 200.0, 90.0
CALL_CV = 0.02
EPOCH_S = 1_795_000_000.0
TRUE_LAG_S, TRUE_DELAY_S = 0.0136, 0.0039
SHIPPED = Path(__file__).resolve().parents[1] / "results" / "h200" / "sensor" / "calibration" / "profiles.json"
MODELS = ("exact", "shipped")
HALF_WIDTH = 0.15


@dataclass(frozen=True)
class Call:
    name: str
    time_s: float  # at scale 1


def step_calls() -> list[Call]:
    """One step's calls in order (scale 1)."""
    out: list[Call] = []
    for _ in range(LAYERS):
        for n in ("gemm_qkv", "attn_fwd", "gemm_out", "add_ln_fwd", "gemm_ffn1", "act_fwd", "gemm_ffn2", "add_ln_fwd"):
            out.append(Call(n, KERNELS[n][0]))
    for _ in range(LAYERS):
        out.append(Call("ln_bwd", KERNELS["ln_bwd"][0]))
        for fwd, rel in BACKWARD[:2]:
            t = KERNELS[fwd][0] * rel
            out += [Call("gemm_dgrad", t), Call("gemm_wgrad", t)]
            if fwd == "gemm_ffn2":
                out.append(Call("act_bwd", KERNELS["act_bwd"][0]))
        out.append(Call("ln_bwd", KERNELS["ln_bwd"][0]))
        t = KERNELS["gemm_out"][0]
        out += [Call("gemm_dgrad", t), Call("gemm_wgrad", t), Call("attn_bwd", KERNELS["attn_bwd"][0])]
        t = KERNELS["gemm_qkv"][0]
        out += [Call("gemm_dgrad", t), Call("gemm_wgrad", t)]
    out += [Call("sgd_update", KERNELS["sgd_update"][0])] * (4 * LAYERS)
    return out


def simulate(
    scale: float, seconds: float, seed: int, instance_cv: float = 0.05
) -> tuple[Any, list[Any], tuple[float, float], dict[str, float]]:
    """The recording, the activities, the program's span and each kernel name's true energy (J)."""
    from archline.core.activity import ActivityRecord
    from archline.core.recording import Recording
    from archline.hw.simulated import PiecewisePower, SimulatedSensor, simulate_counter_polls, simulate_power

    rng = np.random.default_rng(seed)
    calls = step_calls()
    # each call's place in the step keeps its own power about its name's
    place = 1.0 + instance_cv * rng.standard_normal(len(calls))
    step_s = sum(c.time_s for c in calls) * scale
    steps = max(2, math.ceil(seconds / step_s))
    pre = post = 0.5
    n = steps * len(calls)
    names = [c.name for c in calls] * steps
    dur = np.tile([c.time_s * scale for c in calls], steps) * (1 + CALL_CV * rng.standard_normal(n))
    pw = np.tile([KERNELS[c.name][1] for c in calls] * place, steps) * (1 + CALL_CV * rng.standard_normal(n))
    gap = rng.exponential(GAP_S, n)
    start = pre + np.cumsum(gap) + np.concatenate([[0.0], np.cumsum(dur[:-1])])
    end = start + dur
    # idle, then each call's launch gap and the call, then idle: start_i - gap_i is the previous call's end
    edges = np.concatenate([[0.0], np.column_stack([start - gap, start]).ravel(), [end[-1], end[-1] + post]])
    levels = np.concatenate([[IDLE_W], np.column_stack([np.full(n, GAP_W), pw]).ravel(), [IDLE_W]])
    signal = PiecewisePower(edges + EPOCH_S, levels)
    buffer = SimulatedSensor(
        kind="lagged", period_s=0.020, window_s=0.0, lag_s=TRUE_LAG_S, delay_s=TRUE_DELAY_S, noise_w=1.0,
        jitter_s=0.0002, name="nvml.buffer",
    )  # fmt: skip
    buf = simulate_power(signal, buffer, seed=rng)
    counter = simulate_counter_polls(signal, seed=rng)
    readings = {"nvml.buffer": buf, "nvml.energy": counter}
    rec = Recording(readings, (), EPOCH_S, EPOCH_S + float(edges[-1]))
    acts = [ActivityRecord(nm, EPOCH_S + a, EPOCH_S + b) for nm, a, b in zip(names, start, end, strict=True)]
    truth: dict[str, float] = {}
    for nm, d, p in zip(names, dur, pw, strict=True):
        truth[nm] = truth.get(nm, 0.0) + float(d * p)
    return rec, acts, (EPOCH_S + pre, EPOCH_S + float(end[-1])), truth


def fit_model(which: str) -> Any:
    """The sensor model the fit takes (``--model``)."""
    from archline.measurement.sensor_model import SensorModel

    if which == "exact":
        return SensorModel(kind="lagged", period_s=0.020, window_s=0.0, lag_s=TRUE_LAG_S, delay_s=TRUE_DELAY_S)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from redo_attribution import profile_model

    return profile_model(SHIPPED)[0]


def score(
    scale: float, seconds: float, seed: int, instance_cv: float = 0.05, model: str = "exact", sensor_sigma: bool = True
) -> dict[str, Any]:
    """One simulated run attributed: the figures of the module docstring."""
    from archline.measurement.attribute.attribution import AttributionOptions, attribute_energy

    rec, acts, span, truth = simulate(scale, seconds, seed, instance_cv)
    fitted = fit_model(model)
    opts = AttributionOptions(buffer_model=fitted, sensor_sigma=sensor_sigma)
    res = attribute_energy(rec, acts, program_span=span, options=opts)
    rows = list(res.kernels)
    total = sum(r.energy_j for r in rows)
    half = {r.name: 0.5 * (r.energy_hi_j - r.energy_lo_j) / r.energy_j if r.energy_j > 0 else math.inf for r in rows}
    within = sum(r.energy_j for r in rows if r.identifiable and half[r.name] <= HALF_WIDTH)
    holds = sum(r.energy_j for r in rows if r.energy_lo_j <= truth[r.name] <= r.energy_hi_j)
    acc, median_half = 0.0, math.nan
    for r in sorted(rows, key=lambda r: half[r.name]):
        acc += r.energy_j
        if acc >= 0.5 * total:
            median_half = half[r.name]
            break
    # the call time the energy sits in: energy-weighted median over one step's calls (nominal powers)
    one = sorted((c.time_s * scale, c.time_s * KERNELS[c.name][1]) for c in step_calls())
    half_e, acc, call_ms = 0.5 * sum(e for _, e in one), 0.0, math.nan
    for t, e in one:
        acc += e
        if acc >= half_e:
            call_ms = 1e3 * t
            break
    return {
        "scale": scale,
        "seed": seed,
        "instance_cv": instance_cv,
        "model": model,
        "sensor_sigma": sensor_sigma,
        "call_ms": call_ms,
        "within_15": 100 * within / total,
        "holds_truth": 100 * holds / total,
        "median_half": 100 * median_half,
        "rows": len(rows),
        "fit_windows": str(res.extra.get("fit_windows")),
    }


def summarize(text: str) -> list[str]:
    """Per ``== …`` block of a saved output (``scripts/call_length_sim_s31.sh``'s), per scale: the range over its seeds
    of the share within ±15 %, the share whose interval holds the truth, and the median half-width."""
    out: list[str] = []
    block: dict[str, list[tuple[float, float, float]]] = {}
    name = ""

    def flush() -> None:
        if name and block:
            cells = [
                f"{sc}: {min(v[0] for v in vs):.1f}-{max(v[0] for v in vs):.1f} within, "
                f"{min(v[1] for v in vs):.1f}-{max(v[1] for v in vs):.1f} held, "
                f"{min(v[2] for v in vs):.1f}-{max(v[2] for v in vs):.1f} half"
                for sc, vs in block.items()
            ]
            out.append(f"{name}: " + "; ".join(cells) + " (%)")

    for line in text.splitlines():
        if line.startswith("== "):
            flush()
            name, block = line[3:].strip(), {}
            continue
        cells = line.replace("%", " ").split()
        if len(cells) >= 6 and cells[1].isdigit():
            block.setdefault(cells[0], []).append((float(cells[3]), float(cells[4]), float(cells[5])))
    flush()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--summarize", type=Path, help="ranges over the seeds of a saved output, per block and scale")
    ap.add_argument("--scales", default="0.01,0.03,0.1,0.3,1")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds FIRST_SEED … FIRST_SEED + SEEDS − 1")
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--instance-cv", type=float, default=0.05, help="each call place's own power spread (0: none)")
    ap.add_argument("--model", choices=MODELS, default="exact", help="the sensor model the fit takes")
    ap.add_argument("--no-sensor-sigma", action="store_true", help="leave the model's σ out of the rows (before s31)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if a.summarize is not None:
        try:
            text = a.summarize.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"{a.summarize}: cannot read ({exc})", file=sys.stderr)
            return 2
        for line in summarize(text):
            print(line)
        return 0
    try:
        scales = [float(s) for s in a.scales.split(",")]
    except ValueError:
        print(f"--scales: {a.scales!r} is not a list of numbers", file=sys.stderr)
        return 2
    if not scales or min(scales) <= 0 or a.seeds < 1 or not a.seconds > 0 or not 0 <= a.instance_cv < 0.5:
        print("--scales must be positive, --seeds at least 1, --seconds positive, --instance-cv in [0, 0.5)",
              file=sys.stderr)  # fmt: skip
        return 2
    out = []
    print("scale  seed  call ms  within ±15 %  interval holds truth  median half-width  rows  fitted on")
    for s in scales:
        for seed in range(a.first_seed, a.first_seed + a.seeds):
            r = score(s, a.seconds, seed, a.instance_cv, a.model, not a.no_sensor_sigma)
            out.append(r)
            print(f"{s:5g}  {seed:4d}  {r['call_ms']:7.2f}  {r['within_15']:11.1f} %  {r['holds_truth']:19.1f} %  "
                  f"{r['median_half']:15.1f} %  {r['rows']:4d}  {r['fit_windows']}")  # fmt: skip
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
