"""Shim: save the pretrained encoder of the transfer experiments as a local safetensors folder."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[2] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.experiments.transfer import finetune

logs.to_file(snakemake.log[0])
finetune.import_encoder(snakemake.params.source, snakemake.output[0])
