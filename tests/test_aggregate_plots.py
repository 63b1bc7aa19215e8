"""Aggregation and plots on hand-made cell results: censored and diverged cells are kept and drawn."""

import json

import pandas as pd

from selfheal import records
from selfheal.analysis import plots, tables
from selfheal.records import CellResult, Recovery


def _cell(tmp_path, target, layer, seed, recovered_at, diverged=None, budget=1000):
    cell = CellResult(
        model="m", target=target, policy="full", init="fresh", regime="frozen", seed=seed, arch="gpt2", n_layer=2,
        d_model=8, stack="" if layer is not None else None, layer=layer, depth=layer, pretrain_examples=2000,
        budget_examples=budget, baseline_loss=4.0, damaged_loss=6.0, final_loss=4.1, trainable_tensors=2,
        trainable_params=10, reset_tensors=2, diverged_step=diverged, prefix_cache_depth=None,
        train_tokens_per_s=1.0, eval_share=0.1,
        recoveries=[Recovery(threshold=eps, recovered=recovered_at is not None,
                             examples=recovered_at if recovered_at is not None else budget,
                             tokens=0, steps=0, wall_s=1.0, val_loss=4.1) for eps in (0.01, 0.1)])
    path = tmp_path / f"{target}-{seed}.json"
    records.write(path, cell)
    curve = tmp_path / f"{target}-{seed}.parquet"
    pd.DataFrame({"examples": [0, 100], "tokens": [0, 800], "steps": [0, 10], "wall_s": [0.0, 1.0],
                  "val_loss": [6.0, 4.1], "train_loss": [None, 4.2]}).to_parquet(curve)
    return str(path), str(curve)


def test_censored_and_diverged_cells_are_kept_and_plotted(tmp_path):
    cells = [_cell(tmp_path, "L0", 0, 0, 100), _cell(tmp_path, "L0", 0, 1, None),
             _cell(tmp_path, "L1", 1, 0, 300), _cell(tmp_path, "L1", 1, 1, None, diverged=7),
             _cell(tmp_path, "all", None, 0, 900), _cell(tmp_path, "swap16", None, 0, None)]
    summary = tables.summary_table([c[0] for c in cells])
    assert len(summary) == 12 and list(summary.columns) == tables.SUMMARY_COLUMNS
    diverged = summary[summary.diverged]
    assert set(diverged.target) == {"L1"} and (diverged.diverged_step == 7).all() and (~diverged.recovered).all()
    censored = summary[~summary.recovered]
    assert (censored.examples == 1000).all() and (censored.fraction_of_pretrain == 0.5).all()
    curves = tables.curves_table([c[0] for c in cells], [c[1] for c in cells], [], [])
    cost = json.dumps(plots.recovery_cost(summary).to_dict())
    assert '"status": "diverged"' in cost and '"status": "censored (\\u2265 budget)"' in cost
    for chart in (plots.recovery_cost(summary, unit="examples"), plots.recovery_curves(curves, summary),
                  plots.damage(summary)):
        chart.to_dict()  # a valid Vega-Lite spec
    html = tmp_path / "cost.html"
    plots.save(plots.recovery_cost(summary), html, tmp_path / "cost.png")
    assert "swap16" in html.read_text() and (tmp_path / "cost.png").stat().st_size > 1000
