"""Small, atomic writers for the per-job result files (a killed job never leaves a half-written output)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pandas as pd


def _atomic(path: str | Path, write) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are shared with collaborators
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json(path: str | Path, obj: dict) -> None:
    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
            f.write("\n")

    _atomic(path, write)


def read_json(path: str | Path) -> dict:
    with open(path) as f:
        return json.load(f)


def write_parquet(path: str | Path, table: pd.DataFrame) -> None:
    _atomic(path, lambda tmp: table.to_parquet(tmp, index=False))
