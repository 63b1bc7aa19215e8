rule aggregate:
    input:
        units=expand(UNIT, zip, **UNIT_COLUMNS) if CELLS else [],
        pretrain=expand(f"{SCRATCH}/pretrain.json", model=SCRATCH_MODELS),
        pretrain_curves=expand(f"{SCRATCH}/pretrain_curve.parquet", model=SCRATCH_MODELS),
    output:
        summary=f"{RESULTS}/summary.parquet",
        curves=f"{RESULTS}/curves.parquet",
    log:
        f"{LOGS}/aggregate.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        recoveries=expand(f"{UNIT}/{CELL_IN_UNIT}/recovery.json", zip, **CELL_COLUMNS) if CELLS else [],
        curves=expand(f"{UNIT}/{CELL_IN_UNIT}/curve.parquet", zip, **CELL_COLUMNS) if CELLS else [],
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
