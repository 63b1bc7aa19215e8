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

from common import ROOT, add_write_flag, machine, publish, snakemake_command, snakemake_env, timed_process

MARKER = "parse-time"
HEAVY = ["torch", "transformers", "altair", "scipy.stats", "lifelines"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    add_write_flag(parser)
    a = parser.parse_args()
    env = snakemake_env()
    lazy, eager = [], []
    imports = "; ".join(f"import {m}" for m in HEAVY)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.runs):
            for times, pre in (
                (lazy, []),
                (
                    eager,
                    [
                        "-c",
                        f"{imports}; import runpy, sys; sys.argv = ['snakemake'] + sys.argv[1:]; runpy.run_module('snakemake', run_name='__main__')",
                    ],
                ),
            ):
                workdir = Path(tmp) / f"{len(times)}{'e' if pre else 'l'}"
                command = snakemake_command(workdir, "-n", "--quiet", "--cores", "2")
                if pre:  # the same command, the heavy modules imported before Snakemake starts
                    command = [command[0], *pre, *command[3:]]
                wall, proc = timed_process(command, env=env, cwd=ROOT)
                times.append(wall)
    imported = timed_process([command[0], "-c", "import sys, runpy; " + imports], env=env, cwd=ROOT)[0]
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
