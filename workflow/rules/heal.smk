CELL = "results/cells/{model}/{target}-{policy}-{init}-s{seed}"


rule reset:
    input:
        tokens=tokens,
        trained=trained_dir,
        theta0=theta0,
    output:
        weights=CELL + "/reset.safetensors",
        damage=CELL + "/damage.json",
    params:
        model=pretrain_params,
        eval=EVAL,
    threads: THREADS
    log:
        "results/logs/" + CELL.removeprefix("results/") + "/reset.log",
    conda:
        "../../envs/training.yaml"
    script:
        "../scripts/reset.py"


rule prefix_cache:
    input:
        tokens=tokens,
        trained=trained_dir,
    output:
        train="results/cache/{model}/depth{depth}/train.npy",
        val="results/cache/{model}/depth{depth}/val.npy",
    params:
        model=pretrain_params,
        eval=EVAL,
    threads: THREADS
    log:
        "results/logs/cache/{model}/depth{depth}.log",
    conda:
        "../../envs/training.yaml"
    script:
        "../scripts/prefix_cache.py"


rule retrain:
    input:
        tokens=tokens,
        trained=trained_dir,
        reset=CELL + "/reset.safetensors",
        damage=CELL + "/damage.json",
        baseline="results/baselines/{model}.json",
        pretrain=model_summary,
        cache=prefix_cache,
    output:
        recovery=CELL + "/{regime}/recovery.json",
        curve=CELL + "/{regime}/curve.parquet",
    params:
        model=retrain_params,
        eval=EVAL,
        cell=cell_dict,
    threads: THREADS
    log:
        "results/logs/" + CELL.removeprefix("results/") + "/{regime}/retrain.log",
    conda:
        "../../envs/training.yaml"
    script:
        "../scripts/retrain.py"
