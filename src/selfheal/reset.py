"""Resetting parameters to random weights, and proving the reset changed exactly what it names.

``init='fresh'`` draws new weights from the family's own init distribution (the adapter's explicit init);
``init='original'`` restores the tensors to their values at step 0 (theta0), as in Zhang, Bengio & Singer 2019.
"""

from __future__ import annotations

import zlib

import torch
from torch import nn

from selfheal.config import TARGET_ALL, TARGET_NONE

INITS = ("fresh", "original")


class ResetError(RuntimeError):
    pass


def target_names(model: nn.Module, adapter, target: str, policy: str) -> list[str]:
    """Parameter names a (target, policy) pair resets. target: 'L<i>', 'all' or 'none'."""
    if target == TARGET_NONE:
        return []
    if target == TARGET_ALL:
        layers = range(adapter.n_layers(model))
    elif target.startswith("L") and target[1:].isdigit():
        layers = [int(target[1:])]
        if layers[0] >= adapter.n_layers(model):
            raise ValueError(f"layer {layers[0]} out of range for a {adapter.n_layers(model)}-layer model")
    else:
        raise ValueError(f"unknown reset target {target!r}")
    return [n for layer in layers for n in adapter.param_names(model, layer, policy)]


def generator_for(seed: int, target: str, policy: str) -> torch.Generator:
    """A generator per (seed, target, policy), so different cells with one seed do not share their draws."""
    return torch.Generator().manual_seed(zlib.crc32(f"{seed}:{target}:{policy}".encode()))


def apply(
    model: nn.Module,
    adapter,
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
        adapter.fresh_init_(model, names, generator)
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
    theta0_dir: str,
    target: str,
    policy: str,
    init: str,
    seed: int,
    weights_path: str,
    damage_path: str,
    threads: int = 1,
) -> dict:
    """The reset stage of one cell: write the reset tensors (safetensors) and the damage (val loss right after)."""
    import logging

    from safetensors.torch import load_file, save_file

    from selfheal import adapters, data, models, results_io, train

    train.seed_everything(seed, threads)
    model = models.load(trained_dir)
    adapter = adapters.for_model(model)
    names = target_names(model, adapter, target, policy)
    theta0 = load_file(f"{theta0_dir}/model.safetensors") if init == "original" else None
    new_values = apply(model, adapter, names, init, generator_for(seed, target, policy), theta0)
    save_file(new_values, weights_path, metadata={"target": target, "policy": policy, "init": init,
                                                   "seed": str(seed)})
    val_seqs = data.val_sequences(tokens_path, model_cfg["context"], eval_cfg["val_sequences"])
    damaged = train.evaluate(model, adapter, val_seqs, eval_cfg["batch_size"])
    out = {
        "model": model_cfg["name"], "target": target, "policy": policy, "init": init, "seed": seed,
        "reset_tensors": len(names), "reset_params": int(sum(v.numel() for v in new_values.values())),
        "damaged_loss": damaged,
    }
    results_io.write_json(damage_path, out)
    logging.getLogger("selfheal").info("reset %s %s/%s/%s seed %d: %d tensors, damaged val loss %.4f",
                                       model_cfg["name"], target, policy, init, seed, len(names), damaged)
    return out
