"""Merging a config over its defaults, and the canonical (key-sorted) form Snakemake params are compared in."""

from __future__ import annotations

import copy


def merge(base: dict, override: dict) -> dict:
    """``override`` over ``base``, recursively for mappings; neither input is modified."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def canonical(value):
    """The same settings with every mapping's keys sorted, recursively. Snakemake compares rule params as written,
    so without this merely reordering keys in a YAML file would re-run the whole grid."""
    if isinstance(value, dict):
        return {k: canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value
