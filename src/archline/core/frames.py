"""Result tables in notebooks: ``.to_pandas()`` gives a DataFrame, ``_repr_html_`` a table Jupyter shows.

A result class mixes in :class:`Tabular` and says what its rows are (:meth:`Tabular.table_rows`: one dict per
row, keys with their units as archline names them: ``energy_j``, ``time_s``). pandas is optional: it is imported
only by :meth:`to_pandas`, and the HTML needs none.
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Tabular", "dataclass_rows", "rows_html", "rows_to_pandas"]

_MAX_HTML_ROWS = 60


def dataclass_rows(items: Sequence[Any], *, skip: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Rows from dataclass instances: their fields (minus ``skip``), values as they are."""
    return [{f.name: getattr(x, f.name) for f in dataclasses.fields(x) if f.name not in skip and f.repr} for x in items]


def rows_to_pandas(rows: Sequence[Mapping[str, Any]]) -> Any:
    """A pandas DataFrame of ``rows`` (columns in the order of first appearance)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_pandas() needs pandas: pip install 'archline[pandas]'") from None
    cols: dict[str, None] = {}
    for r in rows:
        cols.update(dict.fromkeys(r))
    return pd.DataFrame([dict(r) for r in rows], columns=list(cols))


def _cell(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return "" if v is None else str(v).lower()
    if isinstance(v, float):
        return "—" if not math.isfinite(v) else f"{v:.6g}"
    if isinstance(v, (tuple, list)):
        return "; ".join(str(x) for x in v)
    return str(v)


def rows_html(rows: Sequence[Mapping[str, Any]], title: str = "") -> str:
    """A plain HTML table of ``rows`` (at most 60 shown, the count of the rest said), numbers to 6 digits."""
    cols: dict[str, None] = {}
    for r in rows:
        cols.update(dict.fromkeys(r))
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in cols)
    body = []
    for r in rows[:_MAX_HTML_ROWS]:
        cells = []
        for c in cols:
            v = r.get(c)
            align = "right" if isinstance(v, (int, float)) and not isinstance(v, bool) else "left"
            cells.append(f'<td style="text-align:{align}">{e(_cell(v))}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = len(rows) - _MAX_HTML_ROWS
    foot = f"<p>… {more} more rows (all of them: .to_pandas())</p>" if more > 0 else ""
    cap = f"<caption>{e(title)}</caption>" if title else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{foot}"


class Tabular:
    """Mix-in: ``to_pandas()`` and Jupyter's rich display from :meth:`table_rows`."""

    def table_rows(self) -> list[dict[str, Any]]:  # pragma: no cover - every user overrides it
        raise NotImplementedError

    def table_title(self) -> str:
        return type(self).__name__

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (needs pandas: ``pip install 'archline[pandas]'``)."""
        return rows_to_pandas(self.table_rows())

    def _repr_html_(self) -> str:
        return rows_html(self.table_rows(), self.table_title())
