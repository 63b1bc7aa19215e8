# The unit of work is the model: one job per model makes each of its networks (pretraining seeds) in turn and
# heals every cell of it (selfheal.heal.job), so a model's imports and start-up are paid once. Its networks and
# finished cells are staged under work/, so a re-run after an added pretraining seed, retrain seed or cell trains
# only what is new. A downloaded model is imported by a job of its own first.
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


rule model:
    input:
        tokens=tokens,
        start=imported_dir,
        imported=imported_summary,
    output:
        networks=directory(NETWORKS),
        baselines=directory(BASELINES),
        cells=directory(CELLS_OF_MODEL),
    log:
        f"{LOGS}/{{model}}/model.log",
    wildcard_constraints:
        model=selfheal.grid.one_of(JOB_MODELS),
    conda:
        "../../envs/training.yaml"
    threads: THREADS
    params:
        source=model_source,
        networks=network_params,
        eval=EVAL,
        cells=model_cells,
        work=work_dir,
        layout=layout,
    script:
        "../scripts/model.py"
