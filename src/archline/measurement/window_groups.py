"""How windows are grouped for estimation: layers of non-overlapping windows, clusters that
share readings, and which part of a window the readings observe at all."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from archline.measurement.deconvolve import Series
from archline.measurement.sensor_model import SensorModel

__all__ = ["clusters", "layers", "observed"]

F64 = NDArray[np.float64]
_TENTH = math.log(10.0)


def layers(starts: F64, ends: F64) -> list[list[int]]:
    """Split windows into layers of non-overlapping ones (nested or overlapping windows are
    estimated in separate layers)."""
    layers: list[list[int]] = []
    last_end: list[float] = []
    for i in np.argsort(starts, kind="stable"):
        for li, e in enumerate(last_end):
            if starts[i] >= e:
                layers[li].append(int(i))
                last_end[li] = float(ends[i])
                break
        else:
            layers.append([int(i)])
            last_end.append(float(ends[i]))
    return layers


def clusters(idx: list[int], starts: F64, ends: F64, groups: list[str], reach_s: float) -> list[list[int]]:
    """Windows that share readings (closer than ``reach_s``) or a tied group are solved together."""
    parent = list(range(len(idx)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        parent[find(i)] = find(j)

    for k in range(1, len(idx)):
        if starts[idx[k]] - ends[idx[k - 1]] < reach_s:
            union(k, k - 1)
    first: dict[str, int] = {}
    for k, w in enumerate(idx):
        g = groups[w]
        if g in first:
            union(k, first[g])
        else:
            first[g] = k
    out: dict[int, list[int]] = {}
    for k, w in enumerate(idx):
        out.setdefault(find(k), []).append(w)
    return list(out.values())


def observed(series: Series, model: SensorModel, a: float, b: float) -> tuple[float, int]:
    """Share of ``[a, b]`` that some reading responds to by >= 10 % of its peak, and how many do."""
    span = _TENTH * model.lag_s
    wmax = series.window_max_s
    lo = int(np.searchsorted(series.t_s, a + model.delay_s, side="left"))
    hi = int(np.searchsorted(series.t_s, b + model.delay_s + wmax + span, side="right"))
    if hi <= lo:
        return 0.0, 0
    end = series.t_s[lo:hi] - model.delay_s
    start = end - series.window_s[lo:hi] - span
    s = np.clip(start, a, b)
    e = np.clip(end, a, b)
    hit = e > s
    n = int(np.sum((end >= a) & (start <= b)))
    if not hit.any():
        return 0.0, n
    s, e = s[hit], e[hit]
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    prev = np.concatenate([[a], reach[:-1]])
    covered = float(np.sum(np.clip(e - np.maximum(s, prev), 0.0, None)))
    return min(covered / (b - a), 1.0), n
