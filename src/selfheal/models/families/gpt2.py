"""GPT-2 (``GPT2LMHeadModel``): pre-LN blocks ``transformer.h.<i>`` = ln_1, attn, ln_2, mlp; tied LM head."""

from __future__ import annotations

import math

from selfheal.models.families import frozen_head
from selfheal.models.families.base import SingleStack, torch


class GPT2(SingleStack):
    arch = "gpt2"
    model_type = "gpt2"
    objective = "causal_lm"
    components = {"": {"self_attn": ("attn.",), "mlp": ("mlp.",), "ln": ("ln_1.", "ln_2.")}}
    output_projections = {"": ("attn.c_proj.", "mlp.c_proj.")}

    def stack_prefix(self, model, stack):
        return "transformer.h."

    def stack_modules(self, model, stack):
        return model.transformer.h

    def embedding_names(self, model):
        return ["transformer.wte.weight", "transformer.wpe.weight"]

    def std_for(self, model, name):
        # GPT-2 scales the residual projections by 1/sqrt(2N) (two residual branches per block).
        std = self.init_std(model)
        if name.endswith("c_proj.weight"):
            return std / math.sqrt(2 * model.config.n_layer)
        return std

    def build(self, model_cfg, special):
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(
            vocab_size=special["vocab_size"],
            n_positions=model_cfg["context"],
            n_embd=model_cfg["d_model"],
            n_layer=model_cfg["n_layer"],
            n_head=model_cfg["n_head"],
            resid_pdrop=model_cfg["dropout"],
            embd_pdrop=model_cfg["dropout"],
            attn_pdrop=model_cfg["dropout"],
            bos_token_id=special["eos"],
            eos_token_id=special["eos"],
            pad_token_id=special["pad"],
            tie_word_embeddings=True,
            # the exact (erf) GELU, as nanoGPT builds GPT-2, rather than GPT-2's tanh approximation ("gelu_new"):
            # on a CPU (PyTorch's AVX2 kernels) the tanh GELU and its gradient took 4x the erf one's time, about 16 %
            # of a training step at D = 64 (docs/performance.md). Downloaded GPT-2 checkpoints keep their own.
            activation_function="gelu",
        )
        return GPT2LMHeadModel(config)

    def embed(self, model, batch):
        ids = batch["input_ids"]
        t = model.transformer
        position_ids = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        return t.drop(t.wte(ids) + t.wpe(position_ids))

    def pieces(self, model, batch, hidden):
        return self.causal_pieces(model, hidden)

    def call_layer(self, layer, hidden, pieces):
        return layer(hidden, None, pieces["mask"], None, use_cache=False, position_ids=pieces["position_ids"])

    def head_loss(self, model, hidden, batch, per_row=False):
        # the last position predicts nothing: drop it before the head rather than slicing (copying) the logits
        features = model.transformer.ln_f(hidden[:, :-1])
        return frozen_head.head_loss(features, model.lm_head, batch["input_ids"][:, 1:], per_row)
