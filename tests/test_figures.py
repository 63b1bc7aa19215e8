"""Every figure shows its data: each quantitative axis has an explicit domain that covers every value drawn on it,
no value a log scale cannot show (0, negative, NaN, inf) is sent to one, costs of 0 sit on a symlog axis whose
domain starts at 0, and no point is silently dropped (a NaN or inf becomes null in the spec, and Vega-Lite skips
it). Checked on the specs (``chart.to_dict()``) of every figure in ``plots.FIGURES`` and ``answer_plots.FIGURES``
and of ``frozen_random_plot.figure``: on a synthetic survival table with zeros, censored medians and costs from 1e-4 to
1, on the synthetic grid of tests/answer_helpers.py, and on the real tiny run (``tiny_run``)."""

import math
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from answer_helpers import synthetic
from conftest import assert_drawn_png
from selfheal.analysis import answer_plots, answer_tables, plots, survival
from selfheal.experiments import frozen_random_plot

warnings.filterwarnings("ignore", module="lifelines")
warnings.filterwarnings("ignore", module="autograd")
POSITION = {"x": "x", "y": "y", "x2": "x", "y2": "y"}


# ---------------------------------------------------------------- reading a spec


def _rows_passing(rows: list[dict], transforms: list[dict]) -> list[dict]:
    """The rows a unit draws: its filter transforms (the simple comparisons the figures use) applied."""
    for transform in transforms:
        if "filter" not in transform:
            continue
        expr = transform["filter"]
        assert isinstance(expr, str), f"unexpected filter {expr!r}"
        expr = expr.replace("!==", "!=").replace("===", "==").replace("&&", " and ").replace("||", " or ")
        expr = re.sub(r"datum\.(\w+)", r"d.get('\1')", expr)
        expr = re.sub(r"datum\[(['\"][^'\"]+['\"])\]", r"d.get(\1)", expr)
        expr = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", expr)))
        rows = [d for d in rows if eval(expr, {}, {"d": d})]  # noqa: S307 - our own figures' expressions
    return rows


def units(spec: dict, datasets: dict, data=None, transforms=()):
    """Every unit spec (one mark) with the rows it draws, walking layer / facet / concat specs."""
    if "data" in spec:
        data = datasets[spec["data"]["name"]] if "name" in spec["data"] else spec["data"].get("values", [])
    transforms = [*transforms, *spec.get("transform", [])]
    if "mark" in spec:
        yield spec, _rows_passing(list(data or []), transforms)
    for key in ("layer", "vconcat", "hconcat", "concat"):
        for child in spec.get(key, []):
            yield from units(child, datasets, data, transforms)
    if "spec" in spec:
        yield from units(spec["spec"], datasets, data, transforms)


def axes(chart) -> list[dict]:
    """Per unit and positional channel: the scale, the values drawn on it, and the values the rows lack (null)."""
    spec = chart.to_dict()
    out = []
    for unit, rows in units(spec, spec.get("datasets", {})):
        mark = unit["mark"]["type"] if isinstance(unit["mark"], dict) else unit["mark"]
        encoding = unit.get("encoding", {})
        for channel, position in POSITION.items():
            enc = encoding.get(channel)
            if not enc:
                continue
            owner = encoding.get(position, {})
            if channel == position and owner.get("type") not in ("quantitative", None):
                continue
            scale = owner.get("scale", {}) or enc.get("scale", {})
            if "datum" in enc:
                values, missing = [enc["datum"]], 0
            elif "field" in enc:
                values = [d.get(enc["field"]) for d in rows]
                missing = sum(v is None for v in values)
                values = [v for v in values if v is not None]
            else:
                continue
            out.append(
                {
                    "mark": mark,
                    "channel": channel,
                    "field": enc.get("field", "datum"),
                    "scale": scale,
                    "values": values,
                    "missing": missing,
                    "axis": owner.get("axis") or {},
                    "filled_points": mark == "point" or (isinstance(unit["mark"], dict) and unit["mark"].get("point")),
                }
            )
    return out


def check_figure(chart, name: str) -> list[dict]:
    """The properties every figure keeps (see the module docstring); returns its axes for further checks."""
    found = axes(chart)
    for a in found:
        where = f"{name}: {a['mark']} {a['channel']}={a['field']}"
        scale, values = a["scale"], a["values"]
        assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in values), f"{where}: non-finite"
        if a["filled_points"] and a["channel"] in ("x", "y"):
            assert a["missing"] == 0, f"{where}: {a['missing']} points dropped (null: NaN or inf in the table)"
        if scale.get("type") == "log":
            assert a["missing"] == 0 and all(v > 0 for v in values), f"{where}: 0, negative or null on a log scale"
        domain = scale.get("domain")
        assert domain is not None, f"{where}: no explicit domain"
        lo, hi = domain
        assert lo < hi, f"{where}: degenerate domain {domain}"
        tol = 1e-9 * max(abs(lo), abs(hi), 1.0)
        assert all(lo - tol <= v <= hi + tol for v in values), (
            f"{where}: values {min(values)}..{max(values)} outside the domain {domain}"
        )
        if any(v == 0 for v in values):
            assert scale.get("type") in (None, "linear", "symlog") and lo <= 0, f"{where}: 0 not representable"
        if scale.get("type") == "symlog":
            assert lo == 0 and scale.get("constant", 1) > 0, f"{where}: symlog without 0 at its bottom"
            ticks = a["axis"].get("values")
            assert ticks and ticks[0] == 0 and all(lo <= t <= hi for t in ticks), f"{where}: ticks {ticks}"
            assert len(ticks) >= 2
    return found


def _is_empty(chart) -> bool:
    return "no data for this panel" in str(chart.to_dict())


# ---------------------------------------------------------------- a synthetic survival table


def _survival_table() -> pd.DataFrame:
    """Two models' single-layer estimates at two thresholds: medians of 0 (within eps before any training), from
    1e-4 to 0.4, and beyond the budget (inf), with intervals that start at 0 or end beyond the budget."""
    rows = []
    medians = {
        ("a", 0.01): [0.0, 1e-4, 3e-3, math.inf],
        ("a", 0.1): [0.0, 0.0, 2e-2, 0.4],
        ("b", 0.01): [1e-3, 0.05, math.inf, math.inf],
        ("b", 0.1): [0.0, 1e-4, 0.3, math.inf],
    }
    for (model, eps), values in medians.items():
        for depth, m in enumerate(values):
            lo = 0.0 if m < 1e-3 or math.isinf(m) else m / 3
            hi = math.inf if m > 0.2 or math.isinf(m) else m * 3 + 1e-4
            rows.append(
                {
                    "model": model,
                    "family_kind": "decoder-only",
                    "n_layer": 4,
                    "d_model": 64 if model == "a" else 128,
                    "target": f"L{depth}",
                    "kind": "layer",
                    "stack": "",
                    "layer": depth,
                    "depth": depth,
                    "position": "middle",
                    "rel_depth": depth / 3,
                    "regime": "frozen",
                    "policy": "full",
                    "init": "fresh",
                    "threshold": eps,
                    "n_cells": 4,
                    "n_clusters": 2,
                    "n_recovered": 0 if math.isinf(m) else 4,
                    "n_censored": 4 if math.isinf(m) else 0,
                    "n_diverged": 0,
                    "n_at_zero": 4 if m == 0 else 0,
                    "budget_examples": 20000.0,
                    "pretrain_examples": 40000.0,
                    "median_examples": m * 40000,
                    "median_examples_lo": lo * 40000,
                    "median_examples_hi": hi * 40000,
                    "median_fraction": m,
                    "median_fraction_lo": lo,
                    "median_fraction_hi": hi,
                    "p_recover": 0.2 if math.isinf(m) else 1.0,
                    "p_recover_lo": 0.0,
                    "p_recover_hi": 1.0,
                    "budget_fraction": 0.5,
                    "interval_over": "pretrain_seed",
                    "n_resamples": 3,
                }
            )
    table = pd.DataFrame(rows)
    return table.reindex(columns=list(dict.fromkeys([*survival.ESTIMATE_COLUMNS, *table.columns])))


def test_cost_depth_shows_zeros_censored_medians_and_four_decades():
    table = _survival_table()
    chart = answer_plots.cost_depth(table)
    found = check_figure(chart, "answer_cost_depth")
    costs = [a for a in found if a["channel"] in ("y", "y2")]
    scale = costs[0]["scale"]
    assert scale["type"] == "symlog" and scale["domain"][0] == 0 and scale["domain"][1] >= 0.5
    ticks = costs[0]["axis"]["values"]
    assert ticks[0] == 0 and min(t for t in ticks if t > 0) <= 1e-4 and max(ticks) >= 0.5  # four decades and 0
    points = [a for a in found if a["mark"] == "point" and a["channel"] == "y"]
    drawn = sorted(v for a in points for v in a["values"])
    assert len(drawn) == len(table)  # every median is drawn: none dropped as NaN / inf
    n_beyond = int(np.isinf(table["median_fraction"]).sum())
    assert drawn.count(0.0) == int((table["median_fraction"] == 0).sum())
    assert drawn.count(0.5) == n_beyond  # beyond the budget: at the budget
    spec = str(chart.to_dict())
    assert "median beyond the budget" in spec and plots.OPEN_TRIANGLE in spec
    # intervals: error bars from y_lo to y_hi, their open upper ends at the budget
    bars = [a for a in found if a["mark"] == "errorbar" and a["channel"] in ("y", "y2")]
    assert {a["field"] for a in bars} == {"y_lo", "y_hi"} and all(a["missing"] == 0 for a in bars)
    assert max(v for a in bars for v in a["values"]) == 0.5


def test_cost_depth_draws_no_point_for_a_layer_never_damaged_beyond_eps():
    """A median of no damaged cell (NaN: the layer was never damaged beyond ε) has no cost: it is not drawn, neither
    as a cost nor at the budget as one beyond it."""
    table = _survival_table()
    finite = np.isfinite(table["median_fraction"]) & (table["median_fraction"] > 0)
    row = table.index[finite][0]
    table.loc[row, ["median_fraction", "median_fraction_lo", "median_fraction_hi"]] = np.nan
    found = check_figure(answer_plots.cost_depth(table), "answer_cost_depth")
    drawn = sorted(v for a in found if a["mark"] == "point" and a["channel"] == "y" for v in a["values"])
    assert len(drawn) == len(table) - 1
    assert drawn.count(0.5) == int(np.isinf(table["median_fraction"]).sum())  # none more at the budget


def test_cost_axis_covers_every_range():
    for values in ([0.0], [0.0, 0.0, 1e-4, 1.0], [3.0, 7.0], [0.0, 5e-7, 20000.0], [12.5], [math.inf, math.nan]):
        scale, axis = plots.cost_axis(values)
        spec = scale.to_dict()
        lo, hi = spec["domain"]
        finite = [v for v in values if math.isfinite(v)]
        assert lo == 0 and all(lo <= v < hi for v in finite), (values, spec)
        ticks = axis.to_dict()["values"]
        assert ticks[0] == 0 and ticks[-1] == hi and ticks == sorted(set(ticks))
        positive = [v for v in finite if v > 0]
        if positive:
            assert min(t for t in ticks if t > 0) <= min(positive) and spec["constant"] <= min(positive)
    for values, include in (([-3.0, 0.5], (0,)), ([4.2, 4.2], ()), ([], ()), ([1e-9, 2e-9], ())):
        lo, hi = plots.linear_domain(values, include=include)
        assert lo < hi and all(lo <= v <= hi for v in [*values, *include])


# ---------------------------------------------------------------- every figure, synthetic and real


@pytest.fixture(scope="module")
def synthetic_grid():
    """The synthetic grid, with some cells within eps before any training (cost 0) and deep layers beyond the
    budget at the tighter threshold."""
    summary, curves, networks = synthetic(depth_effect=3.0, thresholds=(0.01, 0.1), seed=3)
    zero = (summary["target"] == "L0") & (summary["threshold"] == 0.1) & (summary["init"] == "fresh")
    summary.loc[zero, ["examples", "examples_lo", "examples_hi", "fraction_of_pretrain"]] = 0
    summary.loc[zero, "recovered"] = True
    return summary, curves, networks, answer_tables.compute(summary, curves, networks)


def _check_all(summary, curves, tables, frozen=None) -> dict:
    charts = {name: draw(summary, curves) for name, draw in plots.FIGURES.items()}
    charts.update({name: draw(tables, curves) for name, draw in answer_plots.FIGURES.items()})
    if frozen is not None:
        charts["frozen_random"] = frozen_random_plot.figure(frozen)
    for name, chart in charts.items():
        check_figure(chart, name)
    return charts


def test_every_figure_on_the_synthetic_grid(synthetic_grid):
    summary, curves, networks, tables = synthetic_grid
    survival_table = tables["survival"]
    layers = survival_table[survival_table["kind"] == "layer"]
    assert (layers["median_fraction"] == 0).any() and np.isinf(layers["median_fraction"]).any()  # the case to draw
    charts = _check_all(summary, curves, tables)
    # two sizes leave nothing out of sample (tests/test_out_of_sample.py draws that figure on three)
    assert _is_empty(charts.pop("answer_out_of_sample"))
    assert _is_empty(charts.pop("answer_aside"))  # no encoder-decoder here (tests/test_workflow_families.py draws it)
    assert not any(_is_empty(chart) for chart in charts.values())
    cost = [a for a in axes(charts["answer_cost_depth"]) if a["mark"] == "point" and a["channel"] == "y"]
    assert sum(len(a["values"]) for a in cost) == len(layers)
    seeds = [a for a in axes(charts["recovery_cost"]) if a["mark"] == "point" and a["channel"] == "y"]
    drawn = summary["depth"].notna() & (summary["init"] != "trained")  # matched controls have no cost to draw
    assert 0 < int(drawn.sum()) < int(summary["depth"].notna().sum())
    assert sum(len(a["values"]) for a in seeds) == int(drawn.sum())
    assert 0.0 in seeds[0]["values"] and seeds[0]["scale"]["type"] == "symlog"


def test_answer_figures_read_at_a_glance(synthetic_grid):
    """One panel per ε, layers coloured by relative depth on [0, 1]; recovery curves as the gap to the baseline on a
    log axis with the ε levels drawn; cost against depth within [0, 1] in the asker's setting."""
    summary, curves, networks, tables = synthetic_grid
    eps = sorted(summary["threshold"].unique())
    recovered = answer_plots.recovered(tables["recovered_curves"]).to_dict()
    assert recovered["facet"]["column"]["field"] == "eps" and "row" not in recovered["facet"]
    colour = recovered["spec"]["layer"][0]["encoding"]["color"]
    assert colour["field"] == "rel_depth" and colour["type"] == "quantitative" and colour["scale"]["domain"] == [0, 1]
    assert recovered["spec"]["layer"][0]["encoding"]["detail"]["field"] == "line"  # a thin line per model and layer
    gaps = [a for a in axes(answer_plots.FIGURES["answer_curves"](tables, curves)) if a["channel"] == "y"]
    assert gaps and all(a["scale"]["type"] == "log" for a in gaps)
    assert all(a["scale"]["domain"][0] == answer_plots.GAP_FLOOR for a in gaps)
    levels = sorted({v for a in gaps if a["mark"] == "rule" for v in a["values"]})
    assert levels == pytest.approx(eps)  # the ε levels, as lines every curve crosses where it recovers
    drawn = [v for a in gaps if a["mark"] == "line" and a["field"] == "gap" for v in a["values"]]
    baseline = networks["baseline_loss"].min()
    assert max(drawn) > 2 * max(eps) and min(drawn) == answer_plots.GAP_FLOOR  # from the damage down to the floor
    assert max(drawn) < (curves["val_loss"].max() / baseline)  # a gap, not the loss
    depth = [a for a in axes(answer_plots.cost_depth(tables["survival"])) if a["channel"] == "x"]
    assert all(0 <= v <= 1 for a in depth for v in a["values"]) and depth[0]["scale"]["domain"] == [0.0, 1.0]
    other = tables["survival"].assign(policy="cross_attn")  # a second setting is not drawn beside the asker's
    both = pd.concat([tables["survival"], other[other["kind"] == "layer"].head(3)])
    assert str(answer_plots.cost_depth(both).to_dict()).count("cross_attn") == 0


@pytest.mark.e2e
def test_every_figure_on_the_tiny_run(tiny_run, tmp_path):
    """The real run's tables, drawn as the workflow draws them; then the answer figures again from estimates that
    keep the run's (tiny, degenerate-flagged) networks, so that its costs, mostly 0, are drawn too. Each figure is
    also written to PNG."""
    results = tiny_run[0] / "results"
    summary = pd.read_parquet(results / "summary.parquet")
    curves = pd.read_parquet(results / "curves.parquet")
    networks = pd.read_parquet(results / "networks.parquet")
    tables = {path.stem: pd.read_parquet(path) for path in (results / "answer").glob("*.parquet")}
    frozen = pd.read_parquet(results / "frozen_random.parquet")
    charts = _check_all(summary, curves, tables, frozen)
    assert not _is_empty(charts["recovery_examples"]) and not _is_empty(charts["frozen_random"])
    kept = answer_tables.compute(summary.assign(degenerate=False), curves, networks.assign(degenerate=False))
    layers = kept["survival"][kept["survival"]["kind"] == "layer"]
    assert len(layers)
    kept_charts = _check_all(summary, curves, kept)
    asked = layers[(layers["regime"] == "frozen") & (layers["policy"] == "full") & (layers["init"] == "fresh")]
    asked = asked if len(asked) else layers
    # a layer never damaged beyond ε has no cost and no point (the tiny run's networks are barely trained: its
    # resets may damage none of them beyond ε, and the chart then says so)
    costs = int(asked["median_fraction"].notna().sum())
    if costs:
        cost = [a for a in axes(kept_charts["answer_cost_depth"]) if a["mark"] == "point" and a["channel"] == "y"]
        assert sum(len(a["values"]) for a in cost) == costs
    else:
        assert answer_plots.NOT_DAMAGED in str(kept_charts["answer_cost_depth"].to_dict())
    for name in ("answer_cost_depth", "answer_damage_cost", "recovery_cost", "recovery_examples"):
        plots.save(kept_charts[name], tmp_path / f"{name}.html", tmp_path / f"{name}.png")
        assert_drawn_png(tmp_path / f"{name}.png")


def test_recovery_curves_and_damage_draw_one_setting(synthetic_grid):
    """A layer healed under a second policy (the aside's cross-attention) has the same target, depth and seeds as
    the asker's cell: drawn in the same panel it would share its colour and its line. The recovery curves and the
    damage scatter draw the asker's setting only, its matched controls with it, and say which."""
    summary, curves, networks, tables = synthetic_grid
    layer = curves[(curves["kind"] == "recovery") & curves["layer"].notna()]
    assert (layer["init"] == "trained").any()  # matched controls, drawn grey beside the cells

    def gaps(chart) -> list[float]:
        return sorted(v for a in axes(chart) if a["mark"] == "line" and a["field"] == "gap" for v in a["values"])

    other = layer.assign(policy="cross_attn", val_loss=layer["val_loss"] * 7.0)  # far above anything asked
    chart = answer_plots.FIGURES["answer_curves"](tables, pd.concat([curves, other]))
    assert gaps(chart) == gaps(answer_plots.FIGURES["answer_curves"](tables, curves))  # the same lines, no other
    assert "policy full" in str(chart.to_dict()["title"])
    cells = tables["damage_cells"]
    assert len(cells)
    twice = answer_plots.damage_cost(pd.concat([cells, cells.assign(policy="cross_attn", damage=cells["damage"] + 50)]))
    drawn = [v for a in axes(twice) if a["channel"] == "x" and a["field"] == "damage" for v in a["values"]]
    assert max(drawn) == pytest.approx(cells["damage"].max()) and "policy full" in str(twice.to_dict()["title"])


def test_cka_is_one_panel_where_each_cell_was_measured_once():
    """CKA is measured once per cell, at the end of retraining; a larger ε only counts fewer cells (those damaged
    beyond it). Where the ε with as many cells agree, the figure draws one panel from the smallest ε's cells; where
    they differ (a CKA measured per ε), one panel per ε."""

    def table(cka_at_005: float) -> pd.DataFrame:
        rows = []
        for eps, n, value in ((0.01, 3, 0.9), (0.02, 3, 0.9), (0.05, 2, cka_at_005), (0.1, 2, 0.7)):
            rows.append(
                {"model": "m", "target": "L0", "depth": 0, "regime": "frozen", "policy": "full", "init": "fresh",
                 "threshold": eps, "cka": value, "cka_lo": value - 0.01, "cka_hi": value + 0.01,
                 "cka_floor": 0.5, "n_cells": n, "n_clusters": n}
            )  # fmt: skip
        return pd.DataFrame(rows)

    def panels(chart) -> set:
        spec = chart.to_dict()
        return {d["eps"] for rows in spec["datasets"].values() for d in rows if "eps" in d}

    once = answer_plots.cka(table(0.7))  # two cells agree at 0.05 and 0.1, three at 0.01 and 0.02
    assert panels(once) == {"every ε"} and "measured once per cell" in str(once.to_dict()["title"])
    drawn = [v for a in axes(once) if a["field"] == "cka" for v in a["values"]]
    assert drawn == [0.9]  # the smallest ε's cells
    per_eps = answer_plots.cka(table(0.8))  # the same two cells, another value: measured per ε
    assert panels(per_eps) == {"ε = 0.01", "ε = 0.02", "ε = 0.05", "ε = 0.1"}
