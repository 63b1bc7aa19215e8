"""Reading the finished part of a study that is still running (the command ``python -m selfheal.partial``): which
models it reads, what it leaves out and says so on the page, and real runs that read one finished model of
tests/tiny.yaml beside one that has not run, training nothing and writing only under results/partial/."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from selfheal import partial
from selfheal import results as results_api
from selfheal.analysis import page

ROOT = Path(__file__).resolve().parents[1]

FILES = {  # per model, the files the aggregate reads for it (a donor: its network's only)
    "a": ["a/p0.json", "a/cell0.json", "a/cell1.json"],
    "b": ["b/p0.json", "b/cell0.json"],
    "donor": ["donor/p0.json"],
}
HEALS = {"a": True, "b": True, "donor": False}


@given(st.sets(st.sampled_from([f for files in FILES.values() for f in files])))
def test_a_model_is_read_exactly_when_every_file_it_needs_is_there(there):
    needed = {m: set(files) for m, files in FILES.items()}
    if not any(HEALS[m] and files <= there for m, files in needed.items()):
        with pytest.raises(partial.NothingFinished, match="nothing to read yet"):
            partial.select(FILES, {}, HEALS, exists=there.__contains__)
        return
    got = partial.select(FILES, {}, HEALS, exists=there.__contains__)
    assert got.models == [m for m in FILES if needed[m] <= there]  # in the config's order
    assert got.left_out == [m for m in FILES if not needed[m] <= there]
    assert got.lr_left_out == []


def test_a_finished_model_whose_lr_check_has_not_finished_is_read_without_it():
    there = {*FILES["a"], *FILES["b"], "a/lr/x3.json"}
    lr = {"a": ["a/lr/x3.json", "a/lr/x0.3333.json"], "b": []}
    got = partial.select(FILES, lr, HEALS, exists=there.__contains__)
    assert (got.models, got.left_out, got.lr_left_out) == (["a", "b"], ["donor"], ["a"])
    config = {"models": [{"name": n} for n in ("a", "b", "donor")]}
    narrowed = partial.restrict(config, got)
    assert [m["name"] for m in narrowed["models"]] == ["a", "b"]
    assert [m["name"] for m in config["models"]] == ["a", "b", "donor"]  # the config itself is left alone


def test_the_page_says_first_what_it_leaves_out():
    note = page.partial(partial.left_out_table(["b", "donor"], ["a"]))
    assert note == {"mode": "true", "models": ["b", "donor"], "networks": [], "checks": ["a"]}
    assert page.partial(partial.left_out_table([], [])) == {"mode": "true", "models": [], "networks": [], "checks": []}


def _read(workdir: Path, configfile: Path, *args: str) -> subprocess.CompletedProcess:
    """The readout command, in the study's folder, over the configs the workflow merges (the default, then the
    study's)."""
    from snakemake_helpers import pythonpath

    return subprocess.run(
        [sys.executable, "-m", "selfheal.partial", str(ROOT / "config" / "config.yaml"), str(configfile), *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": pythonpath(), "HF_HUB_OFFLINE": "1"},
    )


def _trained(root: Path) -> dict[str, int]:
    """Every file under the training jobs' folders, with its modification time."""
    return {
        str(p): p.stat().st_mtime_ns
        for part in ("models", "baselines", "cells", "work")
        for p in (root / part).rglob("*")
        if p.is_file()
    }


@pytest.mark.e2e
def test_the_readout_reads_the_finished_model_and_trains_nothing(tmp_path, corpus_seed):
    """tests/tiny.yaml: before any model has finished the readout is refused; with tinyB's
    network and cells made and tinyA not run at all, the command reads tinyB alone, under
    results/partial/, touching no file of the study, and its page names tinyA as left out,
    also once shipped and re-derived."""
    from snakemake_helpers import snakemake

    corpus_seed(tmp_path)
    raw = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    raw["models"][0].pop("frozen_random")
    configfile = tmp_path / "config.yaml"
    configfile.write_text(yaml.safe_dump(raw))
    results = tmp_path / "results"

    refused = _read(tmp_path, configfile)
    assert refused.returncode == 1 and "nothing to read yet" in refused.stderr, refused.stderr[-3000:]

    made = snakemake(tmp_path, configfile, *(f"results/{d}/tinyB/p0" for d in ("models", "cells")))
    assert made.returncode == 0, made.stderr[-4000:]
    before = _trained(results)
    read = _read(tmp_path, configfile)
    assert read.returncode == 0, read.stderr[-4000:]
    assert _trained(results) == before  # nothing trained, nothing of the study touched
    assert not (results / "summary.parquet").exists()  # the study's own readout is never written

    read_dir = results / "partial"
    assert set(pd.read_parquet(read_dir / "summary.parquet")["model"]) == {"tinyB"}
    assert (read_dir / "plots" / "recovery_cost.png").is_file()
    left_out = pd.read_parquet(read_dir / "answer" / "left_out.parquet")
    assert left_out.values.tolist() == [["tinyA", "model"]]
    md = (read_dir / "answer.md").read_text()
    assert "Not finished yet, and in no number below: `tinyA`;" in md
    shipped = tmp_path / "shipped"  # shipped and re-derived, the page still says what it leaves out
    results_api.ship(read_dir, shipped)
    results_api.reread(shipped)
    assert "Not finished yet, and in no number below: `tinyA`;" in (shipped / "answer.md").read_text()
    assert results_api.load(shipped)["left_out"].equals(left_out)


def test_keep_networks_narrows_each_model_to_its_finished_networks():
    config = {"models": [{"name": n, "pretrain": {"seeds": [0, 1, 2]}} for n in ("a", "b", "c")]}
    narrowed, left = partial.keep_networks(config, {"a": [0, 1, 2], "b": [2, 1], "c": []})
    assert [m["pretrain"]["seeds"] for m in narrowed["models"]] == [[0, 1, 2], [1, 2], [0, 1, 2]]
    assert left == (("b", 0),)  # c keeps its networks: none finished, select leaves it out whole
    assert config["models"][1]["pretrain"]["seeds"] == [0, 1, 2]  # the config itself is left alone
    assert partial.with_seeds(config, "a", [2])["models"][0]["pretrain"]["seeds"] == [2]
    table = partial.left_out_table(["c"], ["b"], left)
    assert table.values.tolist() == [["c", "model"], ["b", "network p0"], ["b", "lr check"]]
    assert page.partial(table) == {"mode": "networks", "models": ["c"], "networks": [("b", "p0")], "checks": ["b"]}
    only = page.partial(partial.left_out_table([], [], (("b", 0), ("b", 2))))
    assert only["networks"] == [("b", "p0 and p2")] and only["models"] == []


@pytest.mark.e2e
def test_the_readout_by_networks_reads_the_finished_networks_of_a_model(tmp_path, corpus_seed):
    """tests/tiny.yaml's tinyB trained and healed with one network; then asked for two: the readout leaves tinyB
    out (not every network finished, so nothing to read), with --networks it reads its first network alone, under
    results/partial/, and its page and left-out table name the second."""
    from snakemake_helpers import snakemake

    corpus_seed(tmp_path)
    raw = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    raw["models"] = [m for m in raw["models"] if m["name"] == "tinyB"]
    configfile = tmp_path / "config.yaml"
    configfile.write_text(yaml.safe_dump(raw))
    made = snakemake(tmp_path, configfile, "results/summary.parquet")
    assert made.returncode == 0, made.stderr[-4000:]
    raw["pretrain"]["seeds"] = [0, 1]
    configfile.write_text(yaml.safe_dump(raw))

    whole = _read(tmp_path, configfile)
    assert whole.returncode == 1 and "nothing to read yet" in whole.stderr, whole.stderr[-3000:]
    read = _read(tmp_path, configfile, "--networks")
    assert read.returncode == 0, read.stderr[-4000:]
    assert not (tmp_path / "results" / "models" / "tinyB" / "p1").exists()
    read_dir = tmp_path / "results" / "partial"
    assert set(pd.read_parquet(read_dir / "networks.parquet")["pretrain_seed"]) == {0}
    left_out = pd.read_parquet(read_dir / "answer" / "left_out.parquet")
    assert left_out.values.tolist() == [["tinyB", "network p1"]]
    assert "Networks not finished, and in no number below: `tinyB` p1." in (read_dir / "answer.md").read_text()
