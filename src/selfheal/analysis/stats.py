"""Statistics over cells: intervals across seeds; where a curve first reaches a level (``first_crossing``, defined
with the thresholds in ``heal.thresholds``: the retraining budget uses it too); the unit a cost is stated in; the
stall rule (``heal.stall``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from selfheal.heal.stall import STALL_MIN_POINTS, STALL_Z, Trend, last_doubling  # noqa: F401 (the analysis' names)
from selfheal.heal.thresholds import RESOLUTION, Crossing, first_crossing  # noqa: F401 (the analysis' names)
from selfheal.lazy import Module

stats = Module("scipy.stats")  # imported at first use: the Snakefile imports the figures' module at every start

UNIT_WORDS = {"fraction": "fraction of S × E", "examples": "examples"}


def cost_unit(pretrain_examples: pd.Series, sources: pd.Series | None = None) -> str:
    """The unit every cost of some rows is stated in (the one rule for tables, fit and page): "fraction" of S x E
    when every row's network was pretrained here (its S x E known), else "examples" (a model you bring: its
    adaptation to the corpus is not its pretraining). ``sources``: the rows' networks' ``source``, where known
    (networks.parquet); any other than ``scratch`` makes it examples."""
    known = pd.to_numeric(pretrain_examples, errors="coerce").fillna(0) > 0
    brought = sources is not None and bool((pd.Series(sources).fillna("scratch") != "scratch").any())
    return "fraction" if len(known) and bool(known.all()) and not brought else "examples"


def budget_column(unit: str) -> str:
    """The survival table's budget column in ``unit`` (``budget_fraction`` or ``budget_examples``)."""
    return f"budget_{unit}"


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and t-distribution confidence interval; a single value gives a zero-width interval."""
    n = len(values)
    if n == 0:
        return (math.nan, math.nan, math.nan)
    mean = sum(values) / n
    if n == 1:
        return (mean, mean, mean)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return (mean, mean - half, mean + half)


def flag(column: pd.Series) -> pd.Series:
    """A flag column (bool, or float/object with missing values: tables of several runs concatenated) as bool, a
    missing flag False."""
    return column.astype("boolean").fillna(False).astype(bool)
