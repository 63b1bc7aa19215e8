"""Check config files before a run, as the workflow will: ``python -m selfheal.config config/config.yaml my.yaml``
(the files in the order Snakemake merges them: the default first, then each ``--configfile``). A file that is not
valid YAML is named with its line and column (Snakemake says only "Config file is not valid JSON or YAML"); a
config error names the file that sets the key; one line, no traceback, exit status 1. A config that passes prints
its models and its number of cells."""

from __future__ import annotations

import argparse
import sys

import yaml

from selfheal import grid
from selfheal.config.check import resolve_or_exit
from selfheal.config.merge import merge


def read(path: str) -> dict:
    try:
        with open(path) as f:
            raw = yaml.safe_load(f) or {}
    except OSError as err:
        raise SystemExit(f"{path}: {err.strerror}") from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SystemExit(f"{path}{where}: not valid YAML: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise SystemExit(f"{path}: not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise SystemExit(f"{path}: a config is a mapping of keys (corpus:, models:, ...), not a {type(raw).__name__}")
    return raw


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m selfheal.config", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="config files, in the order Snakemake merges them")
    argv = parser.parse_args(argv).files
    raw: dict = {}
    for path in argv:
        raw = merge(raw, read(path))
    config = resolve_or_exit(raw, argv)
    cells = grid.cells(config)
    names = ", ".join(m["name"] for m in config["models"])
    print(f"{' + '.join(argv)}: ok: {len(config['models'])} models ({names}), {len(cells)} cells")


if __name__ == "__main__":
    main(sys.argv[1:])
