"""Shim: load a model the user brings and save it as plain safetensors with its tokenizer."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.models import imported

logs.to_file(snakemake.log[0])
imported.import_model(snakemake.params.model, snakemake.output.trained, snakemake.output.summary)
