"""The answer in the asker's terms (schemas in docs/outputs.md).

- ``answer/headline.parquet``: per position (the first, middle and last layer of a stack: an encoder-decoder's
  decoder and encoder are stacks of their own) and ε, over the models: each model's cost at that position (the
  median of its layers' survival medians there over the layers damaged beyond ε, in the asker's setting), then
  their median and range over the models whose layers there were damaged beyond ε (``n_not_damaged``: those whose
  layers there were not, no cost; ``n_layers`` and ``n_layers_not_damaged``: the layers there over the models, and
  those never damaged beyond ε, which a cost leaves out rather than counts as zero), the same
  against the matched control and × from scratch, and ``words``, the median said back in the
  asker's terms (``WORD_BANDS``: "about 1 %", "about 10 %", "about all of S × E"; "more than from scratch";
  "never" where the models' medians refuse, "beyond the budget" where they are still falling). ``resolved``: the ε
  is one the headline states (``resolution``).
- ``answer/size_effects.parquet``: does the cost at each position rise or fall with N, and with D? Per position, ε
  and factor, over each group of models of one family that differ in that factor only (the same other size, S, E
  and context): the smallest and the largest's costs and the range of their networks' medians; ``rises`` or
  ``falls`` when the medians move the same way at every step and the two ends' ranges do not overlap, ``no clear
  effect`` otherwise; ``not determined`` (``reason``) when the grid varies the factor in no such group
  (``one_level``), both ends are beyond the budget (``beyond_budget``) or a size's layers there were never damaged
  beyond ε (``not_damaged``: no cost to compare).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from selfheal.analysis import survival
from selfheal.analysis.stats import SAME_REGIME, cost_unit, typed, with_set_epochs

POSITIONS = ("first", "middle", "last")
# a median fraction of S x E in [lo, hi) is said as: (bands a factor of sqrt(10) either side of 1 %, 10 % and 1)
WORD_BANDS = [
    (0.0, 0.01 / math.sqrt(10), "under 1 %"),
    (0.01 / math.sqrt(10), 0.01 * math.sqrt(10), "about 1 %"),
    (0.01 * math.sqrt(10), 0.1 * math.sqrt(10), "about 10 %"),
    (0.1 * math.sqrt(10), math.sqrt(10), "about all of S × E"),
    (math.sqrt(10), math.inf, "more than S × E"),
]
MORE_THAN_SCRATCH = "more than from scratch"
NEVER, BEYOND, NO_COST = "never", "beyond the budget", "no cost (not damaged)"
HEADLINE_COLUMNS = [
    "position",
    "threshold",
    "unit",
    "n_models",
    "median",
    "lo",
    "hi",
    "n_not_damaged",
    "n_layers",
    "n_layers_not_damaged",
    "n_beyond",
    "n_refuses",
    "relative_to_scratch",
    "control_median",
    "control_lo",
    "control_hi",
    "resolved",
    "words",
    "models",
]
SIZE_FACTORS = {"n_layer": "N", "d_model": "D"}
SAME_OTHERWISE = ("family_kind", *SAME_REGIME)
SIZE_COLUMNS = [
    "position",
    "threshold",
    "varied",
    "family_kind",
    "n_models",
    "model_a",
    "model_b",
    "value_a",
    "value_b",
    "median_a",
    "median_b",
    "lo_a",
    "hi_a",
    "lo_b",
    "hi_b",
    "monotone",
    "verdict",
    "reason",
]
SIZE_VERDICTS = ("rises", "falls", "no clear effect", "not determined")
SIZE_REASONS = {
    "one_level": "the grid has one level of it",
    "beyond_budget": "both ends are beyond the budget",
    "not_damaged": "a size's layers there were never damaged beyond ε",
}


CROSS_ATTN = "cross_attn"  # the encoder-decoder aside's policy: never the headline's where the grid has the aside


def setting(surv: pd.DataFrame, aside: pd.DataFrame) -> tuple[str, str, str] | None:
    """The setting (regime, policy, init) the headline states: the asker's (``survival.ASKED``) where the grid has
    it, else the first of its single-layer settings (not the aside's cross-attention policy); None without any."""
    if not len(surv):
        return None
    layers = surv[surv["kind"] == survival.LAYER]
    found = sorted({(r, p, i) for r, p, i in zip(layers["regime"], layers["policy"], layers["init"])})
    found = [s for s in sorted(found, key=lambda s: s != survival.ASKED) if not (len(aside) and s[1] == CROSS_ATTN)]
    return found[0] if found else None


def in_words(median: float, relative: float, refuses: bool) -> str:
    """A median fraction of S x E said back (``WORD_BANDS``); inf: ``never`` where it refuses, else beyond the
    budget; NaN: no cost; at least from scratch's own cost: more than from scratch."""
    if math.isnan(median):
        return NO_COST
    if math.isinf(median):
        return NEVER if refuses else BEYOND
    if math.isfinite(relative) and relative >= 1:
        return MORE_THAN_SCRATCH
    return next(words for lo, hi, words in WORD_BANDS if lo <= median < hi)


def per_model(rows: pd.DataFrame, unit: str) -> pd.DataFrame:
    """Each (model, position, threshold): the median of its layers' medians there over the layers damaged beyond ε
    (two first layers of an encoder-decoder: their median; NaN where none was), how many layers are there and how
    many of them were never damaged beyond ε (no cost: they count, not as zeros), its networks' range (the layers' lowest lower and highest upper ends), whether
    its costliest layer there refuses, its median × from scratch."""
    col = f"median_{unit}"
    out = []
    for (model, position, eps), g in rows.groupby(["model", "position", "threshold"], sort=True):
        values = g[col].astype(float).to_numpy()
        damaged = ~np.isnan(values)
        costliest = g.iloc[int(np.argmax(np.nan_to_num(values, nan=-1.0)))]
        out.append(
            {
                "model": model,
                "position": position,
                "threshold": float(eps),
                "n_layer": int(g["n_layer"].iloc[0]),
                "d_model": int(g["d_model"].iloc[0]),
                "family_kind": str(g["family_kind"].iloc[0]),
                "value": float(np.nanmedian(values)) if damaged.any() else math.nan,
                "n_layers": len(values),
                "n_layers_not_damaged": int((~damaged).sum()),
                "lo": float(g[f"{col}_lo"].astype(float).min()),
                "hi": float(g[f"{col}_hi"].astype(float).max()),
                "refuses": costliest["verdict"] == "refuses",
                "relative": _median_or_nan(g["relative_to_scratch"].astype(float).to_numpy()[damaged]),
            }
        )
    return pd.DataFrame(
        out,
        columns=[
            "model",
            "position",
            "threshold",
            "n_layer",
            "d_model",
            "family_kind",
            "value",
            "n_layers",
            "n_layers_not_damaged",
            "lo",
            "hi",
            "refuses",
            "relative",
        ],
    )


def _median_or_nan(values: np.ndarray) -> float:
    values = values[~np.isnan(values)]
    return float(np.median(values)) if len(values) else math.nan


def resolution(cells: pd.DataFrame | None, setting, unit: str, mine: pd.DataFrame) -> np.ndarray:
    """Per row of ``mine`` (``per_model``'s), the widest crossing interval (upper − lower, in ``unit``) among its
    model's cells back within ε at that position: two costs closer than that are one crossing read twice (a
    fraction of S × E differs between networks with their E even where the crossings are the same step). 0 without
    ``cells``."""
    if cells is None or not len(cells) or not len(mine):
        return np.zeros(len(mine))
    rows = _layers(cells, setting)
    rows = rows[(rows["status"] == "recovered") & np.isfinite(rows["upper"].astype(float))]
    width = rows["upper"].astype(float) - rows["lower"].astype(float)
    if unit == "fraction":
        width = width / rows["pretrain_examples"].astype(float)
    widest = width.groupby([rows["model"], rows["position"], rows["threshold"].astype(float)]).max()
    keys = zip(mine["model"], mine["position"], mine["threshold"].astype(float))
    return np.array([float(widest.get(k, 0.0)) for k in keys])


def _layers(table: pd.DataFrame, setting) -> pd.DataFrame:
    if not len(table) or setting is None:
        return table.iloc[:0]
    rows = survival.in_setting(table[table["kind"] == survival.LAYER], setting)
    return rows[rows["position"].isin(POSITIONS)]


def headline(
    surv: pd.DataFrame, against: pd.DataFrame, resolved: pd.DataFrame, networks: pd.DataFrame, setting
) -> pd.DataFrame:
    """The headline table (HEADLINE_COLUMNS) in ``setting`` (regime, policy, init)."""
    rows = _layers(surv, setting)
    if not len(rows):
        return _typed_headline([])
    unit = cost_unit(rows, networks)
    mine = per_model(rows, unit)
    control = per_model(_layers(against, setting), unit) if len(_layers(against, setting)) else mine.iloc[:0]
    shown = set(resolved.loc[resolved["headline"].astype(bool), "threshold"].astype(float)) if len(resolved) else set()
    out = []
    for position in POSITIONS:
        for eps in sorted(mine["threshold"].unique()):
            g = mine[(mine["position"] == position) & (mine["threshold"] == eps)]
            if not len(g):
                continue
            c = control[(control["position"] == position) & (control["threshold"] == eps)]
            values = g["value"].to_numpy(float)
            damaged = ~np.isnan(values)  # a model whose layers there were never damaged beyond ε has no cost
            median = float(np.median(values[damaged])) if damaged.any() else math.nan
            beyond = np.isinf(values)
            rel = g["relative"].to_numpy(float)[damaged]
            relative = float(np.median(rel)) if len(rel) else math.nan
            refuses = bool(g.loc[beyond, "refuses"].all()) if beyond.any() else False
            cvalues = c["value"].to_numpy(float)
            cvalues = cvalues[~np.isnan(cvalues)]
            out.append(
                {
                    "position": position,
                    "threshold": float(eps),
                    "unit": unit,
                    "n_models": len(g),
                    "median": median,
                    "lo": float(np.nanmin(values)) if not np.isnan(values).all() else math.nan,
                    "hi": float(np.nanmax(values)) if not np.isnan(values).all() else math.nan,
                    "n_not_damaged": int((~damaged).sum()),
                    "n_layers": int(g["n_layers"].sum()),
                    "n_layers_not_damaged": int(g["n_layers_not_damaged"].sum()),
                    "n_beyond": int(beyond.sum()),
                    "n_refuses": int((beyond & g["refuses"].to_numpy(bool)).sum()),
                    "relative_to_scratch": relative,
                    "control_median": float(np.median(cvalues)) if len(cvalues) else math.nan,
                    "control_lo": float(cvalues.min()) if len(cvalues) else math.nan,
                    "control_hi": float(cvalues.max()) if len(cvalues) else math.nan,
                    "resolved": float(eps) in shown,
                    "words": in_words(median, relative, refuses) if unit == "fraction" else "",
                    "models": ", ".join(g["model"]),
                }
            )
    return _typed_headline(out)


def _typed_headline(rows: list[dict]) -> pd.DataFrame:
    return typed(
        pd.DataFrame(rows, columns=HEADLINE_COLUMNS),
        object=["position", "unit", "words", "models"],
        int64=["n_models", "n_not_damaged", "n_layers", "n_layers_not_damaged", "n_beyond", "n_refuses"],
        float64=[
            "threshold",
            "median",
            "lo",
            "hi",
            "relative_to_scratch",
            "control_median",
            "control_lo",
            "control_hi",
        ],
        bool=["resolved"],
    )


def size_effects(
    surv: pd.DataFrame, networks: pd.DataFrame, setting, cells: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The N and D verdicts per position (SIZE_COLUMNS). ``cells`` (``survival.prepare``'s rows): their crossing
    intervals set the resolution two ends must be apart by (``resolution``)."""
    rows = _layers(surv, setting)
    if not len(rows):
        return _typed_sizes([])
    unit = cost_unit(rows, networks)
    mine = per_model(rows, unit)
    mine["resolution"] = resolution(cells, setting, unit, mine)
    regime = with_set_epochs(networks).drop_duplicates("model").set_index("model")
    for column in SAME_OTHERWISE[1:]:
        mine[column] = mine["model"].map(regime[column]) if column in regime.columns else math.nan
    out = []
    for (position, eps), g in mine.groupby(["position", "threshold"], sort=False):
        for varied in SIZE_FACTORS:
            other = "d_model" if varied == "n_layer" else "n_layer"
            found = False
            for key, group in g.groupby([*SAME_OTHERWISE, other], dropna=False, sort=True):
                group = group.sort_values(varied)
                if group[varied].nunique() < 2 or group[varied].nunique() < len(group):
                    continue
                found = True
                values = group["value"].to_numpy(float)
                with np.errstate(invalid="ignore"):
                    steps = np.diff(values)  # inf - inf: NaN, neither up nor down
                a, b = group.iloc[0], group.iloc[-1]
                monotone = bool((steps > 0).all() or (steps < 0).all())
                res = max(float(a["resolution"]), float(b["resolution"]))  # the crossings' own widths
                apart = a["hi"] + res < b["lo"] or b["hi"] + res < a["lo"]
                undamaged = bool(np.isnan(values).any())
                unknown = undamaged or (np.isinf(a["value"]) and np.isinf(b["value"]))
                verdict = (
                    "not determined"
                    if unknown
                    else ("rises" if b["value"] > a["value"] else "falls")
                    if monotone and apart
                    else "no clear effect"
                )
                out.append(
                    {
                        "position": position,
                        "threshold": float(eps),
                        "varied": varied,
                        "family_kind": key[0],
                        "n_models": len(group),
                        "model_a": a["model"],
                        "model_b": b["model"],
                        "value_a": int(a[varied]),
                        "value_b": int(b[varied]),
                        "median_a": float(a["value"]),
                        "median_b": float(b["value"]),
                        "lo_a": float(a["lo"]),
                        "hi_a": float(a["hi"]),
                        "lo_b": float(b["lo"]),
                        "hi_b": float(b["hi"]),
                        "monotone": monotone,
                        "verdict": verdict,
                        "reason": "not_damaged" if undamaged else "beyond_budget" if unknown else "",
                    }
                )
            if not found:
                out.append(
                    {
                        **dict.fromkeys(SIZE_COLUMNS, math.nan),
                        "position": position,
                        "threshold": float(eps),
                        "varied": varied,
                        "family_kind": "",
                        "n_models": 0,
                        "model_a": "",
                        "model_b": "",
                        "value_a": 0,
                        "value_b": 0,
                        "monotone": False,
                        "verdict": "not determined",
                        "reason": "one_level",
                    }
                )
    order = {p: i for i, p in enumerate(POSITIONS)}
    out.sort(key=lambda r: (r["varied"] != "n_layer", order[r["position"]], r["threshold"], r["model_a"]))
    return _typed_sizes(out)


def _typed_sizes(rows: list[dict]) -> pd.DataFrame:
    return typed(
        pd.DataFrame(rows, columns=SIZE_COLUMNS),
        object=["position", "varied", "family_kind", "model_a", "model_b", "verdict", "reason"],
        int64=["n_models", "value_a", "value_b"],
        float64=["threshold", "median_a", "median_b", "lo_a", "hi_a", "lo_b", "hi_b"],
        bool=["monotone"],
    )
