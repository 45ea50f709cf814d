"""The recorded runs shipped with archline (results/<gpu>/<kind>/): find them, list them, render the default one."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from archline.errors import ArchlineError, RunDirError
from archline.records import MANIFEST_NAME, RunDir
from archline.records.shipped import SHIPPED_ENV, shipped_roots
from archline.report.registry import RenderedReport

__all__ = [
    "SHIPPED_ENV",
    "ShippedRun",
    "default_characterize_run",
    "find_shipped",
    "list_shipped",
    "render_shipped_default",
    "render_shipped_default_report",
    "same_run",
    "shipped_roots",
]


@dataclass(frozen=True)
class ShippedRun:
    """One recorded run: its ``results/<gpu>/<kind>`` folder, the manifest's kind, status and GPU name."""

    gpu: str
    kind: str
    status: str
    gpu_name: str
    path: Path
    #: the folder under its root, ``<gpu>/<kind>`` (or ``<gpu>/<kind>/<run>``), as `archline report` accepts
    key: str


def list_shipped(roots: Sequence[Path] | None = None) -> list[ShippedRun]:
    """Every valid run directory under ``<root>/<gpu>/``, at any depth, that is not part of another
    run directory (a fleet's per-GPU runs are listed by their fleet), sorted by GPU, kind, path.

    Folders whose manifest cannot be read are skipped: a broken recording must not hide the others.
    """
    out: list[ShippedRun] = []
    for root in shipped_roots() if roots is None else roots:
        if not root.is_dir():
            continue
        found = sorted(root.glob(f"*/**/{MANIFEST_NAME}"), key=lambda m: (len(m.parts), str(m)))
        runs: set[Path] = set()
        manifests = []
        for mp in found:
            if len(mp.relative_to(root).parts) < 3 or any(a in runs for a in mp.parent.parents):
                continue
            runs.add(mp.parent)
            manifests.append(mp)
        for mp in manifests:
            try:
                run = RunDir.open(mp.parent)
            except ArchlineError:
                continue
            gpu = mp.relative_to(root).parts[0]
            name = str(run.manifest.gpu.get("name") or gpu)
            key = "/".join(mp.parent.relative_to(root).parts)
            out.append(ShippedRun(gpu, run.manifest.kind, run.manifest.status, name, mp.parent, key))
    return sorted(out, key=lambda r: (r.gpu, r.kind, str(r.path)))


def find_shipped(key: str, roots: Sequence[Path] | None = None) -> ShippedRun | None:
    """The shipped run named ``<gpu>/<kind>`` (or ``<gpu>/<kind>/<run>``), case-insensitively, if any."""
    want = key.strip("/").lower()
    for r in list_shipped(roots):
        if want in (r.key.lower(), f"{r.gpu}/{r.kind}".lower()):
            return r
    return None


def default_characterize_run(roots: Sequence[Path] | None = None, *, quick: bool = False) -> ShippedRun:
    """The run `archline characterize` shows without a GPU: H100 if shipped, else any; complete runs
    first; with ``quick``, a shipped ``--quick`` run first."""
    runs = [r for r in list_shipped(roots) if r.kind == "characterize"]
    if not runs:
        where = ", ".join(str(p) for p in (shipped_roots() if roots is None else roots)) or "nowhere"
        raise RunDirError(f"no shipped characterization run found (looked in: {where})")

    def rank(r: ShippedRun) -> tuple[int, int, int, str]:
        h100 = "h100" in r.gpu.lower() or "h100" in r.gpu_name.lower()
        same_suite = ("quick" in r.key.lower()) == quick
        return (0 if same_suite else 1, 0 if h100 else 1, 0 if r.status == "complete" else 1, str(r.path))

    return min(runs, key=rank)


def render_shipped_default(
    out_dir: str | os.PathLike[str], roots: Sequence[Path] | None = None, *, quick: bool = False, force: bool = True
) -> Path:
    """Copy the default shipped characterization run into ``out_dir``, render its report there, return report.md.

    ``out_dir`` must be new, empty, or an earlier copy (a run directory); the shipped data
    itself is never written to (it may sit read-only in site-packages).
    """
    return render_shipped_default_report(out_dir, roots, quick=quick, force=force).markdown


def same_run(a: Path, b: Path) -> bool:
    """Whether two manifests record the same run (its kind, GPU and times): an earlier copy of a shipped run."""
    import json

    try:
        ma, mb = (json.loads(p.read_text(encoding="utf-8")) for p in (a, b))
    except (OSError, ValueError):
        return False
    keys = ("kind", "gpu", "created_utc", "finished_utc")
    return isinstance(ma, dict) and isinstance(mb, dict) and all(ma.get(k) == mb.get(k) for k in keys)


def render_shipped_default_report(
    out_dir: str | os.PathLike[str], roots: Sequence[Path] | None = None, *, quick: bool = False, force: bool = True
) -> RenderedReport:
    """:func:`render_shipped_default`, returning everything the renderer wrote. An earlier copy in
    ``out_dir`` is replaced only with ``force``."""
    from archline.report.characterize import render

    run = default_characterize_run(roots, quick=quick)
    out = Path(out_dir)
    if (out / MANIFEST_NAME).is_file() and out.resolve() != run.path.resolve():
        if not force:
            raise RunDirError(f"{out}: run directory already exists (use --force to overwrite, or -o another folder)")
        if not same_run(out / MANIFEST_NAME, run.path / MANIFEST_NAME):
            raise RunDirError(
                f"{out}: holds another run than the shipped one; without a GPU archline only shows the shipped run "
                "and does not overwrite a run of yours, even with --force (-o another folder)"
            )
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MANIFEST_NAME).is_file())):
        raise RunDirError(f"{out}: exists and is not empty or an archline run directory; choose another folder")
    try:
        if out.resolve() != run.path.resolve():
            shutil.copytree(run.path, out, dirs_exist_ok=True)
        banner = (
            f"No GPU was found on this machine, so this is the report of a run recorded on {run.gpu_name} "
            f"and shipped with archline (`{run.gpu}/{run.kind}`). Run `archline characterize` on a machine "
            "with an NVIDIA GPU to measure your own."
        )
        return render(out, out, banner=banner)
    except OSError as exc:
        raise RunDirError(f"{exc.filename or out}: cannot write the report ({exc.strerror or exc})") from None
