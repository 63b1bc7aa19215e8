"""A page of blocks (heading, paragraph, bullet list, table) rendered to Markdown and to HTML, and the number
formats every page uses."""

from __future__ import annotations

import html
import math
import re

import numpy as np
import pandas as pd


def num(x: float) -> str:
    if x is None or pd.isna(x):
        return "n/a"
    if math.isinf(x):
        return "∞"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}" if abs(x) < 0.01 else f"{x:.3f}".rstrip("0").rstrip(".") if abs(x) < 1 else f"{x:.3g}"


def pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:.0f} %"


def signed_pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:+.2f} %"


class Page:
    """Blocks of the page (heading, paragraph, bullet list, table), rendered to Markdown and to HTML."""

    def __init__(self) -> None:
        self.blocks: list[tuple] = []

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def ul(self, items: list[str]) -> None:
        if items:
            self.blocks.append(("ul", items))

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        if rows:
            self.blocks.append(("table", header, rows))

    def raw(self, text: str) -> None:
        self.blocks.append(("raw", text))

    def markdown(self) -> str:
        out = []
        for block in self.blocks:
            if block[0] == "h":
                out.append("#" * block[1] + " " + block[2])
            elif block[0] == "p":
                out.append(block[1])
            elif block[0] == "ul":
                out.append("\n".join(f"- {item}" for item in block[1]))
            elif block[0] == "table":
                out.append(
                    "\n".join(
                        ["| " + " | ".join(block[1]) + " |", "|" + "---|" * len(block[1])]
                        + ["| " + " | ".join(r) + " |" for r in block[2]]
                    )
                )
            else:
                out.append(block[1])
        return "\n\n".join(out) + "\n"

    def html(self) -> str:
        def inline(text: str) -> str:
            text = html.escape(text)
            text = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r'<a href="\2">\1</a>', text)
            text = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", text)
            text = re.sub(r"\*([^*]+)\*", r"<i>\1</i>", text)
            return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)

        out = [
            "<!DOCTYPE html><html><head><meta charset='utf-8'><title>selfheal: the answer</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:auto}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:2px 6px}</style></head><body>"
        ]
        for block in self.blocks:
            if block[0] == "h":
                out.append(f"<h{block[1]}>{inline(block[2])}</h{block[1]}>")
            elif block[0] == "p":
                out.append(f"<p>{inline(block[1])}</p>")
            elif block[0] == "ul":
                out.append("<ul>" + "".join(f"<li>{inline(i)}</li>" for i in block[1]) + "</ul>")
            elif block[0] == "table":
                out.append(
                    "<table><tr>"
                    + "".join(f"<th>{inline(c)}</th>" for c in block[1])
                    + "</tr>"
                    + "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>" for r in block[2])
                    + "</table>"
                )
        out.append("</body></html>")
        return "\n".join(out)


def compact(x: float) -> str:
    """A count in few digits: '310k', '2.56M', '1.2B', '2T'."""
    if x is None or pd.isna(x):
        return "n/a"
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return num(x)


def span(values, fmt=num) -> str:
    """'a to b' over the finite values ('a' when they agree), or '' when there are none."""
    v = pd.Series(values, dtype="float64")
    v = v[np.isfinite(v)]
    if not len(v):
        return ""
    lo, hi = fmt(v.min()), fmt(v.max())
    return lo if lo == hi else f"{lo} to {hi}"
