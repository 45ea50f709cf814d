"""`archline report`: renders any run directory, dispatches by kind, fails in one line on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archline.cli.app import app
from archline.records import RunDir
from archline.report import registry
from archline.report.registry import RenderedReport, register_renderer, unregister_renderer
from tests.helpers.rundirs import make_characterize_run, make_instructions_run

runner = CliRunner()


def _fails_in_one_line(args: list[str], *expect: str, code: int = 2) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == code, res.output
    err = res.stderr.strip()
    assert err.startswith("archline: error:")
    assert "\n" not in err, err
    assert "Traceback" not in res.output
    for e in expect:
        assert e in err, err
    return err


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "run"
    make_characterize_run(path, sweeps=False)
    return path


def test_report_prints_where_the_report_is(run_dir: Path) -> None:
    res = runner.invoke(app, ["report", str(run_dir)])
    assert res.exit_code == 0, res.output
    assert f"report: {run_dir / 'report.md'}" in res.stdout
    assert f"html:   {run_dir / 'report.html'}" in res.stdout
    assert (run_dir / "report.md").is_file()


def test_report_json_and_out_folder(run_dir: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["report", str(run_dir), "-o", str(tmp_path / "out"), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["kind"] == "characterize"
    assert d["status"] == "complete"
    assert Path(d["report"]) == tmp_path / "out" / "report.md"
    assert Path(d["report"]).is_file() and Path(d["html"]).is_file()
    assert all(Path(f).is_file() for f in d["files"])


def test_report_dispatches_instructions(tmp_path: Path) -> None:
    make_instructions_run(tmp_path / "inst")
    res = runner.invoke(app, ["report", str(tmp_path / "inst"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["kind"] == "instructions"
    assert "Table I" in (tmp_path / "inst" / "report.md").read_text(encoding="utf-8")


def test_report_dispatches_to_a_registered_renderer(tmp_path: Path) -> None:
    seen: list[Path] = []

    def fake(run: RunDir, out: Path) -> RenderedReport:
        seen.append(run.path)
        md = out / "report.md"
        md.write_text("# roofline\n", encoding="utf-8")
        return RenderedReport(run.manifest.kind, md, None, (md,), run.manifest.status)

    register_renderer("test-plugin", fake)
    path = tmp_path / "roof"
    make_characterize_run(path, sweeps=False, targets=False)
    RunDir.open(path).update_manifest(kind="test-plugin")
    try:
        res = runner.invoke(app, ["report", str(path)])
    finally:
        unregister_renderer("test-plugin")
    assert res.exit_code == 0, res.output
    assert seen == [path]
    assert "report:" in res.stdout and "html:" not in res.stdout


def test_unknown_kind_lists_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "odd"
    make_characterize_run(path, sweeps=False, targets=False)
    RunDir.open(path).update_manifest(kind="bogus")
    _fails_in_one_line(["report", str(path)], "'bogus'", "characterize", "instructions")


def test_missing_directory(tmp_path: Path) -> None:
    _fails_in_one_line(["report", str(tmp_path / "nope")], "no such run directory")


def test_directory_without_manifest(tmp_path: Path) -> None:
    _fails_in_one_line(["report", str(tmp_path)], "not an archline run directory")


def test_corrupt_manifest(run_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text("{not json", encoding="utf-8")
    _fails_in_one_line(["report", str(bad)], "corrupt manifest")


def test_wrong_schema_version(run_dir: Path, tmp_path: Path) -> None:
    d = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    d["schema_version"] = 99
    path = tmp_path / "v99"
    path.mkdir()
    (path / "manifest.json").write_text(json.dumps(d), encoding="utf-8")
    _fails_in_one_line(["report", str(path)], "schema version 99")


def test_missing_results(tmp_path: Path) -> None:
    path = tmp_path / "run"
    make_characterize_run(path, sweeps=False)
    (path / "results.csv").unlink()
    _fails_in_one_line(["report", str(path)], "results.csv: missing")


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (b"", "empty file"),
        (b"group,time_s\narithmetic,1\n", "missing column(s) name"),
        (b"name,group,time_s\na,arithmetic,1\nb,arithmetic,fast\n", "results.csv:3: column 'time_s' is not a number"),
        (b"name,group,time_s\na,arithmetic,1,9\n", "results.csv:2: corrupt results table: 4 fields"),
        (b"name,group,verified\na,arithmetic,maybe\n", "results.csv:2: column 'verified' is not true/false"),
        (b"name,group\n\xff\xfe\x00garbage\n", "not a readable CSV file"),
    ],
)
def test_corrupt_results(tmp_path: Path, content: bytes, expect: str) -> None:
    path = tmp_path / "run"
    make_characterize_run(path, sweeps=False)
    (path / "results.csv").write_bytes(content)
    _fails_in_one_line(["report", str(path)], expect)


def test_missing_instructions_table(tmp_path: Path) -> None:
    path = tmp_path / "inst"
    make_instructions_run(path)
    (path / "instructions.csv").unlink()
    _fails_in_one_line(["report", str(path)], "instructions.csv: missing")


def test_unwritable_output(run_dir: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    _fails_in_one_line(["report", str(run_dir), "-o", str(blocker / "out")], "cannot write the report")


def test_renderer_registry_validates_kind() -> None:
    with pytest.raises(ValueError):
        register_renderer(" ", lambda run, out: RenderedReport("x", out))
    assert {"characterize", "instructions"} <= set(registry.registered_kinds())


def test_a_renderer_that_cannot_load_is_a_one_line_error(tmp_path: Path) -> None:
    register_renderer("ghost", "archline.report.no_such_module:render")
    path = tmp_path / "ghost"
    make_characterize_run(path, sweeps=False, targets=False)
    RunDir.open(path).update_manifest(kind="ghost")
    try:
        _fails_in_one_line(["report", str(path)], "cannot be loaded")
    finally:
        unregister_renderer("ghost")


def test_values_no_measurement_gives_are_warned_about(tmp_path: Path) -> None:
    """A fresh user's review (session 17): a negative energy and 9999 W on a 700 W board rendered without a word.
    Now the report still renders, and a warning names each row's line; the shipped runs raise none."""
    import csv
    import shutil

    from archline.report.characterize import suspicious_rows
    from archline.report.rundata import load_run_data

    src = Path(__file__).resolve().parents[2] / "results/h100/characterize"
    assert suspicious_rows(load_run_data(src)) == []
    run = tmp_path / "run"
    shutil.copytree(src, run)
    with (run / "results.csv").open(newline="") as f:
        rows = list(csv.reader(f))
    head = rows[0]
    rows[3][head.index("energy_j")] = "-5"
    rows[4][head.index("avg_power_w")] = "9999"
    rows[5][head.index("time_s")] = "0"
    with (run / "results.csv").open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    res = CliRunner().invoke(app, ["report", str(run), "-o", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    assert "3 row(s) hold values no measurement gives" in res.output
    assert "results.csv:4" in res.output and "negative energy" in res.output and "above 2 × the 700 W" in res.output
    assert "time ≤ 0" in res.output
