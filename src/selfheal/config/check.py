"""The pre-run check: a raw config in, the resolved config out (defaults filled in, per-model settings merged),
or a ConfigError naming the offending key. No job starts unless a config passes it.
"""

from __future__ import annotations

import os
import tempfile

from pathlib import Path

import yaml

from selfheal import grid
from selfheal.config import inputs
from selfheal.config.defaults import DEFAULTS, MODEL_DEFAULTS
from selfheal.config.errors import ConfigError, for_the_user
from selfheal.config.merge import merge
from selfheal.config.schema import check_finite, check_schema
from selfheal.data import corpus
from selfheal.models.families import FAMILIES


def resolve(raw: dict) -> dict:
    """Validate a raw config and return it with defaults filled in (the schema's, ``schema.defaults``) and
    per-model settings merged.

    Each model gets its effective ``pretrain``, ``retrain`` and ``recipe`` sections (top level overridden by the
    model's own).
    """
    check_finite(raw)
    _check_removed(raw)
    check_schema(raw)
    config = merge(DEFAULTS, raw)
    config["results_dir"] = check_results_dir(config["results_dir"])
    if config["corpus"]["source"] == "hf" and "hf" not in raw.get("corpus", {}):
        raise ConfigError("corpus.hf", "required when corpus.source is 'hf' (at least hf.name)")
    if config["corpus"]["source"] != "hf":
        try:
            corpus.corpus_files(config["corpus"])
        except corpus.CorpusError as err:
            raise ConfigError(err.key, str(err)) from None

    names = [m["name"] for m in config["models"]]
    models = []
    for i, model in enumerate(config["models"]):
        key = f"models[{i}]"
        if model["name"] in names[:i]:
            raise ConfigError(
                f"{key}.name", f"duplicate model name {model['name']!r} (also models[{names.index(model['name'])}])"
            )
        if model["name"] == "bpe":
            raise ConfigError(f"{key}.name", "'bpe' is reserved (it names the token streams of our own tokenizer)")
        model = merge(MODEL_DEFAULTS, model)
        if model["source"] == "scratch" and model["d_model"] % model["n_head"]:
            raise ConfigError(
                f"{key}.n_head", f"d_model={model['d_model']} is not divisible by n_head={model['n_head']}"
            )
        if model["source"] == "pretrained":
            if "original" in config["grid"]["inits"]:
                raise ConfigError(
                    "grid.inits",
                    f"init 'original' needs the step-0 weights, which a downloaded model "
                    f"({model['name']!r}) does not have",
                )
            inputs.check_model_source(model, key)
        if "mask_probability" in model and model["arch"] != "bert":
            raise ConfigError(
                f"{key}.mask_probability",
                f"only a masked LM (arch: bert) masks tokens; {model['name']!r} is {model['arch']}",
            )
        if "n_dec_layer" in model and model["arch"] in FAMILIES and len(FAMILIES[model["arch"]].stacks) < 2:
            raise ConfigError(
                f"{key}.n_dec_layer",
                f"only an encoder-decoder model (arch: bart) has a decoder stack; {model['name']!r} is {model['arch']}",
            )
        model["hardware"] = config["hardware"]
        model["pretrain"] = merge(config["pretrain"], model.get("pretrain", {}))
        if model["source"] == "scratch" and "adapt" in model:
            raise ConfigError(f"{key}.adapt", "only a downloaded model (source: pretrained) is adapted")
        if model["source"] == "scratch" and "pretraining_tokens" in model:
            raise ConfigError(
                f"{key}.pretraining_tokens",
                "only a downloaded model (source: pretrained) was pretrained elsewhere; "
                "a model built here has its own pretraining tokens (networks.parquet's pretrain_tokens)",
            )
        if model["source"] == "pretrained":
            model.setdefault("adapt", True)  # the one conditional default: only a downloaded model is adapted
            if not model["adapt"] and len(model["pretrain"]["seeds"]) > 1:
                raise ConfigError(
                    f"{key}.adapt",
                    "a downloaded model healed without adaptation is one network: "
                    "give it a single pretrain seed (pretrain.seeds)",
                )
        model["retrain"] = merge(config["retrain"], model.get("retrain", {}))
        model["recipe"] = merge(config["recipe"], model.get("recipe", {}))
        own_recipe = "recipe" in raw["models"][i]
        _check_lrs(model["recipe"]["lrs"], own_recipe and "lrs" in raw["models"][i]["recipe"], key)
        layers = config["grid"]["layers"]
        if layers != "all":
            valid = grid.layer_ids(model)
            for j, layer in enumerate(layers):
                if grid.layer_id(layer) not in valid:
                    stacked = "." in valid[-1]
                    hint = (
                        f"; an encoder-decoder's layers are named by stack: enc.{layer} or dec.{layer}"
                        if stacked and isinstance(layer, int)
                        else ""
                    )
                    raise ConfigError(
                        f"grid.layers[{j}]",
                        f"layer {layer!r} is out of range for model {model['name']!r} (its layers: "
                        f"{valid[0]} .. {valid[-1]}{' and enc.*/dec.*' if stacked and len(valid) > 1 else ''}){hint}",
                        related=_keys_making(grid.layer_id(layer), i)[1:],
                    )
        batch = model["recipe"]["batch_size"]
        for section in ("pretrain", "retrain"):
            every = model[section]["eval_every_examples"]
            if every < batch:
                own = "eval_every_examples" in raw["models"][i].get(section, {})
                raise ConfigError(
                    f"{key}.{section}.eval_every_examples" if own else f"{section}.eval_every_examples",
                    f"{every} is smaller than recipe.batch_size={batch}",
                    related=(f"{key}.recipe.batch_size" if own_recipe else "recipe.batch_size",),
                )
        models.append(model)
    config["models"] = models
    _check_grid_entries(config)
    inputs.check_corpus_sizes(config, raw)
    return config


# Keys the one recipe replaced (docs/configuration.md#recipe): pretraining and healing train with the same optimiser
# (schedule-free AdamW), batch size, warm-up and weight decay, and pretraining runs to its validation minimum.
REMOVED = {
    "pretrain": {
        "epochs": "pretraining runs to its validation minimum: see pretrain.patience and pretrain.max_epochs",
        "lr": "pretraining races the learning rates of recipe.lrs",
        "min_lr_fraction": "schedule-free AdamW has no decay to a minimum lr (recipe)",
        "warmup_fraction": "see recipe.warmup_steps",
        "batch_size": "see recipe.batch_size",
    },
    "retrain": {
        "lr": "healing trains at the learning rates of recipe.lrs",
        "optimizer": "pretraining and healing both train with schedule-free AdamW (recipe)",
        "batch_size": "see recipe.batch_size",
        "warmup_steps": "see recipe.warmup_steps",
        "lr_sensitivity": "retired: every cell races the lrs of recipe.lrs; its cell's race.parquet has each lr's curve",
        "lr_sensitivity_targets": "retired with retrain.lr_sensitivity: every cell races recipe.lrs",
    },
}


def resolve_or_exit(raw: dict, files=()) -> dict:
    """``resolve``, where a ``ConfigError`` ends the program with one line (the file of ``files`` that sets the key,
    then the key and the problem) and no traceback: the Snakefile's pre-run check."""
    try:
        return resolve(raw)
    except ConfigError as err:
        raise SystemExit(for_the_user(err, files)) from None


def check_results_dir(path: str) -> str:
    """``results_dir`` with ``~`` expanded, refused unless it can be written: it is a folder, or its nearest existing
    parent is one in which a file can be made (tried with a temporary file, removed at once; nothing else is
    created before a job runs)."""
    folder = Path(os.path.expanduser(path))
    existing = next(p for p in [folder, *folder.absolute().parents] if p.exists())
    if not existing.is_dir():
        raise ConfigError("results_dir", f"{path}: {existing} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        raise ConfigError("results_dir", f"{path} cannot be written: {existing}: {err.strerror}") from None
    return str(folder)


def _check_removed(raw: dict) -> None:
    """A key the one recipe replaced is refused by name, with where its setting went (before the schema, which
    would call it merely unknown)."""
    listed = raw.get("models") if isinstance(raw.get("models"), list) else []
    places = [("", raw)] + [(f"models[{i}].", m) for i, m in enumerate(listed) if isinstance(m, dict)]
    for prefix, where in places:
        for section, keys in REMOVED.items():
            settings = where.get(section)
            for name in keys if isinstance(settings, dict) else ():
                if name in settings:
                    raise ConfigError(
                        f"{prefix}{section}.{name}", f"removed: {keys[name]} (docs/configuration.md#recipe)"
                    )


def _check_lrs(lrs: list[float], own: bool, key: str) -> None:
    """``recipe.lrs`` is a geometric grid: ascending, each about 3 x the one before (a ratio from 2.5 to 3.5)."""
    for j in range(1, len(lrs)):
        if not 2.5 <= lrs[j] / lrs[j - 1] <= 3.5:
            raise ConfigError(
                f"{key}.recipe.lrs[{j}]" if own else f"recipe.lrs[{j}]",
                f"{lrs[j]:g} after {lrs[j - 1]:g}: the lrs raced are ascending, each about 3 x the one before "
                "(a ratio from 2.5 to 3.5)",
            )


def _keys_making(target: str, i: int) -> tuple[str, ...]:
    """The keys that put a target into model ``i``'s cells: the grid entry of its kind and, for a layer, the model's
    depth in that layer's stack."""
    try:
        parsed = grid.Target.parse(target)
    except ValueError:  # not a target at all: its own key is the one to fix
        return ()
    if parsed.kind == grid.LAYER:
        return ("grid.layers", f"models[{i}].n_dec_layer" if parsed.stack == "dec" else f"models[{i}].n_layer")
    if parsed.kind == grid.SWAP_KIND:
        return ("grid.encoder_swap",)
    return ("grid.targets", "grid.controls")


def _check_grid_entries(config: dict) -> None:
    """Refuse grid entries that would silently make no cell: a policy that no chosen layer of any model has, a
    target set or an encoder swap without an encoder-decoder model, and a grid that makes no cell at all."""
    models, spec = config["models"], config["grid"]
    if not models:
        return
    described = ", ".join(f"{m['name']} ({m['arch']})" for m in models)
    archs = tuple(f"models[{i}].arch" for i in range(len(models)))  # what a grid entry conflicts with
    encdec = [m for m in models if len({i.split(".")[0] for i in grid.layer_ids(m) if "." in i}) == 2]
    targeted = any(_targeted_layers(m, spec) for m in models)  # no layer at all: the last check below says so
    for j, policy in enumerate(spec["policies"]):
        if policy == "embeddings" or not targeted:
            continue
        if not any(
            grid.policy_applies(m["arch"], layer, policy) for m in models for layer in _targeted_layers(m, spec)
        ):
            hint = "; cross-attention exists only in the decoder layers of encoder-decoder models (bart)"
            raise ConfigError(
                f"grid.policies[{j}]",
                f"{policy!r} resets no tensor of any chosen layer of any model "
                f"({described}){hint if policy == 'cross_attn' else ''}",
                related=("grid.layers", *archs),
            )
    if grid.ZERO_OUT in spec["inits"] and all(p in grid.NO_OUTPUT_PROJECTION for p in spec["policies"]):
        raise ConfigError(
            "grid.inits",
            f"{grid.ZERO_OUT!r} zeroes the output projections a policy resets, and "
            f"policies {spec['policies']} reset none: it would make no layer cell",
        )
    for j, target in enumerate(spec["targets"]):
        if target != grid.ALL and not encdec:
            raise ConfigError(
                f"grid.targets[{j}]",
                f"the set {target!r} is a stack of an encoder-decoder model, and no model here is one ({described})",
                related=archs,
            )
    if spec["encoder_swap"] and not encdec:
        raise ConfigError(
            "grid.encoder_swap",
            f"an encoder swap needs an encoder-decoder model (bart), and no model here is one ({described})",
            related=archs,
        )
    _check_donors(config, encdec)


def _check_donors(config: dict, encdec: list[dict]) -> None:
    """A donor of ``grid.encoder_swap`` is another encoder-decoder model of ``models``, of the same family and
    context as a model that receives it, built here (its encoder is read from its trained networks)."""
    models = config["models"]
    by_name = {m["name"]: m for m in models}
    for j, entry in enumerate(config["grid"]["encoder_swap"]):
        if isinstance(entry, int):
            continue
        key = f"grid.encoder_swap[{j}]"
        donor = by_name.get(entry)
        if donor is None:
            raise ConfigError(
                key,
                f"{entry!r} is neither a width nor a model of `models` ({', '.join(by_name)})",
                related=("models",),  # a model renamed, or the entry misspelt
            )
        at = f"models[{models.index(donor)}]"
        if donor not in encdec:
            raise ConfigError(
                key, f"the donor {entry!r} ({donor['arch']}) has no separate encoder to give", related=(f"{at}.arch",)
            )
        if donor["source"] != "scratch":
            raise ConfigError(
                key,
                f"the donor {entry!r} must be built here (source scratch), not downloaded",
                related=(f"{at}.source",),
            )
        receivers = [m for m in encdec if m["name"] != entry and m.get("heal", True)]
        if not receivers:
            raise ConfigError(
                key,
                f"no other encoder-decoder model of `models` is healed to receive {entry!r}",
                related=tuple(f"models[{models.index(m)}].heal" for m in encdec if m is not donor),
            )
        for m in receivers:
            differ = [k for k in ("arch", "context") if m[k] != donor[k]]
            if differ:
                raise ConfigError(
                    key,
                    f"the donor {entry!r} ({donor['arch']}, context {donor['context']}) does not fit {m['name']!r} "
                    f"({m['arch']}, context {m['context']}): a swapped-in encoder reads the same inputs",
                    related=tuple(f"models[{models.index(x)}].{k}" for x in (donor, m) for k in differ),
                )


def _targeted_layers(model: dict, spec: dict) -> list[str]:
    """The layer ids a grid resets in a model: the chosen layers and the members of its target sets."""
    ids = grid.layer_ids(model)
    chosen = ids if spec["layers"] == "all" else [grid.layer_id(layer) for layer in spec["layers"]]
    sets = [m for t in spec["targets"] for m in grid.Target.parse(t).members(ids)]
    return list(dict.fromkeys(chosen + sets))


def load(path: str | Path) -> dict:
    with open(path) as f:
        return resolve(yaml.safe_load(f) or {})
