"""Reading the finished part of a study that is still running (config key partial; selfheal.partial): which models
it reads, what it leaves out and says so on the page, and a real Snakemake run that reads one finished model of
tests/tiny.yaml beside one that has not run, training nothing and writing only under results/partial/."""

import os
from pathlib import Path

import pandas as pd
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from selfheal import partial
from selfheal import results as results_api
from selfheal.analysis import page
from selfheal.config import ConfigError

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
        with pytest.raises(ConfigError, match="'partial'"):
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
    config = {
        "models": [
            {"name": n, "retrain": {"lr_sensitivity": [3.0, 0.3333] if n == "a" else []}} for n in ("a", "b", "donor")
        ]
    }
    narrowed = partial.restrict(config, got)
    assert [m["name"] for m in narrowed["models"]] == ["a", "b"]
    assert narrowed["models"][0]["retrain"]["lr_sensitivity"] == []
    assert config["models"][0]["retrain"]["lr_sensitivity"] == [3.0, 0.3333]  # the config itself is left alone


def test_the_page_says_first_what_it_leaves_out():
    note = page.partial(partial.left_out_table(["b", "donor"], ["a"]))
    assert note == {"mode": "true", "models": ["b", "donor"], "networks": [], "checks": ["a"]}
    assert page.partial(partial.left_out_table([], [])) == {"mode": "true", "models": [], "networks": [], "checks": []}


def test_the_stamp_changes_when_a_read_file_changes(tmp_path):
    f = tmp_path / "recovery.json"
    f.write_text("{}")
    before = partial.stamp([str(f)])
    assert partial.stamp([str(f)]) == before
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    assert partial.stamp([str(f)]) != before


def test_the_stamp_file_is_rewritten_only_when_the_stamp_changes(tmp_path):
    """The readout's input: left as it is (content and time) while the read files are, rewritten when one changes,
    so Snakemake's mtime trigger alone remakes the readout."""
    f, path = tmp_path / "recovery.json", tmp_path / "partial" / "read_stamp.txt"
    f.write_text("{}")
    assert partial.write_stamp(str(path), partial.stamp([str(f)])) == str(path)
    first = path.read_text()
    assert first == partial.stamp([str(f)]) + "\n"
    os.utime(path, ns=(0, 0))
    partial.write_stamp(str(path), partial.stamp([str(f)]))
    assert path.read_text() == first and path.stat().st_mtime_ns == 0
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    partial.write_stamp(str(path), partial.stamp([str(f)]))
    assert path.read_text() != first and path.stat().st_mtime_ns > 0


@pytest.mark.e2e
def test_the_workflow_reads_the_finished_model_and_trains_nothing(tmp_path, corpus_seed):
    """tests/tiny.yaml with tinyB's lr check on: before any model has finished the readout is refused, naming the
    key; with tinyB's networks and cells made (its lr check not run) and tinyA not run at all, partial: true reads
    tinyB alone, under results/partial/, starting no training job, and its page names tinyA and tinyB's lr check
    as left out, also once shipped and re-derived; asked again it is up to date, and a finished file that changes
    makes it again, also under --rerun-triggers mtime or params alone."""
    from snakemake_helpers import snakemake

    corpus_seed(tmp_path)
    raw = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    raw["models"][0].pop("frozen_random")
    raw["models"][1]["retrain"] = {"lr_sensitivity": [3.0]}
    configfile = tmp_path / "config.yaml"
    configfile.write_text(yaml.safe_dump(raw))
    results = tmp_path / "results"

    refused = snakemake(tmp_path, configfile, "-n", "--config", "partial=True")
    assert refused.returncode != 0
    assert "config key 'partial'" in refused.stderr + refused.stdout

    made = snakemake(tmp_path, configfile, *(f"results/{d}/tinyB" for d in ("models", "baselines", "cells")))
    assert made.returncode == 0, made.stderr[-4000:]
    read = snakemake(tmp_path, configfile, "--config", "partial=True")
    assert read.returncode == 0, read.stderr[-4000:]
    ran = {line.split("Rule: ")[1].rstrip(")") for line in read.stderr.splitlines() if "(Rule: " in line}
    assert ran == {"aggregate", "left_out", "answer", "plots", "all"}
    assert not (results / "models" / "tinyA").exists() and not (results / "lr_sensitivity").exists()
    assert not (results / "summary.parquet").exists()  # the study's own readout is never written

    read_dir = results / "partial"
    assert set(pd.read_parquet(read_dir / "summary.parquet")["model"]) == {"tinyB"}
    left_out = pd.read_parquet(read_dir / "answer" / "left_out.parquet")
    assert left_out.values.tolist() == [["tinyA", "model"], ["tinyB", "lr check"]]
    page = (read_dir / "answer.md").read_text()
    assert "Not finished yet, and in no number below: `tinyA`;" in page
    assert "The lr check of `tinyB` has not finished" in page
    shipped = tmp_path / "shipped"  # shipped and re-derived, the page still says what it leaves out
    results_api.ship(read_dir, shipped)
    results_api.reread(shipped)
    assert "Not finished yet, and in no number below: `tinyA`;" in (shipped / "answer.md").read_text()
    assert results_api.load(shipped)["left_out"].equals(left_out)

    again = snakemake(tmp_path, configfile, "--config", "partial=True", "-n")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    recovery = next((results / "cells" / "tinyB").rglob("recovery.json"))
    os.utime(recovery, ns=(recovery.stat().st_atime_ns, recovery.stat().st_mtime_ns + 10**9))
    for triggers in ([], ["--rerun-triggers", "mtime"], ["--rerun-triggers", "params"]):  # the study: mtime alone
        changed = snakemake(tmp_path, configfile, "--config", "partial=True", "-n", *triggers)
        assert changed.returncode == 0 and "aggregate" in changed.stdout, (triggers, changed.stdout[-2000:])


def test_keep_networks_narrows_each_model_to_its_finished_networks():
    config = {"models": [{"name": n, "pretrain": {"seeds": [0, 1, 2]}} for n in ("a", "b", "c")]}
    narrowed, left = partial.keep_networks(config, {"a": [0, 1, 2], "b": [2, 1], "c": []})
    assert [m["pretrain"]["seeds"] for m in narrowed["models"]] == [[0, 1, 2], [1, 2], [0, 1, 2]]
    assert left == (("b", 0),)  # c keeps its networks: none finished, select leaves it out whole
    assert config["models"][1]["pretrain"]["seeds"] == [0, 1, 2]  # the config itself is left alone
    assert partial.with_seeds(config, "a", [2])["models"][0]["pretrain"]["seeds"] == [2]
    table = partial.left_out_table(["c"], ["b"], left)
    assert table.values.tolist() == [["c", "model"], ["b", "network p0"], ["b", "lr check"]]
    note = page.partial(table)
    assert note == {"mode": "networks", "models": ["c"], "networks": [("b", "p0")], "checks": ["b"]}
    only = page.partial(partial.left_out_table([], [], (("b", 0), ("b", 2))))
    assert only["networks"] == [("b", "p0 and p2")] and not only["models"]


@pytest.mark.e2e
def test_partial_networks_reads_the_finished_networks_of_a_model(tmp_path, corpus_seed):
    """tests/tiny.yaml's tinyB trained and healed with one network; then asked for two: partial: true leaves tinyB
    out (not every network finished, so nothing to read), partial: networks reads its first network alone, under
    results/partial/, training nothing, and its page and left-out table name the second."""
    from snakemake_helpers import snakemake

    corpus_seed(tmp_path)
    raw = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())
    raw["models"] = [m for m in raw["models"] if m["name"] == "tinyB"]
    configfile = tmp_path / "config.yaml"
    configfile.write_text(yaml.safe_dump(raw))
    made = snakemake(tmp_path, configfile)
    assert made.returncode == 0, made.stderr[-4000:]
    raw["pretrain"]["seeds"] = [0, 1]
    configfile.write_text(yaml.safe_dump(raw))

    whole = snakemake(tmp_path, configfile, "-n", "--config", "partial=True")
    assert whole.returncode != 0 and "config key 'partial'" in whole.stderr + whole.stdout
    read = snakemake(tmp_path, configfile, "--config", "partial=networks")
    assert read.returncode == 0, read.stderr[-4000:]
    ran = {line.split("Rule: ")[1].rstrip(")") for line in read.stderr.splitlines() if "(Rule: " in line}
    assert ran == {"aggregate", "left_out", "answer", "plots", "all"}
    assert not (tmp_path / "results" / "models" / "tinyB" / "p1").exists()
    read_dir = tmp_path / "results" / "partial"
    assert set(pd.read_parquet(read_dir / "networks.parquet")["pretrain_seed"]) == {0}
    left_out = pd.read_parquet(read_dir / "answer" / "left_out.parquet")
    assert left_out.values.tolist() == [["tinyB", "network p1"]]
    assert "Networks not finished, and in no number below: `tinyB` p1." in (read_dir / "answer.md").read_text()
