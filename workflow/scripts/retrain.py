"""Shim: retrain one cell until it recovers or the budget runs out."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.heal import retrain

logs.to_file(snakemake.log[0])
retrain.retrain_cell(
    snakemake.params.model,
    snakemake.params.eval,
    snakemake.params.cell,
    snakemake.input.tokens,
    snakemake.input.trained,
    snakemake.input.reset,
    snakemake.input.baseline,
    snakemake.input.damage,
    snakemake.input.pretrain,
    recovery_path=snakemake.output.recovery,
    curve_path=snakemake.output.curve,
    threads=snakemake.threads,
    cache_paths=tuple(snakemake.input.cache) or None,
)
