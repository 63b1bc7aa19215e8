"""Frozen random components (Bogoychev 2021, "Not all parameters are born equal: attention is mostly what you
need"): pretrain with one or two of {embeddings, attention, FFN} left at their random initialisation (θ0) and frozen
from the first step, everything else trained, and compare the validation loss with the all-trainable model of the
same size, data, seed and schedule.

A component is a set of parameter names, found through the family interface only:

- ``embeddings``: ``family.embedding_names(model)``. Models built here tie the LM head to the token embedding, so
  freezing the embeddings also freezes the (tied) output projection at θ0.
- ``attention``: every layer's attention, self and cross (policy ``attn``).
- ``ffn``: every layer's feed-forward block (policy ``mlp``).

Layer norms always train, also where a family counts one inside a component (BART's embedding LayerNorms and the
cross-attention's own post-LN). ``results/frozen_random.parquet`` (COLUMNS below, documented in docs/outputs.md) has one
row per (base model, frozen set), including the all-trainable reference (``frozen = "none"``).
"""

from __future__ import annotations

import math

import pandas as pd

from selfheal import records, results_io
from selfheal.models.families.base import is_norm
from selfheal.records import PretrainSummary

COMPONENTS = ("embeddings", "attention", "ffn")
# Every set of one or two components: the default of frozen_random.components.
DEFAULT_SETS = [
    ["embeddings"],
    ["attention"],
    ["ffn"],
    ["embeddings", "attention"],
    ["embeddings", "ffn"],
    ["attention", "ffn"],
]
NONE = "none"  # the frozen value of the all-trainable reference row

COLUMNS = [
    "model",
    "base_model",
    "pretrain_seed",
    "arch",
    "n_layer",
    "d_model",
    "frozen",
    "trainable_params",
    "frozen_params",
    "val_loss",
    "val_perplexity",
    "delta_loss",
    "perplexity_ratio",
]


def variants(config: dict) -> list[dict]:
    """The derived models of the experiment (pretrained only, never cells); empty when it is off."""
    return config.get("frozen_random", [])


def model_by_name(config: dict, name: str) -> dict:
    """A model of ``models``, or a derived model of the experiment."""
    for model in config["models"] + variants(config):
        if model["name"] == name:
            return model
    raise KeyError(name)


def canonical(components) -> list[str]:
    """Components in the fixed order embeddings, attention, ffn (so [ffn, attention] names the same set)."""
    return sorted(components, key=COMPONENTS.index)


def label(components) -> str:
    """'embeddings+ffn', or 'none' for the all-trainable reference."""
    return "+".join(canonical(components)) or NONE


def variant_name(base: str, components) -> str:
    """The derived model's name: '<base>.frozen-attention-ffn'."""
    return f"{base}.frozen-{'-'.join(canonical(components))}"


def frozen_names(family, model, components) -> list[str]:
    """Parameter names that stay at θ0 when ``components`` are frozen; layer norms are never among them."""
    unknown = set(components) - set(COMPONENTS)
    if unknown:
        raise ValueError(f"unknown components {sorted(unknown)}; expected some of {COMPONENTS}")
    params = dict(model.named_parameters())
    modules = dict(model.named_modules())
    names: list[str] = []
    for component in canonical(components):
        if component == "embeddings":
            found = list(family.embedding_names(model))
        else:
            policy = "attn" if component == "attention" else "mlp"
            found = [n for layer in family.layers(model) for n in family.param_names(model, layer.id, policy)]
        missing = [n for n in found if n not in params]
        if missing:
            raise ValueError(f"{family.arch}: {component} names tensors that are not parameters: {missing}")
        found = [n for n in found if not is_norm(modules[n.rsplit(".", 1)[0]])]
        if not found:
            raise ValueError(f"{family.arch}: component {component!r} has no tensor to freeze")
        names.extend(found)
    return list(dict.fromkeys(names))


def _sort_key(frozen: str) -> tuple[int, list[int]]:
    """none, then single components, then pairs, each in COMPONENTS order."""
    parts = [] if frozen == NONE else frozen.split("+")
    return len(parts), [COMPONENTS.index(p) for p in parts]


def table(reference_summaries: list[str], variant_summaries: list[str]) -> pd.DataFrame:
    """One row per pretrain.json: the all-trainable references (frozen 'none') and the frozen-random variants, each
    compared with its base model's reference."""
    rows = []
    for path, is_reference in [(p, True) for p in reference_summaries] + [(p, False) for p in variant_summaries]:
        pre = records.read(path, PretrainSummary)
        frozen = [] if is_reference else pre.frozen_components
        rows.append(
            {
                "model": pre.model,
                "base_model": pre.model if is_reference else pre.base_model,
                "pretrain_seed": pre.pretrain_seed,
                "arch": pre.arch,
                "n_layer": pre.n_layer,
                "d_model": pre.d_model,
                "frozen": label(frozen),
                # pretrain.json files written before frozen-random pretraining existed lack the counts: all trainable
                "trainable_params": pre.params if pre.trainable_params is None else pre.trainable_params,
                "frozen_params": pre.frozen_params,
                "val_loss": pre.final_val_loss,
            }
        )
    rows.sort(key=lambda r: (r["base_model"], r["pretrain_seed"], _sort_key(r["frozen"])))
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["val_perplexity"] = [math.exp(v) for v in out["val_loss"]]
    # each variant is compared with the reference of the same base model and pretraining seed (same θ0 and data)
    network = list(zip(out["base_model"], out["pretrain_seed"]))
    reference = {k: v for k, v, f in zip(network, out["val_loss"], out["frozen"]) if f == NONE}
    missing = sorted(set(network) - set(reference))
    if missing:
        raise ValueError(f"no all-trainable reference for base model(s) and pretraining seed(s) {missing}")
    out["delta_loss"] = out["val_loss"] - pd.Series([reference[k] for k in network], index=out.index)
    out["perplexity_ratio"] = [math.exp(d) for d in out["delta_loss"]]
    return out


def write(reference_summaries: list[str], variant_summaries: list[str], out_path: str) -> None:
    results_io.write_parquet(out_path, table(reference_summaries, variant_summaries))
