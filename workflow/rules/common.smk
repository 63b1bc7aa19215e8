# The pre-run check, the paths and the grid. No job starts unless the config passes selfheal.config.resolve: the JSON
# schema (src/selfheal/config/schema.yaml) and the semantic checks (layer in range, corpus present, ...); errors name
# the offending key. The paths are selfheal.layout's, under the config's results_dir; nothing here reads a result.
import functools
import os
import types

import selfheal.analysis.plots
import selfheal.config
import selfheal.config.schema
import selfheal.grid
import selfheal.heal.plan
from selfheal import layout

# a config error is one line naming the file that sets the key, and no traceback
CONFIG = selfheal.config.resolve_or_exit(config, workflow.overwrite_configfiles)

# Paths under the config's results_dir ("results" for the default config; each shipped config has its own).
RESULTS = CONFIG["results_dir"].rstrip("/")
CORPUS = f"{RESULTS}/{layout.CORPUS}"
TOKENS = f"{RESULTS}/{layout.TOKENS}"
IMPORTED = f"{RESULTS}/{layout.IMPORTED}"  # a downloaded model, as imported
NETWORK = f"{RESULTS}/{layout.NETWORK}"  # a network job's three outputs: the network, its baseline, its cells
BASELINE = f"{RESULTS}/{layout.BASELINE}"
CELLS_OF_NETWORK = f"{RESULTS}/{layout.CELLS}"
WORK = f"{RESULTS}/{layout.WORK}"  # a network job's staged network and cells, kept for its next run
LOGS = f"{RESULTS}/{layout.LOGS}"

CELLS = selfheal.grid.cells(CONFIG)
AGGREGATED = layout.read_files(CONFIG, CELLS, RESULTS)  # what the aggregate reads, by kind
PLOTS = list(selfheal.analysis.plots.FIGURES)
THREADS = CONFIG["threads"]
EVAL = selfheal.config.canonical(CONFIG["eval"])
PRETRAINED_MODELS = [m["name"] for m in CONFIG["models"] if m["source"] == "pretrained"]
ADAPTED_MODELS = [m["name"] for m in CONFIG["models"] if m["source"] == "pretrained" and m["adapt"]]
UNADAPTED_MODELS = [m for m in PRETRAINED_MODELS if m not in ADAPTED_MODELS]
# The training jobs: one per network (rule network) of the grid's models. A cluster profile bundles jobs with
# Snakemake's own groups (profiles/slurm). The frozen-random variants are the experiments module's.
ALL_MODELS = CONFIG["models"]
MODEL_NAMES = [m["name"] for m in ALL_MODELS]
TOKENIZER_KEYS = selfheal.grid.tokenizer_keys(ALL_MODELS)  # one tokenize job per downloaded checkpoint
NETWORK_CELLS = {}  # each network's cells, as dicts: (model, pretraining seed) -> cells
for _cell in CELLS:
    NETWORK_CELLS.setdefault((_cell.model, _cell.pretrain_seed), []).append(_cell.as_dict())

WILDCARDS = selfheal.grid.wildcard_constraints(selfheal.config.schema.load_schema())


wildcard_constraints:
    model="[A-Za-z0-9_.-]+",
    target=selfheal.grid.WILDCARD,
    policy=WILDCARDS["policy"],
    init=WILDCARDS["init"],
    regime=WILDCARDS["regime"],
    seed="[0-9]+",
    pretrain_seed="[0-9]+",
    tokenizer="[A-Za-z0-9_.-]+",


def model_cfg(wildcards):
    """The settings of one model of the grid."""
    return selfheal.grid.model_by_name(CONFIG, wildcards.model)


def model_source(wildcards):
    """How a network job makes its network (selfheal.heal.job.SOURCES)."""
    if wildcards.model in ADAPTED_MODELS:
        return "adapt"
    return "as_downloaded" if wildcards.model in PRETRAINED_MODELS else "scratch"


@functools.cache
def network_settings(model, seed):
    """One network's settings (selfheal.grid.network_config: adding a seed never changes an existing network's)."""
    return selfheal.config.canonical(selfheal.grid.network_config(selfheal.grid.model_by_name(CONFIG, model), seed))


def tokens(wildcards):
    """Token streams in the model's own vocabulary: our BPE for models pretrained here, else its checkpoint's."""
    return TOKENS.format(tokenizer=TOKENIZER_KEYS[wildcards.model])


def tokenizer_source(wildcards):
    """Our BPE's tokenizer.json, or a downloaded model's folder (its own tokenizer)."""
    if wildcards.tokenizer == "bpe":
        return f"{CORPUS}/tokenizer.json"
    return f"{IMPORTED.format(model=wildcards.tokenizer)}/trained"


def import_params(wildcards):
    """What identifies a downloaded model (selfheal.grid.covered: editing its other settings does not re-import it)."""
    return selfheal.config.canonical(selfheal.grid.covered("import", model_cfg(wildcards)))


def imported_dir(wildcards):
    """A downloaded model's folder, as imported (nothing for a model pretrained here)."""
    return f"{IMPORTED.format(model=wildcards.model)}/trained" if wildcards.model in PRETRAINED_MODELS else []


def imported_summary(wildcards):
    return f"{IMPORTED.format(model=wildcards.model)}/{layout.PRETRAIN}" if wildcards.model in PRETRAINED_MODELS else []


def work_dir(wildcards):
    return WORK.format(**wildcards)


def job_work(wildcards):
    """A network job's work: its network's settings and its cells, with the plan's summary (what it trains and
    keeps). A namespace, which Snakemake does not record as a param: a dry run's reason shows the short digest
    (job_digest), not every cell."""
    network = network_settings(wildcards.model, int(wildcards.pretrain_seed))
    cells = NETWORK_CELLS.get((wildcards.model, int(wildcards.pretrain_seed)), [])
    summary = selfheal.heal.plan.summary(model_source(wildcards), network, EVAL, cells, work_dir(wildcards))
    return types.SimpleNamespace(network=network, cells=cells, summary=summary)


def job_digest(wildcards):
    """The param Snakemake records for a network job: its cell count and a hash of its settings and cells."""
    cells = NETWORK_CELLS.get((wildcards.model, int(wildcards.pretrain_seed)), [])
    return selfheal.heal.plan.digest(network_settings(wildcards.model, int(wildcards.pretrain_seed)), cells, EVAL)


def donor_folders_of(cells, seed):
    """The trained folder of each donor whose encoder ``cells`` (of a network of pretraining seed ``seed``) swap in
    (selfheal.grid.donor_network): {donor: folder}."""
    networks = {d: selfheal.grid.donor_network(CONFIG, d, seed) for d in selfheal.grid.donors(cells)}
    return {d: f"{NETWORK.format(**vars(n))}/trained" for d, n in networks.items()}


def donor_folders(wildcards):
    seed = int(wildcards.pretrain_seed)
    return donor_folders_of([c for c in CELLS if c.model == wildcards.model and c.pretrain_seed == seed], seed)


def donor_networks(wildcards):
    """The network jobs' outputs that hold the donors' trained folders (a job waits for its donors' networks)."""
    return sorted({os.path.dirname(f) for f in donor_folders(wildcards).values()})


def network_files(name, networks):
    """A file of each of ``networks`` (grid.columns), inside its network's folder."""
    return expand(f"{NETWORK}/{name}", zip, **networks) if networks else []


def trained(pattern, models):
    """The network jobs' outputs ``pattern`` (NETWORK, BASELINE, CELLS_OF_NETWORK) of ``models`` (names)."""
    networks = selfheal.grid.networks(CONFIG, [m for m in ALL_MODELS if m["name"] in models])
    return expand(pattern, zip, **selfheal.grid.columns(networks)) if networks else []


def corpus_params():
    return selfheal.config.canonical(CONFIG["corpus"])
