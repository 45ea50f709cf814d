"""Run directories: versioned manifest, atomic writes, CSV/JSON tables that any machine can read back.

Over 400 lines on purpose: the manifest, the atomic writers and the run-directory life cycle
(open, finish, interrupted) are one contract that every layer writes through.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import gzip
import io
import json
import lzma
import math
import os
import platform
import socket
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple

from archline.errors import RunDirError

__all__ = [
    "MANIFEST_NAME",
    "RUN_SCHEMA",
    "SCHEMA_VERSION",
    "Manifest",
    "RunDir",
    "RunStatus",
    "atomic_open",
    "atomic_write_bytes",
    "atomic_write_text",
    "package_versions",
    "read_csv",
    "to_jsonable",
    "write_csv",
    "write_json",
]

RUN_SCHEMA = "archline.run"
SCHEMA_VERSION = 1
MANIFEST_NAME = "manifest.json"

RunStatus = Literal["running", "complete", "interrupted", "failed"]

_PACKAGES = (
    "archline",
    "numpy",
    "scipy",
    "matplotlib",
    "nvidia-ml-py",
    "cuda-core",
    "cuda-bindings",
    "cupti-python",
    "cupy-cuda13x",
    "cupy-cuda12x",
    "torch",
    "typer",
    "rich",
)


# --------------------------------------------------------------------------- atomic files


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path``; on success rename it over ``path``.

    If the block raises (or the process is interrupted), ``path`` keeps its old content
    and the temporary file is removed, so nothing is ever left half-written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    binary = "b" in mode
    try:
        with os.fdopen(fd, mode, encoding=None if binary else encoding, newline=None if binary else "") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates 0600; give the file the mode a plain open() would have.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically (temporary file, then rename)."""
    with atomic_open(path, "w") as fh:
        fh.write(text)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, then rename)."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)


def to_jsonable(obj: Any) -> Any:
    """Convert dataclasses, numpy scalars/arrays, paths and non-finite floats to JSON values.

    NaN and infinities become ``None`` so the output is strict JSON.
    """
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "__dataclass_fields__"):
        return to_jsonable(asdict(obj))
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    tolist = getattr(obj, "tolist", None)
    if callable(tolist):  # numpy scalar or array
        return to_jsonable(tolist())
    item = getattr(obj, "item", None)
    if callable(item):
        return to_jsonable(item())
    return str(obj)


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented strict JSON, atomically."""
    atomic_write_text(path, json.dumps(to_jsonable(obj), indent=2, sort_keys=False) + "\n")


def _fmt_cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):  # numpy 2 float64 is a float subclass: repr(float(v)), not repr(v)
        return "" if not math.isfinite(v) else repr(float(v))
    if hasattr(v, "item") and callable(v.item):
        return _fmt_cell(v.item())
    return str(v)


def write_csv(
    path: str | os.PathLike[str],
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
) -> None:
    """Write tidy rows to CSV atomically. Columns default to the union of keys, in first-seen order."""
    rows = list(rows)
    if columns is None:
        seen: dict[str, None] = {}
        for r in rows:
            for k in r:
                seen.setdefault(k, None)
        columns = list(seen)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([_fmt_cell(r.get(c)) for c in columns])
    atomic_write_text(path, buf.getvalue())


def _parse_cell(s: str | None) -> Any:
    if s is None or s == "":
        return None
    if s in ("true", "false"):
        return s == "true"
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def read_csv(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a CSV written by :func:`write_csv`, converting numbers and booleans back."""
    header, rows, _ = read_csv_cells(path)
    return [{k: _parse_cell(v) for k, v in zip(header, row, strict=True)} for row in rows]


class CsvCells(NamedTuple):
    """A CSV's header and rows as the strings they hold, each row as wide as the header, with the file line each row
    starts on (1 is the first)."""

    header: list[str]
    rows: list[list[str]]
    lines: list[int]


def read_csv_cells(path: str | os.PathLike[str]) -> CsvCells:
    """A CSV's header and its rows as the strings they hold, plain or compressed (``.csv.gz``, ``.csv.xz``: large
    recorded tables are shipped so); for readers that convert each column as its type says. Blank lines are skipped,
    before the header too; each row's line in the file is kept (a quoted cell may span lines), for errors to name. A
    short row's missing cells are empty (read as None, as csv.DictReader gives them), a long row's extra ones
    dropped."""
    p = Path(path)
    rows: list[list[str]] = []
    lines: list[int] = []
    try:
        opener: Any = {".gz": gzip.open, ".xz": lzma.open}.get(p.suffix)
        with opener(p, "rt", newline="", encoding="utf-8") if opener else p.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            at = 1
            for r in reader:
                if r:
                    rows.append(r)
                    lines.append(at)
                at = reader.line_num + 1
    except FileNotFoundError:
        raise RunDirError(f"{p}: file not found") from None
    except (csv.Error, UnicodeDecodeError, OSError, EOFError, lzma.LZMAError) as exc:
        raise RunDirError(f"{p}: not a readable CSV file ({exc})") from None
    if not rows:
        return CsvCells([], [], [])
    header, w = rows[0], len(rows[0])
    body = [r if len(r) == w else (r + [""] * w)[:w] for r in rows[1:]]
    return CsvCells(header, body, lines[1:])


# --------------------------------------------------------------------------- manifest


def package_versions(names: Iterable[str] = _PACKAGES) -> dict[str, str]:
    """Installed versions of the packages that matter to a measurement (missing ones left out)."""
    out: dict[str, str] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            continue
    return out


def _now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Manifest:
    """What a run directory holds and under which conditions it was measured.

    ``gpu`` holds static facts (name, UUID, compute capability, SM count, memory, driver and
    CUDA versions); ``state_before``/``state_after`` hold the card's settings and readings
    (clocks in MHz, power limit in W, persistence mode, temperature in °C, throttle
    reasons) as archline found them: archline never changes them.
    """

    kind: str
    status: RunStatus = "running"
    schema: str = RUN_SCHEMA
    schema_version: int = SCHEMA_VERSION
    created_utc: str = field(default_factory=_now_utc)
    finished_utc: str | None = None
    command: tuple[str, ...] = ()
    host: dict[str, Any] = field(default_factory=dict)
    gpu: dict[str, Any] = field(default_factory=dict)
    state_before: dict[str, Any] = field(default_factory=dict)
    state_after: dict[str, Any] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, kind: str, **kw: Any) -> Manifest:
        """A manifest for a new run on this host, with package versions filled in."""
        host = {
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
        }
        kw.setdefault("command", tuple(sys.argv))
        return cls(kind=kind, host=host, packages=package_versions(), **kw)

    def with_(self, **changes: Any) -> Manifest:
        """A copy with some fields changed (records are immutable)."""
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = to_jsonable(self)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any], source: str = "manifest") -> Manifest:
        if d.get("schema") != RUN_SCHEMA:
            raise RunDirError(f"{source}: not an archline run manifest (schema {d.get('schema')!r})")
        ver = d.get("schema_version")
        if ver != SCHEMA_VERSION:
            raise RunDirError(
                f"{source}: schema version {ver} is not supported by this archline (expects {SCHEMA_VERSION})"
            )
        known = set(cls.__dataclass_fields__)
        fields = cls.__dataclass_fields__.values()
        required = [f.name for f in fields if f.default is MISSING and f.default_factory is MISSING]
        if missing := [k for k in required if k not in d]:
            raise RunDirError(f"{source}: malformed manifest (no {', '.join(repr(k) for k in missing)} field)")
        kw = {k: v for k, v in d.items() if k in known}
        for k in ("command", "notes"):
            if k in kw and kw[k] is not None:
                kw[k] = tuple(kw[k])
        try:
            return cls(**kw)
        except TypeError as exc:
            raise RunDirError(f"{source}: malformed manifest ({exc})") from None


# --------------------------------------------------------------------------- run directory


_TRACE_SUFFIXES = (".csv", ".gz", ".npz", ".parquet", ".arrow", ".feather")


class RunDir:
    """A directory holding one run: ``manifest.json`` plus tables, traces and the report.

    Every file is written atomically; the manifest's ``status`` says whether the run finished.
    """

    def __init__(self, path: str | os.PathLike[str], manifest: Manifest) -> None:
        self.path = Path(path)
        self._manifest = manifest

    # -- creation / opening
    @classmethod
    def create(cls, path: str | os.PathLike[str], manifest: Manifest, *, overwrite: bool = False) -> RunDir:
        """Create ``path`` and write the initial manifest.

        An existing run directory is refused unless ``overwrite``; an existing non-empty
        directory that is not a run directory is always refused.
        """
        p = Path(path)
        if p.exists():
            if not p.is_dir():
                raise RunDirError(f"{p}: exists and is not a directory")
            if any(p.iterdir()):
                if not (p / MANIFEST_NAME).exists():
                    raise RunDirError(f"{p}: directory is not empty and is not an archline run directory")
                if not overwrite:
                    raise RunDirError(f"{p}: run directory already exists (use --force to overwrite)")
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunDirError(f"{p}: cannot create directory ({exc.strerror})") from None
        rd = cls(p, manifest)
        rd.write_manifest()
        return rd

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> RunDir:
        """Open an existing run directory, validating its manifest."""
        p = Path(path)
        if p.is_file():
            hint = " (a power trace? archline analyze reads traces)" if p.suffix.lower() in _TRACE_SUFFIXES else ""
            raise RunDirError(f"{p}: is a file, not a run directory{hint}")
        if not p.is_dir():
            raise RunDirError(f"{p}: no such run directory")
        mp = p / MANIFEST_NAME
        if not mp.is_file():
            raise RunDirError(f"{p}: not an archline run directory (no {MANIFEST_NAME})")
        try:
            d = json.loads(mp.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RunDirError(f"{mp}: corrupt manifest ({exc})") from None
        if not isinstance(d, dict):
            raise RunDirError(f"{mp}: corrupt manifest (not a JSON object)")
        return cls(p, Manifest.from_json(d, source=str(mp)))

    # -- manifest
    @property
    def manifest(self) -> Manifest:
        return self._manifest

    def update_manifest(self, **changes: Any) -> Manifest:
        """Replace fields of the manifest and write it (atomically)."""
        self._manifest = self._manifest.with_(**changes)
        self.write_manifest()
        return self._manifest

    def write_manifest(self) -> None:
        write_json(self.path / MANIFEST_NAME, self._manifest.to_json())

    def finish(self, status: RunStatus = "complete", **changes: Any) -> Manifest:
        """Mark the run finished with ``status`` and record the time."""
        return self.update_manifest(status=status, finished_utc=_now_utc(), **changes)

    # -- files
    def file(self, name: str) -> Path:
        """The path of ``name`` inside the run directory (sub-folders are created)."""
        p = self.path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def register(self, name: str, description: str) -> None:
        files = dict(self._manifest.files)
        files[name] = description
        self.update_manifest(files=files)

    def write_json(self, name: str, obj: Any) -> Path:
        p = self.file(name)
        write_json(p, obj)
        return p

    def write_text(self, name: str, text: str) -> Path:
        p = self.file(name)
        atomic_write_text(p, text)
        return p

    def write_csv(self, name: str, rows: Iterable[Mapping[str, Any]], columns: Sequence[str] | None = None) -> Path:
        p = self.file(name)
        write_csv(p, rows, columns)
        return p

    def read_json(self, name: str) -> Any:
        p = self.path / name
        try:
            return json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RunDirError(f"{p}: missing from the run directory") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RunDirError(f"{p}: corrupt JSON ({exc})") from None

    def read_csv(self, name: str) -> list[dict[str, Any]]:
        p = self.path / name
        if not p.is_file():
            raise RunDirError(f"{p}: missing from the run directory")
        return read_csv(p)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r}, kind={self._manifest.kind!r}, status={self._manifest.status!r})"
