"""Training machinery: the one optimisation loop (``trainer``), language-model training on it (``loop``, ``state``),
evaluation on the fixed validation set (``evaluation``), job setup, checkpoints, hardware, objectives, FLOPs and
pretraining."""
