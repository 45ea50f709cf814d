"""The suite's acceptance targets, evaluated on a run's results rows (each says by how much it misses)."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["TargetCheck", "evaluate_targets"]


@dataclass(frozen=True)
class TargetCheck:
    """One target: ``passed`` is None when the run holds no row to evaluate it on."""

    target: str
    required: float | None
    measured: float | None
    unit: str
    passed: bool | None
    detail: str

    def as_row(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _rows(rows: Sequence[Mapping[str, Any]], pattern: str) -> list[Mapping[str, Any]]:
    return [r for r in rows if fnmatch.fnmatchcase(str(r.get("name", "")), pattern) and r.get("status") == "ok"]


def _frac_target(rows: Sequence[Mapping[str, Any]], label: str, pattern: str, required: float) -> TargetCheck:
    cand = [r for r in _rows(rows, pattern) if r.get("frac_of_spec") is not None]
    if not cand:
        return TargetCheck(label, required * 100, None, "% of spec", None, f"no measured row matches {pattern!r}")
    best = max(cand, key=lambda r: float(r["frac_of_spec"]))
    f = float(best["frac_of_spec"])
    ok = f >= required
    detail = f"{best['name']}: {best['ops_per_clk_per_sm']:.1f} of {best['spec_ops_per_clk_per_sm']:.0f} ops/clk/SM"
    if not ok:
        detail += f"; short by {(required - f) * 100:.1f} points"
        if best.get("throttled"):
            detail += f" (throttled: {best.get('throttle_reasons')})"
    return TargetCheck(label, required * 100, f * 100, "% of spec", ok, detail)


def evaluate_targets(
    rows: Sequence[Mapping[str, Any]],
    *,
    copy_bytes_per_s: float | None,
    suite_seconds: float | None,
    quick: bool,
    repeats: Sequence[Mapping[str, Any]] = (),
    shared_peak_b_per_clk: float = 128.0,
) -> list[TargetCheck]:
    """Evaluate every target of the characterization suite on the rows of one run."""
    out = [
        _frac_target(rows, "FP32 FMA ≥ 95 % of spec", "arith.fp32.fma", 0.95),
        _frac_target(rows, "FP64 FMA ≥ 95 % of spec", "arith.fp64.fma", 0.95),
        _frac_target(rows, "INT32 add ≥ 90 % of spec", "arith.int32.add", 0.90),
        _frac_target(rows, "SFU ≥ 90 % of spec", "arith.sfu.*", 0.90),
    ]
    if _rows(rows, "tensor.wgmma.*"):  # Hopper's warpgroup MMA (the catalogue skips it elsewhere)
        out += [
            _frac_target(rows, "wgmma BF16 dense ≥ 85 % of spec", "tensor.wgmma.bf16", 0.85),
            _frac_target(rows, "wgmma FP16 dense ≥ 85 % of spec", "tensor.wgmma.fp16", 0.85),
            _frac_target(rows, "wgmma FP8 dense ≥ 80 % of spec", "tensor.wgmma.fp8e4m3", 0.80),
        ]
    # DRAM streaming against the copy bandwidth measured in the same run
    stream = [r for r in _rows(rows, "mem.dram.*") if r.get("bytes_per_s")]
    label = "DRAM streaming ≥ 90 % of the device-to-device copy bandwidth"
    if stream and copy_bytes_per_s:
        best = max(stream, key=lambda r: float(r["bytes_per_s"]))
        frac = float(best["bytes_per_s"]) / copy_bytes_per_s
        out.append(
            TargetCheck(
                label,
                90.0,
                frac * 100,
                "% of copy",
                frac >= 0.9,
                f"{best['name']}: {float(best['bytes_per_s']) / 1e12:.3f} TB/s"
                f" vs copy {copy_bytes_per_s / 1e12:.3f} TB/s",
            )
        )
    else:
        out.append(TargetCheck(label, 90.0, None, "% of copy", None, "no DRAM streaming row or no copy measurement"))
    # shared memory bandwidth per SM per clock
    sh = [r for r in _rows(rows, "mem.shared.*") if r.get("bytes_per_clk_per_sm") and not r.get("sweep_var")]
    label = f"shared memory ≥ 90 % of {shared_peak_b_per_clk:g} B/clk/SM"
    if sh:
        best = max(sh, key=lambda r: float(r["bytes_per_clk_per_sm"]))
        v = float(best["bytes_per_clk_per_sm"])
        out.append(
            TargetCheck(
                label,
                0.9 * shared_peak_b_per_clk,
                v,
                "B/clk/SM",
                v >= 0.9 * shared_peak_b_per_clk,
                f"{best['name']}",
            )
        )
    else:
        out.append(TargetCheck(label, 0.9 * shared_peak_b_per_clk, None, "B/clk/SM", None, "no shared-memory row"))
    out.append(_conflicts(rows))
    limit = 120.0 if quick else 600.0
    label = f"{'--quick suite' if quick else 'full suite'} ≤ {limit / 60:.0f} min"
    out.append(
        TargetCheck(
            label,
            limit,
            suite_seconds,
            "s",
            None if suite_seconds is None else suite_seconds <= limit,
            "wall time of the whole run, device set-up included",
        )
    )
    out += _repeat_checks(repeats)
    return out


def _conflicts(rows: Sequence[Mapping[str, Any]]) -> TargetCheck:
    label = "n-way bank conflict costs n× the conflict-free time (within 10 %)"
    pts = {}
    for r in rows:
        if r.get("sweep_var") == "conflict_ways" and r.get("status") == "ok" and r.get("time_s") and r.get("ops"):
            # Each point runs its own calibrated trip count: compare time per access, not per launch.
            pts[int(r["sweep_value"])] = float(r["time_s"]) / float(r["ops"])
    if 1 not in pts or len(pts) < 2:
        return TargetCheck(label, 10.0, None, "% worst deviation", None, "no bank-conflict sweep with a 1-way point")
    base = pts[1]
    devs = {n: (t / (n * base) - 1.0) * 100 for n, t in pts.items() if n > 1}
    worst_n = max(devs, key=lambda n: abs(devs[n]))
    worst = devs[worst_n]
    bad = sorted(n for n, d in devs.items() if abs(d) > 10)
    detail = f"worst at {worst_n}-way: {worst:+.1f} %"
    if bad:
        detail += f"; outside 10 % at n = {', '.join(map(str, bad))}"
    return TargetCheck(label, 10.0, abs(worst), "% worst deviation", not bad, detail)


def _repeat_checks(repeats: Sequence[Mapping[str, Any]]) -> list[TargetCheck]:
    if not repeats:
        return [
            TargetCheck("same benchmark twice: time within 2 %", 2.0, None, "%", None, "no repeated benchmarks"),
            TargetCheck("same benchmark twice: energy within 3 %", 3.0, None, "%", None, "no repeated benchmarks"),
        ]
    dt = [abs(float(r["time_diff_pct"])) for r in repeats if r.get("time_diff_pct") is not None]
    de = [abs(float(r["energy_diff_pct"])) for r in repeats if r.get("energy_diff_pct") is not None]
    out = []
    for vals, lim, what in ((dt, 2.0, "time"), (de, 3.0, "energy")):
        if not vals:
            out.append(TargetCheck(f"same benchmark twice: {what} within {lim:.0f} %", lim, None, "%", None, "n/a"))
            continue
        worst = max(vals)
        names = [r["name"] for r in repeats]
        out.append(
            TargetCheck(
                f"same benchmark twice: {what} within {lim:.0f} %",
                lim,
                worst,
                "% worst",
                worst <= lim,
                f"{len(vals)} benchmarks repeated ({', '.join(map(str, names))})",
            )
        )
    return out
