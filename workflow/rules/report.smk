rule aggregate:
    input:
        # the training jobs' outputs (networks, baselines, cells); the files read in them are named in params
        networks=awaited(trained(NETWORKS, NETWORK, MODEL_NAMES)),
        baselines=awaited(trained(BASELINES, BASELINE, MODEL_NAMES)),
        cells=awaited(healed(MODEL_NAMES)),
        unadapted=awaited(expand(f"{IMPORTED}/pretrain.json", model=UNADAPTED_MODELS)),
        stamp=READ_STAMPED,  # partial: true: the file of the stamp below
    output:
        summary=f"{READOUT}/summary.parquet",
        curves=f"{READOUT}/curves.parquet",
        networks=f"{READOUT}/networks.parquet",
    log:
        f"{READOUT_LOGS}/aggregate.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        files=AGGREGATED,
        stamp=READ_STAMP,  # partial: true: the read files' sizes and times, as one hash
        thresholds={m["name"]: m["retrain"]["thresholds"] for m in CONFIG["models"]},
        pretraining_tokens={m["name"]: m.get("pretraining_tokens") for m in CONFIG["models"]},
    script:
        "../scripts/aggregate.py"


rule plots:
    input:
        summary=f"{READOUT}/summary.parquet",
        curves=f"{READOUT}/curves.parquet",
    output:
        html=[
            report(f"{READOUT}/plots/{name}.html", caption=f"../report/{name}.rst", category="Recovery")
            for name in PLOTS
        ],
        png=expand(f"{READOUT}/plots/{{name}}.png", name=PLOTS),
    log:
        f"{READOUT_LOGS}/plots.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        names=PLOTS,
    script:
        "../scripts/plots.py"
