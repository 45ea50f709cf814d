"""The uncertainty terms of a window's energy that the readings' misfit shows (power that moves
inside windows and gaps, which the piecewise-constant model cannot follow)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from archline.measurement.deconvolve import Series, Solution
from archline.measurement.sensor_model import SensorModel

__all__ = ["misfit_excess_w2", "misfit_variance_j2"]

F64 = NDArray[np.float64]
_TENTH = math.log(10.0)


def misfit_excess_w2(sol: Solution, series: Series, model: SensorModel, a_s: float, b_s: float) -> float:
    """Mean square (W²) of the readings' misfit around ``[a_s, b_s]`` beyond what noise explains."""
    res = sol.residual_w
    if res.size == 0:
        return 0.0
    t = series.t_s[sol.first_reading : sol.first_reading + res.size]
    lo = int(np.searchsorted(t, a_s - model.period_s + model.delay_s, side="left"))
    hi = int(np.searchsorted(t, b_s + model.mixing_s + model.period_s, side="right"))
    if hi - lo < 2:
        return 0.0
    r = res[lo:hi]
    nz = sol.residual_noise_w[lo:hi]
    return max(float(np.mean(r * r) - np.mean(nz * nz)), 0.0)


def misfit_variance_j2(sol: Solution, series: Series, model: SensorModel, a_s: float, b_s: float) -> float:
    """Variance (J²) of a window's energy from the misfit of the readings around it.

    The readings that respond to ``[a_s, b_s]`` and to its edges are compared with the fit; the
    scatter beyond what the reading noise explains, ``σ_m``, is power moving on a time scale the
    model does not resolve (a training loop's 20–40 ms steps inside a 1 s window, a kernel whose
    power drifts). It costs energy in two ways:

    * at each edge, the reading that straddles it mixes power from both sides in proportions
      the model gets from levels, not from the real power there: ``(σ_m · W)²`` per edge, W the
      update period P (the time one reading stands for) or the averaging window if longer (the
      readings show the power's moves shrunk by √(W/P) and the solve undoes that over W/P
      readings), two periods for a Burtscher-corrected lag;
    * inside the window, each reading samples the moving power: that part is charged where
      the noise is, by propagating ``σ_y² + σ_m²`` instead of ``σ_y²`` through the solve (the
      caller scales the noise variance by ``1 + σ_m²/σ_y²``, see :func:`misfit_excess_w2`).
    """
    excess2 = misfit_excess_w2(sol, series, model, a_s, b_s)
    if excess2 == 0.0:
        return 0.0
    # A reading averaging W > P shows the power's moves shrunk by √(W/P), and the solve undoes
    # that over W/P readings: the edge's share of them spans W of time.
    w = model.period_s if model.window_s is None else max(model.window_s, model.period_s)
    if model.correct_lag:
        w = max(w, 2 * model.period_s)  # Burtscher's correction differences over two periods
    var = 2.0 * excess2 * w * w
    return float(var)
