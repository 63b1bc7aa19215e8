"""What a Snakemake start costs: `snakemake -n` on the default config (the Snakefile's parse, the config checks and
the DAG), beside the same start with the modules it names but does not need imported first, as they were before
`selfheal.lazy` (torch, transformers, altair, scipy.stats, lifelines: the model families, the figures and the
statistics import them where they are first used). Every start pays this: a dry run, a run, each test that runs
the workflow. Runs alternate, one process at a time.

    .venv/bin/python benchmarks/parse_time.py        # [--runs 5] [--no-write]

Writes block `parse-time` of docs/performance.md.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import ROOT, add_write_flag, interleaved, machine, publish, snakemake_command, snakemake_env, timed_process

MARKER = "parse-time"
HEAVY = ["torch", "transformers", "altair", "scipy.stats", "lifelines"]
IMPORTS = "; ".join(f"import {m}" for m in HEAVY)
# the same `python -m snakemake ...` start, with the heavy modules imported before Snakemake runs
EAGER = f"{IMPORTS}; import runpy, sys; sys.argv[0] = 'snakemake'; runpy.run_module('snakemake', run_name='__main__')"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    add_write_flag(parser)
    a = parser.parse_args()
    env = snakemake_env()
    with tempfile.TemporaryDirectory() as tmp:

        def start(eager: bool):
            def run() -> float:
                command = snakemake_command(Path(tmp) / str(eager), "-n", "--quiet", "--cores", "2")
                if eager:  # python -m snakemake ARGS -> python -c EAGER ARGS
                    command = [command[0], "-c", EAGER, *command[3:]]
                return timed_process(command, env=env, cwd=ROOT)[0]

            return run

        runs = interleaved({"lazy": start(False), "eager": start(True)}, a.runs)
    lazy, eager = runs["lazy"], runs["eager"]
    imported = timed_process([snakemake_command(Path("."))[0], "-c", IMPORTS], env=env, cwd=ROOT)[0]
    ratio = statistics.median(eager) / statistics.median(lazy)
    text = (
        f"`snakemake -n` on the default config, {a.runs} runs each, alternating, on {machine()} "
        f"(`.venv/bin/python benchmarks/parse_time.py`): **{statistics.median(lazy):.1f} s** (median; "
        f"{min(lazy):.1f}–{max(lazy):.1f}) with the modules a start does not need left unimported, "
        f"{statistics.median(eager):.1f} s ({min(eager):.1f}–{max(eager):.1f}) with them imported first "
        f"({', '.join(HEAVY)}: {imported:.1f} s on their own): **{ratio:.2f}×**."
    )
    publish(MARKER, text, not a.no_write)


if __name__ == "__main__":
    main()
