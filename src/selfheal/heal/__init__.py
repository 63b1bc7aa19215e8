"""The heal stage: one job per unit (``unit``) resets each cell (``reset``), retrains it to threshold (``retrain``,
``thresholds``), with the in-memory frozen-prefix cache (``prefix_cache``)."""
