"""The shipped recorded runs: search path, listing, the default run, and rendering it with no GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archline.cli.app import app
from archline.errors import RunDirError
from archline.records import RunDir
from archline.report import shipped
from archline.report.shipped import (
    default_characterize_run,
    find_shipped,
    list_shipped,
    render_shipped_default,
    shipped_roots,
)
from tests.helpers.rundirs import make_characterize_run, make_instructions_run

runner = CliRunner()


def _results(root: Path, *, h100: bool = True) -> Path:
    make_characterize_run(root / "h200" / "characterize", sweeps=False, gpu_name="NVIDIA H200")
    if h100:
        make_characterize_run(root / "h100" / "characterize", sweeps=False, status="interrupted")
    make_instructions_run(root / "h100" / "instructions")
    (root / "h100" / "broken").mkdir(parents=True)
    (root / "h100" / "broken" / "manifest.json").write_text("{", encoding="utf-8")
    return root


def test_list_skips_broken_runs_and_sorts(tmp_path: Path) -> None:
    root = _results(tmp_path / "results")
    runs = list_shipped([root])
    assert [(r.gpu, r.kind) for r in runs] == [
        ("h100", "characterize"),
        ("h100", "instructions"),
        ("h200", "characterize"),
    ]
    assert runs[0].status == "interrupted" and runs[0].key == "h100/characterize"
    assert runs[0].gpu_name == "NVIDIA H100 80GB HBM3"


def test_default_prefers_h100(tmp_path: Path) -> None:
    root = _results(tmp_path / "results")
    assert default_characterize_run([root]).gpu == "h100"


def test_default_falls_back_to_any_characterize_run(tmp_path: Path) -> None:
    root = _results(tmp_path / "results", h100=False)
    run = default_characterize_run([root])
    assert (run.gpu, run.kind) == ("h200", "characterize")


def test_no_characterize_run_is_a_one_line_error(tmp_path: Path) -> None:
    make_instructions_run(tmp_path / "results" / "h100" / "instructions")
    with pytest.raises(RunDirError, match="no shipped characterization run found"):
        default_characterize_run([tmp_path / "results"])


def test_find_by_key(tmp_path: Path) -> None:
    root = _results(tmp_path / "results")
    found = find_shipped("H200/characterize", [root])
    assert found is not None and found.path == root / "h200" / "characterize"
    assert find_shipped("h300/characterize", [root]) is None


def test_render_default_copies_and_never_writes_the_source(tmp_path: Path) -> None:
    root = _results(tmp_path / "results")
    md = render_shipped_default(tmp_path / "out", [root])
    assert md == tmp_path / "out" / "report.md"
    text = md.read_text(encoding="utf-8")
    assert "No GPU was found on this machine" in text and "h100/characterize" in text
    assert (tmp_path / "out" / "report.html").is_file()
    assert RunDir.open(tmp_path / "out").manifest.kind == "characterize"
    assert not (root / "h100" / "characterize" / "report.md").exists()
    # Rendering again into the same copy is allowed.
    assert render_shipped_default(tmp_path / "out", [root]) == md


def test_render_default_refuses_a_foreign_folder(tmp_path: Path) -> None:
    root = _results(tmp_path / "results")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep", encoding="utf-8")
    with pytest.raises(RunDirError, match="not empty"):
        render_shipped_default(tmp_path / "mine", [root])


def test_render_default_never_overwrites_a_run_of_the_users_even_with_force(tmp_path: Path) -> None:
    """Without a GPU, ``archline characterize -o myrun --force`` used to replace the user's own run with the shipped
    one; now it refuses, and an earlier copy of the shipped run is still rendered again."""
    import shutil

    root = _results(tmp_path / "results")
    mine = tmp_path / "mine"
    shutil.copytree(root / "h100" / "characterize", mine)
    m = json.loads((mine / "manifest.json").read_text())
    m["created_utc"] = "2026-11-26T00:00:00Z"  # measured at another time: another run
    (mine / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(RunDirError, match="holds another run than the shipped one"):
        render_shipped_default(mine, [root], force=True)
    assert json.loads((mine / "manifest.json").read_text())["created_utc"] == "2026-11-26T00:00:00Z"
    copy = render_shipped_default(tmp_path / "copy", [root])
    assert render_shipped_default(tmp_path / "copy", [root], force=True) == copy


def test_roots_include_env_and_project_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shipped.SHIPPED_ENV, str(tmp_path))
    roots = shipped_roots()
    assert roots[0] == tmp_path
    # An editable install finds the repository's results/ folder by walking up from the package.
    repo_results = Path(shipped.__file__).resolve().parents[3] / "results"
    if repo_results.is_dir():
        assert repo_results in [r.resolve() for r in roots]


def test_cli_without_dir_renders_the_shipped_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _results(tmp_path / "results")
    monkeypatch.setattr(shipped, "shipped_roots", lambda: [root])
    res = runner.invoke(app, ["report", "-o", str(tmp_path / "out"), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert Path(d["report"]) == tmp_path / "out" / "report.md"
    res = runner.invoke(app, ["report", "h200/characterize", "-o", str(tmp_path / "h200"), "--json"])
    assert res.exit_code == 0, res.output
    assert "# GPU characterization: NVIDIA H200" in (tmp_path / "h200" / "report.md").read_text(encoding="utf-8")
    res = runner.invoke(app, ["report", "--list", "--json"])
    assert res.exit_code == 0, res.output
    keys = [r["key"] for r in json.loads(res.stdout)["runs"]]
    assert keys == ["h100/characterize", "h100/instructions", "h200/characterize"]


def test_report_into_a_folder_holding_another_run_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``archline report`` wrote the shipped run's report into ./archline-report beside another run's files, and
    ``archline report DIR -o OTHER_RUN`` beside that run's: both now refuse, in one line, exit 2."""
    import shutil

    root = _results(tmp_path / "results")
    monkeypatch.setattr(shipped, "shipped_roots", lambda: [root])
    other = tmp_path / "other"
    shutil.copytree(root / "h100" / "characterize", other)
    m = json.loads((other / "manifest.json").read_text())
    m["created_utc"] = "2026-01-01T00:00:00Z"
    (other / "manifest.json").write_text(json.dumps(m))
    res = runner.invoke(app, ["report", "-o", str(other)])
    assert res.exit_code == 2 and "holds another run than the shipped one" in res.output
    res = runner.invoke(app, ["report", str(root / "h100" / "characterize"), "-o", str(other)])
    assert res.exit_code == 2 and "holds another run directory" in res.output
    assert len(res.output.strip().splitlines()) == 1
    res = runner.invoke(app, ["report", str(other), "-o", str(other)])  # its own folder: fine
    assert res.exit_code == 0, res.output
    copy = tmp_path / "copy"  # an earlier copy of the shipped run, rendered again by the shipped run's name: fine
    assert runner.invoke(app, ["report", "-o", str(copy)]).exit_code == 0
    res = runner.invoke(app, ["report", "h100/characterize", "-o", str(copy)])
    assert res.exit_code == 0, res.output
