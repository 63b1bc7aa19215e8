"""Shim: draw the figures from the two Parquet tables."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.analysis import plots

logs.to_file(snakemake.log[0])
plots.write_all(
    snakemake.input.summary,
    snakemake.input.curves,
    snakemake.params.names,
    snakemake.output.html,
    snakemake.output.png,
)
