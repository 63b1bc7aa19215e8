"""Shim: gather every cell and network into the summary, curves and networks tables."""
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
    snakemake.input.baselines,
    snakemake.input.unadapted,  # downloaded models healed as downloaded: no pretraining curve
    snakemake.params.thresholds,
    summary_out=snakemake.output.summary,
    curves_out=snakemake.output.curves,
    networks_out=snakemake.output.networks,
)
