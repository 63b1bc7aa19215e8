"""Measured figures are written by their benchmarks: every `<!-- name: begin -->` ... `<!-- name: end -->` block in
the documentation is named by a script in benchmarks/ (which writes it through `common.write_block`), and
`write_block` replaces a block and nothing else. Reads files only; no training."""

import importlib.util
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BEGIN = re.compile(r"<!-- ([a-z0-9-]+): begin -->")


@pytest.fixture(scope="module")
def common():
    spec = importlib.util.spec_from_file_location("benchmarks_common", ROOT / "benchmarks" / "common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _blocks() -> list[tuple[Path, str]]:
    return [(doc, name) for doc in DOCS for name in BEGIN.findall(doc.read_text())]


def test_the_figures_have_blocks():
    names = {name for _, name in _blocks()}
    assert {"default-grid", "job-start-up", "families-config", "test-suite", "gpu-check", "pretrain-sweep"} <= names, (
        names
    )


@pytest.mark.parametrize("doc,name", _blocks(), ids=lambda x: x if isinstance(x, str) else x.name)
def test_every_block_is_closed_once_and_written_by_a_benchmark(doc, name):
    text = doc.read_text()
    begin, end = f"<!-- {name}: begin -->", f"<!-- {name}: end -->"
    assert text.count(begin) == 1 and text.count(end) == 1 and text.index(begin) < text.index(end)
    writers = [
        p.name
        for p in sorted((ROOT / "benchmarks").glob("*.py"))
        if p.name != "common.py" and f'"{name}"' in p.read_text()
    ]
    assert writers, f"no script in benchmarks/ names block {name!r} of {doc.relative_to(ROOT)}"
    page = "docs/method.md" if doc.name == "method.md" else None
    if page:  # a block outside docs/performance.md: its writer passes that page
        assert any("method.md" in (ROOT / "benchmarks" / w).read_text() for w in writers)


def test_write_block_replaces_the_block_and_nothing_else(common, tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Page\n\nbefore\n\n<!-- fig: begin -->\n\nold 1.0 s\n\n<!-- fig: end -->\n\nafter\n")
    common.write_block("fig", "new **2.0 s**\n", page)
    assert (
        page.read_text() == "# Page\n\nbefore\n\n<!-- fig: begin -->\n\nnew **2.0 s**\n\n<!-- fig: end -->\n\nafter\n"
    )
    assert common.read_block("fig", page) == "new **2.0 s**"
    common.write_block("fig", common.read_block("fig", page), page)  # round trip: unchanged
    assert common.read_block("fig", page) == "new **2.0 s**"


def test_write_block_refuses_a_page_without_its_markers(common, tmp_path):
    page = tmp_path / "page.md"
    for text in (
        "<!-- fig: begin -->\nno end\n",
        "<!-- fig: end -->\n<!-- fig: begin -->\n",
        "<!-- fig: begin -->\n<!-- fig: end -->\n<!-- fig: begin -->\n<!-- fig: end -->\n",
    ):
        page.write_text(text)
        for marker in ("fig", "other"):
            with pytest.raises(ValueError):
                common.write_block(marker, "x", page)
            assert page.read_text() == text  # a refused write leaves the page as it was


def test_the_documented_pages_round_trip(common, tmp_path):
    """Writing each documented block's own text back leaves the page byte for byte as it is."""
    for doc, name in _blocks():
        copy = tmp_path / doc.name
        copy.write_text(doc.read_text())
        common.write_block(name, common.read_block(name, copy), copy)
        assert copy.read_text() == doc.read_text(), f"{doc.name}: block {name} is not in write_block's form"


def test_suite_time_reads_the_stages_and_the_slowest_tests():
    """benchmarks/suite_time.py's block from a run's output (the form tests/stages.py and pytest print): the suite's
    counts, a row per stage with its result and time, and the slowest tests, slowest first."""
    spec = importlib.util.spec_from_file_location("suite_time", ROOT / "benchmarks" / "suite_time.py")
    suite_time = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec.loader.exec_module(suite_time)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    durations = "\n".join(f"{40 - i}.00s call     tests/test_x.py::test_{i}" for i in range(12))
    out = (
        "...\n=== stages ===\nstage lint (format and lint): ok, 5 passed, 1 skipped in 30.5 s\n"
        "stage fast (fast tests): ok, 400 passed in 275.0 s\nstage e2e (end-to-end): FAILED, 40 passed, 1 failed"
        f" in 500.2 s\n=== slowest 10 durations ===\n{durations}\n=== 1 failed, 445 passed in 805.70s ===\n"
    )
    text = suite_time.block(805.7, out)
    assert "**13 min 26 s** (1 failed, 445 passed)" in text
    assert "| lint (format and lint) | ok, 5 passed, 1 skipped | 0 min 30 s |" in text
    assert "| e2e (end-to-end) | FAILED, 40 passed, 1 failed | 8 min 20 s |" in text
    slow = re.findall(r"^\| ([0-9.]+) \| call \| `tests/test_x.py::test_([0-9]+)` \|$", text, re.M)
    assert [int(t) for _, t in slow] == list(range(10))


def test_publish_writes_only_when_asked(common, tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text("<!-- fig: begin -->\n\nold\n\n<!-- fig: end -->\n")
    common.publish("fig", "new", write=False, page=page)
    common.publish("fig", "new", write=True, page=page, why_not="options differ")
    assert common.read_block("fig", page) == "old"
    common.publish("fig", "new", write=True, page=page)
    assert common.read_block("fig", page) == "new"
    assert "not written" in capsys.readouterr().out


def _snakemake_jobs():
    spec = importlib.util.spec_from_file_location("snakemake_jobs", ROOT / "benchmarks" / "snakemake_jobs.py")
    jobs = importlib.util.module_from_spec(spec)
    sys.modules["snakemake_jobs"] = jobs  # its dataclasses look their module up
    try:
        spec.loader.exec_module(jobs)
    finally:
        del sys.modules["snakemake_jobs"]
    return jobs


def test_the_breakdown_counts_only_the_jobs_of_the_runs_models(tmp_path):
    """benchmarks/snakemake_jobs.py: in a results_dir that also holds a model no longer in the run (a regime explored
    first), that model's jobs are not the run's; the jobs of the whole run (no model in their log's path) are."""
    import json

    jobs = _snakemake_jobs()
    meta = tmp_path / ".snakemake" / "metadata"
    meta.mkdir(parents=True)
    for i, (rule, log, start) in enumerate(
        [
            ("cell", "results/logs/kept/p0/frozen/s0/L0-full-fresh.log", 10.0),
            ("cell", "results/logs/explored/p0/frozen/s0/L0-full-fresh.log", 20.0),
            ("aggregate", "results/logs/aggregate.log", 30.0),
            ("cell", "results/logs/gone/p0/frozen/s0/L0-full-fresh.log", 40.0),  # its log removed: not counted
        ]
    ):
        if "gone" not in log:
            (tmp_path / log).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / log).write_text("")
        record = {"rule": rule, "starttime": start, "endtime": start + 5, "log": [log]}
        (meta / f"record{i}").write_text(json.dumps(record))
    assert [j.start for j in jobs.jobs(tmp_path, "results")] == [10.0, 20.0, 30.0]
    assert [j.start for j in jobs.jobs(tmp_path, "results", {"kept"})] == [10.0, 30.0]


def test_the_breakdown_counts_the_plateau_checks_as_pretraining(tmp_path):
    """benchmarks/snakemake_jobs.py: a network's plateau check (no curve records it) is pretraining time, estimated
    at its main run's seconds per example; a network without a check adds nothing."""
    jobs = _snakemake_jobs()

    def curve(model, wall, examples=1000):
        return {"kind": "pretrain", "model": model, "pretrain_seed": 0, "examples": examples, "wall_s": wall}

    def start(model):
        return curve(model, 0.0, examples=0)

    pd.DataFrame([start("a"), curve("a", 100.0), start("b"), curve("b", 50.0)]).to_parquet(tmp_path / "curves.parquet")
    networks = pd.DataFrame({"model": ["a", "b"], "pretrain_seed": [0, 0], "plateau_examples": [1500, None]})
    networks.astype({"plateau_examples": "Int64"}).to_parquet(tmp_path / "networks.parquet")
    seconds = jobs.pretraining_seconds(tmp_path)
    assert seconds.loc[("a", 0)].tolist() == [100.0, 150.0]
    assert seconds.loc[("b", 0)].tolist() == [50.0, 0.0]


def test_a_run_whose_jobs_resumed_is_told_by_its_records():
    """benchmarks/snakemake_jobs.py: when the training jobs' timestamps hold less time than their networks and cells
    record (jobs interrupted between pieces and resumed from checkpoints: only the last attempt has timestamps),
    the fixed per-job cost is not measured (it would be negative) and the recorded core time is the run's."""
    jobs = _snakemake_jobs()
    b = {
        "jobs": 3,
        "job_core_s": 120.0,
        "training_jobs": 2,
        "training_job_core_s": 100.0,
        "other_job_core_s": 20.0,
        "pretrain_s": 60.0,
        "plateau_check_s": 0.0,
        "retrain_train_s": 70.0,
        "retrain_eval_s": 10.0,
        "cells": 1,
        "eval_share_of_retrain": 0.125,
        "eval_share_mean": 0.125,
        "eval_share_max": 0.125,
        "evaluations": 5,
        "located_evaluations": 0,
        "replay_share_of_retrain": 0.0,
    }
    b["fixed_s"] = b["training_job_core_s"] - b["pretrain_s"] - b["retrain_train_s"] - b["retrain_eval_s"]
    assert jobs.resumed(b) and jobs.recorded_core_s(b) == 160.0
    text = jobs.describe(b, 80.0, 2)
    assert "fixed per-job cost not measured" in text and "-40" not in text
    whole = {**b, "training_job_core_s": 150.0, "fixed_s": 10.0}
    assert not jobs.resumed(whole) and "fixed per-job cost of the 2 training jobs 10 s" in jobs.describe(whole, 80, 2)


def test_the_study_breakdown_says_what_the_stall_rule_saved(tmp_path):
    """benchmarks/study.py: a cell the stall rule stopped before its budget counts, with where it stopped (× its
    from-scratch cost) and its core time carried to the budget; a stalled cell that ran to its budget, and a cell
    that recovered, do not."""
    spec = importlib.util.spec_from_file_location("study_benchmark", ROOT / "benchmarks" / "study.py")
    study = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.modules["snakemake_jobs"] = _snakemake_jobs()
    try:
        spec.loader.exec_module(study)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
        del sys.modules["snakemake_jobs"]
    keys = {"model": "m", "pretrain_seed": 0, "policy": "full", "init": "fresh", "regime": "frozen", "seed": 0}
    cells = {"L0": (3_000, 1_800.0, 2_000), "L1": (12_000, 3_600.0, 11_000), "all": (400, 60.0, None)}
    summary, curves = [], []
    for target, (ran, wall, stalled) in cells.items():
        for threshold in (0.01, 0.1):
            summary.append(
                {**keys, "target": target, "threshold": threshold, "budget_examples": 12_000,
                 "scratch_examples": 1_000, "stalled_examples": stalled}
            )  # fmt: skip
        curves += [
            {**keys, "target": target, "kind": "recovery", "examples": e, "wall_s": w}
            for e, w in ((0, 0.0), (ran, wall))
        ]
    pd.DataFrame(summary).to_parquet(tmp_path / "summary.parquet")
    pd.DataFrame(curves).to_parquet(tmp_path / "curves.parquet")
    text = study.stall_stops(tmp_path)
    assert "stopped 1 cell at 3.0 to 3.0 × their from-scratch cost (budgets 12 ×)" in text
    assert "0.5 core-hours of retraining where running them to the budget would take about 2.0" in text
    pd.DataFrame(summary).assign(stalled_examples=None).to_parquet(tmp_path / "summary.parquet")
    assert "stopped no cell" in study.stall_stops(tmp_path)
