# Frozen random components (Bogoychev 2021), on only when some model has a frozen_random list: the derived models
# ('<model>.frozen-<components>') are pretrained by model jobs of their own and make no cells; one table and one plot
# compare them with their all-trainable base models.
FROZEN_RANDOM_VARIANTS = [m["name"] for m in selfheal.grid.frozen_random_models(CONFIG)]
FROZEN_RANDOM_BASES = list(dict.fromkeys(m["base_model"] for m in selfheal.grid.frozen_random_models(CONFIG)))
FROZEN_RANDOM_NETWORKS = selfheal.grid.columns(
    selfheal.grid.networks(CONFIG, selfheal.grid.frozen_random_models(CONFIG))
)
FROZEN_RANDOM_BASE_NETWORKS = selfheal.grid.columns(
    selfheal.grid.networks(CONFIG, [m for m in CONFIG["models"] if m["name"] in FROZEN_RANDOM_BASES])
)
FROZEN_RANDOM_OUTPUTS = (
    [f"{RESULTS}/frozen_random.parquet", f"{RESULTS}/plots/frozen_random.html", f"{RESULTS}/plots/frozen_random.png"]
    if FROZEN_RANDOM_VARIANTS
    else []
)


rule frozen_random_table:
    input:
        trained(NETWORKS, NETWORK, FROZEN_RANDOM_BASES + FROZEN_RANDOM_VARIANTS),  # their training jobs' networks
    output:
        f"{RESULTS}/frozen_random.parquet",
    log:
        f"{LOGS}/frozen_random_table.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        references=network_files("pretrain.json", FROZEN_RANDOM_BASE_NETWORKS),
        variants=network_files("pretrain.json", FROZEN_RANDOM_NETWORKS),
    script:
        "../scripts/frozen_random_table.py"


rule frozen_random_plot:
    input:
        f"{RESULTS}/frozen_random.parquet",
    output:
        html=report(
            f"{RESULTS}/plots/frozen_random.html",
            caption="../report/frozen_random.rst",
            category="Frozen random components",
        ),
        png=f"{RESULTS}/plots/frozen_random.png",
    log:
        f"{LOGS}/frozen_random_plot.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/frozen_random_plot.py"
