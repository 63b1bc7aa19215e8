"""Shim: pretrain one network from scratch (rule pretrain), or adapt a downloaded model to the corpus (rule adapt)."""
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
    theta0_dir=snakemake.output.get("theta0"),  # none when adapting a downloaded model (rule adapt)
    trained_dir=snakemake.output.trained,
    curve_path=snakemake.output.curve,
    summary_path=snakemake.output.summary,
    threads=snakemake.threads,
    start_dir=snakemake.input.get("start"),  # rule adapt: the downloaded model to start from
    baseline_path=snakemake.output.baseline,
)
