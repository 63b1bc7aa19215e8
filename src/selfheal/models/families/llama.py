"""Llama (``LlamaForCausalLM``): pre-RMSNorm blocks ``model.layers.<i>`` = input_layernorm, self_attn (RoPE),
post_attention_layernorm, SwiGLU mlp; final ``model.norm``; LM head tied to the token embeddings."""

from __future__ import annotations

from selfheal.models.families.base import SingleStack
from selfheal.models.families import frozen_head


class Llama(SingleStack):
    arch = "llama"
    model_type = "llama"
    objective = "causal_lm"
    may_have_dropout = False  # as built here and as loaded: attention_dropout 0, no residual dropout
    components = {
        "": {"self_attn": ("self_attn.",), "mlp": ("mlp.",), "ln": ("input_layernorm.", "post_attention_layernorm.")}
    }
    output_projections = {"": ("self_attn.o_proj.", "mlp.down_proj.")}

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
            # no config key: a model built here has as many key/value heads as heads; a test builds a grouped-query
            # checkpoint (SmolLM2's kind) with n_kv_head
            num_key_value_heads=model_cfg.get("n_kv_head") or model_cfg["n_head"],
            max_position_embeddings=model_cfg["context"],
            pad_token_id=special["pad"],
            bos_token_id=special["eos"],
            eos_token_id=special["eos"],
            tie_word_embeddings=True,
        )
        return LlamaForCausalLM(config)

    def embed(self, model, batch):
        return model.model.embed_tokens(batch["input_ids"])

    def pieces(self, model, batch, hidden):
        pieces = self.causal_pieces(model, hidden)
        pieces["position_embeddings"] = model.model.rotary_emb(hidden, position_ids=pieces["position_ids"])
        return pieces

    def call_layer(self, layer, hidden, pieces):
        return layer(
            hidden,
            attention_mask=pieces["mask"],
            position_embeddings=pieces["position_embeddings"],
            position_ids=pieces["position_ids"],
        )

    def head_loss(self, model, hidden, batch, per_row=False):
        features = model.model.norm(hidden[:, :-1])
        return frozen_head.head_loss(features, model.lm_head, batch["input_ids"][:, 1:], per_row)
