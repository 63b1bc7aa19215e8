"""Healed-layer similarity: does the function of a healed layer come back, even if its weights do not?

Linear CKA with the unbiased HSIC estimator (Song et al. 2012; as used for CKA by Nguyen, Raghu & Kornblith 2021)
between a layer's outputs in two models on the same validation tokens: 1 means the same representation up to
rotation and isotropic scale, about 0 unrelated ones (the unbiased estimator, unlike the biased one, does not
drift up with the width-to-token ratio). Written here because no kept library we use provides it: it is a few lines
of linear algebra, tested on its defining invariances.
"""

from __future__ import annotations

import math

import torch
from torch import nn

# Token positions the layer outputs are compared on (the first sequences of the fixed validation set).
CKA_TOKENS = 2048


def _hsic_unbiased(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The unbiased HSIC of the linear kernels K = x xᵀ and L = y yᵀ with zeroed diagonals, computed in feature
    space (O(n d²) instead of forming the n x n kernels, O(n² d); the same value up to float rounding)."""
    n = x.shape[0]
    kx, ky = (x * x).sum(1), (y * y).sum(1)  # the kernels' diagonals
    kl = (x.T @ y).square().sum() - (kx * ky).sum()  # sum_ij K~_ij L~_ij
    k1, l1 = x @ x.sum(0) - kx, y @ y.sum(0) - ky  # K~ 1 and L~ 1
    term = kl + k1.sum() * l1.sum() / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * (k1 @ l1)
    return term / (n * (n - 3))


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Unbiased linear CKA between two (tokens x features) matrices with the same rows; needs at least 4 rows."""
    if x.shape[0] != y.shape[0] or x.shape[0] < 4:
        raise ValueError(f"need the same number (>= 4) of rows, got {x.shape[0]} and {y.shape[0]}")
    x, y = x.double(), y.double()
    denominator = torch.sqrt(_hsic_unbiased(x, x) * _hsic_unbiased(y, y))
    return float(_hsic_unbiased(x, y) / denominator) if denominator > 0 else float("nan")


@torch.no_grad()
def layer_outputs(model: nn.Module, family, layer, val_batches: list[dict], tokens: int = CKA_TOKENS) -> torch.Tensor:
    """The outputs (hidden states, tokens x D) of ``layer`` (a ``families.Layer``) on the first ``tokens`` token
    positions of the fixed validation set, captured with a forward hook during the model's ordinary forward."""
    module = family.stack_modules(model, layer.stack)[layer.index]
    captured: list[torch.Tensor] = []

    def hook(_module, _inputs, output):
        hidden = output[0] if isinstance(output, tuple) else output
        captured.append(hidden.detach().reshape(-1, hidden.shape[-1]).float().cpu())

    was_training = model.training
    model.eval()
    handle = module.register_forward_hook(hook)
    try:
        device = next(model.parameters()).device
        for batch in val_batches:
            seen = sum(c.shape[0] for c in captured)
            if seen >= tokens:
                break
            # only the sequences still needed (rows are independent): a quarter of a validation batch by default
            rows = batch["input_ids"].shape[0]
            needed = min(rows, math.ceil((tokens - seen) / batch["input_ids"].shape[1]))
            batch = {
                k: (v[:needed] if v.ndim and v.shape[0] == rows else v).to(device) if torch.is_tensor(v) else v
                for k, v in batch.items()
            }
            family.loss(model, batch, family.n_layers(model) + 1)
    finally:
        handle.remove()
        model.train(was_training)
    return torch.cat(captured)[:tokens]
