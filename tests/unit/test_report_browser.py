"""Every kind of HTML report, rendered from the shipped runs, in a real browser at 1280 px: no horizontal
overflow, every image and chart drawn, no console error. Uses Debian's chromium driven by Playwright; skipped
(saying why) only where either cannot be found."""

from __future__ import annotations

import shutil
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: One shipped run per kind (the smallest of each; the slowest to render first, so both cores stay busy); the quick
#: roofline run also writes the standalone roofline page.
RUNS = {
    "characterize": "h100/characterize-quick-roofline",
    "instructions": "h100/instructions",
    "sensor-calibration": "h100/sensor/calibration",
    "sensor-validation": "h100/sensor/validation",
    "measure-validation": "h100/measure-validation/kernels",
    "fleet": "h200/node/fleet",
    "run": "h100/run/cupy-mix",
    "attribute": "h100/run/attribution-validation/mix",
    "run (no raw traces)": "h100/run/duty-check-short/full-0",
    "roofline (ML model)": "h100/roofline-ml",
    "roofline (ML model, protocol v2)": "h100/roofline-ml-v2-1e142fa0",
    "replay": "h100/replay-rebuild/transformer",
    "replay (randomized design)": "h100/replay-design-smoke/transformer",
    "replay (clocks recorded)": "h100/replay-across-s22-GPU-73d62263/a/transformer",
    "run (several GPUs)": "h200/node/run-gpu-all/ddp_run",
}

_CHECK = """() => {
  const el = document.documentElement;
  const broken = [...document.images].filter(i => !(i.complete && i.naturalWidth > 0))
    .map(i => i.alt || i.src.slice(0, 40));
  const charts = [...document.querySelectorAll('div.vl-chart')];
  return {overflow: el.scrollWidth - el.clientWidth, broken: broken, images: document.images.length,
          charts: charts.length, drawn: charts.filter(c => c.querySelector('svg, canvas')).length};
}"""

#: Clicks the header of each sortable table's first all-numeric column twice: rows must come out in descending,
#: then ascending numeric order (a text sort would put 10 before 9).
_SORT_CHECK = """() => {
  const out = [];
  for (const t of document.querySelectorAll('table.sortable')) {
    const rows = () => [...t.tBodies[0].rows];
    const heads = [...t.tHead.rows[0].cells];
    const col = heads.findIndex((h, c) => c > 0 && rows().every(r => !isNaN(parseFloat(r.cells[c].dataset.v))));
    if (col < 0) continue;
    const vals = () => rows().map(r => parseFloat(r.cells[col].dataset.v));
    heads[col].click();
    const d = vals();
    heads[col].click();
    const a = vals();
    out.push(d.every((x, i) => i === 0 || d[i - 1] >= x) && a.every((x, i) => i === 0 || a[i - 1] <= x));
  }
  return out;
}"""


def _browser() -> str:
    pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install playwright)")
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no chromium on this machine (apt-get install chromium); the browser test cannot run")
    return exe


def _render(kind: str, out: Path) -> list[str]:
    from archline.report.registry import render_run

    rep = render_run(ROOT / "results" / RUNS[kind], out / kind.replace(" ", "-"))
    pages = [] if rep.html is None else [str(rep.html)]
    pages += [str(p) for p in rep.files if p.name == "roofline.html" and str(p) not in pages]
    return pages


def _building_blocks(out: Path) -> str:
    """A page of the shared building block (report.interactive) as other reports use it: a power timeline with
    kernel spans (60 000 readings, thinned), an x-y chart on log axes, and a wide table."""
    import numpy as np

    from archline.report.doc import Chart
    from archline.report.interactive import Span, chart_html, page, timeline_chart, xy_chart

    t = np.arange(60_000) * 1e-3
    p = 100 + 300 * ((t % 2) < 1) + np.random.default_rng(0).normal(0, 2, t.size)
    spans = [Span(float(a), float(a) + 1.0, f"kernel_{i % 3}_with_a_long_templated_name<float, 128>") for i, a in
             enumerate(range(0, 60, 2))]  # fmt: skip
    timeline = timeline_chart(t.tolist(), p.tolist(), spans)
    sweep = xy_chart({"a": [(2.0**k, 10.0 * k + 1) for k in range(12)]}, "block (threads)", "GB/s", log_x=True)
    wide = "<table><tr>" + "".join(f"<td>{'package 1.2.3, ' * 8}</td>" for _ in range(3)) + "</tr></table>"
    body = chart_html(Chart(timeline, "timeline"), "t1") + chart_html(Chart(sweep, "sweep"), "t2") + wide
    path = out / "blocks.html"
    path.write_text(page("building blocks", body), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    out = tmp_path_factory.mktemp("reports")
    with ProcessPoolExecutor(max_workers=2) as pool:  # matplotlib's PNGs take most of the time: both cores
        futures = {kind: pool.submit(_render, kind, out) for kind in RUNS}
        done = {kind: f.result() for kind, f in futures.items()}
    return {"interactive": [_building_blocks(out)], **done}


def test_every_report_kind_fits_1280px_and_draws_everything(pages: dict[str, list[str]], tmp_path: Path) -> None:
    exe = _browser()
    from playwright.sync_api import sync_playwright

    problems = [f"{k}: no HTML report" for k, p in pages.items() if not p]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        for kind, files in pages.items():
            for f in files:
                errors.clear()
                page.goto(Path(f).as_uri())
                page.wait_for_load_state("load")
                page.wait_for_function(
                    "() => [...document.querySelectorAll('div.vl-chart')].every(c => c.querySelector('svg, canvas'))",
                    timeout=15_000,
                )
                r = page.evaluate(_CHECK)
                shot = tmp_path / f"{kind}-{Path(f).stem}.png"
                page.screenshot(path=str(shot))
                where = f"{kind} ({Path(f).name})"
                if r["overflow"] > 0:
                    problems.append(f"{where}: {r['overflow']} px wider than the 1280 px window")
                if r["broken"]:
                    problems.append(f"{where}: images not loaded: {r['broken']}")
                if r["drawn"] != r["charts"]:
                    problems.append(f"{where}: {r['charts'] - r['drawn']} of {r['charts']} charts not drawn")
                if not all(page.evaluate(_SORT_CHECK)):
                    problems.append(f"{where}: a sortable table does not sort numerically")
                if errors:
                    problems.append(f"{where}: console errors: {errors[:3]}")
                assert shot.stat().st_size > 10_000
        browser.close()
    assert not problems, "\n".join(problems)
