"""How windows are grouped for estimation: layers of non-overlapping windows, clusters that share
readings (cut into segments, weak windows folded into gaps), and which part of a window is observed."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from archline.measurement.deconvolve import _MIN_SEEN, Series, Solution, build_segments
from archline.measurement.sensor_model import SensorModel

__all__ = ["ClusterPlan", "clusters", "fold_weak", "layers", "observed", "plan_cluster"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
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


@dataclass(frozen=True)
class ClusterPlan:
    """A cluster of windows cut into segments: ``cl`` its windows by start, ``cols`` the column (tied
    group) of each, ``n_groups`` the window columns (gaps come after them); ``weak`` the groups the
    readings barely see (known once solved), folded into the gap before them in ``seg_c``."""

    cl: list[int]
    cols: I64
    n_groups: int
    seg_a: F64
    seg_b: F64
    seg_c: I64
    n_cols: int
    weak: NDArray[np.bool_]


def plan_cluster(cl: list[int], starts: F64, ends: F64, glabels: list[str], chunk_s: float) -> ClusterPlan:
    """The windows ``cl`` by start, one column per tied group (``glabels``), cut into segments (gaps in
    chunks of at most ``chunk_s``, see :func:`~archline.measurement.deconvolve.build_segments`)."""
    cl = sorted(cl, key=lambda i: starts[i])
    gid: dict[str, int] = {}
    cols = np.array([gid.setdefault(glabels[i], len(gid)) for i in cl], dtype=np.int64)
    seg_a, seg_b, seg_c = build_segments(starts[cl], ends[cl], cols, chunk_s)
    return ClusterPlan(cl, cols, len(gid), seg_a, seg_b, seg_c, int(seg_c.max()) + 1, np.zeros(len(gid), bool))


def fold_weak(plan: ClusterPlan, sol: Solution) -> ClusterPlan:
    """A window the readings barely see cannot be told from the gap around it: fold it into the gap
    before it, so it cannot distort its neighbours (it is reported unresolved)."""
    seg_a, seg_b, seg_c, n_groups = plan.seg_a, plan.seg_b, plan.seg_c, plan.n_groups
    length = np.bincount(seg_c, weights=np.minimum(seg_b, 1e8) - np.maximum(seg_a, -1e8), minlength=plan.n_cols)
    weak = np.zeros(n_groups, bool)
    for g in range(n_groups):
        weak[g] = (
            (not sol.identifiable[g]) or sol.seen_s[g] < _MIN_SEEN * length[g] or sol.info_s[g] < _MIN_SEEN * length[g]
        )
    if not weak.any():
        return plan
    seg_c = seg_c.copy()
    for k in range(seg_c.size):
        if seg_c[k] < n_groups and weak[seg_c[k]]:
            j = k - 1
            while j > 0 and seg_c[j] < n_groups and weak[seg_c[j]]:
                j -= 1
            seg_c[k] = seg_c[j]
    return replace(plan, seg_c=seg_c, weak=weak)
