"""Shim: the answer tables, page and figures from the summary, curves and networks tables."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs
from selfheal.analysis import answer

logs.to_file(snakemake.log[0])
names = snakemake.params.figures
answer.write_all(
    snakemake.input.summary,
    snakemake.input.curves,
    snakemake.input.networks,
    dict(zip(snakemake.params.tables, snakemake.output.tables, strict=True)),
    snakemake.output.md,
    snakemake.output.html,
    dict(zip(names, snakemake.output.plots_html, strict=True)),
    dict(zip(names, snakemake.output.plots_png, strict=True)),
    workers=snakemake.threads,  # the scaling fit's bootstrap refits, in parallel
)
