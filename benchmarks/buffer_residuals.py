"""The power buffer's fit on one attribution run: what its residuals look like, and how they move with the sensor model.

    python benchmarks/buffer_residuals.py RUN_DIR [--cupti FILE.bin[.gz|.xz]] [--cut-s S] [--scan]
    python benchmarks/buffer_residuals.py --alternation PATH [PATH ...]

Post hoc diagnosis (session 26), no GPU needed. It builds the fit ``archline run`` makes on the power buffer's
readings (each reading's response to each kernel name's busy time through the buffer's sensor model, taken as
``benchmarks/redo_attribution.py`` takes it) and fits it by plain least squares, with no priors, so that what is left
is what per-name constant powers cannot explain. Prints the fit's rms residual, the residuals' autocorrelation at
lags of 1, 2, 3, 5, 10, 25, 50 and 100 readings, the spread of their means over blocks of 50 readings (1 s)
against what independent readings would give, their largest periodogram peak above 2 Hz (readings taken as evenly
spaced by the buffer's period) beside where the step shows (its rarest kernel's calls' median interval, aliased by
the readings), and the long-run variance ratio by which the priors' calibration
inflates a window's noise (``prior_fit.window_noise_var``). A steady loop whose power profile per step the model
reproduces leaves residuals near white; a profile it misses leaves them periodic with the step. ``--scan``: the rms
over a grid of the model's delay (−2 … +10 ms) and lag (2, 7, the model's own, 25, 40 ms), whether another sensor
model fits better.
``--cut-s``: the program's last S seconds dropped first (as ``redo_attribution.py --cut-s``).
``--alternation`` (session 27): only how much the buffer's readings alternate from one to the next where the GPU is
busy and where it idles (:func:`alternation`), for every recording under the paths given.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

HERE = Path(__file__).resolve().parent
LAGS = (1, 2, 3, 5, 10, 25, 50, 100)
BLOCK = 50
F64 = NDArray[np.float64]


def ols_residuals(x: F64, y: F64) -> F64:
    """Least-squares residuals of ``y`` on the columns of ``x`` that hold any response."""
    active = np.nonzero(np.abs(x).sum(axis=0) > 0)[0]
    xa = x[:, active]
    beta, *_ = np.linalg.lstsq(xa, y, rcond=None)
    return np.asarray(y - xa @ beta, np.float64)


def residual_structure(r: F64, lags: Sequence[int] = LAGS, block: int = BLOCK) -> dict[str, Any]:
    """The residuals' rms, autocorrelation at ``lags`` (readings) and the sd of block means against independent."""
    r = np.asarray(r, np.float64)
    c = r - r.mean()
    den = float(np.dot(c, c))
    ac = {k: (float(np.dot(c[:-k], c[k:]) / den) if 0 < k < c.size and den > 0 else float("nan")) for k in lags}
    nb = c.size // block
    means = c[: nb * block].reshape(nb, block).mean(axis=1) if nb >= 2 else np.zeros(0)
    return {
        "n": int(r.size),
        "rms_w": float(np.sqrt(np.mean(r**2))) if r.size else float("nan"),
        "autocorr": ac,
        "block_sd_w": float(means.std()) if means.size else float("nan"),
        "block_sd_independent_w": float(c.std() / np.sqrt(block)) if r.size else float("nan"),
    }


def spectral_peak(r: F64, period_s: float, min_hz: float = 2.0) -> tuple[float, float]:
    """The frequency (Hz) of the residuals' largest periodogram peak above ``min_hz`` and the share of their variance
    above ``min_hz`` within ±0.5 Hz of it (readings taken as evenly spaced ``period_s`` apart)."""
    c = np.asarray(r, np.float64) - float(np.mean(r))
    if c.size < 16 or not period_s > 0:
        return float("nan"), float("nan")
    power = np.abs(np.fft.rfft(c)) ** 2
    freq = np.fft.rfftfreq(c.size, d=period_s)
    above = freq >= min_hz
    if not above.any() or power[above].sum() <= 0:
        return float("nan"), float("nan")
    peak = float(freq[above][int(np.argmax(power[above]))])
    near = above & (np.abs(freq - peak) <= 0.5)
    return peak, float(power[near].sum() / power[above].sum())


def step_period(names: Sequence[str], starts: Sequence[float], span_s: float) -> tuple[str, float] | None:
    """A steady loop's step (s): the median interval between the calls of its rarest kernel name that still runs at
    least once a second (once a step, in a training loop), with that name; None without one."""
    by: dict[str, list[float]] = {}
    for n, t in zip(names, starts, strict=True):
        by.setdefault(n, []).append(t)
    often = [(len(v), n) for n, v in by.items() if len(v) >= max(span_s, 3.0)]
    if not often:
        return None
    _, name = min(often)
    return name, float(np.median(np.diff(np.sort(np.asarray(by[name], np.float64)))))


def alias_hz(f_hz: float, period_s: float) -> float:
    """Where a frequency ``f_hz`` shows in readings taken every ``period_s`` (folded into 0 … the Nyquist)."""
    fs = 1.0 / period_s
    return float(abs(f_hz - fs * round(f_hz / fs)))


def busy_share(intervals: Sequence[tuple[float, float]], skip: float = 0.1) -> tuple[float, float]:
    """The share of time some kernel runs (their union) from the start of the kernels past the first ``skip`` of them
    (the program's start-up) to the last one's end, and that span (s)."""
    iv = sorted(intervals)
    if len(iv) < 2:
        return float("nan"), 0.0
    iv = iv[int(len(iv) * skip) :]
    t0, t1 = iv[0][0], max(b for _, b in iv)
    busy, cur_s, cur_e = 0.0, iv[0][0], iv[0][1]
    for a, b in iv[1:]:
        if a > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    busy += cur_e - cur_s
    return (busy / (t1 - t0) if t1 > t0 else float("nan")), t1 - t0


def alternation(t_s: F64, value: F64, *, detrend: int = 9, block: int = 25) -> dict[str, dict[str, float]]:
    """How much the readings alternate from one to the next, where the GPU is busy and where it idles (session 27).

    Each reading less the mean of its ``detrend`` neighbours (itself among them), times ``(−1)^k``, averaged over
    ``block`` readings (0.5 s at 20 ms): the amplitude of an alternation whose phase holds over the block (RMS, W,
    corrected for the part of it the detrend takes), beside what the
    same average of noise alone would give (the detrended readings' sd / √block), and the lag-1 and lag-2
    autocorrelation of the detrended readings. Busy: a ``block``-reading mean in the top 30 % of the range between
    the 5th and 95th percentiles of those means; idle: in the bottom 10 %; each with its whole block in that state.
    Repeats (a reading equal to the previous one within 5 ms) are dropped first. A stretch with fewer than 100
    readings is left out."""
    from scipy.ndimage import binary_erosion

    t = np.asarray(t_s, np.float64)
    v = np.asarray(value, np.float64)
    if v.size > 1:
        keep = np.concatenate([[True], ~((np.diff(v) == 0) & (np.diff(t) < 0.005))])
        t, v = t[keep], v[keep]
    out: dict[str, dict[str, float]] = {}
    if v.size < 4 * block:
        return out
    smooth = np.convolve(v, np.ones(block) / block, "same")
    lo, hi = np.percentile(smooth, [5, 95])
    c = v - np.convolve(v, np.ones(detrend) / detrend, "same")
    # an alternation (−1)^k keeps (detrend − 1) / detrend of itself through the detrend (an odd number of readings)
    demod = np.convolve(c * (-1.0) ** np.arange(v.size), np.ones(block) / block, "same") * detrend / (detrend - 1)
    inner = (np.arange(v.size) >= block) & (np.arange(v.size) < v.size - block)
    for name, sel in (("busy", smooth > lo + 0.7 * (hi - lo)), ("idle", smooth < lo + 0.1 * (hi - lo))):
        # only readings whose whole block is in the same state: a block across an edge averages both
        sel = binary_erosion(sel, structure=np.ones(2 * block + 1, bool))
        idx = np.nonzero(sel & inner)[0]
        if idx.size < 100:
            continue
        cc = c[idx]

        def ac(k: int, idx: NDArray[np.int64] = idx) -> float:
            j = idx[idx + k < v.size]
            return float(np.corrcoef(c[j], c[j + k])[0, 1])

        out[name] = {
            "n": float(idx.size),
            "mean_w": float(v[idx].mean()),
            "alternation_w": float(np.sqrt(np.mean(demod[idx] ** 2))),
            "noise_only_w": float(cc.std() / np.sqrt(block)),
            "lag1": ac(1),
            "lag2": ac(2),
        }
    return out


def alternation_table(paths: Sequence[Path]) -> list[str]:
    """:func:`alternation` of the power buffer of each recording (``raw/recording.npz``, or a run directory holding
    one, searched below a folder), one line each; unreadable ones are named."""
    import json

    lines = []
    strong: list[str] = []
    busy_n = 0
    files: list[Path] = []
    for p in paths:
        files += [p] if p.is_file() else sorted(p.glob("**/raw/recording.npz"))
    for f in files:
        try:
            z = np.load(f)
            meta = json.loads(bytes(z["recording.json"]).decode())
            idx = [s["index"] for s in meta["sources"] if s["source"] == "nvml.buffer"]
            t, v = (z[f"t/{idx[0]}"], z[f"v/{idx[0]}"]) if idx else (np.zeros(0), np.zeros(0))
        except (OSError, KeyError, ValueError) as exc:
            lines.append(f"{f}: cannot read ({exc})")
            continue
        a = alternation(t, v)
        if "busy" in a:
            busy_n += 1
            if a["busy"]["alternation_w"] > 2.0 * a["busy"]["noise_only_w"]:
                strong.append(str(f.parent.parent))
        cells = []
        for k in ("busy", "idle"):
            x = a.get(k)
            cells.append(
                f"{k} —"
                if x is None
                else f"{k} {x['mean_w']:.0f} W: alternation {x['alternation_w']:.1f} W (noise alone "
                f"{x['noise_only_w']:.1f} W), lag 1 {x['lag1']:+.2f}, lag 2 {x['lag2']:+.2f}"
            )
        lines.append(f"{f.parent.parent}: " + "; ".join(cells))
    lines.append(
        f"busy alternation above twice what noise alone gives: {len(strong)} of {busy_n} recordings with a busy stretch"
        + (f" ({', '.join(strong)})" if strong else "")
    )
    return lines


def _load(d: Path, cupti: list[Path], cut_s: float) -> tuple[Any, Any, Any, tuple[str, float] | None]:
    """The run's design, span and buffer model, as ``archline run`` built them (the buffer's readings included), and
    its step; bad input is a one-line ``SystemExit``."""
    sys.path.insert(0, str(HERE))
    from redo_attribution import buffer_model_choice, cut_inputs, open_run

    from archline.errors import ArchlineError
    from archline.measurement.attribute import attribution as att

    manifest = open_run(d, cupti)
    try:
        model = buffer_model_choice(manifest).model
    except ArchlineError as exc:
        raise SystemExit(f"{d}: no sensor model for the power buffer ({exc})") from None
    rec, acts, span, traced = cut_inputs(d, cut_s)
    opts = att.AttributionOptions(buffer_model=model)
    s, design, _buf, _long = att._span(rec, acts, span, traced, opts, [])
    if s.integral is None:
        raise SystemExit(f"{d}: the run recorded no power buffer")
    kernels = [r for r in acts if r.kind == "kernel"]
    step = step_period([r.name for r in kernels], [r.start_s for r in kernels], span[1] - span[0])
    share, over = busy_share([(r.start_s, r.end_s) for r in kernels])
    print(f"kernels busy {100 * share:.1f} % of the {over:.1f} s after the first tenth of them (the start-up)")
    return design, s, model, step


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, nargs="+", help="one run directory (with --alternation: any number)")
    ap.add_argument("--cupti", type=Path, nargs="*", default=[], help="raw CUPTI trace(s), .bin, .bin.gz or .bin.xz")
    ap.add_argument("--cut-s", type=float, default=0.0, help="drop the program's last CUT_S seconds first")
    ap.add_argument("--scan", action="store_true", help="the rms over a grid of the model's delay and lag")
    ap.add_argument(
        "--alternation",
        action="store_true",
        help="only how much the buffer's readings alternate, busy against idle, of every recording under the paths",
    )
    a = ap.parse_args(argv)
    if a.alternation:
        for line in alternation_table(a.run_dir):
            print(line)
        return 0
    if len(a.run_dir) != 1:
        print("one run directory (several only with --alternation)", file=sys.stderr)
        return 2
    a.run_dir = a.run_dir[0]
    if not (a.run_dir / "manifest.json").is_file():
        print(f"{a.run_dir / 'manifest.json'}: no such file (not a run directory)", file=sys.stderr)
        return 2
    from archline.measurement.attribute.buffer_fit import buffer_design
    from archline.measurement.attribute.prior_fit import _long_run_ratio

    try:
        design, s, model, step = _load(a.run_dir, list(a.cupti), a.cut_s)
    except SystemExit as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(f"buffer model: delay {model.delay_s * 1e3:.1f} ms, lag {model.lag_s * 1e3:.1f} ms, "
          f"period {model.period_s * 1e3:.1f} ms")  # fmt: skip
    x, y = buffer_design(design, s.integral, s.scale, s.kept, model=model)
    res = ols_residuals(x, y)
    st = residual_structure(res)
    ac = ", ".join(f"{k}: {v:+.3f}" for k, v in st["autocorr"].items())
    print(f"fit without priors on {st['n']} buffer readings: rms residual {st['rms_w']:.2f} W")
    print(f"  autocorrelation by lag (readings) {ac}")
    print(f"  1 s block means: sd {st['block_sd_w']:.2f} W, {st['block_sd_independent_w']:.2f} W if independent")
    hz, share = spectral_peak(res, model.period_s)
    print(f"  residuals' largest peak above 2 Hz: {hz:.2f} Hz ({1e3 / hz:.1f} ms), {100 * share:.0f} % of their "
          "variance above 2 Hz within ±0.5 Hz of it")  # fmt: skip
    if step is not None:
        name, t_step = step
        seen = alias_hz(1.0 / t_step, model.period_s)
        print(f"  the step: {1e3 * t_step:.2f} ms (the median interval of {name[:60]}'s calls), seen at "
              f"{seen:.2f} Hz in readings every {1e3 * model.period_s:.2f} ms")  # fmt: skip
    # what the priors' calibration multiplies a window's noise variance by (prior_fit.window_noise_var)
    print(f"  long-run variance ratio (Bartlett, as the priors' calibration inflates σ²): {_long_run_ratio(res):.3f}")
    if a.scan:
        for lag in (0.002, 0.007, model.lag_s, 0.025, 0.040):
            cells = []
            for delay in np.arange(-0.002, 0.0101, 0.003):
                m = replace(model, delay_s=float(delay), lag_s=float(lag))
                xs, ys = buffer_design(design, s.integral, s.scale, s.kept, model=m)
                rms = float(np.sqrt(np.mean(ols_residuals(xs, ys) ** 2)))
                cells.append(f"{delay * 1e3:+.0f} ms {rms:.2f} W")
            print(f"  lag {lag * 1e3:4.1f} ms, by delay: " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
