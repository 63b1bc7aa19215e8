"""Healed-layer similarity: does the function of a healed layer come back, even if its weights do not?

Linear CKA with the unbiased HSIC estimator (Song et al. 2012; as used for CKA by Nguyen, Raghu & Kornblith 2021)
between a layer's outputs in two models on the same validation tokens: 1 means the same representation up to
rotation and isotropic scale, about 0 unrelated ones (the unbiased estimator, unlike the biased one, does not
drift up with the width-to-token ratio). Written here because no kept library we use provides it: it is a few lines
of linear algebra, tested on its defining invariances.
"""

from __future__ import annotations

import torch
from torch import nn

# Token positions the layer outputs are compared on (the first sequences of the fixed validation set).
CKA_TOKENS = 2048


def _hsic_unbiased(k: torch.Tensor, l: torch.Tensor) -> torch.Tensor:
    n = k.shape[0]
    k = k.clone().fill_diagonal_(0)
    l = l.clone().fill_diagonal_(0)
    ones_k, ones_l = k.sum(), l.sum()
    term = (k * l).sum() + ones_k * ones_l / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * (k.sum(0) @ l.sum(1))
    return term / (n * (n - 3))


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Unbiased linear CKA between two (tokens x features) matrices with the same rows; needs at least 4 rows."""
    if x.shape[0] != y.shape[0] or x.shape[0] < 4:
        raise ValueError(f"need the same number (>= 4) of rows, got {x.shape[0]} and {y.shape[0]}")
    x, y = x.double(), y.double()
    k, l = x @ x.T, y @ y.T
    denominator = torch.sqrt(_hsic_unbiased(k, k) * _hsic_unbiased(l, l))
    return float(_hsic_unbiased(k, l) / denominator) if denominator > 0 else float("nan")


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
        seen = 0
        for batch in val_batches:
            device = next(model.parameters()).device
            batch = {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}
            family.loss(model, batch, family.n_layers(model) + 1)
            seen = sum(c.shape[0] for c in captured)
            if seen >= tokens:
                break
    finally:
        handle.remove()
        model.train(was_training)
    return torch.cat(captured)[:tokens]
