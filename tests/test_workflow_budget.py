"""Raising the budget (real Snakemake runs on tests/tiny.yaml): the cells that had not crossed continue from their
saved state to exactly the numbers of a run given the larger budget from the start; the cells that had are not
re-run; the matched no-reset controls follow their cells."""

import json
import os

import pandas as pd
import pytest
import yaml
from snakemake_helpers import ROOT, snakemake

pytestmark = pytest.mark.e2e

TABLES = ["results/summary.parquet", "results/curves.parquet"]
# eps_min 0.001: the from-scratch cost is most of S x E (about 510 examples). Each cell races four lrs, one copy
# after another, and settles only where every copy stopped by a rule that reads no budget. At 0.38 x it (194
# examples, past the regular evaluation at 192) tinyB's two resets settle at 192; tinyA's do not, for the copy
# raced first (lr 0.03) has not reached eps_min by then. A matched control trains as long as its cell's primary
# copy (tinyA: 128 and 64 examples), which the larger budget does not change.
SHORT, LONG = 0.38, 1.0


def _config(budget_scratch: float) -> dict:
    config = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    del config["models"][0]["frozen_random"]
    config["retrain"].pop("budget_fraction")
    config["retrain"].update({"budget_scratch": budget_scratch, "thresholds": [0.001, 0.01]})
    return config


def _run(workdir, budget_scratch):
    configfile = workdir / "config.yaml"
    configfile.write_text(yaml.safe_dump(_config(budget_scratch)))
    proc = snakemake(workdir, configfile, *TABLES)
    assert proc.returncode == 0, proc.stderr[-4000:]


def _records(workdir) -> dict:
    cells = workdir / "results" / "cells"
    return {str(p.parent.relative_to(cells)): json.loads(p.read_text()) for p in sorted(cells.rglob("recovery.json"))}


def _without_timing(value):
    """A record without its measured times (seconds, rates, shares of time): what two identical runs share."""
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if not k.endswith(("_s", "_share", "_per_s"))}
    return value


def _staged(workdir) -> dict:
    """Each staged cell's curve file in the work folder: (inode, content), to tell kept from re-made (a file is
    written anew, to a new inode, atomically; its modification time is no witness: Snakemake touches the outputs,
    hard links to these files, of a group job)."""
    work = workdir / "results" / "work"
    return {str(p.parent.relative_to(work)): (p.stat().st_ino, p.read_bytes()) for p in work.rglob("curve.parquet")}


def test_a_raised_budget_extends_only_the_cells_that_had_not_crossed(tmp_path, corpus_seed):
    extended, fresh = tmp_path / "extended", tmp_path / "fresh"
    for workdir in (extended, fresh):
        workdir.mkdir()
        corpus_seed(workdir)
    _run(extended, SHORT)
    short = _records(extended)
    settled = {k for k, r in short.items() if r["settled_examples"] is not None}
    censored = {k for k, r in short.items() if r["settled_examples"] is None}
    assert {"tinyB/p0/frozen/s0/L0-full-fresh", "tinyB/p0/frozen/s0/all-full-fresh"} <= settled
    assert {
        "tinyA/p0/frozen/s0/L0-full-fresh",
        "tinyA/p0/frozen/s0/L1-full-fresh",
        "tinyA/p0/frozen/s0/all-full-fresh",
        "tinyA/p0/frozen/s0/L1-full-trained",
    } <= censored
    assert short["tinyB/p0/frozen/s0/L0-full-fresh"]["settled_examples"] > 0  # it trained, then crossed eps_min
    assert all(r["budget_unit"] == "scratch_cost" for r in short.values())
    before = _staged(extended)
    # continued: a reset cell that had not settled (its controls keep their length: that of the primary copy)
    continued = {k for k in censored if not k.endswith("-trained") and short[k]["budget_examples"] > 0}
    assert continued == {
        "tinyA/p0/frozen/s0/L0-full-fresh",
        "tinyA/p0/frozen/s0/L1-full-fresh",
        "tinyA/p0/frozen/s0/all-full-fresh",
    }

    configfile = extended / "config.yaml"
    configfile.write_text(yaml.safe_dump(_config(LONG)))
    dry = snakemake(extended, configfile, "-n", *TABLES)  # the job's plan counts the cells under another budget
    assert dry.returncode == 0, dry.stderr[-4000:]
    assert "network tinyA p0: keeps the network, heals 0 cells (keeps 0, and keeps or continues 6" in dry.stdout
    assert "network tinyB p0: keeps the network, heals 0 cells (keeps 0, and keeps or continues 4" in dry.stdout
    _run(extended, LONG)  # the same folder: its staged cells are kept or continued
    _run(fresh, LONG)  # the larger budget from the start
    got, want = _records(extended), _records(fresh)
    assert got.keys() == want.keys()
    for cell in want:
        assert _without_timing(got[cell]) == _without_timing(want[cell]), cell
    for table in ("summary", "curves"):
        a, b = (pd.read_parquet(d / "results" / f"{table}.parquet") for d in (extended, fresh))
        numbers = [c for c in a.columns if not c.endswith(("_s", "_share"))]
        pd.testing.assert_frame_equal(a[numbers], b[numbers], check_exact=True)

    # the settled cells were not re-run: their staged curves are the very files of the first run (the work folder
    # lays cells out as the cells folder does)
    after = _staged(extended)
    assert all(after[k] == before[k] for k in settled)
    # the cells that had not settled continued from their last regular evaluation (192 examples)
    logs = "".join(p.read_text() for p in (extended / "results" / "logs").rglob("*.log"))
    assert logs.count("continues a run with a smaller budget from its last regular evaluation (192 examples)") == len(
        continued
    )
    assert all(after[k] == before[k] for k in censored - continued)
    budget = got["tinyB/p0/frozen/s0/L0-full-fresh"]["budget_examples"]
    assert budget == round(LONG * got["tinyB/p0/frozen/s0/L0-full-fresh"]["scratch_cost"])
    curves = pd.read_parquet(extended / "results" / "curves.parquet")
    tinyb = curves[(curves["model"] == "tinyB") & (curves["target"] == "L0")]
    assert tinyb.groupby("init")["examples"].max().nunique() == 1  # the control as long as its cell
    assert os.path.exists(extended / "results" / "summary.parquet")
