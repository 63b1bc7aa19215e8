"""Public API: the workflow's result tables as DataFrames, for a notebook, and shipping a finished run.

    >>> from selfheal import results
    >>> r = results.load("results")          # the results_dir of a finished run
    >>> r["summary"], r["curves"], r["networks"], r["survival"], r["fit"]   # ...
    >>> study = results.load("reference/study")   # the reference study shipped with the project

``load(path)`` returns a dict of DataFrames: ``summary``, ``curves`` and ``networks`` (``path/*.parquet``) and the
answer tables (``path/answer/*.parquet``, named as in ``selfheal.analysis.answer.TABLES``, and
``lr_sensitivity`` where the run had ``retrain.lr_sensitivity``, ``left_out`` where it read the finished part of a
study, ``python -m selfheal.partial``). A table that the run did not make (no answer yet, no cells) is left out of
the dict. Schemas: docs/outputs.md.

``python -m selfheal.results ship RESULTS DEST`` copies what a reader of a finished run needs into DEST (the
reference study ships this way into reference/study/): the three tables, the answer tables, the answer page
(its figure links pointing at the PNGs, which a forge shows) and the figures it links, as PNG. Nothing else of the
run (other figures, models, checkpoints, logs) is copied. It refuses a run without its answer page, and a copy over
``--max-mb``. ``python -m selfheal.results reread DEST`` re-derives a shipped run's answer tables, page and figures
from its own three tables under the installed version (a run shipped by an older one).
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from selfheal import results_io
from selfheal.analysis import answer, tables
from selfheal.analysis.answer import LEFT_OUT, LR_SENSITIVITY
from selfheal.analysis.answer import TABLES as ANSWER_TABLES

TABLES = ["summary", "curves", "networks"]
PAGE = "answer.md"


# Answer tables made only by some runs, which the page reads where they exist: the lr check's (retrain.lr_sensitivity)
# and what a readout of a study still running leaves out (``python -m selfheal.partial``)
SIDE_TABLES = (LR_SENSITIVITY, LEFT_OUT)


def _side_table(name: str) -> Path:
    return Path("answer") / f"{name}.parquet"


def load(path: str | Path = "results") -> dict[str, pd.DataFrame]:
    """Every result table under ``path`` (a results_dir) that exists, by name."""
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder of results (the config's results_dir)")
    found = {name: folder / f"{name}.parquet" for name in TABLES}
    found.update({name: folder / "answer" / f"{name}.parquet" for name in [*ANSWER_TABLES, *SIDE_TABLES]})
    return {name: pd.read_parquet(p) for name, p in found.items() if p.is_file()}


def page_figures(results: Path) -> list[Path]:
    """The PNGs of the figures the answer page links (plots/NAME.html or .png), relative to the results_dir."""
    page = results / PAGE
    if not page.is_file():
        return []
    names = sorted(set(re.findall(r"\(plots/([A-Za-z0-9_]+)\.(?:html|png)\)", page.read_text())))
    return [Path("plots") / f"{name}.png" for name in names]


def shipped_files(results: Path) -> list[Path]:
    """The files of a finished run that ``ship`` copies, relative to its results_dir."""
    files = [Path(f"{name}.parquet") for name in TABLES] + [Path("answer") / f"{n}.parquet" for n in ANSWER_TABLES]
    files += [Path(PAGE)] + page_figures(results)
    files += [side for side in map(_side_table, SIDE_TABLES) if (results / side).is_file()]  # the page cites them
    missing = [str(f) for f in files if not (results / f).is_file()]
    if missing:
        raise FileNotFoundError(
            f"{results} is not a finished run: missing {', '.join(missing)} (run snakemake to the end first)"
        )
    return files


def ship(results: str | Path, dest: str | Path, max_mb: float = 8.0) -> list[Path]:
    """Copy a finished run's tables, answer page and the PNGs of the figures it links from ``results`` into ``dest``
    (replacing what ``dest`` held); the page's links to the interactive figures point at their PNGs. Returns the
    files written."""
    results, dest = Path(results), Path(dest)
    files = shipped_files(results)
    size = sum((results / f).stat().st_size for f in files) / 2**20
    if size > max_mb:
        raise ValueError(f"shipping {results} would copy {size:.1f} MB, over --max-mb {max_mb:g}")
    if dest.exists():
        shutil.rmtree(dest)
    for f in files:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(results / f, dest / f)
    page = dest / PAGE
    page.write_text(re.sub(r"\((plots/[A-Za-z0-9_]+)\.html\)", r"(\1.png)", page.read_text()))
    return files


def reread(dest: str | Path, workers: int = 1) -> list[Path]:
    """``reread`` (the module docstring): the networks table's columns that its curves give (``tables.add_minimum``),
    then what the ``answer`` rule writes from the three tables and the side tables ``dest`` has (the lr check's, what
    a partial readout leaves out), shipped back into ``dest``. Returns the files written."""
    dest = Path(dest)
    missing = [f"{name}.parquet" for name in TABLES if not (dest / f"{name}.parquet").is_file()]
    if missing:
        raise FileNotFoundError(f"{dest} is not a shipped run: missing {', '.join(missing)}")
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        (run / "answer").mkdir()
        (run / "plots").mkdir()
        for name in TABLES:
            shutil.copyfile(dest / f"{name}.parquet", run / f"{name}.parquet")
        networks = tables.add_minimum(
            pd.read_parquet(run / "networks.parquet"), pd.read_parquet(run / "curves.parquet")
        )
        results_io.write_parquet(str(run / "networks.parquet"), networks)
        side = {name: _side_table(name) for name in SIDE_TABLES if (dest / _side_table(name)).is_file()}
        for path in side.values():
            shutil.copyfile(dest / path, run / path)
        answer.write_in(
            run,
            workers,
            str(run / side[LR_SENSITIVITY]) if LR_SENSITIVITY in side else None,
            str(run / side[LEFT_OUT]) if LEFT_OUT in side else None,
        )
        return ship(run, dest)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m selfheal.results", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("ship", help="copy a finished run's tables, answer page and figures into DEST")
    s.add_argument("results", help="the run's results_dir, e.g. results/study")
    s.add_argument("dest", help="where to put them, e.g. reference/study")
    s.add_argument("--max-mb", type=float, default=8.0, help="refuse a copy larger than this (default 8)")
    r = sub.add_parser("reread", help="re-derive a shipped run's answer from its tables under this version")
    r.add_argument("dest", help="a folder `ship` wrote, e.g. reference/study")
    a = parser.parse_args(argv)
    if a.command == "reread":
        files = reread(a.dest)
        print(f"re-derived {a.dest}'s answer from its tables: {len(files)} files")
        return
    files = ship(a.results, a.dest, a.max_mb)
    print(f"shipped {len(files)} files from {a.results} to {a.dest}")


if __name__ == "__main__":
    main()
