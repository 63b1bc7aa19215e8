# Frozen random components (Bogoychev 2021), on only when some model has a frozen_random list: each derived model
# ('<model>.frozen-<components>') and its base model's all-trainable reference (the same settings: same θ0, data
# and schedule) are pretrained here, one job per network (pretraining seed); they make no cells. One table and one
# plot compare each variant with its reference. Its paths and settings: rules/common.smk.
rule frozen_random_pretrain:
    input:
        tokens=config["tokens"],
    output:
        directory(FROZEN_RANDOM_NETWORK),
    log:
        f"{LOGS}/frozen_random/{{model}}/p{{pretrain_seed}}.log",
    wildcard_constraints:
        model=selfheal.grid.one_of(list(FROZEN_RANDOM_MODELS)),
        pretrain_seed="[0-9]+",
    conda:
        "../../../envs/training.yaml"
    threads: THREADS
    params:
        network=frozen_random_settings,
        eval=FROZEN_RANDOM_EVAL,
        work=lambda w: FROZEN_RANDOM_WORK.format(**w),
    script:
        "../scripts/frozen_random_pretrain.py"


rule frozen_random_table:
    input:
        references=frozen_random_networks(FROZEN_RANDOM_REFERENCES),
        variants=frozen_random_networks(FROZEN_RANDOM_VARIANTS),
    output:
        f"{RESULTS}/frozen_random.parquet",
    log:
        f"{LOGS}/frozen_random_table.log",
    conda:
        "../../../envs/analysis.yaml"
    script:
        "../scripts/frozen_random_table.py"


rule frozen_random_plot:
    input:
        f"{RESULTS}/frozen_random.parquet",
    output:
        html=report(
            f"{RESULTS}/plots/frozen_random.html",
            caption="../report/frozen_random.rst",
            category="Frozen random components",
        ),
        png=f"{RESULTS}/plots/frozen_random.png",
    log:
        f"{LOGS}/frozen_random_plot.log",
    conda:
        "../../../envs/analysis.yaml"
    script:
        "../scripts/frozen_random_plot.py"
