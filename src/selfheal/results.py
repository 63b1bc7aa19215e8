"""Public API: the workflow's result tables as DataFrames, for a notebook.

    >>> from selfheal import results
    >>> r = results.load("results")          # the results_dir of a finished run
    >>> r["summary"], r["curves"], r["networks"], r["survival"], r["fit"]   # ...

``load(path)`` returns a dict of DataFrames: ``summary``, ``curves`` and ``networks`` (``path/*.parquet``) and the
answer tables (``path/answer/*.parquet``, named as in ``selfheal.analysis.answer.TABLES``). A table that the run
did not make (no answer yet, no cells) is left out of the dict. Schemas:
docs/outputs.md.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from selfheal.analysis.answer import TABLES as ANSWER_TABLES

TABLES = ["summary", "curves", "networks"]


def load(path: str | Path = "results") -> dict[str, pd.DataFrame]:
    """Every result table under ``path`` (a results_dir) that exists, by name."""
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder of results (the config's results_dir)")
    found = {name: folder / f"{name}.parquet" for name in TABLES}
    found.update({name: folder / "answer" / f"{name}.parquet" for name in ANSWER_TABLES})
    return {name: pd.read_parquet(p) for name, p in found.items() if p.is_file()}
