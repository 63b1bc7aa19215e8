rule reset:
    input:
        tokens=tokens,
        trained=trained_dir,
        theta0=theta0,
    output:
        weights=f"{CELL}/reset.safetensors",
        damage=f"{CELL}/damage.json",
    log:
        f"{LOGS}/cells/{{model}}/{{target}}-{{policy}}-{{init}}-s{{seed}}/reset.log",
    conda:
        "../../envs/training.yaml"
    threads: THREADS
    params:
        model=pretrain_params,
        eval=EVAL,
    script:
        "../scripts/reset.py"


rule prefix_cache:
    input:
        tokens=tokens,
        trained=trained_dir,
    output:
        train=f"{CACHE}/train.npy",
        val=f"{CACHE}/val.npy",
    log:
        f"{LOGS}/cache/{{model}}/depth{{depth}}.log",
    conda:
        "../../envs/training.yaml"
    threads: THREADS
    params:
        model=pretrain_params,
        eval=EVAL,
    script:
        "../scripts/prefix_cache.py"


rule retrain:
    input:
        tokens=tokens,
        trained=trained_dir,
        reset=f"{CELL}/reset.safetensors",
        damage=f"{CELL}/damage.json",
        baseline=BASELINE,
        pretrain=model_summary,
        cache=prefix_cache,
    output:
        recovery=f"{RETRAIN}/recovery.json",
        curve=f"{RETRAIN}/curve.parquet",
    log:
        f"{LOGS}/cells/{{model}}/{{target}}-{{policy}}-{{init}}-s{{seed}}/{{regime}}/retrain.log",
    conda:
        "../../envs/training.yaml"
    threads: THREADS
    params:
        model=retrain_params,
        eval=EVAL,
        cell=cell_dict,
    script:
        "../scripts/retrain.py"
