"""What every section reads (``View``: the answer tables, the workflow's tables and the figures' links) and the
selections of networks and cells several sections share.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from selfheal.analysis import answer_tables, survival
from selfheal.analysis.answer_page.words import CROSS_ATTN, _pick, _settings, _sxe_words_row
from selfheal.analysis.page import span
from selfheal.analysis.stats import flag

# Words for networks.parquet's degenerate_reason (analysis/tables.py: UNIGRAM_MARGIN, BIGRAM_MARGIN).
DEGENERATE_WORDS = {
    "unigram": "its baseline is not clearly below the unigram loss",
    "bigram": "it does not beat the interpolated bigram by 0.1 nats",
    "reset_all_harmless": "resetting every layer did less damage than ε_min",
}


def _estimated(networks: pd.DataFrame) -> pd.DataFrame:
    """The networks the estimates use: neither degenerate nor off their plateau (``survival.left_out``)."""
    return networks[~survival.left_out(networks)]


def _clusters_sentence(networks: pd.DataFrame) -> str:
    """How many pretrained networks per model the intervals resample: those the estimates use, or every network
    where none is usable (the page then answers nothing). A model with a single network is named: its intervals
    cover retrain seeds only."""
    used = _estimated(networks)
    per_model = (used if len(used) else networks).groupby("model")["pretrain_seed"].nunique()
    if not len(per_model):
        return ""
    single, rest = per_model[per_model <= 1], per_model[per_model > 1]
    if not len(single):
        return _resampled(rest, "Intervals (95 %)")
    named = "Every model" if not len(rest) else ", ".join(f"`{m}`" for m in sorted(single.index))
    return (
        f"{'Each of ' if len(single) > 1 and len(rest) else ''}{named} has a single pretrained network here: its "
        "intervals resample retrain seeds only and do **not** cover the variation between independently pretrained "
        "networks." + (" " + _resampled(rest, "The other models' intervals (95 %)") if len(rest) else "")
    )


def _resampled(per_model: pd.Series, lead: str) -> str:
    """'<lead> resample the pretrained networks, only a to b per model: read directions, not digits.'"""
    counts, least = span(per_model.astype(float)), int(per_model.min())
    if least < 5:
        return f"{lead} resample the pretrained networks, only {counts} per model: read directions, not digits." + (
            " With two, a median is the faster network's cost." if least == 2 else ""
        )
    return f"{lead} resample the pretrained networks ({counts} per model)."


def _usable(networks: pd.DataFrame) -> pd.DataFrame:
    """The networks the estimates use (not degenerate)."""
    if "degenerate" not in networks.columns:
        return networks
    return networks[~flag(networks["degenerate"])]


def _pretrained_here(networks: pd.DataFrame) -> pd.DataFrame:
    return networks[networks["source"] == "scratch"] if "source" in networks.columns else networks


def _reasons(networks: pd.DataFrame) -> str:
    """The words for the degenerate_reason codes of some networks, each once."""
    codes = sorted(
        {c for r in networks.get("degenerate_reason", pd.Series(dtype=str)).dropna() for c in str(r).split(",") if c}
    )
    return ", ".join(DEGENERATE_WORDS.get(c, c) for c in codes) or "flagged"


def _network(v: View, model: str) -> pd.Series:
    return v.networks[v.networks["model"] == model].iloc[0]


def _pretrained_elsewhere(v: View, rows: pd.DataFrame) -> list[str]:
    """The models of ``rows`` a user brought (networks.parquet's source is not scratch)."""
    if "source" not in v.networks:
        return []
    nets = v.networks[v.networks["model"].isin(set(rows["model"]))]
    return sorted(set(nets.loc[nets["source"].fillna("scratch") != "scratch", "model"]))


def _layer_cells(v: View, setting: tuple | None, *outcomes: str) -> pd.DataFrame:
    """The single-layer cells of these outcomes in network_costs.parquet (of one setting, where given)."""
    cells = v.tables.get("network_costs")
    if cells is None or not len(cells):
        return pd.DataFrame(columns=answer_tables.NETWORK_COST_COLUMNS)
    cells = cells[(cells["kind"] == survival.LAYER) & cells["outcome"].isin(outcomes)]
    return _pick(cells, setting) if setting else cells


def _sxe_words(v: View, model: str) -> str:
    net = v.networks[v.networks["model"] == model]
    return _sxe_words_row(net.iloc[0]) if len(net) else "n/a"


def _origins(v: View, rows: pd.DataFrame) -> tuple[bool, bool]:
    """Whether the models of ``rows`` include some pretrained here, and some a user brought."""
    brought = _pretrained_elsewhere(v, rows)
    return bool(set(rows["model"]) - set(brought)), bool(brought)


@dataclasses.dataclass
class View:
    """What every section reads: the answer tables, the three workflow tables and the figures' links, with the
    selections several sections share."""

    tables: dict[str, pd.DataFrame]
    summary: pd.DataFrame
    networks: pd.DataFrame
    plot_links: dict[str, str]

    def __post_init__(self) -> None:
        t = self.tables
        self.surv, self.fit, self.flags = t["survival"], t["fit"], t["networks_flags"]
        self.ref = t["pretrain_reference"]
        self.layers = self.surv[self.surv["kind"] == survival.LAYER] if len(self.surv) else self.surv
        self.degenerate = self.flags[self.flags["degenerate"].astype(bool)] if len(self.flags) else self.flags
        self.settings = _settings(self.surv) if len(self.surv) else []
        # the settings §1 to §5 read as single-layer resets: the cross-attention's policy is the aside's, read in §6
        # where the grid has one
        aside = len(t.get("encoder_decoder", pd.DataFrame()))
        self.layer_settings = [s for s in self.settings if not (aside and s[1] == CROSS_ATTN)]
        ordering = t.get("size_ordering")
        self.ordering = answer_tables.size_ordering(self.networks) if ordering is None else ordering
        # the networks of models with cells: a donor (``heal: false``) is pretrained and listed, never healed, so
        # it is neither a size the answer speaks of nor a model whose intervals resample its networks
        healed = self.networks["model"].isin(set(self.summary["model"]))
        self.healed = self.networks[healed] if healed.any() else self.networks
