# The lr-sensitivity check, on only for the models whose retrain.lr_sensitivity lists multipliers: the first and the
# last layer of each such model's first network healed again at retrain.lr x each multiplier (selfheal.heal
# .lr_sensitivity), on the network its network job made, in folders of their own (no cell of the grid reads them);
# one table puts each run beside the same cell's cost at the chosen lr, and the answer page says it in a sentence.
rule lr_sensitivity:
    input:
        unpack(lr_sensitivity_inputs),
    output:
        directory(LR_SENSITIVITY),
    log:
        f"{LOGS}/{{model}}/lr_sensitivity.log",
    wildcard_constraints:
        model=selfheal.grid.one_of(LR_MODELS),
    conda:
        "../../envs/training.yaml"
    threads: THREADS
    params:
        source=model_source,
        plan=lr_sensitivity_digest,
        todo=lr_sensitivity_work,
        eval=EVAL,
        work=lr_sensitivity_work_dir,
        layout=lr_sensitivity_layout,
        donors=lr_sensitivity_donors,
    message:
        "lr_sensitivity {wildcards.model}: {params.plan}"
    script:
        "../scripts/lr_sensitivity.py"


rule lr_sensitivity_table:
    input:
        summary=f"{RESULTS}/summary.parquet",
        runs=expand(LR_SENSITIVITY, model=LR_MODELS),  # the files read in them are named in params
    output:
        LR_SENSITIVITY_TABLE,
    log:
        f"{LOGS}/lr_sensitivity_table.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        runs=LR_RUNS,
    script:
        "../scripts/lr_sensitivity_table.py"
