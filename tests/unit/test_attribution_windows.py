"""Energy windows from the sensors, busy-time matrices and effective time under overlap."""

from __future__ import annotations

import numpy as np
import pytest

from archline.core.readings import Readings
from archline.errors import SensorError
from archline.measurement.attribute.windows import (
    BufferIntegral,
    Coverage,
    buffer_windows,
    counter_windows,
    gap_intervals,
    window_overlap,
)


def _counter(period=0.1, poll=0.0035, t_end=3.0, jitter=0.0, seed=0):
    rng = np.random.default_rng(seed)
    upd = 0.0371 + np.arange(0, t_end / period) * period
    upd = upd + rng.normal(0, jitter, upd.size)
    polls = np.cumsum(rng.uniform(poll * 0.95, poll * 1.05, int(t_end / poll)))
    polls = polls[polls < t_end]
    last = np.searchsorted(upd, polls, side="right") - 1
    ok = last >= 0
    return Readings("nvml.energy", "energy", polls[ok], 100.0 * upd[last[ok]]), upd


def test_counter_updates_are_placed_on_their_regular_grid():
    r, upd = _counter()
    w = counter_windows(r)
    assert w.regular
    assert w.period_s == pytest.approx(0.1, rel=1e-3)
    # Each update is known to ~a poll interval; the fitted grid puts them far closer.
    err = w.edges_s - upd[: w.edges_s.size]
    assert np.abs(err - err.mean()).max() < 0.0005
    assert np.allclose(w.energy_j, 10.0)


def test_irregular_counter_uses_the_brackets():
    t = np.array([0.0, 0.01, 0.05, 0.06, 0.20, 0.21, 0.24, 0.25, 0.70])
    v = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 3.0, 3.0, 3.5, 4.0])
    w = counter_windows(Readings("c", "energy", t, v))
    assert not w.regular
    assert np.allclose(w.edges_s, [0.055, 0.205, 0.245, 0.475])
    assert np.allclose(w.energy_j, [2.0, 0.5, 0.5])


def test_counter_needs_updates():
    t = np.linspace(0, 0.05, 10)
    with pytest.raises(SensorError, match="changed 0 time"):
        counter_windows(Readings("c", "energy", t, np.zeros(10)))


def test_buffer_windows_and_integral_conserve_energy():
    t = np.arange(0.0, 1.0001, 0.02)
    p = np.where((t > 0.3) & (t <= 0.5), 300.0, 100.0)
    r = Readings("b", "power", t, p)
    w = buffer_windows(r)
    assert w.energy_j.sum() == pytest.approx(100.0 * 1.0 + 200.0 * 0.2)
    integ = BufferIntegral(r)
    assert integ.energy(np.array([0.3]), np.array([0.5]))[0] == pytest.approx(60.0)
    assert integ.energy(np.array([0.31]), np.array([0.33]))[0] == pytest.approx(6.0)
    shifted = integ.with_delay(0.02)
    assert shifted.energy(np.array([0.28]), np.array([0.48]))[0] == pytest.approx(60.0)


def test_buffer_delay_is_fitted_against_known_windows():
    t = np.arange(0.0, 4.0, 0.02)
    rng = np.random.default_rng(2)
    level = np.repeat(rng.choice([100.0, 350.0], size=t.size // 5), 5)
    delayed = np.concatenate([np.full(1, 100.0), level[:-1]])  # stamped one sample (20 ms) late
    integ = BufferIntegral(Readings("b", "power", t, delayed))
    truth = BufferIntegral(Readings("b", "power", t, level))
    edges = np.arange(0.2, 3.8, 0.1)
    y = np.diff(truth.cumulative(edges))
    assert integ.fit_delay(edges, y).delay_s == pytest.approx(0.02, abs=0.0015)


def test_window_overlap_splits_intervals_across_windows():
    edges = np.array([0.0, 1.0, 2.0, 3.0])
    s = np.array([0.5, 1.5, -1.0, 2.9])
    e = np.array([1.5, 1.7, 0.2, 5.0])
    cols = np.array([0, 0, 1, 1])
    x = window_overlap(edges, s, e, cols, 2)
    assert np.allclose(x, [[0.5, 0.2], [0.7, 0.0], [0.0, 0.1]])


def test_coverage_splits_overlap_equally_and_finds_gaps():
    cov = Coverage(np.array([0.0, 0.5, 2.0]), np.array([1.0, 1.5, 3.0]))
    assert cov.overlapping
    f = cov.transform()
    assert f is not None
    eff = f(np.array([0.0, 0.5, 1.0, 1.5, 3.0]))
    assert np.allclose(np.diff(eff), [0.5, 0.25, 0.5, 1.0])
    gs, ge = gap_intervals(cov, -1.0, 4.0)
    assert np.allclose(gs, [-1.0, 1.5, 3.0]) and np.allclose(ge, [0.0, 2.0, 4.0])


def test_back_to_back_calls_with_rounding_are_not_concurrency():
    s = 1.795e9 + np.arange(1000) * 1e-4
    e = s + 1e-4 + 2e-7  # float64 rounding at epoch times makes neighbours touch by a hair
    assert not Coverage(s, e).overlapping
