"""The JSON schema of a config (``schema.yaml`` beside this file, kept in the package so the check runs wherever
the package is installed): types, ranges, allowed keys and each key's default (``default:``, read by
``defaults``). Validated once, by ``check.resolve``."""

from __future__ import annotations

import copy
import functools
import math
from pathlib import Path

import jsonschema
import yaml

from selfheal.config.errors import ConfigError, key_path
from selfheal.config.merge import merge

SCHEMA_PATH = Path(__file__).with_name("schema.yaml")


# JSON Schema counts 2.0 as an integer; Python's range() and slicing do not, so a float is never an integer here.
_TYPES = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda checker, instance: isinstance(instance, int) and not isinstance(instance, bool)
)
Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_TYPES)


@functools.cache
def _schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def load_schema() -> dict:
    return copy.deepcopy(_schema())


@functools.lru_cache(maxsize=1)
def _validator() -> jsonschema.Validator:
    """The schema parsed once per process (parsing its YAML costs more than validating a config)."""
    return Validator(_schema())


def defaults(section: str | None = None) -> dict:
    """The defaults the schema gives: of the whole config (``section`` None: every top-level key with a
    ``default:``, a mapping's default filled with its own keys' defaults, so a config without ``eval`` gets every
    eval default) or of one model entry (``section="models"``). A property without a ``default:`` stays out: a
    model's own ``pretrain``/``retrain`` (overrides of the top-level ones), ``models``, ``transfer``."""
    root = _schema()
    node = root["properties"]["models"]["items"] if section == "models" else root
    return _defaults(node, root)


def _defaults(node: dict, root: dict) -> dict:
    out = {}
    for key, sub in node.get("properties", {}).items():
        if "default" not in sub:
            continue
        value = copy.deepcopy(sub["default"])
        if isinstance(value, dict):
            target = root["$defs"][sub["$ref"].rsplit("/", 1)[1]] if "$ref" in sub else sub
            value = merge(_defaults(target, root), value)
        out[key] = value
    return out


def check_schema(config: dict, validator: jsonschema.Validator | None = None) -> None:
    """Validate a raw config against the JSON schema (the core's, or ``validator``'s); raise ConfigError naming the
    key."""
    error = jsonschema.exceptions.best_match((validator or _validator()).iter_errors(config))
    if error is None:
        return
    path, message = list(error.absolute_path), error.message
    if error.validator == "additionalProperties":
        # Name the unknown key itself, not its parent.
        unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        if unknown:
            path = path + [unknown[0]]
            message = f"unknown key (allowed: {', '.join(sorted(error.schema.get('properties', {})))})"
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        if missing:
            path, message = path + [missing[0]], "required key is missing"
    raise ConfigError(key_path(path), message)


def check_finite(value, path=()) -> None:
    """NaN and infinities pass JSON-schema bounds (every comparison with NaN is false): refuse them anywhere."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(key_path(list(path)), f"{value} is not a finite number")
    if isinstance(value, dict):
        for k, v in value.items():
            check_finite(v, (*path, k))
    elif isinstance(value, list):
        for j, v in enumerate(value):
            check_finite(v, (*path, j))
