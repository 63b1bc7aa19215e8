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

# Paths, each spelled once, under the config's results_dir ("results" for the default config; each shipped
# config has its own, so running the examples one after another never overwrites another's outputs).
RESULTS = CONFIG["results_dir"].rstrip("/")
CORPUS = f"{RESULTS}/corpus"
TOKENS = f"{RESULTS}/corpus/{{tokenizer}}/tokens.safetensors"
SCRATCH = f"{RESULTS}/models/{{model}}"
IMPORTED = f"{RESULTS}/pretrained/{{model}}"
BASELINE = f"{RESULTS}/baselines/{{model}}.json"
UNIT = f"{RESULTS}/cells/{{model}}/{{regime}}-s{{seed}}"  # one heal job's cells (selfheal.grid.Unit)
CELL_IN_UNIT = "{target}-{policy}-{init}"  # a cell's folder inside its unit's
WORK = f"{RESULTS}/work/{{model}}/{{regime}}-s{{seed}}"  # a running heal job's checkpoints and finished cells
LOGS = f"{RESULTS}/logs"


wildcard_constraints:
    model="[A-Za-z0-9_.-]+",
    target=selfheal.grid.WILDCARD,
    policy="full|attn|self_attn|cross_attn|mlp|ln|embeddings|none",
    init="fresh|original|none",
    regime="frozen|layer|full",
    seed="[0-9]+",
    tokenizer="[A-Za-z0-9_.-]+",


def model_cfg(wildcards):
    return selfheal.grid.model_by_name(CONFIG, wildcards.model)


def model_dir(wildcards):
    """Where a model's trained weights and summary live: pretrained here, or imported from elsewhere."""
    pattern = IMPORTED if wildcards.model in PRETRAINED_MODELS else SCRATCH
    return pattern.format(model=wildcards.model)


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
    return f"{SCRATCH.format(model=wildcards.model)}/theta0"


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


def cell_folder(wildcards):
    """The per-cell folder pattern, passed as is (a function, so Snakemake does not expand its wildcards)."""
    return CELL_IN_UNIT


def unit_cells(wildcards):
    """The cells one heal job runs."""
    unit = selfheal.grid.Unit(wildcards.model, wildcards.regime, int(wildcards.seed))
    return [c.as_dict() for c in selfheal.grid.cells_of(CELLS, unit)]


def corpus_params():
    return selfheal.config.canonical(CONFIG["corpus"])
