"""The model file: RooflineModel as versioned JSON, written atomically and read back strictly."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import types
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from archline.errors import ModelFileError
from archline.model.result import MODEL_SCHEMA, MODEL_SCHEMA_VERSION, RooflineModel
from archline.records import to_jsonable, write_json

__all__ = ["load_model", "model_from_json", "model_to_json", "save_model"]

_T = TypeVar("_T")


class _Malformed(Exception):
    pass


def model_to_json(model: RooflineModel) -> dict[str, Any]:
    """The model as strict-JSON values (NaN and infinities become null)."""
    d: dict[str, Any] = to_jsonable(model)
    return d


def save_model(path: str | os.PathLike[str], model: RooflineModel) -> None:
    """Write the model file atomically."""
    write_json(path, model_to_json(model))


def load_model(path: str | os.PathLike[str]) -> RooflineModel:
    """Read a model file; a missing, malformed or other-version file raises :class:`ModelFileError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelFileError(f"{p}: model file not found") from None
    except IsADirectoryError:
        raise ModelFileError(f"{p}: is a directory, not a model file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{p}: cannot read model file ({exc})") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelFileError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    return model_from_json(d, source=str(p))


def model_from_json(d: Any, source: str = "model") -> RooflineModel:
    """Rebuild a :class:`RooflineModel` from its JSON form, checking schema name and version first."""
    if not isinstance(d, dict):
        raise ModelFileError(f"{source}: not an archline model file (not a JSON object)")
    if d.get("schema") != MODEL_SCHEMA:
        raise ModelFileError(f"{source}: not an archline roofline model (schema {d.get('schema')!r})")
    if d.get("schema_version") != MODEL_SCHEMA_VERSION:
        raise ModelFileError(
            f"{source}: model schema version {d.get('schema_version')!r} is not supported "
            f"(this archline reads version {MODEL_SCHEMA_VERSION})"
        )
    try:
        return _from_dict(RooflineModel, d, "")
    except _Malformed as exc:
        raise ModelFileError(f"{source}: malformed model ({exc})") from None


def _from_dict(cls: type[_T], d: Any, where: str) -> _T:
    if not isinstance(d, dict):
        raise _Malformed(f"{where or 'top level'}: expected an object")
    hints = get_type_hints(cls)
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        here = f"{where}.{f.name}" if where else f.name
        if f.name not in d:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise _Malformed(f"{here}: missing")
            continue
        kw[f.name] = _convert(hints[f.name], d[f.name], here)
    return cls(**kw)


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        return _convert(rest[0], value, where)
    if origin is Literal:
        if value not in args:
            raise _Malformed(f"{where}: {value!r} is not one of {', '.join(map(repr, args))}")
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _from_dict(tp, value, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise _Malformed(f"{where}: expected a list")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise _Malformed(f"{where}: expected {len(args)} items")
        return tuple(_convert(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))
    if origin is dict:
        if not isinstance(value, dict):
            raise _Malformed(f"{where}: expected an object")
        return {str(k): _convert(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        if value is None:
            return math.nan  # strict JSON stores NaN as null
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _Malformed(f"{where}: expected a number")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Malformed(f"{where}: expected an integer")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise _Malformed(f"{where}: expected true or false")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise _Malformed(f"{where}: expected a string")
        return value
    raise _Malformed(f"{where}: unsupported type {tp!r}")
