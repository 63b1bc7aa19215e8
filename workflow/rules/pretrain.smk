rule pretrain:
    input:
        tokens="results/corpus/tokens.safetensors",
    output:
        theta0=directory("results/models/{model}/theta0"),
        trained=directory("results/models/{model}/trained"),
        curve="results/models/{model}/pretrain_curve.parquet",
        summary="results/models/{model}/pretrain.json",
    params:
        model=pretrain_params,
        eval=EVAL,
    threads: THREADS
    resources:
        gpu=1,
    log:
        "results/logs/{model}/pretrain.log",
    conda:
        "../../envs/training.yaml"
    script:
        "../scripts/pretrain.py"


rule baseline:
    input:
        tokens="results/corpus/tokens.safetensors",
        trained="results/models/{model}/trained",
    output:
        "results/models/{model}/baseline.json",
    params:
        model=pretrain_params,
        eval=EVAL,
    threads: THREADS
    log:
        "results/logs/{model}/baseline.log",
    conda:
        "../../envs/training.yaml"
    script:
        "../scripts/baseline.py"
