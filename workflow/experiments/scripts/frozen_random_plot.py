"""Shim: draw the frozen-random figure from results/frozen_random.parquet."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[2] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.experiments import frozen_random_plot

logs.to_file(snakemake.log[0])
frozen_random_plot.write(snakemake.input[0], snakemake.output.html, snakemake.output.png)
