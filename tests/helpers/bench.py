"""Load a script of ``benchmarks/`` as a module, for the tests of its pure parts and its CLI."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
#: Session 18's shipped attribution run sets, in the order docs/data/*_s18.txt list them.
S18_RUN_SETS = [
    ROOT / "results" / "h100" / "attribution-s18" / name
    for name in ("heldout-busy-GPU-c7661d05", "heldout-links-GPU-4626eead", "adhoc-busy-resnet50-GPU-c7661d05")
]


def load_bench(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as the module ``name`` (registered in ``sys.modules``, as dataclasses need)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def session_table(name: str, runs: list[Path], session: str, out: str) -> list[list[str]]:
    """``benchmarks/<name>.py`` on ``runs`` printed ``out`` (captured): it must equal
    docs/data/<name>_<session>.txt line for line; each row after the header, split on whitespace."""
    got = out.splitlines()
    assert got == (ROOT / "docs" / "data" / f"{name}_{session}.txt").read_text().splitlines(), (name, runs)
    return [line.split() for line in got[1:]]
