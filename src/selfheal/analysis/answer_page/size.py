"""Whether N and D matter: the headline's sentence and §4 (the networks, the size ordering of the baselines, the
out-of-sample check).
"""

from __future__ import annotations

import pandas as pd

from selfheal.analysis import out_of_sample, scaling
from selfheal.analysis.answer_page.fit import _direction, _fit_table
from selfheal.analysis.answer_page.view import View
from selfheal.analysis.answer_page.words import _eps_words, _pick
from selfheal.analysis.page import Page, num
from selfheal.analysis.stats import flag


def _size_family(v: View) -> tuple[pd.DataFrame, str]:
    """The healed networks of the most common family (the size grid the N and D terms are fitted on, as
    out_of_sample.size_grid picks it) and that family's name ('' when the table has no family)."""
    healed = v.healed
    if not len(healed) or "family_kind" not in healed:
        return healed, ""
    family = healed.drop_duplicates("model")["family_kind"].astype(str).value_counts().idxmax()
    return healed[healed["family_kind"].astype(str) == family], family


SIZE_WORDS = {"n_layer": ("depths", "deeper"), "d_model": ("widths", "wider")}


def _same_loss(v: View, column: str) -> str:
    """', and the depths reach the same validation loss (...)' where every pair of the size grid's models that differ
    only in ``column`` (``size_ordering``) has baselines apart by no more than their networks' spread, so that the
    size axis varies the architecture at one loss; '' otherwise, or with one network per model."""
    order = v.ordering
    if not len(order):
        return ""
    models = set(_size_family(v)[0]["model"].astype(str))
    pairs = order[
        (order["varied"] == column)
        & order["model_a"].astype(str).isin(models)
        & order["model_b"].astype(str).isin(models)
    ]
    if not len(pairs) or (pairs["n_seeds"] < 2).any():
        return ""
    if (pairs["difference"].abs() > pairs["seed_spread"]).any():
        return ""
    means = pd.concat([pairs["mean_loss_a"], pairs["mean_loss_b"]]).astype(float)
    plural, larger = SIZE_WORDS[column]
    return (
        f", and the {plural} reach the same validation loss (means {means.min():.3f} to {means.max():.3f} nats, "
        f"within their networks' spread of up to {float(pairs['seed_spread'].max()):.3f}): a {larger} network here "
        "is not a better-fitting one"
    )


SIZE_TERMS = (("log_n_layer", "N", "n_layer"), ("log_d_model", "D", "d_model"))


def _size_term(v: View, fit: pd.DataFrame, term: str, letter: str, column: str, eps: list[float]):
    """One size term's fit rows at ``eps``, the size grid's values of it, and why it is not determined where the grid
    does not vary it ('' where it does)."""
    rows = fit[(fit["term"] == term) & fit["threshold"].isin(eps)] if len(fit) else fit
    values = sorted(_size_family(v)[0][column].astype(int).unique())
    unvaried = not len(rows) or (rows["reason"] == "not_varied").all()
    if unvaried or (len(values) < 2 and not rows["determined"].astype(bool).any()):
        across = len(v.healed) and v.healed[column].nunique() > 1  # only another family differs in it
        why = (
            "the size grid does not vary it; only another family's networks differ in it"
            if across and len(values) < 2
            else "the grid does not vary it"
        )
        return rows, values, f"{letter} is not determined ({why})"
    return rows, values, ""


def _size_answer(v: View, setting: tuple, eps_pair: list[float]) -> str:
    fit = _pick(v.fit, setting) if len(v.fit) else v.fit
    out = []
    for term, letter, column in SIZE_TERMS:
        rows, values, undetermined = _size_term(v, fit, term, letter, column, eps_pair)
        if undetermined:
            out.append(undetermined)
            continue
        words = []
        for _, r in rows.sort_values("threshold").iterrows():
            if r["determined"]:
                words.append(
                    f"{_direction(r)} at ε = {_eps_words(r['threshold'])} (cost ∝ {letter}^{num(r['coef'])}"
                    f" [{num(r['coef_lo'])}, {num(r['coef_hi'])}])"
                )
            else:
                words.append(f"not determined at ε = {_eps_words(r['threshold'])} ({scaling.REASONS[r['reason']]})")
        out.append(f"larger {letter} ({', '.join(map(str, values))}): " + ", ".join(words) + _same_loss(v, column))
    return "**Do N and D matter?** " + "; ".join(p[0].upper() + p[1:] if i == 0 else p for i, p in enumerate(out)) + "."


def _size_short(v: View, setting: tuple, eps: float) -> str:
    """N and D at one ε in a clause, for the short answer: 'larger N (3, 4, 6): no clear effect; D: not
    determined'."""
    fit = _pick(v.fit, setting) if len(v.fit) else v.fit
    out = []
    for term, letter, column in SIZE_TERMS:
        rows, values, undetermined = _size_term(v, fit, term, letter, column, [eps])
        if undetermined or not len(rows) or not bool(rows["determined"].iloc[0]):
            out.append(f"{letter}: not determined")
        else:
            out.append(f"larger {letter} ({', '.join(map(str, values))}): {_direction(rows.iloc[0])}")
    if all(o.endswith(": not determined") for o in out):
        return "N and D: not determined"
    return "; ".join(out)


def _data_axis_overfit(networks: pd.DataFrame, eps_min: float | None) -> str:
    """Where the size grid's data regimes (S × E) left their networks at different points of their training: one
    regime's networks all ended past their validation minimum by more than ε_min / 4 (they overfit S) and apart from
    every other regime's, so the log S and log E terms measure the regime together with that overfitting. '' where
    the grid has one regime, no pretraining curves, or no such split."""
    if eps_min is None or not len(networks) or "past_minimum" not in networks:
        return ""
    past = (networks["past_minimum"] / networks["baseline_loss"]).rename("past")
    g = networks.assign(past=past).dropna(subset=["past"]).groupby(["train_sequences", "epochs"])
    if g.ngroups < 2:
        return ""
    spans = g.agg(lo=("past", "min"), hi=("past", "max"), models=("model", lambda m: sorted(set(m))))
    spans = spans.sort_values("lo")
    over = spans[spans["lo"] > eps_min / 4]
    rest = spans.drop(over.index)
    if not len(over) or not len(rest) or over["lo"].min() <= rest["hi"].max():
        return ""

    def regime(key, r, what: str = "") -> str:
        share = f"{100 * r['lo']:.2f} %" + ("" if r["lo"] == r["hi"] else f" to {100 * r['hi']:.2f} %")
        return f"{int(key[0]):,} × {int(key[1])}: {share}{what}"

    return (
        "The data axis compares networks at different points of their training (by S × E): "
        + "; ".join(regime(k, r, " above their validation minimum (they overfit S)") for k, r in over.iterrows())
        + ", "
        + "; ".join(regime(k, r) for k, r in rest.iterrows())
        + ". So the log S and log E terms measure those regimes with their overfitting, not S or E alone."
    )


def _sizes(doc: Page, v: View) -> None:
    """4. N and D"""
    networks = v.networks
    doc.h(2, "4. Do N and D matter?")
    grid, family = _size_family(v)
    n_values = sorted(grid["n_layer"].unique()) if len(grid) else []
    d_values = sorted(grid["d_model"].unique()) if len(grid) else []
    others = v.healed[v.healed["model"].isin(set(v.healed["model"]) - set(grid["model"]))].drop_duplicates("model")
    doc.p(
        f"Cost grows as N^b, D^b, S^b, E^b for the coefficient b of log N, D, S, E (the fit and legend of §3). "
        f"The size grid{f' ({family}, the most common family)' if family else ''}: N "
        f"{', '.join(str(int(x)) for x in n_values) or 'none'}; D {', '.join(str(int(x)) for x in d_values) or 'none'}."
        + (
            " Other families (N × D): "
            + ", ".join(f"{r['model']} ({int(r['n_layer'])} × {int(r['d_model'])})" for _, r in others.iterrows())
            + "."
            if len(others)
            else ""
        )
    )
    _fit_table(doc, v.fit, v.layer_settings, ["log_n_layer", "log_d_model", "log_train_sequences", "log_epochs"])
    eps_min = float(v.summary["threshold"].min()) if len(v.summary) else None
    axis = _data_axis_overfit(networks[networks["model"].isin(set(grid["model"]))], eps_min) if len(grid) else ""
    if axis:
        doc.p(axis)
    doc.h(3, "The networks")
    refs = networks.drop_duplicates(["unigram_loss", "bigram_loss"]) if len(networks) else networks
    grams = "; ".join(
        f"{r['unigram_loss']:.3f}, "
        + (
            "none (masked LM)"
            if pd.isna(r["bigram_loss"])
            else f"{r['bigram_loss']:.3f} ({num(float(r['bigram_weight']))})"
        )
        + f" ({', '.join(sorted(networks[networks['unigram_loss'] == r['unigram_loss']]['family_kind'].unique()))})"
        for _, r in refs.iterrows()
    )
    every_off = len(networks) and "off_plateau" in networks and flag(networks["off_plateau"]).all()
    body = (
        [_network_row(g, not every_off) for _, g in networks.sort_values(["model", "pretrain_seed"]).groupby("model")]
        if len(networks)
        else []
    )
    flagged = any(row[-1] for row in body)
    past = (networks["past_minimum"] / networks["baseline_loss"]).dropna() if "past_minimum" in networks else []
    past_words = (  # a downloaded model has no pretraining curve: n/a
        f"; past its minimum: how far above its own pretraining curve's lowest validation loss it ended (it "
        f"overfits S; {int((past > eps_min / 4).sum())} of {len(past)} networks by more than ε_min / 4 = "
        f"{_eps_words(eps_min / 4)}; whether more pretraining would lower it: §8's plateau check)"
        if eps_min is not None and len(past)
        else ""
    )
    doc.p(
        "Validation loss (nats per token); margin over the train split's bigram (interpolated with the unigram, "
        f"λ tuned on validation; under 0.1 nats: degenerate){past_words}. Unigram, bigram (λ): {grams}."
    )
    if every_off:
        doc.p("Every network was still improving at the end of pretraining (off its plateau; §8).")
    doc.table(
        ["model", "loss per seed", "margin per seed", "past its minimum per seed"] + (["flags"] if flagged else []),
        [row if flagged else row[:-1] for row in body],
    )
    _ordering(doc, v.ordering)


def _network_row(g: pd.DataFrame, plateau: bool = True) -> list[str]:
    """One model's networks: their losses, margins over the bigram and how far each ended past its validation
    minimum (one per pretraining seed), and flags."""

    def losses(column):
        return ", ".join("n/a" if pd.isna(x) else f"{float(x):.3f}" for x in g[column]) if column in g else "n/a"

    r = g.iloc[0]
    margins = g["bigram_margin"] if "bigram_margin" in g else g["bigram_loss"] - g["baseline_loss"]
    seeds: dict[str, list[str]] = {}
    for _, n in g.iterrows():
        if bool(n.get("degenerate", False)):
            reason = n.get("degenerate_reason")
            label = "**degenerate**" + (f" ({reason})" if isinstance(reason, str) and reason else "")
            seeds.setdefault(label, []).append(str(n["pretrain_seed"]))
        if plateau and bool(n.get("off_plateau", False)):
            seeds.setdefault("off its plateau", []).append(str(n["pretrain_seed"]))
    flags = [f"{label} (seed{'s' if len(s) > 1 else ''} {', '.join(s)})" for label, s in seeds.items()]
    past = g["past_minimum"] / g["baseline_loss"] if "past_minimum" in g else pd.Series([None] * len(g))
    return [
        r["model"],
        losses("baseline_loss"),
        ", ".join("n/a" if pd.isna(m) else f"{float(m):+.3f}" for m in margins),
        ", ".join("n/a" if pd.isna(x) else f"{100 * float(x):.2f} %" for x in past),
        "; ".join(flags),
    ]


def _ordering(doc: Page, order: pd.DataFrame) -> None:
    """Each pair of size_ordering with its numbers."""
    if not len(order):
        doc.p(
            "Size ordering: no two models of the same family differ in exactly one of N and D, so the grid cannot "
            "show how the baseline moves with N or D."
        )
        return
    held = {k: (int(g["holds"].sum()), len(g)) for k, g in order.groupby("varied")}
    said = [
        f"at fixed N it falls with D in {held['d_model'][0]} of {held['d_model'][1]} pairs"
        if "d_model" in held
        else "",
        f"at fixed D it does not rise with N in {held['n_layer'][0]} of {held['n_layer'][1]} pairs"
        if "n_layer" in held
        else "",
    ]
    doc.p(
        "Size ordering of the baselines (means over the seeds; a pair holds by more than the larger seed spread of "
        f"its two models): {'; '.join(filter(None, said))}."
    )
    failed = order[~order["holds"].astype(bool)]
    if len(failed):
        doc.p(
            "Pairs where it does not hold (smaller → larger; mean loss; difference; seed spread): "
            + "; ".join(
                f"{r['model_a']} → {r['model_b']}: {r['mean_loss_a']:.3f} → {r['mean_loss_b']:.3f}, "
                f"{r['difference']:+.3f}, " + ("one seed" if r["n_seeds"] < 2 else f"{r['seed_spread']:.3f}")
                for _, r in failed.iterrows()
            )
            + " (every pair: `answer/size_ordering.parquet`)."
        )


def _out_of_sample(doc: Page, v: View) -> None:
    """4b. Does the trend predict a size it was not fitted on?"""
    table = v.tables.get("out_of_sample", pd.DataFrame(columns=out_of_sample.COLUMNS))
    doc.h(3, "Does the trend predict a size it was not fitted on?")
    if not len(table):
        doc.p(
            "Not tested: the size grid needs more than two levels of N or D, or more than two sizes, to leave one "
            "out and still fit a trend (`answer/out_of_sample.parquet` is empty)."
        )
        return
    doc.p(
        "The fit of §3–4, refitted on the size grid without one part of it, predicts each left-out layer's median; "
        "a layer **held** where the predicted and measured intervals overlap (beyond the budget: between the budget "
        "and ∞); not tested: a median of 0, or a kind of cell that left the fit (per layer: "
        f"`answer/out_of_sample.parquet`, [plot]({v.plot_links['answer_out_of_sample']}))."
    )
    verdicts = out_of_sample.verdicts(table)
    items = []
    for name, g in verdicts.groupby("left_out", sort=False):
        words = "; ".join(
            f"**{verdict}** at ε = {', '.join(f'{e:g}' for e in h['threshold'])}"
            + (
                f" ({int(h['held'].sum())} of {int(h['layers'].sum())} tested layers held)"
                if verdict in ("held", "did not hold")
                else ""
            )
            + (f" ({h['note'].iloc[0]})" if verdict == "not fitted" and h["note"].iloc[0] else "")
            for verdict, h in g.groupby("verdict", sort=False)
        )
        items.append(f"{name} ({g['models'].iloc[0]}): {words}")
    doc.ul(items)


def section(doc: Page, v: View) -> None:
    """4. Do N and D matter? The sizes, then the out-of-sample check."""
    _sizes(doc, v)
    _out_of_sample(doc, v)
