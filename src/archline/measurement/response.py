"""The sensor response model: what a reading shows when the true power is one unit over [a, b]."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["kernel_support_s", "rect_response", "step_integral", "step_value"]

F64 = NDArray[np.float64]

#: A lag tail smaller than this fraction of its peak is treated as zero.
TAIL_CUTOFF = 1e-4
#: Lags shorter than this (s) are treated as none.
_MIN_LAG_S = 1e-9


def step_value(v_s: ArrayLike, lag_s: float) -> F64:
    """Output of a first-order lag (time constant ``lag_s``) ``v_s`` seconds after a unit step."""
    v = np.asarray(v_s, np.float64)
    if lag_s <= _MIN_LAG_S:
        return (v >= 0).astype(np.float64)
    return np.where(v > 0, -np.expm1(-np.maximum(v, 0.0) / lag_s), 0.0)


def step_integral(v_s: ArrayLike, lag_s: float) -> F64:
    """Integral of :func:`step_value` from the step to ``v_s`` (s·unit)."""
    v = np.maximum(np.asarray(v_s, np.float64), 0.0)
    if lag_s <= _MIN_LAG_S:
        return v
    return np.asarray(v + lag_s * np.expm1(-v / lag_s), np.float64)


def rect_response(
    t_s: ArrayLike,
    a_s: ArrayLike,
    b_s: ArrayLike,
    *,
    window_s: ArrayLike = 0.0,
    delay_s: float = 0.0,
    lag_s: float = 0.0,
) -> F64:
    """Reading at ``t_s`` when the true power is 1 on ``[a_s, b_s]`` and 0 elsewhere.

    The model: the true power goes through a first-order lag ``lag_s`` (Burtscher's C), and
    the reading stamped ``t`` is the mean of that over ``(t − delay_s − W, t − delay_s]``
    (``W = window_s``; 0 means an instantaneous sample). All arguments broadcast, so one call
    evaluates many (reading, segment) pairs. A reading's responses to a partition of the time
    axis sum to 1.
    """
    u = np.asarray(t_s, np.float64) - delay_s
    a = np.asarray(a_s, np.float64)
    b = np.asarray(b_s, np.float64)
    w = np.broadcast_to(
        np.asarray(window_s, np.float64), np.broadcast_shapes(u.shape, a.shape, b.shape, np.shape(window_s))
    )
    point = w <= 1e-12
    out = step_value(u - a, lag_s) - step_value(u - b, lag_s)
    if not np.all(point):
        ws = np.where(point, 1.0, w)
        avg = (
            step_integral(u - a, lag_s)
            - step_integral(u - ws - a, lag_s)
            - step_integral(u - b, lag_s)
            + step_integral(u - ws - b, lag_s)
        ) / ws
        out = np.where(point, out, avg)
    return np.asarray(out, np.float64)


def kernel_support_s(window_s: float, delay_s: float, lag_s: float, cutoff: float = TAIL_CUTOFF) -> float:
    """How far back (s) from its timestamp a reading still responds to the true power."""
    tail = lag_s * math.log(1.0 / cutoff) if lag_s > _MIN_LAG_S else 0.0
    return max(delay_s, 0.0) + max(window_s, 0.0) + tail
