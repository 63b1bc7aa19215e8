"""The shipped references re-derive: their answer tables rebuilt from their own cell tables (summary, curves,
networks) by the package's builder are the shipped ones, every table, column and value; and the survival estimates
and one coefficient of the fit, worked out from the shipped summary.parquet by another route (a few-line Turnbull
estimate here, lifelines' log-normal AFT), are the shipped answer's. reference/fully_trained here (about 10 s);
reference/study in tests/test_rederive_study.py."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from selfheal import results, results_io
from selfheal.analysis import answer_tables, tables

ROOT = Path(__file__).resolve().parents[1]
FULLY_TRAINED = ROOT / "reference" / "fully_trained"


def rebuilt_and_shipped(ref: Path, tmp_path: Path) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """The answer tables the builder writes from ``ref``'s cell tables (as ``results.reread`` does: the networks'
    columns their curves give, then ``answer_tables.compute``, each written and read back as Parquet), and the
    answer tables ``ref`` ships (the side tables other rules write left out: the lr check's, a partial readout's)."""
    summary = pd.read_parquet(ref / "summary.parquet")
    curves = pd.read_parquet(ref / "curves.parquet")
    networks = tables.add_minimum(pd.read_parquet(ref / "networks.parquet"), curves)
    built = {}
    for name, table in answer_tables.compute(summary, curves, networks).items():
        results_io.write_parquet(tmp_path / f"{name}.parquet", table)
        built[name] = pd.read_parquet(tmp_path / f"{name}.parquet")
    shipped = {
        p.stem: pd.read_parquet(p)
        for p in sorted((ref / "answer").glob("*.parquet"))
        if p.stem not in results.SIDE_TABLES
    }
    return built, shipped


# The columns made from the fit's bootstrap refits: each refit is a BFGS run from the full fit, converged to a
# gradient of scaling.GRADIENT_TOLERANCE, and a last-bit difference in that start (another CPU's floating point)
# moves where it stops by about 1e-10 (the study's refits, fitted on two machines). Every other value: 1e-12.
REFIT_COLUMNS = {
    "fit": {"coef_lo", "coef_hi", "factor_lo", "factor_hi"},
    "out_of_sample": {"predicted_lo", "predicted_hi"},
}
REFIT_RTOL = 1e-7


def assert_same_tables(built: dict[str, pd.DataFrame], shipped: dict[str, pd.DataFrame]) -> None:
    """Every table, column (names, order, dtype) and value: strings, integers and flags exact, floats to 1e-12."""
    assert sorted(built) == sorted(shipped)
    for name in sorted(built):
        got, want = built[name], shipped[name]
        assert list(got.columns) == list(want.columns), name
        assert len(got) == len(want), name
        for column in got.columns:
            rtol = REFIT_RTOL if column in REFIT_COLUMNS.get(name, ()) else 1e-12
            pd.testing.assert_series_equal(
                got[column],
                want[column],
                check_dtype=True,
                check_exact=False,
                rtol=rtol,
                atol=1e-12,
                obj=f"{name}.{column}",
            )


def test_fully_trained_answer_tables_re_derive(tmp_path):
    assert_same_tables(*rebuilt_and_shipped(FULLY_TRAINED, tmp_path))


# -- the survival estimates by a few-line Turnbull estimate ---------------------------------------------------------


def turnbull(lower: np.ndarray, upper: np.ndarray, iterations: int = 20000) -> tuple[np.ndarray, np.ndarray]:
    """The NPMLE of the distribution of a cost known to lie in (lower, upper] (upper inf: beyond the budget), by
    Turnbull's self-consistency iteration. Mass can sit at the bounds' right ends only (moving it from t up to the
    first right end at or above t keeps every interval that holds t holding it). Returns (points, S at each)."""
    points = np.unique(upper)
    holds = (lower[:, None] < points[None, :]) & (points[None, :] <= upper[:, None])
    mass = np.full(len(points), 1.0 / len(points))
    for _ in range(iterations):
        share = holds * mass
        new = (share / share.sum(axis=1, keepdims=True)).mean(axis=0)
        if np.abs(new - mass).max() < 1e-13:
            mass = new
            break
        mass = new
    return points, 1.0 - np.cumsum(mass)


def shipped_cells(ref: Path) -> pd.DataFrame:
    """The reset cells the estimates read, straight from summary.parquet and networks.parquet as docs/outputs.md
    defines them: not a control (init trained, target none), on a network neither degenerate nor off its plateau,
    damaged beyond eps; the cost in (examples_lo, examples_hi] when recovered, beyond examples_lo when not (beyond
    the budget for a diverged or stalled cell)."""
    summary = pd.read_parquet(ref / "summary.parquet")
    networks = pd.read_parquet(ref / "networks.parquet")
    bad = networks[networks["degenerate"].astype(bool) | networks["off_plateau"].astype(bool)]
    bad_keys = set(zip(bad["model"], bad["pretrain_seed"]))
    cells = summary[
        (summary["init"] != "trained")
        & (summary["target"] != "none")
        & (summary["outcome"] != "not_damaged")
        & np.array([k not in bad_keys for k in zip(summary["model"], summary["pretrain_seed"])])
    ].copy()
    recovered = cells["recovered"].astype(bool)
    cells["lo"] = cells["examples_lo"].astype("Float64").fillna(0).astype(float)
    stopped = cells["outcome"].isin(["diverged", "stalled"])
    cells.loc[stopped, "lo"] = cells.loc[stopped, "budget_examples"].astype(float)
    cells["hi"] = np.where(recovered, cells["examples_hi"].astype("Float64").fillna(math.inf).astype(float), math.inf)
    return cells


GROUP = ["model", "target", "regime", "policy", "init", "threshold"]


def assert_survival_re_derives(ref: Path) -> int:
    """Every shipped survival row with damaged cells: its median and P(recover) are the Turnbull estimate's."""
    cells = shipped_cells(ref)
    shipped = pd.read_parquet(ref / "answer" / "survival.parquet")
    checked = 0
    for key, rows in cells.groupby(GROUP, sort=True):
        row = shipped[np.logical_and.reduce([shipped[k] == v for k, v in zip(GROUP, key)])]
        assert len(row) == 1, key
        row = row.iloc[0]
        points, survival = turnbull(rows["lo"].to_numpy(float), rows["hi"].to_numpy(float))
        below = points[survival <= 0.5 + 1e-9]
        median = float(below.min()) if len(below) and np.isfinite(below.min()) else math.inf
        budget = float(rows["budget_examples"].max())
        at_budget = survival[points <= budget]
        p_recover = 1.0 - (float(at_budget[-1]) if len(at_budget) else 1.0)
        assert row["median_examples"] == median, key
        assert row["p_recover"] == pytest.approx(p_recover, abs=1e-6), key
        assert row["n_recovered"] == int(rows["recovered"].astype(bool).sum()), key
        checked += 1
    return checked


def test_fully_trained_survival_re_derives_by_turnbull():
    assert assert_survival_re_derives(FULLY_TRAINED) >= 12


def test_turnbull_here_on_a_hand_case():
    # crossings at (0, 100], (100, 200], (100, 200], one beyond the budget 200: S(100) = 3/4, S(200) = 1/4
    points, s = turnbull(np.array([0.0, 100, 100, 200]), np.array([100.0, 200, 200, math.inf]))
    np.testing.assert_allclose(s, [0.75, 0.25, 0.0], atol=1e-12)
    assert list(points) == [100.0, 200.0, math.inf]


# -- one coefficient of the fit by lifelines' log-normal AFT ----------------------------------------------------------


def test_fully_trained_first_layer_coefficient_re_derives_by_lifelines():
    """At eps = 0.05 the fit has two terms the grid determines (the first layer, log D; N, S and E are not varied,
    the last layer is the first one's complement in N = 2): lifelines' own fit of the 10 single-layer cells, cost
    in fractions of S x E, gives the shipped coefficients."""
    from lifelines import LogNormalAFTFitter

    cells = shipped_cells(FULLY_TRAINED)
    cells = cells[(cells["threshold"] == 0.05) & cells["target"].isin(["L0", "L1"]) & (cells["hi"] != 0)]
    assert len(cells) == 10
    sxe = cells["pretrain_examples"].astype(float)
    upper = cells["hi"] / sxe
    lower = np.where(cells["lo"] > 0, cells["lo"], 1e-6 * cells["hi"]) / sxe  # a bound of 0 as 1e-6 of the upper
    data = pd.DataFrame(
        {
            "first_layer": (cells["target"] == "L0").astype(float).to_numpy(),
            "log_d_model": np.log(cells["d_model"].astype(float)).to_numpy(),
            "lo": np.asarray(lower, dtype=float),
            "hi": upper.to_numpy(float),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = LogNormalAFTFitter().fit_interval_censoring(data, "lo", "hi")
    fit = pd.read_parquet(FULLY_TRAINED / "answer" / "fit.parquet")
    fit = fit[(fit["threshold"] == 0.05) & fit["determined"]].set_index("term")
    assert sorted(fit.index) == ["first_layer", "log_d_model"]
    for term in fit.index:
        assert fit.loc[term, "coef"] == pytest.approx(fitted.params_[("mu_", term)], rel=1e-3, abs=1e-3), term
