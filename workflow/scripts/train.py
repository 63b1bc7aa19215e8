"""Shim: make one network (pretrain, adapt or evaluate it) and heal each of its cells."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.heal import job

logs.to_file(snakemake.log[0])
job.run(
    snakemake.params.source,
    snakemake.params.todo.network,
    snakemake.params.eval,
    snakemake.params.todo.cells,
    snakemake.input.tokens,
    str(snakemake.input.start) if snakemake.input.start else None,  # a downloaded model's folder
    str(snakemake.input.imported) if snakemake.input.imported else None,  # its pretrain.json
    network_dir=snakemake.output.network,
    baseline=snakemake.output.baseline,
    cells_dir=snakemake.output.cells,
    work_dir=snakemake.params.work,
    threads=snakemake.threads,
    donors=snakemake.params.donors,  # the trained folders of the donors its swap cells take
)
