"""Power traces of any size: CSV (plain or gzip), Parquet and Arrow IPC read in chunks with pyarrow.

The columns ``time_s`` and ``power_w`` are streamed batch by batch into two growing float64 arrays (nothing else
of the file is kept), so a one-hour 20 kHz trace (72 M rows) needs its 1.2 GB of samples and little more. A
``progress(done_bytes, total_bytes)`` callback is called after each batch.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from archline.errors import TraceError

__all__ = ["TRACE_FORMATS", "read_columns", "trace_format"]

F64 = NDArray[np.float64]
Progress = Callable[[int, int], None]

#: Suffix → format. ``.csv.gz`` is CSV through gzip.
TRACE_FORMATS = {
    ".csv": "csv",
    ".gz": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
    ".feather": "arrow",
    ".ipc": "arrow",
}

_BLOCK_BYTES = 16 << 20
#: The first block of a CSV read to learn its column names (pyarrow parses a whole block to open a file).
_HEAD_BYTES = 1 << 20


def trace_format(path: Path) -> str:
    """csv, parquet or arrow, from the file name (``.csv.gz`` is gzip CSV); TraceError for another suffix."""
    fmt = TRACE_FORMATS.get(path.suffix.lower())
    if fmt is None or (path.suffix.lower() == ".gz" and not path.name.lower().endswith(".csv.gz")):
        raise TraceError(path, "not a trace file: give a .csv, .csv.gz, .parquet, .arrow/.feather or .npz file")
    return fmt


class _Growing:
    """A float64 column filled batch by batch; sized from the first batch's bytes per row, so it is copied
    about once, early, while it is small."""

    def __init__(self) -> None:
        self.buf = np.empty(0, np.float64)
        self.n = 0

    def reserve(self, rows: int) -> None:
        if rows > self.buf.size:
            grown = np.empty(rows, np.float64)
            grown[: self.n] = self.buf[: self.n]
            self.buf = grown

    def add(self, x: F64) -> None:
        need = self.n + x.size
        self.reserve(need if need <= self.buf.size else max(need, int(self.buf.size * 1.25)))
        self.buf[self.n : need] = x
        self.n = need

    def done(self) -> F64:
        # A view of a buffer at most ~3 % too long costs less than a copy of it would at its peak.
        return self.buf[: self.n] if self.n >= 0.9 * self.buf.size else self.buf[: self.n].copy()


def _names(path: Path, names: list[str], wanted: tuple[str, ...]) -> list[str]:
    """The file's own spelling of each wanted column (matched without case)."""
    lower = {n.strip().lower().lstrip("\ufeff"): n for n in names}
    out = []
    for w in wanted:
        if w not in lower:
            raise TraceError(path, f"has no {w!r} column (found: {', '.join(names)})")
        out.append(lower[w])
    return out


def _csv_batches(path: Path, wanted: tuple[str, ...]) -> Iterator[tuple[Any, int]]:
    import pyarrow as pa
    from pyarrow import csv

    raw = pa.OSFile(str(path), "rb")
    stream = pa.CompressedInputStream(raw, "gzip") if path.name.lower().endswith(".gz") else raw
    # '#' comment lines before the header are skipped here; pyarrow has no comment syntax.
    skip = _comment_lines(path)
    probe = csv.ReadOptions(block_size=_HEAD_BYTES, skip_rows=skip)
    head = csv.open_csv(stream, read_options=probe, convert_options=csv.ConvertOptions(column_types={}))
    cols = _names(path, head.schema.names, wanted)
    head.close()
    stream = pa.OSFile(str(path), "rb")
    if path.name.lower().endswith(".gz"):
        stream = pa.CompressedInputStream(stream, "gzip")
    conv = csv.ConvertOptions(include_columns=cols, column_types=dict.fromkeys(cols, pa.float64()))
    read = csv.ReadOptions(block_size=_BLOCK_BYTES, skip_rows=skip)
    reader = csv.open_csv(stream, read_options=read, convert_options=conv)
    for batch in reader:
        yield batch.select(cols), int(raw.tell())


def _comment_lines(path: Path) -> int:
    import gzip

    opener: Any = gzip.open if path.name.lower().endswith(".gz") else open
    n = 0
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            s = line.strip()
            if s and not s.startswith("#"):
                return n
            n += 1
    return n


def _parquet_batches(path: Path, wanted: tuple[str, ...]) -> Iterator[tuple[Any, int]]:
    from pyarrow import parquet

    f = parquet.ParquetFile(str(path))
    cols = _names(path, f.schema_arrow.names, wanted)
    total, done = max(f.metadata.num_rows, 1), 0
    size = path.stat().st_size
    for batch in f.iter_batches(batch_size=1 << 20, columns=cols):
        done += batch.num_rows
        yield batch.select(cols), size * done // total


def _arrow_batches(path: Path, wanted: tuple[str, ...]) -> Iterator[tuple[Any, int]]:
    import pyarrow as pa
    from pyarrow import ipc

    source = pa.memory_map(str(path), "r")
    try:
        reader: Any = ipc.open_file(source)
        batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
    except pa.ArrowInvalid:  # the streaming format (.arrows) rather than the file format
        source.seek(0)
        reader = ipc.open_stream(source)
        batches = iter(reader)
    cols = _names(path, reader.schema.names, wanted)
    for batch in batches:
        yield batch.select(cols), int(source.tell())


def _float64(a: Any) -> F64:
    """A pyarrow column as float64 (a null as NaN), viewed in place where it already is one.

    Read from the column's data buffer: pyarrow's own ``to_numpy`` imports pandas first (0.1–0.2 s).
    """
    import pyarrow as pa

    if a.type != pa.float64():
        a = a.cast(pa.float64())
    if a.null_count:
        a = a.fill_null(float("nan"))
    if len(a) == 0:
        return np.empty(0, np.float64)
    return np.frombuffer(a.buffers()[1], dtype=np.float64, count=len(a), offset=8 * a.offset)


def _halve(t: _Growing, w: _Growing) -> None:
    """Merge stored bins in pairs (time: the later stamp; power: the mean); an odd last bin stays as it is."""
    t_new, w_new = _pairs(t.buf[: t.n], w.buf[: w.n])
    t.n, w.n = t_new.size, w_new.size
    t.buf[: t.n], w.buf[: w.n] = t_new, w_new


def _pairs(t: F64, w: F64, t_prev: float | None = None) -> tuple[F64, F64]:
    """Bins merged in pairs: the later stamp, the mean weighted by each bin's time since the stamp before it (the
    first bin of the trace, with no stamp before it, counts as long as the next one)."""
    m = (t.size // 2) * 2
    if m == 0:
        return t, w
    d = _gaps(t, t_prev)
    d0, d1 = d[0:m:2], d[1:m:2]
    merged = (w[0:m:2] * d0 + w[1:m:2] * d1) / np.maximum(d0 + d1, 1e-300)
    return np.concatenate([t[1:m:2], t[m:]]), np.concatenate([merged, w[m:]])


def _bins(t: F64, w: F64, k: int, t_prev: float | None) -> tuple[F64, F64]:
    """Rows averaged in bins of k (``t.size`` a multiple of k), each row weighted by its time since the one before."""
    d = _gaps(t, t_prev)
    total = d.reshape(-1, k).sum(axis=1)
    pos = total > 0
    mean = (w * d).reshape(-1, k).sum(axis=1) / np.where(pos, total, 1.0)
    if not pos.all():  # a bin of equal stamps: the plain mean of its rows
        mean = np.where(pos, mean, w.reshape(-1, k).mean(axis=1))
    return t[k - 1 :: k], mean


def _gaps(t: F64, t_prev: float | None) -> F64:
    """Each row's time since the one before (``t_prev`` before the first; with none, the first row counts as
    long as the second)."""
    d = np.empty_like(t)
    np.subtract(t[1:], t[:-1], out=d[1:])
    if t_prev is not None:
        d[0] = t[0] - t_prev
    else:
        d[0] = d[1] if t.size > 1 else 1.0
    return d


class _Binner:
    """Averages consecutive rows in bins of ``k`` as they stream by (the last row's time stamps the bin). When
    the stored bins pass ``max_rows``, they are merged in pairs and ``k`` doubles: memory stays bounded and the
    whole trace ends as max_rows/2 to max_rows bins. For a meter whose rows each average the power since the
    previous row, a bin's mean is the mean power over the bin: energy is conserved."""

    def __init__(self, max_rows: int) -> None:
        if max_rows < 2:
            raise ValueError("max_rows must be at least 2")
        self.k = 1
        self.max_rows = max_rows
        self.last_t: float | None = None
        self.carry: tuple[F64, F64] | None = None

    def feed(self, t: F64, w: F64, out: tuple[_Growing, _Growing]) -> None:
        if self.carry is not None:
            t, w = np.concatenate([self.carry[0], t]), np.concatenate([self.carry[1], w])
            self.carry = None
        k = self.k
        m = (t.size // k) * k
        if m < t.size:
            self.carry = (t[m:].copy(), w[m:].copy())
        bt, bw = (t[:m], w[:m]) if k == 1 else _bins(t[:m], w[:m], k, self.last_t)
        # Stored bins and the batch at hand merge in pairs until they fit: both then hold bins of 2k rows.
        while out[0].n + bt.size > self.max_rows and (out[0].n >= 2 or bt.size >= 2):
            t_prev = float(out[0].buf[out[0].n - 1]) if out[0].n else None
            if out[0].n >= 2:
                _halve(*out)
            bt, bw = _pairs(bt, bw, t_prev)
            self.k *= 2
        for col, arr in zip(out, (bt, bw), strict=True):
            col.add(arr)
        if out[0].n:
            self.last_t = float(out[0].buf[out[0].n - 1])

    def finish(self, out: tuple[_Growing, _Growing]) -> None:
        if self.carry is not None and self.carry[0].size:
            t, w = self.carry
            bt, bw = _bins(t, w, t.size, self.last_t)
            out[0].add(bt)
            out[1].add(bw)
        self.carry = None


def read_columns(
    path: str | os.PathLike[str],
    wanted: tuple[str, ...] = ("time_s", "power_w"),
    progress: Progress | None = None,
    *,
    max_rows: int | None = None,
) -> tuple[list[F64], int]:
    """The ``wanted`` columns (time first, then power) of a trace file as float64 arrays, read in chunks; and the
    bin size: with ``max_rows``, a longer trace is averaged in bins of k rows as it streams (k = 1: as read).

    Raises :class:`TraceError` naming the file (and pyarrow's reason) when it cannot be read.
    """
    import pyarrow as pa

    p = Path(path)
    fmt = trace_format(p)
    if not p.is_file():
        raise TraceError(p, "file not found" if not p.exists() else "is not a file")
    total = p.stat().st_size
    batches = {"csv": _csv_batches, "parquet": _parquet_batches, "arrow": _arrow_batches}[fmt](p, wanted)
    cols = [_Growing() for _ in wanted]
    binner = _Binner(max_rows) if max_rows is not None and len(wanted) == 2 else None
    try:
        for batch, done in batches:
            arrays = [_float64(a) for a in batch.columns]
            if cols[0].n == 0 and done > 0:  # rows in the file, from the first batch's bytes per row
                rows = int(batch.num_rows * total / done * 1.03) + 16
                for col in cols:
                    col.reserve(min(rows, max_rows + 16) if max_rows is not None else rows)
            if binner is not None:
                binner.feed(arrays[0], arrays[1], (cols[0], cols[1]))
            else:
                for col, arr in zip(cols, arrays, strict=True):
                    col.add(arr)
            if progress is not None:
                progress(min(done, total), total)
        if binner is not None:
            binner.finish((cols[0], cols[1]))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, EOFError) as exc:
        raise TraceError(p, f"cannot be read as {fmt}: {str(exc).splitlines()[0]}") from None
    return [c.done() for c in cols], (binner.k if binner is not None else 1)
