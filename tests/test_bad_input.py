"""Bad input of every kind, as users write it, is refused before any job with a ConfigError naming the key; what
only a job can know fails there with a clear message naming the key.

Most cases call ``selfheal.experiments.config.resolve_whole`` (the core check ``selfheal.config.resolve`` and the
published experiments' check), which is exactly what the Snakefile runs before it schedules any job
(workflow/rules/common.smk); a few run the real Snakemake to show that no job ran and no results folder was made.
A property test (hypothesis) mutates the shipped configs and checks every mutation is either accepted and expands
to cells, or refused with a ConfigError naming a real key, never another exception; with SELFHEAL_MUTATION_SWEEP=1
the same check walks every single-key mutation of every shipped config.
"""

import copy
import json
import math
import os
import re
from pathlib import Path

import pandas as pd
import pytest
import torch
import transformers
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from selfheal import config, grid
from selfheal.config.merge import merge
from selfheal.config.schema import load_schema
from selfheal.experiments import config as experiments_config  # the whole config, as the Snakefile reads it
from selfheal.data import tokenizer
from selfheal.models import imported
from selfheal.training.hardware import DeviceUnavailable, Hardware
from snakemake_helpers import run_many

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def _over_default(snippet: str) -> dict:
    """A user's --configfile (YAML text) over the default config, as Snakemake merges it (mappings key by key,
    lists replaced whole)."""
    return merge(DEFAULT, yaml.safe_load(snippet))


def _refused(raw: dict, key: str) -> config.ConfigError:
    with pytest.raises(config.ConfigError) as err:
        experiments_config.resolve_whole(raw)
    assert err.value.key == key, str(err.value)
    assert f"config key '{key}'" in str(err.value)
    return err.value


# --- non-finite numbers: NaN and infinities pass JSON-schema bounds, so they are refused anywhere --------------

NON_FINITE = [
    ("recipe: {lrs: [1.0e-3, 3.0e-3, .nan, 3.0e-2]}", "recipe.lrs[2]"),
    ("pretrain: {max_epochs: .inf}", "pretrain.max_epochs"),
    ("retrain: {budget_fraction: .inf}", "retrain.budget_fraction"),
    ("retrain: {budget_scratch: .inf}", "retrain.budget_scratch"),
    ("retrain: {stop_stalled: .inf}", "retrain.stop_stalled"),
    ("retrain: {thresholds: [0.01, .nan]}", "retrain.thresholds[1]"),
    ("corpus: {source: shakespeare, val_fraction: .nan}", "corpus.val_fraction"),
    ("recipe: {weight_decay: -.inf}", "recipe.weight_decay"),
    ("models: [{name: m, n_layer: 2, d_model: 32, n_head: 2, dropout: .nan}]", "models[0].dropout"),
    ("transfer: {lr: .nan}", "transfer.lr"),
]


@pytest.mark.parametrize("snippet,key", NON_FINITE, ids=[k for _, k in NON_FINITE])
def test_non_finite_numbers_are_refused(snippet, key):
    err = _refused(_over_default(snippet), key)
    assert "not a finite number" in str(err)


def test_a_float_is_not_an_integer():
    _refused(_over_default("recipe: {batch_size: 16.0}"), "recipe.batch_size")
    _refused(_over_default("models: [{name: m, n_layer: 2.0, d_model: 32, n_head: 2}]"), "models[0].n_layer")


# --- keys the one recipe replaced: refused by name, with where the setting went ----------------------------------

REMOVED = [
    ("pretrain: {epochs: 24}", "pretrain.epochs", "pretrain.max_epochs"),
    ("pretrain: {lr: 6.0e-3}", "pretrain.lr", "recipe.lrs"),
    ("pretrain: {min_lr_fraction: 0.1}", "pretrain.min_lr_fraction", "no decay"),
    ("pretrain: {warmup_fraction: 0.05}", "pretrain.warmup_fraction", "recipe.warmup_steps"),
    ("pretrain: {batch_size: 16}", "pretrain.batch_size", "recipe.batch_size"),
    ("retrain: {lr: 1.0e-3}", "retrain.lr", "recipe.lrs"),
    ("retrain: {optimizer: schedulefree}", "retrain.optimizer", "schedule-free AdamW"),
    ("retrain: {batch_size: 32}", "retrain.batch_size", "recipe.batch_size"),
    ("retrain: {warmup_steps: 10}", "retrain.warmup_steps", "recipe.warmup_steps"),
    ("models: [{name: m, n_layer: 1, d_model: 16, n_head: 2, pretrain: {epochs: 2}}]", "models[0].pretrain.epochs",
     "pretrain.patience"),
    ("models: [{name: m, n_layer: 1, d_model: 16, n_head: 2, retrain: {lr: 0.1}}]", "models[0].retrain.lr",
     "recipe.lrs"),
]  # fmt: skip


@pytest.mark.parametrize("snippet,key,where", REMOVED, ids=[k for _, k, _ in REMOVED])
def test_a_removed_key_is_refused_with_where_it_went(snippet, key, where):
    err = _refused(_over_default(snippet), key)
    assert "removed" in str(err) and where in str(err) and "docs/configuration.md#recipe" in str(err)


def test_the_race_grid_goes_up():
    _refused(_over_default("recipe: {lrs: [1.0e-2, 3.0e-3, 3.0e-2, 0.1]}"), "recipe.lrs[1]")
    _refused(_over_default("recipe: {lrs: [1.0e-3, 3.0e-3, 1.0e-2]}"), "recipe.lrs")  # fewer than four
    _refused(_over_default("recipe: {batch_size: 2048}"), "pretrain.eval_every_examples")  # above every interval


# --- sizes the corpus cannot supply -------------------------------------------------------------------------------


def test_more_training_sequences_than_the_corpus_holds_names_the_key_and_the_number():
    err = _refused(_over_default("pretrain: {train_sequences: 10000000}"), "pretrain.train_sequences")
    assert "at most 72,645" in str(err)  # 4,649,189 bytes of train text (+3 per work) / 64 tokens


def test_a_models_own_train_sequences_is_named():
    raw = copy.deepcopy(DEFAULT)
    raw["models"][1]["pretrain"] = {"train_sequences": 10_000_000}
    _refused(raw, "models[1].pretrain.train_sequences")


def test_a_context_too_long_for_the_asked_sequences_names_the_context():
    """A count the split holds at the default context but not at the model's own is the context's fault (found by
    the mutation test below: context 64,000 on config/bogoychev.yaml was blamed on pretrain.train_sequences)."""
    raw = copy.deepcopy(DEFAULT)
    raw["models"][0]["context"] = 64_000
    raw["pretrain"]["train_sequences"] = 8000
    err = _refused(raw, "models[0].context")
    assert "at most 72" in str(err)


def test_validation_set_larger_than_the_validation_split():
    err = _refused(_over_default("eval: {val_sequences: 100000}"), "eval.val_sequences")
    assert "at most 6,375" in str(err)  # 408,009 bytes of validation text (+3 per work) / 64


def test_context_longer_than_the_validation_split():
    raw = _over_default("models: [{name: m, n_layer: 1, d_model: 16, n_head: 2, context: 1000000}]")
    _refused(raw, "models[0].context")


# --- unusable corpus files -------------------------------------------------------------------------------------------


def _files_corpus(tmp_path, bad_name: str, bad_bytes: bytes, sizes: str = "") -> dict:
    folder = tmp_path / "texts"
    folder.mkdir()
    for name in ("a", "b", "c"):
        (folder / f"{name}.txt").write_text(f"The text of work {name}.\n" * 400)
    (folder / bad_name).write_bytes(bad_bytes)
    raw = _over_default(sizes or "pretrain: {train_sequences: 16}\neval: {val_sequences: 4}")
    raw["corpus"] = {"source": "files", "files": str(folder / "*.txt")}
    return raw


@pytest.mark.parametrize(
    "content,problem",
    [
        (b"", "is empty"),
        (b"\n  \n\t\n", "holds only whitespace"),
        (b"PK\x03\x04\x00\x00binary", "is binary"),
        ("Caf\u00e9 au lait\n".encode("latin-1") * 10, "is not UTF-8"),
    ],
    ids=["empty", "whitespace", "binary", "latin-1"],
)
def test_unusable_corpus_file_is_named(tmp_path, content, problem):
    raw = _files_corpus(tmp_path, "bad.txt", content)
    err = _refused(raw, "corpus.files")
    assert str(tmp_path / "texts" / "bad.txt") in str(err) and problem in str(err)


def test_corpus_too_small_for_s(tmp_path):
    raw = _files_corpus(tmp_path, "d.txt", b"The text of work d.\n" * 400, sizes="pretrain: {train_sequences: 5000}")
    err = _refused(raw, "pretrain.train_sequences")
    assert "gives at most" in str(err)


def test_a_split_too_small_for_its_count_names_the_share_that_set_it():
    """All works held out for validation leave a one-work train split: the count it cannot supply is refused with
    corpus.val_fraction beside it (the change the user made), not the count alone (found by the mutation test)."""
    raw = copy.deepcopy(SHIPPED["bogoychev.yaml"])
    raw["corpus"]["val_fraction"] = 1.0
    with pytest.raises(config.ConfigError) as err:
        experiments_config.resolve_whole(raw)
    assert err.value.key == "pretrain.train_sequences" and "corpus.val_fraction" in err.value.keys, str(err.value)


# --- a model a user brings ---------------------------------------------------------------------------------------


def _pretrained(name_or_path: str, **extra) -> dict:
    model = {
        "name": "mine",
        "source": "pretrained",
        "name_or_path": name_or_path,
        "arch": "gpt2",
        "n_layer": 2,
        "context": 32,
        **extra,
    }
    return _over_default(yaml.safe_dump({"models": [model], "grid": {"layers": [0]}}))


def _tokenizer(folder, vocab_size: int):
    """A byte-level BPE of ``vocab_size`` tokens (selfheal's own, trained on a line of text), saved in ``folder``."""
    works = pd.DataFrame({"work": ["a"], "split": ["train"], "n_chars": [0], "text": ["To be, or not to be. " * 40]})
    tokenizer.train(works, vocab_size, folder.parent / f"{folder.name}-tok.json")
    tokenizer.load(folder.parent / f"{folder.name}-tok.json").save_pretrained(folder)


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    """A real 2-layer GPT-2 saved with save_pretrained (safetensors), and its tokenizer."""
    folder = tmp_path_factory.mktemp("gpt2")
    cfg = transformers.GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=300, n_positions=32)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(folder)
    _tokenizer(folder, 300)
    return folder


def test_brought_model_folder_is_accepted(gpt2_folder):
    resolved = experiments_config.resolve_whole(_pretrained(str(gpt2_folder)))
    model = resolved["models"][0]
    targets = {c.target for c in grid.cells(resolved) if c.model == model["name"]}
    assert {"L0", "none"} <= targets and "L1" not in targets, targets  # the grid's layer 0 of the folder's model


def _model_only(gpt2_folder, folder):
    folder.mkdir(exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        (folder / name).write_bytes((gpt2_folder / name).read_bytes())
    return folder


def test_brought_model_folder_without_a_tokenizer(tmp_path, gpt2_folder):
    """save_pretrained of the model alone: refused before any job, naming the folder and what to save."""
    folder = _model_only(gpt2_folder, tmp_path / "model-only")
    err = _refused(_pretrained(str(folder)), "models[0].name_or_path")
    assert f"{folder} has no tokenizer" in str(err) and "tokenizer.save_pretrained" in str(err)


def test_brought_tokenizer_larger_than_the_embedding(tmp_path):
    """A tokenizer of some 270 tokens for a model that embeds 100: refused with both numbers (it failed 39 s into the
    first job with a bare IndexError)."""
    folder = tmp_path / "small-embedding"
    cfg = transformers.GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=100, n_positions=32)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(folder)
    _tokenizer(folder, 300)
    err = _refused(_pretrained(str(folder)), "models[0].name_or_path")
    assert re.search(r"its tokenizer has 2\d\d tokens but the model embeds only 100 ", str(err)), str(err)


def test_brought_model_of_an_architecture_selfheal_cannot_reset(tmp_path):
    folder = tmp_path / "t5"
    transformers.T5Config(num_layers=2, d_model=16, d_kv=8, d_ff=32, num_heads=2, vocab_size=300).save_pretrained(
        folder
    )
    save_file({"x": torch.zeros(1)}, str(folder / "model.safetensors"))
    err = _refused(_pretrained(str(folder)), "models[0].name_or_path")
    assert "holds a 't5' model, whose layers selfheal cannot reset one by one" in str(err)


def test_brought_model_folder_that_does_not_exist(tmp_path):
    err = _refused(_pretrained(str(tmp_path / "no" / "such" / "model")), "models[0].name_or_path")
    assert str(tmp_path / "no" / "such" / "model") in str(err) and "does not exist" in str(err)
    _refused(_pretrained("./models/mine"), "models[0].name_or_path")


def test_brought_model_folder_without_weights(tmp_path, gpt2_folder):
    (tmp_path / "config.json").write_text((gpt2_folder / "config.json").read_text())
    err = _refused(_pretrained(str(tmp_path)), "models[0].name_or_path")
    assert "has no weights" in str(err) and str(tmp_path) in str(err)


def test_brought_model_with_pickled_weights_only(tmp_path, gpt2_folder):
    """The file is never unpickled: its name alone says what it is."""
    (tmp_path / "config.json").write_text((gpt2_folder / "config.json").read_text())
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04not really a pickle")
    err = _refused(_pretrained(str(tmp_path)), "models[0].name_or_path")
    assert "pickled weights only (pytorch_model.bin)" in str(err)


def test_brought_model_with_truncated_safetensors(tmp_path, gpt2_folder):
    (tmp_path / "config.json").write_text((gpt2_folder / "config.json").read_text())
    data = (gpt2_folder / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[: len(data) // 2])
    _refused(_pretrained(str(tmp_path)), "models[0].name_or_path")


def test_brought_model_of_another_family_or_depth(gpt2_folder):
    err = _refused(_pretrained(str(gpt2_folder), arch="llama"), "models[0].arch")
    assert "'gpt2'" in str(err)
    err = _refused(_pretrained(str(gpt2_folder), n_layer=3), "models[0].n_layer")
    assert "has 2 layers" in str(err)


def test_brought_gguf_file_missing_or_not_gguf(gpt2_folder, tmp_path):
    _refused(_pretrained(str(gpt2_folder), gguf_file="model.gguf"), "models[0].gguf_file")
    (tmp_path / "model.gguf").write_bytes(b"not gguf")
    _refused(_pretrained(str(tmp_path), gguf_file="model.gguf"), "models[0].gguf_file")


def test_brought_model_package_not_installed_and_malformed_hub_id():
    _refused(_pretrained("package:no_such_package_here"), "models[0].name_or_path")
    _refused(_pretrained("not a hub id!"), "models[0].name_or_path")


def test_hub_id_is_left_to_the_import_job_which_fails_in_one_sentence(monkeypatch, tmp_path):
    """A well-formed hub id passes the pre-run check (the login node may be offline while the import job is not);
    without network the import job ends with one sentence naming the key, not a traceback."""
    raw = _pretrained("selfheal-test/no-such-model")
    model = experiments_config.resolve_whole(raw)["models"][0]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SystemExit) as exit_:
        imported.import_model(model, str(tmp_path / "trained"), str(tmp_path / "pretrain.json"))
    message = str(exit_.value)
    assert "config key 'name_or_path' of model 'mine'" in message and "selfheal-test/no-such-model" in message
    assert "\n" not in message and not (tmp_path / "pretrain.json").exists()


def test_an_unreachable_hub_corpus_fails_in_one_sentence(monkeypatch, tmp_path):
    """A hub corpus is downloaded by the corpus job; offline it ends with one sentence naming the key (it ended in a
    full ConnectionError traceback after 25 s)."""
    from selfheal.data import corpus

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    with pytest.raises(SystemExit) as exit_:
        corpus.write({"source": "hf", "hf": {"name": "selfheal-test/no-such-corpus"}}, tmp_path / "works.parquet")
    message = str(exit_.value)
    assert message.startswith("config key 'corpus.hf.name': 'selfheal-test/no-such-corpus'"), message
    assert "\n" not in message and not (tmp_path / "works.parquet").exists()


def test_the_config_checker_names_the_file_and_line(tmp_path):
    """``python -m selfheal.config``: a broken YAML file with its line and column, a bad key with the file that sets
    it, one line each, no traceback; a good config with its models and cells."""
    import subprocess
    import sys

    default = str(Path(__file__).resolve().parents[1] / "config" / "config.yaml")
    (tmp_path / "broken.yaml").write_text("models:\n  - {name: a, arch: gpt2\npretrain: [\n")
    (tmp_path / "layers.yaml").write_text("grid:\n  layers: [9]\n")

    def check(*files):
        cmd = [sys.executable, "-m", "selfheal.config", default, *map(str, files)]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120)

    broken = check(tmp_path / "broken.yaml")
    assert broken.returncode == 1 and broken.stderr.startswith(f"{tmp_path / 'broken.yaml'}, line 3, column 9:")
    assert "Traceback" not in broken.stderr and broken.stderr.count("\n") == 1
    layers = check(tmp_path / "layers.yaml")
    assert layers.returncode == 1, layers.stderr
    assert layers.stderr.startswith(f"{tmp_path / 'layers.yaml'}: config key 'grid.layers[0]'"), layers.stderr
    good = check()
    assert good.returncode == 0 and "ok: 2 models (gpt2-n2-d32, gpt2-n3-d32), 42 cells" in good.stdout


# --- grid entries that would make no cell ------------------------------------------------------------------------


def test_cross_attention_policy_on_decoder_only_models():
    err = _refused(_over_default("grid: {policies: [cross_attn]}"), "grid.policies[0]")
    assert "decoder layers of encoder-decoder" in str(err)
    # with an encoder-decoder model in the grid it is accepted
    raw = _over_default("grid: {policies: [cross_attn], layers: all}")
    raw["models"].append({"name": "bart", "arch": "bart", "n_layer": 1, "d_model": 16, "n_head": 2})
    cells = grid.cells(experiments_config.resolve_whole(raw))
    assert {c.target for c in cells if c.policy == "cross_attn"} == {"dec.0"}


def test_stack_target_or_encoder_swap_without_an_encoder_decoder():
    _refused(_over_default("grid: {targets: [all, enc]}"), "grid.targets[1]")
    _refused(_over_default("grid: {encoder_swap: [32]}"), "grid.encoder_swap")


def _with_barts(snippet: str, *barts: dict) -> dict:
    raw = _over_default(snippet)
    raw["models"] += [{"arch": "bart", "n_layer": 1, "n_head": 2, **b} for b in barts]
    return raw


def test_an_encoder_swap_donor_that_cannot_give_its_encoder():
    """A donor named in grid.encoder_swap must be another encoder-decoder of `models`, built here, with the
    receivers' family and context; each refusal names the entry."""
    bart = {"name": "bart", "d_model": 16}
    _refused(_with_barts("grid: {encoder_swap: [32, nope]}", bart), "grid.encoder_swap[1]")
    _refused(_with_barts("grid: {encoder_swap: [gpt2-n2-d64]}", bart), "grid.encoder_swap[0]")  # no encoder
    _refused(_with_barts("grid: {encoder_swap: [bart]}", bart), "grid.encoder_swap[0]")  # no one receives it
    donor = {"name": "wide", "d_model": 32, "context": 32}
    err = _refused(_with_barts("grid: {encoder_swap: [wide]}", bart, donor), "grid.encoder_swap[0]")
    assert "context 32" in str(err) and "'bart'" in str(err)
    ok = grid.cells(
        experiments_config.resolve_whole(_with_barts("grid: {encoder_swap: [wide]}", bart, {**donor, "context": 64}))
    )
    assert {c.target for c in ok if c.model == "bart" and c.target.startswith("swap")} == {"swap-wide"}
    # the other side of each conflict is named too: the user may have renamed the donor or changed its context
    last = len(_over_default("{}")["models"]) + 1
    misspelt = _refused(_with_barts("grid: {encoder_swap: [wyde]}", bart, donor), "grid.encoder_swap[0]")
    assert misspelt.keys == ("grid.encoder_swap[0]", "models")
    assert {f"models[{last}].context", f"models[{last - 1}].context"} <= set(err.keys)


def test_a_grid_that_makes_no_cell():
    _refused(_over_default("grid: {layers: [], controls: false, matched_controls: none}"), "grid.layers")


# --- hardware.device: cuda without a GPU -------------------------------------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible here")
def test_cuda_without_a_gpu_fails_in_the_job_not_at_config_time():
    """Planning on a login node without a GPU is fine; the first job that needs the device fails naming the key."""
    resolved = experiments_config.resolve_whole(_over_default("hardware: {device: cuda}"))
    assert resolved["hardware"]["device"] == "cuda"
    with pytest.raises(DeviceUnavailable, match="config key 'hardware.device'"):
        Hardware.from_config(resolved["hardware"]).torch_device()


# --- the real Snakemake: refused before any job, no results folder ----------------------------------------------


@pytest.mark.e2e
def test_snakemake_refuses_bad_input_before_any_job(tmp_path):
    """One case per class that used to pass the pre-run check: each run exits non-zero naming the key, and the
    results folder is never created (no job ran)."""
    pickled = tmp_path / "pickled-model"
    pickled.mkdir()
    (pickled / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
    (pickled / "pytorch_model.bin").write_bytes(b"\x80\x04")
    cases = {
        "pretrain.patience": {"pretrain": {"patience": math.nan}},
        "pretrain.train_sequences": {"pretrain": {"train_sequences": 10_000_000}},
        "models[0].name_or_path": yaml.safe_load(yaml.safe_dump(_pretrained(str(pickled)))),
        "grid.policies[0]": {"grid": {"policies": ["cross_attn"]}},
    }
    runs = {}
    for i, (key, raw) in enumerate(cases.items()):
        workdir = tmp_path / f"run{i}"
        workdir.mkdir()
        (workdir / "bad.yaml").write_text(yaml.safe_dump(raw))
        runs[key] = (str(workdir / "bad.yaml"), str(workdir))
    report = run_many(runs, executor="local")  # real runs, not dry runs
    for key, (_, workdir) in runs.items():
        assert "error" in report[key], (key, report[key])
        assert f"config key '{key}'" in report[key]["error"], (key, report[key]["error"][-2000:])
        assert not (Path(workdir) / "results").exists(), key


# --- property test: mutations of valid configs -------------------------------------------------------------------

SHIPPED = {p.name: yaml.safe_load(p.read_text()) for p in sorted((ROOT / "config").glob("*.yaml"))}
SHIPPED["tiny.yaml"] = yaml.safe_load((ROOT / "tests" / "tiny.yaml").read_text())


# Each shipped config as Snakemake sees it (merged over the default), without the hub-only ones (they resolve
# without a network, but hf tasks need none of the mutations to differ from tamkin_cpu).
def _resolves_here(raw: dict) -> bool:
    """Whether a shipped config resolves on this machine unmutated: one whose data or weights package is not
    installed (setup.sh installs them) is refused for that, whatever a mutation changes, so it is not mutated."""
    try:
        experiments_config.resolve_whole(copy.deepcopy(raw))
    except config.ConfigError:
        return False
    return True


VALID = {
    name: merged
    for name, raw in SHIPPED.items()
    if name != "tamkin.yaml"
    for merged in [raw if name == "config.yaml" else merge(SHIPPED["config.yaml"], raw)]
    if _resolves_here(merged)
}


def _paths(node, path=()):
    """Every (path, value) in a config tree, the root excluded: walked generically, so new keys are covered."""
    if path:
        yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*path, k))
    elif isinstance(node, list):
        for j, v in enumerate(node):
            yield from _paths(v, (*path, j))


def _replacement(value, choice: int, number: float):
    """One mutation of a value: a wrong type, a flipped sign, a non-finite number, an empty list, None."""
    options = ["text", None, True, [], {}, math.nan, math.inf, -math.inf, number, int(number)]
    if isinstance(value, bool):
        options += [not value]
    elif isinstance(value, (int, float)):
        options += [-value, 0, float(value), value * 1000]
    elif isinstance(value, list):
        options += [value[:1], value * 2] if value else []
    return options[choice % len(options)]


@st.composite
def mutated_configs(draw):
    name = draw(st.sampled_from(sorted(VALID)))
    raw = copy.deepcopy(VALID[name])
    changed = []
    for _ in range(draw(st.integers(1, 2))):
        paths = list(_paths(raw))
        path, value = paths[draw(st.integers(0, len(paths) - 1))]
        changed.append(path)
        parent = raw
        for part in path[:-1]:
            parent = parent[part]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]  # a missing key
        else:
            parent[path[-1]] = _replacement(
                value, draw(st.integers(0, 20)), draw(st.floats(-1e3, 1e3, allow_nan=False))
            )
    return name, raw, changed


def _dotted(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(path))


def _names_a_changed_key(key: str, changed: list[tuple]) -> bool:
    """Whether the error's key is one of the mutated keys, a key inside or above one (a section the mutation made
    wrong, a missing key's section), or a sibling (a rule between two keys of one section, e.g. d_model and n_head).
    Keys compare without list positions and without the models[] prefix (a top-level section is merged into each
    model's settings)."""

    def forms(k):
        parts = [p.lstrip(".") for p in _split(k) if not p.startswith("[")]
        return [parts, parts[1:]] if parts[0] == "models" and len(parts) > 1 else [parts]

    for path in changed:
        for error in forms(key):
            for mutated in forms(_dotted(path)):
                n = min(len(error), len(mutated))
                if error[:n] == mutated[:n] or (len(error) == len(mutated) and error[:-1] == mutated[:-1]):
                    return True
    return False


def _schema_keys(schema: dict, root: dict) -> set[str]:
    """Every key the schema knows, as dotted paths with list items as [] (e.g. models[].pretrain.lr)."""
    out = set()

    def walk(node, prefix):
        if "$ref" in node:
            node = root["$defs"][node["$ref"].rsplit("/", 1)[1]]
        for branch in node.get("oneOf", []) + node.get("anyOf", []) + [node[k] for k in ("then", "else") if k in node]:
            walk(branch, prefix)
        if "items" in node and isinstance(node["items"], dict):
            out.add(prefix + "[]")
            walk(node["items"], prefix + "[]")
        for k, sub in node.get("properties", {}).items():
            key = f"{prefix}.{k}" if prefix else k
            out.add(key)
            walk(sub, key)

    walk(schema, "")
    return out


SCHEMA_KEYS = _schema_keys(load_schema(), load_schema()) | _schema_keys(  # the core's keys and the experiments'
    experiments_config.load_schema(), experiments_config.load_schema()
)


def _real_key(key: str, raw) -> bool:
    """A key the schema defines, or one present in the (mutated) config (an unknown key the user wrote)."""
    generic = "".join("[]" if part.startswith("[") else part for part in _split(key))
    if generic in SCHEMA_KEYS:
        return True
    node = raw
    for part in _split(key):
        if part.startswith("["):
            index = int(part[1:-1])
            if not isinstance(node, list) or index >= len(node):
                return False
            node = node[index]
        else:
            name = part.lstrip(".")
            if not isinstance(node, dict) or name not in node:
                return False
            node = node[name]
    return True


def _split(key: str) -> list[str]:
    parts, current = [], ""
    for ch in key:
        if ch in ".[" and current:
            parts.append(current)
            current = ""
        current += ch
    parts.append(current)
    return parts


def check_mutation(name: str, raw: dict, changed: list[tuple]) -> None:
    """A mutated config is accepted and makes something to run, or refused with a ConfigError naming real keys,
    one of them a changed key (or a key inside, above or beside one); any other exception fails."""
    try:
        resolved = experiments_config.resolve_whole(raw)
    except config.ConfigError as err:
        assert err.key and all(_real_key(k, raw) for k in err.keys), f"{name}: {err} names a key that is not real"
        # a conflict between keys names each of them (ConfigError.related): the mutation changed one
        assert any(_names_a_changed_key(k, changed) for k in err.keys), f"{name}: {err} names none of {changed}"
        return
    # something to run: cells, or frozen-random pretraining (config/bogoychev.yaml), or the transfer experiments
    assert grid.cells(resolved) or resolved["frozen_random"] or resolved["transfer"], f"{name}: nothing to run"
    if resolved["models"] and not resolved["frozen_random"]:
        assert len(grid.cells(resolved)) > 0, f"{name}: accepted but makes no cell"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_configs())
def test_every_mutation_is_accepted_with_cells_or_refused_naming_the_changed_key(case):
    check_mutation(*case)


def single_mutations(name: str):
    """Every single-key mutation of one shipped config: each key deleted (where its parent is a mapping) and
    replaced by each distinct value ``_replacement`` makes of it."""
    base = VALID[name]
    for path, value in list(_paths(base)):
        seen = set()
        for choice in ["delete", *range(20)]:
            raw = copy.deepcopy(base)
            parent = raw
            for part in path[:-1]:
                parent = parent[part]
            if choice == "delete":
                if not isinstance(parent, dict):
                    continue
                del parent[path[-1]]
            else:
                replacement = _replacement(value, choice, 7.5)
                if repr(replacement) in seen:
                    continue
                seen.add(repr(replacement))
                parent[path[-1]] = replacement
            yield raw, [path]


SWEEP = "SELFHEAL_MUTATION_SWEEP"


@pytest.mark.skipif(not os.environ.get(SWEEP), reason=f"the exhaustive sweep (minutes) runs with {SWEEP}=1")
def test_every_single_mutation_of_every_shipped_config():
    """The property test draws a hundred mutations a run; this walks every single-key mutation of every shipped
    config (about 13,500), for a change to selfheal.config.check (CONTRIBUTING.md). Every failure is listed."""
    failures = []
    for name in sorted(VALID):
        for raw, changed in single_mutations(name):
            try:
                check_mutation(name, raw, changed)
            except Exception as err:  # an assertion, or any other exception the check let through
                first = (str(err).splitlines() or [""])[0][:300]
                failures.append(f"{name} {_dotted(changed[0])}: {type(err).__name__}: {first}")
    assert not failures, f"{len(failures)} mutations fail:\n" + "\n".join(failures)


def test_the_key_check_of_the_property_test_can_fail():
    assert _real_key("models[0].pretrain.train_sequences", {}) and _real_key("grid.layers[1]", {})
    assert not _real_key("<top level>", {}) and not _real_key("models[0].no_such", {"models": [{}]})
    changed = [("models", 0, "pretrain", "patience")]
    assert _names_a_changed_key("models[0].pretrain.patience", changed)
    assert _names_a_changed_key("pretrain.patience", changed)
    assert _names_a_changed_key("models[0].pretrain", changed)  # the section above it
    assert _names_a_changed_key("models[0].pretrain.max_epochs", changed)  # a rule between two keys of the section
    assert not _names_a_changed_key("grid.layers", changed) and not _names_a_changed_key("retrain.patience", changed)
    assert not _names_a_changed_key("models[1].n_head", changed)


def test_transfer_model_folder_without_safetensors(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "num_hidden_layers": 2}))
    err = _refused(_over_default(f"models: []\ntransfer: {{model: {tmp_path}}}"), "transfer.model")
    assert "has no weights" in str(err)
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04")
    err = _refused(_over_default(f"models: []\ntransfer: {{model: {tmp_path}}}"), "transfer.model")
    assert "pickled weights only (pytorch_model.bin)" in str(err)


def test_a_config_error_crosses_a_process_boundary():
    """A worker's ConfigError (e.g. in a process pool) reaches the parent with its key and words."""
    import pickle

    from selfheal.config.errors import ConfigError

    error = pickle.loads(pickle.dumps(ConfigError("grid.layers[2]", "out of range")))
    assert isinstance(error, ConfigError) and error.key == "grid.layers[2]"
    assert str(error) == "config key 'grid.layers[2]': out of range"


# --- where results go ----------------------------------------------------------------------------------------------


def test_results_on_another_filesystem_are_accepted(tmp_path, monkeypatch):
    """An absolute results_dir (a cluster's scratch) and one under ~ are taken as given, nothing made before a job."""
    scratch = tmp_path / "scratch" / "me" / "run1"
    resolved = config.resolve(_over_default(f"results_dir: {scratch}"))
    assert resolved["results_dir"] == str(scratch) and not (tmp_path / "scratch").exists()
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config.resolve(_over_default("results_dir: ~/runs/first"))["results_dir"] == str(tmp_path / "runs" / "first")


def test_results_where_nothing_can_be_written_are_refused(tmp_path):
    (tmp_path / "a-file").write_text("")
    err = _refused(_over_default(f"results_dir: {tmp_path / 'a-file' / 'run'}"), "results_dir")
    assert f"{tmp_path / 'a-file'} is a file, not a folder" in str(err)
    err = _refused(_over_default("results_dir: /proc/selfheal-run"), "results_dir")  # a read-only filesystem
    assert "/proc/selfheal-run cannot be written: /proc" in str(err)
    _refused(_over_default("results_dir: 'results/{model}'"), "results_dir")  # a Snakemake wildcard


def test_an_integer_layer_of_an_encoder_decoder_suggests_its_stacks():
    bart = {"name": "b", "arch": "bart", "n_layer": 2, "n_dec_layer": 2, "d_model": 32, "n_head": 4, "context": 64}
    err = _refused(_over_default(yaml.safe_dump({"models": [bart], "grid": {"layers": [0]}})), "grid.layers[0]")
    assert "an encoder-decoder's layers are named by stack: enc.0 or dec.0" in str(err)
