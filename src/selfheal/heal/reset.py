"""Resetting parameters to random weights, and proving the reset changed exactly what it names.

``init='fresh'`` draws new weights from the family's own init distribution (the adapter's explicit init);
``init='original'`` restores the tensors to their values at step 0 (theta0), as in Zhang, Bengio & Singer 2019.
"""

from __future__ import annotations

import logging
import zlib

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from selfheal import grid, models, records
from selfheal.grid import Target
from selfheal.models import families
from selfheal.models.families import MODEL_POLICIES
from selfheal.records import Damage
from selfheal.training import setup
from selfheal.training.evaluation import evaluate

log = logging.getLogger("selfheal")

INITS = ("fresh", "original")


class ResetError(RuntimeError):
    pass


def target_layers(model: nn.Module, family, target: Target | str) -> list[str]:
    """Layer ids a target names: one layer ('L3', 'enc.2'), a stack ('enc', 'dec'), every layer ('all')."""
    target = Target.of(target)
    if target.is_layer:
        return [family.layer(model, target.text).id]
    return target.members([l.id for l in family.layers(model)])


def target_names(model: nn.Module, family, target: Target | str, policy: str) -> list[str]:
    """Parameter names a (target, policy) pair resets. Raises if the pair names nothing (e.g. cross_attn on a
    decoder-only model), so a grid cell can never silently reset nothing."""
    target = Target.of(target)
    if target.kind == grid.NONE_KIND:
        return []
    if policy in MODEL_POLICIES:
        if target.text != grid.ALL:
            raise ValueError(f"policy {policy!r} is model-level: use it with target 'all', not {target!r}")
        names = family.embedding_names(model)
    else:
        names = [n for layer in target_layers(model, family, target) for n in family.param_names(model, layer, policy)]
    if not names:
        raise ValueError(f"target {target!r} with policy {policy!r} names no tensor in this {family.arch} model")
    return names


def generator_for(seed: int, target: Target | str, policy: str) -> torch.Generator:
    """A generator per (seed, target, policy), so different cells with one seed do not share their draws."""
    return torch.Generator().manual_seed(zlib.crc32(f"{seed}:{Target.of(target).text}:{policy}".encode()))


def apply(
    model: nn.Module,
    family,
    names: list[str],
    init: str,
    generator: torch.Generator,
    theta0: dict[str, torch.Tensor] | None = None,
) -> dict[str, torch.Tensor]:
    """Reset ``names`` in place and return their new values. Raises ResetError if any targeted tensor is unchanged
    (e.g. a library init silently skipping tensors loaded from a checkpoint), so a no-op reset can never pass."""
    if not names:  # the no-reset control
        return {}
    params = dict(model.named_parameters())
    before = {n: params[n].detach().clone() for n in names}
    if init == "fresh":
        family.fresh_init_(model, names, generator)
    elif init == "original":
        if theta0 is None:
            raise ValueError("init='original' needs the step-0 weights (theta0)")
        with torch.no_grad():
            for n in names:
                params[n].copy_(theta0[n])
    else:
        raise ValueError(f"unknown init {init!r}; expected one of {INITS}")
    unchanged = [n for n in names if torch.equal(before[n], params[n])]
    if unchanged:
        raise ResetError(f"reset left {len(unchanged)} targeted tensor(s) unchanged: {unchanged[:5]}")
    return {n: params[n].detach().clone().contiguous() for n in names}


def reset_cell(
    model_cfg: dict,
    eval_cfg: dict,
    tokens_path: str,
    trained_dir: str,
    theta0_dir: str | None,
    target: str,
    policy: str,
    init: str,
    seed: int,
    weights_path: str,
    damage_path: str,
    threads: int = 1,
) -> Damage:
    """The reset stage of one cell: write the reset tensors (safetensors) and the damage (val loss right after)."""
    setup.seed_everything(seed, threads)
    parsed = Target.parse(target)
    model = models.load(trained_dir)
    family = families.for_model(model)
    metadata = {"target": target, "policy": policy, "init": init, "seed": str(seed)}
    if parsed.kind == grid.SWAP_KIND:
        names = family.swap_encoder(model, parsed.width, generator_for(seed, parsed, policy))
        params = dict(model.named_parameters())
        new_values = {n: params[n].detach().clone().contiguous() for n in names}
        metadata["swap_d_model"] = str(parsed.width)
    else:
        names = target_names(model, family, parsed, policy)
        theta0 = load_file(f"{theta0_dir}/model.safetensors") if init == "original" else None
        new_values = apply(model, family, names, init, generator_for(seed, parsed, policy), theta0)
    save_file(new_values, weights_path, metadata=metadata)
    job = setup.prepare(model, model_cfg, eval_cfg, tokens_path)
    damaged = evaluate(model, family, job.val_batches, hw=job.hardware)
    out = Damage(model=model_cfg["name"], target=target, policy=policy, init=init, seed=seed,
                 reset_tensors=len(names), reset_params=int(sum(v.numel() for v in new_values.values())),
                 damaged_loss=damaged)
    records.write(damage_path, out)
    log.info("reset %s %s/%s/%s seed %d: %d tensors, damaged val loss %.4f",
             model_cfg["name"], target, policy, init, seed, len(names), damaged)
    return out


def load_reset_model(trained_dir: str, weights_path: str):
    """The trained model with a cell's reset written over it (rebuilding a swapped encoder first).
    Returns (model, family, names of the reset tensors)."""
    model = models.load(trained_dir)
    family = families.for_model(model)
    with safe_open(weights_path, "pt") as f:
        metadata = f.metadata() or {}
    if "swap_d_model" in metadata:
        family.swap_encoder(model, int(metadata["swap_d_model"]), torch.Generator().manual_seed(0))
    values = load_file(weights_path)
    params = dict(model.named_parameters())
    missing = sorted(set(values) - set(params))
    if missing:
        raise ValueError(f"{weights_path}: tensors not in the model: {missing[:5]}")
    with torch.no_grad():
        for name, value in values.items():
            params[name].copy_(value)
    return model, family, sorted(values)
