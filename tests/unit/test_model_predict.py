"""Predictions of held-out kernels: accuracy on a synthetic GPU, honest errors, cache term, bad input."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from archline.errors import InputError
from archline.model.build import build_model
from archline.model.predict import calibrate_cache_energy, predict_heldout, predict_kernel
from archline.model.result import RooflineModel
from archline.model.sweep import HeldOutRow
from tests.helpers.roofline_synth import H100_LIKE, HELDOUT_KERNELS


@pytest.fixture(scope="module")
def model() -> RooflineModel:
    return build_model(H100_LIKE.sweep(np.random.default_rng(31)), H100_LIKE.peaks())


def test_heldout_predictions_meet_the_target_on_a_model_following_gpu(model: RooflineModel) -> None:
    held = H100_LIKE.heldout(np.random.default_rng(32), HELDOUT_KERNELS)
    s = predict_heldout(model.parameters, held)
    assert len(s.predictions) == len(HELDOUT_KERNELS)
    assert s.median_abs_error_at_measured_time < 0.03
    assert s.median_abs_error_predicted_time < 0.05
    assert s.target_met_at_measured_time and s.target_met_predicted_time
    for p, r in zip(s.predictions, held, strict=True):
        assert p.name == r.name
        assert p.energy_error_at_measured_time == pytest.approx((p.energy_at_measured_time_j - r.energy_j) / r.energy_j)


def test_prediction_matches_the_true_machine_within_its_error(model: RooflineModel) -> None:
    w, q = 2.0 * 4096**3, 3.0 * 4 * 4096**2
    p = predict_kernel(model.parameters, w, q, "single")
    truth_t = H100_LIKE.true_time_s(w, q, "single")
    truth_e = w * 8e-12 + q * 150e-12 + 150.0 * truth_t
    assert abs(p.energy_j - truth_e) < 4 * p.energy_sigma_j
    assert abs(p.time_s - truth_t) / truth_t < 0.02
    assert p.power_w == pytest.approx(p.energy_j / p.time_s)


def test_prediction_near_b_tau_is_capped(model: RooflineModel) -> None:
    p = predict_kernel(model.parameters, 20e9, 1e9, "single")
    assert p.cap_active
    assert p.power_w == pytest.approx(H100_LIKE.power_limit_w, rel=1e-9)
    assert p.time_s > p.time_uncapped_s


def test_a_gpu_the_model_does_not_fit_misses_the_target(model: RooflineModel) -> None:
    costly = dataclasses.replace(H100_LIKE, eps_mem_j_per_b=300e-12)  # memory twice as costly as fitted
    held = costly.heldout(np.random.default_rng(33), HELDOUT_KERNELS)
    s = predict_heldout(model.parameters, held)
    assert not s.target_met_at_measured_time
    assert s.median_abs_error_at_measured_time > 0.10


def test_cache_energy_calibration_as_in_section_v_c(model: RooflineModel) -> None:
    # Kernels that also pay 20 pJ per byte of cache traffic: calibrate on one, predict the rest.
    rng = np.random.default_rng(34)
    rows = []
    for name, prec, w, q in HELDOUT_KERNELS:
        cache_b = 50.0 * q
        t, e, u = H100_LIKE.measure(w, q, prec, rng)
        rows.append(HeldOutRow(name, prec, w, q, t, e + 20e-12 * cache_b, u, cache_bytes=cache_b))
    eps_cache = calibrate_cache_energy(model.parameters, rows, {"sgemm.n4096"})
    assert eps_cache == pytest.approx(20e-12, rel=0.25)
    without = predict_heldout(model.parameters, rows)
    with_cache = predict_heldout(model.parameters, rows, cache_calibration={"sgemm.n4096"})
    assert with_cache.median_abs_error_at_measured_time < without.median_abs_error_at_measured_time
    assert [p.calibration for p in with_cache.predictions].count(True) == 1


@pytest.mark.parametrize(
    ("flops", "nbytes", "t"),
    [(0.0, 1e9, None), (-1.0, 1e9, None), (1e9, 0.0, None), (1e9, math.nan, None), (1e9, 1e9, -1.0)],
)
def test_bad_counts_are_refused(model: RooflineModel, flops: float, nbytes: float, t: float | None) -> None:
    with pytest.raises(InputError, match="positive"):
        predict_kernel(model.parameters, flops, nbytes, measured_time_s=t)


def test_unknown_precision_is_refused() -> None:
    m = build_model(H100_LIKE.sweep(np.random.default_rng(35), precisions=("single",)), H100_LIKE.peaks())
    with pytest.raises(InputError, match="no double-precision parameters"):
        predict_kernel(m.parameters, 1e9, 1e9, "double")
