"""`snakemake -n` on a fully computed grid of about 1,100 cells must take at most 10 s.

Builds a 1,116-cell config (4 GPT-2 sizes x 12 layers x 2 policies x 2 inits x 5 seeds, plus controls and matched
controls, one pretraining network per size) with one job per cell (`job_unit: cell`, what a cluster profile gets
for it), marks every output as computed without computing it (empty files, then `snakemake --touch`), and times
the dry run that a user does before re-running changed cells; then the same grid on three networks per size, as
the default config pretrains them (3,348 cells). Prints the cell counts and the seconds.

    .venv/bin/python benchmarks/dag_dry_run.py    # [--no-write]

Writes block `dag-dry-run` of docs/performance.md.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import yaml
from common import add_write_flag, machine, publish, snakemake_command, snakemake_env, timed_process, workflow_config

from selfheal import grid

TARGET_S = 10.0
MARKER = "dag-dry-run"


def snakemake(workdir: Path, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    """(wall seconds, process) of Snakemake on the grid's config in ``workdir``; a failure ends the benchmark."""
    return timed_process(snakemake_command(workdir, "--configfile", str(workdir / "config.yaml"), *args), env=ENV)


ENV: dict = {}


def grid_config(networks: int) -> dict:
    """4 GPT-2 sizes x 12 layers x 2 policies x 2 inits x 5 seeds, plus controls and matched controls, on
    ``networks`` pretraining networks per size, one job per cell (`job_unit: cell`, as a cluster profile's --jobs
    picks for such a grid: the largest DAG)."""
    return {
        "models": [{"name": f"gpt2-d{d}", "n_layer": 12, "d_model": d, "n_head": 4} for d in (64, 128, 192, 256)],
        "pretrain": {"seeds": list(range(networks))},
        "grid": {
            "layers": "all",
            "policies": ["full", "attn"],
            "inits": ["fresh", "original"],
            "seeds": [0, 1, 2, 3, 4],
            "controls": True,
        },
        "job_unit": "cell",
    }


def dry_run(cfg: dict) -> tuple[int, int, list[float], bool]:
    """(cells, output files, seconds of each of 3 dry runs, whether the last found nothing to do) of the grid
    ``cfg`` with every output marked computed."""
    n_cells = len(grid.cells(workflow_config(cfg)))  # as Snakemake sees it: merged over config/config.yaml
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
    return n_cells, len(outputs), times, done


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_write_flag(parser)
    a = parser.parse_args()
    ENV.update(snakemake_env())
    measured = {}
    for networks in (1, 3):
        n_cells, n_outputs, times, done = dry_run(grid_config(networks))
        best = min(times)
        print(
            f"{networks} network(s) per size: {n_cells} cells, {n_outputs} output files; `snakemake -n` on the "
            f"computed grid: {best:.2f} s (best of 3: {', '.join(f'{t:.2f}' for t in times)}); target "
            f"{TARGET_S:.0f} s for about 1,100 cells; nothing to be done: {done}"
        )
        measured[networks] = (n_cells, n_outputs, best, done)
    (c1, o1, t1, _), (c3, o3, t3, _) = measured[1], measured[3]
    text = (
        f"`.venv/bin/python benchmarks/dag_dry_run.py` on {machine()}: {c1:,} cells (one pretraining network per "
        f"size) and {o1:,} output files, `snakemake -n` **{t1:.1f} s** (best of 3; target {TARGET_S:.0f} s); the "
        f"same grid on three networks per size, as the default config pretrains them: {c3:,} cells and {o3:,} "
        f"output files, {t3:.1f} s."
    )
    done = all(m[3] for m in measured.values())
    publish(MARKER, text, not a.no_write, why_not=None if done else "a dry run found work to do")


if __name__ == "__main__":
    main()
