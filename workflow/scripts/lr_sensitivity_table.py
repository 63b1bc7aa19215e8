"""Shim: the lr-sensitivity table, each run beside the same cell's cost at the chosen lr."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.analysis import lr_sensitivity

logs.to_file(snakemake.log[0])
lr_sensitivity.write(snakemake.input.summary, snakemake.params.runs, snakemake.output[0])
