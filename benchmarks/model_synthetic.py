"""Accuracy of the energy-roofline fit on synthetic GPUs of known parameters; prints the figures (CPU only).

python benchmarks/model_synthetic.py [--seeds 500] [--noise 0.01] [--per-octave 1]

For each seed it draws a noisy sweep (1/4 … 512 flop/B, both precisions) from an H100-like
GPU with a 700 W cap, fits eq. (9), measures τ from the sweep ends, and predicts six held-out
kernels. It prints the interval coverage of each coefficient (nominal 95 %), the median
relative error of each coefficient, the median held-out energy error, the cap-aware vs
uncapped RMS near B_τ, and the time per full model build.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.roofline_synth import H100_LIKE, HELDOUT_KERNELS, sweep_intensities

from archline.model.build import build_model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=500)
    ap.add_argument("--noise", type=float, default=0.01, help="relative 1σ noise of each energy reading")
    ap.add_argument("--per-octave", type=int, default=1, help="sweep points per doubling of intensity")
    args = ap.parse_args()
    gpu = dataclasses.replace(H100_LIKE, energy_rel_sigma=args.noise)
    truth = {
        "eps_s_j": gpu.eps_flop_j["single"],
        "eps_mem_j_per_b": gpu.eps_mem_j_per_b,
        "pi0_w": gpu.pi0_w,
        "delta_d_j": gpu.eps_flop_j["double"] - gpu.eps_flop_j["single"],
    }
    intens = sweep_intensities(per_octave=args.per_octave)
    hits = dict.fromkeys(truth, 0)
    rel_err: dict[str, list[float]] = {k: [] for k in truth}
    held_t, held_p, rms_u, rms_c, b_tau_err = [], [], [], [], []
    t_build = 0.0
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        rows = gpu.sweep(rng, intens)
        held = gpu.heldout(rng, HELDOUT_KERNELS)
        t0 = time.perf_counter()
        m = build_model(rows, gpu.peaks(), held)
        t_build += time.perf_counter() - t0
        for k, v in truth.items():
            est = m.fit.estimates[k]
            hits[k] += est.contains(v)
            rel_err[k].append(abs(est.value - v) / v)
        assert m.heldout is not None
        held_t.append(m.heldout.median_abs_error_at_measured_time)
        held_p.append(m.heldout.median_abs_error_predicted_time)
        rms_u.append(np.hypot(m.capped.rms_time_uncapped, m.capped.rms_power_uncapped))
        rms_c.append(np.hypot(m.capped.rms_time_capped, m.capped.rms_power_capped))
        b_tau_err.append(abs(m.balances["single"].b_tau / gpu.params("single").b_tau - 1))
    n = args.seeds
    print(f"synthetic H100-like GPU, {len(rows)} sweep rows, energy noise {100 * args.noise:g} %, {n} seeds")
    print(f"{'coefficient':18s} {'95% CI coverage':>16s} {'median |rel err|':>17s}")
    for k in truth:
        print(f"{k:18s} {100 * hits[k] / n:15.1f}% {100 * np.median(rel_err[k]):16.2f}%")
    print(f"B_τ single median |rel err|: {100 * np.median(b_tau_err):.2f} %")
    print(f"held-out median |E err| with measured T: {100 * np.median(held_t):.2f} % (target ≤ 10 %)")
    print(f"held-out median |E err| with predicted T: {100 * np.median(held_p):.2f} % (target ≤ 10 %)")
    print(
        f"near B_τ, RMS of (time, power) rel. residuals: uncapped {100 * np.median(rms_u):.1f} %, "
        f"cap-aware {100 * np.median(rms_c):.1f} %"
    )
    print(f"model build: {1e3 * t_build / n:.1f} ms per sweep")
    return 0


if __name__ == "__main__":
    sys.exit(main())
