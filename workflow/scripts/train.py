"""Shim: make the networks of one training job (pretrain, adapt or evaluate each) and heal each network's cells."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.heal import job

logs.to_file(snakemake.log[0])
job.run(
    snakemake.params.source,
    snakemake.params.todo.networks,
    snakemake.params.eval,
    snakemake.params.todo.cells,
    snakemake.input.tokens,
    str(snakemake.input.start) if snakemake.input.start else None,  # a downloaded model's folder
    str(snakemake.input.imported) if snakemake.input.imported else None,  # its pretrain.json
    networks_dir=snakemake.params.folders["networks"],  # the model's folders (rule network: its outputs are in them)
    baselines_dir=snakemake.params.folders["baselines"],
    cells_dir=snakemake.params.folders["cells"],
    work_dir=snakemake.params.work,
    layout=snakemake.params.layout,
    threads=snakemake.threads,
    donors=snakemake.params.donors,  # the trained folders of the donors its swap cells take
)
