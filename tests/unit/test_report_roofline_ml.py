"""The roofline report's ML section: the frozen protocol's figures and the post-hoc variant, from the shipped H100
run's files (or computed now where a file is missing), with sortable per-kernel tables."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from archline.model.build import fit_run_dir
from archline.model.ml import POSTHOC_LABEL
from archline.model.ml_run import ML_MODEL_FILE, ML_POSTHOC_FILE, ML_POSTHOC_PREDICTIONS_TABLE
from archline.report.roofline import RooflineSection, render_roofline
from archline.report.roofline_ml import FROZEN_TITLE, POSTHOC_TITLE, read_ml_records

SHIPPED = Path(__file__).resolve().parents[2] / "results" / "h100" / "roofline-ml"


def _copy(tmp: Path, *, posthoc: bool = True) -> Path:
    d = tmp / "run"
    d.mkdir()
    for f in SHIPPED.iterdir():
        if f.suffix in (".csv", ".json") and (posthoc or not f.name.startswith("roofline_ml_posthoc")):
            shutil.copy2(f, d / f.name)
    return d


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> RooflineSection:
    d = _copy(tmp_path_factory.mktemp("ml"))
    return render_roofline(d, d / "out")


def test_the_section_shows_the_frozen_figures_then_the_posthoc_variant(rendered: RooflineSection) -> None:
    md = rendered.markdown
    frozen, _, post = md.partition(POSTHOC_TITLE)
    assert FROZEN_TITLE in frozen and POSTHOC_LABEL in post
    assert "Board: NVIDIA H100 80GB HBM3 GPU-cab9fa05" in frozen and "π0 = 87.2 ± 10.8 W" in frozen
    assert "| held-out | 25 | 9.3 % | FAIL | 21.5 % | FAIL | 19.4 % | 13 | FAIL |" in frozen
    assert "| calibration | 11 | 9.0 % | FAIL | 18.6 % | FAIL | 16.4 % | 5 | FAIL |" in frozen
    # The eight scores, the chosen one marked; the new components; η per class.
    assert frozen.count("| `l1+instructions+activity` |") == 1 and "| `base` | 9.0 % | chosen |" in frozen
    assert "| tensor-core flop, BF16 (wgmma, random data) | pJ/flop | 0.692 | 0.014 | yes |" in frozen
    assert "| L1 byte (beyond L2 traffic) | pJ/B | 9.22 | 0.013 | no (not chosen) |" in frozen
    assert "| tensor cores | 0.835 | 4 |" in frozen
    assert "| `dgemm.n4096` | held-out | tensor_fp64 | yes | 1.920 | -9.7 % | +32.4 % | +46.7 % |" in frozen
    # The variant: its cap, its own summary and its kernels.
    assert "Cap: 775.2 W" in post and "nominal limit 700 W" in post
    assert "| held-out | 25 | 7.5 % | FAIL | 19.8 % | FAIL | 11.4 % | 12 | FAIL |" in post
    assert "| `dgemm.n4096` | held-out | tensor_fp64 | yes | 1.920 | -0.1 % | +30.6 % | +30.7 % |" in post
    assert "Components, π0 and η: as in the frozen model above." in post


def test_per_kernel_tables_sort_numerically_and_each_column_has_one_format(rendered: RooflineSection) -> None:
    html = rendered.html_fragment
    assert html.count('<table class="sortable">') == 2 and "<script>" in rendered.html_path.read_text()
    first = html[html.index('<table class="sortable">') :]
    first = first[: first.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", first)[1:]
    assert len(rows) == 36
    for row in rows:
        cells = re.findall(r'<td[^>]*?data-v="([^"]*)"[^>]*>([^<]*(?:<code>[^<]*</code>)?)</td>', row)
        energy, err_t = cells[4], cells[5]
        assert float(energy[0]) > 0 and re.fullmatch(r"\d+\.\d+", energy[1])
        assert re.fullmatch(r"[+-]\d+\.\d %", err_t[1]) and abs(float(err_t[0])) < 1


def test_a_missing_posthoc_file_is_computed_now_and_said_so(tmp_path: Path) -> None:
    d = _copy(tmp_path, posthoc=False)
    recs = read_ml_records(d, fit_run_dir(d, write=False).parameters)
    assert recs is not None
    frozen, post = recs
    assert frozen.source == ML_MODEL_FILE and post is not None and post.source.startswith("computed now")
    want = json.loads((SHIPPED / ML_POSTHOC_FILE).read_text())
    assert post.model["heldout"]["over_20pct"] == want["heldout"]["over_20pct"]
    assert not (d / ML_POSTHOC_FILE).exists() and not (d / ML_POSTHOC_PREDICTIONS_TABLE).exists()
    assert read_ml_records(d, None) == (frozen, None)


def test_a_run_without_ml_kernels_has_no_section(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    (d / "roofline_ml.csv").unlink()
    assert read_ml_records(d, fit_run_dir(d, write=False).parameters) is None
