"""The lr check (``retrain.lr_sensitivity``): its headline words and its section."""

from __future__ import annotations

import math

import pandas as pd

from selfheal.analysis.answer_page.view import View
from selfheal.analysis.answer_page.words import _eps_words, _multiplier_words, _unit, _unit_after
from selfheal.analysis.page import Page, num
from selfheal.grid import SWAP_KIND, Target

LR_EPS = 0.01  # the ε the lr-sensitivity sentence states (the table's smallest where it lacks this one)


def _lr_cost(row: pd.Series, column: str, recovered: str) -> str:
    return num(float(row[column])) if bool(row[recovered]) and pd.notna(row[column]) else "beyond the budget"


def _lr_at(rows: pd.DataFrame, unit: str) -> tuple[float, pd.DataFrame, str]:
    """One model's lr-check rows at the ε they are stated at (LR_EPS, else the smallest), and the cost column of
    ``unit``."""
    eps = LR_EPS if (rows["threshold"] == LR_EPS).any() else float(rows["threshold"].min())
    return eps, rows[rows["threshold"] == eps], "fraction_of_pretrain" if unit == "fraction" else "examples"


def lr_sensitivity_sentence(rows: pd.DataFrame, unit: str) -> str:
    """One model's sentence from its rows of the lr-sensitivity table: at ε = LR_EPS (else the smallest), the cost
    of its first and its last layer (and of any further target, ``retrain.lr_sensitivity_targets``) at the chosen
    lr and at each multiple of it, in ``unit``."""
    eps, at, column = _lr_at(rows, unit)
    layers = list(at[at["depth"].notna()].sort_values("depth")["target"].unique())
    others = sorted(set(at["target"]) - set(layers))  # retrain.lr_sensitivity_targets beyond the two layers
    parts, unit_said = [], False
    for i, target in enumerate(layers + others):
        g = at[at["target"] == target].sort_values("lr_multiplier")
        first = g.iloc[0]
        which = (
            ("the encoder swap" if Target.parse(target).kind == SWAP_KIND else "the reset")
            if target in others
            else "its one layer"
            if len(layers) == 1
            else "the first layer"
            if i == 0
            else "the last layer"
        )
        start = _lr_cost(first, f"chosen_{column}", "chosen_recovered")
        if not unit_said and bool(first["chosen_recovered"]):  # the unit after the first number
            start, unit_said = f"{start} {_unit_after(unit)}", True
        if i == 0:
            start += f" at the chosen lr ({num(first['chosen_lr'])})"
        moves = " and ".join(
            f"to {_lr_cost(r, column, 'recovered')} at {_multiplier_words(r['lr_multiplier'])}" for _, r in g.iterrows()
        )
        parts.append(f"{which} (`{target}`) {'moves ' if i == 0 else ''}from {start} {moves}")
    sentence = f"{rows['model'].iloc[0]}: at ε = {eps:g} the cost of " + "; of ".join(parts) + "."
    faster = _faster_lrs(at, column)
    if faster:
        sentence += (
            f" **The chosen lr is not the fastest measured** ({faster}): its costs are upper bounds on how fast "
            "these layers can heal."
        )
    return sentence


FASTER = 0.9  # a multiple of the lr is "faster" when it recovers at under this share of the chosen lr's cost


def _faster_rows(at: pd.DataFrame, column: str) -> pd.DataFrame:
    """The rows (one ε) whose multiple of the lr healed its target sooner than the chosen lr: recovered where the
    chosen lr did not, or at under FASTER of its cost (crossings are located to a resolution, so a smaller gap is
    not a difference); by depth (further targets last), then multiplier."""
    at = at.sort_values(["depth", "lr_multiplier"], na_position="last")
    chosen = at[f"chosen_{column}"].astype(float).where(at["chosen_recovered"].astype(bool), math.inf)
    cost = at[column].astype(float)
    return at[at["recovered"].astype(bool) & cost.notna() & (cost < FASTER * chosen)]


def _faster_lrs(at: pd.DataFrame, column: str) -> str:
    """The multiples of the lr that healed a target sooner than the chosen lr (``_faster_rows``), as words ('×3 on
    `L0`'). '' when none."""
    return ", ".join(
        f"{_multiplier_words(r['lr_multiplier'])} on `{r['target']}`" for _, r in _faster_rows(at, column).iterrows()
    )


def lr_headline_words(table: pd.DataFrame | None, unit_of) -> str:
    """The headline's words on the lr check (``retrain.lr_sensitivity``) over each model's targets but its encoder
    swaps (the swap sentence says those), at ε = LR_EPS (else the model's smallest): where another multiple of the
    lr healed a target sooner, both costs, and that the costs are then upper bounds; the models where
    none did, as having the fastest lr measured. ``unit_of(rows)`` gives a model's cost unit. '' without the
    check."""
    if table is None or not len(table):
        return ""
    table = table[table["target"].map(lambda t: Target.parse(t).kind != SWAP_KIND)]  # the swap sentence says those
    phrases, fastest, eps_said, lead, models = [], [], set(), None, set()
    for model, rows in table.groupby("model", sort=True):
        unit = unit_of(rows)
        eps, at, column = _lr_at(rows, unit)
        eps_said.add(eps)
        found = _faster_rows(at, column)
        if not len(found):
            fastest.append(f"`{model}`")
            continue
        for multiplier, g in found.groupby("lr_multiplier", sort=False):
            heals = " and ".join(
                f"`{r['target']}` in {num(float(r[column]))}{f' {_unit_after(unit)}' if i == 0 else ''} instead of "
                f"{_lr_cost(r, f'chosen_{column}', 'chosen_recovered')}"
                for i, (_, r) in enumerate(g.iterrows())
            )
            said = _multiplier_words(multiplier)
            phrases.append(("" if said == lead else f"{said} the lr heals ") + f"`{model}`'s {heals}")
            models.add(model)
            lead = said
    at_eps = f"ε = {_eps_words(next(iter(eps_said)))}" if len(eps_said) == 1 else "each model's ε"
    words = ""
    if phrases:
        words += (
            f" **The retraining lr moves these costs** (first network{'s' if len(models) > 1 else ''}, {at_eps}; §8): "
            + "; ".join(phrases)
            + ", so the costs above are upper bounds on how fast a layer heals."
        )
    if fastest:
        words += f" No other lr measured heals faster on {', '.join(fastest)} (§8)."
    return words


def section(doc: Page, v: View) -> None:
    """The lr-sensitivity check (``retrain.lr_sensitivity``): one sentence per model; nothing when it is off."""
    table = v.tables.get("lr_sensitivity")
    if table is None or not len(table):
        return
    doc.p(
        "How much the retraining lr matters (`retrain.lr_sensitivity`, `answer/lr_sensitivity.parquet`): the first "
        "network of each model healed again at multiples of the chosen lr, the same budget and evaluations."
    )
    doc.ul([lr_sensitivity_sentence(rows, _unit(rows, v.networks)) for _, rows in table.groupby("model", sort=True)])
