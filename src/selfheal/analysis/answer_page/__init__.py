"""The answer page (``results/answer.md`` and ``answer.html``), written from the answer tables only
(``answer_tables.compute``). It opens with the answer in short (one paragraph at the asker's ε that a reader can say
back) and then in sentences, one per sub-question of the asker (how much of S x E one reset layer needs at the
smallest and largest ε, beside pretraining from scratch; whether it ever refuses; whether the position of L matters;
whether N and D do; the encoder swap), each generated from the tables with its numbers and saying when the data
cannot decide, and a compact table per model; this block is copied into the README. Then the detail, in the asker's
order: cost per layer; refusals; the position of L; N and D (the networks, the size ordering of the baselines, the
out-of-sample check); families; the encoder-decoder aside; damage and similarity; caveats; related work. ``page``
calls each module's ``section`` in ``SECTIONS``, each reading the tables through ``view.View``; a module per
sub-question holds its headline sentence beside its section (``cost``, ``refusal``, ``position``, ``size``,
``aside``), ``headline`` puts the sentences together after ``short``'s opening paragraph, and ``words``, ``units``
and ``fit`` hold the vocabulary the sections share (their underscored helpers are the package's own).

Costs are in one unit per table (``stats.cost_unit``): the fraction of S x E for networks pretrained here, else
examples (a model you bring: its S x E is not this workflow's, and its adaptation to the corpus is called
adaptation; where its config gives its own pretraining tokens, networks_flags' ``pretraining_tokens``, its
single-layer medians in tokens are also stated as a share of them, and its page speaks of neither S x E nor
pretraining from scratch). §1 adds examples, tokens and the cost relative to the from-scratch run (the survival
median in examples over the mean, across the model's usable networks pretrained here, of the examples the network's own
pretraining needed to first reach the same loss). A median beyond the retraining budget is written ``words.BEYOND``.

The fit's verdicts branch on its reason codes (``scaling.REASONS``), never on its notes' wording.
"""

from __future__ import annotations

import pandas as pd

from selfheal.analysis.answer_page import (
    aside,
    controls,
    cost,
    damage,
    family,
    headline,
    lr,
    position,
    refusal,
    related,
    size,
)
from selfheal.analysis.answer_page.headline import HEADLINE, partial_note
from selfheal.analysis.answer_page.view import View
from selfheal.analysis.page import Page

__all__ = ["HEADLINE", "SECTIONS", "page", "partial_note"]

SECTIONS = [
    headline.section,
    cost.section,
    refusal.section,
    position.section,
    size.section,
    family.section,
    aside.section,
    damage.section,
    controls.section,
    lr.section,
    related.section,
]


def page(
    tables: dict[str, pd.DataFrame], summary: pd.DataFrame, networks: pd.DataFrame, plot_links: dict[str, str]
) -> Page:
    """The whole page: its title and question, then each of ``SECTIONS``."""
    doc = Page()
    doc.h(1, "selfheal: the answer")
    doc.p(
        "*Reset one layer L of a trained N-layer transformer (width D, trained E epochs on S sequences) to random "
        "weights, freeze the rest, retrain: how much data until it is back within ε of its old validation loss?* "
        "Every number below comes from the workflow's tables (`answer/*.parquet`, from `summary.parquet`, "
        "`curves.parquet` and `networks.parquet`)."
    )
    view = View(tables, summary, networks, plot_links)
    for section in SECTIONS:
        section(doc, view)
    return doc
