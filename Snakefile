# selfheal: how much data does a trained transformer need to heal one re-initialised layer?
# Stages: corpus -> tokenizer -> network (one job per network: pretrain -> baseline -> reset and retrain each cell)
# -> aggregate -> plots and answer;
# and the published experiments (Tamkin et al. 2020 with a `transfer:` section, Bogoychev 2021 with
# models[].frozen_random), a module of their own: workflow/experiments/Snakefile.
# Every config key is documented in docs/configuration.md; the config is validated before any job runs. The readout
# of a study still running is a command, not a run of this workflow: `python -m selfheal.partial`.

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
        expand(f"{RESULTS}/{{table}}.parquet", table=["summary", "curves"] if CELLS else []),
        expand(f"{RESULTS}/plots/{{plot}}.{{ext}}", plot=PLOTS if CELLS else [], ext=["html", "png"]),
        ANSWER_OUTPUTS if CELLS else [],  # the answer page, its tables and figures
        rules.all_experiments.input,
