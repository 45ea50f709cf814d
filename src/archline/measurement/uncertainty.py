"""The uncertainty terms of a window's energy that the readings' misfit shows (power that moves
inside windows and gaps, which the piecewise-constant model cannot follow)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from archline.measurement.deconvolve import Series, Solution
from archline.measurement.sensor_model import SensorModel

__all__ = ["misfit_variance_j2"]

F64 = NDArray[np.float64]
_TENTH = math.log(10.0)


def misfit_variance_j2(sol: Solution, series: Series, model: SensorModel, a_s: float, b_s: float) -> float:
    """Variance (J²) of a window's energy from the misfit of the readings around it.

    The readings that respond to ``[a_s, b_s]`` and to its edges are compared with the fit; the
    scatter beyond what the reading noise explains, ``σ_m``, is power moving on a time scale the
    model does not resolve (a training loop's 20–40 ms steps inside a 1 s window, a kernel whose
    power drifts). It costs energy in two ways:

    * at each edge, the reading that straddles it mixes power from both sides in proportions
      the model gets from levels, not from the real power there: ``(σ_m · P)²`` per edge, P the
      update period (the time one reading stands for);
    * inside the window, unless the readings tile the timeline with their averages (energy is then
      conserved reading by reading), each reading samples the moving power: the window's mean
      is off by ``σ_m / √n`` for n readings, i.e. ``(σ_m · d)² / n`` J² for duration d.
    """
    res = sol.residual_w
    if res.size == 0:
        return 0.0
    t = series.t_s[sol.first_reading : sol.first_reading + res.size]
    span = model.mixing_s + model.period_s
    lo = int(np.searchsorted(t, a_s - model.period_s + model.delay_s, side="left"))
    hi = int(np.searchsorted(t, b_s + span, side="right"))
    if hi - lo < 2:
        return 0.0
    r = res[lo:hi]
    nz = sol.residual_noise_w[lo:hi]
    excess2 = max(float(np.mean(r * r) - np.mean(nz * nz)), 0.0)
    if excess2 == 0.0:
        return 0.0
    d = b_s - a_s
    var = 2.0 * excess2 * model.period_s**2
    tiles = model.window_s is None and model.lag_s <= 0 and model.identified
    if not tiles:
        inside = int(np.sum((t >= a_s + model.delay_s) & (t <= b_s + model.delay_s + span)))
        var += excess2 * d * d / max(inside, 1)
    return float(var)
