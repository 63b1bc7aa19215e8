"""BART (``BartForConditionalGeneration``): post-LN encoder blocks ``model.encoder.layers.<i>`` = self_attn, fc1/fc2;
decoder blocks ``model.decoder.layers.<j>`` add cross-attention (``encoder_attn``). One token embedding
(``model.shared``) is shared by encoder, decoder and LM head; each stack has its own learned positions and
embedding LayerNorm.

Depths: encoder layer i is depth i, decoder layer j is depth n_enc + j. The shared token embedding and the
encoder's positions / embedding norm are depth 0; the decoder's positions / embedding norm are first used at the
start of the decoder, depth n_enc.
"""

from __future__ import annotations

from selfheal.models.families.base import Family, nn, token_loss

_ENC = "model.encoder."
_DEC = "model.decoder."
_STITCH = "model.encoder_stitch."  # a stitched donor encoder's learned linear map into the model's width


class BART(Family):
    arch = "bart"
    model_type = "bart"
    objective = "denoising"
    stacks = ("enc", "dec")
    components = {
        "enc": {
            "self_attn": ("self_attn.",),
            "mlp": ("fc1.", "fc2."),
            "ln": ("self_attn_layer_norm.", "final_layer_norm."),
        },
        "dec": {
            "self_attn": ("self_attn.",),
            # the cross-attention's own post-LN counts with it, so that "ln" and "cross_attn" do not overlap
            "cross_attn": ("encoder_attn.", "encoder_attn_layer_norm."),
            "mlp": ("fc1.", "fc2."),
            "ln": ("self_attn_layer_norm.", "final_layer_norm."),
        },
    }
    output_projections = {
        "enc": ("self_attn.out_proj.", "fc2."),
        "dec": ("self_attn.out_proj.", "encoder_attn.out_proj.", "fc2."),
    }

    def stack_prefix(self, model, stack):
        return {"enc": f"{_ENC}layers.", "dec": f"{_DEC}layers."}[stack]

    def stack_modules(self, model, stack):
        return {"enc": model.model.encoder, "dec": model.model.decoder}[stack].layers

    def embedding_names(self, model):
        return [
            "model.shared.weight",
            f"{_ENC}embed_positions.weight",
            f"{_ENC}layernorm_embedding.weight",
            f"{_ENC}layernorm_embedding.bias",
            f"{_DEC}embed_positions.weight",
            f"{_DEC}layernorm_embedding.weight",
            f"{_DEC}layernorm_embedding.bias",
        ]

    def depth_of(self, model, name):
        if name.startswith((f"{_DEC}embed_positions.", f"{_DEC}layernorm_embedding.")):
            return len(model.model.encoder.layers)
        if name.startswith(f"{_ENC}embed_tokens."):  # a swapped-in encoder's own token embedding
            return 0
        if name.startswith(_STITCH):  # read by the decoder's cross-attention, after the encoder
            return len(model.model.encoder.layers)
        return super().depth_of(model, name)

    def swap_encoder(
        self, model, d_model: int | None, generator, donor=None, stitch: bool = False
    ) -> tuple[list[str], list[str]]:
        """Replace the trained encoder by a freshly initialised one of width ``d_model`` (same depth and head width,
        its own token embedding), or by a copy of ``donor``'s trained encoder (another BART's, with its own token
        embedding and positions); wipe every decoder cross-attention, its key and value projections re-sized to
        read the new encoder's width. Returns the names of the new encoder's tensors and of the wiped
        cross-attention's.

        ``stitch``: the donor's encoder is stitched in instead: its output passes through a learned linear map into
        this model's width (``model.encoder_stitch``, drawn fresh) and the cross-attention keeps its trained
        values. Returns the map's tensor names and no cross-attention."""
        import copy

        from transformers.models.bart.modeling_bart import BartEncoder

        anchor = next(model.parameters())  # the new parts are built where the model lives (a GPU swap stays on it)
        if stitch:
            if donor is None:
                raise ValueError("stitching needs a donor's trained encoder")
            encoder = copy.deepcopy(donor.model.encoder).to(device=anchor.device, dtype=anchor.dtype)
            model.model.encoder = encoder
            link = nn.Linear(encoder.config.d_model, model.config.d_model)
            model.model.encoder_stitch = link.to(device=anchor.device, dtype=anchor.dtype)
            names = [n for n, _ in model.named_parameters() if n.startswith(_STITCH)]
            self.fresh_init_(model, names, generator)
            return names, []
        if donor is not None:
            encoder = copy.deepcopy(donor.model.encoder)
        else:
            old = model.config
            head_dim = old.d_model // old.encoder_attention_heads
            heads = d_model // head_dim if d_model % head_dim == 0 and d_model >= head_dim else 1
            config = type(old).from_dict(
                {**old.to_dict(), "d_model": d_model, "encoder_attention_heads": heads, "encoder_ffn_dim": 4 * d_model}
            )
            config._attn_implementation = old._attn_implementation
            encoder = BartEncoder(config)
        model.model.encoder = encoder.to(device=anchor.device, dtype=anchor.dtype)
        width = encoder.config.d_model
        for layer in model.model.decoder.layers:
            attn = layer.encoder_attn
            for name in ("k_proj", "v_proj"):
                old_proj = getattr(attn, name)
                resized = nn.Linear(width, old_proj.out_features, bias=old_proj.bias is not None)
                setattr(attn, name, resized.to(device=anchor.device, dtype=anchor.dtype))
        new = [n for n, _ in model.named_parameters() if n.startswith(_ENC)]
        cross = [
            n
            for layer in self.layers(model)
            if layer.stack == "dec"
            for n in self.param_names(model, layer.id, "cross_attn")
        ]
        self.fresh_init_(model, cross if donor is not None else new + cross, generator)
        return new, cross

    def init_std(self, model):
        return float(model.config.init_std)  # BART's config calls it init_std, not initializer_range

    def build(self, model_cfg, special):
        from transformers import BartConfig, BartForConditionalGeneration

        d_model = model_cfg["d_model"]
        d_ff = model_cfg.get("d_ff") or 4 * d_model
        config = BartConfig(
            vocab_size=special["vocab_size"],
            d_model=d_model,
            encoder_layers=model_cfg["n_layer"],
            decoder_layers=model_cfg.get("n_dec_layer") or model_cfg["n_layer"],
            encoder_attention_heads=model_cfg["n_head"],
            decoder_attention_heads=model_cfg["n_head"],
            encoder_ffn_dim=d_ff,
            decoder_ffn_dim=d_ff,
            # Infilled inputs are never longer than the original sequence, and BartLearnedPositionalEmbedding
            # already adds its own 2 offset rows: `context` positions suffice.
            max_position_embeddings=model_cfg["context"],
            dropout=model_cfg["dropout"],
            attention_dropout=0.0,
            activation_dropout=0.0,
            encoder_layerdrop=0.0,
            decoder_layerdrop=0.0,
            pad_token_id=special["pad"],
            bos_token_id=special["eos"],
            eos_token_id=special["eos"],
            decoder_start_token_id=special["eos"],
            forced_bos_token_id=None,
            forced_eos_token_id=None,
            tie_word_embeddings=True,
            scale_embedding=False,
        )
        return BartForConditionalGeneration(config)

    def loss(self, model, batch, grad_from, per_row=False):
        from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
        from transformers.models.bart.modeling_bart import shift_tokens_right

        ids, labels = batch["input_ids"], batch["labels"]
        attention_mask = batch.get("attention_mask")
        config = model.config
        enc, dec = model.model.encoder, model.model.decoder
        n_enc = len(enc.layers)

        # encoder: embeddings (depth 0), layers 0 .. n_enc-1
        with self.grad_if(0, grad_from):
            enc_embeds = enc.embed_tokens(ids)
            hidden = enc.layernorm_embedding(enc_embeds + enc.embed_positions(ids))
            hidden = nn.functional.dropout(hidden, p=enc.dropout, training=enc.training)
        enc_mask = create_bidirectional_mask(config=enc.config, inputs_embeds=enc_embeds, attention_mask=attention_mask)
        for i, layer in enumerate(enc.layers):
            with self.grad_if(i, grad_from):
                hidden = layer(hidden, enc_mask)
        stitch = getattr(model.model, "encoder_stitch", None)
        if stitch is not None:  # a stitched donor encoder: its output mapped into the decoder's width
            with self.grad_if(n_enc, grad_from):
                hidden = stitch(hidden)

        # decoder: the token lookup uses the shared embedding (depth 0); the decoder's own positions and
        # embedding norm belong to depth n_enc, as do its layers n_enc + j.
        dec_ids = shift_tokens_right(labels, config.pad_token_id, config.decoder_start_token_id)
        with self.grad_if(0, grad_from):
            dec_embeds = dec.embed_tokens(dec_ids)
        with self.grad_if(n_enc, grad_from):
            out = dec.layernorm_embedding(dec_embeds + dec.embed_positions(dec_ids))
            out = nn.functional.dropout(out, p=dec.dropout, training=dec.training)
        self_mask = create_causal_mask(
            config=dec.config, inputs_embeds=dec_embeds, attention_mask=None, past_key_values=None
        )
        cross_mask = create_bidirectional_mask(
            config=dec.config, inputs_embeds=dec_embeds, attention_mask=attention_mask, encoder_hidden_states=hidden
        )
        for j, layer in enumerate(dec.layers):
            with self.grad_if(n_enc + j, grad_from):
                out = layer(out, self_mask, hidden, encoder_attention_mask=cross_mask, use_cache=False)

        logits = model.lm_head(out) + model.final_logits_bias.to(out.dtype)
        return token_loss(logits, labels, per_row)
