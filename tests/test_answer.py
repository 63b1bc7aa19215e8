"""The answer page and tables: two different synthetic grids give different numbers and verdicts; grids that cannot
answer (one network, everything censored, no layer cells) still give a page that says so; the real Snakemake rule
runs on tables placed as its inputs; selfheal.results.load reads them back."""

import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from answer_helpers import synthetic
from selfheal import results
from selfheal.analysis import answer, answer_plots

ROOT = Path(__file__).resolve().parents[1]
warnings.filterwarnings("ignore", module="lifelines")
warnings.filterwarnings("ignore", module="autograd")
LINKS = {name: f"plots/{name}.html" for name in answer_plots.FIGURES}


def _page(**kwargs):
    summary, curves, networks = synthetic(thresholds=(0.05,), **kwargs)
    tables = answer.compute(summary, curves, networks)
    return tables, answer.page(tables, summary, networks, LINKS).markdown()


def _row(md: str, model: str, reset: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| {model}") and f"| {reset}" in line)


@pytest.fixture(scope="module")
def deeper_costs_more():
    return _page(depth_effect=1.5, seed=0)


@pytest.fixture(scope="module")
def deeper_costs_less():
    return _page(depth_effect=-1.5, seed=0, degenerate=(("gpt2-n2-d64", 1),), off_plateau=(("gpt2-n4-d64", 0),))


def test_page_numbers_and_verdicts_follow_the_tables(deeper_costs_more, deeper_costs_less):
    (more_tables, more), (less_tables, less) = deeper_costs_more, deeper_costs_less
    depth_line = "relative depth L / (N - 1), 0 to 1"
    verdict_more = next(line for line in more.splitlines() if depth_line in line and line.startswith("| regime"))
    verdict_less = next(line for line in less.splitlines() if depth_line in line and line.startswith("| regime"))
    assert "raises the cost" in verdict_more and "lowers the cost" in verdict_less
    # the page's numbers are the tables' numbers
    fit = more_tables["fit"].set_index("term").loc["rel_depth"]
    assert answer._num(fit["coef"]) in verdict_more
    surv = more_tables["survival"]
    l3 = surv[(surv["model"] == "gpt2-n4-d64") & (surv["target"] == "L3")].iloc[0]
    assert answer._cost(l3, "fraction") in _row(more, "gpt2-n4-d64", "L3")
    assert _row(more, "gpt2-n4-d64", "L3") != _row(less, "gpt2-n4-d64", "L3")
    l0_more = float(re.search(r"\| ([0-9.]+) \[", _row(more, "gpt2-n4-d64", "L0")).group(1))
    l3_more = float(re.search(r"\| ([0-9.]+) \[", _row(more, "gpt2-n4-d64", "L3")).group(1))
    assert l3_more > l0_more
    # undetermined factors are said so, never zero
    assert "log D (width) | — | — | not determined by this grid: it does not vary" in more
    assert "Not determined by this grid (no such model): encoder-only, encoder-decoder" in more
    # caveats: the degenerate network is listed and left out, the off-plateau one flagged, few clusters said
    assert "gpt2-n2-d64 pretraining seed 1 is **degenerate**" in less and "degenerate" not in more.split("## 7.")[1]
    assert "still improving at the end of pretraining" in less
    assert "wide and rough" in more
    n2 = less_tables["survival"]
    assert (n2[n2["model"] == "gpt2-n2-d64"]["n_clusters"] == 1).all()
    for section in range(1, 9):
        assert f"## {section}. " in more
    assert "Tamkin et al. 2020" in more and "Gromov et al. 2024" in more


def test_pages_that_cannot_answer_say_so():
    summary, curves, networks = synthetic(models=(("m", 2, 32),), pretrain_seeds=(0,), seeds=(0,), thresholds=(0.05,))
    only_sets = summary[summary["layer"].isna()]
    tables = answer.compute(only_sets, curves, networks)
    md = answer.page(tables, only_sets, networks, LINKS).markdown()
    assert "no single-layer cells" in md and "do **not** cover the variation between" in md
    censored = summary.copy()
    censored["recovered"] = False
    censored["examples_hi"] = pd.array([pd.NA] * len(censored), dtype="Int64")
    censored["examples_lo"] = censored["budget_examples"]
    tables = answer.compute(censored, curves, networks)
    md = answer.page(tables, censored, networks, LINKS).markdown()
    assert "none reached" in md and "not fitted: every cell censored" in md
    assert np.isinf(tables["survival"]["median_examples"]).all()
    for name, draw in answer_plots.FIGURES.items():  # every figure draws, empty or not
        draw(tables, curves).to_dict()


def test_readme_headline_is_regenerated(tmp_path, deeper_costs_more):
    _, md = deeper_costs_more
    page = tmp_path / "answer.md"
    page.write_text(md)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n## What the default grid finds\n\n{answer.HEADLINE[0]}\nold\n{answer.HEADLINE[1]}\n\n## next\n")
    subprocess.run([sys.executable, "-m", "selfheal.analysis.answer", "--readme", str(page), str(readme)], check=True,
                   cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    text = readme.read_text()
    assert "old" not in text and answer.headline(md) in text and text.endswith("## next\n")


@pytest.mark.e2e
def test_answer_rule_runs_on_tables_placed_as_inputs(tmp_path):
    summary, curves, networks = synthetic(models=(("gpt2-n2-d64", 2, 64),), thresholds=(0.05,), seed=7)
    folder = tmp_path / "results"
    folder.mkdir()
    for name, table in (("summary", summary), ("curves", curves), ("networks", networks)):
        table.to_parquet(folder / f"{name}.parquet")
    cmd = [str(ROOT / ".venv" / "bin" / "snakemake"), "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
           "--cores", "1", "--allowed-rules", "answer", "--", "results/answer.md"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    loaded = results.load(folder)
    assert set(answer.TABLES) | {"summary", "curves", "networks"} <= set(loaded)
    assert (folder / "answer.html").read_text().count("<h2>") >= 9
    assert all((folder / "plots" / f"{name}.png").stat().st_size > 0 for name in answer_plots.FIGURES)
    md = (folder / "answer.md").read_text()
    surv = loaded["survival"]
    l1 = surv[surv["target"] == "L1"].iloc[0]
    assert answer._cost(l1, "fraction") in md


def test_load_names_a_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="results_dir"):
        results.load(tmp_path / "nowhere")
