# Config validation and the grid. No job starts unless the config passes both the JSON schema and the
# semantic checks (layer in range, corpus present, ...); errors name the offending key.
import selfheal.config
import selfheal.prefix_cache
from snakemake.utils import validate

CONFIG = selfheal.config.resolve(config)
validate(config, str(selfheal.config.SCHEMA_PATH))

CELLS = selfheal.config.cells(CONFIG)
PLOTS = ["recovery_cost", "recovery_examples", "recovery_curves", "damage"]
THREADS = CONFIG["threads"]
EVAL = selfheal.config.canonical(CONFIG["eval"])


wildcard_constraints:
    model="[A-Za-z0-9_.-]+",
    target="L[0-9]+|(enc|dec)[.][0-9]+|none|all|enc|dec|swap[0-9]+",
    policy="full|attn|self_attn|cross_attn|mlp|ln|embeddings|none",
    init="fresh|original|none",
    regime="frozen|layer|full",
    seed="[0-9]+",
    depth="[0-9]+",


def model_cfg(wildcards):
    return selfheal.config.model_by_name(CONFIG, wildcards.model)


def is_pretrained(name):
    return selfheal.config.model_by_name(CONFIG, name)["source"] == "pretrained"


def model_dir(name):
    """Where a model's trained weights and summary live: pretrained here, or imported from elsewhere."""
    return f"results/pretrained/{name}" if is_pretrained(name) else f"results/models/{name}"


def trained_dir(wildcards):
    return model_dir(wildcards.model) + "/trained"


def model_summary(wildcards):
    return model_dir(wildcards.model) + "/pretrain.json"


def tokens(wildcards):
    """Token streams in the model's own vocabulary: our BPE for models pretrained here, else the model's."""
    key = wildcards.model if is_pretrained(wildcards.model) else "bpe"
    return f"results/corpus/{key}/tokens.safetensors"


def theta0(wildcards):
    """The step-0 weights (only models pretrained here have them; init 'original' is refused otherwise)."""
    return [] if is_pretrained(wildcards.model) else f"results/models/{wildcards.model}/theta0"


def _cache_sharing():
    """How many cells could start from each (model, depth) prefix cache."""
    counts = {}
    for c in CELLS:
        depth = selfheal.prefix_cache.cache_depth(selfheal.config.model_by_name(CONFIG, c.model), c.target,
                                                  c.policy, c.regime)
        if depth is not None:
            counts[(c.model, depth)] = counts.get((c.model, depth), 0) + 1
    return counts


CACHE_SHARING = _cache_sharing()


def prefix_cache(wildcards):
    """The frozen-prefix cache this cell starts from, or nothing (then it runs the plain forward): only where it
    is valid (prefix_cache.cache_depth) and pays for itself (prefix_cache.worth_building)."""
    m = model_cfg(wildcards)
    depth = selfheal.prefix_cache.cache_depth(m, wildcards.target, wildcards.policy, wildcards.regime)
    if depth is None or not selfheal.prefix_cache.worth_building(m, CACHE_SHARING[(wildcards.model, depth)]):
        return []
    prefix = f"results/cache/{wildcards.model}/depth{depth}"
    return [prefix + "/train.npy", prefix + "/val.npy"]


SCRATCH_MODELS = [m["name"] for m in CONFIG["models"] if m["source"] == "scratch"]


def pretrain_params(wildcards):
    """Everything that defines a model's pretraining (and nothing about retraining, so retrain edits keep it)."""
    m = model_cfg(wildcards)
    return selfheal.config.canonical({k: v for k, v in m.items() if k != "retrain"})


def import_params(wildcards):
    """What identifies a downloaded model (editing its retrain or eval settings does not re-import it)."""
    m = model_cfg(wildcards)
    keys = ("name", "source", "name_or_path", "gguf_file", "arch", "n_layer", "n_dec_layer")
    return selfheal.config.canonical({k: m[k] for k in keys if k in m})


def retrain_params(wildcards):
    """The cell's own retrain settings: editing one model's retrain section re-runs only that model's cells."""
    return selfheal.config.canonical(model_cfg(wildcards))


def cell_dict(wildcards):
    return {
        "model": wildcards.model,
        "target": wildcards.target,
        "policy": wildcards.policy,
        "init": wildcards.init,
        "regime": wildcards.regime,
        "seed": int(wildcards.seed),
    }


def corpus_params():
    return selfheal.config.canonical(CONFIG["corpus"])
