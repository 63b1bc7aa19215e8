# The training jobs: one per network (a model and a pretraining seed; selfheal.heal.job). It makes the network
# (pretrained here, adapted from a downloaded model, or a downloaded model's baseline evaluated), then heals every
# cell of it, a heal unit (regime) at a time, in one process: its imports and start-up are paid once per network. The
# network and each finished cell are staged under work/, so a re-run after an added retrain seed or cell trains only
# what is new. A job's message says what it trains and keeps; its recorded params are a short digest.
# A downloaded model is imported first.
rule import_pretrained:
    output:
        trained=directory(f"{IMPORTED}/trained"),
        summary=f"{IMPORTED}/{layout.PRETRAIN}",
    log:
        f"{LOGS}/{{model}}/import.log",
    conda:
        "../../envs/training.yaml"
    threads: THREADS
    params:
        model=import_params,
    script:
        "../scripts/import_pretrained.py"


rule network:
    input:
        tokens=tokens,
        start=imported_dir,
        imported=imported_summary,
        donors=donor_networks,  # the networks whose trained encoders its swap cells take
    output:
        network=directory(NETWORK),
        baseline=BASELINE,
        cells=directory(CELLS_OF_NETWORK),
    log:
        f"{LOGS}/{{model}}/p{{pretrain_seed}}/network.log",
    conda:
        "../../envs/training.yaml"
    threads: THREADS
    params:
        source=model_source,
        plan=job_digest,
        todo=job_work,
        eval=EVAL,
        work=work_dir,
        donors=donor_folders,
    message:
        "network {wildcards.model} p{wildcards.pretrain_seed}: {params.todo.summary}"
    script:
        "../scripts/train.py"
