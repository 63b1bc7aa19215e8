"""§9, what is already known, beside this grid's numbers."""

from __future__ import annotations

from selfheal.analysis import related_work
from selfheal.analysis.answer_page.view import View
from selfheal.analysis.page import Page


def section(doc: Page, v: View) -> None:
    """9. What is already known, beside this grid's numbers."""
    doc.h(2, "9. What is already known")
    doc.p(
        "The published experiments nearest to the question, each finding in short beside this grid's number; their "
        "findings in full and how each setting differs: docs/experiments.md, 'What is already known'."
    )
    doc.table(["work", "finding", "this grid"], related_work.comparisons(v.tables))
