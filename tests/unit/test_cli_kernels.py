"""``archline kernels``: the listing per architecture, PTX written for it, one-line errors for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from archline.cli.app import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table at 200 columns whatever width an earlier test in this worker left the console at."""
    from archline.cli._common import console

    monkeypatch.setattr(console, "width", 200)


def _run(args: list[str]) -> tuple[int, str]:
    res = runner.invoke(app, ["kernels", *args], env={"COLUMNS": "200"})
    return res.exit_code, res.output


def test_lists_needs_and_skip_reasons_for_an_architecture() -> None:
    code, out = _run(["--arch", "sm_75", "--only", "arith.bf16.fma", "--only", "arith.fp32.add"])
    assert code == 0, out
    assert "arith.fp32.add" in out and "sm_75, PTX 6.3" in out
    assert "sm_80+, PTX 7.0" in out and "skip: needs compute capability 8.0" in out
    assert "2 benchmarks; 1 run on sm_75 (Turing, compute capability 7.5), 1 skipped" in out.replace("\n", " ")


def test_emit_writes_the_ptx_of_runnable_kernels_for_the_target(tmp_path: Path) -> None:
    code, out = _run(
        ["--arch", "sm_120", "--only", "arith.bf16.fma", "--only", "inst.add.bf16", "--emit", str(tmp_path)]
    )
    assert code == 0, out
    files = sorted(p.name for p in tmp_path.iterdir())
    assert "arith.bf16.fma.ptx" in files and "inst.add.bf16.single.ptx" in files
    head = (tmp_path / "arith.bf16.fma.ptx").read_text().splitlines()[:2]
    assert head == [".version 8.7", ".target sm_120"]
    assert f"wrote {len(files)} PTX files for sm_120" in out


def test_emit_leaves_out_kernels_the_target_cannot_run(tmp_path: Path) -> None:
    code, out = _run(["--arch", "sm_80", "--only", "inst.add.bf16", "--emit", str(tmp_path)])
    assert code == 0, out
    assert list(tmp_path.iterdir()) == []
    assert "needs compute capability 9.0" in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--arch", "sm_70"], "CUDA 12.x"),
        (["--arch", "sm_72"], "Volta"),
        (["--arch", "sm_87"], "use --arch sm_86"),
        (["--arch", "gfx90a"], "unknown architecture"),
        (["--only", "nothing.like.this"], "no benchmark matches"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    code, out = _run(args)
    assert code == 2
    assert needle in out
    assert "Traceback" not in out and len(out.strip().splitlines()) == 1
