"""Resetting parameters to random weights, and proving the reset changed exactly what it names.

``init='fresh'`` draws new weights from the family's own init distribution (the adapter's explicit init);
``init='original'`` restores the tensors to their values at step 0 (theta0), as in Zhang, Bengio & Singer 2019;
``init='zero_out'`` is the fresh draw with the reset output projections (attention, cross-attention and FFN
outputs) at zero, so the reset sublayers add nothing to the residual stream: a layer reset in full starts as the
layer deleted (pre-LN), or as its layer norms alone (post-LN: BERT, BART; ``Family.zero_out_init_``);
``init='trained'`` (the matched no-reset control) leaves them at their trained values: only their names are taken.
"""

from __future__ import annotations

import logging
import zlib

import torch
from safetensors.torch import load_file
from torch import nn

from selfheal import grid
from selfheal.grid import Target
from selfheal.models.families import MODEL_POLICIES

log = logging.getLogger("selfheal")

INITS = (*grid.INITS, grid.TRAINED)


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
    elif init == grid.ZERO_OUT:
        if not family.output_projection_names(model, names):
            raise ValueError(
                "init 'zero_out' needs an output projection among the reset tensors (not policy ln or embeddings)"
            )
        family.zero_out_init_(model, names, generator)
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


def draw(
    model: nn.Module,
    family,
    target: Target | str,
    policy: str,
    init: str,
    seed: int,
    theta0: dict[str, torch.Tensor] | None = None,
    donor: nn.Module | None = None,
) -> list[str]:
    """Reset one cell's (target, policy) in ``model`` in place, drawn from the cell's own generator (or restored
    from theta0). Returns the names of the reset tensors, the ones that train.

    A swap (``swap<w>``: a fresh encoder of width w; ``swap-<model>``: ``donor``'s trained encoder) wipes the
    cross-attention, re-sized to the new width; policy ``full`` trains the new encoder with it, ``cross_attn`` only
    the cross-attention (the donor's encoder stays frozen). Init ``zero_out`` starts the cross-attention's output
    at zero (a closed gate). Policy ``stitch`` keeps the cross-attention and puts a learned linear map, drawn
    fresh, between the donor's frozen encoder and it: only the map trains."""
    parsed = Target.of(target)
    generator = generator_for(seed, parsed, policy)
    if parsed.kind == grid.SWAP_KIND:
        if (parsed.donor is None) != (donor is None):
            raise ValueError(f"target {parsed} needs {'a' if parsed.donor else 'no'} donor model")
        if policy not in grid.DONOR_POLICIES or (policy != "full" and donor is None):
            raise ValueError(
                f"policy {policy!r} for {parsed}: a fresh encoder trains (full); a donor's may stay frozen or be stitched"
            )
        if policy == grid.STITCH:
            if init != "fresh":
                raise ValueError(f"init {init!r} for {parsed}, stitched: its linear map is drawn fresh")
            link, _ = family.swap_encoder(model, None, generator, donor, stitch=True)
            return sorted(link)
        encoder, cross = family.swap_encoder(model, parsed.width, generator, donor)
        if init == grid.ZERO_OUT:
            params = dict(model.named_parameters())
            with torch.no_grad():
                for name in family.output_projection_names(model, cross):
                    params[name].zero_()
        elif init != "fresh":
            raise ValueError(f"init {init!r} for {parsed}: a swap's cross-attention is drawn {grid.SWAP_INITS}")
        return sorted(cross if policy == "cross_attn" else encoder + cross)
    names = target_names(model, family, parsed, policy)
    if init != grid.TRAINED:
        apply(model, family, names, init, generator, theta0)
    return sorted(names)


def load_theta0(theta0_dir: str | None) -> dict[str, torch.Tensor] | None:
    """The step-0 weights of a model pretrained here (safetensors), or None (a downloaded model has none)."""
    return load_file(f"{theta0_dir}/model.safetensors") if theta0_dir else None
