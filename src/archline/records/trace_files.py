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
    read = csv.ReadOptions(block_size=_BLOCK_BYTES, skip_rows=skip)
    head = csv.open_csv(stream, read_options=read, convert_options=csv.ConvertOptions(column_types={}))
    cols = _names(path, head.schema.names, wanted)
    head.close()
    stream = pa.OSFile(str(path), "rb")
    if path.name.lower().endswith(".gz"):
        stream = pa.CompressedInputStream(stream, "gzip")
    conv = csv.ConvertOptions(include_columns=cols, column_types=dict.fromkeys(cols, pa.float64()))
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


def read_columns(
    path: str | os.PathLike[str], wanted: tuple[str, ...] = ("time_s", "power_w"), progress: Progress | None = None
) -> list[F64]:
    """The ``wanted`` columns of a trace file as float64 arrays, read in chunks.

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
    try:
        for batch, done in batches:
            if cols[0].n == 0 and done > 0:  # rows in the file, from the first batch's bytes per row
                for col in cols:
                    col.reserve(int(batch.num_rows * total / done * 1.03) + 16)
            for col, arr in zip(cols, batch.columns, strict=True):
                col.add(np.asarray(arr.cast(pa.float64()).to_numpy(zero_copy_only=False), np.float64))
            if progress is not None:
                progress(min(done, total), total)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, EOFError) as exc:
        raise TraceError(p, f"cannot be read as {fmt}: {str(exc).splitlines()[0]}") from None
    return [c.done() for c in cols]
