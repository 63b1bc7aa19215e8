"""Token streams and the fixed-length sequences that models train and evaluate on.

The tokenized corpus is one flat stream per split (works joined by EOS), stored as safetensors. Each model cuts it
into non-overlapping blocks of its context length: the first S train blocks after a seeded shuffle are the
training set, and ``val_sequences`` blocks spread evenly over the validation stream are the fixed validation set.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch
from safetensors.torch import load_file, save_file

from selfheal.data import tokenizer as tok


def special_ids(tokenizer) -> dict[str, int]:
    """Vocabulary size and the special token ids the objectives need (-1 where the tokenizer has none)."""
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    mask = tokenizer.mask_token_id if tokenizer.mask_token_id is not None else -1
    return {"vocab_size": len(tokenizer), "eos": int(eos), "pad": int(pad), "mask": int(mask)}


def tokenize(works: pd.DataFrame, tokenizer_path: str | Path, out_path: str | Path) -> dict[str, int]:
    """Tokenize both splits with our BPE (a tokenizer.json) or a pretrained model's tokenizer (a folder)."""
    tokenizer = tok.load(tokenizer_path)
    streams = {}
    for split in ("train", "val"):
        texts = works.loc[works["split"] == split, "text"].tolist()
        ids: list[int] = []
        for encoded in tokenizer(texts, add_special_tokens=False)["input_ids"]:
            ids.extend(encoded)
            ids.append(special_ids(tokenizer)["eos"])
        streams[split] = torch.tensor(ids, dtype=torch.int32)
    save_file(streams, str(out_path), metadata={k: str(v) for k, v in special_ids(tokenizer).items()})
    return {split: int(t.numel()) for split, t in streams.items()}


def vocabulary(tokens_path: str | Path) -> dict[str, int]:
    """Vocabulary size and special token ids of the tokenizer that made a token file."""
    from safetensors import safe_open

    with safe_open(str(tokens_path), "pt") as f:
        return {k: int(v) for k, v in f.metadata().items()}


def blocks(stream: torch.Tensor, context: int) -> torch.Tensor:
    n = stream.numel() // context
    return stream[: n * context].view(n, context).long()


def train_sequences(tokens_path: str | Path, context: int, count: int | None, seed: int) -> torch.Tensor:
    """The S training sequences: a seeded subset (all when count is None), in a fixed order."""
    train = blocks(load_file(str(tokens_path))["train"], context)
    order = torch.randperm(train.shape[0], generator=torch.Generator().manual_seed(seed))
    if count is not None:
        if count > train.shape[0]:
            raise ValueError(f"pretrain.train_sequences={count} but the train split has only {train.shape[0]} blocks")
        order = order[:count]
    return train[order.sort().values]


def val_sequences(tokens_path: str | Path, context: int, count: int | None) -> torch.Tensor:
    """``count`` blocks of the validation split spread evenly over it (None: every block)."""
    val = blocks(load_file(str(tokens_path))["val"], context)
    if count is None:
        return val
    if count > val.shape[0]:
        raise ValueError(f"eval.val_sequences={count} but the validation split has only {val.shape[0]} blocks")
    index = torch.linspace(0, val.shape[0] - 1, count).round().long()
    return val[index]


def epoch_order(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The data order of one epoch: a permutation fixed by (seed, epoch)."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))
