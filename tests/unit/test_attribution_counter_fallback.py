"""Session 15: where the power buffer's windows contradict the replay priors' measured spread and the energy
counter's windows do not, the kernel powers are fitted on the counter's windows, with a note (attribution.py's
``_counter_if_buffer_refuted``). What the windows say is forced here (each fit's lower bound on the spread), so the
rule's three branches are checked on a steady loop with design priors."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from archline.measurement.attribute import attribution as attribution_mod
from archline.measurement.attribute.attribution import AttributionOptions, attribute_energy
from archline.records.attribution import AttributionResult
from tests.helpers.attrib_steady import LAGGED_BUFFER
from tests.unit.test_attribution_design_e2e import _design_priors, _run


def _forced(
    monkeypatch: pytest.MonkeyPatch, low: dict[str, float], calibrated: dict[str, bool] | None = None
) -> list[str]:
    """Make each fit's replay source say ``low[fit windows]`` as its lower bound on the spread (and whether it was
    calibrated, ``calibrated[fit windows]``); returns the windows each fit used, in order."""
    real: Callable[..., Any] = attribution_mod._fit
    seen: list[str] = []

    def fit(d: Any, data: Any, opts: Any) -> Any:
        cols = real(d, data, opts)
        seen.append(data.source)
        cal = (calibrated or {}).get(data.source, True)
        fits = [
            dataclasses.replace(f, rho_low=low[data.source], calibrated=f.calibrated and cal)
            if f.source == "replay"
            else f
            for f in cols.scale_fits
        ]
        return dataclasses.replace(cols, scale_fits=fits)

    monkeypatch.setattr(attribution_mod, "_fit", fit)
    return seen


def _attribute(fit_source: str = "buffer") -> AttributionResult:
    run = _run()
    priors, _ = _design_priors(run, interaction=0.05, seed=3)
    opts = AttributionOptions(buffer_model=LAGGED_BUFFER, priors=priors, fit_source=fit_source)
    return attribute_energy(run.recording, run.activities, program_span=run.program_span, options=opts)


def test_a_buffer_the_counter_does_not_back_gives_way_to_the_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _forced(monkeypatch, {"buffer": 0.67, "counter": 0.005})
    res = _attribute()
    assert seen == ["buffer", "counter"]
    assert res.extra["fit_windows"] == "counter" and not res.extra["prior_fit"]["replay"]["refuted"]
    note = [n for n in res.notes if "not the power buffer's" in n]
    assert len(note) == 1 and "67.0 %" in note[0] and "energy counter's" in note[0]
    assert not any("power-buffer windows, scaled" in n for n in res.notes)  # the buffer's own note is gone
    assert sum(r.energy_j for r in res.rows) == pytest.approx(res.total_energy_j, rel=1e-9)
    monkeypatch.undo()
    counter = _attribute("counter")
    assert (
        res.extra["fit_window_count"]
        == counter.extra["fit_window_count"]
        < 0.5 * _attribute().extra["fit_window_count"]
    )  # the counter's windows, fewer than the buffer's


def test_where_both_contradict_the_buffer_fit_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _forced(monkeypatch, {"buffer": 0.67, "counter": 0.3})
    res = _attribute()
    assert seen == ["buffer", "counter"]
    assert res.extra["fit_windows"] == "buffer" and res.extra["prior_fit"]["replay"]["refuted"]
    assert not any("not the power buffer's" in n for n in res.notes)


def test_a_buffer_that_agrees_is_fitted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _forced(monkeypatch, {"buffer": 0.005, "counter": 0.9})
    res = _attribute()
    assert seen == ["buffer"] and res.extra["fit_windows"] == "buffer"


def test_a_counter_too_short_to_calibrate_the_priors_leaves_the_buffer_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _forced(monkeypatch, {"buffer": 0.67, "counter": 0.005}, calibrated={"counter": False})
    res = _attribute()
    assert seen == ["buffer", "counter"] and res.extra["fit_windows"] == "buffer"
    assert not any("not the power buffer's" in n for n in res.notes)


def test_a_fit_on_the_counter_from_the_start_is_not_refitted(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _forced(monkeypatch, {"buffer": 0.005, "counter": 0.67})
    res = _attribute("counter")
    assert seen == ["counter"] and res.extra["fit_windows"] == "counter"
    assert res.extra["prior_fit"]["replay"]["refuted"]
