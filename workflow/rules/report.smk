rule aggregate:
    input:
        # the network jobs' outputs (networks, baselines, cells); the files read in them are named in params
        networks=trained(NETWORK, MODEL_NAMES),
        baselines=trained(BASELINE, MODEL_NAMES),
        cells=trained(CELLS_OF_NETWORK, MODEL_NAMES),
        unadapted=expand(f"{IMPORTED}/{layout.PRETRAIN}", model=UNADAPTED_MODELS),
    output:
        summary=f"{RESULTS}/summary.parquet",
        curves=f"{RESULTS}/curves.parquet",
        networks=f"{RESULTS}/networks.parquet",
    log:
        f"{LOGS}/aggregate.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        files=AGGREGATED,
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
