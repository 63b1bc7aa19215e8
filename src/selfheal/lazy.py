"""Modules imported where they are first used, not where they are named.

The Snakefile imports the config checks, the grid and the figure names at every start (``snakemake -n`` included),
and those name the model families, whose code needs torch, and the figures, whose code needs altair and scipy.
Importing those there costs seconds per start; a module named through ``Module`` is imported at its first attribute
access instead, so a start that never builds a model or draws a figure never imports them. ``importlib.util.LazyLoader``
cannot defer a submodule (finding ``torch.nn`` imports ``torch``); this stand-in defers a plain
``importlib.import_module``."""

from __future__ import annotations

import importlib
from types import ModuleType


class Module:
    """A stand-in for the module ``name``: ``Module("torch.nn").Linear`` imports ``torch.nn`` then and returns its
    ``Linear``; later lookups go to the imported module directly."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str):
        return getattr(self.module(), attribute)

    def module(self) -> ModuleType:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return self._module

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"
