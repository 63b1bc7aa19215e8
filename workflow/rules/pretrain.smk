# A network's baseline (its trained weights on the fixed validation set) is written by the job that trained it
# (pretrain, adapt) from its last evaluation; only a downloaded model healed as imported has a baseline job.
rule pretrain:
    input:
        tokens=TOKENS.format(tokenizer="bpe"),
    output:
        theta0=directory(f"{SCRATCH}/theta0"),
        trained=directory(f"{SCRATCH}/trained"),
        curve=f"{SCRATCH}/pretrain_curve.parquet",
        summary=f"{SCRATCH}/pretrain.json",
        baseline=BASELINE,
    log:
        f"{LOGS}/{{model}}/p{{pretrain_seed}}/pretrain.log",
    wildcard_constraints:
        model=PRETRAIN_MODELS_RE,
    conda:
        "../../envs/training.yaml"
    threads: THREADS
    params:
        model=pretrain_params,
        eval=EVAL,
    script:
        "../scripts/pretrain.py"


rule adapt:
    input:
        tokens=tokens,
        start=imported_dir,
    output:
        trained=directory(f"{ADAPTED}/trained"),
        curve=f"{ADAPTED}/pretrain_curve.parquet",
        summary=f"{ADAPTED}/pretrain.json",
        baseline=BASELINE,
    log:
        f"{LOGS}/{{model}}/p{{pretrain_seed}}/adapt.log",
    wildcard_constraints:
        model=ADAPT_MODELS_RE,
    conda:
        "../../envs/training.yaml"
    threads: THREADS
    params:
        model=pretrain_params,
        eval=EVAL,
    script:
        "../scripts/pretrain.py"


rule import_pretrained:
    output:
        trained=directory(f"{IMPORTED}/trained"),
        summary=f"{IMPORTED}/pretrain.json",
    log:
        f"{LOGS}/{{model}}/import.log",
    conda:
        "../../envs/training.yaml"
    threads: THREADS
    params:
        model=import_params,
    script:
        "../scripts/import_pretrained.py"


rule baseline:
    input:
        tokens=tokens,
        trained=trained_dir,
    output:
        BASELINE,
    log:
        f"{LOGS}/{{model}}/p{{pretrain_seed}}/baseline.log",
    wildcard_constraints:
        model=BASELINE_MODELS_RE,
    conda:
        "../../envs/training.yaml"
    threads: THREADS
    params:
        model=pretrain_params,
        eval=EVAL,
    script:
        "../scripts/baseline.py"
