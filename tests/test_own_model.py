"""Your own model (docs/configuration.md, "Your own model"): a GPT-2 saved with ``save_pretrained`` beside its
tokenizer, the documented config as written there, through the real workflow: checked, adapted to the corpus,
every layer healed, an answer page. The model is small (N = 2, D = 32, as the default's smallest) and its
adaptation is cut at 6 epochs to fit the suite, so the page need not state an answer (whether a model of one's
own on one's own text answers is tests/test_own_text.py's question, and the gates' on the page)."""

import pandas as pd
import pytest
import torch
import yaml
from snakemake_helpers import documented_model, snakemake

from selfheal.config.merge import merge

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
    configfile = documented_model(tmp_path, trained=_trained)  # the user's side: a GPT-2 and its tokenizer
    config = yaml.safe_load(configfile.read_text())
    assert config["models"][0]["name_or_path"] == "my_model" and (tmp_path / "my_model" / "tokenizer.json").is_file()
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
