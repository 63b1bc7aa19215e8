# The pre-run check and the grid. No job starts unless the config passes selfheal.config.resolve: the JSON schema
# (kept in the package, src/selfheal/config/schema.yaml, validated there once) and the semantic checks (layer in
# range, corpus present, ...); errors name the offending key. Paths are spelled here and in the rules only.
import functools
import os
import types

import selfheal.analysis.plots
import selfheal.config
import selfheal.config.schema
import selfheal.grid
import selfheal.heal.lr_sensitivity
import selfheal.heal.plan
import selfheal.partial

CONFIG = selfheal.config.resolve(config)

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
CELL_FILE = f"{UNIT}/{CELL_IN_UNIT}/{{name}}"  # a cell's file (job_unit: cell: a cell's job's outputs)
# a model job's staged networks and finished cells, kept for its next run (an added seed trains only what is new)
WORK = f"{RESULTS}/work/{{model}}"
NETWORK_WORK_IN_MODEL = "p{pretrain_seed}/network"  # (its units' cells are staged under UNIT_IN_MODEL)
LOGS = f"{RESULTS}/logs"
# Where the tables, figures and answer page go (and their rules' logs): the results_dir, or its partial/ folder for
# the finished part of a study still running (partial: true), which never overwrites the study's own.
READOUT = f"{RESULTS}/partial" if CONFIG["partial"] else RESULTS
READOUT_LOGS = f"{READOUT}/logs"
# The lr-sensitivity check (retrain.lr_sensitivity; selfheal.heal.lr_sensitivity): per model, its runs' folder (each
# run: a multiplier's folder, its unit's, then the cell's), where they are staged, and the table beside the grid's cost
LR_SENSITIVITY = f"{RESULTS}/lr_sensitivity/{{model}}"
LR_RUN_IN_MODEL = f"{{multiplier}}/{UNIT_IN_MODEL}"
LR_SENSITIVITY_WORK = f"{WORK}/lr_sensitivity"
LR_SENSITIVITY_TABLE = f"{READOUT}/answer/lr_sensitivity.parquet"
LEFT_OUT_TABLE = f"{READOUT}/answer/left_out.parquet"  # partial: true: what the readout leaves out
READ_STAMP_FILE = f"{READOUT}/read_stamp.txt"  # partial: true: the stamp of the files it reads


def network_files(name, networks):
    """A file of each of ``networks`` (grid.columns), inside its network's folder."""
    return expand(f"{NETWORK}/{name}", zip, **networks) if networks else []


def aggregate_files(config, cells, names=None):
    """The files the aggregate reads, by kind, for the models ``names`` of ``config`` (default: all) and their
    ``cells`` (of the grid): each network's pretraining record and curve (those trained here) and baseline, each
    cell's result and curve, and a model used as downloaded its import record."""
    models = [m for m in config["models"] if names is None or m["name"] in names]
    unadapted = [m["name"] for m in models if m["source"] == "pretrained" and not m["adapt"]]
    trained = selfheal.grid.columns(selfheal.grid.networks(config, [m for m in models if m["name"] not in unadapted]))
    every = selfheal.grid.columns(selfheal.grid.networks(config, models))
    cells = selfheal.grid.columns([c for c in cells if c.model in {m["name"] for m in models}])
    return {
        "pretrain": network_files("pretrain.json", trained),
        "pretrain_curves": network_files("pretrain_curve.parquet", trained),
        "baselines": expand(BASELINE, zip, **every) if every else [],
        "recoveries": expand(f"{UNIT}/{CELL_IN_UNIT}/recovery.json", zip, **cells) if cells else [],
        "curves": expand(f"{UNIT}/{CELL_IN_UNIT}/curve.parquet", zip, **cells) if cells else [],
        "unadapted": expand(f"{IMPORTED}/pretrain.json", model=unadapted),
    }


def lr_runs(config):
    """Each run of the lr-sensitivity check (a cell of the grid at a multiple of the lr), per model of ``config``."""
    return {
        m["name"]: [
            {
                "recovery": f"{LR_SENSITIVITY}/{LR_RUN_IN_MODEL}/{CELL_IN_UNIT}/recovery.json".format(
                    multiplier=selfheal.heal.lr_sensitivity.label(x), **c.as_dict()
                ),
                "multiplier": x,
                "chosen_lr": m["retrain"]["lr"],
            }
            for x in m["retrain"]["lr_sensitivity"]
            for c in selfheal.heal.lr_sensitivity.cells(config, m)
        ]
        for m in config["models"]
    }


def finished_part(config):
    """partial: true reads the finished part of a study that is still running (selfheal.partial): the models with
    every file the aggregate reads for them (and their lr check where it has finished)."""
    cells = selfheal.grid.cells(config)
    return selfheal.partial.select(
        {m["name"]: sum(aggregate_files(config, cells, [m["name"]]).values(), []) for m in config["models"]},
        {name: [r["recovery"] for r in runs] for name, runs in lr_runs(config).items()},
        {m["name"]: m.get("heal", True) for m in config["models"]},
    )


def finished_networks(config):
    """partial: networks: per model, the pretraining seeds whose network, baseline and every cell are there."""
    done = {}
    for m in config["models"]:
        done[m["name"]] = []
        for seed in m["pretrain"]["seeds"]:
            one = selfheal.partial.with_seeds(config, m["name"], [seed])
            files = sum(aggregate_files(one, selfheal.grid.cells(one), [m["name"]]).values(), [])
            if all(os.path.exists(f) for f in files):
                done[m["name"]].append(seed)
    return done


# With partial: true the finished models are from here on the only ones (with partial: networks, the finished
# networks of each): the readout trains nothing (its rules wait for no job) and writes beside the study's outputs,
# under READOUT.
NARROWED, NETWORKS_LEFT_OUT = (
    selfheal.partial.keep_networks(CONFIG, finished_networks(CONFIG))
    if CONFIG["partial"] == selfheal.partial.NETWORKS
    else (CONFIG, ())
)
PARTIAL = finished_part(NARROWED) if CONFIG["partial"] else None
CONFIG = selfheal.partial.restrict(NARROWED, PARTIAL) if PARTIAL else CONFIG
CELLS = selfheal.grid.cells(CONFIG)
AGGREGATED = aggregate_files(CONFIG, CELLS)  # what the aggregate reads, by kind
# with partial: true, the stamp of what the readout reads: a param of the aggregate (which waits for no job's
# outputs) and a file it reads, rewritten when a read file changes (for the params and the mtime triggers)
READ_STAMP = selfheal.partial.stamp(sum(AGGREGATED.values(), [])) if PARTIAL else None
READ_STAMPED = [selfheal.partial.write_stamp(READ_STAMP_FILE, READ_STAMP)] if PARTIAL else []
PLOTS = list(selfheal.analysis.plots.FIGURES)
THREADS = CONFIG["threads"]
EVAL = selfheal.config.canonical(CONFIG["eval"])
PRETRAINED_MODELS = [m["name"] for m in CONFIG["models"] if m["source"] == "pretrained"]
ADAPTED_MODELS = [m["name"] for m in CONFIG["models"] if m["source"] == "pretrained" and m["adapt"]]
UNADAPTED_MODELS = [m for m in PRETRAINED_MODELS if m not in ADAPTED_MODELS]
# The training jobs (job_unit): one per model (the model rule), one per network (the network rule), or one per
# network (make_network) and one per cell (cell), for the grid's models. `auto` picks the unit from the jobs Snakemake may run at once (--jobs on a cluster, else --cores over
# the config's threads) and the grid (selfheal.grid.job_unit); jobs that a cluster starts get the main process's
# choice.
ALL_MODELS = CONFIG["models"]
MODEL_NAMES = [m["name"] for m in ALL_MODELS]
TOKENIZER_KEYS = selfheal.grid.tokenizer_keys(ALL_MODELS)  # one tokenize job per downloaded checkpoint
JOB_UNIT = selfheal.grid.job_unit(
    CONFIG, ALL_MODELS, CELLS, selfheal.grid.concurrent_jobs(workflow.nodes, workflow.resource_settings.cores, THREADS)
)
JOB_UNIT = os.environ.setdefault("SELFHEAL_JOB_UNIT", JOB_UNIT) if not workflow.is_main_process else JOB_UNIT
os.environ["SELFHEAL_JOB_UNIT"] = JOB_UNIT


envvars:
    "SELFHEAL_JOB_UNIT",  # passed to the jobs a cluster starts


JOB_MODELS = MODEL_NAMES if JOB_UNIT == "model" else []
JOB_NETWORKS = selfheal.grid.networks(CONFIG, ALL_MODELS) if JOB_UNIT != "model" else []
NETWORK_JOB_MODELS = list(dict.fromkeys(n.model for n in JOB_NETWORKS)) if JOB_UNIT == "network" else []
MADE_NETWORK_MODELS = list(dict.fromkeys(n.model for n in JOB_NETWORKS)) if JOB_UNIT == "cell" else []
CELL_JOB_MODELS = list(dict.fromkeys(c.model for c in CELLS)) if JOB_UNIT == "cell" else []
UNIT_CELLS = selfheal.grid.by_unit(CELLS)  # each heal unit's cells (a cell's job plans its prefix cache over them)
UNIT_CELL_DICTS = {unit: [c.as_dict() for c in cells] for unit, cells in UNIT_CELLS.items()}  # made once per unit
MATCHED = selfheal.grid.matched_with(CELLS)  # each matched control's cells (its job waits for theirs)


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
    return [network_settings(wildcards.model, s) for s in job_seeds(wildcards)]


@functools.cache
def network_settings(model, seed):
    """One network's settings (network_params), made once per network: every cell job of the network asks for them."""
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
    """The cells one training job heals (those of its networks; none where each cell is its own job)."""
    seeds = job_seeds(wildcards)
    mine = [c for c in CELLS if c.model == wildcards.model and c.pretrain_seed in seeds] if JOB_UNIT != "cell" else []
    return [c.as_dict() for c in mine]


def job_work(wildcards):
    """A training job's work: its networks' settings and its cells, with the plan's summary (what it trains and
    what it keeps). A namespace, which Snakemake does not record as a param: a dry run's reason shows the short
    digest (job_digest), not every cell."""
    networks, cells = network_params(wildcards), job_cells(wildcards)
    summary = selfheal.heal.plan.summary(
        model_source(wildcards), networks, EVAL, cells, work_dir(wildcards), layout(wildcards)
    )
    return types.SimpleNamespace(networks=networks, cells=cells, summary=summary)


def job_digest(wildcards):
    """The param Snakemake records for a training job: its counts and a hash of its settings and cells."""
    return selfheal.heal.plan.digest(network_params(wildcards), job_cells(wildcards), EVAL)


def the_cell(wildcards):
    """The cell of a cell's own job (job_unit: cell)."""
    return selfheal.grid.Cell(
        wildcards.model,
        wildcards.target,
        wildcards.policy,
        wildcards.init,
        wildcards.regime,
        int(wildcards.seed),
        int(wildcards.pretrain_seed),
    )


def matched_curves(wildcards):
    """The curves of the cells a matched control is matched with (their jobs run first; none for other cells)."""
    return [CELL_FILE.format(**c.as_dict(), name="curve.parquet") for c in MATCHED.get(the_cell(wildcards), [])]


def cell_work(wildcards):
    """A cell job's work (a namespace, not recorded: see job_work): its network's settings, the cell, its unit's
    cells, the cells it is matched with (each with its curve), and the plan's summary."""
    cell = the_cell(wildcards)
    network = network_params(wildcards)[0]
    summary = selfheal.heal.plan.summary(
        model_source(wildcards),
        [network],
        EVAL,
        [cell.as_dict()],
        unit_work(wildcards),
        {"unit": "", "cell": CELL_IN_UNIT},
        makes_networks=False,
    )
    return types.SimpleNamespace(
        network=network,
        cell=cell.as_dict(),
        unit_cells=UNIT_CELL_DICTS[cell.unit],
        earlier=[(c.as_dict(), f) for c, f in zip(MATCHED.get(cell, []), matched_curves(wildcards))],
        summary=summary,
    )


def cell_digest(wildcards):
    """The param Snakemake records for a cell's job: a hash of its network's settings and the cell."""
    return selfheal.heal.plan.digest(network_params(wildcards), [the_cell(wildcards).as_dict()], EVAL)


def donor_folders(wildcards):
    """The trained folders of the donors whose encoders a training job's swap cells take (grid.donor_network), per
    pretraining seed of the job: {seed: {donor: folder}}; a cell's job: {donor: folder}."""
    if "target" in wildcards.keys():
        seeds, cells = [int(wildcards.pretrain_seed)], [the_cell(wildcards)]
    else:
        seeds, cells = job_seeds(wildcards), [c for c in CELLS if c.model == wildcards.model]
    out = {}
    for seed in seeds:
        donors = selfheal.grid.donors([c for c in cells if c.pretrain_seed == seed])
        networks = {d: selfheal.grid.donor_network(CONFIG, d, seed) for d in donors}
        out[seed] = {
            d: f"{NETWORK.format(model=n.model, pretrain_seed=n.pretrain_seed)}/trained" for d, n in networks.items()
        }
    return out[seeds[0]] if "target" in wildcards.keys() else out


def donor_networks(wildcards):
    """The training jobs' outputs that hold the donors' trained folders (a job waits for its donors' networks)."""
    folders = donor_folders(wildcards)
    needed = folders.values() if "target" in wildcards.keys() else [f for by in folders.values() for f in by.values()]
    networks = sorted({os.path.dirname(f) for f in needed})
    if JOB_UNIT == "model":
        return sorted({os.path.dirname(n) for n in networks})
    return networks


def unit_dir(wildcards):
    return UNIT.format(**wildcards)


def unit_work(wildcards):
    return f"{WORK}/{UNIT_IN_MODEL}".format(**wildcards)


def job_folders(wildcards):
    """Where a training job writes (its model's folders; a network job's outputs are its network's part of them)."""
    return {
        "networks": NETWORKS.format(model=wildcards.model),
        "baselines": BASELINES.format(model=wildcards.model),
        "cells": CELLS_OF_MODEL.format(model=wildcards.model),
    }


def awaited(outputs):
    """What the readout (the aggregate, the lr-sensitivity table) waits for. The training jobs' ``outputs``; none
    with partial: true, which reads the finished files as they are (named in its params) and never starts a job."""
    return [] if PARTIAL else outputs


def trained(pattern_of_model, pattern_of_network, models):
    """The training jobs' outputs for ``models`` (names): each model's folder, or each of its networks' part."""
    if JOB_UNIT == "model":
        return expand(pattern_of_model, model=models)
    networks = selfheal.grid.networks(CONFIG, [m for m in ALL_MODELS if m["name"] in models])
    return expand(pattern_of_network, zip, **selfheal.grid.columns(networks)) if networks else []


def healed(models):
    """The healed cells of ``models`` (names): the training jobs' cell folders, or each cell's files where cells
    are their own jobs."""
    if JOB_UNIT != "cell":
        return trained(CELLS_OF_MODEL, CELLS_OF_NETWORK, models)
    return [CELL_FILE.format(**c.as_dict(), name="recovery.json") for c in CELLS if c.model in models]


def corpus_params():
    return selfheal.config.canonical(CONFIG["corpus"])


# The lr-sensitivity check: its cells (cells of the grid) per model, and each run (a cell at a multiple of the lr).
LR_CELLS = {m["name"]: selfheal.heal.lr_sensitivity.cells(CONFIG, m) for m in CONFIG["models"]}
LR_MODELS = [name for name, cells in LR_CELLS.items() if cells]
LR_RUNS = [run for runs in lr_runs(CONFIG).values() for run in runs]
LR_SENSITIVITY_TABLES = [LR_SENSITIVITY_TABLE] if LR_MODELS else []  # the answer rule reads it where it exists


def lr_sensitivity_inputs(wildcards):
    """An lr-sensitivity job's inputs: its model's token streams, downloaded folder, and the network it heals with
    its baseline (the training job's outputs: where a job makes a whole model, the model's; else only that network's,
    so the check does not wait for the model's other networks)."""
    if JOB_UNIT == "model":
        network, baseline = trained(NETWORKS, NETWORK, [wildcards.model]), trained(
            BASELINES, BASELINE, [wildcards.model]
        )
    else:
        seed = LR_CELLS[wildcards.model][0].pretrain_seed
        network = NETWORK.format(model=wildcards.model, pretrain_seed=seed)
        baseline = BASELINE.format(model=wildcards.model, pretrain_seed=seed)
    donors = sorted({os.path.dirname(f) for f in lr_sensitivity_donors(wildcards).values()})
    if JOB_UNIT == "model":
        donors = sorted({os.path.dirname(n) for n in donors})
    return {
        "tokens": tokens(wildcards),
        "start": imported_dir(wildcards),
        "imported": imported_summary(wildcards),
        "networks": network,
        "baselines": baseline,
        "donors": donors,  # the networks whose trained encoders its swap cells take (retrain.lr_sensitivity_targets)
    }


def lr_sensitivity_donors(wildcards):
    """The trained folder of each donor whose encoder an lr-sensitivity cell takes (a swap among
    retrain.lr_sensitivity_targets): {donor: folder}, as a cell's job gets them (donor_folders)."""
    cells = LR_CELLS[wildcards.model]
    seed = cells[0].pretrain_seed
    networks = {d: selfheal.grid.donor_network(CONFIG, d, seed) for d in selfheal.grid.donors(cells)}
    return {d: f"{NETWORK.format(model=n.model, pretrain_seed=n.pretrain_seed)}/trained" for d, n in networks.items()}


def lr_sensitivity_work(wildcards):
    """An lr-sensitivity job's work (a namespace, not recorded: see job_work): its network's settings, multipliers,
    cells, the grid's unit of them, and the paths of its network and baseline."""
    cells = LR_CELLS[wildcards.model]
    seed = cells[0].pretrain_seed
    return types.SimpleNamespace(
        network=selfheal.config.canonical(selfheal.grid.network_config(model_cfg(wildcards), seed)),
        multipliers=model_cfg(wildcards)["retrain"]["lr_sensitivity"],
        cells=[c.as_dict() for c in cells],
        unit_cells=[c.as_dict() for c in UNIT_CELLS[cells[0].unit]],
        network_dir=NETWORK.format(model=wildcards.model, pretrain_seed=seed),
        baseline=BASELINE.format(model=wildcards.model, pretrain_seed=seed),
    )


def lr_sensitivity_digest(wildcards):
    """The param Snakemake records for an lr-sensitivity job: its multipliers and a hash of its settings and cells."""
    work = lr_sensitivity_work(wildcards)
    digest = selfheal.heal.plan.digest([work.network], work.cells, EVAL)
    return f"lr x {work.multipliers}: {digest}"


def lr_sensitivity_layout(wildcards):
    """The patterns inside an lr-sensitivity job's folder (a function: Snakemake does not expand them)."""
    return {"run": LR_RUN_IN_MODEL, "cell": CELL_IN_UNIT}


def lr_sensitivity_work_dir(wildcards):
    return LR_SENSITIVITY_WORK.format(model=wildcards.model)
