"""Frozen random components (Bogoychev 2021): which tensors each component names, the config that asks for it,
pretraining that keeps the frozen tensors at θ0 bit for bit, and the table and plot."""

import json

import pytest
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from test_pretrained import save_local_model

from selfheal import config, grid, models
from selfheal.models import families
from selfheal.experiments import config as experiments_config
from selfheal.experiments import frozen_pretrain, frozen_random, frozen_random_plot
from selfheal.analysis import plots
from selfheal.training import pretrain

SPECIAL = {"vocab_size": 64, "eos": 0, "pad": 1, "mask": 2}
GPT2 = {"name": "g", "arch": "gpt2", "n_layer": 2, "d_model": 16, "n_head": 2, "context": 16, "dropout": 0.0}
BART = {
    "name": "b",
    "arch": "bart",
    "n_layer": 1,
    "n_dec_layer": 2,
    "d_model": 16,
    "n_head": 2,
    "context": 16,
    "dropout": 0.0,
}


def _names(cfg, components):
    model = models.build(cfg, SPECIAL, seed=0)
    family = families.for_model(model)
    return model, set(frozen_random.frozen_names(family, model, components))


def test_gpt2_components():
    model, embeddings = _names(GPT2, ["embeddings"])
    assert embeddings == {"transformer.wte.weight", "transformer.wpe.weight"}  # the LM head is tied to wte
    assert "lm_head.weight" not in dict(model.named_parameters())
    _, attention = _names(GPT2, ["attention"])
    _, ffn = _names(GPT2, ["ffn"])
    assert attention == {n for n, _ in model.named_parameters() if ".attn." in n}
    assert ffn == {n for n, _ in model.named_parameters() if ".mlp." in n}
    _, both = _names(GPT2, ["ffn", "attention"])
    assert both == attention | ffn
    left = set(dict(model.named_parameters())) - embeddings - attention - ffn
    assert left == {n for n, _ in model.named_parameters() if ".ln_" in n}  # only the layer norms always train


def test_bart_attention_includes_cross_attention_and_norms_stay_trainable():
    model, attention = _names(BART, ["attention"])
    params = set(dict(model.named_parameters()))
    cross = {n for n in params if ".encoder_attn." in n}
    assert len(cross) == 2 * 8 and cross <= attention  # q, k, v, out (weight + bias) in both decoder layers
    assert {n for n in params if ".self_attn." in n} <= attention
    _, embeddings = _names(BART, ["embeddings"])
    assert embeddings == {
        "model.shared.weight",
        "model.encoder.embed_positions.weight",
        "model.decoder.embed_positions.weight",
    }
    _, every = _names(BART, ["embeddings", "attention"])
    _, ffn = _names(BART, ["ffn"])
    assert ffn == {n for n in params if ".fc1." in n or ".fc2." in n}
    assert not any("norm" in n for n in every | ffn)  # layernorm_embedding, encoder_attn_layer_norm, ... train
    with pytest.raises(ValueError, match="unknown components"):
        _names(BART, ["heads"])


TINY_PRETRAIN = {  # at most one epoch of 64 sequences per copy of the lr race
    "max_epochs": 1,
    "patience": 1,
    "train_sequences": 64,
    "eval_every_examples": 32,
    "checkpoint_every_steps": 0,
    "seed": 0,
}
TINY_RECIPE = {"lrs": [3e-3, 1e-2, 3e-2, 1e-1], "max_lr_extensions": 0, "batch_size": 16, "warmup_steps": 2,
               "weight_decay": 0.1}  # fmt: skip


def pretrain_tiny(cfg: dict, tokens: str, out: Path):
    """Pretrain ``cfg`` on ``tokens`` (8 validation sequences) into ``out``: theta0/, trained/, curve and summary;
    the tiny recipe unless ``cfg`` has its own."""
    return pretrain.pretrain(
        {"recipe": TINY_RECIPE, **cfg},
        {"val_sequences": 8, "batch_size": 8},
        tokens,
        str(out / "theta0"),
        str(out / "trained"),
        str(out / "curve.parquet"),
        str(out / "pretrain.json"),
    )


def _tokens(tmp_path):
    g = torch.Generator().manual_seed(0)
    stream = torch.randint(3, 64, (16 * 80,), generator=g, dtype=torch.int32)
    path = tmp_path / "tokens.safetensors"
    save_file(
        {"train": stream, "val": stream[: 16 * 8].clone()}, str(path), metadata={k: str(v) for k, v in SPECIAL.items()}
    )
    return str(path)


@pytest.mark.parametrize(
    "base,components",
    [(GPT2, ["embeddings", "attention"]), (GPT2, ["ffn"]), (BART, ["attention", "ffn"])],
    ids=["gpt2-emb-attn", "gpt2-ffn", "bart-attn-ffn"],
)
def test_frozen_tensors_keep_theta0_bit_for_bit(tmp_path, base, components):
    cfg = {
        **base,
        "name": frozen_random.variant_name(base["name"], components),
        "base_model": base["name"],
        "frozen_components": components,
        "pretrain": TINY_PRETRAIN,
    }
    out = tmp_path / "m"
    summary = pretrain_tiny(cfg, _tokens(tmp_path), out)
    theta0 = load_file(str(out / "theta0" / "model.safetensors"))
    trained = load_file(str(out / "trained" / "model.safetensors"))
    model, frozen = _names(base, components)
    for name, _ in model.named_parameters():  # buffers (BART's final_logits_bias) are not parameters
        if name in frozen:
            assert torch.equal(theta0[name], trained[name]), name
        else:
            assert not torch.equal(theta0[name], trained[name]), name
    assert summary.frozen_params == sum(theta0[n].numel() for n in frozen) > 0
    assert summary.trainable_params + summary.frozen_params == summary.params
    assert summary.frozen_components == components and summary.base_model == base["name"]


def test_the_experiment_keeps_a_models_networks_and_trains_only_an_added_seed(tmp_path):
    """frozen_pretrain.make (the frozen_random_pretrain job): a model's networks, one per pretraining seed, linked
    into its folder with the frozen tensors at θ0; asked again with a seed added, it keeps the networks it made (the
    same files) and pretrains only the new one."""
    tokens = _tokens(tmp_path)
    cfg = {**GPT2, "name": "g.frozen-ffn", "base_model": "g", "frozen_components": ["ffn"]}
    out, work = tmp_path / "networks" / cfg["name"], tmp_path / "work" / cfg["name"]

    def networks(seeds):
        return [{**cfg, "pretrain": {**TINY_PRETRAIN, "seed": s}, "recipe": TINY_RECIPE} for s in seeds]

    eval_cfg = {"val_sequences": 8, "batch_size": 8}
    frozen_pretrain.make(networks([0]), eval_cfg, tokens, str(out), str(work), "p{pretrain_seed}")
    first = (out / "p0" / "trained" / "model.safetensors").stat()
    frozen_pretrain.make(networks([0, 1]), eval_cfg, tokens, str(out), str(work), "p{pretrain_seed}")
    again = (out / "p0" / "trained" / "model.safetensors").stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)  # kept, not trained again
    assert sorted(p.name for p in out.iterdir()) == ["p0", "p1"]
    for seed in (0, 1):
        theta0 = load_file(str(out / f"p{seed}" / "theta0" / "model.safetensors"))
        trained = load_file(str(out / f"p{seed}" / "trained" / "model.safetensors"))
        assert torch.equal(theta0["transformer.h.0.mlp.c_fc.weight"], trained["transformer.h.0.mlp.c_fc.weight"])
        assert not torch.equal(
            theta0["transformer.h.0.attn.c_attn.weight"], trained["transformer.h.0.attn.c_attn.weight"]
        )
        summary = json.loads((out / f"p{seed}" / "pretrain.json").read_text())
        assert (summary["pretrain_seed"], summary["base_model"], summary["frozen_components"]) == (seed, "g", ["ffn"])
    assert not (out / "p0" / "baseline.json").exists()  # the experiment compares losses, not baselines


# -- config ------------------------------------------------------------------------------------------------------


def _raw(sets):
    raw = {
        "models": [
            {"name": "a", "n_layer": 2, "d_model": 16, "n_head": 2},
            {"name": "b", "arch": "bart", "n_layer": 1, "d_model": 16, "n_head": 2, "frozen_random": sets},
        ]
    }
    return raw


def test_config_expands_derived_models_that_make_no_cells():
    resolved = experiments_config.resolve_whole(_raw([["ffn", "attention"], ["embeddings"]]))
    variants = frozen_random.variants(resolved)
    assert [v["name"] for v in variants] == ["b.frozen-attention-ffn", "b.frozen-embeddings"]
    assert variants[0]["frozen_components"] == ["attention", "ffn"] and variants[0]["base_model"] == "b"
    base = grid.model_by_name(resolved, "b")
    assert "frozen_random" not in base  # editing the sets never re-runs the base model
    for variant in variants:
        same = {k: v for k, v in variant.items() if k not in ("name", "base_model", "frozen_components")}
        assert same == {k: v for k, v in base.items() if k != "name"}  # same size, data, seed and schedule
        assert frozen_random.model_by_name(resolved, variant["name"]) is variant
    assert {c.model for c in grid.cells(resolved)} == {"a", "b"}
    assert [m["name"] for m in resolved["models"]] == ["a", "b"]


def test_bogoychev_config_pretrains_frozen_variants_but_no_extra_cells():
    resolved = experiments_config.load(Path(__file__).resolve().parents[1] / "config" / "bogoychev.yaml")
    variants = [v["name"] for v in frozen_random.variants(resolved)]
    assert variants and all(v.startswith("gpt2-n2-d64.frozen-") for v in variants)
    assert not {c.model for c in grid.cells(resolved)} & set(variants)


@pytest.mark.parametrize(
    "sets,key",
    [
        ([], "models[1].frozen_random"),
        ([[]], "models[1].frozen_random[0]"),
        ([["embeddings", "attention", "ffn"]], "models[1].frozen_random[0]"),
        ([["attention", "attention"]], "models[1].frozen_random[0]"),
        ([["ffn"], ["ffn"]], "models[1].frozen_random"),
        ([["ffn"], ["attention", "ffn"], ["ffn", "attention"]], "models[1].frozen_random[2]"),
        ([["heads"]], "models[1].frozen_random[0][0]"),
        ("attention", "models[1].frozen_random"),
    ],
    ids=["empty", "empty-set", "three", "repeated-component", "repeated-set", "reordered-set", "unknown", "string"],
)
def test_bad_frozen_random_names_the_key(sets, key):
    with pytest.raises(config.ConfigError) as err:
        experiments_config.resolve_whole(_raw(sets))
    assert err.value.key == key


def test_frozen_random_refused_for_a_downloaded_model_and_name_clashes(tmp_path):
    raw = _raw([["ffn"]])
    save_local_model(tmp_path / "mine")  # a real brought model, so only frozen_random is wrong
    raw["models"][1] = {
        "name": "mine",
        "source": "pretrained",
        "name_or_path": str(tmp_path / "mine"),
        "arch": "llama",
        "n_layer": 2,
        "frozen_random": [["ffn"]],
    }
    with pytest.raises(config.ConfigError, match=r"'models\[1\].frozen_random': .*downloaded"):
        experiments_config.resolve_whole(raw)
    raw = _raw([["ffn"]])
    raw["models"][0]["name"] = "b.frozen-ffn"
    with pytest.raises(config.ConfigError, match=r"'models\[1\].frozen_random\[0\]': .*already a model name"):
        experiments_config.resolve_whole(raw)


# -- table and plot ----------------------------------------------------------------------------------------------


def _summary(tmp_path, model, loss, components=None, base=None, params=100, frozen_params=0, old=False):
    pre = {"model": model, "arch": "gpt2", "n_layer": 2, "d_model": 16, "params": params, "final_val_loss": loss}
    if not old:
        pre.update(
            {
                "trainable_params": params - frozen_params,
                "frozen_params": frozen_params,
                "frozen_components": components or [],
                "base_model": base or model,
            }
        )
    path = tmp_path / f"{model}.json"
    path.write_text(json.dumps(pre))
    return str(path)


def test_table_rows_and_plot(tmp_path):
    refs = [_summary(tmp_path, "m", 4.0, old=True), _summary(tmp_path, "n", 3.0)]
    variants = [
        _summary(tmp_path, "m.frozen-attention-ffn", 5.0, ["attention", "ffn"], "m", frozen_params=60),
        _summary(tmp_path, "m.frozen-embeddings", 4.5, ["embeddings"], "m", frozen_params=30),
        _summary(tmp_path, "n.frozen-ffn", 3.0, ["ffn"], "n", frozen_params=40),
    ]
    table = frozen_random.table(refs, variants)
    assert list(table.columns) == frozen_random.COLUMNS
    assert list(zip(table.base_model, table.frozen)) == [
        ("m", "none"),
        ("m", "embeddings"),
        ("m", "attention+ffn"),
        ("n", "none"),
        ("n", "ffn"),
    ]
    m = table[table.base_model == "m"].set_index("frozen")
    assert m.loc["none", "trainable_params"] == 100 and m.loc["none", "frozen_params"] == 0  # an old pretrain.json
    assert m.loc["embeddings", "delta_loss"] == pytest.approx(0.5)
    assert m.loc["attention+ffn", "perplexity_ratio"] == pytest.approx(torch.tensor(1.0).exp().item())
    assert m.loc["none", "val_perplexity"] == pytest.approx(torch.tensor(4.0).exp().item())
    with pytest.raises(ValueError, match="no all-trainable reference"):
        frozen_random.table(refs[:1], variants)
    html, png = tmp_path / "fr.html", tmp_path / "fr.png"
    plots.save(frozen_random_plot.figure(table), html, png)
    assert "attention+ffn" in html.read_text() and png.read_bytes()[:4] == b"\x89PNG"
