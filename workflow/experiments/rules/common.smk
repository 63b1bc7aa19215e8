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
FROZEN_RANDOM_NETWORK = f"{RESULTS}/frozen_random/networks/{{model}}/p{{pretrain_seed}}"
FROZEN_RANDOM_WORK = f"{RESULTS}/frozen_random/work/{{model}}/p{{pretrain_seed}}"  # staged, kept for a re-run
FROZEN_RANDOM_EVAL = selfheal.config.canonical(CORE["eval"])
FROZEN_RANDOM_OUTPUTS = (
    [f"{RESULTS}/frozen_random.parquet", f"{RESULTS}/plots/frozen_random.html", f"{RESULTS}/plots/frozen_random.png"]
    if FROZEN_RANDOM_VARIANTS
    else []
)


def frozen_random_networks(models):
    """The network folders of ``models`` (one per pretraining seed)."""
    networks = selfheal.grid.columns(selfheal.grid.networks(CORE, models))
    return expand(FROZEN_RANDOM_NETWORK, zip, **networks) if networks else []


def frozen_random_settings(wildcards):
    """One network's settings (selfheal.grid.network_config: its pretraining seed set, the seed list left out)."""
    model = FROZEN_RANDOM_MODELS[wildcards.model]
    return selfheal.config.canonical(selfheal.grid.network_config(model, int(wildcards.pretrain_seed)))
