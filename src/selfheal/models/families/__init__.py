"""Model families: one adapter per family tells the rest of the code what a layer and its components are."""

from __future__ import annotations

from selfheal.models.families.bart import BART
from selfheal.models.families.base import LAYER_POLICIES, MODEL_POLICIES, POLICIES, Family, Layer, SingleStack
from selfheal.models.families.bert import BERT
from selfheal.models.families.gpt2 import GPT2
from selfheal.models.families.llama import Llama

FAMILIES: dict[str, type[Family]] = {"gpt2": GPT2, "bert": BERT, "bart": BART, "llama": Llama}


def for_arch(arch: str) -> Family:
    if arch not in FAMILIES:
        raise ValueError(f"unknown model family {arch!r}; known: {sorted(FAMILIES)}")
    return FAMILIES[arch]()


def for_model(model) -> Family:
    return for_model_type(model.config.model_type)


def for_model_type(model_type: str) -> Family:
    for family in FAMILIES.values():
        if family.model_type == model_type:
            return family()
    raise ValueError(
        f"no family adapter for model type {model_type!r}; known: {sorted(f.model_type for f in FAMILIES.values())}"
    )


__all__ = [
    "BART",
    "BERT",
    "FAMILIES",
    "Family",
    "GPT2",
    "Llama",
    "LAYER_POLICIES",
    "Layer",
    "MODEL_POLICIES",
    "POLICIES",
    "SingleStack",
    "for_arch",
    "for_model",
    "for_model_type",
]
