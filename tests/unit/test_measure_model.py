"""Choosing the sensor model from the data alone, with overrides; classification of fitted responses."""

from __future__ import annotations

import pytest

from archline.errors import SensorError, UnknownNameError
from archline.hw.simulated import SimulatedSensor, simulate_power
from archline.measurement.sensor_model import classify, infer_model, parse_kind
from tests.helpers.signals import kernels


def _square(n: int = 30, on_s: float = 0.5, off_s: float = 0.7) -> list[tuple[float, float]]:
    return [(i * (on_s + off_s) + 0.003 * i, on_s) for i in range(n)]


def test_lagged_sensor_is_recognised_and_its_lag_fitted() -> None:
    sc = kernels([(0.0, 4.0), (9.0, 3.0), (17.0, 4.0)], trail_s=8.0)
    m = infer_model(simulate_power(sc.signal, SimulatedSensor.k20(noise_w=0.05), seed=1))
    assert m.kind == "lagged"
    assert m.lag_s == pytest.approx(0.84, rel=0.03)
    assert m.correct_lag


def test_averaging_sensor_is_recognised() -> None:
    sc = kernels(_square())
    m = infer_model(simulate_power(sc.signal, SimulatedSensor.averaging(0.02, noise_w=0.3), seed=2))
    assert m.kind == "averaging"
    assert m.period_s == pytest.approx(0.02, rel=0.01)
    assert m.window_s is None and m.lag_s == 0.0


def test_part_time_sensor_is_recognised_from_missed_transitions() -> None:
    sc = kernels(_square(60, 0.3, 0.4))
    m = infer_model(simulate_power(sc.signal, SimulatedSensor.part_time(0.1, 0.025, noise_w=0.3), seed=3))
    assert m.kind == "part-time"
    assert m.coverage < 0.6


def test_constant_trace_gives_an_assumed_model_that_never_resolves_short_windows() -> None:
    sc = kernels([(0.0, 0.001)], busy_w=100.0)
    m = infer_model(simulate_power(sc.signal, SimulatedSensor.averaging(0.02, noise_w=0.3), seed=4))
    assert not m.identified
    assert m.edge_sigma_s is not None and m.edge_sigma_s >= 0.45 * m.period_s


def test_overrides_win_over_the_data() -> None:
    sc = kernels(_square())
    r = simulate_power(sc.signal, SimulatedSensor.averaging(0.02, noise_w=0.3), seed=5)
    m = infer_model(r, kind="lagged", capacitance_s=0.5)
    assert (m.kind, m.lag_s, m.origin) == ("lagged", 0.5, "override")
    assert any("overridden" in n for n in m.notes)


def test_lagged_without_a_fittable_transition_asks_for_the_capacitance() -> None:
    sc = kernels([(0.0, 0.05), (0.5, 0.05)])
    r = simulate_power(sc.signal, SimulatedSensor.averaging(0.02), seed=6)
    with pytest.raises(SensorError, match="capacitance"):
        infer_model(r, kind="lagged")


def test_kind_names_are_validated() -> None:
    assert parse_kind("Part_Time") == "part-time"
    with pytest.raises(UnknownNameError, match="unknown sensor kind"):
        parse_kind("magic")


@pytest.mark.parametrize(
    ("period", "window", "lag", "kind"),
    [
        (0.015, 0.0, 0.84, "lagged"),
        (0.02, None, 0.0, "averaging"),
        (0.1, 0.025, 0.0, "part-time"),
        (0.02, 0.0, 0.013, "lagged"),
        (0.1, 1.0, 0.0, "averaging"),
    ],
)
def test_classify(period: float, window: float | None, lag: float, kind: str) -> None:
    assert classify(period, window, lag)[0] == kind
