"""A byte-level BPE tokenizer trained on the train split only, used through ``PreTrainedTokenizerFast``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

EOS = "<|endoftext|>"
PAD = "<pad>"
MASK = "<mask>"


def train(works: pd.DataFrame, vocab_size: int, out_path: str | Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS, PAD, MASK],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    train_texts = works.loc[works["split"] == "train", "text"].tolist()
    tokenizer.train_from_iterator(train_texts, trainer=trainer, length=len(train_texts))
    tokenizer.save(str(out_path))


def load(path: str | Path):
    """Our BPE (a ``tokenizer.json`` file) or a pretrained model's own tokenizer (its folder)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path = Path(path)
    if path.is_dir():
        return AutoTokenizer.from_pretrained(str(path))
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token=EOS, pad_token=PAD, mask_token=MASK)
