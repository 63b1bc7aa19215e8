"""What is already known: the published experiments nearest to the question, with what differs in their
setting (static reference facts, not results)."""

from __future__ import annotations

ITEMS = [
    "**Tamkin et al. 2020**, *Investigating Transferability in Pretrained Language Models*: re-initialise layers "
    "of a pretrained BERT and finetune the *whole* model on a downstream task; the early layers matter most. Here "
    "the rest of the network is frozen and the measure is language-modelling loss against the data it took "
    "(this workflow's `transfer:` section re-runs their experiments).",
    "**Bogoychev 2021**, *Not all parameters are born equal: attention is mostly what you need*: components left "
    "at random initialisation and frozen during (translation) training cost little. It trains from scratch "
    "rather than healing a trained network (the `frozen_random` experiment here).",
    "**Zhang, Bengio & Singer 2019**, *Are All Layers Created Equal?*: re-initialising one layer of a trained "
    "image classifier to its initial values (or to random values) without retraining; most layers are "
    "'robust' to the former, the first ones are 'critical'. No retraining, vision models; `init: original` "
    "here is their re-initialisation, followed by healing.",
    "**Gromov et al. 2024**, *The Unreasonable Ineffectiveness of the Deeper Layers*, and **LLM-Streamline** "
    "(Chen et al. 2024): remove (prune) blocks of deep layers of large LLMs and 'heal' with a little "
    "parameter-efficient finetuning (QLoRA) or a lightweight replacement layer. They delete layers rather than "
    "re-initialise them, at billions of parameters, and report task accuracy after a fixed healing budget rather "
    "than the data needed to return to the original loss.",
]
