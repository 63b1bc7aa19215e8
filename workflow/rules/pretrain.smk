rule pretrain:
    input:
        tokens="results/corpus/bpe/tokens.safetensors",
    output:
        theta0=directory("results/models/{model}/theta0"),
        trained=directory("results/models/{model}/trained"),
        curve="results/models/{model}/pretrain_curve.parquet",
        summary="results/models/{model}/pretrain.json",
    params:
        model=pretrain_params,
        eval=EVAL,
    threads: THREADS
    log:
        "results/logs/{model}/pretrain.log",
    conda:
        "../../envs/training.yaml"
    script:
        "../scripts/pretrain.py"


rule import_pretrained:
    output:
        trained=directory("results/pretrained/{model}/trained"),
        summary="results/pretrained/{model}/pretrain.json",
    params:
        model=import_params,
    threads: THREADS
    log:
        "results/logs/{model}/import.log",
    conda:
        "../../envs/training.yaml"
    script:
        "../scripts/import_pretrained.py"


rule baseline:
    input:
        tokens=tokens,
        trained=trained_dir,
    output:
        "results/baselines/{model}.json",
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
