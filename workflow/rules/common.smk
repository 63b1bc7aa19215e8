# The pre-run check and the grid. No job starts unless the config passes selfheal.config.resolve: the JSON schema
# (kept in the package, src/selfheal/config/schema.yaml, validated there once) and the semantic checks (layer in
# range, corpus present, ...); errors name the offending key. Paths are spelled here and in the rules only.
import selfheal.analysis.plots
import selfheal.config
import selfheal.grid

CONFIG = selfheal.config.resolve(config)
CELLS = selfheal.grid.cells(CONFIG)
CELL_COLUMNS = selfheal.grid.columns(CELLS)
PLOTS = list(selfheal.analysis.plots.FIGURES)
THREADS = CONFIG["threads"]
EVAL = selfheal.config.canonical(CONFIG["eval"])
PRETRAINED_MODELS = [m["name"] for m in CONFIG["models"] if m["source"] == "pretrained"]
ADAPTED_MODELS = [m["name"] for m in CONFIG["models"] if m["source"] == "pretrained" and m["adapt"]]
UNADAPTED_MODELS = [m for m in PRETRAINED_MODELS if m not in ADAPTED_MODELS]
# The training jobs (job_unit): one per model (the model rule) or one per network (the network rule), for the
# grid's models and the frozen-random variants (which make no cells).
ALL_MODELS = CONFIG["models"] + selfheal.grid.frozen_random_models(CONFIG)
MODEL_NAMES = [m["name"] for m in ALL_MODELS]
JOB_MODELS = MODEL_NAMES if CONFIG["job_unit"] == "model" else []
JOB_NETWORKS = selfheal.grid.networks(CONFIG, ALL_MODELS) if CONFIG["job_unit"] == "network" else []
NETWORK_JOB_MODELS = list(dict.fromkeys(n.model for n in JOB_NETWORKS))
# every pretrained network (model x pretraining seed): those built here, those adapted from a downloaded model
NETWORK_COLUMNS = selfheal.grid.columns(selfheal.grid.networks(CONFIG))
# the networks trained here (from scratch, or adapted from a downloaded model): they have a pretraining record
TRAINED_NETWORKS = selfheal.grid.columns(
    selfheal.grid.networks(CONFIG, [m for m in CONFIG["models"] if m["name"] not in UNADAPTED_MODELS])
)

# Paths, each spelled once, under the config's results_dir ("results" for the default config; each shipped
# config has its own, so running the examples one after another never overwrites another's outputs).
RESULTS = CONFIG["results_dir"].rstrip("/")
CORPUS = f"{RESULTS}/corpus"
TOKENS = f"{RESULTS}/corpus/{{tokenizer}}/tokens.safetensors"
IMPORTED = f"{RESULTS}/pretrained/{{model}}"  # a downloaded model, as imported
# A model job's three output folders, and what lies in them (grid.Network: a model and a pretraining seed)
NETWORKS = f"{RESULTS}/models/{{model}}"  # its networks trained here (from scratch or adapted)
NETWORK_IN_MODEL = "p{pretrain_seed}"  # theta0/, trained/, pretrain_curve.parquet, pretrain.json
BASELINES = f"{RESULTS}/baselines/{{model}}"
BASELINE_IN_MODEL = "p{pretrain_seed}.json"
CELLS_OF_MODEL = f"{RESULTS}/cells/{{model}}"
UNIT_IN_MODEL = f"{NETWORK_IN_MODEL}/{{regime}}"  # one heal unit's cells (grid.Unit), in its network's folder
CELL_IN_UNIT = "s{seed}/{target}-{policy}-{init}"  # a cell's folder inside its unit's
NETWORK = f"{NETWORKS}/{NETWORK_IN_MODEL}"  # a network job's three outputs: the same places, one network
BASELINE = f"{BASELINES}/{BASELINE_IN_MODEL}"
CELLS_OF_NETWORK = f"{CELLS_OF_MODEL}/{NETWORK_IN_MODEL}"
UNIT = f"{CELLS_OF_MODEL}/{UNIT_IN_MODEL}"
# a model job's staged networks and finished cells, kept for its next run (an added seed trains only what is new)
WORK = f"{RESULTS}/work/{{model}}"
NETWORK_WORK_IN_MODEL = "p{pretrain_seed}/network"  # (its units' cells are staged under UNIT_IN_MODEL)
LOGS = f"{RESULTS}/logs"


wildcard_constraints:
    model="[A-Za-z0-9_.-]+",
    target=selfheal.grid.WILDCARD,
    policy="full|attn|self_attn|cross_attn|mlp|ln|embeddings|none",
    init="fresh|original|trained|none",
    regime="frozen|layer|full",
    seed="[0-9]+",
    pretrain_seed="[0-9]+",
    tokenizer="[A-Za-z0-9_.-]+",


def model_cfg(wildcards):
    """The settings of one model (of the grid, or a frozen-random variant)."""
    return selfheal.grid.model_by_name(CONFIG, wildcards.model)


def model_source(wildcards):
    """How a model job makes its networks (selfheal.heal.job.SOURCES)."""
    if wildcards.model in ADAPTED_MODELS:
        return "adapt"
    return "as_downloaded" if wildcards.model in PRETRAINED_MODELS else "scratch"


def job_seeds(wildcards):
    """The pretraining seeds a training job makes: its network's (the network rule), or all of its model's."""
    if "pretrain_seed" in wildcards.keys():
        return [int(wildcards.pretrain_seed)]
    return model_cfg(wildcards)["pretrain"]["seeds"]


def network_params(wildcards):
    """Each network's settings (pretrain.seed set; the seed list left out, so adding a seed never changes an
    existing network's settings). Editing one model's settings re-runs only that model's jobs, which keep every
    staged network and cell whose own settings and inputs did not change."""
    m = model_cfg(wildcards)
    return [selfheal.config.canonical(selfheal.grid.network_config(m, s)) for s in job_seeds(wildcards)]


def tokens(wildcards):
    """Token streams in the model's own vocabulary: our BPE for models pretrained here, else the model's."""
    key = wildcards.model if wildcards.model in PRETRAINED_MODELS else "bpe"
    return TOKENS.format(tokenizer=key)


def tokenizer_source(wildcards):
    """Our BPE's tokenizer.json, or a downloaded model's folder (its own tokenizer)."""
    if wildcards.tokenizer == "bpe":
        return f"{CORPUS}/tokenizer.json"
    return f"{IMPORTED.format(model=wildcards.tokenizer)}/trained"


def import_params(wildcards):
    """What identifies a downloaded model (editing its retrain or eval settings does not re-import it)."""
    m = model_cfg(wildcards)
    keys = ("name", "source", "name_or_path", "gguf_file", "arch", "n_layer", "n_dec_layer")
    return selfheal.config.canonical({k: m[k] for k in keys if k in m})


def imported_dir(wildcards):
    """A downloaded model's folder, as imported (nothing for a model pretrained here)."""
    return f"{IMPORTED.format(model=wildcards.model)}/trained" if wildcards.model in PRETRAINED_MODELS else []


def imported_summary(wildcards):
    return f"{IMPORTED.format(model=wildcards.model)}/pretrain.json" if wildcards.model in PRETRAINED_MODELS else []


def work_dir(wildcards):
    return WORK.format(model=wildcards.model)


def layout(wildcards):
    """The patterns inside a model job's folders, passed as they are (a function, so that Snakemake does not
    expand their wildcards)."""
    return {
        "network": NETWORK_IN_MODEL,
        "baseline": BASELINE_IN_MODEL,
        "unit": UNIT_IN_MODEL,
        "cell": CELL_IN_UNIT,
        "network_work": NETWORK_WORK_IN_MODEL,
    }


def job_cells(wildcards):
    """The cells one training job heals (those of its networks; none for a frozen-random variant)."""
    seeds = job_seeds(wildcards)
    return [c.as_dict() for c in CELLS if c.model == wildcards.model and c.pretrain_seed in seeds]


def job_folders(wildcards):
    """Where a training job writes (its model's folders; a network job's outputs are its network's part of them)."""
    return {
        "networks": NETWORKS.format(model=wildcards.model),
        "baselines": BASELINES.format(model=wildcards.model),
        "cells": CELLS_OF_MODEL.format(model=wildcards.model),
    }


def trained(pattern_of_model, pattern_of_network, models):
    """The training jobs' outputs for ``models`` (names): each model's folder, or each of its networks' part."""
    if CONFIG["job_unit"] == "model":
        return expand(pattern_of_model, model=models)
    networks = selfheal.grid.networks(CONFIG, [m for m in ALL_MODELS if m["name"] in models])
    return expand(pattern_of_network, zip, **selfheal.grid.columns(networks)) if networks else []


def network_files(name, networks):
    """A file of each of ``networks`` (grid.columns), inside its network's folder."""
    return expand(f"{NETWORK}/{name}", zip, **networks) if networks else []


def corpus_params():
    return selfheal.config.canonical(CONFIG["corpus"])
