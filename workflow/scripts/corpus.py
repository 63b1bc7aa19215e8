"""Shim: read the corpus and split it by work."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.data import corpus

logs.to_file(snakemake.log[0])
corpus.write(snakemake.params.corpus, snakemake.output[0])
