"""The roofline report section: files written, tables carrying the model's numbers, one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from archline.errors import RunDirError
from archline.model.build import MODEL_FILE, fit_run_dir
from archline.model.reference import GTX_580
from archline.report.interactive import charts_available
from archline.report.roofline import (
    HTML_NAME,
    MARKDOWN_NAME,
    POWER_PLOT,
    ROOFLINE_PLOT,
    RooflineSection,
    render_roofline,
)
from tests.helpers.roofline_synth import H100_LIKE, write_run_dir

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = write_run_dir(tmp_path_factory.mktemp("report") / "run", H100_LIKE, np.random.default_rng(61))
    fit_run_dir(run)
    return run


@pytest.fixture(scope="module")
def rendered(run: Path, tmp_path_factory: pytest.TempPathFactory) -> RooflineSection:
    """The run's report, rendered once for the tests that read it (plots take most of the time)."""
    return render_roofline(run, tmp_path_factory.mktemp("out"))


def test_renderer_writes_markdown_html_and_plots(rendered: RooflineSection) -> None:
    sec = rendered
    for p in (sec.markdown_path, sec.html_path, *sec.plot_paths):
        assert p.is_file() and p.stat().st_size > 0
    assert {p.name for p in sec.plot_paths} == {ROOFLINE_PLOT, POWER_PLOT}
    for p in sec.plot_paths:
        assert p.read_bytes()[:8] == PNG_MAGIC
    assert sec.markdown_path.name == MARKDOWN_NAME and sec.html_path.name == HTML_NAME
    assert sec.markdown_path.read_text() == sec.markdown


def test_markdown_contains_the_table_rows(run: Path, rendered: RooflineSection) -> None:
    model = fit_run_dir(run, write=False)  # the same fit the report read from the run's model file
    md = rendered.markdown
    for title in ("Table III", "Table IV", "Table II", "Power cap", "Held-out kernels"):
        assert title in md
    for row in ("| ε_s | pJ/flop |", "| ε_mem | pJ/B |", "| π0 | W |", "| B_τ = τ_mem/τ_flop | flop/B |", "| η_flop"):
        assert row in md
    pi0 = model.fit.estimates["pi0_w"]
    assert f"{pi0.value:.3g} ± {pi0.stderr:.2g}" in md
    b = model.balances["single"]
    assert f"| B_τ = τ_mem/τ_flop | flop/B | {b.b_tau:.3g} ± {b.stderr['b_tau']:.2g} |" in md
    # Reference columns come from the paper's constants.
    assert f"| ε_s | pJ/flop | {model.fit.estimates['eps_s_j'].value * 1e12:.3g}" in md
    assert "| 99.7 | 371 |" in md
    assert f"{GTX_580.peak_flops_per_s['single'] * 1e-9:.6g}" in md
    assert model.race_to_halt.verdict["single"] in md
    assert "sgemm.n8192" in md
    assert "target ≤ 10 %" in md
    assert f"![Roofline and arch line]({ROOFLINE_PLOT})" in md
    assert "Machine-learning kernels" not in md  # no ML kernels in this run: no ML section


def test_html_fragment_is_a_section_with_escaped_tables(rendered: RooflineSection) -> None:
    html = rendered.html_fragment
    assert html.startswith('<section class="archline-roofline">')
    assert html.rstrip().endswith("</section>")
    assert html.count("<table>") == html.count("</table>") >= 5
    # Self-contained: the power line embedded, the roofline an interactive chart (or its PNG without vl-convert).
    assert html.count('<img src="data:image/png;base64,') == (1 if charts_available() else 2)
    assert html.count('class="vl-chart"') == (1 if charts_available() else 0)
    assert "B̂_ε" in html


def test_standalone_roofline_page_is_styled(rendered: RooflineSection) -> None:
    page = rendered.html_path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page and "max-width:1200px" in page


def test_renders_without_a_model_file_by_fitting_in_memory(tmp_path: Path) -> None:
    run = write_run_dir(tmp_path / "run", H100_LIKE, np.random.default_rng(62), heldout=False)
    sec = render_roofline(run)
    assert not (run / MODEL_FILE).exists()
    assert (run / MARKDOWN_NAME).is_file()
    assert "Held-out kernels" not in sec.markdown


def test_single_precision_run(tmp_path: Path) -> None:
    run = write_run_dir(tmp_path / "run", H100_LIKE, np.random.default_rng(63), heldout=False)
    rows = (run / "roofline_sweep.csv").read_text().splitlines()
    (run / "roofline_sweep.csv").write_text(
        "\n".join([rows[0], *[r for r in rows[1:] if r.startswith("single")]]) + "\n"
    )
    md = render_roofline(run).markdown
    assert "Synthetic H100 single" in md and "Synthetic H100 double" not in md
    assert "| ε_d |" not in md


def test_missing_sweep_is_a_run_dir_error(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="no roofline_sweep.csv"):
        render_roofline(tmp_path)


def test_archline_report_dispatches_to_the_roofline_renderer(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from archline.cli.app import app
    from archline.report.registry import register_renderer
    from archline.report.roofline import render

    register_renderer("roofline", render)  # what the lead's registration will do
    run = write_run_dir(tmp_path / "run", H100_LIKE, np.random.default_rng(64), heldout=False)
    res = CliRunner().invoke(app, ["report", str(run), "-o", str(tmp_path / "out"), "--json"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "out" / MARKDOWN_NAME).is_file()
    assert (tmp_path / "out" / POWER_PLOT).is_file()
