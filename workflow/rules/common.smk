# The pre-run check and the grid. No job starts unless the config passes selfheal.config.resolve: the JSON schema
# (kept in the package, src/selfheal/config/schema.yaml, validated there once) and the semantic checks (layer in
# range, corpus present, ...); errors name the offending key. Paths are spelled here and in the rules only.
import selfheal.analysis.plots
import selfheal.config
import selfheal.grid

CONFIG = selfheal.config.resolve(config)
CELLS = selfheal.grid.cells(CONFIG)
CELL_COLUMNS = selfheal.grid.columns(CELLS)
UNITS = selfheal.grid.units(CELLS)
UNIT_COLUMNS = selfheal.grid.columns(UNITS)
PLOTS = list(selfheal.analysis.plots.FIGURES)
THREADS = CONFIG["threads"]
EVAL = selfheal.config.canonical(CONFIG["eval"])
SCRATCH_MODELS = [m["name"] for m in CONFIG["models"] if m["source"] == "scratch"]
PRETRAINED_MODELS = [m["name"] for m in CONFIG["models"] if m["source"] == "pretrained"]
ADAPTED_MODELS = [m["name"] for m in CONFIG["models"] if m["source"] == "pretrained" and m["adapt"]]
UNADAPTED_MODELS = [m for m in PRETRAINED_MODELS if m not in ADAPTED_MODELS]
# The job that writes a network's baseline is the one that trained it (pretrain: the models pretrained here and the
# frozen-random variants; adapt), or else the baseline job (a downloaded model healed as imported).
PRETRAIN_MODELS_RE = selfheal.grid.one_of(
    [
        m["name"]
        for m in CONFIG["models"] + selfheal.grid.frozen_random_models(CONFIG)
        if m.get("source", "scratch") == "scratch"
    ]
)
ADAPT_MODELS_RE = selfheal.grid.one_of(ADAPTED_MODELS)
BASELINE_MODELS_RE = selfheal.grid.one_of(UNADAPTED_MODELS)
# every pretrained network (model x pretraining seed): those built here, those adapted from a downloaded model
NETWORK_COLUMNS = selfheal.grid.columns(selfheal.grid.networks(CONFIG))
SCRATCH_NETWORKS = selfheal.grid.columns(
    selfheal.grid.networks(CONFIG, [m for m in CONFIG["models"] if m["source"] == "scratch"])
)
ADAPTED_NETWORKS = selfheal.grid.columns(
    selfheal.grid.networks(CONFIG, [m for m in CONFIG["models"] if m["name"] in ADAPTED_MODELS])
)

# Paths, each spelled once, under the config's results_dir ("results" for the default config; each shipped
# config has its own, so running the examples one after another never overwrites another's outputs).
RESULTS = CONFIG["results_dir"].rstrip("/")
CORPUS = f"{RESULTS}/corpus"
TOKENS = f"{RESULTS}/corpus/{{tokenizer}}/tokens.safetensors"
SCRATCH = f"{RESULTS}/models/{{model}}/p{{pretrain_seed}}"  # a network pretrained here (grid.Network)
IMPORTED = f"{RESULTS}/pretrained/{{model}}"  # a downloaded model, as imported
ADAPTED = f"{RESULTS}/adapted/{{model}}/p{{pretrain_seed}}"  # a downloaded model adapted to the corpus
BASELINE = f"{RESULTS}/baselines/{{model}}/p{{pretrain_seed}}.json"
UNIT = f"{RESULTS}/cells/{{model}}/p{{pretrain_seed}}/{{regime}}"  # one heal job's cells (grid.Unit)
CELL_IN_UNIT = "s{seed}/{target}-{policy}-{init}"  # a cell's folder inside its unit's
# a heal job's checkpoints and its finished cells, kept for its next run (an added seed trains only its cells)
WORK = f"{RESULTS}/work/{{model}}/p{{pretrain_seed}}/{{regime}}"
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
    """The settings of one network (model and pretraining seed), or of a model where no seed is in the path."""
    m = selfheal.grid.model_by_name(CONFIG, wildcards.model)
    if "pretrain_seed" in wildcards.keys():
        return selfheal.grid.network_config(m, int(wildcards.pretrain_seed))
    return m


def model_dir(wildcards):
    """Where a network's trained weights and summary live: pretrained here, adapted from a downloaded model, or
    imported as is (a downloaded model healed without adaptation)."""
    if wildcards.model in ADAPTED_MODELS:
        return ADAPTED.format(model=wildcards.model, pretrain_seed=wildcards.pretrain_seed)
    if wildcards.model in PRETRAINED_MODELS:
        return IMPORTED.format(model=wildcards.model)
    return SCRATCH.format(model=wildcards.model, pretrain_seed=wildcards.pretrain_seed)


def trained_dir(wildcards):
    return f"{model_dir(wildcards)}/trained"


def model_summary(wildcards):
    return f"{model_dir(wildcards)}/pretrain.json"


def tokens(wildcards):
    """Token streams in the model's own vocabulary: our BPE for models pretrained here, else the model's."""
    key = wildcards.model if wildcards.model in PRETRAINED_MODELS else "bpe"
    return TOKENS.format(tokenizer=key)


def tokenizer_source(wildcards):
    """Our BPE's tokenizer.json, or a downloaded model's folder (its own tokenizer)."""
    if wildcards.tokenizer == "bpe":
        return f"{CORPUS}/tokenizer.json"
    return f"{IMPORTED.format(model=wildcards.tokenizer)}/trained"


def theta0(wildcards):
    """The step-0 weights (only models pretrained here have them; init 'original' is refused otherwise)."""
    if wildcards.model in PRETRAINED_MODELS:
        return []
    return f"{model_dir(wildcards)}/theta0"


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


def work_dir(wildcards):
    return WORK.format(**wildcards)


def imported_dir(wildcards):
    return f"{IMPORTED.format(model=wildcards.model)}/trained"


def cell_folder(wildcards):
    """The per-cell folder pattern, passed as is (a function, so Snakemake does not expand its wildcards)."""
    return CELL_IN_UNIT


def unit_cells(wildcards):
    """The cells one heal job runs."""
    unit = selfheal.grid.Unit(wildcards.model, wildcards.regime, int(wildcards.pretrain_seed))
    return [c.as_dict() for c in selfheal.grid.cells_of(CELLS, unit)]


def corpus_params():
    return selfheal.config.canonical(CONFIG["corpus"])
