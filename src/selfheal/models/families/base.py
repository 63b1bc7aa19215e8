"""What every model family tells the rest of the code: its layers, their components, its init and its forward.

A *layer id* names one layer: ``L<i>`` in a single-stack model (GPT-2, BERT, Llama), ``enc.<i>`` / ``dec.<i>`` in
an encoder-decoder. Layers have a global *depth* (encoder first), used to run every layer below the first
trainable one under ``no_grad``. Reset, retrain, metrics and plots only ever talk to this interface; none of them
tests the family by name.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from selfheal.lazy import Module

torch = Module("torch")  # imported at first use: the Snakefile names the families at every start
nn = Module("torch.nn")
F = Module("torch.nn.functional")

# Reset policies. Per layer: full (every tensor of the block), attn (all attention, self and cross), self_attn,
# cross_attn (decoder layers of encoder-decoders), mlp, ln. Model-level: embeddings.
LAYER_POLICIES = ("full", "attn", "self_attn", "cross_attn", "mlp", "ln")
MODEL_POLICIES = ("embeddings",)
POLICIES = LAYER_POLICIES + MODEL_POLICIES


@dataclass(frozen=True)
class Layer:
    id: str  # "L3", "enc.2", "dec.0"
    stack: str  # "" for single-stack families, else "enc" / "dec"
    index: int  # index within its stack
    depth: int  # global position, encoder first
    prefix: str  # parameter-name prefix, e.g. "transformer.h.3."


class Family:
    """Base class; subclasses fill in the anatomy. ``components[stack][policy]`` are name prefixes relative to a
    layer's prefix (``full`` is implicit: every tensor under the prefix). ``output_projections[stack]``: the
    prefixes of the linear maps whose outputs are added to the residual stream (attention output, cross-attention
    output, FFN output), which the ``zero_out`` init sets to zero."""

    arch: str = ""
    model_type: str = ""
    objective: str = "causal_lm"
    stacks: tuple[str, ...] = ("",)
    components: dict[str, dict[str, tuple[str, ...]]] = {}
    output_projections: dict[str, tuple[str, ...]] = {}

    # -- anatomy ----------------------------------------------------------------------------------------------------
    def stack_prefix(self, model: nn.Module, stack: str) -> str:
        raise NotImplementedError

    def stack_modules(self, model: nn.Module, stack: str) -> nn.ModuleList:
        raise NotImplementedError

    def embedding_names(self, model: nn.Module) -> list[str]:
        raise NotImplementedError

    def layers(self, model: nn.Module) -> list[Layer]:
        out, depth = [], 0
        for stack in self.stacks:
            prefix = self.stack_prefix(model, stack)
            for i in range(len(self.stack_modules(model, stack))):
                layer_id = f"L{i}" if stack == "" else f"{stack}.{i}"
                out.append(Layer(layer_id, stack, i, depth, f"{prefix}{i}."))
                depth += 1
        return out

    def n_layers(self, model: nn.Module) -> int:
        return len(self.layers(model))

    def layer(self, model: nn.Module, layer_id: str) -> Layer:
        for layer in self.layers(model):
            if layer.id == layer_id:
                return layer
        raise ValueError(
            f"no layer {layer_id!r} in this {self.arch} model; it has {[l.id for l in self.layers(model)]}"
        )

    def param_names(self, model: nn.Module, layer_id: str, policy: str) -> list[str]:
        """Parameter names that ``policy`` targets in one layer (empty when the layer has no such component)."""
        layer = self.layer(model, layer_id)
        in_layer = [n for n, _ in model.named_parameters() if n.startswith(layer.prefix)]
        if policy == "full":
            return in_layer
        table = self.components[layer.stack]
        if policy == "attn":
            wanted = table.get("self_attn", ()) + table.get("cross_attn", ())
        elif policy in LAYER_POLICIES:
            wanted = table.get(policy, ())
        else:
            raise ValueError(f"unknown layer policy {policy!r}; expected one of {LAYER_POLICIES}")
        wanted = tuple(layer.prefix + c for c in wanted)
        return [n for n in in_layer if n.startswith(wanted)] if wanted else []

    def depth_of(self, model: nn.Module, name: str) -> int:
        """Global depth at which a parameter is first used: embeddings 0, layer tensors their layer's depth,
        anything after the layers (final norms, heads) the number of layers."""
        if name in self.embedding_names(model):
            return 0
        for layer in self.layers(model):
            if name.startswith(layer.prefix):
                return layer.depth
        return self.n_layers(model)

    def swap_encoder(
        self,
        model: nn.Module,
        d_model: int | None,
        generator: torch.Generator,
        donor: nn.Module | None = None,
        stitch: bool = False,
    ) -> tuple[list[str], list[str]]:
        """Encoder-decoders: replace the encoder by a fresh one of another width or by a donor's, or stitch a
        donor's in behind a learned linear map (see BART)."""
        raise ValueError(f"the {self.arch} family has no separate encoder to swap")

    # -- init -------------------------------------------------------------------------------------------------------
    def init_std(self, model: nn.Module) -> float:
        return float(getattr(model.config, "initializer_range", 0.02))

    def fresh_init_(self, model: nn.Module, names: list[str], generator: torch.Generator) -> None:
        """The family's own init, as explicit torch calls (library ``_init_weights`` skips loaded tensors in
        transformers v5). Default: norms weight 1 / bias 0; biases 0; other weights N(0, std); an embedding's
        padding row 0. Subclasses adjust ``std_for``."""
        modules = dict(model.named_modules())
        params = dict(model.named_parameters())
        with torch.no_grad():
            for name in names:
                module_name, kind = name.rsplit(".", 1)
                module, p = modules[module_name], params[name]
                if is_norm(module):
                    (nn.init.ones_ if kind == "weight" else nn.init.zeros_)(p)
                elif kind == "bias" or p.ndim < 2:
                    nn.init.zeros_(p)
                else:
                    # drawn on the CPU, where the cell's generator lives, then copied: a cell's fresh weights are
                    # the same numbers on every device (a CUDA tensor cannot be drawn from a CPU generator)
                    draw = torch.empty(p.shape, dtype=p.dtype).normal_(
                        0.0, self.std_for(model, name), generator=generator
                    )
                    p.copy_(draw)
                    padding_idx = getattr(module, "padding_idx", None)
                    if isinstance(module, nn.Embedding) and padding_idx is not None:
                        p[padding_idx].zero_()

    def std_for(self, model: nn.Module, name: str) -> float:
        return self.init_std(model)

    def output_projection_names(self, model: nn.Module, names: list[str]) -> list[str]:
        """Those of ``names`` that belong to a layer's output projections (weights and biases)."""
        wanted = tuple(
            layer.prefix + p for layer in self.layers(model) for p in self.output_projections.get(layer.stack, ())
        )
        return [n for n in names if n.startswith(wanted)] if wanted else []

    def zero_out_init_(self, model: nn.Module, names: list[str], generator: torch.Generator) -> None:
        """The ``fresh`` draw (``fresh_init_``, the same generator, so every other tensor gets the fresh cell's
        values), then the output projections among ``names`` set to zero: each reset sublayer adds exactly zero to
        the residual stream, so a layer reset in full passes its input through (pre-LN) or through its own layer
        norms only (post-LN)."""
        self.fresh_init_(model, names, generator)
        params = dict(model.named_parameters())
        with torch.no_grad():
            for name in self.output_projection_names(model, names):
                params[name].zero_()

    # -- forward ----------------------------------------------------------------------------------------------------
    def loss(self, model: nn.Module, batch: dict, grad_from: int, per_row: bool = False) -> torch.Tensor:
        """Mean training loss of a batch; every layer of depth < ``grad_from`` (and the embeddings, when
        ``grad_from`` > 0) runs under ``no_grad``. ``per_row``: each row's own mean instead (``token_loss``)."""
        raise NotImplementedError

    @staticmethod
    def grad_if(depth: int, grad_from: int):
        return contextlib.nullcontext() if depth >= grad_from else torch.no_grad()

    # -- building ---------------------------------------------------------------------------------------------------
    def build(self, model_cfg: dict, special: dict[str, int]) -> nn.Module:
        raise NotImplementedError


class SingleStack(Family):
    """A family with one stack of layers (GPT-2, BERT, Llama). Its forward comes in pieces, so training can start
    from hidden states cached at some depth (the frozen prefix computed once, see ``prefix_cache``)."""

    stacks = ("",)
    may_have_dropout = True  # a downloaded checkpoint's config may enable dropout (Llama has none)

    def embed(self, model: nn.Module, batch: dict) -> torch.Tensor:
        raise NotImplementedError

    def pieces(self, model: nn.Module, batch: dict, hidden: torch.Tensor) -> dict:
        """What every layer call needs besides the hidden states (masks, positions), rebuilt from the batch."""
        raise NotImplementedError

    def call_layer(self, layer: nn.Module, hidden: torch.Tensor, pieces: dict) -> torch.Tensor:
        raise NotImplementedError

    @staticmethod
    def causal_pieces(model: nn.Module, hidden: torch.Tensor) -> dict:
        """Causal mask and position ids for decoder-only families (None mask: SDPA's own causal path)."""
        from transformers.masking_utils import create_causal_mask

        position_ids = torch.arange(hidden.shape[1], device=hidden.device).unsqueeze(0)
        mask = create_causal_mask(
            config=model.config,
            inputs_embeds=hidden,
            attention_mask=None,
            past_key_values=None,
            position_ids=position_ids,
        )
        return {"mask": mask, "position_ids": position_ids}

    def head_loss(self, model: nn.Module, hidden: torch.Tensor, batch: dict, per_row: bool = False) -> torch.Tensor:
        raise NotImplementedError

    def loss(self, model, batch, grad_from, hidden=None, from_depth=0, per_row=False):
        """``hidden``: the hidden states entering layer ``from_depth`` (a cached frozen prefix), else None."""
        if hidden is None:
            with self.grad_if(0, grad_from):
                hidden = self.embed(model, batch)
            from_depth = 0
        pieces = self.pieces(model, batch, hidden)
        layers = self.stack_modules(model, "")
        for depth in range(from_depth, len(layers)):
            with self.grad_if(depth, grad_from):
                hidden = self.call_layer(layers[depth], hidden, pieces)
        return self.head_loss(model, hidden, batch, per_row)

    def prefix(
        self, model: nn.Module, batch: dict, depth: int, hidden: torch.Tensor | None = None, from_depth: int = 0
    ) -> torch.Tensor:
        """Hidden states entering layer ``depth`` (the output of the frozen layers below it), from the embeddings or
        from ``hidden``, the states entering layer ``from_depth`` (a shallower prefix); no gradient."""
        with torch.no_grad():
            if hidden is None:
                hidden, from_depth = self.embed(model, batch), 0
            pieces = self.pieces(model, batch, hidden)
            for layer in self.stack_modules(model, "")[from_depth:depth]:
                hidden = self.call_layer(layer, hidden, pieces)
            return hidden


def token_loss(logits: torch.Tensor, labels: torch.Tensor, per_row: bool = False) -> torch.Tensor:
    """Cross-entropy of ``logits`` (rows x positions x vocabulary) against ``labels`` (rows x positions; -100 is no
    target): the mean over every target of the batch, or with ``per_row`` each row's mean over its own targets (a
    row without targets is NaN, as the mean of an empty batch is), the same numbers a forward of that row alone
    gives up to float rounding."""
    flat = logits.reshape(-1, logits.shape[-1]).float()
    if not per_row:
        return F.cross_entropy(flat, labels.reshape(-1), ignore_index=-100)
    tokens = F.cross_entropy(flat, labels.reshape(-1), ignore_index=-100, reduction="none").view(labels.shape)
    return tokens.sum(1) / (labels != -100).sum(1)


def is_norm(module: nn.Module) -> bool:
    name = type(module).__name__
    return isinstance(module, nn.LayerNorm) or "LayerNorm" in name or "RMSNorm" in name
