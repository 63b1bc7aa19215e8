"""Folders inside installed packages: where the packaged corpus, tasks and model weights live.

One helper for every ``package:<module>/<sub/folder>`` spec and every data package. A package is found without
importing it: some packages that ship model files fail to import without their own heavy dependencies.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

PREFIX = "package:"


class PackageNotFound(FileNotFoundError):
    """A package, or a folder inside one, that is not installed."""


def package_dir(module: str) -> Path | None:
    """The folder of an installed package, or None when it is not installed."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def resolve(spec: str) -> str:
    """'package:<module>[/sub/folder]' -> that folder; anything else is returned as it is (a path or a hub id)."""
    if not spec.startswith(PREFIX):
        return spec
    module, _, sub = spec.removeprefix(PREFIX).partition("/")
    root = package_dir(module)
    if root is None:
        raise PackageNotFound(f"package {module!r} is not installed")
    folder = root / sub
    if not folder.is_dir():
        raise PackageNotFound(f"{folder} does not exist in package {module!r}")
    return str(folder)


def local_folder(spec: str) -> str | None:
    """The local folder a model spec names (a package folder or an existing path), or None for a hub id."""
    if spec.startswith(PREFIX):
        return resolve(spec)
    return spec if Path(spec).exists() else None
