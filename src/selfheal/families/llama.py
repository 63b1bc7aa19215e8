"""Llama (``LlamaForCausalLM``): pre-RMSNorm blocks ``model.layers.<i>`` = input_layernorm, self_attn (RoPE),
post_attention_layernorm, SwiGLU mlp; final ``model.norm``; LM head tied to the token embeddings."""

from __future__ import annotations

import torch

from selfheal.families.base import Family
from selfheal.families.gpt2 import causal_lm_loss


class Llama(Family):
    arch = "llama"
    model_type = "llama"
    objective = "causal_lm"
    stacks = ("",)
    components = {"": {"self_attn": ("self_attn.",), "mlp": ("mlp.",),
                       "ln": ("input_layernorm.", "post_attention_layernorm.")}}

    def stack_prefix(self, model, stack):
        return "model.layers."

    def stack_modules(self, model, stack):
        return model.model.layers

    def embedding_names(self, model):
        return ["model.embed_tokens.weight"]

    def build(self, model_cfg, special):
        from transformers import LlamaConfig, LlamaForCausalLM

        d_model = model_cfg["d_model"]
        d_ff = model_cfg.get("d_ff") or -(-int(8 * d_model / 3) // 8) * 8  # SwiGLU width 8/3 d, up to a multiple of 8
        config = LlamaConfig(
            vocab_size=special["vocab_size"],
            hidden_size=d_model,
            intermediate_size=d_ff,
            num_hidden_layers=model_cfg["n_layer"],
            num_attention_heads=model_cfg["n_head"],
            num_key_value_heads=model_cfg.get("n_kv_head") or model_cfg["n_head"],
            max_position_embeddings=model_cfg["context"],
            pad_token_id=special["pad"],
            bos_token_id=special["eos"],
            eos_token_id=special["eos"],
            tie_word_embeddings=True,
        )
        return LlamaForCausalLM(config)

    def loss(self, model, batch, grad_from):
        from transformers.masking_utils import create_causal_mask

        ids = batch["input_ids"]
        mm = model.model
        position_ids = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        with self.grad_if(0, grad_from):
            hidden = mm.embed_tokens(ids)
        mask = create_causal_mask(config=model.config, inputs_embeds=hidden, attention_mask=None,
                                  past_key_values=None, position_ids=position_ids)
        position_embeddings = mm.rotary_emb(hidden, position_ids=position_ids)
        for depth, layer in enumerate(mm.layers):
            with self.grad_if(depth, grad_from):
                hidden = layer(hidden, attention_mask=mask, position_embeddings=position_embeddings,
                               position_ids=position_ids)
        logits = model.lm_head(mm.norm(hidden))
        return causal_lm_loss(logits, ids)
