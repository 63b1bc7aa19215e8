# The unit of work (job_unit): the model (one job makes each of its networks, pretraining seeds, in turn and heals
# every cell of it, selfheal.heal.job, so a model's imports and start-up are paid once), the network (one job per
# network), or the cell (one job per network makes it, then one job per cell resets and retrains it to threshold;
# a matched control's job waits for the cells it is matched with); `auto` picks it (common.smk). Networks and
# finished cells are staged under work/, so a re-run after an added pretraining seed, retrain seed or cell trains
# only what is new. A job's message says what it trains and keeps; its recorded params are a short digest.
# A downloaded model is imported first.
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
        donors=donor_networks,  # the networks whose trained encoders its swap cells take
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
        plan=job_digest,
        todo=job_work,
        eval=EVAL,
        folders=job_folders,
        work=work_dir,
        layout=layout,
        donors=donor_folders,
    message:
        "model {wildcards.model}: {params.todo.summary}"
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
    message:
        "network {wildcards.model} p{wildcards.pretrain_seed}: {params.todo.summary}"


# job_unit: cell. The same job for one network, making it only (its cells are their own jobs, rule cell): it does
# not wait for the donors its swap cells take.
use rule model as make_network with:
    input:
        tokens=tokens,
        start=imported_dir,
        imported=imported_summary,
    output:
        network=directory(NETWORK),
        baseline=BASELINE,
    log:
        f"{LOGS}/{{model}}/p{{pretrain_seed}}/make_network.log",
    wildcard_constraints:
        model=selfheal.grid.one_of(MADE_NETWORK_MODELS),
    message:
        "make_network {wildcards.model} p{wildcards.pretrain_seed}: {params.todo.summary}"


# job_unit: cell. One cell reset and retrained to threshold, on the network its network's job made.
rule cell:
    input:
        tokens=tokens,
        network=NETWORK,
        baseline=BASELINE,
        start=imported_dir,
        imported=imported_summary,
        matched=matched_curves,  # a matched control's: the curves of the cells it is matched with
        donors=donor_networks,  # a swap's: the network whose trained encoder it takes
    output:
        damage=f"{UNIT}/{CELL_IN_UNIT}/damage.json",
        recovery=f"{UNIT}/{CELL_IN_UNIT}/recovery.json",
        curve=f"{UNIT}/{CELL_IN_UNIT}/curve.parquet",
    log:
        f"{LOGS}/{{model}}/p{{pretrain_seed}}/{{regime}}/s{{seed}}/{{target}}-{{policy}}-{{init}}.log",
    wildcard_constraints:
        model=selfheal.grid.one_of(CELL_JOB_MODELS),
    conda:
        "../../envs/training.yaml"
    threads: THREADS
    params:
        source=model_source,
        plan=cell_digest,
        todo=cell_work,
        eval=EVAL,
        unit=unit_dir,
        unit_work=unit_work,
        cell_folder=CELL_IN_UNIT,
        donors=donor_folders,
    message:
        "cell {wildcards.model} p{wildcards.pretrain_seed} {wildcards.regime} s{wildcards.seed} "
        "{wildcards.target}-{wildcards.policy}-{wildcards.init}: {params.todo.summary}"
    script:
        "../scripts/heal_cell.py"
