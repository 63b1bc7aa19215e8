"""Defaults of every config key (documented in docs/configuration.md); a config overrides any of them."""

from __future__ import annotations

DEFAULTS: dict = {
    "results_dir": "results",
    "corpus": {
        "source": "shakespeare",
        "val_fraction": 0.1,
        "split_seed": 0,
        "hf": {"config": None, "train_split": "train", "val_split": "validation", "text_column": "text"},
    },
    "tokenizer": {"vocab_size": 2048},
    "pretrain": {
        "epochs": 2,
        "train_sequences": None,
        "batch_size": 32,
        "lr": 3e-3,
        "min_lr_fraction": 0.1,
        "warmup_fraction": 0.05,
        "weight_decay": 0.1,
        "grad_clip": 1.0,
        "eval_every_examples": 2048,
        "checkpoint_every_steps": 100,
        "seeds": [0],
        "plateau_check": None,
    },
    "retrain": {
        "lr": 1e-3,
        "batch_size": 32,
        "warmup_steps": 10,
        "weight_decay": 0.0,
        "grad_clip": 1.0,
        "eval_every_examples": 512,
        "checkpoint_every_steps": 50,
        "prefix_cache_mb": 4096,
        "optimizer": "adamw",
        "budget_fraction": 1.0,
        "budget_scratch": None,
        "thresholds": [0.01, 0.02, 0.05, 0.10],
        "resolution": 0.1,
    },
    "eval": {"val_sequences": 256, "batch_size": 64, "confirm_sequences": None},
    "grid": {
        "layers": "all",
        "policies": ["full"],
        "inits": ["fresh"],
        "regimes": ["frozen"],
        "seeds": [0, 1],
        "controls": True,
        "matched_controls": "first_seed",
        "targets": [],
        "encoder_swap": [],
    },
    "threads": 1,
    "job_unit": "auto",
    "hardware": {"device": "auto", "precision": "fp32", "tf32": True, "fused_adamw": True, "compile": None},
}
MODEL_DEFAULTS = {"source": "scratch", "arch": "gpt2", "context": 64, "dropout": 0.0}
