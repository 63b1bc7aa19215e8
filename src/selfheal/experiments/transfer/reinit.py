"""Applying a spec to a pretrained encoder: re-initialise layers as Tamkin et al. 2020 do, or permute them.

Their re-initialisation: every weight matrix from a normal with std 0.02 truncated at two standard deviations,
biases 0, layer norm gamma 1 and beta 0. Their published code draws it with ``scipy.stats.truncnorm(-2*std,
2*std, scale=std)``, whose bounds are in units of the scale, so it truncates at +-0.04 standard deviations: the
weights it really draws are nearly uniform on +-0.0008 with std ~0.00046, 43x smaller than intended.
``init: trunc_normal`` (the default) draws the intended distribution; ``init: tamkin_code`` reproduces theirs.
"""

from __future__ import annotations

import zlib

import numpy as np
import torch
from torch import nn

from selfheal.experiments.transfer.experiments import Spec

INITS = ("trunc_normal", "tamkin_code")


class ReinitError(RuntimeError):
    pass


def seed_for(seed: int, what: str) -> int:
    """A seed per (trial seed, purpose), so different specs of one trial do not share their draws."""
    return zlib.crc32(f"{seed}:{what}".encode())


def draw_matrix(shape: tuple[int, ...], init: str, std: float, seed: int) -> torch.Tensor:
    """One weight matrix of the given init, reproducible from ``seed``."""
    if init == "trunc_normal":
        out = torch.empty(shape)
        return nn.init.trunc_normal_(
            out, mean=0.0, std=std, a=-2 * std, b=2 * std, generator=torch.Generator().manual_seed(seed)
        )
    if init == "tamkin_code":
        from scipy.stats import truncnorm

        # Exactly the call in their code: a and b are in units of `scale`, hence the tiny weights (module doc).
        values = truncnorm(-2 * std, 2 * std, scale=std).rvs(size=shape, random_state=np.random.default_rng(seed))
        return torch.from_numpy(np.asarray(values, dtype=np.float32))
    raise ValueError(f"unknown init {init!r}; expected one of {INITS}")


def reinit_layers(model: nn.Module, family, spec: Spec, init: str, std: float, seed: int) -> list[str]:
    """Re-initialise the layers ``spec.reinit`` names (keeping their layer norms if ``spec.keep_layernorm``);
    returns the names of the tensors set anew. Raises ReinitError if a weight matrix drawn anew equals its
    pretrained value (a silent no-op); biases and norms are set to constants a pretrained value may already equal."""
    params = dict(model.named_parameters())
    layers = family.layers(model)
    names: list[str] = []
    unchanged: list[str] = []
    with torch.no_grad():
        for index in spec.reinit:
            layer = layers[index]
            norms = set(family.param_names(model, layer.id, "ln"))
            for name in family.param_names(model, layer.id, "full"):
                p = params[name]
                if name in norms:
                    if spec.keep_layernorm:
                        continue
                    p.fill_(1.0 if name.endswith("weight") else 0.0)
                elif p.ndim < 2:
                    p.zero_()
                else:
                    drawn = draw_matrix(tuple(p.shape), init, std, seed_for(seed, f"{spec.id}:{name}"))
                    if torch.equal(drawn, p):
                        unchanged.append(name)
                    p.copy_(drawn)
                names.append(name)
    if unchanged:
        raise ReinitError(f"re-initialisation left {len(unchanged)} weight matrix(es) unchanged: {unchanged[:5]}")
    return names


def permute_layers(model: nn.Module, family, order: tuple[int, ...]) -> None:
    """Run the pretrained layers in ``order``: new layer i is the old layer order[i], weights untouched."""
    (stack,) = family.stacks  # permutation is defined for single-stack encoders
    modules = family.stack_modules(model, stack)
    if sorted(order) != list(range(len(modules))):
        raise ValueError(f"order {order} is not a permutation of the {len(modules)} layers")
    old = list(modules)
    for i, j in enumerate(order):
        modules[i] = old[j]


def apply(model: nn.Module, family, spec: Spec, init: str, std: float, seed: int) -> list[str]:
    """Permute, then re-initialise, as the spec says. Returns the names of re-initialised tensors."""
    if spec.order is not None:
        permute_layers(model, family, spec.order)
    return reinit_layers(model, family, spec, init, std, seed)


def init_head(model: nn.Module, names: list[str], std: float, seed: int) -> None:
    """The new classification head (the tensors the checkpoint lacks), drawn from the intended truncated normal
    with the trial's seed, so every spec of a trial starts from the same head."""
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in names:
            p = params[name]
            if p.ndim < 2:
                p.zero_()
            else:
                p.copy_(draw_matrix(tuple(p.shape), "trunc_normal", std, seed_for(seed, f"head:{name}")))
