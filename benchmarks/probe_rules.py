"""How many evaluations locating threshold crossings takes: the probe rule of ``training.loop`` (``bracket`` /
``probe_step``: an exponential approach to a floor below the level, probes put at the edge of the allowed width)
against the rule it replaced (regula falsi on the loss itself, a bisection after a probe that left more than half
the bracket), replayed on the same per-step validation curves.

    .venv/bin/python benchmarks/probe_rules.py RESULTS [--cells gpt2-n2-d64:0:0:0 ...] [--curves FILE] [--no-write]

RESULTS: a finished default run's results folder (its trained networks, baselines and tokens). For each cell
(model:layer:retrain seed:pretraining seed; default: every layer, retrain seeds 0 and 1, of the first network of
each model of config/config.yaml) the reset layer is retrained as a heal job does (policy full, fresh init, frozen
regime, the prefix cache below it), but evaluated after every step, until it is below the tightest threshold;
those curves (cached in ``--curves``, by default beside the results) are then located with the default cadence (16 steps), resolution
(10 %) and thresholds, both rules counting the evaluations of kept weights they need. Both rules bracket a real
crossing; the rule of the loop ends at least as narrow as the rule asks. With the default cells it writes block
`probe-rules` of docs/performance.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_write_flag, default_models, publish  # noqa: E402

from selfheal.training import loop  # noqa: E402
from selfheal.training.state import CurvePoint  # noqa: E402

MARKER = "probe-rules"

EPS = [0.01, 0.02, 0.05, 0.10]
EVERY, RESOLUTION, BATCH, MAX_EXAMPLES = 16, 0.1, 32, 8000
DEFAULT_CELLS = [  # every layer, retrain seeds 0 and 1, of the first network of each model of the default grid
    f"{m['name']}:{layer}:{seed}:{m['pretrain']['seeds'][0]}"
    for m in default_models()
    for layer in range(m["n_layer"])
    for seed in (0, 1)
]


def per_step_curve(results: Path, spec: str) -> dict:
    """One single-layer cell retrained with an evaluation after every step."""
    from selfheal import models, results_io
    from selfheal.heal import reset, thresholds
    from selfheal.heal.prefix_cache import PrefixCache
    from selfheal.training import setup
    from selfheal.training.evaluation import evaluate
    from selfheal.training.state import Settings

    name, layer, seed, ps = spec.split(":")
    layer, seed, ps = int(layer), int(seed), int(ps)
    setup.seed_everything(seed, 1)
    tokens = str(results / "corpus" / "bpe" / "tokens.safetensors")
    base = models.load(str(results / "models" / name / f"p{ps}" / "trained"))
    cfg = {"name": name, "context": base.config.n_positions, "pretrain": {"train_sequences": 1000, "seed": ps}}
    job = setup.prepare(base, cfg, {"val_sequences": 128, "batch_size": 64}, tokens)
    seqs = setup.train_sequences(cfg, tokens)
    baseline = results_io.read_json(results / "baselines" / name / f"p{ps}.json")["val_loss"]
    model = copy.deepcopy(base)
    names = reset.draw(model, job.family, f"L{layer}", "full", "fresh", seed)
    damaged = evaluate(model, job.family, job.val_batches)
    cache = PrefixCache.build(base, job.family, seqs, job.val_batches, layer, job.device) if layer else None
    s = Settings(
        lr=3e-3,
        batch_size=BATCH,
        weight_decay=0.0,
        grad_clip=1.0,
        eval_every_examples=BATCH,
        max_examples=MAX_EXAMPLES,
        warmup_steps=10,
        data_seed=seed,
        hardware=job.hardware,
    )
    tight = min(EPS)
    result = loop.run(
        model,
        job.family,
        job.objective,
        seqs,
        job.val_batches,
        set(names),
        s,
        should_stop=lambda curve: curve[-1].val_loss <= thresholds.threshold_loss(baseline, tight),
        cache=cache,
        start_loss=damaged,
    )
    return {"cell": spec, "baseline": baseline, "val": [p.val_loss for p in result.curve]}


def replaced_rule(known: list[CurvePoint], level: float, evaluate_at) -> None:
    """The rule before: regula falsi on the loss, a bisection after a probe that left more than half the bracket."""
    bisect = False
    while True:
        known.sort(key=lambda p: p.steps)
        i = next(i for i, p in enumerate(known) if p.val_loss <= level)
        lo, hi = known[i - 1], known[i]
        if loop.narrow_enough(lo, hi, RESOLUTION):
            return
        at = lo.steps + (lo.val_loss - level) / (lo.val_loss - hi.val_loss) * (hi.steps - lo.steps)
        step = (lo.steps + hi.steps) // 2 if bisect else min(hi.steps - 1, max(lo.steps + 1, round(at)))
        probe = evaluate_at(step)
        known.append(probe)
        width = step - lo.steps if probe.val_loss <= level else hi.steps - step
        bisect = not bisect and 2 * width > hi.steps - lo.steps


def probes(curve: dict, rule) -> tuple[int, float]:
    """Evaluations of kept weights that locating every threshold takes on one per-step curve, evaluated every
    ``EVERY`` steps and stopped at the first regular evaluation below the tightest threshold; and the largest
    relative lateness of a located crossing against the curve's first step at or below its level (a dip between
    two regular evaluations that comes back above the level is not seen)."""
    val = curve["val"]
    point = lambda k, replay=False: CurvePoint(k * BATCH, k * BATCH * 64, k, 0.0, val[k], None, replay)  # noqa: E731
    levels = [curve["baseline"] * (1 + e) for e in EPS]
    count, located, start, late = 0, set(), 0, 0.0

    def evaluate_at(step):
        nonlocal count
        count += 1
        return point(step, True)

    while start < len(val) - 1:
        end = min(start + EVERY, len(val) - 1)
        known = [point(start), point(end)]
        for level in sorted((l for l in levels if val[end] <= l and l not in located), reverse=True):
            rule(known, level, evaluate_at)
            located.add(level)
            hi = min(p.steps for p in known if p.val_loss <= level)
            first = next(k for k, v in enumerate(val) if v <= level)
            late = max(late, (hi - first) / first) if first else late
        if val[end] <= min(levels):
            break
        start = end
    return count, late


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--cells", nargs="+", default=DEFAULT_CELLS, help="model:layer:retrain seed:pretraining seed")
    parser.add_argument(
        "--curves", type=Path, default=None, help="per-step curves (cache; default RESULTS/probe_rules_curves.json)"
    )
    add_write_flag(parser)
    a = parser.parse_args()
    a.curves = a.curves or a.results / "probe_rules_curves.json"
    curves = json.loads(a.curves.read_text()) if a.curves.exists() else []
    have = {c["cell"] for c in curves}
    for spec in a.cells:
        if spec not in have:
            curves.append(per_step_curve(a.results, spec))
            a.curves.write_text(json.dumps(curves))
    curves = [c for c in curves if c["cell"] in a.cells]
    rules = {
        "loop (exponential approach, edge probes)": lambda known, level, ev: loop.bracket(
            known, level, ev, lambda k: k * BATCH, RESOLUTION
        ),
        "replaced (linear, bisection fallback)": replaced_rule,
    }
    totals = {name: [probes(c, rule) for c in curves] for name, rule in rules.items()}
    print(
        f"{len(curves)} single-layer cells, evaluated every {EVERY} steps, thresholds {EPS}, resolution "
        f"{RESOLUTION:.0%}: evaluations of kept weights to locate every crossing; the latest a located crossing "
        f"came after the per-step curve's first one"
    )
    for name, got in totals.items():
        counts = [n for n, _ in got]
        print(f"  {name:42s} {sum(counts):5d} (max {max(counts)} in one cell); latest {max(l for _, l in got):.0%}")
    new, old = (sum(n for n, _ in v) for v in totals.values())
    print(f"  ratio {new / old:.2f}" if old else "")
    latest = max(late for _, late in next(iter(totals.values())))
    text = (
        f"`.venv/bin/python benchmarks/probe_rules.py results`, {len(curves)} single-layer cells: "
        f"the current rule makes **{new / old:.2f}×** the evaluations of the replaced one ({new} against {old}); "
        f"a located crossing came at most {latest:.0%} later than the per-step curve's first one."
    )
    publish(MARKER, text, not a.no_write, why_not=None if a.cells == DEFAULT_CELLS else "cells other than the default")


if __name__ == "__main__":
    main()
