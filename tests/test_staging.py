"""Work kept across a job's runs (heal/staging.py): a staged piece is kept only under its own fingerprint, a piece
restarted under another fingerprint loses what the old one left (a stale checkpoint included), and outputs are hard
links that leave the staged files in place when Snakemake removes them."""

import os
import shutil

from selfheal.heal import staging

OUTPUTS = ("trained", "pretrain.json")


def _make(folder, text="a"):
    (folder / "trained").mkdir(parents=True, exist_ok=True)
    (folder / "trained" / "model.safetensors").write_text(text)
    (folder / "pretrain.json").write_text(text)


def test_a_piece_is_kept_only_complete_and_under_its_own_fingerprint(tmp_path):
    folder = tmp_path / "network"
    staging.begin(folder, "fp1", OUTPUTS)
    assert not staging.is_staged(folder, "fp1", OUTPUTS)  # begun, nothing made yet
    _make(folder)
    assert staging.is_staged(folder, "fp1", OUTPUTS)
    assert not staging.is_staged(folder, "fp2", OUTPUTS)
    (folder / "pretrain.json").unlink()
    assert not staging.is_staged(folder, "fp1", OUTPUTS)


def test_restarting_keeps_the_checkpoint_only_under_the_same_fingerprint(tmp_path):
    folder = tmp_path / "network"
    staging.begin(folder, "fp1", OUTPUTS)
    _make(folder)
    (folder / "pretrain.ckpt").write_text("state")
    staging.begin(folder, "fp1", OUTPUTS)  # a killed run re-run: outputs go, its checkpoint stays to resume from
    assert (folder / "pretrain.ckpt").exists() and not (folder / "trained").exists()
    assert not (folder / "pretrain.json").exists()
    staging.begin(folder, "fp2", OUTPUTS)  # other settings or inputs: nothing of the old piece is resumed
    assert sorted(p.name for p in folder.iterdir()) == [staging.FINGERPRINT]


def test_outputs_are_hard_links_that_leave_the_staged_files(tmp_path):
    staged, out = tmp_path / "work" / "network", tmp_path / "results" / "p0"
    _make(staged)
    for name in OUTPUTS:
        staging.link(staged / name, out / name)
    linked = out / "trained" / "model.safetensors"
    assert os.path.samefile(linked, staged / "trained" / "model.safetensors")
    assert (out / "pretrain.json").read_text() == "a"
    shutil.rmtree(out)  # what Snakemake does to a job's outputs before it runs the job again
    assert (staged / "trained" / "model.safetensors").read_text() == "a"


def test_the_digest_follows_content_not_times(tmp_path):
    _make(tmp_path / "n")
    before = staging.digest([str(tmp_path / "n")])
    os.utime(tmp_path / "n" / "pretrain.json", (0, 0))
    (tmp_path / "n" / ".snakemake_timestamp").write_text("")  # Snakemake's marker in a directory() output
    assert staging.digest([str(tmp_path / "n")]) == before
    (tmp_path / "n" / "pretrain.json").write_text("b")
    assert staging.digest([str(tmp_path / "n")]) != before


def test_what_each_fingerprint_covers():
    """grid.covered, the one place that says what a staged piece depends on: a network job's settings lose the seed
    list, the lr check and `heal`; a network also its retrain settings; a cell also its budget and stall stop; an
    import keeps only what identifies the checkpoint. The config itself is left alone."""
    from selfheal import grid
    from selfheal.heal import budget

    retrain = {
        "eval_every_examples": 64,
        "thresholds": [0.01],
        "budget_fraction": 0.5,
        "budget_scratch": None,
        "stop_stalled": 3,
    }
    cfg = {
        "name": "m",
        "arch": "gpt2",
        "n_layer": 2,
        "d_model": 8,
        "heal": False,
        "pretrain": {"seeds": [0, 1], "patience": 1.0},
        "retrain": retrain,
    }
    model = {"name": "m", "arch": "gpt2", "n_layer": 2, "d_model": 8}
    assert grid.covered("job", cfg) == {**model, "pretrain": {"patience": 1.0}, "retrain": retrain}
    assert grid.covered("network", cfg) == {**model, "pretrain": {"patience": 1.0}}
    assert grid.covered("cell", cfg) == {
        **model,
        "pretrain": {"patience": 1.0},
        "retrain": {"eval_every_examples": 64, "thresholds": [0.01]},
    }
    assert grid.covered("import", cfg) == {"name": "m", "arch": "gpt2", "n_layer": 2}
    assert grid.network_config(cfg, 1)["pretrain"] == {"patience": 1.0, "seed": 1}
    assert cfg["pretrain"]["seeds"] == [0, 1]
    # the keys the budget reads are those a cell's fingerprint leaves out
    assert {f"retrain.{k}" for k in (*budget.KEYS, budget.STOP_KEY)} <= set(grid.NOT_COVERED["cell"])
