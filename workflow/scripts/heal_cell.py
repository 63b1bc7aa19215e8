"""Shim: reset one cell and retrain it to threshold (job_unit: cell), on the network its network's job made."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.heal import job

logs.to_file(snakemake.log[0])
work = snakemake.params.todo  # the cell, its network, its unit
job.heal(
    snakemake.params.source,
    work.network,
    snakemake.params.eval,
    work.cell,
    work.unit_cells,
    work.earlier,
    snakemake.input.tokens,
    str(snakemake.input.start) if snakemake.input.start else None,  # a downloaded model's folder
    str(snakemake.input.imported) if snakemake.input.imported else None,  # its pretrain.json
    network_dir=snakemake.input.network,
    baseline=snakemake.input.baseline,
    unit_dir=snakemake.params.unit,
    unit_work_dir=snakemake.params.unit_work,
    cell_folder=snakemake.params.cell_folder,
    threads=snakemake.threads,
    donors=snakemake.params.donors,  # the trained folders of the donors its swap cells take
)
