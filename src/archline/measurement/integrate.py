"""Energy integrals of a power series over time windows, always with the real timestamps."""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["Rule", "cumulative_j", "integrate_j", "integrate_windows_j"]

F64 = NDArray[np.float64]

#: ``linear``: trapezoid between readings (a sampled instantaneous power);
#: ``hold-back``: each reading is the mean over the interval since the previous one
#: (an averaging sensor stamped at the end of its period);
#: ``hold-forward``: each reading holds until the next one (a polled value).
Rule = Literal["linear", "hold-back", "hold-forward"]


def cumulative_j(t_s: F64, power_w: F64, x_s: ArrayLike, rule: Rule = "linear") -> F64:
    """Energy (J) from the first reading to each ``x_s``.

    Readings are never assumed equally spaced. Before the first reading and after the last
    the power is held at the end values, so windows that reach slightly past the data get the
    nearest reading rather than zero; callers check coverage separately.
    """
    x = np.asarray(x_s, np.float64)
    n = t_s.size
    if n == 0:
        return np.zeros_like(x)
    if n == 1:
        return np.asarray((x - t_s[0]) * power_w[0], np.float64)
    dt = np.diff(t_s)
    if rule == "linear":
        seg = 0.5 * (power_w[:-1] + power_w[1:]) * dt
    elif rule == "hold-back":
        seg = power_w[1:] * dt
    else:
        seg = power_w[:-1] * dt
    base = np.concatenate([[0.0], np.cumsum(seg)])
    k = np.clip(np.searchsorted(t_s, x, side="right") - 1, 0, n - 1)
    u = x - t_s[k]
    inside = (k < n - 1) & (u >= 0)
    kk = np.minimum(k, n - 2)
    if rule == "linear":
        slope = (power_w[kk + 1] - power_w[kk]) / np.where(dt[kk] > 0, dt[kk], 1.0)
        part = np.where(inside, u * (power_w[kk] + 0.5 * slope * u), u * power_w[k])
    elif rule == "hold-back":
        part = np.where(inside, u * power_w[kk + 1], u * power_w[k])
    else:
        part = u * power_w[k]
    # Before the first reading, hold the first value backwards.
    before = x < t_s[0]
    out = base[k] + part
    out = np.where(before, (x - t_s[0]) * power_w[0], out)
    return np.asarray(out, np.float64)


def integrate_j(t_s: F64, power_w: F64, a_s: float, b_s: float, rule: Rule = "linear") -> float:
    """Energy (J) of the power series over ``[a_s, b_s]``."""
    c = cumulative_j(t_s, power_w, np.array([a_s, b_s]), rule)
    return float(c[1] - c[0])


def integrate_windows_j(t_s: F64, power_w: F64, a_s: ArrayLike, b_s: ArrayLike, rule: Rule = "linear") -> F64:
    """Energies (J) over many windows at once, in O(N + W log N)."""
    a = np.asarray(a_s, np.float64)
    b = np.asarray(b_s, np.float64)
    return np.asarray(cumulative_j(t_s, power_w, b, rule) - cumulative_j(t_s, power_w, a, rule), np.float64)
