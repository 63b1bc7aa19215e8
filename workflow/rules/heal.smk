rule heal:
    input:
        tokens=tokens,
        trained=trained_dir,
        theta0=theta0,
        baseline=BASELINE,
        pretrain=model_summary,
    output:
        directory(UNIT),
    log:
        f"{LOGS}/cells/{{model}}/p{{pretrain_seed}}/{{regime}}.log",
    conda:
        "../../envs/training.yaml"
    threads: THREADS
    params:
        model=retrain_params,
        eval=EVAL,
        cells=unit_cells,
        work=work_dir,
        cell_folder=cell_folder,
    script:
        "../scripts/heal.py"
