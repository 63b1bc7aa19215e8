"""Shim: finetune one spec of the encoder on one task, size and trial."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[2] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.experiments.transfer import finetune

logs.to_file(snakemake.log[0])
w = snakemake.wildcards
finetune.run(
    snakemake.params.settings,
    w.task,
    int(w.size),
    int(w.trial),
    snakemake.params.spec,
    snakemake.input.model,
    snakemake.input.train,
    snakemake.input.test,
    snakemake.output[0],
    hardware=snakemake.params.hardware,
    threads=snakemake.threads,
)
