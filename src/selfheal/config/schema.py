"""The JSON schema of a config (``schema.yaml`` beside this file, kept in the package so the check runs wherever
the package is installed): types, ranges and allowed keys. Validated once, by ``check.resolve``."""

from __future__ import annotations

import functools
from pathlib import Path

import jsonschema
import yaml

from selfheal.config.errors import ConfigError, key_path

SCHEMA_PATH = Path(__file__).with_name("schema.yaml")


# JSON Schema counts 2.0 as an integer; Python's range() and slicing do not, so a float is never an integer here.
_TYPES = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda checker, instance: isinstance(instance, int) and not isinstance(instance, bool)
)
_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_TYPES)


def load_schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


@functools.lru_cache(maxsize=1)
def _validator() -> jsonschema.Validator:
    """The schema parsed once per process (parsing its YAML costs more than validating a config)."""
    return _Validator(load_schema())


def check_schema(config: dict) -> None:
    """Validate the raw config against the JSON schema; raise ConfigError naming the key."""
    validator = _validator()
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is None:
        return
    path = list(error.absolute_path)
    message = error.message
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
