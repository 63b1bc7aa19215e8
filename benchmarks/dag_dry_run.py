"""`snakemake -n` on a fully computed grid of about 1,000 cells must take at most 10 s.

Builds a ~1,000-cell config (4 GPT-2 sizes x 12 layers x 2 policies x 2 inits x 5 seeds, plus controls), marks
every output as computed without computing it (empty files, then `snakemake --touch`), and times the dry run
that a user does before re-running changed cells. Prints the cell count, the seconds and the ratio to the target.

    .venv/bin/python benchmarks/dag_dry_run.py
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from selfheal import config, grid  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from snakemake_jobs import snakemake_env  # noqa: E402

TARGET_S = 10.0
ENV = snakemake_env()


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(workdir / "config.yaml"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV)


def main():
    cfg = {
        "models": [{"name": f"gpt2-d{d}", "n_layer": 12, "d_model": d, "n_head": 4} for d in (64, 128, 192, 256)],
        "grid": {"layers": "all", "policies": ["full", "attn"], "inits": ["fresh", "original"],
                 "seeds": [0, 1, 2, 3, 4], "controls": True},
    }
    n_cells = len(grid.cells(config.resolve(cfg)))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
        summary = snakemake(workdir, "--summary", "--cores", "1")
        if summary.returncode:
            sys.exit(summary.stderr[-3000:])
        outputs = [line.split("\t")[0] for line in summary.stdout.splitlines()[1:] if "\t" in line]
        for out in outputs:
            path = workdir / out
            if re.search(r"^results/(models|baselines|cells)/[^/]+$|/trained$", out):  # directory() outputs
                path.mkdir(parents=True, exist_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
        touched = snakemake(workdir, "--touch", "--cores", "1", "--quiet")
        if touched.returncode:
            sys.exit(touched.stderr[-3000:])
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            dry = snakemake(workdir, "-n", "--quiet")
            times.append(time.perf_counter() - t0)
        done = "Nothing to be done" in dry.stdout + dry.stderr
    best = min(times)
    print(f"{n_cells} cells, {len(outputs)} output files; `snakemake -n` on the computed grid: "
          f"{best:.2f} s (best of 3: {', '.join(f'{t:.2f}' for t in times)}); target {TARGET_S:.0f} s -> "
          f"{TARGET_S / best:.1f}x under; nothing to be done: {done}")


if __name__ == "__main__":
    main()
