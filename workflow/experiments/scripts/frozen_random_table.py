"""Shim: the frozen-random table (results/frozen_random.parquet) from the models' pretrain.json files."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[2] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.experiments import frozen_random

logs.to_file(snakemake.log[0])
frozen_random.write(snakemake.params.references, snakemake.params.variants, snakemake.output[0])
