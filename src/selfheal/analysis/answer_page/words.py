"""The page's shared vocabulary: its units, ε and cost words, the settings it reads and the selections by setting."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from selfheal.analysis import survival
from selfheal.analysis.page import num, span
from selfheal.analysis.stats import cost_unit

BEYOND = "> B"  # a median (or interval end) beyond the retraining budget B: censored, only a lower bound

BEYOND_LEGEND = f"`{BEYOND}`: not back within ε by the end of the retraining budget B (censored: a lower bound)"

NOT_HERE = "not pretrained here; "  # the start of a brought model's words in place of S × E

SHARE_WORDS = (
    "a brought model's single-layer medians in tokens over the tokens it was pretrained on elsewhere "
    "(its config's pretraining_tokens, `answer/networks_flags.parquet`)"
)

ASKED = ("frozen", "full", "fresh")

SETTING = ("regime", "policy", "init")  # the columns of a setting


def _unit(table: pd.DataFrame, networks: pd.DataFrame) -> str:
    """``stats.cost_unit`` of some rows, with their networks' source (a model you bring: examples)."""
    if not len(table):
        return "fraction"
    sources = networks.loc[networks["model"].isin(set(table["model"])), "source"] if "source" in networks else None
    return cost_unit(table["pretrain_examples"], sources)


def _one(v: float) -> str:
    return BEYOND if math.isinf(v) else num(v)


def _cost(row: pd.Series, unit: str, interval: bool = True) -> str:
    """'0.038 [0.013, 0.070]' (``interval``: else the median alone); one number where the interval is that number;
    ``BEYOND`` beyond the budget; ``NOT_DAMAGED`` where no cell of the group left the ε band after the reset (no
    cost, so no median)."""
    value, lo, hi = (float(row[f"median_{unit}{s}"]) for s in ("", "_lo", "_hi"))
    if math.isnan(value):
        return NOT_DAMAGED
    if (math.isinf(value) and math.isinf(lo)) or value == lo == hi or not interval:
        return _one(value)
    return f"{_one(value)} [{_one(lo)}, {_one(hi)}]"


def _cost_verdict(row: pd.Series, unit: str) -> str:
    """``_cost``, and for a median beyond the budget how many of its cells stalled and how many were still falling
    there: '> B (2 stalled, 1 still falling)'."""
    cost = _cost(row, unit)
    if not math.isinf(float(row[f"median_{unit}"])):
        return cost
    counts = [(int(row[c]), w) for c, w in (("n_stalled", "stalled"), ("n_still_falling", "still falling")) if row[c]]
    return cost + (f" ({', '.join(f'{n} {w}' for n, w in counts)})" if counts else "")


def _settings(survival_table: pd.DataFrame) -> list[tuple]:
    """(regime, policy, init) of the single-layer groups, the asker's setting (frozen, full, fresh) first."""
    layers = survival_table[survival_table["kind"] == survival.LAYER]
    found = sorted(set(zip(layers["regime"], layers["policy"], layers["init"])))
    return sorted(found, key=lambda s: s != ASKED)


def _setting_words(setting: tuple) -> str:
    return f"regime `{setting[0]}`, policy `{setting[1]}`, init `{setting[2]}`"


def _pick(table: pd.DataFrame, setting: tuple) -> pd.DataFrame:
    return table[(table["regime"] == setting[0]) & (table["policy"] == setting[1]) & (table["init"] == setting[2])]


def _budget_words(rows: pd.DataFrame, unit: str) -> str:
    """The budget of some cells: '0.2 of S × E', or 'N examples' when S × E is unknown; for models of different
    budgets the range."""
    if unit == "fraction":
        fractions = pd.to_numeric(rows["budget_fraction"], errors="coerce").round(3)
        return f"{span(fractions)} of S × E"  # budgets round to whole examples
    return f"{span(pd.to_numeric(rows['budget_examples'], errors='coerce'))} examples"


def _eps_words(eps: float) -> str:
    return f"{100 * eps:g} %"


def _refuses(n: int) -> str:
    """The verb for n (model, layer) pairs that refuse: 'refuses' for one, else 'refuse'."""
    return "refuses" if n == 1 else "refuse"


def _unit_after(unit: str) -> str:
    return "of S × E" if unit == "fraction" else "examples"


NOT_DAMAGED = "not damaged"  # a (model, layer) none of whose cells left the ε band after the reset: no cost


def _median_span(at: pd.DataFrame, unit: str) -> tuple[str, int, int]:
    """The finite per-layer medians' span, how many medians lie beyond the budget (inf), and how many were damaged
    beyond ε at all (a median of no damaged cell is NaN: not a cost, and not beyond the budget either)."""
    med = at[f"median_{unit}"].astype(float)
    return span(med[np.isfinite(med)]), int(np.isinf(med).sum()), int(med.notna().sum())


def _sci(x: float) -> str:
    """A small share in scientific notation: '1.2e-6'."""
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _two_digits(x: float) -> str:
    """A guess to two significant digits, without exponents: 3.1, 48, 180,000."""
    if x <= 0 or not math.isfinite(x):
        return num(x)
    rounded = round(x, 1 - math.floor(math.log10(x)))
    return f"{rounded:,.0f}" if rounded >= 100 else f"{rounded:.2g}"


CROSS_ATTN = "cross_attn"  # the policy that resets a decoder layer's cross-attention only: the aside's (§6)


def _sxe_words_row(r: pd.Series) -> str:
    """A network's S × E ('30,921 × 1'), or that it was not pretrained here (a model you bring)."""
    if r.get("source", "scratch") != "scratch":
        s, e = r.get("train_sequences"), r.get("epochs")
        adapted = (
            f"adaptation: {num(float(s))} sequences × {num(float(e))}"
            if s is not None and e is not None and not pd.isna(s) and not pd.isna(e)
            else "no adaptation"
        )
        return f"{NOT_HERE}{adapted}"
    s, e = r.get("train_sequences"), r.get("epochs")
    if s is not None and e is not None and not pd.isna(s) and not pd.isna(e):
        return f"{num(float(s))} × {num(float(e))}"
    sxe = r.get("pretrain_examples")
    return num(float(sxe)) if sxe is not None and not pd.isna(sxe) else "n/a"


def _multiplier_words(m: float) -> str:
    """3 -> '×3', 0.3333 -> '÷3'."""
    return f"×{m:g}" if m > 1 else f"÷{1 / m:.3g}"
