"""Where the recorded runs shipped with archline live: the wheel's package data or the checkout's results/."""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

__all__ = ["SHIPPED_ENV", "shipped_roots"]

#: Environment variable naming an extra folder of recorded runs, searched first.
SHIPPED_ENV = "ARCHLINE_SHIPPED_DIR"
_PACKAGE_DATA = "_shipped"


def shipped_roots() -> list[Path]:
    """Folders that may hold recorded runs, in search order.

    ``$ARCHLINE_SHIPPED_DIR``; the wheel's package data ``archline/_shipped``; then, for an
    editable install, the first ``results/`` folder found walking up from this file to the
    project root (the folder with ``pyproject.toml``).
    """
    roots: list[Path] = []
    env = os.environ.get(SHIPPED_ENV)
    if env:
        roots.append(Path(env))
    try:
        data = importlib.resources.files("archline") / _PACKAGE_DATA
        if isinstance(data, Path) and data.is_dir():
            roots.append(data)
    except (ModuleNotFoundError, OSError):
        pass
    for parent in Path(__file__).resolve().parents:
        cand = parent / "results"
        if cand.is_dir():
            roots.append(cand)
            break
        if (parent / "pyproject.toml").is_file():
            break
    seen: set[Path] = set()
    unique = []
    for r in roots:
        key = r.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(r)
    return unique
