"""The model file round-trips exactly, and a missing, malformed or other-version file is refused in one line."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from archline.errors import ModelFileError
from archline.model.build import build_model
from archline.model.io import load_model, model_to_json, save_model
from archline.model.result import MODEL_SCHEMA, MODEL_SCHEMA_VERSION, RooflineModel
from tests.helpers.roofline_synth import H100_LIKE, HELDOUT_KERNELS


@pytest.fixture(scope="module")
def model() -> RooflineModel:
    rng = np.random.default_rng(41)
    return build_model(H100_LIKE.sweep(rng), H100_LIKE.peaks(), H100_LIKE.heldout(rng, HELDOUT_KERNELS))


def _same(a: object, b: object) -> bool:
    # NaN-aware structural equality (NaN is written as null and read back as NaN).
    ja, jb = json.dumps(model_to_json(a), sort_keys=True), json.dumps(model_to_json(b), sort_keys=True)  # type: ignore[arg-type]
    return ja == jb


def test_round_trip(tmp_path: Path, model: RooflineModel) -> None:
    path = tmp_path / "m.json"
    save_model(path, model)
    back = load_model(path)
    assert back.schema == MODEL_SCHEMA
    assert back.schema_version == MODEL_SCHEMA_VERSION
    assert back.parameters == model.parameters
    assert back.fit.estimates == model.fit.estimates
    assert back.heldout is not None and len(back.heldout.predictions) == len(HELDOUT_KERNELS)
    assert _same(back, model)
    assert isinstance(back.parameters.values, tuple)


def test_nan_is_written_as_null_and_read_back(tmp_path: Path, model: RooflineModel) -> None:
    path = tmp_path / "m.json"
    save_model(path, dataclasses.replace(model, idle_power_w=math.nan))
    text = path.read_text()
    assert "NaN" not in text
    assert json.loads(text)["idle_power_w"] is None
    assert math.isnan(load_model(path).idle_power_w)


def _write(tmp_path: Path, obj: object) -> Path:
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return p


def test_wrong_schema_version_is_refused(tmp_path: Path, model: RooflineModel) -> None:
    d = model_to_json(model)
    d["schema_version"] = MODEL_SCHEMA_VERSION + 1
    with pytest.raises(ModelFileError, match=r"schema version 2 is not supported") as err:
        load_model(_write(tmp_path, d))
    assert "\n" not in str(err.value)
    assert err.value.exit_code == 2


def test_other_schema_is_refused(tmp_path: Path, model: RooflineModel) -> None:
    d = model_to_json(model)
    d["schema"] = "archline.run"
    with pytest.raises(ModelFileError, match="not an archline roofline model"):
        load_model(_write(tmp_path, d))


def test_missing_and_malformed_files(tmp_path: Path, model: RooflineModel) -> None:
    with pytest.raises(ModelFileError, match="model file not found"):
        load_model(tmp_path / "absent.json")
    with pytest.raises(ModelFileError, match=r"bad.json:1: not valid JSON"):
        load_model(_write(tmp_path, "{not json"))
    with pytest.raises(ModelFileError, match="not a JSON object"):
        load_model(_write(tmp_path, [1, 2]))
    d = model_to_json(model)
    del d["fit"]
    with pytest.raises(ModelFileError, match=r"malformed model \(fit: missing\)"):
        load_model(_write(tmp_path, d))
    d = model_to_json(model)
    d["parameters"]["values"][0] = "x"
    with pytest.raises(ModelFileError, match=r"parameters.values\[0\]: expected a number"):
        load_model(_write(tmp_path, d))
    d = model_to_json(model)
    d["fit"]["weighting"] = "magic"
    with pytest.raises(ModelFileError, match="fit.weighting"):
        load_model(_write(tmp_path, d))
