"""K copies of one reset layer trained in one pass: the engine a batched lr race builds on (not yet wired into the
race, ``heal.retrain``, which trains its copies one after another).

For a single-stack family (GPT-2, BERT, Llama) whose trainable tensors all lie in one layer at depth L (the
``frozen`` regime's single-layer cells): the frozen prefix runs once (or comes from the prefix cache), the K copies
of layer L run as one ``torch.func.vmap`` over their stacked weights (shape [K, ...]: batched matrix products), and
the frozen suffix and head run once on the K x B rows. Each copy's loss is its own rows' mean over their targets,
so the sum of the K losses has each copy's own gradient in its slice of the stacked weights.

``ScheduleFreeK`` is schedule-free AdamW (Defazio et al. 2024) for the stacked weights, every scalar of the
``schedulefree`` package's ``AdamWScheduleFree`` (warm-up, the lr_max weighting, its averaging) a vector over the
copies: each copy has its own lr, its own global-norm gradient clipping and its own averaged weights. Written here
because the package's optimiser takes one lr per parameter group and a copy is a slice of one tensor;
``tests/test_stacked.py`` checks it against the package itself, copy by copy.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.func import functional_call, vmap

from selfheal.models.families import SingleStack


class _Stacked:
    """What both ways to stack share: ``weights`` (leaf tensors [K, ...]) and ``k``."""

    weights: dict[str, torch.Tensor]
    k: int

    def keep(self, slices: Sequence[int]) -> None:
        """Only the copies at ``slices`` go on (the others have stopped): the stacked weights sliced to them."""
        index = torch.tensor(list(slices), dtype=torch.long, device=next(iter(self.weights.values())).device)
        for name, w in self.weights.items():
            self.weights[name] = w.detach().index_select(0, index).requires_grad_(True)
        self.k = len(slices)


class StackedLayer(_Stacked):
    """The K copies of layer ``depth`` of ``model`` (a ``family`` model), each from that layer's current weights:
    ``weights`` maps ``layer.<the layer's own parameter name>`` to leaf tensors of shape [K, ...]."""

    def __init__(self, family: SingleStack, model: nn.Module, depth: int, k: int):
        self.family, self.model, self.depth, self.k = family, model, depth, k
        self.layer = family.stack_modules(model, "")[depth]
        self.call = _LayerCall(family, self.layer)
        self.weights = {
            f"layer.{name}": p.detach().unsqueeze(0).repeat(k, *([1] * p.ndim)).clone().requires_grad_(True)
            for name, p in self.layer.named_parameters()
        }

    def losses(self, batch: dict, hidden: torch.Tensor | None = None, weights: dict | None = None) -> torch.Tensor:
        """Each copy's mean loss over ``batch`` ([K]); ``hidden``: the states entering the layer (a cached prefix),
        else computed here under no_grad; ``weights``: other stacked weights (the averaged ones, to evaluate)."""
        family, model = self.family, self.model
        if hidden is None:
            hidden = family.prefix(model, batch, self.depth)
        pieces = family.pieces(model, batch, hidden)

        def one(params, x):
            return functional_call(self.call, params, (x, pieces))

        out = vmap(one, in_dims=(0, None))(self.weights if weights is None else weights, hidden)  # [K, B, T, D]
        rows = out.reshape(-1, *out.shape[2:])
        many = {key: value.repeat(self.k, *([1] * (value.ndim - 1))) for key, value in batch.items()}
        pieces = family.pieces(model, many, rows)
        for layer in family.stack_modules(model, "")[self.depth + 1 :]:
            rows = family.call_layer(layer, rows, pieces)
        per_row = family.head_loss(model, rows, many, per_row=True).view(self.k, -1)
        counts = targets_per_row(many).view(self.k, -1).to(per_row.dtype)
        # a row without targets has a NaN mean (``token_loss``) and weighs nothing
        return (torch.where(counts > 0, per_row, 0.0) * counts).sum(1) / counts.sum(1)

    def full_names(self) -> dict[str, str]:
        """The model's own name of each stacked weight (``layer.ln_1.weight`` -> ``transformer.h.0.ln_1.weight``)."""
        names = {id(p): n for n, p in self.model.named_parameters()}
        return {f"layer.{n}": names[id(p)] for n, p in self.layer.named_parameters()}


class _LayerCall(nn.Module):
    """The family's call of one layer as a module, so ``functional_call`` can give it other weights."""

    def __init__(self, family: SingleStack, layer: nn.Module):
        super().__init__()
        self.layer = layer
        self.family = family

    def forward(self, hidden: torch.Tensor, pieces: dict) -> torch.Tensor:
        return self.family.call_layer(self.layer, hidden, pieces)


class StackedModel(_Stacked):
    """K copies of any set of trainable tensors of ``model`` (``names``), for any family: the family's whole loss
    run as one ``torch.func.vmap`` over the stacked copies (the frozen tensors shared, every activation batched over
    the copies). What ``StackedLayer`` does for one layer of a single-stack model, without its shared prefix: for an
    encoder-decoder (a layer, its cross-attention, a swapped encoder) or several layers. ``weights`` maps the
    model's own parameter names to leaf tensors of shape [K, ...]. ``hidden`` (a cached prefix, single-stack
    families) enters at ``from_depth``."""

    def __init__(self, family, model: nn.Module, names: set[str], k: int, from_depth: int = 0):
        self.family, self.model, self.k, self.from_depth = family, model, k, from_depth
        params = dict(model.named_parameters())
        self.call = _LossCall(family, model, from_depth)
        self.weights = {
            n: params[n].detach().unsqueeze(0).repeat(k, *([1] * params[n].ndim)).clone().requires_grad_(True)
            for n in sorted(names)
        }

    def losses(self, batch: dict, hidden: torch.Tensor | None = None, weights: dict | None = None) -> torch.Tensor:
        """Each copy's loss over ``batch`` ([K]): the family's loss with that copy's tensors."""

        def one(params):
            return functional_call(self.call, {f"model.{n}": w for n, w in params.items()}, (batch, hidden))

        return vmap(one, randomness="same")(self.weights if weights is None else weights)

    def full_names(self) -> dict[str, str]:
        return {n: n for n in self.weights}


class _LossCall(nn.Module):
    """The family's loss as a module call, so ``functional_call`` can give the model other tensors."""

    def __init__(self, family, model: nn.Module, from_depth: int = 0):
        super().__init__()
        self.model, self.family, self.from_depth = model, family, from_depth

    def forward(self, batch: dict, hidden: torch.Tensor | None) -> torch.Tensor:
        if hidden is None:
            return self.family.loss(self.model, batch, 0)
        return self.family.loss(self.model, batch, 0, hidden=hidden, from_depth=self.from_depth)


def targets_per_row(batch: dict) -> torch.Tensor:
    """How many targets each row's loss averages over: its labels other than -100 (a masked LM), else every position
    but the last (a causal LM predicts tokens 1 .. T-1)."""
    labels = batch.get("labels")
    if labels is not None:
        return (labels != -100).sum(1)
    ids = batch["input_ids"]
    return torch.full((ids.shape[0],), ids.shape[1] - 1)


class ScheduleFreeK:
    """Schedule-free AdamW over stacked weights ([K, ...] tensors), copy ``i`` at ``lrs[i]``; weight decay on the
    tensors that are matrices in the layer (ndim >= 3 stacked), as ``training.loop`` groups them; ``grad_clip``: each
    copy's global gradient norm clipped to it. ``train`` / ``eval`` move the weights between the point gradients are
    taken at (y) and the averaged weights evaluated (x), as the package's ``train()`` and ``eval()`` do."""

    def __init__(
        self,
        weights: dict[str, torch.Tensor],
        lrs: Sequence[float],
        weight_decay: float,
        warmup_steps: int,
        grad_clip: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_lr_power: float = 2.0,
    ):
        self.weights = weights
        self.lrs = torch.tensor(list(lrs), dtype=torch.float64)
        self.decay = {n: weight_decay if w.ndim >= 3 else 0.0 for n, w in weights.items()}
        self.warmup_steps, self.grad_clip, self.betas, self.eps = warmup_steps, grad_clip, betas, eps
        self.weight_lr_power = weight_lr_power
        self.k = 0
        self.lr_max = torch.full_like(self.lrs, -1.0)
        self.weight_sum = torch.zeros_like(self.lrs)
        self.z = {n: w.detach().clone() for n, w in weights.items()}
        self.v = {n: torch.zeros_like(w) for n, w in weights.items()}
        self.training = True

    def _per_copy(self, values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return values.to(like.dtype).view(-1, *([1] * (like.ndim - 1)))

    @torch.no_grad()
    def clip(self) -> torch.Tensor:
        """Each copy's gradient scaled to at most ``grad_clip`` in global norm (torch's clip_grad_norm_ rule, copy by
        copy); the norms before."""
        grads = [w.grad for w in self.weights.values()]
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads]).norm(dim=0)
        if self.grad_clip > 0:
            scale = torch.clamp(self.grad_clip / (norms + 1e-6), max=1.0)
            for g in grads:
                g.mul_(self._per_copy(scale, g))
        return norms

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        k = self.k
        sched = (k + 1) / self.warmup_steps if k < self.warmup_steps else 1.0
        bias_correction2 = 1 - beta2 ** (k + 1)
        lr = self.lrs * sched
        self.lr_max = torch.maximum(lr, self.lr_max)
        weight = self.lr_max**self.weight_lr_power  # the package's (k + 1)^r with its r = 0
        self.weight_sum = self.weight_sum + weight
        ckp1 = weight / self.weight_sum
        y_step = lr * (beta1 * (1 - ckp1) - 1)
        for name, y in self.weights.items():
            grad, z, v = y.grad, self.z[name], self.v[name]
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            normalized = grad / (v / bias_correction2).sqrt_().add_(self.eps)
            if self.decay[name]:
                normalized.add_(y, alpha=self.decay[name])
            y.lerp_(z, self._per_copy(ckp1, y))
            y.add_(normalized * self._per_copy(y_step, y))
            z.sub_(normalized * self._per_copy(lr, z))
        self.k = k + 1

    def keep(self, slices: Sequence[int]) -> None:
        """Only the copies at ``slices`` go on: their state sliced out; ``weights`` (shared with the
        ``StackedLayer``, which slices them) already are."""
        index = torch.tensor(list(slices), dtype=torch.long)
        self.lrs, self.lr_max, self.weight_sum = (
            t.index_select(0, index) for t in (self.lrs, self.lr_max, self.weight_sum)
        )
        for state in (self.z, self.v):
            for name, t in state.items():
                state[name] = t.index_select(0, index.to(t.device))

    @torch.no_grad()
    def averaged(self) -> dict[str, torch.Tensor]:
        """The averaged weights x (where a copy is evaluated) as new tensors, the weights left at y: x = y + (1 -
        1 / beta1) (z - y), as ``loop.averaged_weights`` for one copy (before any step z = y, so x = y)."""
        return {name: torch.lerp(w.detach(), self.z[name], 1 - 1 / self.betas[0]) for name, w in self.weights.items()}

    def zero_grad(self) -> None:
        for w in self.weights.values():
            w.grad = None

    @torch.no_grad()
    def eval(self) -> None:
        if self.training:
            for name, w in self.weights.items():
                w.lerp_(self.z[name], 1 - 1 / self.betas[0])
            self.training = False

    @torch.no_grad()
    def train(self) -> None:
        if not self.training:
            for name, w in self.weights.items():
                w.lerp_(self.z[name], 1 - self.betas[0])
            self.training = True
