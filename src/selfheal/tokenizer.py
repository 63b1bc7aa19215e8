"""A byte-level BPE tokenizer trained on the train split only, used through ``PreTrainedTokenizerFast``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

EOS = "<|endoftext|>"


def train(works: pd.DataFrame, vocab_size: int, out_path: str | Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    train_texts = works.loc[works["split"] == "train", "text"].tolist()
    tokenizer.train_from_iterator(train_texts, trainer=trainer, length=len(train_texts))
    tokenizer.save(str(out_path))


def load(path: str | Path):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token=EOS)
