"""selfheal: how much data does a trained transformer need to heal one re-initialised layer?

The subpackages follow the workflow's stages (see CONTRIBUTING.md):

- ``config``: defaults, schema and the pre-run check of a config (nothing runs before it passes).
- ``grid``: the run-time vocabulary of the grid: targets (parsed once, ``Target``) and cells.
- ``data``: corpus, tokenizer, token streams.
- ``models``: family adapters, building, saving/loading (safetensors only) and importing a model a user brings.
- ``training``: the one training loop, evaluation on the fixed validation set, checkpoints, hardware, objectives,
  pretraining.
- ``heal``: reset, retrain-to-threshold, the frozen-prefix cache.
- ``analysis``: tables, statistics, plots.
- ``experiments``: side experiments: Tamkin et al. 2020 transfer, Bogoychev 2021 frozen random components.
"""
