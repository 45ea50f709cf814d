"""Interactive plots for HTML reports: Vega-Lite charts embedded with their JavaScript (no network), and the page shell.

Why Vega-Lite: a chart is a JSON spec (data inline), so a renderer builds it as plain Python data and a test can
read it; the JavaScript (Vega, Vega-Lite, vega-embed: 0.9 MB minified, BSD-3) comes from the ``vl-convert-python``
wheel, so nothing is fetched when the report is built or viewed. Plotly's full bundle is 4.5 MB per page and its
partial bundles are not on PyPI. Without ``vl-convert-python`` a chart falls back to its PNG (the Markdown figure).

Other renderers use :func:`page` for a whole HTML page that fits a 1280 px window, and :class:`Chart` (a block of a
:class:`~archline.report.doc.Document`) or :func:`chart_html` for a chart.
"""

from __future__ import annotations

import functools
import html
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archline.report.doc import Chart

__all__ = [
    "PAGE_CSS",
    "Chart",
    "Span",
    "chart_html",
    "charts_available",
    "curves_chart",
    "page",
    "panels_chart",
    "thin_series",
    "timeline_chart",
    "vega_bundle_js",
    "xy_chart",
]

#: Fits a 1280 px window: text wraps, a table wider than the page scrolls inside its own box, numbers never wrap.
PAGE_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:1.5em auto;max-width:1200px;
padding:0 1em;color:#222;line-height:1.45;overflow-wrap:anywhere}
h1{border-bottom:2px solid #444;font-size:1.7em}h2{border-bottom:1px solid #bbb;margin-top:2em}
table{border-collapse:collapse;margin:0.8em 0;font-size:0.88em;display:block;max-width:100%;overflow-x:auto}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top;overflow-wrap:normal}
td{white-space:nowrap}td:first-child{text-align:left}
td.text{white-space:normal;text-align:left;min-width:12em;overflow-wrap:anywhere}
th{background:#f0f0f0;white-space:normal}th[aria-sort=descending]::after{content:' ▼'}
th[aria-sort=ascending]::after{content:' ▲'}th:first-child{text-align:left}
caption{caption-side:top;text-align:left;font-weight:600;padding:4px 0}
.notes{font-size:0.85em;color:#444;margin:0 0 1em 0}.notes p{margin:0.1em 0}
figure{margin:1em 0;max-width:100%}figure img{max-width:100%;height:auto;border:1px solid #ddd}
figcaption{font-size:0.9em;color:#444}code{background:#f4f4f4;padding:0 3px;overflow-wrap:anywhere}
.missing{color:#999}.vl-chart{width:100%;min-height:320px}
section{max-width:100%}
"""

_EMBED = """
document.querySelectorAll('div.vl-chart').forEach(function (el) {
  var spec = JSON.parse(document.getElementById(el.id + '-spec').textContent);
  vegaEmbed(el, spec, {actions: false, renderer: 'svg'}).catch(function (err) {
    el.textContent = 'chart failed to draw: ' + err;
  });
});
"""

#: Click a sortable table's header to sort its rows by the cells' ``data-v`` (numbers as numbers; a cell without
#: one, a missing value, last); click again to reverse.
_SORT = """
document.querySelectorAll('table.sortable').forEach(function (table) {
  var heads = table.querySelectorAll('thead th');
  heads.forEach(function (th, col) {
    th.style.cursor = 'pointer';
    th.title = 'sort by this column';
    th.addEventListener('click', function () {
      var desc = th.getAttribute('aria-sort') !== 'descending';
      heads.forEach(function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', desc ? 'descending' : 'ascending');
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      function key(r) { var c = r.cells[col]; return c && c.hasAttribute('data-v') ? c.getAttribute('data-v') : null; }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x === null || y === null) { return (x === null) - (y === null); }
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
        return desc ? -c : c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""

_MAX_POINTS = 4000
#: What the bundle runs: the three libraries as globals for the page's own script.
_GLOBALS = "window.vegaEmbed = vegaEmbed; window.vega = vega; window.vegaLite = vegaLite;"


@dataclass(frozen=True)
class Span:
    """A labelled time span drawn under a timeline (a kernel, a region), in seconds."""

    start_s: float
    end_s: float
    label: str


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "archline"


@functools.lru_cache(maxsize=1)
def vega_bundle_js() -> str | None:
    """Vega + Vega-Lite + vega-embed as one script (sets ``window.vegaEmbed``), or None without vl-convert-python.

    Building it takes vl-convert a few seconds, so it is cached per version under ``~/.cache/archline``.
    """
    try:
        import vl_convert
    except ImportError:
        return None
    version = f"{vl_convert.get_vega_embed_version()}-{vl_convert.get_vegalite_versions()[-1]}"
    cached = _cache_dir() / f"vega-bundle-{version}.js"
    try:
        return cached.read_text(encoding="utf-8")
    except OSError:
        pass
    js = vl_convert.javascript_bundle(_GLOBALS)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(js, encoding="utf-8")
        os.replace(tmp, cached)
    except OSError:
        pass  # a read-only home only costs the next report the same few seconds
    return js


def charts_available() -> bool:
    """True when charts can be embedded (vl-convert-python is installed)."""
    return vega_bundle_js() is not None


def chart_html(chart: Chart, ident: str) -> str:
    """A chart's ``<figure>``: the placeholder div and its spec as JSON (drawn by the script :func:`page` adds)."""
    spec = json.dumps(chart.spec, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    cap = html.escape(chart.caption, quote=False)
    return (
        f'<figure><div class="vl-chart" id="{ident}" role="img" aria-label="{html.escape(chart.caption)}"></div>'
        f'<script type="application/json" id="{ident}-spec">{spec}</script><figcaption>{cap}</figcaption></figure>'
    )


def page(title: str, body: str, *, with_charts: bool | None = None) -> str:
    """A whole self-contained HTML page: inline CSS, and the chart script when the body holds charts."""
    if with_charts is None:
        with_charts = 'class="vl-chart"' in body
    scripts = ""
    if with_charts:
        js = vega_bundle_js()
        if js is not None:
            scripts = f"<script>{js}</script>\n<script>{_EMBED}</script>\n"
    if '<table class="sortable">' in body:
        scripts += f"<script>{_SORT}</script>\n"
    head = (
        '<meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{PAGE_CSS}</style>"
    )
    return f'<!DOCTYPE html>\n<html lang="en"><head>{head}</head><body>\n{body}\n{scripts}</body></html>\n'


# --------------------------------------------------------------------------- spec builders


def _finite(*xs: float) -> bool:
    return all(math.isfinite(x) for x in xs)


def _axis(title: str, log: bool, fmt: str | None = None) -> dict[str, Any]:
    axis: dict[str, Any] = {"title": title, "labelOverlap": True}
    if fmt:
        axis["format"] = fmt
    scale: dict[str, Any] = {"type": "log", "nice": False} if log else {"zero": False}
    return {"axis": axis, "scale": scale}


def xy_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    x_title: str,
    y_title: str,
    *,
    log_x: bool = False,
    log_y: bool = False,
    points: bool = True,
    title: str = "",
) -> dict[str, Any]:
    """Lines (with points) of several named series of (x, y); titles carry the units, e.g. "power (W)"."""
    values = [
        {"series": name, "x": x, "y": y}
        for name, pts in series.items()
        for x, y in pts
        if _finite(x, y) and (not log_x or x > 0) and (not log_y or y > 0)
    ]
    spec: dict[str, Any] = {
        "$schema": "https://vega.github.io/schema/vega-lite/v6.json",
        "width": "container",
        "height": 300,
        "data": {"values": values},
        "mark": {"type": "line", "point": points, "tooltip": True},
        "encoding": {
            "x": {"field": "x", "type": "quantitative", **_axis(x_title, log_x)},
            "y": {"field": "y", "type": "quantitative", **_axis(y_title, log_y)},
            "color": {"field": "series", "type": "nominal", "title": None, "legend": {"orient": "bottom"}},
        },
        "params": [{"name": "zoom", "select": "interval", "bind": "scales"}],
    }
    if title:
        spec["title"] = title
    return spec


def thin_series(t_s: Sequence[float], power_w: Sequence[float]) -> list[dict[str, float]]:
    """At most ~_MAX_POINTS points: each bucket keeps its lowest and highest reading, so peaks stay visible."""
    n = len(t_s)
    if n <= _MAX_POINTS:
        return [{"t": t, "p": p} for t, p in zip(t_s, power_w, strict=True) if _finite(t, p)]
    step = math.ceil(n / (_MAX_POINTS // 2))
    out: list[dict[str, float]] = []
    for i in range(0, n, step):
        idx = [j for j in range(i, min(n, i + step)) if _finite(t_s[j], power_w[j])]
        if not idx:
            continue
        lo = min(idx, key=lambda j: power_w[j])
        hi = max(idx, key=lambda j: power_w[j])
        out += [{"t": t_s[j], "p": power_w[j]} for j in sorted({lo, hi})]
    return out


def timeline_chart(
    t_s: Sequence[float],
    power_w: Sequence[float],
    spans: Sequence[Span] = (),
    *,
    power_title: str = "board power (W)",
    title: str = "",
) -> dict[str, Any]:
    """Power over time with labelled spans (kernels) under it; drag to pan, wheel to zoom, hover for values."""
    line: dict[str, Any] = {
        "data": {"values": thin_series(t_s, power_w)},
        "mark": {"type": "line", "tooltip": True, "interpolate": "step-after"},
        "encoding": {
            "x": {"field": "t", "type": "quantitative", **_axis("time (s)", False)},
            "y": {"field": "p", "type": "quantitative", **_axis(power_title, False)},
        },
        "params": [{"name": "zoom", "select": {"type": "interval", "encodings": ["x"]}, "bind": "scales"}],
    }
    layers: list[dict[str, Any]] = [line]
    if spans:
        layers.append(
            {
                "data": {
                    "values": [
                        {"start": s.start_s, "end": s.end_s, "kernel": s.label}
                        for s in spans
                        if _finite(s.start_s, s.end_s)
                    ]
                },
                "mark": {"type": "rect", "opacity": 0.18, "tooltip": True},
                "encoding": {
                    "x": {"field": "start", "type": "quantitative"},
                    "x2": {"field": "end"},
                    "color": {"field": "kernel", "type": "nominal", "legend": {"orient": "bottom", "columns": 3}},
                },
            }
        )
    spec: dict[str, Any] = {
        "$schema": "https://vega.github.io/schema/vega-lite/v6.json",
        "width": "container",
        "height": 320,
        "layer": layers[::-1],
    }
    if title:
        spec["title"] = title
    return spec


def panels_chart(
    points: Sequence[Mapping[str, Any]],
    x_title: str,
    panels: Sequence[tuple[str, str]],
    *,
    log_x: bool = False,
    title: str = "",
) -> dict[str, Any]:
    """Side-by-side panels sharing one x: ``points`` hold "series", "x", "x_label" and one field per panel.

    ``panels`` are (field, axis title with unit); each panel is one line per series, with tooltips.
    """
    values = [dict(p) for p in points if isinstance(p.get("x"), (int, float)) and _finite(float(p["x"]))]
    width = max(200, 1080 // max(1, len(panels)) - 60)
    charts = []
    for field, y_title in panels:
        charts.append(
            {
                "width": width,
                "height": 240,
                "transform": [{"filter": f"isValid(datum[{json.dumps(field)}])"}],
                "mark": {"type": "line", "point": True, "tooltip": {"content": "data"}},
                "encoding": {
                    "x": {"field": "x", "type": "quantitative", **_axis(x_title, log_x)},
                    "y": {"field": field, "type": "quantitative", **_axis(y_title, False)},
                    "color": {"field": "series", "type": "nominal", "title": None, "legend": {"orient": "bottom"}},
                },
            }
        )
    spec: dict[str, Any] = {
        "$schema": "https://vega.github.io/schema/vega-lite/v6.json",
        "data": {"values": values},
        "hconcat": charts,
    }
    if title:
        spec["title"] = title
    return spec


def curves_chart(
    panels: Sequence[
        tuple[str, Mapping[str, Sequence[tuple[float, float]]], Mapping[str, Sequence[tuple[float, float]]]]
    ],
    x_title: str,
    y_title: str,
    *,
    log_x: bool = True,
    log_y: bool = True,
) -> dict[str, Any]:
    """Panels side by side, each with model curves (lines) and measured points: (panel title, curves, points)."""
    width = max(260, 1080 // max(1, len(panels)) - 80)
    charts = []
    for title, curves, points in panels:

        def rows(series: Mapping[str, Sequence[tuple[float, float]]]) -> list[dict[str, Any]]:
            return [
                {"what": name, "x": x, "y": y}
                for name, pts in series.items()
                for x, y in pts
                if _finite(x, y) and (not log_x or x > 0) and (not log_y or y > 0)
            ]

        enc = {
            "x": {"field": "x", "type": "quantitative", **_axis(x_title, log_x)},
            "y": {"field": "y", "type": "quantitative", **_axis(y_title, log_y)},
            "color": {"field": "what", "type": "nominal", "title": None, "legend": {"orient": "bottom", "columns": 2}},
        }
        charts.append(
            {
                "title": title,
                "width": width,
                "height": 300,
                "layer": [
                    {"data": {"values": rows(curves)}, "mark": {"type": "line", "tooltip": True}, "encoding": enc},
                    {
                        "data": {"values": rows(points)},
                        "mark": {"type": "point", "tooltip": True, "filled": False},
                        "encoding": {**enc, "shape": {"field": "what", "type": "nominal", "legend": None}},
                    },
                ],
            }
        )
    return {"$schema": "https://vega.github.io/schema/vega-lite/v6.json", "hconcat": charts}
