"""What the benchmarks share: writing a figure into its page (``write_block``), timing, and the default workflow's
trained model, data and a reset cell."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
PERFORMANCE = ROOT / "docs" / "performance.md"


def block_markers(marker: str) -> tuple[str, str]:
    """The begin and end comments that enclose the figure block ``marker`` in a page."""
    return f"<!-- {marker}: begin -->", f"<!-- {marker}: end -->"


def write_block(marker: str, markdown: str, page: Path = PERFORMANCE) -> None:
    """Replace the text between ``<!-- {marker}: begin -->`` and ``<!-- {marker}: end -->`` in ``page`` with
    ``markdown``, set off by blank lines (the markers stay; nothing else in the page changes). Raises ``ValueError`` if the page lacks
    either marker, has one twice or has them out of order."""
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

from selfheal import config, grid, models, results_io
from selfheal.data import streams
from selfheal.models import families
from selfheal.training import objectives
from selfheal.heal import reset  # noqa: E402


def load_setup(results: Path, model_name: str | None, pretrain_seed: int | None = None):
    """(network config, eval config, trained dir, tokens path, baseline loss) of one network of the default grid
    (a model and a pretraining seed: the model's first seed unless given)."""
    cfg = config.load(ROOT / "config" / "config.yaml")
    model = grid.model_by_name(cfg, model_name) if model_name else cfg["models"][-1]
    seed = model["pretrain"]["seeds"][0] if pretrain_seed is None else pretrain_seed
    model_cfg = grid.network_config(model, seed)
    trained = results / "models" / model_cfg["name"] / f"p{seed}" / "trained"
    tokens = results / "corpus" / "bpe" / "tokens.safetensors"
    baseline = results / "baselines" / model_cfg["name"] / f"p{seed}.json"
    if not (trained.is_dir() and tokens.is_file() and baseline.is_file()):
        sys.exit(f"{results} lacks the default workflow's outputs: run `.venv/bin/snakemake --cores 2` first")
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
