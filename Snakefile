# selfheal: how much data does a trained transformer need to heal one re-initialised layer?
# Stages: corpus -> tokenizer -> network (one job per network: pretrain -> baseline -> reset and retrain each cell)
# -> aggregate -> plots and answer;
# and, with a `transfer:` section, the Tamkin et al. 2020 finetuning experiments (workflow/rules/transfer.smk).
# With models[].frozen_random: network (frozen-random variants: pretrain only) -> frozen_random_table -> plot.
# Every config key is documented in docs/configuration.md; the config is validated before any job runs. The readout
# of a study still running is a command, not a run of this workflow: `python -m selfheal.partial`.

import os

from snakemake.utils import min_version

min_version("9.0")


# The default config is found next to this Snakefile, whatever the working directory (--directory);
# a --configfile given on the command line is merged over it.
configfile: os.path.join(workflow.basedir, "config", "config.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/answer.smk"
include: "workflow/rules/transfer.smk"
include: "workflow/rules/frozen_random.smk"
include: "workflow/rules/lr_sensitivity.smk"


rule all:
    input:
        # The reset-and-retrain grid (when the config has models), the transfer experiments (when it has a
        # transfer section) and the frozen-random comparison (when a model has frozen_random).
        expand(f"{RESULTS}/{{table}}.parquet", table=["summary", "curves"] if CELLS else []),
        expand(f"{RESULTS}/plots/{{plot}}.{{ext}}", plot=PLOTS if CELLS else [], ext=["html", "png"]),
        ANSWER_OUTPUTS if CELLS else [],  # the answer page, its tables and figures
        expand(f"{RESULTS}/transfer/{{table}}.parquet", table=["scores", "summary"] if TRANSFER else []),
        expand(
            f"{RESULTS}/plots/{{plot}}.{{ext}}",
            plot=TRANSFER_PLOTS if TRANSFER else [],
            ext=["html", "png"],
        ),
        FROZEN_RANDOM_OUTPUTS,
        LR_SENSITIVITY_TABLES,  # the lr-sensitivity check (retrain.lr_sensitivity), beside the answer page
