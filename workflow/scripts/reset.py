"""Shim: reset one cell's target and measure the damage."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.heal import reset

logs.to_file(snakemake.log[0])
w = snakemake.wildcards
reset.reset_cell(
    snakemake.params.model,
    snakemake.params.eval,
    snakemake.input.tokens,
    snakemake.input.trained,
    str(snakemake.input.theta0) if snakemake.input.theta0 else None,  # no theta0 for downloaded models
    target=w.target,
    policy=w.policy,
    init=w.init,
    seed=int(w.seed),
    weights_path=snakemake.output.weights,
    damage_path=snakemake.output.damage,
    threads=snakemake.threads,
)
