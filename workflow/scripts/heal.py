"""Shim: heal every cell of one unit (network, regime: every retrain seed): reset, damage, retrain to threshold."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.heal import unit

logs.to_file(snakemake.log[0])
unit.run(
    snakemake.params.model,
    snakemake.params.eval,
    snakemake.params.cells,
    snakemake.input.tokens,
    snakemake.input.trained,
    str(snakemake.input.theta0) if snakemake.input.theta0 else None,  # no theta0 for downloaded models
    snakemake.input.baseline,
    snakemake.input.pretrain,
    out_dir=snakemake.output[0],
    work_dir=snakemake.params.work,
    cell_folder=snakemake.params.cell_folder,
    threads=snakemake.threads,
)
