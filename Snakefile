# selfheal: how much data does a trained transformer need to heal one re-initialised layer?
# Stages: corpus -> tokenizer -> model (one job per model: pretrain -> baseline -> reset and retrain per cell)
# -> aggregate -> plots;
# and the published experiments (Tamkin et al. 2020 with a `transfer:` section, Bogoychev 2021 with
# models[].frozen_random), a module of their own: workflow/experiments/Snakefile.
# With partial: true: only aggregate -> plots, answer over the models finished so far, under results_dir/partial/.
# Every config key is documented in config/README.md; the config is validated before any job runs.

import os

import selfheal.experiments.config
from snakemake.utils import min_version

min_version("9.0")


# The default config is found next to this Snakefile, whatever the working directory (--directory);
# a --configfile given on the command line is merged over it.
configfile: os.path.join(workflow.basedir, "config", "config.yaml")


# The published experiments' keys leave the config here (the core reads only its own) and go to their module below.
EXPERIMENTS = selfheal.experiments.config.take(config)


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/answer.smk"
include: "workflow/rules/lr_sensitivity.smk"


module experiments:
    snakefile:
        "workflow/experiments/Snakefile"
    config:
        {"own": EXPERIMENTS, "core": CONFIG, "tokens": TOKENS.format(tokenizer="bpe")}


use rule * from experiments


rule all:
    default_target: True
    input:
        # The reset-and-retrain grid (when the config has models) and the published experiments (their module's
        # outputs: the transfer experiments with a transfer section, the frozen-random comparison with frozen_random).
        # With partial: true, only the grid's readout of its finished part (under READOUT), and no training job.
        expand(f"{READOUT}/{{table}}.parquet", table=["summary", "curves"] if CELLS else []),
        expand(f"{READOUT}/plots/{{plot}}.{{ext}}", plot=PLOTS if CELLS else [], ext=["html", "png"]),
        ANSWER_OUTPUTS if CELLS else [],  # the answer page, its tables and figures
        [] if PARTIAL else rules.all_experiments.input,
        LR_SENSITIVITY_TABLES,  # the lr-sensitivity check (retrain.lr_sensitivity), beside the answer page
