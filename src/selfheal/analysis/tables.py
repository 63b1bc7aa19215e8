"""Collecting per-cell results into the tidy tables the plots, the answer page and users read.

``summary.parquet``: one row per (cell, threshold). ``curves.parquet``: every recovery curve and every pretraining
curve, one row per evaluation. ``networks.parquet``: one row per pretrained network (model, pretraining seed) with
the quality flags every table carries. Their columns, flags (``off_plateau``, ``degenerate`` and its reasons,
``baseline_not_converged``), outcomes (``add_outcomes``) and the cost relative to the from-scratch run
(``add_scratch_reference``: where the network's own pretraining curve first reached the same threshold loss,
``stats.first_crossing``) are documented in docs/outputs.md and fixed by SUMMARY_COLUMNS / CURVE_COLUMNS /
NETWORK_COLUMNS below.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, fields

import pandas as pd

from selfheal import records, results_io
from selfheal.analysis import answer_tables, controls
from selfheal.analysis.stats import RESOLUTION, Crossing, fewest_crossing, flag, kept_pretraining, last_doubling, typed
from selfheal.grid import TRAINED
from selfheal.heal.thresholds import threshold_loss
from selfheal.models.families import FAMILIES
from selfheal.records import Baseline, CellResult, PretrainSummary, Recovery

log = logging.getLogger("selfheal")

SUMMARY_COLUMNS = [
    "model",
    "pretrain_seed",
    "arch",
    "n_layer",
    "d_model",
    "target",
    "stack",
    "layer",
    "depth",
    "policy",
    "init",
    "regime",
    "seed",
    "threshold",
    "recovered",
    "diverged",
    "diverged_step",
    "examples",
    "tokens",
    "steps",
    "fraction_of_pretrain",
    "examples_lo",
    "examples_hi",
    "tokens_lo",
    "tokens_hi",
    "steps_lo",
    "steps_hi",
    "fraction_lo",
    "fraction_hi",
    "baseline_loss",
    "damaged_loss",
    "final_loss",
    "threshold_loss",
    "wall_s",
    "budget_examples",
    "pretrain_examples",
    "trainable_params",
    "n_params",
    "control_loss",
    "control_examples_lo",
    "control_examples_hi",
    "baseline_not_converged",
    "degenerate",
    "off_plateau",
    "cka",
    "cka_floor",
    "scratch_examples",
    "scratch_examples_lo",
    "scratch_examples_hi",
    "scratch_coarse",
    "relative_to_scratch",
    "relative_lo",
    "relative_hi",
    "outcome",
    "fall_per_doubling",
    "fall_se",
    "confirm_sequences",
    "confirm_loss",
    "confirm_baseline_loss",
    "confirmed",
    "val_diff_se",
    "budget_unit",
    "stalled_examples",
    "lr",
    "lr_at_edge",
]
OUTCOMES = ("not_damaged", "recovered", "diverged", "stalled", "still_falling")
CURVE_COLUMNS = [
    "kind",
    "model",
    "pretrain_seed",
    "target",
    "stack",
    "layer",
    "depth",
    "policy",
    "init",
    "regime",
    "seed",
    "examples",
    "tokens",
    "steps",
    "fraction_of_pretrain",
    "wall_s",
    "val_loss",
    "train_loss",
    "replay",
    "lr",
    "kept",
]
NETWORK_COLUMNS = [
    "model",
    "pretrain_seed",
    "arch",
    "family_kind",
    "source",
    "n_layer",
    "d_model",
    "n_params",
    "train_sequences",
    "epochs",
    "context",
    "pretrain_examples",
    "pretrain_tokens",
    "pretraining_tokens",
    "pretrain_lr",
    "lr_at_edge",
    "stopped_by",
    "unfinished_lr",
    "baseline_loss",
    "unigram_loss",
    "bigram_loss",
    "bigram_weight",
    "bigram_margin",
    "last_quarter_val_drop",
    "plateau_examples",
    "plateau_val_loss",
    "plateau_gain",
    "min_val_loss",
    "past_minimum",
    "off_plateau",
    "degenerate",
    "degenerate_reason",
]
CELL_KEYS = ["model", "pretrain_seed", "target", "policy", "init", "regime", "seed"]
# summary.parquet's columns as a cell's record (recovery.json) has them, and as each of its thresholds' has them
CELL_FIELDS = [f.name for f in fields(CellResult) if f.name in SUMMARY_COLUMNS]
RECOVERY_FIELDS = [f.name for f in fields(Recovery) if f.name in SUMMARY_COLUMNS]
PRETRAIN_FIELDS = [f.name for f in fields(PretrainSummary) if f.name in NETWORK_COLUMNS]  # networks.parquet's, as is
NETWORK_KEYS = ["model", "pretrain_seed"]
UNIGRAM_MARGIN = 0.05  # a baseline must be at least 5 % below the unigram loss not to be degenerate
BIGRAM_MARGIN = 0.1  # ... and at least 0.1 nats below the (validation-tuned) interpolated bigram loss
SCRATCH_RESOLUTION = RESOLUTION  # 10 %: a pretraining bracket wider than this share of scratch_examples is coarse
SCRATCH_SOURCE = "scratch"  # the networks whose pretraining curve is a from-scratch run


def _fraction(examples, pretrain_examples):
    """examples / (S x E), or missing when S x E is unknown (a downloaded model)."""
    return examples / pretrain_examples if pretrain_examples else None


def _confirmed(rec: dict, cell: dict) -> bool | None:
    """A recovered threshold confirmed on the confirmation sequences: the cell's final weights are within it there
    too (null when not recovered or not confirmed)."""
    if not rec["recovered"] or cell["confirm_loss"] is None:
        return None
    return bool(cell["confirm_loss"] <= cell["confirm_baseline_loss"] * (1 + rec["threshold"]))


def summary_table(recovery_paths: list[str]) -> pd.DataFrame:
    rows = []
    for path in recovery_paths:
        cell = asdict(records.read(path, CellResult))
        for rec in cell["recoveries"]:
            rows.append(
                {
                    **{k: cell[k] for k in CELL_FIELDS},
                    **{k: rec[k] for k in RECOVERY_FIELDS},
                    **{f"{k}_hi": rec[k] if rec["recovered"] else None for k in ("examples", "tokens", "steps")},
                    "diverged": cell["diverged_step"] is not None,
                    "fraction_of_pretrain": _fraction(rec["examples"], cell["pretrain_examples"]),
                    "fraction_lo": _fraction(rec["examples_lo"], cell["pretrain_examples"]),
                    "fraction_hi": _fraction(rec["examples"], cell["pretrain_examples"]) if rec["recovered"] else None,
                    "threshold_loss": threshold_loss(cell["baseline_loss"], rec["threshold"]),
                    "confirmed": _confirmed(rec, cell),
                }
            )
    table = typed(
        pd.DataFrame(rows, columns=SUMMARY_COLUMNS),
        Int64=[
            "layer",
            "depth",
            "pretrain_examples",
            "diverged_step",
            "examples_hi",
            "tokens_hi",
            "steps_hi",
            "stalled_examples",
            "confirm_sequences",
            "scratch_examples_lo",
            "scratch_examples_hi",
        ],
        float64=[
            "fraction_of_pretrain",
            "fraction_lo",
            "fraction_hi",
            "cka",
            "cka_floor",
            "control_loss",
            "scratch_examples",
            "relative_to_scratch",
            "relative_lo",
            "relative_hi",
            "confirm_loss",
            "confirm_baseline_loss",
            "val_diff_se",
            "lr",
        ],
        boolean=["confirmed", "lr_at_edge"],
    )
    table["scratch_coarse"] = False  # filled by add_scratch_reference
    return table.sort_values(
        ["model", "pretrain_seed", "regime", "policy", "init", "target", "seed", "threshold"], ignore_index=True
    )


def curves_table(
    recovery_paths: list[str],
    recovery_curve_paths: list[str],
    pretrain_summaries: list[str],
    pretrain_curve_paths: list[str],
) -> pd.DataFrame:
    parts = []
    for summary_path, curve_path in zip(pretrain_summaries, pretrain_curve_paths):
        pre = records.read(summary_path, PretrainSummary)
        curve = pd.read_parquet(curve_path)
        curve["kind"] = "pretrain"
        curve["model"] = pre.model
        curve["pretrain_seed"] = pre.pretrain_seed
        curve["fraction_of_pretrain"] = curve["examples"] / pre.pretrain_examples
        if "kept" not in curve.columns:  # one copy: the network's
            curve["kept"] = True
        parts.append(curve)
    for recovery_path, curve_path in zip(recovery_paths, recovery_curve_paths):
        cell = asdict(records.read(recovery_path, CellResult))
        curve = pd.read_parquet(curve_path)
        curve["kind"] = "recovery"
        for k in (*CELL_KEYS, "stack", "layer", "depth"):
            curve[k] = cell[k]
        curve["fraction_of_pretrain"] = _fraction(curve["examples"], cell["pretrain_examples"])
        curve["kept"] = True
        parts.append(curve)
    table = pd.concat(parts, ignore_index=True).reindex(columns=CURVE_COLUMNS)
    # missing in a pretraining curve: False
    table["replay"] = flag(table["replay"])
    table["kept"] = flag(table["kept"])
    table["lr"] = table["lr"].astype("float64")
    for column in ("layer", "depth", "seed", "pretrain_seed"):
        table[column] = table[column].astype("Int64")
    table["fraction_of_pretrain"] = table["fraction_of_pretrain"].astype("float64")
    return table


def family_kind(arch: str) -> str:
    family = FAMILIES[arch]
    if len(family.stacks) == 2:
        return "encoder-decoder"
    return "encoder-only" if family.objective == "masked_lm" else "decoder-only"


def degenerate_reasons(
    val_loss: float, unigram_loss: float | None, bigram_loss: float | None, harmless_reset: bool
) -> list[str]:
    """Which of the ``degenerate`` conditions fire (module docstring): ``unigram``, ``bigram``,
    ``reset_all_harmless``."""
    reasons = []
    if unigram_loss is not None and not pd.isna(unigram_loss) and val_loss > unigram_loss * (1 - UNIGRAM_MARGIN):
        reasons.append("unigram")
    if bigram_loss is not None and not pd.isna(bigram_loss) and bigram_loss - val_loss < BIGRAM_MARGIN:
        reasons.append("bigram")
    if harmless_reset:
        reasons.append("reset_all_harmless")
    return reasons


def networks_table(
    pretrain_summaries: list[str],
    baselines: list[str],
    summary: pd.DataFrame,
    thresholds: dict[str, list[float]],
    pretraining_tokens: dict[str, int | None] | None = None,
) -> pd.DataFrame:
    """One row per network (a baseline file), with its quality flags; ``thresholds``: eps list per model;
    ``pretraining_tokens``: per downloaded model, the tokens of its own pretraining elsewhere as the config states
    them (the model key ``pretraining_tokens``; null where not given)."""
    pretraining_tokens = pretraining_tokens or {}
    pres = {(p.model, p.pretrain_seed): p for p in (records.read(path, PretrainSummary) for path in pretrain_summaries)}
    damage = summary[
        (summary["target"] == "all") & (summary["policy"] == "full") & (summary["init"] != TRAINED)
    ].drop_duplicates(CELL_KEYS)
    rows = []
    for path in baselines:
        base = records.read(path, Baseline)
        pre = pres[(base.model, base.pretrain_seed)]
        eps_min = min(thresholds[base.model])
        gain = None if pre.plateau_val_loss is None else base.val_loss - pre.plateau_val_loss
        all_damage = damage[(damage["model"] == base.model) & (damage["pretrain_seed"] == base.pretrain_seed)]
        harmless_reset = bool(len(all_damage)) and bool(
            ((all_damage["damaged_loss"] - base.val_loss) / base.val_loss < eps_min).any()
        )
        reasons = degenerate_reasons(base.val_loss, base.unigram_loss, base.bigram_loss, harmless_reset)
        rows.append(
            {
                **{k: getattr(pre, k) for k in PRETRAIN_FIELDS},
                "family_kind": family_kind(pre.arch),
                "n_params": pre.params,
                "pretrain_examples": pre.pretrain_examples,
                "pretrain_tokens": pre.tokens,
                "pretraining_tokens": pretraining_tokens.get(base.model),
                "pretrain_lr": pre.lr,
                "lr_at_edge": pre.lr_at_edge,
                "stopped_by": pre.stopped_by,
                "unfinished_lr": getattr(pre, "unfinished_lr", None),
                "baseline_loss": base.val_loss,
                "unigram_loss": base.unigram_loss,
                "bigram_loss": base.bigram_loss,
                "bigram_weight": base.bigram_weight,
                "bigram_margin": None if base.bigram_loss is None else base.bigram_loss - base.val_loss,
                "plateau_gain": gain,
                "off_plateau": pre.off_plateau(base.val_loss, eps_min),
                "degenerate": bool(reasons),
                "degenerate_reason": ",".join(reasons),
            }
        )
    table = typed(
        pd.DataFrame(rows, columns=NETWORK_COLUMNS),
        Int64=[
            "train_sequences",
            "context",
            "pretrain_examples",
            "pretrain_tokens",
            "pretraining_tokens",
            "plateau_examples",
        ],
        float64=[
            "epochs",
            "pretrain_lr",
            "unfinished_lr",
            "unigram_loss",
            "bigram_loss",
            "bigram_weight",
            "bigram_margin",
            "last_quarter_val_drop",
            "plateau_val_loss",
            "plateau_gain",
        ],
        str=["degenerate_reason"],
    )
    table["lr_at_edge"] = table["lr_at_edge"].astype("boolean")
    return table.sort_values(NETWORK_KEYS, ignore_index=True)


def add_minimum(networks: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """``min_val_loss``, the lowest validation loss on a network's pretraining curve, and ``past_minimum``,
    baseline_loss - min_val_loss (nats; null without a curve): how far past its validation minimum the network
    ended. The plateau check sees the other side (more training would still lower it)."""
    pre = kept_pretraining(curves)
    pre = pre[~flag(pre["replay"])]
    lowest = pre.groupby(NETWORK_KEYS)["val_loss"].min().rename("min_val_loss")
    out = networks.drop(columns=["min_val_loss", "past_minimum"], errors="ignore").join(lowest, on=NETWORK_KEYS)
    out["past_minimum"] = out["baseline_loss"] - out["min_val_loss"]
    return out.reindex(columns=NETWORK_COLUMNS)


def add_controls_and_flags(summary: pd.DataFrame, curves: pd.DataFrame, networks: pd.DataFrame) -> pd.DataFrame:
    """Per cell: its matched control's val loss at the cell's examples and ``baseline_not_converged``; per network:
    ``degenerate`` and ``off_plateau``. A cell with no matched control in its own retrain seed uses the first
    retrain seed's control of its network (the default runs controls for that seed only)."""
    out = summary.copy()
    flags = networks.set_index(NETWORK_KEYS)[["degenerate", "off_plateau"]]
    index = pd.MultiIndex.from_frame(out[NETWORK_KEYS])
    for flag_name in ("degenerate", "off_plateau"):
        out[flag_name] = flag(flags[flag_name].reindex(index)).to_numpy()
    control_of = controls.matched_controls(curves)
    eps_min = out.groupby("model")["threshold"].transform("min")
    losses, flagged = [], []
    for row, eps in zip(out.itertuples(index=False), eps_min):
        curve = control_of(row)
        if curve is None:
            losses.append(None)
            flagged.append(False)
            continue
        seen = curve[curve["examples"] <= row.examples]
        losses.append(float(seen["val_loss"].iloc[-1]) if len(seen) else None)
        flagged.append(bool(len(seen)) and bool(seen["val_loss"].min() < row.baseline_loss * (1 - eps / 2)))
    out["control_loss"] = pd.Series(losses, index=out.index, dtype="float64")
    out["baseline_not_converged"] = flagged
    return out


def add_control_crossings(summary: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """``control_examples_lo`` / ``control_examples_hi``: each cell's crossing of ε measured against its matched
    control instead of its baseline, along the regular evaluations both curves share (docs/outputs.md)."""
    out = summary.copy()
    control_of = controls.matched_controls(curves)
    rec = curves[curves["kind"] == "recovery"]
    if "replay" in rec.columns:  # located crossings are the cell's alone: the shared evaluations are regular ones
        rec = rec[~flag(rec["replay"])]
    own = {key: group for key, group in rec.groupby(CELL_KEYS, sort=False, dropna=False)}
    # per cell: its and its control's losses at the evaluations they share
    shared: dict[tuple, pd.DataFrame | None] = {}
    lows, highs = [], []
    for row in out.itertuples(index=False):
        key = tuple(getattr(row, k) for k in CELL_KEYS)
        if key not in shared:
            control, cell = control_of(row), own.get(key)
            if control is not None and cell is not None:
                regular = control[~flag(control["replay"])] if "replay" in control else control
                both = cell[["examples", "val_loss"]].merge(
                    regular[["examples", "val_loss"]], on="examples", suffixes=("", "_control")
                )
                shared[key] = both.sort_values("examples", ignore_index=True)
            else:
                shared[key] = None
        both = shared[key]
        lo = hi = None
        if both is not None:
            within = both["val_loss"] <= (1 + row.threshold) * both["val_loss_control"]
            if within.any():
                first = int(within.to_numpy().argmax())
                hi = int(both["examples"].iloc[first])
                lo = int(both["examples"].iloc[first - 1]) if first else hi
            elif len(both):
                lo = int(both["examples"].iloc[-1])
        lows.append(lo)
        highs.append(hi)
    out["control_examples_lo"] = pd.array(lows, dtype="Int64")
    out["control_examples_hi"] = pd.array(highs, dtype="Int64")
    return out


def add_scratch_reference(summary: pd.DataFrame, curves: pd.DataFrame, networks: pd.DataFrame) -> pd.DataFrame:
    """The scratch_* and relative_* columns (module docstring): per (cell, threshold), where the network's own
    from-scratch pretraining curve first reached the row's threshold_loss, interpolated, and the cell's cost over
    it. Networks not pretrained from scratch here (``source`` other than scratch) and networks without a curve get
    NaN / null."""
    out = summary.copy()
    by_network = answer_tables.pretrain_curves(curves, networks, scratch_only=True)  # the one builder
    found: dict[tuple, Crossing | None] = {}
    crossings = []  # per row, its network's first crossing of its threshold loss (None: no from-scratch curve)
    for model, ps, level in zip(out["model"], out["pretrain_seed"], out["threshold_loss"]):
        key = (model, int(ps), float(level))
        if key not in found:
            curve = by_network.get(key[:2])
            found[key] = fewest_crossing(curve, key[2], resolution=SCRATCH_RESOLUTION) if curve is not None else None
        crossings.append(found[key])
    examples = [c.examples if c else math.nan for c in crossings]
    out["scratch_examples"] = pd.Series(examples, index=out.index, dtype="float64")
    out["scratch_examples_lo"] = pd.array([c.examples_lo if c else None for c in crossings], dtype="Int64")
    out["scratch_examples_hi"] = pd.array([c.examples_hi if c else None for c in crossings], dtype="Int64")
    out["scratch_coarse"] = pd.Series([bool(c.coarse) if c else False for c in crossings], index=out.index, dtype=bool)
    base = out["scratch_examples"].where(out["scratch_examples"] > 0)
    for column, cost in (
        ("relative_to_scratch", "examples"),
        ("relative_lo", "examples_lo"),
        ("relative_hi", "examples_hi"),
    ):
        out[column] = (pd.to_numeric(out[cost], errors="coerce").astype("float64") / base).astype("float64")
    return out


def add_outcomes(summary: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """The ``outcome``, ``fall_per_doubling`` and ``fall_se`` columns (module docstring)."""
    out = summary.copy()
    rec = curves[curves["kind"] == "recovery"] if "kind" in curves.columns else curves.iloc[:0]
    if "replay" in rec.columns:  # the stall rule reads the regular evaluations (``heal.stall.of_curve``)
        rec = rec[~flag(rec["replay"])]
    trends = {
        key: last_doubling(group["examples"], group["val_loss"])
        for key, group in rec.groupby(CELL_KEYS, sort=False, dropna=False)
    }
    outcome, fall, fall_se = [], [], []
    for row in out.itertuples(index=False):
        trend = None
        if row.damaged_loss <= row.threshold_loss:
            kind = "not_damaged"
        elif row.recovered:
            kind = "recovered"
        elif row.diverged:
            kind = "diverged"
        else:
            trend = trends.get(tuple(getattr(row, k) for k in CELL_KEYS))
            kind = "stalled" if trend is not None and trend.stalled else "still_falling"
        outcome.append(kind)
        fall.append(trend.fall if trend else math.nan)
        fall_se.append(trend.fall_se if trend else math.nan)
    out["outcome"] = pd.Series(outcome, index=out.index, dtype="string")
    out["fall_per_doubling"] = pd.Series(fall, index=out.index, dtype="float64")
    out["fall_se"] = pd.Series(fall_se, index=out.index, dtype="float64")
    return out


def write(
    files: dict[str, list[str]],
    thresholds: dict[str, list[float]],
    summary_out: str,
    curves_out: str,
    networks_out: str,
    pretraining_tokens: dict[str, int | None] | None = None,
) -> None:
    """``files``: a run's inputs by kind (``layout.read_files``): ``pretrain`` / ``pretrain_curves`` the networks
    pretrained or adapted here (pairwise), ``unadapted`` downloaded models healed as downloaded (no curve);
    ``pretraining_tokens``: the model key of that name per model (``networks_table``)."""
    recoveries, pretrain = files["recoveries"], files["pretrain"]
    summary = summary_table(recoveries)
    curves = curves_table(recoveries, files["curves"], pretrain, files["pretrain_curves"])
    pre = [*pretrain, *files["unadapted"]]  # every network's pretraining (or import) record
    networks = add_minimum(networks_table(pre, files["baselines"], summary, thresholds, pretraining_tokens), curves)
    summary = add_scratch_reference(add_controls_and_flags(summary, curves, networks), curves, networks)
    summary = add_control_crossings(add_outcomes(summary, curves), curves)
    results_io.write_parquet(summary_out, summary.reindex(columns=SUMMARY_COLUMNS))
    results_io.write_parquet(curves_out, curves)
    results_io.write_parquet(networks_out, networks)
    for row in networks.itertuples(index=False):
        for name in ("degenerate", "off_plateau"):
            if getattr(row, name):
                reason = f" ({row.degenerate_reason})" if name == "degenerate" else ""
                log.warning(
                    "network %s (pretrain seed %d) is flagged %s%s: its cells say little about healing "
                    "(docs/outputs.md)",
                    row.model,
                    row.pretrain_seed,
                    name,
                    reason,
                )
