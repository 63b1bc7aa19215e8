"""Model FLOPs of a training step, for throughput and model-FLOPs-utilisation reports (an estimate in the usual
convention: 2 FLOPs per multiply-add of every weight matrix, plus 4·T·D per token per layer for attention scores
and values; elementwise work ignored).

Per token, with the frozen prefix below depth k: forward through layers k.. and the head; backward for activation
gradients through the same (about the forward again); weight gradients only for the trainable matrices (2 per
weight). Without a prefix cache, layers below k also run forward.
"""

from __future__ import annotations

from torch import nn


def _matmul_params(module: nn.Module, only: set[str] | None = None, prefix: str = "") -> int:
    return sum(
        p.numel()
        for n, p in module.named_parameters(prefix=prefix)
        if p.ndim == 2 and "embed" not in n and "wte" not in n and "wpe" not in n and (only is None or n in only)
    )


def train_flops_per_token(
    model: nn.Module, family, trainable: set[str], grad_from: int, context: int, prefix_cached: bool
) -> float:
    layers = family.layers(model)
    modules = dict(model.named_modules())
    d_model = int(getattr(model.config, "hidden_size", None) or getattr(model.config, "d_model"))
    vocab = int(model.config.vocab_size)

    def layer_forward(layer) -> float:
        module = modules[layer.prefix.rstrip(".")]
        return 2 * _matmul_params(module) + 4 * context * d_model

    suffix = sum(layer_forward(l) for l in layers if l.depth >= grad_from) + 2 * d_model * vocab
    prefix = 0.0 if prefix_cached else sum(layer_forward(l) for l in layers if l.depth < grad_from)
    weight_grads = 2 * _matmul_params(model, only=trainable)
    return prefix + 2 * suffix + weight_grads
