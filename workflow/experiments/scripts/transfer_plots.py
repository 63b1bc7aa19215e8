"""Shim: draw the transfer figures from summary.parquet."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[2] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.experiments.transfer import plots

logs.to_file(snakemake.log[0])
o = snakemake.output
plots.write_all(snakemake.input.summary, {n: (h, p) for n, h, p in zip(snakemake.params.names, o.html, o.png)})
