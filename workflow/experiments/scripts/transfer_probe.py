"""Shim: probe every layer of the frozen encoder on one task, size and trial."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[2] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.experiments.transfer import probing

logs.to_file(snakemake.log[0])
w = snakemake.wildcards
probing.run(
    snakemake.params.settings,
    snakemake.params.probe,
    w.task,
    int(w.size),
    int(w.trial),
    snakemake.input.model,
    snakemake.input.train,
    snakemake.input.test,
    snakemake.output[0],
    hardware=snakemake.params.hardware,
    threads=snakemake.threads,
)
