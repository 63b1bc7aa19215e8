"""Shim: evaluate the trained model on the fixed validation set."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.training import evaluation

logs.to_file(snakemake.log[0])
evaluation.baseline(
    snakemake.params.model, snakemake.params.eval, snakemake.input.tokens, snakemake.input.trained,
    snakemake.output[0], threads=snakemake.threads,
)
