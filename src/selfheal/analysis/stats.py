"""Statistics over cells: intervals across seeds; where a curve first reaches a level (``first_crossing``, defined
with the thresholds in ``heal.thresholds``: the retraining budget uses it too); the unit a cost is stated in; the
stall rule (``heal.stall``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import pandas as pd

from selfheal.heal.stall import STALL_MIN_POINTS, STALL_Z, Trend, last_doubling  # noqa: F401 (the analysis' names)
from selfheal.heal.thresholds import (  # noqa: F401 (the analysis' names)
    RESOLUTION,
    Crossing,
    copies,
    fewest_crossing,
    first_crossing,
)
from selfheal.lazy import Module

stats = Module("scipy.stats")  # imported at first use: the Snakefile imports the figures' module at every start

UNIT_WORDS = {"fraction": "fraction of S × E", "examples": "examples"}


DRIFT_TOLERANCE = 0.25  # the method's bound on drift, as a share of the smallest ε: ε_min / 4
# what two sizes compared on the N or D axis share besides their family: the data (S), the context and, where the
# config set it (a fixed schedule, or max_epochs cut the race), E; not an E the patience rule found (each network's
# own epochs to its validation minimum): ``with_set_epochs``
SAME_REGIME = ("train_sequences", "context", "set_epochs")


def with_set_epochs(networks: pd.DataFrame) -> pd.DataFrame:
    """``networks`` with ``set_epochs``: its E where the config set it, NaN where the patience rule stopped its race
    (``stopped_by`` == "patience")."""
    out = networks.copy()
    by_rule = out["stopped_by"].eq("patience").fillna(False) if "stopped_by" in out.columns else False
    epochs = out["epochs"].astype(float) if "epochs" in out.columns else math.nan
    out["set_epochs"] = pd.Series(epochs, index=out.index).where(~pd.Series(by_rule, index=out.index).astype(bool))
    return out


def kept_pretraining(curves: pd.DataFrame) -> pd.DataFrame:
    """The pretraining rows of ``curves`` of each network's kept copy (its lr race's winner; every pretraining row
    of a table without the ``kept`` column)."""
    pre = curves[curves["kind"] == "pretrain"]
    return pre[flag(pre["kept"])] if "kept" in pre.columns else pre


def cost_unit(rows: pd.DataFrame, networks: pd.DataFrame) -> str:
    """The unit every cost of some rows is stated in (the one rule for tables, figures, fit and page): "fraction" of
    S x E when every row's network was pretrained here (its S x E known), else "examples" (a model you bring: its
    adaptation to the corpus is not its pretraining). ``rows``: with ``model`` and ``pretrain_examples``;
    ``networks``: a table with ``model`` and ``source`` (networks.parquet, networks_flags, or cells that carry their
    network's columns); any source of the rows' models other than ``scratch`` makes it examples."""
    known = pd.to_numeric(rows["pretrain_examples"], errors="coerce").fillna(0) > 0
    sources = (
        networks.loc[networks["model"].isin(set(rows["model"])), "source"]
        if "source" in networks.columns and "model" in rows.columns
        else pd.Series(dtype=object)
    )
    brought = bool((sources.fillna("scratch") != "scratch").any())
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


def typed(table: pd.DataFrame, **dtypes: Iterable[str]) -> pd.DataFrame:
    """``table`` with the columns named under each dtype cast to it: ``typed(t, Int64=["depth"], float64=[...])``."""
    return table.astype({column: dtype for dtype, columns in dtypes.items() for column in columns})


def flag(column: pd.Series) -> pd.Series:
    """A flag column (bool, or float/object with missing values: tables of several runs concatenated) as bool, a
    missing flag False."""
    return column.astype("boolean").fillna(False).astype(bool)
