"""The default grid end to end (`snakemake --cores 2`, target: at most 15 minutes on a 2-core CPU), and where its
core time went, from Snakemake's own job timestamps (`.snakemake/metadata`) and the tables
(benchmarks/snakemake_jobs.py): pretraining, retraining, evaluation, and the fixed per-job cost (everything the
training jobs spent besides training and evaluating: process start, imports, loading, writing; target: at most
5 % of the grid's core time = wall x cores). Jobs also log their own start-up (`job start-up:`), summed here too.

    .venv/bin/python benchmarks/default_grid.py     # [--cores 2] [--keep DIR] [--configfile config/tamkin_cpu.yaml]
                                                    # [--config KEY=VALUE ...] [--no-write]

Runs in a fresh temporary directory, so it measures a cold run of config/config.yaml (or of that config merged
over it, e.g. the CPU-sized Tamkin et al. experiments). Writes its figures into docs/performance.md: the default
grid's blocks `default-grid` and `job-start-up`, or the block of the shipped config it ran (BLOCKS).
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

import yaml

from common import ROOT, add_write_flag, machine, publish, snakemake_command, snakemake_env, timed_process
from snakemake_jobs import breakdown, describe

# (configfile, --config overrides) -> the block of docs/performance.md that run writes
BLOCKS = {
    (None, ()): "default-grid",
    ("config/families.yaml", ()): "families-config",
    ("config/tamkin_cpu.yaml", ()): "tamkin-cpu-config",
    ("config/pretrained.yaml", ()): "pretrained-config",
}
START_UP_BLOCK = "job-start-up"


def _threads(a) -> int:
    """The threads of each training job: the config's ``threads`` (config/config.yaml, then --configfile, then
    --config), at most the cores, as Snakemake gives them."""
    threads = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["threads"]
    if a.configfile:
        threads = (yaml.safe_load(a.configfile.read_text()) or {}).get("threads", threads)
    for item in a.config:
        key, _, value = item.partition("=")
        threads = int(value) if key == "threads" else threads
    return min(int(threads), a.cores)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=None, help="run here instead of a temporary directory")
    parser.add_argument("--configfile", type=Path, default=None, help="a config merged over config/config.yaml")
    parser.add_argument("--config", nargs="+", default=[], metavar="KEY=VALUE", help="passed to snakemake --config")
    add_write_flag(parser)
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = a.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        args = [
            "--cores",
            str(a.cores),
            "--quiet",
            *(["--configfile", str(a.configfile.resolve())] if a.configfile else []),
            *(["--config", *a.config] if a.config else []),
        ]
        wall, _ = timed_process(snakemake_command(workdir, *args), env=snakemake_env())
        startups = []
        # every job's log, under results/logs/ or a config's own results_dir (e.g. results/families/logs/)
        for log in (p for p in (workdir / "results").rglob("*.log") if "logs" in p.parts):
            m = re.search(r"job start-up: ([0-9.]+) s", log.read_text())
            if m:
                startups.append(float(m.group(1)))
        tables = sorted(workdir.glob("results/**/curves.parquet"))
        b = breakdown(workdir, tables[0].parent, threads=_threads(a)) if tables else None
    share = sum(startups) / (wall * a.cores)
    mean_startup = sum(startups) / max(1, len(startups))
    name = f"`{a.configfile.as_posix()}`" if a.configfile else "The default grid"
    if a.config:
        name += f" with `--config {' '.join(a.config)}`"
    target = "" if a.configfile else f"; target 15 min -> {900 / wall:.2f}x under"
    print(
        f"{name}, --cores {a.cores}: {wall / 60:.1f} min wall ({wall:.0f} s{target}); {len(startups)} jobs, "
        f"start-up {sum(startups):.0f} core-s = {share:.1%} of {a.cores} x wall, mean {mean_startup:.1f} s per job"
    )
    if b:
        print(
            f"from Snakemake's job timestamps: {describe(b, wall, a.cores)} (target: fixed per-job cost <= 5 %, "
            f"evaluation <= 15 % of a cell)"
        )

    path = a.configfile.resolve() if a.configfile else None
    # a config outside the repository is never a documented run (BLOCKS): named by its absolute path
    config = (path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)) if path else None
    marker = BLOCKS.get((config, tuple(a.config)))
    why_not = (
        "not a documented run (BLOCKS)"
        if marker is None
        else f"--cores {a.cores}: the documented figures are for --cores 2"
        if a.cores != 2
        else None
    )
    where = (
        f"`.venv/bin/python benchmarks/default_grid.py{' --configfile ' + config if config else ''}"
        f"{' --config ' + ' '.join(a.config) if a.config else ''}` on {machine()}"
    )
    text = f"{name}: **{wall / 60:.1f} min wall** ({wall:.0f} s{'; target 15 min' if not config else ''}), {where}."
    if b:
        core = wall * a.cores
        text += (
            f" {b['jobs']} jobs ({b['training_jobs']} training jobs), {b['cells']} cells. Core time: pretraining "
            f"{b['pretrain_s']:.0f} s, retraining {b['retrain_train_s']:.0f} s + evaluation "
            f"{b['retrain_eval_s']:.0f} s (evaluation {b['eval_share_of_retrain']:.1%} of retraining; per cell "
            f"mean {b['eval_share_mean']:.1%}, max {b['eval_share_max']:.1%}; {b['evaluations']} evaluations, "
            f"{b['located_evaluations']} of them made after the fact to locate crossings), fixed per-job cost "
            f"of the training jobs {b['fixed_s']:.0f} s = **{b['fixed_s'] / core:.1%}** of core time, data and "
            f"report jobs {b['other_job_core_s']:.0f} s; {b['job_core_s']:.0f} job core-s of {core:.0f}."
        )
    publish(marker or "unknown", text, not a.no_write, why_not=why_not)
    if marker == "default-grid":
        publish(
            START_UP_BLOCK,
            f"The default grid's {len(startups)} jobs logged a mean start-up of "
            f"{mean_startup:.1f} s each ({sum(startups):.0f} core-s = {share:.1%} of {a.cores} × wall), {where}.",
            not a.no_write,
            why_not=why_not,
        )


if __name__ == "__main__":
    main()
