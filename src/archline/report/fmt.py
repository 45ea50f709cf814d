"""Number formatting for reports: significant figures, value ± uncertainty, '—' (with a reason) for missing values."""

from __future__ import annotations

import math

from archline.report.doc import Cell, Missing

__all__ = ["DASH", "fmt_num", "fmt_pct", "fmt_pm", "fmt_sig", "fmt_value", "is_number"]

DASH = "—"


def is_number(x: object) -> bool:
    """True for a finite int or float (not a bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _group(s: str, x: float) -> str:
    # Thousands separators only where they help reading (≥ 10 000), as MIPP's tables do.
    if abs(x) < 10_000:
        return s
    intpart, dot, frac = s.partition(".")
    sign = "-" if intpart.startswith("-") else ""
    digits = intpart.lstrip("-")
    grouped = f"{int(digits):,}"
    return f"{sign}{grouped}{dot}{frac}"


def fmt_sig(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant figures: fixed-point from 1e-3 to 1e6, scientific outside."""
    if not math.isfinite(x):
        raise ValueError(f"cannot format non-finite value {x!r}")
    if x == 0:
        return "0"
    rounded = float(f"{x:.{digits - 1}e}")
    exp = math.floor(math.log10(abs(rounded)))
    if -3 <= exp < 6:
        decimals = max(0, digits - 1 - exp)
        return _group(f"{rounded:.{decimals}f}", rounded)
    return f"{rounded:.{digits - 1}e}"


def fmt_num(x: float, digits: int = 4) -> str:
    """A setting or count: integral values as integers (132, 1024), others to ``digits`` significant figures."""
    if float(x).is_integer() and abs(x) < 1e15:
        return _group(str(int(x)), float(x))
    return fmt_sig(float(x), digits)


def fmt_value(x: object, missing: str, *, scale: float = 1.0, digits: int = 3) -> Cell:
    """``x × scale`` formatted, or :class:`Missing` with ``missing`` as the reason if ``x`` is not a number."""
    if not is_number(x):
        return Missing(missing)
    assert isinstance(x, (int, float))
    return fmt_sig(float(x) * scale, digits)


def fmt_pct(frac: object, missing: str, *, digits: int = 3) -> Cell:
    """A fraction shown as a percentage (0.957 → "95.7 %")."""
    cell = fmt_value(frac, missing, scale=100.0, digits=digits)
    return cell if isinstance(cell, Missing) else f"{cell} %"


def fmt_pm(x: object, u: object, missing: str, *, scale: float = 1.0, u_digits: int = 2, digits: int = 3) -> Cell:
    """``x ± u`` (both × ``scale``), the value rounded to the uncertainty's last significant digit.

    A missing uncertainty prints as ``x ± ?`` so a bare number is never mistaken for an exact one.
    """
    if not is_number(x):
        return Missing(missing)
    assert isinstance(x, (int, float))
    v = float(x) * scale
    if not is_number(u):
        return f"{fmt_sig(v, digits)} ± ?"
    assert isinstance(u, (int, float))
    err = abs(float(u) * scale)
    if err == 0:
        return f"{fmt_sig(v, digits)} ± 0"
    err_r = float(f"{err:.{u_digits - 1}e}")
    exp = math.floor(math.log10(err_r))
    decimals = u_digits - 1 - exp
    if decimals > 8 or abs(v) >= 1e7 or err_r >= 1e7:
        # Share one exponent so the two numbers stay comparable at a glance.
        e = math.floor(math.log10(max(abs(v), err_r)))
        m = 10.0**e
        d = max(0, e - exp + u_digits - 1)
        return f"({v / m:.{d}f} ± {err_r / m:.{d}f})e{e:+03d}"
    if decimals >= 0:
        return f"{_group(f'{v:.{decimals}f}', v)} ± {_group(f'{err_r:.{decimals}f}', err_r)}"
    q = 10.0 ** (-decimals)
    v_r = round(v / q) * q
    return f"{_group(f'{v_r:.0f}', v_r)} ± {_group(f'{err_r:.0f}', err_r)}"
