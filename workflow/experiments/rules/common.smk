# The experiments' config, checked before any job (errors name the key), the core's settings they use, and the
# frozen-random experiment's paths and settings (the transfer experiments': rules/transfer.smk).
import selfheal.config
import selfheal.experiments.config
import selfheal.grid

CORE = config["core"]
EXPERIMENTS = selfheal.experiments.config.resolve(config["own"], CORE)
RESULTS = CORE["results_dir"].rstrip("/")
LOGS = f"{RESULTS}/logs"
THREADS = CORE["threads"]
HARDWARE = selfheal.config.canonical(CORE["hardware"])

# Frozen random components: the derived models and the all-trainable references of their base models.
FROZEN_RANDOM_VARIANTS = EXPERIMENTS["frozen_random"]
FROZEN_RANDOM_REFERENCES = [m for m in CORE["models"] if m["name"] in {v["base_model"] for v in FROZEN_RANDOM_VARIANTS}]
FROZEN_RANDOM_MODELS = {m["name"]: m for m in FROZEN_RANDOM_REFERENCES + FROZEN_RANDOM_VARIANTS}
# one job per model (its networks, one per pretraining seed, in turn: start-up paid once), staged for a re-run
FROZEN_RANDOM_NETWORKS = f"{RESULTS}/frozen_random/networks/{{model}}"
FROZEN_RANDOM_NETWORK_IN_MODEL = "p{pretrain_seed}"  # theta0/, trained/, pretrain_curve.parquet, pretrain.json
FROZEN_RANDOM_WORK = f"{RESULTS}/frozen_random/work/{{model}}"
FROZEN_RANDOM_EVAL = selfheal.config.canonical(CORE["eval"])
FROZEN_RANDOM_OUTPUTS = (
    [f"{RESULTS}/frozen_random.parquet", f"{RESULTS}/plots/frozen_random.html", f"{RESULTS}/plots/frozen_random.png"]
    if FROZEN_RANDOM_VARIANTS
    else []
)


def frozen_random_summaries(models):
    """The pretrain.json of each network of ``models`` (one per pretraining seed), inside its model's folder."""
    return [
        f"{FROZEN_RANDOM_NETWORKS}/{FROZEN_RANDOM_NETWORK_IN_MODEL}/pretrain.json".format(
            model=n.model, pretrain_seed=n.pretrain_seed
        )
        for n in selfheal.grid.networks(CORE, models)
    ]


def frozen_random_settings(wildcards):
    """The settings of a model's networks (selfheal.grid.network_config: each its pretraining seed set, the seed
    list left out), in the order of its pretraining seeds."""
    model = FROZEN_RANDOM_MODELS[wildcards.model]
    return [selfheal.config.canonical(selfheal.grid.network_config(model, seed)) for seed in model["pretrain"]["seeds"]]
