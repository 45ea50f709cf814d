"""Estimates with standard errors and Student-t intervals, and first-order (delta-method) error propagation."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats

__all__ = ["DEFAULT_CONFIDENCE", "Estimate", "propagate", "t_quantile"]

#: Two-sided confidence level of every interval archline's model reports.
DEFAULT_CONFIDENCE = 0.95


def t_quantile(confidence: float, dof: int) -> float:
    """The two-sided Student-t multiplier for ``confidence`` with ``dof`` degrees of freedom.

    With ``dof`` < 1 there is no estimate of the spread, so the multiplier is infinite.
    """
    if dof < 1:
        return math.inf
    return float(stats.t.ppf(0.5 + confidence / 2.0, dof))


@dataclass(frozen=True)
class Estimate:
    """A value with its 1-sigma standard error and a two-sided confidence interval (same unit)."""

    value: float
    stderr: float
    ci_low: float
    ci_high: float

    @classmethod
    def from_stderr(cls, value: float, stderr: float, multiplier: float) -> Estimate:
        """An interval ``value ± multiplier·stderr`` (``multiplier`` from :func:`t_quantile`)."""
        half = multiplier * stderr
        return cls(float(value), float(stderr), float(value - half), float(value + half))

    @classmethod
    def exact(cls, value: float) -> Estimate:
        """A value with no uncertainty attached (NaN stderr and interval)."""
        return cls(float(value), math.nan, math.nan, math.nan)

    def contains(self, x: float) -> bool:
        """True if ``x`` lies inside the confidence interval."""
        return self.ci_low <= x <= self.ci_high


def propagate(
    fn: Callable[[NDArray[np.float64]], float],
    theta: Sequence[float] | NDArray[np.float64],
    covariance: Sequence[Sequence[float]] | NDArray[np.float64],
) -> tuple[float, float]:
    """``fn(theta)`` and its 1-sigma error from ``covariance`` by the delta method (central differences).

    Steps are a hundredth of each parameter's own standard error, so a kink in ``fn`` (the
    roofline's max, the power cap) farther away than that does not disturb the slope.
    """
    x = np.asarray(theta, dtype=float)
    cov = np.asarray(covariance, dtype=float)
    value = float(fn(x))
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    grad = np.zeros_like(x)
    for i in range(x.size):
        h = sd[i] * 1e-2
        if not (h > 0.0 and math.isfinite(h)):
            continue
        up, dn = x.copy(), x.copy()
        up[i] += h
        dn[i] -= h
        grad[i] = (fn(up) - fn(dn)) / (2.0 * h)
    var = float(grad @ cov @ grad)
    return value, math.sqrt(var) if var > 0.0 else 0.0
