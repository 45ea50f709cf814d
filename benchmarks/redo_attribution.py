"""Redo an ``archline run`` attribution on a CPU, from the run directory's raw traces, with other options.

    python benchmarks/redo_attribution.py RUN_DIR [--cupti FILE.bin[.gz|.xz] ...] [--prior-replay DIR]
        [--prior-model RUN --prior-counts CSV] [--reference DIR] [--prior-scale fit|fixed]
        [--fit-source buffer|counter] [--json]

For iterating the attribution method on real GPU data without a GPU. The board's power limit and the power
buffer's sensor model are taken as ``archline run`` took them (the manifest's limit; the calibration or the
shipped prior of the board's generation). Run directories brought back by ``scripts/device.sh`` lack their
large files: ``--cupti`` gives the raw CUPTI trace(s) the script returned gzipped beside its archives
(``large-…+raw+cupti+cupti-….bin.gz``); the activities are rebuilt from them into ``RUN_DIR/raw/activities.csv``.
Prints issue 13's figures (``benchmarks/validate_attribution_real.py``'s analysis) against the replay's rows
when ``--prior-replay`` (or ``--reference``) is given, else the identifiable share and the notes. With
``--prior-model`` and ``--prior-replay`` both, a kernel replay measured keeps replay's prior and the others get the
model's (as ``archline run`` takes them).
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import math
import re
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _restore_activities(run_dir: Path, cupti: list[Path], uuid: str) -> int:
    """Rebuild ``raw/activities.csv`` from the raw CUPTI file(s); the number of records kept for this GPU."""
    from archline.core.activity import demangle
    from archline.hw.cupti.inject import read_injection_output
    from archline.measurement.attribute.io import ACTIVITIES_FILE
    from archline.measurement.attribute.placement import split_by_gpu
    from archline.records.activity import write_activities

    with tempfile.TemporaryDirectory() as tmp:
        for i, f in enumerate(cupti):
            found = re.search(r"cupti-\d+(?:-\d+)?\.bin", f.name)  # after '+' or '_' (device_bg.sh renames)
            name = found.group(0) if found else ""
            # The reader takes the injection library's own names (cupti-<pid>[-<time>].bin).
            dst = Path(tmp) / (name if name.startswith("cupti-") and name.endswith(".bin") else f"cupti-{i}.bin")
            if f.suffix in (".gz", ".xz"):
                opener = gzip.open if f.suffix == ".gz" else lzma.open
                with opener(f, "rb") as src, dst.open("wb") as out:
                    shutil.copyfileobj(src, out)
            else:
                shutil.copyfile(f, dst)
        traced = read_injection_output(tmp)
    records = traced.records
    if uuid and records:
        split = split_by_gpu(traced, {0: uuid})
        if split.unnamed == 0:
            records = split.records[0]
    # archline run demangles kernel names before its analysis (api.py); so must the redo, or replay priors,
    # keyed by demangled names, match only the kernels whose names were never mangled.
    names = demangle([r.name for r in records if r.kind == "kernel"])
    records = [replace(r, name=names[r.name]) if r.name in names else r for r in records]
    write_activities(run_dir / ACTIVITIES_FILE, records)
    return len(records)


def open_run(d: Path, cupti: list[Path]) -> dict[str, Any]:
    """A run directory's manifest, its activities rebuilt from ``cupti`` where the run lacks them (says so); bad
    input is a ``SystemExit`` with one line naming the file."""
    from archline.measurement.attribute.io import ACTIVITIES_FILE

    try:
        manifest: dict[str, Any] = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{d / 'manifest.json'}: cannot read ({exc})") from None
    if not any((d / (ACTIVITIES_FILE + z)).is_file() for z in ("", ".gz", ".xz")):
        if not cupti:
            raise SystemExit(f"{d}: no raw/activities.csv; give the raw CUPTI trace with --cupti")
        n = _restore_activities(d, cupti, str((manifest.get("gpu") or {}).get("uuid") or ""))
        print(f"rebuilt {d / ACTIVITIES_FILE} from {len(cupti)} CUPTI file(s): {n} records", flush=True)
    return manifest


def buffer_model_choice(manifest: dict[str, Any]) -> Any:
    """The power buffer's sensor model as ``archline run`` took it for the manifest's board (its calibration or the
    shipped prior of its generation); raises ``ArchlineError`` where there is none."""
    from archline.measurement.choose import GpuIdentity, choose_model

    gpu = manifest.get("gpu") or {}
    static = {"uuid": gpu.get("uuid"), "driver_version": gpu.get("driver_version"), "name": gpu.get("name")}
    return choose_model("nvml.buffer", None, identity=GpuIdentity.from_static(static))


def board_limits(manifest: dict[str, Any]) -> tuple[float | None, Any]:
    """The run's enforced power limit (W; None where the manifest has none) and the burst ceiling archline ships for
    a board of its name (``ceiling.shipped_burst_ceiling``; None without one), as ``archline run`` took them."""
    from archline.measurement.attribute.ceiling import shipped_burst_ceiling

    limit = (manifest.get("extra") or {}).get("power_limit_w")
    name = str((manifest.get("gpu") or {}).get("name") or "")
    return (float(limit) if isinstance(limit, int | float) and limit > 0 else None), shipped_burst_ceiling(name)


def profile_model(path: Path, source: str = "nvml.buffer") -> tuple[Any, str]:
    """The sensor model of ``source`` in a calibration's ``profiles.json`` (``archline sensor calibrate``), and where
    it came from; ``ArchlineError`` (one line naming the file) where the file holds none."""
    from archline.errors import ArchlineError
    from archline.measurement.calibrate.profile import SensorProfile

    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArchlineError(f"{path}: cannot read a sensor profile file ({exc})") from None
    entry = (d.get("profiles") or {}).get(source) if isinstance(d, dict) else None
    if not isinstance(entry, dict):
        raise ArchlineError(f"{path}: no {source} profile (not an archline sensor calibrate profiles.json)")
    prof = SensorProfile.from_json(entry, where=str(path))
    return prof.model, f"the calibration of {prof.gpu_uuid[:12]} in {path}"


#: The band a notch filter takes out of the buffer's readings (Hz): next to the Nyquist rate of readings every 20 ms,
#: where plan_s26a's board's readings alternate (docs/attribution.md, "Session 27").
NOTCH_HZ = (23.0, 24.9)


def ar_order(r: Any, max_order: int = 10) -> tuple[int, Any]:
    """The autoregressive model of a residual series: its order by BIC (0 … ``max_order``) and its coefficients
    (Yule–Walker)."""
    import numpy as np
    from scipy.linalg import solve_toeplitz

    c = np.asarray(r, np.float64) - float(np.mean(r))
    n = c.size
    acov = np.array([float(c[: n - k] @ c[k:]) / n for k in range(max_order + 1)])
    best: tuple[float, int, Any] = (math.log(acov[0]) if acov[0] > 0 else -math.inf, 0, np.zeros(0))
    for p in range(1, max_order + 1):
        phi = solve_toeplitz(acov[:p], acov[1 : p + 1])
        s2 = float(acov[0] - phi @ acov[1 : p + 1])
        if s2 <= 0:
            break
        bic = math.log(s2) + p * math.log(n) / n
        if bic < best[0]:
            best = (bic, p, phi)
    return best[1], best[2]


def filter_buffer(kind: str, x: Any, y: Any, period_s: float) -> tuple[Any, Any, str]:
    """The buffer's design and readings, both filtered alike before the fit (a transformation of the regression, so
    the powers it estimates are the same ones), and what was done. ``ar``: whitened by the AR model of the unconstrained
    fit's residuals (:func:`ar_order`), its first rows dropped; ``notch``: :data:`NOTCH_HZ` taken out by a zero-phase
    FIR band-stop (101 taps), 60 rows dropped at each end. Too few readings: unchanged."""
    import numpy as np
    from scipy.signal import filtfilt, firwin, lfilter

    if x.shape[0] < 200:
        return x, y, f"{kind}: too few readings ({x.shape[0]}), not filtered"
    if kind == "ar":
        active = np.nonzero(np.abs(x).sum(axis=0) > 0)[0]
        beta, *_ = np.linalg.lstsq(x[:, active], y, rcond=None)
        p, phi = ar_order(y - x[:, active] @ beta)
        if p == 0:
            return x, y, "ar: the residuals need no AR term (BIC), not filtered"
        a = np.concatenate([[1.0], -phi])
        coef = ", ".join(f"{v:+.2f}" for v in phi)
        return lfilter(a, [1.0], x, axis=0)[p:], lfilter(a, [1.0], y)[p:], f"ar: AR({p}) whitening [{coef}]"
    if kind == "notch":
        fs = 1.0 / period_s
        if NOTCH_HZ[1] >= fs / 2:
            return x, y, f"notch: readings every {1e3 * period_s:.1f} ms cannot show {NOTCH_HZ[1]} Hz, not filtered"
        h = firwin(101, list(NOTCH_HZ), fs=fs, pass_zero="bandstop")
        xf = filtfilt(h, [1.0], x, axis=0)[60:-60]
        yf = filtfilt(h, [1.0], y)[60:-60]
        return xf, yf, f"notch: {NOTCH_HZ[0]}-{NOTCH_HZ[1]} Hz taken out (FIR band-stop, 101 taps, zero phase)"
    raise ValueError(f"unknown buffer filter {kind!r} (ar or notch)")


def cut_inputs(d: Path, cut_s: float) -> tuple[Any, list[Any], tuple[float, float], list[tuple[float, float]] | None]:
    """A run's recording, activities, program span and traced intervals with the program's span ending ``cut_s``
    earlier: the kernels that start after the new end and the readings taken after it dropped, as if the program had
    stopped there (``cut_s`` 0: as recorded)."""
    import numpy as np

    from archline.core.readings import Readings
    from archline.core.recording import Recording
    from archline.measurement.attribute.io import load_raw

    raw = load_raw(d)
    if raw.program_span is None:
        raise SystemExit(f"{d}: no program span in raw/run.json; cannot cut it")
    start, end = raw.program_span
    new_end = end - cut_s
    if new_end <= start:
        raise SystemExit(f"--cut-s {cut_s:g}: the program ran only {end - start:.1f} s")
    acts = [r for r in raw.activities if r.start_s < new_end]
    readings = {}
    for k, r in raw.recording.readings.items():
        keep = np.asarray(r.t_s <= new_end)
        readings[k] = Readings(r.source, r.quantity, r.t_s[keep], r.value[keep], dict(r.meta))
    rec = Recording(readings, raw.recording.regions, raw.recording.start_s, min(raw.recording.end_s, new_end),
                    dict(raw.recording.meta))  # fmt: skip
    iv = raw.info.get("traced_intervals")
    traced = [(float(x), min(float(y), new_end)) for x, y in iv if float(x) < new_end] if isinstance(iv, list) else None
    if cut_s > 0:
        print(f"cut: the program's span {end - start:.1f} s -> {new_end - start:.1f} s, {len(acts)} of "
              f"{len(raw.activities)} records kept", flush=True)  # fmt: skip
    return rec, acts, (start, new_end), traced


def _reanalyze_cut(d: Path, opts: Any, cut_s: float) -> Any:
    """``reanalyze`` with the program's span ending ``cut_s`` earlier (:func:`cut_inputs`)."""
    from archline.measurement.attribute.attribution import attribute_energy

    rec, acts, span, traced = cut_inputs(d, cut_s)
    return attribute_energy(rec, acts, program_span=span, options=opts, traced=traced)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--cupti", type=Path, nargs="*", default=[], help="raw CUPTI trace(s), .bin, .bin.gz or .bin.xz")
    ap.add_argument("--prior-replay", type=Path, help="a replay run directory whose energies become priors")
    ap.add_argument("--prior-model", type=Path, help="a calibrated model (archline roofline run) for model priors")
    ap.add_argument("--prior-counts", type=Path, help="the program's counts (archline counts), with --prior-model")
    ap.add_argument(
        "--reference",
        type=Path,
        help="the replay run directory the rows are scored against (default: --prior-replay's)",
    )
    ap.add_argument("--prior-scale", choices=("fit", "fixed"), default="fit")
    ap.add_argument("--fit-source", choices=("buffer", "counter"), default="buffer")
    ap.add_argument("--no-ceiling", action="store_true", help="bound every row by the limit (before session 11)")
    ap.add_argument("--ceiling-w", type=float, help="the burst ceiling (W) instead of the shipped one of the board")
    ap.add_argument(
        "--isolated-as-recorded",
        action="store_true",
        help="compare with isolated energies as recorded (before session 11: with a replay's fixed cost)",
    )
    ap.add_argument(
        "--cut-s",
        type=float,
        default=0.0,
        help="drop the program's last CUT_S seconds (its kernels and readings) before redoing (the traced length)",
    )
    ap.add_argument(
        "--sensor-profiles",
        type=Path,
        help="the power buffer's sensor model from this file (an archline sensor calibrate run's profiles.json) "
        "instead of the one archline run took (the board's own calibration where this machine has it, else the "
        "shipped prior of its generation)",
    )
    ap.add_argument(
        "--buffer-filter",
        choices=("ar", "notch"),
        help="filter the buffer's design and readings alike before the fit (post hoc diagnosis, session 27): "
        "AR whitening of the residuals, or a notch next to the readings' Nyquist rate",
    )
    ap.add_argument(
        "--no-sensor-sigma",
        action="store_true",
        help="leave the buffer model's lag and delay σ out of the rows' intervals (as before session 31)",
    )
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--save", type=Path, help="also write the redone attribution here (attribution.json's form)")
    a = ap.parse_args(argv)

    from archline.errors import ArchlineError
    from archline.measurement.attribute.attribution import AttributionOptions
    from archline.measurement.attribute.io import reanalyze

    d = a.run_dir
    try:
        manifest = open_run(d, a.cupti)
    except SystemExit as exc:
        print(str(exc), file=sys.stderr)
        return 2
    opts = AttributionOptions(prior_scale=a.prior_scale, fit_source=a.fit_source, sensor_sigma=not a.no_sensor_sigma)
    limit, ceiling = board_limits(manifest)
    if limit is not None:
        opts = replace(opts, power_limit_w=limit)
    if a.no_ceiling:
        opts = replace(opts, power_ceiling_w=0.0)
    elif a.ceiling_w is not None:
        opts = replace(opts, power_ceiling_w=a.ceiling_w)
        print(f"burst ceiling: {a.ceiling_w:.0f} W (given)", flush=True)
    else:
        if ceiling is not None:
            opts = replace(opts, power_ceiling_w=ceiling.power_w)
            print(f"burst ceiling: {ceiling.describe()}", flush=True)
    if a.sensor_profiles is not None:
        try:
            model, where = profile_model(a.sensor_profiles)
        except ArchlineError as exc:
            print(str(exc), file=sys.stderr)
            return 2
        opts = replace(opts, buffer_model=model)
        print(f"buffer model: {where}", flush=True)
    else:
        try:
            choice = buffer_model_choice(manifest)
            opts = replace(opts, buffer_model=choice.model)
            print(f"buffer model: {choice.describe}", flush=True)
        except ArchlineError as exc:
            print(f"no buffer model ({exc}); fitting on the counter's windows", flush=True)
    replay_rows: list[dict[str, Any]] = []
    replay_meta: dict[str, Any] = {}
    if (a.prior_model is None) != (a.prior_counts is None):
        raise SystemExit("--prior-model and --prior-counts go together")
    priors: dict[str, Any] = {}
    if a.prior_model is not None:
        from archline.characterize.model_priors import read_model_priors

        mp = read_model_priors(a.prior_model, a.prior_counts)
        priors.update(mp.priors)
        print(f"model priors: {mp.names} kernel names from {mp.launches} launches ({a.prior_model})", flush=True)
    if a.prior_replay is not None:
        from archline.cli.run_cmd import read_replay_priors

        priors.update(read_replay_priors(a.prior_replay))  # replay's measured energy wins where it has one
    if priors:
        opts = replace(opts, priors=priors)
    reference = a.reference if a.reference is not None else a.prior_replay
    if reference is not None:
        from archline.report.replay import read_replay

        replay_meta, replay_rows = read_replay(reference)
    if a.buffer_filter is not None:
        from unittest import mock

        from archline.measurement.attribute import attribution as att

        plain = att.buffer_design

        def filtered(*args: Any, **kwargs: Any) -> Any:
            x, y = plain(*args, **kwargs)
            model = kwargs.get("model")
            period = float(model.period_s) if model is not None else 0.02
            xf, yf, what = filter_buffer(a.buffer_filter, x, y, period)
            print(f"buffer filter: {what}", flush=True)
            return xf, yf

        with mock.patch.object(att, "buffer_design", filtered):
            result = reanalyze(d, opts) if a.cut_s <= 0 else _reanalyze_cut(d, opts, a.cut_s)
    else:
        result = reanalyze(d, opts) if a.cut_s <= 0 else _reanalyze_cut(d, opts, a.cut_s)
    sys.path.insert(0, str(HERE))
    from validate_attribution_real import analyse, report

    from archline.core.activity import demangle
    from archline.measurement.attribute.replay_result import fixed_cost_to_take_out

    obj = json.loads(json.dumps(result.to_json() if hasattr(result, "to_json") else {}, default=str))
    if not obj:
        obj = {"rows": [r.to_row() for r in result.rows], "total_energy_j": result.total_energy_j,
               "extra": dict(result.extra)}  # fmt: skip
    if a.save is not None:
        tmp = a.save.with_name(a.save.name + ".tmp")
        tmp.write_text(json.dumps(obj, indent=1, default=str), encoding="utf-8")
        tmp.replace(a.save)  # atomic: an interrupted redo leaves no half-written file
    names = demangle([str(r.get("group", "")) for r in replay_rows])
    fixed = None if a.isolated_as_recorded else fixed_cost_to_take_out(replay_rows, replay_meta.get("design"))
    s = analyse(obj, replay_rows, names=names, power_limit_w=opts.power_limit_w, fixed_j=fixed)
    s["notes"] = list(result.notes)
    s["prior_fit"] = result.extra.get("prior_fit")
    if a.json:
        print(json.dumps(s, indent=1, default=str))
    else:
        report(d.name, s)
        for n in result.notes:
            print(f"note: {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
