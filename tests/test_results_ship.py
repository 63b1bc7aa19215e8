"""selfheal.results ship / reread: a finished run's tables, page and linked figures copied into a folder, and a
shipped folder's answer re-derived from its own tables under the code as it is (tests/answer_helpers.py's tables)."""

import warnings

import pandas as pd
import pytest

from answer_helpers import synthetic
from selfheal import results
from selfheal.analysis import answer, answer_plots

warnings.filterwarnings("ignore", module="lifelines")
warnings.filterwarnings("ignore", module="autograd")


def _finished_run(folder):
    """What the workflow's aggregate and answer rules leave in a results_dir."""
    summary, curves, networks = synthetic(thresholds=(0.05,), seed=2)
    (folder / "answer").mkdir(parents=True)
    (folder / "plots").mkdir()
    for name, table in (("summary", summary), ("curves", curves), ("networks", networks)):
        table.to_parquet(folder / f"{name}.parquet")
    answer.write_all(
        str(folder / "summary.parquet"),
        str(folder / "curves.parquet"),
        str(folder / "networks.parquet"),
        {name: str(folder / "answer" / f"{name}.parquet") for name in answer.TABLES},
        str(folder / "answer.md"),
        str(folder / "answer.html"),
        {name: str(folder / "plots" / f"{name}.html") for name in answer_plots.FIGURES},
        {name: str(folder / "plots" / f"{name}.png") for name in answer_plots.FIGURES},
    )


def test_ship_and_reread(tmp_path):
    run, dest = tmp_path / "results", tmp_path / "reference"
    with pytest.raises(FileNotFoundError, match="not a finished run: missing summary.parquet"):
        results.ship(run, dest)
    _finished_run(run)
    results.main(["ship", str(run), str(dest)])
    page = (dest / "answer.md").read_text()
    assert "(plots/answer_cost_depth.png)" in page and ".html)" not in page  # links point at the shipped PNGs
    assert sorted(p.name for p in (dest / "plots").iterdir()) == sorted(
        f"{name}.png" for name in answer_plots.FIGURES if f"(plots/{name}.png)" in page
    )
    assert not (dest / "answer.html").exists() and set(results.load(dest)) == set(results.load(run))
    # an older version's answer (here: a stale page and fit table) is re-derived from the shipped tables
    (dest / "answer.md").write_text("stale")
    fit = pd.read_parquet(dest / "answer" / "fit.parquet")
    fit.iloc[:0].to_parquet(dest / "answer" / "fit.parquet")
    (dest / "plots" / "answer_effects.png").unlink()
    results.main(["reread", str(dest)])
    assert (dest / "answer.md").read_text() == page
    pd.testing.assert_frame_equal(pd.read_parquet(dest / "answer" / "fit.parquet"), fit)
    assert (dest / "plots" / "answer_effects.png").stat().st_size > 1000
    with pytest.raises(FileNotFoundError, match="not a shipped run: missing summary.parquet, curves.parquet"):
        results.reread(tmp_path / "nothing")
