"""The number formats of the answer page (its template's filters, ``page.FILTERS``) and of related_work."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def num(x) -> str:
    if x is None or pd.isna(x):
        return "n/a"
    if math.isinf(x):
        return "∞"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}" if abs(x) < 0.01 else f"{x:.3f}".rstrip("0").rstrip(".") if abs(x) < 1 else f"{x:.3g}"


def pct(x) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:.0f} %"


def signed_pct(x) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:+.2f} %"


def eps(x) -> str:
    return f"{100 * float(x):g} %"


def compact(x) -> str:
    """A count in few digits: '310k', '2.56M', '1.2B', '2T'."""
    if x is None or pd.isna(x):
        return "n/a"
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return num(x)


def span(values, fmt=num) -> str:
    """'a to b' over the finite values ('a' when they agree), or '' when there are none."""
    v = pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce").astype("float64")  # NA: not a value
    v = v[np.isfinite(v)]
    if not len(v):
        return ""
    lo, hi = fmt(v.min()), fmt(v.max())
    return lo if lo == hi else f"{lo} to {hi}"
