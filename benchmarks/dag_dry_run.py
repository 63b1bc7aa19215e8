"""`snakemake -n` on a fully computed grid of about 1,100 cells must take at most 10 s.

Builds a ~1,100-cell config (4 GPT-2 sizes x 12 layers x 2 policies x 2 inits x 5 seeds, plus controls and matched
controls) with one job per cell (`job_unit: cell`, what a cluster profile gets for it), marks
every output as computed without computing it (empty files, then `snakemake --touch`), and times the dry run
that a user does before re-running changed cells. Prints the cell count, the seconds and the ratio to the target.

    .venv/bin/python benchmarks/dag_dry_run.py    # [--no-write]

Writes block `dag-dry-run` of docs/performance.md.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import yaml
from common import add_write_flag, machine, publish, snakemake_command, snakemake_env, timed_process

from selfheal import config, grid

TARGET_S = 10.0
MARKER = "dag-dry-run"


def snakemake(workdir: Path, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    """(wall seconds, process) of Snakemake on the grid's config in ``workdir``; a failure ends the benchmark."""
    return timed_process(snakemake_command(workdir, "--configfile", str(workdir / "config.yaml"), *args), env=ENV)


ENV: dict = {}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_write_flag(parser)
    a = parser.parse_args()
    ENV.update(snakemake_env())
    cfg = {
        "models": [{"name": f"gpt2-d{d}", "n_layer": 12, "d_model": d, "n_head": 4} for d in (64, 128, 192, 256)],
        "grid": {
            "layers": "all",
            "policies": ["full", "attn"],
            "inits": ["fresh", "original"],
            "seeds": [0, 1, 2, 3, 4],
            "controls": True,
        },
        "job_unit": "cell",  # one job per cell, as a cluster profile's --jobs picks for such a grid: the largest DAG
    }
    n_cells = len(grid.cells(config.resolve(cfg)))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
        _, summary = snakemake(workdir, "--summary", "--cores", "1")
        outputs = [line.split("\t")[0] for line in summary.stdout.splitlines()[1:] if "\t" in line]
        for out in outputs:
            path = workdir / out
            if "." not in Path(out).name:  # directory() outputs (networks, cells); every file output has a suffix
                path.mkdir(parents=True, exist_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
        snakemake(workdir, "--touch", "--cores", "1", "--quiet")
        times = []
        for _ in range(3):
            wall, dry = snakemake(workdir, "-n", "--quiet")
            times.append(wall)
        done = "Nothing to be done" in dry.stdout + dry.stderr
    best = min(times)
    print(
        f"{n_cells} cells, {len(outputs)} output files; `snakemake -n` on the computed grid: "
        f"{best:.2f} s (best of 3: {', '.join(f'{t:.2f}' for t in times)}); target {TARGET_S:.0f} s -> "
        f"{TARGET_S / best:.1f}x under; nothing to be done: {done}"
    )
    text = (
        f"`.venv/bin/python benchmarks/dag_dry_run.py` on {machine()}: {n_cells:,} cells and {len(outputs):,} "
        f"output files, `snakemake -n` **{best:.1f} s** (best of 3; target {TARGET_S:.0f} s)."
    )
    publish(MARKER, text, not a.no_write, why_not=None if done else "the dry run found work to do")


if __name__ == "__main__":
    main()
