rule aggregate:
    input:
        recoveries=[c.retrain_dir + "/recovery.json" for c in CELLS],
        curves=[c.retrain_dir + "/curve.parquet" for c in CELLS],
        pretrain=expand("results/models/{model}/pretrain.json", model=SCRATCH_MODELS),
        pretrain_curves=expand("results/models/{model}/pretrain_curve.parquet", model=SCRATCH_MODELS),
    output:
        summary="results/summary.parquet",
        curves="results/curves.parquet",
    log:
        "results/logs/aggregate.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/aggregate.py"


rule plots:
    input:
        summary="results/summary.parquet",
        curves="results/curves.parquet",
    output:
        recovery_cost_html=report(
            "results/plots/recovery_cost.html",
            caption="../report/recovery_cost.rst",
            category="Recovery",
        ),
        recovery_cost_png="results/plots/recovery_cost.png",
        recovery_examples_html=report(
            "results/plots/recovery_examples.html",
            caption="../report/recovery_examples.rst",
            category="Recovery",
        ),
        recovery_examples_png="results/plots/recovery_examples.png",
        recovery_curves_html=report(
            "results/plots/recovery_curves.html",
            caption="../report/recovery_curves.rst",
            category="Recovery",
        ),
        recovery_curves_png="results/plots/recovery_curves.png",
        damage_html=report(
            "results/plots/damage.html", caption="../report/damage.rst", category="Damage"
        ),
        damage_png="results/plots/damage.png",
    log:
        "results/logs/plots.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/plots.py"
