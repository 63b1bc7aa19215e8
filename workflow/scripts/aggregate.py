"""Shim: gather every cell into results/summary.parquet and results/curves.parquet."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.analysis import tables

logs.to_file(snakemake.log[0])
tables.write(
    snakemake.params.recoveries,  # inside the heal jobs' unit folders (snakemake.input.units)
    snakemake.params.curves,
    snakemake.input.pretrain,
    snakemake.input.pretrain_curves,
    summary_out=snakemake.output.summary,
    curves_out=snakemake.output.curves,
)
