"""How much of each shipped run's busy time its board spent at the power limit, beside how its attribution fared.

    python benchmarks/at_limit_table.py RUN_DIR_OR_SET [...]

For each ``archline run`` directory (a run set's ``*-run``), the share of the power buffer's readings taken while
kernels ran (the traced first kernel's start to the last one's end) at or above 97 % of the enforced limit: what
``archline run`` now warns of from 25 % on (``measurement/attribute/ceiling.py``, session 30), computed by the same
function. The kernels come from the run's raw CUPTI trace (``raw/cupti/*.bin.xz``, restored from the history by
``scripts/restore_traces.sh``), read in a temporary copy: nothing in the run directory is written. Beside it, from
the run set's summary.json, the share of kernel energy in identifiable rows within ±15 % (as validate_attribution_real
printed it), and from the run's attribution.json whether the windows refuted a prior source's measured spread. No fit
is redone.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from redo_attribution import _restore_activities  # noqa: E402


def runs(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if (p / "raw" / "recording.npz").is_file():
            out.append(p)
        else:
            out += sorted(d for d in p.glob("*-run") if (d / "raw" / "recording.npz").is_file())
    return out


def within_15(run: Path) -> str:
    """The run set's figure (summary.json's identifiable_within_15pct_share for the workload), as validate printed."""
    summary = run.parent / "summary.json"
    if not summary.is_file():
        return "  —  "
    workloads = json.loads(summary.read_text()).get("workloads") or {}
    got = (workloads.get(run.name.removesuffix("-run")) or {}).get("identifiable_within_15pct_share")
    return f"{100 * got:5.1f}" if isinstance(got, int | float) else "  —  "


def one(run: Path) -> str:
    from archline.measurement.attribute.ceiling import at_limit
    from archline.measurement.attribute.io import load_raw

    manifest = json.loads((run / "manifest.json").read_text())
    gpu = manifest.get("gpu") or {}
    state = manifest.get("state_before") or {}
    limit = state.get("enforced_power_limit_w") or state.get("power_limit_w")  # as archline run took it (api.py)
    traces = sorted((run / "raw" / "cupti").glob("cupti-*.bin*"))
    if not traces:
        return f"{run}: no raw CUPTI trace (scripts/restore_traces.sh)"
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw"
        raw.mkdir()
        for f in ("recording.npz", "run.json", "clock.json"):
            if (run / "raw" / f).is_file():
                shutil.copyfile(run / "raw" / f, raw / f)
        _restore_activities(Path(tmp), traces, str(gpu.get("uuid") or ""))
        loaded = load_raw(tmp)
        kernels = [a for a in loaded.activities if a.kind == "kernel"]
        buf = loaded.recording.get("nvml.buffer")
        if buf is None or not kernels or not limit:
            return f"{run}: no power buffer, kernels or limit"
        busy = (min(a.start_s for a in kernels), max(a.end_s for a in kernels))
        lim = at_limit(buf.t_s, buf.value, busy, float(limit))
    attribution = json.loads((run / "attribution.json").read_text())
    fits = (attribution.get("extra") or {}).get("prior_fit") or {}
    refuted = any(bool(f.get("refuted")) for f in fits.values())
    board = str(gpu.get("uuid") or "?")[:12]
    return (
        f"{board}  {run.parent.parent.name[-3:]:>4} {run.parent.name[:34]:34s} {run.name[:16]:16s} "
        f"at limit {100 * lim.share:5.1f} % of {lim.readings:5d}  ±15 % {within_15(run)} %  "
        f"refuted {'yes' if refuted else 'no'}"
    )


def main(argv: list[str] | None = None) -> int:
    args = [Path(a) for a in (sys.argv[1:] if argv is None else argv)]
    if not args:
        print(__doc__)
        return 2
    found = runs(args)
    if not found:
        print(f"at_limit_table: no archline run directory under {', '.join(map(str, args))}", file=sys.stderr)
        return 2
    for run in found:
        try:
            print(one(run), flush=True)
        except (OSError, ValueError, KeyError) as exc:  # a run directory missing a file, or a corrupt one
            print(f"at_limit_table: {run}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
