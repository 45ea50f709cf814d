"""Trace files: power traces from external meters (CSV), window lists, and archline's own recordings (.npz)."""

from __future__ import annotations

import json
import os
import warnings
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from archline.core.readings import Quantity, Readings
from archline.core.recording import Recording, Region
from archline.errors import TraceError
from archline.records import atomic_open, to_jsonable

__all__ = [
    "RECORDING_SCHEMA",
    "RECORDING_SCHEMA_VERSION",
    "check_windows",
    "load_recording",
    "read_trace_csv",
    "read_windows_csv",
    "save_recording",
    "write_trace_csv",
    "write_windows_csv",
]

F64 = NDArray[np.float64]

RECORDING_SCHEMA = "archline.recording"
RECORDING_SCHEMA_VERSION = 1
_TIME_COLS = ("time_s",)
_POWER_COLS = ("power_w",)


def _open_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TraceError(path, "file not found") from None
    except IsADirectoryError:
        raise TraceError(path, "is a directory, not a file") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read ({exc.strerror})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(path, f"not a UTF-8 text file (byte {exc.start})") from None


def _header(path: Path, text: str) -> tuple[list[str], int, int]:
    """The header's column names, its 1-based line number and the offset just after it."""
    pos = 0
    line = 0
    while pos < len(text):
        nl = text.find("\n", pos)
        end = len(text) if nl < 0 else nl
        line += 1
        raw = text[pos:end].strip().lstrip("\ufeff")
        pos = end + 1
        if raw and not raw.startswith("#"):
            return [c.strip().lower() for c in raw.split(",")], line, pos
    raise TraceError(path, "empty: no header and no data")


def _column(path: Path, names: list[str], wanted: Sequence[str], line: int) -> int:
    for w in wanted:
        if w in names:
            return names.index(w)
    raise TraceError(path, f"header has no {wanted[0]!r} column (found: {', '.join(names)})", line)


def _scan_bad_line(path: Path, text: str, start: int, first_line: int, cols: Sequence[int], ncols: int) -> TraceError:
    """Find the first line numpy could not parse, to name it (slow path, only on failure)."""
    line = first_line
    for raw in text[start:].split("\n"):
        line += 1
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        cells = s.split(",")
        if len(cells) < ncols:
            return TraceError(path, f"expected {ncols} columns, found {len(cells)}", line)
        for c in cols:
            try:
                v = float(cells[c])
            except ValueError:
                return TraceError(path, f"not a number: {cells[c].strip()!r}", line)
            if not np.isfinite(v):
                return TraceError(path, f"not a finite number: {cells[c].strip()!r}", line)
    return TraceError(path, "malformed CSV")


def _data_line_numbers(text: str, start: int, first_line: int) -> NDArray[np.int64]:
    """1-based line numbers of the data rows (comments and blank lines skipped)."""
    out = []
    line = first_line
    for raw in text[start:].split("\n"):
        line += 1
        s = raw.strip()
        if s and not s.startswith("#"):
            out.append(line)
    return np.array(out, dtype=np.int64)


def _header_of_file(path: Path) -> tuple[list[str], int]:
    """The header's column names and its 1-based line number, reading only the top of the file."""
    try:
        with path.open("r", encoding="utf-8", newline="") as fh:
            for line, raw in enumerate(fh, start=1):
                s = raw.strip().lstrip("\ufeff")
                if s and not s.startswith("#"):
                    return [c.strip().lower() for c in s.split(",")], line
    except FileNotFoundError:
        raise TraceError(path, "file not found") from None
    except IsADirectoryError:
        raise TraceError(path, "is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise TraceError(path, f"not a UTF-8 text file (byte {exc.start})") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read ({exc.strerror})") from None
    raise TraceError(path, "empty: no header and no data")


def _read_columns(path: Path, wanted: Sequence[Sequence[str]], min_rows: int = 1) -> tuple[list[F64], int]:
    """Numeric columns by name, parsed by numpy's C reader; on failure a line scan names the bad line."""
    names, hline = _header_of_file(path)
    cols = [_column(path, names, w, hline) for w in wanted]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": reported below
            arr = np.loadtxt(
                path,
                delimiter=",",
                comments="#",
                skiprows=hline,
                usecols=cols,
                dtype=np.float64,
                ndmin=2,
                encoding="utf-8",
            )
    except (ValueError, IndexError):
        text = _open_text(path)
        _, _, start = _header(path, text)
        raise _scan_bad_line(path, text, start, hline, cols, len(names)) from None
    if arr.shape[0] < min_rows:
        raise TraceError(
            path,
            "no data rows after the header"
            if arr.shape[0] == 0
            else f"only {arr.shape[0]} data row(s): need at least {min_rows}",
            hline,
        )
    if not np.all(np.isfinite(arr)):
        text = _open_text(path)
        _, _, start = _header(path, text)
        raise _scan_bad_line(path, text, start, hline, cols, len(names))
    return [arr[:, i].copy() for i in range(len(cols))], hline


def read_trace_csv(
    path: str | os.PathLike[str],
    source: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    *,
    max_rows: int | None = None,
) -> Readings:
    """A power trace from an external meter: CSV (plain or gzip), Parquet or Arrow with columns ``time_s`` and
    ``power_w`` (others ignored; in CSV, lines starting with '#' before the header are comments).

    Read in chunks with pyarrow (records.trace_files); ``progress(done_bytes, total_bytes)`` follows the read.
    With ``max_rows``, a longer trace is averaged in bins of k rows while it is read (meta ``bin_rows`` = k).
    Times must be non-decreasing seconds on the same clock as the windows; raises
    :class:`~archline.errors.TraceError` naming the file and line otherwise.
    """
    from archline.records.trace_files import read_columns, trace_format

    p = Path(path)
    plain_csv = trace_format(p) == "csv" and p.suffix.lower() == ".csv"
    k = 1
    try:
        (t, w), k = read_columns(p, ("time_s", "power_w"), progress, max_rows=max_rows)
        bad = ~(np.isfinite(t) & np.isfinite(w))
        if bad.any() or t.size < 2:
            raise TraceError(p, _bad_rows(t, w, bad))
    except TraceError:
        if not plain_csv:
            raise
        # numpy's reader names the line of a plain CSV's first bad cell (the slow path, on failure only).
        (t, w), hline = _read_columns(p, (_TIME_COLS, _POWER_COLS), min_rows=2)
    back = np.diff(t) < 0
    if back.any():
        k = int(np.argmax(back)) + 1
        line = None
        if plain_csv:
            text = _open_text(p)
            _, hline, start = _header(p, text)
            line = int(_data_line_numbers(text, start, hline)[k])
        raise TraceError(
            p,
            f"time goes backwards ({float(t[k])!r} s after {float(t[k - 1])!r} s, row {k + 1}): the trace must be "
            "sorted",
            line,
        )
    meta = {"path": str(p), "warnings": _suspicious(p, t, w), "bin_rows": k}
    return Readings(source or f"trace:{p.name}", "power", t, w, meta)


def _bad_rows(t: F64, w: F64, bad: NDArray[np.bool_]) -> str:
    if t.size < 2:
        return "no data rows after the header" if t.size == 0 else "only 1 data row(s): need at least 2"
    k = int(np.argmax(bad))
    col = "time_s" if not np.isfinite(t[k]) else "power_w"
    return f"data row {k + 1}: {col} is empty or not a finite number"


#: No meter of one board or node reads this much (W); a value beyond it is a unit or parsing error.
MAX_PLAUSIBLE_POWER_W = 1e6


def _suspicious(p: Path, t: F64, w: F64) -> list[str]:
    """Refuse impossible power; name what is possible but suspicious (negative power, repeated stamps)."""
    big = np.abs(w) > MAX_PLAUSIBLE_POWER_W
    if big.any():
        k = int(np.argmax(big))
        raise TraceError(
            p, f"power {float(w[k]):.3g} W at t = {float(t[k])!r} s is not a plausible reading (|P| > 1e6 W): units?"
        )
    out: list[str] = []
    neg = w < 0
    if neg.any():
        out.append(
            f"{p.name}: {int(neg.sum())} reading(s) are negative (down to {float(w.min()):.4g} W): "
            "a meter offset? They are used as they are"
        )
    dup = int((np.diff(t) == 0).sum())
    if dup:
        out.append(f"{p.name}: {dup} reading(s) repeat the previous timestamp: each is used as a separate reading")
    return out


def read_windows_csv(path: str | os.PathLike[str]) -> tuple[Region, ...]:
    """Windows from a CSV with columns ``name,start_s,end_s`` (the name may be empty).

    Each Region carries its line in ``meta['line']``. A window ending at or before its start
    raises :class:`~archline.errors.TraceError` naming the line.
    """
    p = Path(path)
    text = _open_text(p)
    names, hline, start = _header(p, text)
    c_name = names.index("name") if "name" in names else None
    c_a = _column(p, names, ("start_s",), hline)
    c_b = _column(p, names, ("end_s",), hline)
    out: list[Region] = []
    line = hline
    for raw in text[start:].split("\n"):
        line += 1
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        cells = [c.strip() for c in s.split(",")]
        if len(cells) < len(names):
            raise TraceError(p, f"expected {len(names)} columns, found {len(cells)}", line)
        try:
            a, b = float(cells[c_a]), float(cells[c_b])
        except ValueError:
            raise TraceError(p, "start_s and end_s must be numbers", line) from None
        if not (np.isfinite(a) and np.isfinite(b)):
            raise TraceError(p, "start_s and end_s must be finite numbers", line)
        if b <= a:
            raise TraceError(p, f"window ends at or before its start ({b!r} <= {a!r})", line)
        name = cells[c_name] if c_name is not None else ""
        out.append(Region(name or f"window{len(out) + 1}", a, b, how="file", meta={"line": line}))
    if not out:
        raise TraceError(p, "no windows after the header", hline)
    return tuple(out)


def check_windows(windows: Sequence[Region], t0_s: float, t1_s: float, path: str | os.PathLike[str]) -> None:
    """Raise :class:`~archline.errors.TraceError` for the first window outside ``[t0_s, t1_s]``."""
    for w in windows:
        if w.start_s < t0_s or w.end_s > t1_s:
            raise TraceError(
                path,
                f"window {w.name!r} [{w.start_s!r}, {w.end_s!r}] s lies outside the trace [{t0_s!r}, {t1_s!r}] s",
                w.meta.get("line"),
            )


def write_trace_csv(path: str | os.PathLike[str], data: Readings | Recording, source: str | None = None) -> None:
    """Write a power trace as ``time_s,power_w`` (atomically), readable by :func:`read_trace_csv`.

    ``data`` is one source's Readings, or a Recording whose power source ``source`` (default
    ``nvml.buffer``, else the first power source) is written. A path ending in ``.npz`` stores
    the whole Recording instead (:func:`save_recording`).
    """
    if isinstance(data, Recording):
        if str(path).endswith(".npz"):
            save_recording(path, data)
            return
        r = _power_source(data, source, path)
        note = f"# archline trace of {r.source}\n"
    else:
        r = data
        note = ""
    with atomic_open(path, "w") as fh:
        fh.write(note + "time_s,power_w\n")
        np.savetxt(fh, np.column_stack([r.t_s, r.value]), delimiter=",", fmt=["%.9f", "%.6f"])


def _power_source(rec: Recording, source: str | None, path: str | os.PathLike[str]) -> Readings:
    if source is not None:
        r = rec.get(source)
        if r is None:
            raise TraceError(path, f"the recording has no source {source!r}")
        return r
    if rec.get("nvml.buffer") is not None:
        return rec.readings["nvml.buffer"]
    for r in rec.readings.values():
        if r.quantity == "power":
            return r
    raise TraceError(path, "the recording has no power source")


def write_windows_csv(path: str | os.PathLike[str], windows: Sequence[Region]) -> None:
    """Write ``name,start_s,end_s`` (atomically), readable by :func:`read_windows_csv`."""
    with atomic_open(path, "w") as fh:
        fh.write("name,start_s,end_s\n")
        for w in windows:
            if "," in w.name or "\n" in w.name:
                raise TraceError(path, f"window name {w.name!r} contains a comma or newline")
            fh.write(f"{w.name},{w.start_s!r},{w.end_s!r}\n")


# --------------------------------------------------------------------------- recordings


def save_recording(path: str | os.PathLike[str], rec: Recording) -> None:
    """Store a whole Recording in one compressed ``.npz`` (atomically).

    Layout (docs/measurement.md): arrays ``t/<i>`` and ``v/<i>`` (float64) for the i-th
    source, and ``recording.json`` (a UTF-8 JSON string as a uint8 array) holding the schema
    name and version, the sources (name, quantity, meta, array index), the regions, the
    span and the meta. No pickles, so any numpy can read it safely.
    """
    arrays: dict[str, NDArray[Any]] = {}
    sources = []
    for i, (name, r) in enumerate(rec.readings.items()):
        arrays[f"t/{i}"] = np.asarray(r.t_s, np.float64)
        arrays[f"v/{i}"] = np.asarray(r.value, np.float64)
        sources.append({"name": name, "source": r.source, "quantity": r.quantity, "meta": r.meta, "index": i})
    doc = {
        "schema": RECORDING_SCHEMA,
        "schema_version": RECORDING_SCHEMA_VERSION,
        "start_s": rec.start_s,
        "end_s": rec.end_s,
        "meta": rec.meta,
        "sources": sources,
        "regions": [
            {"name": g.name, "start_s": g.start_s, "end_s": g.end_s, "how": g.how, "meta": g.meta} for g in rec.regions
        ],
    }
    arrays["recording.json"] = np.frombuffer(json.dumps(to_jsonable(doc)).encode("utf-8"), dtype=np.uint8)
    with atomic_open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)  # type: ignore[arg-type]


def load_recording(path: str | os.PathLike[str]) -> Recording:
    """Read a Recording written by :func:`save_recording`."""
    p = Path(path)
    try:
        loaded = np.load(p, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):  # a bare .npy array under an .npz name
            raise TraceError(p, "not an archline recording (a single array, not an .npz archive)")
        with loaded as z:
            if "recording.json" not in z.files:
                raise TraceError(p, "not an archline recording (no recording.json inside)")
            doc = json.loads(bytes(z["recording.json"]).decode("utf-8"))
            if not isinstance(doc, dict):
                raise TraceError(p, "not an archline recording (recording.json is not a JSON object)")
            if doc.get("schema") != RECORDING_SCHEMA:
                raise TraceError(p, f"not an archline recording (schema {doc.get('schema')!r})")
            if doc.get("schema_version") != RECORDING_SCHEMA_VERSION:
                raise TraceError(
                    p,
                    f"recording schema version {doc.get('schema_version')} is not supported "
                    f"(expects {RECORDING_SCHEMA_VERSION})",
                )
            readings: dict[str, Readings] = {}
            for s in doc["sources"]:
                q: Quantity = s["quantity"]
                i = int(s["index"])
                readings[s["name"]] = Readings(
                    s.get("source", s["name"]),
                    q,
                    z[f"t/{i}"].astype(np.float64),
                    z[f"v/{i}"].astype(np.float64),
                    dict(s.get("meta", {})),
                )
            # Parsed inside the try: a missing or mistyped field is a corrupt file, not a crash.
            regions = tuple(
                Region(g["name"], float(g["start_s"]), float(g["end_s"]), g.get("how", "host"), dict(g.get("meta", {})))
                for g in doc.get("regions", [])
            )
            span_s = (float(doc.get("start_s", 0.0)), float(doc.get("end_s", 0.0)))
            meta = dict(doc.get("meta", {}))
    except FileNotFoundError:
        raise TraceError(p, "file not found") from None
    except zipfile.BadZipFile as exc:
        raise TraceError(p, f"not a complete .npz archive (truncated or not a recording: {exc})") from None
    except (
        OSError,
        EOFError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        json.JSONDecodeError,
        UnicodeDecodeError,
    ) as exc:
        raise TraceError(p, f"corrupt recording ({exc.__class__.__name__}: {exc})") from None
    return Recording(readings, regions, span_s[0], span_s[1], meta)
