"""Shim: tokenize both splits into flat token streams."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

import logging

import pandas as pd

from selfheal import logs
from selfheal.data import streams

logs.to_file(snakemake.log[0])
counts = streams.tokenize(pd.read_parquet(snakemake.input.works), snakemake.input.tokenizer, snakemake.output[0])
logging.getLogger("selfheal").info("tokens per split: %s", counts)
