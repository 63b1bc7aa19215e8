"""BERT (``BertForMaskedLM``, or a bare ``BertModel``): post-LN blocks ``bert.encoder.layer.<i>`` = attention
(self + output.dense + output.LayerNorm), intermediate, output (dense + LayerNorm); MLM head tied to the word
embeddings."""

from __future__ import annotations

from selfheal.models.families.base import SingleStack, token_loss


class BERT(SingleStack):
    arch = "bert"
    model_type = "bert"
    objective = "masked_lm"
    components = {
        "": {
            "self_attn": ("attention.self.", "attention.output.dense."),
            "mlp": ("intermediate.", "output.dense."),
            "ln": ("attention.output.LayerNorm.", "output.LayerNorm."),
        }
    }
    output_projections = {"": ("attention.output.dense.", "output.dense.")}

    @staticmethod
    def _base(model):
        """The ``BertModel`` inside a head model, or the model itself when it is bare (loaded with AutoModel)."""
        return model.bert if hasattr(model, "bert") else model

    @staticmethod
    def _base_prefix(model) -> str:
        return "bert." if hasattr(model, "bert") else ""

    def stack_prefix(self, model, stack):
        return f"{self._base_prefix(model)}encoder.layer."

    def stack_modules(self, model, stack):
        return self._base(model).encoder.layer

    def embedding_names(self, model):
        p = f"{self._base_prefix(model)}embeddings."
        return [
            f"{p}word_embeddings.weight",
            f"{p}position_embeddings.weight",
            f"{p}token_type_embeddings.weight",
            f"{p}LayerNorm.weight",
            f"{p}LayerNorm.bias",
        ]

    def build(self, model_cfg, special):
        from transformers import BertConfig, BertForMaskedLM

        d_model = model_cfg["d_model"]
        config = BertConfig(
            vocab_size=special["vocab_size"],
            hidden_size=d_model,
            num_hidden_layers=model_cfg["n_layer"],
            num_attention_heads=model_cfg["n_head"],
            intermediate_size=model_cfg.get("d_ff") or 4 * d_model,
            max_position_embeddings=model_cfg["context"],
            hidden_dropout_prob=model_cfg["dropout"],
            attention_probs_dropout_prob=model_cfg["dropout"],
            type_vocab_size=1,  # single-segment inputs: a second token-type row would never be trained
            pad_token_id=special["pad"],
            tie_word_embeddings=True,
        )
        return BertForMaskedLM(config)

    def embed(self, model, batch):
        if not hasattr(model, "cls"):
            raise TypeError("BERT loss needs a BertForMaskedLM (a bare BertModel has no MLM head)")
        return model.bert.embeddings(input_ids=batch["input_ids"])

    def pieces(self, model, batch, hidden):
        from transformers.masking_utils import create_bidirectional_mask

        return {
            "mask": create_bidirectional_mask(
                config=model.config, inputs_embeds=hidden, attention_mask=batch.get("attention_mask")
            )
        }

    def call_layer(self, layer, hidden, pieces):
        return layer(hidden, pieces["mask"])

    def head_loss(self, model, hidden, batch, per_row=False):
        return token_loss(model.cls(hidden), batch["labels"], per_row)
