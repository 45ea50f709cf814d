"""Piecewise-constant deconvolution: the true power level of each window and gap from the readings.

The time around a cluster of windows is cut into segments (the windows, and the gaps in
chunks). Under the sensor model each reading is a known linear combination of the segment
levels: ``ŷ_k = Σ_v R̂_k(v)·level_v`` (``R̂`` = the response to a unit level on segment v,
through Burtscher's correction when the sensor is lagged). The levels are the weighted least
squares solution with weights ``Δ_k`` = each reading's share of the timeline, which makes the
estimate energy-conserving: ``Σ_v level_v·Q_v = Σ_k Δ_k·ŷ_k`` with ``Q_v = Σ_k Δ_k R̂_k(v)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import NDArray

from archline.measurement.lagged import correction_matrix
from archline.measurement.response import kernel_support_s, rect_response

if TYPE_CHECKING:
    from scipy import sparse

__all__ = ["Series", "Solution", "build_segments", "solve_levels"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Segment edges that stand for minus/plus infinity (relative seconds).
_FAR_S = 1e9
#: A window column the readings see with less than this share of its duration is not identifiable.
_MIN_SEEN = 0.02
#: Largest system solved with dense linear algebra.
_DENSE_MAX = 2500
#: Largest response matrix (readings × columns) held dense (8 MB), and the most multiply-adds
#: its normal equations may cost (readings × columns²); past either, sparse matrices are cheaper.
_DENSE_ELEMS = 1 << 20
_DENSE_WORK = 1 << 24


@dataclass(frozen=True)
class Series:
    """A cleaned power series on relative time (s since ``t0_s``), with its per-reading window."""

    t0_s: float
    t_s: F64
    y_w: F64
    window_s: F64
    weight_s: F64

    @property
    def range_w(self) -> tuple[float, float]:
        """The 0.1 and 99.9 percentiles of the readings (W): the power the trace spans."""
        cached = self.__dict__.get("_range")
        if cached is None:
            from archline.measurement.clean import blocks

            lo, hi = np.percentile(blocks(self.y_w), [0.1, 99.9]) if self.y_w.size else (0.0, 0.0)
            cached = (float(lo), float(hi))
            object.__setattr__(self, "_range", cached)
        return (float(cached[0]), float(cached[1]))

    @property
    def window_max_s(self) -> float:
        # Cached: queried once per window, over arrays of millions of readings.
        cached = self.__dict__.get("_wmax")
        if cached is None:
            cached = float(self.window_s.max()) if self.window_s.size else 0.0
            object.__setattr__(self, "_wmax", cached)
        return float(cached)


@dataclass(frozen=True)
class Solution:
    """Levels (W) of every column, the variance of each (W², from noise), and what was seen.

    ``seen_s`` = ``Q_v``, the weighted time for which the readings respond to column v;
    ``info_s`` = 1/(M⁻¹)_vv, the part of that which is not confounded with other columns
    (near 0 when a window cannot be told apart from its neighbours). ``residual_w`` are the
    (corrected) readings minus the fit, from reading ``first_reading`` on, and
    ``residual_noise_w`` what noise alone would leave in each (1 σ, W).
    """

    levels_w: F64
    variance_w2: F64
    seen_s: F64
    identifiable: NDArray[np.bool_]
    info_s: F64
    residual_w: F64 = field(default_factory=lambda: np.empty(0))
    residual_noise_w: F64 = field(default_factory=lambda: np.empty(0))
    first_reading: int = 0


def build_segments(
    starts_s: F64, ends_s: F64, columns: I64, chunk_s: float, pad_chunks: int = 3
) -> tuple[F64, F64, I64]:
    """Cut the time around sorted, non-overlapping windows into segments.

    Returns segment starts, ends and column ids: windows keep their given column id (>= 0);
    gaps get new ids after the largest window id. A gap longer than ``chunk_s`` is cut into
    chunks of at most ``chunk_s``, each with its own level, so the baseline may drift; the
    short gaps of a run of closely spaced windows share one level (the GPU idles the same
    between back-to-back kernels), which keeps such runs solvable. ``pad_chunks`` chunks pad
    each side, and the outermost segments reach ±infinity.
    """
    a: list[float] = []
    b: list[float] = []
    col: list[int] = []
    nxt = int(columns.max()) + 1 if columns.size else 0
    short_col = -1

    def new_col() -> int:
        nonlocal nxt
        nxt += 1
        return nxt - 1

    def gap(g0: float, g1: float) -> None:
        nonlocal short_col
        if g1 <= g0:
            return
        if g1 - g0 < chunk_s:
            if short_col < 0:
                short_col = new_col()
            a.append(g0)
            b.append(g1)
            col.append(short_col)
            return
        short_col = -1
        n = max(1, int(np.ceil((g1 - g0) / chunk_s - 1e-9)))
        cuts = np.linspace(g0, g1, n + 1)
        for i in range(n):
            a.append(float(cuts[i]))
            b.append(float(cuts[i + 1]))
            col.append(new_col())

    lead = float(starts_s[0]) - pad_chunks * chunk_s
    a.append(-_FAR_S)
    b.append(lead)
    col.append(new_col())
    gap(lead, float(starts_s[0]))
    short_col = -1
    for i in range(starts_s.size):
        a.append(float(starts_s[i]))
        b.append(float(ends_s[i]))
        col.append(int(columns[i]))
        if i + 1 < starts_s.size:
            gap(float(ends_s[i]), float(starts_s[i + 1]))
    short_col = -1
    tail = float(ends_s[-1]) + pad_chunks * chunk_s
    gap(float(ends_s[-1]), tail)
    a.append(tail)
    b.append(_FAR_S)
    col.append(new_col())
    return np.array(a), np.array(b), np.array(col, dtype=np.int64)


def _response_entries(
    s: Series, idx: I64, seg_a: F64, seg_b: F64, delay_s: float, lag_s: float
) -> tuple[I64, I64, F64]:
    """(row, segment, response) of every reading idx[row] and every segment it responds to."""
    t = s.t_s[idx]
    w = s.window_s[idx]
    back = kernel_support_s(0.0, delay_s, lag_s)
    first = np.searchsorted(seg_b, t - delay_s - w - back, side="right")
    last = np.searchsorted(seg_a, t - delay_s, side="left") - 1
    first = np.clip(first, 0, seg_a.size - 1)
    last = np.clip(last, first, seg_a.size - 1)
    count = last - first + 1
    rows = np.repeat(np.arange(idx.size), count)
    offs = np.arange(rows.size) - np.repeat(np.cumsum(count) - count, count)
    segs = np.repeat(first, count) + offs
    vals = rect_response(t[rows], seg_a[segs], seg_b[segs], window_s=w[rows], delay_s=delay_s, lag_s=lag_s)
    return rows, segs, vals


def _response_matrix(
    s: Series, idx: I64, seg_a: F64, seg_b: F64, seg_col: I64, n_cols: int, delay_s: float, lag_s: float
) -> sparse.csr_matrix:
    """R[j, c] = response of reading idx[j] to a unit level on every segment of column c."""
    from scipy import sparse

    rows, segs, vals = _response_entries(s, idx, seg_a, seg_b, delay_s, lag_s)
    m = sparse.coo_matrix((vals, (rows, seg_col[segs])), shape=(idx.size, n_cols))
    return m.tocsr()


def _response_dense(
    s: Series, idx: I64, seg_a: F64, seg_b: F64, seg_col: I64, n_cols: int, delay_s: float, lag_s: float
) -> F64:
    """:func:`_response_matrix` as a dense array (the segments of one column summed in the same order)."""
    rows, segs, vals = _response_entries(s, idx, seg_a, seg_b, delay_s, lag_s)
    flat = np.bincount(rows * n_cols + seg_col[segs], weights=vals, minlength=idx.size * n_cols)
    return np.asarray(flat.reshape(idx.size, n_cols), np.float64)


def solve_levels(
    s: Series,
    seg_a: F64,
    seg_b: F64,
    seg_col: I64,
    n_cols: int,
    *,
    delay_s: float,
    lag_s: float,
    correct: bool,
    noise_w: float,
    var_cols: I64,
    reach_s: float,
    layout: Literal["auto", "dense", "sparse"] = "auto",
) -> Solution:
    """Weighted least-squares levels of all columns, and the noise variance of ``var_cols``.

    Readings stamped within ``[first segment end, last segment start + reach_s]`` take part.
    ``layout`` holds the response matrix dense or sparse; ``auto`` holds it dense unless it is
    large (the usual cluster has a few hundred readings and a few columns, where sparse
    matrices cost more than the arithmetic). Both give the same solution.
    """
    lo_t = seg_b[0]
    hi_t = seg_a[-1] + reach_s
    i0 = int(np.searchsorted(s.t_s, lo_t, side="left"))
    i1 = int(np.searchsorted(s.t_s, hi_t, side="right"))
    if i1 - i0 < 1:
        return Solution(
            np.full(n_cols, np.nan), np.full(n_cols, np.inf), np.zeros(n_cols), np.zeros(n_cols, bool), np.zeros(n_cols)
        )
    lagged = correct and lag_s > 0
    # Burtscher's correction takes each reading's neighbours too: one more on each side.
    e0, e1 = (max(i0 - 1, 0), min(i1 + 1, s.t_s.size)) if lagged else (i0, i1)
    ext = np.arange(e0, e1, dtype=np.int64)
    rows = slice(i0 - e0, i1 - e0)
    lmat = correction_matrix(s.t_s[ext], lag_s)[rows, :] if lagged else None
    wts = s.weight_s[i0:i1]
    small = n_cols <= _DENSE_MAX and ext.size * n_cols <= _DENSE_ELEMS and ext.size * n_cols**2 <= _DENSE_WORK
    if layout == "dense" or (layout == "auto" and small):
        r_dense = _response_dense(s, ext, seg_a, seg_b, seg_col, n_cols, delay_s, lag_s)
        sol = _solve_dense(r_dense, s.y_w[ext], wts, lmat, noise_w, var_cols)
    else:
        r_sparse = _response_matrix(s, ext, seg_a, seg_b, seg_col, n_cols, delay_s, lag_s)
        sol = _solve_sparse(r_sparse, s.y_w[ext], wts, lmat, noise_w, var_cols)
    return replace(sol, first_reading=i0)


def _solve_dense(
    r_ext: F64, y_ext: F64, wts: F64, lmat: sparse.csr_matrix | None, noise_w: float, var_cols: I64
) -> Solution:
    """The solve with R held dense; ``lmat`` the correction's rows (None: no correction)."""
    if lmat is None:
        r_hat, y_hat, gain = r_ext, y_ext, np.ones(y_ext.size)
    else:
        r_hat = np.asarray(lmat @ r_ext, np.float64)
        y_hat = np.asarray(lmat @ y_ext, np.float64)
        gain = np.sqrt(np.asarray(lmat.multiply(lmat).sum(axis=1)).ravel())
    n_cols = r_hat.shape[1]
    rw = wts[:, None] * r_hat
    m = r_hat.T @ rw
    rhs = rw.T @ y_hat
    seen = rw.sum(axis=0)
    ident = (np.diagonal(m) > 1e-15) & (np.abs(seen) > 0)
    keep = np.nonzero(ident)[0]
    levels = np.full(n_cols, np.nan)
    var = np.full(n_cols, np.inf)
    info = np.zeros(n_cols)
    if keep.size:
        mk = m[np.ix_(keep, keep)]
        scale = float(np.diagonal(mk).mean()) or 1.0
        mk[np.diag_indices(keep.size)] += 1e-10 * scale
        inv = np.linalg.inv(mk)
        levels[keep] = inv @ rhs[keep]
        want = _wanted(keep, var_cols, n_cols)
        if want.size:
            # Noise propagates through the correction: Cov(ŷ) = σ² L Lᵀ, so Var(level) = σ² ‖zᵀ Rᵀ Δ L‖².
            prop = rw[:, keep] if lmat is None else np.asarray(lmat.T @ rw[:, keep], np.float64)
            z = inv[:, want]
            var[keep[want]] = noise_w**2 * np.sum((prop @ z) ** 2, axis=0)
            info[keep[want]] = 1.0 / np.maximum(z[want, np.arange(want.size)], 1e-300)
    resid = np.asarray(y_hat - r_hat @ np.nan_to_num(levels), np.float64)
    return Solution(levels, var, seen, ident, info, resid, noise_w * gain)


def _solve_sparse(
    r_ext: sparse.csr_matrix,
    y_ext: F64,
    wts: F64,
    lmat: sparse.csr_matrix | None,
    noise_w: float,
    var_cols: I64,
) -> Solution:
    """The solve with R sparse (a cluster of many readings and columns)."""
    from scipy import sparse

    if lmat is None:
        lmat = sparse.identity(y_ext.size, format="csr")
    r_hat = (lmat @ r_ext).tocsr()
    y_hat = lmat @ y_ext
    rw = sparse.diags(wts) @ r_hat
    m = (r_hat.T @ rw).tocsc()
    rhs = rw.T @ y_hat
    seen = np.asarray(rw.sum(axis=0)).ravel()
    diag = m.diagonal()
    ident = (diag > 1e-15) & (np.abs(seen) > 0)
    sol = _finish(m, rhs, seen, ident, rw, lmat, noise_w, var_cols, r_ext.shape[1])
    resid = np.asarray(y_hat - r_hat @ np.nan_to_num(sol.levels_w), np.float64)
    gain = np.sqrt(np.asarray(lmat.multiply(lmat).sum(axis=1)).ravel())
    return replace(sol, residual_w=resid, residual_noise_w=noise_w * gain)


def _wanted(keep: I64, var_cols: I64, n_cols: int) -> I64:
    """Positions within ``keep`` of the identifiable columns of ``var_cols``."""
    pos = -np.ones(n_cols, dtype=np.int64)
    pos[keep] = np.arange(keep.size)
    p = pos[np.asarray(var_cols, np.int64)]
    return np.asarray(p[p >= 0], np.int64)


def _finish(
    m: sparse.csc_matrix,
    rhs: F64,
    seen: F64,
    ident: NDArray[np.bool_],
    rw: sparse.csr_matrix,
    lmat: sparse.csr_matrix,
    noise_w: float,
    var_cols: I64,
    n_cols: int,
) -> Solution:
    from scipy import sparse
    from scipy.sparse import linalg as splinalg

    keep = np.nonzero(ident)[0]
    levels = np.full(n_cols, np.nan)
    var = np.full(n_cols, np.inf)
    info = np.zeros(n_cols)
    if keep.size == 0:
        return Solution(levels, var, seen, ident, info)
    mk = m[keep][:, keep]
    scale = float(mk.diagonal().mean()) or 1.0
    mk = (mk + sparse.identity(keep.size, format="csc") * (1e-10 * scale)).tocsc()
    want = _wanted(keep, var_cols, n_cols)
    # Noise propagates through the correction: Cov(ŷ) = σ² L Lᵀ, so Var(level) = σ² ‖zᵀ Rᵀ Δ L‖².
    prop = (lmat.T @ rw[:, keep]).tocsc()
    if keep.size <= _DENSE_MAX:
        inv = np.linalg.inv(mk.toarray())
        levels[keep] = inv @ rhs[keep]
        if want.size:
            z = inv[:, want]
            pz = prop @ z
            var[keep[want]] = noise_w**2 * np.sum(np.asarray(pz) ** 2, axis=0)
            info[keep[want]] = 1.0 / np.maximum(z[want, np.arange(want.size)], 1e-300)
    else:
        lu = splinalg.splu(mk)
        levels[keep] = lu.solve(np.asarray(rhs[keep], np.float64))
        batch = max(1, int(2e7 // max(prop.shape[0], 1)))
        for j in range(0, want.size, batch):
            cols = want[j : j + batch]
            e = np.zeros((keep.size, cols.size))
            e[cols, np.arange(cols.size)] = 1.0
            z = lu.solve(e, trans="T")
            pz = prop @ z
            var[keep[cols]] = noise_w**2 * np.sum(np.asarray(pz) ** 2, axis=0)
            info[keep[cols]] = 1.0 / np.maximum(z[cols, np.arange(cols.size)], 1e-300)
    return Solution(levels, var, seen, ident, info)
