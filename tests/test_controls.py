"""A cell's matched control read around the cell's crossing: the control is evaluated only at its regular
evaluations, so a crossing located between two of them reads the one farther from the baseline (hand-built
curves, hand-written losses), and the ε the headline states follows that read."""

from __future__ import annotations

import math

import pandas as pd

from selfheal.analysis import controls, resolution

KEY = {"model": "a", "pretrain_seed": 0, "regime": "frozen", "seed": 0}


def control_curve(points: list[tuple[int, float]], target: str = "L0") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                **KEY,
                "kind": "recovery",
                "target": target,
                "policy": "full",
                "init": "trained",
                "examples": x,
                "val_loss": v,
            }
            for x, v in points
        ]
    )


def cell(examples: float, target: str = "L0") -> dict:
    return {**KEY, "target": target, "policy": "full", "init": "fresh", "examples": examples, "baseline_loss": 4.0}


def test_a_crossing_between_two_evaluations_reads_the_one_farther_from_the_baseline():
    # L0's control: 4.0 at 0 (the restart), 4.08 at 400 (+2 %), 3.96 at 800 (-1 %), 4.02 at 1200
    # L1's control: evaluated at 0 only; L2 has none
    curves = pd.concat(
        [
            control_curve([(0, 4.0), (400, 4.08), (800, 3.96), (1200, 4.02)]),
            control_curve([(0, 4.0)], target="L1"),
        ]
    )
    rows = pd.DataFrame([cell(200), cell(400), cell(600), cell(1000), cell(5000), cell(300, "L1"), cell(300, "L2")])
    got = controls.control_loss_around(rows, curves).tolist()
    # 200: 4.0 or 4.08 -> 4.08; 400: exactly there -> 4.08; 600: 4.08 (+0.08) or 3.96 (-0.04) -> 4.08;
    # 1000: 3.96 (-0.04) or 4.02 (+0.02) -> 3.96; 5000: past the end -> 4.02; L1: its one evaluation; L2: none
    assert got[:6] == [4.08, 4.08, 4.08, 3.96, 4.02, 4.0]
    assert math.isnan(got[6])


def test_a_jump_between_the_restart_and_the_first_evaluation_bars_its_eps():
    """A cell back within 5 % at 200 examples, its control +2 % at its first evaluation (400): the step-wise read
    (the control at 0, +0 %) would state 5 %; read around the crossing it is +2 %, beyond 5 % / 4 = 1.25 %."""
    curves = control_curve([(0, 4.0), (400, 4.08)])
    row = {**cell(200), "threshold": 0.05, "status": "recovered", "upper": 200.0, "is_control": False}
    row["control_loss"] = 4.0
    cells = pd.DataFrame([row])
    cells["control_loss_around"] = controls.control_loss_around(cells, curves)
    validation = pd.DataFrame({"model": ["a"], "val_sequences_se": [0.001], "baseline_loss": [4.0]})
    drift = pd.DataFrame({"model": ["a"], "pretrain_seed": [0], "regime": "frozen", "drift_worst": [0.02]})
    networks = pd.DataFrame({"model": ["a"], "pretrain_seed": [0], "off_plateau": [False]})
    around = resolution.resolved_eps([0.05], validation, drift, networks, "frozen", cells).iloc[0]
    assert (round(around["crossing_drift"], 12), bool(around["headline"]), around["reason"]) == (
        0.02,
        False,
        "controls",
    )
    stepwise = resolution.resolved_eps(
        [0.05], validation, drift, networks, "frozen", cells.drop(columns="control_loss_around")
    )
    assert (stepwise["crossing_drift"].iloc[0], bool(stepwise["headline"].iloc[0])) == (0.0, True)
