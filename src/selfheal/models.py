"""Building models from config, and saving/loading them (safetensors only)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from selfheal import adapters


def build(model_cfg: dict, vocab_size: int, eos_token_id: int, seed: int) -> nn.Module:
    """A fresh model of the configured family, initialised by the adapter's own explicit init (this is theta0)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    if model_cfg["arch"] != "gpt2":
        raise ValueError(f"unknown arch {model_cfg['arch']!r}")
    config = GPT2Config(
        vocab_size=vocab_size,
        n_positions=model_cfg["context"],
        n_embd=model_cfg["d_model"],
        n_layer=model_cfg["n_layer"],
        n_head=model_cfg["n_head"],
        resid_pdrop=model_cfg["dropout"],
        embd_pdrop=model_cfg["dropout"],
        attn_pdrop=model_cfg["dropout"],
        bos_token_id=eos_token_id,
        eos_token_id=eos_token_id,
        tie_word_embeddings=True,
    )
    model = GPT2LMHeadModel(config)
    adapter = adapters.for_model(model)
    generator = torch.Generator().manual_seed(seed)
    adapter.fresh_init_(model, [n for n, _ in model.named_parameters()], generator)
    return model


def save(model: nn.Module, out_dir: str | Path) -> None:
    model.save_pretrained(str(out_dir), safe_serialization=True)


def load(model_dir: str | Path) -> nn.Module:
    """Load a saved model; only safetensors weights are accepted (never a pickle)."""
    from transformers import AutoModelForCausalLM

    model_dir = Path(model_dir)
    if not (model_dir / "model.safetensors").is_file() and not list(model_dir.glob("model-*.safetensors")):
        raise FileNotFoundError(f"{model_dir}: no safetensors weights (pickled checkpoints are refused)")
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), use_safetensors=True, attn_implementation="sdpa")
    return model.eval()


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
