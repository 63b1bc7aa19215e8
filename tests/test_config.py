"""Config validation: the defaults pass, and every kind of bad input is refused naming its key."""

import copy
import sys
from pathlib import Path

import pytest
import yaml

from selfheal import config, grid
from selfheal.config import check
from selfheal.experiments import config as experiments_config  # a whole config: the core's keys and the experiments'
from selfheal.experiments import frozen_random

ROOT = Path(__file__).resolve().parents[1]


def _default():
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


@pytest.mark.parametrize("name", ["config.yaml", "full.yaml"])
def test_shipped_configs_are_valid(name):
    """Each resolves, and its grid is the one it writes: every (layer, policy, init, regime, retrain seed) of every
    network, and a no-reset control per network, regime and seed where it asks for controls."""
    resolved = experiments_config.load(ROOT / "config" / name)
    spec = resolved["grid"]
    cells = set(grid.cells(resolved))
    assert spec["layers"] == "all"  # both shipped grids reset every layer
    for model in resolved["models"]:
        for ps in model["pretrain"]["seeds"]:
            for layer in grid.layer_ids(model):
                for policy in spec["policies"]:
                    for init in spec["inits"]:
                        for regime in spec["regimes"]:
                            for seed in spec["seeds"]:
                                cell = grid.Cell(model["name"], layer, policy, init, regime, seed, pretrain_seed=ps)
                                assert cell in cells, cell
            if spec["controls"]:
                for regime in spec["regimes"]:
                    for seed in spec["seeds"]:
                        assert grid.Cell(model["name"], "none", "none", "none", regime, seed, pretrain_seed=ps) in cells
    assert {c.model for c in cells} == {m["name"] for m in resolved["models"]}


def test_default_grid_has_every_layer_two_networks_and_controls():
    resolved = config.resolve(_default())
    cells = grid.cells(resolved)
    n_layers = {m["name"]: m["n_layer"] for m in resolved["models"]}
    assert len(n_layers) >= 2 and len({(m["n_layer"], m["d_model"]) for m in resolved["models"]}) >= 2
    for model in resolved["models"]:
        assert len(model["pretrain"]["seeds"]) >= 2  # intervals resample pretrained networks
        n = model["n_layer"]
        for seed in resolved["grid"]["seeds"]:
            targets = {c.target for c in cells if c.model == model["name"] and c.seed == seed}
            assert targets == {f"L{i}" for i in range(n)} | {"none", "all"}


def test_encoder_swaps_make_a_fresh_and_a_gated_cell_and_donors_give_without_receiving():
    """grid.encoder_swap [16, a donor]: each receiving BART gets swap16 (policy full) and swap-<donor> with the
    encoder trained (full) and frozen (cross_attn), each with the cross-attention fresh and gated (zero_out), and
    the donor's encoder stitched in (stitch, its linear map fresh); the donor receives no donor's encoder; ``heal: false`` makes a model's networks but no cells; a receiving network
    takes the donor's network of its own pretraining seed, or the donor's first."""
    raw = _default()
    bart = {"arch": "bart", "n_layer": 1, "n_head": 2}
    raw["models"] = [
        {"name": "b16", "d_model": 16, **bart, "pretrain": {"seeds": [0, 1]}},
        {"name": "b32", "d_model": 32, **bart, "pretrain": {"seeds": [0, 1]}},
        {"name": "b8", "d_model": 8, **bart, "heal": False, "pretrain": {"seeds": [1]}},
    ]
    raw["grid"].update(encoder_swap=[16, "b32", "b8"], inits=["fresh"], seeds=[0])
    resolved = config.resolve(raw)
    cells = grid.cells(resolved)
    swaps = {(c.model, c.pretrain_seed, c.target, c.policy, c.init) for c in cells if c.target.startswith("swap")}
    receiving = {
        (t, p, i)
        for t, ps in (("swap16", ("full",)), ("swap-b32", ("full", "cross_attn")), ("swap-b8", ("full", "cross_attn")))
        for p in ps
        for i in ("fresh", "zero_out")
    } | {("swap-b32", "stitch", "fresh"), ("swap-b8", "stitch", "fresh")}
    assert swaps == {("b16", s, *x) for s in (0, 1) for x in receiving} | {
        ("b32", s, "swap16", "full", i) for s in (0, 1) for i in ("fresh", "zero_out")
    }
    assert not [c for c in cells if c.model == "b8"]
    assert {n.model for n in grid.networks(resolved)} == {"b16", "b32", "b8"}
    assert grid.donor_network(resolved, "b32", 1) == grid.Network("b32", 1)
    assert grid.donor_network(resolved, "b8", 0) == grid.Network("b8", 1)
    assert grid.donors(cells) == ["b32", "b8"]
    assert "heal" not in grid.network_config(grid.model_by_name(resolved, "b8"), 1)


def test_default_sizes_share_data_and_schedule():
    """Vary one thing at a time: every size of the default trains on the same S, E, context and schedule, so no
    size axis is confounded with training length (docs/method.md, "Choosing the default")."""
    resolved = config.resolve(_default())
    keys = ("max_epochs", "patience", "train_sequences")
    schedules = {tuple(m["pretrain"][k] for k in keys) + (m["context"], repr(m["recipe"])) for m in resolved["models"]}
    assert len(schedules) == 1, schedules
    sizes = sorted({(m["n_layer"], m["d_model"]) for m in resolved["models"]})
    # at least two sizes, and every other size differs from the first in N only or in D only
    assert len(sizes) >= 2 and all((n == sizes[0][0]) != (d == sizes[0][1]) for n, d in sizes[1:]), sizes


def _mutate(path, value):
    raw = _default()
    node = raw
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]  # a section the config leaves out
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return raw


_DELETE = object()

BAD = [
    (("results_dir",), f"{__file__}/run", "results_dir"),  # under a file
    (("results_dir",), "/proc/selfheal-run", "results_dir"),  # on a filesystem that takes no file
    (("pretrain", "epochs_typo"), 3, "pretrain.epochs_typo"),
    (("grid", "layers"), [0, 7], "grid.layers[1]"),
    (("grid", "policies"), ["full", "everything"], "grid.policies[1]"),
    (("grid", "regimes"), ["thawed"], "grid.regimes[0]"),
    (("grid", "inits"), ["zeros"], "grid.inits[0]"),
    (("models", 0, "d_model"), 0, "models[0].d_model"),
    (("models", 0, "n_layer"), -2, "models[0].n_layer"),
    (("models", 0, "n_head"), 5, "models[0].n_head"),
    (("pretrain", "max_epochs"), "three", "pretrain.max_epochs"),
    (("pretrain", "patience"), 0, "pretrain.patience"),
    (("recipe", "lrs"), [1e-3, 3e-3, 1e-2, 0], "recipe.lrs[3]"),
    (("recipe", "warmup_steps"), -1, "recipe.warmup_steps"),
    (("recipe", "max_lr_extensions"), 0.5, "recipe.max_lr_extensions"),
    (("models", 0, "recipe"), {"batch_size": 0}, "models[0].recipe.batch_size"),
    (("retrain", "budget_fraction"), -0.5, "retrain.budget_fraction"),
    (("retrain", "budget_scratch"), 0, "retrain.budget_scratch"),
    (("retrain", "budget_scratch"), "1.25x", "retrain.budget_scratch"),
    (("models", 0, "retrain"), {"budget_scratch": -1.0}, "models[0].retrain.budget_scratch"),
    (("grid",), {"policies": ["ln"], "inits": ["fresh", "zero_out"]}, "grid.inits"),  # zero_out: nothing to zero
    (("retrain", "thresholds"), [0.01, 1.5], "retrain.thresholds[1]"),
    (("retrain", "lr_sensitivity"), [3.0], "retrain.lr_sensitivity"),  # retired: every cell races recipe.lrs
    (("recipe", "lrs"), [1e-3, 3e-3, 1e-2], "recipe.lrs"),  # at least 4
    (("recipe", "lrs"), [1e-3, 3e-3, 3e-2, 1e-1], "recipe.lrs[2]"),  # x 10: not about x 3 apart
    (("recipe", "lrs"), [3e-2, 1e-2, 3e-3, 1e-3], "recipe.lrs[1]"),  # descending
    (("models", 0, "recipe"), {"lrs": [1e-3, 2e-3, 6e-3, 1.8e-2]}, "models[0].recipe.lrs[1]"),
    (("recipe", "max_lr_extensions"), -1, "recipe.max_lr_extensions"),
    (("models", 0, "retrain"), {"lr_sensitivity_targets": ["L0"]}, "models[0].retrain.lr_sensitivity_targets"),
    (("grid", "seeds"), [], "grid.seeds"),
    (("corpus", "source"), "files", "corpus.files"),
    (("models",), [], "models"),
    (("models",), _DELETE, "models"),
    (("models", 0, "n_head"), _DELETE, "models[0].n_head"),
    (("models", 0, "arch"), "gpt5", "models[0].arch"),
    (("models", 0, "name"), "bad name!", "models[0].name"),
    (("models", 0, "context"), 1, "models[0].context"),
    (("models", 0, "dropout"), 1.0, "models[0].dropout"),
    (("models", 0, "mask_probability"), 0.4, "models[0].mask_probability"),  # a causal LM masks nothing
    (("models", 0, "n_dec_layer"), 2, "models[0].n_dec_layer"),  # a decoder-only model has no decoder stack
    (("grid", "controls"), "yes", "grid.controls"),
    (("grid", "policies"), [], "grid.policies"),
    (("grid", "layers"), ["enc.0"], "grid.layers[0]"),
    (("grid", "layers"), "every", "grid.layers"),
    (("grid", "encoder_swap"), [0], "grid.encoder_swap[0]"),
    (("tokenizer", "vocab_size"), 100, "tokenizer.vocab_size"),
    (("eval", "val_sequences"), 0, "eval.val_sequences"),
    (("corpus", "val_fraction"), 1.5, "corpus.val_fraction"),
    (("retrain", "thresholds"), [], "retrain.thresholds"),
    (("retrain", "eval_every_examples"), 8, "retrain.eval_every_examples"),
    (("retrain", "checkpoint_every_steps"), -1, "retrain.checkpoint_every_steps"),
    (("pretrain", "warmup_fraction"), 1.0, "pretrain.warmup_fraction"),  # removed: recipe.warmup_steps
    (("pretrain", "lr"), 0, "pretrain.lr"),  # removed: recipe.lrs
    (("hardware",), {"device": "tpu"}, "hardware.device"),
    (("hardware",), {"precision": "fp16"}, "hardware.precision"),
    (("hardware",), {"tf32": False}, "hardware.tf32"),  # no longer a key: TF32 is always on (training.hardware)
    (("retrain", "resolution"), 0.0, "retrain.resolution"),  # no longer a key: heal.retrain.RESOLUTION
    (("threads",), 0, "threads"),
    (("partial",), "models", "partial"),  # true, false or networks
    (("unknown_section",), {}, "unknown_section"),
    (("models", 0, "frozen_random"), [["ffn", "attention", "embeddings"]], "models[0].frozen_random[0]"),
    (("models", 1, "frozen_random"), [["ffn"], ["heads"]], "models[1].frozen_random[1][0]"),
]


@pytest.mark.parametrize("path,value,key", BAD, ids=[b[2] for b in BAD])
def test_bad_config_names_the_key(path, value, key):
    with pytest.raises(config.ConfigError) as err:
        experiments_config.resolve_whole(_mutate(path, value))
    assert err.value.key == key
    assert f"'{key}'" in str(err.value)


def _rules(local: str) -> list[tuple[dict, str]]:
    """Configs that break the rules config/check.py adds to the schema, each with the key it must name. ``local``: a
    model folder (a downloaded model's rules)."""
    default = _default()
    gpt2 = default["models"][0]
    mine = {"name": "mine", "source": "pretrained", "name_or_path": local, "arch": "llama", "n_layer": 2}
    bart = {"name": "b", "arch": "bart", "n_layer": 1, "d_model": 16, "n_head": 2}
    variant = frozen_random.variant_name(gpt2["name"], frozen_random.canonical(["ffn"]))

    def over(**sections):
        return {**copy.deepcopy(default), **sections}

    return [
        (over(corpus={"source": "hf"}), "corpus.hf"),
        (over(models=[{**gpt2, "name": "bpe"}]), "models[0].name"),
        (over(models=[gpt2, dict(gpt2)]), "models[1].name"),
        (over(models=[{**gpt2, "adapt": True}]), "models[0].adapt"),
        (over(models=[{**gpt2, "pretraining_tokens": 10**9}]), "models[0].pretraining_tokens"),
        (over(models=[{**mine, "pretraining_tokens": 0}]), "models[0].pretraining_tokens"),
        (over(models=[{**mine, "pretraining_tokens": 2.0e12}]), "models[0].pretraining_tokens"),  # a count
        (over(models=[mine], grid={**default["grid"], "inits": ["fresh", "original"]}), "grid.inits"),
        (over(models=[{**mine, "pretrain": {"seeds": [0, 1]}, "adapt": False}]), "models[0].adapt"),
        (over(models=[{**mine, "frozen_random": [["ffn"]]}]), "models[0].frozen_random"),
        (
            over(models=[{**gpt2, "frozen_random": [["ffn", "attention"], ["attention", "ffn"]]}]),
            "models[0].frozen_random[1]",
        ),
        (over(models=[{**gpt2, "frozen_random": [["ffn"]]}, {**gpt2, "name": variant}]), "models[0].frozen_random[0]"),
        (
            over(models=[{**gpt2, "retrain": {"eval_every_examples": 8}, "recipe": {"batch_size": 16}}]),
            "models[0].retrain.eval_every_examples",
        ),
        (over(recipe={"lrs": [1e-3, 3e-3, float("nan"), 3e-2]}), "recipe.lrs[2]"),
        (over(recipe={"lrs": [1e-3, 1e-2, 3e-3, 3e-2]}), "recipe.lrs[1]"),
        (over(grid={**default["grid"], "policies": ["cross_attn"]}), "grid.policies[0]"),
        (over(grid={**default["grid"], "targets": ["enc"]}), "grid.targets[0]"),
        (over(grid={**default["grid"], "encoder_swap": [16]}), "grid.encoder_swap"),
        (over(models=[bart], grid={**default["grid"], "encoder_swap": ["nope"]}), "grid.encoder_swap[0]"),
        (over(models=[bart, gpt2], grid={**default["grid"], "encoder_swap": [gpt2["name"]]}), "grid.encoder_swap[0]"),
        (over(models=[bart], grid={**default["grid"], "encoder_swap": ["b"]}), "grid.encoder_swap[0]"),
        (
            over(models=[bart, {**bart, "name": "c", "context": 32}], grid={**default["grid"], "encoder_swap": ["c"]}),
            "grid.encoder_swap[0]",
        ),
        (
            over(
                models=[bart, {**mine, "name": "pb", "arch": "bart", "name_or_path": "facebook/bart-base"}],
                grid={**default["grid"], "encoder_swap": ["pb"]},
            ),
            "grid.encoder_swap[0]",
        ),
        (over(grid={**default["grid"], "layers": [], "targets": [], "controls": False}), "grid.layers"),
        # what check.py's own test of a frozen-random entry guards against; the schema refuses it first
        (over(models=[{**gpt2, "frozen_random": [["ffn", "ffn"]]}]), "models[0].frozen_random[0]"),
        (over(models=[{**gpt2, "frozen_random": [[]]}]), "models[0].frozen_random[0]"),
    ]


# Rules of config/check.py that the schema makes unreachable (it refuses those inputs first, see the cases above)
SCHEMA_FIRST = ["each entry is one or two distinct components"]


@pytest.fixture(scope="module")
def local_model(tmp_path_factory):
    from test_pretrained import save_local_model

    folder = tmp_path_factory.mktemp("local") / "mine"
    save_local_model(folder)
    return str(folder)


def _statement(source: list[str], i: int) -> str:
    """The text of the statement that starts on line ``i`` (0-based) of ``source``: up to where its brackets
    close, so a rule is known by its message also when the formatter wraps it."""
    text, depth = "", 0
    for line in source[i:]:
        text += line + "\n"
        depth += line.count("(") - line.count(")")
        if depth <= 0:
            return text
    return text


def test_every_rule_of_the_config_check_is_refused_naming_its_key(local_model):
    """Every `raise ConfigError` of config/check.py is reached by a case here or in BAD above (traced line by line),
    and each case's error names its key: a rule added without a case fails this test."""
    source = Path(check.__file__).read_text().splitlines()
    raise_lines = {
        i + 1
        for i, line in enumerate(source)
        if "raise ConfigError(" in line and not any(s in _statement(source, i) for s in SCHEMA_FIRST)
    }
    hit: set[int] = set()

    def trace(frame, event, arg):
        if frame.f_code.co_filename != check.__file__:
            return None
        if event == "line":
            hit.add(frame.f_lineno)
        return trace

    cases = [(_mutate(path, value), key) for path, value, key in BAD] + _rules(local_model)
    wrong = []
    for raw, key in cases:
        sys.settrace(trace)
        try:
            experiments_config.resolve_whole(raw)
            wrong.append((key, "accepted"))
        except config.ConfigError as err:
            if err.key != key:
                wrong.append((key, str(err)))
        finally:
            sys.settrace(None)
    assert not wrong, wrong
    assert raise_lines <= hit, f"rules of config/check.py no case reaches (lines): {sorted(raise_lines - hit)}"


def test_duplicate_model_names():
    raw = _default()
    raw["models"][1]["name"] = raw["models"][0]["name"]
    with pytest.raises(config.ConfigError, match="models\\[1\\].name"):
        config.resolve(raw)


def test_missing_corpus_files(tmp_path):
    raw = _default()
    raw["corpus"] = {"source": "files", "files": str(tmp_path / "nothing" / "*.txt")}
    with pytest.raises(config.ConfigError, match="corpus.files"):
        config.resolve(raw)


def test_own_files_corpus_accepted(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.txt").write_text(f"text of {name}\n" * 200)
    raw = _default()
    raw["corpus"] = {"source": "files", "files": str(tmp_path / "*.txt")}
    raw["pretrain"]["train_sequences"], raw["eval"]["val_sequences"] = 8, 4  # what three small files can give
    assert config.resolve(raw)["corpus"]["files"].endswith("*.txt")


def test_per_model_overrides_merge_over_top_level():
    raw = _default()
    raw["models"][1]["retrain"] = {"budget_scratch": 0.5}
    raw["models"][1]["recipe"] = {"lrs": [1e-4, 3e-4, 1e-3, 3e-3]}
    resolved = config.resolve(raw)
    assert resolved["models"][1]["retrain"]["budget_scratch"] == 0.5
    assert resolved["models"][1]["retrain"]["thresholds"] == raw["retrain"]["thresholds"]
    assert resolved["models"][0]["retrain"]["budget_scratch"] == raw["retrain"]["budget_scratch"] == 1.0
    assert resolved["models"][1]["recipe"]["lrs"] == [1e-4, 3e-4, 1e-3, 3e-3]
    assert resolved["models"][1]["recipe"]["batch_size"] == raw["recipe"]["batch_size"]  # the rest: top level
    assert resolved["models"][0]["recipe"]["lrs"] == raw["recipe"]["lrs"]


def test_defaults_come_from_the_schema_and_never_override_a_setting():
    """A key the config leaves out takes the schema's ``default:`` (values written here by hand); a model's own
    ``pretrain``/``retrain`` overrides only what it names, so a top-level setting is not reset to its default
    under it; a section left out is filled whole."""
    raw = {
        "models": [{"name": "m", "n_layer": 1, "d_model": 16, "n_head": 2, "pretrain": {"max_epochs": 5}}],
        "pretrain": {"patience": 3},
        "recipe": {"batch_size": 8},
    }
    resolved = config.resolve(raw)
    (model,) = resolved["models"]
    assert model["pretrain"]["max_epochs"] == 5 and model["pretrain"]["patience"] == 3  # own, then top-level
    assert model["pretrain"]["eval_every_examples"] == 2048 and model["pretrain"]["seeds"] == [0]  # the schema's
    assert model["recipe"] == {
        "lrs": [1e-3, 3e-3, 1e-2, 3e-2],
        "max_lr_extensions": 2,
        "batch_size": 8,
        "warmup_steps": 100,
        "weight_decay": 0.1,
    }
    assert (model["arch"], model["context"], model["dropout"], model["source"]) == ("gpt2", 64, 0.0, "scratch")
    assert "adapt" not in model and "n_dec_layer" not in model  # no default: only where they apply
    assert model["retrain"]["thresholds"] == [0.01, 0.02, 0.05, 0.10] and "lr" not in model["retrain"]
    assert resolved["eval"] == {"val_sequences": 256, "batch_size": 64, "confirm_sequences": None}
    assert resolved["hardware"] == {"device": "auto", "precision": "fp32", "compile": None, "copies_per_pass": "auto"}
    assert resolved["grid"]["seeds"] == [0, 1] and resolved["grid"]["layers"] == "all"
    assert resolved["corpus"]["source"] == "shakespeare" and resolved["tokenizer"]["vocab_size"] == 2048
    assert resolved["results_dir"] == "results" and resolved["threads"] == 1
    assert check.DEFAULTS["recipe"]["batch_size"] == 16  # resolving changed no default


def test_resolve_does_not_mutate_input():
    raw = _default()
    frozen = copy.deepcopy(raw)
    config.resolve(raw)
    assert raw == frozen


def test_a_conflict_between_keys_names_each_of_them():
    """A grid entry no model can take is reported at the grid key and names the models' keys it conflicts with
    (the user may have meant to change either); a lone wrong key names itself alone."""
    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    bogoychev = check.merge(default, yaml.safe_load((ROOT / "config" / "bogoychev.yaml").read_text()))
    for model in bogoychev["models"]:
        model.pop("frozen_random", None)
    with pytest.raises(config.ConfigError) as nothing:
        experiments_config.resolve_whole(bogoychev)
    assert nothing.value.key == "grid.layers"
    assert "models[0].frozen_random" in nothing.value.keys and "grid.controls" in nothing.value.keys
    assert "(with 'grid.targets', 'grid.controls', 'models[0].frozen_random'" in str(nothing.value)

    gpt2_only = copy.deepcopy(default)
    gpt2_only["grid"]["policies"] = ["full", "cross_attn"]
    with pytest.raises(config.ConfigError) as cross:
        config.resolve(gpt2_only)
    assert cross.value.keys == ("grid.policies[1]", "grid.layers", *(f"models[{i}].arch" for i in range(2)))

    with pytest.raises(config.ConfigError) as lone:
        config.resolve(check.merge(default, {"retrain": {"budget_fraction": -1.0}}))
    assert lone.value.keys == ("retrain.budget_fraction",)
