"""Config: the JSON schema with each key's default (``schema.yaml``; ``schema`` validates a config and reads the
defaults), and the pre-run check (``check.resolve``) that every config passes before any job starts, filling in the
defaults; errors name the key (``ConfigError``).

Jobs never import this package: they get their settings as Snakemake params, and the grid's run-time vocabulary
lives in ``selfheal.grid``.
"""

from selfheal.config.check import load, resolve, resolve_or_exit
from selfheal.config.errors import ConfigError
from selfheal.config.merge import canonical

__all__ = ["ConfigError", "canonical", "load", "resolve", "resolve_or_exit"]
