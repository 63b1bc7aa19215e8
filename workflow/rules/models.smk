# The unit of work (job_unit) is the model: one job per model makes each of its networks (pretraining seeds) in
# turn and heals every cell of it (selfheal.heal.job), so a model's imports and start-up are paid once; or, with
# job_unit: network, one job per network. Networks and finished cells are staged under work/, so a re-run after an
# added pretraining seed, retrain seed or cell trains only what is new. A downloaded model is imported first.
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
        cells=job_cells,
        folders=job_folders,
        work=work_dir,
        layout=layout,
    script:
        "../scripts/train.py"


# job_unit: network. The same job for one network, writing its part of the model's folders.
use rule model as network with:
    output:
        network=directory(NETWORK),
        baseline=BASELINE,
        cells=directory(CELLS_OF_NETWORK),
    log:
        f"{LOGS}/{{model}}/p{{pretrain_seed}}/network.log",
    wildcard_constraints:
        model=selfheal.grid.one_of(NETWORK_JOB_MODELS),
