"""Shim: hold out a task's fixed test split."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[2] / "src"))  # the selfheal package, installed or not

from selfheal import logs, results_io
from selfheal.experiments.transfer import data

logs.to_file(snakemake.log[0])
o = snakemake.output
summary = data.write_split(
    snakemake.params.task, snakemake.params.test_fraction, snakemake.params.split_seed, o.train, o.test
)
results_io.write_json(o.summary, summary)
