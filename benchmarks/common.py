"""What the benchmarks share: writing a figure into its page (``write_block``), timing, and the default workflow's
trained model, data and a reset cell."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
PERFORMANCE = ROOT / "docs" / "performance.md"
DEFAULT_CONFIG = ROOT / "config" / "config.yaml"
T = TypeVar("T")


def block_markers(marker: str) -> tuple[str, str]:
    """The begin and end comments that enclose the figure block ``marker`` in a page."""
    return f"<!-- {marker}: begin -->", f"<!-- {marker}: end -->"


def write_block(marker: str, markdown: str, page: Path = PERFORMANCE) -> None:
    """Replace the text between ``<!-- {marker}: begin -->`` and ``<!-- {marker}: end -->`` in ``page`` with
    ``markdown``, set off by blank lines (the markers stay; nothing else in the page changes). Raises
    ``ValueError`` if the page lacks either marker, has one twice or has them out of order."""
    page = Path(page)
    begin, end = block_markers(marker)
    text = page.read_text()
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f"{page} must hold {begin!r} and {end!r} exactly once each")
    head, rest = text.split(begin)
    if end not in rest:
        raise ValueError(f"{page}: {end!r} comes before {begin!r}")
    _, tail = rest.split(end)
    page.write_text(f"{head}{begin}\n\n{markdown.strip()}\n\n{end}{tail}")


def read_block(marker: str, page: Path = PERFORMANCE) -> str:
    """The text between the markers of block ``marker`` in ``page``, stripped (what ``write_block`` wrote)."""
    begin, end = block_markers(marker)
    match = re.search(re.escape(begin) + r"(.*?)" + re.escape(end), Path(page).read_text(), re.S)
    if match is None:
        raise ValueError(f"{page} lacks block {marker!r}")
    return match.group(1).strip()


def add_config_flag(parser: argparse.ArgumentParser) -> None:
    """``--configfile``: the config whose run RESULTS holds (default: config/config.yaml, the documented run's)."""
    parser.add_argument(
        "--configfile",
        type=Path,
        default=DEFAULT_CONFIG,
        help="the config of the run whose results are read (default: config/config.yaml)",
    )


def run_options(parser: argparse.ArgumentParser):
    """The parsed options of a benchmark that reads a run (``add_config_flag``, a ``--model`` that defaults to
    None): ``model`` set to its config's widest model when not given."""
    a = parser.parse_args()
    a.model = a.model or default_model(a.configfile)
    return a


def is_documented(a: argparse.Namespace, documented: dict) -> bool:
    """Whether options ``a`` are the documented run's: each of ``documented``, on the default config."""
    return all(getattr(a, k) == v for k, v in documented.items()) and a.configfile.resolve() == DEFAULT_CONFIG


def add_write_flag(parser: argparse.ArgumentParser) -> None:
    """``--no-write``: print the figure block without writing it into its page."""
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="only print the figure block; do not write it into its documentation page",
    )


def publish(marker: str, markdown: str, write: bool, page: Path = PERFORMANCE, why_not: str | None = None) -> None:
    """Print the figure block ``marker`` and, if ``write`` and no ``why_not`` (e.g. options other than the
    documented run's), write it into ``page`` through ``write_block``."""
    print(f"\n{block_markers(marker)[0]}\n{markdown.strip()}\n{block_markers(marker)[1]}")
    where = Path(page).resolve().relative_to(ROOT) if Path(page).resolve().is_relative_to(ROOT) else page
    if not write:
        print(f"not written (--no-write): {where}")
    elif why_not:
        print(f"not written to {where}: {why_not}")
    else:
        write_block(marker, markdown, page)
        print(f"written: block {marker!r} of {where}")


def machine() -> str:
    """The machine a figure was measured on, in words: cores and their model, memory, torch version, GPU if any.
    Two machines with the same number of cores can differ by a factor of 2 or more, so the model is named."""
    import torch

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    model = cpu_model()
    cores = f"{os.cpu_count()} cores" + (f" ({model})" if model else "")
    return f"{cores}, {memory:.0f} GB, {gpu}, torch {torch.__version__.split('+')[0]}"


def cpu_model() -> str:
    """The processor's model name as the kernel reports it ("" where it does not)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else ""


# ---------------------------------------------------------------------------------------------------- timing


def snakemake_env(pythonpath: str | None = None) -> dict:
    """The environment the benchmarks start Snakemake in.

    Every Snakemake start imports snakemake-executor-plugin-slurm, which runs `scontrol show config` while
    defining its settings. On a machine with SLURM's client installed and no controller answering (CI installs
    SLURM for tests/test_slurm.py, which starts the controller only for itself) that call blocks 9 s per
    Snakemake start, a cost that neither a laptop without SLURM nor a cluster whose controller answers pays.
    There, SLURM_CONF points at an empty file (as in tests/conftest.py), so the plugin finds no SLURM at once;
    the benchmark says so when it does."""
    env = dict(os.environ)
    if pythonpath:  # in front of the caller's own path, not instead of it
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, os.environ.get("PYTHONPATH")]))
    if "SLURM_CONF" in env or shutil.which("scontrol") is None:
        return env
    try:
        answered = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=3).returncode == 0
    except subprocess.TimeoutExpired:
        answered = False
    if not answered:
        print(
            "SLURM's client is installed here but no controller answers: Snakemake is started with "
            "SLURM_CONF=/dev/null, as on a machine without SLURM (else each start waits 9 s on `scontrol`)"
        )
        env["SLURM_CONF"] = "/dev/null"
    return env


def snakemake_command(workdir: Path, *args: str) -> list[str]:
    """The project's Snakefile run by this Python's Snakemake in ``workdir``, with ``args``."""
    return [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), *args]


def timed_process(
    cmd: list[str], env: dict | None = None, cwd: Path | None = None, check: bool = True
) -> tuple[float, subprocess.CompletedProcess]:
    """(wall seconds, the finished process) of one command, output captured; with ``check``, a failure ends the
    benchmark with the command's last stderr."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    if check and proc.returncode:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{(proc.stderr or proc.stdout)[-3000:]}")
    return wall, proc


def interleaved(variants: dict[str, Callable[[], T]], repeats: int) -> dict[str, list[T]]:
    """Every variant run once per round, in order, for ``repeats`` rounds (so slow drifts of the machine hit all
    variants alike); per variant, its results in round order."""
    runs: dict[str, list[T]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            runs[name].append(run())
    return runs


def medians(runs: dict[str, list[dict]], keys: Iterable[str]) -> dict[str, dict[str, float]]:
    """Per variant, the median of each of ``keys`` over its runs (dicts, e.g. one per process)."""
    return {name: {k: statistics.median(r[k] for r in rs) for k in keys} for name, rs in runs.items()}


def json_child(cmd: list[str], env: dict | None = None) -> dict:
    """Run a child process that prints its measurement as JSON on its last line; that dict."""
    _, proc = timed_process(cmd, env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------------- the default run

import yaml  # noqa: E402

from selfheal import config, grid, models, results_io  # noqa: E402
from selfheal.config.merge import merge  # noqa: E402
from selfheal.data import streams  # noqa: E402
from selfheal.heal import reset  # noqa: E402
from selfheal.models import families  # noqa: E402
from selfheal.training import objectives  # noqa: E402


def workflow_config(raw: dict | Path = DEFAULT_CONFIG) -> dict:
    """A config as the workflow sees it, resolved: ``raw`` (a config file, or its contents) merged over
    config/config.yaml, as Snakemake merges a ``--configfile`` over the one the Snakefile names."""
    if not isinstance(raw, dict):
        raw = yaml.safe_load(Path(raw).read_text()) or {}
    return config.resolve(merge(yaml.safe_load(DEFAULT_CONFIG.read_text()), raw))


def default_models(configfile: Path = DEFAULT_CONFIG) -> list[dict]:
    """The models of the default grid (config/config.yaml, or ``configfile``'s), resolved: what the benchmarks that
    read a default run's networks measure unless told otherwise, so that they follow the default config."""
    return workflow_config(configfile)["models"]


def default_model(configfile: Path = DEFAULT_CONFIG) -> str:
    """The default grid's (or ``configfile``'s) last (widest) model."""
    return default_models(configfile)[-1]["name"]


def load_setup(
    results: Path, model_name: str | None, pretrain_seed: int | None = None, configfile: Path = DEFAULT_CONFIG
):
    """(network config, eval config, trained dir, tokens path, baseline loss) of one network of the default grid
    (or of ``configfile``'s run: a model and a pretraining seed, the model's first seed unless given)."""
    cfg = workflow_config(configfile)
    model = grid.model_by_name(cfg, model_name) if model_name else cfg["models"][-1]
    seed = model["pretrain"]["seeds"][0] if pretrain_seed is None else pretrain_seed
    model_cfg = grid.network_config(model, seed)
    trained = results / "models" / model_cfg["name"] / f"p{seed}" / "trained"
    tokens = results / "corpus" / "bpe" / "tokens.safetensors"
    baseline = results / "baselines" / model_cfg["name"] / f"p{seed}.json"
    if not (trained.is_dir() and tokens.is_file() and baseline.is_file()):
        sys.exit(f"{results} lacks the outputs of {configfile}'s run: run `.venv/bin/snakemake --cores 2` first")
    return model_cfg, cfg["eval"], trained, tokens, results_io.read_json(baseline)["val_loss"]


def reset_model(trained: Path, target: str, seed: int = 0):
    """The trained model with layer ``target`` freshly reset (fresh init, ``seed``)."""
    model = models.load(trained)
    family = families.for_model(model)
    names = reset.target_names(model, family, target, "full")
    reset.apply(model, family, names, "fresh", reset.generator_for(seed, target, "full"))
    return model, family, names


def data_for(model_cfg: dict, eval_cfg: dict, tokens: Path):
    p = model_cfg["pretrain"]
    train_seqs = streams.train_sequences(tokens, model_cfg["context"], p["train_sequences"], p["seed"])
    val_seqs = streams.val_sequences(tokens, model_cfg["context"], eval_cfg["val_sequences"])
    objective = objectives.for_family(families.for_arch(model_cfg["arch"]), streams.vocabulary(tokens))
    return train_seqs, val_seqs, objective


def prefix_cache_for(model_cfg: dict, eval_cfg: dict, trained: Path, tokens: Path, depth: int):
    """The in-memory frozen-prefix cache a heal job builds for layer depth ``depth``."""
    from selfheal.heal.prefix_cache import PrefixCache
    from selfheal.training import setup

    job = setup.prepare(models.load(trained), model_cfg, eval_cfg, str(tokens))
    train_seqs = setup.train_sequences(model_cfg, str(tokens))
    return PrefixCache.build(job.model, job.family, train_seqs, job.val_batches, depth, job.device)
