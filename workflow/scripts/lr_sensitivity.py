"""Shim: heal the lr-sensitivity check's cells at each multiple of the retrain lr, on the network its job made."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.heal import lr_sensitivity

logs.to_file(snakemake.log[0])
work = snakemake.params.todo  # the network, multipliers and cells
lr_sensitivity.run(
    snakemake.params.source,
    work.network,
    snakemake.params.eval,
    work.multipliers,
    work.cells,
    work.unit_cells,
    snakemake.input.tokens,
    str(snakemake.input.start) if snakemake.input.start else None,  # a downloaded model's folder
    str(snakemake.input.imported) if snakemake.input.imported else None,  # its pretrain.json
    network_dir=work.network_dir,  # inside the training job's outputs (snakemake.input)
    baseline=work.baseline,
    out_dir=snakemake.output[0],
    work_dir=snakemake.params.work,
    layout=snakemake.params.layout,
    threads=snakemake.threads,
    donors=snakemake.params.donors,  # the trained folders of the donors its swap cells take
)
