"""Many level solves at once: every cluster of a trace under one set of sensor parameters, in one batch.

A long trace has hundreds of clusters of a few hundred readings and a few columns each; solved one by
one, numpy's per-call overhead costs more than their arithmetic. Here the clusters' readings are stacked
and their columns numbered one after another, so R is block-diagonal: one response evaluation, one
sparse product for all normal equations ``M = R̂ᵀ Δ R̂``, one batched inverse of their blocks. The
arithmetic is :func:`~archline.measurement.deconvolve.solve_levels`'s, block by block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from archline.measurement.deconvolve import Series, Solution, solve_levels
from archline.measurement.response import kernel_support_s, rect_response

if TYPE_CHECKING:
    from scipy import sparse

__all__ = ["Cluster", "solve_many"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Clusters of more columns than this are solved alone (a batch pads every block to the largest).
_BATCH_COLS = 32
#: Readings in one batch at most (a batch's arrays stay a few tens of MB).
_BATCH_ROWS = 1 << 20


@dataclass(frozen=True)
class Cluster:
    """One level problem: segments (relative s), their columns, the column count and the columns whose
    noise variance is wanted (see :func:`~archline.measurement.deconvolve.solve_levels`)."""

    seg_a: F64
    seg_b: F64
    seg_col: I64
    n_cols: int
    var_cols: I64


def solve_many(
    s: Series,
    clusters: Sequence[Cluster],
    *,
    delay_s: float,
    lag_s: float,
    correct: bool,
    noise_w: float,
    reach_s: float,
) -> list[Solution]:
    """:func:`~archline.measurement.deconvolve.solve_levels` of every cluster, in order.

    Small clusters without Burtscher's correction are solved in batches; a large one, or any under the
    correction (its rows take their neighbours), is solved alone.
    """
    out: list[Solution | None] = [None] * len(clusters)
    lo = np.array([c.seg_b[0] for c in clusters], np.float64)
    hi = np.array([c.seg_a[-1] for c in clusters], np.float64) + reach_s
    i0 = np.searchsorted(s.t_s, lo, side="left")
    i1 = np.searchsorted(s.t_s, hi, side="right")
    batch: list[int] = []
    for k, c in enumerate(clusters):
        if (correct and lag_s > 0) or c.n_cols > _BATCH_COLS or i1[k] <= i0[k]:
            out[k] = solve_levels(
                s,
                c.seg_a,
                c.seg_b,
                c.seg_col,
                c.n_cols,
                delay_s=delay_s,
                lag_s=lag_s,
                correct=correct,
                noise_w=noise_w,
                var_cols=c.var_cols,
                reach_s=reach_s,
            )
        else:
            batch.append(k)
    start = 0
    while start < len(batch):
        # As many clusters as fit one batch (at least one).
        rows = np.cumsum((i1 - i0)[batch[start:]])
        stop = start + max(1, int(np.searchsorted(rows, _BATCH_ROWS, side="right")))
        ks = batch[start:stop]
        spans = (i0[ks].astype(np.int64), i1[ks].astype(np.int64))
        for k, sol in zip(ks, _solve_batch(s, [clusters[k] for k in ks], spans, delay_s, lag_s, noise_w), strict=True):
            out[k] = sol
        start = stop
    return [sol for sol in out if sol is not None]


def _entries(
    s: Series, cl: Sequence[Cluster], spans: tuple[I64, I64], delay_s: float, lag_s: float
) -> tuple[I64, I64, I64, F64, I64, I64]:
    """The stacked readings' indices, then (row, global column, response) of every reading and every segment
    it responds to; and the row and column offsets of each cluster."""
    i0, i1 = spans
    n_rows = i1 - i0
    row_off = np.concatenate([[0], np.cumsum(n_rows)])
    col_off = np.concatenate([[0], np.cumsum([c.n_cols for c in cl])])
    seg_off = np.concatenate([[0], np.cumsum([c.seg_a.size for c in cl])])
    ext = np.repeat(i0 - row_off[:-1], n_rows) + np.arange(row_off[-1])
    t = s.t_s[ext]
    w = s.window_s[ext]
    back = kernel_support_s(0.0, delay_s, lag_s)
    # Each reading looks for its segments among its own cluster's only.
    first = np.empty(ext.size, np.int64)
    last = np.empty(ext.size, np.int64)
    for p, c in enumerate(cl):
        r = slice(int(row_off[p]), int(row_off[p + 1]))
        first[r] = np.searchsorted(c.seg_b, t[r] - delay_s - w[r] - back, side="right")
        last[r] = np.searchsorted(c.seg_a, t[r] - delay_s, side="left") - 1
    prob = np.repeat(np.arange(len(cl)), n_rows)
    lo, top = seg_off[prob], seg_off[prob + 1] - 1
    first = np.clip(first + lo, lo, top)
    last = np.clip(last + lo, first, top)
    count = last - first + 1
    rows = np.repeat(np.arange(ext.size), count)
    segs = np.repeat(first, count) + (np.arange(rows.size) - np.repeat(np.cumsum(count) - count, count))
    seg_a = np.concatenate([c.seg_a for c in cl])
    seg_b = np.concatenate([c.seg_b for c in cl])
    seg_col = np.concatenate([c.seg_col + col_off[p] for p, c in enumerate(cl)])
    vals = rect_response(t[rows], seg_a[segs], seg_b[segs], window_s=w[rows], delay_s=delay_s, lag_s=lag_s)
    return ext, rows, seg_col[segs], vals, row_off, col_off


def _solve_batch(
    s: Series, cl: Sequence[Cluster], spans: tuple[I64, I64], delay_s: float, lag_s: float, noise_w: float
) -> list[Solution]:
    from scipy import sparse

    ext, rows, cols, vals, row_off, col_off = _entries(s, cl, spans, delay_s, lag_s)
    n_cols = int(col_off[-1])
    r = sparse.csr_matrix((vals, (rows, cols)), shape=(ext.size, n_cols))
    y = s.y_w[ext]
    rw = sparse.diags(s.weight_s[ext]) @ r
    m = (r.T @ rw).tocoo()
    rhs = np.asarray(rw.T @ y, np.float64)
    seen = np.asarray(rw.sum(axis=0), np.float64).ravel()
    ident = (m.diagonal() > 1e-15) & (np.abs(seen) > 0)
    inv, kept = _inverses(m, ident, col_off)
    # The blocks' inverses side by side: level = M⁻¹ rhs and the noise propagated, z = M⁻¹ e_v.
    big = np.repeat(np.arange(len(cl)), np.diff(col_off))
    local = np.arange(n_cols) - col_off[big]
    rhs_pad = _pad(np.where(ident, rhs, 0.0), col_off, inv.shape[1])
    levels = np.where(ident, np.einsum("cj,cj->c", inv[big, local, :], rhs_pad[big]), np.nan)
    var = np.full(n_cols, np.inf)
    info = np.zeros(n_cols)
    want = np.zeros(n_cols, bool)
    for p, c in enumerate(cl):
        want[col_off[p] + c.var_cols] = True
    want &= ident
    if want.any():
        blocks = sparse.csr_matrix((inv[kept], _block_index(kept, col_off)), shape=(n_cols, n_cols))
        z = (rw @ blocks[:, want]).tocsc()
        var[want] = noise_w**2 * np.asarray(z.multiply(z).sum(axis=0), np.float64).ravel()
        info[want] = 1.0 / np.maximum(inv[big, local, local][want], 1e-300)
    resid = y - r @ np.nan_to_num(levels)
    out = []
    for p in range(len(cl)):
        cs, rs = slice(int(col_off[p]), int(col_off[p + 1])), slice(int(row_off[p]), int(row_off[p + 1]))
        out.append(
            Solution(
                levels[cs],
                var[cs],
                seen[cs],
                ident[cs],
                info[cs],
                resid[rs],
                np.full(rs.stop - rs.start, noise_w),
                int(spans[0][p]),
            )
        )
    return out


def _pad(v: F64, col_off: I64, width: int) -> F64:
    """A per-column vector as one row per cluster, padded with zeros to ``width``."""
    out = np.zeros((col_off.size - 1, width))
    big = np.repeat(np.arange(col_off.size - 1), np.diff(col_off))
    out[big, np.arange(v.size) - col_off[big]] = v
    return out


def _block_index(kept: NDArray[np.bool_], col_off: I64) -> tuple[I64, I64]:
    """Global (row, column) of each True of ``kept`` (cluster, local row, local column)."""
    p, i, j = np.nonzero(kept)
    return col_off[p] + i, col_off[p] + j


def _inverses(m: sparse.coo_matrix, ident: NDArray[np.bool_], col_off: I64) -> tuple[F64, NDArray[np.bool_]]:
    """Each cluster's (M + 1e-10·mean diag·I)⁻¹ over its identifiable columns, padded: (clusters, n, n), and
    which entries of it belong to the identifiable block (elsewhere it is the identity)."""
    n_cl = col_off.size - 1
    width = int(np.max(np.diff(col_off)))
    big_of = np.repeat(np.arange(n_cl), np.diff(col_off))
    local = np.arange(ident.size) - col_off[big_of]
    ok = np.zeros((n_cl, width), bool)
    ok[big_of, local] = ident
    kept = ok[:, :, None] & ok[:, None, :]
    stack = np.zeros((n_cl, width, width))
    pick = ident[m.row] & ident[m.col]
    p = big_of[m.row[pick]]
    stack[p, m.row[pick] - col_off[p], m.col[pick] - col_off[p]] = m.data[pick]
    diag = np.diagonal(stack, axis1=1, axis2=2)
    n_kept = ok.sum(axis=1)
    mean = np.where(n_kept > 0, np.where(ok, diag, 0.0).sum(axis=1) / np.maximum(n_kept, 1), 0.0)
    scale = np.where(mean != 0, mean, 1.0)
    eye = np.broadcast_to(np.eye(width, dtype=bool), stack.shape)
    stack = np.where(kept & eye, stack + (1e-10 * scale)[:, None, None], stack)
    stack = np.where(~kept & eye, 1.0, stack)
    return np.asarray(np.linalg.inv(stack), np.float64), kept
