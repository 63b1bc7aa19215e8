"""Shim: compute the frozen prefix (hidden states entering layer L) for every train and validation sequence."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.heal import prefix_cache

logs.to_file(snakemake.log[0])
prefix_cache.build(
    snakemake.params.model,
    snakemake.params.eval,
    snakemake.input.tokens,
    snakemake.input.trained,
    int(snakemake.wildcards.depth),
    snakemake.output.train,
    snakemake.output.val,
    threads=snakemake.threads,
)
