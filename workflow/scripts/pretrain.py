"""Shim: pretrain one model from scratch."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.training import pretrain

logs.to_file(snakemake.log[0])
pretrain.pretrain(
    snakemake.params.model,
    snakemake.params.eval,
    snakemake.input.tokens,
    theta0_dir=snakemake.output.theta0,
    trained_dir=snakemake.output.trained,
    curve_path=snakemake.output.curve,
    summary_path=snakemake.output.summary,
    threads=snakemake.threads,
)
