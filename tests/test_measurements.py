"""What makes a measurement trustworthy: pretraining seeds in the grid, the matched no-reset control, crossings as
intervals located on kept weights or by replay (without changing the run), reference losses and quality flags,
healed-layer CKA."""

import copy
import dataclasses

import pandas as pd
import pytest
import torch
from conftest import CPU, SPECIAL, TINY_MODEL, trained_like
from safetensors.torch import save_file

from selfheal import grid, models, records
from selfheal.analysis import tables
from selfheal.data import ngrams
from selfheal.heal import reset, retrain, similarity, thresholds
from selfheal.records import Baseline, PretrainSummary
from selfheal.training import evaluation, locating, loop, setup
from selfheal.training.evaluation import evaluate
from selfheal.training.state import CurvePoint, Settings


def test_recoveries_are_intervals():
    curve = [CurvePoint(e, e * 4, e // 2, e / 10, v, None) for e, v in [(0, 5.0), (64, 4.5), (128, 4.02), (192, 4.01)]]
    got = {r.threshold: r for r in thresholds.recoveries(curve, 4.0, [0.01, 0.3, 0.001])}
    assert (got[0.01].examples_lo, got[0.01].examples, got[0.01].recovered) == (64, 128, True)
    assert (got[0.3].examples_lo, got[0.3].examples) == (0, 0)  # within 30 % at the first evaluation
    assert (got[0.001].recovered, got[0.001].examples_lo, got[0.001].examples) == (False, 192, 192)


def test_grid_has_networks_and_matched_controls():
    config = {
        "models": [{"name": "m", "arch": "gpt2", "n_layer": 2, "pretrain": {"seeds": [3, 5]}}],
        "grid": {
            "layers": "all",
            "policies": ["full"],
            "inits": ["fresh"],
            "regimes": ["frozen", "full"],
            "seeds": [0, 1],
            "controls": True,
            "matched_controls": "first_seed",
            "targets": [],
            "encoder_swap": [],
        },
    }
    cells = grid.cells(config)
    assert grid.networks(config) == [grid.Network("m", 3), grid.Network("m", 5)]
    assert {c.pretrain_seed for c in cells} == {3, 5}
    matched = [c for c in cells if c.init == grid.TRAINED]
    # frozen regime only (in regime full the 'none' control is the matched one), first retrain seed only
    assert {(c.target, c.regime, c.seed) for c in matched} == {("L0", "frozen", 0), ("L1", "frozen", 0)}
    assert len(matched) == 4
    control = next(c for c in matched if c.target == "L1" and c.pretrain_seed == 3)
    assert control.matches(grid.Cell("m", "L1", "full", "fresh", "frozen", 0, 3))
    assert not control.matches(grid.Cell("m", "L0", "full", "fresh", "frozen", 0, 3))
    assert not control.matches(grid.Cell("m", "L1", "full", "fresh", "frozen", 0, 5))
    none_full = grid.Cell("m", "none", "none", "none", "full", 1, 5)
    assert none_full.is_matched_control and none_full.matches(grid.Cell("m", "L0", "full", "fresh", "full", 1, 5))
    network = grid.network_config({"name": "m", "pretrain": {"seeds": [3, 5], "patience": 1.0}}, 5)
    assert network["pretrain"] == {"seed": 5, "patience": 1.0}  # the seed list is not part of a network's settings


def test_sets_and_frozen_encoder_swaps_have_their_matched_control():
    """An encoder-decoder's set targets get a matched control of their own (but reset-all, the from-scratch
    comparison); its swaps whose encoder stays frozen (policy cross_attn) share all cross-attention's, which trains
    as long as the longest of them; a swap whose encoder trains has none."""
    bart = {"name": "b", "arch": "bart", "n_layer": 2, "n_dec_layer": 2, "pretrain": {"seeds": [0, 1]}}
    donor = {**bart, "name": "d", "heal": False, "pretrain": {"seeds": [0]}}
    config = {
        "models": [bart, donor],
        "grid": {
            "layers": "all",
            "policies": ["full", "cross_attn"],
            "inits": ["fresh"],
            "regimes": ["frozen"],
            "seeds": [0],
            "controls": True,
            "matched_controls": "first_seed",
            "targets": ["all", "dec"],
            "encoder_swap": [32, "d"],
        },
    }
    cells = grid.cells(config)
    sets = {(c.target, c.policy) for c in cells if c.init == grid.TRAINED and c.pretrain_seed == 0}
    assert sets - {(f"{s}.{i}", p) for s in ("enc", "dec") for i in (0, 1) for p in ("full", "cross_attn")} == {
        ("dec", "full"),
        ("dec", "cross_attn"),
        ("all", "cross_attn"),
    }
    assert ("all", "full") not in sets  # reset-all is the comparison, not a cell under study
    assert sets == {(c.target, c.policy) for c in cells if c.init == grid.TRAINED and c.pretrain_seed == 1}
    control = grid.Cell("b", "all", "cross_attn", grid.TRAINED, "frozen", 0, 0)
    matched = [c for c in cells if control.matches(c)]
    assert {(c.target, c.policy) for c in matched} == {("all", "cross_attn"), ("swap-d", "cross_attn")}
    assert {c.init for c in matched if c.target == "swap-d"} == {"fresh", grid.ZERO_OUT}
    assert not any(control.matches(c) for c in cells if c.target in ("swap32", "swap-d") and c.policy == "full")
    assert grid.matched_control_of("swap-d", "full") is None and grid.matched_control_of("swap32", "full") is None
    assert grid.matched_control_of("none", "none") is None and grid.matched_control_of("all", "full") is None


@pytest.fixture
def job(tmp_path):
    model = trained_like(models.build(TINY_MODEL, SPECIAL, seed=0))
    g = torch.Generator().manual_seed(0)
    stream = torch.randint(3, 64, (16 * 300,), generator=g, dtype=torch.int32)
    save_file(
        {"train": stream, "val": stream[: 16 * 40].clone()},
        str(tmp_path / "tokens.safetensors"),
        metadata={k: str(v) for k, v in SPECIAL.items()},
    )
    model_cfg = {
        **TINY_MODEL,
        "hardware": CPU,
        "source": "scratch",
        "pretrain": {"train_sequences": 256, "seed": 0, "max_epochs": 2},
        "recipe": {
            "lrs": [1e-2],  # healing races these (one recipe: pretraining too)
            "max_lr_extensions": 0,
            "batch_size": 8,
            "warmup_steps": 2,
            "weight_decay": 0.0,
        },  # fmt: skip
        "retrain": {
            "eval_every_examples": 64,
            "budget_fraction": 0.5,
            "thresholds": [0.01, 0.05],
            "checkpoint_every_steps": 0,
            "prefix_cache_mb": 0,
            "resolution": 0.1,
        },
    }
    eval_cfg = {"val_sequences": 32, "batch_size": 16}
    tokens = str(tmp_path / "tokens.safetensors")
    return model, setup.prepare(model, model_cfg, eval_cfg, tokens), setup.train_sequences(model_cfg, tokens), model_cfg


def _settings(job, max_examples=256):
    return Settings(
        lr=1e-2,
        batch_size=8,
        weight_decay=0.0,
        grad_clip=1.0,
        eval_every_examples=64,
        max_examples=max_examples,
        warmup_steps=2,
        data_seed=0,
        hardware=job.hardware,
    )


def test_crossings_are_located_on_kept_weights_without_changing_the_run(job, monkeypatch):
    """With levels, the run ends bit-identical to the plain run and its regular evaluations are the plain run's;
    the evaluations made after the fact (``replay``) are of the weights kept at their steps (the same losses as a
    run evaluated at every step), no training is redone, and every level it crosses is located within 10 % (or one
    step). A run whose kept weights would exceed the budget replays its intervals instead, to the same run."""
    base, job_, seqs, _ = job

    def run(levels, resolution, every=64):
        model = copy.deepcopy(base)
        names = reset.draw(model, job_.family, "L1", "full", "fresh", 0)
        s = dataclasses.replace(_settings(job_), eval_every_examples=every)
        return model, loop.run(
            model,
            job_.family,
            job_.objective,
            seqs,
            job_.val_batches,
            set(names),
            s,
            levels=levels,
            resolution=resolution,
        )

    plain_model, plain = run([], 0.0)
    truth = {p.steps: p.val_loss for p in run([], 0.0, every=8)[1].curve}  # an evaluation after every step
    # levels crossed between two coarse evaluations (64 examples = 8 steps apart: wider than 10 %)
    levels = [(a.val_loss + b.val_loss) / 2 for a, b in zip(plain.curve, plain.curve[1:]) if b.val_loss < a.val_loss]
    assert len(levels) >= 2

    def check(model, result):
        assert all(torch.equal(a, b) for a, b in zip(plain_model.parameters(), model.parameters()))
        regular = [(p.examples, p.val_loss, p.train_loss) for p in result.curve if not p.replay]
        assert regular == [(p.examples, p.val_loss, p.train_loss) for p in plain.curve]
        after = [p for p in result.curve if p.replay]
        assert after and all(p.train_loss is None for p in after)
        assert all(p.val_loss == truth[p.steps] for p in after)  # the weights of that step
        assert [p.steps for p in result.curve] == sorted(p.steps for p in result.curve)
        found = thresholds.recoveries(result.curve, 1.0, [level - 1 for level in levels])
        assert all(r.recovered for r in found)
        for r in found:
            assert r.examples - r.examples_lo <= 0.1 * r.examples or r.steps - r.steps_lo <= 1
        return after

    model, kept = run(levels, 0.1)
    check(model, kept)
    assert kept.replay_s == 0 and kept.replay_train_s == 0  # located without training
    monkeypatch.setattr(locating, "SNAPSHOT_BUDGET_MB", 0)  # the kept weights would not fit: replays
    model, replayed = run(levels, 0.1)
    check(model, replayed)
    assert replayed.replay_train_s > 0
    # the same probes either way: the source of a step's weights does not change where a crossing is located
    assert [(p.steps, p.val_loss, p.replay) for p in replayed.curve] == [
        (p.steps, p.val_loss, p.replay) for p in kept.curve
    ]


def test_matched_control_trains_from_trained_values_and_only_its_tensors(job):
    base, job_, seqs, model_cfg = job
    model = copy.deepcopy(base)
    names = reset.draw(model, job_.family, "L1", "full", grid.TRAINED, 0)
    assert names and all(torch.equal(a, b) for a, b in zip(base.parameters(), model.parameters()))  # no reset
    cell = grid.Cell("t", "L1", "full", grid.TRAINED, "frozen", 0)
    pre = PretrainSummary("t", "gpt2", 3, 16, 1000, train_sequences=256, epochs=2)
    baseline = evaluate(base, job_.family, job_.val_batches)
    result, curve, race = retrain.retrain(
        model, job_.family, job_, seqs, model_cfg, cell, names, baseline, baseline, pre, control_examples=96
    )
    assert list(race["lr"].unique()) == [1e-2] and result.lr == 1e-2  # not raced: the lr it is given, or the first
    assert curve["examples"].max() == 96  # as long as the cells it is matched with, not stopped at a threshold
    before, after = dict(base.named_parameters()), dict(model.named_parameters())
    changed = {n for n in after if not torch.equal(before[n], after[n])}
    assert changed and changed <= set(names)


def test_reference_losses():
    stream = torch.tensor([5, 6] * 500)  # a strict alternation: bigram knows everything, unigram only the 50/50
    batches = [{"input_ids": torch.tensor([[5, 6, 5, 6, 5, 6]] * 4)}]
    unigram, bigram, weight = ngrams.reference_losses(stream, batches, "causal_lm", vocab_size=8)
    assert unigram == pytest.approx(torch.log(torch.tensor(1008 / 501)).item(), rel=1e-6)
    assert bigram < 0.05 < unigram and weight == pytest.approx(ngrams.LAMBDA_MAX)
    # a masked LM: the targets 6 | 5 (the second left token is visible input) know everything too
    masked = [
        {"input_ids": torch.tensor([[0, 5, 0], [5, 0, 0]]), "labels": torch.tensor([[5, -100, 6], [-100, 6, -100]])}
    ]
    _, masked_bigram, _ = ngrams.reference_losses(stream, masked, "masked_lm", vocab_size=8)
    assert masked_bigram < unigram


def test_baseline_records_the_bigram_and_the_margin(job, tmp_path):
    """The baseline a training job writes carries the interpolated bigram, its weight and the network's margin."""
    model, job_, _, model_cfg = job
    loss = evaluate(model, job_.family, job_.val_batches)
    out = evaluation.write_baseline(
        model_cfg, job_, loss, str(tmp_path / "tokens.safetensors"), str(tmp_path / "baseline.json")
    )
    again = records.read(tmp_path / "baseline.json", Baseline)
    assert again == out and 0 <= out.bigram_weight <= ngrams.LAMBDA_MAX
    assert out.bigram_loss <= out.unigram_loss + 1e-12  # λ = 0 is the unigram: never worse
    assert out.bigram_margin == pytest.approx(out.bigram_loss - loss)


def _network(tmp_path, name, val_loss, unigram, drop):
    records.write(
        tmp_path / f"{name}-pre.json",
        PretrainSummary(name, "gpt2", 2, 16, 1000, train_sequences=100, epochs=2, last_quarter_val_drop=drop),
    )
    records.write(tmp_path / f"{name}-base.json", Baseline(name, val_loss, 1.0, 8, 16, unigram_loss=unigram))
    return str(tmp_path / f"{name}-pre.json"), str(tmp_path / f"{name}-base.json")


def test_degenerate_and_off_plateau_networks_are_flagged(tmp_path):
    pairs = [
        _network(tmp_path, "healthy", 4.0, 5.0, 0.001),
        _network(tmp_path, "unigram", 4.95, 5.0, 0.0),
        _network(tmp_path, "drifting", 4.0, 5.0, 0.05),
        _network(tmp_path, "harmless", 4.0, 5.0, 0.0),
    ]
    summary = pd.DataFrame(
        {
            "model": ["healthy", "harmless"],
            "pretrain_seed": [0, 0],
            "target": ["all", "all"],
            "policy": ["full", "full"],
            "init": ["fresh", "fresh"],
            "regime": ["frozen"] * 2,
            "seed": [0, 0],
            "damaged_loss": [7.0, 4.01],
        }
    )
    table = tables.networks_table(
        [p for p, _ in pairs],
        [b for _, b in pairs],
        summary,
        {m: [0.01, 0.05] for m in ("healthy", "unigram", "drifting", "harmless")},
    )
    flags = table.set_index("model")[["degenerate", "off_plateau"]].to_dict("index")
    assert flags["healthy"] == {"degenerate": False, "off_plateau": False}
    assert flags["unigram"]["degenerate"] and flags["harmless"]["degenerate"]  # no better than unigram / no damage
    assert flags["drifting"] == {"degenerate": False, "off_plateau": True}  # 0.05 > 0.01 x 4.0 / 4


def test_past_minimum_is_how_far_a_network_ended_above_its_pretraining_curves_lowest_loss():
    networks = pd.DataFrame(
        {"model": ["overfit", "at_min", "downloaded"], "pretrain_seed": [0, 0, 0], "baseline_loss": [4.2, 4.0, 3.0]}
    ).reindex(columns=tables.NETWORK_COLUMNS)
    pretrain = [("overfit", [6.0, 4.1, 4.0, 4.2]), ("at_min", [6.0, 4.3, 4.0])]
    curves = pd.DataFrame(
        [
            {"kind": "pretrain", "model": m, "pretrain_seed": 0, "val_loss": v, "replay": False}
            for m, losses in pretrain
            for v in losses
        ]
        # a recovery curve below the baseline and a replayed evaluation are not the network's pretraining
        + [{"kind": "recovery", "model": "at_min", "pretrain_seed": 0, "val_loss": 3.5, "replay": False}]
        + [{"kind": "pretrain", "model": "overfit", "pretrain_seed": 0, "val_loss": 3.9, "replay": True}]
    )
    table = tables.add_minimum(networks, curves).set_index("model")
    assert list(table.reset_index().columns) == tables.NETWORK_COLUMNS
    assert table.loc["overfit", "min_val_loss"] == 4.0
    assert table.loc["overfit", "past_minimum"] == pytest.approx(0.2)
    assert table.loc["at_min", "past_minimum"] == 0.0
    assert pd.isna(table.loc["downloaded", "past_minimum"])  # no pretraining curve: not known


def test_linear_cka_invariances():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 12, generator=g)
    q, _ = torch.linalg.qr(torch.randn(12, 12, generator=g))
    assert similarity.linear_cka(x, 2.5 * x @ q) == pytest.approx(1.0, abs=1e-9)
    assert abs(similarity.linear_cka(x, torch.randn(400, 12, generator=g))) < 0.05  # unbiased: near 0 when unrelated
    with pytest.raises(ValueError):
        similarity.linear_cka(x, x[:10])
