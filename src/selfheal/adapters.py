"""What a "layer" is, per model family.

An adapter tells the rest of the code the anatomy of a model: which parameter names make up layer i and each of its
components (attention, MLP, layer norm), which are embeddings, how the family initialises a tensor from scratch,
and how to run the forward pass in pieces (embed -> layers[a:b] -> head) so frozen layers below the first trainable
one run under ``no_grad``. Reset, retrain and metrics never test the family by name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

POLICIES = ("full", "attn", "mlp", "ln")


@dataclass
class Pieces:
    """What the split forward carries between layers besides the hidden states."""

    mask: torch.Tensor | None
    position_ids: torch.Tensor


class GPT2Adapter:
    """GPT-2 (``GPT2LMHeadModel``): pre-LN blocks ``transformer.h.<i>`` with ln_1, attn, ln_2, mlp."""

    arch = "gpt2"
    components = {"attn": ("attn.",), "mlp": ("mlp.",), "ln": ("ln_1.", "ln_2.")}
    embedding_names = ("transformer.wte.weight", "transformer.wpe.weight")

    def n_layers(self, model: nn.Module) -> int:
        return len(model.transformer.h)

    def layer_prefix(self, layer: int) -> str:
        return f"transformer.h.{layer}."

    def layer_of(self, name: str) -> int | None:
        if name.startswith("transformer.h."):
            return int(name.split(".")[2])
        return None

    def param_names(self, model: nn.Module, layer: int, policy: str) -> list[str]:
        """The parameter names a reset policy targets in one layer (``full`` = every tensor of the block)."""
        prefix = self.layer_prefix(layer)
        in_layer = [n for n, _ in model.named_parameters() if n.startswith(prefix)]
        if policy == "full":
            return in_layer
        if policy not in self.components:
            raise ValueError(f"unknown reset policy {policy!r}; expected one of {POLICIES}")
        wanted = tuple(prefix + c for c in self.components[policy])
        return [n for n in in_layer if n.startswith(wanted)]

    # -- initialisation ---------------------------------------------------------------------------------------------
    def fresh_init_(self, model: nn.Module, names: list[str], generator: torch.Generator) -> None:
        """GPT-2's own init, with explicit torch calls: weights N(0, 0.02), residual projections (``c_proj``)
        N(0, 0.02/sqrt(2N)), biases 0, LayerNorm gamma=1 beta=0, embeddings N(0, 0.02)."""
        std = model.config.initializer_range
        residual_std = std / math.sqrt(2 * model.config.n_layer)
        params = dict(model.named_parameters())
        with torch.no_grad():
            for name in names:
                p = params[name]
                leaf = name.rsplit(".", 2)
                module_name, kind = leaf[-2], leaf[-1]
                if module_name.startswith("ln"):
                    (nn.init.ones_ if kind == "weight" else nn.init.zeros_)(p)
                elif kind == "bias":
                    nn.init.zeros_(p)
                elif module_name == "c_proj":
                    nn.init.normal_(p, 0.0, residual_std, generator=generator)
                else:
                    nn.init.normal_(p, 0.0, std, generator=generator)

    # -- split forward ----------------------------------------------------------------------------------------------
    def embed(self, model: nn.Module, input_ids: torch.Tensor) -> tuple[torch.Tensor, Pieces]:
        from transformers.masking_utils import create_causal_mask

        t = model.transformer
        position_ids = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        inputs_embeds = t.wte(input_ids)
        hidden = inputs_embeds + t.wpe(position_ids)
        mask = create_causal_mask(
            config=model.config,
            inputs_embeds=inputs_embeds,
            attention_mask=None,
            past_key_values=None,
            position_ids=position_ids,
        )
        return t.drop(hidden), Pieces(mask, position_ids)

    def run_layers(self, model: nn.Module, hidden: torch.Tensor, pieces: Pieces, start: int, stop: int) -> torch.Tensor:
        for block in model.transformer.h[start:stop]:
            hidden = block(hidden, None, pieces.mask, None, use_cache=False, position_ids=pieces.position_ids)
        return hidden

    def loss(self, model: nn.Module, hidden: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy over every position of the batch."""
        logits = model.lm_head(model.transformer.ln_f(hidden))
        return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), input_ids[:, 1:].flatten())


ADAPTERS = {"gpt2": GPT2Adapter}


def for_model(model: nn.Module):
    model_type = model.config.model_type
    if model_type not in ADAPTERS:
        raise ValueError(f"no adapter for model type {model_type!r}; known: {sorted(ADAPTERS)}")
    return ADAPTERS[model_type]()
