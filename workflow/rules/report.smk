rule aggregate:
    input:
        # the training jobs' outputs (networks, baselines, cells); the files read in them are named in params
        networks=trained(NETWORKS, NETWORK, MODEL_NAMES),
        baselines=trained(BASELINES, BASELINE, MODEL_NAMES),
        cells=healed(MODEL_NAMES),
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
        pretrain=network_files("pretrain.json", TRAINED_NETWORKS),
        pretrain_curves=network_files("pretrain_curve.parquet", TRAINED_NETWORKS),
        baselines=expand(BASELINE, zip, **NETWORK_COLUMNS),
        recoveries=expand(f"{UNIT}/{CELL_IN_UNIT}/recovery.json", zip, **CELL_COLUMNS) if CELLS else [],
        curves=expand(f"{UNIT}/{CELL_IN_UNIT}/curve.parquet", zip, **CELL_COLUMNS) if CELLS else [],
        thresholds={m["name"]: m["retrain"]["thresholds"] for m in CONFIG["models"]},
        pretraining_tokens={m["name"]: m.get("pretraining_tokens") for m in CONFIG["models"]},
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
