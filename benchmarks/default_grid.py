"""The default grid end to end (`snakemake --cores 2`, target: at most 15 minutes on the 2-core development
machine), and where its core time went, from Snakemake's own job timestamps (`.snakemake/metadata`) and the
tables (benchmarks/snakemake_jobs.py): pretraining, retraining, evaluation, and the fixed per-job cost (everything
the training jobs spent besides training and evaluating: process start, imports, loading, writing; target: at most
5 % of the grid's core time = wall x cores). Jobs also log their own start-up (`job start-up:`), summed here too.

    .venv/bin/python benchmarks/default_grid.py     # [--cores 2] [--keep DIR] [--configfile config/tamkin_cpu.yaml]

Runs in a fresh temporary directory, so it measures a cold run of config/config.yaml (or of that config merged
over it, e.g. the CPU-sized Tamkin et al. experiments).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from snakemake_jobs import breakdown, describe, snakemake_env

ROOT = Path(__file__).resolve().parents[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=None, help="run here instead of a temporary directory")
    parser.add_argument("--configfile", type=Path, default=None, help="a config merged over config/config.yaml")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = a.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        env = snakemake_env()
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory",
                               str(workdir), "--cores", str(a.cores), "--quiet",
                               *(["--configfile", str(a.configfile.resolve())] if a.configfile else [])],
                              capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        if proc.returncode:
            sys.exit(proc.stderr[-3000:])
        startups = []
        # every job's log, under results/logs/ or a config's own results_dir (e.g. results/families/logs/)
        for log in (p for p in (workdir / "results").rglob("*.log") if "logs" in p.parts):
            m = re.search(r"job start-up: ([0-9.]+) s", log.read_text())
            if m:
                startups.append(float(m.group(1)))
        tables = sorted(workdir.glob("results/**/curves.parquet"))
        b = breakdown(workdir, tables[0].parent) if tables else None
    share = sum(startups) / (wall * a.cores)
    name = a.configfile.name if a.configfile else "default grid"
    target = "" if a.configfile else f"; target 15 min -> {900 / wall:.2f}x under"
    print(f"{name}, --cores {a.cores}: {wall / 60:.1f} min wall ({wall:.0f} s{target}); {len(startups)} jobs, start-up {sum(startups):.0f} core-s = {share:.1%} of "
          f"{a.cores} x wall, mean {sum(startups) / max(1, len(startups)):.1f} s per job")
    if b:
        print(f"from Snakemake's job timestamps: {describe(b, wall, a.cores)} (target: fixed per-job cost <= 5 %, "
              f"evaluation <= 15 % of a cell)")


if __name__ == "__main__":
    main()
