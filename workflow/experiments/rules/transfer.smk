# Tamkin et al. 2020 transfer experiments (config section `transfer:`): import the encoder -> fixed task splits ->
# one finetuning run per (task, size, trial, spec) and one probing run per (task, size, trial) -> tables -> plots.
import selfheal.experiments.transfer.experiments
import selfheal.experiments.transfer.plots
import selfheal.experiments.transfer.plan
import selfheal.grid

TRANSFER = EXPERIMENTS["transfer"]
TRANSFER_RUN = f"{RESULTS}/transfer/runs/{{task}}/n{{size}}/{{spec}}/t{{trial}}.json"
TRANSFER_PROBE = f"{RESULTS}/transfer/probes/{{task}}/n{{size}}/t{{trial}}.parquet"
TRANSFER_PLOTS = selfheal.experiments.transfer.plots.names(TRANSFER["experiments"]) if TRANSFER else []
TRANSFER_OUTPUTS = (
    [f"{RESULTS}/transfer/{table}.parquet" for table in ("scores", "summary")]
    + [f"{RESULTS}/plots/{plot}.{ext}" for plot in TRANSFER_PLOTS for ext in ("html", "png")]
    if TRANSFER
    else []
)
if TRANSFER:
    TRANSFER_RUNS = selfheal.experiments.transfer.plan.runs(TRANSFER)
    TRANSFER_PROBES = selfheal.experiments.transfer.plan.probes(TRANSFER)
    TRANSFER_CONDITIONS = [
        {"experiment": c.experiment, "label": c.label, "x": c.x, "spec": c.spec.id}
        for c in selfheal.experiments.transfer.plan.conditions(TRANSFER)
    ]
    TRANSFER_SPECS = {
        k: s.as_dict()
        for k, s in selfheal.experiments.transfer.experiments.specs(
            selfheal.experiments.transfer.plan.conditions(TRANSFER)
        ).items()
    }
    TRANSFER_RUN_SETTINGS = selfheal.experiments.transfer.plan.run_settings(TRANSFER)

    wildcard_constraints:
        task="[A-Za-z0-9_-]+",
        size="[0-9]+",
        trial="[0-9]+",
        spec="[a-z0-9.-]+",

    rule transfer_model:
        output:
            directory(f"{RESULTS}/transfer/model"),
        log:
            f"{LOGS}/transfer/model.log",
        conda:
            "../../../envs/training.yaml"
        params:
            source=TRANSFER["model"],
        script:
            "../scripts/transfer_model.py"

    rule transfer_split:
        output:
            train=f"{RESULTS}/transfer/data/{{task}}/train.parquet",
            test=f"{RESULTS}/transfer/data/{{task}}/test.parquet",
            summary=f"{RESULTS}/transfer/data/{{task}}/split.json",
        log:
            f"{LOGS}/transfer/{{task}}/split.log",
        conda:
            "../../../envs/training.yaml"
        params:
            task=lambda w: selfheal.config.canonical(selfheal.experiments.transfer.plan.task_by_name(TRANSFER, w.task)),
            test_fraction=TRANSFER["test_fraction"],
            split_seed=TRANSFER["split_seed"],
        script:
            "../scripts/transfer_split.py"

    rule transfer_finetune:
        input:
            model=f"{RESULTS}/transfer/model",
            train=f"{RESULTS}/transfer/data/{{task}}/train.parquet",
            test=f"{RESULTS}/transfer/data/{{task}}/test.parquet",
        output:
            TRANSFER_RUN,
        log:
            f"{LOGS}/transfer/{{task}}/n{{size}}/{{spec}}/t{{trial}}.log",
        conda:
            "../../../envs/training.yaml"
        threads: THREADS
        params:
            settings=selfheal.config.canonical(TRANSFER_RUN_SETTINGS),
            spec=lambda w: TRANSFER_SPECS[w.spec],
            hardware=HARDWARE,
        script:
            "../scripts/transfer_finetune.py"

    rule transfer_probe:
        input:
            model=f"{RESULTS}/transfer/model",
            train=f"{RESULTS}/transfer/data/{{task}}/train.parquet",
            test=f"{RESULTS}/transfer/data/{{task}}/test.parquet",
        output:
            TRANSFER_PROBE,
        log:
            f"{LOGS}/transfer/{{task}}/n{{size}}/probe-t{{trial}}.log",
        conda:
            "../../../envs/training.yaml"
        threads: THREADS
        params:
            settings=selfheal.config.canonical(TRANSFER_RUN_SETTINGS),
            probe=selfheal.config.canonical(TRANSFER["probe"]),
            hardware=HARDWARE,
        script:
            "../scripts/transfer_probe.py"

    rule transfer_aggregate:
        input:
            runs=expand(TRANSFER_RUN, zip, **selfheal.grid.columns(TRANSFER_RUNS)),
            probes=(expand(TRANSFER_PROBE, zip, **selfheal.grid.columns(TRANSFER_PROBES)) if TRANSFER_PROBES else []),
        output:
            scores=f"{RESULTS}/transfer/scores.parquet",
            summary=f"{RESULTS}/transfer/summary.parquet",
        log:
            f"{LOGS}/transfer/aggregate.log",
        conda:
            "../../../envs/analysis.yaml"
        params:
            conditions=TRANSFER_CONDITIONS,
        script:
            "../scripts/transfer_aggregate.py"

    rule transfer_plots:
        input:
            summary=f"{RESULTS}/transfer/summary.parquet",
        output:
            html=[
                report(
                    f"{RESULTS}/plots/{name}.html",
                    caption=f"../report/{name}.rst",
                    category="Transfer (Tamkin et al. 2020)",
                )
                for name in TRANSFER_PLOTS
            ],
            png=[f"{RESULTS}/plots/{name}.png" for name in TRANSFER_PLOTS],
        log:
            f"{LOGS}/transfer/plots.log",
        conda:
            "../../../envs/analysis.yaml"
        params:
            names=TRANSFER_PLOTS,
        script:
            "../scripts/transfer_plots.py"
