"""The level solve: dense, sparse and batched solves agree, and are the weighted least squares they claim."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pytest

from archline.hw.simulated import SimulatedSensor, simulate_power
from archline.measurement.batched import Cluster, solve_many
from archline.measurement.deconvolve import Series, Solution, build_segments, solve_levels
from archline.measurement.response import rect_response
from archline.measurement.sensor_model import SensorModel
from archline.measurement.windows import prepare_series, window_energies
from tests.helpers.signals import Scenario, kernels

#: (sensor, its model): each kind of sensor the solve meets.
SENSORS = {
    "averaging": (
        SimulatedSensor.averaging(0.02, noise_w=0.3, period_jitter_s=0.0005),
        SensorModel(kind="averaging", period_s=0.02),
    ),
    "part-time": (
        SimulatedSensor.part_time(period_s=0.1, window_s=0.025, noise_w=0.3),
        SensorModel(kind="part-time", period_s=0.1, window_s=0.025),
    ),
    "instant": (
        SimulatedSensor.part_time(period_s=0.01, window_s=0.0, noise_w=0.3),
        SensorModel(kind="part-time", period_s=0.01, window_s=0.0),
    ),
    "lagged": (
        SimulatedSensor.k20(noise_w=0.3),
        SensorModel(kind="lagged", period_s=0.015, window_s=0.0, lag_s=0.84),
    ),
    "short lag": (
        SimulatedSensor.averaging(0.02, lag_s=0.005, delay_s=0.003, noise_w=0.3),
        SensorModel(kind="averaging", period_s=0.02, lag_s=0.005, delay_s=0.003),
    ),
}

#: Windows as (start, duration) s: isolated, back to back, shorter than a period, a run of short calls.
SPANS = [(0.0, 0.8), (0.8, 0.3), (1.5, 0.004), (2.0, 0.05), (2.07, 0.05), (2.14, 0.05), (2.21, 0.05), (3.0, 1.7)]


def _cluster(
    sc: Scenario, series: Series, model: SensorModel, columns: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, float]:
    """Segments of all windows as one cluster (as ``window_energies`` cuts them), their column count and reach."""
    starts = np.array([w.start_s for w in sc.windows]) - series.t0_s
    ends = np.array([w.end_s for w in sc.windows]) - series.t0_s
    chunk = max(2 * model.period_s, model.mixing_s + model.period_s, model.support_s / 40, 0.002)
    seg_a, seg_b, seg_c = build_segments(starts, ends, np.asarray(columns, np.int64), chunk)
    reach = model.support_s + (model.period_s if model.correct_lag else 0.0)
    return seg_a, seg_b, seg_c, int(seg_c.max()) + 1, reach


def _solve(
    series: Series,
    cl: tuple[np.ndarray, np.ndarray, np.ndarray, int, float],
    model: SensorModel,
    var_cols: np.ndarray,
    layout: Literal["auto", "dense", "sparse"],
    delay_s: float | None = None,
) -> Solution:
    seg_a, seg_b, seg_c, n_cols, reach = cl
    return solve_levels(
        series,
        seg_a,
        seg_b,
        seg_c,
        n_cols,
        delay_s=model.delay_s if delay_s is None else delay_s,
        lag_s=model.lag_s,
        correct=model.correct_lag,
        noise_w=0.3,
        var_cols=var_cols,
        reach_s=reach,
        layout=layout,
    )


def _assert_same(a: Solution, b: Solution) -> None:
    """Equal but for rounding; a column the readings barely tell from its neighbours (a part-time
    sensor's short window) has an ill-conditioned variance, which rounding moves by up to ~1e-7."""
    assert a.first_reading == b.first_reading
    np.testing.assert_array_equal(a.identifiable, b.identifiable)
    np.testing.assert_allclose(a.levels_w, b.levels_w, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(a.variance_w2, b.variance_w2, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(a.seen_s, b.seen_s, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a.info_s, b.info_s, rtol=1e-6, atol=1e-15)
    np.testing.assert_allclose(a.residual_w, b.residual_w, rtol=0, atol=1e-8)
    np.testing.assert_allclose(a.residual_noise_w, b.residual_noise_w, rtol=1e-12)


@pytest.mark.parametrize("kind", sorted(SENSORS))
@pytest.mark.parametrize("tied", [False, True])
def test_dense_and_sparse_layouts_give_the_same_solution(kind: str, tied: bool) -> None:
    sensor, model = SENSORS[kind]
    sc = kernels(SPANS, busy_w=[300.0, 200.0, 250.0, 280.0, 280.0, 280.0, 280.0, 350.0])
    series, _ = prepare_series(simulate_power(sc.signal, sensor, seed=11), model)
    # Tied: the run of four short calls shares one column (repetitions of one call).
    columns = [0, 1, 2, 3, 3, 3, 3, 4] if tied else list(range(len(SPANS)))
    cl = _cluster(sc, series, model, columns)
    var_cols = np.arange(max(columns) + 1, dtype=np.int64)
    dense = _solve(series, cl, model, var_cols, "dense")
    _assert_same(dense, _solve(series, cl, model, var_cols, "sparse"))
    _assert_same(dense, _solve(series, cl, model, var_cols, "auto"))
    assert np.isfinite(dense.levels_w[[0, 1, max(columns)]]).all()  # the long windows are seen by every sensor
    # A re-solve with the delay moved and no variances wanted (the parameter-uncertainty runs).
    moved = model.delay_s + 0.001
    none = np.empty(0, np.int64)
    _assert_same(_solve(series, cl, model, none, "dense", moved), _solve(series, cl, model, none, "sparse", moved))


def test_dense_layout_is_the_weighted_least_squares_of_every_reading() -> None:
    # A straightforward reference: every reading's response to every segment, summed per column,
    # solved by numpy's least squares with the weights Δ_k; and the variance σ² (Mᵀ⁻¹ Rᵀ Δ² R M⁻¹)_vv.
    sensor, model = SENSORS["averaging"]
    sc = kernels(SPANS)
    series, _ = prepare_series(simulate_power(sc.signal, sensor, seed=12), model)
    cl = _cluster(sc, series, model, list(range(len(SPANS))))
    seg_a, seg_b, seg_c, n_cols, reach = cl
    var_cols = np.arange(len(SPANS), dtype=np.int64)
    sol = _solve(series, cl, model, var_cols, "dense")
    take = (series.t_s >= seg_b[0]) & (series.t_s <= seg_a[-1] + reach)
    t, y, win, wts = series.t_s[take], series.y_w[take], series.window_s[take], series.weight_s[take]
    per_seg = rect_response(t[:, None], seg_a[None, :], seg_b[None, :], window_s=win[:, None])
    r = np.zeros((t.size, n_cols))
    for j, c in enumerate(seg_c):
        r[:, c] += per_seg[:, j]
    sq = np.sqrt(wts)[:, None]
    ref, *_ = np.linalg.lstsq(sq * r, sq[:, 0] * y, rcond=None)
    np.testing.assert_allclose(sol.levels_w, ref, rtol=1e-7)
    m = r.T @ (wts[:, None] * r)
    z = np.linalg.solve(m, (wts[:, None] * r).T)  # M⁻¹ Rᵀ Δ
    np.testing.assert_allclose(sol.variance_w2[var_cols], 0.3**2 * np.sum(z**2, axis=1)[var_cols], rtol=1e-6)
    np.testing.assert_allclose(sol.residual_w, y - r @ ref, atol=1e-6)


@pytest.mark.parametrize("kind", sorted(SENSORS))
def test_clusters_solved_in_one_batch_match_each_solved_alone(kind: str) -> None:
    sensor, model = SENSORS[kind]
    # Runs of windows 5 s apart, each its own cluster: 1 to 3 windows, one run of 40 (more columns than a
    # batch takes), one tied run, and one cluster past the readings' end (no reading sees it).
    runs = [[(0.0, 0.5)], [(5.0, 0.1), (5.2, 0.3)], [(10.0, 0.05), (10.1, 0.05), (10.2, 0.05)]]
    runs += [[(15.0 + 0.05 * j, 0.02) for j in range(40)], [(20.0 + 0.3 * j, 0.1) for j in range(3)]]
    sc = kernels([span for run in runs for span in run], trail_s=5.0)
    series, _ = prepare_series(simulate_power(sc.signal, sensor, seed=13), model)
    chunk = max(2 * model.period_s, model.mixing_s + model.period_s, model.support_s / 40, 0.002)
    reach = model.support_s + (model.period_s if model.correct_lag else 0.0)
    starts = np.array([w.start_s for w in sc.windows]) - series.t0_s
    ends = np.array([w.end_s for w in sc.windows]) - series.t0_s
    cl: list[Cluster] = []
    first = 0
    for r, run in enumerate(runs):
        idx = slice(first, first + len(run))
        first += len(run)
        cols = np.zeros(len(run), np.int64) if r == 4 else np.arange(len(run), dtype=np.int64)
        seg_a, seg_b, seg_c = build_segments(starts[idx], ends[idx], cols, chunk)
        var_cols = np.arange(int(cols.max()) + 1, dtype=np.int64)[: 2 if r == 3 else None]
        cl.append(Cluster(seg_a, seg_b, seg_c, int(seg_c.max()) + 1, var_cols))
    far = series.t_s[-1] + 100.0
    seg_a, seg_b, seg_c = build_segments(np.array([far]), np.array([far + 1.0]), np.zeros(1, np.int64), chunk)
    cl.append(Cluster(seg_a, seg_b, seg_c, int(seg_c.max()) + 1, np.zeros(1, np.int64)))
    d, lag, corr = model.delay_s, model.lag_s, model.correct_lag
    many = solve_many(series, cl, delay_s=d, lag_s=lag, correct=corr, noise_w=0.3, reach_s=reach)
    for c, got in zip(cl, many, strict=True):
        alone = solve_levels(
            series,
            c.seg_a,
            c.seg_b,
            c.seg_col,
            c.n_cols,
            delay_s=d,
            lag_s=lag,
            correct=corr,
            noise_w=0.3,
            var_cols=c.var_cols,
            reach_s=reach,
            layout="sparse",
        )
        _assert_same(got, alone)
    assert not many[-1].identifiable.any()


@pytest.mark.parametrize("kind", ["averaging", "part-time", "lagged"])
def test_windows_far_apart_get_the_same_energy_analysed_together_or_one_by_one(kind: str) -> None:
    # Together, the clusters share batches; alone, each is a batch of its own: the blocks must not mix.
    # 40 s apart: beyond the K20's reach (its lag's tail lasts 8 s), so each run is a cluster of its own.
    sensor, model = SENSORS[kind]
    spans = [(0.0, 0.5), (40.0, 0.2), (40.3, 0.4), (80.0, 1.0), (120.0, 0.05)]
    sc = kernels(spans, busy_w=[300.0, 250.0, 350.0, 200.0, 280.0])
    r = simulate_power(sc.signal, sensor, seed=14)
    model = model.with_(noise_w=0.3, edge_sigma_s=0.0005, delay_sigma_s=0.0002)
    together = window_energies(r, model, sc.windows)
    alone = [window_energies(r, model, sc.windows[a:b]) for a, b in [(0, 1), (1, 3), (3, 4), (4, 5)]]
    for got, ref in zip(together, [w for part in alone for w in part], strict=True):
        assert got.energy_j == pytest.approx(ref.energy_j, rel=1e-9)
        assert got.energy_uncertainty_j == pytest.approx(ref.energy_uncertainty_j, rel=1e-6)
        assert (got.resolvable, got.readings, got.note) == (ref.resolvable, ref.readings, ref.note)
