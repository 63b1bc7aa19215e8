"""Shim: what partial leaves out (the models not finished, with partial: networks the networks not finished, the lr
checks not finished), as a table."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs, partial

logs.to_file(snakemake.log[0])
partial.write_left_out(
    snakemake.output[0],
    snakemake.params.left_out,
    snakemake.params.lr_left_out,
    [tuple(n) for n in snakemake.params.networks_left_out],
)
