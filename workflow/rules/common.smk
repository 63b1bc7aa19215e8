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
# The models that get a job of their own (the model rule): the grid's and the frozen-random variants (no cells).
JOB_MODELS = [m["name"] for m in CONFIG["models"] + selfheal.grid.frozen_random_models(CONFIG)]
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
UNIT_IN_MODEL = "p{pretrain_seed}/{regime}"  # one heal unit's cells (grid.Unit)
CELL_IN_UNIT = "s{seed}/{target}-{policy}-{init}"  # a cell's folder inside its unit's
NETWORK = f"{NETWORKS}/{NETWORK_IN_MODEL}"
BASELINE = f"{BASELINES}/{BASELINE_IN_MODEL}"
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


def network_params(wildcards):
    """Each network's settings (pretrain.seed set; the seed list left out, so adding a seed never changes an
    existing network's settings). Editing one model's settings re-runs only that model's job, which keeps every
    staged network and cell whose own settings and inputs did not change."""
    m = model_cfg(wildcards)
    return [selfheal.config.canonical(selfheal.grid.network_config(m, s)) for s in m["pretrain"]["seeds"]]


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


def model_cells(wildcards):
    """The cells one model job heals (every network's; none for a frozen-random variant)."""
    return [c.as_dict() for c in CELLS if c.model == wildcards.model]


def network_files(name, networks):
    """A file of each of ``networks`` (grid.columns), inside its model job's networks folder."""
    return expand(f"{NETWORK}/{name}", zip, **networks) if networks else []


def corpus_params():
    return selfheal.config.canonical(CONFIG["corpus"])
