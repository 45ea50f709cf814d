"""The house's layers: every import in archline points down (function-local imports included), no file cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "archline"

#: Each layer and the layers it may import (errors sits under all; the package's own __init__ above all).
ALLOWED: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "core": frozenset({"errors"}),
    "hw": frozenset({"errors", "core"}),
    "records": frozenset({"errors", "core"}),
    "measurement": frozenset({"errors", "core", "hw", "records"}),
    "model": frozenset({"errors", "core", "records"}),
    "characterize": frozenset({"errors", "core", "hw", "records", "measurement", "model"}),
    "report": frozenset({"errors", "core", "hw", "records", "measurement", "model", "characterize"}),
    "cli": frozenset({"errors", "core", "hw", "records", "measurement", "model", "characterize", "report"}),
}


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every archline module this file imports, anywhere in it, with its line."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = node.module
            names = [base] + [f"{base}.{a.name}" for a in node.names]
            out += [(node.lineno, n) for n in names if n.split(".")[0] == "archline"]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "archline"]
        elif isinstance(node, ast.ImportFrom) and node.level:
            out.append((node.lineno, "<relative import>"))
    return out


def _files() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "archline"


def test_every_source_file_is_in_a_known_layer() -> None:
    layers = {_layer(_module(p)) for p in _files()} - {"archline", "__main__"}
    assert layers <= set(ALLOWED), f"files outside the house's layers: {sorted(layers - set(ALLOWED))}"


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_imports_point_down_only(layer: str) -> None:
    bad: list[str] = []
    for p in _files():
        mod = _module(p)
        if _layer(mod) != layer:
            continue
        for line, target in _imports(p):
            assert target != "<relative import>", f"{p.name}:{line}: relative import"
            tl = _layer(target)
            if tl != layer and tl != "errors" and tl not in ALLOWED[layer]:
                bad.append(f"{p.relative_to(SRC)}:{line} imports {target}")
    assert not bad, "upward or sideways imports:\n" + "\n".join(bad)


def test_no_import_cycle_between_files() -> None:
    mods = {_module(p): p for p in _files()}
    graph = {m: {t for _, t in _imports(p) if t in mods and t != m} for m, p in mods.items()}
    # A package's __init__ that re-exports its own submodules is not a cycle of ideas.
    for m in graph:
        graph[m] = {t for t in graph[m] if not (mods[t].name == "__init__" and m.startswith(t + "."))}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycle = [*stack[stack.index(t) :], t]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_the_checker_sees_a_planted_upward_import(tmp_path: Path) -> None:
    planted = tmp_path / "x.py"
    planted.write_text("def f() -> None:\n    from archline.cli.app import app\n")
    assert (2, "archline.cli.app") in _imports(planted)
    assert "cli" not in ALLOWED["measurement"]
