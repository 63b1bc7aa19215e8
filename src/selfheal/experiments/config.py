"""The published experiments' part of a config (workflow/experiments): the ``transfer:`` section (Tamkin et al.
2020) and each model's ``frozen_random`` sets (Bogoychev 2021). ``take`` removes them from a raw config, so the core
check (``selfheal.config.resolve``) reads only its own keys; ``resolve`` checks them against their own JSON schema
(``schema.yaml`` beside this file) and the core's resolved config, and derives the frozen-random models. Errors
name the key as the config spells it (``transfer.sizes[0]``, ``models[1].frozen_random[0]``). ``load`` reads a
whole config file, both parts."""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import jsonschema
import yaml

from selfheal import grid
from selfheal.config import check as core_check
from selfheal.config import schema as core_schema
from selfheal.config.errors import ConfigError
from selfheal.experiments import frozen_random
from selfheal.experiments.transfer import config as transfer_config

SCHEMA_PATH = Path(__file__).with_name("schema.yaml")
SECTION = "transfer"  # the experiments' own section of the config
MODEL_KEY = "frozen_random"  # and their key in a core models[] entry


def take(config: dict) -> dict:
    """Remove the experiments' keys from a raw ``config`` (in place) and return them: ``transfer`` as it is, and
    ``models`` (where some model has ``frozen_random``), one entry per core model at the same position."""
    own = {}
    if SECTION in config:
        own[SECTION] = config.pop(SECTION)
    models = config.get("models")
    if isinstance(models, list) and any(isinstance(m, dict) and MODEL_KEY in m for m in models):
        own["models"] = [
            {MODEL_KEY: m.pop(MODEL_KEY)} if isinstance(m, dict) and MODEL_KEY in m else {} for m in models
        ]
    return own


def resolve(own: dict, core: dict) -> dict:
    """Check the experiments' keys (``take``) against their schema and ``core`` (the core's resolved config), and
    return ``transfer`` (resolved, or None) and ``frozen_random`` (the derived models); refuse a config that runs
    nothing at all."""
    core_schema.check_finite(own)
    core_schema.check_schema(own, _validator())
    transfer = transfer_config.resolve(own[SECTION]) if SECTION in own else None
    taken = {m["name"] for m in core["models"]}
    variants = []
    for i, entry in enumerate(own.get("models", [])):  # the core's models, at the same positions
        if MODEL_KEY in entry:
            variants += _variants(core["models"][i], entry[MODEL_KEY], f"models[{i}]", taken)
    _check_something_runs(core, transfer, variants)
    return {"transfer": transfer, "frozen_random": variants}


def resolve_whole(raw: dict) -> dict:
    """A whole raw config (core and experiments) resolved: the core's config with ``transfer`` and
    ``frozen_random`` set, as the main Snakefile sees both parts."""
    raw = copy.deepcopy(raw)
    own = take(raw)
    core = core_check.resolve(raw)
    return {**core, **resolve(own, core)}


def load(path: str | Path) -> dict:
    with open(path) as f:
        return resolve_whole(yaml.safe_load(f) or {})


def _check_something_runs(core: dict, transfer: dict | None, variants: list[dict]) -> None:
    if not core["models"] and transfer is None:
        raise ConfigError("models", "is empty and there is no transfer section: nothing to run")
    if core["models"] and not variants and not grid.cells(core):
        raise ConfigError(
            "grid.layers",
            "the grid makes no cell (no layers, no target sets and controls off) and "
            "no model has frozen_random: nothing to run",
            related=(
                "grid.targets",
                "grid.controls",
                *(f"models[{i}].frozen_random" for i in range(len(core["models"]))),
            ),
        )


def _variants(model: dict, sets: list, key: str, taken: set[str]) -> list[dict]:
    """A model's ``frozen_random`` sets as derived models: per set, a copy of the model (same size, data, seed and
    schedule) named '<name>.frozen-<components>' with ``base_model`` and ``frozen_components`` (in canonical
    order). The experiment pretrains them and their base model's all-trainable reference; they make no cells."""
    if model["source"] != "scratch":
        raise ConfigError(
            f"{key}.{MODEL_KEY}",
            "frozen-random pretraining needs a model built here from its "
            "step-0 weights, not a downloaded one (source: pretrained)",
        )
    variants, seen = [], []
    for j, components in enumerate(sets):
        # the schema already refuses empty, 3-component and repeated entries; a reordered repeat is caught here
        components = frozen_random.canonical(components)
        if components in seen:
            raise ConfigError(f"{key}.{MODEL_KEY}[{j}]", f"repeats {key}.{MODEL_KEY}[{seen.index(components)}]")
        seen.append(components)
        name = frozen_random.variant_name(model["name"], components)
        if name in taken:
            raise ConfigError(f"{key}.{MODEL_KEY}[{j}]", f"its derived model name {name!r} is already a model name")
        variants.append(
            {**copy.deepcopy(model), "name": name, "base_model": model["name"], "frozen_components": components}
        )
    return variants


def load_schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


@functools.lru_cache(maxsize=1)
def _validator() -> jsonschema.Validator:
    """The schema parsed once per process (integers as in the core schema)."""
    return core_schema.Validator(load_schema())
