"""A fleet's key figures per GPU (read from each run directory), their spread, and outliers by robust z-score."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archline.errors import MixedFleetError, RunDirError
from archline.records import RunDir, read_csv
from archline.records.csvload import load_csv

__all__ = [
    "FIGURES",
    "OUTLIER_Z",
    "Board",
    "Figure",
    "Spread",
    "check_comparable",
    "group_boards",
    "load_board",
    "robust_z",
    "spread",
]

#: |modified z| above this flags an outlier (Iglewicz & Hoaglin's 3.5 on the median and MAD).
OUTLIER_Z = 3.5

Rows = list[dict[str, Any]]


def _row(rows: Rows, name: str) -> dict[str, Any] | None:
    return next((r for r in rows if r.get("name") == name and not r.get("sweep_var") and r.get("status") == "ok"), None)


def _num(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _flops_per_s(r: dict[str, Any] | None) -> float | None:
    if r is None:
        return None
    t = _num(r.get("time_s"))
    fl = _num(r.get("flops")) or (2 * (_num(r.get("ops")) or 0.0)) or None
    return fl / t if fl and t else None


def _tensor(rows: Rows, _: Mapping[str, Any]) -> float | None:
    vals = [
        _flops_per_s(r)
        for r in rows
        if r.get("status") == "ok"
        and not r.get("sweep_var")
        and ("mma" in str(r.get("name")) or r.get("unit") == "tensor")
    ]
    got = [v for v in vals if v is not None]
    return max(got) if got else None


def _bw(level: str) -> Callable[[Rows, Mapping[str, Any]], float | None]:
    def f(rows: Rows, _: Mapping[str, Any]) -> float | None:
        got = [
            v
            for r in rows
            if r.get("unit") == level and r.get("status") == "ok" and not r.get("sweep_var")
            if (v := _num(r.get("bytes_per_s"))) is not None
        ]
        return max(got) if got else None

    return f


def _col(name: str, col: str, scale: float = 1.0) -> Callable[[Rows, Mapping[str, Any]], float | None]:
    def f(rows: Rows, _: Mapping[str, Any]) -> float | None:
        v = _num((_row(rows, name) or {}).get(col))
        return None if v is None else v * scale

    return f


def _pj_per_byte(rows: Rows, _: Mapping[str, Any]) -> float | None:
    r = _row(rows, "mem.dram.stream") or _row(rows, "mem.dram.copy")
    e, b = (_num(r.get("energy_j")), _num(r.get("bytes"))) if r else (None, None)
    return e / b * 1e12 if e and b else None


def _idle(rows: Rows, _: Mapping[str, Any]) -> float | None:
    got = [v for r in rows if (v := _num(r.get("idle_power_w"))) is not None]
    return statistics.median(got) if got else None


def _sensor(key: str) -> Callable[[Rows, Mapping[str, Any]], float | None]:
    def f(_: Rows, extra: Mapping[str, Any]) -> float | None:
        node: Any = extra.get("sensor_model")
        for k in ("model", "model"):  # extra.sensor_model.model (the profile) .model (the sensor model)
            node = node.get(k) if isinstance(node, Mapping) else None
        v = _num(node.get(key)) if isinstance(node, Mapping) else None
        return None if v is None else v * 1e3

    return f


@dataclass(frozen=True)
class Figure:
    """One key figure of a board: its column name, label, unit and how it is read from the run."""

    key: str
    label: str
    unit: str
    read: Callable[[Rows, Mapping[str, Any]], float | None]


FIGURES: tuple[Figure, ...] = (
    Figure("fp32_tflops", "FP32 FMA", "TFLOP/s", lambda r, _: _scale(_flops_per_s(_row(r, "arith.fp32.fma")), 1e-12)),
    Figure("tensor_tflops", "tensor", "TFLOP/s", lambda r, e: _scale(_tensor(r, e), 1e-12)),
    Figure("dram_tbps", "DRAM", "TB/s", lambda r, e: _scale(_bw("dram")(r, e), 1e-12)),
    Figure("l2_tbps", "L2", "TB/s", lambda r, e: _scale(_bw("l2")(r, e), 1e-12)),
    Figure("fp32_power_w", "FP32 FMA power", "W", _col("arith.fp32.fma", "avg_power_w")),
    Figure("fp32_pj_per_op", "FP32 FMA energy", "pJ/op", _col("arith.fp32.fma", "nj_per_op", 1e3)),
    Figure("dram_pj_per_byte", "DRAM energy", "pJ/B", _pj_per_byte),
    Figure("idle_power_w", "idle power", "W", _idle),
    Figure("sensor_lag_ms", "sensor lag", "ms", _sensor("lag_s")),
    Figure("sensor_delay_ms", "sensor delay", "ms", _sensor("delay_s")),
)


def _scale(v: float | None, k: float) -> float | None:
    return None if v is None else v * k


@dataclass(frozen=True)
class Board:
    """One GPU of the fleet: where it ran, what it is, and its key figures (None where the run has none)."""

    label: str
    path: Path
    name: str
    uuid: str
    driver: str
    host: str
    status: str
    figures: dict[str, float | None] = field(default_factory=dict)

    @property
    def group(self) -> tuple[str, str]:
        return (self.name, self.driver)


def load_board(label: str, path: Path) -> Board:
    """Read a characterization (or sensor-calibration) run directory into a :class:`Board`."""
    run = RunDir.open(path)
    m = run.manifest
    if m.kind != "characterize" and not (path / "profiles.json").is_file():
        raise RunDirError(f"{path}: a run of kind {m.kind!r}, not a characterization or sensor calibration to compare")
    if (path / "results.csv").is_file():  # strictly first: a cut-short table is refused, as the report refuses it
        load_csv(path / "results.csv", {}, ["name"], what="results table")
    rows: Rows = read_csv(path / "results.csv") if (path / "results.csv").is_file() else []
    if m.kind == "characterize" and not rows:
        raise RunDirError(f"{path}: characterization without results.csv")
    extra = dict(m.extra)
    if "sensor_model" not in extra and (path / "profiles.json").is_file():  # a sensor-calibration run
        prof = run.read_json("profiles.json").get("profiles", {}).get("nvml.buffer")
        extra["sensor_model"] = {"model": prof} if isinstance(prof, dict) else None
    figs = {f.key: f.read(rows, extra) for f in FIGURES}
    return Board(
        label,
        path,
        str(m.gpu.get("name") or "unknown GPU"),
        str(m.gpu.get("uuid") or "unknown"),
        str(m.gpu.get("driver_version") or "unknown"),
        str(m.host.get("hostname") or ""),
        m.status,
        figs,
    )


def group_boards(boards: Sequence[Board]) -> dict[tuple[str, str], list[Board]]:
    """Boards by (GPU model, driver): only boards of one group are ever compared."""
    out: dict[tuple[str, str], list[Board]] = {}
    for b in boards:
        out.setdefault(b.group, []).append(b)
    return out


def check_comparable(boards: Sequence[Board]) -> None:
    """Raise :class:`MixedFleetError` if ``boards`` mix GPU models or drivers."""
    groups = group_boards(boards)
    if len(groups) > 1:
        kinds = "; ".join(f"{n} driver {d} ({len(bs)})" for (n, d), bs in groups.items())
        raise MixedFleetError(f"these runs mix GPU models or drivers and are not compared together: {kinds}")


def robust_z(values: Sequence[float]) -> list[float]:
    """Modified z-scores, 0.6745 (x − median) / MAD; all 0 when the MAD is 0 (no spread to judge by)."""
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    if mad == 0:
        return [0.0 for _ in values]
    return [0.6745 * (v - med) / mad for v in values]


@dataclass(frozen=True)
class Spread:
    """One figure over one group: count, mean, standard deviation, coefficient of variation, range, outliers."""

    key: str
    n: int
    mean: float
    std: float
    cv_pct: float
    min: float
    max: float
    outliers: tuple[tuple[str, float, float], ...]  # (label, value, z)


def spread(boards: Sequence[Board], key: str, z_limit: float = OUTLIER_Z) -> Spread | None:
    """The spread of figure ``key`` over ``boards`` (None if fewer than one board has it)."""
    have = [(b.label, v) for b in boards if (v := b.figures.get(key)) is not None]
    if not have:
        return None
    vals = [v for _, v in have]
    mean = statistics.fmean(vals)
    std = statistics.stdev(vals) if len(vals) > 1 else 0.0
    zs = robust_z(vals) if len(vals) >= 3 else [0.0] * len(vals)
    out = tuple((lab, v, z) for (lab, v), z in zip(have, zs, strict=True) if abs(z) > z_limit)
    cv = 100.0 * std / abs(mean) if mean else 0.0
    return Spread(key, len(vals), mean, std, cv, min(vals), max(vals), out)
