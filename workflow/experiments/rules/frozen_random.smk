# Frozen random components (Bogoychev 2021), on only when some model has a frozen_random list: each derived model
# ('<model>.frozen-<components>') and its base model's all-trainable reference (the same settings: same θ0, data
# and schedule) are pretrained here, one job per model (its networks, one per pretraining seed, in turn); they make
# no cells. One table and one plot compare each variant with its reference. Paths and settings: rules/common.smk.
rule frozen_random_pretrain:
    input:
        tokens=config["tokens"],
    output:
        directory(FROZEN_RANDOM_NETWORKS),
    log:
        f"{LOGS}/frozen_random/{{model}}.log",
    wildcard_constraints:
        model=selfheal.grid.one_of(list(FROZEN_RANDOM_MODELS)),
    conda:
        "../../../envs/training.yaml"
    threads: THREADS
    params:
        networks=frozen_random_settings,
        eval=FROZEN_RANDOM_EVAL,
        work=lambda w: FROZEN_RANDOM_WORK.format(model=w.model),
        network=lambda w: FROZEN_RANDOM_NETWORK_IN_MODEL,  # a pattern, passed as it is (not expanded)
    script:
        "../scripts/frozen_random_pretrain.py"


rule frozen_random_table:
    input:
        expand(FROZEN_RANDOM_NETWORKS, model=list(FROZEN_RANDOM_MODELS)),
    output:
        f"{RESULTS}/frozen_random.parquet",
    log:
        f"{LOGS}/frozen_random_table.log",
    conda:
        "../../../envs/analysis.yaml"
    params:
        references=frozen_random_summaries(FROZEN_RANDOM_REFERENCES),
        variants=frozen_random_summaries(FROZEN_RANDOM_VARIANTS),
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
