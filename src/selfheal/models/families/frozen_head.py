"""Cross-entropy through a frozen LM head without its logits: healing trains a reset layer below the head, so the
head's weight needs no gradient and the loss's gradient with respect to the features is all the backward needs.

``head_loss(features, head, labels, per_row)`` is ``token_loss(head(features), labels, per_row)`` to float rounding
(``tests/test_frozen_head.py``): the logits are made ``CHUNK`` rows at a time, each chunk's per-token loss
(log-sum-exp minus the label's logit) and its gradient with respect to the features ((softmax - one-hot) @ W)
formed at once, and only the gradient (rows x width) is kept for the backward, not the logits (rows x vocabulary)
and their softmax. It is taken only where it is exact and needed: a bias-free head whose weight does not train,
with gradients on, in fp32 (not under autocast) and outside ``torch.func`` transforms (``lockstep``'s vmapped
whole-model pass keeps the plain loss); everywhere else the plain loss runs.
"""

from __future__ import annotations

import functools

from selfheal.lazy import Module
from selfheal.models.families.base import token_loss

torch = Module("torch")  # imported when a loss is taken: the Snakefile imports the families at every start
nn = Module("torch.nn")

CHUNK = 1024  # rows of logits made at a time (1,024 x a vocabulary of 1,024 in fp32: 4 MB)


@functools.cache
def _function():
    """The autograd function (made once, on first use: torch is imported lazily)."""

    class _FrozenHeadTokenLoss(torch.autograd.Function):
        """Per-token losses [N] of features [N, D] under a frozen head weight [V, D]; labels -100 give 0."""

        @staticmethod
        def forward(ctx, features: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            losses = torch.zeros(features.shape[0], dtype=torch.float32, device=features.device)
            grads = torch.zeros_like(features, dtype=torch.float32)
            for start in range(0, features.shape[0], CHUNK):
                x = features[start : start + CHUNK].float()
                y = labels[start : start + CHUNK]
                logits = x @ weight.float().t()
                valid = y != -100
                target = torch.where(valid, y, 0)
                lse = torch.logsumexp(logits, dim=1)
                losses[start : start + CHUNK] = torch.where(valid, lse - logits.gather(1, target[:, None])[:, 0], 0.0)
                probs = torch.exp(logits - lse[:, None])
                probs.scatter_add_(1, target[:, None], torch.full_like(lse[:, None], -1.0))
                grads[start : start + CHUNK] = torch.where(valid[:, None], probs @ weight.float(), 0.0)
            ctx.save_for_backward(grads)
            ctx.dtype = features.dtype
            return losses

        @staticmethod
        def backward(ctx, grad_out: torch.Tensor):
            (grads,) = ctx.saved_tensors
            return (grad_out[:, None] * grads).to(ctx.dtype), None, None

    return _FrozenHeadTokenLoss


def usable(features, head) -> bool:
    """Where the fused loss is exact and pays (module docstring)."""
    weight = getattr(head, "weight", None)
    return (
        isinstance(head, nn.Linear)
        and head.bias is None
        and weight is not None
        and not weight.requires_grad
        and features.requires_grad
        and torch.is_grad_enabled()
        and not torch.is_autocast_enabled(features.device.type)
        and not torch._C._functorch.is_functorch_wrapped_tensor(features)
    )


def head_loss(features, head, labels, per_row: bool = False):
    """``token_loss(head(features), labels, per_row)``, fused where ``usable``: the mean over every target, or each
    row's mean over its own targets (NaN for a row without any)."""
    if not usable(features, head):
        return token_loss(head(features), labels, per_row)
    tokens = _function().apply(features.reshape(-1, features.shape[-1]), head.weight, labels.reshape(-1))
    tokens = tokens.view(labels.shape)
    counts = (labels != -100).sum(-1 if per_row else None)
    return tokens.sum(-1) / counts if per_row else tokens.sum() / counts
