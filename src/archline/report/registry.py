"""Which renderer turns a run directory of a given kind into a report; `archline report` dispatches here."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archline.errors import RunDirError, UnknownNameError
from archline.records import RunDir

__all__ = [
    "RenderedReport",
    "Renderer",
    "register_renderer",
    "registered_kinds",
    "render_run",
    "renderer_for",
    "unregister_renderer",
]


@dataclass(frozen=True)
class RenderedReport:
    """What a renderer wrote: the Markdown report, its HTML twin, every other file, and warnings to show."""

    kind: str
    markdown: Path
    html: Path | None = None
    files: tuple[Path, ...] = ()
    status: str = ""
    warnings: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "report": str(self.markdown),
            "html": None if self.html is None else str(self.html),
            "files": [str(p) for p in self.files],
            "status": self.status,
            "warnings": list(self.warnings),
            **self.extra,
        }


#: renderer(run, out_dir) → RenderedReport. It writes only under ``out_dir``.
Renderer = Callable[[RunDir, Path], RenderedReport]

_RENDERERS: dict[str, Renderer] = {}
#: Built-in kinds, imported on first use so `archline report` stays quick to start.
_BUILTIN: dict[str, str] = {
    "characterize": "archline.report.characterize:render",
    "instructions": "archline.report.instructions:render",
    "roofline": "archline.report.roofline:render",
    "run": "archline.report.run_report:render_run_report",
    "attribute": "archline.report.run_report:render_run_report",
    "sensor-calibration": "archline.report.sensor:render_calibration",
    "sensor-validation": "archline.report.sensor:render_validation",
    "measure-validation": "archline.report.measure_validation:render_measure_validation",
    "fleet": "archline.report.fleet:render",
    "replay": "archline.report.replay:render_replay",
}


def register_renderer(kind: str, fn: Renderer | str) -> None:
    """Make ``archline report`` render run directories whose manifest ``kind`` is ``kind`` with ``fn``.

    ``fn`` is a renderer, or ``"module:function"`` to import on first use. A later registration
    for the same kind replaces the earlier one (so a module can be reloaded).
    """
    if not kind or not kind.strip():
        raise ValueError("a renderer needs a non-empty kind")
    _RENDERERS.pop(kind, None)
    _BUILTIN.pop(kind, None)
    if isinstance(fn, str):
        _BUILTIN[kind] = fn
    else:
        _RENDERERS[kind] = fn


def unregister_renderer(kind: str) -> None:
    """Forget the renderer of ``kind`` (a plug-in's or a test's own kind)."""
    _RENDERERS.pop(kind, None)
    _BUILTIN.pop(kind, None)


def registered_kinds() -> tuple[str, ...]:
    return tuple(sorted(set(_RENDERERS) | set(_BUILTIN)))


def renderer_for(kind: str) -> Renderer:
    """The renderer for ``kind``; :class:`UnknownNameError` (one line, listing known kinds) if none."""
    fn = _RENDERERS.get(kind)
    if fn is not None:
        return fn
    target = _BUILTIN.get(kind)
    if target is None:
        raise UnknownNameError(
            f"no report renderer for run kind {kind!r} (known kinds: {', '.join(registered_kinds())})"
        )
    module, _, attr = target.partition(":")
    try:
        loaded: Renderer = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise UnknownNameError(f"the report renderer for run kind {kind!r} cannot be loaded ({exc})") from None
    _RENDERERS.setdefault(kind, loaded)
    return _RENDERERS[kind]


def render_run(path: str | os.PathLike[str] | RunDir, out_dir: str | os.PathLike[str] | None = None) -> RenderedReport:
    """Rebuild the report of the run directory ``path`` into ``out_dir`` (default: the run directory).

    Raises :class:`RunDirError` for a missing or corrupt run directory, or a folder it cannot write.
    """
    run = path if isinstance(path, RunDir) else RunDir.open(path)
    fn = renderer_for(run.manifest.kind)
    out = Path(out_dir) if out_dir is not None else run.path
    try:
        out.mkdir(parents=True, exist_ok=True)
        return fn(run, out)
    except OSError as exc:
        where = exc.filename or out
        reason = exc.strerror or str(exc)
        raise RunDirError(f"{where}: cannot write the report ({reason}); choose another folder with -o") from None
