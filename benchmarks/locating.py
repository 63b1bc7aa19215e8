"""Locating threshold crossings: this checkout's ``training/loop.py`` against another checkout's, on real cells.

Runs single-layer cells of a finished run (its trained networks and tokens) the way a heal job retrains them
(policy full, fresh init, frozen regime, the prefix cache below the layer, stopping at the tightest threshold),
once per code version, one after the other, each in its own process on one thread, and prints per cell: the
run's wall seconds, its evaluation seconds, its replay seconds, its evaluations (and how many were made after
the fact or placed between regular ones), the wall of the same run without thresholds (``--plain``: what
locating costs on top), and each threshold's crossing interval (lo, hi] in examples from both versions, which
should overlap. Both versions train the same run: only the evaluations that locate the crossings differ (and
where they stop, when a version's extra evaluation meets the tightest threshold first). Where the validation loss
is not monotonic near a threshold, each version brackets the first crossing its own evaluations see, and the two
intervals can be disjoint (marked DISJOINT); a run with ``eval_every_examples`` = one batch shows the truth.

    git worktree add --detach /tmp/wt_old HEAD~1
    .venv/bin/python benchmarks/locating.py /tmp/m_default2 --other /tmp/wt_old/src --plain

Timings are wall clock: compare them on an otherwise idle machine, or read the ratios with the load in mind.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CELLS = ["gpt2-n4-d64:0", "gpt2-n4-d64:2", "gpt2-n2-d32:1", "gpt2-n4-d32:3"]  # model:layer
EPS = [0.01, 0.02, 0.05, 0.10]


def cell_run(workdir: Path, model_name: str, layer: int, seed: int, budget: int, resolution: float,
             plain: bool) -> dict:
    """One cell with whichever ``selfheal`` is on the path; the numbers as a dict."""
    import copy

    import torch

    from selfheal import models
    from selfheal.heal import reset, thresholds
    from selfheal.heal.prefix_cache import PrefixCache
    from selfheal.training import loop, setup
    from selfheal.training.evaluation import evaluate
    from selfheal.training.state import Settings

    torch.set_num_threads(1)
    setup.seed_everything(seed, 1)
    results = workdir / "results"
    tokens = str(results / "corpus" / "bpe" / "tokens.safetensors")
    base = models.load(str(results / "models" / model_name / "p0" / "trained"))
    cfg = {"name": model_name, "context": base.config.n_positions, "pretrain": {"train_sequences": 1000, "seed": 0}}
    job = setup.prepare(base, cfg, {"val_sequences": 128, "batch_size": 64}, tokens)
    seqs = setup.train_sequences(cfg, tokens)
    baseline = evaluate(base, job.family, job.val_batches)
    model = copy.deepcopy(base)
    names = reset.draw(model, job.family, f"L{layer}", "full", "fresh", seed)
    damaged = evaluate(model, job.family, job.val_batches)
    cache = PrefixCache.build(base, job.family, seqs, job.val_batches, layer, job.device) if layer else None
    s = Settings(lr=3e-3, batch_size=32, weight_decay=0.0, grad_clip=1.0, eval_every_examples=512,
                 max_examples=budget, warmup_steps=10, data_seed=seed, hardware=job.hardware)
    levels = [] if plain else [thresholds.threshold_loss(baseline, eps) for eps in EPS]
    started = time.perf_counter()
    result = loop.run(model, job.family, job.objective, seqs, job.val_batches, set(names), s,
                      should_stop=lambda p: thresholds.all_reached(p.val_loss, baseline, EPS), cache=cache,
                      levels=levels, resolution=resolution, start_loss=damaged)
    wall = time.perf_counter() - started
    found = thresholds.recoveries(result.curve, baseline, EPS)
    return {
        "src": str(Path(loop.__file__).resolve().parents[2]),
        "wall_s": wall, "eval_s": result.eval_s, "replay_s": result.replay_s,
        "replay_train_s": result.replay_train_s, "evaluations": len(result.curve),
        "after_the_fact": sum(1 for p in result.curve if p.replay),
        "between": sum(1 for p in result.curve if getattr(p, "ahead", False)),
        "examples": max(p.examples for p in result.curve),
        "crossings": {str(r.threshold): [r.examples_lo, r.examples if r.recovered else None] for r in found},
    }


def run_in(src: str, args: argparse.Namespace, cell: str, plain: bool = False) -> dict:
    """``cell_run`` in a fresh process with ``src`` first on the path."""
    model, layer = cell.split(":")
    cmd = [sys.executable, __file__, str(args.workdir), "--worker", model, layer, "--seed", str(args.seed),
           "--budget", str(args.budget), "--resolution", str(args.resolution)] + (["--plain"] if plain else [])
    out = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": src}, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if got["src"] != str(Path(src).resolve()):
        raise RuntimeError(f"the worker ran {got['src']}, not {src}")
    return got


def overlap(a: list, b: list) -> bool:
    """Two crossing intervals (lo, hi] (hi None: censored) that can hold the same crossing."""
    if a[1] is None or b[1] is None:
        return a[1] is None and b[1] is None
    return max(a[0], b[0]) < min(a[1], b[1]) or a == b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workdir", type=Path, help="a finished run's work directory (results/models, corpus)")
    parser.add_argument("--other", help="the src/ folder of the checkout to compare with")
    parser.add_argument("--cells", nargs="+", default=CELLS, help="model:layer, single-layer cells")
    parser.add_argument("--seed", type=int, default=0, help="retrain seed (reset draw and data order)")
    parser.add_argument("--budget", type=int, default=6000, help="examples")
    parser.add_argument("--resolution", type=float, default=0.1)
    parser.add_argument("--plain", action="store_true", help="also the run without thresholds (this checkout)")
    parser.add_argument("--worker", nargs=2, metavar=("MODEL", "LAYER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(cell_run(args.workdir, args.worker[0], int(args.worker[1]), args.seed, args.budget,
                                  args.resolution, args.plain)))
        return
    here = str(HERE.parent / "src")
    versions = {"this": here, **({"other": args.other} if args.other else {})}
    print(f"this: {here}" + (f"; other: {args.other}" if args.other else ""))
    rows = []
    for cell in args.cells:  # one run at a time: the timings are wall clock
        got = {name: run_in(src, args, cell) for name, src in versions.items()}
        plain = run_in(here, args, cell, plain=True) if args.plain else None
        rows.append((cell, got, plain))
        line = [f"{cell:>15}"]
        for name, r in got.items():
            line.append(f"{name}: wall {r['wall_s']:6.1f} s, eval {r['eval_s']:5.1f} s, replay {r['replay_s']:5.1f} s, "
                        f"{r['evaluations']:3d} evaluations ({r['after_the_fact']} after the fact, "
                        f"{r['between']} between)")
        if plain:
            line.append(f"plain: wall {plain['wall_s']:6.1f} s, eval {plain['eval_s']:5.1f} s, "
                        f"{plain['evaluations']} evaluations")
        print(" | ".join(line), flush=True)
        for eps in map(str, EPS):
            brackets = {name: r["crossings"][eps] for name, r in got.items()}
            same = "" if len(got) < 2 else ("  overlap" if overlap(*brackets.values()) else "  DISJOINT")
            print(f"{'':>15}   eps {eps:<5} " + "  ".join(f"{n} ({b[0]}, {b[1]}]" for n, b in brackets.items())
                  + same)
    if "other" in versions:
        total = {n: {k: sum(r[n][k] for _, r, _ in rows) for k in ("wall_s", "eval_s", "replay_s", "evaluations")}
                 for n in versions}
        print("all cells: " + " | ".join(
            f"{k} this {total['this'][k]:.1f} / other {total['other'][k]:.1f} = "
            f"{total['this'][k] / total['other'][k]:.2f}" if total["other"][k] else f"{k} this {total['this'][k]:.1f}"
            f" / other 0" for k in ("wall_s", "eval_s", "replay_s", "evaluations")))
        if args.plain:
            plain_wall = sum(p["wall_s"] for _, _, p in rows)
            print(f"locating on top of the plain runs' {plain_wall:.1f} s: " + ", ".join(
                f"{n} {total[n]['wall_s'] - plain_wall:+.1f} s" for n in versions))


if __name__ == "__main__":
    main()
