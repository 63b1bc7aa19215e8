"""Shim: draw the figures from the two Parquet tables."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1] / "src"))  # the selfheal package, installed or not

from selfheal import logs, plots

logs.to_file(snakemake.log[0])
o = snakemake.output
plots.write_all(
    snakemake.input.summary,
    snakemake.input.curves,
    {
        "recovery_cost": (o.recovery_cost_html, o.recovery_cost_png),
        "recovery_examples": (o.recovery_examples_html, o.recovery_examples_png),
        "recovery_curves": (o.recovery_curves_html, o.recovery_curves_png),
        "damage": (o.damage_html, o.damage_png),
    },
)
