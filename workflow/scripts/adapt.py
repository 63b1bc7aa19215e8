"""Shim: adapt a downloaded model to the corpus (every tensor trains, the pretraining schedule) before healing."""
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
    theta0_dir=None,
    trained_dir=snakemake.output.trained,
    curve_path=snakemake.output.curve,
    summary_path=snakemake.output.summary,
    threads=snakemake.threads,
    start_dir=snakemake.input.start,
)
