rule aggregate:
    input:
        units=expand(UNIT, zip, **UNIT_COLUMNS) if CELLS else [],
        pretrain=expand(f"{SCRATCH}/pretrain.json", zip, **SCRATCH_NETWORKS)
        + expand(f"{ADAPTED}/pretrain.json", zip, **ADAPTED_NETWORKS),
        pretrain_curves=expand(f"{SCRATCH}/pretrain_curve.parquet", zip, **SCRATCH_NETWORKS)
        + expand(f"{ADAPTED}/pretrain_curve.parquet", zip, **ADAPTED_NETWORKS),
        baselines=expand(BASELINE, zip, **NETWORK_COLUMNS),
        unadapted=expand(f"{IMPORTED}/pretrain.json", model=UNADAPTED_MODELS),
    output:
        summary=f"{RESULTS}/summary.parquet",
        curves=f"{RESULTS}/curves.parquet",
        networks=f"{RESULTS}/networks.parquet",
    log:
        f"{LOGS}/aggregate.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        recoveries=expand(f"{UNIT}/{CELL_IN_UNIT}/recovery.json", zip, **CELL_COLUMNS) if CELLS else [],
        curves=expand(f"{UNIT}/{CELL_IN_UNIT}/curve.parquet", zip, **CELL_COLUMNS) if CELLS else [],
        thresholds={m["name"]: m["retrain"]["thresholds"] for m in CONFIG["models"]},
    script:
        "../scripts/aggregate.py"


rule plots:
    input:
        summary=f"{RESULTS}/summary.parquet",
        curves=f"{RESULTS}/curves.parquet",
    output:
        html=[
            report(f"{RESULTS}/plots/{name}.html", caption=f"../report/{name}.rst", category="Recovery")
            for name in PLOTS
        ],
        png=expand(f"{RESULTS}/plots/{{name}}.png", name=PLOTS),
    log:
        f"{LOGS}/plots.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        names=PLOTS,
    script:
        "../scripts/plots.py"
