"""Shim: train the byte-level BPE tokenizer on the train split."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

import pandas as pd

from selfheal import logs
from selfheal.data import tokenizer

logs.to_file(snakemake.log[0])
tokenizer.train(pd.read_parquet(snakemake.input[0]), snakemake.params.vocab_size, snakemake.output[0])
