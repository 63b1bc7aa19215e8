# Config validation and the grid. No job starts unless the config passes both the JSON schema and the
# semantic checks (layer in range, corpus present, ...); errors name the offending key.
import selfheal.config
from snakemake.utils import validate

CONFIG = selfheal.config.resolve(config)
validate(config, str(selfheal.config.SCHEMA_PATH))

CELLS = selfheal.config.cells(CONFIG)
PLOTS = ["recovery_cost", "recovery_curves", "damage"]
THREADS = CONFIG["threads"]
EVAL = selfheal.config.canonical(CONFIG["eval"])


wildcard_constraints:
    model="[A-Za-z0-9_.-]+",
    target="L[0-9]+|none|all",
    policy="full|attn|mlp|ln|none",
    init="fresh|original|none",
    regime="frozen|layer|full",
    seed="[0-9]+",


def model_cfg(wildcards):
    return selfheal.config.model_by_name(CONFIG, wildcards.model)


def pretrain_params(wildcards):
    """Everything that defines a model's pretraining (and nothing about retraining, so retrain edits keep it)."""
    m = model_cfg(wildcards)
    return selfheal.config.canonical({k: v for k, v in m.items() if k != "retrain"})


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
