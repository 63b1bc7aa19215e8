"""Shim: draw the frozen-random figure from results/frozen_random.parquet."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[2] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.analysis import plots

logs.to_file(snakemake.log[0])
plots.write_frozen_random(snakemake.input[0], snakemake.output.html, snakemake.output.png)
